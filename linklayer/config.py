"""The link layer's geometry, its wire format and its acknowledgement messages.

Plain Python shared by the RTL (:mod:`linklayer.rtl`), the golden model
(:mod:`linklayer.model`) and the tests.

On the wire (the link's AXI4-Stream, :func:`hw.interfaces.link_signature`) a packet is its
beats as the DMA engine gave them, every one with ``tlast`` low, then a **trailer** beat:
``tlast`` high, ``tuser`` high (control, like a header: a link model that charges only data
lets it pass free), ``tkeep`` zero, ``tdata`` = the packet's sequence number (bits 0-15) and
its CRC-32 (bits 16-47).  The CRC (:mod:`linklayer.crc`) covers each beat's record — its
``tdata``, ``tkeep`` (whole bytes) and a flags byte holding ``tuser`` — then the sequence
number as two bytes, all least significant byte first: exactly :func:`zlib.crc32` of those
bytes (:func:`packet_crc`).

An **acknowledgement** travels the other way on a channel of its own: ``seq``, ``nak`` and
the CRC-32 of the 16-bit record ``seq | nak << 15`` (:func:`ack_crc`).  ``ACK s`` says every
packet up to ``s`` arrived; ``NAK s`` says the same and asks for everything after ``s`` again.
"""

import dataclasses
import zlib

from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from hw.csr import Field, Reg, RegisterMap
from hw.params import T3Params, check_int, check_params, check_pow2, param


__all__ = ["LinkLayerParams", "ack_signature", "beat_record", "packet_crc", "ack_crc",
           "trailer", "TRAILER_SEQ_BITS", "link_registers", "LINK_COUNTERS", "LINK_STATUS"]


#: Bits of the trailer's sequence number field (the ``seq_bits`` in use are its low bits).
TRAILER_SEQ_BITS = 16


@dataclasses.dataclass(frozen=True)
class LinkLayerParams:
    """Geometry of one link direction's sender (:class:`linklayer.rtl.LinkTx`) and receiver
    (:class:`linklayer.rtl.LinkRx`).

    Parameters
    ----------
    seq_bits : int
        Sequence number width, 4 to 15; at most ``2**(seq_bits - 1)`` packets may wait for
        their acknowledgement (``replay_packets`` is refused above that).
    max_packet_beats : int
        Longest packet, in beats (a longer one stops the sender with ``status.too_long``
        rather than be cut); at most ``replay_beats`` and half of ``rx_beats``.
    replay_beats : int
        The sender's replay buffer, beats (a power of two): every beat sent stays until its
        packet is acknowledged.  For line rate it must hold what the link carries in a round
        trip (:meth:`round_trip_beats`).
    replay_packets : int
        Packets the replay buffer holds at most (a power of two).
    rx_beats : int
        The receiver's buffer, beats (a power of two): a packet is delivered only after its
        trailer checked, so it holds the packet arriving and those waiting to leave.
    timeout : int
        Cycles without an acknowledgement, packets waiting, before the sender replays them
        (a lost trailer or a lost acknowledgement ends this way).
    """

    seq_bits: int = param(12, "sequence number width", 4, 15)
    max_packet_beats: int = param(64, "longest packet in beats (at most replay_beats and half "
                                      "of rx_beats)", 1, 1 << 15)
    replay_beats: int = param(256, "the sender's replay buffer in beats", 4, 1 << 16, pow2=True)
    replay_packets: int = param(32, "packets the replay buffer holds (at most "
                                    "2**(seq_bits - 1))", 1, 1 << 14, pow2=True)
    rx_beats: int = param(256, "the receiver's buffer in beats", 4, 1 << 16, pow2=True)
    timeout: int = param(2048, "cycles without an acknowledgement before a replay", 16, 1 << 24)

    def __post_init__(self):
        check_params(self)
        check_pow2("replay_packets", self.replay_packets, 1, 1 << (self.seq_bits - 1))
        check_int("max_packet_beats", self.max_packet_beats, 1,
                  min(self.replay_beats, self.rx_beats // 2),
                  note="at most replay_beats and half of rx_beats")

    @staticmethod
    def round_trip_beats(latency, num, den, max_packet_beats):
        """Beats a link of ``latency`` cycles and ``num/den`` beats a cycle carries between a
        packet's first beat and its acknowledgement's return, the packet's own beats and
        trailer included: what a replay buffer needs to keep the link busy."""
        cycles = 2 * latency + (max_packet_beats + 1) * den // num + 8
        return -(-cycles * num // den) + max_packet_beats + 1

    def to_dict(self):
        return dataclasses.asdict(self)


def ack_signature(params: LinkLayerParams):
    """The acknowledgement channel, seen from the receiver that sends it: ``valid`` for one
    cycle per message, no backpressure (a lost message is covered by the sender's timeout)."""
    return wiring.Signature({
        "valid": Out(1),
        "nak": Out(1),
        "seq": Out(params.seq_bits),
        "crc": Out(32),
    })


def beat_record(params: T3Params, tdata, tkeep, tuser):
    """The bytes of one beat the CRC covers."""
    keep_bytes = -(-params.beat_bytes // 8)
    return (tdata.to_bytes(params.beat_bytes, "little") +
            tkeep.to_bytes(keep_bytes, "little") + bytes([tuser & 1]))


def packet_crc(params: T3Params, beats, seq):
    """The CRC-32 of a packet (``beats``: ``(tdata, tkeep, tuser)``) sent as ``seq``."""
    data = b"".join(beat_record(params, *b) for b in beats)
    return zlib.crc32(data + seq.to_bytes(2, "little"))


def ack_crc(seq, nak):
    """The CRC-32 of an acknowledgement."""
    return zlib.crc32((seq | nak << 15).to_bytes(2, "little"))


def trailer(seq, crc):
    """The trailer beat's ``tdata``."""
    return seq | crc << TRAILER_SEQ_BITS


#: The link layer's counters in a node (block ``link``): the sender's (packets sent the first
#: time, packets sent again, NAKs taken, replays for a timeout, acknowledgements dropped for a
#: bad CRC) and the receiver's (packets delivered; dropped for a bad CRC or framing, for a
#: sequence number ahead, as duplicates, for being too long; NAKs sent).
LINK_COUNTERS = {
    "tx_packets": "packets sent (first time)",
    "tx_replayed": "packets sent again (replays)",
    "tx_naks": "NAKs taken",
    "tx_timeouts": "replays for a timeout",
    "tx_ack_errors": "acknowledgements dropped for a bad CRC",
    "rx_delivered": "packets delivered to the DMA engine",
    "rx_crc_errors": "packets dropped for a bad CRC or framing",
    "rx_seq_errors": "packets dropped for a sequence number ahead (one lost before)",
    "rx_duplicates": "packets dropped as delivered before (acknowledged again)",
    "rx_too_long": "packets dropped for more than max_packet_beats beats",
    "rx_naks": "NAKs sent",
}

#: Sticky until reset: what the link layer cannot repair.
LINK_STATUS = Reg("status", None, "ro", "sticky until reset", fields=(
    Field("tx_too_long", doc="a packet from the DMA engine reached max_packet_beats without "
                             "its end: the sender stopped rather than cut it"),
    Field("tx_bad_ack", doc="an acknowledgement (its CRC good) of a packet never sent"),
    Field("rx_bad_seq_field", doc="a trailer (its CRC good) with bits set above seq_bits: a "
                                  "sender of other settings; the packet was dropped")))


def link_registers(lparams: LinkLayerParams):
    """The link layer's registers in a node (block ``link``; a :class:`hw.csr.RegisterMap`)."""
    return RegisterMap([
        Reg("info", 32, "ro", "geometry", fields=(
            Field("seq_bits", 8, "sequence number bits"),
            Field("max_packet_beats", 16, "longest packet, beats"))),
        LINK_STATUS,
        *[Reg(name, 32, "ro", doc) for name, doc in LINK_COUNTERS.items()],
    ])
