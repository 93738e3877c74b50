"""The DMA engine's receive side: link packets in, one memory write per payload beat out
(paper section 4.2.2: a packet from the previous GPU becomes tracked communication-stream
requests at the memory controller).  ``dma.model.depacketize`` is its golden model."""

from amaranth import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hw.interfaces import Stream, link_signature, mem_request_layout, request_signature
from hw.params import T3Params
from hw.pipeline import SkidBuffer
from .config import HEADER_CHECK_BITS, DMAParams, header_check_of, header_layout


__all__ = ["Depacketizer", "RX_EVENTS"]


#: The receive side's error events (each a ``status`` bit of the DMA engine's, ``docs/dma.md``).
RX_EVENTS = ("rx_framing", "rx_check", "rx_wrong_gpu", "rx_window")


class Depacketizer(wiring.Component):
    """Link packets in, memory write requests out.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    dparams : :class:`dma.config.DMAParams`

    Ports
    -----
    rx : In(:func:`hw.interfaces.link_signature`)
        Packets from the previous GPU: a header beat (``tuser``; :func:`dma.config.header_layout`
        and its check field) then ``beats`` payload beats, ``tlast`` on the last.
    o : Out(:func:`hw.interfaces.request_signature`)
        One request per payload beat written: ``addr`` from the header's ``addr``,
        ``seg_beats`` and ``stride`` (beat by beat along a segment, ``stride`` between
        segments), ``data``, ``mask`` = ``tkeep``, ``op``, ``source``, ``tracked``, ``wg_id``,
        ``wf_id``, ``etype`` from the header, ``stream`` COMM, ``tag`` 0.  From a two-entry
        slice (:class:`hw.pipeline.SkidBuffer`): ``o.valid`` and ``o.payload`` are registers'
        and ``o.ready`` reaches neither ``rx.tready`` nor the beats' registers in its cycle.
    gpu_id : In(``dparams.gpu_bits``)
        This GPU: a packet for another is dropped (``events.rx_wrong_gpu``).
    rx_base, rx_end : In(``addr_bits``), In(``addr_bits + 1``)
        The rx window, ``[rx_base, rx_end)``: a payload beat outside it is taken and not
        written (``events.rx_window``).
    events : Out(``RX_EVENTS`` + ``packet``)
        One-cycle pulses, one per beat at most: ``rx_framing`` (a header beat without
        ``tuser``, with ``tlast``, or of zero beats or segment beats; a header beat where
        payload was due, which is then taken as the next header; a packet shorter or longer
        than its header, or running past the address space), ``rx_check`` (the check field does
        not match), ``rx_wrong_gpu``, ``rx_window``; ``packet``: a header accepted.  A beat
        can raise two (a short packet's last beat outside the window).
    open : Out(1)
        A packet's header was accepted and its payload is not complete.

    Timing
    ------
    A payload beat taken on ``rx`` in cycle ``c`` is offered on ``o`` from ``c + 1``.
    ``rx.tready`` is high for a header beat and for the beats of a packet being dropped
    and, for a payload beat of an accepted packet (written or not), while the slice has room:
    with ``o.ready`` high one payload beat a cycle.
    Nothing of a packet is written outside the range its header names, nor past the address
    space (never wrapped to address 0); a beat marked ``tuser`` always ends what came before.
    """

    def __init__(self, params: T3Params, dparams: DMAParams):
        self.params, self.dparams = params, dparams
        self.hdr_layout = header_layout(params, dparams)
        #: the two-entry slice the beats wait in (its state, for the DMA's proofs)
        self.slice = SkidBuffer(mem_request_layout(params))
        A = params.addr_bits
        super().__init__({
            "rx":     In(link_signature(params)),
            "o":      Out(request_signature(params)),
            "gpu_id": In(dparams.gpu_bits),
            "rx_base": In(A),
            "rx_end": In(A + 1),
            "events": Out(data.StructLayout({k: 1 for k in (*RX_EVENTS, "packet")})),
            "open":   Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, dp = self.params, self.dparams
        A, beat = p.addr_bits, p.beat_bytes
        H = self.hdr_layout.as_shape().width
        rx, ev = self.rx, self.events

        m.submodules.slice = rxq_slice = self.slice
        wiring.connect(m, rxq_slice.o, wiring.flipped(self.o))
        rx_free = rxq_slice.i.ready
        rx_head = data.View(self.hdr_layout, rx.tdata[:H])
        rx_hdr = Signal(self.hdr_layout)
        rx_addr = Signal(A, name="rx_addr")
        # the beats of the segment after this one, counted down (counting up, the next
        # beat's end flag was a sum and a compare with the header's seg_beats, a node's path
        # at one seed, 12.1 ns), and the header's seg_beats - 1 and seg_beats == 1 as
        # registers for each new segment
        rx_seg_rem = Signal(dp.len_bits, name="rx_seg_rem")
        rx_seg_first = Signal(dp.len_bits, name="rx_seg_first")
        rx_seg_one = Signal(name="rx_seg_one")
        rx_left = Signal(dp.len_bits, name="rx_left")
        # kept a beat ahead: rx_seg_end is rx_seg_rem == 0, rx_last is rx_left == 1,
        # rx_seg_next is the next segment's address with its carry (past the address space)
        rx_seg_end, rx_last = Signal(name="rx_seg_end"), Signal(name="rx_last")
        rx_seg_next = Signal(A + 1, name="rx_seg_next")
        rx_past = Signal()          # the next beat's address is past the address space
        rx_hs = Signal()
        m.d.comb += rx_hs.eq(rx.tvalid & rx.tready)

        # A header beat (tuser) where payload was due ends the packet it cut short (what arrived
        # of that packet was written where its header said; rx_framing) and is taken as the
        # next header, so a truncated packet never moves the next packet's payload; a header
        # beat while dropping ends the drop the same way.
        def take_header(cut):
            m.d.comb += rx.tready.eq(1)
            with m.If(rx_hs):
                bad_frame = ~rx.tuser | rx.tlast | (rx_head.beats == 0) | \
                    (rx_head.seg_beats == 0)
                bad_check = rx.tdata[H:H + HEADER_CHECK_BITS] != header_check_of(rx.tdata, H)
                with m.If(bad_frame | bad_check):
                    # refused: the rest of the packet (if this beat is not its last) dropped
                    m.d.comb += [ev.rx_framing.eq(bad_frame), ev.rx_check.eq(~bad_frame)]
                    with m.If(rx.tlast):
                        m.next = "HEADER"
                    with m.Else():
                        m.next = "DROP"
                with m.Elif(rx_head.dst_gpu != self.gpu_id):
                    m.d.comb += ev.rx_wrong_gpu.eq(1)
                    m.next = "DROP"
                with m.Else():
                    m.d.sync += [
                        rx_hdr.eq(rx_head), rx_addr.eq(rx_head.addr),
                        rx_seg_rem.eq(rx_head.seg_beats - 1),
                        rx_seg_first.eq(rx_head.seg_beats - 1),
                        rx_seg_one.eq(rx_head.seg_beats == 1),
                        rx_left.eq(rx_head.beats), rx_past.eq(0),
                        rx_seg_end.eq(rx_head.seg_beats == 1), rx_last.eq(rx_head.beats == 1),
                        rx_seg_next.eq(rx_head.addr + rx_head.stride),
                    ]
                    m.d.comb += ev.packet.eq(1)
                    m.next = "PAYLOAD"
                if cut:
                    m.d.comb += ev.rx_framing.eq(1)      # the packet it cut short

        with m.FSM(name="depacketize") as depacketize:
            m.d.comb += self.open.eq(depacketize.ongoing("PAYLOAD"))
            with m.State("HEADER"):
                take_header(cut=False)
            with m.State("PAYLOAD"):
                with m.If(rx.tvalid & rx.tuser):
                    take_header(cut=True)
                with m.Else():
                    m.d.comb += rx.tready.eq(rx_free)
                with m.If(rx_hs & ~rx.tuser & rx_past):
                    # the header's range runs past the end of the address space: the beats
                    # from there on are dropped, never wrapped around to address 0
                    m.d.comb += ev.rx_framing.eq(1)
                    with m.If(rx.tlast):
                        m.next = "HEADER"
                    with m.Else():
                        m.next = "DROP"
                # the rx window: a beat addressed outside it is not written.  Its end is a
                # register of the engine's (two compares in parallel, not a difference and a
                # compare: that was the DMA's longest path, 11.0 ns, into the error count)
                in_window = Signal()
                m.d.comb += in_window.eq((rx_addr >= self.rx_base) & (rx_addr < self.rx_end))
                with m.If(rx_hs & ~rx.tuser & ~rx_past & ~in_window):
                    m.d.comb += ev.rx_window.eq(1)
                beat_in = rxq_slice.i.payload
                m.d.comb += [
                    beat_in.addr.eq(rx_addr), beat_in.data.eq(rx.tdata),
                    beat_in.mask.eq(rx.tkeep), beat_in.op.eq(rx_hdr.op),
                    beat_in.stream.eq(Stream.COMM), beat_in.source.eq(rx_hdr.source),
                    beat_in.wg_id.eq(rx_hdr.wg_id), beat_in.wf_id.eq(rx_hdr.wf_id),
                    beat_in.tracked.eq(rx_hdr.tracked), beat_in.etype.eq(rx_hdr.etype),
                    beat_in.tag.eq(0),
                    rxq_slice.i.valid.eq(rx.tvalid & ~rx.tuser & ~rx_past & in_window),
                ]
                with m.If(rx_hs & ~rx.tuser & ~rx_past):
                    m.d.sync += [rx_left.eq(rx_left - 1), rx_last.eq(rx_left == 2)]
                    with m.If(rx_seg_end):
                        m.d.sync += [rx_seg_rem.eq(rx_seg_first),
                                     rx_addr.eq(rx_seg_next), rx_past.eq(rx_seg_next[A]),
                                     rx_seg_next.eq(rx_seg_next[:A] + rx_hdr.stride),
                                     rx_seg_end.eq(rx_seg_one)]
                    with m.Else():
                        m.d.sync += [rx_seg_rem.eq(rx_seg_rem - 1), rx_addr.eq(rx_addr + beat),
                                     rx_past.eq((rx_addr + beat)[A]),
                                     rx_seg_end.eq(rx_seg_rem == 1)]
                    with m.If(rx.tlast & ~rx_last):
                        # a short packet: what arrived is written where the header said;
                        # the rest is never invented
                        m.d.comb += ev.rx_framing.eq(1)
                    with m.If(rx.tlast):
                        m.next = "HEADER"
                    with m.Elif(rx_last):
                        m.d.comb += ev.rx_framing.eq(1)   # longer than its header says
                        m.next = "DROP"
            with m.State("DROP"):
                with m.If(rx.tvalid & rx.tuser):
                    take_header(cut=False)
                with m.Else():
                    m.d.comb += rx.tready.eq(1)
                    with m.If(rx_hs & rx.tlast):
                        m.next = "HEADER"
        return m
