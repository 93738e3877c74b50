"""The board top: a ring of GPUs on one FPGA, driven from a PC over a serial port
(``docs/fpga.md``, "The board").

:class:`BoardHost` is the board's own register block: the host's way to the engines' bulk ports
(their programs, partials and results), their ``start`` and ``done``; :class:`BoardCore` joins
the serial bridge (:class:`hw.uart.UARTBridge`), an address decoder, each GPU's configuration
port and the board block, and the ring; :class:`BoardTop` puts the core on the pins of a
ULX3S (LFE5U-85F) with ``amaranth-boards``.  :mod:`system.board_model` is the board block's
golden model and :mod:`sim.board.host` the program a PC runs against it.

The address map (byte addresses of the bridge's commands): GPU ``g``'s configuration port
(the node's blocks and its engine, ``system.node.register_address``) at
``g << BoardParams.window_bits``; the board block at ``gpus << window_bits``.
"""

import dataclasses

from amaranth import Cat, ClockDomain, Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out, connect

from hw.axil import AXILiteDecoder, AXILiteToCSR
from hw.csr import Field, Reg, RegisterFile, RegisterMap, csr_signature
from hw.ecp5 import ECP5PLL, ecp5_global, pll_config
from hw.params import T3Params, check_int, check_params, param
from hw.uart import UARTBridge, bridge_status_layout
from mc_arbiter.config import ArbiterParams
from nmc.config import NMCParams
from system.engine.config import EngineParams
from system.engine.rtl import load_signature
from system.node import NodeParams


__all__ = ["BoardParams", "BoardHost", "BoardCore", "BoardTop", "board_registers",
           "OSCILLATOR_HZ", "BOARD_ID", "CTRL", "STATUS", "READ_LATENCY"]


#: The ULX3S's oscillator (``clk25``), the PLL's input.
OSCILLATOR_HZ = 25_000_000

#: What the board block's ``id`` register reads: "T3" and the register map's version.
BOARD_ID = 0x5433_0001

#: Cycles from a ``ctrl.read`` to ``load_rdata`` holding the beat: the GPU's bulk port answers
#: an address three clock edges after it is presented (its input register, the memory, its
#: output register), and the address register changes one edge after its write.
READ_LATENCY = 4


@dataclasses.dataclass(frozen=True)
class BoardParams:
    """What the board builds: ``gpus`` GPUs in a ring on one chip (each a node and its traffic
    engine, near-bank ALUs for ``formats`` only, the engines' step adders for
    ``engine_formats`` only), beats of ``beat_bits``, ``memory_rows`` rows per bank (``rows``
    of :class:`nmc.config.NMCParams`), a Tracker of ``tracker_ways`` ways (the node's 64 sets;
    the driver refuses a GEMM whose tiles could fill a set), the engines' ``engine``
    geometry, links of ``link_latency`` cycles and ``link_num / link_den`` beats per cycle, a
    ``clock_hz`` clock (made by the ECP5's PLL from the board's 25 MHz oscillator, exactly:
    :func:`hw.ecp5.pll_config` refuses one it cannot make) and a serial port of ``baud`` bits
    per second (its divisor, :attr:`divisor`, follows the clock).

    The defaults are cut down for an LFE5U-85F (``docs/fpga.md``): two GPUs with 128-bit beats
    (half the system's: every queue, slice and ALU half as wide; the DMA's link header fits
    one beat with 1-bit GPU numbers and 10-bit beat counts, :attr:`dma_params`, and an engine
    descriptor takes two program beats), fp16 near-bank ALUs and no step adders in the engines
    (the board runs T3, whose reduce-scatter adds in the near-bank ALUs; ``sequential``, whose
    reduce-scatter adds on the engines, is refused unless ``engine_formats`` names the GEMM's
    type), 16 KiB of HBM model, a two-way Tracker (the node's 8 ways are 4,900 LUTs of per-way
    compares and forwarding; the board's GEMM needs one way), engines of two WG slots and a
    512-beat memory, joined by the simulation system's scaled links (64 cycles, 1.2 bytes per
    cycle: :data:`system.spec.LINK_LATENCY`, :data:`system.spec.LINK_BANDWIDTH`)."""
    gpus: int = param(2, "GPUs on the board", 2, 16)
    beat_bits: int = 128
    formats: tuple = ("fp16",)
    engine_formats: tuple = ()
    memory_rows: int = 2
    tracker_ways: int = param(2, "Tracker ways per set", 1, 8)
    engine: EngineParams = EngineParams(local_beats=512, slots=2, buffer_beats=64, pending=64)
    link_latency: int = 64
    link_num: int = 3
    link_den: int = 40
    clock_hz: int = 50_000_000
    baud: int = 115_200                 # its range is clock_hz's: checked below

    def __post_init__(self):
        from system.ring import check_ring
        check_params(self)
        pll_config(OSCILLATOR_HZ, self.clock_hz)        # one the PLL makes, or refused
        check_int("baud", self.baud, 1_200, self.clock_hz // 4)
        object.__setattr__(self, "formats", tuple(self.formats))
        object.__setattr__(self, "engine_formats", tuple(self.engine_formats))
        if any(f not in self.formats for f in self.engine_formats):
            raise ValueError(f"engine_formats {self.engine_formats!r} must be among formats "
                             f"{self.formats!r}")
        check_ring(self.nparams, self.gpus, self.link_latency, self.link_num, self.link_den)
        error = abs(self.clock_hz / self.divisor - self.baud) / self.baud
        if error > 0.02:
            raise ValueError(f"baud {self.baud} is {error:.1%} off at clock_hz {self.clock_hz} "
                             f"(divisor {self.divisor}); a serial line needs it within 2 %")

    @property
    def params(self):
        return T3Params(beat_bits=self.beat_bits)

    def to_dict(self):
        return dict(dataclasses.asdict(self), formats=list(self.formats),
                    engine_formats=list(self.engine_formats), engine=self.engine.to_dict())

    @classmethod
    def from_dict(cls, d):
        return cls(**dict(d, engine=EngineParams(**d["engine"]), formats=tuple(d["formats"]),
                          engine_formats=tuple(d.get("engine_formats", ()))))

    @property
    def nparams(self):
        tracker = dataclasses.replace(NodeParams.tracker, ways=self.tracker_ways)
        # the board keeps the MCQ of 32 it was placed with (docs/fpga.md); the simulated
        # system's nodes have 64
        return NodeParams(tracker=tracker, dma=self.dma_params,
                          arbiter=ArbiterParams(depth=32),
                          nmc=NMCParams(rows=self.memory_rows, formats=self.formats))

    @property
    def dma_params(self):
        """The node's DMA geometry with the link header cut to one beat: GPU fields of
        ``gpu_bits`` and the widest beat counts (``len_bits``, at most 16) that still fit."""
        from dma.config import HEADER_CHECK_BITS, header_layout
        dma = dataclasses.replace(NodeParams.dma, gpu_bits=self.gpu_bits)
        rest = header_layout(self.params, dma).size - 2 * dma.len_bits + HEADER_CHECK_BITS
        len_bits = min(16, (self.beat_bits - rest) // 2)
        if len_bits < 7:
            raise ValueError(f"beat_bits {self.beat_bits} cannot hold the DMA's link header "
                             f"({rest + 14} bits with 7-bit beat counts)")
        return dataclasses.replace(dma, len_bits=len_bits)

    @property
    def engine_elem_types(self):
        """The :class:`hw.interfaces.ElemType`\\ s of ``engine_formats``."""
        from hw.interfaces import ElemType
        return tuple(ElemType[f.upper()] for f in self.engine_formats)

    @property
    def pll(self):
        """The :class:`hw.ecp5.PLLConfig` that makes ``clock_hz`` from the board's oscillator."""
        return pll_config(OSCILLATOR_HZ, self.clock_hz)

    @property
    def divisor(self):
        """Clock cycles per serial bit."""
        return round(self.clock_hz / self.baud)

    @property
    def gpu_bits(self):
        return max(1, (self.gpus - 1).bit_length())

    @property
    def window_bits(self):
        """Byte-address bits of each window of the address map."""
        from system.node import CFG_ADDR_BITS
        return max(CFG_ADDR_BITS, board_registers(self).addr_bits + 2)


# --- the board block's registers ------------------------------------------------------------------

CTRL = Reg("ctrl", None, "wo", "commands", fields=(
    Field("start", 1, "start every GPU's engine, all in the same cycle"),
    Field("write", 1, "write `load_data` to beat `load_addr` of GPU `load_gpu`'s bulk port, "
                      "then `load_addr` + 1"),
    Field("read", 1, f"read beat `load_addr` of GPU `load_gpu`'s bulk port into `load_rdata` "
                     f"({READ_LATENCY} cycles), then `load_addr` + 1"),
))

STATUS = Reg("status", None, "w1c", "", fields=(
    Field("done", 1, "every GPU's engine is done", live=True),
    Field("reading", 1, "a `read` is under way (`load_rdata` not yet valid)", live=True),
    Field("bad_gpu", 1, "a `write` or `read` named a `load_gpu` beyond the ring; it did "
                        "nothing"),
))


def board_registers(bparams: BoardParams):
    """The board block's register map (a :class:`hw.csr.RegisterMap`)."""
    p, e = bparams.params, bparams.engine
    return RegisterMap([
        Reg("id", 32, "ro", f"reads 0x{BOARD_ID:08x}: \"T3\", board register map version 1"),
        CTRL, STATUS,
        Reg("uart", 32, "ro", "the serial bridge's saturating counters: bits 0-7 bytes dropped "
                              "on a full FIFO, 8-15 framing errors, 16-23 unknown command "
                              "bytes, 24-31 commands abandoned by the timeout"),
        Reg("gpus", 8, "ro", "GPUs in the ring"),
        Reg("load_gpu", bparams.gpu_bits, "rw", "the GPU whose bulk port `write` and `read` use"),
        Reg("load_addr", e.local_bits + 1, "rw", "beat address on the bulk port (the program "
                                                 "memory from `local_beats` up)"),
        Reg("load_data", p.beat_bits, "rw", "the beat `write` writes"),
        Reg("load_rdata", p.beat_bits, "ro", "the beat the last `read` read"),
    ])


class BoardHost(wiring.Component):
    """The board block: the host's view of the engines' bulk ports, ``start`` and ``done``.

    Ports
    -----
    csr : In(csr_signature(...))
        The registers of :func:`board_registers` (behind an :class:`hw.axil.AXILiteToCSR`).
    load<g> : Out(load_signature(...)), one per GPU
        To GPU ``g``'s bulk port (:class:`system.gpu.GPU`: ``r_data`` answers the address of
        three edges before).  ``addr`` and ``w_data`` are the registers ``load_addr`` and
        ``load_data``; ``w_en`` is high in the cycle of a ``ctrl.write`` for that GPU.
    start : Out(1)
        One cycle high on ``ctrl.start``.
    done : In(1)
        Every engine is done (``status.done``).
    uart : In(bridge_status_layout())
        The bridge's counters (register ``uart``).
    bad_gpu : Out(1)
        ``status.bad_gpu`` (for a LED).

    Timing: a ``write`` reaches the port in the cycle of its register write; a ``read``
    captures ``load_rdata`` :data:`READ_LATENCY` cycles after its register write
    (``status.reading`` high meanwhile).  A ``write`` or ``read`` for a GPU beyond the ring
    does nothing and latches ``status.bad_gpu``.  Use the bulk ports while the engines are idle.
    """

    def __init__(self, bparams: BoardParams):
        self.bparams = bparams
        self.regs = board_registers(bparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        members = {"csr": In(csr_signature(self.regs.addr_bits))}
        for g in range(bparams.gpus):
            members[f"load{g}"] = Out(load_signature(bparams.params, bparams.engine))
        members.update({"start": Out(1), "done": In(1), "uart": In(bridge_status_layout()),
                        "bad_gpu": Out(1)})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        b, regs = self.bparams, self.regfile
        gpu, addr = regs.rw("load_gpu"), regs.rw("load_addr")
        rdata = Signal(b.params.beat_bits)
        wait = Signal(range(READ_LATENCY + 1))
        known = gpu < b.gpus
        write, read = regs.command("ctrl", "write"), regs.command("ctrl", "read")
        status = regs.status(m, "status", done=self.done, reading=wait != 0,
                             bad_gpu=(write | read) & ~known)
        regs.elaborate(m, self.csr, {"id": BOARD_ID, "uart": self.uart.as_value(),
                                     "gpus": b.gpus, "load_rdata": rdata})
        m.d.comb += self.bad_gpu.eq(status.bad_gpu)
        ports = [getattr(self, f"load{g}") for g in range(b.gpus)]
        for g, port in enumerate(ports):
            # in the command's own cycle, with the address before its increment
            m.d.comb += [port.addr.eq(addr), port.w_data.eq(regs.rw("load_data")),
                         port.w_en.eq(write & (gpu == g))]
        m.d.comb += self.start.eq(regs.command("ctrl", "start"))
        # after the decoder's own register writes: the increment is in a later cycle than any
        # host write of ``load_addr`` (a command is a write of ``ctrl``)
        with m.If(write & known):
            m.d.sync += addr.eq(addr + 1)
        with m.If(read & known):
            m.d.sync += wait.eq(READ_LATENCY)
        with m.If(wait != 0):
            m.d.sync += wait.eq(wait - 1)
            with m.If(wait == 1):
                m.d.sync += [rdata.eq(Cat(p.r_data for p in ports).word_select(gpu, len(rdata))),
                             addr.eq(addr + 1)]
        return m


# --- the core and the board ------------------------------------------------------------------------

class BoardCore(wiring.Component):
    """The serial bridge, the address decoder, :class:`BoardHost` and the ring
    (:class:`system.ring.Ring` with engines): everything of the board but its pins.

    Ports
    -----
    clk, rst : In(1)
        The clock and a synchronous reset (registered: it takes effect, and ends, a cycle
        after the port's).
    rx : In(1), tx : Out(1)
        The serial lines (the PC's TX and RX), 8N1 at ``baud``.
    leds : Out(4)
        0: a heartbeat (bit 23 of a cycle counter: about 3 Hz at 50 MHz); 1: every engine is
        done; 2: the bridge has counted a line error (overrun, framing, unknown command,
        timeout); 3: ``status.bad_gpu``.

    ``flat``: the GPUs elaborated in place (for synthesis) rather than instances of one module
    exported once (for simulation; ``instanced_modules`` lists it).  ``reset_buffer(m,
    signal)``: the net the registers take their reset from (:func:`system.ring.registered_reset`;
    on the chip, :func:`ecp5_global`).
    """

    def __init__(self, bparams: BoardParams = BoardParams(), flat=False, reset_buffer=None):
        from system.ring import Ring
        self.bparams = bparams
        self.reset_buffer = reset_buffer
        # the board's links charge a packet's header a beat (as placed and measured in
        # docs/fpga.md); the simulation system's, the paper's link model, do not
        self.ring = Ring(bparams.params, bparams.nparams, gpus=bparams.gpus,
                         latency=bparams.link_latency, num=bparams.link_num,
                         den=bparams.link_den, charge_headers=True,
                         engines=bparams.engine, clocked=False,
                         flat=flat, engine_formats=bparams.engine_elem_types)
        self.instanced_modules = self.ring.instanced_modules
        self.host = BoardHost(bparams)
        w = bparams.window_bits
        self.decoder = AXILiteDecoder(w, [(f"gpu{g}", self.ring.nodes[g].cfg_addr_bits)
                                          for g in range(bparams.gpus)] +
                                      [("board", self.host.regs.addr_bits + 2)])
        self.bridge = UARTBridge(self.decoder.addr_bits, bparams.divisor)
        super().__init__({"clk": In(1), "rst": In(1), "rx": In(1, init=1),
                          "tx": Out(1, init=1), "leds": Out(4)})

    def elaborate(self, platform):
        from system.ring import registered_reset
        m = Module()
        b = self.bparams
        registered_reset(m, self.clk, self.rst, self.reset_buffer)
        m.submodules.ring = ring = self.ring
        m.submodules.host = host = self.host
        m.submodules.decoder = decoder = self.decoder
        m.submodules.bridge = bridge = self.bridge
        m.submodules.board_axil = axil = AXILiteToCSR(self.host.regs.addr_bits + 2)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx)]
        connect(m, bridge.bus, decoder.bus)
        for g in range(b.gpus):
            connect(m, getattr(decoder, f"gpu{g}"), getattr(ring, f"gpu{g}_cfg"))
            connect(m, getattr(host, f"load{g}"), getattr(ring, f"gpu{g}_load"))
        connect(m, decoder.board, axil.axil)
        connect(m, axil.csr, host.csr)
        m.d.comb += [ring.start.eq(host.start), host.done.eq(ring.done),
                     host.uart.eq(bridge.status)]
        beat = Signal(24)
        m.d.sync += beat.eq(beat + 1)
        m.d.comb += self.leds.eq(Cat(beat[-1], ring.done, bridge.status.as_value() != 0,
                                     host.bad_gpu))
        return m


class BoardTop(Elaboratable):
    """:class:`BoardCore` on the pins of a **ULX3S** with an LFE5U-85F (``amaranth-boards``'
    ``ULX3S_85F_Platform``): the 25 MHz oscillator (``clk25``, pin G2) drives the ECP5's PLL
    (:class:`hw.ecp5.ECP5PLL`), whose output at ``clock_hz`` is the core's clock; the FTDI
    serial port (``uart``: the board's RX on M1, TX on L4) is the host's line, LEDs 0-3 (B2,
    C2, C1, D2) the core's ``leds``.  Reset is the power-on state of the registers, a press of
    the ``PWR`` button (D6) and the PLL out of lock, synchronized to the PLL's clock (two
    flip-flops), registered and spread over a global network (:func:`hw.ecp5.ecp5_global`).
    Build with ``t3 synth board --out DIR``."""

    def __init__(self, bparams: BoardParams = BoardParams()):
        self.bparams = bparams

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = BoardCore(self.bparams, flat=True, reset_buffer=ecp5_global)
        m.submodules.pll = pll = ECP5PLL(self.bparams.pll)
        clk = platform.request("clk25", 0)
        uart = platform.request("uart", 0)
        button = platform.request("button_pwr", 0)
        m.domains.pll = pll_domain = ClockDomain("pll", reset_less=True)
        held = Signal(init=1)
        m.submodules.reset_sync = FFSynchronizer(button.i | ~pll.locked, held, o_domain="pll",
                                                 init=1)
        m.d.comb += [pll.clk_in.eq(clk.i), pll_domain.clk.eq(pll.clk_out),
                     core.clk.eq(pll.clk_out), core.rst.eq(held),
                     core.rx.eq(uart.rx.i), uart.tx.o.eq(core.tx)]
        # no constraint of its own: nextpnr derives the PLL output's (``clock_hz``) from the
        # oscillator's 25 MHz and the dividers (a net constraint would name a net that
        # synthesis renames)
        for k in range(4):
            m.d.comb += platform.request("led", k).o.eq(core.leds[k])
        return m
