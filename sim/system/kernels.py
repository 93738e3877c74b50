"""The kernels the CUs run in the system testbench, as cocotb-side traffic generators.

Each kernel drives one GPU's :class:`sim.system.port.GPUPort` and is ticked once per cycle by
the :class:`KernelRunner` until it is ``done``:

* :class:`GemmKernel`: the GEMM on ``cus`` CUs, following :mod:`sim.system.workload`'s
  throughput model (input reads, compute delay, then the output tiles' stores with T3's flags);
* :class:`RSKernel`: the baseline's ring reduce-scatter on the CUs;
* :class:`AGKernel`: the all-gather on the CUs;
* :class:`CheckKernel`: reads the output back for the scoreboard;
* :class:`ArrivalWatch`: done when a GPU has received a given number of beats.

A kernel reports its progress through hooks rather than being patched: ``on_done(now)`` is
called once when it finishes, and :class:`GemmKernel` also calls ``on_first_stage(now)`` when
its first stage's workgroups (the first ring step's) have finished.
"""

import collections

import numpy as np

from hw.interfaces import Op
from sim.system.driver import ETYPES, REMOTE_SPACE
from sim.system.programs import slices


__all__ = ["Kernel", "GemmKernel", "RSKernel", "AGKernel", "CheckKernel", "ArrivalWatch",
           "KernelRunner"]


def _beat(value, dtype, params):
    return np.frombuffer(value.to_bytes(params.beat_bytes, "little"), dtype=dtype)


def _word(array):
    return int.from_bytes(array.tobytes(), "little")


class Kernel:
    """A kernel on one GPU: ``tick(now)`` every cycle until ``done``; ``on_done(now)`` (if
    given) is called once, in the cycle it finishes.  Subclasses implement :meth:`step`."""

    def __init__(self, name, port, on_done=None):
        self.name, self.port = name, port
        self.on_done = on_done
        self.done = False
        self.start = self.end = None
        self.now = 0

    def tick(self, now):
        self.now = now
        if self.start is None:
            self.start = now
        if not self.done and self.step():
            self.done, self.end = True, now
            if self.on_done is not None:
                self.on_done(now)

    def step(self):
        raise NotImplementedError


class GemmKernel(Kernel):
    """The GEMM on ``cus`` CUs (:mod:`sim.system.workload`'s throughput model).

    ``mode``: ``"t3"`` (step-1 tiles as remote updates through the window, the others as
    tracked op-and-stores: the chunks of steps 2..G-1 are tracked, the GPU's own chunk is
    not) or ``"sequential"`` (plain local stores).  ``on_first_stage`` is called when the first
    stage's workgroups (the first ring step's) have finished (the arbiter's calibration
    window); ``free``: no input
    reads and no compute time (the output stores only, for the isolated RS)."""

    def __init__(self, g, workload, port, layout, mode, on_first_stage=None, on_done=None,
                 free=False):
        super().__init__(f"gemm{g}", port, on_done)
        self.g, self.wl, self.layout, self.mode = g, workload, layout, mode
        self.todo = collections.deque(workload.schedule[g])
        self.active = []
        self.finished = 0
        self.on_first_stage = on_first_stage
        # the first stage: the first ring step's WGs (the producer in isolation)
        self.stage_wgs = sum(1 for wg in workload.schedule[g] if wg.step == 1)
        self.read_beats = 0 if free else workload.wg_read_beats()
        self.compute_cycles = 0 if free else workload.wg_compute_cycles()
        spec = workload.spec
        self.etype = ETYPES[spec.dtype]
        self.full = (1 << workload.params.beat_bytes) - 1
        self.a_read = workload.wg_read_split()[0]

    def _read_address(self, wg, k):
        """Read ``k`` of ``wg``: its ``A`` panel's beats, then its ``B`` panel's."""
        a, b = self.layout["A"], self.layout["B"]
        beat = self.wl.params.beat_bytes
        a_off, b_off = self.wl.read_offsets(wg)
        return a.base + (a_off + k) * beat if k < self.a_read else \
            b.base + (b_off + k - self.a_read) * beat

    def _start(self, wg):
        state = {"wg": wg, "reads": 0, "stores": 0, "compute_until": None, "n_stores": 0}
        if self.read_beats == 0:
            state["compute_until"] = self.now + self.compute_cycles

        def read_done(resp):
            state["reads"] += 1
            if state["reads"] == self.read_beats:
                state["compute_until"] = self.now + self.compute_cycles
        for k in range(self.read_beats):
            self.port.send({"addr": self._read_address(wg, k), "op": Op.READ.value,
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
                if self.finished == self.stage_wgs and \
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
    """The baseline reduce-scatter on the CUs (ring, ``docs/design.md`` section 3): at step ``j`` =
    1..G-1 GPU ``g`` reads its partial of chunk ``g + j`` (and, from step 2, the sum received
    into receive slot ``j - 1``), adds them on the CUs and stores the sum into GPU ``g - 1``'s
    slot ``j`` through the remote window; at the last step it stores the final sum of its own
    chunk locally.  Slice by slice (:data:`sim.system.programs.SLICE_BEATS`): a slice of step
    ``j >= 2`` waits until the same slice of slot ``j - 1`` has arrived."""

    def __init__(self, g, workload, port, layout):
        super().__init__(f"rs{g}", port)
        self.step_starts = []
        self.g, self.wl, self.layout = g, workload, layout
        self.base_arrivals = port.arrivals
        self.chunk_beats = layout["chunk_beats"]
        # (step, first beat, end beat): slice by slice, as the engine's rs_steps
        self.plan = collections.deque((j, first, end) for j in range(1, workload.gpus + 1)
                          for first, end in slices(self.chunk_beats))
        self.outstanding = 0
        self.etype = ETYPES[workload.spec.dtype]
        self.full = (1 << workload.params.beat_bytes) - 1

    def _begin(self, j, first, end):
        g, gpus, wl, p = self.g, self.wl.gpus, self.wl, self.wl.params
        chunk = (g + j) % gpus
        c, recv = self.layout["C"], self.layout["R"]
        chunk_bytes = self.chunk_beats * p.beat_bytes
        need = 1 if j == 1 else 2
        pending = {i: dict() for i in range(first, end)}

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
            for i in range(first, end):
                self.outstanding += 1
                self.port.send({"addr": base + i * p.beat_bytes, "op": Op.READ.value,
                                "mask": self.full}, lambda r, i=i, key=key: got(r, i, key))

    def _stored(self, resp):
        self.outstanding -= 1

    def step(self):
        if self.outstanding or self.port.queue:
            return False
        if not self.plan:
            return True
        j, first, end = self.plan[0]
        if j >= 2 and self.port.arrivals - self.base_arrivals < (j - 2) * self.chunk_beats + end:
            return False
        self.plan.popleft()
        if first == 0:
            self.step_starts.append(self.now)
        self._begin(j, first, end)
        return False


class AGKernel(Kernel):
    """All-gather on the CUs: at step ``j`` = 1..G-1 GPU ``g`` copies chunk ``g + j - 1``
    (its own final chunk first, then what it received) into GPU ``g - 1``'s output through
    the remote window, slice by slice; a slice of step ``j >= 2`` waits until it has arrived."""

    def __init__(self, g, workload, port, layout):
        super().__init__(f"ag{g}", port)
        self.g, self.wl, self.layout = g, workload, layout
        self.base_arrivals = port.arrivals
        self.chunk_beats = layout["chunk_beats"]
        self.plan = collections.deque((j, first, end) for j in range(1, workload.gpus)
                          for first, end in slices(self.chunk_beats))
        self.outstanding = 0
        self.full = (1 << workload.params.beat_bytes) - 1
        self.etype = ETYPES[workload.spec.dtype]

    def _begin(self, j, first, end):
        p = self.wl.params
        chunk = (self.g + j - 1) % self.wl.gpus
        c = self.layout["C"]
        chunk_bytes = self.chunk_beats * p.beat_bytes
        for i in range(first, end):
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
        if not self.plan:
            return True
        j, first, end = self.plan[0]
        if j >= 2 and self.port.arrivals - self.base_arrivals < (j - 2) * self.chunk_beats + end:
            return False
        self.plan.popleft()
        self._begin(j, first, end)
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


class ArrivalWatch(Kernel):
    """Done when ``target`` communication writes have completed at the port."""

    def __init__(self, g, port, target):
        super().__init__(f"arrivals{g}", port)
        self.base, self.target = port.arrivals, target

    def step(self):
        return self.port.arrivals - self.base >= self.target


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


