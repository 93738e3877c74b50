"""``t3 run --trace FILE.json``, ``t3 compare --trace FILE.json``: a run's timeline as a trace
that Perfetto (ui.perfetto.dev) and Chrome's ``about:tracing`` open.

The format is the Trace Event Format's JSON object form (``{"traceEvents": [...]}``): complete
slices (``"ph": "X"``), counters (``"C"``) and the names of processes and threads (``"M"``).
Its input is the same samples as :mod:`sim.system.timeline` (every GPU's counters read over
its configuration port every ``--timeline-period`` cycles, no Python per cycle); one cycle of
the model is drawn as one nanosecond (the paper's GPU clock is about 1 GHz), so the viewers'
time axis reads in cycles.

Each GPU of each run is a process (``t3 · GPU 0``; the runs of ``t3 compare`` one after the
other, so Sequential and T3 of one workload open side by side) with three slice tracks and
four counters:

* **phases** — the run's phases (``gemm``, ``rs``, ``ag`` or ``gemm_rs``, ``ag``, ``check``),
  from where the testbench started each to its length in ``phase_cycles`` (exact cycles);
* **GEMM stage** — ``stage s``: the ring step whose output chunk the GEMM is storing, from
  the sample where the GEMM issues requests at that stage to the last (sample resolution);
* **ring steps received** — ``rs step s`` / ``ag step s``: from the sample where the step's
  first beats had arrived at this GPU to the sample where its whole chunk had (the receive
  counter ``dma.beats_received`` against the chunk's beats);
* counters **link busy** (fraction of the link's capacity in the interval), **MCQ entries**
  (``compute`` and ``communication``, stacked), **Tracker entries** and **GEMM stalled**
  (fraction of the interval a compute request waited at the arbiter), and with nodes that
  have an L2 (``t3 run --l2``, the paper's presets) **L2 read hit rate** (the interval's read
  hits over its reads; no point where an interval has no reads).
"""

import json
import math
from pathlib import Path

from sim.system.timeline import series


__all__ = ["events", "write", "PHASE_TID", "STAGE_TID", "STEP_TID", "COUNTERS", "L2_COUNTERS"]


#: The slice tracks: thread ids and names.
PHASE_TID, STAGE_TID, STEP_TID = 1, 2, 3
TRACKS = {PHASE_TID: "phases", STAGE_TID: "GEMM stage", STEP_TID: "ring steps received"}
#: Counter tracks: name -> (series keys of :func:`sim.system.timeline.series`, arg names).
COUNTERS = {"link busy": (("link",), ("fraction",)),
            "MCQ entries": (("mcq_compute", "mcq_comm"), ("compute", "communication")),
            "Tracker entries": (("tracker",), ("entries",)),
            "GEMM stalled": (("stalled",), ("fraction",))}
#: The counter track of runs whose nodes have an L2.
L2_COUNTERS = {"L2 read hit rate": (("l2_hits",), ("fraction",))}
#: Phases whose receive counter counts ring steps (the reduce-scatter, the all-gather).
STEP_PHASES = {"rs": "rs", "gemm_rs": "rs", "ag": "ag"}
#: Processes of one run: pids ``run_index * PIDS_PER_RUN + gpu + 1``.
PIDS_PER_RUN = 1000


def _us(cycle):
    """A cycle as the format's microseconds (one cycle drawn as one nanosecond)."""
    return cycle / 1000


def _slices(points, end):
    """``[(value, first cycle, last cycle)]``: runs of equal, non-None values of ``points``
    (``[(cycle, value)]``), each until the next change (the last until ``end``)."""
    out = []
    for cycle, value in points:
        if out and out[-1][0] == value and out[-1][2] is None:
            continue
        if out and out[-1][2] is None:
            out[-1] = (out[-1][0], out[-1][1], cycle)
        out.append((value, cycle, None))
    out = [(v, a, end if b is None else b) for v, a, b in out]
    return [(v, a, b) for v, a, b in out if v is not None and b > a]


def _received_steps(result, gpu):
    """``[(name, first cycle, last cycle)]``: GPU ``gpu``'s ring steps from its receive
    counter (cumulative over the run), in each phase that has steps: from the sample before
    the step's first beats had arrived (or its predecessor's end, if later) to the first
    sample with its whole chunk (the phase's last sample if it never completes)."""
    tl = result["timeline"]
    at = tl["regs"].index("dma.beats_received")
    chunk, steps = tl["chunk_beats"], result["gpus"] - 1
    segments = []                                   # [(phase, [(cycle, count)])], in order
    for s in tl["samples"]:
        if not segments or segments[-1][0] != s["phase"]:
            segments.append((s["phase"], []))
        segments[-1][1].append((s["cycle"], s["gpus"][gpu][at]))
    out, before = [], None
    for phase, points in segments:
        kind = STEP_PHASES.get(phase)
        if kind is not None:
            base = before[1] if before else 0       # what arrived before the phase
            seq = [before or (points[0][0], 0)] + points
            last = tl["spans"].get(phase, (seq[0][0],))[0]      # not before the phase
            for step in range(1, steps + 1):
                start = next((seq[i - 1][0] for i in range(1, len(seq))
                              if seq[i][1] - base > (step - 1) * chunk), None)
                if start is None:
                    break
                # a step's first beats arrive in the interval its predecessor completes in
                start = max(start, last)
                last = next((c for c, n in seq if n - base >= step * chunk), points[-1][0])
                out.append((f"{kind} step {step}", start, last))
        before = points[-1]
    return out


def events(result, run_index=0, label=None):
    """The trace events of one run (:func:`sim.system.run.run_config`'s result with a
    ``timeline``)."""
    if "timeline" not in result:
        raise ValueError("a trace needs the run's timeline samples (run with timeline=PERIOD)")
    label = label or result["config"]
    data = series(result)
    cycles = data["cycles"]
    end = cycles[-1] if cycles else 0
    phase_cycles = result.get("phase_cycles", {})
    out = []
    for g in range(result["gpus"]):
        pid = run_index * PIDS_PER_RUN + g + 1
        out += [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"name": f"{label} · GPU {g}"}},
                {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"sort_index": pid}}]
        for tid, name in TRACKS.items():
            out += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": name}},
                    {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"sort_index": tid}}]
        for name, first, last in data["phases"]:
            length = phase_cycles.get(name, last - first)
            out.append({"name": name, "cat": "phase", "ph": "X", "pid": pid, "tid": PHASE_TID,
                        "ts": _us(first), "dur": _us(length), "args": {"cycles": length}})
        stages = [(c, None if math.isnan(v) else int(v))
                  for c, v in zip(cycles, data["stage"][g])]
        for stage, first, last in _slices(stages, end):
            # a stage's last sample is the phase's: it ends with the phase, not at the next
            last = min([last] + [b for _, a, b in data["phases"] if a <= first < b])
            out.append({"name": f"stage {stage}", "cat": "gemm", "ph": "X", "pid": pid,
                        "tid": STAGE_TID, "ts": _us(first), "dur": _us(last - first),
                        "args": {"stage": stage}})
        for name, first, last in _received_steps(result, g):
            out.append({"name": name, "cat": "link", "ph": "X", "pid": pid, "tid": STEP_TID,
                        "ts": _us(first), "dur": _us(last - first), "args": {}})
        counters = dict(COUNTERS, **(L2_COUNTERS if "l2_hits" in data else {}))
        for name, (keys, args) in counters.items():
            for i, cycle in enumerate(cycles):
                values = {a: data[k][g][i] for k, a in zip(keys, args)}
                if any(isinstance(x, float) and math.isnan(x) for x in values.values()):
                    continue                    # no reads in the interval: no hit rate
                out.append({"name": name, "cat": "counter", "ph": "C", "pid": pid, "tid": 0,
                            "ts": _us(cycle), "args": values})
    return out


def write(results, path):
    """Write ``results`` (``{label: result}``, e.g. ``{"t3": r}`` or ``t3 compare``'s every
    configuration) as one trace at ``path``; returns the path."""
    trace = []
    for i, (label, result) in enumerate(results.items()):
        trace += events(result, i, label)
    meta = {label: {"workload": r.get("workload"), "gpus": r["gpus"],
                    "cycles": r.get("cycles"), "period": r["timeline"]["period"]}
            for label, r in results.items()}
    Path(path).write_text(json.dumps({"traceEvents": trace, "displayTimeUnit": "ns",
                                      "otherData": {"t3": meta, "time": "1 cycle = 1 ns"}}))
    return Path(path)
