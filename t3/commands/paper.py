"""``t3 paper``: the paper's evaluation on the RTL, on Dask; a report, and the records of
``docs/results/``."""

from pathlib import Path

from sim.harness.runner import SIMULATORS
from t3.options import folder_arg, int_arg, scale_arg, scheduler_arg, timeline_period_arg


def add_parser(sub):
    """Add ``t3 paper`` to the subcommands ``sub``."""
    paper = sub.add_parser("paper", help="the paper's evaluation on the RTL: Figures 16 and 18 "
                                          "(every run verified), a report with plots")
    paper.add_argument("--cases", default="fig16",
                       help="fig16 (default: the 16 sub-layer cases of Figure 16), tp32, all, "
                            "or comma-separated case names (e.g. T-NLG-FC-1-TP16)")
    paper.add_argument("--configs", default=None,
                       help="comma-separated runs among sequential, t3, t3-mca, rs-nmc "
                            "(default all; sequential is always run, the speedups are over it)")
    paper.add_argument("--scale", type=scale_arg, default=0.5,
                       help="size of the scaled GPU, 0 < SCALE <= 1: 8 x SCALE CUs, and the WGs "
                            "per ring step with them (default 0.5: 7 minutes on 2 cores with the "
                            "rings built, the 16-GPU runs the longest; run time grows with the "
                            "scale)")
    paper.add_argument("--out", default="paper-report", metavar="DIR", type=folder_arg,
                       help="report folder: report.md, figure16/18 .png and .svg, results.json "
                            "(default paper-report)")
    paper.add_argument("--scheduler", metavar="ADDRESS", type=scheduler_arg,
                       help="a running Dask scheduler (e.g. tcp://host:8786); default: a "
                            "local cluster")
    paper.add_argument("--workers", type=int_arg(1, 64), default=2,
                       help="worker processes of the local cluster (default 2)")
    paper.add_argument("--cache", metavar="DIR", type=folder_arg,
                       help="results cache (default ~/.cache/t3-results): a re-run only runs "
                            "what changed or failed")
    paper.add_argument("--no-cache", action="store_true", help="run every job")
    paper.add_argument("--sim", choices=SIMULATORS,
                       help="simulator (default: $SIM, else verilator)")
    paper.add_argument("--record", action="store_true",
                       help="keep the results as docs/results/paper-SCALE.json with the key "
                            "of what they ran and regenerate docs/paper.md's tables from them "
                            "(Figure 16 cases with every run, at a committed scale: 0.5 or 1; "
                            "a current record keeps its other cases, so a long set can be "
                            "recorded a few cases at a time)")
    paper.add_argument("--figure17", action="store_true",
                       help="Figure 17's case (T-NLG FC-2, TP 8) in Sequential, T3 and T3-MCA "
                            "with timelines: figure17.png and .json in --out (with --record, "
                            "docs/results/figure17-SCALE.*)")
    paper.add_argument("--trace", metavar="DIR", type=folder_arg,
                       help="write a trace per case into DIR (CASE.json), its runs side by side "
                            "(t3 run --trace's tracks; the runs sample their timelines, which "
                            "leaves their cycles as they are)")
    timeline_period_arg(paper, "--trace's samples")
    paper.set_defaults(func=cmd_paper)


def cmd_paper(args):
    from sim.system.paper import (check_cases, evaluate, figure16_lines, figure18_lines,
                                  paper_jobs, recorded_twins, select_cases, select_configs,
                                  shared_runs, write_report)
    from sim.system.workload import scaled_cus
    if args.figure17:
        if args.trace:
            raise ValueError("--trace: --figure17 draws its runs' timelines itself; trace the "
                             "case with --cases T-NLG-FC-2-TP8 --trace DIR")
        return _paper_figure17(args)
    cases, configs = select_cases(args.cases), select_configs(args.configs)
    if args.record:
        from sim.system.configure import CONFIGS, ISOLATED_RS
        from sim.system.figures import SCALES
        from sim.system.paper import FIGURE16_CASES, LARGE_CASES
        if args.scale not in SCALES:
            raise ValueError(f"--record: the committed scales are "
                             f"{', '.join(f'{s:g}' for s in SCALES)}, not {args.scale:g}")
        if not set(cases) <= set(FIGURE16_CASES + LARGE_CASES) or \
                set(configs) != set(CONFIGS + (ISOLATED_RS,)):
            raise ValueError("--record needs the paper's cases (Figure 16's by default, or "
                             "some, or section 6.4's tp32: a current record keeps the "
                             "others) and every run (the default --configs)")
    print("T3 paper: checking every run's programming ...", flush=True)
    check_cases(cases, args.scale, configs, args.sim)
    cus = scaled_cus(args.scale)
    recorded = None
    if args.record:                 # a case whose twin a current record holds runs nothing
        from sim.system import figures
        old = figures.load(args.scale)
        if old is not None and not figures.moved_inputs("paper", old):
            recorded = old["results"]
    reuse = recorded_twins(cases, recorded or {}, configs, args.scale)
    run = tuple(c for c in cases if c not in reuse)
    jobs = paper_jobs(run, configs, args.scale, args.sim) if run else []
    where = args.scheduler or f"a local cluster of {args.workers} worker processes"
    shared = shared_runs(run, args.scale)
    print(f"T3 paper: {len(run) - len(shared)} cases x {len(configs)} runs = {len(jobs)} jobs "
          f"on {where}; "
          f"scale {args.scale:g} ({cus} CUs a GPU); every run verified bit for bit")
    twins = {**shared, **reuse}
    if twins:
        print(f"  and {len(twins)} more case{'s' if len(twins) > 1 else ''}, each the run of "
              f"another (the same GEMM shapes "
              f"in Table 2, ring and settings{'; from the record' if reuse else ''}): "
              f"{', '.join(f'{c} = {o}' for c, o in twins.items())}")
    print("  (a ring size's first run builds it: about a minute up to 16 GPUs, three for 32)",
          flush=True)
    cache = None if args.no_cache else (args.cache or Path.home() / ".cache" / "t3-results")
    results, failures, wall = evaluate(cases, configs, scale=args.scale, sim=args.sim,
                                       cache=cache, scheduler=args.scheduler,
                                       workers=args.workers, check=False, recorded=recorded,
                                       timeline=args.timeline_period if args.trace else None)
    print()
    for line in figure16_lines(results) + [""] + figure18_lines(results):
        print(line)
    for name, error in failures.items():
        print(f"FAILED {name}: {error}")
    report = write_report(results, failures, args.out, scale=args.scale, wall_s=wall)
    if args.trace:
        from sim.system.paper import write_traces
        files = write_traces(results, args.trace)
        print(f"traces: {len(files)} in {args.trace}, one a case, its runs side by side "
              f"(open in ui.perfetto.dev or chrome://tracing)")
    failed_jobs = [name for name in failures if name.partition("/")[0] not in twins]
    if jobs:
        print(f"\n{len(jobs) - len(failed_jobs)} of {len(jobs)} runs verified bit for bit in "
              f"{wall / 60:.1f} minutes; report: {report}")
    else:
        print(f"\nnothing to run: every case's runs are its twin's in the record; report: "
              f"{report}")
    if args.record and not failures:
        from sim.system import figures
        path = figures.record(results, args.scale, sim=args.sim)
        print(f"recorded: {path}, with the key of what its runs ran")
        for page in figures.refresh():
            print(f"updated: {page}")
    elif args.record:
        print("not recorded: some runs failed")
    return 1 if failures else 0


def _paper_figure17(args):
    """``t3 paper --figure17``: the Figure 17 case's three timeline runs, drawn (and kept)."""
    from sim.sweep import run_jobs
    from sim.system import figure17, figures
    if args.cases != "fig16" or args.configs is not None:
        raise ValueError("--figure17 runs its own case and runs: no --cases or --configs")
    if args.record and args.scale not in figures.SCALES:
        raise ValueError(f"--record: the committed scales are "
                         f"{', '.join(f'{s:g}' for s in figures.SCALES)}, not {args.scale:g}")
    jobs = figure17.jobs(args.scale, args.sim)
    where = args.scheduler or f"a local cluster of {args.workers} worker processes"
    print(f"T3 paper: Figure 17, {figure17.CASE} at scale {args.scale:g} in "
          f"{', '.join(figure17.CONFIGS)} with timelines; {len(jobs)} jobs on {where}",
          flush=True)
    cache = None if args.no_cache else (args.cache or Path.home() / ".cache" / "t3-results")
    outcomes = run_jobs(jobs, cache=cache, scheduler=args.scheduler, workers=args.workers)
    failed = {name: o.error for name, o in outcomes.items() if not o.ok}
    for name, error in failed.items():
        print(f"FAILED {name}: {error}")
    if failed:
        return 1
    runs = {o.value["config"]: o.value for o in outcomes.values()}
    for line in figure17.markdown({"runs": runs}):
        print(line)
    files = figure17.write(runs, args.out)
    print(f"report: {', '.join(map(str, files))}")
    if args.record:
        path = figures.record_figure17(runs, args.scale, sim=args.sim)
        print(f"recorded: {path}, with the key of what its runs ran")
        for page in figures.refresh():
            print(f"updated: {page}")
    return 0
