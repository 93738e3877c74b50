"""The system testbench: N GPU nodes in a ring running a fused GEMM -> ring reduce-scatter
(``t3``, ``t3-mca``) or the Sequential baseline, then the all-gather, then a bit-exact check.

Agents (cocotb, stepped by one :class:`sim.harness.agents.Bench`): a
:class:`sim.system.port.GPUPort` per GPU, the kernels of :mod:`sim.system.kernels` on top of
them, and the configuration agent, cocotbext-axi's ``AxiLiteMaster`` on each node's ``cfg``
port writing what :class:`sim.system.driver.Driver` computes.  After each phase the counters
of :data:`sim.system.results.COUNTERS` are read through the configuration port; the results
are cycles per phase, DRAM accesses by category and link utilisation
(:mod:`sim.system.results`), and every GPU's output is compared bit for bit with the
ring-ordered numpy reference.
"""

import json
import logging
import time

import cocotb

from system.node import node_registers, register_address
from sim.harness.agents import Bench
from sim.system.configure import (CONFIGS, ISOLATED_RS, allocate, configure_fused,
                                  map_ring_windows)
from sim.system.kernels import (AGKernel, ArrivalWatch, CheckKernel, GemmKernel, KernelRunner,
                                RSKernel)
from sim.system.port import GPUPort
from sim.system.results import COUNTERS, compare_chunk, dram_accesses, link_utilization
from sim.system.workload import LINK_BANDWIDTH, GemmSpec, Workload, ring_reference


__all__ = ["System", "run_system"]


#: The node's ``ctrl`` register: kernel-boundary strobes for the MC arbiter.
NODE_CTRL = node_registers()["ctrl"]


class System:
    """One configuration run on a ring DUT (the ``run_system`` cocotb test drives it)."""

    def __init__(self, dut, params, nparams, wl, config, progress=None):
        from cocotbext.axi import AxiLiteBus, AxiLiteMaster
        from system.node import block_registers
        from sim.system.driver import Driver
        if config not in CONFIGS + (ISOLATED_RS,):
            raise ValueError(f"config must be one of {CONFIGS}, not {config!r}")
        self.dut, self.params, self.nparams, self.wl, self.config = \
            dut, params, nparams, wl, config
        self.gpus = wl.gpus
        self.bench = Bench(dut)
        self.runner = self.bench.add(KernelRunner())
        self.ports = [self.bench.add(GPUPort(dut, g, params)) for g in range(self.gpus)]
        for g in range(self.gpus):      # cocotbext-axi logs every access at INFO otherwise
            logging.getLogger(f"cocotb.{dut._name}.gpu{g}_cfg_").setLevel(logging.WARNING)
        self.masters = [AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"gpu{g}_cfg_"), dut.clk,
                                      dut.rst) for g in range(self.gpus)]
        self.regs = block_registers(params, nparams)
        self.driver = Driver(params, nparams, self.gpus)
        self.layout = allocate(self.driver, wl)
        self.phases = {}
        est = wl.summary()
        # a phase that runs 20 times longer than the whole job's estimate is stuck
        self.limit = 50_000 + 20 * int(est["gemm_cycles_estimate"] + est["rs_cycles_estimate"])
        self.progress = progress or (lambda text: None)

    # --- configuration port ---------------------------------------------------------------

    async def program(self):
        for g in range(self.gpus):
            for addr, word in self.driver.register_writes(g, self.regs):
                await self.masters[g].write_dword(addr, word)

    async def write(self, g, block, name, value):
        for word, data in self.regs[block].word_writes(name, value):
            await self.masters[g].write_dword(register_address(block, word), data)

    async def read(self, g, block, name):
        reg = self.regs[block]
        base = reg.address(name)
        words = [await self.masters[g].read_dword(register_address(block, base + k))
                 for k in range(reg[name].words)]
        return reg.from_words(name, words)

    async def snapshot(self):
        return [{f"{b}.{n}": await self.read(g, b, n) for b, n in COUNTERS}
                for g in range(self.gpus)]

    # --- phases ---------------------------------------------------------------------------------

    async def run_phase(self, name, kernels, timeout):
        from cocotb.triggers import RisingEdge
        before = await self.snapshot()
        self.runner.kernels = list(kernels)
        start = self.bench.cycle
        self.progress(f"phase {name}: started at cycle {start}")
        last = time.perf_counter()
        while not self.runner.all_done():
            await RisingEdge(self.dut.clk)
            if self.bench.cycle - start > timeout:
                stuck = [k.name for k in self.runner.kernels if not k.done]
                now = await self.snapshot()
                state = {g: {k: v for k, v in snap.items() if v} for g, snap in enumerate(now)}
                raise AssertionError(f"phase {name}: not finished after {timeout} cycles "
                                     f"(waiting for {', '.join(stuck)}); counters {state}; "
                                     f"arrivals {[p.arrivals for p in self.ports]}")
            if time.perf_counter() - last > 10:
                last = time.perf_counter()
                done = sum(k.done for k in self.runner.kernels)
                self.progress(f"phase {name}: cycle {self.bench.cycle - start}, "
                              f"{done}/{len(self.runner.kernels)} kernels done")
        end = max(k.end for k in self.runner.kernels)
        cycles = end - start + 1
        after = await self.snapshot()
        delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
        self.phases[name] = {"cycles": cycles, "delta": delta, "after": after}
        self.phases[name]["steps"] = {k.name: [c - start for c in k.step_starts]
                                      for k in kernels if getattr(k, "step_starts", None)}
        self.progress(f"phase {name}: {cycles} cycles")
        for g, port in enumerate(self.ports):
            assert not port.errors, f"GPU {g}: memory refused {port.errors[0]}"
        return cycles

    async def run(self):
        wl, gpus, layout = self.wl, self.gpus, self.layout
        await self.bench.start()
        chunk_beats = layout["chunk_beats"]
        if self.config == "sequential":
            self.driver.set_arbitration("ROUND_ROBIN")
            await self.program()
            await self.run_phase("gemm", [GemmKernel(g, wl, self.ports[g], layout,
                                                     "sequential") for g in range(gpus)],
                                 timeout=self.limit)
            map_ring_windows(self.driver, wl, "R")
            await self.program()
            await self.run_phase("rs", [RSKernel(g, wl, self.ports[g], layout)
                                        for g in range(gpus)], timeout=self.limit)
        else:
            policy = "MCA" if self.config == "t3-mca" else "ROUND_ROBIN"
            configure_fused(self.driver, wl, layout, policy)
            await self.program()

            def strobe(g, **bits):
                value = NODE_CTRL.encode(**bits)
                return lambda now: cocotb.start_soon(self.write(g, "node", "ctrl", value))
            mca = policy == "MCA"
            kernels = []
            for g in range(gpus):
                if mca:
                    await self.write(g, "node", "ctrl", NODE_CTRL.encode(calib_start=1))
                gemm = GemmKernel(g, wl, self.ports[g], layout, "t3",
                                  on_first_stage=strobe(g, calib_end=1) if mca else None,
                                  on_done=strobe(g, drain=1) if mca else None,
                                  free=self.config == ISOLATED_RS)
                kernels += [gemm, ArrivalWatch(g, self.ports[g], (gpus - 1) * chunk_beats)]
            await self.run_phase("gemm_rs", kernels, timeout=self.limit)
        map_ring_windows(self.driver, wl, "C")
        self.driver.set_arbitration("ROUND_ROBIN")
        await self.program()
        await self.run_phase("ag", [AGKernel(g, wl, self.ports[g], layout) for g in range(gpus)]
                             + [ArrivalWatch(g, self.ports[g], (gpus - 1) * chunk_beats)
                                for g in range(gpus)], timeout=self.limit)
        checks = [CheckKernel(g, wl, self.ports[g], layout, range(gpus)) for g in range(gpus)]
        await self.run_phase("check", checks, timeout=self.limit)
        return self.verify(checks)

    def verify(self, checks):
        ref = ring_reference(self.wl.partials, self.wl.dtype,
                             zero_start=self.config != "sequential")
        nc = self.wl.chunk_cols
        for g, check in enumerate(checks):
            for chunk in range(self.gpus):
                compare_chunk(g, chunk, check.chunk(chunk), ref[:, chunk * nc:(chunk + 1) * nc])
        return True

    # --- results --------------------------------------------------------------------------------

    def results(self):
        ph = self.phases
        sums = {name: {k: sum(d[k] for d in p["delta"]) for k in p["delta"][0]}
                for name, p in ph.items()}

        dram = dram_accesses(self.config, sums)
        if self.config == "sequential":
            cycles = {"gemm": ph["gemm"]["cycles"], "rs": ph["rs"]["cycles"]}
            link_phase = "rs"
        else:
            cycles = {"gemm_rs": ph["gemm_rs"]["cycles"]}
            link_phase = "gemm_rs"
        cycles["ag"] = ph["ag"]["cycles"]
        link_util = link_utilization(ph[link_phase], self.gpus, LINK_BANDWIDTH)
        after = ph["check"]["after"]
        return {
            "config": self.config, "gpus": self.gpus, "workload": dict(
                name=self.wl.spec.name, m=self.wl.spec.m, n=self.wl.spec.n, k=self.wl.spec.k,
                dtype=self.wl.spec.dtype),
            "cycles": sum(cycles.values()), "phase_cycles": cycles,
            "dram": dict(dram, link_utilization=link_util,
                         tracker_peak_occupancy=max(a["tracker.peak_occupancy"]
                                                    for a in after)),
            "status": {g: {k: v for k, v in a.items() if k.endswith(("status", "errors"))}
                       for g, a in enumerate(after)},
            # MCA's threshold as the fused phase left it (the AG reprograms the arbiter)
            "arbiter_threshold": [a["arbiter.threshold"] for a in
                                  ph.get("gemm_rs", ph.get("gemm"))["after"]],
        }


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
    system = System(dut, params, nparams, wl, cfg["config"], progress)
    start = time.perf_counter()
    result = {"verified": False}
    try:
        verified = await system.run()
        result = system.results()
        errors = {g: {k: v for k, v in st.items() if v} for g, st in result["status"].items()}
        errors = {g: e for g, e in errors.items() if e}
        assert not errors, f"error status after the run: {errors}"
        result["verified"] = verified
    finally:
        wall = time.perf_counter() - start
        result["wall_s"] = wall
        result["cycles_per_s"] = system.bench.cycle / wall if wall else 0
        result["simulated_cycles"] = system.bench.cycle
        if cfg.get("out"):
            with open(cfg["out"], "w") as f:
                json.dump(result, f, indent=1, default=str)
