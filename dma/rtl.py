"""The DMA engine: trigger queue, pre-programmed command table, tile address generator, link
packetizer and depacketizer, remote stores' write combining (paper section 4.2.2;
``docs/design.md`` section 5)."""

from amaranth import Array, Cat, Module, Mux, Signal, Value, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, count, csr_signature
from hw.interfaces import (Op, Source, link_signature, popcount, request_signature,
                           response_signature, trigger_layout)
from hw.params import T3Params
from hw.pipeline import SkidBuffer
from .config import (MODE, DMAParams, dma_registers, header_layout,
                     remote_register, window_layout)
from .combiner import Combiner
from .depacketizer import RX_EVENTS, Depacketizer
from .packetizer import Packetizer
from .reader import TileReader


__all__ = ["DMAEngine", "COUNTER_BITS", "FIRST_BEAT_LATENCY"]


#: Width of the statistics counters (saturating).
COUNTER_BITS = 32

#: Cycles from a trigger's handshake to its tile's header on ``tx``, not counting the memory's
#: read latency, when nothing stalls: trigger queue 2 (``SyncFIFOBuffered``) and its register
#: slice 1, dispatch 3 (take, load command, check), job hand-off 2 (address generator takes the
#: job, registers the first read, which ``mem`` takes), payload buffer 2
#: (``SyncFIFOBuffered``); the header leaves with the first payload beat available.  A read
#: taken on ``mem`` in cycle ``c`` and answered on ``resp`` in cycle ``c + L`` puts the header
#: on the link in cycle ``trigger + 10 + L``.
FIRST_BEAT_LATENCY = 10


def _greater(a, b):
    """``a > b`` for unsigned values, as two compares of half the width in parallel and a
    select: one carry chain of the whole width (63 bits for the tile's end against its
    command's size) into the dispatch's decision was the node's longest path at one placement
    (11.2 ns, 2.7 of it the chain)."""
    width = max(len(a), len(b))
    half = width // 2
    a_hi, b_hi = a[half:], b[half:]
    return (a_hi > b_hi) | ((a_hi == b_hi) & (a[:half] > b[:half]))


class DMAEngine(wiring.Component):
    """DMA engine of one GPU node.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    dparams : :class:`dma.config.DMAParams`

    Ports
    -----
    trig : In(stream.Signature(trigger layout))
        The Tracker's triggers (``wg_id``, ``wf_id``, ``addr`` = tile start, ``region`` =
        command index).  They enter a ``trigger_depth`` queue; ``trig.ready`` is low only while
        the queue is full (the Tracker then holds its trigger; none is dropped).
    remote : In(stream.Signature(memory request))
        The CUs' stores to the ``remote_map`` window (ring step 1).  Each goes to
        ``remote_dst_gpu`` at ``remote_dst_base + (addr - remote_base)``, keeping ``op``,
        ``mask`` (as ``tkeep``), ``tracked``, ``wg_id``, ``wf_id`` and ``etype``.  Write
        combining: consecutive stores to consecutive addresses with the same attributes share
        one packet of up to ``remote_burst`` beats; a packet leaves when the run breaks, is
        full, or no store has come for ``remote_flush`` cycles.  A ``READ`` or an address
        outside the window is taken and dropped with ``status.remote_range``.  The port is a
        register slice (``remote.ready`` a register; :class:`dma.combiner.Combiner`): a store
        enters the combining the cycle after it is taken at the earliest, and none in the
        cycle after a window's base or size is written.
    mem : Out(stream.Signature(memory request))
        Communication-stream requests into the memory controller: the tiles' beat ``READ``\\ s
        (``source = DMA``, ``tag`` = read sequence number) and the received packets'
        ``STORE``/``UPDATE``\\ s (``source`` and ``tracked`` from the packet header).  The two
        take turns (round robin); a request offered on ``mem`` holds until taken.
    resp : In(stream.Signature(memory response))
        Responses to the DMA's reads, **in issue order** (the memory controller's queue and the
        DRAM are in order); a response whose tag is not the next expected is taken and dropped
        with ``status.resp_order``: no tile carries a beat that belongs elsewhere (a duplicate
        shifts nothing; after a lost response the tiles wait until reset; see
        :class:`dma.reader.TileReader`).  ``resp.ready`` is high whenever the payload buffer
        has room, which the read credits guarantee: reads in flight plus buffered beats never
        exceed ``buffer_beats``.
    tx : Out(link_signature)
        Packets to the next GPU (AXI4-Stream): a header beat (``tuser = 1``, layout
        :func:`dma.config.header_layout`) then ``beats`` payload beats, ``tlast`` on the last.
    rx : In(link_signature)
        Packets from the previous GPU; each payload beat becomes one ``mem`` request.  A header
        must pass its check field (``status.rx_check``); a cut, short, long or out-of-range
        packet is written only where its header says (``status.rx_framing``); a header beat
        where payload was due starts the next packet; ``status.rx_open`` is high while a
        packet is incomplete (``docs/dma.md``).
    csr : In(csr_signature(...))
        Register file (:func:`dma.config.dma_registers`), read in two cycles (its map's
        ``read_latency``; writes act at the next edge).  A command's registers are locked
        while it holds tiles of an incomplete block or dispatches a trigger (a write is ignored,
        ``status.cmd_busy``); ``cmd.forget`` releases them.
    window : Out(:func:`dma.config.window_layout`) × ``remote_windows``
        The ``remote_map`` windows as programmed (``base``, ``size`` = the registers
        ``remote_base``, ``remote_size``, and ``remote<k>_...`` of the others): the node's
        address decoder sends the CUs' stores inside any of them to ``remote``.  Follows a
        register write in the next cycle.

    Timing
    ------
    A trigger is dispatched in 3 cycles after it leaves the queue (take, load command,
    check); the address generator then issues one beat read per cycle while it has credit,
    and prepares the next tile while the current one streams out, so the link carries one
    header beat per tile and otherwise a payload beat every cycle the memory delivers one.
    """

    def __init__(self, params: T3Params, dparams: DMAParams):
        self.params = params
        self.dparams = dparams
        self.regs = dma_registers(params, dparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        self.trig_layout = trigger_layout(params, dparams.commands)
        dparams.check_against(params)
        self.hdr_layout = header_layout(params, dparams)
        #: the tile reader, and its read credit's state for the proof of its invariant (not
        #: ports; the ``DMACreditSpec`` of ``tests/test_formal.py``)
        self.reader = TileReader(params, dparams)
        self.reserved, self.rd_v = self.reader.reserved, self.reader.rd_v
        self.data_q, self.exp_tag = self.reader.data_q, self.reader.exp_tag
        self.resp_lost = self.reader.lost
        #: the command's tile_cols, ld and their product as TAKE loaded them (the proof
        #: ``dma_span`` holds the product equal to theirs whatever the host writes when)
        self.c_tcols = Signal(dparams.dim_bits, name="c_tcols")
        self.c_ld = Signal(dparams.dim_bits, name="c_ld")
        self.c_prod = Signal(2 * dparams.dim_bits, name="c_prod")
        #: the send side and the receive side (the latter's slice, ``depacketizer.slice``, is
        #: state the proofs read)
        self.packetizer = Packetizer(params, dparams)
        self.combiner = Combiner(params, dparams)
        self.depacketizer = Depacketizer(params, dparams)
        super().__init__({
            "trig":   In(stream.Signature(self.trig_layout)),
            "remote": In(request_signature(params)),
            "mem":    Out(request_signature(params)),
            "resp":   In(response_signature(params)),
            "tx":     Out(link_signature(params)),
            "rx":     In(link_signature(params)),
            "csr":    In(csr_signature(self.regs.addr_bits)),
            "window": Out(window_layout(params)).array(dparams.remote_windows),
        })

    def elaborate(self, platform):
        m = Module()
        p, dp, regs = self.params, self.dparams, self.regfile
        n, G = dp.commands, dp.max_granularity
        boff = p.beat_offset_bits
        A = p.addr_bits

        # --- registers and statistics ---------------------------------------------------
        cnt = {name: Signal(COUNTER_BITS, name=f"cnt_{name}") for name in (
            "errors", "triggers", "blocks", "tiles_sent", "remote_sent", "remote_packets",
            "beats_sent",
            "beats_received", "packets_received", "reads", "link_busy", "trigger_stall")}
        info = {"commands": n, "max_granularity": G, "buffer_beats": dp.buffer_beats}
        regs.elaborate(m, self.csr, {"info": info, **cnt})
        clear_counters = regs.command("cmd", "clear")
        forget_blocks = regs.command("cmd", "forget")
        enable = regs.rw("ctrl").enable
        gpu_id = regs.rw("gpu_id")
        ev = {k: Signal(name=f"ev_{k}") for k in (
            "no_command", "out_of_region", "remote_range", "mem_error", "resp_order",
            "rx_framing", "rx_wrong_gpu", "rx_check", "cmd_busy", "rx_window")}
        rx_open = Signal()
        regs.status(m, "status", **ev, rx_open=rx_open)
        # errors count two cycles after their events: the events come late in the cycle (the
        # remote window's compare, the received header's checks), so they are registered as they
        # are, summed in the next cycle and added in the one after (their sum into n_errors,
        # after the window compare, was the node's worst path: 11.9 ns)
        ev_q = Signal(len(ev))
        n_errors = Signal(range(len(ev) + 1))
        m.d.sync += [ev_q.eq(Cat(*ev.values())), n_errors.eq(popcount(ev_q))]
        inc = {k: Signal(name=f"inc_{k}") for k in (
            "triggers", "blocks", "tiles_sent", "remote_packets", "packets_received")}
        # these count in the cycle after their events, registered as they are (the dispatch's
        # decision into the enables of the 32-bit blocks counter was the node's longest path in
        # the DMA at one placement, 10.7 ns); an event in the cycle of a clear is cleared with it
        for k, event in inc.items():
            late = Signal(name=f"inc_{k}_r")
            m.d.sync += late.eq(event & ~clear_counters)
            count(m, cnt[k], late, clear_counters)
        with m.If(clear_counters):
            m.d.sync += cnt["errors"].eq(0)
        with m.Elif(n_errors != 0):
            total = cnt["errors"] + n_errors
            m.d.sync += cnt["errors"].eq(Mux(total[COUNTER_BITS], (1 << COUNTER_BITS) - 1,
                                              total[:COUNTER_BITS]))

        # --- trigger queue -----------------------------------------------------------------
        m.submodules.trig_q = trig_q = SyncFIFOBuffered(
            width=self.trig_layout.as_shape().width, depth=dp.trigger_depth)
        m.d.comb += [
            trig_q.w_data.eq(self.trig.payload.as_value()),
            trig_q.w_en.eq(self.trig.valid),
            self.trig.ready.eq(trig_q.w_rdy),
        ]
        count(m, cnt["trigger_stall"], self.trig.valid & ~trig_q.w_rdy, clear_counters)
        # the queue's head from registers, not from the block RAM's output (5.6 ns on an ECP5):
        # the dispatcher's command select and the command registers' write lock start from it
        # (in a node, 17.0 ns from the RAM through the lock into the registers' enables); the
        # head's own register, not a multiplexer after the slice's read pointer, since the
        # dispatcher indexes the command table by its region at once
        m.submodules.trig_head = trig_head = SkidBuffer(self.trig_layout, registered_out=True)
        m.d.comb += [trig_head.i.valid.eq(trig_q.r_rdy), trig_head.i.payload.eq(trig_q.r_data),
                     trig_q.r_en.eq(trig_head.i.ready)]

        # --- dispatcher: trigger + command -> job --------------------------------------------
        def table(field):
            return Array(Value.cast(regs.rw(f"cmd{c}_{field}")) for c in range(n))

        cur = Signal(self.trig_layout)
        head = trig_head.o.payload
        c_idx = Signal(dp.command_bits)
        c_exists = Signal()
        c_mode = Signal(MODE.layout)
        c_src, c_dst = Signal(A, name="c_src"), Signal(A, name="c_dst")
        # dst_base - src_base (mod 2**A), from LOAD: a job's destination is its source plus
        # this, one sum (the difference and the sum after the pending store's read were the
        # DMA's longest path, into the job register)
        c_shift = Signal(A, name="c_shift")
        c_cols, c_ld = Signal(dp.dim_bits, name="c_cols"), self.c_ld
        c_trows, c_tcols = Signal(dp.dim_bits, name="c_trows"), self.c_tcols
        # taken with the command: the row stride in bytes (ld << eshift), and the tile's span in
        # elements, (tile_cols - 1) * ld + tile_rows, as two terms: tile_cols * ld and
        # tile_rows - ld; LOAD's sum of the tile's end then starts from registers (the multiply
        # and the sum after it in one cycle were the DMA's longest path alone, 11.2 ns).  The
        # product is each command's own register, multiplied from its registers: it follows a
        # write of them a cycle late, so TAKE waits in the cycle after such a write
        # (``table_fresh``).  Multiplied at TAKE, from the trigger head's register through the
        # table's select, it was the DMA's and a node's longest path (10.2 and 11.8 ns, 3.9 of
        # them the multiplier); from the registers' next values, through their write lock
        # (the dispatch's state) into the multiplier, the DMA's alone (12.7 ns)
        c_stride = Signal(dp.dim_bits + 2)
        c_prod = self.c_prod
        span_prod = Array(Signal(2 * dp.dim_bits, name=f"cmd{c}_span_prod") for c in range(n))
        table_fresh = Signal()
        for c in range(n):
            m.d.sync += span_prod[c].eq(table("tile_cols")[c] * table("ld")[c])
        m.d.sync += table_fresh.eq(Cat(regs.write_strobe(f"cmd{c}_{f}") for c in range(n)
                                       for f in ("tile_cols", "ld")).any())
        c_dr = Signal(signed(dp.dim_bits + 1))

        def mode(name):
            return c_mode[name]

        eshift = Signal(2)          # log2(element bytes): 1 for fp16/bf16, 2 for fp32/int32
        m.d.comb += eshift.eq(1 + mode("etype")[1])
        stride = Signal(A + 2 * dp.dim_bits)
        seg_beats = Signal(16 + dp.dim_bits)
        tile_beats = Signal(32 + dp.dim_bits)
        size = Signal(A + 2 * dp.dim_bits + 2)
        offset = Signal(A + 1)      # cur.addr - src_base, bit A set when negative
        end = Signal(A + 2 * dp.dim_bits + 3)   # offset + the tile's span in bytes
        granularity = Signal(8)

        pend_depth = n * G
        m.submodules.pend = pend = memory.Memory(shape=self.trig_layout, depth=pend_depth,
                                                 init=[])
        pend_w = pend.write_port()
        pend_r = pend.read_port(domain="comb")
        held = Array(Signal(range(G + 1), name=f"held{c}") for c in range(n))
        rel_k = Signal(range(G + 1))

        job_v = Signal()
        job = Signal(self.hdr_layout)       # the header fields plus the source address
        job_src = Signal(A)
        # the destination is the source plus the command's shift, summed after the job
        # register (``job.addr`` is not kept): summed into it, after the pending store's read
        # in RELEASE, the dispatch's state through that read and the sum's carry chain into
        # the job register was the node's longest path at one placement (11.6 ns)
        job_shift = Signal(A, name="job_shift")
        job_taken = Signal()

        def job_fields(t):
            # the job register's fields, without its valid (``job_v``)
            return [
                job_src.eq(t.addr),
                job_shift.eq(c_shift),
                job.dst_gpu.eq(mode("dst_gpu")),
                job.src_gpu.eq(gpu_id),
                job.op.eq(mode("op")),
                job.etype.eq(mode("etype")),
                job.source.eq(Source.DMA),
                job.tracked.eq(mode("tracked")),
                job.wg_id.eq(t.wg_id),
                job.wf_id.eq(t.wf_id),
                job.beats.eq(tile_beats),
                job.seg_beats.eq(seg_beats),
                job.stride.eq(stride),
            ]

        with m.If(job_taken):
            m.d.sync += job_v.eq(0)

        could_take = Signal()
        with m.FSM(name="dispatch") as dispatch:
            with m.State("TAKE"):
                # (not waiting on a ``forget``: the trigger taken is counted after it, in
                # LOAD or later, as it would be a cycle later; with the wait, the register
                # decoder's address through the forget strobe's decode reached the trigger
                # head's ``o.valid``, a node's worst path at one seed, 10.4 ns)
                with m.If(could_take):
                    m.d.comb += trig_head.o.ready.eq(1)
                    t_mode = data.View(MODE.layout, table("mode")[head.region])
                    m.d.sync += [
                        c_prod.eq(span_prod[head.region]),
                        c_dr.eq(table("tile_rows")[head.region] - table("ld")[head.region]),
                        c_stride.eq(table("ld")[head.region] << (1 + t_mode.etype[1])),
                        cur.eq(head),
                        c_idx.eq(head.region),
                        c_exists.eq(head.region < n),
                        c_mode.eq(table("mode")[head.region]),
                        c_src.eq(table("src_base")[head.region]),
                        c_dst.eq(table("dst_base")[head.region]),
                        c_cols.eq(table("cols")[head.region]),
                        c_ld.eq(table("ld")[head.region]),
                        c_trows.eq(table("tile_rows")[head.region]),
                        c_tcols.eq(table("tile_cols")[head.region]),
                    ]
                    m.next = "LOAD"
            with m.State("LOAD"):
                cur_offset = (cur.addr - c_src)[:A + 1]     # bit A set when below src_base
                m.d.sync += [
                    stride.eq(c_stride),
                    seg_beats.eq((c_trows << eshift) >> boff),
                    tile_beats.eq(((c_trows << eshift) >> boff) * c_tcols),
                    # the tile's end within the command's buffer, summed here so that
                    # CHECK compares two registers: the sum there, into the dispatch's
                    # decision, was the node's longest path (12.6 ns).  With tile_cols 0 the
                    # span is negative, but CHECK refuses the command first
                    end.eq(cur_offset + ((c_prod + c_dr) << eshift)),
                    size.eq((c_ld * c_cols) << eshift),
                    offset.eq(cur_offset),
                    c_shift.eq(c_dst - c_src),
                    granularity.eq(Mux(mode("granularity") == 0, 1, mode("granularity"))),
                    # RELEASE's count, from its first slot: cleared here, whatever CHECK
                    # decides (cleared by CHECK's decision to release, the decision, through
                    # the range compare, reached its enables: a failing family of round 24's node)
                    rel_k.eq(0),
                ]
                m.next = "CHECK"
            with m.State("CHECK"):
                # The trigger is written into its command's next free pending slot in every
                # CHECK cycle, whatever CHECK decides: the slot is free until `held` counts
                # it, so a refused, direct or waiting trigger's copy is overwritten by the
                # next held one.  The write's address and enable come from registers: the
                # decision into them was the node's longest path (13.1 ns).
                m.d.comb += [
                    pend_w.addr.eq(c_idx * G + held[c_idx]),
                    pend_w.data.eq(cur),
                    pend_w.en.eq(c_exists),
                ]
                # one job register: wait until the previous job has gone.  Its fields take
                # the trigger's job whenever it is free, whatever CHECK decides (they matter
                # only with job_v): the decision reaches job_v, not the enables of the
                # register's hundred flip-flops (the range compare into them was the node's
                # critical path at one placement, 11.6 ns)
                with m.If(~job_v | job_taken):
                    m.d.sync += job_fields(cur)
                    m.d.comb += inc["triggers"].eq(1)
                    bad_cmd = ~c_exists | ~mode("valid") | (granularity > G) | \
                        ~mode("op").matches(Op.STORE, Op.UPDATE) | (c_tcols == 0) | \
                        (seg_beats == 0) | (tile_beats[dp.len_bits:] != 0)
                    bad_range = (cur.addr[:boff] != 0) | offset[A] | _greater(end, size)
                    with m.If(bad_cmd):
                        m.d.comb += ev["no_command"].eq(1)
                        m.next = "TAKE"
                    with m.Elif(bad_range):
                        m.d.comb += ev["out_of_region"].eq(1)
                        m.next = "TAKE"
                    with m.Elif(granularity == 1):
                        m.d.sync += job_v.eq(1)
                        m.d.comb += inc["blocks"].eq(1)
                        m.next = "TAKE"
                    with m.Else():
                        with m.If(held[c_idx] + 1 >= granularity):
                            m.d.sync += held[c_idx].eq(0)
                            m.d.comb += inc["blocks"].eq(1)
                            m.next = "RELEASE"
                        with m.Else():
                            m.d.sync += held[c_idx].eq(held[c_idx] + 1)
                            m.next = "TAKE"
            with m.State("RELEASE"):
                m.d.comb += pend_r.addr.eq(c_idx * G + rel_k)
                with m.If(~job_v | job_taken):
                    m.d.sync += [job_v.eq(1),
                                 *job_fields(data.View(self.trig_layout, pend_r.data))]
                    m.d.sync += rel_k.eq(rel_k + 1)
                    with m.If(rel_k + 1 == granularity):
                        m.next = "TAKE"
        m.d.comb += could_take.eq(dispatch.ongoing("TAKE") & trig_head.o.valid & enable &
                                  ~table_fresh)
        with m.If(forget_blocks):           # after the FSM: a forget wins over a count
            for c in range(n):
                m.d.sync += held[c].eq(0)

        # A command's registers cannot change under tiles it holds or a trigger it dispatches
        # (the held tiles would leave with the new destination, or overrun their slots under a
        # lower granularity): such a write is refused and latches status.cmd_busy.
        cmd_fields = ("mode", "src_base", "dst_base", "rows", "cols", "ld", "tile_rows",
                      "tile_cols")
        # The head's term is TAKE's condition, from registers alone (a write's decode into it
        # reached the registers' enables, the DMA's write decode in a node, 10.7 ns)
        refused = []
        for c in range(n):
            busy = (held[c] != 0) | (~dispatch.ongoing("TAKE") & (c_idx == c)) | \
                (could_take & (head.region == c))
            refused.append(regs.lock(m, [f"cmd{c}_{f}" for f in cmd_fields], busy))
        m.d.comb += ev["cmd_busy"].eq(Cat(*refused).any())

        # --- tile reader: job -> header queue, beat reads, payload buffer (dma.reader) ---------
        m.submodules.reader = rdr = self.reader
        m.d.comb += [
            rdr.job.valid.eq(job_v), rdr.job.payload.hdr.eq(job), rdr.job.payload.src.eq(job_src),
            rdr.job.payload.hdr.addr.eq(job_src + job_shift),
            job_taken.eq(job_v & rdr.job.ready),
            ev["resp_order"].eq(rdr.events.resp_order), ev["mem_error"].eq(rdr.events.mem_error),
        ]
        wiring.connect(m, wiring.flipped(self.resp), rdr.resp)
        count(m, cnt["reads"], rdr.events.read, clear_counters)

        # --- remote stores: window check and write combining (dma.combiner) -------------------
        m.submodules.combiner = comb = self.combiner
        wiring.connect(m, wiring.flipped(self.remote), comb.remote)
        for k in range(dp.remote_windows):
            reg = {f: remote_register(k, f) for f in ("base", "size", "dst_gpu", "dst_base")}
            m.d.comb += [self.window[k].base.eq(regs.rw(reg["base"])),
                         self.window[k].size.eq(regs.rw(reg["size"]))]
            # each window's end a register, kept from the registers' next values (the sum
            # before the compare was the node's critical path, 15.1 ns), summed from registers
            # and chosen by the write (hw.csr.RegisterFile.next_sum)
            r_end = Signal(A + 1, name=f"remote{k}_end")
            m.d.sync += r_end.eq(regs.next_sum(m, reg["base"], reg["size"]))
            m.d.comb += [comb.windows[k].base.eq(regs.rw(reg["base"])),
                         comb.windows[k].end.eq(r_end),
                         comb.windows[k].dst_gpu.eq(regs.rw(reg["dst_gpu"])),
                         comb.windows[k].dst_base.eq(regs.rw(reg["dst_base"]))]
        # the combiner decides on the head from verdicts made a cycle ahead against the
        # windows: a cycle after a window's base or size is written it takes nothing while
        # they are made again (dma.combiner)
        m.d.sync += comb.windows_written.eq(Cat(*(
            regs.write_strobe(remote_register(k, f))
            for k in range(dp.remote_windows) for f in ("base", "size"))).any())
        m.d.comb += [comb.gpu_id.eq(gpu_id), ev["remote_range"].eq(comb.events.remote_range)]
        tx_rem_beat = Signal()
        count(m, cnt["remote_sent"], tx_rem_beat, clear_counters)

        # --- packetizer: tiles and remote runs -> tx (dma.packetizer) --------------------------
        m.submodules.packetizer = pk = self.packetizer
        wiring.connect(m, pk.tx, wiring.flipped(self.tx))
        wiring.connect(m, comb.run_hdr, pk.run_hdr)
        wiring.connect(m, rdr.tile_hdr, pk.tile_hdr)
        wiring.connect(m, rdr.tile_data, pk.tile_data)
        wiring.connect(m, comb.run_data, pk.run_data)
        m.d.comb += [
            inc["tiles_sent"].eq(pk.events.tile), inc["remote_packets"].eq(pk.events.run),
            tx_rem_beat.eq(pk.events.run_beat),
        ]
        tx_hs = Signal()
        m.d.comb += tx_hs.eq(self.tx.tvalid & self.tx.tready)
        count(m, cnt["link_busy"], tx_hs, clear_counters)
        count(m, cnt["beats_sent"], tx_hs & ~self.tx.tuser, clear_counters)

        # --- depacketizer: rx -> received beats (dma.depacketizer) ------------------------------
        m.submodules.depacketizer = dep = self.depacketizer
        wiring.connect(m, wiring.flipped(self.rx), dep.rx)
        # the window's end a register, kept from the registers' next values as the remote
        # windows' are (the depacketizer compares the beat's address with both in parallel)
        rx_end = Signal(A + 1, name="rx_end")
        m.d.sync += rx_end.eq(regs.next_sum(m, "rx_base", "rx_size"))
        m.d.comb += [
            dep.gpu_id.eq(gpu_id), dep.rx_base.eq(regs.rw("rx_base")), dep.rx_end.eq(rx_end),
            *(ev[k].eq(dep.events[k]) for k in RX_EVENTS),
            inc["packets_received"].eq(dep.events.packet),
            rx_open.eq(dep.open),
        ]
        # received beats wait in the depacketizer's two-entry slice for the memory arbiter:
        # its decision does not reach rx.tready, nor the enable of the beats' registers, in the
        # same cycle (on an FPGA that path crossed the node from the arbiter to the link:
        # 16.3 ns)
        rxq_v, rxq = dep.o.valid, dep.o.payload
        rxq_taken = Signal()
        m.d.comb += dep.o.ready.eq(rxq_taken)

        # --- memory request arbiter: tile reads and received writes ---------------------------
        mem = self.mem
        prefer_rx = Signal()
        mem_lock, mem_lock_rx = Signal(name="mem_lock"), Signal(name="mem_lock_rx")
        pick_rx = Signal()
        rd_v = rdr.read.valid
        m.d.comb += pick_rx.eq(Mux(mem_lock, mem_lock_rx, rxq_v & (prefer_rx | ~rd_v)))
        with m.If(pick_rx):
            m.d.comb += [mem.valid.eq(rxq_v), mem.payload.eq(rxq)]
        with m.Else():
            m.d.comb += [mem.valid.eq(rd_v), mem.payload.eq(rdr.read.payload)]
        m.d.sync += [mem_lock.eq(mem.valid & ~mem.ready), mem_lock_rx.eq(pick_rx)]
        with m.If(mem.valid & mem.ready):
            m.d.sync += prefer_rx.eq(~pick_rx)
        m.d.comb += [
            rxq_taken.eq(pick_rx & rxq_v & mem.ready),
            rdr.read.ready.eq(~pick_rx & mem.ready),
        ]
        count(m, cnt["beats_received"], rxq_taken, clear_counters)
        return m
