"""Formal proofs of the blocks' promises (SymbiYosys through :func:`hw.formal.prove`, CVC4).

Each spec instantiates a small geometry of a block, drives every input with ``AnySeq`` under the
port rules (a stream's payload holds while it waits; registers are written only in a set-up phase
of any length before traffic starts) and states the block's promise with ``Assert``s over its
ports, observed by the spec's own counters.  ``bmc`` proofs hold for every trace of up to
``depth`` cycles from reset; ``prove`` (k-induction) for all time.  The arbiter's proofs are in
``tests/test_mc_arbiter_formal.py``; ``docs/verification.md`` lists every proof with its depth
and time.
"""

import dataclasses
import os
from pathlib import Path
import time

from amaranth import C, Array, Cat, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume
import pytest

from dma.config import DMAParams
from dma.rtl import DMAEngine
from hw.axil import AXILiteToCSR
from hw.formal import FormalError, FormalFailure, prove
from hw.pipeline import BypassFIFO, SkidBuffer, WriteAheadFIFO, WriteAheadSyncFIFO
from hw.interfaces import ElemType, Op
from hw.params import T3Params
from l2.config import PIPELINE_HIT_LATENCY, L2Params
from l2.rtl import L2Cache
from linklayer.config import LinkLayerParams
from linklayer.rtl import LinkRx
from nmc.config import WRITE_DELAY, HBMTiming, NMCParams
from nmc.rtl import NMCUnit
from system.link import LinkModel
from tracker.config import TrackerParams
from tracker.rtl import TRIGGER_QUEUE, Tracker


SMALL = T3Params(beat_bits=32, addr_bits=12, wg_id_bits=2, wf_id_bits=1, tag_bits=3)


def free(m, *signals):
    for sig in signals:
        m.d.comb += sig.eq(AnySeq(len(sig)))


def stream_source(m, valid, payload, ready, name):
    """``valid``/``payload`` free, except that a request once offered holds until taken."""
    free(m, valid, payload)
    held = Signal(name=f"{name}_held")
    last = Signal(len(payload), name=f"{name}_last")
    m.d.sync += [held.eq(valid & ~ready), last.eq(payload)]
    m.d.comb += Assume(~held | (valid & (payload == last)))


def setup_phase(m, csr):
    """Register writes only during a set-up phase of any length; returns ``running``."""
    setup = Signal(init=1)
    m.d.sync += setup.eq(setup & AnySeq(1))
    free(m, csr.addr, csr.w_data, csr.w_stb)
    m.d.comb += Assume(~csr.w_stb | setup)
    return ~setup


def answers_in_order(m, take, give, answer_valid, tag, tag_bits, most):
    """Requests numbered in the order taken (their ``tag`` the low bits of the number, assumed
    here): every answer comes for a request taken, in that order (its tag), at most ``most``
    outstanding.  Returns the request counter (for more assumptions)."""
    n_req, n_resp = Signal(8), Signal(8)
    m.d.sync += [n_req.eq(n_req + take), n_resp.eq(n_resp + give)]
    m.d.comb += [Assert(n_resp <= n_req), Assert(n_req - n_resp <= most)]
    with m.If(answer_valid):
        m.d.comb += [Assert(n_resp < n_req), Assert(tag == n_resp[:tag_bits])]
    assert (1 << tag_bits) >= most, "tags must tell the outstanding requests apart"
    return n_req


# --- link: order, integrity, latency ----------------------------------------------------------

class LinkSpec(Elaboratable):
    """The ``n``-th beat out of the link is the ``n``-th beat in, unchanged, at least
    ``latency`` cycles later, for any ``n`` (``AnyConst``); never more beats out than in."""

    def __init__(self, latency=3, claim=None):
        self.latency = latency
        self.claim = latency if claim is None else claim     # the latency asserted

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = LinkModel(SMALL, latency=self.latency, num=1, den=2)
        beat = lambda port: Cat(port.tdata, port.tkeep, port.tlast, port.tuser)  # noqa: E731
        stream_source(m, dut.i.tvalid, beat(dut.i), dut.i.tready, "i")
        free(m, dut.o.tready)
        n_in, n_out, age = Signal(6), Signal(6), Signal(6)
        target = AnyConst(6)
        seen, saved = Signal(), Signal(len(beat(dut.i)))
        go_in = dut.i.tvalid & dut.i.tready
        go_out = dut.o.tvalid & dut.o.tready
        m.d.sync += [n_in.eq(n_in + go_in), n_out.eq(n_out + go_out)]
        with m.If(go_in & (n_in == target)):
            m.d.sync += [seen.eq(1), saved.eq(beat(dut.i)), age.eq(1)]
        with m.Elif(seen & (age != 63)):
            m.d.sync += age.eq(age + 1)
        m.d.comb += Assert(n_out <= n_in)
        with m.If(go_out & (n_out == target)):
            m.d.comb += [Assert(seen), Assert(beat(dut.o) == saved),
                         Assert(age >= self.claim)]
        return m


# --- AXI4-Lite bridge: one response per request, no write without address and data ------------

class AXILiteSpec(Elaboratable):
    """Any host obeying AXI (a valid holds until ready): the register bus is written only in
    a cycle where both the address and the data are taken, with that address and data; every
    write gets exactly one ``B``, every read one ``R``, none unasked; one transaction at a
    time.  With any read latency of the register bus (3: the node's, its registered decoder
    in front of the DMA's two-cycle reads)."""

    def __init__(self, read_latency=1):
        self.read_latency = read_latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = AXILiteToCSR(6, self.read_latency)
        bus = dut.axil
        stream_source(m, bus.awvalid, Cat(bus.awaddr, bus.awprot), bus.awready, "aw")
        stream_source(m, bus.wvalid, Cat(bus.wdata, bus.wstrb), bus.wready, "w")
        stream_source(m, bus.arvalid, Cat(bus.araddr, bus.arprot), bus.arready, "ar")
        free(m, bus.bready, bus.rready, dut.csr.r_data)
        aw = bus.awvalid & bus.awready
        w = bus.wvalid & bus.wready
        ar = bus.arvalid & bus.arready
        b = bus.bvalid & bus.bready
        r = bus.rvalid & bus.rready
        pend_w, pend_r = Signal(2), Signal(2)
        m.d.sync += [pend_w.eq(pend_w + aw - b), pend_r.eq(pend_r + ar - r)]
        m.d.comb += [
            Assert(aw == w),                                     # address and data together
            Assert(~dut.csr.w_stb | (aw & w & (bus.wstrb == 0xF) & (bus.awaddr[:2] == 0) &
                                     (dut.csr.addr == bus.awaddr[2:]) &
                                     (dut.csr.w_data == bus.wdata))),
            Assert(pend_w <= 1), Assert(pend_r <= 1), Assert(~(pend_w & pend_r)),
            Assert(bus.bvalid == (pend_w == 1)),                 # a B only for a write taken
            Assert(~bus.rvalid | (pend_r == 1)),                 # an R only for a read taken
            Assert(~(aw | ar) | ((pend_w == 0) & (pend_r == 0))),
        ]
        return m


# --- NMC: responses in order, one per command --------------------------------------------------

NMC_SMALL = NMCParams(bank_groups=2, banks=1, columns=2, rows=2, resp_depth=4,
                      timing=HBMTiming(CL=WRITE_DELAY + 1, RCD=1, RP=2, RAS=3, CCD_S=1, CCD_L=2, WTR_S=1,
                                       WTR_L=2, CCDWL=2), formats=("fp32",))


class NMCSpec(Elaboratable):
    """Commands numbered by their tag in issue order: the responses come back with the tags in
    the same order, one per command, never one without a command; a refused command (bad
    address) is answered with ``error``."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = NMCUnit(SMALL, NMC_SMALL)
        nmc_answers_in_order(m, dut, NMC_SMALL)
        return m


def nmc_answers_in_order(m, dut, nparams):
    """Any fp32 commands, numbered by their tag in the order taken, any backpressure: the
    responses come in that order, one per command (:func:`answers_in_order`).  Returns the
    command's payload (for more assumptions)."""
    c = dut.cmd.payload
    stream_source(m, dut.cmd.valid, c.as_value(), dut.cmd.ready, "cmd")
    free(m, dut.resp.ready)
    setup_phase(m, dut.csr)
    n_cmd = answers_in_order(m, dut.cmd.valid & dut.cmd.ready,
                             dut.resp.valid & dut.resp.ready, dut.resp.valid,
                             dut.resp.payload.tag, SMALL.tag_bits, nparams.resp_depth)
    m.d.comb += [Assume(c.tag == n_cmd[:SMALL.tag_bits]), Assume(c.etype == ElemType.FP32)]
    return c


NMC_SMALL_BP = dataclasses.replace(
    NMC_SMALL, scheduler="bank-parallel", ahead_depth=2,
    timing=dataclasses.replace(NMC_SMALL.timing, RRD=2, WTP=3))


class NMCAheadSpec(Elaboratable):
    """The bank-parallel unit, its commands announced on ``ahead`` in the order they reach
    ``cmd`` (each no later than its first cycle there; addresses in its memory): the row
    commands cannot starve the head.  From its second cycle at the head, the head's bank has
    the head announced and its oldest announced row is the head's; a row command goes only to
    a bank that can take one and that a command waits for (announced, or the head); at most
    one a cycle; when the head's bank can take one, it is the head's; and never a PRE of the
    head's row.  With the timers counting down, the head's row is therefore open within RAS +
    RP + RCD (and WTP) of its arrival, and it issues.  (The responses' order is the in-order
    unit's column pipeline, unchanged: ``NMCSpec``.)"""

    def elaborate(self, platform):
        m = Module()
        np_ = NMC_SMALL_BP
        m.submodules.dut = dut = NMCUnit(SMALL, np_)
        c = dut.cmd.payload
        stream_source(m, dut.cmd.valid, c.as_value(), dut.cmd.ready, "cmd")
        stream_source(m, dut.ahead.valid, dut.ahead.payload, dut.ahead.ready, "ahead")
        free(m, dut.resp.ready)
        setup_phase(m, dut.csr)
        offset = SMALL.beat_offset_bits
        beat_bits = (np_.capacity_beats - 1).bit_length()
        m.d.comb += [Assume(c.etype == ElemType.FP32),
                     Assume(dut.ahead.payload[:offset] == 0),
                     Assume(dut.ahead.payload[offset + beat_bits:] == 0)]
        # the announcements, in order: command n is the n-th announced beat
        told, taken = Signal(4), Signal(4)
        said = Array(Signal(beat_bits, name=f"said{i}") for i in range(4))
        take = dut.ahead.valid & dut.ahead.ready
        m.d.sync += [told.eq(told + take), taken.eq(taken + (dut.cmd.valid & dut.cmd.ready))]
        with m.If(take):
            m.d.sync += said[told[:2]].eq(dut.ahead.payload[offset:])
        now = dut.ahead.payload[offset:offset + beat_bits]
        waiting = (told - taken)[:4]
        m.d.comb += Assume(~dut.cmd.valid | (
            (c.addr == Cat(C(0, offset), Mux(waiting != 0, said[taken[:2]], now))) &
            ((waiting != 0) | take)))
        st = dut.ahead_state
        nb = np_.bank_groups * np_.banks
        row = c.addr[offset:][beat_bits - 1]          # 8 beats: group, column, row
        counted = Cat(*(n != 0 for n in st.count))
        sel, cand, head = st.sel, st.cand, st.head_bank
        m.d.comb += [
            Assert((sel & ~cand) == 0),
            Assert((sel & (sel - 1))[:nb] == 0),
            Assert(~(cand & ~counted & ~head).any()),
            Assert(~(cand & head).any() | (sel == head)),
        ]
        on = Signal()               # the head's second cycle or later
        m.d.sync += on.eq(dut.cmd.valid & ~dut.cmd.ready)
        for b in range(nb):
            with m.If(head[b] & on):
                m.d.comb += [Assert(st.count[b] != 0), Assert(st.front[b] == row)]
            with m.If(head[b] & sel[b] & st.is_open[b]):
                m.d.comb += Assert(st.open_row[b] != row)
        return m


NMC_SMALL_FR = dataclasses.replace(
    NMC_SMALL, scheduler="fr-fcfs", timing=dataclasses.replace(NMC_SMALL.timing, RRD=2, WTP=3))


class NMCFRFCFSSpec(Elaboratable):
    """The FR-FCFS unit (bypass cap 1), any commands and any ``resp`` backpressure: responses
    in the order the commands were taken, one per command (as ``NMCSpec``), and no command
    waits forever.  Each cycle's column and row commands go to a candidate, at most one each,
    a candidate only if queued; a column command issues whenever one is a candidate; the
    oldest queued command never waits for an older one to its beat; column commands passed
    it at most the cap's number of times, and once they have, it is the only candidate for
    either command.  With the timers counting down and nothing else acting, its bank's row
    is then closed (RAS, WTP), opened (RP, RRD) and its column command issued (RCD, the bank
    group's, WTR and the atomicity stall's delays) within a bounded time, and the next oldest
    command's turn begins."""

    def __init__(self, cap=1):
        self.cap = cap

    def elaborate(self, platform):
        from nmc.frfcfs import FRFCFSUnit
        m = Module()
        np_ = NMC_SMALL_FR
        m.submodules.dut = dut = FRFCFSUnit(SMALL, np_, bypass_cap=self.cap)
        c = nmc_answers_in_order(m, dut, np_)
        # no op-and-store: the scheduler treats it as a STORE (a write to its beat), and the
        # adder's arithmetic is the solver's heaviest part (NMCSpec covers it)
        m.d.comb += Assume(c.op != Op.UPDATE)
        st = dut.state
        R = np_.resp_depth

        def at_most_one(v):
            return (v & (v - 1))[:R] == 0

        m.d.comb += [
            Assert((st.col & ~st.col_cand) == 0), Assert(at_most_one(st.col)),
            Assert((st.row & ~st.row_cand) == 0), Assert(at_most_one(st.row)),
            Assert(~st.col_cand.any() | st.col.any()),
            Assert(((st.col_cand | st.row_cand) & ~st.waiting) == 0),
            Assert((st.dep & st.oldest) == 0),
            Assert(st.passed <= self.cap),
            Assert(~st.capped | (((st.col_cand | st.row_cand) & ~st.oldest) == 0)),
        ]
        return m


# --- DMA: credits, one packet per trigger, receive stays in its header's range ------------------

DMA_P = T3Params(beat_bits=128, addr_bits=12, wg_id_bits=2, wf_id_bits=1, tag_bits=2)
DMA_D = DMAParams(commands=1, max_granularity=2, buffer_beats=4, trigger_depth=2, gpu_bits=1,
                  dim_bits=5, remote_burst=2, remote_flush=2)


#: The widest GPU numbers the system builds (64 GPUs: system.spec.gpu_bits_for).
DMA_D64 = dataclasses.replace(DMA_D, gpu_bits=6)


class DMASendSpec(Elaboratable):
    """Any triggers and any command table (set-up writes), a memory answering its reads in
    order after any delay: reads in flight plus buffered beats never exceed the payload
    buffer, a response is never refused, and no more tile packets leave than triggers came.
    ``dparams``: the DMA's geometry (default :data:`DMA_D`)."""

    def __init__(self, dparams=DMA_D):
        self.dparams = dparams

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = DMAEngine(DMA_P, self.dparams)
        running = setup_phase(m, dut.csr)
        stream_source(m, dut.trig.valid, dut.trig.payload.as_value(), dut.trig.ready, "trig")
        m.d.comb += Assume(~dut.trig.valid | running)
        m.d.comb += [dut.remote.valid.eq(0), dut.rx.tvalid.eq(0)]
        free(m, dut.mem.ready, dut.tx.tready)
        # the memory: answers the reads in order, tag = read number, any delay
        reads, resps, payload, trigs, tiles = (Signal(8, name=n) for n in
                                               ("reads", "resps", "payload", "trigs", "tiles"))
        go_read = dut.mem.valid & dut.mem.ready & (dut.mem.payload.op == Op.READ)
        go_resp = dut.resp.valid & dut.resp.ready
        free(m, dut.resp.valid, dut.resp.payload.data, dut.resp.payload.error)
        m.d.comb += [Assume(~dut.resp.valid | (resps < reads)),
                     dut.resp.payload.tag.eq(resps[:DMA_P.tag_bits]),
                     dut.resp.payload.op.eq(Op.READ)]
        held = Signal()
        m.d.sync += held.eq(dut.resp.valid & ~dut.resp.ready)
        m.d.comb += Assume(~held | dut.resp.valid)
        tx_go = dut.tx.tvalid & dut.tx.tready
        m.d.sync += [reads.eq(reads + go_read), resps.eq(resps + go_resp),
                     payload.eq(payload + (tx_go & ~dut.tx.tuser)),
                     trigs.eq(trigs + (dut.trig.valid & dut.trig.ready)),
                     tiles.eq(tiles + (tx_go & dut.tx.tuser))]
        m.d.comb += [
            Assert(reads - payload <= DMA_D.buffer_beats),
            Assert(~dut.resp.valid | dut.resp.ready),
            Assert(tiles <= trigs),
            Assert(payload <= resps),
        ]
        return m


class DMASpanSpec(Elaboratable):
    """Register writes at any time (not only in a set-up phase) and any triggers: the tile's
    span product TAKE loads (each command's product register, which follows a write of
    ``tile_cols`` or ``ld`` a cycle late) is always the product of the ``tile_cols`` and
    ``ld`` TAKE loads with it."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = DMAEngine(DMA_P, DMA_D)
        free(m, dut.csr.addr, dut.csr.w_data, dut.csr.w_stb)
        stream_source(m, dut.trig.valid, dut.trig.payload.as_value(), dut.trig.ready, "trig")
        m.d.comb += [dut.remote.valid.eq(0), dut.rx.tvalid.eq(0)]
        free(m, dut.mem.ready, dut.tx.tready, dut.resp.valid, dut.resp.payload.data,
             dut.resp.payload.error)
        m.d.comb += Assert(dut.c_prod == dut.c_tcols * dut.c_ld)
        return m


class DMACreditSpec(Elaboratable):
    """The read credit for all time (k-induction): any triggers and any command table (set-up
    writes), a memory answering its reads in order after any delay.  The beats reserved are
    exactly the read waiting at the memory port, the reads the memory holds and the beats in
    the payload buffer, never more than ``buffer_beats``, and its flags say whether it is below
    ``buffer_beats`` and below ``buffer_beats - 1``; the next answer's tag is the one the
    engine expects; so a response is never refused.  The invariants name the engine's credit
    state (``DMAEngine.reserved``, ``rd_v``, ``data_q``, ``exp_tag``, ``resp_lost``, never
    set; and the depacketizer's slice, empty: nothing is received here)."""

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = DMAEngine(DMA_P, DMA_D)
        running = setup_phase(m, dut.csr)
        stream_source(m, dut.trig.valid, dut.trig.payload.as_value(), dut.trig.ready, "trig")
        m.d.comb += Assume(~dut.trig.valid | running)
        m.d.comb += [dut.remote.valid.eq(0), dut.rx.tvalid.eq(0)]
        free(m, dut.mem.ready, dut.tx.tready)
        # the memory: the reads it holds, answered in order (tag: the answer's number)
        in_mem = Signal(range(DMA_D.buffer_beats + 1))
        tag = Signal(DMA_P.tag_bits)
        go_read = dut.mem.valid & dut.mem.ready & (dut.mem.payload.op == Op.READ)
        go_resp = dut.resp.valid & dut.resp.ready
        free(m, dut.resp.valid, dut.resp.payload.data, dut.resp.payload.error)
        m.d.comb += [Assume(~dut.resp.valid | (in_mem != 0)),
                     dut.resp.payload.tag.eq(tag), dut.resp.payload.op.eq(Op.READ)]
        held = Signal()
        m.d.sync += held.eq(dut.resp.valid & ~dut.resp.ready)
        m.d.comb += Assume(~held | dut.resp.valid)
        m.d.sync += [in_mem.eq(in_mem + go_read - go_resp), tag.eq(tag + go_resp)]
        m.d.comb += [
            Assert(dut.reserved == dut.rd_v + in_mem + dut.data_q.level),
            Assert(dut.reserved <= DMA_D.buffer_beats),
            # the credit's flags, kept with it (chosen by the issue and the beat out)
            Assert(dut.reader.room == (dut.reserved < DMA_D.buffer_beats)),
            Assert(dut.reader.below == (dut.reserved + 1 < DMA_D.buffer_beats)),
            Assert(dut.exp_tag == tag),
            Assert(~dut.resp_lost),                   # the memory answers in order
            Assert(~dut.resp.valid | dut.resp.ready),
            Assert(~dut.depacketizer.slice.o.valid),  # nothing is received here
        ]
        return m


class DMAReceiveSpec(Elaboratable):
    """Any beats on ``rx`` (any framing, any header fields, contiguous segments) and any rx
    window: every memory write lands inside the range its packet's header gave (never wrapped
    past the end of the address space) and inside the rx window as it was when the beat came
    (the window registers may be written at any time), and there are never more
    writes than payload beats taken.  The memory is
    always ready here (a stalled write only waits, unchanged: the simulation tests check that
    under backpressure).  ``dparams``: the DMA's geometry (default :data:`DMA_D`)."""

    def __init__(self, dparams=DMA_D):
        self.dparams = dparams

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = DMAEngine(DMA_P, self.dparams)
        setup_phase(m, dut.csr)
        rx = dut.rx
        stream_source(m, rx.tvalid, Cat(rx.tdata, rx.tkeep, rx.tlast, rx.tuser), rx.tready, "rx")
        hdr = dut.hdr_layout(rx.tdata[:dut.hdr_layout.size])
        m.d.comb += Assume(~(rx.tvalid & rx.tuser) | (hdr.seg_beats == hdr.beats))
        m.d.comb += [dut.trig.valid.eq(0), dut.remote.valid.eq(0), dut.resp.valid.eq(0),
                     dut.mem.ready.eq(1)]
        free(m, dut.tx.tready)
        bb = DMA_P.beat_bytes
        # the range of the last header taken, and of the header current when the beat before
        # was taken: with memory always ready a payload beat is written in the next cycle
        cur_lo, pend_lo = Signal(DMA_P.addr_bits), Signal(DMA_P.addr_bits)
        cur_hi, pend_hi = Signal(DMA_P.addr_bits + 17), Signal(DMA_P.addr_bits + 17)
        go = rx.tvalid & rx.tready
        with m.If(go & rx.tuser):
            m.d.sync += [cur_lo.eq(hdr.addr), cur_hi.eq(hdr.addr + hdr.beats * bb)]
        with m.If(go & ~rx.tuser):
            m.d.sync += [pend_lo.eq(cur_lo), pend_hi.eq(cur_hi)]
        beats_in, writes = Signal(8), Signal(8)
        write = dut.mem.valid & dut.mem.ready & (dut.mem.payload.op != Op.READ)
        m.d.sync += [beats_in.eq(beats_in + (go & ~rx.tuser)), writes.eq(writes + write)]
        a = dut.mem.payload.addr
        # the rx window as it was when the beat was taken (registers may change any time)
        win_lo, win_size = Signal(DMA_P.addr_bits), Signal(DMA_P.addr_bits)
        with m.If(go & ~rx.tuser):
            m.d.sync += [win_lo.eq(dut.regfile.rw("rx_base")), win_size.eq(dut.regfile.rw("rx_size"))]
        with m.If(dut.mem.valid & (dut.mem.payload.op != Op.READ)):
            m.d.comb += [Assert((a >= pend_lo) & (a + bb <= pend_hi)),
                         Assert((a >= win_lo) & (a < win_lo + win_size))]
        m.d.comb += Assert(writes <= beats_in)
        return m


# --- Tracker: a trigger exactly when a tile's count reaches its threshold ----------------------

T_SMALL = TrackerParams(sets=1, ways=2, regions=1, count_bits=4)


class TrackerSpec(Elaboratable):
    """For any wavefront tile (``AnyConst`` ids) whose well-formed updates never pass its
    threshold, among any other traffic: the tile's trigger fires exactly when its accepted
    updates reach the threshold (none before, one then, carrying its ids and region), and
    a held access is held, not dropped (its handshake happens once).

    ``invariants``: also state what the Tracker holds for the tile at every cycle, so that
    k-induction proves the promise for all time (:class:`TrackerCountSpec`)."""

    invariants = False

    def elaborate(self, platform):
        m = Module()
        tracker = _ObservedTracker if self.invariants else Tracker
        m.submodules.dut = dut = tracker(SMALL, T_SMALL)
        running = setup_phase(m, dut.csr)
        req = dut.i.payload
        stream_source(m, dut.i.valid, req.as_value(), dut.i.ready, "i")
        m.d.comb += Assume(~dut.i.valid | running)
        free(m, dut.o.ready)
        regs = dut.regfile
        wg, wf = AnyConst(SMALL.wg_id_bits), AnyConst(SMALL.wf_id_bits)
        mine = (req.wg_id == wg) & (req.wf_id == wf)
        base, size = regs.rw("region0_base"), regs.rw("region0_size")
        threshold = regs.rw("region0_tile_elems") * regs.rw("region0_updates")
        inside = (size != 0) & (req.addr >= base) & (req.addr < base + size)
        enabled = regs.rw("ctrl").enable
        counted = mine & enabled & req.tracked & ((req.op == Op.STORE) | (req.op == Op.UPDATE)) \
            & inside
        # the tile's accesses are well formed: whole fp32 elements, aligned, in region 0
        m.d.comb += Assume(~(dut.i.valid & mine) | (
            (req.etype == ElemType.FP32) & (req.addr[:2] == 0) & (req.mask != 0) &
            ((req.mask == 0xF) | (req.mask == 0))))
        inc = Mux(req.mask == 0xF, 1, 0)
        shadow = Signal(8)
        owed = Signal(range(TRIGGER_QUEUE + 1))   # fired at the input, not yet taken from ``o``
        take = dut.i.valid & dut.i.ready
        fires = Signal()
        m.d.comb += fires.eq(take & counted & (shadow + inc == threshold))
        m.d.comb += Assume(~(dut.i.valid & counted) | (shadow + inc <= threshold))
        m.d.comb += Assume(threshold <= T_SMALL.max_count)
        with m.If(fires):
            m.d.sync += shadow.eq(0)
        with m.Elif(take & counted):
            m.d.sync += shadow.eq(shadow + inc)
        out = dut.o.payload
        out_mine = dut.o.valid & dut.o.ready & (out.wg_id == wg) & (out.wf_id == wf)
        m.d.sync += owed.eq(owed + fires - out_mine)
        # at most the trigger queue's depth owed: the input takes an access only while the
        # queue has room for its trigger and for those of the accesses ahead of it (a
        # threshold of one fires on every access)
        m.d.comb += [Assert(~out_mine | (owed != 0)), Assert(owed <= TRIGGER_QUEUE)]
        with m.If(out_mine):
            m.d.comb += Assert(out.region == 0)
        if self.invariants:
            dut.then = lambda dm: self.state_invariants(dm, dut, wg, wf, threshold, shadow, owed,
                                                        ~running)
        return m

    @staticmethod
    def state_invariants(m, dut, wg, wf, thr, shadow, owed, setup):
        """What the Tracker holds for the tile (ids ``wg``, ``wf``; its updates counted by
        ``shadow`` since its last trigger, ``owed`` triggers not yet taken): the table's
        entry plus the tile's updates in the pipeline, each stage's view of the table, and
        where stage 3 writes.  Each holds at reset and is kept by every step."""
        st, regs = dut.state, dut.regfile
        assert T_SMALL.sets == 1 and T_SMALL.regions == 1 and T_SMALL.ways == 2
        view = st["table"].read_port(domain="comb")     # the table's one row, as it is now
        row = view.data
        ways = range(T_SMALL.ways)
        my_tag = Cat(wf, wg)
        # the region's registers as the classification uses them (settled after a write)
        r_end, r_on, r_thr, r_big = st["region_regs"][0]
        base, size = regs.rw("region0_base"), regs.rw("region0_size")
        # the threshold register is the last cycle's product, at most ``max_count`` (assumed
        # of the product in every cycle); the statements below use its low bits (``t``): a
        # count's width, not the register's, so the solver's adders are a few bits wide
        m.d.comb += Assert(r_thr <= T_SMALL.max_count)
        t = Signal(T_SMALL.count_bits)
        m.d.comb += t.eq(r_thr)
        with m.If(~st["settle"]):
            m.d.comb += [Assert(r_on == (size != 0)),
                         Assert(r_end == base + size), Assert(r_thr == thr),
                         Assert(r_big == (r_thr > T_SMALL.max_count))]

        def mine(k):
            g = lambda f: st[f"s{k}_{f}"]
            m.d.comb += [Assert(~g("count") | g("valid")),
                         Assert(g("tag") == Cat(g("wf_id"), g("wg_id")))]
            return g("valid") & g("count") & (g("wg_id") == wg) & (g("wf_id") == wf)
        mine1, mine2, mine3 = mine(1), mine(2), mine(3)

        # the read port's data (for stage 1's access: it is read when one is taken) and stage
        # 2's row are the table's row as it is now: the table changes only when the pipeline
        # advances, which reads and reloads them
        with m.If(st["s1_valid"]):
            m.d.comb += Assert(st["rd"].data.as_value() == row.as_value())
        with m.If(st["s2_valid"]):
            m.d.comb += [Assert(st["s2_row"].as_value() == row.as_value()), Assert(st["same3"])]
        # the compares begun a stage early: stage 2's match on each way as registered (from
        # the pairs, or the entry forwarded at that edge), stage 3's tag against stage 2's,
        # and stage 3's start against stage 2's beat (the forwarded entry's ``earlier``)
        s2_row, s2_tag = st["s2_row"], st["s2_tag"]
        for w in ways:
            m.d.comb += Assert(st["s2_hit_read"][w] ==
                               (s2_row[w].valid & (s2_row[w].tag == s2_tag)))
        m.d.comb += Assert(st["same_tag3"] == (st["s3_tag"] == s2_tag))
        # the forwarded ``earlier`` is used only for the access stage 3 counts (its write is
        # forwarded): it holds for that one.  (Unguarded, the induction does not close: from
        # an empty stage 2, whose row is anything, two ways may match and the start chosen is
        # their OR, while ``earlier`` is the OR of their compares.)
        with m.If(st["s3_valid"] & st["s3_count"]):
            m.d.comb += Assert(st["fwd_earlier"] == (st["s3_start"] < st["s2_addr"]))
        # a tag is open in one way at most; stage 3 writes only the way of its own tag, or a
        # free way when its tag has none, and writes only when it counts
        m.d.comb += Assert(~(row[0].valid & row[1].valid & (row[0].tag == row[1].tag)))
        s3_write, s3_tag = st["s3_write"], st["s3_tag"]
        m.d.comb += Assert((s3_write & (s3_write - 1)) == 0)
        with m.If(~(st["s3_valid"] & st["s3_count"])):
            m.d.comb += Assert((s3_write == 0) & ~st["s3_fire"] & ~st["s3_full"])
        for w in ways:
            with m.If(s3_write[w] & row[w].valid):
                m.d.comb += Assert(row[w].tag == s3_tag)
            with m.If(s3_write[w] & ~row[w].valid):
                m.d.comb += [Assert(~(row[v].valid & (row[v].tag == s3_tag))) for v in ways]

        # the tile's entry: ``has`` one, ``rem`` updates still to come (1 to the threshold),
        # region 0 (a reset keeps the table and the flush that follows clears it: what it
        # holds is stale while ``flushing``).  Every count below is a remaining count, as the
        # Tracker holds it (``r`` = threshold - updates counted since the tile's last
        # trigger, the threshold when none): no statement subtracts from the threshold, and
        # the threshold is the region's register (equal to the registers' product once
        # settled, above), not a product the solver re-derives
        has = Signal()
        rem = Signal(T_SMALL.count_bits)
        live = ~st["flushing"]
        for w in ways:
            with m.If(row[w].valid & (row[w].tag == my_tag)):
                m.d.comb += [has.eq(1), rem.eq(row[w].rem),
                             Assert(~live | (row[w].region == 0))]
        m.d.comb += Assert(~live | ~has | ((rem >= 1) & (rem <= t)))
        r_table = Mux(has, rem, t)

        # stages 1 and 2 hold the tile's updates as classified; stage 3 its outcome
        with m.If(mine1):
            m.d.comb += [Assert(st["s1_inc"] == 1), Assert(st["s1_thr"] == r_thr),
                         Assert(~st["s1_big"]), Assert(st["s1_region"] == 0)]
        with m.If(mine2):
            m.d.comb += [Assert(st["s2_inc"] == 1), Assert(~st["s2_big"]),
                         Assert(st["s2_miss_rem"] + 1 == t),
                         Assert(st["s2_miss_fire"] == (t == 1)), Assert(~st["s2_miss_over"]),
                         Assert(st["s2_region"] == 0)]
        s3_fire, s3_new = st["s3_fire"], st["s3_new_rem"]
        with m.If(mine3):
            m.d.comb += [
                Assert(~st["s3_mismatch"] & ~st["s3_over"] & ~st["s3_overflow"]),
                Assert(st["s3_hit"] == has), Assert(st["s3_region"] == 0),
                Assert(s3_fire == (r_table == 1)),
                Assert(s3_fire | (s3_new + 1 == r_table)),
                Assert((s3_write == 0) == ((s3_fire & ~has) | st["s3_full"])),
            ]
            with m.If(st["s3_full"]):
                m.d.comb += [Assert(~has & ~s3_fire)] + [Assert(row[w].valid) for w in ways]
        for k in (1, 2, 3):
            with m.If([mine1, mine2, mine3][k - 1]):
                m.d.comb += Assert(t >= 1)

        # the remaining count each stage leaves, oldest first: the table's, after stage 3
        # writes, after stage 2's update, after stage 1's: the last is the threshold less the
        # updates accepted (``shadow``); a stage whose update leaves 1 to come fires
        def after(r):
            return Mux(r == 1, t, r - 1)
        r3 = Mux(mine3, Mux(s3_fire, t, s3_new), r_table)
        r2 = Mux(mine2, after(r3), r3)
        r1 = Mux(mine1, after(r2), r2)
        fired = (mine3 & s3_fire) + (mine2 & (r3 == 1)) + (mine1 & (r2 == 1))
        # the trigger queue: ``q_level`` entries from ``q_head`` on, the head's copy on ``o``,
        # room for a trigger of every access in the pipeline; the tile's triggers in it are
        # region 0's
        o = dut.o
        q, q_head, q_level = st["q_entries"], st["q_head"], st["q_level"]
        depth = len(q)
        stages = st["s1_valid"] + st["s2_valid"] + st["s3_valid"]
        m.d.comb += [Assert(q_level + stages <= depth), Assert(o.valid == (q_level != 0)),
                     Assert(st["q_room"] == (q_level < depth - 3)),
                     Assert(st["q_tail"] == Mux(q_head + q_level >= depth,
                                                q_head + q_level - depth, q_head + q_level))]
        with m.If(o.valid):
            m.d.comb += Assert(o.payload.as_value() == Array(q)[q_head].as_value())
        queued = []
        for k, entry in enumerate(q):
            place = Mux(k >= q_head, k - q_head, k + depth - q_head)
            here = (place < q_level) & (entry.wg_id == wg) & (entry.wf_id == wf)
            with m.If(here):
                m.d.comb += Assert(entry.region == 0)
            queued.append(here)
        o_mine = Signal(range(depth + 1))
        m.d.comb += o_mine.eq(sum(queued))
        quiet = ~st["s1_valid"] & ~st["s2_valid"] & ~st["s3_valid"] & (q_level == 0) & \
            (shadow == 0) & (owed == 0)
        # the set-up phase and the cycle after its last region write (``settle``: no access
        # taken, the threshold register not yet the product) hold nothing of the tile
        with m.If(setup | st["settle"] | st["flushing"]):
            m.d.comb += Assert(quiet)
        with m.If((setup | st["settle"]) & ~st["flushing"]):
            m.d.comb += [Assert(~row[w].valid) for w in ways]
        with m.If(~st["flushing"]):
            m.d.comb += [Assert(shadow + r1 == t), Assert(owed == fired + o_mine)]


class _ObservedTracker(Tracker):
    """The Tracker, and statements over its state (``then(module)``) added to its module once
    it is elaborated: they name the state it builds there, its table among it (read through
    a port of their own, made before the table is elaborated)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        self.then(m)
        return m


class TrackerCountSpec(TrackerSpec):
    """:class:`TrackerSpec`'s promise for all time (k-induction), with the invariants of
    :meth:`TrackerSpec.state_invariants` over the Tracker's table and pipeline."""

    invariants = True


# --- link layer: the receiver acknowledges in sequence, for all time -----------------------------

LL_P = T3Params(beat_bits=32)
LL_LP = LinkLayerParams(seq_bits=4, max_packet_beats=2, replay_beats=4, replay_packets=2,
                        rx_beats=4, timeout=16)


class LinkRxOrderSpec(Elaboratable):
    """Any beats from the wire (any data, framing, trailers, CRCs and sequence numbers) and any
    backpressure on the output: the receiver acknowledges strictly in sequence — every ACK
    repeats the last packet acknowledged or names the next one, each "next" is one packet
    delivered (its ``delivered`` counter), and every NAK names the last packet acknowledged
    (it asks for everything after it).  So the receiver commits each sequence number once, in
    order, never skipping one, whatever the wire does (that a committed packet leaves on
    ``o`` intact is the simulations' check).  The induction's invariants: the receiver waits for the packet after the
    last one acknowledged, and every acknowledgement names the one before it waits for.  ``claim``: a false variant the flow must refute (``"nak_next"``:
    a NAK names the packet after the last acknowledged)."""

    def __init__(self, claim=None):
        self.claim = claim

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = LinkRx(LL_P, LL_LP)
        i = dut.i
        stream_source(m, i.tvalid, Cat(i.tdata, i.tkeep, i.tlast, i.tuser), i.tready, "i")
        free(m, dut.o.tready)
        bits = LL_LP.seq_bits
        ack = dut.ack
        acked = Signal(bits, init=(1 << bits) - 1)      # the last packet acknowledged
        count = Signal(32)                              # "next" ACKs seen
        nxt = Signal()
        m.d.comb += nxt.eq(ack.valid & ~ack.nak & (ack.seq == (acked + 1)[:bits]))
        with m.If(ack.valid):
            m.d.comb += Assert(nxt | (ack.seq == acked))
            if self.claim == "nak_next":
                m.d.comb += Assert(~ack.nak | (ack.seq == (acked + 1)[:bits]))
        with m.If(nxt):
            m.d.sync += [acked.eq(ack.seq), count.eq(count + 1)]
        m.d.comb += [
            Assert(dut.expected == (Mux(nxt, ack.seq, acked) + 1)[:bits]),
            Assert(~ack.valid | (ack.seq == (dut.expected - 1)[:bits])),
            Assert(dut.delivered == (count + nxt)[:32]),        # both wrap
        ]
        return m


# --- the block-RAM queue with a bypass: a SyncFIFO, cycle for cycle ------------------------------

class BypassFIFOSpec(Elaboratable):
    """Any writes and reads, to a :class:`BypassFIFO` and a ``SyncFIFO`` of the same depth side
    by side (or ``dut`` and ``ref``: :class:`WriteAheadFIFO` and ``SyncFIFOBuffered``): in
    every cycle both say the same ``w_rdy``, ``r_rdy`` and ``level``, and while ``r_rdy`` the
    same ``r_data``."""

    def __init__(self, depth=3, dut=BypassFIFO, ref=SyncFIFO):
        self.depth, self.dut, self.ref = depth, dut, ref

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut(width=3, depth=self.depth)
        m.submodules.ref = ref = self.ref(width=3, depth=self.depth)
        free(m, dut.w_en, dut.w_data, dut.r_en)
        m.d.comb += [ref.w_en.eq(dut.w_en), ref.w_data.eq(dut.w_data), ref.r_en.eq(dut.r_en)]
        m.d.comb += [Assert(dut.w_rdy == ref.w_rdy), Assert(dut.r_rdy == ref.r_rdy),
                     Assert(dut.level == ref.level)]
        with m.If(ref.r_rdy):
            m.d.comb += Assert(dut.r_data == ref.r_data)
        return m


class SkidBufferSpec(Elaboratable):
    """Any beats and any consumer, to a :class:`SkidBuffer` with its head a register (or one
    field of it: ``registered_out`` a field's name) and one with its two entries in a ring,
    side by side: in every cycle both say the same ``i.ready`` and ``o.valid``, and while
    ``o.valid`` the same ``o.payload``."""

    def __init__(self, registered_out=True):
        self.registered_out = registered_out

    def elaborate(self, platform):
        m = Module()
        shape = data.StructLayout({"a": 2, "b": 2})
        m.submodules.dut = dut = SkidBuffer(shape, registered_out=self.registered_out)
        m.submodules.ref = ref = SkidBuffer(shape)
        free(m, dut.i.valid, Value.cast(dut.i.payload), dut.o.ready)
        m.d.comb += [ref.i.valid.eq(dut.i.valid), ref.i.payload.eq(dut.i.payload),
                     ref.o.ready.eq(dut.o.ready)]
        m.d.comb += [Assert(dut.i.ready == ref.i.ready), Assert(dut.o.valid == ref.o.valid)]
        with m.If(ref.o.valid):
            m.d.comb += Assert(Value.cast(dut.o.payload) == Value.cast(ref.o.payload))
        return m


# --- L2: one answer per request, in order; every READ returns what was last stored ---------------

L2_P = T3Params(beat_bits=32, addr_bits=12, wg_id_bits=1, wf_id_bits=0, tag_bits=2)
L2_SMALL = L2Params(sets=1, ways=2, banks=1, mshrs=2, depth=4, windows=1,
                    max_hit_latency=PIPELINE_HIT_LATENCY + 1)


class L2Spec(Elaboratable):
    """Any READs and STOREs (any masks) and UPDATEs (but not to the watched address) over four
    lines; writes at any time to the registers that change what is cached (a flush, the window,
    the ways in use); a memory that applies each request as it takes it and answers in order
    after any delay.  Then every request gets one answer, in order, never early; and for any
    address (``AnyConst``), every READ of it returns the last value stored to it through the
    L2, merged under the stores' masks, or memory's value (the stored data's top 24 bits are
    zero, which keeps the solver's work within reach).  ``claim_stale``: the false claim that
    every READ returns memory's initial value (the flow must refute it)."""

    def __init__(self, claim_stale=False):
        self.claim_stale = claim_stale

    def elaborate(self, platform):
        m = Module()
        p, lp = L2_P, L2_SMALL
        m.submodules.dut = dut = L2Cache(p, lp)
        regs = dut.regs
        free(m, dut.csr.addr, dut.csr.w_data, dut.csr.w_stb, dut.flush)
        m.d.comb += Assume(~dut.csr.w_stb | (dut.csr.addr == regs.address("cmd")) |
                           (dut.csr.addr == regs.address("win0_base")) |
                           (dut.csr.addr == regs.address("win0_size")) |
                           (dut.csr.addr == regs.address("ways_used")))
        req = dut.i.payload
        stream_source(m, dut.i.valid, req.as_value(), dut.i.ready, "i")
        free(m, dut.o.ready, dut.mem.ready)
        addr = AnyConst(p.addr_bits)
        init = Signal(p.beat_bits)
        m.d.comb += [init.eq(AnyConst(8)), Assume(addr[:p.beat_offset_bits] == 0)]
        take = dut.i.valid & dut.i.ready
        n_req = answers_in_order(m, take, dut.o.valid & dut.o.ready, dut.o.valid,
                                 dut.o.payload.tag, p.tag_bits, lp.depth)
        m.d.comb += [Assume(req.tag == n_req[:p.tag_bits]),
                     Assume(req.addr[:p.beat_offset_bits] == 0), Assume(req.addr < 16),
                     Assume(req.op.as_value() != 3), Assume(req.data[8:] == 0),
                     Assume(~((req.op == Op.UPDATE) & (req.addr == addr)))]

        def merge(old, new, mask):
            return Cat(*(Mux(mask[b], new[8 * b:8 * b + 8], old[8 * b:8 * b + 8])
                         for b in range(p.beat_bytes)))
        # the client's view of the address, and what each READ of it in flight must return
        started = Signal()
        m.d.sync += started.eq(1)
        shadow = Signal(p.beat_bits)
        view = Mux(started, shadow, init)
        T = 1 << p.tag_bits
        want = Array(Signal(p.beat_bits, name=f"want{k}") for k in range(T))
        watched = Signal(T)
        mine = req.addr == addr
        with m.If(take):
            m.d.sync += [want[req.tag].eq(view),
                         watched.bit_select(req.tag, 1).eq(mine & (req.op == Op.READ))]
        with m.If(take & mine & (req.op == Op.STORE)):
            m.d.sync += shadow.eq(merge(view, req.data, req.mask))
        with m.Else():
            m.d.sync += shadow.eq(view)
        out = dut.o.payload
        with m.If(dut.o.valid & watched.bit_select(out.tag, 1)):
            m.d.comb += Assert(out.data == init if self.claim_stale else
                               (out.data == want[out.tag]) & ~out.error)

        # memory: the watched address holds ``memory``; any other READ returns anything
        memory = Signal(p.beat_bits)
        mem_view = Mux(started, memory, init)
        mreq = dut.mem.payload
        mgo = dut.mem.valid & dut.mem.ready
        with m.If(mgo & (mreq.addr == addr) & (mreq.op == Op.STORE)):
            m.d.sync += memory.eq(merge(mem_view, mreq.data, mreq.mask))
        with m.Else():
            m.d.sync += memory.eq(mem_view)
        Q = 4
        q_data = Array(Signal(8, name=f"q{k}") for k in range(Q))
        q_n = Signal(range(Q + 1))
        rgo = dut.mem_resp.valid & dut.mem_resp.ready
        anything = AnySeq(8)
        m.d.comb += Assume(~mgo | (q_n < Q))
        with m.If(rgo):
            for k in range(Q - 1):
                m.d.sync += q_data[k].eq(q_data[k + 1])
        with m.If(mgo):
            m.d.sync += q_data[q_n - rgo].eq(Mux((mreq.addr == addr) & (mreq.op == Op.READ),
                                                 mem_view[:8], anything))
        m.d.sync += q_n.eq(q_n + mgo - rgo)
        m.d.comb += [dut.mem_resp.valid.eq((q_n != 0) & AnySeq(1)),
                     dut.mem_resp.payload.data.eq(q_data[0]),
                     dut.mem_resp.payload.error.eq(0), Assert(memory[8:] == 0)]
        return m


# --- the proofs -----------------------------------------------------------------------------------

#: name: (spec, mode, depth, depth under --soak).  The depths keep each proof within about a
#: minute on one core (BMC's cost grows steeply with depth: the link takes 10 s at 8 and 170 s
#: at 10, the DMA's receive side 17 s at 5 and 119-228 s at 6); a depth of ``None``: under --soak
#: only (the Tracker's induction, about 4 minutes; the DMA's receive side at the 64-GPU
#: ring's header, whose fields the default suite's send side already moves); docs/
#: verification.md lists them.
PROOFS = {
    "link": (LinkSpec, "bmc", 8, 10),
    "axil": (AXILiteSpec, "bmc", 7, 8),
    "axil_latency2": (lambda: AXILiteSpec(read_latency=2), "bmc", 7, 8),
    # latency 2 takes the read pipeline's path in the default suite (10 s); 3 (30 s) with --soak
    "axil_latency3": (lambda: AXILiteSpec(read_latency=3), "bmc", None, 9),
    "nmc": (NMCSpec, "bmc", 11, 13),
    # depth 5 (18 s) refutes the scheduler with the head's priority left out (step 3), with a
    # bank's oldest row not advanced when its command leaves (step 4) and with the head's
    # own row closed for it (step 3), measured on mutated copies; 6 took 122 s
    "nmc_bank_parallel": (NMCAheadSpec, "bmc", 5, 7),
    # depth 6 (27 s) refutes, in 1-3 s each, the scheduler with the cap's hold on the column
    # or on the row command left out and with an issued command's dependants never freed
    # (measured on mutated copies); 8 took over 10 minutes with op-and-stores
    "nmc_frfcfs": (NMCFRFCFSSpec, "bmc", 6, 8),
    "dma_send": (DMASendSpec, "bmc", 9, 12),
    # depth 5 refutes, in about 3 s each, the receive side with the rx window's check
    # left out, with the wrap past the address space's end left unchecked, and with the
    # window's end inclusive (measured on mutated copies); 6 took 119-228 s beside a run
    "dma_receive": (DMAReceiveSpec, "bmc", 5, 7),
    "dma_span": (DMASpanSpec, "bmc", 8, 10),
    # the same at the GPU numbers of a 64-GPU ring (6 bits): the header's fields move
    "dma_send_gpu6": (lambda: DMASendSpec(DMA_D64), "bmc", 9, 12),
    "dma_receive_gpu6": (lambda: DMAReceiveSpec(DMA_D64), "bmc", None, 6),
    "tracker": (TrackerSpec, "bmc", 8, 10),
    "bypass_fifo": (lambda: BypassFIFOSpec(depth=3), "bmc", 8, 10),
    "write_ahead_fifo": (lambda: BypassFIFOSpec(3, WriteAheadFIFO, SyncFIFOBuffered), "bmc", 8,
                         10),
    "read_ahead_fifo": (lambda: BypassFIFOSpec(
        3, lambda **kw: WriteAheadFIFO(**kw, read_ahead=True), SyncFIFOBuffered), "bmc", 8, 10),
    "write_ahead_sync_fifo": (lambda: BypassFIFOSpec(3, WriteAheadSyncFIFO, SyncFIFO), "bmc",
                              8, 10),
    "skid_buffer": (SkidBufferSpec, "bmc", 8, 10),
    "skid_buffer_field": (lambda: SkidBufferSpec(("a",)), "bmc", 8, 10),
    # at 7 cycles a store is read back as a hit (35 s); at 8 a read under a window that moved
    # goes to memory (5.5 minutes: the trace that found the window written as a request was
    # taken, pinned since by tests/test_l2_unit.py)
    "l2_coherence": (L2Spec, "bmc", 7, 8),
    # k-induction: for all time
    "linklayer_rx_order": (LinkRxOrderSpec, "prove", 2, 4),
    "dma_credit": (DMACreditSpec, "prove", 4, 6),
    "tracker_count": (TrackerCountSpec, "prove", None, 1),
}


@pytest.mark.parametrize("name", list(PROOFS))
def test_block_promise_holds(name, tmp_path, t3_options):
    spec, mode, depth, soak_depth = PROOFS[name]
    if depth is None and not t3_options.soak:
        pytest.skip(f"{name}: a long proof (see PROOFS); run with --soak")
    prove(spec(), tmp_path, mode=mode, depth=soak_depth if t3_options.soak else depth,
          name=name, timeout_s=3600)


def test_a_false_property_is_reported_as_a_failed_assertion(tmp_path):
    """The flow can fail, and says which way: a link of latency 3 does not take 4 cycles."""
    with pytest.raises(FormalFailure, match=r"^link: bmc failed: an assertion does not hold"):
        prove(LinkSpec(latency=3, claim=4), tmp_path, mode="bmc", depth=12, name="link")


def test_the_link_receiver_proof_refutes_a_false_claim(tmp_path):
    """A NAK names the last packet acknowledged, not the one after: the base case finds it."""
    with pytest.raises(FormalFailure, match=r"^linklayer: prove failed: an assertion does not "
                                            r"hold"):
        prove(LinkRxOrderSpec(claim="nak_next"), tmp_path, mode="prove", depth=4,
              name="linklayer")


def test_the_l2_proof_refutes_a_false_claim(tmp_path):
    """A READ does not always return memory's first value: a stored one is read back."""
    with pytest.raises(FormalFailure, match=r"^l2: bmc failed: an assertion does not hold"):
        prove(L2Spec(claim_stale=True), tmp_path, mode="bmc", depth=7, name="l2")


def test_a_flow_that_ends_without_a_verdict_is_not_a_failure(tmp_path):
    with pytest.raises(FormalError, match=r"^link: bmc did not finish in 0.01 s"):
        prove(LinkSpec(), tmp_path, mode="bmc", depth=40, name="link", timeout_s=0.01)


def _working_in(folder):
    """The processes whose working directory is ``folder`` or below it (Linux's /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:             # not a process, gone, or not ours to read
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append(int(proc.name))
    return found


def test_a_timeout_stops_the_whole_job_solver_included(tmp_path):
    """A proof past its time leaves nothing running: SymbiYosys, Yosys and the solver all
    stop (the solver used to run on, a core busy, after SymbiYosys was killed)."""
    with pytest.raises(FormalError, match=r"^link: bmc did not finish in 10 s"):
        prove(LinkSpec(), tmp_path, mode="bmc", depth=60, name="link", timeout_s=10)
    for _ in range(50):             # a killed process takes a moment to leave /proc
        if not _working_in(tmp_path):
            break
        time.sleep(0.1)
    assert _working_in(tmp_path) == []
