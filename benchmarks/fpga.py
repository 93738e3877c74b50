"""FPGA figures of the blocks, the node and the board, placed and routed (``t3 bench fpga``,
or ``python -m benchmarks.fpga [BLOCK ...]``).

Each block, in its default configuration, goes through Yosys ``synth_ecp5`` and nextpnr-ecp5
out of context on an LFE5U-85F, speed grade 6, asking 100 MHz (:func:`hw.pnr.place_and_route`);
the board (``--blocks board``) is built into its bitstream on the ULX3S's pins at its own clock
(:func:`hw.pnr.build_bitstream`, ``t3 synth board``):

- ``fpga.<block>.ecp5.fmax``: the clock it reaches, against the **100 MHz limit** (ratio
  >= 1: the design closes timing there; ``tests/test_pnr.py`` keeps every block and the node
  above 75 MHz, the clock a LiteX SoC runs at on the ECP5 boards); the board's also against
  the clock its PLL makes;
- ``fpga.<block>.ecp5.<resource>``: what it uses of the device;
- ``fpga.<block>.ecp5.critical_path``: the slowest path, its wire delay and its two ends;
- ``fpga.<block>.ecp5.seconds``: how long synthesis and place and route took.

With several seeds each is placed in turn and the slowest one's figures printed (a design's
Fmax moves with its placement). A block takes one to twelve minutes on this machine (the NMC
unit, all four adders, the longest); the node (``--blocks node``) and the board tens of
minutes.  ``docs/fpga.md`` has the figures.
"""

import sys

#: the clock every design is measured against (MHz): issue 31's aim for the node
LIMIT_MHZ = 100

DEFAULT_BLOCKS = ("tracker", "mc_arbiter", "dma", "nmc")
#: every design the benchmark places: every block of the node's registry
#: (:data:`system.blocks.BLOCKS`: the four T3 blocks, the L2 and the link layer), the node
#: with ``--blocks node`` (tens of minutes), ``node-l2`` (the paper rings' node with its L2,
#: longer) and ``board`` (the ULX3S bitstream)
KNOWN = DEFAULT_BLOCKS + ("l2", "linklayer", "node", "node-l2", "board")


def build(name):
    """The block ``name`` in its default configuration and its top module's name: what
    ``t3 synth ecp5 NAME`` builds with no options (its options default to these dataclasses'
    fields; ``tests/test_pnr.py`` checks the two agree)."""
    from hw.params import T3Params
    from system.blocks import BLOCKS
    from system.spec import PAPER_L2, node_for
    if name in BLOCKS:
        block = BLOCKS[name]
        return block.build(T3Params(), block.default_params()), block.top
    if name in ("node", "node-l2"):
        from system.node import GPUNode
        l2 = PAPER_L2 if name == "node-l2" else None
        return GPUNode(T3Params(), node_for(l2=l2)), "t3_node"
    if name == "board":
        from system.board import BoardTop
        return BoardTop(), "t3_board"
    raise ValueError(f"block must be one of {', '.join(KNOWN)}, not {name!r}")


def place(name, seed):
    """The :class:`hw.pnr.PnrResult` of design ``name`` placed and routed with ``seed``, and the
    clock it is asked (MHz): the limit for a block, the board's own clock for the board."""
    import tempfile
    from hw.pnr import build_bitstream, place_and_route
    component, top = build(name)
    if name != "board":
        return place_and_route(component, top, "ecp5", LIMIT_MHZ, seed), LIMIT_MHZ
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    with tempfile.TemporaryDirectory(prefix="t3_board_") as out:
        result, _ = build_bitstream(component, ULX3S_85F_Platform(), top, out, seed)
    return result, component.bparams.clock_hz / 1e6


def main(blocks=DEFAULT_BLOCKS, seeds=(1,)):
    for name in blocks:                 # refuse a bad name before minutes of work
        if name not in KNOWN:
            raise ValueError(f"block must be one of {', '.join(KNOWN)}, not {name!r}")
    worst = None
    for name in blocks:
        runs = {}
        for seed in seeds:
            result, clock = runs[seed] = place(name, seed)
            if len(seeds) > 1:
                print(f"fpga.{name}.ecp5.seed{seed}.fmax: {_fmax(result):.1f} MHz "
                      f"({result.seconds:.0f} s)", flush=True)
        slowest = min(runs, key=lambda seed: _fmax(runs[seed][0]))
        result, clock = runs[slowest]
        achieved = _fmax(result)
        worst = achieved if worst is None else min(worst, achieved)
        own = f"; its clock {clock:g} MHz, ratio {achieved / clock:.2f}" \
            if clock != LIMIT_MHZ else ""
        print(f"fpga.{name}.ecp5.fmax: {achieved:.1f} MHz (limit {LIMIT_MHZ} MHz, ratio "
              f"{achieved / LIMIT_MHZ:.2f}{own}"
              f"{f'; seed {slowest}, the slowest of {len(seeds)}' if len(seeds) > 1 else ''})",
              flush=True)
        for line in result.lines(f"fpga.{name}")[len(result.fmax):]:
            print(line)
        print(f"fpga.{name}.ecp5.seconds: {sum(r.seconds for r, _ in runs.values()):.0f} s",
              flush=True)
    print(f"fpga.worst.ecp5.fmax: {worst:.1f} MHz (limit {LIMIT_MHZ} MHz, ratio "
          f"{worst / LIMIT_MHZ:.2f})")
    return 0


def _fmax(result):
    """The slowest clock's achieved MHz."""
    return min(achieved for achieved, _ in result.fmax.values())


if __name__ == "__main__":
    sys.exit(main(blocks=tuple(sys.argv[1:]) or DEFAULT_BLOCKS))
