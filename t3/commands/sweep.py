"""``t3 sweep``: one workload over values of workload and hardware parameters, on Dask."""

import time
from pathlib import Path

from t3.options import (folder_arg, int_arg, scheduler_arg, timeline_period_arg,
                        workload_and_ring, workload_args)


def add_parser(sub):
    """Add ``t3 sweep`` to the subcommands ``sub``."""
    sweep = sub.add_parser("sweep", help="one workload over values of workload and hardware "
                                          "parameters, every run a Dask job, verified")
    workload_args(sweep)
    sweep.add_argument("--vary", action="append", metavar="NAME=V1,V2,...",
                       help="a parameter and its values (repeat for a grid): m, n, k, cus, "
                            "wfs_per_wg, dtype, flops_per_cycle (the scaled GPU's flop "
                            "rate), k_slice (elements of K a WG streams at a time; 0: whole "
                            "panels), link_bw (NUM/DEN), link_latency, "
                            "link_headers (charged or free), mcq_depth, memory_rows, l2_ways "
                            "(0: no L2), l2_mshrs, l2_depth, dma_buffer (beats), "
                            "dram_scheduler (in-order, bank-parallel or fr-fcfs)")
    sweep.add_argument("--configs", default="sequential,t3,t3-mca",
                       help="comma-separated among sequential, t3, t3-mca, rs-nmc, or all "
                            "(default sequential,t3,t3-mca)")
    sweep.add_argument("--scheduler", metavar="ADDRESS", type=scheduler_arg,
                       help="a running Dask scheduler; default: a local cluster")
    sweep.add_argument("--workers", type=int_arg(1, 64), default=2,
                       help="worker processes of the local cluster (default 2)")
    sweep.add_argument("--cache", metavar="DIR", type=folder_arg,
                       help="results cache (default ~/.cache/t3-results)")
    sweep.add_argument("--trace", metavar="DIR", type=folder_arg,
                       help="write a trace per point into DIR, its configurations side by "
                            "side (t3 run --trace's tracks; the runs sample their timelines)")
    timeline_period_arg(sweep, "--trace's samples")
    sweep.add_argument("--no-cache", action="store_true", help="run every job")
    sweep.set_defaults(func=cmd_sweep)


def cmd_sweep(args):
    import json
    from sim.sweep import run_jobs
    from sim.system.paper import select_configs
    from sim.system.sweeps import check_points, parse_vary, sweep_jobs, sweep_lines, sweep_points
    vary = parse_vary(args.vary)
    configs = select_configs(args.configs) if args.configs != "all" else select_configs(None)
    spec, ring = workload_and_ring(args)
    points = sweep_points(spec, vary)
    check_points(points, args.gpus, configs, ring)
    jobs = sweep_jobs(points, args.gpus, configs, ring, seed=args.seed, sim=args.sim,
                      timeline=args.timeline_period if args.trace else None)
    where = args.scheduler or f"a local cluster of {args.workers} worker processes"
    print(f"T3 sweep: {args.gpus} GPUs, workload {spec.name}: {spec.m} x {spec.n} x {spec.k} "
          f"{spec.dtype}; {len(points)} points x {len(configs)} configurations = {len(jobs)} "
          f"jobs on {where}", flush=True)
    cache = None if args.no_cache else (args.cache or Path.home() / ".cache" / "t3-results")
    start = time.monotonic()
    outcomes = run_jobs(jobs, cache=cache, scheduler=args.scheduler, workers=args.workers)
    print("\ncycles per run (every run verified bit for bit); speedups over Sequential")
    for line in sweep_lines(points, configs, outcomes):
        print(line)
    failed = sum(not o.ok for o in outcomes.values())
    print(f"\n{len(jobs) - failed} of {len(jobs)} runs verified in "
          f"{(time.monotonic() - start) / 60:.1f} minutes")
    if args.trace:
        from sim.system.sweeps import write_traces
        files = write_traces(points, outcomes, args.trace)
        print(f"traces: {len(files)} in {args.trace}, one a point, its configurations side by "
              f"side (open in ui.perfetto.dev or chrome://tracing)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {"ok": o.ok, "value": o.value, "error": o.error}
                       for name, o in outcomes.items()}, f, indent=1)
    return 1 if failed else 0
