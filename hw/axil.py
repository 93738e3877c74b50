"""AXI4-Lite configuration port: the host's (or an FPGA soft core's) view of a node's registers.

:func:`axil_signature` is the bus seen from the host; :class:`AXILiteToCSR` turns it into the
blocks' simple register bus (:func:`hw.csr.csr_signature`) and :class:`CSRDecoder` splits that
bus over several blocks by address; :class:`AXILiteDecoder` splits an AXI4-Lite port itself
over several AXI4-Lite slaves (the board: each GPU's port and the board's registers).  Exported, a port ``cfg`` is ``cfg__awaddr``, ...; bind it
with cocotbext-axi's ``AxiLiteBus.from_prefix(dut, "cfg_")``.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .csr import CSR_DATA_BITS, csr_signature


__all__ = ["axil_signature", "AXILiteToCSR", "AXILiteInputSlice", "AXILiteDecoder",
           "CSRDecoder", "OKAY", "SLVERR"]


OKAY, SLVERR = 0b00, 0b10


def axil_signature(addr_bits):
    """AXI4-Lite, 32-bit data, seen from the host (``Out`` = driven by the host)."""
    return wiring.Signature({
        "awaddr": Out(addr_bits), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(CSR_DATA_BITS), "wstrb": Out(CSR_DATA_BITS // 8), "wvalid": Out(1),
        "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_bits), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(CSR_DATA_BITS), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


class AXILiteToCSR(wiring.Component):
    """AXI4-Lite slave in front of a register bus.

    Ports
    -----
    axil : In(axil_signature(addr_bits))
        Byte addresses; register word ``w`` is at byte ``4 * w``.
    csr : Out(csr_signature(addr_bits - 2))

    Behaviour
    ---------
    One transaction at a time, writes first.  A write is accepted when both ``awvalid`` and
    ``wvalid`` are high (``awready`` and ``wready`` rise together), strobes the register bus in
    that cycle and answers ``bresp`` the next cycle.  A write with ``wstrb`` other than ``0xf``
    or an address not word aligned is not performed and answers ``SLVERR`` (a register is never
    half written).  A read is accepted with ``arready`` and answered ``read_latency + 1``
    cycles later with the word (the register bus answers an address ``read_latency`` cycles
    after it is presented: a :class:`hw.csr.RegisterFile`'s map's, one more behind a
    registered :class:`CSRDecoder`); a misaligned read answers ``SLVERR`` and zero.
    """

    def __init__(self, addr_bits, read_latency=1):
        if not isinstance(read_latency, int) or not 1 <= read_latency <= 8:
            raise ValueError(f"read_latency must be 1 to 8 cycles, not {read_latency!r}")
        self.addr_bits = addr_bits
        self.read_latency = read_latency
        super().__init__({
            "axil": In(axil_signature(addr_bits)),
            "csr":  Out(csr_signature(addr_bits - 2)),
        })

    def elaborate(self, platform):
        m = Module()
        bus, csr = self.axil, self.csr
        r_err = Signal()
        r_wait = Signal(range(self.read_latency))   # cycles of read latency passed
        with m.FSM(name="axil"):
            with m.State("IDLE"):
                with m.If(bus.awvalid & bus.wvalid):
                    ok = (bus.wstrb == 0xF) & (bus.awaddr[:2] == 0)
                    m.d.comb += [
                        bus.awready.eq(1), bus.wready.eq(1),
                        csr.addr.eq(bus.awaddr[2:]), csr.w_data.eq(bus.wdata),
                        csr.w_stb.eq(ok),
                    ]
                    m.d.sync += bus.bresp.eq(SLVERR)
                    with m.If(ok):
                        m.d.sync += bus.bresp.eq(OKAY)
                    m.next = "WRITE_RESP"
                with m.Elif(bus.arvalid):
                    m.d.comb += [bus.arready.eq(1), csr.addr.eq(bus.araddr[2:])]
                    m.d.sync += r_err.eq(bus.araddr[:2] != 0)
                    m.next = "READ_WAIT"
            with m.State("WRITE_RESP"):
                m.d.comb += bus.bvalid.eq(1)
                with m.If(bus.bready):
                    m.next = "IDLE"
            with m.State("READ_WAIT"):
                # the register bus answers the address of read_latency cycles ago
                answer = 1
                if self.read_latency > 1:
                    answer = r_wait == self.read_latency - 1
                    m.d.sync += r_wait.eq(r_wait + 1)
                    with m.If(answer):
                        m.d.sync += r_wait.eq(0)
                with m.If(answer):
                    m.d.sync += [bus.rdata.eq(csr.r_data), bus.rresp.eq(OKAY)]
                    with m.If(r_err):
                        m.d.sync += [bus.rdata.eq(0), bus.rresp.eq(SLVERR)]
                    m.next = "READ_RESP"
            with m.State("READ_RESP"):
                m.d.comb += bus.rvalid.eq(1)
                with m.If(bus.rready):
                    m.next = "IDLE"
        return m


def _windows(kind, window_bits, entries, signature):
    """A decoder's address width and ports: ``bus`` (``In``) reaching every window, one
    ``Out`` port per ``(name, addr_bits)`` entry; refuses an entry wider than its window."""
    addr_bits = window_bits + max(1, (len(entries) - 1).bit_length())
    members = {"bus": In(signature(addr_bits))}
    for name, bits in entries:
        if bits > window_bits:
            raise ValueError(f"{kind} {name!r} needs {bits} address bits, more than the "
                             f"window's {window_bits}")
        members[name] = Out(signature(bits))
    return addr_bits, members


class CSRDecoder(wiring.Component):
    """Splits one register bus over blocks by the word address's upper bits.

    Parameters
    ----------
    window_bits : int
        Word-address bits of each block's window (every block's register file must fit).
    blocks : list of (name, addr_bits) or (name, addr_bits, read_latency)
        Block ``k`` answers at word addresses ``k << window_bits`` onwards; its port is
        ``blocks[k][0]`` (``Out(csr_signature(addr_bits))``), whose ``r_data`` answers an
        address ``read_latency`` cycles later (1 unless given: its map's
        :attr:`hw.csr.RegisterMap.read_latency`).  Addresses beyond the last block read as
        zero and ignore writes.

    registered : bool
        Each block's ``addr``, ``w_stb`` and ``w_data`` come from registers of its own, which
        the placer puts by the block: on an FPGA the bus spans the chip, and the write decode
        inside a block followed the bus's wires in the same cycle.  A write then acts a cycle
        later, and a read is answered two cycles after its address (``read_latency``);
        connect an :class:`AXILiteToCSR` with the same ``read_latency``.  A block's ``addr``
        and ``w_data`` change only with an address in its window (they hold otherwise).

    Timing: ``read_latency`` cycles from an address on ``bus`` to its word on ``bus.r_data``
    (the blocks' longest, one more when ``registered``); a block that answers sooner has its
    ``r_data`` delayed by registers to match.
    """

    def __init__(self, window_bits, blocks, registered=False):
        self.window_bits = window_bits
        self.blocks, self.latency = [], {}
        for entry in blocks:
            name, addr_bits, *rest = entry
            latency = rest[0] if rest else 1
            if len(rest) > 1 or latency not in (1, 2):
                raise ValueError(f"block {name!r}: a read latency of 1 or 2 cycles, not "
                                 f"{entry!r}")
            self.blocks.append((name, addr_bits))
            self.latency[name] = latency
        self.registered = registered
        self.read_latency = max(self.latency.values(), default=1) + int(registered)
        self.addr_bits, members = _windows("block", window_bits, self.blocks, csr_signature)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        select = bus.addr[self.window_bits:]
        # the block and whether the address was inside its registers, read_latency cycles ago
        last = [Signal.like(select, name=f"last{k}") for k in range(self.read_latency)]
        last_in = [Signal(name=f"last_in{k}") for k in range(self.read_latency)]
        m.d.sync += [last[0].eq(select), last_in[0].eq(0)]
        for k in range(1, self.read_latency):
            m.d.sync += [last[k].eq(last[k - 1]), last_in[k].eq(last_in[k - 1])]
        for index, (name, addr_bits) in enumerate(self.blocks):
            port = getattr(self, name)
            inside = (select == index) & (bus.addr[addr_bits:self.window_bits] == 0)
            if self.registered:
                # each block's address and data load only with an address in its window (a
                # block's reads have no side effects, and its writes need w_stb): copies
                # with different enables, which Yosys cannot merge into one register whose
                # wires would span the chip again (with one enable it did)
                with m.If(select == index):
                    m.d.sync += [port.addr.eq(bus.addr[:addr_bits]), port.w_data.eq(bus.w_data)]
                m.d.sync += port.w_stb.eq(bus.w_stb & inside)
            else:
                m.d.comb += [
                    port.addr.eq(bus.addr[:addr_bits]),
                    port.w_data.eq(bus.w_data),
                    port.w_stb.eq(bus.w_stb & inside),
                ]
            with m.If(inside):
                m.d.sync += last_in[0].eq(1)
            r_data = port.r_data
            for k in range(self.read_latency - int(self.registered) - self.latency[name]):
                delayed = Signal.like(r_data, name=f"{name}_r_data{k}")
                m.d.sync += delayed.eq(r_data)
                r_data = delayed
            with m.If(last_in[-1] & (last[-1] == index)):
                m.d.comb += bus.r_data.eq(r_data)
        return m


class AXILiteInputSlice(wiring.Component):
    """Registers every channel of an AXI4-Lite port: the host's requests (AW, W, AR) and the
    slave's responses (B, R).  Each channel holds one transfer in a register and takes the next
    when it has passed it on; its ``*ready`` is "the register is empty", itself a register.
    Every transfer takes one cycle longer and a channel takes one every other cycle, which a
    configuration port does not notice; in return no logic behind the slice depends
    combinationally on any input of the port, ``bready`` and ``rready`` included (Verilator
    re-evaluates all logic that does at every ``eval``, twice a clock period under cocotb).

    Ports: ``i`` (``In(axil_signature)``, from the host), ``o`` (``Out``, to the slave).
    """

    def __init__(self, addr_bits):
        self.addr_bits = addr_bits
        super().__init__({"i": In(axil_signature(addr_bits)),
                          "o": Out(axil_signature(addr_bits))})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        # (source, sink, valid, ready, fields): requests flow i -> o, responses o -> i
        for src, dst, valid, ready, fields in (
                (i, o, "awvalid", "awready", ("awaddr", "awprot")),
                (i, o, "wvalid", "wready", ("wdata", "wstrb")),
                (i, o, "arvalid", "arready", ("araddr", "arprot")),
                (o, i, "bvalid", "bready", ("bresp",)),
                (o, i, "rvalid", "rready", ("rdata", "rresp"))):
            full = Signal(name=f"{valid[:-5]}_full")
            m.d.comb += [getattr(src, ready).eq(~full), getattr(dst, valid).eq(full)]
            with m.If(getattr(dst, valid) & getattr(dst, ready)):
                m.d.sync += full.eq(0)
            with m.If(getattr(src, valid) & ~full):
                m.d.sync += full.eq(1)
                m.d.sync += [getattr(dst, f).eq(getattr(src, f)) for f in fields]
        return m


class AXILiteDecoder(wiring.Component):
    """Splits one AXI4-Lite port over several slaves by the address's upper bits: slave ``k``
    answers the byte addresses ``k << window_bits`` onwards, seeing the address within its
    window.

    Parameters
    ----------
    window_bits : int
        Byte-address bits of each slave's window.
    slaves : list of (name, addr_bits)
        Slave ``k``'s port is ``Out(axil_signature(addr_bits))``, ``addr_bits`` ≤
        ``window_bits``; an address inside the window but beyond ``addr_bits``, or beyond the
        last window, answers ``SLVERR`` (and zero for a read) without reaching a slave.

    Ports: ``bus`` (``In(axil_signature(...))``, from the master) and one per slave.

    Behaviour: one transaction at a time, writes first, every channel registered.  A write is
    taken when ``awvalid`` and ``wvalid`` are both high (``awready`` and ``wready`` rise
    together); its address and data go to the slave, each held until its own handshake, and the
    slave's ``bresp`` comes back a cycle after the slave's.  A read likewise.  A slave may take
    any time; nothing else is taken meanwhile.
    """

    def __init__(self, window_bits, slaves):
        self.window_bits = window_bits
        self.slaves = list(slaves)
        self.addr_bits, members = _windows("slave", window_bits, self.slaves, axil_signature)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        addr = Signal(self.addr_bits)
        wdata = Signal.like(bus.wdata)
        wstrb = Signal.like(bus.wstrb)
        aw_pend, w_pend, ar_pend = Signal(), Signal(), Signal()
        sel = addr[self.window_bits:]
        ports = [(getattr(self, name), bits) for name, bits in self.slaves]

        def inside(k, bits):
            return (sel == k) & (addr[bits:self.window_bits] == 0)
        hit = Signal()
        m.d.comb += hit.eq(Cat(inside(k, bits) for k, (_, bits) in enumerate(ports)).any())
        for k, (port, bits) in enumerate(ports):
            here = inside(k, bits)
            m.d.comb += [port.awaddr.eq(addr[:bits]), port.araddr.eq(addr[:bits]),
                         port.wdata.eq(wdata), port.wstrb.eq(wstrb),
                         port.awvalid.eq(aw_pend & here), port.wvalid.eq(w_pend & here),
                         port.arvalid.eq(ar_pend & here)]
        with m.FSM(name="axil_decoder"):
            with m.State("IDLE"):
                with m.If(bus.awvalid & bus.wvalid):
                    m.d.comb += [bus.awready.eq(1), bus.wready.eq(1)]
                    m.d.sync += [addr.eq(bus.awaddr), wdata.eq(bus.wdata),
                                 wstrb.eq(bus.wstrb), aw_pend.eq(1), w_pend.eq(1)]
                    m.next = "WRITE"
                with m.Elif(bus.arvalid):
                    m.d.comb += bus.arready.eq(1)
                    m.d.sync += [addr.eq(bus.araddr), ar_pend.eq(1)]
                    m.next = "READ"
            with m.State("WRITE"):
                with m.If(~hit):
                    m.d.sync += [aw_pend.eq(0), w_pend.eq(0), bus.bresp.eq(SLVERR),
                                 bus.bvalid.eq(1)]
                    m.next = "WRITE_RESP"
                for k, (port, bits) in enumerate(ports):
                    with m.If(inside(k, bits)):
                        with m.If(port.awready):
                            m.d.sync += aw_pend.eq(0)
                        with m.If(port.wready):
                            m.d.sync += w_pend.eq(0)
                        m.d.comb += port.bready.eq(1)
                        with m.If(port.bvalid):
                            m.d.sync += [bus.bresp.eq(port.bresp), bus.bvalid.eq(1)]
                            m.next = "WRITE_RESP"
            with m.State("WRITE_RESP"):
                with m.If(bus.bready):
                    m.d.sync += bus.bvalid.eq(0)
                    m.next = "IDLE"
            with m.State("READ"):
                with m.If(~hit):
                    m.d.sync += [ar_pend.eq(0), bus.rresp.eq(SLVERR), bus.rdata.eq(0),
                                 bus.rvalid.eq(1)]
                    m.next = "READ_RESP"
                for k, (port, bits) in enumerate(ports):
                    with m.If(inside(k, bits)):
                        with m.If(port.arready):
                            m.d.sync += ar_pend.eq(0)
                        m.d.comb += port.rready.eq(1)
                        with m.If(port.rvalid):
                            m.d.sync += [bus.rresp.eq(port.rresp), bus.rdata.eq(port.rdata),
                                         bus.rvalid.eq(1)]
                            m.next = "READ_RESP"
            with m.State("READ_RESP"):
                with m.If(bus.rready):
                    m.d.sync += bus.rvalid.eq(0)
                    m.next = "IDLE"
        return m
