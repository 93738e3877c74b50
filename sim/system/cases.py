"""One run of a Table 2 case on a ring of its TP degree: the job :mod:`sim.system.paper` runs on
Dask (its own module, so that a job's cache key covers the run and not the report)."""

import time

from sim.system.run import preset_setup
from sim.system.workload import PRESETS, preset


__all__ = ["case_setup", "run_case"]


def case_setup(name, scale=1.0):
    """``(spec, gpus, link latency)`` of case ``name`` at ``scale``."""
    spec = preset(name, scale=scale)
    return spec, PRESETS[name]["tp"], preset_setup(spec)["latency"]


def run_case(name, config, scale=1.0, sim=None, seed=1, timeline=None):
    """One run of case ``name`` in ``config`` (one of :data:`RUNS`); returns what the tables
    need (JSON), and with ``timeline`` (a sampling period in cycles) the run's timeline
    samples for its trace (:mod:`sim.system.trace`; the samples read counters only, so the
    run's cycles are the same).  Raises ``AssertionError`` when the run is not bit-exact."""
    from sim.system.run import run_config
    spec, gpus, latency = case_setup(name, scale)
    start = time.monotonic()
    r = run_config(spec, gpus, config, sim=sim, seed=seed, timeline=timeline,
                   **preset_setup(spec))
    if not r.get("verified"):
        raise AssertionError(f"{name} {config}: the result is not bit-exact")
    errors = {g: st for g, st in r["status"].items() if any(st.values())}
    out = {"case": name, "config": config, "scale": scale, "gpus": gpus,
           "link_latency": latency, "cus": spec.cus, "workload": r["workload"],
           "cycles": r["cycles"], "phase_cycles": r["phase_cycles"], "dram": r["dram"],
           "verified": True, "status_errors": errors,
           "arbiter_threshold": r["arbiter_threshold"],
           "compute_wait": r["compute_wait"], "mcq_occupancy": r["mcq_occupancy"],
           "dram_rows": r["dram_rows"], "dram_capped": r["dram_capped"],
           "l2": r["l2"],
           "simulated_cycles": r["simulated_cycles"],
           "wall_s": round(time.monotonic() - start, 1)}
    if timeline is not None:
        out["timeline"] = r["timeline"]
    return out
