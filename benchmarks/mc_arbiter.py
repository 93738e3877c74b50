"""MC arbiter figures (``t3 bench mc_arbiter`` or ``python -m benchmarks.mc_arbiter``).

- ``mc_arbiter.throughput``: requests enqueued per cycle with both streams always valid and the
  MCQ drained every cycle (cocotb + Verilator, exported Verilog); limit 1.0.
- ``mc_arbiter.compute_slowdown.<policy>``: the unit-level Figure 17 demonstration
  (:mod:`sim.blocks.mc_arbiter.demo`): the compute stream's completion time with bursty communication,
  against the same compute stream alone; and communication's worst wait under each policy.
- ``mc_arbiter.sim_speed.<sim>``: simulated cycles per second (Python driver included).
- ``mc_arbiter.synth.<target>.<resource>``: Yosys cell counts, default geometry (MCQ of 64), the
  MCQ in LUT RAM on the 7-series and in block RAM on the iCE40 (as ``t3 synth`` builds each).

Every run is checked against the cycle-level golden model.
"""

import sys

from hw.params import T3Params
from mc_arbiter.config import ArbiterParams, Policy


def saturate(sim, n=20_000):
    from mc_arbiter.rtl import MCArbiter
    from sim.harness.runner import run_for_result
    import sim.blocks.mc_arbiter.cocotb_tests as tb
    params, aparams = T3Params(), ArbiterParams()
    config = {"params": params.to_dict(), "aparams": aparams.to_dict(), "n": n, "seed": 1}
    return run_for_result(MCArbiter(params, aparams), "t3_mc_arbiter", tb.__name__, "saturate",
                          config, sim)


def main(sims=None, synth=True):
    from sim.blocks.mc_arbiter.demo import DemoConfig, demo_table
    sims = sims or ["verilator", "icarus"]
    speeds = {}
    for index, sim in enumerate(sims):
        result = saturate(sim, 20_000 if sim == "verilator" else 4_000)
        speeds[sim] = result["cycles_per_s"]
        if index == 0:
            rate = result["issues_per_cycle"]
            print(f"mc_arbiter.throughput: {rate:.3f} requests/cycle (limit 1.0, ratio "
                  f"{rate:.3f}; {result['issues']} requests on {sim})", flush=True)
    config = DemoConfig()
    results = demo_table(config)
    alone = results["alone"]["compute_done"]
    print(f"mc_arbiter.demo.compute_alone: {alone} cycles ({config.bursts} bursts of "
          f"{config.burst} reads, MCQ {config.depth}, DRAM {config.o_rate} requests/cycle)")
    for policy in Policy:
        r = results[policy.name]
        print(f"mc_arbiter.compute_slowdown.{policy.name.lower()}: {r['slowdown']:.3f}x "
              f"(limit 1.0; compute done at {r['compute_done']} cycles)")
    for policy in Policy:
        r = results[policy.name]
        print(f"mc_arbiter.comm_max_wait.{policy.name.lower()}: {r['comm_max_wait']} cycles "
              f"(communication done at {r['comm_done']})")
    speeds["amaranth"] = results["MCA"]["cycles_per_s"]
    for sim, value in speeds.items():
        print(f"mc_arbiter.sim_speed.{sim}: {value:.0f} cycles/s")
    if synth:
        from mc_arbiter.rtl import MCArbiter
        from benchmarks.synth import resource_lines
        # The MCQ as each target's flow builds it (t3 synth): LUT RAM on the 7-series, block RAM
        # on the iCE40, which has no LUT RAM.
        for target, mcq_ram in (("xc7", "lut"), ("ice40", "block")):
            arbiter = MCArbiter(T3Params(), ArbiterParams(), mcq_ram=mcq_ram)
            for line in resource_lines("mc_arbiter", arbiter, "t3_mc_arbiter", (target,)):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
