"""cocotb test of the L2's exported Verilog: the environment of the Amaranth layer
(:mod:`sim.blocks.l2.env`: random gaps on ``i``, backpressure on ``o`` and ``mem``, a memory
answering in order after random latencies), stepped per cycle (drive after the edge, observe at
``ReadOnly``), then a flush through the ``flush`` input; the test writes what it saw, and the
pytest side scores it against the golden model (:func:`sim.blocks.l2.env.check_run`).

Configuration (:func:`sim.harness.runner.tb_config`): ``params``, ``lparams``, ``registers``
(``[(name, value)]``), ``traffic`` (keyword arguments of
:func:`sim.blocks.l2.env.random_requests`, the windows as ``[base, size]`` pairs), ``env``
(keyword arguments of
:class:`sim.blocks.l2.env.L2Env`), ``out`` (JSON file: responses, memory's requests, the memory
image, the counters, the cycles).
"""

import json

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.params import T3Params
from l2.config import COUNTERS, L2Params, Window, l2_registers
from sim.blocks.l2.env import L2Env, random_requests
from sim.harness.agents import reset_and_program
from sim.harness.runner import tb_config


__all__ = ["run_traffic"]


@cocotb.test()
async def run_traffic(dut):
    cfg = tb_config()
    params = T3Params(**cfg["params"])
    regs = l2_registers(params, L2Params(**cfg["lparams"]))
    traffic = dict(cfg["traffic"])
    traffic["windows"] = [Window(*w) for w in traffic["windows"]]
    env = L2Env(params, random_requests(params, **traffic), **cfg["env"])
    await reset_and_program(dut, regs, cfg["registers"],
                            idle=("i__valid", "o__ready", "mem__ready", "mem_resp__valid",
                                  "flush"))
    cycle = 0
    drive = (None, False, False, None)
    flushing = False
    while True:
        await ReadOnly()
        req, o_ready, mem_ready, resp = drive
        taken = req is not None and int(dut.i__ready.value)
        o = int(dut.o__payload.value) if o_ready and int(dut.o__valid.value) else None
        mem = int(dut.mem__payload.value) if mem_ready and int(dut.mem__valid.value) else None
        env.outputs(cycle, taken, o, mem, resp is not None and int(dut.mem_resp__ready.value))
        if flushing and int(dut.flushed.value):
            break
        assert cycle < 200_000, "not done after 200,000 cycles"
        await RisingEdge(dut.clk)
        cycle += 1
        dut.flush.value = 0
        if env.finished and not flushing:
            dut.flush.value = 1
            flushing = True
        drive = env.inputs(cycle)       # (every request taken: memory answers the flush)
        req, o_ready, mem_ready, resp = drive
        dut.i__valid.value = int(req is not None)
        if req is not None:
            dut.i__payload.value = req
        dut.o__ready.value = int(o_ready)
        dut.mem__ready.value = int(mem_ready)
        dut.mem_resp__valid.value = int(resp is not None)
        if resp is not None:
            dut.mem_resp__payload.value = resp
    await RisingEdge(dut.clk)
    dut.i__valid.value = dut.mem_resp__valid.value = 0
    counters = {}
    for name in [n for n, _ in COUNTERS] + ["lines", "dirty_lines", "status"]:
        dut.csr__addr.value = regs.address(name)
        await RisingEdge(dut.clk)
        await ReadOnly()
        counters[name] = int(dut.csr__r_data.value)
        await RisingEdge(dut.clk)
    with open(cfg["out"], "w") as f:
        json.dump({"responses": [r for _, r in env.responses], "downstream": env.downstream,
                   "memory": list(env.memory.items()), "counters": counters,
                   "cycles": cycle}, f)
