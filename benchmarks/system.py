"""System figures (``t3 bench system`` or ``python -m benchmarks.system``).

- ``system.sim_speed.<sim>``: simulated cycles per second of the 4-GPU ring running the
  default workload in the ``t3`` configuration, Python agents included.
- ``system.<preset>.<config>``: speedup over Sequential of T3, T3-MCA, Ideal-GEMM-RS-Overlap
  and Ideal-RS+NMC on the default presets (4 GPUs, M = 32), with the fraction of the ideal
  overlap's gain that T3-MCA reaches.
- ``system.<preset>.dram``: T3-MCA's DRAM accesses over Sequential's.

Takes tens of minutes: every preset is four full runs.
"""

import sys

from sim.system.compare import CATEGORIES, run_all, speedups
from sim.system.run import run_config
from sim.system.workload import GemmSpec, balanced_k, preset


#: The presets the benchmark compares: a small (OP) and a large (FC-2) sub-layer.
DEFAULT_PRESETS = ("Mega-GPT-2-OP-TP8", "Mega-GPT-2-FC-2-TP8")


def main(sims=None, synth=True, presets=DEFAULT_PRESETS, gpus=4):
    sims = sims or ["verilator", "icarus"]
    for sim in sims:
        spec = GemmSpec(m=64, n=32 * gpus, k=balanced_k(gpus), name="default")
        r = run_config(spec, gpus, "t3", sim=sim)
        print(f"system.sim_speed.{sim}: {r['cycles_per_s']:.0f} cycles/s ({gpus}-GPU ring, "
              f"{spec.name} workload, {r['simulated_cycles']} cycles, verified "
              f"{r['verified']})", flush=True)
    for name in presets:
        spec = preset(name, gpus, m=32)
        results = run_all(spec, gpus)
        s = speedups(results)
        ideal = s["Ideal-GEMM-RS-Overlap"][1]
        for config, (cycles, speedup) in s.items():
            if config == "Sequential":
                continue
            print(f"system.{name}.{config}: {speedup:.3f}x over Sequential ({cycles} cycles)",
                  flush=True)
        gain = (s["T3-MCA"][1] - 1) / (ideal - 1) if ideal > 1 else float("nan")
        print(f"system.{name}.t3-mca_of_ideal_gain: {gain:.2f} (limit 1.0)")
        base = sum(results["sequential"]["dram"][c] for c in CATEGORIES)
        mca = sum(results["t3-mca"]["dram"][c] for c in CATEGORIES)
        print(f"system.{name}.dram: {mca / base:.3f} of Sequential's DRAM accesses "
              f"(T3-MCA {mca}, Sequential {base} beats)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
