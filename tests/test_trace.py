"""``t3 compare --trace``: the trace every configuration of a real run writes is well formed as
the Trace Event Format says (every event has its fields, every slice closes inside its
track, timestamps rise per counter), and its slices agree with the run: the phases with the
run's phase cycles, the GEMM's stages and the ring steps in order inside their phases."""

import json
from collections import defaultdict

import pytest

from sim.system.trace import PHASE_TID, STAGE_TID, STEP_TID, STEP_PHASES, events
from t3.cli import main


GPUS = 2


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    trace, results = folder / "trace.json", folder / "results.json"
    assert main(["compare", "--gpus", str(GPUS), "--trace", str(trace), "--timeline-period",
                 "100", "--json", str(results)]) == 0
    return json.loads(trace.read_text()), json.loads(results.read_text())


def test_the_trace_is_well_formed(traced):
    trace, results = traced
    assert trace["displayTimeUnit"] == "ns"
    names, threads = {}, set()
    slices, counters = defaultdict(list), defaultdict(list)
    for e in trace["traceEvents"]:
        assert {"name", "ph", "pid", "tid"} <= e.keys(), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name",
                                 "thread_sort_index") and e["args"], e
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            if e["name"] == "thread_name":
                threads.add((e["pid"], e["tid"]))
        elif e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] > 0, e
            slices[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values())
            counters[e["pid"], e["name"]].append(e["ts"])
        else:
            pytest.fail(f"unexpected event kind {e['ph']!r}")
    # one process per GPU of every configuration, named
    assert sorted(names.values()) == sorted(f"{config} · GPU {g}" for config in results
                                            for g in range(GPUS))
    for (pid, tid), track in slices.items():
        assert pid in names and (pid, tid) in threads
        track.sort()
        for (a0, a1, a), (b0, b1, b) in zip(track, track[1:]):
            assert a1 <= b0 + 1e-9, f"{names[pid]} track {tid}: {a} and {b} overlap"
    for (pid, name), stamps in counters.items():
        assert pid in names and stamps == sorted(set(stamps)), (names[pid], name)
    assert {name for _, name in counters} == {"link busy", "MCQ entries", "Tracker entries",
                                              "GEMM stalled"}


def test_the_trace_agrees_with_the_runs(traced):
    trace, results = traced
    by = defaultdict(list)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            config, gpu = names[e["pid"]].split(" · GPU ")
            by[config, int(gpu), e["tid"]].append(e)
    for config, r in results.items():
        spans = r["timeline"]["spans"]
        for g in range(GPUS):
            phases = {e["name"]: e for e in by[config, g, PHASE_TID]}
            # the phase slices: where each started, the run's exact cycles (but the read-back's
            # and the isolated RS's preload, which are not the run's phases)
            assert {p: round(e["dur"] * 1000) for p, e in phases.items()
                    if p not in ("check", "preload")} == r["phase_cycles"]
            assert {p: round(e["ts"] * 1000) for p, e in phases.items()} == \
                {p: first for p, (first, _) in spans.items()}
            # the GEMM's stages rise from 1 to the ring's steps, inside the GEMM's phase
            gemm = spans.get("gemm_rs") or spans["gemm"]
            stages = [e["args"]["stage"] for e in sorted(by[config, g, STAGE_TID],
                                                         key=lambda e: e["ts"])]
            assert stages and stages == sorted(stages)
            assert set(stages) <= set(range(1, GPUS + 1))
            for e in by[config, g, STAGE_TID]:       # (times in us: cycles to the float's ulp)
                assert gemm[0] <= round(e["ts"] * 1000) and \
                    round((e["ts"] + e["dur"]) * 1000) <= gemm[1]
            # every phase with ring steps receives its GPUS - 1 chunks, in order, inside it
            steps = sorted(by[config, g, STEP_TID], key=lambda e: e["ts"])
            want = [f"{STEP_PHASES[p]} step {s}" for p in spans if p in STEP_PHASES
                    for s in range(1, GPUS)]
            assert [e["name"] for e in steps] == want, (config, g)
            for e in steps:
                phase = next(p for p in spans if p in STEP_PHASES and
                             STEP_PHASES[p] == e["name"][:2])
                first, last = spans[phase]
                assert first <= round(e["ts"] * 1000) and \
                    round((e["ts"] + e["dur"]) * 1000) <= last, (config, g, e)


def test_a_trace_needs_the_runs_samples():
    with pytest.raises(ValueError, match="a trace needs the run's timeline samples"):
        events({"config": "t3", "gpus": 2, "cycles": 10})


def check_side_by_side(path, runs):
    """The trace file ``path`` holds a process per GPU of each run of ``runs`` (``{config:
    result}``) and nothing else, each phase slice that run's phase cycles."""
    trace = json.loads(path.read_text())
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "process_name"}
    assert sorted(names.values()) == sorted(f"{c} · GPU {g}" for c in runs
                                            for g in range(GPUS))
    slices = 0
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["tid"] == PHASE_TID and e["name"] != "check":
            config = names[e["pid"]].split(" · ")[0]
            assert round(e["dur"] * 1000) == runs[config]["phase_cycles"][e["name"]]
            slices += 1
    assert slices == sum(GPUS * len(r["phase_cycles"]) for r in runs.values())


def test_a_sweep_writes_a_trace_per_point(tmp_path):
    """``t3 sweep --trace DIR``: one trace a point, its configurations side by side, each
    phase slice the run's phase cycles."""
    folder, results = tmp_path / "traces", tmp_path / "sweep.json"
    assert main(["sweep", "--gpus", str(GPUS), "--vary", "k=64,96", "--configs",
                 "sequential,t3", "--trace", str(folder), "--timeline-period", "200",
                 "--workers", "1", "--no-cache", "--json", str(results)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["k=64.json", "k=96.json"]
    runs = json.loads(results.read_text())
    for label in ("k=64", "k=96"):
        check_side_by_side(folder / f"{label}.json",
                           {c: runs[f"{label}/{c}"]["value"] for c in ("sequential", "t3")})


def test_a_points_label_may_hold_a_slash(traced, tmp_path):
    """A link bandwidth's label (``link_bw=3/80``) names its trace without the slash, and its
    runs are found by the job names' last slash; a failed run is left out."""
    from sim.sweep import Job, Outcome
    from sim.system.sweeps import trace_name, write_traces
    _, results = traced
    assert trace_name("k=64, link_bw=3/80") == "k=64_link_bw=3_80.json"
    points = [("link_bw=3/80", {}, {}), ("link_bw=3/40", {}, {})]
    job = Job("x", "math:gcd", (1, 1))
    outcomes = {f"{label}/{config}": Outcome(job, True, results[config])
                for label, _, _ in points for config in ("sequential", "t3")}
    outcomes["link_bw=3/40/t3"] = Outcome(job, False, error="AssertionError: not bit-exact")
    files = write_traces(points, outcomes, tmp_path)
    assert [f.name for f in files] == ["link_bw=3_80.json", "link_bw=3_40.json"]
    for f, configs in zip(files, (("sequential", "t3"), ("sequential",))):
        names = {e["args"]["name"] for e in json.loads(f.read_text())["traceEvents"]
                 if e["name"] == "process_name"}
        assert names == {f"{c} · GPU {g}" for c in configs for g in range(GPUS)}


def test_the_paper_writes_a_trace_per_case(traced, tmp_path, monkeypatch):
    """``t3 paper --trace DIR``: every job samples its timeline at the period asked for, each
    case gets a trace of its runs side by side (a twin case, FC-1, its owner's runs under its
    own name), and the report's results.json leaves the samples to the traces.  The runs are
    a real compare's (the paper's rings take minutes; ``run_case`` passing the period on is
    checked below)."""
    from sim import sweep
    _, results = traced
    asked = []

    def fake_run_jobs(jobs, **kwargs):
        asked.extend((j.name, j.kwargs.get("timeline")) for j in jobs)
        return {j.name: sweep.Outcome(j, True, dict(results[j.args[1]], case=j.args[0]))
                for j in jobs}
    monkeypatch.setattr(sweep, "run_jobs", fake_run_jobs)
    folder, out = tmp_path / "traces", tmp_path / "report"
    cases = ("T-NLG-FC-2-TP8", "T-NLG-FC-1-TP8")
    assert main(["paper", "--cases", ",".join(cases), "--configs", "sequential,t3",
                 "--trace", str(folder), "--timeline-period", "300", "--out", str(out),
                 "--no-cache"]) == 0
    assert sorted(asked) == [("T-NLG-FC-2-TP8/sequential", 300), ("T-NLG-FC-2-TP8/t3", 300)]
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{c}.json" for c in cases)
    for case in cases:
        check_side_by_side(folder / f"{case}.json",
                           {c: results[c] for c in ("sequential", "t3")})
    report = json.loads((out / "results.json").read_text())["results"]
    assert all("timeline" not in r for runs in report.values() for r in runs.values())


def test_a_paper_job_passes_the_period_on(monkeypatch):
    """``run_case`` runs with the timeline it is given and returns the samples; without one
    it samples nothing."""
    import sim.system.run as run
    from sim.system.cases import run_case
    seen = []

    def fake_run_config(spec, gpus, config, **kwargs):
        seen.append(kwargs.get("timeline"))
        return {"verified": True, "status": {}, "workload": {}, "cycles": 1,
                "phase_cycles": {}, "dram": {}, "arbiter_threshold": [], "compute_wait": 0,
                "l2": None, "simulated_cycles": 1, "mcq_occupancy": None, "dram_rows": None,
                "dram_capped": None,
                "timeline": {"samples": ["x"]} if kwargs.get("timeline") else None}
    monkeypatch.setattr(run, "run_config", fake_run_config)
    assert run_case("T-NLG-OP-TP8", "t3", 0.5, timeline=250)["timeline"] == {"samples": ["x"]}
    assert "timeline" not in run_case("T-NLG-OP-TP8", "t3", 0.5)
    assert seen == [250, None]


def test_the_paper_refuses_a_trace_of_figure17(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["paper", "--figure17", "--trace", "somewhere"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: --trace: --figure17 draws its runs' timelines" in err
