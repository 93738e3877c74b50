"""The ``t3`` command.

``t3 demo``                      the Tracker through one ring reduce-scatter step, checked
``t3 run``                       one configuration of the N-GPU system end to end, checked
``t3 compare``                   every configuration: the paper's Figure 16 and 18 views
``t3 export BLOCK --out DIR``    Verilog of a block (+ its register map as Markdown)
``t3 bench BLOCK``               the block's figures, one ``name: value unit`` line each

Blocks: ``tracker``, ``mc_arbiter``, ``nmc``, ``dma``, ``node``, ``ring``; ``t3 bench
system`` runs the system's benchmark.
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


def _node_args(parser):
    g = parser.add_argument_group("GPU node")
    g.add_argument("--memory-rows", type=int, default=8,
                   help="HBM rows per bank (default 8: 128 KiB)")


def _node(args):
    from sim.system_run import system_params
    from .node import GPUNode
    params, nparams = system_params(memory_rows=args.memory_rows)
    return GPUNode(_params(args), nparams)


def _ring_args(parser):
    _node_args(parser)
    g = parser.add_argument_group("ring")
    g.add_argument("--gpus", type=int, default=4, help="GPUs, 2 to 16 (default 4)")
    g.add_argument("--link-latency", type=int, default=None,
                   help="link latency in cycles (default: the scaled system's)")
    g.add_argument("--link-bw", default=None, metavar="NUM/DEN",
                   help="link beats per cycle as a fraction (default: the scaled system's 3/80)")


def _link_bw(text):
    from sim.workload import LINK_BANDWIDTH
    if text is None:
        return LINK_BANDWIDTH
    try:
        num, den = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--link-bw must be NUM/DEN (e.g. 3/80), not {text!r}") from None
    return num, den


def _ring(args):
    from sim.system_run import LINK_LATENCY, system_params
    from .ring import Ring
    params, nparams = system_params(memory_rows=args.memory_rows)
    num, den = _link_bw(args.link_bw)
    latency = LINK_LATENCY if args.link_latency is None else args.link_latency
    return Ring(_params(args), nparams, gpus=args.gpus, latency=latency, num=num, den=den)


#: name -> (Verilog module name, argument adder, constructor from parsed arguments)
BLOCKS = {
    "tracker": ("t3_tracker", _tracker_args, _tracker),
    "mc_arbiter": ("t3_mc_arbiter", _arbiter_args, _arbiter),
    "nmc": ("t3_nmc", _nmc_args, _nmc),
    "dma": ("t3_dma", _dma_args, _dma),
    "node": ("t3_node", _node_args, _node),
    "ring": ("t3_ring", _ring_args, _ring),
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


def _workload(args):
    from sim.workload import GemmSpec, balanced_k, preset
    if args.preset:
        if any(v is not None for v in (args.m, args.n, args.k)):
            raise ValueError("--preset and --m/--n/--k exclude each other")
        return preset(args.preset, args.gpus, dtype=args.dtype or "fp16")
    m = 64 if args.m is None else args.m
    n = 32 * args.gpus if args.n is None else args.n
    dtype = args.dtype or "fp16"
    k = balanced_k(args.gpus, dtype) if args.k is None else args.k
    name = "default (GEMM : RS = 1)" if (args.m, args.n, args.k) == (None, None, None) \
        else "custom"
    return GemmSpec(m=m, n=n, k=k, dtype=dtype, name=name)


def _scale_line(spec, gpus):
    from sim.system_run import LINK_LATENCY
    from sim.workload import LINK_BANDWIDTH, SCALE, Workload
    est = Workload.estimate(spec, gpus, T3Params())
    return (f"  scale      HBM, link and CU throughput / {SCALE:g} (HBM 16 B/cycle, link "
            f"{LINK_BANDWIDTH[0]}/{LINK_BANDWIDTH[1]} beat = "
            f"{32 * LINK_BANDWIDTH[0] / LINK_BANDWIDTH[1]:.1f} B/cycle, {spec.flops:.0f} "
            f"flop/cycle, link latency {LINK_LATENCY}); GEMM : RS estimate "
            f"{est['ratio']:.2f}")


def _print_result(r):
    ph = ", ".join(f"{k} {v}" for k, v in r["phase_cycles"].items())
    d = r["dram"]
    print(f"  cycles     {r['cycles']} ({ph})")
    print(f"  DRAM       GEMM {d['gemm_reads']} reads / {d['gemm_writes']} writes, RS "
          f"{d['rs_reads']} / {d['rs_writes']}, AG {d['ag_reads']} / {d['ag_writes']} (beats)")
    print(f"  link       {d['link_utilization']:.3f} of the links' capacity during the RS")
    print(f"  tracker    peak occupancy {d['tracker_peak_occupancy']} entries")
    print(f"  simulation {r['simulated_cycles']} cycles at {r['cycles_per_s']:.0f} cycles/s")


def cmd_run(args):
    import json
    from sim.system_run import run_config
    spec = _workload(args)
    print(f"T3 system: {args.gpus} GPUs, {args.config}, workload {spec.name}: "
          f"{spec.m} x {spec.n} x {spec.k} {spec.dtype}")
    print(_scale_line(spec, args.gpus))
    print("  running    (the first run of a ring size builds its Verilog: about a minute)",
          flush=True)
    try:
        r = run_config(spec, args.gpus, args.config, sim=args.sim, seed=args.seed,
                       wave=args.wave, progress=lambda line: print(f"  ...        {line}",
                                                                   flush=True))
    except AssertionError as error:
        print(f"  FAILED     {str(error)[-3000:]}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": args.config, "gpus": args.gpus, "verified": False,
                           "error": str(error)[-3000:]}, f, indent=1)
        return 1
    _print_result(r)
    print(f"  verified   {'yes' if r['verified'] else 'NO'}: every GPU's output chunks equal "
          f"the ring-ordered numpy reference bit for bit")
    if args.wave:
        print(f"  waveform   {args.wave}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1, default=str)
        print(f"  json       {args.json}")
    return 0 if r["verified"] else 1


def cmd_compare(args):
    import json
    from sim.compare import figure16_lines, figure18_lines, plot, run_all
    spec = _workload(args)
    print(f"T3 compare: {args.gpus} GPUs, workload {spec.name}: {spec.m} x {spec.n} x "
          f"{spec.k} {spec.dtype}")
    print(_scale_line(spec, args.gpus), flush=True)
    try:
        results = run_all(spec, args.gpus, sim=args.sim, seed=args.seed,
                          progress=lambda line: print(f"  ...  {line}", flush=True))
    except AssertionError as error:
        print(f"  FAILED     {str(error)[-3000:]}")
        return 1
    print()
    for line in figure16_lines(results) + [""] + figure18_lines(results):
        print(line)
    verified = all(r["verified"] for r in results.values())
    print(f"\nverified: {'every run' if verified else 'NOT every run'} bit for bit")
    if args.plot:
        plot(results, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0 if verified else 1


def _workload_args(p):
    from sim.workload import PRESETS
    g = p.add_argument_group("workload (default: a 64 x 32*gpus GEMM whose K balances GEMM "
                             "and RS)")
    g.add_argument("--gpus", type=int, default=4, help="GPUs in the ring, 2 to 16 (default 4)")
    g.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                   help="a Table 2 sub-layer, scaled: " + ", ".join(sorted(PRESETS)))
    g.add_argument("--m", type=int, help="rows of the output (default 64)")
    g.add_argument("--n", type=int, help="columns of the output (default 32 x gpus)")
    g.add_argument("--k", type=int, help="inner dimension per GPU (default: balanced)")
    g.add_argument("--dtype", choices=("fp16", "fp32"), help="element type (default fp16)")
    p.add_argument("--sim", choices=("verilator", "icarus"),
                   help="simulator (default: $SIM, else verilator)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random inputs")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")


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

    run = sub.add_parser("run", help="one configuration of the N-GPU system, end to end")
    _workload_args(run)
    run.add_argument("--config", choices=("sequential", "t3", "t3-mca"), default="t3",
                     help="configuration (default t3)")
    run.add_argument("--wave", metavar="FILE", help="write a waveform (VCD from Verilator, "
                                                    "FST from Icarus) for GTKWave or Surfer")
    run.set_defaults(func=cmd_run)

    compare = sub.add_parser("compare", help="all configurations: the paper's Figure 16 and "
                                             "18 views")
    _workload_args(compare)
    compare.add_argument("--plot", metavar="FILE", help="save both views as a figure (PNG, "
                                                        "PDF or SVG by the file's suffix)")
    compare.set_defaults(func=cmd_compare)

    bench = sub.add_parser("bench", help="print a block's figures")
    bench.add_argument("block", choices=sorted(set(BLOCKS) - {"node", "ring"} | {"system"}))
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
