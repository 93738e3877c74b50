"""The Tracker RTL under Amaranth's simulator, against the golden model, at edge geometries."""

import random
from collections import Counter

import pytest

from hw.interfaces import ElemType, mem_request_layout, pack
from hw.params import T3Params
from hw.testing import csr_write, reg_read, reg_write, run_testbench, stream_put
from sim.blocks.tracker.amaranth_sim import simulate_tracker
from sim.blocks.tracker.traffic import random_regions, request, ring_step_traffic, tile_traffic
from tracker.config import CMD, CTRL, STAT_REGISTERS, Region, Status, TrackerParams
from tracker.model import TRIGGER_LATENCY, TrackerModel, check_run
from tracker.rtl import TRIGGER_QUEUE, Tracker


PARAMS = T3Params(wg_id_bits=8)
FULL = (1 << PARAMS.beat_bytes) - 1


def check_tracker(tparams, requests, regions, *, seed=0, in_gap=0.25, out_stall=0.3,
                  params=PARAMS, max_cycles=None):
    """Run ``requests`` through the RTL and the model; compare everything observable."""
    model = TrackerModel(params, tparams, regions)
    outcomes = [model.access(r) for r in requests]
    run = simulate_tracker(params, tparams, regions, requests, seed=seed, in_gap=in_gap,
                           out_stall=out_stall, max_cycles=max_cycles)
    fires = check_run(model, outcomes, run.triggers, run.taken, run.regs)
    return run, model, fires


@pytest.mark.parametrize("sets,ways", [(1, 1), (1, 2), (1, 4), (4, 1), (4, 2), (4, 4),
                                       (256, 1), (256, 4)])
def test_random_traffic_edge_geometries(sets, ways):
    tparams = TrackerParams(sets=sets, ways=ways, regions=2)
    rng = random.Random(sets * 100 + ways)
    regions = random_regions(PARAMS, tparams, rng, max_tile_elems=24)
    requests = tile_traffic(PARAMS, tparams, regions, 500, rng)
    run, model, fires = check_tracker(tparams, requests, regions, seed=sets + ways)
    assert len(fires) >= 10
    assert run.regs["stall_full"] == 0
    assert model.peak_occupancy <= sets * ways


def test_threshold_one_fires_on_every_access_without_a_way():
    # sets 1, ways 1, and one tile already open: threshold-1 tiles still go through, because
    # a tile that completes on its first access never needs a way.
    tparams = TrackerParams(sets=1, ways=1, regions=2)
    one = Region(0x1000, 0x1000, 1, 1)
    other = Region(0x4000, 0x1000, 4, 1)
    requests = [request(PARAMS, other.base, 0b11, ElemType.FP16, 9, 1)]
    requests += [request(PARAMS, one.base + 32 * k, 0b11 << (2 * k), ElemType.FP16, 16 + k, k % 8)
                 for k in range(12)]
    run, model, fires = check_tracker(tparams, requests, [one, other])
    assert fires == list(range(1, 13))
    assert run.regs["occupancy"] == 1 and run.regs["stall_full"] == 0


def test_back_to_back_same_entry_one_per_cycle_and_latency():
    # One tile of 128 fp16 elements x 2 updates = 16 full beats, all to the same entry,
    # offered every cycle: taken every cycle, trigger exactly TRIGGER_LATENCY after the last.
    tparams = TrackerParams(sets=4, ways=2, regions=1)
    region = Region(0x2000, 0x2000, 128, 2)
    requests = [request(PARAMS, region.base + 32 * (k % 8), FULL, ElemType.FP16, 5, 3)
                for k in range(16)]
    run, _, fires = check_tracker(tparams, requests, [region], in_gap=0, out_stall=0)
    assert run.taken == list(range(run.taken[0], run.taken[0] + 16))
    assert fires == [15]
    assert run.triggers[0][0] - run.taken[15] == TRIGGER_LATENCY
    assert run.triggers[0][1]["addr"] == region.base


def test_ring_step_two_updates_per_element():
    tparams = TrackerParams(sets=4, ways=8, regions=1)
    region = Region(0x10000, 0x10000, 64, 2)
    rng = random.Random(3)
    requests = ring_step_traffic(PARAMS, n_wg=4, wfs_per_wg=8, region=region, rng=rng)
    run, model, fires = check_tracker(tparams, requests, [region])
    assert len(fires) == 32
    assert run.regs["occupancy"] == 0
    # each tile's trigger carries its first beat's address
    tile_bytes = 64 * 2
    starts = sorted(t["addr"] for _, t in run.triggers)
    assert starts == [region.base + k * tile_bytes for k in range(32)]


def test_set_full_holds_the_access_and_counts_stalls():
    tparams = TrackerParams(sets=1, ways=2, regions=1)
    region = Region(0x1000, 0x1000, 8, 2)
    requests = [request(PARAMS, region.base, 0b11, ElemType.FP16, wg, 0) for wg in range(3)]
    requests += [request(PARAMS, region.base, 0b11, ElemType.FP16, 0, 0)] * 3
    run = simulate_tracker(PARAMS, tparams, [region], requests, max_cycles=60)
    # the third tile is held in the last stage (3 cycles after its handshake); the two accesses
    # offered right behind it were taken meanwhile and wait in stages 1 and 2, not counted
    # (they would have raised `tracked`); nothing after them is taken
    assert len(run.taken) == 5 and run.taken[2:] == [run.taken[2] + k for k in range(3)]
    assert run.regs["status"] & Status.SET_FULL
    assert run.regs["tracked"] == 2 and run.regs["accesses"] == 5
    # held from its third cycle after the handshake to the end of the run, and on while the
    # registers are read (one cycle each, stall_full among them)
    held = run.cycles - run.taken[2] - 3
    reads = len(STAT_REGISTERS)
    assert held <= run.regs["stall_full"] <= held + 2 * reads, run.regs["stall_full"]
    assert run.triggers == []


def test_enable_off_passes_everything_untouched():
    tparams = TrackerParams(sets=4, ways=2, regions=2)
    rng = random.Random(5)
    regions = random_regions(PARAMS, tparams, rng)
    requests = tile_traffic(PARAMS, tparams, regions, 200, rng)
    run = simulate_tracker(PARAMS, tparams, regions, requests, enable=False)
    assert run.triggers == [] and run.regs["tracked"] == 0
    assert run.regs["accesses"] == 200 and run.regs["peak_occupancy"] == 0


@pytest.mark.parametrize("count_bits", [4, 5, 6, 7])
def test_narrow_counters_fire_and_refuse_as_the_model(count_bits):
    # an entry holds the updates still to come, compared with the increment on its low
    # log2(beat_bytes) + 1 bits and a zero test of the rest: counters narrower than, as wide
    # as and wider than the increment (up to 16 here), thresholds at the counter's maximum,
    # a region's threshold past it, and accesses that pass their tile's threshold
    tparams = TrackerParams(sets=64, ways=8, regions=3, count_bits=count_bits)
    rng = random.Random(count_bits)
    regions = random_regions(PARAMS, tparams, rng, count=2)
    top = tparams.max_count
    regions[0] = Region(regions[0].base, regions[0].size, top, 1)        # the maximum
    # a region whose threshold passes the counter: each access to it is refused
    base = regions[1].base + 4 * regions[1].size
    regions.append(Region(base, regions[1].size, top, 2))
    requests = tile_traffic(PARAMS, tparams, regions[:2], 400, rng)
    for k in range(len(requests) - 1, 0, -9):  # an access twice: over its threshold, or early
        requests.insert(k, dict(requests[k]))
    for _ in range(12):
        requests.insert(rng.randrange(len(requests)), request(
            PARAMS, base, (1 << 2 * rng.randint(1, 16)) - 1, ElemType.FP16, rng.randrange(8)))
    run, model, fires = check_tracker(tparams, requests, regions, seed=count_bits)
    status = run.regs["status"]
    assert fires and status & Status.COUNT_OVERFLOW and status & Status.OVER_THRESHOLD
    assert run.regs["stall_full"] == 0          # a full set would end the comparison early


@pytest.mark.parametrize("first,then", [(2, 1), (1, 2)])
def test_an_access_right_after_a_threshold_write_sees_the_new_threshold(first, then):
    # updates_per_element rewritten between a threshold past the counter (31 x 2 with 5-bit
    # counters) and one that fits (31 x 1), the access offered from the write's cycle on: it
    # is taken at the first cycle the input is ready, and classified by the new threshold
    # (counted, or refused as count_overflow), as the model says
    tparams = TrackerParams(sets=4, ways=2, regions=1, count_bits=5)
    region = Region(0x1000, 0x1000, 31, first)
    access = request(PARAMS, region.base, FULL, ElemType.FP16, 1, 0)      # 16 elements
    model = TrackerModel(PARAMS, tparams, [region])
    model.set_region(0, Region(region.base, region.size, 31, then), writes=1)
    expected = model.access(access)
    dut = Tracker(PARAMS, tparams)
    seen = {}

    async def bench(ctx):
        regs = dut.regs
        for name, value in (("region0_base", region.base), ("region0_size", region.size),
                            ("region0_tile_elems", 31), ("region0_updates", first),
                            ("ctrl", CTRL.encode(enable=1))):
            await reg_write(ctx, dut.csr, regs, name, value)
        while not ctx.get(dut.i.ready):
            await ctx.tick()
        await reg_write(ctx, dut.csr, regs, "region0_updates", then)
        await stream_put(ctx, dut.i, pack(mem_request_layout(PARAMS), access))
        await ctx.tick().repeat(4)
        for name in ("status", "errors", "tracked", "occupancy"):
            seen[name] = await reg_read(ctx, dut.csr, regs, name)

    run_testbench(dut, bench)
    assert expected.kind == ("count" if then == 1 else "error")
    assert seen == {"status": model.status, "errors": model.counters["errors"],
                    "tracked": model.counters["tracked"], "occupancy": model.occupancy}


def test_count_overflow_and_over_threshold():
    tparams = TrackerParams(sets=4, ways=2, regions=2, count_bits=5)      # max count 31
    big = Region(0x1000, 0x1000, 31, 2)        # threshold 62 cannot be counted
    small = Region(0x4000, 0x1000, 4, 1)
    # a region whose threshold passes the counter counts none of its accesses (each one
    # count_overflow), the first as the second, though the first's 16 would fit
    requests = [request(PARAMS, big.base, FULL, ElemType.FP16, 1, 1)] * 2
    requests += [request(PARAMS, small.base, 0xFF, ElemType.FP32, 2, 0)]    # 2 of 4
    requests += [request(PARAMS, small.base, 0xFFF, ElemType.FP32, 2, 0)]   # 2+3 > 4
    requests += [request(PARAMS, small.base, 0xFF, ElemType.FP32, 2, 0)]    # 4: fires
    run, model, fires = check_tracker(tparams, requests, [big, small])
    assert run.regs["status"] == Status.COUNT_OVERFLOW | Status.OVER_THRESHOLD
    assert run.regs["errors"] == 3 and run.regs["tracked"] == 2 and fires == [4]


def test_registers_read_back_and_clear():
    tparams = TrackerParams(sets=4, ways=2, regions=2, count_bits=10)
    params = T3Params(addr_bits=40, wg_id_bits=8)
    dut = Tracker(params, tparams)
    region_req = request(params, 0x12_3456_7800, 0b11, ElemType.BF16, 1, 0)
    region_req["mask"] = 0b1111           # 2 elements of 8 expected: counted, no trigger
    seen = {}

    async def bench(ctx):
        regs = dut.regs
        await reg_write(ctx, dut.csr, regs, "region1_base", 0x12_3456_7800)
        await reg_write(ctx, dut.csr, regs, "region1_size", 0x100)
        await reg_write(ctx, dut.csr, regs, "region1_tile_elems", 4)
        await reg_write(ctx, dut.csr, regs, "region1_updates", 2)
        await reg_write(ctx, dut.csr, regs, "ctrl", CTRL.encode(enable=1))
        for name in ("info", "ctrl", "region1_base", "region1_size", "region1_tile_elems",
                     "region1_updates", "status"):
            seen[name] = await reg_read(ctx, dut.csr, regs, name)
        while not ctx.get(dut.i.ready):
            await ctx.tick()
        await stream_put(ctx, dut.i, pack(mem_request_layout(params), region_req))
        await ctx.tick().repeat(3)
        seen["occupancy"] = await reg_read(ctx, dut.csr, regs, "occupancy")
        seen["tracked"] = await reg_read(ctx, dut.csr, regs, "tracked")
        await reg_write(ctx, dut.csr, regs, "cmd", CMD.encode(clear=1))
        seen["tracked_cleared"] = await reg_read(ctx, dut.csr, regs, "tracked")
        seen["peak_cleared"] = await reg_read(ctx, dut.csr, regs, "peak_occupancy")
        await reg_write(ctx, dut.csr, regs, "cmd", CMD.encode(flush=1))
        seen["flushing"] = await reg_read(ctx, dut.csr, regs, "status")
        await ctx.tick().repeat(tparams.sets + 2)
        seen["occupancy_flushed"] = await reg_read(ctx, dut.csr, regs, "occupancy")
        seen["status_after"] = await reg_read(ctx, dut.csr, regs, "status")

    run_testbench(dut, bench)
    assert seen["info"] == 2 | 2 << 8 | 2 << 16 | 10 << 24
    assert seen["ctrl"] == 1
    assert seen["region1_base"] == 0x12_3456_7800 and seen["region1_size"] == 0x100
    assert seen["region1_tile_elems"] == 4 and seen["region1_updates"] == 2
    assert seen["status"] == 0
    assert seen["occupancy"] == 1 and seen["tracked"] == 1
    assert seen["tracked_cleared"] == 0 and seen["peak_cleared"] == 1
    assert seen["flushing"] & Status.FLUSHING
    assert seen["occupancy_flushed"] == 0 and seen["status_after"] == 0


def test_status_is_sticky_until_written_one():
    tparams = TrackerParams(sets=1, ways=1, regions=1)
    region = Region(0x1000, 0x1000, 8, 1)
    bad = request(PARAMS, region.base, 0, ElemType.FP16, 0, 0)
    dut = Tracker(PARAMS, tparams)
    seen = []

    async def bench(ctx):
        regs = dut.regs
        await reg_write(ctx, dut.csr, regs, "region0_base", region.base)
        await reg_write(ctx, dut.csr, regs, "region0_size", region.size)
        await reg_write(ctx, dut.csr, regs, "region0_tile_elems", 8)
        await reg_write(ctx, dut.csr, regs, "region0_updates", 1)
        await reg_write(ctx, dut.csr, regs, "ctrl", CTRL.encode(enable=1))
        await stream_put(ctx, dut.i, pack(mem_request_layout(PARAMS), bad))
        await ctx.tick().repeat(3)
        seen.append(await reg_read(ctx, dut.csr, regs, "status"))
        await reg_write(ctx, dut.csr, regs, "status", Status.SET_FULL)    # other bit: kept
        seen.append(await reg_read(ctx, dut.csr, regs, "status"))
        await reg_write(ctx, dut.csr, regs, "status", Status.BAD_ACCESS)
        seen.append(await reg_read(ctx, dut.csr, regs, "status"))

    run_testbench(dut, bench)
    assert seen == [Status.BAD_ACCESS, Status.BAD_ACCESS, 0]


async def put_and_watch(ctx, dut, req, fired):
    """Put one access and watch the trigger output until it could have fired, appending each
    trigger's address to ``fired``."""
    await stream_put(ctx, dut.i, pack(mem_request_layout(PARAMS), req))
    for _ in range(TRIGGER_LATENCY + 1):
        if ctx.get(dut.o.valid):
            fired.append(ctx.get(dut.o.payload.addr))
        await ctx.tick()


async def program_region0(ctx, dut, region):
    for name, value in (("base", region.base), ("size", region.size),
                        ("tile_elems", region.tile_elems),
                        ("updates", region.updates_per_element)):
        await reg_write(ctx, dut.csr, dut.regs, f"region0_{name}", value)


async def wait_ready(ctx, dut):
    while not ctx.get(dut.i.ready):
        await ctx.tick()


async def start_on(ctx, dut, region):
    """Take every trigger, program region 0, enable the Tracker and wait until it takes
    accesses."""
    ctx.set(dut.o.ready, 1)
    await program_region0(ctx, dut, region)
    await reg_write(ctx, dut.csr, dut.regs, "ctrl", CTRL.encode(enable=1))
    await wait_ready(ctx, dut)


#: the region-reprogramming tests: one set of two ways, region 0 moved from OLD to NEW between
#: kernels; kernel 2 is NEW's first tile in two halves
REPROG_TPARAMS = TrackerParams(sets=1, ways=2, regions=1)
OLD_REGION, NEW_REGION = Region(0x1000, 0x1000, 32, 1), Region(0x4000, 0x1000, 32, 1)
KERNEL2 = [request(PARAMS, NEW_REGION.base + 0x20 * k, FULL, ElemType.FP16, 1, 0)
           for k in (0, 1)]


def test_a_region_with_open_tiles_refuses_reprogramming():
    """Kernel 1 leaves a tile half updated; kernel 2 reprograms the region: the writes are
    refused (``region_busy``, an error each), so the stale tile cannot complete early under the
    new settings.  After a flush the writes are taken and kernel 2's tile with the same ids
    fires once, with all its updates, at its own address.  Before, it fired at half its updates
    carrying the old address, status 0.  The model agrees at every step."""
    old, new, kernel2 = OLD_REGION, NEW_REGION, KERNEL2
    kernel1 = [request(PARAMS, old.base + 0x40, FULL, ElemType.FP16, 1, 0)]
    model = TrackerModel(PARAMS, REPROG_TPARAMS, [old])
    dut = Tracker(PARAMS, REPROG_TPARAMS)
    seen, fired = {}, []

    async def bench(ctx):
        await start_on(ctx, dut, old)
        await put_and_watch(ctx, dut, kernel1[0], fired)
        await program_region0(ctx, dut, new)
        for name in ("status", "errors", "region0_base", "occupancy"):
            seen[name] = await reg_read(ctx, dut.csr, dut.regs, name)
        await reg_write(ctx, dut.csr, dut.regs, "cmd", CMD.encode(flush=1))
        await program_region0(ctx, dut, new)
        seen["base_after_flush"] = await reg_read(ctx, dut.csr, dut.regs, "region0_base")
        await wait_ready(ctx, dut)
        for req in kernel2:
            await put_and_watch(ctx, dut, req, fired)
        seen["triggers"] = await reg_read(ctx, dut.csr, dut.regs, "triggers")

    run_testbench(dut, bench)
    assert model.access(kernel1[0]).kind == "count"
    assert not model.set_region(0, new)
    assert seen["status"] == Status.REGION_BUSY == model.status
    assert seen["errors"] == 4 == model.counters["errors"]
    assert seen["region0_base"] == old.base and seen["occupancy"] == 1 == model.occupancy
    model.flush()
    assert model.set_region(0, new) and seen["base_after_flush"] == new.base
    outcomes = [model.access(r) for r in kernel2]
    assert [o.kind for o in outcomes] == ["count", "fire"]
    assert fired == [outcomes[1].trigger["addr"]] == [new.base] and seen["triggers"] == 1


def test_a_region_whose_tiles_all_fired_takes_reprogramming():
    """The region lock opens again as the region's last open tile fires, without a flush: the
    open-tile count of the region goes down with each trigger as it went up with each new tile.
    Kernel 1 completes its one tile; kernel 2's writes are taken (status 0, no error) and its
    tile fires at its own address.  The model agrees at every step."""
    old, new, kernel2 = OLD_REGION, NEW_REGION, KERNEL2
    kernel1 = [request(PARAMS, old.base + 0x40 + 0x20 * k, FULL, ElemType.FP16, 1, 0)
               for k in (0, 1)]
    model = TrackerModel(PARAMS, REPROG_TPARAMS, [old])
    dut = Tracker(PARAMS, REPROG_TPARAMS)
    seen, fired = {}, []

    async def bench(ctx):
        await start_on(ctx, dut, old)
        for req in kernel1:
            await put_and_watch(ctx, dut, req, fired)
        await program_region0(ctx, dut, new)
        for name in ("status", "errors", "region0_base", "occupancy"):
            seen[name] = await reg_read(ctx, dut.csr, dut.regs, name)
        await wait_ready(ctx, dut)
        for req in kernel2:
            await put_and_watch(ctx, dut, req, fired)
        seen["triggers"] = await reg_read(ctx, dut.csr, dut.regs, "triggers")

    run_testbench(dut, bench)
    first = [model.access(r) for r in kernel1]
    assert [o.kind for o in first] == ["count", "fire"]
    assert model.set_region(0, new)
    assert seen["status"] == 0 == model.status
    assert seen["errors"] == 0 == model.counters["errors"]
    assert seen["region0_base"] == new.base and seen["occupancy"] == 0 == model.occupancy
    second = [model.access(r) for r in kernel2]
    assert [o.kind for o in second] == ["count", "fire"]
    assert fired == [first[1].trigger["addr"], second[1].trigger["addr"]] == \
        [old.base + 0x40, new.base]
    assert seen["triggers"] == 2


def test_an_access_taken_with_a_region_write_locks_the_region():
    """An access to region 0 and a write of region 0's base offered in the same cycle: the
    Tracker takes the access in that cycle, classified by the registers as they were, and
    refuses the write (``region_busy``, one error), as the model does with the access first:
    the tile it opened stays under the old base.  A Tracker that paused its input for the write
    would take the access after it, under the new base; one whose lock did not look at the
    input would take both, and the open tile would complete under settings it was not opened
    with."""
    old, new = OLD_REGION, NEW_REGION
    access = request(PARAMS, old.base + 0x40, FULL, ElemType.FP16, 1, 0)
    model = TrackerModel(PARAMS, REPROG_TPARAMS, [old])
    dut = Tracker(PARAMS, REPROG_TPARAMS)
    seen = {}

    async def bench(ctx):
        await start_on(ctx, dut, old)
        (addr, word), = dut.regs.word_writes("region0_base", new.base)
        ctx.set(dut.i.payload.as_value(), pack(mem_request_layout(PARAMS), access))
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.csr.addr, addr)
        ctx.set(dut.csr.w_data, word)
        ctx.set(dut.csr.w_stb, 1)
        seen["taken_with_the_write"] = ctx.get(dut.i.ready)
        await ctx.tick()
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.csr.w_stb, 0)
        for _ in range(TRIGGER_LATENCY + 1):
            await ctx.tick()
        for name in ("status", "errors", "region0_base", "occupancy", "tracked"):
            seen[name] = await reg_read(ctx, dut.csr, dut.regs, name)

    run_testbench(dut, bench)
    assert model.access(access).kind == "count"
    assert not model.set_region(0, new, writes=1)
    assert seen["taken_with_the_write"] == 1
    assert seen["region0_base"] == old.base
    assert seen["status"] == Status.REGION_BUSY == model.status
    assert seen["errors"] == 1 == model.counters["errors"]
    assert seen["occupancy"] == 1 == model.occupancy and seen["tracked"] == 1


@pytest.mark.parametrize("after", [1, 2, 3, 4, 5])
def test_a_region_write_while_its_access_is_in_the_pipeline_is_refused(after):
    """A threshold-1 access (it fires and opens no tile) is in stages 1-3 for the three cycles
    after its handshake: a write of its region's base ``after`` cycles after the handshake is
    refused while it is there and in the cycle after (the lock's term for the stages is a
    register of the last cycle's: ``region_busy``, one error), and taken from then on."""
    tparams = TrackerParams(sets=1, ways=1, regions=1)
    region = Region(0x1000, 0x1000, 1, 1)
    access = request(PARAMS, region.base, 0b11, ElemType.FP16, 1, 0)
    dut = Tracker(PARAMS, tparams)
    seen = {}

    async def bench(ctx):
        await start_on(ctx, dut, region)
        await stream_put(ctx, dut.i, pack(mem_request_layout(PARAMS), access))
        for _ in range(after - 1):
            await ctx.tick()
        (addr, word), = dut.regs.word_writes("region0_base", 0x4000)
        await csr_write(ctx, dut.csr, addr, word)
        for _ in range(TRIGGER_LATENCY + 2):
            await ctx.tick()
        for name in ("status", "errors", "region0_base", "triggers"):
            seen[name] = await reg_read(ctx, dut.csr, dut.regs, name)

    run_testbench(dut, bench)
    refused = after <= 4
    assert seen["triggers"] == 1
    assert seen["region0_base"] == (region.base if refused else 0x4000)
    assert (seen["status"], seen["errors"]) == ((Status.REGION_BUSY, 1) if refused else (0, 0))


def test_trigger_backpressure_fills_the_queue_then_holds_the_input():
    """Threshold-1 tiles (every access fires) offered every cycle while ``o`` takes nothing:
    the Tracker takes exactly ``TRIGGER_QUEUE`` accesses, one a cycle, every one of whose
    triggers then waits in the queue, and holds the next at the input (each cycle counted in
    ``stall_out``); released, ``o`` gives the triggers one a cycle in order and the input moves
    on, nothing lost.  With ``o`` always ready, the same traffic is taken one access a cycle.
    A room check one entry short takes a ninth access while ``o`` holds (and overflows the
    queue)."""
    tparams = TrackerParams(sets=4, ways=1, regions=1)
    region = Region(0x1000, 0x1000, 1, 1)
    n = 3 * TRIGGER_QUEUE
    requests = [request(PARAMS, region.base + 32 * k, 0b11, ElemType.FP16, k, k % 8)
                for k in range(n)]
    model = TrackerModel(PARAMS, tparams, [region])
    outcomes = [model.access(r) for r in requests]
    dut = Tracker(PARAMS, tparams)
    words = [pack(mem_request_layout(PARAMS), r) for r in requests]
    taken, triggers, seen = [], [], {}
    hold = 40                   # cycles o is not ready, from the first offer

    async def bench(ctx):
        await start_on(ctx, dut, region)
        ctx.set(dut.o.ready, 0)
        index = cycle = 0
        while index < n or ctx.get(dut.o.valid) or cycle < hold + 8:
            ctx.set(dut.o.ready, cycle >= hold)
            if index < n:
                ctx.set(dut.i.payload.as_value(), words[index])
            ctx.set(dut.i.valid, index < n)
            _, _, i_ready, o_valid, o_ready, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload.addr)
            if index < n and i_ready:
                taken.append(cycle)
                index += 1
            if o_valid and o_ready:
                triggers.append((cycle, o_payload))
            cycle += 1
            if cycle == hold:
                seen["taken_in_hold"] = len(taken)
        ctx.set(dut.i.valid, 0)
        seen["stall_out"] = await reg_read(ctx, dut.csr, dut.regs, "stall_out")

    run_testbench(dut, bench)
    assert seen["taken_in_hold"] == TRIGGER_QUEUE
    assert taken[:TRIGGER_QUEUE] == list(range(TRIGGER_QUEUE))
    # offered in every cycle until the last is taken: every cycle not taking one refused it
    assert taken[TRIGGER_QUEUE] > hold and seen["stall_out"] == taken[-1] + 1 - n
    assert [addr for _, addr in triggers] == [o.trigger["addr"] for o in outcomes]
    out = [cycle for cycle, _ in triggers]
    assert out[:TRIGGER_QUEUE] == list(range(hold, hold + TRIGGER_QUEUE))
    # o always ready: one access a cycle
    run = simulate_tracker(PARAMS, tparams, [region], requests)
    assert run.taken == list(range(run.taken[0], run.taken[0] + n))
    assert [t["addr"] for _, t in run.triggers] == [o.trigger["addr"] for o in outcomes]


def test_model_fires_each_tile_exactly_once():
    # The model against the generator's own bookkeeping: every tile fires once it has been fed
    # exactly its threshold, carrying its smallest address; open entries hold what was fed.
    tparams = TrackerParams(sets=8, ways=3, regions=3)
    rng = random.Random(11)
    regions = random_regions(PARAMS, tparams, rng)
    requests = tile_traffic(PARAMS, tparams, regions, 5000, rng)
    model = TrackerModel(PARAMS, tparams, regions)
    fed = Counter()          # elements fed to the current tile of (wg_id, wf_id)
    lowest = {}
    fires = 0
    for r in requests:
        o = model.access(r)
        assert o.kind in ("pass", "count", "fire")
        if o.kind == "pass":
            continue
        key = (r["wg_id"], r["wf_id"])
        fed[key] += model.increment(r)
        lowest[key] = min(lowest.get(key, r["addr"]), r["addr"])
        if o.kind == "fire":
            fires += 1
            assert fed[key] == regions[o.trigger["region"]].threshold
            assert o.trigger["addr"] == lowest.pop(key)
            del fed[key]
    assert fires == model.counters["triggers"] > 100
    open_entries = 0
    for set_index, row in enumerate(model.sets):
        for entry in row:
            if entry is not None:
                open_entries += 1
                key = (entry.tag[0] << tparams.set_bits | set_index, entry.tag[1])
                assert entry.count == fed[key] > 0
    assert open_entries == model.occupancy == len(fed) > 0


def test_single_access_trigger_through_stream_helpers():
    # The Amaranth helpers end to end: a threshold-1 tile fires from one access.
    from hw.interfaces import unpack
    from hw.testing import stream_get
    from hw.interfaces import trigger_layout
    tparams = TrackerParams(sets=4, ways=1, regions=1)
    dut = Tracker(PARAMS, tparams)
    req = request(PARAMS, 0x1020, 0b1100, ElemType.BF16, 6, 5)
    got = []

    async def bench(ctx):
        regs = dut.regs
        for name, value in (("region0_base", 0x1000), ("region0_size", 0x100),
                            ("region0_tile_elems", 1), ("region0_updates", 1), ("ctrl", 1)):
            await reg_write(ctx, dut.csr, regs, name, value)
        await stream_put(ctx, dut.i, pack(mem_request_layout(PARAMS), req))
        got.append(unpack(trigger_layout(PARAMS, tparams.regions), await stream_get(ctx, dut.o)))

    run_testbench(dut, bench)
    assert got == [{"wg_id": 6, "wf_id": 5, "addr": 0x1020, "region": 0}]
