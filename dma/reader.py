"""The DMA engine's tile reader: a dispatched tile (its header and source address) into its
header for the link, one memory read per payload beat under the read credit, and the read
responses into the payload buffer (paper section 4.2.2: the DMA engine reads the triggered
tile and sends it).  ``dma.model.tile_beat_addresses`` is its golden model of the reads."""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.interfaces import ElemType, Op, Source, Stream, request_signature, response_signature
from hw.params import T3Params
from hw.pipeline import WriteAheadFIFO
from .config import DMAParams, header_layout


__all__ = ["TileReader", "job_layout", "READ_EVENTS"]


#: What the reader reports, one pulse each: a read issued (registered for ``read``), a
#: response out of order (taken and dropped), a response in order with its error flag.
READ_EVENTS = ("read", "resp_order", "mem_error")


def job_layout(params: T3Params, dparams: DMAParams):
    """A dispatched tile: its link header (:func:`dma.config.header_layout`: ``beats`` payload
    beats in segments of ``seg_beats``, ``stride`` bytes apart) and ``src``, its first beat's
    address in this GPU's memory."""
    return data.StructLayout({"hdr": header_layout(params, dparams), "src": params.addr_bits})


class TileReader(wiring.Component):
    """Tiles from memory.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    dparams : :class:`dma.config.DMAParams`

    Ports
    -----
    job : In(stream.Signature(:func:`job_layout`))
        A tile to send.  Taken when the reader has issued every read of the tile before and
        the header queue has room.
    tile_hdr : Out(stream.Signature(:func:`dma.config.header_layout`))
        The tiles' headers, in order (a two-entry queue).
    read : Out(stream.Signature(memory request))
        One ``READ`` per payload beat, of the tile's beat addresses in order (segment by
        segment: ``seg_beats`` consecutive beats, the next segment ``stride`` bytes after the
        last one's start), ``stream = COMM``, ``source = DMA``, every byte, ``tag`` the read's
        sequence number (mod ``2 ** tag_bits``).  Held until taken.
    resp : In(stream.Signature(memory response))
        The reads' responses, **in issue order**.  One whose tag is not the next expected is
        taken and dropped with ``events.resp_order``: no tile carries a beat that belongs
        elsewhere.  The last response taken again (a duplicate) is only dropped; any other
        tag means a response was lost, and from then on every response is dropped and the
        tiles wait, until reset (the tags alone could not tell a later response from the
        lost one: ``buffer_beats`` reads may be in flight).  ``resp.ready`` is high whenever
        the payload buffer has room, which the read credit guarantees.
    tile_data : Out(stream.Signature(``beat_bits``))
        The payload beats, in order (the payload buffer, ``buffer_beats`` deep).
    events : Out(``READ_EVENTS``)
        One-cycle pulses: ``read`` in the cycle a read is issued (it is on ``read`` from the
        next), ``resp_order`` and ``mem_error`` in the cycle of the response.

    Timing
    ------
    A job offered in cycle ``c`` to a free reader is taken in ``c``: its header is on
    ``tile_hdr`` from ``c + 2``, its first read is issued in ``c + 1`` and on ``read`` from
    ``c + 2``.  Then one read a cycle while ``read`` is taken and the credit allows: the reads
    issued whose beats have not left on ``tile_data`` never exceed ``buffer_beats``, so a
    response always finds room.  The reader is free again in the cycle after it issued a
    tile's last read (one cycle without a read between tiles, which the payload buffer
    hides).  A response taken in cycle ``r`` is on ``tile_data`` from ``r + 2`` (the timing of
    Amaranth's ``SyncFIFOBuffered``; the buffer is a :class:`hw.pipeline.WriteAheadFIFO`, so the
    tag check reaches its pointer and level, not the write enable of its LUT RAM).
    """

    def __init__(self, params: T3Params, dparams: DMAParams):
        self.params, self.dparams = params, dparams
        self.hdr_layout = header_layout(params, dparams)
        #: the read credit's state, for the proof of its invariant (``DMACreditSpec`` of
        #: ``tests/test_formal.py``): the beats reserved (reads issued, their beats not yet
        #: sent) and its two flags, the read waiting at ``read``, the payload buffer, the next
        #: response's tag, whether a response was lost
        self.reserved = Signal(range(dparams.buffer_beats + 1), name="reserved")
        #: ``reserved < buffer_beats`` and ``reserved + 1 < buffer_beats``, kept with it
        self.room = Signal(init=1, name="room")
        self.below = Signal(init=1, name="below")
        self.rd_v = Signal(name="rd_v")
        #: the payload buffer: ``SyncFIFOBuffered``'s timing, its LUT RAM written ahead (the
        #: response's tag check into the write enable of every LUT-RAM cell of the buffer was
        #: the node's critical path, 13.2 ns, 10.6 of it wires)
        self.data_q = WriteAheadFIFO(width=params.beat_bits, depth=dparams.buffer_beats,
                                     ram_style="distributed")
        self.exp_tag = Signal(max(1, params.tag_bits), name="exp_tag")
        #: a response was lost: every later one is dropped
        self.lost = Signal(name="lost")
        super().__init__({
            "job":       In(stream.Signature(job_layout(params, dparams))),
            "tile_hdr":  Out(stream.Signature(self.hdr_layout)),
            "read":      Out(request_signature(params)),
            "resp":      In(response_signature(params)),
            "tile_data": Out(stream.Signature(params.beat_bits)),
            "events":    Out(data.StructLayout({k: 1 for k in READ_EVENTS})),
        })

    def elaborate(self, platform):
        m = Module()
        p, dp = self.params, self.dparams
        A, beat = p.addr_bits, p.beat_bytes
        job, ev = self.job.payload, self.events

        # --- the job: its header queued, its reads' addresses set up ----------------------------
        m.submodules.hdr_q = hdr_q = WriteAheadFIFO(
            width=self.hdr_layout.as_shape().width, depth=2)
        m.d.comb += [self.tile_hdr.valid.eq(hdr_q.r_rdy), self.tile_hdr.payload.eq(hdr_q.r_data),
                     hdr_q.r_en.eq(self.tile_hdr.ready)]
        reserved = self.reserved
        ag_busy = Signal()
        ag_addr = Signal(A, name="ag_addr")
        ag_in_seg = Signal(dp.len_bits)
        ag_seg_beats = Signal(dp.len_bits)
        ag_stride = Signal(A)
        ag_left = Signal(dp.len_bits)
        # the issue's decisions from registers kept a beat ahead (the segment compare and the
        # next segment's sum were the node's critical path, 15.0 ns, into the enables of the
        # address registers): ag_seg_end is ag_in_seg + 1 == ag_seg_beats, ag_last is
        # ag_left == 1, ag_seg_next is the next segment's first address
        ag_seg_end, ag_last = Signal(name="ag_seg_end"), Signal(name="ag_last")
        ag_seg_next = Signal(A, name="ag_seg_next")

        rd_v = self.rd_v
        rd_addr = Signal(A)
        rd_tag = Signal(max(1, p.tag_bits))
        rd_taken = Signal()
        beat_out = Signal()         # a payload beat left: its credit returns

        job_taken = Signal()
        m.d.comb += [self.job.ready.eq(~ag_busy & hdr_q.w_rdy),
                     job_taken.eq(self.job.valid & self.job.ready),
                     hdr_q.w_en.eq(job_taken), hdr_q.w_data.eq(job.hdr)]
        with m.If(job_taken):
            m.d.sync += [
                ag_busy.eq(1), ag_addr.eq(job.src), ag_in_seg.eq(0),
                ag_seg_beats.eq(job.hdr.seg_beats), ag_stride.eq(job.hdr.stride),
                ag_left.eq(job.hdr.beats),
                ag_seg_end.eq(job.hdr.seg_beats == 1), ag_last.eq(job.hdr.beats == 1),
                ag_seg_next.eq(job.src + job.hdr.stride),
            ]

        # --- the reads, one a cycle under the credit ---------------------------------------------
        issue = Signal()
        room, below = self.room, self.below
        m.d.comb += [issue.eq(ag_busy & (~rd_v | rd_taken) & room), ev.read.eq(issue)]
        with m.If(issue):
            m.d.sync += [rd_v.eq(1), rd_addr.eq(ag_addr), rd_tag.eq(rd_tag + 1),
                         ag_left.eq(ag_left - 1), ag_last.eq(ag_left == 2)]
            with m.If(ag_seg_end):
                m.d.sync += [ag_in_seg.eq(0), ag_addr.eq(ag_seg_next),
                             ag_seg_next.eq(ag_seg_next + ag_stride),
                             ag_seg_end.eq(ag_seg_beats == 1)]
            with m.Else():
                m.d.sync += [ag_in_seg.eq(ag_in_seg + 1), ag_addr.eq(ag_addr + beat),
                             ag_seg_end.eq(ag_in_seg + 2 == ag_seg_beats)]
            with m.If(ag_last):
                m.d.sync += ag_busy.eq(0)
        with m.Elif(rd_taken):
            m.d.sync += rd_v.eq(0)
        # The credit moves by one at most a cycle, so its next value and flags are chosen by
        # the issue and the beat out among values computed from its register (the sum and the
        # compare after the issue, which waits on the memory port's ready, and the beat out, on
        # the link's, were the node's longest path at one placement, 11.5 ns: the received
        # beats' slice through the memory port's pick into the credit's adder and ``room``)
        up, down = Signal(), Signal()
        m.d.comb += [up.eq(issue & ~beat_out), down.eq(beat_out & ~issue)]
        with m.If(up):
            m.d.sync += [reserved.eq(reserved + 1), room.eq(below),
                         below.eq(reserved + 2 < dp.buffer_beats)]
        with m.Elif(down):
            m.d.sync += [reserved.eq(reserved - 1), room.eq(1), below.eq(room)]
        rd = self.read.payload
        m.d.comb += [
            self.read.valid.eq(rd_v), rd_taken.eq(rd_v & self.read.ready),
            # the tag issued with a read is the value of rd_tag before the increment
            rd.addr.eq(rd_addr), rd.op.eq(Op.READ), rd.stream.eq(Stream.COMM),
            rd.source.eq(Source.DMA), rd.mask.eq((1 << beat) - 1),
            rd.etype.eq(ElemType.FP16), rd.tag.eq(rd_tag - 1),
        ]

        # --- read responses -> payload buffer ----------------------------------------------------
        m.submodules.data_q = data_q = self.data_q
        exp_tag = self.exp_tag
        # A response whose tag is not the next one expected is taken and dropped, so no tile
        # carries a beat that belongs elsewhere.  The last one taken again is a duplicate;
        # any other means a response was lost (or its tag corrupted): from then on every
        # response is dropped and the tiles wait (status.resp_order tells the host) until
        # reset.  Were the later ones only compared, the 2**tag_bits-th response after the
        # lost one would carry its tag and be taken in its place (buffer_beats reads may be
        # in flight, more than the tags).
        in_order, lost = Signal(), self.lost
        tag = self.resp.payload.tag
        with m.If(self.resp.valid & (tag != exp_tag) & (tag != (exp_tag - 1)[:len(exp_tag)])):
            m.d.sync += lost.eq(1)
        m.d.comb += [
            in_order.eq((tag == exp_tag) & ~lost),
            data_q.w_data.eq(self.resp.payload.data),
            data_q.w_en.eq(self.resp.valid & in_order),
            self.resp.ready.eq(data_q.w_rdy | ~in_order),
            self.tile_data.valid.eq(data_q.r_rdy), self.tile_data.payload.eq(data_q.r_data),
            data_q.r_en.eq(self.tile_data.ready),
            beat_out.eq(self.tile_data.valid & self.tile_data.ready),
        ]
        with m.If(self.resp.valid & ~in_order):
            m.d.comb += ev.resp_order.eq(1)
        with m.If(self.resp.valid & in_order & data_q.w_rdy):
            m.d.sync += exp_tag.eq(exp_tag + 1)
            m.d.comb += ev.mem_error.eq(self.resp.payload.error)
        return m
