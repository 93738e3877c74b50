"""The GPU-side traffic engine (``docs/system.md``, "GPU-side engines"): a kernel's memory
traffic on a node's ``compute`` port, from a program in local memory, with no software per
cycle.  The kernels and the program formats are described in :mod:`system.engine.config`."""

from types import SimpleNamespace

from amaranth import Array, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, count, csr_signature
from hw.interfaces import ElemType, Op, mem_request_layout, request_signature, \
    response_signature
from hw.params import T3Params
from nmc.alu import NearBankALU
from .config import (MAX_WFS, Z_CAPTURE, EngineParams, Kernel, desc_beats, engine_registers,
                     step_layout, wg_layout)


__all__ = ["CUEngine", "load_signature", "COUNTER_BITS"]


#: Width of the statistics counters; they saturate.
COUNTER_BITS = 32

# Kinds of the requests awaiting a response (the pending queue's entries).
_GEMM_READ, _GEMM_STORE, _STEP_X, _STEP_Y, _STEP_STORE = range(5)

# Slot states of a GEMM workgroup.
_FREE, _READING, _COMPUTING, _STORING = range(4)


def load_signature(params: T3Params, eparams: EngineParams):
    """The bulk port into the engine's memories, seen from the host: ``addr`` (word
    ``local_beats`` and up select the program memory), ``w_en``, ``w_data``; ``r_data`` is the
    beat at the ``addr`` of the previous cycle.  Use it only while the engine is idle."""
    return wiring.Signature({
        "addr": Out(eparams.local_bits + 1),
        "w_en": Out(1),
        "w_data": Out(params.beat_bits),
        "r_data": In(params.beat_bits),
    })


class CUEngine(wiring.Component):
    """One GPU's compute units, as a traffic engine.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    eparams : :class:`system.engine.config.EngineParams`
    formats : element types the steps' adder handles (the near-bank ALU's lanes).  Empty: no
        ALU is built, and a step that adds is skipped with ``status.bad_step`` latched.

    Ports
    -----
    compute : Out(stream.Signature(memory request))
        To the node's ``compute`` port: one request per cycle at most, each held until taken.
    resp : In(stream.Signature(memory response))
        The node's responses to the local requests, in order; always ready.
    comm_done : In(1)
        The node's pulse per completed communication write (counted as arrivals).
    start : In(1)
        A one-cycle pulse starts the programmed kernel (as ``ctrl.start`` does).
    done : Out(1)
        High from the end of a kernel (kernel complete and ``arrivals_target`` reached) to the
        next start.
    calib_start, calib_end, drain : Out(1)
        One-cycle strobes for the node's MC arbiter when ``mode.mca`` is set, registered (the
        cycle after the event): the calibration window opens at the start and closes when the
        first stage's ``stage_wgs`` WGs (the first ring step's; 0: the first ``cus``) have
        finished; the drain comes when the GEMM's last WG has
        finished.
    l2_flush : Out(1)
        With ``mode.flush``: a strobe, registered, once the kernel is complete (every request
        answered): the node's L2 writes back and invalidates.
    l2_flushed : In(1)
        The node's strobe when that flush has ended; ``done`` waits for it.
    load : In(:func:`load_signature`)
        Bulk access to the local memory (partials, captured results) and the program memory.
    csr : In(csr_signature(...))
        Registers (:func:`system.engine.config.engine_registers`).

    Timing
    ------
    A request decided in cycle *t* is offered from cycle *t + 1* (one output register, whose
    data for GEMM stores comes from the local memory read in cycle *t*).  A GEMM WG is launched
    per cycle while a slot is free; its read burst is queued the cycle after its descriptor is
    read; its store burst ``compute_cycles`` after its last read response.  Bursts are issued
    in the order they were queued, one queued per cycle.  A step's store of beat *i* is ready
    the cycle after the response that completes its operands (one cycle more with an add).
    """

    def __init__(self, params: T3Params, eparams: EngineParams = EngineParams(),
                 formats=(ElemType.FP16, ElemType.FP32)):
        self.params, self.eparams = params, eparams
        self.formats = tuple(ElemType(f) for f in formats)
        self.regs = engine_registers(params, eparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        super().__init__({
            "compute": Out(request_signature(params)),
            "resp": In(response_signature(params)),
            "comm_done": In(1),
            "start": In(1),
            "done": Out(1),
            "calib_start": Out(1),
            "calib_end": Out(1),
            "drain": Out(1),
            "l2_flush": Out(1),
            "l2_flushed": In(1),
            "load": In(load_signature(params, eparams)),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, ep, regs = self.params, self.eparams, self.regfile
        beat, boff = p.beat_bits, p.beat_offset_bits
        full_mask = (1 << p.beat_bytes) - 1
        S = ep.slots

        # --- registers and run control ----------------------------------------------------------
        cnt = {name: Signal(COUNTER_BITS, name=f"cnt_{name}") for name in (
            "cycles", "first_stage", "requests", "reads", "stores", "responses", "arrivals")}
        regs.elaborate(m, self.csr, cnt)
        mode = regs.rw("mode")
        r = {name: regs.rw(name) for name in (
            "arrivals_target", "prog_base", "prog_count", "cus", "read_beats", "compute_cycles",
            "a_read", "a_base", "b_base", "c_base", "remote_space", "partials", "stage_wgs",
            "wfs", "seg_beats", "tile_cols", "col_beats")}
        start = Signal()
        m.d.comb += start.eq(self.start | regs.command("ctrl", "start"))
        busy = Signal()
        run = Signal()
        m.d.comb += run.eq(busy & ~start)
        is_gemm = mode.kernel == Kernel.GEMM
        kernel_done = Signal()
        arrivals = cnt["arrivals"]
        ev = {k: Signal(name=f"ev_{k}") for k in ("resp_error", "unexpected", "bad_step")}
        regs.status(m, "status", **ev, busy=busy, done=self.done)
        # with mode.flush the node's L2 is flushed once the kernel is complete, and the run
        # ends when it has been (the flush strobe and the flushed wait are registered)
        flush_sent = Signal()
        flushed = Signal()
        with m.If(start):
            m.d.sync += [flush_sent.eq(0), flushed.eq(0)]
        with m.Elif(run & kernel_done & mode.flush & ~flush_sent):
            m.d.sync += flush_sent.eq(1)
        with m.Elif(self.l2_flushed & flush_sent):
            m.d.sync += flushed.eq(1)
        m.d.sync += self.l2_flush.eq(run & kernel_done & mode.flush & ~flush_sent)
        with m.If(start):
            m.d.sync += [busy.eq(1), self.done.eq(0)]
        with m.Elif(run & kernel_done & (arrivals >= r["arrivals_target"]) &
                    (~mode.flush | flushed)):
            m.d.sync += [busy.eq(0), self.done.eq(1)]
        count(m, cnt["cycles"], run, start)
        count(m, cnt["arrivals"], run & self.comm_done, start)

        # --- memories: local data (partials, captures) and program; the bulk port --------------
        m.submodules.dmem = dmem = Memory(shape=beat, depth=ep.local_beats, init=[])
        # a program row is one descriptor of D beats, written a beat at a time from the bulk port
        D = desc_beats(p)
        dshift = D.bit_length() - 1
        m.submodules.pmem = pmem = Memory(shape=D * beat, depth=-(-ep.local_beats // D),
                                          init=[])
        d_rd, d_wr = dmem.read_port(), dmem.write_port()
        p_rd, p_wr = pmem.read_port(), pmem.write_port(granularity=beat)
        load_prog = self.load.addr[-1]
        load_addr = self.load.addr[:-1]
        load_word = load_addr[:dshift]
        last_load_prog = Signal()
        last_load_word = Signal(max(1, dshift))
        m.d.sync += [last_load_prog.eq(load_prog), last_load_word.eq(load_word)]
        m.d.comb += [
            d_rd.addr.eq(load_addr), p_rd.addr.eq(load_addr >> dshift),
            d_wr.addr.eq(load_addr), p_wr.addr.eq(load_addr >> dshift),
            d_wr.data.eq(self.load.w_data), p_wr.data.eq(self.load.w_data.replicate(D)),
            d_wr.en.eq(~busy & self.load.w_en & ~load_prog),
            p_wr.en.eq(Mux(~busy & self.load.w_en & load_prog, 1 << load_word, 0)),
            self.load.r_data.eq(Mux(last_load_prog,
                                    p_rd.data.word_select(last_load_word, beat) if D > 1
                                    else p_rd.data, d_rd.data)),
        ]

        # --- the pending queue: what each awaited response belongs to ---------------------------
        pend_layout = data.StructLayout({"kind": 3, "slot": range(S)})
        m.submodules.pend = pend = SyncFIFOBuffered(width=pend_layout.size, depth=ep.pending)
        head = data.View(pend_layout, pend.r_data)
        took = Signal()                         # a response this cycle, with its pending entry
        m.d.comb += [self.resp.ready.eq(1), took.eq(self.resp.valid & pend.r_rdy),
                     pend.r_en.eq(self.resp.valid)]
        m.d.comb += [ev["resp_error"].eq(self.resp.valid & self.resp.payload.error),
                     ev["unexpected"].eq(self.resp.valid & ~pend.r_rdy)]
        count(m, cnt["responses"], self.resp.valid, start)

        # --- the output register: the request offered on ``compute`` ---------------------------
        req_layout = mem_request_layout(p)
        out = Signal(req_layout)
        out_valid = Signal()
        out_from_mem = Signal()                 # its data is d_rd's (a GEMM store)
        out_pend = Signal(pend_layout)          # pushed to the pending queue when taken ...
        out_awaits = Signal()                   # ... if a response will come
        out_ack = Signal()                      # a remote GEMM store: done when taken
        m.d.comb += [self.compute.valid.eq(out_valid & pend.w_rdy),
                     self.compute.payload.eq(out)]
        with m.If(out_from_mem):
            m.d.comb += self.compute.payload.data.eq(d_rd.data)
        taken = Signal()
        m.d.comb += taken.eq(self.compute.valid & self.compute.ready)
        m.d.comb += [pend.w_en.eq(taken & out_awaits), pend.w_data.eq(out_pend)]
        count(m, cnt["requests"], taken, start)
        count(m, cnt["reads"], taken & (out.op == Op.READ), start)
        count(m, cnt["stores"], taken & (out.op != Op.READ), start)

        # the generators below offer ``nxt``; it is loaded when the register is free.  Only
        # the fields a generator sets are carried: a comb signal with constant-only parts
        # becomes an ``always @*`` block with nothing to trigger it in the Verilog (never run
        # by Icarus or Verilator), so ``mask`` and ``etype`` are set at the register instead.
        nxt = Signal(data.StructLayout({name: req_layout[name].shape for name in
                                        ("addr", "data", "op", "wg_id", "wf_id", "tracked")}))
        nxt_valid = Signal()
        nxt_from_mem = Signal()
        nxt_mem_addr = Signal(ep.local_bits)
        nxt_pend = Signal(pend_layout)
        nxt_awaits = Signal()
        nxt_ack = Signal()
        load_out = Signal()
        m.d.comb += load_out.eq((~out_valid | taken) & nxt_valid & run)
        with m.If(taken):
            m.d.sync += out_valid.eq(0)
        with m.If(load_out):
            m.d.sync += [out.addr.eq(nxt.addr), out.data.eq(nxt.data), out.op.eq(nxt.op),
                         out.wg_id.eq(nxt.wg_id), out.wf_id.eq(nxt.wf_id),
                         out.tracked.eq(nxt.tracked), out.mask.eq(full_mask),
                         out.etype.eq(mode.etype), out_valid.eq(1), out_from_mem.eq(nxt_from_mem),
                         out_pend.eq(nxt_pend), out_awaits.eq(nxt_awaits), out_ack.eq(nxt_ack)]
        with m.If(start):
            m.d.sync += out_valid.eq(0)
        with m.If(busy):                        # a waiting store keeps its data on d_rd
            m.d.comb += [d_rd.addr.eq(nxt_mem_addr),
                         d_rd.en.eq(~(out_valid & out_from_mem & ~taken))]

        # =========================================================================================
        # GEMM: WGs in slots
        # =========================================================================================
        wgl = wg_layout(p)
        st = [Signal(2, name=f"slot{s}_state") for s in range(S)]
        s_cnt = [Signal(32, name=f"slot{s}_count") for s in range(S)]
        s_timer = [Signal(24, name=f"slot{s}_timer") for s in range(S)]
        s_push = [Signal(name=f"slot{s}_push") for s in range(S)]      # a burst to queue
        s_desc = [Signal(wgl.size, name=f"slot{s}_desc") for s in range(S)]
        launched = Signal(16)
        finished = Signal(16)
        active = Signal(range(S + 1))
        n_stores = Signal(32)
        m.d.comb += n_stores.eq(r["wfs"] * r["tile_cols"] * r["seg_beats"])
        # the first stage: the first ring step's WGs (stage_wgs), or the first `cus` if 0
        stage_wgs = Mux(r["stage_wgs"] != 0, r["stage_wgs"], r["cus"])
        first_stage = Mux(stage_wgs < r["prog_count"], stage_wgs, r["prog_count"])

        # launch: read the next descriptor into the lowest free slot, one per cycle
        free = Signal(range(S))
        any_free = Signal()
        for s in reversed(range(S)):
            with m.If(st[s] == _FREE):
                m.d.comb += [free.eq(s), any_free.eq(1)]
        fetching = Signal()
        fetch_slot = Signal(range(S))
        launch = Signal()
        m.d.comb += launch.eq(run & is_gemm & any_free & (launched < r["prog_count"]) &
                              (active < r["cus"]) & ~fetching)
        with m.If(launch):
            m.d.comb += [p_rd.addr.eq(r["prog_base"] + launched), p_rd.en.eq(1)]
            m.d.sync += [launched.eq(launched + 1), fetch_slot.eq(free)]
        m.d.sync += fetching.eq(launch)

        # the order queue: bursts leave in the order they were queued (one queued per cycle)
        order_layout = data.StructLayout({"slot": range(S), "store": 1})
        m.submodules.order = order = SyncFIFO(width=order_layout.size, depth=S)
        push_slot = Signal(range(S))
        any_push = Signal()
        for s in reversed(range(S)):
            with m.If(s_push[s]):
                m.d.comb += [push_slot.eq(s), any_push.eq(1)]
        pushed = data.View(order_layout, order.w_data)
        m.d.comb += [order.w_en.eq(any_push & run), pushed.slot.eq(push_slot),
                     pushed.store.eq(Array(st)[push_slot] == _STORING)]

        # completions: a response to a read or local store of the slot, or a remote store of
        # the slot taken by the node
        ack = [Signal(name=f"slot{s}_ack") for s in range(S)]
        fin = [Signal(name=f"slot{s}_finished") for s in range(S)]
        for s in range(S):
            m.d.comb += ack[s].eq(run & is_gemm & (
                (took & (head.kind.matches(_GEMM_READ, _GEMM_STORE)) & (head.slot == s)) |
                (taken & out_ack & (out_pend.slot == s))))

        if ep.streaming:
            streams = self._streaming_slots(m, r=r, st=st, s_cnt=s_cnt, s_timer=s_timer,
                                            s_push=s_push, s_desc=s_desc, ack=ack, fin=fin,
                                            start=start, launch=launch, free=free,
                                            fetching=fetching, fetch_slot=fetch_slot,
                                            p_rd=p_rd, n_stores=n_stores, run=run,
                                            order=order, any_push=any_push,
                                            push_slot=push_slot)
        for s in range(S if not ep.streaming else 0):
            with m.If(start):
                m.d.sync += [st[s].eq(_FREE), s_push[s].eq(0)]
            with m.Elif(launch & (free == s)):
                m.d.sync += st[s].eq(_READING)
            with m.Elif(fetching & (fetch_slot == s)):
                m.d.sync += [s_desc[s].eq(p_rd.data), s_cnt[s].eq(r["read_beats"])]
                with m.If(r["read_beats"] == 0):
                    m.d.sync += [st[s].eq(_COMPUTING), s_timer[s].eq(r["compute_cycles"])]
                with m.Else():
                    m.d.sync += s_push[s].eq(1)
            with m.Elif(ack[s]):
                with m.If(s_cnt[s] > 1):
                    m.d.sync += s_cnt[s].eq(s_cnt[s] - 1)
                with m.Elif(st[s] == _READING):
                    m.d.sync += [st[s].eq(_COMPUTING), s_timer[s].eq(r["compute_cycles"])]
                with m.Else():
                    m.d.sync += st[s].eq(_FREE)
                    m.d.comb += fin[s].eq(1)
            with m.Elif((st[s] == _COMPUTING) & run):
                with m.If(s_timer[s] > 1):
                    m.d.sync += s_timer[s].eq(s_timer[s] - 1)
                with m.Else():
                    m.d.sync += [st[s].eq(_STORING), s_cnt[s].eq(n_stores), s_push[s].eq(1)]
            with m.If(run & any_push & order.w_rdy & (push_slot == s)):
                m.d.sync += s_push[s].eq(0)

        n_fin = Signal(range(S + 1))
        m.d.comb += n_fin.eq(sum(fin))
        with m.If(start):
            m.d.sync += [launched.eq(0), finished.eq(0), active.eq(0)]
        with m.Else():
            m.d.sync += [active.eq(active + launch - n_fin), finished.eq(finished + n_fin)]
        crossed = (finished < first_stage) & (finished + n_fin >= first_stage)
        with m.If(run & is_gemm & crossed):
            m.d.sync += cnt["first_stage"].eq(cnt["cycles"] + 1)
        gemm_done = Signal()
        m.d.comb += gemm_done.eq((finished == r["prog_count"]) & ~fetching)
        last = (finished < r["prog_count"]) & (finished + n_fin == r["prog_count"])
        m.d.sync += [                           # registered: the strobes reach the arbiter
            self.calib_start.eq(start & mode.mca & is_gemm),        # a cycle after the event
            self.calib_end.eq(run & mode.mca & is_gemm & crossed),
            self.drain.eq(run & mode.mca & is_gemm & last),
        ]

        # the burst issuer: the head burst's requests, one per cycle
        burst_on = Signal()
        b_slot = Signal(range(S))
        b_store = Signal()
        b_left = Signal(32)
        b_wf = Signal(range(MAX_WFS))
        b_col = Signal(8)
        b_k = Signal(8)
        b_seg = Signal(24)                      # C beat offset of the current column segment
        b_read = Signal(16)                     # reads of the burst issued so far
        desc = Signal(wgl)
        m.d.comb += desc.eq(Array(s_desc)[b_slot])
        head_order = data.View(order_layout, order.r_data)
        head_desc = Signal(wgl)
        m.d.comb += head_desc.eq(Array(s_desc)[head_order.slot])
        offset = b_seg + b_k
        last_beat = load_out & (b_left == 1)
        with m.If(is_gemm & burst_on):
            m.d.comb += [nxt_valid.eq(1), nxt.wg_id.eq(desc.wg_id), nxt_pend.slot.eq(b_slot)]
            with m.If(~b_store):
                # the WG's A panel, then its B panel (streaming: this slice's of them)
                in_a = b_read < r["a_read"]
                a_from, b_from = (streams.b_aoff, streams.b_boff) if ep.streaming else \
                    (desc.a_off, desc.b_off)
                m.d.comb += [
                    nxt.op.eq(Op.READ),
                    nxt.addr.eq(Mux(in_a, r["a_base"] + ((a_from + b_read) << boff),
                                    r["b_base"] + ((b_from + b_read - r["a_read"])
                                                   << boff))),
                    nxt_pend.kind.eq(_GEMM_READ), nxt_awaits.eq(1),
                ]
            with m.Else():
                m.d.comb += [
                    nxt.op.eq(Mux(desc.update, Op.UPDATE, Op.STORE)),
                    nxt.tracked.eq(desc.tracked),
                    nxt.wf_id.eq(b_wf),
                    nxt.addr.eq(r["c_base"] + (offset << boff) +
                                Mux(desc.remote, r["remote_space"], 0)),
                    nxt_from_mem.eq(1), nxt_mem_addr.eq(r["partials"] + offset),
                    nxt_pend.kind.eq(_GEMM_STORE), nxt_awaits.eq(~desc.remote),
                    nxt_ack.eq(desc.remote),
                ]
            with m.If(load_out):
                m.d.sync += b_left.eq(b_left - 1)
                with m.If(~b_store):
                    m.d.sync += b_read.eq(b_read + 1)
                with m.Elif(b_k + 1 < r["seg_beats"]):
                    m.d.sync += b_k.eq(b_k + 1)
                with m.Elif(b_col + 1 < r["tile_cols"]):
                    m.d.sync += [b_k.eq(0), b_col.eq(b_col + 1),
                                 b_seg.eq(b_seg + r["col_beats"])]
                with m.Else():
                    m.d.sync += [b_k.eq(0), b_col.eq(0), b_wf.eq(b_wf + 1),
                                 b_seg.eq(desc.tiles[b_wf + 1])]
                with m.If(b_left == 1):
                    m.d.sync += burst_on.eq(0)
        # the next burst starts as the last beat of the current one is loaded: no bubble
        with m.If(run & is_gemm & (~burst_on | last_beat) & order.r_rdy):
            m.d.comb += order.r_en.eq(1)
            m.d.sync += [burst_on.eq(1), b_slot.eq(head_order.slot),
                         b_store.eq(head_order.store), b_wf.eq(0), b_col.eq(0), b_k.eq(0),
                         b_read.eq(0),
                         b_seg.eq(head_desc.tiles[0]),
                         b_left.eq(Mux(head_order.store, n_stores, r["read_beats"]))]
            if ep.streaming:
                m.d.sync += [streams.b_aoff.eq(Array(streams.aoff)[head_order.slot]),
                             streams.b_boff.eq(Array(streams.boff)[head_order.slot])]
        with m.If(start):
            m.d.sync += burst_on.eq(0)

        # =========================================================================================
        # STEPS: vector operations, one after the other
        # =========================================================================================
        stl = step_layout(p)
        sd = Signal(stl)
        step_idx = Signal(16)
        xi, yi, rx, ry, sc, cap = (Signal(16, name=f"step_{n}") for n in
                                   ("xi", "yi", "rx", "ry", "sc", "cap"))
        m.submodules.opbuf = opbuf = Memory(shape=beat, depth=ep.buffer_beats, init=[])
        ob_wr = opbuf.write_port()
        ob_rd = opbuf.read_port(transparent_for=(ob_wr,))
        m.submodules.stq = stq = SyncFIFOBuffered(width=beat, depth=ep.buffer_beats)
        # without formats a step that adds is refused (``bad_step``), so no beat reaches an
        # adder: none is built, nor the ALU's pipeline (on the board: 1,044 flip-flops, 273 LUTs
        # and 4 DP16KD per engine, Yosys synth_ecp5)
        alu = NearBankALU(p, self.formats) if self.formats else None
        if alu is not None:
            m.submodules.alu = alu
        alu_valid = alu.o.valid if alu is not None else Const(0)
        alu_result = alu.o.payload.result if alu is not None else Const(0, beat)
        result = Signal(beat)
        result_valid = Signal()
        capture = sd.z_kind == Z_CAPTURE

        step_run = Signal()
        step_over = Signal()
        quiet = ~pend.r_rdy & ~out_valid & ~stq.r_rdy & ~alu_valid
        def restart():
            with m.If(start & (mode.kernel == Kernel.STEPS)):
                m.next = "FETCH"
            with m.Elif(start):
                m.next = "IDLE"

        with m.FSM(name="steps"):
            with m.State("IDLE"):
                restart()
            with m.State("FETCH"):
                with m.If(step_idx == r["prog_count"]):
                    m.d.comb += step_over.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.comb += [p_rd.addr.eq(r["prog_base"] + step_idx), p_rd.en.eq(1)]
                    m.next = "LOAD"
                restart()
            with m.State("LOAD"):
                m.d.sync += sd.eq(p_rd.data)
                m.next = "WAIT"
                restart()
            with m.State("WAIT"):
                # an add in a type without adders: the ALU would refuse it and hand back x
                no_adder = sd.has_y & ~mode.etype.matches(*self.formats) \
                    if self.formats else sd.has_y
                bad = (sd.n == 0) | (sd.n > ep.buffer_beats) | no_adder
                with m.If(bad):
                    m.d.comb += ev["bad_step"].eq(1)
                    m.d.sync += step_idx.eq(step_idx + 1)
                    m.next = "FETCH"
                with m.Elif(quiet & (arrivals >= sd.wait_arrivals)):
                    m.d.sync += [xi.eq(0), yi.eq(0), rx.eq(0), ry.eq(0), sc.eq(0), cap.eq(0)]
                    m.next = "RUN"
                restart()
            with m.State("RUN"):
                m.d.comb += step_run.eq(1)
                reads_done = (xi == sd.n) & (~sd.has_y | (yi == sd.n))
                written = Mux(capture, cap == sd.n, sc == sd.n)
                with m.If(reads_done & written & quiet):
                    m.d.sync += step_idx.eq(step_idx + 1)
                    m.next = "FETCH"
                restart()
        with m.If(start):
            m.d.sync += step_idx.eq(0)
        steps_done = Signal()
        with m.If(start):
            m.d.sync += steps_done.eq(0)
        with m.Elif(step_over):
            m.d.sync += steps_done.eq(1)
        m.d.comb += kernel_done.eq(Mux(is_gemm, gemm_done, steps_done))

        # requests: x reads, then y reads, then the stores (the order a CU kernel queues them)
        with m.If(step_run & ~is_gemm):
            with m.If(xi != sd.n):
                m.d.comb += [nxt_valid.eq(1), nxt.op.eq(Op.READ),
                             nxt.addr.eq(sd.x + (xi << boff)),
                             nxt_pend.kind.eq(_STEP_X), nxt_awaits.eq(1)]
                with m.If(load_out):
                    m.d.sync += xi.eq(xi + 1)
            with m.Elif(sd.has_y & (yi != sd.n)):
                m.d.comb += [nxt_valid.eq(1), nxt.op.eq(Op.READ),
                             nxt.addr.eq(sd.y + (yi << boff)),
                             nxt_pend.kind.eq(_STEP_Y), nxt_awaits.eq(1)]
                with m.If(load_out):
                    m.d.sync += yi.eq(yi + 1)
            with m.Elif(stq.r_rdy):
                z = Signal(p.addr_bits)
                m.d.comb += z.eq(sd.z + (sc << boff))
                m.d.comb += [nxt_valid.eq(1), nxt.op.eq(Op.STORE), nxt.addr.eq(z),
                             nxt.data.eq(stq.r_data), nxt_pend.kind.eq(_STEP_STORE),
                             nxt_awaits.eq(z < r["remote_space"])]
                with m.If(load_out):
                    m.d.comb += stq.r_en.eq(1)
                    m.d.sync += sc.eq(sc + 1)

        # responses: x beats wait in the operand buffer (or are the result); y beats are added
        step_resp = took & ~is_gemm
        is_x = step_resp & (head.kind == _STEP_X)
        is_y = step_resp & (head.kind == _STEP_Y)
        m.d.comb += [ob_wr.addr.eq(rx), ob_wr.data.eq(self.resp.payload.data),
                     ob_wr.en.eq(is_x & sd.has_y), ob_rd.addr.eq(Mux(is_y, ry + 1, ry))]
        with m.If(is_x):
            m.d.sync += rx.eq(rx + 1)
        with m.If(is_y):
            m.d.sync += ry.eq(ry + 1)
        if alu is not None:
            m.d.comb += [
                alu.i.valid.eq(is_y),
                alu.i.payload.old.eq(ob_rd.data), alu.i.payload.data.eq(self.resp.payload.data),
                alu.i.payload.mask.eq(full_mask), alu.i.payload.op.eq(Op.UPDATE),
                alu.i.payload.etype.eq(mode.etype), alu.o.ready.eq(1),
            ]
        with m.If(alu_valid):
            m.d.comb += [result.eq(alu_result), result_valid.eq(1)]
        with m.Elif(is_x & ~sd.has_y):
            m.d.comb += [result.eq(self.resp.payload.data), result_valid.eq(1)]
        with m.If(result_valid & capture):
            m.d.comb += [d_wr.addr.eq(sd.z[:ep.local_bits] + cap), d_wr.data.eq(result),
                         d_wr.en.eq(1)]
            m.d.sync += cap.eq(cap + 1)
        m.d.comb += [stq.w_data.eq(result), stq.w_en.eq(result_valid & ~capture)]
        return m

    def _streaming_slots(self, m, *, r, st, s_cnt, s_timer, s_push, s_desc, ack, fin, start,
                         launch, free, fetching, fetch_slot, p_rd, n_stores, run, order,
                         any_push, push_slot):
        """The GEMM slots of a streaming engine (``EngineParams.streaming``): a WG's ``k_slices``
        slices, each read (``read_beats``), then computed (``compute_cycles``) once it is
        answered and the slice before it is computed; slice ``j + 1``'s reads queued as slice
        ``j``'s compute starts (two slices staged); the stores after the last slice.  Returns
        each slot's offsets of its latest queued slice (``aoff``, ``boff``) and the burst's
        (``b_aoff``, ``b_boff``), which the burst issuer loads at a burst's start."""
        ep = self.eparams
        S = ep.slots
        wgl = wg_layout(self.params)
        k_slices = self.regfile.rw("k_slices")
        out = SimpleNamespace(
            aoff=[Signal(32, name=f"slot{s}_aoff") for s in range(S)],
            boff=[Signal(32, name=f"slot{s}_boff") for s in range(S)],
            b_aoff=Signal(32, name="burst_aoff"), b_boff=Signal(32, name="burst_boff"))
        b_per_slice = Signal(16)
        m.d.comb += b_per_slice.eq(r["read_beats"] - r["a_read"])
        for s in range(S):
            slice_no = Signal(16, name=f"slot{s}_slice")      # the slice computed or awaited
            ready = Signal(name=f"slot{s}_next_ready")        # the next slice is answered
            fetched = data.View(wgl, p_rd.data[:wgl.size])
            last_ack = ack[s] & (s_cnt[s] == 1)

            def queue_next():
                # queue the reads of the slice after the one starting now, if there is one
                nxt_slice = slice_no + 1 + 1
                with m.If((nxt_slice < k_slices) & (r["read_beats"] != 0)):
                    m.d.sync += [s_cnt[s].eq(r["read_beats"]), s_push[s].eq(1), ready.eq(0),
                                 out.aoff[s].eq(out.aoff[s] + r["a_read"]),
                                 out.boff[s].eq(out.boff[s] + b_per_slice)]
                with m.Else():
                    m.d.sync += ready.eq(1)

            with m.If(start):
                m.d.sync += [st[s].eq(_FREE), s_push[s].eq(0)]
            with m.Elif(launch & (free == s)):
                m.d.sync += st[s].eq(_READING)
            with m.Elif(fetching & (fetch_slot == s)):
                m.d.sync += [s_desc[s].eq(p_rd.data), s_cnt[s].eq(r["read_beats"]),
                             slice_no.eq(0), out.aoff[s].eq(fetched.a_off),
                             out.boff[s].eq(fetched.b_off)]
                with m.If(r["read_beats"] == 0):
                    # nothing to read: every slice computes back to back
                    m.d.sync += [st[s].eq(_COMPUTING), s_timer[s].eq(r["compute_cycles"]),
                                 ready.eq(1)]
                with m.Else():
                    m.d.sync += s_push[s].eq(1)
            with m.Elif(st[s] == _READING):
                # waiting for slice ``slice_no``'s reads; no compute runs
                with m.If(last_ack):
                    m.d.sync += [st[s].eq(_COMPUTING), s_timer[s].eq(r["compute_cycles"]),
                                 s_cnt[s].eq(0)]
                    # slice_no + 1 is queued: (slice_no + 1) + 1 compares against k_slices
                    with m.If((slice_no + 1 < k_slices) & (r["read_beats"] != 0)):
                        m.d.sync += [s_cnt[s].eq(r["read_beats"]), s_push[s].eq(1),
                                     ready.eq(0),
                                     out.aoff[s].eq(out.aoff[s] + r["a_read"]),
                                     out.boff[s].eq(out.boff[s] + b_per_slice)]
                    with m.Else():
                        m.d.sync += ready.eq(1)
                with m.Elif(ack[s]):
                    m.d.sync += s_cnt[s].eq(s_cnt[s] - 1)
            with m.Elif(st[s] == _COMPUTING):
                # computing slice ``slice_no``; the next slice's reads may be answered meanwhile
                with m.If(ack[s]):
                    m.d.sync += s_cnt[s].eq(s_cnt[s] - 1)
                    with m.If(last_ack):
                        m.d.sync += ready.eq(1)
                with m.If(run & (s_timer[s] > 1)):
                    m.d.sync += s_timer[s].eq(s_timer[s] - 1)
                with m.Elif(run):
                    with m.If(slice_no + 1 >= k_slices):
                        m.d.sync += [st[s].eq(_STORING), s_cnt[s].eq(n_stores),
                                     s_push[s].eq(1)]
                    with m.Elif(ready | last_ack):
                        m.d.sync += [slice_no.eq(slice_no + 1),
                                     s_timer[s].eq(r["compute_cycles"])]
                        queue_next()
                    with m.Else():
                        m.d.sync += [slice_no.eq(slice_no + 1), st[s].eq(_READING)]
            with m.Elif(ack[s]):                                    # storing
                with m.If(s_cnt[s] > 1):
                    m.d.sync += s_cnt[s].eq(s_cnt[s] - 1)
                with m.Else():
                    m.d.sync += st[s].eq(_FREE)
                    m.d.comb += fin[s].eq(1)
            with m.If(run & any_push & order.w_rdy & (push_slot == s)):
                m.d.sync += s_push[s].eq(0)
        return out
