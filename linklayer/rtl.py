"""The link layer in hardware: :class:`LinkTx` between a DMA engine's ``tx`` and its link,
:class:`LinkRx` between a link and the next DMA engine's ``rx`` (``docs/linklayer.md``).

The sender numbers each packet, sends its beats as they come (every beat also into the
replay buffer) and appends a trailer with the sequence number and the CRC-32 of the packet
(:mod:`linklayer.config`).  The receiver keeps a packet's beats until its trailer checked:
a good packet in sequence is delivered and acknowledged; anything else — a bad CRC or
framing, a packet longer than ``max_packet_beats``, a sequence number ahead of the one
expected — is dropped whole and answered with one NAK until a good packet comes; a packet
already delivered (a replay's duplicate) is dropped and acknowledged again.  On a NAK, or when
``timeout`` cycles pass with packets waiting and no acknowledgement, the sender sends every
unacknowledged packet again, oldest first (go-back-N, as PCIe's data link layer).

Timing: the sender adds no cycle to a beat (it enters the output queue the cycle it is
accepted) and one beat per packet, the trailer; the receiver adds a packet's length (it is
stored, then delivered at a beat a cycle) plus three cycles.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.data import StructLayout
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, csr_signature
from hw.interfaces import link_signature
from hw.params import T3Params
from hw.pipeline import SkidBuffer
from linklayer.config import (LINK_COUNTERS, TRAILER_SEQ_BITS, LinkLayerParams, ack_signature,
                              link_registers)
from linklayer.crc import PRESET, crc_update


__all__ = ["LinkTx", "LinkRx", "LinkPair", "LinkLayer", "TX_STATUS", "RX_STATUS"]


#: The sender's sticky status bits.
TX_STATUS = StructLayout({"too_long": 1, "bad_ack": 1})

#: The receiver's sticky status bits.
RX_STATUS = StructLayout({"bad_seq_field": 1})


def _record(params: T3Params, tdata, tkeep, tuser):
    """The CRC record of a beat: ``tdata``, ``tkeep`` padded to whole bytes, a flags byte."""
    keep_bits = -(-params.beat_bytes // 8) * 8
    return Cat(tdata, tkeep, Const(0, keep_bits - params.beat_bytes), tuser, Const(0, 7))


def _record_bits(params: T3Params):
    return params.beat_bits + -(-params.beat_bytes // 8) * 8 + 8


def _finish(crc):
    return crc ^ 0xFFFFFFFF


def _output_queue(m, params: T3Params, port, depth):
    """A queue of ``depth`` beats (``tdata``, ``tkeep``, ``tuser``, ``tlast``, in that order
    from bit 0) driving the link port ``port``."""
    width = params.beat_bits + params.beat_bytes + 1
    out = SyncFIFOBuffered(width=width + 1, depth=depth)
    m.d.comb += [
        port.tvalid.eq(out.r_rdy), out.r_en.eq(port.tready),
        port.tdata.eq(out.r_data[:params.beat_bits]),
        port.tkeep.eq(out.r_data[params.beat_bits:width - 1]),
        port.tuser.eq(out.r_data[width - 1]), port.tlast.eq(out.r_data[width]),
    ]
    return out


def _trailer_beat(params: T3Params, lparams: LinkLayerParams, seq, crc):
    """The output queue's word of a trailer: sequence number and CRC in ``tdata``, ``tkeep``
    zero, ``tuser`` and ``tlast`` high."""
    return Cat(seq, Const(0, TRAILER_SEQ_BITS - lparams.seq_bits), crc,
               Const(0, params.beat_bits - TRAILER_SEQ_BITS - 32), Const(0, params.beat_bytes),
               1, 1)


class LinkTx(wiring.Component):
    """The sending half of the link layer.

    Ports
    -----
    i : In(link_signature)
        Packets from the DMA engine (``tlast`` ends one).  Not ready while the replay buffer
        lacks room for a beat, while ``replay_packets`` packets wait for acknowledgement (at a
        packet's start), while it replays, and for good after ``status.too_long``.
    o : Out(link_signature)
        To the link: the packets' beats with ``tlast`` low, each followed by its trailer.
    ack : In(ack_signature)
        Acknowledgements from the receiver at the link's other end.
    status : Out(TX_STATUS)
        Sticky: ``too_long`` (a packet reached ``max_packet_beats`` without ``tlast``: the
        sender stops rather than cut it), ``bad_ack`` (an acknowledgement, its CRC good, of
        a packet never sent: ignored).
    packets, replayed, naks, timeouts, ack_errors : Out(32)
        Packets sent (first time), packets sent again, NAKs taken, replays for a timeout,
        acknowledgements dropped for a bad CRC.
    """

    def __init__(self, params: T3Params, lparams: LinkLayerParams = LinkLayerParams()):
        self.params, self.lparams = params, lparams
        super().__init__({
            "i": In(link_signature(params)),
            "o": Out(link_signature(params)),
            "ack": In(ack_signature(lparams)),
            "status": Out(TX_STATUS),
            "packets": Out(32), "replayed": Out(32), "naks": Out(32), "timeouts": Out(32),
            "ack_errors": Out(32),
        })

    def elaborate(self, platform):
        p, lp = self.params, self.lparams
        m = Module()
        width = p.beat_bits + p.beat_bytes + 1                      # tdata, tkeep, tuser
        beats, packets, mod = lp.replay_beats, lp.replay_packets, 1 << lp.seq_bits
        abits, pbits = (beats - 1).bit_length(), max(1, (packets - 1).bit_length())
        m.submodules.mem = mem = Memory(shape=width, depth=beats, init=[])
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        depth = 4
        m.submodules.out = out = _output_queue(m, p, self.o, depth)

        # the packets waiting for acknowledgement: a queue of (first beat, beats, seq, crc)
        starts = Array(Signal(abits, name=f"start{k}") for k in range(packets))
        lengths = Array(Signal(range(lp.max_packet_beats + 1), name=f"len{k}")
                        for k in range(packets))
        seqs = Array(Signal(lp.seq_bits, name=f"seq{k}") for k in range(packets))
        crcs = Array(Signal(32, name=f"crc{k}") for k in range(packets))
        head, tail = Signal(pbits), Signal(pbits)
        count = Signal(range(packets + 1))
        used = Signal(range(beats + 1))               # beats held in the replay buffer
        wptr = Signal(abits)
        next_seq = Signal(lp.seq_bits)
        acked = Signal(lp.seq_bits, init=mod - 1)     # the last packet acknowledged
        cur_start = Signal(abits)
        cur_len = Signal(range(lp.max_packet_beats + 1))
        crc = Signal(32)
        tr_crc = Signal(32)
        replay = Signal()                             # a replay is asked for
        timer = Signal(range(lp.timeout + 1))
        rp_idx = Signal(pbits)
        rp_off = Signal(range(lp.max_packet_beats + 1))
        rd_valid = Signal()                           # a replayed beat comes out of the RAM
        restart = Signal()                            # a replay starts

        push = Signal()
        push_data = Signal(width + 1)
        m.d.comb += [out.w_en.eq(push), out.w_data.eq(push_data)]

        # --- acknowledgements ----------------------------------------------------------
        ack_record = Cat(self.ack.seq, Const(0, 15 - lp.seq_bits), self.ack.nak)
        ack_good = Signal()
        m.d.comb += ack_good.eq(
            self.ack.crc == _finish(crc_update(Const(PRESET, 32), ack_record, 16)))
        ahead = (next_seq - 1 - self.ack.seq)[:lp.seq_bits] >= mod // 2   # never sent
        forward = (self.ack.seq - acked)[:lp.seq_bits] < mod // 2
        with m.If(self.ack.valid):
            with m.If(~ack_good):
                m.d.sync += self.ack_errors.eq(self.ack_errors + 1)
            with m.Elif(ahead):
                m.d.sync += self.status.bad_ack.eq(1)
            with m.Else():
                with m.If(forward):
                    m.d.sync += acked.eq(self.ack.seq)
                with m.If(self.ack.nak):
                    m.d.sync += [replay.eq(1), self.naks.eq(self.naks + 1)]

        # a packet leaves the queue once acknowledged, one a cycle
        pop = Signal()
        m.d.comb += pop.eq((count != 0) & ((acked - seqs[head])[:lp.seq_bits] < mod // 2))
        freed = Mux(pop, lengths[head], 0)
        with m.If(pop):
            m.d.sync += head.eq(head + 1)

        # --- sending --------------------------------------------------------------------
        accept = Signal()
        taken = Mux(accept, 1, 0)
        queued = Signal()                             # a trailer entered the queue
        m.d.sync += [used.eq(used + taken - freed),
                     count.eq(count + Mux(queued, 1, 0) - Mux(pop, 1, 0))]

        record = _record(p, self.i.tdata, self.i.tkeep, self.i.tuser)
        crc_next, crc_end = Signal(32), Signal(32)
        seq_field = Cat(next_seq, Const(0, TRAILER_SEQ_BITS - lp.seq_bits))
        m.d.comb += [
            crc_next.eq(crc_update(Mux(cur_len == 0, Const(PRESET, 32), crc), record,
                                   _record_bits(p))),
            crc_end.eq(_finish(crc_update(crc_next, seq_field, 16))),
        ]

        with m.FSM():
            with m.State("SEND"):
                with m.If(replay & (cur_len == 0)):
                    m.d.comb += restart.eq(1)
                    m.d.sync += replay.eq(0)
                    with m.If(count != 0):
                        m.d.sync += [rp_idx.eq(Mux(pop, head + 1, head)), rp_off.eq(0)]
                        with m.If(~(pop & (count == 1))):
                            m.next = "REPLAY"
                with m.Else():
                    overlong = cur_len == lp.max_packet_beats - 1
                    room = (used < beats) & out.w_rdy & ~self.status.too_long & \
                        ((cur_len != 0) | (count < packets))
                    with m.If(self.i.tvalid & room & overlong & ~self.i.tlast):
                        m.d.sync += self.status.too_long.eq(1)
                    m.d.comb += [
                        self.i.tready.eq(room & ~(overlong & ~self.i.tlast)),
                        accept.eq(self.i.tvalid & self.i.tready),
                    ]
                    with m.If(accept):
                        m.d.comb += [
                            wp.addr.eq(wptr), wp.en.eq(1),
                            wp.data.eq(Cat(self.i.tdata, self.i.tkeep, self.i.tuser)),
                            push.eq(1),
                            push_data.eq(Cat(self.i.tdata, self.i.tkeep, self.i.tuser, 0)),
                        ]
                        m.d.sync += [wptr.eq(wptr + 1), cur_len.eq(cur_len + 1),
                                     crc.eq(crc_next)]
                        with m.If(cur_len == 0):
                            m.d.sync += cur_start.eq(wptr)
                        with m.If(self.i.tlast):
                            m.d.sync += tr_crc.eq(crc_end)
                            m.next = "TRAILER"
            with m.State("TRAILER"):
                with m.If(out.w_rdy):
                    m.d.comb += [
                        push.eq(1), queued.eq(1),
                        push_data.eq(_trailer_beat(p, lp, next_seq, tr_crc)),
                    ]
                    m.d.sync += [
                        starts[tail].eq(cur_start), lengths[tail].eq(cur_len),
                        seqs[tail].eq(next_seq), crcs[tail].eq(tr_crc),
                        tail.eq(tail + 1), next_seq.eq(next_seq + 1), cur_len.eq(0),
                        self.packets.eq(self.packets + 1),
                    ]
                    m.next = "SEND"
            with m.State("REPLAY"):
                # a beat is read when the queue will have room for it the cycle after
                with m.If(out.w_level + rd_valid < depth):
                    m.d.comb += rp.addr.eq(starts[rp_idx] + rp_off)
                    m.d.sync += [rd_valid.eq(1), rp_off.eq(rp_off + 1)]
                    with m.If(rp_off == lengths[rp_idx] - 1):
                        m.next = "REPLAY_TRAILER"
                with m.Else():
                    m.d.sync += rd_valid.eq(0)
            with m.State("REPLAY_TRAILER"):
                m.d.sync += rd_valid.eq(0)
                with m.If(~rd_valid & out.w_rdy):
                    m.d.comb += [
                        push.eq(1),
                        push_data.eq(_trailer_beat(p, lp, seqs[rp_idx], crcs[rp_idx])),
                    ]
                    m.d.sync += [rp_idx.eq(rp_idx + 1), rp_off.eq(0),
                                 self.replayed.eq(self.replayed + 1)]
                    with m.If((rp_idx + 1)[:pbits] == tail):
                        m.next = "SEND"
                    with m.Else():
                        m.next = "REPLAY"
        with m.If(rd_valid):                          # the replayed beat read last cycle
            m.d.comb += [push.eq(1), push_data.eq(Cat(rp.data, 0))]

        # --- the replay timer -------------------------------------------------------------
        with m.If((count == 0) | pop | restart):
            m.d.sync += timer.eq(0)
        with m.Elif(timer == lp.timeout - 1):
            m.d.sync += [timer.eq(0), replay.eq(1), self.timeouts.eq(self.timeouts + 1)]
        with m.Else():
            m.d.sync += timer.eq(timer + 1)
        return m


class LinkRx(wiring.Component):
    """The receiving half of the link layer.

    Ports
    -----
    i : In(link_signature)
        From the link: packets with their trailers.  Not ready while the buffer is full (or,
        for a trailer, while ``ends`` packets wait to leave).
    o : Out(link_signature)
        To the DMA engine: each good packet once, in order, its last beat's ``tlast`` high.
    ack : Out(ack_signature)
        Acknowledgements to the sender: ACK of each packet delivered, ACK of the last one
        again for a duplicate, one NAK for the first bad or out-of-order packet after a good.
    status : Out(RX_STATUS)
        Sticky: ``bad_seq_field`` (a trailer whose CRC held had bits set above ``seq_bits``:
        a sender of other settings; the packet was dropped).
    delivered, crc_errors, seq_errors, duplicates, too_long, naks : Out(32)
        Packets delivered; packets dropped for a bad CRC or framing, for a sequence number
        ahead of the one expected, as duplicates, for more than ``max_packet_beats`` beats;
        NAKs sent.
    """

    #: Packets that may wait to leave (their last beats' places).
    ENDS = 16

    def __init__(self, params: T3Params, lparams: LinkLayerParams = LinkLayerParams()):
        self.params, self.lparams = params, lparams
        #: the sequence number of the packet the receiver waits for (not a port: the proof of
        #: its acknowledgements' order, ``tests/test_formal.py``, states its invariant on it)
        self.expected = Signal(lparams.seq_bits, name="expected")
        super().__init__({
            "i": In(link_signature(params)),
            "o": Out(link_signature(params)),
            "ack": Out(ack_signature(lparams)),
            "status": Out(RX_STATUS),
            "delivered": Out(32), "crc_errors": Out(32), "seq_errors": Out(32),
            "duplicates": Out(32), "too_long": Out(32), "naks": Out(32),
        })

    def elaborate(self, platform):
        p, lp = self.params, self.lparams
        m = Module()
        width = p.beat_bits + p.beat_bytes + 1
        beats, mod = lp.rx_beats, 1 << lp.seq_bits
        abits = (beats - 1).bit_length()
        m.submodules.mem = mem = Memory(shape=width, depth=beats, init=[])
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        m.submodules.ends = ends = SyncFIFOBuffered(width=abits + 1, depth=self.ENDS)
        depth = 4
        m.submodules.out = out = _output_queue(m, p, self.o, depth)

        # pointers one bit wider than the address: full and empty apart
        wptr, cptr, rptr = Signal(abits + 1), Signal(abits + 1), Signal(abits + 1)
        held = (wptr - rptr)[:abits + 1]
        cur_len = Signal(range(lp.max_packet_beats + 1))
        discard = Signal()                            # the packet grew too long
        crc = Signal(32)
        expected = self.expected
        nak_sent = Signal()

        ack_valid, ack_nak, ack_seq = Signal(), Signal(), Signal(lp.seq_bits)
        m.d.sync += ack_valid.eq(0)
        ack_record = Cat(ack_seq, Const(0, 15 - lp.seq_bits), ack_nak)
        m.d.comb += [self.ack.valid.eq(ack_valid), self.ack.nak.eq(ack_nak),
                     self.ack.seq.eq(ack_seq),
                     self.ack.crc.eq(_finish(crc_update(Const(PRESET, 32), ack_record, 16)))]

        # --- in ------------------------------------------------------------------------
        trailer = self.i.tlast
        m.d.comb += self.i.tready.eq(Mux(trailer, ends.w_rdy, discard | (held < beats)))
        record = _record(p, self.i.tdata, self.i.tkeep, self.i.tuser)
        crc_next, good, behind = Signal(32), Signal(), Signal(lp.seq_bits)
        seq_field = self.i.tdata[:TRAILER_SEQ_BITS]
        seq = self.i.tdata[:lp.seq_bits]
        high = self.i.tdata[lp.seq_bits:TRAILER_SEQ_BITS]
        framed = (self.i.tkeep == 0) & self.i.tuser & \
            (self.i.tdata[TRAILER_SEQ_BITS + 32:] == 0) & (cur_len != 0) & ~discard
        m.d.comb += [
            crc_next.eq(crc_update(Mux(cur_len == 0, Const(PRESET, 32), crc), record,
                                   _record_bits(p))),
            good.eq(framed & (self.i.tdata[TRAILER_SEQ_BITS:TRAILER_SEQ_BITS + 32] ==
                              _finish(crc_update(crc, seq_field, 16)))),
            behind.eq(expected - seq),
        ]
        with m.If(self.i.tvalid & self.i.tready):
            with m.If(~trailer):
                with m.If(discard | (cur_len == lp.max_packet_beats)):
                    m.d.sync += discard.eq(1)
                with m.Else():
                    m.d.comb += [wp.addr.eq(wptr[:abits]), wp.en.eq(1),
                                 wp.data.eq(Cat(self.i.tdata, self.i.tkeep, self.i.tuser))]
                    m.d.sync += [wptr.eq(wptr + 1), cur_len.eq(cur_len + 1),
                                 crc.eq(crc_next)]
            with m.Else():
                m.d.sync += [cur_len.eq(0), discard.eq(0)]
                bad = Signal()
                with m.If(good & (high != 0)):
                    m.d.sync += [wptr.eq(cptr), self.status.bad_seq_field.eq(1)]
                with m.Elif(good & (behind == 0)):
                    m.d.comb += [ends.w_en.eq(1), ends.w_data.eq(wptr - 1)]
                    m.d.sync += [cptr.eq(wptr), expected.eq(expected + 1), nak_sent.eq(0),
                                 ack_valid.eq(1), ack_nak.eq(0), ack_seq.eq(expected),
                                 self.delivered.eq(self.delivered + 1)]
                with m.Elif(good & (behind < mod // 2)):        # delivered before
                    m.d.sync += [wptr.eq(cptr), ack_valid.eq(1), ack_nak.eq(0),
                                 ack_seq.eq(expected - 1),
                                 self.duplicates.eq(self.duplicates + 1)]
                with m.Elif(good):                                # one went missing
                    m.d.sync += [wptr.eq(cptr), self.seq_errors.eq(self.seq_errors + 1)]
                    m.d.comb += bad.eq(1)
                with m.Else():
                    m.d.sync += wptr.eq(cptr)
                    with m.If(discard):
                        m.d.sync += self.too_long.eq(self.too_long + 1)
                    with m.Else():
                        m.d.sync += self.crc_errors.eq(self.crc_errors + 1)
                    m.d.comb += bad.eq(1)
                with m.If(bad & ~nak_sent):
                    m.d.sync += [nak_sent.eq(1), ack_valid.eq(1), ack_nak.eq(1),
                                 ack_seq.eq(expected - 1), self.naks.eq(self.naks + 1)]

        # --- out: committed beats, read a beat a cycle, the last of each packet marked ------
        rd_valid, rd_last = Signal(), Signal()
        m.d.sync += rd_valid.eq(0)
        # (a committed packet's end enters ``ends`` as it commits, and shows at the FIFO's
        # output a cycle or two later: its beats wait for it)
        with m.If((rptr != cptr) & ends.r_rdy & (out.w_level + rd_valid < depth)):
            last = ends.r_data == rptr
            m.d.comb += [rp.addr.eq(rptr[:abits]), ends.r_en.eq(last)]
            m.d.sync += [rptr.eq(rptr + 1), rd_valid.eq(1), rd_last.eq(last)]
        m.d.comb += [out.w_en.eq(rd_valid), out.w_data.eq(Cat(rp.data, rd_last))]
        return m


class LinkPair(wiring.Component):
    """A link direction's two ends in one design, the wire between them left outside: the
    sender's ``i`` and ``o`` (``tx_i``, ``tx_o``) and acknowledgement input (``ack_i``), the
    receiver's ``i`` and ``o`` (``rx_i``, ``rx_o``) and acknowledgement output (``ack_o``),
    with every counter and status of both (``tx_<name>``, ``rx_<name>``).  The top the cocotb
    tests drive through a faulty wire of their own."""

    TX_COUNTERS = ("packets", "replayed", "naks", "timeouts", "ack_errors")
    RX_COUNTERS = ("delivered", "crc_errors", "seq_errors", "duplicates", "too_long", "naks")

    def __init__(self, params: T3Params, lparams: LinkLayerParams = LinkLayerParams()):
        self.params, self.lparams = params, lparams
        self.tx, self.rx = LinkTx(params, lparams), LinkRx(params, lparams)
        super().__init__({
            "tx_i": In(link_signature(params)), "tx_o": Out(link_signature(params)),
            "rx_i": In(link_signature(params)), "rx_o": Out(link_signature(params)),
            "ack_i": In(ack_signature(lparams)), "ack_o": Out(ack_signature(lparams)),
            "tx_status": Out(TX_STATUS), "rx_status": Out(RX_STATUS),
            **{f"tx_{n}": Out(32) for n in self.TX_COUNTERS},
            **{f"rx_{n}": Out(32) for n in self.RX_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.rx = tx, rx = self.tx, self.rx
        wiring.connect(m, wiring.flipped(self.tx_i), tx.i)
        wiring.connect(m, tx.o, wiring.flipped(self.tx_o))
        wiring.connect(m, wiring.flipped(self.rx_i), rx.i)
        wiring.connect(m, rx.o, wiring.flipped(self.rx_o))
        wiring.connect(m, wiring.flipped(self.ack_i), tx.ack)
        wiring.connect(m, rx.ack, wiring.flipped(self.ack_o))
        m.d.comb += [self.tx_status.eq(tx.status), self.rx_status.eq(rx.status)]
        m.d.comb += [getattr(self, f"tx_{n}").eq(getattr(tx, n)) for n in self.TX_COUNTERS]
        m.d.comb += [getattr(self, f"rx_{n}").eq(getattr(rx, n)) for n in self.RX_COUNTERS]
        return m


class LinkLayer(wiring.Component):
    """A node's link layer: its sender between the DMA engine's ``tx`` and the link to the
    next GPU, its receiver between the link from the previous GPU and the DMA engine's ``rx``,
    and their counters and status as registers (:func:`linklayer.config.link_registers`).

    Ports
    -----
    dma_tx : In(link_signature)
        From the DMA engine's ``tx``.
    tx : Out(link_signature)
        To the link: the packets with their trailers (:class:`LinkTx`).
    rx : In(link_signature)
        From the link, through a register slice (:class:`hw.pipeline.SkidBuffer`: a cycle of
        latency, ``tready`` a register).
    dma_rx : Out(link_signature)
        To the DMA engine's ``rx``: each good packet once, in order (:class:`LinkRx`).
    ack_i : In(ack_signature)
        The acknowledgements of this node's packets, from the next GPU's receiver;
        registered (the sender sees a message a cycle later).
    ack_o : Out(ack_signature)
        This node's receiver's acknowledgements, to the previous GPU's sender.
    csr : In(csr_signature(...))
        The registers: ``info``, ``status``, the counters of
        :data:`linklayer.config.LINK_COUNTERS`.
    """

    def __init__(self, params: T3Params, lparams: LinkLayerParams = LinkLayerParams()):
        self.params, self.lparams = params, lparams
        self.regs = link_registers(lparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        super().__init__({
            "dma_tx": In(link_signature(params)), "tx": Out(link_signature(params)),
            "rx": In(link_signature(params)), "dma_rx": Out(link_signature(params)),
            "ack_i": In(ack_signature(lparams)), "ack_o": Out(ack_signature(lparams)),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        m.submodules.tx = tx = LinkTx(p, self.lparams)
        m.submodules.rx = rx = LinkRx(p, self.lparams)
        wiring.connect(m, wiring.flipped(self.dma_tx), tx.i)
        wiring.connect(m, tx.o, wiring.flipped(self.tx))
        # what arrives from outside the node is registered first: the receiver's CRC check
        # and the sender's acknowledgement check then start from flip-flops (a simulator
        # re-evaluates logic that hangs on a block's inputs at every call of the block: it
        # took 42 % of the ring's time), at a cycle of latency each
        beat = StructLayout({"tdata": p.beat_bits, "tkeep": p.beat_bytes, "tlast": 1,
                             "tuser": 1})
        m.submodules.rx_in = rx_in = SkidBuffer(beat)
        m.d.comb += [rx_in.i.valid.eq(self.rx.tvalid), self.rx.tready.eq(rx_in.i.ready),
                     rx.i.tvalid.eq(rx_in.o.valid), rx_in.o.ready.eq(rx.i.tready)]
        for name in ("tdata", "tkeep", "tlast", "tuser"):
            m.d.comb += [getattr(rx_in.i.payload, name).eq(getattr(self.rx, name)),
                         getattr(rx.i, name).eq(getattr(rx_in.o.payload, name))]
        m.d.sync += [tx.ack.valid.eq(self.ack_i.valid), tx.ack.nak.eq(self.ack_i.nak),
                     tx.ack.seq.eq(self.ack_i.seq), tx.ack.crc.eq(self.ack_i.crc)]
        wiring.connect(m, rx.o, wiring.flipped(self.dma_rx))
        wiring.connect(m, rx.ack, wiring.flipped(self.ack_o))
        values = {name: getattr(tx if name.startswith("tx_") else rx, name[3:])
                  for name in LINK_COUNTERS}
        values["info"] = {"seq_bits": self.lparams.seq_bits,
                          "max_packet_beats": self.lparams.max_packet_beats}
        values["status"] = {"tx_too_long": tx.status.too_long, "tx_bad_ack": tx.status.bad_ack,
                            "rx_bad_seq_field": rx.status.bad_seq_field}
        self.regfile.elaborate(m, self.csr, values)
        return m
