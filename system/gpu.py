"""One GPU of a simulation top: the T3 node and the traffic engine that stands for its compute
units (``docs/system.md``, "GPU-side engines").  Everything the datapaths see from outside is
registered at this boundary: a simulator evaluates no node logic when the testbench touches
an input, and an FPGA prototype gets the same timing."""

from amaranth import ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from hw.axil import AXILiteInputSlice, axil_signature
from hw.interfaces import link_signature
from hw.params import T3Params
from system.engine.config import EngineParams
from system.engine.rtl import CUEngine, load_signature
from linklayer.config import ack_signature
from system.node import GPUNode, NodeParams


__all__ = ["GPU", "registered_reset"]


def registered_reset(m: Module, clk, rst, buffer=None):
    """Define ``m``'s ``sync`` domain on ``clk`` with a registered ``rst``: Amaranth's Verilog
    computes every register's next value with ``rst`` in it, so a reset straight from a port
    would put the whole design in the logic a simulator re-evaluates whenever an input may have
    changed (Verilator's ``ico`` region: for a GPU built as a hierarchical block, on every
    call of the block, several a cycle); the reset takes effect one cycle later.
    ``buffer(m, signal)``, if given, returns the net the registers get in place of the
    registered reset (on an FPGA: a global buffer)."""
    m.domains.sync = sync = ClockDomain("sync")
    m.domains.port = port = ClockDomain("port", reset_less=True)
    registered = Signal(init=1)
    m.d.comb += [sync.clk.eq(clk), port.clk.eq(clk),
                 sync.rst.eq(buffer(m, registered) if buffer else registered)]
    m.d.port += registered.eq(rst)


class GPU(wiring.Component):
    """A :class:`system.node.GPUNode` driven by a :class:`system.engine.rtl.CUEngine` whose step
    adders handle ``engine_formats`` (default: the node's ALU formats).

    Ports
    -----
    cfg : In(axil_signature(...))
        The node's AXI4-Lite port, behind an :class:`hw.axil.AXILiteInputSlice`; the
        engine's registers are its ``gpu`` window.
    load : In(load_signature)
        The engine's bulk port, registered here in both directions: a write lands a cycle
        later, and ``r_data`` answers the ``addr`` of three cycles before (input register,
        memory, output register).
    start : In(1)
        Registered: the engine starts the cycle after the pulse.
    done : Out(1)
        The engine's ``done``.
    tx, rx : link (AXI4-Stream)
        The node's link ports.
    ack_i, ack_o : acknowledgements
        With a link layer (``NodeParams.linklayer``) only: the node's.
    clk, rst : In(1)
        With ``clocked`` only: the GPU's clock and synchronous reset, registered here (it takes
        effect, and ends, one cycle after the port's: :func:`registered_reset`).  A GPU exported
        as a module of its own (a ring's :data:`system.ring.GPU_MODULE`) is clocked, so that
        none of its logic depends on an input port through the reset; without ``clocked`` the
        GPU runs in the enclosing design's ``sync`` domain.
    """

    def __init__(self, params: T3Params, nparams: NodeParams = NodeParams(),
                 eparams: EngineParams = EngineParams(), engine_formats=None, clocked=False):
        self.params, self.nparams, self.eparams = params, nparams, eparams
        self.clocked = clocked
        formats = nparams.nmc.elem_types if engine_formats is None else engine_formats
        self.engine = CUEngine(params, eparams, formats=formats)
        self.node = GPUNode(params, nparams, ext_addr_bits=self.engine.regs.addr_bits)
        self.cfg_addr_bits = self.node.cfg_addr_bits
        super().__init__({
            "cfg": In(axil_signature(self.node.cfg_addr_bits)),
            "load": In(load_signature(params, eparams)),
            "start": In(1),
            "done": Out(1),
            "tx": Out(link_signature(params)),
            "rx": In(link_signature(params)),
            **({"ack_i": In(ack_signature(nparams.linklayer)),
                "ack_o": Out(ack_signature(nparams.linklayer))}
               if nparams.linklayer is not None else {}),
            **({"clk": In(1), "rst": In(1)} if clocked else {}),
        })

    def elaborate(self, platform):
        m = Module()
        if self.clocked:
            registered_reset(m, self.clk, self.rst)
        m.submodules.node = node = self.node
        m.submodules.engine = engine = self.engine
        m.submodules.cfg_slice = cfg_slice = AXILiteInputSlice(self.cfg_addr_bits)
        connect(m, wiring.flipped(self.cfg), cfg_slice.i)
        connect(m, cfg_slice.o, node.cfg)
        connect(m, node.ext, engine.csr)
        connect(m, engine.compute, node.compute)
        connect(m, node.resp, engine.resp)
        connect(m, node.tx, wiring.flipped(self.tx))
        connect(m, wiring.flipped(self.rx), node.rx)
        if self.nparams.linklayer is not None:
            connect(m, wiring.flipped(self.ack_i), node.ack_i)
            connect(m, node.ack_o, wiring.flipped(self.ack_o))
        m.d.comb += [
            engine.comm_done.eq(node.comm_done),
            node.arb_drain.eq(engine.drain),
            node.arb_calib_start.eq(engine.calib_start),
            node.arb_calib_end.eq(engine.calib_end),
            node.l2_flush.eq(engine.l2_flush),
            engine.l2_flushed.eq(node.l2_flushed),
            self.done.eq(engine.done),
        ]
        # the boundary registers
        start = Signal()
        m.d.sync += [
            start.eq(self.start),
            engine.load.addr.eq(self.load.addr),
            engine.load.w_en.eq(self.load.w_en),
            engine.load.w_data.eq(self.load.w_data),
            self.load.r_data.eq(engine.load.r_data),
        ]
        m.d.comb += engine.start.eq(start)
        return m
