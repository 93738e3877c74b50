"""Fault campaign: the DMA engine's link loopback meets dropped, duplicated, truncated and
corrupted beats under random stalls on every port; every packet sent must be delivered intact or
reported, and nothing written outside the packets' destinations (the scoreboard is
:func:`sim.blocks.dma.faults.check_delivery`).  The driver meets random configurations
(Hypothesis): each call is taken or refused with a ``ValueError`` naming its field, a refused
call changes nothing, and what was taken always programs.  A short run by default; ``--soak``
runs many more seeds and examples.
"""

import collections

import pytest

from dma.config import DMAParams, Status
from hw.params import T3Params
from sim.blocks.dma.amaranth_sim import simulate_dma
from sim.blocks.dma.faults import KINDS, LinkFaults, check_delivery
from sim.blocks.dma.traffic import random_scenario


P, DP = T3Params(), DMAParams()
STALLS = dict(trig_pause=0.3, remote_pause=0.3, resp_pause=0.25, rx_pause=0.25,
              mem_stall=0.3, tx_stall=0.3, mem_latency=10)
RX_ERRORS = Status.RX_FRAMING | Status.RX_CHECK | Status.RX_WRONG_GPU | Status.RX_OPEN

#: Totals over the campaign, printed at the end (``pytest -s``) for the closing figures.
TALLY = collections.Counter()


def faulty_run(kinds, seed, rate=0.3):
    scenario = random_scenario(P, DP, seed, remote_stores=20)
    faults = LinkFaults(P, DP, kinds, rate=rate, seed=seed)
    run = simulate_dma(P, DP, scenario, seed=seed, link_fault=faults, **STALLS)
    intact, broken = check_delivery(P, DP, run.env, run.regs, scenario.gpu_id)
    # the sending side is untouched by the link's faults: every tile and store left once
    assert run.regs["tiles_sent"] == sum(c.tiles for c in scenario.commands)
    assert run.regs["remote_sent"] == 20
    assert run.regs["status"] & ~RX_ERRORS == 0, f"status {Status(run.regs['status'])!r}"
    return faults, intact, broken, run


@pytest.mark.parametrize("kind", KINDS)
def test_each_link_fault_is_delivered_or_reported(kind, t3_options):
    seeds = range(8) if t3_options.soak else range(2)
    injected = 0
    for s in seeds:
        faults, intact, broken, run = faulty_run([kind], 1000 * t3_options.seed + s)
        injected += faults.injected[kind]
        TALLY[f"{kind}:injected"] += faults.injected[kind]
        TALLY[f"{kind}:intact"] += intact
        TALLY[f"{kind}:reported"] += broken
        TALLY[f"{kind}:runs"] += 1
        if broken:
            assert run.regs["status"] & RX_ERRORS
    assert injected > 0, f"no {kind} fault was injected"


def test_mixed_faults_soak(t3_options):
    """Every kind at once, at a high rate: still intact or reported."""
    runs = 40 if t3_options.soak else 3
    for s in range(runs):
        faults, intact, broken, _ = faulty_run(KINDS, 5000 + 1000 * t3_options.seed + s,
                                               rate=0.6)
        TALLY["mixed:injected"] += sum(faults.injected.values())
        TALLY["mixed:runs"] += 1
        assert intact + broken > 0


def test_a_fault_free_loopback_is_all_intact():
    """The scoreboard can tell: without faults every packet is intact and nothing reported;
    a fault that goes unreported would fail it (checked on a doctored error count)."""
    faults, intact, broken, run = faulty_run(KINDS, 3, rate=0.0)
    assert broken == 0 and intact > 0 and run.regs["errors"] == 0
    _, _, broken, run = faulty_run(["drop"], 4, rate=1.0)
    assert broken > 0
    with pytest.raises(AssertionError, match=r"packets not delivered intact but only 0 errors"):
        check_delivery(P, DP, run.env, dict(run.regs, errors=0), 1)


def teardown_module():
    if TALLY:
        print("\nfault campaign:", dict(sorted(TALLY.items())))
