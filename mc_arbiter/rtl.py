"""Memory-controller front end: compute and communication streams, the arbitration policy, the
DRAM command queue (MCQ) (paper section 4.5; ``docs/design.md`` section 7)."""

import operator
from functools import reduce

from amaranth import C, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, accumulate, count, csr_signature
from hw.interfaces import Stream, mem_request_layout
from hw.params import T3Params
from hw.pipeline import BypassFIFO, WriteAheadSyncFIFO
from .config import STARVE_BITS, ArbiterParams, Policy, arbiter_registers


__all__ = ["MCArbiter", "ArbiterPolicy"]


class ArbiterPolicy(wiring.Component):
    """The arbitration decision and its state, separate from the datapath so that it can be
    proved on its own (``tests/test_mc_arbiter_formal.py``).

    Inputs (all for the current cycle): ``policy``, ``threshold``, ``starve_limit`` (registers),
    ``c_valid``, ``m_valid`` (the streams' valid), ``room`` (the MCQ can take a request and the
    tap is ready), ``level`` (MCQ entries), ``drain``; and for the next cycle
    ``starve_limit_next`` (what the register will hold), ``threshold_host`` and
    ``threshold_host_write`` (the host writes ``threshold_host`` into the threshold now),
    ``threshold_calib`` (the calibration table's thresholds), ``calib_pick`` (one-hot: the row
    the calibration chose) and ``calib_write`` (the calibration writes the chosen row's
    threshold into the threshold now; never with the host's write) and ``dequeue`` (a request
    leaves the MCQ now: ``level`` next is ``level`` + an issue − ``dequeue``).
    Outputs, combinational: ``issue_compute``/``issue_comm`` (at most one, only with
    ``room``), ``forced``, and ``tap_comm``: the stream whose request issues, if one does
    (high for communication), decided without ``room`` and without the threshold's compare.  State: ``starve`` (cycles communication waited with room since it
    last issued), ``draining``, and which stream issued last (for round-robin).  The rules are
    :class:`MCArbiter`'s.

    The two comparisons, ``starve >= starve_limit`` and ``level < threshold``, are registers
    (``starved``, ``below``) computed a cycle ahead from the next values, so that the decision
    starts from flip-flops, not from two carry chains (on an FPGA, in a node, the path from
    the starvation counter through the decision into the MCQ's write enable took 15.8 ns).
    ``threshold_init`` is ``threshold``'s value at reset (``below`` starts as ``0 <
    threshold_init``; ``starved`` starts low, as ``starve`` starts at 0).  ``below`` is
    compared against each threshold the next cycle may hold (the register's, the host's and
    every calibration row's) and chosen by ``calib_write``, ``calib_pick`` and
    ``threshold_host_write`` after the compares: the calibration's decision through the choice
    of the threshold into the compare was the arbiter's longest path (10.1 ns), then the
    calibration's accumulators through the row's choice into it the node's at two placements
    (11.0 ns), and the register decoder's address through the host write's choice into it the
    node's at one placement (10.9 ns).
    """

    def __init__(self, aparams: ArbiterParams, threshold_init=None):
        level_shape = range(aparams.depth + 1)
        rows = aparams.calib_rows
        self.threshold_init = aparams.no_limit if threshold_init is None else threshold_init
        super().__init__({
            "policy": In(2), "threshold": In(level_shape), "starve_limit": In(STARVE_BITS),
            "c_valid": In(1), "m_valid": In(1), "room": In(1), "level": In(level_shape),
            "drain": In(1),
            "threshold_host": In(level_shape), "threshold_host_write": In(1),
            "starve_limit_next": In(STARVE_BITS),
            "threshold_calib": In(data.ArrayLayout(level_shape, rows)),
            "calib_pick": In(rows), "calib_write": In(1),
            "dequeue": In(1),
            "issue_compute": Out(1), "issue_comm": Out(1), "forced": Out(1),
            "tap_comm": Out(1),
            "starve": Out(STARVE_BITS), "draining": Out(1),
        })
        #: ``starve_limit != 0 and starve >= starve_limit``, a register (for proofs)
        self.starved = Signal()
        #: ``level < threshold``, a register (for proofs)
        self.below = Signal(init=int(0 < self.threshold_init))

    def elaborate(self, platform):
        m = Module()
        c_valid, m_valid, policy = self.c_valid, self.m_valid, self.policy
        last_comm = Signal()                      # the last issue came from communication
        pick_comm = Signal()
        pick_compute = Signal()
        m.d.comb += self.forced.eq((policy == Policy.MCA) & m_valid & self.starved)
        with m.Switch(policy):
            with m.Case(Policy.COMPUTE_FIRST):
                m.d.comb += [pick_compute.eq(c_valid), pick_comm.eq(~c_valid & m_valid)]
            with m.Case(Policy.MCA):
                with m.If((self.draining | self.drain) & m_valid):
                    m.d.comb += pick_comm.eq(1)
                with m.Elif(self.forced):
                    m.d.comb += pick_comm.eq(1)
                with m.Elif(c_valid):
                    m.d.comb += pick_compute.eq(1)
                with m.Else():
                    m.d.comb += pick_comm.eq(m_valid & self.below)
            with m.Default():                     # ROUND_ROBIN (and the invalid code 3)
                with m.If(c_valid & m_valid):
                    m.d.comb += [pick_comm.eq(~last_comm), pick_compute.eq(last_comm)]
                with m.Else():
                    m.d.comb += [pick_compute.eq(c_valid), pick_comm.eq(m_valid)]
        m.d.comb += [self.issue_compute.eq(pick_compute & self.room),
                     self.issue_comm.eq(pick_comm & self.room)]
        # which payload the tap offers: the issuing stream's.  With one stream valid, that
        # one; with both, the policy's choice, which then depends on registers only (the
        # policy, draining, drain, starved, the last issue), not on ``below`` or ``room``.
        # The full decision through the payload's select into the Tracker's input slice was
        # the node's critical path (11.5 ns, 4.4 of it the select's net)
        both_comm = Signal()
        with m.Switch(policy):
            with m.Case(Policy.COMPUTE_FIRST):
                m.d.comb += both_comm.eq(0)
            with m.Case(Policy.MCA):
                m.d.comb += both_comm.eq(self.draining | self.drain | self.starved)
            with m.Default():
                m.d.comb += both_comm.eq(~last_comm)
        m.d.comb += self.tap_comm.eq(~c_valid | (m_valid & both_comm))
        with m.If(self.issue_compute | self.issue_comm):
            m.d.sync += last_comm.eq(self.issue_comm)
        clear = self.issue_comm | ~m_valid
        grow = self.room & (self.starve != (1 << STARVE_BITS) - 1)
        with m.If(clear):
            m.d.sync += self.starve.eq(0)
        with m.Elif(grow):
            m.d.sync += self.starve.eq(self.starve + 1)
        m.d.sync += self.draining.eq(self.drain | (self.draining & m_valid))

        # the flags for the next cycle: each comparison is made for every next value the
        # counter or the level can take, from registers, and chosen by this cycle's decision
        limit = self.starve_limit_next
        at_or_past = self.starve >= limit
        one_short = self.starve + 1 >= limit
        m.d.sync += self.starved.eq((limit != 0) & ~clear & Mux(grow, one_short, at_or_past))
        level = self.level
        # whether a request issues, as an OR of the valids, not through the policy's choice of
        # stream: with room, compute's request always issues when it is valid (or the other's
        # in its place), and communication's alone issues unless MCA holds it back (neither
        # draining nor starved nor below the threshold), a term of registers only (the policy
        # register through the choice and the streams' valids into ``below`` was a node's
        # worst path at one seed of round 25, 10.9 ns)
        comm_alone = Signal()
        with m.If(policy == Policy.MCA):
            m.d.comb += comm_alone.eq(self.draining | self.drain | self.starved | self.below)
        with m.Else():
            m.d.comb += comm_alone.eq(1)
        issued = Signal()
        m.d.comb += issued.eq(self.room & (c_valid | (m_valid & comm_alone)))

        def below(thr):
            by = {-1: level < thr + 1, 0: level < thr, 1: level + 1 < thr}
            return Mux(issued & ~self.dequeue, by[1],
                       Mux(~issued & self.dequeue, by[-1], by[0]))
        calibrated = Cat(self.calib_pick[k] & below(self.threshold_calib[k])
                         for k in range(len(self.calib_pick))).any()
        m.d.sync += self.below.eq(Mux(self.calib_write, calibrated,
                                      Mux(self.threshold_host_write, below(self.threshold_host),
                                          below(self.threshold))))
        return m


class MCArbiter(wiring.Component):
    """Arbitration between the compute and communication streams into the MCQ.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    aparams : :class:`mc_arbiter.config.ArbiterParams`
    mcq_ram : ``"lut"``, ``"block"`` or None
        Where the MCQ's entries are kept, cycle for cycle the same either way (both queues
        time as Amaranth's ``SyncFIFO``): ``"lut"``, LUT RAM read as it stands
        (:class:`hw.pipeline.WriteAheadSyncFIFO`), for an FPGA with LUT RAM, where a block
        RAM's read leaves late in the cycle (5.6 ns on an ECP5); ``"block"``, block RAM and an
        output register that a request written into an empty queue goes to directly
        (:class:`hw.pipeline.BypassFIFO`), for a deep MCQ or an FPGA without LUT RAM (an
        iCE40).  None (the default): ``"lut"`` up to 64 entries, else ``"block"``.
    retire : bool
        The MCQ's requests are held by the DRAM's scheduler after they leave ``o`` (an FR-FCFS
        unit, :class:`nmc.frfcfs.FRFCFSUnit`, queues them and serves them out of order): with
        ``retire``, a request counts in ``occupancy`` (and the compute stream's) from its
        enqueue until the scheduler reports its column command on ``retired`` /
        ``retired_comm``, rather than until it leaves ``o``; the MCQ is the requests on their
        way to that queue.

    Ports
    -----
    compute : In(stream.Signature(mem_request_layout(params)))
        The CUs' requests (the GEMM's reads and writes).
    comm : In(stream.Signature(mem_request_layout(params)))
        Communication: DMA reads of outgoing tiles, incoming remote and DMA updates.
    tap : Out(stream.Signature(mem_request_layout(params)))
        Every request as it is enqueued (the Tracker attaches here).  A request enqueues only in
        a cycle where ``tap.ready`` is high; tie it high when nothing observes.
    o : Out(stream.Signature(mem_request_layout(params)))
        The head of the MCQ, towards the DRAM.  ``stream`` is set from the port the request came
        in on, whatever the requester wrote there.  A request enqueued (picked) in cycle ``c`` is
        written into the MCQ in cycle ``c + 1`` from a register, so it is offered on ``o``
        from cycle ``c + 2``, or from the cycle after the request before it leaves; the queue
        gives one request per cycle.  ``o.valid`` is a function of the MCQ's level register;
        ``o.payload`` is the LUT RAM as it stands at the read pointer (``mcq_ram="lut"``), or
        the block RAM's output or the bypass register, selected by a register (``"block"``).
    occupancy : Out(range(depth + 1))
        MCQ entries: the requests enqueued and not yet dequeued (with ``retire``: not yet
        retired), the one on its way into the RAM and the output register's included
        (registered: the count at the start of the cycle).
    retired, retired_comm : In(1), with ``retire`` only
        A request left the DRAM scheduler's queue in this cycle, and it was communication's.
    drain : In(1)
        Producer-kernel boundary: from this cycle, communication is issued first and regardless
        of the threshold, until the communication input is empty (``comm.valid`` low with
        ``drain`` low).
    calib_start, calib_end : In(1)
        Calibration window (the producer kernel's isolated first stage): in each cycle strictly
        between the two marks the compute stream's MCQ occupancy (its entries in the MCQ at the
        start of the cycle) is added up; at ``calib_end`` the mean is looked
        up in the calibration table and, if ``ctrl.auto_threshold`` is set, becomes
        ``threshold`` (a host write to ``threshold`` in that cycle wins; ``status.calib_lost``
        reports the dropped result).  ``calib_end`` is applied before ``calib_start`` in the
        same cycle.
    csr : In(csr_signature(...))
        Registers (:func:`mc_arbiter.config.arbiter_registers`).

    Arbitration (combinational, the same cycle: no bubbles)
    --------------------------------------------------------
    ``room`` = the MCQ is not full at the start of the cycle and ``tap.ready``.  A request that
    the policy picks enqueues in the same cycle when there is room (``compute.ready`` /
    ``comm.ready`` are high in exactly that case).

    * ``ROUND_ROBIN``: with both valid, the stream that did not issue last; else the valid one.
    * ``COMPUTE_FIRST``: compute if valid, else communication.
    * ``MCA``: while draining, communication first; else if communication has waited
      ``starve_limit`` cycles with room in the MCQ (``starve_limit`` > 0), communication
      (a *forced* issue); else compute if valid; else communication only if ``occupancy`` <
      ``threshold`` (``threshold`` = depth means no limit).

    The starvation counter counts the cycles in which a communication request waits although
    the MCQ has room; it clears when communication issues or has nothing to send.  Under MCA it
    never exceeds ``starve_limit`` (proved in ``tests/test_mc_arbiter_formal.py``).

    Each stream's requests leave ``o`` in the order they arrived; none is lost or duplicated.
    """

    #: the largest MCQ kept in LUT RAM by default
    LUT_MCQ_DEPTH = 64

    def __init__(self, params: T3Params, aparams: ArbiterParams = ArbiterParams(),
                 mcq_ram=None, retire=False):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        if not isinstance(aparams, ArbiterParams):
            raise TypeError(f"aparams must be an ArbiterParams, not {aparams!r}")
        if mcq_ram not in (None, "lut", "block"):
            raise ValueError(f"mcq_ram must be 'lut', 'block' or None, not {mcq_ram!r}")
        if mcq_ram is None:
            mcq_ram = "lut" if aparams.depth <= self.LUT_MCQ_DEPTH else "block"
        self.mcq_ram = mcq_ram
        self.retire = bool(retire)
        self.params = params
        self.aparams = aparams
        self.regs = arbiter_registers(aparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        #: the decision logic (:class:`ArbiterPolicy`)
        self.policy = ArbiterPolicy(aparams, self.regs["threshold"].reset)
        #: the MCQ: LUT RAM read as it stands, written ahead
        #: (:class:`hw.pipeline.WriteAheadSyncFIFO`, ``SyncFIFO``'s timing): the enqueue's
        #: decision reaches the write pointer and the level, not the write enables of the LUT-RAM
        #: cells (the decision into them, a hundred cells for the MCQ's 31 x 330 bits, took 14 ns
        #: of wires in a node), and the reader starts from the read pointer, not from a block
        #: RAM's read (5.6 ns to leave an ECP5 DP16KD: the MCQ's block RAM into the NMC unit's
        #: command slice was the node's longest path at several placements, 11.0 ns).
        #: Or block RAM and a bypass register (:class:`hw.pipeline.BypassFIFO`, ``mcq_ram``
        #: "block"), in block RAM however shallow (Yosys would choose LUT RAM, not written
        #: ahead).
        width = mem_request_layout(params).size
        self.mcq = WriteAheadSyncFIFO(width=width, depth=aparams.depth) if mcq_ram == "lut" \
            else BypassFIFO(width=width, depth=aparams.depth, ram_style="block")
        #: a request picked in the last cycle, written into the MCQ in this one (for proofs)
        self.enq_pending = Signal(name="enq_r")
        #: ``occupancy == depth``, a register (for proofs)
        self.mcq_full = Signal(name="mcq_full")
        req = stream.Signature(mem_request_layout(params))
        extra = {"retired": In(1), "retired_comm": In(1)} if self.retire else {}
        super().__init__({
            **extra,
            "compute": In(req),
            "comm": In(req),
            "tap": Out(req),
            "o": Out(req),
            "occupancy": Out(range(aparams.depth + 1)),
            "drain": In(1),
            "calib_start": In(1),
            "calib_end": In(1),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, ap, regs = self.params, self.aparams, self.regfile
        layout = mem_request_layout(p)

        m.submodules.mcq = mcq = self.mcq
        # each entry's stream beside it, in a queue of its own that moves with the MCQ: the
        # compute occupancy counts from this one's output register rather than from the block
        # RAM's output (5.6 ns on an ECP5)
        m.submodules.mcq_streams = streams = BypassFIFO(width=1, depth=ap.depth)
        m.submodules.policy = core = self.policy

        # --- Registers ---------------------------------------------------------------------
        policy = regs.rw("ctrl").policy
        auto_threshold = regs.rw("ctrl").auto_threshold
        threshold = regs.rw("threshold")
        starve_limit = regs.rw("starve_limit")
        calibrating = Signal()
        compute_occ = Signal(range(ap.depth + 1))
        level = Signal(range(ap.depth + 1))     # the MCQ's occupancy (below)
        counters = {name: Signal(32, name=f"cnt_{name}") for name in
                    ("compute_issues", "comm_issues", "compute_wait", "forced", "cycles")}
        comm_max_wait = Signal(32)
        comm_wait_run = Signal(32)
        peak = Signal(range(ap.depth + 1))
        occ_sum = Signal(48)
        compute_occ_sum = Signal(48)
        calib_sum = Signal(48)
        calib_cycles = Signal(32)
        run_sum = Signal(48)
        run_cycles = Signal(32)
        regs.elaborate(m, self.csr, {
            "info": {"depth": ap.depth, "calib_rows": ap.calib_rows},
            "occupancy": level, "compute_occupancy": compute_occ,
            "comm_max_wait": comm_max_wait, "peak_occupancy": peak,
            "occupancy_sum": occ_sum, "compute_occupancy_sum": compute_occ_sum,
            "calib_sum": calib_sum, "calib_cycles": calib_cycles,
            **counters,
        })
        clear = regs.command("cmd", "clear")

        # --- Policy --------------------------------------------------------------------------
        dequeue = self.o.valid & self.o.ready
        # what leaves the count: a dequeue, or with ``retire`` the scheduler's column command
        leave = self.retired if self.retire else dequeue
        c_valid, m_valid = self.compute.valid, self.comm.valid
        # The decision's request is written into the MCQ a cycle later, from registers
        # (``enq_r``, ``entry_r``): the decision reaches a few flip-flops and the payload's
        # selects, not the RAM's and the stream queue's write enables, pointers and counts
        # across the chip (the node's critical path, 14.0-16.9 ns, 11-15 of it wires, ended
        # there).  ``level`` counts what was decided and not dequeued, the request on its way
        # in included, so room and the threshold see every request at once, as before.  An
        # idle request loses no cycle to this: written into an empty MCQ, it skips the RAM.
        full, enq_r = self.mcq_full, self.enq_pending
        # the request written: both streams' payloads are registered in every cycle (no
        # enable) and the decision in one flip-flop, chosen after the registers, so the decision
        # reaches one flip-flop rather than the select of every bit of the entry (into all its
        # 330 flip-flops, the node's critical path at 13.1 ns, 10.9 of it wires)
        compute_r = layout(Signal(layout))
        comm_r = layout(Signal(layout))
        from_comm_r = Signal()
        entry_r = layout(Signal(layout))
        m.d.comb += [
            entry_r.eq(Mux(from_comm_r, comm_r.as_value(), compute_r.as_value())),
            entry_r.stream.eq(Mux(from_comm_r, Stream.COMM, Stream.COMPUTE)),
        ]
        room = ~full & self.tap.ready
        m.d.comb += [
            core.policy.eq(policy), core.threshold.eq(threshold),
            core.starve_limit.eq(starve_limit), core.c_valid.eq(c_valid),
            core.m_valid.eq(m_valid), core.room.eq(room), core.level.eq(level),
            core.drain.eq(self.drain),
            core.dequeue.eq(leave),
            core.starve_limit_next.eq(regs.rw_next(m, "starve_limit")),
        ]
        issue_compute, issue_comm = core.issue_compute, core.issue_comm
        forced, draining_now = core.forced, core.draining | self.drain
        enqueue = issue_compute | issue_comm
        tap_comm = core.tap_comm
        chosen = Mux(tap_comm, self.comm.payload.as_value(), self.compute.payload.as_value())
        entry = layout(Signal(layout))
        level_next = Signal.like(level)
        m.d.comb += [
            entry.eq(chosen),
            entry.stream.eq(Mux(tap_comm, Stream.COMM, Stream.COMPUTE)),
            self.compute.ready.eq(issue_compute),
            self.comm.ready.eq(issue_comm),
            self.tap.valid.eq(enqueue),
            self.tap.payload.eq(entry),
            level_next.eq(level + enqueue - leave),
            mcq.w_en.eq(enq_r),
            mcq.w_data.eq(entry_r),
            self.o.valid.eq(mcq.r_rdy),
            self.o.payload.eq(mcq.r_data),
            mcq.r_en.eq(self.o.ready),
            self.occupancy.eq(level),
        ]
        # the payload registers load every cycle (they matter only with enq_r): no enable
        # ``full`` next is ``level_next == depth``, chosen by this cycle's issue and dequeue
        # among values of the registers (as the policy's ``below``): the decision reaches a
        # 2:1 select, not the level's adder and a compare (the policy's last issue through
        # the decision, the adder and the compare into ``full`` was the node's critical path,
        # 13.8 ns, 10.8 of it wires).  An issue needs room, so ``level`` never passes ``depth``
        m.d.sync += [enq_r.eq(enqueue), compute_r.eq(self.compute.payload),
                     comm_r.eq(self.comm.payload), from_comm_r.eq(issue_comm),
                     level.eq(level_next),
                     full.eq(Mux(enqueue, Mux(leave, full, level == ap.depth - 1),
                                 Mux(leave, 0, full)))]

        # --- Status: a bad policy (sticky), calibrating and draining (live) --------------------
        calib_lost = Signal()
        calib_write = Signal()
        regs.status(m, "status", bad_policy=policy == 3, calib_lost=calib_lost,
                    calibrating=calibrating,
                    draining=core.draining)

        # --- Occupancy of the compute stream, calibration ----------------------------------------
        m.d.comb += [streams.w_en.eq(mcq.w_en), streams.w_data.eq(entry_r.stream),
                     streams.r_en.eq(mcq.r_en)]
        if self.retire:
            leave_compute = self.retired & ~self.retired_comm
        else:
            leave_compute = dequeue & (streams.r_data == Stream.COMPUTE)
        m.d.sync += compute_occ.eq(compute_occ + issue_compute - leave_compute)
        # The mean is compared with each row's bound without a divider or a multiplier: row i
        # keeps sum(compute_occ - bound_i) over the window, negative iff mean < bound_i.
        rows = ap.calib_rows
        below = [Signal(signed(49), name=f"calib_acc{i}") for i in range(rows - 1)]
        # ``ran``: the window has counted a cycle (run_cycles != 0), a register kept with the
        # count: the 32-bit count's zero test, into the threshold's write and the threshold
        # flag's compare, was the arbiter's longest path alone (11.0 ns)
        ran = Signal()
        pick = Signal(rows)
        negative = Cat(*(acc < 0 for acc in below), C(1, 1))
        m.d.comb += pick.eq(negative & ~(negative - 1))     # the lowest row set
        row_thr = [regs.rw(f"calib{k}_threshold") for k in range(rows)]
        chosen_thr = Signal(len(row_thr[0]))
        m.d.comb += chosen_thr.eq(reduce(operator.or_, [Mux(pick[k], row_thr[k], 0)
                                                        for k in range(rows)]))
        with m.If(self.calib_start):
            m.d.sync += [calibrating.eq(1), run_sum.eq(0), run_cycles.eq(0), ran.eq(0)]
            m.d.sync += [acc.eq(0) for acc in below]
        with m.Elif(calibrating):
            accumulate(m, run_sum, compute_occ)
            accumulate(m, run_cycles, 1)
            m.d.sync += ran.eq(1)
            m.d.sync += [acc.eq(acc + compute_occ - regs.rw(f"calib{i}_bound"))
                         for i, acc in enumerate(below)]
        with m.If(self.calib_end & calibrating):
            with m.If(~self.calib_start):
                m.d.sync += calibrating.eq(0)
            m.d.sync += [calib_sum.eq(run_sum), calib_cycles.eq(run_cycles)]
            # first row whose bound exceeds the mean; the last row catches the rest (one-hot,
            # ``pick``).  An empty window leaves the threshold alone.
            # a host write to threshold in the same cycle wins; the lost result is reported
            with m.If(auto_threshold & ran):
                with m.If(regs.write_strobe("threshold")):
                    m.d.comb += calib_lost.eq(1)
                with m.Else():
                    m.d.comb += calib_write.eq(1)
        with m.If(calib_write):
            m.d.sync += threshold.eq(chosen_thr)
        m.d.comb += [core.threshold_host.eq(regs.write_data("threshold")),
                     core.threshold_host_write.eq(regs.write_taken("threshold")),
                     *(core.threshold_calib[k].eq(row_thr[k]) for k in range(rows)),
                     core.calib_pick.eq(pick), core.calib_write.eq(calib_write)]

        # --- Counters -------------------------------------------------------------------------------
        for name, event in (("compute_issues", issue_compute), ("comm_issues", issue_comm),
                            ("compute_wait", c_valid & ~issue_compute),
                            ("forced", forced & issue_comm & ~draining_now),
                            ("cycles", Const(1))):
            count(m, counters[name], event, clear)
        # sums and waits saturate like the counters (hw.csr.accumulate)
        accumulate(m, occ_sum, level, clear)
        accumulate(m, compute_occ_sum, compute_occ, clear)
        wait_top = (1 << len(comm_wait_run)) - 1
        waited = Mux(comm_wait_run == wait_top, wait_top, comm_wait_run + 1)
        with m.If(clear):
            m.d.sync += [peak.eq(0), comm_max_wait.eq(0), comm_wait_run.eq(0)]
        with m.Else():
            with m.If(level > peak):
                m.d.sync += peak.eq(level)
            with m.If(m_valid & ~issue_comm):
                m.d.sync += comm_wait_run.eq(waited)
            with m.Else():
                m.d.sync += comm_wait_run.eq(0)
            # the longest run follows the run a cycle later, compared as registered (the
            # run's increment into the compare into the 32 enables took 12.3 ns in a node)
            with m.If(comm_wait_run > comm_max_wait):
                m.d.sync += comm_max_wait.eq(comm_wait_run)
        return m
