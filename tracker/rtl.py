"""The T3 Tracker (paper section 4.2.1; ``docs/design.md`` section 4).

A set-associative table at the memory controller's enqueue side that counts, per wavefront
output tile, the local, remote and DMA element updates, and emits a trigger when a tile has
``tile_elems * updates_per_element`` of them.
"""

import operator
from functools import reduce

from amaranth import Array, Module, Signal, Cat, Mux, C
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import RegisterFile, accumulate, count, csr_signature
from hw.interfaces import (ElemType, Op, mask_is_whole, mem_request_layout, popcount,
                           trigger_layout)
from hw.params import T3Params
from .config import TrackerParams, UPDATES_BITS, tracker_registers


__all__ = ["Tracker", "COUNTER_BITS", "TRIGGER_QUEUE"]


#: Width of the statistics counters; they saturate at ``2**COUNTER_BITS - 1``.
COUNTER_BITS = 32

#: Triggers the output queue holds.  The input takes an access only while the queue holds
#: fewer than ``TRIGGER_QUEUE - 3``, so that it has room for a trigger from it and from every
#: access ahead of it in the pipeline (three stages, the access taken among them); with the
#: queue drained as fast as it fills (one a cycle) the input is never refused: at least 5.
TRIGGER_QUEUE = 8


def entry_layout(params: T3Params, tparams: TrackerParams):
    return data.StructLayout({
        "valid":  1,
        "tag":    params.wg_id_bits - tparams.set_bits + params.wf_id_bits,
        "start":  params.addr_bits - params.beat_offset_bits,
        "rem":    tparams.count_bits,     # updates still to come: threshold - count, >= 1
        "region": tparams.region_bits,
    })


class Tracker(wiring.Component):
    """Wavefront-tile update tracker.

    Parameters
    ----------
    params : :class:`hw.params.T3Params`
    tparams : :class:`tracker.config.TrackerParams`
        Sets, ways, region registers, counter width.

    Ports
    -----
    i : In(stream.Signature(mem_request_layout(params)))
        Every access as it is enqueued into the memory-controller queue.  An access is *counted*
        when ``enable`` is set, ``tracked`` is 1, ``op`` is ``STORE`` or ``UPDATE`` and ``addr``
        falls in a programmed region (the lowest-numbered region wins; the driver refuses
        overlaps).  Its increment is the number of elements its byte ``mask`` enables for
        ``etype``.  Every other access passes untouched.  ``i.ready`` is low while the table is
        flushed, in the cycle after a region register write (the region's end address and
        threshold, registers, are computed then; an access taken in the write's own cycle is
        classified by the registers as they were), and while the head access is held (below).
    o : Out(stream.Signature(hw.interfaces.trigger_layout(params, tparams.regions)))
        One trigger per completed tile, in the order of the completing accesses, from a queue
        of :data:`TRIGGER_QUEUE` triggers (``o.valid`` and ``o.payload`` are registers).
    csr : In(csr_signature(...))
        Register file (:func:`tracker.config.tracker_registers`; see :mod:`hw.csr` for timing).

    Pipeline and timing
    -------------------
    Stage 0 (the cycle ``i`` handshakes): the address against every region, increment, set
    index; the set's row (all ways) is read from a synchronous memory.  Stage 1: the row
    arrives and is registered (the block RAM's output delay is most of a cycle on an FPGA);
    the lowest region the address hit, its threshold, and whether the access counts; each
    way's tag as read compared with the access's two bits at a time, as the row is registered.
    Stage 2: the tag match in every way (the pairs ANDed), the hit way's updates still to come (``rem``, an
    entry's threshold less its count) against the increment and less it, and its start
    address (one-hot selects, no priority chain).  Stage 3: threshold compare, the decision, the write-back of the one
    way that changed.  The stages move in lockstep (all or none).  A row is read before the two
    accesses ahead of it have written it, so stage 2 takes a way from stage 3's write of this
    cycle, else from the write of the previous advance, else from the row as read
    (forwarding): the Tracker takes **one access per cycle, back-to-back accesses to the same
    entry included**.  A trigger is valid on ``o`` **4 cycles** after the handshake of the
    access that completed the tile, when the trigger queue before it is empty.  ``i.ready``
    depends on registers only.

    Backpressure on ``o`` fills the trigger queue: ``i.ready`` drops while the queue holds
    ``TRIGGER_QUEUE - 3`` triggers or more, which leaves room for a trigger of every access in
    the pipeline and of one more (the cycles an access so waits at ``i`` count in
    ``stall_out``), so stage 3 never waits for ``o``.  The access in stage 3 is held, and ``i.ready`` drops, when it opens a new tile in a
    set with no free way (``stall_full``; ``status.set_full`` latches); the accesses behind it
    wait in stages 1 and 2. A held access is neither dropped nor counted twice. Since ways free only
    when a tile completes, and the accesses that complete tiles queue behind the held one, a
    full set deadlocks the input: :func:`tracker.config.check_schedule` refuses every schedule
    that can fill a set, so a configuration accepted by the driver never meets it, and one that
    does is visible in ``status`` rather than silently miscounted.

    Errors (access not counted, sticky ``status`` bit, ``errors`` +1, no trigger), in this
    order: the mask is empty or not whole elements, or the address is not beat aligned
    (``bad_access``); the tile is open under another region (``region_mismatch``); the
    region's threshold passes the counter, ``2**count_bits - 1`` (``count_overflow``: such a
    region counts nothing, and the driver refuses it); the update would take the tile past
    its threshold (``over_threshold``).

    A tile whose trigger fired frees its entry; a later update with the same ``wg_id`` and
    ``wf_id`` opens a new tile (the next kernel reuses the ids).  A region's registers cannot
    change while it has open tiles or an access to it is in the pipeline, nor while a
    tracked write waits at ``i`` (which takes it in the write's cycle): such a write is
    ignored, latches ``status.region_busy`` and counts in ``errors`` (an open tile would
    otherwise complete under the next kernel's settings, early and at its old address).  The
    driver flushes the table between kernels.

    Reset and ``cmd.flush`` clear the table one set per cycle (``sets`` cycles, ``i.ready`` low,
    ``status.flushing`` high) once the accesses in the pipeline have completed; an access held
    by a full set, and those waiting behind it, are discarded by the flush with the rest of
    the table (the way out of a set-full stall).
    """

    def __init__(self, params: T3Params, tparams: TrackerParams = TrackerParams()):
        if not isinstance(params, T3Params):
            raise TypeError(f"params must be a T3Params, not {params!r}")
        if not isinstance(tparams, TrackerParams):
            raise TypeError(f"tparams must be a TrackerParams, not {tparams!r}")
        tparams.check_against(params)
        self.params = params
        self.tparams = tparams
        self.regs = tracker_registers(params, tparams)
        self.regfile = RegisterFile(self.regs)      # the registers' hardware
        super().__init__({
            "i":   In(stream.Signature(mem_request_layout(params))),
            "o":   Out(stream.Signature(trigger_layout(params, tparams.regions))),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, tp, regs = self.params, self.tparams, self.regfile
        entry = entry_layout(p, tp)
        ways = tp.ways
        row_layout = data.ArrayLayout(entry, ways)
        beat_addr_bits = p.addr_bits - p.beat_offset_bits
        thr_bits = tp.count_bits + UPDATES_BITS
        inc_bits = p.beat_bytes.bit_length()

        m.submodules.table = table = Memory(shape=row_layout, depth=tp.sets, init=[])
        wr = table.write_port(granularity=1)   # one enable per way
        rd = table.read_port(domain="sync", transparent_for=(wr,))

        # --- Registers -------------------------------------------------------------------
        enable = regs.rw("ctrl").enable
        flushing = Signal(init=1)
        flush_set = Signal(range(tp.sets))
        counters = {name: Signal(COUNTER_BITS, name=f"cnt_{name}") for name in
                    ("errors", "accesses", "tracked", "triggers", "stall_full", "stall_out")}
        occupancy = Signal(range(tp.sets * ways + 1))
        peak = Signal.like(occupancy)
        info = {"set_bits": tp.set_bits, "ways": ways, "regions": tp.regions,
                "count_bits": tp.count_bits}
        regs.elaborate(m, self.csr, {
            "info": info, "occupancy": occupancy, "peak_occupancy": peak, **counters,
        })
        clear_counters = regs.command("cmd", "clear")
        start_flush = regs.command("cmd", "flush")

        # --- Stage 0: classify the input access ------------------------------------------
        req = self.i.payload
        in_region = Signal(tp.regions)
        # Each region's end address and threshold (a product) are registers of their own,
        # computed from the region registers in the cycle after a write.  The input pauses in
        # that cycle (``settle``), so no access meets a stale end or threshold; an access taken
        # in the write's own cycle meets the registers as they were (the write lands at its
        # end), and the region lock below refuses a write to the region such an access falls
        # in.  (With the input paused in the write's cycle as well, the register decoder's
        # address reached ``i.ready`` through the write strobes' decode: the node's longest
        # path at two placements, 12.3 ns.)
        region_write = Signal()
        settle = Signal()
        m.d.comb += region_write.eq(Cat(*(regs.write_strobe(f"region{r}_{f}")
                                          for r in range(tp.regions)
                                          for f in ("base", "size", "tile_elems",
                                                    "updates"))).any())
        m.d.sync += settle.eq(region_write)
        # (``big``, the threshold past the counter, is its register's high bits)
        region_regs = {}                        # r: (end, on, threshold, big), for ``state``
        for r in reversed(range(tp.regions)):   # lowest index wins
            base, size = regs.rw(f"region{r}_base"), regs.rw(f"region{r}_size")
            r_end = Signal(p.addr_bits + 1, name=f"region{r}_end")
            r_on = Signal(name=f"region{r}_on")
            r_thr = Signal(thr_bits, name=f"region{r}_threshold")
            r_big = Signal(name=f"region{r}_big")
            m.d.sync += [r_end.eq(base + size), r_on.eq(size != 0),
                         r_thr.eq(regs.rw(f"region{r}_tile_elems") *
                                  regs.rw(f"region{r}_updates"))]
            m.d.comb += r_big.eq(r_thr[tp.count_bits:].any())      # r_thr > max_count
            region_regs[r] = (r_end, r_on, r_thr, r_big)
            m.d.comb += in_region[r].eq(r_on & (req.addr >= base) & (req.addr < r_end))

        mask = req.mask
        wide = (req.etype == ElemType.FP32) | (req.etype == ElemType.INT32)
        # the elements written: each element's first byte counted, not every byte then
        # divided (for a whole mask, the access counted, the two agree; a torn mask is
        # refused and its increment unused).  An element's first bytes are a half or a
        # quarter of the mask, a tree of adders a level or two shallower: the input's mask
        # through the popcount of every byte into ``s1_inc`` was a node's path at every seed.
        quads = popcount(mask[0::4])
        increment = Mux(wide, quads, quads + popcount(mask[2::4]))
        whole = mask_is_whole(mask, req.etype)
        aligned = req.addr[:p.beat_offset_bits] == 0
        is_write = (req.op == Op.STORE) | (req.op == Op.UPDATE)
        wanted = enable & req.tracked & is_write        # counted if in a region
        good = whole & aligned & mask.any()           # (an element written)

        # --- The pipeline moves in lockstep: every stage advances when stage 3 does ------------
        s1_valid = Signal(name="s1_valid")
        s2_valid = Signal(name="s2_valid")
        s3_valid = Signal(name="s3_valid")
        advance = Signal()

        # --- Stage 1 registers (the row is being read) ------------------------------------
        # the regions the address hit are registered as they are; which one holds the access
        # (the lowest), its threshold and whether the access counts are stage 1's (the region
        # selection after the address compares, behind the node's input slice, was the node's
        # critical path, 12.4 ns, into these flags).  A counted access's region cannot be
        # rewritten while it is in the pipeline (the region lock), nor can its hits change.
        s1_hits = Signal(tp.regions)
        s1_wanted = Signal()     # taken, enabled, tracked, a write: counted if in a region
        s1_good = Signal()       # well formed
        s1_count = Signal()      # counted access (in a region, well formed)
        s1_bad = Signal()        # in a region but malformed: bad_access
        s1_set = Signal(range(tp.sets))
        s1_tag = Signal(entry["tag"].shape)
        s1_addr = Signal(beat_addr_bits)
        s1_inc = Signal(inc_bits)
        s1_thr = Signal(thr_bits)
        s1_big = Signal()
        s1_region = Signal(tp.region_bits)
        s1_wg_id = Signal(p.wg_id_bits)
        s1_wf_id = Signal(p.wf_id_bits)
        take = self.i.valid & self.i.ready
        # the trigger queue's room for this access's trigger and those ahead of it (the three
        # stages, each of which may fire one), a register: fewer than TRIGGER_QUEUE - 3
        # queued.  (Stage 3 waited for ``o``, and through the pipeline's hold the trigger
        # register's valid reached the enables of every stage's registers, the table's read
        # and the input slice's head: the node's longest path at two placements, 11.3-11.9
        # ns, 9.8-10.1 of it wires; the room counted from the stages' valids, a sum, into the
        # slice's head was the next, 11.4 ns.)
        q_level = Signal(range(TRIGGER_QUEUE + 1), name="trig_level")
        q_room = Signal(init=1, name="trig_room")
        m.d.comb += [
            self.i.ready.eq(advance & ~flushing & ~settle & q_room),
            rd.addr.eq(req.wg_id[:tp.set_bits]),
            rd.en.eq(advance),
        ]
        with m.If(advance):
            m.d.sync += [
                s1_valid.eq(take),
                s1_hits.eq(in_region), s1_wanted.eq(take & wanted), s1_good.eq(good),
                s1_set.eq(req.wg_id[:tp.set_bits]),
                s1_tag.eq(Cat(req.wf_id, req.wg_id[tp.set_bits:])),
                s1_addr.eq(req.addr[p.beat_offset_bits:]),
                s1_inc.eq(increment),
                s1_wg_id.eq(req.wg_id),
                s1_wf_id.eq(req.wf_id),
            ]

        # --- Stage 1: the access's region ------------------------------------------------
        counts_in = s1_wanted & s1_hits.any()
        m.d.comb += [s1_count.eq(counts_in & s1_good), s1_bad.eq(counts_in & ~s1_good)]
        for r in reversed(range(tp.regions)):   # lowest index wins
            r_thr, r_big = region_regs[r][2:]
            with m.If(s1_hits[r]):
                m.d.comb += [s1_region.eq(r), s1_thr.eq(r_thr), s1_big.eq(r_big)]

        # --- Stage 2 registers (the row as read) -------------------------------------------
        s2_row = Signal(row_layout)
        s2_count, s2_bad = Signal(name="s2_count"), Signal(name="s2_bad")
        # the outcome of a miss (no open tile) needs no row: the count is the increment, the
        # updates still to come the threshold less it
        s2_miss_fire = Signal(name="s2_miss_fire")
        s2_miss_over = Signal(name="s2_miss_over")
        s2_miss_rem = Signal(tp.count_bits, name="s2_miss_rem")
        # a region whose threshold passes the counter counts nothing (count_overflow): every
        # other region's threshold fits ``count_bits``, so an entry holds the updates still
        # to come, at least 1, and a hit compares them with the increment (at most
        # ``beat_bytes / 2``: a few bits and a zero test, no carry chain across the counter)
        s2_big = Signal(name="s2_big")
        s2_set = Signal(range(tp.sets))
        s2_tag = Signal(entry["tag"].shape)
        s2_addr = Signal(beat_addr_bits)
        s2_inc = Signal(inc_bits)
        s2_region = Signal(tp.region_bits)
        s2_wg_id = Signal(p.wg_id_bits)
        s2_wf_id = Signal(p.wf_id_bits)
        # the outcome of a miss (no open tile) does not need the row: open a tile, or not
        with m.If(advance):
            m.d.sync += [
                s2_valid.eq(s1_valid), s2_count.eq(s1_count), s2_bad.eq(s1_bad),
                s2_miss_fire.eq(s1_inc == s1_thr), s2_miss_over.eq(s1_inc > s1_thr),
                s2_miss_rem.eq(s1_thr - s1_inc), s2_big.eq(s1_big),
                s2_set.eq(s1_set),
                s2_tag.eq(s1_tag), s2_addr.eq(s1_addr), s2_inc.eq(s1_inc),
                s2_region.eq(s1_region), s2_wg_id.eq(s1_wg_id),
                s2_wf_id.eq(s1_wf_id),
            ]

        # --- Stage 3 registers (looked up and counted) ------------------------------------
        s3_count = Signal()
        s3_bad = Signal()
        s3_hit = Signal()
        s3_way = Signal(ways)    # one-hot
        s3_mismatch = Signal()   # the errors, each only if none before it in this list
        s3_over = Signal()
        s3_overflow = Signal()
        s3_fire = Signal()       # completes its tile (no error)
        s3_full = Signal()       # opens a tile in a set with no free way: held
        s3_write = Signal(ways)  # the way it writes when it moves on (one-hot, or none)
        s3_new_rem = Signal(tp.count_bits)
        # the tile's start is chosen from registers in stage 3: the hit tile's start if it
        # starts below the access (``s3_earlier``), else the access's beat (the choice at
        # the end of stage 2, after the ways' compares, fanned its select out to every bit of
        # the start register: stage 2's address into stage 3's start was the node's longest
        # path at one placement, 11.2 ns)
        s3_earlier = Signal()
        s3_hit_start = Signal(beat_addr_bits)
        s3_addr = Signal(beat_addr_bits)
        s3_start = Signal(beat_addr_bits)
        m.d.comb += s3_start.eq(Mux(s3_earlier, s3_hit_start, s3_addr))
        s3_set = Signal(range(tp.sets))
        s3_tag = Signal(entry["tag"].shape)
        s3_region = Signal(tp.region_bits)
        s3_wg_id = Signal(p.wg_id_bits)
        s3_wf_id = Signal(p.wf_id_bits)

        # --- Stage 3: threshold compare, decide, write back ------------------------------
        # (the compares were made in stage 2: stage 3 decides on registers alone)
        over, overflow, fire = s3_over, s3_overflow, s3_fire
        error = s3_mismatch | over | overflow
        alloc = s3_count & ~error & ~fire & ~s3_hit
        # stage 3 waits only for a way (``s3_full`` implies ``s3_valid``: it is loaded with
        # it and cleared with it): the pipeline's hold is one flip-flop
        set_full = s3_full
        s3_go = s3_valid & ~s3_full
        m.d.comb += advance.eq(~s3_full)

        updated = Signal(entry)
        m.d.comb += [
            updated.valid.eq(~fire),
            updated.tag.eq(s3_tag),
            updated.start.eq(s3_start),
            updated.rem.eq(s3_new_rem),
            updated.region.eq(s3_region),
        ]
        write = Signal(ways)     # one enable per way
        m.d.comb += write.eq(Mux(s3_go, s3_write, 0))
        m.d.comb += [
            wr.addr.eq(s3_set),
            wr.data.eq(Cat(*([updated] * ways))),
            wr.en.eq(write),
        ]
        # whether stage 2's access is in the set of stage 3's: compared one stage early, so
        # that the forwarding select comes straight from registers
        same3 = Signal()
        with m.If(advance):
            m.d.sync += same3.eq(s2_set == s1_set)
        # the row as stage 2 gets it: as read, with the way that stage 3 writes at this edge
        with m.If(advance):
            for w in range(ways):
                m.d.sync += s2_row[w].eq(Mux(write[w] & (s3_set == s1_set), updated, rd.data[w]))
        # Each way's tag compare is begun as the row is registered: whether each pair of the
        # tag's bits as read equals the access's (one LUT after the block RAM's output), the
        # way's valid bit beside them, and, for a way stage 3 writes at this edge, the written
        # entry's whole match (from registers).  Stage 2 ANDs the pairs.  (The whole compare
        # after the RAM's output, in either stage, mapped as a chain of five or six LUTs: with
        # the RAM's 5.8 ns clock-to-out it was the Tracker's and then the node's longest path,
        # 12.9 ns.)  Stage 3's tag against stage 2's is compared one stage early likewise.
        tag_bits = len(s1_tag)
        s2_pairs = [Signal(1 + (tag_bits + 1) // 2, name=f"s2_pairs{w}") for w in range(ways)]
        s2_fwd_in = Signal(ways)     # the way was stage 3's write as the row was registered
        s2_fwd_match = Signal()      # ... and that entry is open under stage 2's tag
        same_tag3 = Signal(init=1)   # s3_tag == s2_tag (both reset to 0)
        with m.If(advance):
            m.d.sync += [
                same_tag3.eq(s2_tag == s1_tag),
                s2_fwd_match.eq(updated.valid & (updated.tag == s1_tag)),
            ]
            for w in range(ways):
                as_read = rd.data[w]
                pairs = [as_read.tag[i:i + 2] == s1_tag[i:i + 2] for i in range(0, tag_bits, 2)]
                m.d.sync += [
                    s2_fwd_in[w].eq(write[w] & (s3_set == s1_set)),
                    s2_pairs[w].eq(Cat(as_read.valid, *pairs)),
                ]

        # --- Stage 2: look up the row, count ----------------------------------------------
        # The row was read in the cycle the access was taken, and saw every write up to that
        # edge (the read port is transparent).  Two writes came after it: the one made as the
        # access moved to stage 2 (taken into ``s2_row`` as it is loaded, above) and the one
        # stage 3 makes now, taken here.  (Stage 3's write is forwarded whether or not stage 3
        # moves on this cycle: if it does not, neither does stage 2, and the forwarding select
        # depends on registers alone.)  Every way's compares are made on the row as registered
        # and, once, on stage 3's written entry, both from registers; the forwarding select
        # picks among the results (it selected the entry before the compares: the select
        # fanned out to every bit of every way, and the node's critical path, 14.6 ns, ran
        # from it through the compares back into stage 3).
        fwd = Signal(ways)
        m.d.comb += fwd.eq(Mux(same3, s3_write, 0))

        # whether stage 3's start is below stage 2's beat, for the forwarded entry: compared a
        # stage early, from registers, as the start is chosen (below).  (The start's select
        # ends a path through the ways' compares; the compare after it, a carry chain, and back
        # through the forwarded entry's ``earlier`` into the select was the Tracker's longest
        # path, 10.6 ns.)
        fwd_earlier = Signal()

        def compares(e, name, match, earlier=None):
            out = {k: Signal(name=f"{name}_{k}") for k in (
                "match", "free", "earlier", "fire", "over", "mismatch", "fires")}
            out["rem"] = Signal(tp.count_bits, name=f"{name}_rem")
            # the updates to come against the increment: equal fires, fewer is over
            low, high = e.rem[:inc_bits], e.rem[inc_bits:]
            near = (high == 0) if len(high) else C(1, 1)
            m.d.comb += [
                out["match"].eq(match),     # e.valid & (e.tag == s2_tag), begun a stage early
                out["free"].eq(~e.valid),
                out["earlier"].eq(e.start < s2_addr if earlier is None else earlier),
                out["fire"].eq(near & (low == s2_inc)),
                out["over"].eq(near & (low < s2_inc)),
                out["mismatch"].eq(e.region != s2_region),
                out["rem"].eq(e.rem - s2_inc),
                # the access fires this way's tile: it hits it, without an error
                out["fires"].eq(out["match"] & ~out["mismatch"] & ~out["over"] & out["fire"]),
            ]
            return out

        forwarded = compares(updated, "fwd", updated.valid & same_tag3, fwd_earlier)
        # each way's match on the row as registered (the forwarded entry's, or the pairs')
        s2_hit_read = Signal(ways)
        for w in range(ways):
            m.d.comb += s2_hit_read[w].eq(Mux(s2_fwd_in[w], s2_fwd_match, s2_pairs[w].all()))
        # One-hot everywhere (a tag is open in at most one way of its set): every way is
        # compared, counted and checked in parallel, and the hit way's results are an AND-OR
        # of the ways, with no priority chain and no compare after the select.
        match = Signal(ways)
        free = Signal(ways)
        earlier = Signal(ways)      # the way's tile starts below this access's beat
        w_over = Signal(ways)       # ... < the increment: past the threshold
        w_mismatch = Signal(ways)   # the way's tile is open under another region
        w_fires = Signal(ways)      # the access hits the way and completes its tile
        w_rem = [Signal(tp.count_bits, name=f"w{w}_rem") for w in range(ways)]
        w_start = [Signal(beat_addr_bits, name=f"w{w}_start") for w in range(ways)]
        for w in range(ways):
            as_read = compares(s2_row[w], f"w{w}", s2_hit_read[w])
            m.d.comb += [
                match[w].eq(Mux(fwd[w], forwarded["match"], as_read["match"])),
                free[w].eq(Mux(fwd[w], forwarded["free"], as_read["free"])),
                earlier[w].eq(Mux(fwd[w], forwarded["earlier"], as_read["earlier"])),
                w_over[w].eq(Mux(fwd[w], forwarded["over"], as_read["over"])),
                w_mismatch[w].eq(Mux(fwd[w], forwarded["mismatch"], as_read["mismatch"])),
                w_fires[w].eq(Mux(fwd[w], forwarded["fires"], as_read["fires"])),
                w_rem[w].eq(Mux(fwd[w], forwarded["rem"], as_read["rem"])),
                w_start[w].eq(Mux(fwd[w], updated.start, s2_row[w].start)),
            ]
        hit = match.any()
        any_free = free.any()
        first_free = Signal(ways)   # the lowest free way, as the model picks it
        m.d.comb += first_free.eq(free & -free)

        hit_rem = reduce(operator.or_, [Mux(match[w], w_rem[w], 0) for w in range(ways)])
        hit_start = reduce(operator.or_, [Mux(match[w], w_start[w], 0) for w in range(ways)])
        hit_earlier = (match & earlier).any()
        # ``start < s1_addr``, for stage 2's next access (``fwd_earlier``): each way's start and
        # stage 3's compared with it from registers, chosen as ``start`` is
        # (both candidates compared in parallel and the compare chosen after, as the start is:
        # the start's select fanned out to every bit ahead of the carry chain, then the ways'
        # choice, was a node's path into ``fwd_earlier``, 11.8 ns)
        # The next start is the hit tile's or this access's beat, whichever is lower (a
        # miss's is the beat), so it is below s1_addr exactly when the hit way's start is
        # or the beat is: an OR, with no select on ``hit_earlier`` (the ways' compares) at
        # its end, and the forwarded way's compare, the latest input (stage 3's start
        # registers through a carry chain), ORed in last rather than through every way's
        # select (``s3_hit_start`` into ``fwd_earlier`` was a node's path at every seed).
        s3_start_below = Mux(s3_earlier, s3_hit_start < s1_addr, s3_addr < s1_addr)
        row_below = reduce(operator.or_, [
            match[w] & ~fwd[w] & (s2_row[w].start < s1_addr) for w in range(ways)])
        start_below = row_below | ((match & fwd).any() & s3_start_below)
        # (names of their own: ``fire``, ``over``... are stage 3's)
        to_mismatch = s2_count & (match & w_mismatch).any()
        to_overflow = s2_count & ~to_mismatch & s2_big
        to_over = s2_count & ~to_mismatch & ~s2_big & \
            Mux(hit, (match & w_over).any(), s2_miss_over)
        # a hit fires when its way fires (one way at most matches: the hit way's flags ANDed
        # within the way, one OR across the ways); a miss, when its threshold is its
        # increment (s2_miss_fire excludes s2_miss_over).  Equal to ANDing the cross-way
        # error flags, which took the forwarding select through the ways' hit and three ORs
        # into the fire register: a node's worst path at one seed of round 25, 11.0 ns.
        to_fire = s2_count & ~s2_big & (w_fires.any() | (~hit & s2_miss_fire))
        miss_alloc = ~s2_big & ~s2_miss_over & ~s2_miss_fire
        with m.If(advance):
            m.d.sync += [
                s3_valid.eq(s2_valid),
                s3_count.eq(s2_count),
                s3_bad.eq(s2_bad),
                s3_hit.eq(hit),
                s3_way.eq(Mux(hit, match, first_free)),
                s3_mismatch.eq(to_mismatch),
                s3_over.eq(to_over),
                s3_overflow.eq(to_overflow),
                s3_fire.eq(to_fire),
                # per way: the hit way's own flags, or the miss's allocation in the first free
                # way (equal to choosing by the cross-way error flags, which took the ways'
                # compares through the hit and three ORs into every bit: a node's path into
                # ``s3_write``, 10.6 ns)
                s3_write.eq(Mux(s2_valid & s2_count & ~s2_big,
                                (match & ~w_mismatch & ~w_over) |
                                Mux(~hit & miss_alloc, first_free, 0), 0)),
                s3_full.eq(s2_valid & s2_count & miss_alloc & ~hit & ~any_free),
                s3_new_rem.eq(Mux(hit, hit_rem, s2_miss_rem)),
                s3_earlier.eq(hit_earlier),
                s3_hit_start.eq(hit_start),
                s3_addr.eq(s2_addr),
                fwd_earlier.eq(start_below | (s2_addr < s1_addr)),
                s3_set.eq(s2_set),
                s3_tag.eq(s2_tag),
                s3_region.eq(s2_region),
                s3_wg_id.eq(s2_wg_id),
                s3_wf_id.eq(s2_wf_id),
            ]

        # --- Trigger queue ----------------------------------------------------------------
        # registers: ``TRIGGER_QUEUE`` entries in a ring, and the head's copy on ``o`` with
        # ``o.valid``, registers of their own.  A trigger pushed into an empty queue is on
        # ``o`` in the next cycle, as from the former output register.  The input's room
        # check keeps a push from ever finding the queue full.
        trig = self.o.payload.shape()
        q_entries = [Signal(trig, name=f"trig{k}") for k in range(TRIGGER_QUEUE)]
        q_head = Signal(range(TRIGGER_QUEUE), name="trig_head")
        q_tail = Signal(range(TRIGGER_QUEUE), name="trig_tail")
        push = Signal()
        pop = Signal()
        pushed = Signal(trig)
        m.d.comb += [
            push.eq(s3_go & fire),
            pop.eq(self.o.valid & self.o.ready),
            pushed.wg_id.eq(s3_wg_id), pushed.wf_id.eq(s3_wf_id),
            pushed.addr.eq(Cat(C(0, p.beat_offset_bits), s3_start)),
            pushed.region.eq(s3_region),
        ]

        def after(ptr):
            return Mux(ptr == TRIGGER_QUEUE - 1, 0, ptr + 1)
        with m.If(push):
            m.d.sync += q_tail.eq(after(q_tail))
            for k in range(TRIGGER_QUEUE):
                with m.If(q_tail == k):
                    m.d.sync += q_entries[k].eq(pushed)
        with m.If(pop):
            m.d.sync += q_head.eq(after(q_head))
        m.d.sync += [q_level.eq(q_level + push - pop),
                     q_room.eq(q_level + push - pop < TRIGGER_QUEUE - 3)]
        # the head on ``o``: the pushed trigger when no other is left in the queue, else the
        # entry after the head when the head leaves, else as it is
        next_head = Array(q_entries)[after(q_head)]
        only = (q_level == 0) | ((q_level == 1) & pop)
        with m.If(push & only):
            m.d.sync += self.o.payload.eq(pushed)
        with m.Elif(pop):
            m.d.sync += self.o.payload.eq(next_head)
        m.d.sync += self.o.valid.eq((q_level + push - pop) != 0)

        # --- Flush: clear one set per cycle ----------------------------------------------
        with m.If(start_flush):
            m.d.sync += [flushing.eq(1), flush_set.eq(0)]
        with m.Elif(flushing & set_full):
            # the flush discards the held access, and those behind it, with the table
            m.d.sync += [s3_valid.eq(0), s2_valid.eq(0), s1_valid.eq(0), s3_full.eq(0)]
        # the table's writes from registers alone: in the cycle of a flush command that
        # restarts a flush the set is cleared too (every set is cleared again after it), and
        # only the flush's own counters see the command (the register decoder's write strobe
        # into the table's write data and enables was the node's longest path at one
        # placement, 11.1 ns)
        clearing = flushing & ~s1_valid & ~s2_valid & ~s3_valid
        with m.If(clearing):
            m.d.comb += [wr.addr.eq(flush_set), wr.data.eq(0), wr.en.eq(-1)]
        with m.If(clearing & ~start_flush):
            m.d.sync += flush_set.eq(flush_set + 1)
            with m.If(flush_set == tp.sets - 1):
                m.d.sync += flushing.eq(0)

        # --- Occupancy, status, counters -------------------------------------------------
        # Stage 3's change to the occupancy (a way taken, a way freed) is summed from its
        # registers, and its go only enables the write: with the go into the adder's inputs,
        # the trigger register's valid through the stall decision and the adder into the
        # occupancy was the node's longest path at one placement (15.0 ns, 11.7 of it wires).
        with m.If(flushing):
            m.d.sync += occupancy.eq(0)
        with m.Elif(s3_go):
            m.d.sync += occupancy.eq(occupancy + alloc - (fire & s3_hit))

        # --- Region registers are locked while the region has open tiles ----------------
        refused = []
        for r in range(tp.regions):
            opened = Signal(range(tp.sets * ways + 1), name=f"open{r}")
            here = s3_region == r
            with m.If(flushing | start_flush):
                m.d.sync += opened.eq(0)
            with m.Elif(s3_go):     # (as the occupancy: the go enables, it adds nothing)
                m.d.sync += opened.eq(opened + (alloc & here) - (fire & s3_hit & here))
            # (and a tracked write at the input, which ``i`` takes in the cycle of a write,
            # classified by the registers as they were: whatever its address, since the
            # address compares into the lock were the node's longest path at one placement)
            waiting = self.i.valid & wanted
            in_stages = (s3_valid & s3_count & here) | \
                (s2_valid & s2_count & (s2_region == r)) | \
                (s1_valid & s1_count & (s1_region == r))
            # the stages' term from a register of the last cycle's: an access in a stage now
            # was a stage earlier then, or at the input, so with the input's term of now the
            # lock refuses every write it refused before (a region whose last access leaves
            # the pipeline is free a cycle later; stage 1's region choice through the lock into
            # the region registers' enables was the Tracker's longest path in the node at one
            # placement, 10.5 ns)
            staged = Signal(name=f"region{r}_staged")
            m.d.sync += staged.eq(in_stages | waiting)
            refused.append(regs.lock(m, [f"region{r}_{f}" for f in
                                         ("base", "size", "tile_elems", "updates")],
                                     (opened != 0) | staged | waiting))
        region_busy = Signal()
        m.d.comb += region_busy.eq(Cat(*refused).any())

        regs.status(m, "status", set_full=set_full, over_threshold=s3_go & over,
                    count_overflow=s3_go & overflow, region_mismatch=s3_go & s3_mismatch,
                    bad_access=s3_go & s3_bad, region_busy=region_busy, flushing=flushing)

        # errors count in the cycle after their events (the status bits latch with them): the
        # events and the region lock's refusal, from stage 3's and stage 1's decisions, into
        # the 32-bit sum were one path, the node's worst once stage 1 chose the region
        errors = Signal(range(3))
        m.d.sync += errors.eq((s3_go & (error | s3_bad)) + region_busy)
        accumulate(m, counters["errors"], errors, clear_counters)
        for name, event in (("accesses", take),
                            ("tracked", s3_go & s3_count & ~error), ("triggers", s3_go & fire),
                            ("stall_full", set_full),
                            ("stall_out", self.i.valid & advance & ~flushing & ~settle &
                             ~q_room)):
            count(m, counters[name], event, clear_counters)
        # the peak follows the occupancy register a cycle later (from the next occupancy it put
        # the stall and fire decision, an adder and a compare on one path: the Tracker's longest)
        with m.If(clear_counters | (occupancy > peak)):
            m.d.sync += peak.eq(occupancy)

        #: The table and the pipeline's registers by name, set by :meth:`elaborate`, for the
        #: proofs whose invariants must name them (``TrackerCountSpec`` of
        #: ``tests/test_formal.py``); not ports: nothing else may drive or read them.
        self.state = {name: value for name, value in locals().items()
                      if name.startswith(("s1_", "s2_", "s3_")) or name in (
                          "table", "rd", "flushing", "flush_set", "updated", "write", "fwd",
                          "same3", "same_tag3", "fwd_earlier", "advance", "occupancy", "settle", "region_regs",
                          "take", "q_entries", "q_head", "q_tail", "q_level", "q_room")}
        return m
