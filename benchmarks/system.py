"""System figures (``t3 bench system`` or ``python -m benchmarks.system``).

Every speed is the best of :data:`REPEATS` runs: on a shared machine another job slows a run
and nothing speeds one up, so the fastest is the nearest to what the model does alone
(``timeit``'s reasoning).

- ``system.idle.<sim>.<G>gpu``: simulated cycles per second of the ring alone (engines idle):
  the model's own speed, the limit of any run on it.
- ``system.sim_speed.<sim>.<G>gpu``: simulated cycles per second of the default workload in
  the ``t3`` configuration driven by the GPU-side engines (the whole cocotb run: programming,
  loads, every phase, the read-back), with its ratio to the idle ring and to the 50,000
  cycles/s the 4-GPU ring must reach.
- ``system.engine_speed.<sim>.<G>gpu``: the same run's rate while the engines run (from
  ``start`` to ``done`` of each phase), with its ratio to the idle ring.
- ``system.build_s.<sim>.<G>gpu``: seconds to export and build the ring with an empty cache.
- ``system.gpu_cycles.<sim>.<G>gpu``: the engines' rate times the GPUs, GPU-cycles per second,
  with its ratio to the 4-GPU ring's (the per-GPU cost is flat when it stays near 1; limit
  0.8 at 16 GPUs).
- ``system.<preset>.<config>``: speedup over Sequential of T3, T3-MCA, Ideal-GEMM-RS-Overlap
  and Ideal-RS+NMC on the default presets (4 GPUs; ``t3 paper`` runs them on their own TP
  degree), with the fraction of the ideal
  overlap's gain that T3-MCA reaches.
- ``system.<preset>.dram``: T3-MCA's DRAM accesses over Sequential's.
"""

import sys

from sim.system.compare import dram_total, run_all, speedups
from sim.system.run import preset_setup, run_config
from sim.system.workload import preset


#: The presets the benchmark compares: a small (OP) and a large (FC-2) sub-layer.
DEFAULT_PRESETS = ("Mega-GPT-2-OP-TP8", "Mega-GPT-2-FC-2-TP8")


#: Runs of each speed measurement; the fastest is reported.
REPEATS = 3

#: Simulated cycles per second the 4-GPU default run must reach, and the aim.
TARGET_CYCLES_PER_S = 50_000
AIM_CYCLES_PER_S = 100_000
#: GPU-cycles per second a larger ring must keep, as a fraction of the 4-GPU ring's.
GPU_RATE_FLOOR = 0.8


def speed_lines(sim, gpus):
    """The idle, run and build figures of one ring size, all of the ring the default
    workload runs on (its memory rows and engines sized for that workload:
    :func:`sim.system.run.workload_memory_rows`, :func:`system.spec.engine_params_for`)."""
    import os
    import tempfile
    import time
    from sim.system.run import idle_rate, run_plan, workload_memory_rows
    from sim.system.workload import workload_spec
    saved = os.environ.get("T3_BUILD_CACHE")
    spec = workload_spec(gpus)
    ring = run_plan(spec, gpus, "t3", sim=sim, check=False).ring
    with tempfile.TemporaryDirectory(prefix="t3_bench_cache_") as cache:
        os.environ["T3_BUILD_CACHE"] = cache     # an empty cache: the build is measured
        try:
            start = time.perf_counter()
            idle_rate(ring, sim=sim, cycles=100)
            build = time.perf_counter() - start
            idle = max((idle_rate(ring, sim=sim,
                                  cycles=100_000 if sim == "verilator" else 10_000)
                        for _ in range(REPEATS)), key=lambda run: run["cycles_per_s"])
            r = max((run_config(spec, gpus, "t3", sim=sim) for _ in range(REPEATS)),
                    key=lambda run: run["cycles_per_s"])
        finally:
            if saved is None:
                os.environ.pop("T3_BUILD_CACHE", None)
            else:
                os.environ["T3_BUILD_CACHE"] = saved
    rate = r["cycles_per_s"]
    tag = f"{sim}.{gpus}gpu"
    lines = [f"system.build_s.{tag}: {build:.0f} s (export and build of the {gpus}-GPU ring, "
             f"{workload_memory_rows(gpus, spec)} HBM rows a bank)",
             f"system.idle.{tag}: {idle['cycles_per_s']:.0f} cycles/s (the ring alone: the "
             f"limit; the best of {REPEATS} runs, as every speed here)",
             f"system.sim_speed.{tag}: {rate:.0f} cycles/s ({spec.m} x {spec.n} x {spec.k} "
             f"{spec.dtype}, t3, {r['simulated_cycles']} cycles, verified {r['verified']}); "
             f"{rate / idle['cycles_per_s']:.2f} of the idle ring",
             f"system.engine_speed.{tag}: {r['engine_cycles_per_s']:.0f} cycles/s (while the "
             f"engines run, start to done: the run without the host's configuration, loads "
             f"and read-back); {r['engine_cycles_per_s'] / idle['cycles_per_s']:.2f} of the "
             f"idle ring"]
    if gpus == 4:
        lines.append(f"system.sim_speed_ratio.{tag}: {rate / TARGET_CYCLES_PER_S:.2f} of the "
                     f"{TARGET_CYCLES_PER_S} cycles/s target ({rate / AIM_CYCLES_PER_S:.2f} "
                     f"of the {AIM_CYCLES_PER_S} aim)")
    return lines, r["engine_cycles_per_s"] * gpus


def gpu_rate_lines(sim, gpu_rates):
    """``system.gpu_cycles`` of each ring size against the smallest's (``{gpus: rate}``)."""
    base_gpus = min(gpu_rates)
    base = gpu_rates[base_gpus]
    return [f"system.gpu_cycles.{sim}.{g}gpu: {rate:.0f} GPU-cycles/s (the engines' rate x "
            f"{g}); {rate / base:.2f} of the {base_gpus}-GPU ring's (floor {GPU_RATE_FLOOR})"
            for g, rate in sorted(gpu_rates.items())]


def main(sims=None, synth=True, presets=DEFAULT_PRESETS, gpus=4, sizes=(4, 8, 16, 32)):
    sims = sims or ["verilator", "icarus"]
    for sim in sims:
        gpu_rates = {}
        for size in (sizes if sim == "verilator" else (gpus,)):
            lines, gpu_rates[size] = speed_lines(sim, size)
            for line in lines:
                print(line, flush=True)
        for line in gpu_rate_lines(sim, gpu_rates):
            print(line, flush=True)
    for name in presets:
        spec = preset(name, gpus)           # the TP-8 sub-layer's K kept on 4 GPUs
        # the paper rings' memory, engines and link latency: the system's default memory
        # does not hold the presets' buffers (the driver refuses them)
        results = run_all(spec, gpus, **preset_setup(spec, gpus))
        s = speedups(results)
        ideal = s["Ideal-GEMM-RS-Overlap"][1]
        for config, (cycles, speedup) in s.items():
            if config == "Sequential":
                continue
            print(f"system.{name}.{config}: {speedup:.3f}x over Sequential ({cycles} cycles)",
                  flush=True)
        gain = (s["T3-MCA"][1] - 1) / (ideal - 1) if ideal > 1 else float("nan")
        print(f"system.{name}.t3-mca_of_ideal_gain: {gain:.2f} (limit 1.0)")
        base = dram_total(results["sequential"])
        mca = dram_total(results["t3-mca"])
        print(f"system.{name}.dram: {mca / base:.3f} of Sequential's DRAM accesses "
              f"(T3-MCA {mca}, Sequential {base} beats)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
