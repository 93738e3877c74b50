"""``t3 bench``: a block's, the system's or the FPGA's figures, one ``name: value unit`` line
each."""

import argparse
import sys

from t3.options import seeds_arg


def add_parser(sub):
    """Add ``t3 bench`` to the subcommands ``sub``."""
    bench = sub.add_parser("bench", help="print a block's figures")
    bench.add_argument("block", choices=BENCHMARKS)
    bench.add_argument("--blocks", type=_blocks_arg,
                       help="fpga: comma-separated blocks to place and route (default "
                            "tracker,mc_arbiter,dma,nmc; node, node-l2 with the paper "
                            "rings' L2, and board, the ULX3S bitstream at its clock, take "
                            "tens of minutes)")
    bench.add_argument("--seed", type=seeds_arg, default=None, metavar="N[,N...]",
                       help="fpga: nextpnr's seed, or several: each placed, the slowest "
                            "reported (default 1)")
    bench.add_argument("--sims", help="comma-separated simulators (default: all of the block's)")
    bench.add_argument("--no-synth", action="store_true",
                       help="skip the FPGA resource figures (Yosys synthesis, ~1 minute)")
    bench.set_defaults(func=cmd_bench)


def _blocks_arg(text):
    from benchmarks.fpga import KNOWN as known
    names = text.split(",")
    for name in names:
        if name not in known:
            raise argparse.ArgumentTypeError(f"blocks: {name!r} is not one of "
                                             f"{', '.join(known)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"blocks must differ, not {text!r}")
    return text


#: ``t3 bench``'s figures: each a module of ``benchmarks/`` with a ``main``.
BENCHMARKS = ("tracker", "mc_arbiter", "nmc", "dma", "linklayer", "system", "fpga")


def cmd_bench(args):
    import importlib
    bench = importlib.import_module(f"benchmarks.{args.block}")
    if args.block == "fpga":
        return bench.main(blocks=args.blocks.split(",") if args.blocks else bench.DEFAULT_BLOCKS,
                          seeds=args.seed or (1,))
    if args.blocks or args.seed:
        print(f"t3 bench: --{'blocks' if args.blocks else 'seed'} is for 'fpga' only",
              file=sys.stderr)
        sys.exit(2)                     # a usage error, as argparse's own

    return bench.main(sims=args.sims.split(",") if args.sims else None, synth=not args.no_synth)
