# amaranth: UnusedElaboratable=no
"""The blocks of a GPU node, as entries of one registry (:data:`BLOCKS`).

Each entry names what the rest of the project needs of a block: its package, its Verilog
module when exported alone, its parameters' dataclass (whose fields declared with
:func:`hw.params.param` are ``t3 export``'s and ``t3 synth``'s options), the
:class:`system.node.NodeParams` field that holds them in a node, its window in the node's
configuration space, how to build it and its register map, and its documentation page.  The
node's registers, ``NodeParams``' round trip through JSON, ``t3 export``, ``t3 synth``,
``t3 docs`` and the layout test iterate it.

(The components its builders make are the command line's and the benchmarks', which may refuse
them before they are elaborated: the file's first line keeps Amaranth from warning of them.)

Adding a block: its package (RTL, golden model, config with its params and registers, tests),
an entry here, and in ``system/node.py`` its ``NodeParams`` field, its window in
``BLOCK_ORDER`` and its wiring in ``GPUNode`` (``docs/layout.md``).
"""

import dataclasses

from dma.config import DMAParams, dma_registers
from hw.params import T3Params
from l2.config import L2Params, l2_registers
from linklayer.config import LinkLayerParams, link_registers
from mc_arbiter.config import ArbiterParams, arbiter_registers
from nmc.config import SCHEDULERS, NMCParams, nmc_registers
from tracker.config import TrackerParams, tracker_registers


__all__ = ["Block", "BLOCKS", "register"]


@dataclasses.dataclass(frozen=True)
class Block:
    """One block of the node.

    ``name``: its package and its name on the command line; ``top``: its Verilog module
    exported alone; ``params``: its parameters' dataclass; ``node_field``: the
    :class:`system.node.NodeParams` field that holds them; ``window``: its window in the node's
    configuration space (:data:`system.node.BLOCK_ORDER`); ``build(params, bparams,
    **options)``: the component; ``registers(params, bparams)``: its
    :class:`hw.csr.RegisterMap`; ``doc``: its page; ``optional``: a node may be without it
    (its ``NodeParams`` field ``None``); ``choices``: fields that are not integers, each with
    the values an option may give it; ``option_prefix``: what the command line's options for
    its fields begin with (the link layer's ``--link-timeout``: ``t3 synth`` has a
    ``--timeout`` of its own)."""
    name: str
    top: str
    params: type
    node_field: str
    window: str
    build: object
    registers: object
    doc: str
    optional: bool = False
    choices: tuple = ()
    option_prefix: str = ""

    def default_params(self):
        """The block's parameters by default: what ``t3 export NAME`` builds with no options."""
        return self.params()


def _tracker(params, tparams):
    from tracker.rtl import Tracker
    return Tracker(params, tparams)


def _arbiter(params, aparams, mcq_ram=None, retire=False):
    from mc_arbiter.rtl import MCArbiter
    return MCArbiter(params, aparams, mcq_ram, retire=retire)


def _nmc(params, nparams):
    from nmc.frfcfs import FRFCFSUnit
    from nmc.rtl import NMCUnit
    return (FRFCFSUnit if nparams.scheduler == "fr-fcfs" else NMCUnit)(params, nparams)


def _dma(params, dparams):
    from dma.rtl import DMAEngine
    return DMAEngine(params, dparams)


def _l2(params, lparams):
    from l2.rtl import L2Cache
    return L2Cache(params, lparams)


def _linklayer(params, lparams):
    from linklayer.rtl import LinkLayer
    return LinkLayer(params, lparams)


#: Block name -> :class:`Block`, in the order of the node's configuration windows.
BLOCKS = {}


def register(block):
    """Add ``block`` to :data:`BLOCKS` (refusing a name, field or window already taken);
    returns it."""
    for other in BLOCKS.values():
        for attr in ("name", "node_field", "window", "top"):
            if getattr(other, attr) == getattr(block, attr):
                raise ValueError(f"block {block.name}: {attr} {getattr(block, attr)!r} is "
                                 f"block {other.name}'s")
    BLOCKS[block.name] = block
    return block


register(Block("tracker", "t3_tracker", TrackerParams, "tracker", "tracker", _tracker,
               tracker_registers, "docs/tracker.md"))
register(Block("mc_arbiter", "t3_mc_arbiter", ArbiterParams, "arbiter", "arbiter", _arbiter,
               lambda params, aparams: arbiter_registers(aparams), "docs/mc_arbiter.md"))
register(Block("nmc", "t3_nmc", NMCParams, "nmc", "nmc", _nmc, nmc_registers, "docs/nmc.md",
               choices=(("scheduler", SCHEDULERS),)))
register(Block("dma", "t3_dma", DMAParams, "dma", "dma", _dma, dma_registers, "docs/dma.md"))
register(Block("l2", "t3_l2", L2Params, "l2", "l2", _l2, l2_registers, "docs/l2.md",
               optional=True))
register(Block("linklayer", "t3_linklayer", LinkLayerParams, "linklayer", "link", _linklayer,
               lambda params, lparams: link_registers(lparams), "docs/linklayer.md",
               optional=True, option_prefix="link_"))


def default_register_map(block):
    """The register map of ``block`` (a :class:`Block`) at the default widths and geometry."""
    return block.registers(T3Params(), block.default_params())
