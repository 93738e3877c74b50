"""Formal proofs of the MC arbiter's promises (SymbiYosys, k-induction, CVC4).

``PolicySpec`` drives the decision logic (:class:`mc_arbiter.rtl.ArbiterPolicy`) with any
traffic, MCQ level, room and drain, under any fixed configuration.  ``ArbiterSpec`` drives every
input of a small whole arbiter (MCQ depth 4, narrow payloads) with ``AnySeq``:
arbitrary traffic, backpressure on ``tap`` and ``o``, drain and calibration marks, and any
register writes during a set-up phase of any length (communication is idle then, so the
configuration is fixed before the starvation counter runs).  Sources obey the stream rule:
a request, once valid, stays valid and unchanged until taken.

Proved for all time (k-induction):

- no loss, no duplication: a stream is told ready exactly when its request is written into the
  MCQ, with its payload (``stream`` set from the port), and never both streams in one cycle;
  nothing is written into a full MCQ or while ``tap`` is not ready.  With the MCQ an
  in-order FIFO (Amaranth's ``SyncFIFO``), each stream leaves in order, once;
- MCA: compute never waits while the policy allows it (valid, room, not draining, not forced);
  communication is issued without force or drain only when the MCQ holds fewer than
  ``threshold`` entries; the starvation counter never exceeds ``starve_limit`` and at the limit
  communication is issued as soon as there is room;
- COMPUTE_FIRST: compute never waits while there is room.

End to end through the MCQ, order and no loss follow from the datapath proof and the MCQ being
Amaranth's in-order ``SyncFIFO``; the simulation scoreboards check it on every run as well.
(A BMC of the whole arbiter through the FIFO was tried and dropped: past 6 cycles each step took
minutes, spent on the 32- and 48-bit statistics counters.)
"""

from amaranth import Elaboratable, Module, Mux, Signal
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume

import pytest

from hw.formal import FormalFailure, prove
from hw.interfaces import Stream
from hw.params import T3Params
from mc_arbiter.config import ArbiterParams, Policy
from mc_arbiter.rtl import ArbiterPolicy, MCArbiter


PARAMS = T3Params(beat_bits=32, addr_bits=12, wg_id_bits=1, wf_id_bits=0, tag_bits=0)
APARAMS = ArbiterParams(depth=4, calib_rows=2)


class PolicySpec(Elaboratable):
    """The decision logic alone, for all time: any traffic, room and dequeues, the MCQ's level
    following the issues and dequeues, any configuration (``AnyConst``) written in the first
    cycle (the registers hold their reset values before), and the threshold a register that
    the host (any value, ``AnySeq``) and a calibration (any value, never with the host's)
    write in any cycles."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = ArbiterPolicy(APARAMS)
        for sig in (core.c_valid, core.m_valid, core.room, core.drain, core.dequeue):
            m.d.comb += sig.eq(AnySeq(len(sig)))
        first = Signal(init=1)
        m.d.sync += first.eq(0)
        depth = APARAMS.depth
        # the threshold register and its writers
        threshold = Signal(len(core.threshold), init=core.threshold_init)
        host = AnySeq(len(threshold))
        rows = [AnySeq(len(threshold)) for _ in range(APARAMS.calib_rows)]
        pick = AnySeq(APARAMS.calib_rows)     # the row the calibration chose: one-hot
        calib = Signal.like(threshold)
        m.d.comb += calib.eq(sum(Mux(pick[k], rows[k], 0) for k in range(len(rows))))
        host_write, calib_write = AnySeq(1), AnySeq(1)
        m.d.comb += [core.threshold.eq(threshold), core.threshold_host.eq(host),
                     core.threshold_host_write.eq(host_write), core.calib_pick.eq(pick),
                     *(core.threshold_calib[k].eq(rows[k]) for k in range(len(rows))),
                     core.calib_write.eq(calib_write),
                     Assume(~(host_write & calib_write)), Assume(~host_write | (host <= depth)),
                     Assume(~calib_write | ((pick != 0) & ((pick & (pick - 1)) == 0))),
                     *(Assume(~calib_write | ~pick[k] | (rows[k] <= depth))
                       for k in range(len(rows)))]
        with m.If(calib_write):
            m.d.sync += threshold.eq(calib)
        with m.Elif(host_write):
            m.d.sync += threshold.eq(host)
        value = AnyConst(len(core.starve_limit))
        m.d.comb += [core.starve_limit.eq(Mux(first, 64, value)),
                     core.starve_limit_next.eq(value)]
        m.d.comb += core.policy.eq(AnyConst(2))
        level = Signal(range(depth + 1))
        m.d.sync += level.eq(level + (core.issue_compute | core.issue_comm) - core.dequeue)
        m.d.comb += [core.level.eq(level), Assume(~core.dequeue | (level != 0)),
                     Assume(level <= depth), Assume(~core.room | (level < depth))]
        # the flags are the comparisons they stand for, in every cycle
        m.d.comb += [
            Assert(core.below == (core.level < core.threshold)),
            Assert(core.starved == ((core.starve_limit != 0) &
                                    (core.starve >= core.starve_limit))),
        ]

        issued = core.issue_compute | core.issue_comm
        draining_now = core.draining | core.drain
        mca = core.policy == Policy.MCA
        first = core.policy == Policy.COMPUTE_FIRST
        rr = (core.policy == Policy.ROUND_ROBIN) | (core.policy == 3)
        m.d.comb += [
            # at most one stream, only with room, only a valid one
            Assert(~(core.issue_compute & core.issue_comm)),
            Assert(~issued | core.room),
            Assert(~core.issue_compute | core.c_valid),
            Assert(~core.issue_comm | core.m_valid),
            # the tap's select is the issuing stream
            Assert(~core.issue_comm | core.tap_comm),
            Assert(~core.issue_compute | ~core.tap_comm),
            # round-robin and compute-first waste no cycle
            Assert(~((rr | first) & (core.c_valid | core.m_valid) & core.room) | issued),
            # compute-first: compute never waits while there is room
            Assert(~(first & core.c_valid & core.room) | core.issue_compute),
            # MCA: compute never waits while allowed
            Assert(~(mca & core.c_valid & core.room & ~draining_now & ~core.forced) |
                   core.issue_compute),
            # MCA: communication without force or drain only below the threshold, compute idle
            Assert(~(mca & core.issue_comm & ~draining_now & ~core.forced) |
                   ((core.level < core.threshold) & ~core.c_valid)),
            # MCA: communication goes when draining or forced and there is room
            Assert(~(mca & core.m_valid & core.room & (draining_now | core.forced)) |
                   core.issue_comm),
            # MCA: the starvation bound
            Assert(~(mca & (core.starve_limit != 0)) | (core.starve <= core.starve_limit)),
        ]
        return m


class ArbiterSpec(Elaboratable):
    """The whole arbiter with any traffic, backpressure and set-up writes: the datapath."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = MCArbiter(PARAMS, APARAMS)

        # --- free inputs ------------------------------------------------------------------
        setup = Signal(init=1)
        m.d.sync += setup.eq(setup & AnySeq(1))
        for sig in (dut.tap.ready, dut.o.ready, dut.drain, dut.calib_start, dut.calib_end,
                    dut.csr.addr, dut.csr.w_data, dut.csr.w_stb):
            m.d.comb += sig.eq(AnySeq(len(sig)))
        m.d.comb += Assume(~dut.csr.w_stb | setup)

        # sources: valid held with a stable payload until taken; comm idle during set-up
        for port in (dut.compute, dut.comm):
            m.d.comb += [port.valid.eq(AnySeq(1)),
                         port.payload.as_value().eq(AnySeq(len(port.payload.as_value())))]
            held = Signal(name=f"held_{id(port)}")
            last = Signal(len(port.payload.as_value()), name=f"last_{id(port)}")
            m.d.sync += [held.eq(port.valid & ~port.ready), last.eq(port.payload.as_value())]
            m.d.comb += Assume(~held | (port.valid & (port.payload.as_value() == last)))
        m.d.comb += Assume(~setup | ~dut.comm.valid)

        # --- datapath: a handshake is exactly a write of that request into the MCQ --------------
        level = dut.occupancy
        room = (level != APARAMS.depth) & dut.tap.ready
        c_go = dut.compute.valid & dut.compute.ready
        m_go = dut.comm.valid & dut.comm.ready
        entry = dut.tap.payload
        # the policy's flags are its comparisons, through host writes, calibration results and
        # the MCQ's own count
        core = dut.policy
        # the MCQ's count is the requests picked and not dequeued, the one on its way in
        # included: the RAM never refuses the write a cycle after the pick
        m.d.comb += [
            Assert(level <= APARAMS.depth),
            Assert(dut.mcq_full == (level == APARAMS.depth)),
            Assert(level == dut.mcq.level + dut.enq_pending),
            Assert(~dut.enq_pending | dut.mcq.w_rdy),
        ]
        if dut.mcq_ram == "lut":        # the LUT-RAM queue's readies, registers kept with it
            m.d.comb += [Assert(dut.mcq.w_rdy == (dut.mcq.level != APARAMS.depth)),
                         Assert(dut.mcq.r_rdy == (dut.mcq.level != 0))]
        m.d.comb += [
            Assert(core.below == (level < dut.regfile.rw("threshold"))),
            Assert(core.starved == ((core.starve_limit != 0) &
                                    (core.starve >= core.starve_limit))),
        ]
        m.d.comb += [
            Assert(~(dut.compute.ready & dut.comm.ready)),
            Assert(dut.tap.valid == (c_go | m_go)),
            Assert(~dut.tap.valid | room),
        ]
        for go, port, stream_code in ((c_go, dut.compute, Stream.COMPUTE),
                                      (m_go, dut.comm, Stream.COMM)):
            m.d.comb += Assert(~go | ((entry.addr == port.payload.addr) &
                                      (entry.data == port.payload.data) &
                                      (entry.op == port.payload.op) &
                                      (entry.mask == port.payload.mask) &
                                      (entry.stream == stream_code)))

        return m


def test_policy_promises_hold_for_all_time(tmp_path):
    prove(PolicySpec(), tmp_path, mode="prove", depth=4, name="policy")


def test_datapath_handshake_is_one_write(tmp_path):
    prove(ArbiterSpec(), tmp_path, mode="prove", depth=1, name="datapath")


def test_formal_flow_reports_a_false_property(tmp_path):
    # The flow must be able to fail: the starvation counter does reach the limit.
    class Wrong(Elaboratable):
        def elaborate(self, platform):
            m = Module()
            m.submodules.core = core = ArbiterPolicy(APARAMS)
            for sig in (core.c_valid, core.m_valid, core.room, core.level, core.drain):
                m.d.comb += sig.eq(AnySeq(len(sig)))
            limit = AnyConst(16)
            m.d.comb += [core.policy.eq(Policy.MCA), core.starve_limit.eq(limit),
                         core.starve_limit_next.eq(limit),
                         core.threshold.eq(AnyConst(len(core.threshold)))]
            m.d.comb += Assert((core.starve_limit == 0) | (core.starve < core.starve_limit))
            return m

    with pytest.raises(FormalFailure, match=r"^wrong: prove failed: an assertion does not hold"):
        prove(Wrong(), tmp_path, mode="prove", depth=4, name="wrong")
