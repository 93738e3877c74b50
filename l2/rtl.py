"""The GPU's L2 cache between the compute units and the memory controller (``docs/l2.md``; paper
Table 1, section 6.1.2 and 6.2: T3's output writes bypass it)."""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, count, csr_signature
from hw.interfaces import Op, Stream, mem_request_layout, request_signature, \
    response_signature
from hw.params import T3Params
from hw.pipeline import BypassFIFO
from .config import COUNTERS, PIPELINE_HIT_LATENCY, L2Params, l2_registers


__all__ = ["L2Cache"]


# Kinds of the entries of the response queue: answered from the entry itself after the hit
# latency (a hit's data, a store's acknowledgement, a refusal), by memory's response (a
# bypassed request), or by an MSHR's fill.
_HIT, _NODE, _MSHR = range(3)
# Kinds of the requests sent to memory, whose responses come back in order.
_E_NODE, _E_FILL, _E_WB = range(3)


class L2Cache(wiring.Component):
    """A banked, set-associative, write-back L2 with merged misses, answering in order.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    lparams : :class:`l2.config.L2Params`

    Ports
    -----
    i : In(stream.Signature(memory request))
        The CUs' requests.  One is looked up per cycle, in the order taken.
    o : Out(stream.Signature(memory response))
        One response per request, in the order of ``i``: ``data`` for reads, ``tag``, ``op``
        and ``stream`` copied from the request, ``error`` for a refused UPDATE or a memory
        error.
    mem : Out(stream.Signature(memory request))
        To the memory controller: fills (a READ miss's request itself), write-backs (a STORE
        of a whole line, the other fields zero) and bypassed requests (unchanged).
    mem_resp : In(stream.Signature(memory response))
        Memory's responses to ``mem``, one per request, in order; always ready.
    flush : In(1)
        A strobe: write back every dirty line and invalidate every line once every request in
        flight is answered (as ``cmd.flush``); ``i`` waits meanwhile.
    flushed : Out(1)
        A strobe when a flush has ended: every write-back answered by memory.
    csr : In(csr_signature(...))
        Registers (:func:`l2.config.l2_registers`).

    Policies
    --------
    A request inside a cached window (registers ``win<k>_base``/``win<k>_size``) is cached:
    a READ miss allocates the line and reads it from memory (a *fill*); a STORE of a whole
    beat allocates without a fill, a partial STORE merges into a line that is there and is
    otherwise passed to memory (write-around); stored lines are dirty and written back when
    evicted or flushed.  An UPDATE there is refused (response ``error``, ``status.
    update_cached``).  Everything outside the windows goes to memory unchanged.  The victim
    is the lowest invalid way among ``ways_used``, else the least recently used; each access
    makes its line the most recently used.  A READ of a line being filled waits on the fill's
    MSHR (merged); a STORE to it, or a miss whose victim is being filled, waits in the lookup
    until the fill arrives; a miss waits there for a free MSHR.

    Timing
    ------
    A request taken on ``i`` in cycle *c* is looked up in *c + 1* (its set's tags and LRU
    order were read in *c*), unless it waits there: for its bank (set ``s`` is in bank ``s
    mod banks``, busy ``bank_cycles`` cycles per cached access), for an MSHR, a victim being
    filled, the data RAM's write port (a fill has it first), or room towards memory.  A hit's
    response is offered on ``o`` from *c +* ``hit_latency`` (at least
    :data:`l2.config.PIPELINE_HIT_LATENCY` = 4: lookup, data read, response queue, output
    register), or later behind an earlier request's; a miss's or bypassed request's from the
    cycle after memory's response (a fill's: after it is written).  A fill or bypassed
    request enters the queue towards ``mem`` in the cycle of its lookup, a victim's
    write-back in the next (a lookup that needs the queue then waits that cycle).  Up to
    ``depth`` requests may be in flight.
    """

    def __init__(self, params: T3Params, lparams: L2Params = L2Params()):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        if not isinstance(lparams, L2Params):
            raise TypeError(f"lparams must be an L2Params, not {lparams!r}")
        self.params, self.lparams = params, lparams
        self.regs = l2_registers(params, lparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        super().__init__({
            "i": In(request_signature(params)),
            "o": Out(response_signature(params)),
            "mem": Out(request_signature(params)),
            "mem_resp": In(response_signature(params)),
            "flush": In(1),
            "flushed": Out(1),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, lp, regs = self.params, self.lparams, self.regfile
        W, S, M, D = lp.ways, lp.sets, lp.mshrs, lp.depth
        boff = p.beat_offset_bits
        LB = p.addr_bits - boff                    # a line's address (the tag: the whole line)
        SB, WB = lp.set_bits, lp.way_bits
        mb = max(1, (M - 1).bit_length())
        full = (1 << p.beat_bytes) - 1
        req_layout = mem_request_layout(p)

        def ram_addr(way, set_):
            return Cat(way, set_[:SB])

        # --- registers -------------------------------------------------------------------------
        cnt = {name: Signal(32, name=f"cnt_{name}") for name, _ in COUNTERS}
        lines = Signal(32)
        dirty_lines = Signal(32)
        regs.elaborate(m, self.csr, {
            "info": {"sets_log2": SB, "ways": W, "banks_log2": (lp.banks - 1).bit_length(),
                     "mshrs": M},
            "lines": lines, "dirty_lines": dirty_lines, **cnt})
        clear = regs.command("cmd", "clear")
        config_names = ["sets_used", "ways_used", "hit_latency", "bank_cycles"] + \
            [f"win{w}_{f}" for w in range(lp.windows) for f in ("base", "size")]
        empty = Signal()
        take = Signal()
        # a request taken in the cycle of the write was classified under the old window
        config_busy = regs.lock(m, config_names, ~empty | take)
        # the values in effect: a register holding what the geometry cannot have counts as the
        # nearest legal value (and status.bad_config says so)
        sets_log2 = Signal(range(SB + 1))
        ways_used = Signal(range(W + 1))
        latency = Signal(range(lp.max_hit_latency + 1))
        bank_cycles = Signal(4)
        r_sets, r_ways = regs.rw("sets_used"), regs.rw("ways_used")
        r_lat, r_bank = regs.rw("hit_latency"), regs.rw("bank_cycles")
        bad_config = Signal()
        m.d.comb += [
            sets_log2.eq(Mux(r_sets > SB, SB, r_sets)),
            ways_used.eq(Mux(r_ways == 0, 1, Mux(r_ways > W, W, r_ways))),
            latency.eq(Mux(r_lat < PIPELINE_HIT_LATENCY, PIPELINE_HIT_LATENCY,
                           Mux(r_lat > lp.max_hit_latency, lp.max_hit_latency, r_lat))),
            bank_cycles.eq(Mux(r_bank == 0, 1, r_bank)),
            bad_config.eq((r_sets > SB) | (r_ways == 0) | (r_ways > W) |
                          (r_lat < PIPELINE_HIT_LATENCY) | (r_lat > lp.max_hit_latency) |
                          (r_bank == 0)),
        ]
        set_mask = Signal(max(1, SB))
        m.d.comb += set_mask.eq(Cat(*(sets_log2 > b for b in range(max(1, SB)))))
        way_en = Signal(W)
        m.d.comb += way_en.eq(Cat(*(ways_used > w for w in range(W))))
        win = [(regs.rw(f"win{w}_base"), regs.rw(f"win{w}_size")) for w in range(lp.windows)]

        # --- storage ---------------------------------------------------------------------------
        # tags: per set, each way's valid and dirty bits and its line; the LRU order: per set,
        # the ways from the most to the least recently used; the lines' data; the MSHRs' fills
        way_layout = data.StructLayout({"valid": 1, "dirty": 1, "line": LB})
        row_layout = data.ArrayLayout(way_layout, W)
        lru_layout = data.ArrayLayout(WB, W)
        identity = Cat(*(Const(w, WB) for w in range(W)))
        m.submodules.tags = tags = Memory(shape=row_layout, depth=S, init=[])
        m.submodules.lru = lru = Memory(shape=lru_layout, depth=S, init=[])
        tag_wr, lru_wr = tags.write_port(), lru.write_port()
        tag_rd = tags.read_port(transparent_for=(tag_wr,))
        lru_rd = lru.read_port(transparent_for=(lru_wr,))
        m.submodules.lines_ram = lines_ram = Memory(shape=p.beat_bits, depth=S << WB, init=[])
        data_wr = lines_ram.write_port(granularity=8)
        data_rd = lines_ram.read_port()             # read first: a victim's old data
        mshr_data_layout = data.StructLayout({"data": p.beat_bits, "error": 1})
        m.submodules.mshr_ram = mshr_ram = Memory(shape=mshr_data_layout, depth=M, init=[])
        mshr_wr = mshr_ram.write_port()
        mshr_rd = mshr_ram.read_port(domain="comb")

        mshr_valid = Signal(M)
        mshr_filled = Signal(M)
        mshr_line = Array(Signal(LB, name=f"mshr{k}_line") for k in range(M))
        mshr_set = Array(Signal(max(1, SB), name=f"mshr{k}_set") for k in range(M))
        mshr_way = Array(Signal(WB, name=f"mshr{k}_way") for k in range(M))
        mshr_waiters = Array(Signal(range(D + 1), name=f"mshr{k}_waiters") for k in range(M))

        # queues: towards memory, what memory's responses are for, the responses in order, and
        # the data of bypassed requests' responses (in order among themselves).  A lookup that
        # sends something waits unless both memory-side queues have room for two (its request
        # and a write-back), so their depths bound nothing but how far the L2 runs ahead of a
        # slow memory controller
        mem_depth, exp_depth = 4, D + M
        m.submodules.mem_q = mem_q = BypassFIFO(width=req_layout.size, depth=mem_depth)
        exp_layout = data.StructLayout({"kind": 2, "mshr": mb})
        m.submodules.exp_q = exp_q = BypassFIFO(width=exp_layout.size, depth=exp_depth)
        entry_layout = data.StructLayout({
            "kind": 2, "mshr": mb, "data": p.beat_bits, "error": 1,
            "tag": max(1, p.tag_bits), "op": 2, "stream": 1})
        m.submodules.resp_q = resp_q = BypassFIFO(width=entry_layout.size, depth=D)
        m.submodules.node_q = node_q = BypassFIFO(width=p.beat_bits + 1, depth=D)
        m.d.comb += [self.mem.valid.eq(mem_q.r_rdy), self.mem.payload.eq(mem_q.r_data),
                     mem_q.r_en.eq(self.mem.ready)]
        room = (mem_q.level <= mem_depth - 2) & (exp_q.level <= exp_depth - 2)

        # --- S0: take a request; its set's tags and LRU order are read ------------------------
        inflight = Signal(range(D + 1))
        busy = Signal()                             # a flush is asked for or runs, or the init
        s1_valid = Signal()
        commit = Signal()
        i_req = self.i.payload
        i_set = Signal(max(1, SB))
        m.d.comb += i_set.eq(i_req.addr[boff:boff + SB] & set_mask if SB else 0)
        cached_i = Cat(*(((size != 0) & (i_req.addr >= base) & (i_req.addr - base < size))
                         for base, size in win)).any()
        m.d.comb += [
            self.i.ready.eq((~s1_valid | commit) & (inflight < D) & ~busy),
            take.eq(self.i.valid & self.i.ready),
            tag_rd.addr.eq(i_set), lru_rd.addr.eq(i_set),
            tag_rd.en.eq(take), lru_rd.en.eq(take),
        ]
        s1 = Signal(req_layout)
        s1_cached = Signal()
        s1_set = Signal(max(1, SB))
        with m.If(take):
            m.d.sync += [s1_valid.eq(1), s1.eq(i_req), s1_cached.eq(cached_i), s1_set.eq(i_set)]
        with m.Elif(commit):
            m.d.sync += s1_valid.eq(0)

        # --- S1: look up -----------------------------------------------------------------------
        row = data.View(row_layout, tag_rd.data)
        order = data.View(lru_layout, lru_rd.data)
        line = s1.addr[boff:]
        match = Signal(W)
        m.d.comb += match.eq(Cat(*(row[w].valid & (row[w].line == line) & way_en[w]
                                   for w in range(W))))
        hit = match.any()
        hit_way = Signal(WB)
        for w in range(W):
            with m.If(match[w]):
                m.d.comb += hit_way.eq(w)
        invalid = Signal(W)
        m.d.comb += invalid.eq(Cat(*(~row[w].valid & way_en[w] for w in range(W))))
        free_way, lru_way = Signal(WB), Signal(WB)
        for w in reversed(range(W)):                # the lowest invalid way
            with m.If(invalid[w]):
                m.d.comb += free_way.eq(w)
        for k in range(W):                          # the last way of the order in use
            with m.If(order[k] < ways_used):
                m.d.comb += lru_way.eq(order[k])
        victim = Signal(WB)
        m.d.comb += victim.eq(Mux(invalid.any(), free_way, lru_way))
        vic = Signal(way_layout)
        m.d.comb += vic.eq(row[victim])
        vic_dirty = Signal()
        m.d.comb += vic_dirty.eq(vic.valid & vic.dirty)
        # MSHRs: the one filling this line; one filling the victim's line; a free one
        pend = Signal(M)
        vic_pend = Signal(M)
        m.d.comb += [
            pend.eq(Cat(*(mshr_valid[k] & ~mshr_filled[k] & (mshr_line[k] == line)
                          for k in range(M)))),
            vic_pend.eq(Cat(*(mshr_valid[k] & ~mshr_filled[k] & (mshr_line[k] == vic.line)
                              for k in range(M)))),
        ]
        pend_idx, free_mshr = Signal(mb), Signal(mb)
        for k in range(M):
            with m.If(pend[k]):
                m.d.comb += pend_idx.eq(k)
        for k in reversed(range(M)):
            with m.If(~mshr_valid[k]):
                m.d.comb += free_mshr.eq(k)
        any_free_mshr = ~mshr_valid.all()

        is_read, is_store = s1.op == Op.READ, s1.op == Op.STORE
        whole = s1.mask == full
        pending_hit = hit & pend.any()
        # what the request does (the actions exclude each other)
        a_bypass, a_refuse, a_hit, a_merge, a_miss, a_store, a_alloc = (
            Signal(name=f"a_{n}") for n in ("bypass", "refuse", "hit", "merge", "miss",
                                             "store", "alloc"))
        m.d.comb += [
            a_bypass.eq(~s1_cached | (is_store & ~hit & ~whole)),     # outside, write-around
            a_refuse.eq(s1_cached & ~is_read & ~is_store),             # a cached UPDATE
            a_hit.eq(s1_cached & is_read & hit & ~pending_hit),        # data from the line
            a_merge.eq(s1_cached & is_read & pending_hit),             # data from its fill
            a_miss.eq(s1_cached & is_read & ~hit),                     # fill into the victim
            a_store.eq(s1_cached & is_store & hit),                    # merge into the line
            a_alloc.eq(s1_cached & is_store & ~hit & whole),           # into the victim
        ]
        evicts = a_miss | a_alloc
        wb_now = Signal()                           # a write-back follows next cycle
        m.d.comb += wb_now.eq(evicts & vic_dirty)
        pushes = a_bypass | a_miss                  # a request into the memory queue now
        touches = a_hit | a_merge | a_miss | a_store | a_alloc
        uses_bank = s1_cached & ~a_refuse & ~a_bypass

        # banks: each busy bank_cycles cycles per cached access
        nb = lp.banks
        bank_busy = Array(Signal(4, name=f"bank{b}_busy") for b in range(nb))
        bank = s1_set[:(nb - 1).bit_length()] if nb > 1 else Const(0, 1)
        for b in range(nb):
            m.d.sync += bank_busy[b].eq(Mux(bank_busy[b] == 0, 0, bank_busy[b] - 1))

        s2_wb = Signal()                            # S2 queues a write-back this cycle
        fill_now = Signal()                         # a fill writes the data RAM this cycle
        stall_bank = Signal()
        stall_miss = Signal()
        stall_queue = Signal()
        stall_port = Signal()
        m.d.comb += [
            stall_bank.eq(s1_valid & uses_bank & (bank_busy[bank] != 0)),
            stall_miss.eq(s1_valid & ((a_miss & ~any_free_mshr) |
                                      (evicts & vic.valid & vic_pend.any()) |
                                      (is_store & s1_cached & pending_hit))),
            stall_queue.eq(s1_valid & (((pushes | wb_now) & ~room) | (pushes & s2_wb))),
            stall_port.eq(s1_valid & (a_store | a_alloc) & fill_now),
            commit.eq(s1_valid & ~stall_bank & ~stall_miss & ~stall_queue & ~stall_port),
        ]
        count(m, cnt["bank_stalls"], stall_bank, clear)
        count(m, cnt["miss_stalls"], stall_miss & ~stall_bank, clear)

        # the commit: tags, LRU order, data
        touched = Signal(WB)
        m.d.comb += touched.eq(Mux(evicts, victim, hit_way))
        new_row = Signal(row_layout)
        m.d.comb += new_row.eq(row)
        with m.If(a_store):
            m.d.comb += new_row[hit_way].dirty.eq(1)
        with m.If(evicts):
            m.d.comb += [new_row[victim].valid.eq(1), new_row[victim].dirty.eq(a_alloc),
                         new_row[victim].line.eq(line)]
        new_order = Signal(lru_layout)
        at = Signal(W)
        m.d.comb += [at.eq(Cat(*(order[k] == touched for k in range(W)))),
                     new_order[0].eq(touched)]
        for k in range(1, W):
            m.d.comb += new_order[k].eq(Mux(at[k:].any(), order[k - 1], order[k]))
        with m.If(commit & uses_bank):
            m.d.sync += bank_busy[bank].eq(bank_cycles - 1)
        with m.If(commit & (a_store | evicts)):
            m.d.comb += [tag_wr.addr.eq(s1_set), tag_wr.data.eq(new_row), tag_wr.en.eq(1)]
        with m.If(commit & touches):
            m.d.comb += [lru_wr.addr.eq(s1_set), lru_wr.data.eq(new_order), lru_wr.en.eq(1)]
        m.d.comb += [data_rd.addr.eq(ram_addr(Mux(a_hit, hit_way, victim), s1_set)),
                     data_rd.en.eq(commit & (a_hit | wb_now))]
        with m.If(commit & (a_store | a_alloc)):
            m.d.comb += [data_wr.addr.eq(ram_addr(Mux(a_store, hit_way, victim), s1_set)),
                         data_wr.data.eq(s1.data),
                         data_wr.en.eq(Mux(a_store, s1.mask, full))]

        # --- the flush walk (below) queues its write-backs through S2 too -------------------
        walk_push = Signal()
        walk_line = Signal(LB)

        # --- S2: the request's response-queue entry (a hit's data from the RAM); a write-back
        s2_req = Signal()
        s2 = Signal(entry_layout)
        s2_from_ram = Signal()
        s2_wb_line = Signal(LB)
        m.d.sync += [
            s2_req.eq(commit), s2_wb.eq((commit & wb_now) | walk_push),
            s2_wb_line.eq(Mux(walk_push, walk_line, vic.line)), s2_from_ram.eq(a_hit),
            s2.kind.eq(Mux(a_bypass, _NODE, Mux(a_miss | a_merge, _MSHR, _HIT))),
            s2.mshr.eq(Mux(a_miss, free_mshr, pend_idx)), s2.error.eq(a_refuse),
            s2.tag.eq(s1.tag), s2.op.eq(s1.op), s2.stream.eq(s1.stream),
        ]
        entry = Signal(entry_layout)
        m.d.comb += [entry.eq(s2), entry.data.eq(Mux(s2_from_ram, data_rd.data, 0)),
                     resp_q.w_data.eq(entry), resp_q.w_en.eq(s2_req)]

        # --- the memory queue: a fill or bypassed request at its lookup, a write-back in S2 --
        mem_push = Signal(req_layout)
        exp_push = Signal(exp_layout)
        with m.If(s2_wb):
            m.d.comb += [mem_push.addr.eq(Cat(Const(0, boff), s2_wb_line)),
                         mem_push.data.eq(data_rd.data), mem_push.mask.eq(full),
                         mem_push.op.eq(Op.STORE), mem_push.stream.eq(Stream.COMPUTE),
                         exp_push.kind.eq(_E_WB), mem_q.w_en.eq(1), exp_q.w_en.eq(1)]
        with m.Elif(commit & pushes):
            m.d.comb += [mem_push.eq(s1), exp_push.kind.eq(Mux(a_miss, _E_FILL, _E_NODE)),
                         exp_push.mshr.eq(free_mshr), mem_q.w_en.eq(1), exp_q.w_en.eq(1)]
        m.d.comb += [mem_q.w_data.eq(mem_push), exp_q.w_data.eq(exp_push)]

        # a hit matures hit_latency - PIPELINE_HIT_LATENCY cycles after its entry (in order)
        delay_max = lp.max_hit_latency - PIPELINE_HIT_LATENCY
        hit_in = s2_req & (s2.kind == _HIT)
        age = Signal(delay_max + 1)
        m.d.sync += age.eq(Cat(hit_in, age[:-1]))
        delay = Signal(range(delay_max + 1))
        m.d.comb += delay.eq(latency - PIPELINE_HIT_LATENCY)
        maturing = age.bit_select(delay, 1)
        matured = Signal(range(D + 1))

        # --- memory's responses ------------------------------------------------------------------
        resp = self.mem_resp.payload
        expect = data.View(exp_layout, exp_q.r_data)
        got = self.mem_resp.valid & exp_q.r_rdy
        fill = got & (expect.kind == _E_FILL)
        m.d.comb += [self.mem_resp.ready.eq(1), exp_q.r_en.eq(self.mem_resp.valid),
                     fill_now.eq(fill)]
        with m.If(fill):
            m.d.comb += [
                data_wr.addr.eq(ram_addr(mshr_way[expect.mshr], mshr_set[expect.mshr])),
                data_wr.data.eq(resp.data), data_wr.en.eq(full),
                mshr_wr.addr.eq(expect.mshr), mshr_wr.data.data.eq(resp.data),
                mshr_wr.data.error.eq(resp.error), mshr_wr.en.eq(1)]
        m.d.comb += [node_q.w_data.eq(Cat(resp.data, resp.error)),
                     node_q.w_en.eq(got & (expect.kind == _E_NODE))]

        # --- the output: the response queue's head, once it is ready -----------------------------
        head = data.View(entry_layout, resp_q.r_data)
        head_ready = Signal()
        with m.Switch(head.kind):
            with m.Case(_HIT):
                m.d.comb += head_ready.eq((matured != 0) | maturing)
            with m.Case(_NODE):
                m.d.comb += head_ready.eq(node_q.r_rdy)
            with m.Case(_MSHR):
                m.d.comb += head_ready.eq(mshr_filled.bit_select(head.mshr, 1))
        give = self.o.valid & self.o.ready
        load = Signal()
        m.d.comb += [load.eq(resp_q.r_rdy & head_ready & (~self.o.valid | self.o.ready)),
                     resp_q.r_en.eq(load), node_q.r_en.eq(load & (head.kind == _NODE)),
                     mshr_rd.addr.eq(head.mshr)]
        m.d.sync += [matured.eq(matured + maturing - (load & (head.kind == _HIT))),
                     inflight.eq(inflight + take - give)]
        with m.If(give):
            m.d.sync += self.o.valid.eq(0)
        with m.If(load):
            out = self.o.payload
            m.d.sync += [self.o.valid.eq(1), out.tag.eq(head.tag), out.op.eq(head.op),
                         out.stream.eq(head.stream)]
            with m.Switch(head.kind):
                with m.Case(_HIT):
                    m.d.sync += [out.data.eq(head.data), out.error.eq(head.error)]
                with m.Case(_NODE):
                    m.d.sync += [out.data.eq(node_q.r_data[:p.beat_bits]),
                                 out.error.eq(node_q.r_data[-1])]
                with m.Case(_MSHR):
                    m.d.sync += [out.data.eq(mshr_rd.data.data),
                                 out.error.eq(mshr_rd.data.error)]

        # --- MSHRs: allocated by a miss, waited on by it and its merges, freed when filled and
        # every waiter is answered -------------------------------------------------------------
        alloc = commit & a_miss
        merge = commit & a_merge
        deliver = load & (head.kind == _MSHR)
        for k in range(M):
            mine = alloc & (free_mshr == k)
            inc = mine | (merge & (pend_idx == k))
            dec = deliver & (head.mshr == k)
            waiters = Signal(range(D + 1), name=f"mshr{k}_waiters_next")
            filled = Signal(name=f"mshr{k}_filled_next")
            m.d.comb += [waiters.eq(mshr_waiters[k] + inc - dec),
                         filled.eq(mshr_filled[k] | (fill & (expect.mshr == k)))]
            m.d.sync += mshr_waiters[k].eq(waiters)
            with m.If(mine):
                m.d.sync += [mshr_valid[k].eq(1), mshr_filled[k].eq(0), mshr_line[k].eq(line),
                             mshr_set[k].eq(s1_set), mshr_way[k].eq(victim)]
            with m.Else():
                m.d.sync += mshr_filled[k].eq(filled)
                with m.If(filled & (waiters == 0)):
                    m.d.sync += mshr_valid[k].eq(0)

        # --- the flush: once nothing is in flight, write back and invalidate set by set; after
        # reset the same walk invalidates every set ---------------------------------------------
        f_set = Signal(range(S + 1))
        f_dirty = Signal(W)                         # the set's dirty ways left to write back
        f_row = Signal(row_layout)
        f_way = Signal(WB)
        for w in reversed(range(W)):
            with m.If(f_dirty[w]):
                m.d.comb += f_way.eq(w)
        m.d.comb += walk_line.eq(f_row[f_way].line)
        flush_req = Signal()
        flushing = Signal()
        done = Signal()
        with m.If(self.flush | regs.command("cmd", "flush")):
            m.d.sync += flush_req.eq(1)
        with m.FSM(name="flush", init="INIT") as fsm:
            with m.State("INIT"):
                m.d.comb += [tag_wr.addr.eq(f_set), tag_wr.data.eq(0), tag_wr.en.eq(1),
                             lru_wr.addr.eq(f_set), lru_wr.data.eq(identity), lru_wr.en.eq(1)]
                m.d.sync += f_set.eq(f_set + 1)
                with m.If(f_set == S - 1):
                    m.next = "IDLE"
            with m.State("IDLE"):
                with m.If(flush_req & ~s1_valid & ~s2_req & (inflight == 0) &
                          ~mshr_valid.any()):
                    m.d.sync += [flush_req.eq(0), flushing.eq(1), f_set.eq(0)]
                    with m.If(lines == 0):
                        m.next = "WAIT"
                    with m.Else():
                        m.next = "READ"
            with m.State("READ"):
                m.d.comb += [tag_rd.addr.eq(f_set), tag_rd.en.eq(1)]
                m.next = "SCAN"
            with m.State("SCAN"):
                m.d.sync += [f_row.eq(tag_rd.data),
                             f_dirty.eq(Cat(*(row[w].valid & row[w].dirty for w in range(W))))]
                m.next = "WRITE"
            with m.State("WRITE"):
                # one dirty way a cycle: its data is read now and queued by S2 next cycle
                with m.If(f_dirty.any()):
                    with m.If(room & ~s2_wb):
                        m.d.comb += [walk_push.eq(1), data_rd.addr.eq(ram_addr(f_way, f_set)),
                                     data_rd.en.eq(1)]
                        m.d.sync += f_dirty.eq(f_dirty & ~(Const(1, W) << f_way)[:W])
                with m.Else():
                    m.d.comb += [tag_wr.addr.eq(f_set), tag_wr.data.eq(0), tag_wr.en.eq(1),
                                 lru_wr.addr.eq(f_set), lru_wr.data.eq(identity),
                                 lru_wr.en.eq(1)]
                    m.d.sync += f_set.eq(f_set + 1)
                    with m.If(f_set + 1 == (1 << sets_log2)):
                        m.next = "WAIT"
                    with m.Else():
                        m.next = "READ"
            with m.State("WAIT"):
                with m.If(~exp_q.r_rdy & ~mem_q.r_rdy & ~s2_wb):
                    m.d.comb += done.eq(1)
                    m.d.sync += flushing.eq(0)
                    m.next = "IDLE"
        initializing = fsm.ongoing("INIT")
        m.d.comb += busy.eq(flush_req | flushing | initializing)
        m.d.sync += self.flushed.eq(done)
        count(m, cnt["flush_write_backs"], walk_push, clear)

        # --- counters and state -------------------------------------------------------------
        for name, event in (("requests", take), ("read_hits", commit & a_hit),
                            ("read_misses", alloc), ("read_merged", merge),
                            ("store_hits", commit & a_store), ("store_allocs", commit & a_alloc),
                            ("write_backs", commit & wb_now),
                            ("bypass_reads", commit & a_bypass & is_read),
                            ("bypass_writes", commit & a_bypass & ~is_read),
                            ("refused", commit & a_refuse)):
            count(m, cnt[name], event, clear)
        up = Signal(2)
        down = Signal()
        m.d.comb += [up.eq((commit & a_store & ~row[hit_way].dirty) |
                           (commit & a_alloc & ~vic_dirty)),
                     down.eq(commit & a_miss & vic_dirty)]
        with m.If(done):
            m.d.sync += [lines.eq(0), dirty_lines.eq(0)]
        with m.Else():
            m.d.sync += [lines.eq(lines + (commit & evicts & ~vic.valid)),
                         dirty_lines.eq(dirty_lines + up - down)]
        m.d.comb += empty.eq((lines == 0) & (inflight == 0) & ~mshr_valid.any() &
                             ~exp_q.r_rdy & ~flushing & ~flush_req)
        regs.status(m, "status", update_cached=commit & a_refuse, config_busy=config_busy,
                    bad_config=bad_config,
                    wb_error=got & (expect.kind == _E_WB) & resp.error,
                    flushing=flush_req | flushing, empty=empty, init=initializing)
        return m
