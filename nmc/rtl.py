"""The near-bank op-and-store unit: one HBM2 pseudo-channel whose banks carry ALUs
(paper 4.3, 5.1.1; dissertation 2.5.2, 6.2.2; ``docs/design.md`` section 6)."""

from amaranth import Array, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib import data
from amaranth.lib.wiring import In, Out

from hw.csr import accumulate, count, csr_signature
from hw.interfaces import Op, Stream, mem_request_layout, mem_response_layout
from hw.params import T3Params
from .alu import NearBankALU
from .config import COUNTERS, NMCParams, nmc_registers


__all__ = ["NMCUnit"]


def _log2(n):
    return n.bit_length() - 1


class NMCUnit(wiring.Component):
    """Commands from the memory-controller queue, executed in order by HBM2 banks with ALUs.

    Ports
    -----
    cmd : In(stream.Signature(mem_request_layout(params)))
        ``READ`` returns a beat; ``STORE`` writes the beat under its byte mask; ``UPDATE`` is
        op-and-store, ``mem[a] = mem[a] + data`` lane-wise in ``etype``.  A command leaves
        ``cmd`` (``ready``) in the cycle its column command issues.
    resp : Out(stream.Signature(mem_response_layout(params)))
        One response per command, in order, valid ``CL`` cycles after its column command (or
        later, behind earlier responses or ``resp`` backpressure): ``data`` for ``READ``,
        ``error`` for a refused command.
    csr : In(csr_signature(...))
        Traffic counters split by stream, ``errors``, ``busy``, ``status``
        (:func:`nmc.config.nmc_registers`).

    Timing (one action per cycle for the head command, in order)
    ------------------------------------------------------------
    * Row hit: the column command issues when ``now`` ≥ ACT + RCD of its bank, ≥ the bank
      group's next free cycle (last column + CCD_L, or + CCDWL after an op-and-store), ≥ the last
      column command + CCD_S, and, for a ``READ``, ≥ the last write + WTR_L in the same bank group
      and + WTR_S anywhere.
    * Row closed (miss): ACT when the bank's precharge has had RP cycles, then the hit rules.
    * Other row open (conflict): PRE when the row has been open RAS cycles, then as a miss.
    * Atomicity (stall): a command that reads a beat written by the column command of the
      previous cycle waits one cycle (a write lands 2 cycles after its column command; the
      storage's read port is transparent to its write port).  A later command to the same
      address sits in the same bank group, so CCDWL ≥ CCD_L already spaces it further.
    * The response FIFO holds ``resp_depth`` responses; a column command waits while that many
      are outstanding.

    Bad input: an address beyond the capacity or not beat aligned is refused without touching a
    bank (response ``error``, ``status`` latched, ``errors`` + 1); an ``UPDATE`` whose mask
    splits an element is refused by the ALU (memory unchanged).  Element type codes are all
    valid (2 bits, four types).  Time stamps are 32-bit cycle counts (valid for 2**31 cycles).
    """

    def __init__(self, params: T3Params, nparams: NMCParams = NMCParams()):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        if not isinstance(nparams, NMCParams):
            raise TypeError(f"nparams must be an NMCParams, not {nparams!r}")
        self.params, self.nparams = params, nparams
        self.regs = nmc_registers(params, nparams)
        super().__init__({
            "cmd": In(stream.Signature(mem_request_layout(params))),
            "resp": Out(stream.Signature(mem_response_layout(params))),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, n, regs = self.params, self.nparams, self.regs
        t = n.timing
        nb = n.bank_groups * n.banks
        col_bits, bg_bits, bank_bits = _log2(n.columns), _log2(n.bank_groups), _log2(n.banks)
        cap_bits = _log2(n.capacity_beats)
        row_bits = max(1, _log2(n.rows))
        T = 32

        m.submodules.storage = storage = Memory(shape=p.beat_bits, depth=n.capacity_beats,
                                                init=[])
        wr = storage.write_port()
        rd = storage.read_port(domain="sync", transparent_for=(wr,))
        m.submodules.alu = alu = NearBankALU(p, self.nparams.elem_types)
        resp_layout = data.StructLayout({"resp": mem_response_layout(p), "release": T})
        m.submodules.rfifo = rfifo = SyncFIFO(width=resp_layout.size, depth=n.resp_depth)

        now = Signal(T)
        m.d.sync += now.eq(now + 1)

        # --- bank and timing state ---------------------------------------------------------
        is_open = Array(Signal(name=f"open{k}") for k in range(nb))
        open_row = Array(Signal(row_bits, name=f"row{k}") for k in range(nb))
        col_ok = Array(Signal(T, name=f"col_ok{k}") for k in range(nb))
        ras_ok = Array(Signal(T, name=f"ras_ok{k}") for k in range(nb))
        act_ok = Array(Signal(T, name=f"act_ok{k}") for k in range(nb))
        bg_free = Array(Signal(T, name=f"bg_free{g}") for g in range(n.bank_groups))
        wtr_l = Array(Signal(T, name=f"wtr_l{g}") for g in range(n.bank_groups))
        any_free = Signal(T)
        wtr_s = Signal(T)
        prev_write = Signal()
        prev_beat = Signal(cap_bits)
        head_conflict = Signal()
        head_miss = Signal()
        outstanding = Signal(range(n.resp_depth + 1))

        # --- decode the head command --------------------------------------------------------------
        c = self.cmd.payload
        beat_full = c.addr[p.beat_offset_bits:]
        beat = beat_full[:cap_bits]
        bad = (c.addr[:p.beat_offset_bits] != 0) | (beat_full[cap_bits:] != 0 if
                                                    len(beat_full) > cap_bits else 0)
        group = beat[col_bits:col_bits + bg_bits] if bg_bits else Const(0, 1)
        bank_no = beat[col_bits + bg_bits:col_bits + bg_bits + bank_bits] if bank_bits \
            else Const(0, 1)
        row = beat[col_bits + bg_bits + bank_bits:] if n.rows > 1 else Const(0, 1)
        k = Signal(range(nb))
        m.d.comb += k.eq(bank_no * n.bank_groups + group)
        reading = c.op == Op.READ
        writing = (c.op == Op.STORE) | (c.op == Op.UPDATE)
        room = outstanding < n.resp_depth

        do_col, do_pre, do_act, do_err = Signal(), Signal(), Signal(), Signal()
        with m.If(self.cmd.valid):
            with m.If(bad):
                m.d.comb += do_err.eq(room)
            with m.Elif(is_open[k] & (open_row[k] == row)):
                m.d.comb += do_col.eq(
                    (now >= col_ok[k]) & (now >= bg_free[group]) & (now >= any_free) &
                    (~reading | ((now >= wtr_l[group]) & (now >= wtr_s))) &
                    ~(prev_write & (prev_beat == beat)) & room)
            with m.Elif(is_open[k]):
                m.d.comb += do_pre.eq(now >= ras_ok[k])
            with m.Else():
                m.d.comb += do_act.eq(now >= act_ok[k])
        issue = do_col | do_err
        m.d.comb += self.cmd.ready.eq(issue)

        with m.If(do_pre):
            m.d.sync += [is_open[k].eq(0), act_ok[k].eq(now + t.RP), head_conflict.eq(1)]
        with m.If(do_act):
            m.d.sync += [is_open[k].eq(1), open_row[k].eq(row), col_ok[k].eq(now + t.RCD),
                         ras_ok[k].eq(now + t.RAS), head_miss.eq(~head_conflict)]
        with m.If(do_col):
            m.d.sync += [bg_free[group].eq(now + Mux(c.op == Op.UPDATE, t.CCDWL, t.CCD_L)),
                         any_free.eq(now + t.CCD_S), head_conflict.eq(0), head_miss.eq(0)]
            with m.If(writing):
                m.d.sync += [wtr_l[group].eq(now + t.WTR_L), wtr_s.eq(now + t.WTR_S)]
        m.d.sync += [prev_write.eq(do_col & writing), prev_beat.eq(beat)]

        # --- pipeline: read (t), add (t+1), write and queue the response (t+2) --------------------
        m.d.comb += [rd.addr.eq(beat), rd.en.eq(1)]
        s1 = Signal(mem_request_layout(p))
        s1_valid, s1_err, s1_release = Signal(), Signal(), Signal(T)
        m.d.sync += [s1_valid.eq(issue), s1_err.eq(do_err), s1.eq(c),
                     s1_release.eq(now + t.CL)]
        m.d.comb += [
            alu.i.valid.eq(s1_valid),
            alu.i.payload.old.eq(rd.data),
            alu.i.payload.data.eq(s1.data),
            alu.i.payload.mask.eq(s1.mask),
            alu.i.payload.op.eq(Mux(s1_err, Op.READ, s1.op)),
            alu.i.payload.etype.eq(s1.etype),
            alu.o.ready.eq(1),
        ]
        s2 = Signal(mem_request_layout(p))
        s2_err, s2_release = Signal(), Signal(T)
        m.d.sync += [s2.eq(s1), s2_err.eq(s1_err), s2_release.eq(s1_release)]
        s2_write = alu.o.valid & ~s2_err & ((s2.op == Op.STORE) | (s2.op == Op.UPDATE))
        m.d.comb += [wr.addr.eq(s2.addr[p.beat_offset_bits:]), wr.data.eq(alu.o.payload.result),
                     wr.en.eq(s2_write)]
        entry = Signal(resp_layout)
        m.d.comb += [
            entry.resp.data.eq(Mux((s2.op == Op.READ) & ~s2_err, alu.o.payload.result, 0)),
            entry.resp.tag.eq(s2.tag), entry.resp.op.eq(s2.op), entry.resp.stream.eq(s2.stream),
            entry.resp.error.eq(s2_err | alu.o.payload.error),
            entry.release.eq(s2_release),
            rfifo.w_en.eq(alu.o.valid), rfifo.w_data.eq(entry),
        ]
        head = resp_layout(rfifo.r_data)
        m.d.comb += [
            self.resp.valid.eq(rfifo.r_rdy & (now >= head.release)),
            self.resp.payload.eq(head.resp),
            rfifo.r_en.eq(self.resp.valid & self.resp.ready),
        ]
        m.d.sync += outstanding.eq(outstanding + issue - (self.resp.valid & self.resp.ready))

        # --- registers -----------------------------------------------------------------------------
        counters = {"errors": Signal(32), "busy": Signal(32)}
        for name in COUNTERS:
            for s in ("compute", "comm"):
                counters[f"{name}_{s}"] = Signal(32, name=f"cnt_{name}_{s}")
        regs.elaborate(m, self.csr, counters)
        clear = regs.command("cmd", "clear")
        alu_error = alu.o.valid & alu.o.payload.error & ~s2_err
        regs.status(m, "status", refused=do_err | alu_error)
        # errors: an address error and an ALU error can land in the same cycle
        accumulate(m, counters["errors"], do_err + alu_error, clear)
        count(m, counters["busy"], self.cmd.valid, clear)
        for s_name, s_code in (("compute", Stream.COMPUTE), ("comm", Stream.COMM)):
            here = do_col & (c.stream == s_code)
            for name, event in (("reads", c.op == Op.READ), ("stores", c.op == Op.STORE),
                                ("updates", c.op == Op.UPDATE),
                                ("row_conflicts", head_conflict),
                                ("row_misses", ~head_conflict & head_miss),
                                ("row_hits", ~head_conflict & ~head_miss)):
                count(m, counters[f"{name}_{s_name}"], here & event, clear)
        return m
