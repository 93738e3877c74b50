"""FPGA figures of the blocks, placed and routed (``t3 bench fpga``, or
``python -m benchmarks.fpga [BLOCK ...]``).

Each block, in its default configuration, goes through Yosys ``synth_ecp5`` and nextpnr-ecp5
out of context on an LFE5U-85F, speed grade 6, asking 100 MHz (:func:`hw.pnr.place_and_route`):

- ``fpga.<block>.ecp5.fmax``: the clock it reaches, against the **75 MHz floor** (the clock a
  LiteX SoC runs at on the ECP5 boards; ratio ≥ 1 means the block closes timing there) — the
  aim is 100 MHz;
- ``fpga.<block>.ecp5.<resource>``: what it uses of the device;
- ``fpga.<block>.ecp5.critical_path``: the slowest path, its wire delay and its two ends;
- ``fpga.<block>.ecp5.seconds``: how long synthesis and place and route took.

A block takes one to twelve minutes on this machine (the NMC unit, all four adders, the
longest); the node (``--blocks node``) tens of minutes.  ``docs/fpga.md`` has the figures.
"""

import sys

#: the clock every block must reach, and the one aimed for (MHz)
FLOOR_MHZ = 75
AIM_MHZ = 100

DEFAULT_BLOCKS = ("tracker", "mc_arbiter", "dma", "nmc")
#: every block the benchmark places (the node with ``--blocks node``: tens of minutes;
#: ``node-l2``, the paper rings' node with its L2, longer)
KNOWN = DEFAULT_BLOCKS + ("node", "node-l2")


def build(name):
    """The block ``name`` in its default configuration and its top module's name: what
    ``t3 synth ecp5 NAME`` builds with no options (its options default to these dataclasses'
    fields; ``tests/test_pnr.py`` checks the two agree)."""
    from hw.params import T3Params
    from sim.system.run import MEMORY_ROWS, node_params
    if name == "tracker":
        from tracker.config import TrackerParams
        from tracker.rtl import Tracker
        return Tracker(T3Params(), TrackerParams()), "t3_tracker"
    if name == "mc_arbiter":
        from mc_arbiter.config import ArbiterParams
        from mc_arbiter.rtl import MCArbiter
        return MCArbiter(T3Params(), ArbiterParams()), "t3_mc_arbiter"
    if name == "dma":
        from dma.config import DMAParams
        from dma.rtl import DMAEngine
        return DMAEngine(T3Params(), DMAParams()), "t3_dma"
    if name == "nmc":
        from nmc.config import NMCParams
        from nmc.rtl import NMCUnit
        return NMCUnit(T3Params(), NMCParams()), "t3_nmc"
    if name in ("node", "node-l2"):
        from sim.system.run import PAPER_L2
        from system.node import GPUNode
        l2 = PAPER_L2 if name == "node-l2" else None
        return GPUNode(T3Params(), node_params(MEMORY_ROWS, l2=l2)), "t3_node"
    raise ValueError(f"block must be one of {', '.join(KNOWN)}, not {name!r}")


def main(blocks=DEFAULT_BLOCKS, seed=1):
    from hw.pnr import place_and_route
    for name in blocks:                 # refuse a bad name before minutes of work
        if name not in KNOWN:
            raise ValueError(f"block must be one of {', '.join(KNOWN)}, not {name!r}")
    worst = None
    for name in blocks:
        component, top = build(name)
        result = place_and_route(component, top, "ecp5", AIM_MHZ, seed)
        achieved = min(a for a, _ in result.fmax.values())
        worst = achieved if worst is None else min(worst, achieved)
        print(f"fpga.{name}.ecp5.fmax: {achieved:.1f} MHz (floor {FLOOR_MHZ} MHz, ratio "
              f"{achieved / FLOOR_MHZ:.2f}; aim {AIM_MHZ} MHz, ratio {achieved / AIM_MHZ:.2f})",
              flush=True)
        for line in result.lines(f"fpga.{name}")[len(result.fmax):]:
            print(line)
        print(f"fpga.{name}.ecp5.seconds: {result.seconds:.0f} s", flush=True)
    print(f"fpga.worst.ecp5.fmax: {worst:.1f} MHz (floor {FLOOR_MHZ} MHz, ratio "
          f"{worst / FLOOR_MHZ:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(blocks=tuple(sys.argv[1:]) or DEFAULT_BLOCKS))
