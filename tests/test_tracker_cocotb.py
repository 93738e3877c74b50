"""The Tracker's exported Verilog under cocotb (Verilator or Icarus), against the golden model.

One elaboration per geometry; each runs every cocotb test below in one simulation:

- ``random_traffic``: seeded random tile traffic with random input gaps and trigger
  backpressure in runs long enough to fill the trigger queue; the triggers (in order),
  counters, status and peak occupancy equal the model's, and every trigger arrives at least
  ``TRIGGER_LATENCY`` cycles after its completing access;
- ``exact_latency``: with no backpressure every trigger arrives exactly ``TRIGGER_LATENCY``
  cycles after, and back-to-back traffic is taken at one access per cycle;
- ``error_paths``: over-threshold, region mismatch, bad accesses and counter overflow, each
  refused and counted, with no trigger from the erroneous accesses;
- ``set_full``: a set with more open tiles than ways holds the access, latches ``set_full``,
  drops nothing, and a flush recovers.
"""

import random

import cocotb
import pytest

from hw.interfaces import ElemType
from hw.params import T3Params
from sim.harness.runner import run_cocotb, tb_config
from sim.blocks.tracker.cocotb_tests import TrackerTB, run_and_check
from sim.blocks.tracker.traffic import error_traffic, random_regions, request, tile_traffic
from tracker.config import CMD, Region, Status, TrackerParams
from tracker.model import TRIGGER_LATENCY
from tracker.rtl import Tracker


@cocotb.test()
async def random_traffic(dut):
    cfg = tb_config()
    params, tparams = T3Params(**cfg["params"]), TrackerParams(**cfg["tparams"])
    rng = random.Random(cfg["seed"])
    regions = random_regions(params, tparams, rng)
    requests = tile_traffic(params, tparams, regions, cfg["n"], rng)
    tb, fires, regs = await run_and_check(dut, requests, regions, cfg["in_gap"],
                                          cfg["out_stall"], cfg["seed"], cfg["out_burst"])
    assert len(fires) > cfg["n"] // 200, "traffic completed too few tiles to mean anything"
    # the pauses come in runs long enough to fill the trigger queue, and then the input waits
    assert regs["stall_out"] > 0, "backpressure never reached the Tracker's input"
    assert regs["stall_full"] == 0
    dut._log.info("%d accesses, %d triggers, %d cycles, peak occupancy %d",
                  len(requests), len(fires), tb.bench.cycle, regs["peak_occupancy"])


@cocotb.test()
async def exact_latency(dut):
    cfg = tb_config()
    params, tparams = T3Params(**cfg["params"]), TrackerParams(**cfg["tparams"])
    rng = random.Random(cfg["seed"] + 7)
    regions = random_regions(params, tparams, rng)
    requests = tile_traffic(params, tparams, regions, 2000, rng, burst_same=0.6)
    tb, fires, _ = await run_and_check(dut, requests, regions, 0.0, 0.0, cfg["seed"])
    taken = [cycle for cycle, _ in tb.source.sent]
    for (cycle, _), index in zip(tb.sink.received, fires):
        assert cycle - taken[index] == TRIGGER_LATENCY
    # no gaps offered, no backpressure, no full set: one access per cycle
    assert taken[-1] - taken[0] == len(taken) - 1


@cocotb.test()
async def error_paths(dut):
    cfg = tb_config()
    params, tparams = T3Params(**cfg["params"]), TrackerParams(**cfg["tparams"])
    rng = random.Random(cfg["seed"] + 11)
    regions = random_regions(params, tparams, rng, count=2, max_tile_elems=12)
    # region 2 is deliberately mis-programmed: threshold 2 * max_count cannot be counted
    big = Region(regions[1].base + regions[1].size, regions[1].size, tparams.max_count, 2)
    regions = regions + [big]
    # good traffic keeps off the sets of the error tiles (wg_id 1) and the overflow tile (3)
    quiet_sets = {1 % tparams.sets, 3 % tparams.sets}
    wg_ids = [w for w in range(min(1 << params.wg_id_bits, 4 * tparams.sets))
              if w % tparams.sets not in quiet_sets]
    good = tile_traffic(params, tparams, regions[:2], 300, rng, noise=0.0, wg_ids=wg_ids)
    bad = error_traffic(params, tparams, regions, rng, wg_id=1)
    lanes = params.beat_bytes // 2
    overflow = [request(params, big.base, (1 << params.beat_bytes) - 1, ElemType.FP16, 3, 3)
                for _ in range(-(-(tparams.max_count + 1) // lanes))]
    requests = good[:150] + [r for r, _ in bad] + good[150:] + overflow
    tb, fires, regs = await run_and_check(dut, requests, regions, 0.25, 0.25, cfg["seed"])
    assert regs["status"] & Status.ERRORS == Status.ERRORS, f"status 0x{regs['status']:x}"
    # each bad access is one error, and so is each access through the region whose threshold
    # (2 x max_count) passes the counter: it counts nothing -- check_run has already matched
    # every count with the model
    assert regs["errors"] == len([e for _, e in bad if e]) + len(overflow)


@cocotb.test()
async def set_full(dut):
    cfg = tb_config()
    params, tparams = T3Params(**cfg["params"]), TrackerParams(**cfg["tparams"])
    tb = TrackerTB(dut, cfg)
    region = Region(0x1000, 0x10000, 64, 2)
    await tb.start([region])
    # ways + 1 tiles of set 0 (wg_id multiples of `sets`), one element each: the last one
    # needs a way that does not exist.
    tiles = [(wg, wf) for wg in range(0, 1 << params.wg_id_bits, tparams.sets)
             for wf in range(1 << params.wf_id_bits)][:tparams.ways + 1]
    assert len(tiles) == tparams.ways + 1, "geometry cannot overfill a set"
    reqs = [request(params, region.base, 0b11, ElemType.FP16, wg, wf) for wg, wf in tiles]
    for r in reqs:
        tb.source.send_nowait(r)
    await tb.bench.until(lambda: len(tb.source.sent) == len(reqs), tparams.sets + 100)
    await tb.bench.cycles(20)
    regs = await tb.read_stats()
    assert regs["status"] & Status.SET_FULL
    assert regs["accesses"] == len(reqs) and regs["tracked"] == tparams.ways
    assert regs["occupancy"] == tparams.ways
    # held from the cycle after its handshake through the 20 idle cycles and the reads
    assert regs["stall_full"] >= 20
    assert int(dut.i__ready.value) == 0
    # nothing is taken while the access is held (the pipeline moves in lockstep)
    tb.source.send_nowait(reqs[0])
    await tb.bench.cycles(10)
    assert len(tb.source.sent) == len(reqs)
    # a flush discards the table and the held access; the Tracker then works again
    await tb.csr.write_reg("cmd", CMD.encode(flush=1))
    await tb.csr.write_reg("status", Status.STICKY)
    await tb.bench.until(tb.source.idle, tparams.sets + 100)
    regs = await tb.read_stats()
    assert regs["status"] == 0 and regs["occupancy"] == 1


@pytest.mark.cocotb
@pytest.mark.parametrize("geometry", [
    pytest.param(dict(sets=256, ways=8), id="paper-256x8"),
    pytest.param(dict(sets=4, ways=2, count_bits=12, regions=3), id="small-4x2"),
])
def test_tracker_cocotb(geometry, sim, tmp_path, t3_options, request):
    params = T3Params(wg_id_bits=10)
    tparams = TrackerParams(**geometry)
    config = {
        "params": params.to_dict(),
        "tparams": tparams.to_dict(),
        "n": t3_options.tracker_accesses,
        "seed": t3_options.seed,
        "in_gap": 0.2, "out_stall": 0.3, "out_burst": 100,
    }
    run_cocotb(Tracker(params, tparams), "t3_tracker", request.module, tmp_path,
               config=config, sim=sim, waves=t3_options.waves)
