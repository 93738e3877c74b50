"""A serial port as an AXI4-Lite master: how a host reaches a board's registers (``docs/fpga.md``,
"The board").

The protocol, 8 data bits, no parity, one stop bit, every word least significant byte first,
one answer per command and in order (:mod:`hw.uart_model` is its golden model and the host's
codec):

=========================================  ===========================================
command (host → board)                      answer (board → host)
=========================================  ===========================================
``'W'`` (0x57), address (4), data (4)       ``bresp`` (1 byte: 0 OKAY, 2 SLVERR)
``'R'`` (0x52), address (4)                 ``rresp`` (1 byte), data (4)
any other byte                              ``NAK`` (0x15); the byte is counted
=========================================  ===========================================

A command's bytes may follow each other with pauses of up to ``timeout - 2`` byte times; a
pause of ``timeout`` byte times abandons the command (counted, no answer), so a host that lost
its place resynchronises by pausing.  The host need not wait for an answer before the next command: received bytes wait
in a FIFO of ``fifo_depth`` bytes and answers in one of as many; a byte that finds the
receive FIFO full is dropped and counted (``overruns``), never taken as part of a command.  A
byte whose stop bit is low (a framing error) is dropped, counted, and abandons the command
it was part of.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from .axil import SLVERR, axil_signature
from .csr import count
from .params import check_int


__all__ = ["UARTRx", "UARTTx", "UARTBridge", "WRITE", "READ", "NAK", "bridge_status_layout"]


WRITE, READ, NAK = 0x57, 0x52, 0x15


class UARTRx(wiring.Component):
    """8N1 receiver, ``divisor`` clock cycles per bit.

    Ports
    -----
    rx : In(1)
        The line (idle high); synchronised by two registers inside.
    data : Out(8), valid : Out(1)
        A received byte, ``valid`` for one cycle, ``divisor`` / 2 cycles into its stop bit.
    framing : Out(1)
        A one-cycle pulse instead of ``valid`` when the stop bit was low.

    Timing: the start bit is confirmed in its middle (a glitch shorter than half a bit is
    ignored); each data bit is sampled in its middle.
    """

    def __init__(self, divisor):
        check_int("divisor", divisor, 4, 1 << 20)
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(8), "valid": Out(1),
                          "framing": Out(1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        sync1, line = Signal(init=1), Signal(init=1)
        m.d.sync += [sync1.eq(self.rx), line.eq(sync1)]
        timer = Signal(range(d))
        bit = Signal(range(8))
        shift = Signal(8)
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.FSM(name="rx"):
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(d // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(d - 1), bit.eq(0)]
                    m.next = "DATA"
                    with m.If(line):                  # a glitch, not a start bit
                        m.next = "IDLE"
            with m.State("DATA"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), timer.eq(d - 1),
                                 bit.eq(bit + 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer == 0):
                    m.d.comb += [self.valid.eq(line), self.framing.eq(~line)]
                    m.next = "IDLE"
        m.d.comb += self.data.eq(shift)
        return m


class UARTTx(wiring.Component):
    """8N1 transmitter, ``divisor`` clock cycles per bit.

    Ports
    -----
    data : In(8), valid : In(1), ready : Out(1)
        A byte is taken when ``valid`` and ``ready`` are high; ``ready`` is high while the line
        is idle (from the end of the previous stop bit).
    tx : Out(1)
        The line, registered, idle high.
    """

    def __init__(self, divisor):
        check_int("divisor", divisor, 4, 1 << 20)
        self.divisor = divisor
        super().__init__({"data": In(8), "valid": In(1), "ready": Out(1),
                          "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        timer = Signal(range(d))
        bits = Signal(10, init=0x3FF)       # start, 8 data bits, stop; shifted out LSB first
        left = Signal(range(11))
        m.d.comb += self.ready.eq(left == 0)
        m.d.sync += self.tx.eq(bits[0])
        with m.If(left == 0):
            with m.If(self.valid):
                m.d.sync += [bits.eq(Cat(Const(0, 1), self.data, Const(1, 1))),
                             left.eq(10), timer.eq(d - 1)]
        with m.Elif(timer == 0):
            m.d.sync += [bits.eq(Cat(bits[1:], Const(1, 1))), left.eq(left - 1),
                         timer.eq(d - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
        return m


def bridge_status_layout():
    """The bridge's counters (saturating): bytes dropped on a full receive FIFO, bytes with a
    low stop bit, unknown command bytes, commands abandoned by the timeout."""
    return data.StructLayout({"overruns": 8, "framing": 8, "bad_commands": 8,
                              "timeouts": 8})


class UARTBridge(wiring.Component):
    """The serial protocol of this module's docstring, as an AXI4-Lite master.

    Parameters
    ----------
    addr_bits : int
        The bus's byte-address width; the upper bits of a command's 32-bit address must be 0
        (else the command is answered ``SLVERR``, and zero data for a read, without a bus
        transaction).
    divisor : int
        Clock cycles per bit (``clock / baud``), at least 4.
    fifo_depth : int
        Bytes each of the receive and answer FIFOs holds.
    timeout : int
        Byte times (``10 * divisor`` cycles) a command may wait for its next byte.

    Ports
    -----
    rx : In(1), tx : Out(1)
        The serial lines (the host's TX and RX).
    bus : Out(axil_signature(addr_bits))
        One transaction at a time; a write raises ``awvalid`` and ``wvalid`` together
        (``wstrb`` = 0xF) and holds each until its own handshake, in whichever order the
        slave takes them.  The bus may take any time to answer.
    status : Out(bridge_status_layout())
        Saturating counters of the events the docstring lists.
    """

    def __init__(self, addr_bits, divisor, fifo_depth=16, timeout=16):
        check_int("addr_bits", addr_bits, 3, 32)
        check_int("divisor", divisor, 4, 1 << 20)
        check_int("fifo_depth", fifo_depth, 2, 4096)
        check_int("timeout", timeout, 2, 1 << 16)
        self.addr_bits, self.divisor = addr_bits, divisor
        self.fifo_depth, self.timeout = fifo_depth, timeout
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "bus": Out(axil_signature(addr_bits)),
            "status": Out(bridge_status_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.urx = urx = UARTRx(self.divisor)
        m.submodules.utx = utx = UARTTx(self.divisor)
        # received bytes, bit 8 marking a byte with a low stop bit (it abandons its command)
        m.submodules.rxq = rxq = SyncFIFOBuffered(width=9, depth=self.fifo_depth)
        m.submodules.txq = txq = SyncFIFOBuffered(width=8, depth=self.fifo_depth)
        m.d.comb += [
            urx.rx.eq(self.rx), self.tx.eq(utx.tx),
            rxq.w_data.eq(Cat(urx.data, urx.framing)), rxq.w_en.eq(urx.valid | urx.framing),
            utx.data.eq(txq.r_data), utx.valid.eq(txq.r_rdy), txq.r_en.eq(utx.ready),
        ]
        status, bus = self.status, self.bus

        def bump(counter, event):
            count(m, counter, event, clear=0)        # saturating (hw.csr.count)

        bump(status.overruns, urx.valid & ~rxq.w_rdy)
        bump(status.framing, urx.framing)

        # --- the command parser -----------------------------------------------------------
        byte, bad_byte = rxq.r_data[:8], rxq.r_data[8]
        op = Signal(8)
        word = Signal(64)               # address, then data, shifted in from the top
        got = Signal(range(9))          # bytes of address and data received
        need = Signal(range(9))         # 4 for a read, 8 for a write
        tick = Signal(range(10 * self.divisor))     # cycles of the current byte time
        idle = Signal(range(self.timeout + 1))      # byte times without a byte
        answer = Signal(40)             # the answer's bytes, least significant first
        answer_len = Signal(range(6))
        aw_done, w_done = Signal(), Signal()     # this write's address, data taken
        addr = Signal(32)
        m.d.comb += addr.eq(Mux(op == WRITE, word[:32], word[32:]))
        fits = addr[self.addr_bits:] == 0
        m.d.comb += [
            bus.awaddr.eq(addr), bus.araddr.eq(addr), bus.wdata.eq(word[32:]),
            bus.wstrb.eq(0xF), bus.awprot.eq(0), bus.arprot.eq(0),
        ]

        with m.FSM(name="bridge"):
            with m.State("OP"):
                m.d.comb += rxq.r_en.eq(1)
                with m.If(rxq.r_rdy & ~bad_byte):
                    m.d.sync += [op.eq(byte), got.eq(0), idle.eq(0), tick.eq(0)]
                    with m.If(byte == WRITE):
                        m.d.sync += need.eq(8)
                        m.next = "ARGS"
                    with m.Elif(byte == READ):
                        m.d.sync += need.eq(4)
                        m.next = "ARGS"
                    with m.Else():
                        bump(status.bad_commands, 1)
                        m.d.sync += [answer.eq(NAK), answer_len.eq(1)]
                        m.next = "ANSWER"
            with m.State("ARGS"):
                m.d.comb += rxq.r_en.eq(1)
                with m.If(rxq.r_rdy):
                    m.d.sync += [word.eq(Cat(word[8:], byte)), got.eq(got + 1),
                                 idle.eq(0), tick.eq(0)]
                    with m.If(bad_byte):
                        m.next = "OP"
                    with m.Elif(got + 1 == need):
                        m.next = "BUS"
                with m.Elif(idle == self.timeout):
                    bump(status.timeouts, 1)
                    m.next = "OP"
                with m.Elif(tick == 10 * self.divisor - 1):
                    m.d.sync += [tick.eq(0), idle.eq(idle + 1)]
                with m.Else():
                    m.d.sync += tick.eq(tick + 1)
            with m.State("BUS"):
                with m.If(~fits):
                    m.d.sync += [answer.eq(SLVERR), answer_len.eq(Mux(op == READ, 5, 1))]
                    m.next = "ANSWER"
                with m.Elif(op == WRITE):
                    # the address and the data may be taken in different cycles
                    m.d.comb += [bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done)]
                    aw_now = aw_done | bus.awready
                    w_now = w_done | bus.wready
                    m.d.sync += [aw_done.eq(aw_now), w_done.eq(w_now)]
                    with m.If(aw_now & w_now):
                        m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                        m.next = "B"
                with m.Else():
                    m.d.comb += bus.arvalid.eq(1)
                    with m.If(bus.arready):
                        m.next = "R"
            with m.State("B"):
                m.d.comb += bus.bready.eq(1)
                with m.If(bus.bvalid):
                    m.d.sync += [answer.eq(bus.bresp), answer_len.eq(1)]
                    m.next = "ANSWER"
            with m.State("R"):
                m.d.comb += bus.rready.eq(1)
                with m.If(bus.rvalid):
                    m.d.sync += [answer.eq(Cat(bus.rresp, Const(0, 6), bus.rdata)),
                                 answer_len.eq(5)]
                    m.next = "ANSWER"
            with m.State("ANSWER"):
                m.d.comb += [txq.w_data.eq(answer[:8]), txq.w_en.eq(1)]
                with m.If(txq.w_rdy):
                    m.d.sync += [answer.eq(answer[8:]), answer_len.eq(answer_len - 1)]
                    with m.If(answer_len == 1):
                        m.next = "OP"
        return m
