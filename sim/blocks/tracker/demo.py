"""The Tracker demonstration behind ``t3 demo`` and ``t3 bench tracker``: one GPU's step of the
ring reduce-scatter (paper section 4.2.1; ``docs/design.md``) through the Tracker, on
Amaranth's simulator or on the exported Verilog under cocotb, checked against the golden
model."""

import dataclasses
import random
from pathlib import Path

from tracker.config import Region, check_regions, check_schedule
from tracker.model import TrackerModel, check_run


__all__ = ["run_ring_step", "SIMULATORS"]


#: Where the demonstration runs.
SIMULATORS = ("verilator", "icarus", "amaranth")


def run_ring_step(sim, params, tparams, n_wg, wfs_per_wg, tile_elems, seed=1, wave=None,
                  build_dir=None):
    """Run one ring reduce-scatter step through the Tracker on ``sim`` (one of
    :data:`SIMULATORS`): ``n_wg`` workgroups of ``wfs_per_wg`` wavefront tiles of
    ``tile_elems`` fp16 elements, each element updated twice (local and DMA), interleaved at
    random.  Returns the summary dict (``verified`` True only when the run matched the golden
    model).  The region and the schedule are checked first: a refused geometry raises
    ``ValueError`` before anything is built."""
    if sim not in SIMULATORS:
        raise ValueError(f"sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    region = Region(0x10_0000, n_wg * wfs_per_wg * tile_elems * 2, tile_elems, 2)
    check_regions(params, tparams, [region])
    # All tiles of the step can be open at once (the two update streams interleave freely).
    check_schedule(params, tparams, [range(n_wg)], wfs_per_wg, open_stages=1)
    if sim == "amaranth":
        return _ring_step_amaranth(params, tparams, region, n_wg, wfs_per_wg, seed, wave)
    from sim.harness.runner import run_folder, run_for_result
    import sim.blocks.tracker.cocotb_tests as tb_module
    from tracker.rtl import Tracker
    config = {"params": params.to_dict(), "tparams": tparams.to_dict(),
              "region": dataclasses.asdict(region), "n_wg": n_wg, "wfs_per_wg": wfs_per_wg,
              "seed": seed}
    with run_folder(build_dir, f"t3_tracker_{sim}_") as build_dir:
        result = run_for_result(Tracker(params, tparams), "t3_tracker", tb_module.__name__,
                                "ring_step", config, sim, build_dir, waves=bool(wave),
                                wave_format=Path(wave).suffix.lower()[1:] if wave else None)
        if wave:
            dumps = sorted(build_dir.glob("*.fst")) + sorted(build_dir.glob("*.vcd"))
            if not dumps:
                raise RuntimeError(f"the simulator wrote no waveform in {build_dir}")
            Path(wave).write_bytes(dumps[0].read_bytes())
    return result


def _ring_step_amaranth(params, tparams, region, n_wg, wfs_per_wg, seed, wave):
    from sim.blocks.tracker.amaranth_sim import simulate_tracker
    from sim.blocks.tracker.traffic import ring_step_traffic
    requests = ring_step_traffic(params, n_wg, wfs_per_wg, region, rng=random.Random(seed))
    model = TrackerModel(params, tparams, [region])
    outcomes = [model.access(r) for r in requests]
    run = simulate_tracker(params, tparams, [region], requests, vcd=wave)
    fires = check_run(model, outcomes, run.triggers, run.taken, run.regs)
    latencies = [cycle - run.taken[i] for (cycle, _), i in zip(run.triggers, fires)]
    span = run.taken[-1] - run.taken[0] + 1
    return {"accesses": len(requests), "triggers": len(fires), "cycles": run.cycles,
            "span_cycles": span, "accesses_per_cycle": len(requests) / span,
            "latency_min": min(latencies), "latency_max": max(latencies),
            "wall_s": run.wall_s, "cycles_per_s": run.cycles / run.wall_s,
            "registers": run.regs, "verified": True}
