# amaranth: UnusedElaboratable=no
"""The ``t3`` command.

``t3 demo``                      the Tracker through one ring reduce-scatter step, checked
``t3 run``                       one configuration of the N-GPU system end to end, checked
``t3 compare``                   every configuration: the paper's Figure 16 and 18 views
``t3 sweep``                     one workload over parameter values, on Dask
``t3 paper``                     the paper's evaluation (Figures 16 and 18) on rings of each
                                 case's TP degree, on Dask; a report with plots
``t3 export BLOCK --out DIR``    Verilog of a block (+ its register map as Markdown)
``t3 synth ecp5|hx8k|up5k BLOCK`` place and route on an ECP5 or iCE40: resources, Fmax, path
``t3 synth board --out DIR``     the ULX3S board's bitstream (two GPUs, a serial port)
``t3 board run --port PORT``     a GEMM -> reduce-scatter on that board from this PC, checked
``t3 board sim``                 the same program against the board in simulation
``t3 bench BLOCK``               the block's figures, one ``name: value unit`` line each

Blocks: every block of the node's registry (``tracker``, ``mc_arbiter``, ``nmc``, ``dma``,
``l2``, ``linklayer``: :data:`system.blocks.BLOCKS`), ``node``, ``gpu``, ``ring``; ``t3 bench
system`` runs the system's benchmark, ``t3 bench linklayer`` the link layer's (its bandwidth
cost and area), ``t3 bench fpga`` places and routes the blocks, the node and the board (Fmax
against 100 MHz).

Each command is a module of :mod:`t3.commands` (its options next to what it runs); what they
share is :mod:`t3.options`.
"""

import argparse
import sys

from t3.commands import COMMANDS


__all__ = ["main", "build_parser"]


def build_parser():
    """The ``t3`` command's parser: every option's value is checked by its ``type`` while the
    command line is read, before any build, job or simulation (a file or folder the command
    writes by :func:`t3.options.output_arg` or :func:`t3.options.folder_arg`, which carry
    ``writes``)."""
    parser = argparse.ArgumentParser(prog="t3", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    from hw.pnr import DoesNotFit, TimedOut, ToolFailed
    try:
        return args.func(args)
    except ValueError as error:
        parser.exit(2, f"t3: error: {error}\n")
    except (DoesNotFit, TimedOut, ToolFailed) as error:  # a tool's verdict (t3 bench fpga's)
        print(f"t3: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
