"""The DMA engine's remote-store write combining: the CUs' stores to the ``remote_map`` windows
(ring step 1, paper section 4.2.2) into runs, one packet each.  ``dma.model.combine`` is its
golden model and ``dma.model.check_combined`` its scoreboard."""

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.interfaces import Op, Source, mem_request_layout, request_signature
from hw.params import T3Params
from hw.pipeline import SkidBuffer, WriteAheadFIFO
from .config import DMAParams, header_layout
from .packetizer import run_beat_layout


__all__ = ["Combiner", "target_layout", "target_of"]


def target_layout(params: T3Params, dparams: DMAParams):
    """A ``remote_map`` window as the combiner takes it: the CUs' addresses ``[base, end)``
    (``end`` one bit wider: a window may reach the top of the address space) go to GPU
    ``dst_gpu`` at ``dst_base + (addr - base)``."""
    A = params.addr_bits
    return data.StructLayout({"base": A, "end": A + 1, "dst_gpu": dparams.gpu_bits,
                              "dst_base": A})


def target_of(window):
    """The :func:`target_layout` fields of a :class:`dma.config.RemoteWindow`."""
    return {"base": window.src_base, "end": window.src_base + window.size,
            "dst_gpu": window.dst_gpu, "dst_base": window.dst_base}


class Combiner(wiring.Component):
    """Remote stores into runs.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    dparams : :class:`dma.config.DMAParams`

    Ports
    -----
    remote : In(stream.Signature(memory request))
        The CUs' stores to the remote windows, into a register slice
        (:class:`hw.pipeline.SkidBuffer`: ``remote.ready`` is a register, high unless the
        slice holds two stores).  A ``READ``, or an address in no window, is taken and
        dropped with ``events.remote_range``.
    windows : In(:func:`target_layout`) × ``remote_windows``
        The windows (an empty one has ``end <= base``); the lowest that holds an address wins
        (the driver refuses overlaps).
    windows_written : In(1)
        High in the cycle after a window's ``base`` or ``end`` changed (the DMA drives it from
        the host's writes): the combining takes nothing in that cycle, while its verdicts on
        the slice's head are made again against the new windows.
    gpu_id : In(``gpu_bits``)
        This GPU (the runs' ``src_gpu``).
    run_hdr : Out(stream.Signature(:func:`dma.config.header_layout`))
        A run's header: its first store's address in the destination, its ``op``, ``etype``,
        ``tracked``, ``wg_id``, ``wf_id``, ``source = REMOTE``, ``beats = seg_beats`` = the
        run's stores, ``stride`` 0.
    run_data : Out(stream.Signature(:func:`dma.packetizer.run_beat_layout`))
        Every store taken in a window, in order: its data and its mask (the ``tkeep`` it
        travels with).  A run's beats may leave before its header.
    events : Out(``{remote_range, taken}``)
        One-cycle pulses: ``taken`` in the cycle a store is taken into the combining (kept or
        dropped), ``remote_range`` with it when the store is dropped.

    Timing
    ------
    A store taken on ``remote`` in cycle ``c`` is taken into the combining (``events.taken``)
    from ``c + 1``, in order, one a cycle, in each cycle its queues have room (below); "taken"
    below is that cycle.  The slice's head carries the verdicts on it (in a window and which,
    continues the open run) in registers, made a cycle ahead, so the decision and the enables
    of the run's registers start at registers.  A store *continues* the open run when its address is the run's next (the last store's
    plus a beat), its ``op``, ``etype``, ``tracked``, ``wg_id``, ``wf_id`` and window are the
    run's and the run has fewer than ``remote_burst`` stores; it joins it.  Any other store
    closes the open run (its header queued) and opens one of its own.  A run also closes when
    it is full or after ``remote_flush`` cycles in which no store was taken: a run whose last
    store was taken in cycle ``c`` closes in cycle ``c + remote_flush`` (the run queue having
    room) and its header is on ``run_hdr`` from ``c + remote_flush + 2``; a full run closes
    in the cycle after its last store; a run due to close while the run queue is full closes
    in the first cycle the queue has room (and takes the stores that continue it until
    then).  A store is taken while the store queue has room and, while a run is open, the run
    queue too, whatever the verdict on it (one to drop waits for room as one to keep does; a
    store that continues the run waits for the run queue as one that closes it does); with
    both outputs taken one store a cycle.  Queues: the
    stores ``2 * remote_burst`` beats (at least 2), the runs' headers 4.
    """

    def __init__(self, params: T3Params, dparams: DMAParams):
        self.params, self.dparams = params, dparams
        self.hdr_layout = header_layout(params, dparams)
        super().__init__({
            "remote":   In(request_signature(params)),
            "windows":  In(target_layout(params, dparams)).array(dparams.remote_windows),
            "gpu_id":   In(dparams.gpu_bits),
            "run_hdr":  Out(stream.Signature(self.hdr_layout)),
            "run_data": Out(stream.Signature(run_beat_layout(params))),
            "windows_written": In(1),
            "events":   Out(data.StructLayout({"remote_range": 1, "taken": 1})),
        })

    def elaborate(self, platform):
        m = Module()
        p, dp = self.params, self.dparams
        A, beat = p.addr_bits, p.beat_bytes
        K, RB = dp.remote_windows, dp.remote_burst

        # both queues' LUT RAM written ahead (hw.pipeline.WriteAheadFIFO): the window compare
        # and the run compare end at their pointers, not at the write enables of their cells
        # (the remote input's register, the window's carry chains and the take decision into
        # the store queue's write enables were the node's critical path, 13.4 ns, 4.6 of them
        # the write enable's net)
        m.submodules.rem_q = rem_q = WriteAheadFIFO(width=p.beat_bits + beat,
                                                    depth=max(2, 2 * RB))
        m.submodules.run_q = run_q = WriteAheadFIFO(width=self.hdr_layout.as_shape().width,
                                                    depth=4)
        m.d.comb += [
            self.run_hdr.valid.eq(run_q.r_rdy), self.run_hdr.payload.eq(run_q.r_data),
            run_q.r_en.eq(self.run_hdr.ready),
            self.run_data.valid.eq(rem_q.r_rdy), self.run_data.payload.eq(rem_q.r_data),
            rem_q.r_en.eq(self.run_data.ready),
        ]

        run = Signal(self.hdr_layout)
        run_open = Signal()
        run_next = Signal(A)         # the CU address that continues the run
        run_win = Signal(range(K))   # the run's window (a run never crosses into another)
        idle = Signal(range(dp.remote_flush + 1))
        # run.beats < RB, a register kept with run.beats (the length compare was the start of
        # the node's critical path, 15.5 ns, into the run queue's enqueue)
        run_room = Signal(init=1)
        run_room2 = Signal(init=RB > 2)     # run.beats + 1 < RB: room after one more store
        # a store that opens a new run while one is open must also queue the old run's header;
        # one that continues the run need not, but waits for room too, so that the store
        # queue's write enable does not hang on the run compare (an address and five fields:
        # the node's critical path, 14.7 ns, ended on the queue's LUT-RAM write enables).  The
        # run stays open while it waits (it cannot close into a full run queue either).
        can_take = rem_q.w_rdy & (~run_open | run_q.w_rdy)
        leave = Signal()        # the head leaves: taken into the combining, or dropped
        take = Signal()         # ... taken
        verdict = data.StructLayout({"ok": 1, "win": range(K), "cont": 1, "next": A})

        # The input slice (hw.pipeline.SkidBuffer): the fields compared come from its head's
        # registers, and the verdicts on the head -- in a window and which (``ok``, ``win``),
        # continues the open run (``cont``) -- from registers of their own, computed a cycle
        # ahead on the beat that becomes the head against the state of the next cycle.  The
        # decision to take a store, and the enables of the run's header registers behind it,
        # then start at registers (the window's carry chains and the run compare into those
        # enables were the most frequent of a node's failing paths at 100 MHz, 8 steps,
        # 10.6-11.2 ns).  The state the verdicts see: the windows as they are (a cycle after a
        # window's base or size is written the combiner takes nothing, ``windows_written``,
        # while the verdicts on the head are made again); the run as it will be (if the head
        # is taken now, the head's own fields and its address plus a beat; else the run as it
        # is, closed if its flush is due).
        def judge(c):
            hits = Cat(*((c["addr"] >= w.base) & (c["addr"] < w.end) for w in self.windows))
            win = 0
            for k in reversed(range(K)):
                win = Mux(hits[k], k, win) if K > 1 else 0
            win = Value.cast(win)

            def same(addr, ref, ref_win):
                out = (c["addr"] == addr)
                for f in ("op", "etype", "tracked", "wg_id", "wf_id"):
                    out = out & (c[f] == Value.cast(ref[f]))
                return out & (win == ref_win) if K > 1 else out
            # taken now: the run is the head's (continued or opened by it) ...
            after_take = same(ahead.next, rem, ahead.win) & Mux(ahead.cont, run_room2, 1 < RB)
            # ... else the run as it is, unless its flush closes it now
            kept = run_open & run_room & ~((idle + 1 >= dp.remote_flush) & run_q.w_rdy)
            as_is = kept & same(run_next, run, run_win)
            return Cat(hits.any() & (c["op"] != Op.READ), win[:verdict["win"].width],
                       Mux(take, after_take, as_is), (c["addr"] + beat)[:A])

        fields = ("addr", "op", "etype", "tracked", "wg_id", "wf_id")
        m.submodules.slice = sl = SkidBuffer(mem_request_layout(p), registered_out=fields,
                                             ahead=(verdict, judge))
        wiring.connect(m, wiring.flipped(self.remote), sl.i)
        rem = sl.o.payload
        ahead = verdict(sl.o_ahead)

        # the destination: the head's window's (an offset, then a sum: into the run's header
        # register only)
        dst_addr = Signal(A)
        dst_gpu = Signal(dp.gpu_bits)
        for k in reversed(range(K)):
            w = self.windows[k]
            with m.If(ahead.win == k):
                m.d.comb += [dst_gpu.eq(w.dst_gpu),
                             dst_addr.eq(w.dst_base + (rem.addr - w.base)[:A])]
        fresh = Signal(self.hdr_layout)
        m.d.comb += [
            fresh.dst_gpu.eq(dst_gpu), fresh.src_gpu.eq(self.gpu_id),
            fresh.addr.eq(dst_addr), fresh.op.eq(rem.op), fresh.etype.eq(rem.etype),
            fresh.source.eq(Source.REMOTE), fresh.tracked.eq(rem.tracked),
            fresh.wg_id.eq(rem.wg_id), fresh.wf_id.eq(rem.wf_id), fresh.beats.eq(1),
            fresh.seg_beats.eq(1), fresh.stride.eq(0),
        ]
        m.d.comb += [
            # a store to drop waits for room as one to keep does: the ready from registers
            leave.eq(sl.o.valid & can_take & ~self.windows_written),
            sl.o.ready.eq(can_take & ~self.windows_written),
            take.eq(leave & ahead.ok),
            self.events.remote_range.eq(leave & ~ahead.ok),
            self.events.taken.eq(leave),
            rem_q.w_en.eq(take),
            rem_q.w_data.eq(Cat(rem.data, rem.mask)),
            run_q.w_data.eq(run),
        ]
        with m.If(take):
            m.d.sync += [idle.eq(0), run_next.eq(ahead.next)]
            with m.If(ahead.cont):
                m.d.sync += [run.beats.eq(run.beats + 1), run.seg_beats.eq(run.beats + 1),
                             run_room.eq(run_room2), run_room2.eq(run.beats + 2 < RB)]
            with m.Else():
                m.d.comb += run_q.w_en.eq(run_open)
                m.d.sync += [run.eq(fresh), run_open.eq(1), run_room.eq(1 < RB),
                             run_room2.eq(2 < RB), run_win.eq(ahead.win)]
        with m.Elif(run_open):
            # a run never grows past RB beats: not run_room is run.beats == RB
            with m.If(((idle + 1 >= dp.remote_flush) | ~run_room) & run_q.w_rdy):
                m.d.comb += run_q.w_en.eq(1)
                m.d.sync += [run_open.eq(0), idle.eq(0)]
            with m.Elif(idle + 1 < dp.remote_flush):
                # idle stops at the flush: a run held past it by a full run queue closes in
                # the first cycle the queue has room (counting on, it would wrap and wait again)
                m.d.sync += idle.eq(idle + 1)
        return m
