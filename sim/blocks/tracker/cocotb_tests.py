"""cocotb testbench of the Tracker's exported Verilog, and the cocotb test that the ``t3``
command runs (``demo_ring_step`` for ``t3 demo``, ``bench_saturate`` for ``t3 bench tracker``).

The test suite's cocotb tests (``tests/test_tracker_cocotb.py``) build on :class:`TrackerTB` and
:func:`run_and_check`.  Configuration comes from :func:`sim.harness.runner.tb_config`: ``params`` and
``tparams`` (dicts of :class:`hw.params.T3Params` and :class:`tracker.config.TrackerParams`),
plus what each test needs; results for the command line go to the JSON file ``cfg["out"]``.
"""

import json
import random
import time

import cocotb

from hw.interfaces import mem_request_layout
from hw.params import T3Params
from tracker.config import (STAT_REGISTERS, Region, TrackerParams, register_values,
                            tracker_registers)
from tracker.model import TRIGGER_LATENCY, TrackerModel, check_run
from hw.interfaces import trigger_layout
from sim.harness.agents import (Bench, CsrMaster, StreamMonitor, StreamSink, StreamSource,
                                random_pauses)
from sim.harness.runner import tb_config
from sim.blocks.tracker.traffic import ring_step_traffic


__all__ = ["TrackerTB", "run_and_check"]


class TrackerTB:
    """Source and monitor on ``i``, sink on ``o``, register master on ``csr``, one
    :class:`Bench`."""

    def __init__(self, dut, cfg):
        self.params = T3Params(**cfg["params"])
        self.tparams = TrackerParams(**cfg["tparams"])
        self.regs = tracker_registers(self.params, self.tparams)
        self.bench = Bench(dut)
        self.source = self.bench.add(StreamSource(dut, "i", mem_request_layout(self.params)))
        self.sink = self.bench.add(StreamSink(dut, "o", trigger_layout(
            self.params, self.tparams.regions)))
        self.csr = self.bench.add(CsrMaster(dut, "csr", self.regs))
        # a passive view of the input: must see exactly what the source sent, when it sent it
        self.monitor = self.bench.add(StreamMonitor(dut, "i", mem_request_layout(self.params)))
        self.dut = dut

    async def start(self, regions, enable=True):
        """Reset, program ``regions`` and ``enable``, wait for the reset flush to end."""
        await self.bench.start()
        for name, value in register_values(self.tparams, regions, enable):
            await self.csr.write_reg(name, value)
        await self.bench.until(lambda: int(self.dut.i__ready.value), self.tparams.sets + 10)

    async def run(self, requests, timeout=None):
        """Send ``requests``; return when all are taken and the output has drained."""
        for r in requests:
            self.source.send_nowait(r)
        timeout = timeout or 50 * len(requests) + self.tparams.sets + 1000
        await self.bench.until(self.source.idle, timeout)
        await self.bench.cycles(8 + TRIGGER_LATENCY)
        await self.bench.until(lambda: not int(self.dut.o__valid.value), timeout)
        await self.bench.cycles(2)

    async def read_stats(self):
        return {name: await self.csr.read_reg(name) for name in STAT_REGISTERS}


async def run_and_check(dut, requests, regions, in_gap=0.0, out_stall=0.0, seed=0,
                        out_burst=1):
    """Run ``requests`` under random input gaps and output backpressure (in runs of
    ``out_burst`` cycles on average) and score the run against
    :class:`tracker.model.TrackerModel`.  Returns ``(tb, fires, regs)``."""
    tb = TrackerTB(dut, tb_config())
    if in_gap:
        tb.source.set_pause_generator(random_pauses(in_gap, seed))
    if out_stall:
        tb.sink.set_pause_generator(random_pauses(out_stall, seed + 1, out_burst))
    model = TrackerModel(tb.params, tb.tparams, regions)
    outcomes = [model.access(r) for r in requests]
    await tb.start(regions)
    start_cycle, start = tb.bench.cycle, time.perf_counter()
    await tb.run(requests)
    tb.run_cycles, tb.run_wall = tb.bench.cycle - start_cycle, time.perf_counter() - start
    regs = await tb.read_stats()
    taken = [cycle for cycle, _ in tb.source.sent]
    assert tb.monitor.seen == tb.source.sent, "monitor and source disagree on the handshakes"
    fires = check_run(model, outcomes, tb.sink.received, taken, regs)
    return tb, fires, regs


def _summary(tb, requests, fires, regs):
    taken = [cycle for cycle, _ in tb.source.sent]
    latencies = [cycle - taken[i] for (cycle, _), i in zip(tb.sink.received, fires)]
    span = taken[-1] - taken[0] + 1
    return {
        "accesses": len(requests), "triggers": len(fires), "cycles": tb.bench.cycle,
        "span_cycles": span, "accesses_per_cycle": len(requests) / span,
        "latency_min": min(latencies), "latency_max": max(latencies),
        "wall_s": tb.run_wall, "cycles_per_s": tb.run_cycles / tb.run_wall,
        "registers": regs, "verified": True,
    }


@cocotb.test()
async def ring_step(dut):
    """One GPU's ring reduce-scatter step (``t3 demo``, ``t3 bench tracker``): every element of
    every tile gets its local update and its neighbour's DMA update, the two streams
    interleaved at random, offered every cycle with the output always ready (saturating, no set
    conflicts); checked against the model, summary written to ``cfg["out"]``."""
    cfg = tb_config()
    params = T3Params(**cfg["params"])
    region = Region(**cfg["region"])
    requests = ring_step_traffic(params, cfg["n_wg"], cfg["wfs_per_wg"], region,
                                 rng=random.Random(cfg["seed"]))
    tb, fires, regs = await run_and_check(dut, requests, [region], seed=cfg["seed"])
    result = _summary(tb, requests, fires, regs)
    with open(cfg["out"], "w") as f:
        json.dump(result, f)
