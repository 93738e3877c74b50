"""The ``t3`` command's subcommands, a module each: ``add_parser(sub)`` adds its options to the
parser's subcommands ``sub``, and sets the function that runs it."""

from t3.commands import bench, board, compare, demo, docs, export, paper, run, sweep, synth


__all__ = ["COMMANDS"]


#: The subcommands in the order ``t3 --help`` lists them.
COMMANDS = (demo, export, synth, board, run, compare, paper, sweep, bench, docs)
