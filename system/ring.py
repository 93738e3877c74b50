"""N GPU nodes in a ring, joined by link models (``docs/design.md`` section 3: GPU ``g`` sends to GPU
``g - 1 mod N``).  Wiring and nothing else."""

from amaranth import Cat, ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from hw.axil import axil_signature
from hw.interfaces import request_signature, response_signature
from system.engine.rtl import load_signature
from system.fabric import FullMesh
from system.gpu import GPU, registered_reset
from system.link import FAULT_KINDS, FAULT_RATE_BITS, AckLink, LinkFaults, LinkModel, check_link
from system.node import GPUNode, NodeParams
from hw.params import T3Params, check_int


__all__ = ["Ring", "check_ring", "registered_reset", "MAX_GPUS", "TOPOLOGIES"]


#: The Verilog module name of a GPU (node and engine) in a ring with engines.
GPU_MODULE = "t3_gpu"

#: The topologies a :class:`Ring` builds.
TOPOLOGIES = ("ring", "mesh")

#: The largest ring the system builds.
MAX_GPUS = 64


def check_ring(nparams: NodeParams, gpus, latency, num, den):
    """Refuse a ring the hardware cannot build, naming the field (``gpus`` from 2 to
    :data:`MAX_GPUS` and addressable with the DMA's ``gpu_bits``; the link's settings)."""
    check_int("gpus", gpus, 2, MAX_GPUS)
    if gpus > nparams.dma.max_gpus:
        raise ValueError(f"gpus {gpus} needs more than gpu_bits {nparams.dma.gpu_bits}")
    check_link(latency, num, den)


class Ring(wiring.Component):
    """``gpus`` GPUs in a ring; the link from GPU ``g`` to GPU ``g - 1`` is a
    :class:`system.link.LinkModel` of ``latency`` cycles and ``num / den`` beats per cycle.

    Without ``engines`` each GPU is a bare :class:`system.node.GPUNode` whose compute port is
    the testbench's.  With ``engines`` (an :class:`system.engine.config.EngineParams`) each GPU
    is a :class:`system.gpu.GPU`: the node and a traffic engine for its compute units, every
    input registered; the testbench only configures, loads, starts and waits.

    Ports (for each GPU ``g``)
    --------------------------
    ``gpu<g>_cfg``: the node's AXI4-Lite ``cfg`` port.  Without engines also
    ``gpu<g>_compute``, ``gpu<g>_resp``, ``gpu<g>_comm_done`` (the node's ports); with engines
    ``gpu<g>_load`` (the engine's bulk port), and for the ring ``start`` (In: starts every
    engine in the same cycle), ``done`` (Out: every engine is done), ``clk`` and ``rst``
    (synchronous, registered: it takes effect, and ends, one cycle after the port's), and
    with instanced GPUs ``gpu_rst`` (In(gpus)): bit ``g`` resets GPU ``g`` alone, as ``rst``
    does (a GPU that fails on its own; the links and the other GPUs run on).

    ``charge_headers``: whether a link's packet header costs a beat of its bandwidth
    (:class:`system.link.LinkModel`).  The ring has no defaults of its own: a
    :class:`system.spec.RingSpec` holds the system's (:meth:`system.spec.RingSpec.build`).

    With a link layer in the nodes (``NodeParams.linklayer``) each link also carries the
    receiver's acknowledgements back (:class:`system.link.AckLink`, the link's latency) from
    GPU ``g - 1`` to GPU ``g``; the ring's ``acks_lost`` (Out(32)) counts those lost to a full
    channel.  With ``faults`` (a link layer needed) every link's beats and acknowledgements
    pass a :class:`system.link.LinkFaults` (its LFSR seeded by the link's number) driven by
    the ring's ``fault_rate`` (In(24): a beat hit with probability ``rate / 2**24``) and
    ``fault_kinds`` (In(3): drop, flip, duplicate); ``faults_dropped``, ``faults_flipped``,
    ``faults_duplicated``, ``faults_acks`` (Out(32)) sum what the injectors did.

    ``topology``: ``"ring"`` (the above) or ``"mesh"``: every GPU joined to every other by a
    dedicated link each way, of the same latency and bandwidth
    (:class:`system.fabric.FullMesh`, paper section 7.1; a packet goes to the GPU its header
    names); the ring's algorithm uses the links from GPU ``g`` to GPU ``g - 1`` only, at the
    same cycles as on the ring.  A mesh has no link layer (yet) and its ``unroutable`` and
    ``stray`` (Out(32)) count packets and beats the mesh dropped (none in a configuration the
    driver accepts).

    ``engine_formats`` (default: the node's ALU formats) are the element types of the engines'
    step adders (:class:`system.engine.rtl.CUEngine`'s ``formats``).

    With ``clocked=False`` the ring has no ``clk`` and ``rst`` and runs in the enclosing
    design's ``sync`` domain (the board top); with ``flat=True`` its GPUs are elaborated in
    place rather than instances of one module exported once (synthesis).  An instanced GPU
    registers the reset it is given (:class:`system.gpu.GPU`'s ``clocked``): the ring's
    ``rst`` port, so that it leaves reset with the links; in an unclocked ring the enclosing
    domain's reset, a cycle later than that domain.
    """

    #: The ring's sums of its injectors' counters (``faults``), and the counter each sums.
    FAULT_COUNTERS = {"faults_dropped": "dropped", "faults_flipped": "flipped",
                      "faults_duplicated": "duplicated", "faults_acks": "acks_hit"}

    def __init__(self, params: T3Params, nparams: NodeParams, *, gpus, latency, num, den,
                 charge_headers, engines=None, clocked=True, flat=False, engine_formats=None,
                 faults=False, topology="ring"):
        check_ring(nparams, gpus, latency, num, den)
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, not "
                             f"{topology!r}")
        if topology == "mesh" and nparams.linklayer is not None:
            raise ValueError("topology mesh has no link layer (NodeParams.linklayer must be "
                             "None): its acknowledgements would need a path back per link")
        self.topology = topology
        if faults and nparams.linklayer is None:
            raise ValueError("faults need a link layer in the nodes (NodeParams.linklayer): "
                             "without one a fault is a wrong result")
        self.faults = bool(faults)
        self.params, self.nparams, self.gpus = params, nparams, gpus
        self.latency, self.num, self.den = latency, num, den
        self.engines, self.clocked = engines, clocked
        if engines is None:
            self.nodes = [GPUNode(params, nparams) for _ in range(gpus)]
            self.instanced_modules = {}
        elif flat:
            self.instanced_modules = {}
            self.nodes = [GPU(params, nparams, engines, engine_formats) for _ in range(gpus)]
        else:
            # every GPU is the same module, exported once and instantiated ``gpus`` times: the
            # Verilog (and its export time) does not grow with the ring
            gpu = GPU(params, nparams, engines, engine_formats, clocked=True)
            self.instanced_modules = {GPU_MODULE: gpu}
            self.nodes = [gpu.signature.create(path=(f"gpu{g}",)) for g in range(gpus)]
            for node in self.nodes:
                node.cfg_addr_bits = gpu.cfg_addr_bits
        if topology == "mesh":
            self.mesh = FullMesh(params, gpus, nparams.dma.gpu_bits, latency, num, den,
                                 charge_headers=charge_headers)
            self.links = []
        else:
            self.mesh = None
            self.links = [LinkModel(params, latency, num, den, charge_headers=charge_headers)
                          for _ in range(gpus)]
        ll = nparams.linklayer
        self.acks = [AckLink(ll, latency) for _ in range(gpus)] if ll is not None else []
        self.injectors = [LinkFaults(params, ll, seed=0x1000 + g) for g in range(gpus)] \
            if faults else []
        members = {}
        if self.mesh is not None:
            members.update(unroutable=Out(32), stray=Out(32))
        if ll is not None:
            members["acks_lost"] = Out(32)
        if faults:
            members["fault_rate"] = In(FAULT_RATE_BITS)
            members["fault_kinds"] = In(len(FAULT_KINDS))
            members.update({name: Out(32) for name in self.FAULT_COUNTERS})
        for g, node in enumerate(self.nodes):
            members[f"gpu{g}_cfg"] = In(axil_signature(node.cfg_addr_bits))
            if engines is None:
                members[f"gpu{g}_compute"] = In(request_signature(params))
                members[f"gpu{g}_resp"] = Out(response_signature(params))
                members[f"gpu{g}_comm_done"] = Out(1)
            else:
                members[f"gpu{g}_load"] = In(load_signature(params, engines))
        if engines is not None:
            members["start"] = In(1)
            members["done"] = Out(1)
            if clocked:
                members["clk"] = In(1)
                members["rst"] = In(1)
                if self.instanced_modules:
                    members["gpu_rst"] = In(gpus)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.gpus
        if self.engines is not None and self.clocked:
            registered_reset(m, self.clk, self.rst)
        if self.mesh is not None:
            m.submodules.mesh = self.mesh
            m.d.comb += [self.unroutable.eq(self.mesh.unroutable),
                         self.stray.eq(self.mesh.stray)]
        for g, node in enumerate(self.nodes):
            if self.engines is None or not self.instanced_modules:
                m.submodules[f"gpu{g}"] = node
            else:
                m.submodules[f"gpu{g}"] = self._instance(node)
                # the GPU registers the port's reset itself, as the ring does for the links
                rst = self.rst | self.gpu_rst[g] if self.clocked else ResetSignal("sync")
                m.d.comb += [node.clk.eq(ClockSignal("sync")), node.rst.eq(rst)]
            connect(m, wiring.flipped(getattr(self, f"gpu{g}_cfg")), node.cfg)
            if self.engines is None:
                connect(m, wiring.flipped(getattr(self, f"gpu{g}_compute")), node.compute)
                connect(m, node.resp, wiring.flipped(getattr(self, f"gpu{g}_resp")))
                m.d.comb += getattr(self, f"gpu{g}_comm_done").eq(node.comm_done)
            else:
                connect(m, wiring.flipped(getattr(self, f"gpu{g}_load")), node.load)
                m.d.comb += node.start.eq(self.start)
            if self.mesh is not None:
                connect(m, node.tx, self.mesh.tx[g])
                connect(m, self.mesh.rx[g], node.rx)
                continue
            m.submodules[f"link{g}"] = link = self.links[g]
            prev = self.nodes[(g - 1) % n]
            connect(m, node.tx, link.i)                       # GPU g sends ...
            if not self.faults:
                connect(m, link.o, prev.rx)                   # ... to GPU g - 1
            if self.acks:                                     # which acknowledges to GPU g
                ack = self.acks[g]
                m.submodules[f"ack{g}"] = ack
                if self.faults:
                    inj = self.injectors[g]
                    m.submodules[f"faults{g}"] = inj
                    connect(m, link.o, inj.i)
                    connect(m, inj.o, prev.rx)
                    connect(m, prev.ack_o, inj.ack_i)
                    connect(m, inj.ack_o, ack.i)
                    m.d.comb += [inj.rate.eq(self.fault_rate), inj.kinds.eq(self.fault_kinds)]
                else:
                    connect(m, prev.ack_o, ack.i)
                connect(m, ack.o, node.ack_i)
        if self.acks:
            m.d.comb += self.acks_lost.eq(sum(ack.lost for ack in self.acks)[:32])
        for name, field in self.FAULT_COUNTERS.items():
            if self.faults:
                m.d.comb += getattr(self, name).eq(
                    sum(getattr(inj, field) for inj in self.injectors)[:32])
        if self.engines is not None:
            m.d.comb += self.done.eq(Cat(node.done for node in self.nodes).all())
        return m

    def _instance(self, ports):
        """An ``Instance`` of :data:`GPU_MODULE` whose ports are the signals of ``ports`` (an
        interface of :class:`system.gpu.GPU`'s signature)."""
        args = {}
        for path, member, value in ports.signature.flatten(ports):
            name = "__".join(str(p) for p in path)
            args[("i_" if member.flow == In else "o_") + name] = value
        return Instance(GPU_MODULE, **args)
