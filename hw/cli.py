"""The ``t3`` command.

``t3 demo``                      the Tracker through one ring reduce-scatter step, checked
``t3 export BLOCK --out DIR``    Verilog of a block (+ its register map as Markdown)
``t3 bench BLOCK``               the block's figures, one ``name: value unit`` line each

Blocks: ``tracker``, ``mc_arbiter``, ``nmc``, ``dma``.

Blocks of later issues (the node and the ring) add their entries to :data:`BLOCKS` and a
``benchmarks/<block>.py`` with ``main(sims, synth)``.
"""

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

from .params import T3Params


__all__ = ["main", "BLOCKS"]


def _tracker_args(parser):
    g = parser.add_argument_group("Tracker geometry")
    g.add_argument("--sets", type=int, default=256, help="table sets (default 256)")
    g.add_argument("--ways", type=int, default=8, help="ways per set (default 8)")
    g.add_argument("--regions", type=int, default=4, help="region registers (default 4)")
    g.add_argument("--count-bits", type=int, default=16, help="counter width (default 16)")


def _system_args(parser):
    g = parser.add_argument_group("system widths")
    g.add_argument("--addr-bits", type=int, default=32, help="byte address width (default 32)")
    g.add_argument("--wg-id-bits", type=int, default=16, help="wg_id width (default 16)")
    g.add_argument("--wf-id-bits", type=int, default=3, help="wf_id width (default 3)")


def _params(args):
    return T3Params(addr_bits=args.addr_bits, wg_id_bits=args.wg_id_bits,
                    wf_id_bits=args.wf_id_bits)


def _tracker(args):
    from tracker.config import TrackerParams
    from tracker.rtl import Tracker
    params = _params(args)
    tparams = TrackerParams(sets=args.sets, ways=args.ways, regions=args.regions,
                            count_bits=args.count_bits)
    return Tracker(params, tparams)


def _arbiter_args(parser):
    g = parser.add_argument_group("MC arbiter geometry")
    g.add_argument("--depth", type=int, default=64, help="MCQ entries (default 64)")
    g.add_argument("--calib-rows", type=int, default=4,
                   help="calibration table rows (default 4)")


def _arbiter(args):
    from mc_arbiter.config import ArbiterParams
    from mc_arbiter.rtl import MCArbiter
    return MCArbiter(_params(args), ArbiterParams(depth=args.depth,
                                                  calib_rows=args.calib_rows))


def _nmc_args(parser):
    g = parser.add_argument_group("HBM2 pseudo-channel")
    g.add_argument("--bank-groups", type=int, default=4, help="bank groups (default 4)")
    g.add_argument("--banks", type=int, default=4, help="banks per group (default 4)")
    g.add_argument("--columns", type=int, default=32, help="beats per row (default 32)")
    g.add_argument("--rows", type=int, default=8, help="rows per bank (default 8)")


def _nmc(args):
    from nmc.config import NMCParams
    from nmc.rtl import NMCUnit
    return NMCUnit(_params(args), NMCParams(bank_groups=args.bank_groups, banks=args.banks,
                                            columns=args.columns, rows=args.rows))


def _dma_args(parser):
    g = parser.add_argument_group("DMA engine")
    g.add_argument("--commands", type=int, default=4,
                   help="command table entries = Tracker regions (default 4)")
    g.add_argument("--trigger-depth", type=int, default=8, help="trigger queue (default 8)")
    g.add_argument("--buffer-beats", type=int, default=32,
                   help="payload buffer = reads in flight (default 32)")
    g.add_argument("--max-granularity", type=int, default=8,
                   help="largest DMA block in tiles (default 8)")
    g.add_argument("--gpu-bits", type=int, default=4, help="GPU number width (default 4)")


def _dma(args):
    from dma.config import DMAParams
    from dma.rtl import DMAEngine
    return DMAEngine(_params(args), DMAParams(
        commands=args.commands, trigger_depth=args.trigger_depth,
        buffer_beats=args.buffer_beats, max_granularity=args.max_granularity,
        gpu_bits=args.gpu_bits))


#: name -> (Verilog module name, argument adder, constructor from parsed arguments)
BLOCKS = {
    "tracker": ("t3_tracker", _tracker_args, _tracker),
    "mc_arbiter": ("t3_mc_arbiter", _arbiter_args, _arbiter),
    "nmc": ("t3_nmc", _nmc_args, _nmc),
    "dma": ("t3_dma", _dma_args, _dma),
}


def cmd_export(args):
    from .export import write_verilog
    top_name, _, build = BLOCKS[args.block]
    component = build(args)
    path = write_verilog(component, top_name, args.out)
    print(f"wrote {path}")
    regs = getattr(component, "regs", None)
    if regs is not None:
        md = Path(args.out) / f"{top_name}_registers.md"
        md.write_text(f"# {top_name} registers\n\n32-bit words; see hw/csr.py for the bus "
                      f"timing.\n\n{regs.markdown()}\n")
        print(f"wrote {md}")
    return 0


def run_ring_step(sim, params, tparams, n_wg, wfs_per_wg, tile_elems, seed=1, wave=None,
                  build_dir=None):
    """Run one ring reduce-scatter step through the Tracker on ``sim`` (``amaranth``,
    ``verilator`` or ``icarus``); returns the summary dict (``verified`` True only when the
    run matched the golden model)."""
    from tracker.config import Region, check_regions, check_schedule
    region = Region(0x10_0000, n_wg * wfs_per_wg * tile_elems * 2, tile_elems, 2)
    check_regions(params, tparams, [region])
    # All tiles of the step can be open at once (the two update streams interleave freely).
    check_schedule(params, tparams, [range(n_wg)], wfs_per_wg, open_stages=1)
    if sim == "amaranth":
        return _ring_step_amaranth(params, tparams, region, n_wg, wfs_per_wg, seed, wave)
    from sim.runner import run_for_result
    import sim.tracker_cocotb as tb_module
    from tracker.rtl import Tracker
    build_dir = Path(build_dir or tempfile.mkdtemp(prefix=f"t3_tracker_{sim}_"))
    config = {"params": params.to_dict(), "tparams": tparams.to_dict(),
              "region": dataclasses.asdict(region), "n_wg": n_wg, "wfs_per_wg": wfs_per_wg,
              "seed": seed}
    result = run_for_result(Tracker(params, tparams), "t3_tracker", tb_module.__name__,
                            "ring_step", config, sim, build_dir, waves=bool(wave))
    if wave:
        dumps = sorted(build_dir.glob("*.fst")) + sorted(build_dir.glob("*.vcd"))
        if not dumps:
            raise RuntimeError(f"the simulator wrote no waveform in {build_dir}")
        Path(wave).write_bytes(dumps[0].read_bytes())
    return result


def _ring_step_amaranth(params, tparams, region, n_wg, wfs_per_wg, seed, wave):
    import random
    from sim.tracker_amaranth import simulate_tracker
    from sim.tracker_traffic import ring_step_traffic
    from tracker.model import TrackerModel, check_run
    requests = ring_step_traffic(params, n_wg, wfs_per_wg, region, rng=random.Random(seed))
    model = TrackerModel(params, tparams, [region])
    outcomes = [model.access(r) for r in requests]
    run = simulate_tracker(params, tparams, [region], requests, vcd=wave)
    fires = check_run(model, outcomes, run.triggers, run.taken, run.regs)
    latencies = [cycle - run.taken[i] for (cycle, _), i in zip(run.triggers, fires)]
    span = run.taken[-1] - run.taken[0] + 1
    return {"accesses": len(requests), "triggers": len(fires), "cycles": run.cycles,
            "span_cycles": span, "accesses_per_cycle": len(requests) / span,
            "latency_min": min(latencies), "latency_max": max(latencies),
            "wall_s": run.wall_s, "cycles_per_s": run.cycles / run.wall_s,
            "registers": run.regs, "verified": True}


def cmd_demo(args):
    from sim.runner import default_sim
    from tracker.config import TrackerParams
    params = _params(args)
    tparams = TrackerParams(sets=args.sets, ways=args.ways, regions=args.regions,
                            count_bits=args.count_bits)
    sim = args.sim or default_sim()
    n_tiles = args.wgs * args.wfs
    beats = args.tile_elems * 2 // params.beat_bytes
    print("T3 Tracker demo: one GPU's step of the ring reduce-scatter (T3_SPEC section 3)")
    print(f"  workload   {args.wgs} workgroups x {args.wfs} wavefronts = {n_tiles} tiles of "
          f"{args.tile_elems} fp16 elements; each element gets 2 updates (local + DMA)")
    print(f"  tracker    {tparams.sets} sets x {tparams.ways} ways; simulator {sim}")
    print(f"  running    {2 * n_tiles * beats} accesses (building the Verilog first)...",
          flush=True)
    start = time.perf_counter()
    try:
        result = run_ring_step(sim, params, tparams, args.wgs, args.wfs, args.tile_elems,
                               seed=args.seed, wave=args.wave)
    except AssertionError as error:
        print(f"  FAILED     the hardware disagreed with the golden model:\n{error}")
        return 1
    regs = result["registers"]
    print(f"  done       in {time.perf_counter() - start:.1f} s "
          f"({result['cycles_per_s']:.0f} simulated cycles/s)")
    print(f"  triggers   {result['triggers']} of {n_tiles} tiles fired")
    print(f"  throughput {result['accesses_per_cycle']:.3f} accesses/cycle (limit 1.0)")
    print(f"  latency    {result['latency_min']}-{result['latency_max']} cycles from the "
          f"completing access to its trigger")
    print(f"  occupancy  peak {regs['peak_occupancy']} of {tparams.sets * tparams.ways} "
          f"entries; {regs['errors']} errors; status {regs['status']:#x}")
    print(f"  verified   {'yes' if result['verified'] else 'NO'}: every trigger, counter and "
          f"status bit equals the golden model")
    if args.wave:
        print(f"  waveform   {args.wave}")
    return 0 if result["verified"] else 1


def cmd_bench(args):
    import importlib
    bench = importlib.import_module(f"benchmarks.{args.block}")
    return bench.main(sims=args.sims.split(",") if args.sims else None, synth=not args.no_synth)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="t3", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the Tracker through one ring reduce-scatter step")
    demo.add_argument("--sim", choices=("verilator", "icarus", "amaranth"),
                      help="simulator (default: $SIM, else verilator)")
    demo.add_argument("--wgs", type=int, default=128, help="workgroups (default 128)")
    demo.add_argument("--wfs", type=int, default=4, help="wavefronts per workgroup (default 4)")
    demo.add_argument("--tile-elems", type=int, default=256,
                      help="fp16 elements per wavefront tile, a multiple of 16 (default 256)")
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--wave", metavar="FILE", help="write a waveform for GTKWave or Surfer "
                                                     "(FST from icarus, VCD otherwise)")
    _tracker_args(demo)
    _system_args(demo)
    demo.set_defaults(func=cmd_demo)

    export = sub.add_parser("export", help="write a block's Verilog")
    export_sub = export.add_subparsers(dest="block", required=True)
    for name, (top, add_args, _) in BLOCKS.items():
        p = export_sub.add_parser(name, help=f"module {top}")
        p.add_argument("--out", required=True, metavar="DIR", help="output folder")
        add_args(p)
        _system_args(p)
        p.set_defaults(func=cmd_export)

    bench = sub.add_parser("bench", help="print a block's figures")
    bench.add_argument("block", choices=sorted(BLOCKS))
    bench.add_argument("--sims", help="comma-separated simulators (default: all of the block's)")
    bench.add_argument("--no-synth", action="store_true",
                       help="skip the FPGA resource figures (Yosys synthesis, ~1 minute)")
    bench.set_defaults(func=cmd_bench)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as error:
        parser.exit(2, f"t3: error: {error}\n")


if __name__ == "__main__":
    sys.exit(main())
