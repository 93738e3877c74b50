"""The MC arbiter under Amaranth's simulator against the cycle-level golden model, the
configuration checks, and the unit-level demonstration of the paper's Figure 17 point."""

import pytest

from hw.interfaces import Stream
from hw.params import T3Params
from mc_arbiter.config import ArbiterParams, CalibRow, Policy, Status, check_config
from mc_arbiter.model import ArbiterModel, check_arbiter_run
from sim.blocks.mc_arbiter.amaranth_sim import simulate_arbiter
from sim.blocks.mc_arbiter.traffic import PhasedSource, RandomSource, numbered_requests
from sim.blocks.mc_arbiter.demo import DemoConfig, demo_table


PARAMS = T3Params()


def check_arbiter(aparams, settings, n=300, c_gap=0.3, m_gap=0.3, tap_stall=0.1, o_rate=0.6,
                  seed=1, **run_args):
    compute_items = numbered_requests(PARAMS, n, Stream.COMPUTE)
    comm_items = numbered_requests(PARAMS, n, Stream.COMM, base=1 << 20)
    run = simulate_arbiter(PARAMS, aparams, RandomSource(compute_items, c_gap, seed),
                           RandomSource(comm_items, m_gap, seed + 1), config=settings,
                           seed=seed, tap_stall=tap_stall, o_rate=o_rate, **run_args)
    model = ArbiterModel(aparams, **{k: v for k, v in settings.items()
                                     if k != "auto_threshold"},
                         auto_threshold=settings.get("auto_threshold", False),
                         retire=run_args.get("retire") is not None)
    check_arbiter_run(model, run.cycles, run.dequeued, run.regs, compute_items, comm_items)
    assert len(run.dequeued) == 2 * n            # everything came out
    return run


@pytest.mark.parametrize("policy", list(Policy))
@pytest.mark.parametrize("depth", [4, 8, 33])
def test_random_traffic_matches_the_model(policy, depth):
    aparams = ArbiterParams(depth=depth)
    run = check_arbiter(aparams, dict(policy=policy, threshold=min(4, depth), starve_limit=6),
                        seed=depth)
    assert run.regs["peak_occupancy"] == depth           # the backpressure filled the MCQ


@pytest.mark.parametrize("depth", [4, 33])
def test_the_mcq_in_lut_ram_or_block_ram_times_the_same(depth):
    """The MCQ's two kinds of storage (``mcq_ram``), under the same random traffic and
    backpressure: every request leaves ``o`` in the same cycle, and the model agrees."""
    aparams = ArbiterParams(depth=depth)
    runs = [check_arbiter(aparams, dict(policy=Policy.MCA, threshold=min(4, depth),
                                        starve_limit=6), seed=depth + 50, mcq_ram=kind)
            for kind in ("lut", "block")]
    assert runs[0].dequeued == runs[1].dequeued and runs[0].cycles == runs[1].cycles
    assert runs[0].regs["peak_occupancy"] == depth


@pytest.mark.parametrize("policy", [Policy.MCA, Policy.ROUND_ROBIN])
def test_with_retire_the_level_counts_until_the_scheduler_takes_a_request_out(policy):
    """An arbiter whose requests an FR-FCFS unit holds past ``o`` (``retire``): each counts in
    the occupancy, the compute stream's and the threshold's compare until it retires, in
    any order; ``o`` still hands them out in order.  The model agrees cycle for cycle, and
    the requests held past ``o`` keep the occupancy above what the MCQ alone holds."""
    aparams = ArbiterParams(depth=8)
    run = check_arbiter(aparams, dict(policy=policy, threshold=4, starve_limit=6), seed=9,
                        o_rate=0.9, retire=0.3)
    assert run.regs["peak_occupancy"] == 8
    plain = check_arbiter(aparams, dict(policy=policy, threshold=4, starve_limit=6), seed=9,
                          o_rate=0.9)
    assert run.regs["occupancy_sum"] > plain.regs["occupancy_sum"]


def test_mca_starvation_limit_forces_issues_and_bounds_the_wait():
    # compute always valid: without the starvation limit, communication would never go
    aparams = ArbiterParams(depth=8)
    run = check_arbiter(aparams, dict(policy=Policy.MCA, threshold=8, starve_limit=5),
                        c_gap=0.0, m_gap=0.0, tap_stall=0.0, o_rate=1.0)
    assert run.regs["forced"] > 0
    # with room every cycle (o drains one a cycle), a waiting request goes within limit + 1
    assert run.regs["comm_max_wait"] <= 5 + 1


def test_mca_drain_issues_communication_first():
    aparams = ArbiterParams(depth=8)
    run = check_arbiter(aparams, dict(policy=Policy.MCA, threshold=0, starve_limit=0),
                        c_gap=0.0, m_gap=0.0, tap_stall=0.0, o_rate=1.0, n=50,
                        drain_at=range(60, 61))
    # threshold 0 and no starvation limit: communication goes only after the drain mark
    first_comm = next(i for i, (_, issued) in enumerate(run.cycles) if issued == "comm")
    assert first_comm >= 50 and run.regs["comm_issues"] == 50


@pytest.mark.parametrize("o_rate,expected", [
    (1.0, 64),       # compute keeps < 2 entries in the MCQ: no limit (= depth)
    (0.5, 5),        # compute fills the MCQ: memory-intensive, threshold 5
])
def test_calibration_picks_the_threshold_from_compute_occupancy(o_rate, expected):
    aparams = ArbiterParams(depth=64)
    compute_items = numbered_requests(PARAMS, 400, Stream.COMPUTE)
    settings = dict(policy=Policy.MCA, threshold=17, starve_limit=64)
    run = simulate_arbiter(PARAMS, aparams, PhasedSource(compute_items, 100, 20),
                           RandomSource([], 0.0), config=dict(settings, auto_threshold=True),
                           o_rate=o_rate, calib=(0, 300), seed=2)
    model = ArbiterModel(aparams, auto_threshold=True, **settings)
    check_arbiter_run(model, run.cycles, run.dequeued, run.regs, compute_items, [])
    assert run.regs["calib_cycles"] == 300 - 0 - 1     # the cycles strictly between the marks
    assert run.regs["threshold"] == expected


@pytest.mark.parametrize("second", [(310, 311), (310, 312)], ids=["empty", "one-cycle"])
def test_a_second_window_sets_the_threshold_only_if_it_counted_a_cycle(second):
    """A window that picks threshold 5, then the host's 9, then a second window: with no
    cycle between its marks it leaves 9 alone; with one, its mean (that cycle's compute
    occupancy) picks a threshold, whichever the model picks."""
    aparams = ArbiterParams(depth=64)
    compute_items = numbered_requests(PARAMS, 400, Stream.COMPUTE)
    settings = dict(policy=Policy.MCA, threshold=17, starve_limit=64)
    run = simulate_arbiter(PARAMS, aparams, PhasedSource(compute_items, 100, 20),
                           RandomSource([], 0.0), config=dict(settings, auto_threshold=True),
                           o_rate=0.5, calib=[(0, 300), second], seed=2,
                           threshold_writes={305: 9})
    model = ArbiterModel(aparams, auto_threshold=True, **settings)
    check_arbiter_run(model, run.cycles, run.dequeued, run.regs, compute_items, [])
    assert run.regs["calib_cycles"] == second[1] - second[0] - 1
    assert run.regs["threshold"] == model.threshold
    assert (run.regs["threshold"] == 9) == (second[1] - second[0] == 1)


@pytest.mark.parametrize("write_at, lost", [(300, True), (299, False), (150, False)])
def test_a_host_threshold_write_wins_over_calibration(write_at, lost):
    """The host writes ``threshold`` (9) as a calibration window ends (cycle 300): the host's
    value is kept and ``status.calib_lost`` reports the dropped result; a write before the end
    is overridden by the window's result, as the host asked with ``auto_threshold``.  Before,
    the same-cycle write was silently lost."""
    aparams = ArbiterParams(depth=64)
    compute_items = numbered_requests(PARAMS, 400, Stream.COMPUTE)
    settings = dict(policy=Policy.MCA, threshold=17, starve_limit=64)
    run = simulate_arbiter(PARAMS, aparams, PhasedSource(compute_items, 100, 20),
                           RandomSource([], 0.0), config=dict(settings, auto_threshold=True),
                           o_rate=0.5, calib=(0, 300), seed=2, threshold_writes={write_at: 9})
    model = ArbiterModel(aparams, auto_threshold=True, **settings)
    check_arbiter_run(model, run.cycles, run.dequeued, run.regs, compute_items, [])
    assert run.regs["threshold"] == (9 if lost else 5) == model.threshold
    assert bool(run.regs["status"] & Status.CALIB_LOST) == lost == model.calib_lost


def test_mca_demonstration_reproduces_the_papers_point():
    results = demo_table(DemoConfig())
    rr, first, mca = (results[p.name] for p in Policy)
    # bursty communication slows the compute stream under round-robin, less under
    # compute-first, and MCA keeps it within 5 % of running alone
    assert rr["slowdown"] > first["slowdown"] > mca["slowdown"]
    assert rr["slowdown"] > 1.2 and mca["slowdown"] <= 1.05
    # communication still finishes under MCA (the starvation limit and idle compute cycles)
    assert mca["comm_done"] is not None
    assert mca["comm_max_wait"] <= DemoConfig().starve_limit + DemoConfig().depth


@pytest.mark.parametrize("kwargs,message", [
    (dict(policy=3), r"^policy must be one of \['ROUND_ROBIN', 'COMPUTE_FIRST', 'MCA'\], "
                     r"not 3$"),
    (dict(threshold=65), r"^threshold must be an integer from 0 to 64 \(the MCQ depth, meaning no "
                         r"limit\), not 65$"),
    (dict(starve_limit=1 << 16), r"^starve_limit must be an integer from 0 to 65535, "
                                 r"not 65536$"),
    (dict(calibration=[CalibRow(1, 5)]), r"^calibration needs 4 rows, not 1$"),
    (dict(calibration=[CalibRow(256, 5)] + [CalibRow(0, 5)] * 3),
     r"^calibration row 0 bound must be an integer from 0 to 255, not 256$"),
    (dict(calibration=[CalibRow(1, 65)] + [CalibRow(0, 5)] * 3),
     r"^calibration row 0 threshold must be an integer from 0 to 64, not 65$"),
    (dict(calibration=[CalibRow(8, 5), CalibRow(2, 5), CalibRow(9, 5), CalibRow(0, 5)]),
     r"^calibration bounds must be ascending, not \[8, 2, 9\]$"),
])
def test_configuration_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        check_config(ArbiterParams(), **kwargs)


def test_arbiter_params_refused():
    with pytest.raises(ValueError, match=r"^depth must be an integer from 4 to 1024, not 3$"):
        ArbiterParams(depth=3)
