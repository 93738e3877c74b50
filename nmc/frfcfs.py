"""The near-bank unit with an FR-FCFS scheduler: a queue of commands whose row hits go first
(paper 4.3, 5.1.1; Accel-Sim's DRAM scheduler, ``gpgpu_dram_scheduler 1``;
``docs/nmc.md``, "FR-FCFS")."""

import operator
from functools import reduce
from types import SimpleNamespace

from amaranth import Array, C, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, accumulate, count, csr_signature
from hw.interfaces import Op, Stream, mem_request_layout, mem_response_layout
from hw.params import T3Params
from .alu import NearBankALU
from .config import BYPASS_CAP, COUNTERS, WRITE_DELAY, NMCParams, nmc_registers
from .rtl import alu_pipeline, count_traffic, decode_address, storage


__all__ = ["FRFCFSUnit", "oldest_first"]


def _log2(n):
    return n.bit_length() - 1


def _lowest(m, vec, name):
    """One-hot of ``vec``'s lowest set bit (0 if none)."""
    out = Signal(len(vec), name=name)
    m.d.comb += out.eq(vec & (~vec + 1)[:len(vec)])
    return out


def oldest_first(m, vec, start, name):
    """One-hot of the first set bit of ``vec`` at or after position ``start``, wrapping (the
    queue's slots in age order from its oldest, ``start``); 0 if ``vec`` is 0."""
    n = len(vec)
    upper = Signal(n, name=f"{name}_upper")
    m.d.comb += upper.eq(vec & Cat(*(start <= i for i in range(n))))
    hi, lo = _lowest(m, upper, f"{name}_hi"), _lowest(m, vec, f"{name}_lo")
    out = Signal(n, name=name)
    m.d.comb += out.eq(Mux(upper.any(), hi, lo))
    return out


def _index(onehot):
    """The position of a one-hot vector's bit (0 for none)."""
    bits = max(1, (len(onehot) - 1).bit_length())
    return Cat(*(reduce(operator.or_, [onehot[s] for s in range(len(onehot)) if (s >> b) & 1],
                        C(0, 1)) for b in range(bits)))


def _wire(m, value, name):
    """``value`` as a signal of its own.  Amaranth builds an expression's logic again wherever
    it is used: the slots' next-state logic reads these values once per slot, and built per
    slot they made the unit's Verilog several times larger and its export and verilation
    slower (Verilator removes the copies, so the simulation's speed is the same)."""
    value = Value.cast(value)
    sig = Signal(value.shape(), name=name)
    m.d.comb += sig.eq(value)
    return sig


def _select(onehot, values):
    """``values[s]`` for the one-hot ``s`` (0 for none)."""
    return reduce(operator.or_, [Mux(onehot[s], v, 0) for s, v in enumerate(values)])


class FRFCFSUnit(wiring.Component):
    """Commands from the memory-controller queue, scheduled first-ready, first-come-first-served
    by HBM2 banks with ALUs; responses in the commands' order.

    Ports
    -----
    cmd : In(stream.Signature(mem_request_layout(params)))
        As :class:`nmc.rtl.NMCUnit`'s, but a command leaves ``cmd`` (``ready``) when it enters
        the unit's queue: ``ready`` while fewer than ``resp_depth`` commands are held (taken
        and not yet answered on ``resp``).
    resp : Out(stream.Signature(mem_response_layout(params)))
        One response per command, in the order the commands were taken, valid ``CL`` cycles
        after its column command or later (behind earlier responses, or ``resp``
        backpressure): ``data`` for ``READ``, ``error`` for a refused command.
    retired, retired_comm : Out(1)
        A command left the queue in this cycle (its column command issued, or it was
        refused), and it was of the communication stream: the MC arbiter's level counts the
        commands queued for the DRAM (:class:`mc_arbiter.rtl.MCArbiter`'s ``retire``).
    csr : In(csr_signature(...))
        :func:`nmc.config.nmc_registers`, with ``capped``.

    Scheduling (one row command and one column command a cycle)
    -------------------------------------------------------------
    A command taken in cycle *t* is queued in a slot (slots in the order taken; its response
    goes to the same slot) and can act from *t* + 1.  Every cycle:

    * **Column command**: the oldest queued command that is a *row hit* (its bank open on its
      row) and ready by the timing rules of :class:`nmc.rtl.NMCUnit` (RCD after its bank's
      ACT, its bank group's next free cycle, CCD_S after any column command, WTR_L / WTR_S for
      a ``READ``; the atomicity stall: ``WRITE_DELAY`` after a write's column command to its
      beat), and that no older queued command to the same beat waits for; a refused command
      (bad address) is ready at once.  The storage is read in the column command's cycle and
      the written beat of that cycle forwarded, so the result is the in-order unit's.
    * **Row command**: for the oldest queued command that is not a row hit and whose bank
      has no queued row hit: a PRE when its bank is open (RAS after the ACT, WTP after the
      bank's last write), an ACT of its row when closed (RP after the PRE, RRD after any
      ACT).  A bank's open row is kept while a queued command hits it.
    * **Bypass cap**: a column command other than the oldest queued command's passes it; once
      ``bypass_cap`` have passed it (the ``capped`` counter counts each time), the scheduler
      serves that command alone, row and column commands, until its column command issues,
      so no command waits forever (Accel-Sim's FR-FCFS has no cap).

    A command counts as a conflict or miss by the row commands taken for it (a PRE, an ACT),
    else as a row hit. Commands to one beat execute in the order taken, so every response
    equals the in-order unit's; only their cycles move.  Bad input is refused as by
    :class:`nmc.rtl.NMCUnit`.

    Both picks are decided in the cycle they act, from the slots' registers through
    oldest-first priority encoders over the slots (and the column command's through the
    payloads' LUT RAM into the storage's read address): cycle-accurate for the model, not yet
    cut for an FPGA's clock as the in-order unit's paths are.
    """

    def __init__(self, params: T3Params, nparams: NMCParams, bypass_cap=BYPASS_CAP):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        if not isinstance(nparams, NMCParams) or nparams.scheduler != "fr-fcfs":
            raise ValueError(f"nparams must be an NMCParams with scheduler 'fr-fcfs', not "
                             f"{nparams!r}")
        if not isinstance(bypass_cap, int) or not 1 <= bypass_cap <= 1 << 16:
            raise ValueError(f"bypass_cap must be an integer from 1 to 65536, not "
                             f"{bypass_cap!r}")
        self.params, self.nparams, self.bypass_cap = params, nparams, bypass_cap
        self.regs = nmc_registers(params, nparams)
        self.regfile = RegisterFile(self.regs)
        slots = nparams.resp_depth
        #: for proofs: the queued commands, the oldest one (one-hot), the candidates for a
        #: column and a row command and the picks (one-hot slots), the commands that wait for
        #: an older one to their beat, how many column commands passed the oldest, and the
        #: cap reached
        self.state = SimpleNamespace(
            waiting=Signal(slots, name="waiting"), oldest=Signal(slots, name="oldest"),
            col_cand=Signal(slots, name="col_cand"), row_cand=Signal(slots, name="row_cand"),
            col=Signal(slots, name="col_pick"), row=Signal(slots, name="row_pick"),
            dep=Signal(slots, name="dep"),
            passed=Signal(range(bypass_cap + 1), name="passed"),
            capped=Signal(name="capped"))
        super().__init__({
            "cmd": In(stream.Signature(mem_request_layout(params))),
            "resp": Out(stream.Signature(mem_response_layout(params))),
            "retired": Out(1), "retired_comm": Out(1),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, n, regs = self.params, self.nparams, self.regfile
        t = n.timing
        R = n.resp_depth
        st = self.state
        nb, ng = n.bank_groups * n.banks, n.bank_groups
        cap_bits = _log2(n.capacity_beats)
        row_bits = max(1, _log2(n.rows))
        req_layout, resp_layout = mem_request_layout(p), mem_response_layout(p)

        # --- storage, as the in-order unit's: banks of READ_BANK_BEATS beats ------------------
        wr, reads, in_bank = storage(m, p, n)
        n_banks = len(reads)
        m.submodules.alu = alu = NearBankALU(p, n.elem_types)

        # --- the queue: a slot per command from its arrival to its response -----------------
        # the commands' payloads (read at the column command's slot) and the responses (written
        # at the command's slot, read at the oldest)
        m.submodules.payloads = payloads = Memory(shape=req_layout.size, depth=R, init=[])
        pw, pr = payloads.write_port(), payloads.read_port(domain="comb")
        m.submodules.rqueue = rqueue = Memory(shape=resp_layout.size, depth=R, init=[])
        rq_w, rq_r = rqueue.write_port(), rqueue.read_port(domain="comb")
        head = Signal(range(R), name="slot_head")       # the oldest command held
        tail = Signal(range(R), name="slot_tail")       # the next command's slot
        used = Signal(range(R + 1), name="slots_used")

        def incr(ptr):
            return Mux(ptr == R - 1, 0, ptr + 1)

        # what the scheduler keeps of each queued command
        waiting = st.waiting
        hit = Signal(R, name="hit")                 # its bank is open on its row
        bad = Signal(R, name="bad")                 # refused (address)
        reading = Signal(R, name="is_read")
        writing = Signal(R, name="is_write")
        conflict = Signal(R, name="took_pre")       # row commands taken for it
        miss = Signal(R, name="took_act")
        dep = st.dep                                # an older command to its beat waits
        dep_on = [Signal(range(R), name=f"dep_on{s}") for s in range(R)]
        haz = [Signal(range(WRITE_DELAY), name=f"haz{s}") for s in range(R)]
        bank_oh = [Signal(nb, name=f"bank{s}") for s in range(R)]
        group_oh = [Signal(ng, name=f"group{s}") for s in range(R)]
        row = [Signal(row_bits, name=f"row{s}") for s in range(R)]
        beat = [Signal(cap_bits, name=f"beat{s}") for s in range(R)]
        matured = Signal(R, name="matured")         # its response may leave

        # --- bank and timing state (timers count down to 0, ready at 0) ----------------------
        timers = []

        def timers_of(name, count, delay):
            array = [Signal(range(max(2, delay)), name=f"{name}{k}") for k in range(count)]
            timers.extend(array)
            return array

        def load(delay):
            return max(delay - 1, 0)

        col_ok = timers_of("col_ok", nb, t.RCD)
        ras_ok = timers_of("ras_ok", nb, t.RAS)
        act_ok = timers_of("act_ok", nb, t.RP)
        wtp = timers_of("wtp", nb, t.WTP)
        bg_free = timers_of("bg_free", ng, max(t.CCDWL, t.CCD_L))
        wtr_l = timers_of("wtr_l", ng, t.WTR_L)
        any_free, = timers_of("any_free", 1, t.CCD_S)
        wtr_s, = timers_of("wtr_s", 1, t.WTR_S)
        rrd, = timers_of("rrd", 1, t.RRD)
        for sig in timers:
            m.d.sync += sig.eq(Mux(sig == 0, 0, sig - 1))
        is_open = Signal(nb, name="is_open")
        open_row = [Signal(row_bits, name=f"open_row{b}") for b in range(nb)]

        def ready(array):
            return Cat(*(sig == 0 for sig in array))

        col_ready = _wire(m, ready(col_ok), "col_ready")
        bg_ready = _wire(m, ready(bg_free), "bg_ready")
        wtr_ready = _wire(m, ready(wtr_l) & Cat(*([wtr_s == 0] * ng)), "wtr_ready")
        pre_ready = _wire(m, is_open & ready(ras_ok) & ready(wtp), "pre_ready")
        act_ready = _wire(m, ~is_open & ready(act_ok) & Cat(*([rrd == 0] * nb)), "act_ready")
        ccd_ready = _wire(m, any_free == 0, "ccd_ready")

        # --- the oldest queued command, and the bypass cap ----------------------------------
        oldest = st.oldest
        m.d.comb += oldest.eq(oldest_first(m, waiting, head, "oldest_pick"))
        capped = st.capped
        m.d.comb += capped.eq(st.passed == self.bypass_cap)
        every = C((1 << R) - 1, R)

        # --- column command: the oldest ready row hit ---------------------------------------
        col_cand = st.col_cand
        m.d.comb += col_cand.eq(Cat(*(
            waiting[s] & (bad[s] | (
                hit[s] & ~dep[s] & (haz[s] == 0) & (bank_oh[s] & col_ready).any() &
                (group_oh[s] & bg_ready).any() & ccd_ready &
                (~reading[s] | (group_oh[s] & wtr_ready).any())))
            for s in range(R))) & Mux(capped, oldest, every))
        c_oh = st.col
        m.d.comb += c_oh.eq(oldest_first(m, col_cand, head, "col_pick_"))
        issue = _wire(m, c_oh.any(), "col_issue")
        c_idx = Signal(range(R), name="col_slot")
        m.d.comb += c_idx.eq(_index(c_oh))
        c_bad = _wire(m, (c_oh & bad).any(), "col_bad")
        do_err = Signal(name="do_err")
        do_col = Signal(name="do_col")
        m.d.comb += [do_err.eq(issue & c_bad), do_col.eq(issue & ~c_bad)]
        c_bank = Signal(nb, name="col_bank")
        c_group = Signal(ng, name="col_group")
        c_beat = Signal(cap_bits, name="col_beat")
        m.d.comb += [c_bank.eq(_select(c_oh, bank_oh)), c_group.eq(_select(c_oh, group_oh)),
                     c_beat.eq(_select(c_oh, beat))]
        c_write = _wire(m, (c_oh & writing).any(), "col_write")
        write_issued = _wire(m, do_col & c_write, "col_write_issued")
        c = req_layout(Signal(req_layout, name="col_cmd"))
        m.d.comb += [pr.addr.eq(c_idx), c.eq(pr.data)]

        # --- row command: the oldest queued miss whose bank has no queued hit ------------------
        queued_hit = Signal(nb, name="queued_hit")
        live_hit = waiting & hit & ~bad
        m.d.comb += queued_hit.eq(reduce(operator.or_, [
            Mux(live_hit[s], bank_oh[s], 0) for s in range(R)]))
        row_ok = _wire(m, Mux(capped, pre_ready | act_ready,
                              (pre_ready & ~queued_hit) | act_ready), "row_ok")
        row_cand = st.row_cand
        m.d.comb += row_cand.eq(Cat(*(
            waiting[s] & ~bad[s] & ~hit[s] & (bank_oh[s] & row_ok).any()
            for s in range(R))) & Mux(capped, oldest, every))
        r_oh = st.row
        m.d.comb += r_oh.eq(oldest_first(m, row_cand, head, "row_pick_"))
        r_bank = Signal(nb, name="row_bank")
        r_row = Signal(row_bits, name="row_row")
        m.d.comb += [r_bank.eq(_select(r_oh, bank_oh)), r_row.eq(_select(r_oh, row))]
        do_pre = _wire(m, (r_bank & is_open).any(), "do_pre")
        do_act = _wire(m, (r_bank & ~is_open).any(), "do_act")
        for b in range(nb):
            with m.If(r_bank[b] & is_open[b]):
                m.d.sync += [is_open[b].eq(0), act_ok[b].eq(load(t.RP))]
            with m.If(r_bank[b] & ~is_open[b]):
                m.d.sync += [is_open[b].eq(1), open_row[b].eq(r_row),
                             col_ok[b].eq(load(t.RCD)), ras_ok[b].eq(load(t.RAS)),
                             rrd.eq(load(t.RRD))]

        # --- the command taken now: its slot's scheduling state ------------------------------
        accept = Signal(name="accept")
        m.d.comb += [self.cmd.ready.eq(used != R), accept.eq(self.cmd.valid & self.cmd.ready)]
        a = self.cmd.payload
        a_beat, a_bad, a_group, a_bankno, a_row = decode_address(p, n, a.addr)
        a_bad = _wire(m, a_bad, "in_bad")
        a_k = Signal(range(nb), name="in_bank")
        m.d.comb += a_k.eq(a_bankno * n.bank_groups + a_group)
        a_bank = Signal(nb, name="in_bank_oh")
        m.d.comb += a_bank.eq(Const(1, nb) << a_k)
        a_open = (a_bank & is_open).any()
        a_on_row = Array(open_row)[a_k] == a_row
        # its bank's row as it will be after this cycle's row command
        a_hit = _wire(m, Mux((a_bank & r_bank).any(), do_act & (r_row == a_row),
                             a_open & a_on_row), "in_hit")
        # the youngest queued command to its beat (it waits for that one)
        same = Signal(R, name="in_same_beat")
        m.d.comb += same.eq(Cat(*(beat[s] == a_beat for s in range(R))) & waiting & ~bad & ~c_oh)
        rev = Cat(*(same[R - 1 - s] for s in range(R)))
        # tail - 1 is the youngest slot; reversed, position R - tail (0 when tail is 0)
        rev_start = Signal(range(R), name="in_rev_start")
        m.d.comb += rev_start.eq(Mux(tail == 0, 0, R - tail))
        youngest_rev = oldest_first(m, rev, rev_start, "in_youngest")
        youngest = Cat(*(youngest_rev[R - 1 - s] for s in range(R)))
        # the writes of the last WRITE_DELAY - 2 cycles and of this one, whose writes the
        # command must wait out (a write at t - 1 - j: WRITE_DELAY - 2 - j more cycles)
        recent = [Signal(name=f"recent_write{j}") for j in range(WRITE_DELAY - 2)]
        recent_beat = [Signal(cap_bits, name=f"recent_beat{j}") for j in range(WRITE_DELAY - 2)]
        m.d.sync += [recent[0].eq(write_issued), recent_beat[0].eq(c_beat)]
        for j in range(1, WRITE_DELAY - 2):
            m.d.sync += [recent[j].eq(recent[j - 1]), recent_beat[j].eq(recent_beat[j - 1])]
        a_haz = _wire(m, Mux(write_issued & (c_beat == a_beat), load(WRITE_DELAY), reduce(
            operator.or_, [Mux(recent[j] & (recent_beat[j] == a_beat), WRITE_DELAY - 2 - j, 0)
                           for j in range(WRITE_DELAY - 2)])), "in_haz")
        a_dep = _wire(m, same.any() & ~a_bad, "in_dep")
        a_dep_on = _wire(m, _index(youngest), "in_dep_on")
        a_read = _wire(m, a.op == Op.READ, "in_read")
        a_write = _wire(m, (a.op == Op.STORE) | (a.op == Op.UPDATE), "in_write")
        a_group_oh = _wire(m, Const(1, ng) << a_group if ng > 1 else C(1, 1), "in_group_oh")

        # --- each slot's next state ----------------------------------------------------------
        for s in range(R):
            here = accept & (tail == s)
            r_here = (bank_oh[s] & r_bank).any()
            with m.If(here):
                m.d.sync += [
                    waiting[s].eq(1), bad[s].eq(a_bad), hit[s].eq(a_hit),
                    reading[s].eq(a_read), writing[s].eq(a_write),
                    conflict[s].eq(0), miss[s].eq(0),
                    dep[s].eq(a_dep), dep_on[s].eq(a_dep_on),
                    haz[s].eq(a_haz), bank_oh[s].eq(a_bank), group_oh[s].eq(a_group_oh),
                    row[s].eq(a_row), beat[s].eq(a_beat), matured[s].eq(0),
                ]
            with m.Else():
                with m.If(c_oh[s]):
                    m.d.sync += waiting[s].eq(0)
                # a row command on its bank
                with m.If(r_here & do_act):
                    m.d.sync += hit[s].eq(r_row == row[s])
                with m.Elif(r_here):
                    m.d.sync += hit[s].eq(0)
                with m.If(r_oh[s]):
                    m.d.sync += [conflict[s].eq(conflict[s] | do_pre),
                                 miss[s].eq(miss[s] | do_act)]
                # the command it waits for issued
                with m.If(issue & (dep_on[s] == c_idx)):
                    m.d.sync += dep[s].eq(0)
                # a write to its beat issued: the atomicity stall
                with m.If(write_issued & (beat[s] == c_beat)):
                    m.d.sync += haz[s].eq(load(WRITE_DELAY))
                with m.Elif(haz[s] != 0):
                    m.d.sync += haz[s].eq(haz[s] - 1)

        # --- the bypass cap -------------------------------------------------------------------
        passes = issue & ~(c_oh & oldest).any()
        with m.If(issue & (c_oh & oldest).any()):
            m.d.sync += st.passed.eq(0)
        with m.Elif(passes & ~capped):
            m.d.sync += st.passed.eq(st.passed + 1)

        # --- timing state of the column command ----------------------------------------------
        with m.If(do_col):
            m.d.sync += any_free.eq(load(t.CCD_S))
            for g in range(ng):
                with m.If(c_group[g]):
                    m.d.sync += bg_free[g].eq(Mux(c.op == Op.UPDATE, load(t.CCDWL),
                                                  load(t.CCD_L)))
                    with m.If(c_write):
                        m.d.sync += wtr_l[g].eq(load(t.WTR_L))
            with m.If(c_write):
                m.d.sync += wtr_s.eq(load(t.WTR_S))
                for b in range(nb):
                    with m.If(c_bank[b]):
                        m.d.sync += wtp[b].eq(load(t.WTP))

        # --- pipeline: read (t), the ALU (t+1 .. t+ALU_LATENCY), write and the response ------
        # The storage is read in the column command's cycle t; the write landing in t (not
        # seen by the read) is forwarded, so the ALU takes at t + 1 the beat as it stands after
        # t's write, as the in-order unit's.  (Writes landing later are the atomicity stall's.)
        for rd in reads:
            m.d.comb += [rd.addr.eq(c_beat[:in_bank]), rd.en.eq(1)]
        read_bank = Signal(range(n_banks), name="read_bank")
        landed = Signal(name="landed")
        landed_data = Signal(p.beat_bits, name="landed_data", reset_less=True)
        m.d.sync += [read_bank.eq(c_beat[in_bank:]),
                     landed.eq(wr.en & (wr.addr == c_beat)), landed_data.eq(wr.data)]
        read = Array(rd.data for rd in reads)[read_bank] if n_banks > 1 else reads[0].data
        old = Mux(landed, landed_data, read)
        s2, s2_err, entry, s2_slot = alu_pipeline(m, p, alu, wr, issue, do_err, c, old,
                                                  slot=c_idx)
        m.d.comb += [rq_w.addr.eq(s2_slot), rq_w.data.eq(entry), rq_w.en.eq(alu.o.valid),
                     rq_r.addr.eq(head)]
        # the response may leave CL cycles after its column command: its slot is carried for
        # the difference, then marked
        delay = t.CL - WRITE_DELAY
        assert delay >= 1
        age_valid, age_slot = alu.o.valid, s2_slot
        for k in range(delay):
            v, sl = Signal(name=f"age{k}_valid"), Signal(range(R), name=f"age{k}_slot")
            m.d.sync += [v.eq(age_valid), sl.eq(age_slot)]
            age_valid, age_slot = v, sl
        pop = _wire(m, self.resp.valid & self.resp.ready, "pop")
        # the oldest command's response, matured or maturing now (written into the queue
        # CL - WRITE_DELAY cycles ago, so readable)
        m.d.comb += [self.resp.valid.eq(matured.bit_select(head, 1) |
                                        (age_valid & (age_slot == head))),
                     self.resp.payload.eq(rq_r.data)]
        for s in range(R):
            with m.If(pop & (head == s)):
                m.d.sync += matured[s].eq(0)
            with m.Elif(age_valid & (age_slot == s)):
                m.d.sync += matured[s].eq(1)
        with m.If(pop):
            m.d.sync += head.eq(incr(head))
        with m.If(accept):
            m.d.sync += tail.eq(incr(tail))
        m.d.sync += used.eq(used + accept - pop)
        m.d.comb += [pw.addr.eq(tail), pw.data.eq(a.as_value()), pw.en.eq(accept),
                     self.retired.eq(issue), self.retired_comm.eq(issue & (c.stream ==
                                                                            Stream.COMM))]

        # --- registers -----------------------------------------------------------------------
        counters = {"errors": Signal(32), "busy": Signal(32), "capped": Signal(32)}
        for name in COUNTERS:
            for s in ("compute", "comm"):
                counters[f"{name}_{s}"] = Signal(32, name=f"cnt_{name}_{s}")
        regs.elaborate(m, self.csr, counters)
        clear = regs.command("cmd", "clear")
        alu_error = alu.o.valid & alu.o.payload.error & ~s2_err
        regs.status(m, "status", refused=do_err | alu_error)
        accumulate(m, counters["errors"], do_err + alu_error, clear)
        count(m, counters["busy"], waiting.any(), clear)
        count(m, counters["capped"], passes & (st.passed == self.bypass_cap - 1), clear)
        c_conflict, c_miss = (c_oh & conflict).any(), (c_oh & miss).any()
        count_traffic(m, counters, clear, lambda event, name: event, do_col, c, c_conflict,
                      c_miss)
        return m
