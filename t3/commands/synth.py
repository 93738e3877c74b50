# amaranth: UnusedElaboratable=no
"""``t3 synth``: place and route a block, the node or the ring on an ECP5 or an iCE40, and the
board's bitstream."""

import sys

from t3.commands.board import board_args, board_params
from t3.commands.export import exportable
from t3.options import folder_arg, freq_arg, int_arg, output_arg, seeds_arg, system_args


def add_parser(sub):
    """Add ``t3 synth`` to the subcommands ``sub``."""
    synth = sub.add_parser("synth", help="place and route a block on an FPGA: resources, "
                                          "Fmax, critical path")
    targets = synth.add_subparsers(dest="target", required=True)
    from hw.pnr import FAMILIES, TARGETS

    def pnr_args(p, several=True):
        if several:
            p.add_argument("--seed", type=seeds_arg, default=(1,), metavar="N[,N...]",
                           help="nextpnr's seed, or several: each placed, the slowest reported")
            p.add_argument("--jobs", type=int_arg(1, 16), default=1, metavar="N",
                           help="seeds placed at once, 1 to 16, each its own Yosys and "
                                "nextpnr and a core (default 1; the node's take about 40 "
                                "minutes each)")
        else:
            p.add_argument("--seed", type=int_arg(1), default=1, help="nextpnr's seed")
        p.add_argument("--json", metavar="FILE", type=output_arg(".json"),
                       help="write the figures as JSON (with several seeds: every seed's, "
                            "and which was slowest)" if several else
                       "write the figures as JSON")

    for target, t in TARGETS.items():
        how = "its ports on two pins" if t.wrap else "out of context"
        synth_sub = targets.add_parser(target, help=f"a block on an {t.device}, {how}") \
            .add_subparsers(dest="block", required=True)
        for name, (top, add_args, _) in exportable().items():
            p = synth_sub.add_parser(name, help=f"module {top}")
            p.add_argument("--freq", type=freq_arg, default=100.0, metavar="MHZ",
                           help="the clock asked of place and route (default 100)")
            p.add_argument("--timeout", type=int_arg(1), default=10_800, metavar="SECONDS",
                           help="give each tool (Yosys, nextpnr) this long, wall clock "
                                "(default 10800: the node with its L2 takes about 4,600 s "
                                "of nextpnr on an idle core)")
            p.add_argument("--paths", type=int_arg(0, FAMILIES), default=10, metavar="N",
                           help="print the N worst families of paths, every endpoint's "
                                f"slack against the clock asked (default 10, at most "
                                f"{FAMILIES}; docs/fpga.md)")
            pnr_args(p)
            add_args(p)
            system_args(p)
            p.set_defaults(func=cmd_synth)

    p = targets.add_parser("board", help="the ULX3S-85F board's bitstream: two GPUs in a "
                                         "ring and a serial port (docs/fpga.md)")
    p.add_argument("--out", required=True, metavar="DIR", type=folder_arg,
                   help="output folder (made if missing): t3_board.bit and the build's files")
    pnr_args(p, several=False)
    board_args(p)
    from system.board import BoardParams
    p.add_argument("--clock", type=freq_arg, default=None, metavar="MHZ",
                   help=f"the design's clock, made by the ECP5's PLL from the board's 25 MHz "
                        f"oscillator (default {BoardParams.clock_hz / 1e6:g}; 25 * CLKFB_DIV "
                        f"/ CLKI_DIV exactly, others refused with the nearest it makes)")
    p.set_defaults(func=cmd_synth_board)


def cmd_synth(args):
    import json
    from concurrent.futures import ThreadPoolExecutor
    from hw.pnr import TARGETS, DoesNotFit, TimedOut, place_and_route
    top_name, _, build = exportable()[args.block]
    component = build(args)
    how = "its ports on two pins" if TARGETS[args.target].wrap else "out of context"
    print(f"T3 synth: {top_name} on {TARGETS[args.target].device}, {how}, asking "
          f"{args.freq:g} MHz (Yosys + nextpnr; a block takes seconds to minutes, the node "
          f"tens of minutes)", flush=True)
    # several seeds: each placed and routed (in turn, or --jobs at once), the slowest one's
    # figures reported (a design's Fmax moves with its placement: the node's by up to 10 MHz,
    # docs/fpga.md)
    results = {}

    def place(seed):
        return place_and_route(component, top_name, args.target, args.freq, seed,
                               timeout_s=args.timeout)
    try:
        # --jobs seeds at once, each its own Yosys and nextpnr (a core each); their lines in
        # seed order
        with ThreadPoolExecutor(max_workers=min(args.jobs, len(args.seed))) as pool:
            for seed, result in zip(args.seed, pool.map(place, args.seed)):
                results[seed] = result
                if len(args.seed) > 1:
                    fmax = ", ".join(f"{clock} {achieved:.1f} MHz"
                                     for clock, (achieved, _) in result.fmax.items())
                    print(f"{top_name}.{args.target}.seed{seed}: {fmax} ({result.path_ns:.2f} "
                          f"ns path; {result.seconds:.0f} s)", flush=True)
    except (DoesNotFit, TimedOut) as error:
        print(f"t3: error: {error}", file=sys.stderr)
        return 1
    worst = min(results, key=lambda seed: min(a for a, _ in results[seed].fmax.values()))
    result = results[worst]
    for line in result.lines(top_name):
        print(line)
    families = result.family_lines(args.paths)
    if families:
        print(f"{top_name}.{args.target}.families: the {len(families)} worst families of paths "
              f"(start -> end register, the worst slack, the endpoints failing of those within "
              f"0.25 ns):")
        for line in families:
            print(f"  {line}")
    if len(results) > 1:
        print(f"{top_name}.{args.target}.seeds: {len(results)} (the figures above are seed "
              f"{worst}'s, the slowest)")
    print(f"{top_name}.{args.target}.seconds: {sum(r.seconds for r in results.values()):.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_dict() if len(results) == 1 else
                      {"worst_seed": worst,
                       "seeds": {str(seed): r.to_dict() for seed, r in results.items()}},
                      f, indent=1)
    return 0


def cmd_synth_board(args):
    import json
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    from hw.pnr import build_bitstream
    from system.board import BoardTop
    bparams = board_params(args)
    print(f"T3 synth board: {bparams.gpus} GPUs on a ULX3S (LFE5U-85F-6), "
          f"{bparams.clock_hz / 1e6:g} MHz, serial {bparams.baud} baud (Yosys + nextpnr + "
          f"ecppack; 15 minutes to an hour: docs/fpga.md)", flush=True)
    result, bitstream = build_bitstream(BoardTop(bparams), ULX3S_85F_Platform(), "t3_board",
                                        args.out, args.seed)
    clock_mhz = bparams.clock_hz / 1e6
    for line in result.lines("board"):
        print(line)
    print(f"board.ecp5.seconds: {result.seconds:.0f} s")
    achieved = min(a for a, _ in result.fmax.values())
    # a board short of its clock is written but not offered for programming
    print(f"wrote {bitstream} ({bitstream.stat().st_size} bytes)" +
          (f"; program it with openFPGALoader -b ulx3s {bitstream}" if achieved >= clock_mhz
           else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(result.to_dict(), bitstream=str(bitstream)), f, indent=1)
    if achieved < clock_mhz:
        print(f"t3: error: the board reaches {achieved:.1f} MHz, short of its "
              f"{clock_mhz:g} MHz clock (seed {args.seed}): the bitstream may fail at it; try "
              f"another --seed or a lower --clock", file=sys.stderr)
        return 1
    return 0
