"""cocotb testbench of the MC arbiter's exported Verilog (``tests/test_mc_arbiter_cocotb.py``
and ``t3 bench mc_arbiter``).

:func:`run_policy` runs ``cfg["n"]`` numbered requests on each stream under one policy with
random gaps and backpressure, records every cycle, and scores the run against the cycle-level
model (:func:`mc_arbiter.model.check_arbiter_run`).
"""

import json
import time

import cocotb

from hw.interfaces import Stream, mem_request_layout
from hw.params import T3Params
from mc_arbiter.config import (CMD, STAT_REGISTERS, ArbiterParams, Policy, arbiter_registers,
                               register_values)
from mc_arbiter.model import ArbiterModel, CycleInputs, check_arbiter_run
from sim.harness.agents import Bench, CsrMaster, StreamSink, StreamSource, random_pauses
from sim.blocks.mc_arbiter.traffic import numbered_requests
from sim.harness.runner import tb_config


__all__ = ["run_policy"]


class Recorder:
    """Per cycle: the inputs the model needs and the stream the hardware enqueued."""

    def __init__(self, dut):
        self.dut = dut
        self.cycles = []
        self.on = False

    def reset(self):
        pass

    def on_edge(self, cycle):
        pass

    def on_settle(self):
        if not self.on:
            return
        d = self.dut
        c_valid, m_valid = bool(d.compute__valid.value), bool(d.comm__valid.value)
        issued = "compute" if c_valid and d.compute__ready.value else \
            "comm" if m_valid and d.comm__ready.value else None
        self.cycles.append((CycleInputs(c_valid, m_valid, bool(d.tap__ready.value),
                                        bool(d.o__ready.value)), issued))


async def run_policy(dut, policy, *, gaps=(0.3, 0.3, 0.1, 0.4)):
    cfg = tb_config()
    params, aparams = T3Params(**cfg["params"]), ArbiterParams(**cfg["aparams"])
    layout = mem_request_layout(params)
    bench = Bench(dut)
    compute = bench.add(StreamSource(dut, "compute", layout))
    comm = bench.add(StreamSource(dut, "comm", layout))
    tap = bench.add(StreamSink(dut, "tap", layout))
    out = bench.add(StreamSink(dut, "o", layout))
    csr = bench.add(CsrMaster(dut, "csr", arbiter_registers(aparams)))
    recorder = bench.add(Recorder(dut))
    seed = cfg["seed"] + int(policy)
    for offset, (agent, gap) in enumerate(zip((compute, comm, tap, out), gaps)):
        if gap:
            agent.set_pause_generator(random_pauses(gap, seed + offset))
    for name in ("drain", "calib_start", "calib_end"):
        getattr(dut, name).value = 0
    await bench.start()
    settings = dict(policy=policy, threshold=aparams.depth // 2, starve_limit=6)
    for name, value in register_values(aparams, **settings):
        await csr.write_reg(name, value)
    await csr.write_reg("cmd", CMD.encode(clear=1))
    compute_items = numbered_requests(params, cfg["n"], Stream.COMPUTE)
    comm_items = numbered_requests(params, cfg["n"], Stream.COMM, base=1 << 20)
    recorder.on = True
    start_cycle, start = bench.cycle, time.perf_counter()
    for item in compute_items:
        compute.send_nowait(item)
    for item in comm_items:
        comm.send_nowait(item)
    total = 2 * cfg["n"]
    await bench.until(lambda: len(out.received) == total, 40 * total)
    recorder.on = False
    wall, span = time.perf_counter() - start, bench.cycle - start_cycle
    regs = {name: await csr.read_reg(name) for name in STAT_REGISTERS}
    dequeued = [("compute" if item["stream"] == Stream.COMPUTE.value else "comm", item)
                for _, item in out.received]
    # the sources' items carry the stream they were sent on; the MCQ sets it the same way
    check_arbiter_run(ArbiterModel(aparams, **settings), recorder.cycles, dequeued, regs,
                      compute_items, comm_items)
    assert [item for _, item in tap.received] == [item for _, item in dequeued]
    issue_cycles = [k for k, (_, issued) in enumerate(recorder.cycles) if issued]
    return {"issues": len(issue_cycles), "cycles_per_s": span / wall, "registers": regs,
            "issues_per_cycle": len(issue_cycles) / (issue_cycles[-1] - issue_cycles[0] + 1)}



@cocotb.test()
async def saturate(dut):
    """Both streams always valid, ``tap`` and ``o`` always ready, round-robin: issues per
    cycle and simulation speed, written to ``cfg["out"]``."""
    result = await run_policy(dut, Policy.ROUND_ROBIN, gaps=(0, 0, 0, 0))
    with open(tb_config()["out"], "w") as f:
        json.dump(result, f)
