"""The system testbench: N GPU nodes in a ring running a fused GEMM -> ring reduce-scatter
(``t3``, ``t3-mca``) or the Sequential baseline, then the all-gather, then a bit-exact check.

Two hosts share :class:`RingHost` (the driver, the counters, the results):
:class:`EngineSystem` programs the GPU-side traffic engines and waits (no Python per cycle while
a phase runs; the configuration ports driven by :class:`sim.harness.axil.AxiLiteBatch`, every
GPU's accesses of a batch by one coroutine), and :class:`System` runs the CU kernels of
:mod:`sim.system.kernels` in Python on a :class:`sim.system.port.GPUPort` per GPU (stepped by
one :class:`sim.harness.agents.Bench`), with cocotbext-axi's ``AxiLiteMaster`` on each node's
``cfg`` port.  Both write what :class:`sim.system.driver.Driver` computes.  The counters of
:data:`sim.system.results.COUNTERS` are read through the configuration ports around each
phase; the results are cycles per phase, DRAM accesses by category and link utilisation
(:mod:`sim.system.results`), and every GPU's output is compared bit for bit with the
ring-ordered numpy reference.
"""

import json
import logging
import time

import cocotb
import numpy as np

from l2.config import STATUS as L2_STATUS
from system.node import node_registers, register_address
from sim.harness.agents import Bench
from sim.system.configure import (CONFIGS, ISOLATED_RS, allocate, configure_all_reduce,
                                  configure_all_to_all,
                                  configure_direct, configure_fused, map_direct_windows,
                                  map_ring_windows)
from sim.system.kernels import (AGKernel, ArrivalWatch, CheckKernel, GemmKernel, KernelRunner,
                                RSKernel)
from sim.system.port import GPUPort
from sim.system.results import (COUNTERS, L2_COUNTERS, LINK_LAYER_COUNTERS, compare_chunk,
                                dram_accesses, link_utilization)
from sim.system.driver import ETYPES, REMOTE_SPACE
from sim.system.workload import LINK_BANDWIDTH, GemmSpec, Workload, ring_reference
from sim.system.run import direct_collective, engine_mode, read_back_slots
from system.engine.config import EngineParams
from sim.system.programs import (ag_steps, direct_copy_steps, direct_rs_steps, direct_slot,
                                 gemm_program, read_steps, rs_steps)
from system.engine.model import pack_step, pack_wg, partial_beats, program_beats


__all__ = ["System", "EngineSystem", "GPUReset", "run_system"]


class GPUReset(AssertionError):
    """A GPU was reset on its own while the ring ran: its state is lost."""


#: The node's ``ctrl`` register: kernel-boundary strobes for the MC arbiter.
NODE_CTRL = node_registers()["ctrl"]

#: The L2 status register's live bits (state, not errors).
L2_LIVE = L2_STATUS.mask("flushing", "empty", "init")


#: What the timeline samples on every GPU: cumulative counters (the GEMM's requests and
#: stores, the link's busy cycles and payload beats sent, received beats, compute waits at
#: the arbiter) and levels (the MCQ's entries, the compute stream's among them, the Tracker's
#: entries).
TIMELINE_REGS = [("gpu", "stores"), ("gpu", "reads"), ("dma", "link_busy"), ("dma", "beats_sent"),
                 ("dma", "beats_received"), ("arbiter", "compute_wait"),
                 ("arbiter", "occupancy"), ("arbiter", "compute_occupancy"),
                 ("tracker", "occupancy")]

#: What the timeline reads besides, when the nodes have an L2: its read hits and misses.
TIMELINE_L2_REGS = [("l2", "read_hits"), ("l2", "read_misses")]


class AxiPort:
    """A GPU's configuration port driven by cocotbext-axi's ``AxiLiteMaster``, in batches: the
    writes of a batch are queued at once, in order (the master's queue keeps their order and
    the node's AXI4-Lite slave takes them in order, as fast as its bridge does), and the reads
    of a batch are all in flight at once (registers have no side effects on read)."""

    def __init__(self, master):
        self.master = master

    async def write_words(self, pairs):
        """Write ``[(byte address, word)]``, in order; returns once the last is answered."""
        if not pairs:
            return
        events = [self.master.init_write(addr, word.to_bytes(4, "little"))
                  for addr, word in pairs]
        for event in events:
            await event.wait()
            if event.data.resp != 0:
                raise AssertionError(f"write of 0x{event.data.address:x}: resp "
                                     f"{event.data.resp!r}")

    async def read_words(self, addresses):
        """The words at byte ``addresses``, in order."""
        events = [self.master.init_read(addr, 4) for addr in addresses]
        out = []
        for addr, event in zip(addresses, events):
            await event.wait()
            if event.data.resp != 0:
                raise AssertionError(f"read of 0x{addr:x}: resp {event.data.resp!r}")
            out.append(int.from_bytes(event.data.data, "little"))
        return out


class PortGroup:
    """Ports with ``write_words(pairs)`` and ``read_words(addresses)`` each (:class:`AxiPort`,
    the board's windows) as one group with the interface of
    :class:`sim.harness.axil.AxiLiteBatch`: ``write(batches)`` and ``read(batches)``, a batch
    per port; the ports run at once (``parallel``) or one after the other."""

    def __init__(self, ports, parallel=True):
        self.ports, self.parallel = ports, parallel

    async def _each(self, calls):
        from cocotb.triggers import gather
        if self.parallel:
            return list(await gather(*calls))
        return [await call for call in calls]

    async def write(self, batches):
        await self._each([port.write_words(pairs) for port, pairs in zip(self.ports, batches)])

    async def read(self, batches):
        return await self._each([port.read_words(addrs)
                                 for port, addrs in zip(self.ports, batches)])


class RingHost:
    """The host's side of one configuration run on a ring DUT: the driver, the nodes'
    configuration ports, the counters read after each phase, and the results.  Subclasses run
    the phases: :class:`System` with the CU kernels in Python, :class:`EngineSystem` with the
    GPU-side traffic engines."""

    def __init__(self, dut, params, nparams, wl, config, progress=None, extra_regs=None,
                 topology="ring", collective="ring"):
        from system.node import block_registers
        from sim.system.driver import Driver
        if config not in CONFIGS + (ISOLATED_RS,):
            raise ValueError(f"config must be one of {CONFIGS}, not {config!r}")
        self.dut, self.params, self.nparams, self.wl, self.config = \
            dut, params, nparams, wl, config
        self.gpus = wl.gpus
        self.cfg = self.cfg_ports(dut)
        self.regs = dict(block_registers(params, nparams), **(extra_regs or {}))
        self.driver = Driver(params, nparams, self.gpus, topology=topology)
        self.collective = collective
        self.layout = allocate(self.driver, wl, config)
        self.phases = {}
        est = wl.summary()
        # a phase that runs 20 times longer than the whole job's estimate is stuck
        self.limit = 50_000 + 20 * int(est["gemm_cycles_estimate"] + est["rs_cycles_estimate"])
        self.progress = progress or (lambda text: None)
        self.bandwidth = LINK_BANDWIDTH             # the links' beats per cycle (num, den)
        self.charge_headers = True                  # whether a header costs link bandwidth

    # --- configuration ports --------------------------------------------------------------

    def cfg_ports(self, dut):
        """Every GPU's configuration port as one group with ``write(batches)`` (a list per GPU
        of ``[(byte address, word)]``, written in that order) and ``read(batches)`` (a list per
        GPU of byte addresses; the words, a list per GPU): :class:`sim.harness.axil.
        AxiLiteBatch` on the DUT's ``gpu<g>_cfg`` ports."""
        from sim.harness.axil import AxiLiteBatch
        return AxiLiteBatch(dut, [f"gpu{g}_cfg" for g in range(self.gpus)], dut.clk)

    async def program(self):
        await self.cfg.write([self.driver.register_writes(g, self.regs)
                              for g in range(self.gpus)])

    def _writes(self, block, name, value):
        return [(register_address(block, word), data)
                for word, data in self.regs[block].word_writes(name, value)]

    async def write(self, g, block, name, value):
        """Write one register of GPU ``g``."""
        batches = [[] for _ in range(self.gpus)]
        batches[g] = self._writes(block, name, value)
        await self.cfg.write(batches)

    async def write_all(self, values):
        """``values[g]``: ``[(block, name, value)]`` of GPU ``g``, written in that order; all
        GPUs in one batch."""
        await self.cfg.write([[pair for block, name, value in per_gpu
                               for pair in self._writes(block, name, value)]
                              for per_gpu in values])

    async def read_all(self, regs):
        """The values of ``regs`` (``[(block, name)]``) on every GPU, a list per GPU, read in
        one batch."""
        plan = []
        for block, name in regs:
            reg = self.regs[block]
            base = reg.address(name)
            plan.append([register_address(block, base + k) for k in range(reg[name].words)])
        addresses = [a for addrs in plan for a in addrs]
        out = []
        for words in await self.cfg.read([addresses] * self.gpus):
            values, at = [], 0
            for (block, name), addrs in zip(regs, plan):
                values.append(self.regs[block].from_words(name, words[at:at + len(addrs)]))
                at += len(addrs)
            out.append(values)
        return out

    @property
    def counters(self):
        """What :meth:`snapshot` reads: :data:`COUNTERS`, the L2's when the nodes have one,
        the link layer's when they have one."""
        return COUNTERS + (L2_COUNTERS if "l2" in self.regs else []) + \
            (LINK_LAYER_COUNTERS if "link" in self.regs else [])

    async def snapshot(self, extra=()):
        """Every GPU's :attr:`counters` and the registers ``extra`` (``[(block, name)]``), a
        dict per GPU keyed ``"block.name"``."""
        regs = self.counters + list(extra)
        return [{f"{b}.{n}": v for (b, n), v in zip(regs, values)}
                for values in await self.read_all(regs)]

    # --- results --------------------------------------------------------------------------------

    def results(self):
        ph = self.phases
        sums = {name: {k: sum(d[k] for d in p["delta"]) for k in p["delta"][0]}
                for name, p in ph.items()}

        dram = dram_accesses(self.config, sums)
        if self.config == "sequential":
            cycles = {"gemm": ph["gemm"]["cycles"], "rs": ph["rs"]["cycles"]}
            link_phase, gemm_phase = "rs", "gemm"
        else:
            cycles = {"gemm_rs": ph["gemm_rs"]["cycles"]}
            link_phase = gemm_phase = "gemm_rs"
        if "ag" in ph:                          # (an all-to-all has none)
            cycles["ag"] = ph["ag"]["cycles"]
        mesh = self.driver.topology == "mesh"
        link_util = link_utilization(ph[link_phase], self.gpus, self.bandwidth,
                                     self.charge_headers,
                                     links=self.gpus * (self.gpus - 1) if mesh else self.gpus)
        after = ph["check"]["after"]
        return {
            "config": self.config, "gpus": self.gpus, "workload": dict(
                name=self.wl.spec.name, m=self.wl.spec.m, n=self.wl.spec.n, k=self.wl.spec.k,
                dtype=self.wl.spec.dtype),
            "cycles": sum(cycles.values()), "phase_cycles": cycles,
            # the GEMM's stalls at the memory controller: cycles its requests waited at the
            # MC arbiter during the GEMM's phase, summed over the GPUs
            "compute_wait": sums[gemm_phase]["arbiter.compute_wait"],
            "dram": dict(dram, link_utilization=link_util,
                         link_payload_beats=sums[link_phase]["dma.beats_sent"],
                         link_busy_beats=sums[link_phase]["dma.link_busy"],
                         tracker_peak_occupancy=max(a["tracker.peak_occupancy"]
                                                    for a in after)),
            # (the link layer's error counters are repairs it made, not errors: its status
            # is what it could not repair)
            "status": {g: {k: v & ~L2_LIVE if k == "l2.status" else v
                           for k, v in a.items() if k.endswith(("status", "errors"))
                           and not (k.startswith("link.") and k != "link.status")}
                       for g, a in enumerate(after)},
            # the L2's counters per phase, summed over the GPUs (nodes with an L2)
            "l2": {name: {k[3:]: v for k, v in s.items()
                          if k.startswith("l2.") and k != "l2.status"}
                   for name, s in sums.items()} if "l2" in self.regs else None,
            # MCA's threshold as the fused phase left it (the AG reprograms the arbiter)
            "arbiter_threshold": [a["arbiter.threshold"] for a in
                                  ph.get("gemm_rs", ph.get("gemm"))["after"]],
            # the link layer's counters at the end, summed over the GPUs (nodes with one)
            "linklayer": self.linklayer_totals(after) if "link" in self.regs else None,
            "faults": self.fault_totals(),
            "mesh": self.mesh_totals(),
        }

    def mesh_totals(self):
        """What the full mesh's routers dropped (a mesh), or ``None``."""
        if self.dut is None or not hasattr(self.dut, "unroutable"):
            return None
        return {name: int(getattr(self.dut, name).value) for name in ("unroutable", "stray")}

    def linklayer_totals(self, after):
        """The link layer's counters as ``after`` (a snapshot per GPU) has them, summed over
        the GPUs, and the acknowledgements the ring's channels lost."""
        out = {name[5:]: sum(a[name] for a in after) for name in
               (f"{b}.{n}" for b, n in LINK_LAYER_COUNTERS) if name != "link.status"}
        if self.dut is not None and hasattr(self.dut, "acks_lost"):
            out["acks_lost"] = int(self.dut.acks_lost.value)
        return out

    def fault_totals(self):
        """What the ring's fault injectors did (a ring built with faults), or ``None``."""
        from system.ring import Ring
        if self.dut is None or not hasattr(self.dut, "faults_dropped"):
            return None
        return {name: int(getattr(self.dut, name).value) for name in Ring.FAULT_COUNTERS}

    def _record(self, name, cycles, before, after):
        delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
        self.phases[name] = {"cycles": cycles, "delta": delta, "after": after}
        self.progress(f"phase {name}: {cycles} cycles")

    def verify(self, chunks):
        """``chunks[g][c]``: GPU ``g``'s chunk ``c`` as read back; raises ``AssertionError``
        at the first element that differs from the ring-ordered numpy reference."""
        ref = ring_reference(self.wl.partials, self.wl.dtype,
                             zero_start=self.config != "sequential")
        nc = self.wl.chunk_cols
        for g in range(self.gpus):
            for chunk in range(self.gpus):
                compare_chunk(g, chunk, chunks[g][chunk], ref[:, chunk * nc:(chunk + 1) * nc])
        return True

    def verify_all_to_all(self, chunks):
        """``chunks[c]``: GPU ``c``'s ``G`` chunks of ``C`` and then its ``G - 1`` slots of
        ``R``, as read back; raises ``AssertionError`` at the first element that differs:
        GPU ``c``'s own chunk must be its own GEMM output's, and its slot
        ``direct_slot(g, c)`` GPU ``g``'s output's chunk ``c`` (copies: exact for any
        input).  The other chunks of ``C``, which T3's all-to-all never writes locally, are
        not compared."""
        nc, gpus = self.wl.chunk_cols, self.gpus
        for c in range(gpus):
            for g in range(gpus):
                got = chunks[c][c] if g == c else chunks[c][gpus + direct_slot(g, c, gpus)]
                compare_chunk(c, c if g == c else f"{c} from GPU {g}", got,
                              self.wl.partials[g][:, c * nc:(c + 1) * nc])
        return True


class System(RingHost):
    """One configuration run with the CU kernels in Python (a port agent per GPU, stepped
    every cycle): the reference for :class:`EngineSystem`."""

    def __init__(self, dut, params, nparams, wl, config, progress=None, topology="ring"):
        super().__init__(dut, params, nparams, wl, config, progress, topology=topology)
        self.bench = Bench(dut)
        self.runner = self.bench.add(KernelRunner())
        self.ports = [self.bench.add(GPUPort(dut, g, params)) for g in range(self.gpus)]

    def cfg_ports(self, dut):
        """cocotbext-axi's ``AxiLiteMaster`` on each GPU's ``gpu<g>_cfg`` port
        (:class:`AxiPort`): the kernels write the node's ``ctrl`` strobes while a phase runs,
        each at its own time, which needs a master per port; and the node's AXI4-Lite slave
        stays checked against the library's master."""
        from cocotbext.axi import AxiLiteBus, AxiLiteMaster
        for g in range(self.gpus):      # cocotbext-axi logs every access at INFO otherwise
            logging.getLogger(f"cocotb.{dut._name}.gpu{g}_cfg_").setLevel(logging.WARNING)
        return PortGroup([AxiPort(AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"gpu{g}_cfg_"),
                                                dut.clk, dut.rst)) for g in range(self.gpus)])

    @property
    def simulated_cycles(self):
        return self.bench.cycle

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
        self._record(name, cycles, before, await self.snapshot())
        self.phases[name]["steps"] = {k.name: [c - start for c in k.step_starts]
                                      for k in kernels if getattr(k, "step_starts", None)}
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
        return self.verify([[check.chunk(c) for c in range(gpus)] for check in checks])

class EngineSystem(RingHost):
    """One configuration run with the GPU-side traffic engines
    (:class:`system.engine.rtl.CUEngine`): per phase the host loads each engine's program
    (:mod:`system.engine.model`) through the bulk port, writes its registers, pulses
    ``start`` and waits for ``done``; nothing runs in Python per cycle."""

    def __init__(self, dut, params, nparams, eparams, wl, config, progress=None,
                 topology="ring", collective="ring"):
        from system.engine.config import engine_registers
        super().__init__(dut, params, nparams, wl, config, progress,
                         extra_regs={"gpu": engine_registers(params, eparams)},
                         topology=topology, collective=collective)
        self.eparams = eparams
        self.partials = [partial_beats(p, params.beat_bytes) for p in wl.partials]
        self.prog = 1 << eparams.local_bits        # the bulk port's program-memory half
        self.engine_cycles, self.engine_wall = 0, 0.0   # while the engines run, start to done
        self.clk = getattr(dut, "clk", None)
        self.phase = None                           # the phase running now (timeline)
        self.timeline = []
        self.spans = {}                             # phase -> (first cycle, last cycle)
        self.last = None                            # the counters the last phase left
        self.faults = None                          # the fault injectors' (rate, kinds)
        self.inject = None                          # a GPU's reset to inject (run_system)
        self.out_of_reset = 0                       # the cycle the ring left its reset

    def timeline_regs(self):
        """What :meth:`sample` reads: :data:`TIMELINE_REGS`, and :data:`TIMELINE_L2_REGS`
        when the nodes have an L2."""
        return TIMELINE_REGS + (TIMELINE_L2_REGS if self.nparams.l2 is not None else [])

    async def sample(self, period):
        """The timeline: every ``period`` cycles while a phase runs, every GPU's
        :data:`TIMELINE_REGS` read over its configuration port (no Python per cycle in
        between; the reads touch no datapath, so the run's cycles are the same).  A sample
        starts at a multiple of ``period`` after the sampler's start, however long the reads
        of the one before took (a slot they overran is skipped)."""
        from cocotb.triggers import Timer

        regs = self.timeline_regs()
        due = self.simulated_cycles
        while True:
            due += period
            while due <= self.simulated_cycles:
                due += period
            await Timer(due - self.simulated_cycles, "ns")
            if self.phase is None:
                continue
            cycle, phase = self.simulated_cycles, self.phase
            self.timeline.append({"cycle": cycle, "phase": phase,
                                  "gpus": await self.read_all(regs)})

    @property
    def simulated_cycles(self):
        from cocotb.utils import get_sim_time
        return int(get_sim_time("ns"))

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
        Clock(self.clk, 1, unit="ns").start()
        await ClockCycles(self.clk, 2)
        self.dut.rst.value = 0
        await ClockCycles(self.clk, 2)          # the ring registers its reset
        self.out_of_reset = self.simulated_cycles
        self.last = None                        # the counters restart

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

    async def start_and_wait(self, name):
        """Start every engine and wait until all are done (at most :attr:`limit` cycles)."""
        from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout
        import cocotb
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
                await with_timeout(RisingEdge(self.dut.done), self.limit, "ns")
            except SimTimeoutError:
                now = await self.snapshot(extra=[("node", "cycles")])
                self._check_resets(name, [snap.pop("node.cycles") for snap in now])
                state = {g: {k: v for k, v in snap.items() if v} for g, snap in enumerate(now)}
                raise AssertionError(f"phase {name}: not finished after {self.limit} cycles; "
                                     f"counters {state}") from None

    def _check_resets(self, name, cycles):
        """Raise :class:`GPUReset` if a GPU's ``node.cycles`` (cycles since its reset) shows it
        was reset after the ring was (``cycles``: each GPU's, as just read)."""
        ring = self.simulated_cycles - self.out_of_reset
        for g, c in enumerate(cycles):
            if c + 64 < ring:           # the read's own cycles are far fewer
                raise GPUReset(f"phase {name}: GPU {g} was reset while the ring ran (its "
                               f"cycle counter reads {c}, the ring's {ring}): its state is "
                               f"lost, the run cannot be verified")

    async def _pulse_gpu_reset(self, gpu, at, cycles):
        """Hold GPU ``gpu`` alone in reset for ``cycles`` cycles, ``at`` cycles from now."""
        from cocotb.triggers import ClockCycles
        await ClockCycles(self.clk, at)
        self.dut.gpu_rst.value = 1 << gpu
        await ClockCycles(self.clk, cycles)
        self.dut.gpu_rst.value = 0
        self.progress(f"GPU {gpu} held in reset for {cycles} cycles")

    async def run_phase(self, name, programs, arrivals=0, mca=False):
        """``programs[g]``: ``(kernel, registers, descriptor beats)`` of GPU ``g``.

        The counters before the phase are those the phase before left: the ring is quiet
        between phases, and what the host does there (the driver's registers, the engines'
        programs and registers) clears no counter (only a block's ``cmd.clear`` does, which
        the driver never writes)."""
        from system.engine.config import MODE, STATUS
        before = self.last if self.last is not None else await self.snapshot()
        await self.load([[(self.prog + i, beat) for i, beat in
                          enumerate(program_beats(self.params, prog[2]))] for prog in programs])
        etype = ETYPES[self.wl.spec.dtype].value

        def configure(g):
            kernel, registers, prog = programs[g]
            values = {"mode": MODE.encode(kernel=kernel, etype=etype, mca=int(mca),
                                          flush=int(self.nparams.l2 is not None)),
                      "prog_base": 0, "prog_count": len(prog), "arrivals_target": arrivals,
                      "remote_space": REMOTE_SPACE, "partials": 0, **registers}
            return [("gpu", reg, value) for reg, value in values.items()]
        await self.write_all([configure(g) for g in range(self.gpus)])
        self.progress(f"phase {name}: started")
        self.phase = name
        wall, first = time.perf_counter(), self.simulated_cycles
        await self.start_and_wait(name)
        self.phase = None
        self.engine_cycles += self.simulated_cycles - first
        self.engine_wall += time.perf_counter() - wall
        self.spans[name] = (first, self.simulated_cycles)
        after = await self.snapshot(extra=[("gpu", "cycles"), ("gpu", "status")])
        cycles = [a.pop("gpu.cycles") for a in after]
        for g, a in enumerate(after):
            status = a.pop("gpu.status")
            errors = status & ~STATUS.mask("busy", "done")
            assert not errors, f"GPU {g}'s engine: status {STATUS.decode(status)}"
        self._record(name, max(cycles), before, after)
        self.phases[name]["gpu_cycles"] = cycles
        self.last = after

    def gemm_programs(self, mode, free=False):
        """Every GPU's GEMM program (``(kernel, registers, descriptor beats)``) in ``mode``."""
        from system.engine.config import Kernel
        out = []
        for g in range(self.gpus):
            program = gemm_program(self.wl, g, self.layout, mode, REMOTE_SPACE, free=free)
            out.append((Kernel.GEMM, program.registers,
                        [pack_wg(self.params, d) for d in program.wgs]))
        return out

    async def clear(self):
        """The driver's recovery's first step: every GPU's output buffer ``C`` written with
        zeros, by the Sequential GEMM's plain stores of an all-zero partial (the memory keeps
        its contents through a reset, and T3's updates add into ``C``).  Leaves no phase in
        the results."""
        await self.reset()
        await self.load([[(i, 0) for i in range(len(beats))] for beats in self.partials])
        self.driver.set_arbitration("ROUND_ROBIN")
        await self.program()
        await self.run_phase("clear", self.gemm_programs("sequential"))
        del self.phases["clear"]

    async def run(self):
        from system.engine.config import Kernel
        wl, gpus, layout = self.wl, self.gpus, self.layout
        cb = layout["chunk_beats"]
        await self.reset()
        await self.load([list(enumerate(beats)) for beats in self.partials])

        gemm = self.gemm_programs

        def steps(make):
            return [(Kernel.STEPS, {}, [pack_step(self.params, s) for s in
                                        make(wl, g, layout, REMOTE_SPACE)])
                    for g in range(gpus)]
        a2a = self.collective == "all-to-all"
        if self.config == "sequential":
            self.driver.set_arbitration("ROUND_ROBIN")
            await self.program()
            await self.run_phase("gemm", gemm("sequential"))
            if direct_collective(self.collective, self.driver.topology):
                map_direct_windows(self.driver, wl)
                await self.program()
                await self.run_phase("rs", steps(direct_copy_steps if a2a else direct_rs_steps),
                                     arrivals=(gpus - 1) * cb if a2a else 0)
            else:
                map_ring_windows(self.driver, wl, "R")
                await self.program()
                await self.run_phase("rs", steps(rs_steps))
        else:
            policy = "MCA" if self.config == "t3-mca" else "ROUND_ROBIN"
            if direct_collective(self.collective, self.driver.topology):
                {"direct": configure_direct, "all-to-all": configure_all_to_all,
                 "all-reduce": configure_all_reduce}[self.collective](self.driver, wl, layout,
                                                                      policy)
            else:
                configure_fused(self.driver, wl, layout, policy,
                                all_reduce=self.collective == "all-reduce")
            await self.program()
            mode = engine_mode(self.config, self.collective, self.driver.topology)
            # an all-reduce's chunks also arrive once more each, all-gathered by the DMAs
            fused_ag = self.collective == "all-reduce"
            await self.run_phase("gemm_rs", gemm(mode, free=self.config == ISOLATED_RS),
                                 arrivals=(gpus - 1) * cb * (2 if fused_ag else 1),
                                 mca=policy == "MCA")
        if not a2a and not (self.collective == "all-reduce" and self.config != "sequential"):
            map_ring_windows(self.driver, wl, "C")
            self.driver.set_arbitration("ROUND_ROBIN")
            await self.program()
            await self.run_phase("ag", steps(ag_steps), arrivals=(gpus - 1) * cb)
        # the read-back lands after the partials: C, and after an all-to-all or T3's
        # all-reduce on the ring R's slots
        first = len(self.partials[0])
        slots = read_back_slots(self.config, self.collective, self.driver.topology, gpus)
        reads = [(Kernel.STEPS, {}, [pack_step(self.params, s) for s in read_steps(
            layout["C"].base, gpus * cb, first, self.eparams.buffer_beats,
            self.params.beat_bytes) + (read_steps(
                layout["R"].base, slots * cb, first + gpus * cb, self.eparams.buffer_beats,
                self.params.beat_bytes) if slots else [])]) for _ in range(gpus)]
        await self.run_phase("check", reads)
        chunks = []
        for local in await self.read_local(first, (gpus + slots) * cb):
            raw = b"".join(v.to_bytes(self.params.beat_bytes, "little") for v in local)
            out = np.frombuffer(raw, dtype=wl.dtype)
            per = cb * self.params.beat_bytes // np.dtype(wl.dtype).itemsize
            chunks.append([out[c * per:(c + 1) * per].reshape(wl.chunk_cols, wl.spec.m).T
                           for c in range(gpus + slots)])
        if a2a:
            return self.verify_all_to_all(chunks)
        if slots:
            # GPU g's own chunk in C, chunk g + 1 + s in its slot s of R
            chunks = [[chunks[g][c] if c == g else chunks[g][gpus + (c - g - 1) % gpus]
                       for c in range(gpus)] for g in range(gpus)]
        return self.verify(chunks)


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
    def make_system():
        if cfg.get("engines"):
            eparams = EngineParams(**cfg["engines"])
            system = EngineSystem(dut, params, nparams, eparams, wl, cfg["config"], progress,
                                  topology=cfg.get("topology", "ring"),
                                  collective=cfg.get("collective", "ring"))
        else:
            system = System(dut, params, nparams, wl, cfg["config"], progress,
                            topology=cfg.get("topology", "ring"))
        if cfg.get("bandwidth"):
            system.bandwidth = tuple(cfg["bandwidth"])
        if cfg.get("faults"):
            system.faults = tuple(cfg["faults"])
        system.charge_headers = cfg.get("charge_headers", True)
        if nparams.l2 is not None:
            from l2.config import L2Config
            from sim.system.run import SYSTEM_L2_CONFIG
            system.driver.set_l2(L2Config(**cfg["l2_config"]) if cfg.get("l2_config") else
                                 SYSTEM_L2_CONFIG)
        return system
    system = make_system()
    system.inject = cfg.get("reset_gpu")
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
        if getattr(system, "engine_wall", 0):
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
