"""cocotb testbench of the DMA engine's exported Verilog.

:class:`EnvAgent` steps a :class:`sim.blocks.dma.env.DMAEnv` inside the :class:`sim.harness.agents.Bench`
(drive right after the edge, observe at ``ReadOnly``), so the cocotb layer checks exactly what
the Amaranth layer checks.  :func:`run_random` runs a :func:`sim.blocks.dma.traffic.random_scenario`
through the link loopback; :func:`run_axis` drives the link ports with cocotbext-axi's
``AxiStreamSource``/``AxiStreamSink`` instead; :func:`run_bench` measures link utilisation,
trigger-to-first-beat latency and simulation speed for ``t3 bench dma``.

Configuration (:func:`sim.harness.runner.tb_config`): ``params``, ``dparams``, ``seed``, ``scenario``
(keyword arguments of :func:`sim.blocks.dma.traffic.random_scenario`), ``env`` (keyword arguments of
:class:`sim.blocks.dma.env.DMAEnv`), ``out`` (JSON result file, for the command line).
"""

import json
import time

import cocotb

from dma.config import CMD, STAT_REGISTERS, DMAParams, dma_registers, register_values
from dma.model import check_dma_run, frames_to_packets
from hw.params import T3Params
from sim.harness.agents import Bench, CsrMaster
from sim.blocks.dma.env import INPUTS, OUTPUTS, DMAEnv, run_model
from sim.blocks.dma.traffic import long_transfer_scenario, random_scenario
from sim.harness.runner import tb_config


__all__ = ["EnvAgent", "run_random", "run_axis", "run_bench"]


class EnvAgent:
    """Bench agent around a :class:`DMAEnv`: idle until :meth:`activate`."""

    def __init__(self, dut, env):
        self.env = env
        names = [n for n in INPUTS if env.link or "x__" not in n]
        self.inputs = {n: getattr(dut, n) for n in names}
        self.outputs = {n: getattr(dut, n) for n in OUTPUTS if env.link or "x__" not in n}
        self.active = False
        self._driven = False
        self._values = None

    def reset(self):
        for name, sig in self.inputs.items():
            sig.value = 0
        self._written = dict.fromkeys(self.inputs, 0)

    def activate(self):
        self.active = True

    def on_edge(self, cycle):
        if self._values is not None:
            self.env.observe(self._values)
            self._values = None
        self._driven = self.active
        if self.active:
            written = self._written
            for name, value in self.env.drive().items():
                # a write through the simulator interface is the costly part: skip repeats
                if name in self.inputs and written[name] != value:
                    self.inputs[name].value = value
                    written[name] = value

    #: data outputs, read only while their valid is high (they may be X otherwise)
    DATA = {"mem__valid": ("mem__payload",),
            "tx__tvalid": ("tx__tdata", "tx__tkeep", "tx__tlast", "tx__tuser")}

    def on_settle(self):
        if not self._driven:
            return
        values = {}
        outputs = self.outputs
        for name, sig in outputs.items():
            if name.endswith(("valid", "ready")):
                value = sig.value
                if not value.is_resolvable:
                    raise AssertionError(f"cycle {self.env.cycle}: {name} is {value}")
                values[name] = int(value)
        for valid, fields in self.DATA.items():
            for name in fields:
                if name not in outputs:
                    continue
                if values.get(valid):
                    value = outputs[name].value
                    if not value.is_resolvable:
                        raise AssertionError(f"cycle {self.env.cycle}: {name} is {value} "
                                             f"while {valid}")
                    values[name] = int(value)
                else:
                    values[name] = None
        self._values = values


async def _start(dut, params, dparams, scenario, env):
    bench = Bench(dut)
    regs = dma_registers(params, dparams)
    csr = bench.add(CsrMaster(dut, "csr", regs))
    agent = bench.add(EnvAgent(dut, env))
    await bench.start()
    for name, value in register_values(params, dparams, scenario.commands, scenario.gpu_id,
                                       scenario.remote, rx_window=scenario.rx_window):
        await csr.write_reg(name, value)
    await csr.write_reg("cmd", CMD.encode(clear=1))
    agent.activate()
    return bench, csr


async def _read_stats(csr):
    return {name: await csr.read_reg(name) for name in STAT_REGISTERS}


def _params(cfg):
    return T3Params(**cfg["params"]), DMAParams(**cfg["dparams"])


async def run_random(dut):
    """Random command table, triggers and remote stores through the loopback; scoreboard."""
    cfg = tb_config()
    params, dparams = _params(cfg)
    scenario = random_scenario(params, dparams, cfg["seed"], **cfg.get("scenario", {}))
    env = DMAEnv(params, dparams, scenario, seed=cfg["seed"], **cfg.get("env", {}))
    bench, csr = await _start(dut, params, dparams, scenario, env)
    await bench.until(env.done, 100 * (len(scenario.triggers) + 10) * 64)
    regs = await _read_stats(csr)
    model, expected = run_model(params, dparams, scenario, env)
    check_dma_run(model, env.packets(), env.memory, expected, regs)
    dut._log.info(f"{len(scenario.triggers)} triggers, {regs['tiles_sent']} tiles, "
                  f"{regs['remote_sent']} remote stores in {env.cycle} cycles")


def _beats_of(frame, params):
    """cocotbext-axi frame -> ``[(tdata, tkeep, tuser, tlast)]``."""
    n = params.beat_bytes
    data = bytes(frame.tdata)
    assert len(data) % n == 0, f"frame of {len(data)} bytes is not whole beats"
    count = len(data) // n
    # cocotbext-axi keeps sideband values per byte lane
    tuser = frame.tuser if isinstance(frame.tuser, list) else [frame.tuser] * len(data)
    return [(int.from_bytes(data[k * n:(k + 1) * n], "little"), (1 << n) - 1,
             int(tuser[k * n]),
             int(k == count - 1)) for k in range(count)]


async def run_axis(dut):
    """The link ports driven by cocotbext-axi: collect the frames the engine sends with an
    ``AxiStreamSink`` (with backpressure), check them against the model, then send them back
    with an ``AxiStreamSource`` (with gaps) and check the memory image."""
    from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

    from sim.harness.agents import random_pauses
    cfg = tb_config()
    params, dparams = _params(cfg)
    scenario = random_scenario(params, dparams, cfg["seed"], remote_stores=0)
    env = DMAEnv(params, dparams, scenario, seed=cfg["seed"], link=None,
                 **cfg.get("env", {}))
    dut.rx__tvalid.value = 0
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "tx_"), dut.clk, dut.rst)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "rx_"), dut.clk, dut.rst)
    sink.set_pause_generator(random_pauses(0.3, cfg["seed"]))
    source.set_pause_generator(random_pauses(0.3, cfg["seed"] + 1))
    bench, csr = await _start(dut, params, dparams, scenario, env)
    model, expected = run_model(params, dparams, scenario, env)
    frames = []
    for _ in range(len(model.sent)):
        frames.append(_beats_of(await sink.recv(), params))
    sent = frames_to_packets(frames, env.hdr_pk)
    for beats in frames:
        await source.send(AxiStreamFrame(
            tdata=b"".join(d.to_bytes(params.beat_bytes, "little") for d, _, _, _ in beats),
            tuser=[u for _, _, u, _ in beats for _ in range(params.beat_bytes)]))
    await source.wait()
    await bench.until(env.done, 100_000)
    regs = await _read_stats(csr)
    # the model's receive side: every sent packet comes back
    for pk in sent:
        model.receive(pk)
    check_dma_run(model, sent, env.memory, expected, regs)
    dut._log.info(f"{len(frames)} frames through cocotbext-axi, {regs['beats_received']} "
                  f"beats written back")


async def run_bench(dut):
    """Long transfers into a sink that is always ready; memory latency ``cfg['latency']``."""
    cfg = tb_config()
    params, dparams = _params(cfg)
    scenario = long_transfer_scenario(params, dparams, cfg["tile_beats"], cfg["tiles"])
    env = DMAEnv(params, dparams, scenario, link="sink", mem_latency=cfg["latency"])
    bench, csr = await _start(dut, params, dparams, scenario, env)
    start, c0 = time.perf_counter(), env.cycle
    await bench.until(env.done, 1_000_000)
    wall = time.perf_counter() - start
    regs = await _read_stats(csr)
    model, expected = run_model(params, dparams, scenario, env)
    check_dma_run(model, env.packets(), env.memory, expected, regs)
    result = {"utilisation": env.link_utilisation(),
              "first_beat": env.tx_beats[0] - env.trig_taken[0],
              "cycles_per_s": (env.cycle - c0) / wall, "cycles": env.cycle - c0}
    with open(cfg["out"], "w") as f:
        json.dump(result, f)


@cocotb.test()
async def bench_long(dut):
    """``t3 bench dma``: see :func:`run_bench`."""
    await run_bench(dut)
