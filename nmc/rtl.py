"""The near-bank op-and-store unit: one HBM2 pseudo-channel whose banks carry ALUs
(paper 4.3, 5.1.1; dissertation 2.5.2, 6.2.2; ``docs/design.md`` section 6)."""

from types import SimpleNamespace

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, accumulate, count, csr_signature
from hw.interfaces import Op, Stream, mem_request_layout, mem_response_layout
from hw.params import T3Params
from .alu import LATENCY as ALU_LATENCY, NearBankALU
from .config import READ_BANK_BEATS, WRITE_DELAY
from hw.pipeline import COLLISION_UNUSED
from .config import COUNTERS, NMCParams, nmc_registers


__all__ = ["NMCUnit", "decode_address", "storage", "alu_pipeline", "count_traffic"]


def _log2(n):
    return n.bit_length() - 1


def decode_address(p, n, addr):
    """``(beat, bad, group, bank, row)`` of a command's address: its beat (the bits below the
    capacity), whether it is refused (beyond the capacity or not beat aligned), and the beat's
    bank group (lowest), bank and row (:func:`nmc.config.decode`)."""
    cap_bits = _log2(n.capacity_beats)
    col_bits, bg_bits, bank_bits = _log2(n.columns), _log2(n.bank_groups), _log2(n.banks)
    beat_full = addr[p.beat_offset_bits:]
    beat = beat_full[:cap_bits]
    bad = (addr[:p.beat_offset_bits] != 0) | (beat_full[cap_bits:] != 0 if
                                              len(beat_full) > cap_bits else 0)
    group = beat[:bg_bits] if bg_bits else Const(0, 1)
    bank_no = beat[bg_bits + col_bits:bg_bits + col_bits + bank_bits] if bank_bits \
        else Const(0, 1)
    row = beat[bg_bits + col_bits + bank_bits:] if n.rows > 1 else Const(0, 1)
    return beat, bad, group, bank_no, row


def storage(m, p, n):
    """The unit's storage: banks of at most ``READ_BANK_BEATS`` beats, a write going to its
    bank.  Returns the write (``addr``, ``data``, ``en``), the banks' synchronous read ports and
    the bits of a beat's offset in its bank."""
    cap_bits = _log2(n.capacity_beats)
    bank_beats = min(n.capacity_beats, READ_BANK_BEATS)
    n_banks = n.capacity_beats // bank_beats
    in_bank = _log2(bank_beats)             # the beat's offset in its bank, in bits
    wr = SimpleNamespace(addr=Signal(cap_bits), data=Signal(p.beat_bits), en=Signal())
    banks = []
    for k in range(n_banks):
        mem = Memory(shape=p.beat_bits, depth=bank_beats, init=[])
        # the read that meets a write to its address is never used (below): the tools may
        # leave it undefined, and build no bypass between the RAM and its register
        mem.attrs[COLLISION_UNUSED] = 1
        m.submodules[f"storage{k}" if n_banks > 1 else "storage"] = mem
        w = mem.write_port()
        m.d.comb += [w.addr.eq(wr.addr[:in_bank]), w.data.eq(wr.data),
                     w.en.eq(wr.en & (wr.addr[in_bank:] == k))]
        banks.append(mem.read_port(domain="sync"))
    return wr, banks, in_bank


def alu_pipeline(m, p, alu, wr, issue, do_err, c, old, slot=None):
    """The ALU behind a column command: ``c`` issued now (``issue``; refused: ``do_err``), the
    beat ``old`` as it stands next cycle; the command rides beside the ALU's stages (with
    ``slot``, a value carried along) and its write lands, ``WRITE_DELAY`` cycles after the
    command, on ``wr``.  Returns the command leaving the ALU, its refusal, its response entry
    and its carried value."""
    s0 = Signal(mem_request_layout(p))
    s0_valid, s0_err = Signal(name="s0_valid"), Signal(name="s0_err")
    m.d.sync += [s0_valid.eq(issue), s0_err.eq(do_err), s0.eq(c)]
    m.d.comb += [
        alu.i.valid.eq(s0_valid),
        alu.i.payload.old.eq(old),
        alu.i.payload.data.eq(s0.data),
        alu.i.payload.mask.eq(s0.mask),
        alu.i.payload.op.eq(Mux(s0_err, Op.READ, s0.op)),
        alu.i.payload.etype.eq(s0.etype),
        alu.o.ready.eq(1),
    ]
    s2, s2_err = s0, s0_err      # the command whose result leaves the ALU now
    s2_slot = slot
    if slot is not None:
        s2_slot = Signal.like(slot, name="s0_slot")
        m.d.sync += s2_slot.eq(slot)
    for k in range(ALU_LATENCY):
        later = Signal(mem_request_layout(p), name=f"s{k + 1}")
        later_err = Signal(name=f"s{k + 1}_err")
        m.d.sync += [later.eq(s2), later_err.eq(s2_err)]
        s2, s2_err = later, later_err
        if slot is not None:
            later_slot = Signal.like(slot, name=f"s{k + 1}_slot")
            m.d.sync += later_slot.eq(s2_slot)
            s2_slot = later_slot
    s2_write = alu.o.valid & ~s2_err & ((s2.op == Op.STORE) | (s2.op == Op.UPDATE))
    m.d.comb += [wr.addr.eq(s2.addr[p.beat_offset_bits:]), wr.data.eq(alu.o.payload.result),
                 wr.en.eq(s2_write)]
    entry = Signal(mem_response_layout(p))
    m.d.comb += [
        entry.data.eq(Mux((s2.op == Op.READ) & ~s2_err, alu.o.payload.result, 0)),
        entry.tag.eq(s2.tag), entry.op.eq(s2.op), entry.stream.eq(s2.stream),
        entry.error.eq(s2_err | alu.o.payload.error),
    ]
    return s2, s2_err, entry, s2_slot


def count_traffic(m, counters, clear, later, do_col, c, conflict, miss):
    """The per-stream counters of the column command ``c`` (issued with ``do_col``): reads,
    stores, updates and row conflicts, misses and hits (by the row commands taken for it,
    ``conflict`` and ``miss``), each event through ``later`` (a register)."""
    for s_name, s_code in (("compute", Stream.COMPUTE), ("comm", Stream.COMM)):
        here = do_col & (c.stream == s_code)
        for name, event in (("reads", c.op == Op.READ), ("stores", c.op == Op.STORE),
                            ("updates", c.op == Op.UPDATE),
                            ("row_conflicts", conflict),
                            ("row_misses", ~conflict & miss),
                            ("row_hits", ~conflict & ~miss)):
            count(m, counters[f"{name}_{s_name}"], later(here & event, f"{name}_{s_name}"),
                  clear)


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
    ahead : In(stream.Signature(params.addr_bits)), with ``scheduler="bank-parallel"`` only
        Each command's address, in the order the commands reach ``cmd``, no later than the
        command's first cycle there; ``ready`` while fewer than ``ahead_depth`` announced
        commands have not executed.

    Row commands (``NMCParams.scheduler``)
    ---------------------------------------
    ``"in-order"``: the head command's bank alone takes row commands, as the timing below
    says.  ``"bank-parallel"``: each bank's announced rows are kept in order, and every cycle
    one row command goes to the head's bank if it can take one, else to the lowest-numbered
    bank that can: a PRE when its open row is not its oldest command's (RAS after its ACT and
    WTP after its last write's column command), an ACT of that row when it is closed (RP after
    its PRE, RRD after any ACT).  Column commands keep the rules below, in order; a command
    counts as a miss or conflict by the row commands its bank took for it; one executed
    without an announcement latches ``status.unannounced`` (its bank is prepared for it at the
    head).

    Timing (one action per cycle for the head command, in order)
    ------------------------------------------------------------
    * A command's first cycle at the head is its check: its bank's state, its row and the
      writes in flight are compared into registers, and it acts from its second cycle (the
      decision then comes from registers; a new head follows a column command, and with
      CCD_S >= 2 that cycle is spent waiting anyway).
    * Row hit: the column command issues when the cycle ≥ ACT + RCD of its bank, ≥ the bank
      group's next free cycle (last column + CCD_L, or + CCDWL after an op-and-store), ≥ the last
      column command + CCD_S, and, for a ``READ``, ≥ the last write + WTR_L in the same bank group
      and + WTR_S anywhere.
    * Row closed (miss): ACT when the bank's precharge has had RP cycles, then the hit rules.
    * Other row open (conflict): PRE when the row has been open RAS cycles, then as a miss.
    * Atomicity (stall): a command that reads a beat written by a column command of the last
      ``WRITE_DELAY - 1`` = 7 cycles waits (a write lands ``nmc.config.WRITE_DELAY`` = 8 cycles
      after its column command: the read, the ALU's seven stages; the writes the read
      does not see are forwarded).  A later command to the same
      address sits in the same bank group: after an op-and-store CCDWL (8) spaces it enough;
      after a ``STORE``, CCD_L (4) does not, and a command to the same beat 4 cycles later
      waits four cycles (a ``READ`` waits WTR_L = 8 anyway).
    * The response FIFO holds ``resp_depth`` responses; a column command waits while that many
      are outstanding.

    Bad input: an address beyond the capacity or not beat aligned is refused without touching a
    bank (response ``error``, ``status`` latched, ``errors`` + 1); an ``UPDATE`` whose mask
    splits an element is refused by the ALU (memory unchanged).  Element type codes are all
    valid (2 bits, four types).

    Time is kept without stamps: each timing constraint is a down-counter loaded with its delay
    and ready at zero, and a response's ``CL`` is counted by a shift register of its write into
    the response FIFO, so nothing wraps however long the unit runs or idles.
    """

    def __init__(self, params: T3Params, nparams: NMCParams = NMCParams()):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        if not isinstance(nparams, NMCParams):
            raise TypeError(f"nparams must be an NMCParams, not {nparams!r}")
        if nparams.scheduler == "fr-fcfs":
            raise ValueError("an NMCUnit executes in order: the 'fr-fcfs' scheduler is "
                             "nmc.frfcfs.FRFCFSUnit")
        self.params, self.nparams = params, nparams
        self.regs = nmc_registers(params, nparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        ports = {
            "cmd": In(stream.Signature(mem_request_layout(params))),
            "resp": Out(stream.Signature(mem_response_layout(params))),
            "csr": In(csr_signature(self.regs.addr_bits)),
        }
        if nparams.scheduler == "bank-parallel":
            ports["ahead"] = In(stream.Signature(params.addr_bits))
            nb = nparams.bank_groups * nparams.banks
            row_bits = max(1, _log2(nparams.rows))
            depth = nparams.ahead_depth
            #: for proofs (``tests/test_formal.py``): each bank's announced commands and the
            #: oldest one's row; each bank open, and its row; the row commands' candidates
            #: and choice (one-hot), and the head's bank (one-hot; none without a head)
            self.ahead_state = SimpleNamespace(
                count=[Signal(range(depth + 1), name=f"ahead_count{b}") for b in range(nb)],
                front=[Signal(row_bits, name=f"ahead_front{b}") for b in range(nb)],
                is_open=Signal(nb, name="row_opened"),
                open_row=[Signal(row_bits, name=f"open_row{b}") for b in range(nb)],
                cand=Signal(nb, name="row_cand"), sel=Signal(nb, name="row_sel"),
                head_bank=Signal(nb, name="head_bank"))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        p, n, regs = self.params, self.nparams, self.regfile
        t = n.timing
        bp = n.scheduler == "bank-parallel"
        nb = n.bank_groups * n.banks
        cap_bits = _log2(n.capacity_beats)
        row_bits = max(1, _log2(n.rows))

        # The storage in banks of at most READ_BANK_BEATS beats, each read into a register of
        # its own (see the pipeline below); a write goes to its bank.
        wr, banks, in_bank = storage(m, p, n)
        n_banks = len(banks)
        m.submodules.alu = alu = NearBankALU(p, self.nparams.elem_types)
        resp_layout = mem_response_layout(p)
        # the responses' queue: LUT RAM read as it stands at the read pointer (a write is
        # readable the next cycle, as SyncFIFO's); no level: a column command waits while
        # resp_depth responses are outstanding, so it never overflows, and a response leaves
        # only once matured, so never from an empty queue
        m.submodules.rqueue = rqueue = Memory(shape=resp_layout.size, depth=n.resp_depth,
                                              init=[])
        rq_w, rq_r = rqueue.write_port(), rqueue.read_port(domain="comb")
        rq_head = Signal(range(n.resp_depth), name="rq_head")
        rq_tail = Signal(range(n.resp_depth), name="rq_tail")

        # --- bank and timing state ---------------------------------------------------------
        # A timer is loaded with (delay - 1) in the cycle of its event and counts down to 0:
        # it reads 0, ready, from the cycle event + delay on (as "now >= event + delay").
        # Beside each timer a register ``<name>_soon`` holds "the timer reads 0 or 1" (it is
        # ready from the next cycle on): the head's flags select that bit by the head's bank or
        # group, rather than the whole count to compare after the select (in a node the command
        # slice, the bank select and the compare were the worst path, 13.5 ns).  The bit follows
        # the count: after a load, the load's own value; else the count read 2 or less.
        timers = []

        def timer(name, *delays):
            sig = Signal(range(max(2, *delays)), name=name)
            sig.soon = Signal(init=1, name=f"{name}_soon")
            timers.append(sig)
            return sig

        def load(delay):
            return max(delay - 1, 0)

        def start(array, index, delay):
            """Load ``array[index]`` for ``delay`` cycles, and its bit (set if ``delay`` ≤ 2)."""
            return [array[index].eq(load(delay)), array.soon[index].eq(load(delay) <= 1)]

        is_open = Array(Signal(name=f"open{k}") for k in range(nb))
        open_row = Array(Signal(row_bits, name=f"row{k}") for k in range(nb))

        def timers_of(name, count, *delays):
            array = Array(timer(f"{name}{k}", *delays) for k in range(count))
            array.soon = Array(sig.soon for sig in array)
            return array

        col_ok = timers_of("col_ok", nb, t.RCD)
        ras_ok = timers_of("ras_ok", nb, t.RAS)
        act_ok = timers_of("act_ok", nb, t.RP)
        bg_free = timers_of("bg_free", n.bank_groups, t.CCDWL, t.CCD_L)
        wtr_l = timers_of("wtr_l", n.bank_groups, t.WTR_L)
        any_free = timers_of("any_free", 1, t.CCD_S)
        wtr_s = timers_of("wtr_s", 1, t.WTR_S)
        for sig in timers:
            m.d.sync += [sig.eq(Mux(sig == 0, 0, sig - 1)), sig.soon.eq(sig <= 2)]
        # the beats written by the column commands of the last WRITE_DELAY - 1 cycles, whose
        # writes have not landed yet (a write lands WRITE_DELAY cycles after its column command)
        recent_write = [Signal(name=f"recent_write{k}") for k in range(WRITE_DELAY - 1)]
        recent_beat = [Signal(cap_bits, name=f"recent_beat{k}") for k in range(WRITE_DELAY - 1)]
        head_conflict = Signal()
        head_miss = Signal()
        outstanding = Signal(range(n.resp_depth + 1))

        # --- decode the head command --------------------------------------------------------------
        c = self.cmd.payload
        beat, bad, group, bank_no, row = decode_address(p, n, c.addr)
        k = Signal(range(nb))
        m.d.comb += k.eq(bank_no * n.bank_groups + group)
        reading = c.op == Op.READ
        # every bank's open row against the head's, in parallel, the head's bank chosen after
        # (the bank's row chosen first, then compared, was a node's path into ``f_hit``,
        # 11.5 ns: the bank number's select fanned out to every bit of the row)
        row_hit = Signal(nb, name="row_hit")
        m.d.comb += row_hit.eq(Cat(*(is_open[j] & (open_row[j] == row) for j in range(nb))))
        writing = (c.op == Op.STORE) | (c.op == Op.UPDATE)

        # The decision comes from registers (on an FPGA, deciding from the command as shown --
        # its bank's state, its row, the writes in flight -- and fanning the decision out to
        # every timer took 21.8 ns in a node).  A command's first cycle at the head (``fresh``)
        # is spent computing its flags; from then on each flag is kept current: every flag is
        # the head's condition for the next cycle, from the state's registers, corrected at
        # the last step by what the head does this cycle (only the head acts: in order).  A
        # timer that reads 1 or 0 reads 0 next cycle unless the head's own action loads it;
        # after a column command the head is a new command, fresh again.
        fresh = Signal(init=1)
        f_bad = Signal(name="f_bad")
        f_reading = Signal(name="f_reading")
        f_open = Signal(name="f_open")
        f_hit = Signal(name="f_hit")
        f_col, f_ras, f_act, f_bg, f_wtr, f_any, f_hazard = (Signal(name=f"f_{flag}") for flag in (
            "col", "ras", "act", "bg", "wtr", "any", "hazard"))
        f_room = Signal(init=1)
        go = self.cmd.valid & ~fresh & ~f_bad
        do_col = Signal(name="do_col")
        do_pre = Signal(name="do_pre")
        do_act = Signal(name="do_act")
        do_err = Signal(name="do_err")
        m.d.comb += [
            do_err.eq(self.cmd.valid & ~fresh & f_bad & f_room),
            do_col.eq(go & f_hit & f_col & f_bg & f_any & (~f_reading | f_wtr) & ~f_hazard &
                      f_room),
        ]
        issue = do_col | do_err
        m.d.comb += self.cmd.ready.eq(issue)
        pop = self.resp.valid & self.resp.ready
        if bp:
            # the row commands of the bank-parallel scheduler, on the head's bank (do_pre,
            # do_act: what the head's flags are corrected by) or any other
            ahead = self._bank_parallel(m, k=k, row=row, issue=issue, do_col=do_col,
                                        writing=writing, is_open=is_open, open_row=open_row,
                                        col_ok=col_ok, ras_ok=ras_ok, act_ok=act_ok,
                                        timers_of=timers_of, start=start, nb=nb,
                                        row_bits=row_bits)
            m.d.comb += [do_pre.eq(ahead.pre_here), do_act.eq(ahead.act_here)]
            want_head = ahead.want_head
        else:
            m.d.comb += [
                do_pre.eq(go & f_open & ~f_hit & f_ras),
                do_act.eq(go & ~f_open & f_act),
            ]
            want_head = row

        m.d.sync += [
            fresh.eq(~self.cmd.valid | issue),
            f_bad.eq(bad), f_reading.eq(reading),
            f_open.eq(do_act | (is_open[k] & ~do_pre)),
            f_hit.eq(Mux(do_act, want_head == row, row_hit.bit_select(k, 1) & ~do_pre) if bp
                     else do_act | (row_hit.bit_select(k, 1) & ~do_pre)),
            f_col.eq(Mux(do_act, t.RCD <= 1, col_ok.soon[k])),
            f_ras.eq(Mux(do_act, t.RAS <= 1, ras_ok.soon[k])),
            f_act.eq(Mux(do_pre, t.RP <= 1, act_ok.soon[k])),
            f_bg.eq(bg_free.soon[group]),
            f_wtr.eq(wtr_l.soon[group] & wtr_s.soon[0]),
            f_any.eq(any_free.soon[0]),
            # the writes in flight next cycle: those of now but the oldest (a column command
            # now would make the head fresh)
            f_hazard.eq(Cat(*(w & (b == beat) for w, b in zip(recent_write[:-1],
                                                               recent_beat[:-1]))).any()),
            f_room.eq((outstanding < n.resp_depth) | pop),
        ]

        if bp:
            head_conflict, head_miss = ahead.conflict, ahead.miss
        else:
            with m.If(do_pre):
                m.d.sync += [is_open[k].eq(0), *start(act_ok, k, t.RP), head_conflict.eq(1)]
            with m.If(do_act):
                m.d.sync += [is_open[k].eq(1), open_row[k].eq(row), *start(col_ok, k, t.RCD),
                             *start(ras_ok, k, t.RAS), head_miss.eq(~head_conflict)]
        with m.If(do_col):
            if bp:
                m.d.sync += start(any_free, 0, t.CCD_S)
            else:
                m.d.sync += [*start(any_free, 0, t.CCD_S), head_conflict.eq(0),
                             head_miss.eq(0)]
            with m.If(c.op == Op.UPDATE):
                m.d.sync += start(bg_free, group, t.CCDWL)
            with m.Else():
                m.d.sync += start(bg_free, group, t.CCD_L)
            with m.If(writing):
                m.d.sync += [*start(wtr_l, group, t.WTR_L), *start(wtr_s, 0, t.WTR_S)]
        m.d.sync += [recent_write[0].eq(do_col & writing), recent_beat[0].eq(beat)]
        for k in range(1, WRITE_DELAY - 1):
            m.d.sync += [recent_write[k].eq(recent_write[k - 1]),
                         recent_beat[k].eq(recent_beat[k - 1])]

        # --- pipeline: read (t), the ALU from the read data (t+1 .. t+ALU_LATENCY), write and
        # queue the response (t+WRITE_DELAY) --------------------------------------------------------
        # The storage is read a cycle ahead: a command issues only from its second cycle at
        # the head, so in the cycle before its column command (t - 1) the head is already that
        # command and its beat is read.  (The block RAM's output takes most of a cycle on an
        # FPGA, 5.8 ns on an ECP5: it straight into the ALU's input registers, spread over the
        # four formats' adders, was the node's critical path, 12.5 ns.)  Each bank is read
        # into a register of its own that takes nothing else, the bank chosen after the
        # registers: on an ECP5 the register is then the block RAMs' own output register
        # (``hw.pnr.absorb_output_registers``), 1.0 ns from the clock; with a choice in front
        # of it, it was placed 6.1 ns of wire from the block RAM, 12.96 ns in a node.  The
        # read port is not transparent, so the read at t - 1 sees neither the write at t - 1
        # (were the addresses equal its data is not used: ``COLLISION_UNUSED``, and the tools
        # build no bypass) nor the one at t; the later of those two writes to the beat
        # (``landed``, its data ``landed_data``) is registered apart and chosen after the bank,
        # so ``old`` holds at t + 1 exactly what a read at t would give.  (Two column commands
        # to one beat are never a cycle apart, so at most one of the two is to the beat.)
        reads = []
        for k, rd in enumerate(banks):
            m.d.comb += [rd.addr.eq(beat[:in_bank]), rd.en.eq(1)]
            reg = Signal(p.beat_bits, name=f"read{k}", reset_less=True)
            m.d.sync += reg.eq(rd.data)
            reads.append(reg)
        read_bank = Signal(range(n_banks), name="read_bank")
        # at t, from registers: whether the write at t - 1 was to the beat (compared at t - 1)
        # and whether the write at t is (compared at t - 1 too, from the oldest column
        # command in flight, whose write lands at t); the head's beat at t - 1 is the beat of
        # a command issuing at t
        hit_before = Signal(name="hit_before")
        hit_next = Signal(name="hit_next")
        data_before = Signal(p.beat_bits, name="data_before", reset_less=True)
        landed = Signal(name="landed")
        landed_data = Signal(p.beat_bits, name="landed_data", reset_less=True)
        m.d.sync += [
            read_bank.eq(beat[in_bank:]),
            hit_before.eq(wr.en & (wr.addr == beat)),
            hit_next.eq(recent_write[-1] & (recent_beat[-1] == beat)),
            data_before.eq(wr.data),
            landed.eq(hit_next | hit_before),
            landed_data.eq(Mux(hit_next, wr.data, data_before)),
        ]
        read = Array(reads)[read_bank] if n_banks > 1 else reads[0]
        old = Mux(landed, landed_data, read)
        s2, s2_err, entry, _ = alu_pipeline(m, p, alu, wr, issue, do_err, c, old)
        m.d.comb += [rq_w.addr.eq(rq_tail), rq_w.data.eq(entry), rq_w.en.eq(alu.o.valid),
                     rq_r.addr.eq(rq_head)]

        def incr(ptr):
            return Mux(ptr == n.resp_depth - 1, 0, ptr + 1)
        # A response enters the queue WRITE_DELAY cycles after its column command and may
        # leave CL cycles after it: a shift register carries each write for the difference, and
        # ``matured`` counts the entries (the oldest ones: all wait alike) that may leave.
        delay = max(t.CL - WRITE_DELAY, 0)
        matured = Signal(range(n.resp_depth + 1))
        maturing = Signal()
        if delay:
            age = Signal(delay)
            m.d.sync += age.eq(Cat(alu.o.valid, age[:-1]))
            m.d.comb += maturing.eq(age[-1])
        else:
            m.d.comb += maturing.eq(alu.o.valid)
        # the head is matured, or matures now (CL > WRITE_DELAY: delay >= 1); either way it
        # is in the queue, so the valid needs no level (a level from the queue's fill, its
        # write from the ALU's far end, through the valid and back into the level was the
        # node's worst path at some seeds: 12.0-12.5 ns, two wires of 4.6-4.9 ns)
        assert delay >= 1
        m.d.comb += [
            self.resp.valid.eq((matured != 0) | maturing),
            self.resp.payload.eq(rq_r.data),
        ]
        with m.If(alu.o.valid):
            m.d.sync += rq_tail.eq(incr(rq_tail))
        with m.If(pop):
            m.d.sync += rq_head.eq(incr(rq_head))
        m.d.sync += matured.eq(matured + maturing - pop)
        # one more or one fewer, both summed from the register alone and chosen by the issue
        # and the pop at the end (the sum after them put a carry chain behind the issue's
        # decision, the wide AND of the head's flags: ``f_hazard`` into ``outstanding`` was
        # a node's path at two seeds)
        more, fewer = Signal.like(outstanding), Signal.like(outstanding)
        m.d.comb += [more.eq(outstanding + 1), fewer.eq(outstanding - 1)]
        with m.If(issue & ~pop):
            m.d.sync += outstanding.eq(more)
        with m.Elif(pop & ~issue):
            m.d.sync += outstanding.eq(fewer)

        # --- registers -----------------------------------------------------------------------------
        counters = {"errors": Signal(32), "busy": Signal(32)}
        for name in COUNTERS:
            for s in ("compute", "comm"):
                counters[f"{name}_{s}"] = Signal(32, name=f"cnt_{name}_{s}")
        regs.elaborate(m, self.csr, counters)
        clear = regs.command("cmd", "clear")
        alu_error = alu.o.valid & alu.o.payload.error & ~s2_err
        if bp:
            regs.status(m, "status", refused=do_err | alu_error,
                        unannounced=ahead.unannounced)
        else:
            regs.status(m, "status", refused=do_err | alu_error)

        def later(event, name):
            # the counters count an event in the cycle after it: in a node the command's
            # decode and the issue decision ran on into the enables of the 32-bit counters
            # (placed at 42.9 MHz); an event in the cycle before a clear is cleared with it
            reg = Signal(len(event), name=f"ev_{name}")
            m.d.sync += reg.eq(event)
            return reg

        # errors: an address error and an ALU error can land in the same cycle
        accumulate(m, counters["errors"], later(do_err + alu_error, "errors"), clear)
        count(m, counters["busy"], self.cmd.valid, clear)
        count_traffic(m, counters, clear, later, do_col, c, head_conflict, head_miss)
        return m

    def _bank_parallel(self, m, *, k, row, issue, do_col, writing, is_open, open_row, col_ok,
                       ras_ok, act_ok, timers_of, start, nb, row_bits):
        """The bank-parallel scheduler's state and row commands (see the class's docstring);
        returns what the head's logic needs of it."""
        p, n = self.params, self.nparams
        t = n.timing
        depth = n.ahead_depth
        d_bits = _log2(depth)
        out = SimpleNamespace()

        def decode(addr):
            _, _, group, bank_no, row = decode_address(p, n, addr)
            return bank_no * n.bank_groups + group, row

        # --- the rows announced, per bank, in order: one queue a bank in one memory -------------
        a_bank, a_row = decode(self.ahead.payload)
        a_k = Signal(range(nb), name="ahead_bank")
        m.d.comb += a_k.eq(a_bank)
        st = self.ahead_state
        total = Signal(range(depth + 1), name="ahead_total")
        count = st.count
        wptr = Array(Signal(d_bits, name=f"ahead_w{b}") for b in range(nb))
        rptr = Array(Signal(d_bits, name=f"ahead_r{b}") for b in range(nb))
        front = st.front
        m.submodules.ahead_rows = rows = Memory(shape=row_bits, depth=nb * depth, init=[])
        w, r = rows.write_port(), rows.read_port(domain="comb")
        push = Signal(name="ahead_push")
        announced_k = Array(c != 0 for c in count)[k]
        pop = issue & announced_k
        out.unannounced = issue & ~announced_k
        m.d.comb += [
            self.ahead.ready.eq(total != depth),
            push.eq(self.ahead.valid & self.ahead.ready),
            w.addr.eq(Cat(wptr[a_k], a_k)), w.data.eq(a_row), w.en.eq(push),
            # the second oldest of the head's bank: its front once the head leaves
            r.addr.eq(Cat((rptr[k] + 1)[:d_bits], k)),
        ]
        m.d.sync += total.eq(total + push - pop)
        with m.If(push):
            m.d.sync += wptr[a_k].eq(wptr[a_k] + 1)
        with m.If(pop):
            m.d.sync += rptr[k].eq(rptr[k] + 1)
        for b in range(nb):
            push_b, pop_b = push & (a_k == b), pop & (k == b)
            m.d.sync += count[b].eq(count[b] + push_b - pop_b)
            with m.If(pop_b & (count[b] > 1)):
                m.d.sync += front[b].eq(r.data)
            with m.Elif(push_b & ((count[b] == 0) | pop_b)):
                m.d.sync += front[b].eq(a_row)

        # --- row commands: one a cycle, for the oldest command of each bank ----------------
        # (the head's bank first, then the lowest-numbered bank that can take one)
        wtp = timers_of("wtp", nb, t.WTP)
        rrd = timers_of("rrd", 1, t.RRD)
        for sig in (*wtp, *rrd):                # made after the others' countdown
            m.d.sync += [sig.eq(Mux(sig == 0, 0, sig - 1)), sig.soon.eq(sig <= 2)]
        want = [Mux(count[b] != 0, front[b], row) for b in range(nb)]
        head_bank, cand, opened, sel = st.head_bank, st.cand, st.is_open, st.sel
        m.d.comb += head_bank.eq(Mux(self.cmd.valid, Const(1, nb) << k, 0))
        m.d.comb += opened.eq(Cat(*is_open))
        m.d.comb += [mine.eq(theirs) for mine, theirs in zip(st.open_row, open_row)]
        m.d.comb += cand.eq(Cat(*(
            ((count[b] != 0) | head_bank[b]) &
            Mux(is_open[b], (open_row[b] != want[b]) & (ras_ok[b] == 0) & (wtp[b] == 0),
                (act_ok[b] == 0) & (rrd[0] == 0))
            for b in range(nb))))
        lowest = cand & ~(cand - 1)
        m.d.comb += sel.eq(Mux((cand & head_bank).any(), head_bank, lowest[:nb]))
        conflict = [Signal(name=f"row_conflict{b}") for b in range(nb)]
        miss = [Signal(name=f"row_miss{b}") for b in range(nb)]
        for b in range(nb):
            with m.If(sel[b] & is_open[b]):
                m.d.sync += [is_open[b].eq(0), *start(act_ok, b, t.RP), conflict[b].eq(1)]
            with m.If(sel[b] & ~is_open[b]):
                m.d.sync += [is_open[b].eq(1), open_row[b].eq(want[b]),
                             *start(col_ok, b, t.RCD), *start(ras_ok, b, t.RAS),
                             *start(rrd, 0, t.RRD), miss[b].eq(1)]
        with m.If(do_col):
            m.d.sync += [Array(conflict)[k].eq(0), Array(miss)[k].eq(0)]
            with m.If(writing):
                m.d.sync += start(wtp, k, t.WTP)
        out.pre_here = (sel & opened).bit_select(k, 1)
        out.act_here = (sel & ~opened).bit_select(k, 1)
        out.want_head = Array(want)[k]
        out.conflict = Array(conflict)[k]
        out.miss = Array(miss)[k] & ~out.conflict
        return out
