"""``t3 compare``: every configuration of one workload, the paper's Figure 16 and 18 views."""

from t3.options import (charge_headers_arg, output_arg, scale_line, timeline_period_arg,
                        topology_args, with_topology, workload_and_ring, workload_args)


def add_parser(sub):
    """Add ``t3 compare`` to the subcommands ``sub``."""
    compare = sub.add_parser("compare", help="all configurations: the paper's Figure 16 and "
                                             "18 views")
    workload_args(compare)
    compare.add_argument("--plot", metavar="FILE", type=output_arg(".png", ".pdf", ".svg"),
                         help="save both views as a figure (PNG, PDF or SVG by the file's "
                              "suffix)")
    compare.add_argument("--trace", metavar="FILE", type=output_arg(".json"),
                         help="write every configuration's run as one trace for Perfetto or "
                              "chrome://tracing, side by side (t3 run --trace's tracks)")
    timeline_period_arg(compare, "--trace's samples")
    topology_args(compare)
    charge_headers_arg(compare)
    compare.set_defaults(func=cmd_compare)


def cmd_compare(args):
    import json
    from sim.system.compare import figure16_lines, figure18_lines, plot, run_all
    spec, ring = workload_and_ring(args)
    spec = with_topology(args, spec, ring)
    print(f"T3 compare: {args.gpus} GPUs, workload {spec.name}: {spec.m} x {spec.n} x "
          f"{spec.k} {spec.dtype}")
    print(scale_line(spec, args.gpus, ring), flush=True)
    try:
        if args.trace:
            ring["timeline"] = args.timeline_period
        results = run_all(spec, args.gpus, sim=args.sim, seed=args.seed, **ring,
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
    if args.trace:
        from sim.system.trace import write as write_trace
        write_trace(results, args.trace)
        print(f"trace: {args.trace} (every configuration side by side; open in "
              f"ui.perfetto.dev or chrome://tracing; one cycle shown as 1 ns)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0 if verified else 1
