"""The pieces of a topology other than the ring: a packet router and a packet merge on the
link's AXI4-Stream (:func:`hw.interfaces.link_signature`), at a beat a cycle.

Paper section 7.1: "T3 can also support the direct RS implementation in a fully-connected
topology.  At every GEMM stage, the output from each device is scattered across the remaining
devices using dedicated links and reduced at the destination."  A GPU's node keeps its one
``tx`` and one ``rx`` (``docs/system.md``); in a fully connected system a :class:`Router` sends
each packet from ``tx`` to the dedicated link of its header's ``dst_gpu``, and a :class:`Merge`
takes whole packets from the links arriving at a GPU into its ``rx``.  Both are packet-granular:
a packet's beats are never interleaved with another's, and nothing is reordered on a path.
Their golden model is :mod:`system.fabric_model`.
"""

from amaranth import Array, C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.interfaces import link_signature
from hw.params import T3Params, check_int
from system.link import LinkModel


__all__ = ["Router", "Merge", "FullMesh", "mesh_routes", "COUNTER_BITS"]


#: Width of the fabric's counters (they saturate).
COUNTER_BITS = 32


def _link_fields(port):
    return (port.tdata, port.tkeep, port.tlast, port.tuser)


class Router(wiring.Component):
    """One link in, ``len(set(routes) - {None})`` links out, by the header's destination.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    gpu_bits : int
        Bits of the header's ``dst_gpu`` field, the low bits of its first beat
        (:func:`dma.config.header_layout`).
    routes : sequence of int or None
        ``routes[d]``: the output a packet for GPU ``d`` leaves on (``0 .. outputs - 1``), or
        ``None``: no path (the GPU's own number, or one the system does not have).

    Ports
    -----
    i : In(link_signature(params))
        Packets, each a header beat (``tuser``) and its payload up to ``tlast``.
    o : Out(link_signature(params)) × outputs
        ``o[k]`` carries the packets routed to output ``k``, whole and in arrival order.
    unroutable : Out(COUNTER_BITS)
        Packets taken and dropped whole because ``routes`` has no output for their
        destination (the driver refuses a configuration that sends one).
    stray : Out(COUNTER_BITS)
        Beats taken and dropped outside a packet (a payload beat where a header must come).

    Timing
    ------
    Combinational: a header beat is offered on its output in the cycle it arrives, and
    ``i.tready`` is that output's ``tready`` (a dropped beat is taken at once).  One beat a
    cycle, back-to-back packets to different outputs included; a packet waiting for its
    output holds the packets behind it (one input, in order).
    """

    def __init__(self, params: T3Params, gpu_bits, routes):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        check_int("gpu_bits", gpu_bits, 1, 16)
        routes = tuple(routes)
        if not 1 <= len(routes) <= 1 << gpu_bits:
            raise ValueError(f"routes must name 1 to {1 << gpu_bits} destinations (gpu_bits "
                             f"{gpu_bits}), not {len(routes)}")
        used = sorted({r for r in routes if r is not None})
        if not used or used != list(range(len(used))):
            raise ValueError(f"routes must use outputs 0, 1, ... without a gap, not {used}")
        self.params, self.gpu_bits, self.routes = params, gpu_bits, routes
        self.outputs = len(used)
        super().__init__({
            "i": In(link_signature(params)),
            "o": Out(link_signature(params)).array(self.outputs),
            "unroutable": Out(COUNTER_BITS),
            "stray": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.outputs
        i = self.i
        # the destination's output, or n for none
        table = Array([r if r is not None else n for r in self.routes] +
                      [n] * ((1 << self.gpu_bits) - len(self.routes)))
        in_packet = Signal()            # a header was taken, its tlast not yet
        held = Signal(range(n + 1))     # the output of the packet in progress (n: dropped)
        route = Signal(range(n + 1))
        header = i.tuser & ~in_packet
        m.d.comb += route.eq(Mux(in_packet, held, Mux(i.tuser, table[i.tdata[:self.gpu_bits]],
                                                       n)))
        ready = Array([o.tready for o in self.o] + [C(1, 1)])
        m.d.comb += i.tready.eq(ready[route])
        for k, o in enumerate(self.o):
            m.d.comb += [o.tvalid.eq(i.tvalid & (route == k)),
                         *(dst.eq(src) for dst, src in zip(_link_fields(o), _link_fields(i)))]
        take = i.tvalid & i.tready
        with m.If(take):
            m.d.sync += [in_packet.eq(~i.tlast & (in_packet | i.tuser)), held.eq(route)]
        for counter, event in ((self.unroutable, take & header & (route == n)),
                               (self.stray, take & ~in_packet & ~i.tuser)):
            with m.If(event & (counter != (1 << COUNTER_BITS) - 1)):
                m.d.sync += counter.eq(counter + 1)
        return m


class Merge(wiring.Component):
    """``inputs`` links into one, a whole packet at a time, round robin.

    Ports
    -----
    i : In(link_signature(params)) × inputs
    o : Out(link_signature(params))
        Every packet of every input, whole (from its first beat to its ``tlast``), each
        input's in its order.  When the output is free the next input at or after the one
        after the last granted that offers a beat is granted (round robin: an input waits
        for at most ``inputs - 1`` packets of others).

    Timing
    ------
    Combinational: a granted input's beat is offered on ``o`` in the cycle it arrives, one
    beat a cycle, back-to-back packets from different inputs included.
    """

    def __init__(self, params: T3Params, inputs):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        check_int("inputs", inputs, 1, 64)
        self.params, self.inputs = params, inputs
        super().__init__({
            "i": In(link_signature(params)).array(inputs),
            "o": Out(link_signature(params)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.inputs
        valid = Signal(n)
        m.d.comb += valid.eq(Cat(i.tvalid for i in self.i))
        in_packet = Signal()
        held = Signal(range(n))         # the input of the packet in progress
        after = Signal(range(n))        # round robin: the first input to look at
        pick = Signal(range(n))
        # the first valid input at or after ``after``: the lowest of the valid inputs at or
        # above it, else the lowest valid input
        for k in reversed(range(n)):
            with m.If(valid[k]):
                m.d.comb += pick.eq(k)
        for k in reversed(range(n)):
            with m.If(valid[k] & (k >= after)):
                m.d.comb += pick.eq(k)
        grant = Signal(range(n))
        m.d.comb += grant.eq(Mux(in_packet, held, pick))
        o = self.o
        fields = [o.tvalid, *_link_fields(o)]
        for f, dst in enumerate(fields):
            m.d.comb += dst.eq(Array([i.tvalid, *_link_fields(i)][f] for i in self.i)[grant])
        for k, i in enumerate(self.i):
            m.d.comb += i.tready.eq(o.tready & (grant == k))
        with m.If(o.tvalid & o.tready):
            m.d.sync += [in_packet.eq(~o.tlast), held.eq(grant)]
            with m.If(o.tlast):
                m.d.sync += after.eq(Mux(grant == n - 1, 0, grant + 1))
        return m


def mesh_routes(gpus, gpu):
    """GPU ``gpu``'s routes in a full mesh of ``gpus``: GPU ``d``'s link is output
    ``(d - gpu - 1) mod gpus`` (the next GPU's first, as the ring's order), itself none."""
    return tuple(None if d == gpu else (d - gpu - 1) % gpus for d in range(gpus))


class FullMesh(wiring.Component):
    """``gpus`` GPUs' links, every GPU joined to every other by a dedicated link each way:
    a :class:`Router` on each GPU's ``tx``, a :class:`system.link.LinkModel` from each GPU to
    each other (``latency`` cycles, ``num / den`` beats a cycle, ``charge_headers``), a
    :class:`Merge` into each GPU's ``rx``: ``gpus * (gpus - 1)`` links.

    Ports
    -----
    tx : In(link_signature(params)) × gpus
        GPU ``g``'s packets; each goes to the GPU its header's ``dst_gpu`` names.
    rx : Out(link_signature(params)) × gpus
        The packets for GPU ``g``, whole; each sender's in the order it sent them.
    unroutable : Out(COUNTER_BITS)
        Packets dropped for a destination outside the mesh, or the sender itself (the
        routers' sum).
    stray : Out(COUNTER_BITS)
        Beats dropped outside a packet (the routers' sum).
    """

    def __init__(self, params: T3Params, gpus, gpu_bits, latency=8, num=1, den=4,
                 charge_headers=True):
        check_int("gpus", gpus, 2, 1 << gpu_bits)
        self.params, self.gpus, self.gpu_bits = params, gpus, gpu_bits
        self.routers = [Router(params, gpu_bits, mesh_routes(gpus, g)) for g in range(gpus)]
        self.merges = [Merge(params, gpus - 1) for _ in range(gpus)]
        #: ``links[g][d]``: the link from GPU ``g`` to GPU ``d`` (None for ``d == g``)
        self.links = [[None if d == g else
                       LinkModel(params, latency, num, den, charge_headers=charge_headers)
                       for d in range(gpus)] for g in range(gpus)]
        super().__init__({
            "tx": In(link_signature(params)).array(gpus),
            "rx": Out(link_signature(params)).array(gpus),
            "unroutable": Out(COUNTER_BITS),
            "stray": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.gpus
        for g in range(n):
            m.submodules[f"router{g}"] = router = self.routers[g]
            m.submodules[f"merge{g}"] = self.merges[g]
            wiring.connect(m, wiring.flipped(self.tx[g]), router.i)
            wiring.connect(m, self.merges[g].o, wiring.flipped(self.rx[g]))
            for d, out in enumerate(mesh_routes(n, g)):
                if out is None:
                    continue
                link = self.links[g][d]
                m.submodules[f"link{g}_{d}"] = link
                wiring.connect(m, router.o[out], link.i)
                # at GPU d, GPU g's link is input (g - d - 1) mod n: the next GPU's first
                wiring.connect(m, link.o, self.merges[d].i[(g - d - 1) % n])
        for name in ("unroutable", "stray"):
            total = sum(getattr(r, name) for r in self.routers)
            m.d.comb += getattr(self, name).eq(total[:COUNTER_BITS])
        return m
