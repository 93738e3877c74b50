"""The system testbench: N GPU nodes in a ring running a fused GEMM -> ring reduce-scatter
(``t3``, ``t3-mca``) or the Sequential baseline, then the all-gather, then a bit-exact check.

Agents (cocotb, stepped by one :class:`sim.agents.Bench`):

* :class:`GPUPort`, one per GPU: drives the node's ``compute`` port from a queue of requests,
  takes every ``resp`` (in order) and counts ``comm_done`` pulses (data arriving);
* kernels on top of the ports (:class:`GemmKernel`: the CU throughput model of
  :mod:`sim.workload`; :class:`RSKernel`: the baseline's reduce-scatter on the CUs;
  :class:`AGKernel`; :class:`CheckKernel`), stepped by :class:`KernelRunner`;
* the configuration agent: cocotbext-axi's ``AxiLiteMaster`` on each node's ``cfg`` port,
  writing what :class:`sim.driver.Driver` computes;
* the metrics collector (phase cycles; NMC, DMA, Tracker and arbiter counters read through
  the configuration port after each phase) and the scoreboard (:func:`compare_chunk`).
"""

import collections
import json
import logging
import time

import cocotb

import numpy as np

from hw.interfaces import Op, Packer, mem_request_layout, mem_response_layout
from hw.node import register_address
from .agents import Bench
from .driver import ETYPES, REMOTE_SPACE


__all__ = ["GPUPort", "GemmKernel", "RSKernel", "AGKernel", "CheckKernel", "KernelRunner",
           "compare_chunk", "CONFIGS"]


#: The configurations of paper section 5.3 that run on the hardware.
CONFIGS = ("sequential", "t3", "t3-mca")

#: Also accepted by :class:`System`: ``rs-nmc``, the fused configuration with a GEMM of no
#: input reads and no compute time (its output stores only): the reduce-scatter with NMC in
#: isolation, for Ideal-RS+NMC.
ISOLATED_RS = "rs-nmc"


class GPUPort:
    """One node's compute port, responses and ``comm_done``, for the kernels.

    ``send(request, done)``: queue a request; ``done(response)`` is called when its response
    arrives (local requests, in order) or when the port takes it (remote stores, which have no
    response here).  ``arrivals`` counts ``comm_done`` pulses.
    """

    def __init__(self, dut, g, params):
        pre = f"gpu{g}"
        self.valid = getattr(dut, f"{pre}_compute__valid")
        self.ready = getattr(dut, f"{pre}_compute__ready")
        self.payload = getattr(dut, f"{pre}_compute__payload")
        self.r_valid = getattr(dut, f"{pre}_resp__valid")
        self.r_ready = getattr(dut, f"{pre}_resp__ready")
        self.r_payload = getattr(dut, f"{pre}_resp__payload")
        self.comm_done = getattr(dut, f"{pre}_comm_done")
        self.req = Packer(mem_request_layout(params))
        self.resp = Packer(mem_response_layout(params))
        self.queue = collections.deque()
        self.pending = collections.deque()
        self.arrivals = 0
        self.errors = []
        self._offer = None
        self._valid_driven = 0

    def reset(self):
        self.valid.value = 0
        self.r_ready.value = 1

    def send(self, request, done=None):
        self.queue.append((request, done))

    def on_edge(self, cycle):
        if self._offer is None and self.queue:
            self._offer = self.queue.popleft()
            self.payload.value = self.req.pack(self._offer[0])
            if not self._valid_driven:
                self.valid.value = self._valid_driven = 1
        elif self._offer is None and self._valid_driven:
            self.valid.value = self._valid_driven = 0

    def on_settle(self):
        if self._offer is not None and int(self.ready.value):
            request, done = self._offer
            self._offer = None
            if request["addr"] >= REMOTE_SPACE and request["op"] != Op.READ.value:
                if done is not None:
                    done(None)
            else:
                self.pending.append(done)
        if int(self.r_valid.value):
            resp = self.resp.unpack(int(self.r_payload.value))
            if resp["error"]:
                self.errors.append(resp)
            done = self.pending.popleft()
            if done is not None:
                done(resp)
        if int(self.comm_done.value):
            self.arrivals += 1


def _beat(value, dtype, params):
    return np.frombuffer(value.to_bytes(params.beat_bytes, "little"), dtype=dtype)


def _word(array):
    return int.from_bytes(array.tobytes(), "little")


class Kernel:
    """A kernel on one GPU: ``tick(now)`` every cycle until ``done``."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.done = False
        self.start = self.end = None
        self.now = 0

    def tick(self, now):
        self.now = now
        if self.start is None:
            self.start = now
        if not self.done and self.step():
            self.done, self.end = True, now

    def step(self):
        raise NotImplementedError


class GemmKernel(Kernel):
    """The GEMM on ``cus`` CUs (:mod:`sim.workload`'s throughput model).

    ``mode``: ``"t3"`` (step-1 tiles as remote updates through the window, the others as
    tracked op-and-stores: the chunks of steps 2..G-1 are tracked, the GPU's own chunk is
    not) or ``"sequential"`` (plain local stores).  ``on_first_stage`` is called when the first
    ``cus`` workgroups have finished (the arbiter's calibration window)."""

    def __init__(self, g, workload, port, layout, mode, on_first_stage=None, free=False):
        super().__init__(f"gemm{g}", port)
        self.g, self.wl, self.layout, self.mode = g, workload, layout, mode
        self.todo = collections.deque(workload.schedule[g])
        self.active = []
        self.finished = 0
        self.on_first_stage = on_first_stage
        self.read_beats = 0 if free else workload.wg_read_beats()
        self.compute_cycles = 0 if free else workload.wg_compute_cycles()
        spec = workload.spec
        self.etype = ETYPES[spec.dtype]
        self.full = (1 << workload.params.beat_bytes) - 1
        self._read_cursor = 0

    def _read_address(self):
        a, b = self.layout["A"], self.layout["B"]
        beat = self.wl.params.beat_bytes
        span = (a.size + b.size) // beat
        k = self._read_cursor % span
        self._read_cursor += 1
        return a.base + k * beat if k < a.size // beat else b.base + (k - a.size // beat) * beat

    def _start(self, wg):
        state = {"wg": wg, "reads": 0, "stores": 0, "compute_until": None, "n_stores": 0}
        if self.read_beats == 0:
            state["compute_until"] = self.now + self.compute_cycles

        def read_done(resp):
            state["reads"] += 1
            if state["reads"] == self.read_beats:
                state["compute_until"] = self.now + self.compute_cycles
        for _ in range(self.read_beats):
            self.port.send({"addr": self._read_address(), "op": Op.READ.value,
                            "mask": self.full, "etype": self.etype.value,
                            "wg_id": wg.wg_id}, read_done)
        self.active.append(state)

    def _store(self, state):
        wg, g, wl = state["wg"], self.g, self.wl
        c_base = self.layout["C"].base
        gpus = wl.gpus
        if self.mode == "t3":
            remote = wg.step == 1
            op = Op.UPDATE
            # tracked where the tile is counted: at GPU g-1 for step 1 (its step 2, tracked if
            # that is not its own final chunk), here for steps 2..G-1
            tracked = (2 <= gpus - 1) if remote else (2 <= wg.step <= gpus - 1)
        else:
            remote, op, tracked = False, Op.STORE, False

        def store_done(resp):
            state["stores"] += 1
            if state["stores"] == state["n_stores"]:
                self.active.remove(state)
                self.finished += 1
                if self.finished == min(self.wl.spec.cus, len(self.wl.schedule[g])) and \
                        self.on_first_stage is not None:
                    self.on_first_stage(self.now)
        beats = []
        for wf, (row0, col0) in enumerate(wg.tiles):
            for offset, value in wl.tile_beats(g, row0, col0):
                addr = c_base + offset + (REMOTE_SPACE if remote else 0)
                beats.append({"addr": addr, "data": value, "mask": self.full, "op": op.value,
                              "etype": self.etype.value, "tracked": int(tracked),
                              "wg_id": wg.wg_id, "wf_id": wf})
        state["n_stores"] = len(beats)
        for b in beats:
            self.port.send(b, store_done)

    def step(self):
        while self.todo and len(self.active) < self.wl.spec.cus:
            self._start(self.todo.popleft())
        for state in list(self.active):
            until = state["compute_until"]
            if until is not None and self.now >= until and state["n_stores"] == 0:
                self._store(state)
        return not self.todo and not self.active


class RSKernel(Kernel):
    """The baseline reduce-scatter on the CUs (ring, T3_SPEC section 3): at step ``j`` =
    1..G-1 GPU ``g`` reads its partial of chunk ``g + j`` (and, from step 2, the sum received
    into receive slot ``j - 1``), adds them on the CUs and stores the sum into GPU ``g - 1``'s
    slot ``j`` through the remote window; at the last step it stores the final sum of its own
    chunk locally.  Step ``j >= 2`` waits until slot ``j - 1`` has fully arrived."""

    def __init__(self, g, workload, port, layout):
        super().__init__(f"rs{g}", port)
        self.step_starts = []
        self.g, self.wl, self.layout = g, workload, layout
        self.step_no = 0
        self.base_arrivals = port.arrivals
        self.chunk_beats = layout["chunk_beats"]
        self.outstanding = 0
        self.etype = ETYPES[workload.spec.dtype]
        self.full = (1 << workload.params.beat_bytes) - 1

    def _begin(self, j):
        g, gpus, wl, p = self.g, self.wl.gpus, self.wl, self.wl.params
        chunk = (g + j) % gpus
        c, recv = self.layout["C"], self.layout["R"]
        chunk_bytes = self.chunk_beats * p.beat_bytes
        need = 1 if j == 1 else 2
        pending = [dict() for _ in range(self.chunk_beats)]

        def got(resp, i, key):
            self.outstanding -= 1
            parts = pending[i]
            parts[key] = resp["data"]
            if len(parts) < need:
                return
            if need == 1:
                value = parts["local"]
            else:
                with np.errstate(all="ignore"):
                    total = (_beat(parts["recv"], wl.dtype, p) +
                             _beat(parts["local"], wl.dtype, p)).astype(wl.dtype)
                value = _word(total)
            if j < gpus:
                addr = REMOTE_SPACE + recv.base + (j - 1) * chunk_bytes + i * p.beat_bytes
            else:
                addr = c.base + chunk * chunk_bytes + i * p.beat_bytes
            self.outstanding += 1
            self.port.send({"addr": addr, "data": value, "mask": self.full,
                            "op": Op.STORE.value, "etype": self.etype.value}, self._stored)
        # the two operands are read as two streams (row hits), as a GPU's many wavefronts and
        # the memory controller's row batching would; interleaved beat by beat, every read
        # would be a row conflict in the in-order DRAM model
        sources = [("local", c.base + chunk * chunk_bytes)]
        if need == 2:
            sources.append(("recv", recv.base + (j - 2) * chunk_bytes))
        for key, base in sources:
            for i in range(self.chunk_beats):
                self.outstanding += 1
                self.port.send({"addr": base + i * p.beat_bytes, "op": Op.READ.value,
                                "mask": self.full}, lambda r, i=i, key=key: got(r, i, key))

    def _stored(self, resp):
        self.outstanding -= 1

    def step(self):
        gpus = self.wl.gpus
        if self.outstanding or self.port.queue:
            return False
        if self.step_no == gpus:
            return True
        j = self.step_no + 1
        if j >= 2 and self.port.arrivals - self.base_arrivals < (j - 1) * self.chunk_beats:
            return False
        self.step_no = j
        self.step_starts.append(self.now)
        self._begin(j)
        return False


class AGKernel(Kernel):
    """All-gather on the CUs: at step ``j`` = 1..G-1 GPU ``g`` copies chunk ``g + j - 1``
    (its own final chunk first, then what it received) into GPU ``g - 1``'s output through
    the remote window; step ``j >= 2`` waits until the chunk has arrived."""

    def __init__(self, g, workload, port, layout):
        super().__init__(f"ag{g}", port)
        self.g, self.wl, self.layout = g, workload, layout
        self.step_no = 0
        self.base_arrivals = port.arrivals
        self.chunk_beats = layout["chunk_beats"]
        self.outstanding = 0
        self.full = (1 << workload.params.beat_bytes) - 1
        self.etype = ETYPES[workload.spec.dtype]

    def _begin(self, j):
        p = self.wl.params
        chunk = (self.g + j - 1) % self.wl.gpus
        c = self.layout["C"]
        chunk_bytes = self.chunk_beats * p.beat_bytes
        for i in range(self.chunk_beats):
            addr = c.base + chunk * chunk_bytes + i * p.beat_bytes

            def got(resp, addr=addr):
                self.port.send({"addr": REMOTE_SPACE + addr, "data": resp["data"],
                                "mask": self.full, "op": Op.STORE.value,
                                "etype": self.etype.value}, self._stored)
            self.outstanding += 2
            self.port.send({"addr": addr, "op": Op.READ.value, "mask": self.full},
                           lambda r, got=got: (self._stored(r), got(r)))

    def _stored(self, resp):
        self.outstanding -= 1

    def step(self):
        if self.outstanding or self.port.queue:
            return False
        if self.step_no == self.wl.gpus - 1:
            return True
        j = self.step_no + 1
        if j >= 2 and self.port.arrivals - self.base_arrivals < (j - 1) * self.chunk_beats:
            return False
        self.step_no = j
        self._begin(j)
        return False


class CheckKernel(Kernel):
    """Reads chunks of the output back through the compute port (after the measured phases)
    and keeps them for the scoreboard."""

    def __init__(self, g, workload, port, layout, chunks):
        super().__init__(f"check{g}", port)
        self.wl, self.layout = workload, layout
        self.values = {}
        p = workload.params
        self.expected = 0
        chunk_bytes = layout["chunk_beats"] * p.beat_bytes
        full = (1 << p.beat_bytes) - 1
        for chunk in chunks:
            for i in range(layout["chunk_beats"]):
                addr = layout["C"].base + chunk * chunk_bytes + i * p.beat_bytes
                self.expected += 1
                port.send({"addr": addr, "op": Op.READ.value, "mask": full},
                          lambda r, key=(chunk, i): self.values.__setitem__(key, r["data"]))

    def step(self):
        return len(self.values) == self.expected

    def chunk(self, chunk):
        """The chunk read back, as an ``M x N/G`` array."""
        p, wl = self.wl.params, self.wl
        raw = b"".join(self.values[(chunk, i)].to_bytes(p.beat_bytes, "little")
                       for i in range(self.layout["chunk_beats"]))
        return np.frombuffer(raw, dtype=wl.dtype).reshape(wl.chunk_cols, wl.spec.m).T


def compare_chunk(gpu, chunk, got, want):
    """Bit-exact comparison; raises ``AssertionError`` naming GPU, chunk, element (row and
    column within the chunk) and both values."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    gb = got.view(np.uint8).reshape(got.shape + (-1,))
    wb = want.view(np.uint8).reshape(want.shape + (-1,))
    diff = np.argwhere(np.any(gb != wb, axis=-1))
    if diff.size:
        r, c = diff[0]
        raise AssertionError(
            f"GPU {gpu}, chunk {chunk}: {len(diff)} element(s) differ; first at row {r}, "
            f"column {c}: got {got[r, c]!r} (0x{got[r, c].view(np.uint8).tobytes()[::-1].hex()})"
            f", want {want[r, c]!r} (0x{want[r, c].view(np.uint8).tobytes()[::-1].hex()})")


class KernelRunner:
    """Bench agent that ticks the running kernels each cycle (before the ports drive)."""

    def __init__(self):
        self.kernels = []
        self.cycle = 0

    def reset(self):
        pass

    def on_edge(self, cycle):
        self.cycle = cycle
        for k in self.kernels:
            if not k.done:
                k.tick(cycle)

    def on_settle(self):
        pass

    def all_done(self):
        return all(k.done for k in self.kernels)


# --- layout and configuration -------------------------------------------------------------------

#: The input matrices' reads cycle over a window of at most this many bytes each: their values
#: are irrelevant to the hardware (the partials are computed in numpy), only their traffic is.
INPUT_WINDOW_BYTES = 16 * 1024


def allocate(driver, wl):
    """The same buffers on every GPU: ``C`` (output), ``A``/``B`` (input windows), ``R``
    (the baseline's receive slots).  Returns ``{name: Buffer}`` of GPU 0 (all are alike)."""
    s, gpus = wl.spec, wl.gpus
    e = s.elem_bytes
    beat = wl.params.beat_bytes
    rows_a = max(1, min(s.k, INPUT_WINDOW_BYTES // (s.m * e)))
    cols_b = max(beat // e, min(s.n, INPUT_WINDOW_BYTES // (s.k * e)))
    layout = None
    for g in range(gpus):
        bufs = {"C": driver.malloc("C", g, s.m, s.n, s.dtype),
                "A": driver.malloc("A", g, s.m, rows_a, s.dtype),
                "B": driver.malloc("B", g, s.k, cols_b, s.dtype),
                "R": driver.malloc("R", g, s.m, wl.chunk_cols * (gpus - 1), s.dtype)}
        layout = layout or bufs
    layout = dict(layout)
    layout["chunk_beats"] = s.m * wl.chunk_cols * e // beat
    return layout


def configure_fused(driver, wl, layout, policy):
    """T3's set-up (paper Figure 12) for the fused GEMM -> ring-RS on every GPU ``g``:
    ``remote_map`` of the step-1 chunk ``g+1`` into GPU ``g-1``; ``dma_map`` of the chunks of
    steps 2..G-1 (updates per element 2) to the same place on GPU ``g-1``, the one that is GPU
    ``g-1``'s own final chunk without tracking there; the arbiter's policy."""
    gpus, s = wl.gpus, wl.spec
    nc = wl.chunk_cols
    for g in range(gpus):
        dst = (g - 1) % gpus
        c_here, c_there = driver.buffer(g, "C"), driver.buffer(dst, "C")
        step1 = (g + 1) % gpus
        driver.remote_map(c_here.cols_range(step1 * nc, nc), dst,
                          c_there.cols_range(step1 * nc, nc))
        # group the chunks of steps 2..G-1 into contiguous ranges with one destination kind
        runs = []
        for step in range(2, gpus):
            chunk = (g + step) % gpus
            final_there = chunk == dst
            if runs and runs[-1][1] + runs[-1][2] == chunk and runs[-1][0] == final_there:
                runs[-1][2] += 1
            else:
                runs.append([final_there, chunk, 1])
        for final_there, first, count in runs:
            driver.dma_map(c_here.cols_range(first * nc, count * nc), dst,
                           c_there.cols_range(first * nc, count * nc), op="update",
                           updates_per_element=2, tile=(s.tile_rows, s.tile_cols),
                           tracked_at_dst=not final_there)
        tracked_steps = range(2, gpus)
        driver.gemm(c_here, wl.stages(g, tracked_steps), s.wfs_per_wg, update=True)
    driver.set_arbitration(policy, auto_threshold=policy == "MCA")


def map_ring_windows(driver, wl, buffer):
    """Every GPU's remote window: its whole ``buffer`` onto the same buffer of GPU ``g-1``
    (the baseline's RS into the receive slots ``R``, and the all-gather into ``C``)."""
    driver.remote_unmap()
    driver.dma_unmap()
    for g in range(wl.gpus):
        dst = (g - 1) % wl.gpus
        driver.remote_map(driver.buffer(g, buffer).whole(), dst,
                          driver.buffer(dst, buffer).whole())


#: Counters read after each phase: (block, register).
COUNTERS = [("nmc", f"{k}_{s}") for k in ("reads", "stores", "updates") for s in
            ("compute", "comm")] + [
    ("node", "remote_out"), ("node", "comm_writes"), ("dma", "link_busy"),
    ("dma", "tiles_sent"), ("dma", "beats_sent"), ("dma", "status"), ("dma", "errors"),
    ("tracker", "peak_occupancy"), ("tracker", "triggers"), ("tracker", "status"),
    ("tracker", "errors"), ("tracker", "tracked"), ("tracker", "occupancy"), ("dma", "triggers"),
    ("dma", "reads"), ("dma", "beats_received"), ("nmc", "errors"), ("arbiter", "forced"),
    ("arbiter", "threshold"), ("arbiter", "comm_max_wait")]


class ArrivalWatch(Kernel):
    """Done when ``target`` communication writes have completed at the port."""

    def __init__(self, g, port, target):
        super().__init__(f"arrivals{g}", port)
        self.base, self.target = port.arrivals, target

    def step(self):
        return self.port.arrivals - self.base >= self.target


class System:
    """One configuration run on a ring DUT (the ``run_system`` cocotb test drives it)."""

    def __init__(self, dut, params, nparams, wl, config, progress=None):
        from cocotbext.axi import AxiLiteBus, AxiLiteMaster
        from hw.node import block_registers
        from .driver import Driver
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

            def first_stage(g):
                return lambda now: cocotb.start_soon(self.write(g, "node", "ctrl", 0b100))

            def finished(kernel, g):
                step = kernel.step

                def wrapped():
                    done = step()
                    if done:
                        cocotb.start_soon(self.write(g, "node", "ctrl", 0b001))   # drain
                    return done
                return wrapped
            kernels = []
            for g in range(gpus):
                if policy == "MCA":
                    await self.write(g, "node", "ctrl", 0b010)      # calibration starts
                gemm = GemmKernel(g, wl, self.ports[g], layout, "t3",
                                  on_first_stage=first_stage(g) if policy == "MCA" else None,
                                  free=self.config == ISOLATED_RS)
                if policy == "MCA":
                    gemm.step = finished(gemm, g)
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
        from .workload import ring_reference
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

        def writes(s, stream):
            return s[f"nmc.stores_{stream}"] + s[f"nmc.updates_{stream}"]
        dram = dict.fromkeys(("gemm_reads", "gemm_writes", "rs_reads", "rs_writes",
                              "ag_reads", "ag_writes"), 0)
        if self.config == "sequential":
            g_, r_ = sums["gemm"], sums["rs"]
            dram["gemm_reads"] = g_["nmc.reads_compute"] + g_["nmc.reads_comm"]
            dram["gemm_writes"] = writes(g_, "compute") + writes(g_, "comm")
            dram["rs_reads"] = r_["nmc.reads_compute"] + r_["nmc.reads_comm"]
            dram["rs_writes"] = writes(r_, "compute") + writes(r_, "comm")
            cycles = {"gemm": ph["gemm"]["cycles"], "rs": ph["rs"]["cycles"]}
            link_phase = "rs"
        else:
            f = sums["gemm_rs"]
            remote = f["node.remote_out"]
            dram["gemm_reads"] = f["nmc.reads_compute"]
            dram["gemm_writes"] = writes(f, "compute") + remote
            dram["rs_reads"] = f["nmc.reads_comm"]
            dram["rs_writes"] = writes(f, "comm") - remote
            cycles = {"gemm_rs": ph["gemm_rs"]["cycles"]}
            link_phase = "gemm_rs"
        a = sums["ag"]
        dram["ag_reads"] = a["nmc.reads_compute"] + a["nmc.reads_comm"]
        dram["ag_writes"] = writes(a, "compute") + writes(a, "comm")
        cycles["ag"] = ph["ag"]["cycles"]
        from .workload import LINK_BANDWIDTH
        bw = LINK_BANDWIDTH[0] / LINK_BANDWIDTH[1]
        lp = ph[link_phase]
        link_util = sum(d["dma.link_busy"] for d in lp["delta"]) / (lp["cycles"] * self.gpus * bw)
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

    Configuration (:func:`sim.runner.tb_config`): ``params``, ``nparams``, ``gpus``, ``spec``
    (:class:`sim.workload.GemmSpec` fields), ``config``, ``seed``, ``out``, ``progress``
    (a file the command line follows)."""
    from hw.node import NodeParams
    from hw.params import T3Params
    from .runner import tb_config
    from .workload import GemmSpec, Workload
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
