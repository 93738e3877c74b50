"""The T3 Tracker (paper section 4.2.1; ``docs/design.md`` section 4).

A set-associative table at the memory controller's enqueue side that counts, per wavefront
output tile, the local, remote and DMA element updates, and emits a trigger when a tile has
``tile_elems * updates_per_element`` of them.
"""

from amaranth import Module, Signal, Cat, Mux, C
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.csr import accumulate, count, csr_signature
from hw.interfaces import ElemType, Op, mask_is_whole, mem_request_layout, trigger_layout
from hw.params import T3Params
from .config import TrackerParams, UPDATES_BITS, tracker_registers


__all__ = ["Tracker", "COUNTER_BITS"]


#: Width of the statistics counters; they saturate at ``2**COUNTER_BITS - 1``.
COUNTER_BITS = 32


def entry_layout(params: T3Params, tparams: TrackerParams):
    return data.StructLayout({
        "valid":  1,
        "tag":    params.wg_id_bits - tparams.set_bits + params.wf_id_bits,
        "start":  params.addr_bits - params.beat_offset_bits,
        "count":  tparams.count_bits,
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
        flushed and while the head access is held (below).
    o : Out(stream.Signature(hw.interfaces.trigger_layout(params, tparams.regions)))
        One trigger per completed tile, in the order of the completing accesses.
    csr : In(csr_signature(...))
        Register file (:func:`tracker.config.tracker_registers`; see :mod:`hw.csr` for timing).

    Pipeline and timing
    -------------------
    Stage 0 (the cycle ``i`` handshakes): region lookup, increment, set index; the set's row
    (all ways) is read from a synchronous memory.  Stage 1 (next cycle): tag compare, count,
    threshold compare, write-back of the row.  The read port is transparent to the write port,
    so an access to the row being written in the same cycle reads the written value: the
    Tracker takes **one access per cycle, back-to-back accesses to the same entry included**.
    A trigger is valid on ``o`` **2 cycles** after the handshake of the access that completed
    the tile (registered output).

    The head access in stage 1 is held, and ``i.ready`` drops, when it fires but ``o`` still
    holds an unaccepted trigger (counted in ``stall_out``), or when it opens a new tile in a set
    with no free way (``stall_full``; ``status.set_full`` latches).  A held access is neither
    dropped nor counted twice; a full set waits for a way to free.  Since ways free only when a
    tile completes, and the accesses that complete tiles queue behind the held one, a full set
    deadlocks the input: :func:`tracker.config.check_schedule` refuses every schedule that can
    fill a set, so a configuration accepted by the driver never meets it, and one that does
    is visible in ``status`` rather than silently miscounted.

    Errors (access not counted, sticky ``status`` bit, ``errors`` +1, no trigger): the update
    would take the tile past its threshold (``over_threshold``) or its counter past
    ``2**count_bits - 1`` (``count_overflow``); the tile is open under another region
    (``region_mismatch``); the mask is empty or not whole elements, or the address is not beat
    aligned (``bad_access``).

    A tile whose trigger fired frees its entry; a later update with the same ``wg_id`` and
    ``wf_id`` opens a new tile (the next kernel reuses the ids).  A region's registers cannot
    change while it has open tiles or an access to it is in the pipeline: such a write is
    ignored, latches ``status.region_busy`` and counts in ``errors`` (an open tile would
    otherwise complete under the next kernel's settings, early and at its old address).  The
    driver flushes the table between kernels.

    Reset and ``cmd.flush`` clear the table one set per cycle (``sets`` cycles, ``i.ready`` low,
    ``status.flushing`` high) once the access in stage 1 has completed; an access held by a full
    set is discarded by the flush with the rest of the table (the way out of a set-full stall).
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
        super().__init__({
            "i":   In(stream.Signature(mem_request_layout(params))),
            "o":   Out(stream.Signature(trigger_layout(params, tparams.regions))),
            "csr": In(csr_signature(self.regs.addr_bits)),
        })

    def elaborate(self, platform):
        m = Module()
        p, tp, regs = self.params, self.tparams, self.regs
        entry = entry_layout(p, tp)
        ways = tp.ways
        row_layout = data.ArrayLayout(entry, ways)
        beat_addr_bits = p.addr_bits - p.beat_offset_bits
        thr_bits = tp.count_bits + UPDATES_BITS
        inc_bits = p.beat_bytes.bit_length()
        sum_bits = max(tp.count_bits, inc_bits) + 1

        m.submodules.table = table = Memory(shape=row_layout, depth=tp.sets, init=[])
        wr = table.write_port()
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
        region = Signal(tp.region_bits)
        threshold = Signal(thr_bits)
        for r in reversed(range(tp.regions)):   # lowest index wins
            base, size = regs.rw(f"region{r}_base"), regs.rw(f"region{r}_size")
            hit = (size != 0) & (req.addr >= base) & (req.addr < base + size)
            m.d.comb += in_region[r].eq(hit)
            with m.If(hit):
                m.d.comb += [
                    region.eq(r),
                    threshold.eq(regs.rw(f"region{r}_tile_elems") *
                                 regs.rw(f"region{r}_updates")),
                ]

        mask = req.mask
        byte_count = Signal(inc_bits)
        m.d.comb += byte_count.eq(sum(mask[k] for k in range(p.beat_bytes)))
        wide = (req.etype == ElemType.FP32) | (req.etype == ElemType.INT32)
        increment = Mux(wide, byte_count >> 2, byte_count >> 1)
        whole = mask_is_whole(mask, req.etype)
        aligned = req.addr[:p.beat_offset_bits] == 0
        is_write = (req.op == Op.STORE) | (req.op == Op.UPDATE)
        eligible = enable & req.tracked & is_write & in_region.any()
        good = whole & aligned & (byte_count != 0)

        # --- Stage 1 registers ----------------------------------------------------------
        s1_valid = Signal()
        s1_count = Signal()      # counted access (eligible and well formed)
        s1_bad = Signal()        # eligible but malformed: bad_access
        s1_set = Signal(range(tp.sets))
        s1_tag = Signal(entry["tag"].shape)
        s1_addr = Signal(beat_addr_bits)
        s1_inc = Signal(inc_bits)
        s1_thr = Signal(thr_bits)
        s1_region = Signal(tp.region_bits)
        s1_wg_id = Signal(p.wg_id_bits)
        s1_wf_id = Signal(p.wf_id_bits)

        # --- Stage 1: look up the row, count, decide --------------------------------------
        row = rd.data
        hit_way = Signal(range(ways))
        hit = Signal()
        free_way = Signal(range(ways))
        any_free = Signal()
        for w in reversed(range(ways)):
            with m.If(row[w].valid & (row[w].tag == s1_tag)):
                m.d.comb += [hit.eq(1), hit_way.eq(w)]
            with m.If(~row[w].valid):
                m.d.comb += [any_free.eq(1), free_way.eq(w)]

        cur = row[hit_way]
        cur_count = Mux(hit, cur.count, 0)
        start = Mux(hit & (cur.start < s1_addr), cur.start, s1_addr)
        new_count = Signal(sum_bits)
        m.d.comb += new_count.eq(cur_count + s1_inc)
        mismatch = s1_count & hit & (cur.region != s1_region)
        over = s1_count & ~mismatch & (new_count > s1_thr)
        overflow = s1_count & ~mismatch & ~over & (new_count > tp.max_count)
        error = mismatch | over | overflow
        fire = s1_count & ~error & (new_count == s1_thr)
        alloc = s1_count & ~error & ~fire & ~hit
        set_full = s1_valid & alloc & ~any_free
        out_busy = s1_valid & fire & self.o.valid & ~self.o.ready
        s1_go = s1_valid & ~set_full & ~out_busy
        advance = ~s1_valid | s1_go
        take = self.i.valid & self.i.ready

        m.d.comb += [
            self.i.ready.eq(advance & ~flushing),
            rd.addr.eq(req.wg_id[:tp.set_bits]),
            rd.en.eq(advance),
        ]
        with m.If(advance):
            m.d.sync += [
                s1_valid.eq(take),
                s1_count.eq(take & eligible & good),
                s1_bad.eq(take & eligible & ~good),
                s1_set.eq(req.wg_id[:tp.set_bits]),
                s1_tag.eq(Cat(req.wf_id, req.wg_id[tp.set_bits:])),
                s1_addr.eq(req.addr[p.beat_offset_bits:]),
                s1_inc.eq(increment),
                s1_thr.eq(threshold),
                s1_region.eq(region),
                s1_wg_id.eq(req.wg_id),
                s1_wf_id.eq(req.wf_id),
            ]

        # Write-back: the row with the hit way updated (or freed), or a free way filled.
        new_row = Signal(row_layout)
        m.d.comb += new_row.eq(row)
        updated = Signal(entry)
        m.d.comb += [
            updated.valid.eq(~fire),
            updated.tag.eq(s1_tag),
            updated.start.eq(start),
            updated.count.eq(new_count),
            updated.region.eq(s1_region),
        ]
        m.d.comb += new_row[Mux(hit, hit_way, free_way)].eq(updated)
        m.d.comb += [
            wr.addr.eq(s1_set),
            wr.data.eq(new_row),
            wr.en.eq(s1_go & s1_count & ~error & (hit | ~fire)),
        ]

        # --- Trigger output register -----------------------------------------------------
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(s1_go & fire):
            m.d.sync += [
                self.o.valid.eq(1),
                self.o.payload.wg_id.eq(s1_wg_id),
                self.o.payload.wf_id.eq(s1_wf_id),
                self.o.payload.addr.eq(Cat(C(0, p.beat_offset_bits), start)),
                self.o.payload.region.eq(s1_region),
            ]

        # --- Flush: clear one set per cycle ----------------------------------------------
        with m.If(start_flush):
            m.d.sync += [flushing.eq(1), flush_set.eq(0)]
        with m.Elif(flushing & s1_valid & set_full):
            m.d.sync += s1_valid.eq(0)          # the flush discards a held access too
        with m.Elif(flushing & ~s1_valid):
            m.d.comb += [wr.addr.eq(flush_set), wr.data.eq(0), wr.en.eq(1)]
            m.d.sync += flush_set.eq(flush_set + 1)
            with m.If(flush_set == tp.sets - 1):
                m.d.sync += flushing.eq(0)

        # --- Occupancy, status, counters -------------------------------------------------
        allocated = s1_go & alloc
        freed = s1_go & fire & hit
        next_occ = Signal.like(occupancy)
        m.d.comb += next_occ.eq(occupancy + allocated - freed)
        m.d.sync += occupancy.eq(next_occ)
        with m.If(flushing):
            m.d.sync += occupancy.eq(0)

        # --- Region registers are locked while the region has open tiles ----------------
        refused = []
        for r in range(tp.regions):
            opened = Signal(range(tp.sets * ways + 1), name=f"open{r}")
            here = s1_region == r
            with m.If(flushing | start_flush):
                m.d.sync += opened.eq(0)
            with m.Else():
                m.d.sync += opened.eq(opened + (allocated & here) - (freed & here))
            busy = (opened != 0) | (s1_valid & s1_count & here) | \
                (take & eligible & (region == r))
            refused.append(regs.lock(m, [f"region{r}_{f}" for f in
                                         ("base", "size", "tile_elems", "updates")], busy))
        region_busy = Signal()
        m.d.comb += region_busy.eq(Cat(*refused).any())

        regs.status(m, "status", set_full=set_full, over_threshold=s1_go & over,
                    count_overflow=s1_go & overflow, region_mismatch=s1_go & mismatch,
                    bad_access=s1_go & s1_bad, region_busy=region_busy, flushing=flushing)

        errors = Signal(range(3))
        m.d.comb += errors.eq((s1_go & (error | s1_bad)) + region_busy)
        accumulate(m, counters["errors"], errors, clear_counters)
        for name, event in (("accesses", take),
                            ("tracked", s1_go & s1_count & ~error), ("triggers", s1_go & fire),
                            ("stall_full", set_full), ("stall_out", out_busy)):
            count(m, counters[name], event, clear_counters)
        with m.If(clear_counters):
            m.d.sync += peak.eq(next_occ)
        with m.Elif(next_occ > peak):
            m.d.sync += peak.eq(next_occ)

        return m
