"""N GPU nodes in a ring, joined by link models (``docs/design.md`` section 3: GPU ``g`` sends to GPU
``g - 1 mod N``).  Wiring and nothing else."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from hw.axil import axil_signature
from hw.interfaces import request_signature, response_signature
from system.link import LinkModel, check_link
from system.node import GPUNode, NodeParams
from hw.params import T3Params, check_int


__all__ = ["Ring", "check_ring", "MAX_GPUS"]


#: The largest ring the system builds.
MAX_GPUS = 16


def check_ring(nparams: NodeParams, gpus, latency, num, den):
    """Refuse a ring the hardware cannot build, naming the field (``gpus`` from 2 to
    :data:`MAX_GPUS` and addressable with the DMA's ``gpu_bits``; the link's settings)."""
    check_int("gpus", gpus, 2, MAX_GPUS)
    if gpus > nparams.dma.max_gpus:
        raise ValueError(f"gpus {gpus} needs more than gpu_bits {nparams.dma.gpu_bits}")
    check_link(latency, num, den)


class Ring(wiring.Component):
    """``gpus`` :class:`system.node.GPUNode`\\ s; the link from GPU ``g`` to GPU ``g - 1`` is a
    :class:`system.link.LinkModel` of ``latency`` cycles and ``num / den`` beats per cycle.

    Ports (for each GPU ``g``)
    --------------------------
    ``gpu<g>_compute``, ``gpu<g>_resp``, ``gpu<g>_comm_done``, ``gpu<g>_cfg``: the node's
    ``compute``, ``resp``, ``comm_done`` and ``cfg`` ports.
    """

    def __init__(self, params: T3Params, nparams: NodeParams = NodeParams(), gpus=4,
                 latency=8, num=1, den=4):
        check_ring(nparams, gpus, latency, num, den)
        self.params, self.nparams, self.gpus = params, nparams, gpus
        self.latency, self.num, self.den = latency, num, den
        self.nodes = [GPUNode(params, nparams) for _ in range(gpus)]
        self.links = [LinkModel(params, latency, num, den) for _ in range(gpus)]
        members = {}
        for g, node in enumerate(self.nodes):
            members[f"gpu{g}_compute"] = In(request_signature(params))
            members[f"gpu{g}_resp"] = Out(response_signature(params))
            members[f"gpu{g}_comm_done"] = Out(1)
            members[f"gpu{g}_cfg"] = In(axil_signature(node.cfg_addr_bits))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.gpus
        for g, (node, link) in enumerate(zip(self.nodes, self.links)):
            m.submodules[f"gpu{g}"] = node
            m.submodules[f"link{g}"] = link
            connect(m, wiring.flipped(getattr(self, f"gpu{g}_compute")), node.compute)
            connect(m, node.resp, wiring.flipped(getattr(self, f"gpu{g}_resp")))
            connect(m, wiring.flipped(getattr(self, f"gpu{g}_cfg")), node.cfg)
            m.d.comb += getattr(self, f"gpu{g}_comm_done").eq(node.comm_done)
            connect(m, node.tx, link.i)                       # GPU g sends ...
            connect(m, link.o, self.nodes[(g - 1) % n].rx)    # ... to GPU g - 1
        return m
