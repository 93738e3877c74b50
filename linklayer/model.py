"""Golden model of the link layer: what the sender puts on the wire for a packet, and what the
receiver makes of any sequence of wire beats (which packets it delivers, which
acknowledgements it sends, which counters move).  Timing-free: the tests compare the
hardware's decisions with these, and its deliveries with what was sent."""

from linklayer.config import (TRAILER_SEQ_BITS, LinkLayerParams, ack_crc, packet_crc,
                              trailer)


__all__ = ["wire_beats", "RxModel", "Ack"]


def wire_beats(params, packet, seq):
    """The beats the sender puts on the wire for ``packet`` (``[(tdata, tkeep, tuser)]``,
    as the DMA gave it) numbered ``seq``: ``(tdata, tkeep, tlast, tuser)`` each."""
    crc = packet_crc(params, packet, seq)
    return [(d, k, 0, u) for d, k, u in packet] + [(trailer(seq, crc), 0, 1, 1)]


class Ack:
    """An acknowledgement as the receiver sends it."""

    def __init__(self, seq, nak):
        self.seq, self.nak = seq, nak
        self.crc = ack_crc(seq, nak)

    def __eq__(self, other):
        return (self.seq, self.nak, self.crc) == (other.seq, other.nak, other.crc)

    def __repr__(self):
        return f"{'NAK' if self.nak else 'ACK'} {self.seq}"


class RxModel:
    """The receiver: feed it wire beats (:meth:`beat`); it keeps ``delivered`` (the packets,
    ``[(tdata, tkeep, tuser)]`` each), ``acks`` (:class:`Ack` in order) and the counters of
    :class:`linklayer.rtl.LinkRx`."""

    def __init__(self, params, lparams: LinkLayerParams = LinkLayerParams()):
        self.params, self.lparams = params, lparams
        self.mod = 1 << lparams.seq_bits
        self.expected = 0
        self.nak_sent = False
        self.current, self.discard = [], False
        self.delivered, self.acks = [], []
        self.counters = dict(delivered=0, crc_errors=0, seq_errors=0, duplicates=0,
                             too_long=0, naks=0)
        self.bad_seq_field = False

    def _ack(self, seq, nak):
        self.acks.append(Ack(seq % self.mod, nak))

    def _bad(self):
        if not self.nak_sent:
            self.nak_sent = True
            self.counters["naks"] += 1
            self._ack(self.expected - 1, 1)

    def beat(self, tdata, tkeep, tlast, tuser):
        p, lp = self.params, self.lparams
        if not tlast:
            if self.discard or len(self.current) == lp.max_packet_beats:
                self.discard = True
            else:
                self.current.append((tdata, tkeep, tuser))
            return
        packet, discard = self.current, self.discard
        self.current, self.discard = [], False
        seq_field = tdata & ((1 << TRAILER_SEQ_BITS) - 1)
        seq = seq_field & (self.mod - 1)
        crc = tdata >> TRAILER_SEQ_BITS & 0xFFFFFFFF
        framed = (tkeep == 0 and tuser == 1 and tdata >> (TRAILER_SEQ_BITS + 32) == 0
                  and packet and not discard)
        good = framed and crc == packet_crc(p, packet, seq_field)
        behind = (self.expected - seq) % self.mod
        if good and seq_field >> lp.seq_bits:
            self.bad_seq_field = True
        elif good and behind == 0:
            self.delivered.append(packet)
            self.counters["delivered"] += 1
            self._ack(self.expected, 0)
            self.expected = (self.expected + 1) % self.mod
            self.nak_sent = False
        elif good and behind < self.mod // 2:
            self.counters["duplicates"] += 1
            self._ack(self.expected - 1, 0)
        elif good:
            self.counters["seq_errors"] += 1
            self._bad()
        else:
            self.counters["too_long" if discard else "crc_errors"] += 1
            self._bad()
