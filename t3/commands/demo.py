"""``t3 demo``: the Tracker alone through one GPU's ring reduce-scatter step, checked against its
model."""

import time

from sim.blocks.tracker.demo import SIMULATORS as DEMO_SIMULATORS
from t3.options import (check_wave, given, int_arg, output_arg, param_args, param_fields,
                        system_args, system_params)
from tracker.config import TrackerParams


def add_parser(sub):
    """Add ``t3 demo`` to the subcommands ``sub``."""
    demo = sub.add_parser("demo", help="the Tracker through one ring reduce-scatter step")
    demo.add_argument("--sim", choices=DEMO_SIMULATORS,
                      help="simulator (default: $SIM, else verilator)")
    demo.add_argument("--wgs", type=int_arg(1), default=128, help="workgroups (default 128)")
    demo.add_argument("--wfs", type=int_arg(1), default=4,
                      help="wavefronts per workgroup (default 4)")
    demo.add_argument("--tile-elems", type=int_arg(16, multiple=16), default=256,
                      help="fp16 elements per wavefront tile, a multiple of 16 (default 256)")
    demo.add_argument("--seed", type=int_arg(0), default=1)
    demo.add_argument("--wave", metavar="FILE", type=output_arg(".vcd", ".fst"),
                      help="write a waveform for GTKWave or Surfer (FST from icarus, VCD "
                           "otherwise)")
    _tracker_args(demo)
    system_args(demo)
    demo.set_defaults(func=cmd_demo)


def _tracker_args(parser):
    param_args(parser, "Tracker geometry", TrackerParams, param_fields(TrackerParams))


def _tparams(args):
    return TrackerParams(**given(args, param_fields(TrackerParams)))


def cmd_demo(args):
    from sim.blocks.tracker.demo import run_ring_step
    from sim.harness.runner import default_sim
    check_wave(args)
    params, tparams = system_params(args), _tparams(args)
    sim = args.sim or default_sim()
    n_tiles = args.wgs * args.wfs
    beats = args.tile_elems * 2 // params.beat_bytes
    print("T3 Tracker demo: one GPU's step of the ring reduce-scatter (docs/design.md)")
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
