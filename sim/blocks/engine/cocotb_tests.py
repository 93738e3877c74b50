"""cocotb tests of the traffic engine's exported Verilog: the same programs, environment and
model comparison as the Amaranth layer (:mod:`sim.blocks.engine.env`), stepped per cycle
(drive after the edge, observe at ``ReadOnly``).

Configuration (:func:`sim.harness.runner.tb_config`): ``params``, ``eparams``, ``registers``
(``[(name, value)]``), ``load`` (``[(addr, beat)]``), ``env`` (keyword arguments of
:class:`sim.blocks.engine.env.EngineEnv`, with ``memory`` as ``[(addr, beat)]``),
``read_back`` (local beats), ``out`` (JSON file: the requests, remote stores, registers,
beats read back and strobe cycles).
"""

import json

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from hw.params import T3Params
from sim.blocks.engine.env import EngineEnv
from sim.harness.agents import reset_and_program
from sim.harness.runner import tb_config
from system.engine.config import STAT_REGISTERS, EngineParams, engine_registers


__all__ = ["run_program"]


@cocotb.test()
async def run_program(dut):
    cfg = tb_config()
    params = T3Params(**cfg["params"])
    eparams = EngineParams(**cfg["eparams"])
    regs = engine_registers(params, eparams)
    env_args = dict(cfg["env"])
    env_args["memory"] = {a: v for a, v in env_args.pop("memory")}
    env = EngineEnv(params, **env_args)
    await reset_and_program(dut, regs, cfg["registers"],
                            idle=("start", "comm_done", "compute__ready", "resp__valid",
                                  "load__w_en"))
    for addr, value in cfg["load"]:
        dut.load__addr.value, dut.load__w_data.value, dut.load__w_en.value = addr, value, 1
        await RisingEdge(dut.clk)
    dut.load__w_en.value = 0
    strobes = {"calib_start": [], "calib_end": [], "drain": []}
    dut.start.value = 1
    cycle = 0
    resp_payload = None
    ready = False
    while True:
        await ReadOnly()
        if cycle and int(dut.done.value):
            break
        for name in strobes:
            if int(getattr(dut, name).value):
                strobes[name].append(cycle)
        valid = int(dut.compute__valid.value)
        payload = int(dut.compute__payload.value) if valid else 0
        if cycle:
            env.outputs(cycle, valid, ready, payload, resp_payload is not None)
        assert cycle < 200_000, "the engine is not done after 200,000 cycles"
        await RisingEdge(dut.clk)
        cycle += 1
        dut.start.value = 0
        ready, response, comm = env.inputs(cycle)
        dut.compute__ready.value = int(ready)
        dut.comm_done.value = comm
        dut.resp__valid.value = int(response is not None)
        resp_payload = response
        if response is not None:
            dut.resp__payload.value = env.resp.pack(response)
    await RisingEdge(dut.clk)
    dut.compute__ready.value = 0
    dut.resp__valid.value = 0
    dut.comm_done.value = 0
    values = {}
    for name in STAT_REGISTERS:
        values[name] = await _read(dut, regs, name)
    beats = {}
    for addr in cfg.get("read_back", []):
        dut.load__addr.value = addr
        await RisingEdge(dut.clk)
        await ReadOnly()
        beats[addr] = int(dut.load__r_data.value)
        await RisingEdge(dut.clk)
    with open(cfg["out"], "w") as f:
        json.dump({"requests": env.requests, "remote": env.remote, "regs": values,
                   "beats": beats, "strobes": strobes, "cycles": cycle}, f)


async def _read(dut, regs, name):
    words = []
    for k in range(regs[name].words):
        dut.csr__addr.value = regs.address(name) + k
        await RisingEdge(dut.clk)
        await ReadOnly()
        words.append(int(dut.csr__r_data.value))
        await RisingEdge(dut.clk)
    return regs.from_words(name, words)
