"""The host's side of a ring run: one phase script for every way of reaching the ring.

:class:`RingHost` runs one configuration of a workload on N GPUs: the driver's configuration
(:class:`sim.system.driver.Driver`), each phase's programs for the GPU-side traffic engines
(:mod:`sim.system.programs`), the counters of :data:`sim.system.results.COUNTERS` read around
each phase, the read-back and the bit-exact check against the ring-ordered numpy reference,
and the results (cycles per phase, DRAM accesses by category, link utilisation:
:mod:`sim.system.results`).  Nothing runs in Python per cycle while a phase runs.

It reaches the ring through a *transport*, which is all that differs between a simulation and
a board:

========================================  ====================================================
``cfg_ports(gpus)``                       every GPU's configuration port as one group with
                                          ``async write(batches)`` (a list per GPU of ``[(byte
                                          address, word)]``) and ``async read(batches)`` (a
                                          list per GPU of byte addresses; the words, a list
                                          per GPU)
``async reset()``                         the ring from its reset, counters at zero (or, on a
                                          board, checked that it is the ring expected)
``async load(beats)``                     ``beats[g]``: ``[(address, beat)]`` written through
                                          GPU ``g``'s bulk port into its engine's memory
``async read_local(first, count)``        ``count`` beats of every GPU's engine memory from
                                          ``first``: a list per GPU
``async start_and_wait(name, limit)``     start every engine, wait until all are done;
                                          ``None``, or what was waited in vain (``"N
                                          cycles"``) after about ``limit`` cycles
``simulated_cycles``, ``out_of_reset``    the clock now and when the ring left its reset (0 if
                                          the transport cannot see the clock)
``ring_counters(names)``                  the simulation top's own counters (``{name: int}``),
                                          ``None`` if it has none of them
``report()``                              the transport's own figures for the results (dict)
``async sleep(cycles)``                   (the timeline only) return ``cycles`` later
========================================  ====================================================

:class:`sim.system.testbench.CocotbRing` is the simulated ring's (its ports under cocotb),
:class:`sim.board.host.SerialBoard` the board's (its registers over the serial line).
"""

import time

import numpy as np

from l2.config import STATUS as L2_STATUS
from sim.system.configure import (CONFIGS, ISOLATED_RS, allocate, configure_all_reduce,
                                  configure_all_to_all, configure_direct, configure_fused,
                                  configure_isolated_rs, map_direct_windows, map_ring_windows)
from sim.system.driver import ETYPES, REMOTE_SPACE, Driver
from sim.system.programs import (ag_steps, direct_copy_steps, direct_rs_steps, direct_slot,
                                 gemm_program, read_steps, rs_steps)
from sim.system.results import (COUNTERS, FRFCFS_COUNTERS, L2_COUNTERS, LINK_LAYER_COUNTERS,
                                compare_chunk, dram_accesses, link_utilization)
from sim.system.run import direct_collective, engine_mode, read_back_slots
from sim.system.workload import LINK_BANDWIDTH, ring_reference
from system.engine.config import MODE, STATUS, Kernel, engine_registers
from system.engine.program import pack_step, pack_wg, partial_beats, program_beats
from system.node import block_registers, register_address
from system.ring import Ring


__all__ = ["RingHost", "GPUReset", "TIMELINE_REGS", "TIMELINE_L2_REGS"]


class GPUReset(AssertionError):
    """A GPU was reset on its own while the ring ran: its state is lost."""


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


class RingHost:
    """One configuration run of ``wl`` on the ring behind ``transport``: nodes of ``params``
    and ``nparams``, engines of ``eparams``; :meth:`run` runs the phases and checks every
    GPU's output bit for bit, :meth:`results` gives the figures.  Per phase the host loads
    each engine's program through the bulk port, writes its registers, starts the engines and
    waits for ``done``."""

    def __init__(self, transport, params, nparams, eparams, wl, config, progress=None,
                 topology="ring", collective="ring"):
        if config not in CONFIGS + (ISOLATED_RS,):
            raise ValueError(f"config must be one of {CONFIGS}, not {config!r}")
        self.transport = transport
        self.params, self.nparams, self.eparams, self.wl, self.config = \
            params, nparams, eparams, wl, config
        self.gpus = wl.gpus
        self.cfg = transport.cfg_ports(self.gpus)
        self.regs = dict(block_registers(params, nparams),
                         gpu=engine_registers(params, eparams))
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
        self.partials = [partial_beats(p, params.beat_bytes) for p in wl.partials]
        self.prog = 1 << eparams.local_bits        # the bulk port's program-memory half
        self.engine_cycles, self.engine_wall = 0, 0.0   # while the engines run, start to done
        self.phase = None                           # the phase running now (timeline)
        self.timeline = []
        self.spans = {}                             # phase -> (first cycle, last cycle)
        self.last = None                            # the counters the last phase left

    @property
    def simulated_cycles(self):
        return self.transport.simulated_cycles

    # --- configuration ports --------------------------------------------------------------

    async def program(self):
        await self.cfg.write([self.driver.register_writes(g, self.regs)
                              for g in range(self.gpus)])

    def _writes(self, block, name, value):
        return [(register_address(block, word), data)
                for word, data in self.regs[block].word_writes(name, value)]

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
        the link layer's when they have one, the FR-FCFS unit's when the NMC units are."""
        return COUNTERS + (L2_COUNTERS if "l2" in self.regs else []) + \
            (LINK_LAYER_COUNTERS if "link" in self.regs else []) + \
            (FRFCFS_COUNTERS if self.nparams.nmc.scheduler == "fr-fcfs" else [])

    async def snapshot(self, extra=()):
        """Every GPU's :attr:`counters` and the registers ``extra`` (``[(block, name)]``), a
        dict per GPU keyed ``"block.name"``."""
        regs = self.counters + list(extra)
        return [{f"{b}.{n}": v for (b, n), v in zip(regs, values)}
                for values in await self.read_all(regs)]

    # --- the timeline ---------------------------------------------------------------------

    def timeline_regs(self):
        """What :meth:`sample` reads: :data:`TIMELINE_REGS`, and :data:`TIMELINE_L2_REGS`
        when the nodes have an L2."""
        return TIMELINE_REGS + (TIMELINE_L2_REGS if self.nparams.l2 is not None else [])

    async def sample(self, period):
        """The timeline: every ``period`` cycles while a phase runs, every GPU's
        :meth:`timeline_regs` read over its configuration port (no Python per cycle in
        between; the reads touch no datapath, so the run's cycles are the same).  A sample
        starts at a multiple of ``period`` after the sampler's start, however long the reads
        of the one before took (a slot they overran is skipped)."""
        regs = self.timeline_regs()
        due = self.simulated_cycles
        while True:
            due += period
            while due <= self.simulated_cycles:
                due += period
            await self.transport.sleep(due - self.simulated_cycles)
            if self.phase is None:
                continue
            cycle, phase = self.simulated_cycles, self.phase
            self.timeline.append({"cycle": cycle, "phase": phase,
                                  "gpus": await self.read_all(regs)})

    # --- phases ---------------------------------------------------------------------------

    async def reset(self):
        await self.transport.reset()
        self.last = None                        # the counters restart

    async def start_and_wait(self, name):
        """Start every engine and wait until all are done (at most :attr:`limit` cycles);
        raises :class:`GPUReset` if a GPU was reset meanwhile, else ``AssertionError`` with
        every GPU's non-zero counters."""
        waited = await self.transport.start_and_wait(name, self.limit)
        if waited is None:
            return
        now = await self.snapshot(extra=[("node", "cycles")])
        self._check_resets(name, [snap.pop("node.cycles") for snap in now])
        state = {g: {k: v for k, v in snap.items() if v} for g, snap in enumerate(now)}
        raise AssertionError(f"phase {name}: not finished after {waited}; counters {state}")

    def _check_resets(self, name, cycles):
        """Raise :class:`GPUReset` if a GPU's ``node.cycles`` (cycles since its reset) shows it
        was reset after the ring was (``cycles``: each GPU's, as just read)."""
        ring = self.simulated_cycles - self.transport.out_of_reset
        for g, c in enumerate(cycles):
            if c + 64 < ring:           # the read's own cycles are far fewer
                raise GPUReset(f"phase {name}: GPU {g} was reset while the ring ran (its "
                               f"cycle counter reads {c}, the ring's {ring}): its state is "
                               f"lost, the run cannot be verified")

    async def run_phase(self, name, programs, arrivals=0, mca=False):
        """``programs[g]``: ``(kernel, registers, descriptor beats)`` of GPU ``g``.

        The counters before the phase are those the phase before left: the ring is quiet
        between phases, and what the host does there (the driver's registers, the engines'
        programs and registers) clears no counter (only a block's ``cmd.clear`` does, which
        the driver never writes)."""
        before = self.last if self.last is not None else await self.snapshot()
        await self.transport.load([[(self.prog + i, beat) for i, beat in
                                    enumerate(program_beats(self.params, prog[2]))]
                                   for prog in programs])
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
        delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
        self.phases[name] = {"cycles": max(cycles), "delta": delta, "after": after,
                             "gpu_cycles": cycles}
        self.progress(f"phase {name}: {max(cycles)} cycles")
        self.last = after

    def gemm_programs(self, mode, free=False, steps=None):
        """Every GPU's GEMM program (``(kernel, registers, descriptor beats)``) in ``mode``
        (of the WGs of ring steps ``steps``, default all)."""
        out = []
        for g in range(self.gpus):
            program = gemm_program(self.wl, g, self.layout, mode, REMOTE_SPACE, free=free,
                                   steps=steps)
            out.append((Kernel.GEMM, program.registers,
                        [pack_wg(self.params, d) for d in program.wgs]))
        return out

    async def clear(self):
        """The driver's recovery's first step: every GPU's output buffer ``C`` written with
        zeros, by the Sequential GEMM's plain stores of an all-zero partial (the memory keeps
        its contents through a reset, and T3's updates add into ``C``).  Leaves no phase in
        the results."""
        await self.reset()
        await self.transport.load([[(i, 0) for i in range(len(beats))]
                                   for beats in self.partials])
        self.driver.set_arbitration("ROUND_ROBIN")
        await self.program()
        await self.run_phase("clear", self.gemm_programs("sequential"))
        del self.phases["clear"]

    async def run(self):
        """The phase script: the GEMM and the collective (Sequential: one after the other;
        T3: fused), the all-gather, the read-back; returns ``True`` once every GPU's output is
        checked (a difference raises ``AssertionError``)."""
        wl, gpus, layout = self.wl, self.gpus, self.layout
        cb = layout["chunk_beats"]
        await self.reset()
        await self.transport.load([list(enumerate(beats)) for beats in self.partials])

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
        elif self.config == ISOLATED_RS and self.collective == "ring":
            # the ring RS with NMC in isolation: the GEMM's output stored before the phase
            # (plain stores, untracked), but for the step-1 chunk, which the phase begins by
            # storing as tracked updates (configure_isolated_rs)
            configure_isolated_rs(self.driver, wl, layout)
            await self.program()
            await self.run_phase("preload", gemm("sequential", free=True,
                                                 steps=range(2, gpus + 1)))
            del self.phases["preload"]
            await self.run_phase("gemm_rs", gemm("rs-nmc", free=True, steps=[1]),
                                 arrivals=(gpus - 1) * cb)
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
        for local in await self.transport.read_local(first, (gpus + slots) * cb):
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

    # --- results --------------------------------------------------------------------------

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
            # the DRAM's row buffer per phase and stream, summed over the GPUs: accesses that
            # found their row open (hits), the bank closed (misses) or another row open
            # (conflicts)
            "dram_rows": {name: {f"{kind}_{stream}": s[f"nmc.row_{kind}_{stream}"]
                                 for kind in ("hits", "misses", "conflicts")
                                 for stream in ("compute", "comm")}
                          for name, s in sums.items() if name != "check"},
            # the times an FR-FCFS unit's bypass cap held the oldest command's place, per
            # phase, summed over the GPUs (0: the scheduler was Accel-Sim's uncapped FR-FCFS)
            "dram_capped": {name: s["nmc.capped"] for name, s in sums.items()
                            if name != "check"}
            if self.nparams.nmc.scheduler == "fr-fcfs" else None,
            # the MCQ's entries by stream, summed over the GEMM phase's cycles and the GPUs
            # (a mean occupancy: divided by the GPUs and the phase's cycles)
            "mcq_occupancy": {
                "compute": sums[gemm_phase]["arbiter.compute_occupancy_sum"],
                "comm": sums[gemm_phase]["arbiter.occupancy_sum"] -
                sums[gemm_phase]["arbiter.compute_occupancy_sum"]},
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
            # what the ring's fault injectors did (a ring built with faults)
            "faults": self.transport.ring_counters(tuple(Ring.FAULT_COUNTERS)),
            # what the full mesh's routers dropped (a mesh)
            "mesh": self.transport.ring_counters(("unroutable", "stray")),
            **self.transport.report(),
        }

    def linklayer_totals(self, after):
        """The link layer's counters as ``after`` (a snapshot per GPU) has them, summed over
        the GPUs, and the acknowledgements the ring's channels lost."""
        out = {name[5:]: sum(a[name] for a in after) for name in
               (f"{b}.{n}" for b, n in LINK_LAYER_COUNTERS) if name != "link.status"}
        out.update(self.transport.ring_counters(("acks_lost",)) or {})
        return out

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
