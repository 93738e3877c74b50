"""Golden model of the MC arbiter, cycle by cycle.

The arbitration decision is a function of the state at the start of a cycle and of that cycle's
inputs (``compute.valid``, ``comm.valid``, ``tap.ready``, ``o.ready``, ``drain``, calibration
marks), so the model steps one cycle at a time on the same inputs the RTL saw and must make the
same decision in every cycle.  It also keeps the MCQ's contents, so that the order of ``o`` and
the per-stream occupancy follow: an entry enqueued in cycle ``c`` can leave from cycle
``c + 2``, and not before the entry ahead of it has left (it is written into the MCQ a cycle
after the decision; the MCQ is block RAM with a synchronous read and an output register, which
a write into an empty queue goes to directly, so the MCQ times like a queue in registers).
"""

import collections
import dataclasses

from .config import ArbiterParams, DEFAULT_CALIBRATION, Policy


__all__ = ["ArbiterModel", "CycleInputs", "check_arbiter_run", "MCQ_LATENCY"]


#: Cycles from a request's enqueue to the first cycle it can leave on ``o``.
MCQ_LATENCY = 2


@dataclasses.dataclass(frozen=True)
class CycleInputs:
    compute_valid: bool
    comm_valid: bool
    tap_ready: bool = True
    o_ready: bool = True
    drain: bool = False
    calib_start: bool = False
    calib_end: bool = False
    threshold_write: int = None     # the host writes ``threshold`` in this cycle
    retired: bool = False           # ``retire``: the DRAM scheduler took a request out
    retired_comm: bool = False      # ... of the communication stream


class ArbiterModel:
    """Cycle-level arbiter.

    ``step(inputs, compute_item=None, comm_item=None)`` returns ``"compute"``, ``"comm"`` or
    ``None`` (who enqueued this cycle) and advances one clock edge.  ``dequeued`` lists the
    items that left ``o`` with their stream.
    """

    def __init__(self, aparams: ArbiterParams, policy=Policy.MCA, threshold=None,
                 starve_limit=64, calibration=None, auto_threshold=False, retire=False):
        self.aparams = aparams
        self.policy = int(policy)
        self.threshold = aparams.no_limit if threshold is None else threshold
        self.starve_limit = starve_limit
        self.calibration = calibration or DEFAULT_CALIBRATION(aparams)
        self.auto_threshold = auto_threshold
        self.retire = retire
        # with ``retire``: requests dequeued and not yet retired, per stream
        self.held = collections.Counter()
        self.queue = collections.deque()       # (stream, item)
        self.leaves_from = collections.deque()  # the first cycle each entry can be on ``o``
        self.cycle = 0
        self.last_comm = False
        self.starve = 0
        self.draining = False
        self.calibrating = False
        self.run_sum = self.run_cycles = 0
        self.calib_sum = self.calib_cycles = 0
        self.bad_policy = False
        self.calib_lost = False
        self.dequeued = []
        self.counters = collections.Counter()
        self.comm_wait_run = 0
        self.comm_max_wait = 0
        self.peak_occupancy = 0
        self.occupancy_sum = 0
        self.compute_occupancy_sum = 0

    @property
    def occupancy(self):
        return len(self.queue) + sum(self.held.values())

    @property
    def compute_occupancy(self):
        return sum(1 for s, _ in self.queue if s == "compute") + self.held["compute"]

    def decide(self, x: CycleInputs):
        """(pick, forced): the stream the policy picks this cycle, before the room check."""
        c, mv = x.compute_valid, x.comm_valid
        forced = (self.policy == Policy.MCA and self.starve_limit != 0 and mv
                  and self.starve >= self.starve_limit)
        if self.policy == Policy.COMPUTE_FIRST:
            return ("compute" if c else "comm" if mv else None), forced
        if self.policy == Policy.MCA:
            if (self.draining or x.drain) and mv:
                return "comm", forced
            if forced:
                return "comm", forced
            if c:
                return "compute", forced
            return ("comm" if mv and self.occupancy < self.threshold else None), forced
        if c and mv:
            return ("compute" if self.last_comm else "comm"), forced
        return ("compute" if c else "comm" if mv else None), forced

    def step(self, x: CycleInputs, compute_item=None, comm_item=None):
        room = self.occupancy < self.aparams.depth and x.tap_ready
        pick, forced = self.decide(x)
        issued = pick if room else None
        draining_now = self.draining or x.drain
        # statistics of this cycle (on the state at its start)
        self.counters["cycles"] += 1
        self.peak_occupancy = max(self.peak_occupancy, self.occupancy)
        self.occupancy_sum += self.occupancy
        if issued == "compute":
            self.counters["compute_issues"] += 1
        if issued == "comm":
            self.counters["comm_issues"] += 1
            if forced and not draining_now:
                self.counters["forced"] += 1
        if x.compute_valid and issued != "compute":
            self.counters["compute_wait"] += 1
        if x.comm_valid and issued != "comm":
            self.comm_wait_run += 1
            self.comm_max_wait = max(self.comm_max_wait, self.comm_wait_run)
        else:
            self.comm_wait_run = 0
        # calibration (uses the compute occupancy at the start of the cycle)
        compute_occ = self.compute_occupancy
        self.compute_occupancy_sum += compute_occ
        if x.calib_start:
            new_calibrating, self.run_sum_next, self.run_cycles_next = True, 0, 0
        elif self.calibrating:
            new_calibrating = True
            self.run_sum_next = self.run_sum + compute_occ
            self.run_cycles_next = self.run_cycles + 1
        else:
            new_calibrating = False
            self.run_sum_next, self.run_cycles_next = self.run_sum, self.run_cycles
        if x.calib_end and self.calibrating:
            if not x.calib_start:
                new_calibrating = False
            self.calib_sum, self.calib_cycles = self.run_sum, self.run_cycles
            if self.auto_threshold and self.run_cycles:
                if x.threshold_write is None:
                    self.threshold = self.lookup(self.run_sum, self.run_cycles)
                else:
                    self.calib_lost = True      # the host's write wins
        if x.threshold_write is not None:
            self.threshold = x.threshold_write
        self.calibrating = new_calibrating
        self.run_sum, self.run_cycles = self.run_sum_next, self.run_cycles_next
        # the edge: dequeue the head (if o.ready), enqueue the issued request
        if self.queue and self.leaves_from[0] <= self.cycle and x.o_ready:
            self.dequeued.append(self.queue.popleft())
            self.leaves_from.popleft()
            if self.retire:
                self.held[self.dequeued[-1][0]] += 1
        if self.retire and x.retired:
            stream = "comm" if x.retired_comm else "compute"
            if self.held[stream] == 0:
                raise ValueError(f"cycle {self.cycle}: a {stream} request retired that the "
                                 f"MCQ did not hand out")
            self.held[stream] -= 1
        if issued is not None:
            self.queue.append((issued, compute_item if issued == "compute" else comm_item))
            self.leaves_from.append(self.cycle + MCQ_LATENCY)
            self.last_comm = issued == "comm"
        if issued == "comm" or not x.comm_valid:
            self.starve = 0
        elif room:
            self.starve = min(self.starve + 1, 0xFFFF)
        self.draining = x.drain or (self.draining and x.comm_valid)
        if self.policy == 3:
            self.bad_policy = True
        self.cycle += 1
        return issued

    def lookup(self, total, cycles):
        """The calibration table's threshold for a mean compute occupancy of total / cycles."""
        for row in self.calibration[:-1]:
            if total < row.bound * cycles:
                return row.threshold
        return self.calibration[-1].threshold


def check_arbiter_run(model, cycles, dequeued, regs=None, compute_items=(), comm_items=()):
    """Scoreboard shared by both test layers.

    ``cycles`` lists, per cycle, ``(CycleInputs, issued)`` where ``issued`` is what the RTL
    enqueued (``"compute"``, ``"comm"`` or ``None``); ``dequeued`` the RTL's ``o`` handshakes as
    ``(stream name, item)``.  The model replays the inputs and must issue the same stream in
    every cycle; the MCQ output must equal the model's; each stream's output must be its input,
    in order, without loss or duplication; ``regs`` (if given) must equal the model's counters.
    """
    c_index = m_index = 0
    for cycle, (inputs, issued) in enumerate(cycles):
        item_c = compute_items[c_index] if c_index < len(compute_items) else None
        item_m = comm_items[m_index] if m_index < len(comm_items) else None
        want = model.step(inputs, item_c, item_m)
        assert issued == want, f"cycle {cycle}: hardware issued {issued}, model {want} " \
                               f"(inputs {inputs}, occupancy {model.occupancy})"
        c_index += issued == "compute"
        m_index += issued == "comm"
    assert dequeued == model.dequeued[:len(dequeued)], "MCQ output differs from the model"
    for name, items in (("compute", compute_items), ("comm", comm_items)):
        out = [item for stream, item in dequeued if stream == name]
        assert out == list(items[:len(out)]), f"{name} stream reordered, lost or duplicated"
    if regs is not None:
        # the registers are read after the run, while the arbiter idles: only ``cycles`` moves
        assert 0 <= regs["cycles"] - model.counters["cycles"] <= 100
        for name in ("compute_issues", "comm_issues", "compute_wait", "forced"):
            assert regs[name] == model.counters[name], \
                f"{name}: hardware {regs[name]}, model {model.counters[name]}"
        for name, want in (("comm_max_wait", model.comm_max_wait),
                           ("peak_occupancy", model.peak_occupancy),
                           ("occupancy_sum", model.occupancy_sum),
                           ("compute_occupancy_sum", model.compute_occupancy_sum),
                           ("threshold", model.threshold),
                           ("calib_sum", model.calib_sum), ("calib_cycles", model.calib_cycles)):
            assert regs[name] == want, f"{name}: hardware {regs[name]}, model {want}"
        from .config import Status
        sticky = Status.BAD_POLICY | Status.CALIB_LOST
        want = (Status.BAD_POLICY if model.bad_policy else 0) | \
            (Status.CALIB_LOST if model.calib_lost else 0)
        assert regs["status"] & sticky == want, \
            f"status: hardware {regs['status'] & sticky:#x}, model {int(want):#x}"
