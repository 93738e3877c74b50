"""The system testbench: the host's phase script (:class:`sim.system.host.RingHost`) on the
simulated ring (:class:`system.ring.Ring` with the GPU-side engines, exported Verilog under
cocotb), through :class:`CocotbRing`, the transport of the simulation top's ports:

* the configuration ports driven by :class:`sim.harness.axil.AxiLiteBatch` (every GPU's
  accesses of a batch by one coroutine);
* the engines' bulk ports (``gpu<g>_load__*``), ``start`` and ``done``, ``gpu_rst`` (a GPU's
  reset injected while a phase runs) and the fault injectors' ``fault_rate`` and
  ``fault_kinds``.

:func:`run_system` is the cocotb test behind ``t3 run`` (:func:`sim.system.run.run_config`),
:func:`idle_ring` the one that measures the ring's own speed.
"""

import json
import time

import cocotb

from sim.system.host import GPUReset, RingHost
from sim.system.workload import GemmSpec, Workload
from system.engine.config import EngineParams


__all__ = ["CocotbRing", "run_system", "idle_ring"]


class CocotbRing:
    """The transport of :class:`sim.system.host.RingHost` (see there) on ``dut``, the ring's
    simulation top under cocotb, one clock cycle a nanosecond.

    ``faults``: the fault injectors' ``(rate, kinds)``, set at every reset; ``inject``: a
    GPU's reset to pulse while a phase runs (``{"phase", "gpu", "at", "cycles"}``), once;
    ``progress(line)`` hears of it."""

    def __init__(self, dut, faults=None, inject=None, progress=None):
        self.dut, self.faults, self.inject = dut, faults, inject
        self.progress = progress or (lambda text: None)
        self.clk = dut.clk
        self.out_of_reset = 0                   # the cycle the ring left its reset
        self.clock = None

    def cfg_ports(self, gpus):
        from sim.harness.axil import AxiLiteBatch
        self.gpus = gpus
        return AxiLiteBatch(self.dut, [f"gpu{g}_cfg" for g in range(gpus)], self.clk)

    @property
    def simulated_cycles(self):
        from cocotb.utils import get_sim_time
        return int(get_sim_time("ns"))

    async def sleep(self, cycles):
        from cocotb.triggers import Timer
        await Timer(cycles, "ns")               # one callback: no Python per cycle

    def ring_counters(self, names):
        if not hasattr(self.dut, names[0]):
            return None
        return {name: int(getattr(self.dut, name).value) for name in names}

    def report(self):
        return {}

    async def reset(self):
        from cocotb.clock import Clock
        from cocotb.triggers import ClockCycles
        self.dut.start.value = 0
        if self.faults is not None:                 # (rate, kinds) of the injectors
            self.dut.fault_rate.value, self.dut.fault_kinds.value = self.faults
        if hasattr(self.dut, "gpu_rst"):
            self.dut.gpu_rst.value = 0
        for g in range(self.gpus):
            getattr(self.dut, f"gpu{g}_load__w_en").value = 0
        self.dut.rst.value = 1
        if self.clock is None:
            self.clock = Clock(self.clk, 1, unit="ns")
            self.clock.start()
        await ClockCycles(self.clk, 2)
        self.dut.rst.value = 0
        await ClockCycles(self.clk, 2)          # the ring registers its reset
        self.out_of_reset = self.simulated_cycles

    async def load(self, beats):
        """``beats[g]``: ``[(address, beat)]`` written through GPU ``g``'s bulk port (all GPUs
        in the same cycles)."""
        from cocotb.triggers import RisingEdge
        ports = [(getattr(self.dut, f"gpu{g}_load__addr"),
                  getattr(self.dut, f"gpu{g}_load__w_data"),
                  getattr(self.dut, f"gpu{g}_load__w_en")) for g in range(self.gpus)]
        enabled = [False] * len(ports)
        for k in range(max(len(b) for b in beats)):
            for g, (addr, data, w_en) in enumerate(ports):
                if k < len(beats[g]):
                    addr.value, data.value = beats[g][k]
                if enabled[g] != (k < len(beats[g])):      # written when it changes only
                    enabled[g] = k < len(beats[g])
                    w_en.value = int(enabled[g])
            await RisingEdge(self.clk)
        for _, _, w_en in ports:
            w_en.value = 0

    async def read_local(self, first, count):
        """``count`` beats of every GPU's engine memory from local beat ``first``: a list per
        GPU.  The bulk ports read in parallel, one address a cycle; a beat comes out three
        clock edges after its address went in (in register, memory, out register).  The
        host gives an address and reads a beat at each falling edge, where the values the
        rising edge before registered are settled on either simulator: one trigger a beat."""
        from cocotb.triggers import FallingEdge
        ports = [(getattr(self.dut, f"gpu{g}_load__addr"),
                  getattr(self.dut, f"gpu{g}_load__r_data")) for g in range(self.gpus)]
        out = [[] for _ in ports]
        await FallingEdge(self.clk)
        for k in range(count + 2):
            if k < count:
                for addr, _ in ports:
                    addr.value = first + k
            await FallingEdge(self.clk)         # past the rising edge that takes the address
            if k >= 2:                          # the address given two edges earlier
                for beats, (_, data) in zip(out, ports):
                    beats.append(int(data.value))
        return out

    async def start_and_wait(self, name, limit):
        from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout
        if self.inject is not None and self.inject["phase"] == name:
            cocotb.start_soon(self._pulse_gpu_reset(self.inject["gpu"], self.inject["at"],
                                                    self.inject.get("cycles", 4)))
            self.inject = None                  # once
        self.dut.start.value = 1
        await RisingEdge(self.clk)
        self.dut.start.value = 0
        await ClockCycles(self.clk, 4)
        if not int(self.dut.done.value):
            try:
                await with_timeout(RisingEdge(self.dut.done), limit, "ns")
            except SimTimeoutError:
                return f"{limit} cycles"
        return None

    async def _pulse_gpu_reset(self, gpu, at, cycles):
        """Hold GPU ``gpu`` alone in reset for ``cycles`` cycles, ``at`` cycles from now."""
        from cocotb.triggers import ClockCycles
        await ClockCycles(self.clk, at)
        self.dut.gpu_rst.value = 1 << gpu
        await ClockCycles(self.clk, cycles)
        self.dut.gpu_rst.value = 0
        self.progress(f"GPU {gpu} held in reset for {cycles} cycles")


@cocotb.test()
async def run_system(dut):
    """One configuration end to end; writes the results to ``cfg["out"]``.

    Configuration (:func:`sim.harness.runner.tb_config`): ``params``, ``nparams``, ``gpus``,
    ``spec`` (:class:`sim.system.workload.GemmSpec` fields), ``config``, ``seed``, ``out``,
    ``progress`` (a file the command line follows)."""
    from system.node import NodeParams
    from hw.params import T3Params
    from sim.harness.runner import tb_config
    cfg = tb_config()
    params = T3Params(**cfg["params"])
    nparams = NodeParams.from_dict(cfg["nparams"])
    wl = Workload(GemmSpec(**cfg["spec"]), cfg["gpus"], params, seed=cfg.get("seed", 1))
    progress_file = cfg.get("progress")

    def progress(text):
        dut._log.info(text)
        if progress_file:
            with open(progress_file, "a") as f:
                f.write(text + "\n")
    if not cfg.get("engines"):
        raise ValueError("the ring's simulation top has the GPU-side engines (cfg['engines'])")
    eparams = EngineParams(**cfg["engines"])
    transport = CocotbRing(dut, faults=tuple(cfg["faults"]) if cfg.get("faults") else None,
                           inject=cfg.get("reset_gpu"), progress=progress)

    def make_system():
        system = RingHost(transport, params, nparams, eparams, wl, cfg["config"], progress,
                          topology=cfg.get("topology", "ring"),
                          collective=cfg.get("collective", "ring"))
        if cfg.get("bandwidth"):
            system.bandwidth = tuple(cfg["bandwidth"])
        system.charge_headers = cfg.get("charge_headers", True)
        if nparams.l2 is not None:
            from l2.config import L2Config
            from sim.system.run import SYSTEM_L2_CONFIG
            system.driver.set_l2(L2Config(**cfg["l2_config"]) if cfg.get("l2_config") else
                                 SYSTEM_L2_CONFIG)
        return system
    system = make_system()
    start = time.perf_counter()
    result = {"verified": False}
    sampler = None
    if cfg.get("timeline"):
        sampler = cocotb.start_soon(system.sample(cfg["timeline"]))
    recovered = None
    try:
        try:
            verified = await system.run()
        except GPUReset as error:
            if not cfg.get("recover"):
                raise
            # the driver's recovery: the whole ring reset, the outputs zeroed, the job run
            # again from the start
            recovered = str(error)
            progress(f"recovering: {error}; the whole ring reset, the job run again")
            if sampler is not None:
                sampler.cancel()
            system = make_system()
            await system.clear()
            if cfg.get("timeline"):
                sampler = cocotb.start_soon(system.sample(cfg["timeline"]))
            verified = await system.run()
        if sampler is not None:
            sampler.cancel()
        result = system.results()
        if sampler is not None:
            result["timeline"] = {"period": cfg["timeline"], "regs": [
                f"{b}.{n}" for b, n in system.timeline_regs()], "samples": system.timeline,
                "spans": system.spans, "link": list(system.bandwidth),
                "charge_headers": system.charge_headers,
                "chunk_beats": system.layout["chunk_beats"]}
        result["recovered"] = recovered
        errors = {g: {k: v for k, v in st.items() if v} for g, st in result["status"].items()}
        errors = {g: e for g, e in errors.items() if e}
        assert not errors, f"error status after the run: {errors}"
        result["verified"] = verified
    finally:
        wall = time.perf_counter() - start
        result["wall_s"] = wall
        result["simulated_cycles"] = system.simulated_cycles
        result["cycles_per_s"] = system.simulated_cycles / wall if wall else 0
        if system.engine_wall:
            result["engine_cycles_per_s"] = system.engine_cycles / system.engine_wall
        if cfg.get("out"):
            with open(cfg["out"], "w") as f:
                json.dump(result, f, indent=1, default=str)


@cocotb.test()
async def idle_ring(dut):
    """The model's own speed: clock the ring (engines idle, nothing driven) for
    ``cfg["cycles"]`` cycles after reset; writes ``{"cycles", "wall_s", "cycles_per_s"}``."""
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, Timer
    from sim.harness.runner import tb_config
    cfg = tb_config()
    dut.rst.value = 1
    Clock(dut.clk, 1, unit="ns").start()
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    start = time.perf_counter()
    await Timer(cfg["cycles"], "ns")        # one callback: no Python per cycle
    wall = time.perf_counter() - start
    with open(cfg["out"], "w") as f:
        json.dump({"cycles": cfg["cycles"], "wall_s": wall,
                   "cycles_per_s": cfg["cycles"] / wall}, f)
