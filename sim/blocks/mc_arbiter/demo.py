"""The paper's Figure 17 point at unit level: bursty communication stalls a memory-intensive
compute stream unless the arbiter keeps room in the MCQ for it.

Compute: a GEMM-like stream of read bursts, each followed by compute time that starts only once
the burst is fully enqueued (so every cycle a burst waits for the MCQ delays the kernel).
Communication: bursts released periodically (tiles completing, DMA reads and incoming updates).
The DRAM serves the MCQ at a fixed rate below one request per cycle.

:func:`run_demo` runs the same traffic under a policy and reports when the compute stream
finished, its slowdown against running alone, and communication's worst wait.  Every run is
checked against the golden model.
"""

import dataclasses

from hw.interfaces import Stream
from hw.params import T3Params
from mc_arbiter.config import ArbiterParams, Policy
from mc_arbiter.model import ArbiterModel, check_arbiter_run
from sim.blocks.mc_arbiter.amaranth_sim import simulate_arbiter
from sim.blocks.mc_arbiter.traffic import BurstSource, PhasedSource, numbered_requests


__all__ = ["DemoConfig", "run_demo", "demo_table"]


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    depth: int = 32            # MCQ entries
    bursts: int = 12           # compute read bursts
    burst: int = 24            # requests per compute burst
    think: int = 40            # compute cycles after each burst
    comm_burst: int = 48       # requests per communication burst
    comm_period: int = 150     # cycles between communication bursts
    comm_bursts: int = 5
    o_rate: float = 0.5        # DRAM service rate, requests per cycle
    threshold: int = 8         # MCA threshold
    starve_limit: int = 200    # MCA starvation limit
    seed: int = 3


def run_demo(policy, config=DemoConfig(), with_comm=True):
    """One run; returns a dict with ``compute_done`` (cycle the last compute request
    enqueued), ``comm_done``, ``comm_max_wait`` and the registers."""
    params = T3Params()
    aparams = ArbiterParams(depth=config.depth)
    compute_items = numbered_requests(params, config.bursts * config.burst, Stream.COMPUTE)
    comm_items = numbered_requests(params, config.comm_bursts * config.comm_burst
                                   if with_comm else 0, Stream.COMM, base=1 << 24)
    compute = PhasedSource(compute_items, config.burst, config.think)
    comm = BurstSource(comm_items, config.comm_burst, config.comm_period, start=10)
    settings = dict(policy=policy, threshold=config.threshold,
                    starve_limit=config.starve_limit)
    run = simulate_arbiter(params, aparams, compute, comm, config=settings, seed=config.seed,
                           o_rate=config.o_rate)
    check_arbiter_run(ArbiterModel(aparams, **settings), run.cycles, run.dequeued, run.regs,
                      compute_items, comm_items)
    return {"compute_done": compute.done_cycle, "comm_done": comm.done_cycle,
            "comm_max_wait": run.regs["comm_max_wait"], "registers": run.regs,
            "cycles_per_s": len(run.cycles) / run.wall_s}


def demo_table(config=DemoConfig()):
    """``{policy name: result}`` plus ``"alone"``: compute with no communication."""
    results = {"alone": run_demo(Policy.COMPUTE_FIRST, config, with_comm=False)}
    for policy in Policy:
        results[policy.name] = run_demo(policy, config)
    base = results["alone"]["compute_done"]
    for result in results.values():
        result["slowdown"] = result["compute_done"] / base
    return results
