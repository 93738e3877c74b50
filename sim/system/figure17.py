"""Figure 17 on the ring: what the reduce-scatter's bursts do to the GEMM's reads.

The paper's Figure 17 (section 6.1.2) shows one GPU of T-NLG FC-2 at TP 8: the isolated GEMM
in stages, each a read phase and a burst of writes; then under T3 the RS's reads and updates
arriving in bursts, stalling the GEMM's reads; section 6.1.3's MCA keeps them from filling
the memory controller's queue.  Here the same case runs on its 8-GPU ring in Sequential (the
GEMM alone in its phase: Figure 17(a)), T3 and T3-MCA with the timeline sampled
(:mod:`sim.system.timeline`), each run verified bit for bit.  Per run, GPU 0's rates over
time: the GEMM's read requests and stores, the DMA's payload beats sent (its tile reads) and
the update beats arriving, the fraction of cycles a GEMM request waited at the MC arbiter,
and the MCQ's communication entries.

``t3 paper --figure17`` runs the three jobs (cached, as every paper run) and draws them;
with ``--record`` the picture and the runs' figures go to ``docs/results/figure17-<scale>``
(``.png``, ``.json``) with the digest of the code they ran on (:mod:`sim.system.figures`).
"""

import json
import time
from pathlib import Path


__all__ = ["CASE", "CONFIGS", "PERIOD", "run_timeline", "jobs", "summary", "gpu_series",
           "draw", "markdown"]


#: The case of the paper's Figure 17.
CASE = "T-NLG-FC-2-TP8"

#: Its runs: the GEMM alone (Sequential's GEMM phase), T3, T3-MCA.
CONFIGS = ("sequential", "t3", "t3-mca")

#: Cycles between samples.
PERIOD = 500

#: The sampled counters drawn, as rates: (timeline register, label, colour).
RATES = (("gpu.reads", "GEMM reads issued", "tab:blue"),
         ("gpu.stores", "GEMM stores", "tab:cyan"),
         ("dma.beats_sent", "RS tile reads sent (DMA)", "tab:red"),
         ("dma.beats_received", "RS beats arriving (updates)", "tab:orange"))


def run_timeline(config, scale, sim=None, seed=1, period=PERIOD):
    """One run of :data:`CASE` in ``config`` at ``scale`` with the timeline sampled every
    ``period`` cycles (the job); returns its figures and GPU 0's series (JSON).  Raises
    ``AssertionError`` when the run is not bit-exact."""
    from sim.system.cases import case_setup
    from sim.system.run import preset_setup, run_config
    spec, gpus, _ = case_setup(CASE, scale)
    start = time.monotonic()
    r = run_config(spec, gpus, config, sim=sim, seed=seed, timeline=period,
                   **preset_setup(spec))
    if not r.get("verified"):
        raise AssertionError(f"{CASE} {config}: the result is not bit-exact")
    return {"case": CASE, "config": config, "scale": scale, "gpus": gpus,
            "cycles": r["cycles"], "phase_cycles": r["phase_cycles"],
            "compute_wait": r["compute_wait"], "arbiter_threshold": r["arbiter_threshold"],
            "period": period, "series": gpu_series(r, 0),
            "wall_s": round(time.monotonic() - start, 1)}


def gpu_series(result, gpu):
    """GPU ``gpu``'s series from a run with a timeline: ``cycles`` (each interval's end), the
    phases ``[(name, first, last)]``, each of :data:`RATES` in beats per cycle over each
    interval, ``stalled`` (the fraction of the interval a GEMM request waited at the
    arbiter) and ``mcq_comm`` (the MCQ's communication entries at the sample: all its entries
    less the compute stream's, two registers the host reads a few cycles apart, so the
    difference can dip below zero by the entries that moved in between; drawn from zero)."""
    tl = result["timeline"]
    at = {name: i for i, name in enumerate(tl["regs"])}
    samples = tl["samples"]
    out = {"cycles": [], "phases": [[n, a, b] for n, (a, b) in tl["spans"].items()],
           "stalled": [], "mcq_comm": []}
    for reg, _, _ in RATES:
        out[reg] = []
    for prev, s in zip(samples, samples[1:]):
        dt = max(1, s["cycle"] - prev["cycle"])
        now, before = s["gpus"][gpu], prev["gpus"][gpu]
        out["cycles"].append(s["cycle"])
        for reg, _, _ in RATES:
            out[reg].append((now[at[reg]] - before[at[reg]]) / dt)
        wait = at["arbiter.compute_wait"]
        out["stalled"].append((now[wait] - before[wait]) / dt)
        out["mcq_comm"].append(max(0, now[at["arbiter.occupancy"]] -
                                   now[at["arbiter.compute_occupancy"]]))
    return out


def jobs(scale, sim=None):
    """The :class:`sim.sweep.Job` of each of :data:`CONFIGS`."""
    from sim.sweep import Job
    kwargs = {"sim": sim} if sim else {}
    return [Job(f"{CASE}/{config}/timeline", "sim.system.figure17:run_timeline",
                (config, scale), kwargs) for config in CONFIGS]


def summary(runs):
    """``{config: {...}}``: what the table shows of each run (``runs[config]`` as
    :func:`run_timeline` returns): its cycles, the GEMM's phase (Sequential's GEMM, the
    others' fused GEMM + RS), the GEMM's waits at the arbiter per GPU, and MCA's
    thresholds."""
    out = {}
    for config, r in runs.items():
        ph = r["phase_cycles"]
        out[config] = {"cycles": r["cycles"], "gemm_phase": ph.get("gemm", ph.get("gemm_rs")),
                       "waits_per_gpu": r["compute_wait"] / r["gpus"],
                       "thresholds": sorted(set(r["arbiter_threshold"] or ()))}
    return out


def markdown(data, image=None):
    """The table of a recorded Figure 17 (``{"runs": {config: run}}``), and the picture."""
    s = summary(data["runs"])
    seq = s.get("sequential", {}).get("gemm_phase")
    md = ["| run | cycles | the GEMM's phase | against the GEMM alone | the GEMM's waits at the "
          "MC arbiter, per GPU | MCA's threshold |", "|---|---:|---:|---:|---:|---:|"]
    names = {"sequential": "Sequential (the GEMM alone)", "t3": "T3", "t3-mca": "T3-MCA"}
    for config in CONFIGS:
        if config not in s:
            continue
        v = s[config]
        ratio = f"{v['gemm_phase'] / seq:.3f}×" if seq else "—"
        thr = "/".join(map(str, v["thresholds"])) if config == "t3-mca" else "—"
        md.append(f"| {names[config]} | {v['cycles']:,} | {v['gemm_phase']:,} | {ratio} | "
                  f"{v['waits_per_gpu']:,.0f} | {thr} |")
    if image:
        md += ["", f"![Figure 17 on the ring: GPU 0's traffic over time]({image})"]
    return md


def draw(runs, path):
    """GPU 0 of each run in ``runs`` (``{config: run}``), one panel a run on one time axis:
    the rates of :data:`RATES`, the GEMM's stalled fraction and the MCQ's communication
    entries; the phases marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    configs = [c for c in CONFIGS if c in runs]
    fig, axes = plt.subplots(len(configs), 1, sharex=True, squeeze=False,
                             figsize=(12, 1 + 2.6 * len(configs)))
    for ax, config in zip(axes[:, 0], configs):
        r = runs[config]
        s = r["series"]
        x = s["cycles"]
        for reg, label, colour in RATES:
            ax.plot(x, s[reg], label=label, color=colour, linewidth=0.8)
        ax.fill_between(x, s["stalled"], step="pre", color="black", alpha=0.25,
                        label="GEMM request waiting at the MC arbiter (fraction)")
        ax.set_ylabel("beats / cycle", fontsize="small")
        ax.set_ylim(bottom=0)
        right = ax.twinx()
        right.plot(x, s["mcq_comm"], color="tab:purple", linewidth=0.6, alpha=0.7,
                   label="MCQ entries: communication")
        right.set_ylabel("MCQ entries", fontsize="small", color="tab:purple")
        right.tick_params(labelsize="x-small")
        for name, first, last in s["phases"]:
            ax.axvline(first, color="grey", linewidth=0.6)
            ax.text((first + last) / 2, 1.0, name, transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize="x-small")
        thr = ""
        if config == "t3-mca" and r.get("arbiter_threshold"):
            thr = f", MCA threshold {'/'.join(map(str, sorted(set(r['arbiter_threshold']))))}"
        ax.set_title(f"{config}: {r['cycles']:,} cycles; the GEMM waited "
                     f"{r['compute_wait'] / r['gpus']:,.0f} cycles a GPU at the MC arbiter"
                     f"{thr}", fontsize="small", loc="left", pad=12)
        ax.tick_params(labelsize="x-small")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    h2, l2 = fig.axes[-1].get_legend_handles_labels()
    fig.legend(handles + h2, labels + l2, loc="lower center", ncol=3, fontsize="x-small")
    axes[-1, 0].set_xlabel("cycle")
    first = runs[configs[0]]
    fig.suptitle(f"Figure 17 on the ring: {CASE} at scale {first['scale']:g}, GPU 0 of "
                 f"{first['gpus']} (sampled every {first['period']} cycles)",
                 fontsize="medium")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def write(runs, out):
    """The picture and the runs into folder ``out``: ``figure17.png``, ``figure17.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    draw(runs, out / "figure17.png")
    (out / "figure17.json").write_text(json.dumps(runs, indent=1, sort_keys=True) + "\n")
    return [out / "figure17.png", out / "figure17.json"]
