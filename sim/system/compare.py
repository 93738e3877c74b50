"""``t3 compare``: every configuration on one workload, and the paper's two views of them.

* Figure 16 view: speedup over Sequential of T3, T3-MCA, Ideal-GEMM-RS-Overlap
  (``max(GEMM, RS) + AG`` of the Sequential run's isolated phases, no contention) and
  Ideal-RS+NMC (``max(GEMM, RS with NMC) + AG``, the RS with NMC measured in isolation by the
  ``rs-nmc`` run: the fused configuration with a GEMM that only stores its output).  Of an
  all-reduce by track and trigger, whose fused phase holds its all-gather too, the ideal
  overlap hides both behind the GEMM (``max(GEMM, RS + AG)``) and the isolated run holds the
  AG (``max(GEMM, isolated)``).
* Figure 18 view: DRAM accesses by category (GEMM, RS, AG reads and writes) per configuration,
  as beats and as a fraction of Sequential's total.
"""

from sim.system.configure import CONFIGS, ISOLATED_RS
from sim.system.results import CATEGORIES
from sim.system.run import run_config


__all__ = ["run_all", "ideal_cycles", "fused_all_gather", "speedups", "dram_total",
           "figure16_lines", "figure18_lines", "plot", "CATEGORIES"]


def run_all(spec, gpus, *, sim=None, seed=1, progress=None, **ring):
    """``{config: result}`` for every configuration and the isolated RS with NMC.  ``ring``:
    :func:`sim.system.run.run_config`'s ring settings (``memory_rows``, ``latency``,
    ``engines``, ``l2``, ``l2_config``, ``topology``, ``collective``), e.g.
    :func:`sim.system.run.preset_setup`'s."""
    from sim.system.run import run_plan
    for config in CONFIGS + (ISOLATED_RS,):     # refuse a bad workload before the first run
        run_plan(spec, gpus, config, sim=sim, seed=seed, **ring)
    results = {}
    for config in CONFIGS + (ISOLATED_RS,):
        if progress:
            progress(f"--- {config}")
        results[config] = run_config(spec, gpus, config, sim=sim, seed=seed,
                                     progress=progress, **ring)
    return results


def ideal_cycles(sequential, isolated=None, fused=None):
    """The ideal bars' cycles, ``{"Ideal-GEMM-RS-Overlap": c, "Ideal-RS+NMC": c or None}``,
    from the Sequential run's phases (``sequential``: its ``phase_cycles``) and the isolated
    collective's run (``isolated``: the ``rs-nmc`` run's ``phase_cycles``, or None when there
    is none).  The ring's: ``max(GEMM, RS) + AG`` and ``max(GEMM, RS with NMC) + AG``; of an
    all-reduce by track and trigger, whose fused phase holds the AG (a fused run has no AG
    phase while Sequential has one; ``fused``: any fused run's phases, ``isolated`` when not
    given): ``max(GEMM, RS + AG)`` and ``max(GEMM, isolated)``; an all-to-all has no AG."""
    ag = sequential.get("ag", 0)
    fused_ag = fused_all_gather(sequential, isolated if fused is None else fused)
    out = {"Ideal-GEMM-RS-Overlap": max(sequential["gemm"], sequential["rs"] + ag) if fused_ag
           else max(sequential["gemm"], sequential["rs"]) + ag,
           "Ideal-RS+NMC": None}
    if isolated is not None:
        out["Ideal-RS+NMC"] = max(sequential["gemm"], isolated["gemm_rs"]) + \
            (0 if fused_ag else ag)
    return out


def fused_all_gather(sequential, fused):
    """Whether T3's fused phase holds the all-gather that follows Sequential's collective (an
    all-reduce by track and trigger: a fused run, T3's, T3-MCA's or the isolated one, has no
    AG phase); ``sequential`` and ``fused`` are the runs' ``phase_cycles`` (``fused`` None:
    no fused run, no fused AG)."""
    return "ag" in sequential and fused is not None and "ag" not in fused


def speedups(results):
    """The Figure 16 numbers, the one formula ``t3 compare``, ``t3 paper`` and the benchmarks
    print: ``{name: (cycles, speedup over Sequential)}``, Sequential first, then T3, T3-MCA and
    the ideal bars (:func:`ideal_cycles`).  A bar whose run is not in ``results`` (``t3
    paper`` may run a subset of the configurations) is ``(None, None)``; without a Sequential
    run there is nothing to compare with, and the answer is empty."""
    seq = results.get("sequential")
    if not seq:
        return {}
    isolated = results.get(ISOLATED_RS)
    # whether the fused phase holds the AG: any fused run tells (they run one collective)
    fused = next((results[c]["phase_cycles"] for c in (ISOLATED_RS, "t3", "t3-mca")
                  if c in results), None)
    rows = {"Sequential": seq["cycles"],
            **{name: results[config]["cycles"] if config in results else None
               for name, config in (("T3", "t3"), ("T3-MCA", "t3-mca"))},
            **ideal_cycles(seq["phase_cycles"], isolated["phase_cycles"] if isolated else None,
                           fused)}
    return {name: (cycles, None if cycles is None else seq["cycles"] / cycles)
            for name, cycles in rows.items()}


def dram_total(run):
    """A run's DRAM accesses (beats) over every category of Figure 18."""
    return sum(run["dram"][c] for c in CATEGORIES)


def figure16_lines(results):
    s = speedups(results)
    seq = results["sequential"]["phase_cycles"]
    # the collective: a reduce-scatter's phase, or an all-to-all's (which no AG follows)
    name = "RS" if "ag" in seq else "all-to-all"
    isolated = "RS with NMC and AG" if fused_all_gather(
        seq, results[ISOLATED_RS]["phase_cycles"]) else \
        "RS with NMC" if name == "RS" else name
    lines = ["Figure 16 view: speedup over Sequential",
             f"  (Sequential phases: GEMM {seq['gemm']}, {name} {seq['rs']}"
             + (f", AG {seq['ag']}" if "ag" in seq else "") + " cycles; "
             f"{isolated} in isolation "
             f"{results[ISOLATED_RS]['phase_cycles']['gemm_rs']})",
             f"  {'configuration':24s} {'cycles':>9s} {'speedup':>8s}"]
    for name, (cycles, speedup) in s.items():
        lines.append(f"  {name:24s} {cycles:9d} {speedup:8.3f}")
    ideal = s["Ideal-GEMM-RS-Overlap"][1]
    for name in ("T3", "T3-MCA"):
        got = s[name][1]
        lines.append(f"  {name} reaches {100 * (got - 1) / (ideal - 1):.0f}% of the ideal "
                     f"overlap's gain ({got:.3f} of {ideal:.3f})" if ideal > 1 else
                     f"  {name}: {got:.3f} (ideal overlap {ideal:.3f})")
    return lines


def figure18_lines(results):
    base = dram_total(results["sequential"])
    lines = ["Figure 18 view: DRAM accesses (beats) by category",
             "  " + f"{'configuration':14s}" + "".join(f"{c:>12s}" for c in CATEGORIES)
             + f"{'total':>9s}{'vs seq':>8s}"]
    for config in CONFIGS:
        d = results[config]["dram"]
        total = dram_total(results[config])
        lines.append("  " + f"{config:14s}" + "".join(f"{d[c]:12d}" for c in CATEGORIES)
                     + f"{total:9d}{total / base:8.3f}")
    return lines


def plot(results, path):
    """Both views side by side in one matplotlib figure saved to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    s = speedups(results)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(s)
    ax1.bar(range(len(names)), [s[n][1] for n in names],
            color=["grey", "tab:blue", "tab:green", "tab:orange", "tab:red"])
    ax1.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_ylabel("speedup over Sequential")
    ax1.set_title("Figure 16 view")
    bottom = [0.0] * len(CONFIGS)
    base = dram_total(results["sequential"])
    for cat in CATEGORIES:
        values = [results[c]["dram"][cat] / base for c in CONFIGS]
        ax2.bar(range(len(CONFIGS)), values, bottom=bottom, label=cat)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax2.set_xticks(range(len(CONFIGS)), CONFIGS)
    ax2.set_ylabel("DRAM accesses / Sequential's")
    ax2.set_title("Figure 18 view")
    ax2.legend(fontsize="small")
    w = results["sequential"]["workload"]
    fig.suptitle(f"{w['name']}: {w['m']} x {w['n']} x {w['k']} {w['dtype']}, "
                 f"{results['sequential']['gpus']} GPUs")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
