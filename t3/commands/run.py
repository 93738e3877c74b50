"""``t3 run``: one configuration of the N-GPU system end to end, checked bit for bit."""

import argparse

from sim.system.configure import CONFIGS
from system.spec import MEMORY_ROWS
from t3.options import (charge_headers_arg, check_wave, int_arg, output_arg, scale_line,
                        timeline_period_arg, topology_args, with_topology, workload_and_ring,
                        workload_args)


def add_parser(sub):
    """Add ``t3 run`` to the subcommands ``sub``."""
    run = sub.add_parser("run", help="one configuration of the N-GPU system, end to end")
    workload_args(run)
    run.add_argument("--memory-rows", type=int_arg(1), default=None,
                     help=f"HBM rows per bank of every node (default {MEMORY_ROWS}, 128 KiB, "
                          f"up to 8 GPUs, then 16, 32 and 64 up to 16, 32 and 64 GPUs, twice "
                          f"as many for a workload that needs it, as the default one does "
                          f"from 5 GPUs; with a preset 64, 128 at TP 32)")
    run.add_argument("--config", choices=CONFIGS, default="t3",
                     help="configuration (default t3)")
    run.add_argument("--wave", metavar="FILE", type=output_arg(".vcd", ".fst"),
                     help="write a waveform for GTKWave or Surfer, in the format its suffix "
                          "names (Verilator: .vcd or .fst; Icarus: .fst), and beside it "
                          "FILE.gtkw, a GTKWave save file grouping each block's ports")
    run.add_argument("--wave-scope", metavar="PATH", default=None,
                     help="only this instance of the ring and what is below it in the wave: "
                          "gpu1, gpu1.node.dma, link0 (default: the whole ring)")
    run.add_argument("--timeline", metavar="FILE",
                     type=output_arg(".png", ".svg", ".pdf", ".json"),
                     help="draw every GPU's GEMM stage, link use, MCQ entries by stream, "
                          "Tracker entries and GEMM stalls over time (PNG, SVG or PDF; the "
                          "samples go beside it as FILE.json; or .json for the samples alone)")
    timeline_period_arg(run, "timeline and trace samples")
    run.add_argument("--trace", metavar="FILE", type=output_arg(".json"),
                     help="write a trace for Perfetto or chrome://tracing: every GPU's phases, "
                          "GEMM stages, ring steps received, link use, MCQ and Tracker "
                          "entries and GEMM stalls (sampled as --timeline is)")
    g = run.add_argument_group("link layer (docs/linklayer.md)")
    g.add_argument("--link-layer", action="store_true",
                   help="every node's DMA engine talks to its links through the link layer "
                        "(CRC-32, sequence numbers, ACK/NAK, replay)")
    g.add_argument("--link-faults", type=_fault_rate_arg, metavar="RATE", default=None,
                   help="with --link-layer: hit every link's beats and acknowledgements at "
                        "random with probability RATE per beat (e.g. 1e-3; 6e-8 to 0.5)")
    g.add_argument("--fault-kinds", type=_fault_kinds_arg, default=None,
                   metavar="KIND,...",
                   help="with --link-faults: which faults, of drop, flip, dup (default all)")
    topology_args(run)
    charge_headers_arg(run)
    run.set_defaults(func=cmd_run)


def _fault_rate_arg(text):
    """An argparse ``type``: a fault probability per beat the injectors can draw."""
    from system.link import FAULT_RATE_BITS
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 2 ** -FAULT_RATE_BITS <= rate <= 0.5:
        raise argparse.ArgumentTypeError(f"a probability per beat from 2**-{FAULT_RATE_BITS} "
                                         f"(6e-8) to 0.5, not {text}")
    return rate


def _fault_kinds_arg(text):
    """An argparse ``type``: comma-separated kinds of :data:`system.link.FAULT_KINDS`."""
    from system.link import FAULT_KINDS
    kinds = tuple(k for k in text.split(",") if k)
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"kinds of {', '.join(FAULT_KINDS)}, comma-separated, "
                                         f"not {text!r}")
    return kinds


def _link_layer_options(args):
    """``run_config``'s ``linklayer`` and ``faults`` from ``t3 run``'s options."""
    if args.link_faults is None and args.fault_kinds is not None:
        raise ValueError("--fault-kinds: needs --link-faults RATE")
    if args.link_faults is not None and not args.link_layer:
        raise ValueError("--link-faults: needs --link-layer (without it a fault on the link "
                         "is a wrong result)")
    out = {"linklayer": True} if args.link_layer else {}
    if args.link_faults is not None:
        out["faults"] = {"rate": args.link_faults,
                         "kinds": args.fault_kinds or ("drop", "flip", "dup")}
    return out


def _print_result(r, collective="ring"):
    ph = ", ".join(f"{k} {v}" for k, v in r["phase_cycles"].items())
    d = r["dram"]
    print(f"  cycles     {r['cycles']} ({ph})")
    # the collective: a reduce-scatter and the all-gather, or an all-to-all (no all-gather)
    coll = "RS" if "ag" in r["phase_cycles"] else \
        "all-reduce" if collective == "all-reduce" else "all-to-all"
    ag = f", AG {d['ag_reads']} / {d['ag_writes']}" if coll == "RS" else ""
    print(f"  DRAM       GEMM {d['gemm_reads']} reads / {d['gemm_writes']} writes, {coll} "
          f"{d['rs_reads']} / {d['rs_writes']}{ag} (beats)")
    print(f"  link       {d['link_utilization']:.3f} of the links' capacity during the {coll}")
    print(f"  MC         the GEMM's requests waited {r['compute_wait']} cycles at the MC "
          f"arbiter (all GPUs)")
    if r.get("l2"):
        gemm = r["l2"]["gemm_rs" if "gemm_rs" in r["l2"] else "gemm"]
        reads = gemm["read_hits"] + gemm["read_misses"] + gemm["read_merged"]
        print(f"  L2         the GEMM's {reads} cached reads: {gemm['read_hits']} hits, "
              f"{gemm['read_merged']} merged into a miss, {gemm['read_misses']} misses")
    print(f"  tracker    peak occupancy {d['tracker_peak_occupancy']} entries")
    ll = r.get("linklayer")
    if ll:
        repairs = {k: v for k, v in ll.items() if k not in ("tx_packets", "rx_delivered") and v}
        print(f"  link layer {ll['tx_packets']} packets sent, {ll['rx_delivered']} delivered; "
              + (", ".join(f"{k} {v}" for k, v in repairs.items()) or "nothing repaired"))
    if r.get("faults"):
        f = r["faults"]
        print(f"  faults     {f['faults_dropped']} beats dropped, {f['faults_flipped']} "
              f"flipped, {f['faults_duplicated']} duplicated, {f['faults_acks']} "
              f"acknowledgements hit")
    engines = (f" ({r['engine_cycles_per_s']:.0f} while the engines run)"
               if r.get("engine_cycles_per_s") else "")
    print(f"  simulation {r['simulated_cycles']} cycles at {r['cycles_per_s']:.0f} cycles/s"
          f"{engines}")


def cmd_run(args):
    import json
    from sim.system.run import run_config
    spec, ring = workload_and_ring(args)            # sets the ring size a preset implies
    check_wave(args)
    ring.update(_link_layer_options(args))
    spec = with_topology(args, spec, ring)
    print(f"T3 system: {args.gpus} GPUs, {args.config}, workload {spec.name}: "
          f"{spec.m} x {spec.n} x {spec.k} {spec.dtype}")
    print(scale_line(spec, args.gpus, ring))
    print("  running    (the first run of a ring size builds its Verilog: about a minute up "
          "to 16 GPUs, three for 32)", flush=True)
    try:
        r = run_config(spec, args.gpus, args.config, sim=args.sim, seed=args.seed,
                       wave=args.wave, wave_scope=args.wave_scope, **ring,
                       timeline=args.timeline_period if args.timeline or args.trace
                       else None,
                       progress=lambda line: print(f"  ...        {line}", flush=True))
    except AssertionError as error:
        print(f"  FAILED     {str(error)[-3000:]}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"config": args.config, "gpus": args.gpus, "verified": False,
                           "error": str(error)[-3000:]}, f, indent=1)
        return 1
    _print_result(r, args.collective)
    what, reference = {
        "direct": ("output chunks", "the numpy sum (exact: alike in any order)"),
        "all-reduce": ("output chunks", "the numpy sum (exact: alike in any order)"),
        "all-to-all": ("own chunk and received slots", "the GEMM outputs they copy")}.get(
        args.collective if args.topology == "mesh" else "ring",
        ("output chunks", "the ring-ordered numpy reference"))
    print(f"  verified   {'yes' if r['verified'] else 'NO'}: every GPU's {what} equal "
          f"{reference} bit for bit")
    if args.wave:
        from sim.system.waves import write as write_save
        save = write_save(r, args.wave_scope)
        print(f"  waveform   {args.wave}" + (f" ({args.wave_scope} and below)"
                                              if args.wave_scope else ""))
        print(f"  save file  {save} (gtkwave {save}: each block's ports in a group)")
    if args.timeline:
        from sim.system.timeline import write
        files = write(r, args.timeline)
        print(f"  timeline   {', '.join(map(str, files))} ({len(r['timeline']['samples'])} "
              f"samples every {args.timeline_period} cycles)")
    if args.trace:
        from sim.system.trace import write as write_trace
        write_trace({args.config: r}, args.trace)
        print(f"  trace      {args.trace} (open in ui.perfetto.dev or chrome://tracing; one "
              f"cycle shown as 1 ns)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1, default=str)
        print(f"  json       {args.json}")
    return 0 if r["verified"] else 1
