"""``t3 paper``: the paper's evaluation (Pati et al., ASPLOS 2024, section 6) on the RTL.

Every sub-layer case of Figure 16 (Mega-GPT-2 and T-NLG, TP 8 and 16, OP, FC-2, FC-1, IP) —
and the TP-32 models of section 6.4 where the ring allows — runs on a ring of its own TP
degree, scaled as :func:`sim.system.workload.preset` describes (``docs/paper.md``), in every
configuration (Sequential, T3, T3-MCA) and the isolated reduce-scatter with NMC behind
Ideal-RS+NMC; every run is checked bit for bit.  The runs are independent jobs on Dask
(:mod:`sim.sweep`), cached per job.  From them come the Figure 16 table (speedups over
Sequential, geomean and max), the Figure 18 table (DRAM accesses per GPU by category and
T3-MCA's reductions) and a report (Markdown + PNG/SVG plots).
"""

import dataclasses
import json
import math
import time
from pathlib import Path

from sim.system.cases import case_setup
from sim.system.compare import CATEGORIES, speedups
from sim.system.configure import CONFIGS, ISOLATED_RS
from sim.system.run import preset_setup
from sim.system.workload import PRESETS, SUBLAYERS, scaled_cus


__all__ = ["FIGURE16_CASES", "LARGE_CASES", "RUNS", "DEFAULT_SCALE",
           "PAPER_STATED", "shared_runs", "recorded_twins", "paper_jobs", "evaluate", "select_cases",
           "select_configs", "figure16_rows", "figure16_lines", "figure18_rows",
           "figure18_lines", "write_report", "write_traces", "geomean", "check_cases", "side_by_side_rows",
           "side_by_side_markdown", "tp32_markdown", "directions_rows", "directions_markdown",
           "row_buffer_markdown", "mcq_means"]


#: Figure 16's cases, in the paper's grouping: model, TP degree, sub-layer.
FIGURE16_CASES = tuple(f"{model}-{sub}-TP{tp}" for model in ("Mega-GPT-2", "T-NLG")
                       for tp in (8, 16) for sub in SUBLAYERS)
#: Section 6.4's larger models at TP 32.
LARGE_CASES = tuple(name for name in PRESETS if PRESETS[name]["tp"] == 32)

#: The scale ``t3 paper`` runs at unless told: 4 CUs a scaled GPU (scale 1 has about twice the
#: cycles); ``docs/paper.md`` gives the set's run time on 2 cores.
DEFAULT_SCALE = 0.5

#: The runs of one case: the three configurations and the isolated RS with NMC.
RUNS = CONFIGS + (ISOLATED_RS,)

#: What the paper states in its text (section 6), for the side-by-side of ``docs/paper.md``
#: and the report: name -> (value, where).
PAPER_STATED = {
    "Ideal-GEMM-RS-Overlap geomean": (1.35, "6.1.1"),
    "Ideal-GEMM-RS-Overlap max": (1.50, "6.1.1 (T-NLG FC-1 TP16)"),
    "T3 geomean": (1.20, "6.1.2"), "T3 max": (1.39, "6.1.2"),
    "T3-MCA geomean": (1.30, "6.1.3"), "T3-MCA max": (1.47, "6.1.3"),
    "DRAM reduction geomean": (0.22, "6.2"), "DRAM reduction max": (0.36, "6.2"),
    "RS reads reduction geomean": (2.4, "6.2 (2.5x TP8, 2.2x TP16)"),
    "GEMM+RS writes reduction geomean": (0.10, "6.2 (14% TP8, 7% TP16)"),
    "GEMM reads reduction geomean": (1.56, "6.2 (1.2x TP8, 2x TP16)"),
    "TP32 geomean": (1.29, "6.4 (GPT-3, PALM, MT-NLG)"), "TP32 max": (1.35, "6.4"),
}


def select_cases(text):
    """``--cases``: ``fig16`` (``None``), ``tp32``, ``all`` or comma-separated case names."""
    groups = {"fig16": FIGURE16_CASES, "tp32": LARGE_CASES,
              "all": FIGURE16_CASES + LARGE_CASES}
    out = []
    for part in ("fig16" if text is None else text).split(","):
        part = part.strip()
        if part in groups:
            out += [c for c in groups[part] if c not in out]
        elif part in PRESETS:
            if part not in out:
                out.append(part)
        else:
            raise ValueError(f"cases: {part!r} is not fig16, tp32, all or a case name "
                             f"(e.g. {FIGURE16_CASES[0]})")
    return tuple(out)


def select_configs(text):
    """``--configs``: a subset of :data:`RUNS` (comma-separated; ``None``: all); Sequential is
    always run, every speedup is over it."""
    if text is None:
        return RUNS
    out = ["sequential"]
    for part in text.split(","):
        part = part.strip()
        if part not in RUNS:
            raise ValueError(f"configs: {part!r} is not one of {', '.join(RUNS)}")
        if part not in out:
            out.append(part)
    return tuple(c for c in RUNS if c in out)


def check_cases(cases, scale, configs=RUNS, sim=None):
    """Refuse a case the rings cannot run on ``sim``, before any job (the ring size, the
    programming of every run in ``configs``)."""
    from system.ring import MAX_GPUS
    from sim.system.run import run_plan
    scaled_cus(scale)
    for name in cases:
        spec, gpus, _ = case_setup(name, scale)
        if gpus > MAX_GPUS:
            raise ValueError(f"case {name}: TP {gpus} needs a ring of {gpus} GPUs; the ring "
                             f"has at most {MAX_GPUS}")
        for config in configs:
            try:
                run_plan(spec, gpus, config, sim=sim, **preset_setup(spec, gpus))
            except ValueError as error:
                raise ValueError(f"case {name} ({config}): {error}") from None


def shared_runs(cases, scale=None):
    """``{case: the earlier case of ``cases`` whose runs are its runs}``: two Table 2
    sub-layers whose runs are one run, the same GEMM (``M x N x K`` per GPU), ring, L2 and
    link settings, only the name differing — FC-1's input-gradient GEMM and FC-2's forward
    GEMM have the same shapes in every model (Table 2).  The simulation is deterministic (one
    seed), so :func:`evaluate` runs such a pair once and gives the second the first's results
    under its own name."""
    scale = DEFAULT_SCALE if scale is None else scale
    first, shared = {}, {}
    for name in cases:
        spec, gpus, _ = case_setup(name, scale)
        key = repr((dataclasses.replace(spec, name=""), gpus, preset_setup(spec)))
        owner = first.setdefault(key, name)
        if owner != name:
            shared[name] = owner
    return shared


def paper_jobs(cases, configs, scale=None, sim=None, timeline=None):
    """The :class:`sim.sweep.Job` list, one case of each :func:`shared_runs` pair, the
    longest first (a ring of more GPUs, then a larger K), so that two workers finish
    together.  ``timeline``: each run samples its timeline every that many cycles (for
    :func:`write_traces`)."""
    from sim.sweep import Job
    scale = DEFAULT_SCALE if scale is None else scale
    shared = shared_runs(cases, scale)
    jobs = []
    for name in cases:
        if name in shared:
            continue
        for config in configs:
            kwargs = {"scale": scale}
            if sim:
                kwargs["sim"] = sim
            if timeline is not None:
                kwargs["timeline"] = timeline
            jobs.append(Job(f"{name}/{config}", "sim.system.cases:run_case", (name, config),
                            kwargs))

    def cost(job):
        name = job.args[0]
        return (PRESETS[name]["tp"] * (1 + PRESETS[name]["k"] / 500), job.name)
    jobs = sorted(jobs, key=cost, reverse=True)
    # the second worker starts on another ring size, so that the two first builds overlap
    # instead of one worker waiting for the other's build of the same ring
    other = next((j for j in jobs[1:] if PRESETS[j.args[0]]["tp"] !=
                  PRESETS[jobs[0].args[0]]["tp"]), None)
    if other is not None:
        jobs.remove(other)
        jobs.insert(1, other)
    return jobs


def recorded_twins(cases, recorded, configs=RUNS, scale=None):
    """``{case: recorded case}``: the cases of ``cases`` missing from ``recorded`` (a record's
    ``results``, current: :func:`sim.system.figures.moved_inputs`) whose :func:`shared_runs` twin it holds with every run of
    ``configs``, so that adding FC-2 to a record holding FC-1 runs nothing."""
    missing = tuple(c for c in cases if c not in recorded)
    pairs = shared_runs(tuple(recorded) + missing, scale)
    return {case: pairs[case] for case in missing
            if pairs.get(case) in recorded and set(configs) <= set(recorded[pairs[case]])}


def evaluate(cases=FIGURE16_CASES, configs=RUNS, *, scale=None, sim=None, cache=None,
             scheduler=None, workers=2, progress=True, check=True, recorded=None,
             timeline=None):
    """Run the jobs; returns ``(results, failures, wall seconds)``: ``results[case][config]``
    is :func:`sim.system.cases.run_case`'s value, ``failures`` ``{job name: one-line error}``.
    ``check``: :func:`check_cases` first (the caller may have).  ``recorded``: a current
    record's results, whose runs a case's twin takes instead of running
    (:func:`recorded_twins`).  ``timeline``: every run that runs samples its timeline
    (:func:`paper_jobs`); a case taken from the record has none."""
    from sim.sweep import run_jobs
    scale = DEFAULT_SCALE if scale is None else scale
    if check:
        check_cases(cases, scale, configs, sim)
    reuse = recorded_twins(cases, recorded or {}, configs, scale)
    run = tuple(c for c in cases if c not in reuse)
    start = time.monotonic()
    outcomes = run_jobs(paper_jobs(run, configs, scale, sim, timeline), cache=cache,
                        scheduler=scheduler, workers=workers, progress=progress) if run else {}
    results, failures = {name: {} for name in cases}, {}
    for job_name, out in outcomes.items():
        case, _, config = job_name.partition("/")
        if out.ok:
            results[case][config] = out.value
        else:
            failures[job_name] = out.error
    for case, owner in shared_runs(run, scale).items():
        for config, r in results[owner].items():
            results[case][config] = _renamed(r, case, owner)
        for job_name, error in list(failures.items()):
            if job_name.startswith(f"{owner}/"):
                failures[f"{case}/{job_name.partition('/')[2]}"] = f"(the run of {owner}) {error}"
    for case, owner in reuse.items():
        results[case] = {config: _renamed(recorded[owner][config], case, owner)
                         for config in configs}
    return results, failures, time.monotonic() - start


def _renamed(run, case, owner):
    """``owner``'s run as ``case``'s (:func:`shared_runs`): its name, and whose run it is (the
    case that ran it, when ``owner``'s was itself shared)."""
    run = dict(run, case=case, shared_with=run.get("shared_with", owner))
    if isinstance(run.get("workload"), dict):
        run["workload"] = dict(run["workload"], name=case)
    return run


# --- the tables --------------------------------------------------------------------------------

def geomean(values):
    values = [v for v in values if v is not None]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


#: Figure 16's bars, in order.
BARS = ("T3", "T3-MCA", "Ideal-GEMM-RS-Overlap", "Ideal-RS+NMC")


def figure16_rows(results):
    """``[(case, {bar: speedup}, GEMM : RS of Sequential)]`` and the summary
    ``{bar: (geomean, max)}``."""
    rows = []
    for case, runs in results.items():
        seq = runs.get("sequential")
        ratio = seq["phase_cycles"]["gemm"] / seq["phase_cycles"]["rs"] if seq else None
        bars = speedups(runs)
        rows.append((case, {bar: bars.get(bar, (None, None))[1] for bar in BARS}, ratio))
    summary = {}
    for bar in BARS:
        values = [s[bar] for _, s, _ in rows if s[bar] is not None]
        summary[bar] = (geomean(values), max(values)) if values else (None, None)
    return rows, summary


def _f(value, fmt="{:.3f}"):
    return "—" if value is None else fmt.format(value)


def figure16_lines(results):
    rows, summary = figure16_rows(results)
    head = f"  {'case':22s} {'GEMM:RS':>7s}" + "".join(f" {b:>12s}" for b in
                                                      ("T3", "T3-MCA", "Ideal-ovlp", "Ideal+NMC"))
    lines = ["Figure 16: speedup over Sequential (GEMM -> RS -> AG)", head]
    for case, s, ratio in rows:
        lines.append(f"  {case:22s} {_f(ratio, '{:.2f}'):>7s}" +
                     "".join(f" {_f(s[b]):>12s}" for b in BARS))
    lines.append(f"  {'geomean':22s} {'':7s}" + "".join(f" {_f(summary[b][0]):>12s}"
                                                     for b in BARS))
    lines.append(f"  {'max':22s} {'':7s}" + "".join(f" {_f(summary[b][1]):>12s}"
                                                 for b in BARS))
    ideal = summary["Ideal-GEMM-RS-Overlap"][0]
    for bar in ("T3", "T3-MCA"):
        g = summary[bar][0]
        if g is not None and ideal is not None:
            lines.append(f"  {bar} geomean is {100 * (ideal - g) / ideal:.1f}% below "
                         f"Ideal-GEMM-RS-Overlap's")
    return lines


def figure18_rows(results, config="t3-mca"):
    """Per case: DRAM accesses per GPU by category (``{config: {category: beats}}``) and
    ``config``'s reductions against Sequential: ``total`` (fraction saved), ``rs_reads``
    (times fewer), ``writes`` (GEMM + RS writes, fraction saved), ``gemm_reads`` (times
    fewer).  Returns ``(rows, summary)``; ``summary[key] = (geomean, max)``."""
    rows = []
    for case, runs in results.items():
        per_gpu = {}
        for c in CONFIGS:
            if c in runs:
                g = runs[c]["gpus"]
                per_gpu[c] = {k: runs[c]["dram"][k] / g for k in CATEGORIES}
        red = {}
        if "sequential" in per_gpu and config in per_gpu:
            s, t = per_gpu["sequential"], per_gpu[config]
            red["total"] = 1 - sum(t.values()) / sum(s.values())
            red["rs_reads"] = s["rs_reads"] / t["rs_reads"] if t["rs_reads"] else None
            red["writes"] = 1 - (t["gemm_writes"] + t["rs_writes"]) / \
                (s["gemm_writes"] + s["rs_writes"])
            red["gemm_reads"] = s["gemm_reads"] / t["gemm_reads"] if t["gemm_reads"] else None
        rows.append((case, per_gpu, red))
    summary = {}
    for key in ("total", "rs_reads", "writes", "gemm_reads"):
        values = [r[key] for _, _, r in rows if r.get(key) is not None]
        if key in ("total", "writes"):   # geomean of the fractions kept, as a saving
            kept = geomean([1 - v for v in values]) if values else None
            summary[key] = (None if kept is None else 1 - kept,
                            max(values) if values else None)
        else:
            summary[key] = (geomean(values), max(values) if values else None)
    return rows, summary


def figure18_lines(results, config="t3-mca"):
    rows, summary = figure18_rows(results, config)
    lines = [f"Figure 18: DRAM accesses per GPU (beats of 32 B) by category; {config}'s "
             f"reductions vs Sequential",
             f"  {'case':22s} {'config':10s}" + "".join(f"{c:>11s}" for c in CATEGORIES)
             + f"{'total':>10s}"]
    for case, per_gpu, red in rows:
        for c, d in per_gpu.items():
            lines.append(f"  {case:22s} {c:10s}" + "".join(f"{d[k]:11.0f}" for k in
                                                        CATEGORIES)
                         + f"{sum(d.values()):10.0f}")
        if red:
            lines.append(f"  {'':22s} {'saved':10s} total {100 * red['total']:.1f}%, RS reads "
                         f"{_f(red['rs_reads'], '{:.2f}x')}, GEMM+RS writes "
                         f"{100 * red['writes']:.1f}%, GEMM reads "
                         f"{_f(red['gemm_reads'], '{:.2f}x')}")
    pct = (lambda v: _f(None if v is None else 100 * v, "{:.1f}%"))
    lines.append(f"  geomean (max): total {pct(summary['total'][0])} "
                 f"({pct(summary['total'][1])}), RS reads "
                 f"{_f(summary['rs_reads'][0], '{:.2f}x')} "
                 f"({_f(summary['rs_reads'][1], '{:.2f}x')}), GEMM+RS writes "
                 f"{pct(summary['writes'][0])} ({pct(summary['writes'][1])}), GEMM reads "
                 f"{_f(summary['gemm_reads'][0], '{:.2f}x')} "
                 f"({_f(summary['gemm_reads'][1], '{:.2f}x')})")
    return lines


def figure16_markdown(results):
    """Figure 16's table: each case's speedups over Sequential, their geomean and maximum."""
    rows, summary = figure16_rows(results)
    md = ["| case | GEMM : RS | " + " | ".join(BARS) + " |",
          "|---|---:|" + "---:|" * len(BARS)]
    for case, s, ratio in rows:
        md.append(f"| {case} | {_f(ratio, '{:.2f}')} | " +
                  " | ".join(_f(s[b]) for b in BARS) + " |")
    for i, label in enumerate(("geomean", "max")):
        md.append(f"| **{label}** | | " + " | ".join(_f(summary[b][i]) for b in BARS)
                  + " |")
    return md


def stall_markdown(results):
    """The GEMM's stalls at the memory controller (Figure 17's measure): the cycles its
    requests waited at the MC arbiter during its phase, per GPU, for each configuration; the
    L2's hit rate of the GEMM's reads; the MCQ's mean entries by stream (compute /
    communication, per GPU over the fused phase, :func:`mcq_means`) under T3 and T3-MCA; and
    how hard Sequential's GEMM drove the CUs and the HBM (:func:`gemm_efficiency`,
    :func:`gemm_hbm_share`)."""
    md = ["| case | Sequential | T3 | T3-MCA | MCA threshold | L2 hits (Seq / T3-MCA) | "
          "MCQ entries, T3 | MCQ entries, T3-MCA | "
          "Sequential's GEMM, of the CUs' peak | of HBM's bandwidth |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for case, runs in results.items():
        def wait(config):
            r = runs.get(config)
            return "—" if r is None or r.get("compute_wait") is None else \
                f"{r['compute_wait'] / r['gpus']:.0f}"

        def hits(config):
            r = runs.get(config)
            l2 = r and r.get("l2")
            if not l2:
                return "—"
            g = l2["gemm_rs" if "gemm_rs" in l2 else "gemm"]
            reads = g["read_hits"] + g["read_misses"] + g["read_merged"]
            return f"{100 * (g['read_hits'] + g['read_merged']) / reads:.0f}%" if reads else "—"
        def mcq(config):
            means = mcq_means(runs.get(config))
            return "—" if means is None else f"{means[0]:.1f} / {means[1]:.1f}"
        mca = runs.get("t3-mca", {}).get("arbiter_threshold")
        md.append(f"| {case} | {wait('sequential')} | {wait('t3')} | {wait('t3-mca')} | "
                  f"{'—' if not mca else '/'.join(str(t) for t in sorted(set(mca)))} | "
                  f"{hits('sequential')} / {hits('t3-mca')} | {mcq('t3')} | {mcq('t3-mca')} | "
                  f"{_f(gemm_efficiency(runs.get('sequential')), '{:.0%}')} | "
                  f"{_f(gemm_hbm_share(runs.get('sequential')), '{:.0%}')} |")
    return md


def causes_markdown(results):
    """Where T3's time goes against Sequential's GEMM, per case, from the recorded counters:
    Sequential's GEMM phase and T3's fused GEMM + RS phase (a ratio below 1: T3's GEMM ran
    faster than Sequential's, which no overlap explains); the cycles the L2 held the CUs' port
    on a miss (``miss_stalls``: waiting for an MSHR, a victim's fill or a line being filled,
    per GPU, as a share of the phase), for Sequential's GEMM, whose stores allocate and write
    back, and for T3, whose stores bypass the L2; and the GEMM's waits at the MC arbiter under
    T3 as a share of its phase, the most MCA can give back."""
    md = ["| case | Sequential's GEMM | T3's GEMM + RS | of Sequential's GEMM | "
          "L2 miss stalls, of the phase (Seq / T3) | GEMM waits at the arbiter under T3 |",
          "|---|---:|---:|---:|---:|---:|"]

    def stalls(run, phase):
        l2 = (run or {}).get("l2") or {}
        if phase not in l2:
            return None
        return l2[phase]["miss_stalls"] / run["gpus"] / run["phase_cycles"][phase]
    for case, runs in results.items():
        seq, t3 = runs.get("sequential"), runs.get("t3")
        if not seq or not t3:
            continue
        g, f = seq["phase_cycles"]["gemm"], t3["phase_cycles"]["gemm_rs"]
        wait = t3.get("compute_wait")
        md.append(f"| {case} | {g:,} | {f:,} | {f / g:.2f} | "
                  f"{_f(stalls(seq, 'gemm'), '{:.0%}')} / {_f(stalls(t3, 'gemm_rs'), '{:.0%}')} | "
                  f"{_f(None if wait is None else wait / t3['gpus'] / f, '{:.1%}')} |")
    return md


def mcq_means(run):
    """``(compute, communication)``: the MCQ's mean entries of each stream per GPU over the
    run's GEMM phase (the fused phase of T3), from its ``mcq_occupancy`` sums; ``None``
    without them (a record from before they were counted)."""
    occ = (run or {}).get("mcq_occupancy")
    if not occ:
        return None
    phase = "gemm_rs" if "gemm_rs" in run["phase_cycles"] else "gemm"
    span = run["gpus"] * run["phase_cycles"][phase]
    return occ["compute"] / span, occ["comm"] / span


def gemm_efficiency(run):
    """The fraction of the CUs' peak a Sequential run's GEMM reached: its cycles at the peak
    flop rate (``2 M N K / F``, :attr:`sim.system.workload.GemmSpec.flops`) over its phase's
    cycles; ``None`` without the run."""
    from sim.system.workload import GemmSpec
    if not run or "workload" not in run:
        return None
    w = run["workload"]
    spec = GemmSpec(m=w["m"], n=w["n"], k=w["k"], dtype=w["dtype"])
    return 2 * w["m"] * w["n"] * w["k"] / spec.flops / run["phase_cycles"]["gemm"]


def gemm_hbm_share(run):
    """The fraction of its HBM's bandwidth a Sequential run's GEMM used: its DRAM beats (the
    reads that missed the L2 and the write-backs, per GPU) over the beats its phase could have
    moved, one every ``CCD_S`` cycles (:data:`sim.system.workload.MODEL_HBM_BYTES_PER_CYCLE`);
    ``None`` without the run or its counters."""
    from hw.params import T3Params
    from sim.system.workload import MODEL_HBM_BYTES_PER_CYCLE
    if not run or not run.get("dram") or "gemm" not in run.get("phase_cycles", {}):
        return None
    beats = (run["dram"]["gemm_reads"] + run["dram"]["gemm_writes"]) / run["gpus"]
    per_cycle = MODEL_HBM_BYTES_PER_CYCLE / T3Params().beat_bytes
    return beats / (per_cycle * run["phase_cycles"]["gemm"])


def figure18_markdown(results, config="t3-mca"):
    """Figure 18's reductions: ``config``'s DRAM accesses against Sequential's, per case."""
    rows, summary = figure18_rows(results, config)
    md = ["| case | total saved | RS reads | GEMM+RS writes saved | GEMM reads |",
          "|---|---:|---:|---:|---:|"]
    for case, _, red in rows:
        if red:
            md.append(f"| {case} | {100 * red['total']:.1f}% | "
                      f"{_f(red['rs_reads'], '{:.2f}x')} | {100 * red['writes']:.1f}% | "
                      f"{_f(red['gemm_reads'], '{:.2f}x')} |")
    pct = (lambda v: _f(None if v is None else 100 * v, "{:.1f}%"))
    for i, label in enumerate(("geomean", "max")):
        md.append(f"| **{label}** | {pct(summary['total'][i])} | "
                  f"{_f(summary['rs_reads'][i], '{:.2f}x')} | "
                  f"{pct(summary['writes'][i])} | "
                  f"{_f(summary['gemm_reads'][i], '{:.2f}x')} |")
    return md


def _by_tp(results):
    """``{tp: results of that TP degree's cases}`` (the case name's ``-TP<n>``), smallest TP
    first."""
    out = {}
    for case, runs in results.items():
        out.setdefault(int(case.rsplit("-TP", 1)[1]), {})[case] = runs
    return dict(sorted(out.items()))


def side_by_side_rows(results):
    """Every number section 6 of the paper states about the Figure 16 cases, beside the
    model's measure of it from ``results``: ``[(statement, the paper's value, the
    model's)]``; a measure the results cannot give (a case or run missing) is ``—``."""
    rows16, summary = figure16_rows(results)
    speed = {case: s for case, s, _ in rows16}
    _, dram = figure18_rows(results)
    by_tp = _by_tp(results)
    x = (lambda v: _f(v, "{:.2f}×"))
    pct = (lambda v: _f(None if v is None else 100 * v, "{:.0f} %"))

    def pair(bar):
        g, m = summary[bar]
        return f"{x(g)} / {x(m)}"

    def case(name, bar):
        return x(speed.get(name, {}).get(bar))

    def ratio_range(names, bar, over="Ideal-GEMM-RS-Overlap"):
        values = [speed[n][bar] / speed[n][over] for n in names
                  if n in speed and speed[n][bar] and speed[n][over]]
        if not values:
            return "—"
        low, high = f"{min(values):.2f}", f"{max(values):.2f}"
        return f"{low} of it" if low == high else f"{low}–{high} of it"

    def per_tp(key, fmt):
        parts = []
        for tp, sub in by_tp.items():
            value = figure18_rows(sub)[1][key][0]
            parts.append(f"TP {tp} {fmt(value)}")
        return ", ".join(parts)

    def nmc_rs():
        parts = []
        for tp, sub in by_tp.items():
            gains = [runs["sequential"]["phase_cycles"]["rs"] /
                     runs[ISOLATED_RS]["phase_cycles"]["gemm_rs"]
                     for runs in sub.values() if "sequential" in runs and ISOLATED_RS in runs]
            g = geomean(gains)
            parts.append(f"TP {tp} {pct(None if g is None else g - 1)}")
        return ", ".join(parts) or "—"

    def over(bar, base):
        values = [s[bar] / s[base] for s in speed.values() if s[bar] and s[base]]
        return f"{x(geomean(values))} / {x(max(values))}" if values else "—"

    nmc_extra = [s["Ideal-RS+NMC"] / s["Ideal-GEMM-RS-Overlap"] - 1 for s in speed.values()
                 if s["Ideal-RS+NMC"] and s["Ideal-GEMM-RS-Overlap"]]
    ideal_g, mca_g = summary["Ideal-GEMM-RS-Overlap"][0], summary["T3-MCA"][0]
    ops = [n for n in speed if "-OP-" in n]
    fcs = [n for n in speed if "-FC-" in n]
    return [
        ("Ideal-GEMM-RS-Overlap, geomean / max (6.1.1)", "1.35× / 1.50×",
         pair("Ideal-GEMM-RS-Overlap")),
        ("T-NLG FC-1 TP 16's ideal, the best case (6.1.1)", "1.50×",
         case("T-NLG-FC-1-TP16", "Ideal-GEMM-RS-Overlap")),
        ("Mega-GPT-2 OP TP 16's ideal, the worst case (6.1.1)", "1.15×",
         case("Mega-GPT-2-OP-TP16", "Ideal-GEMM-RS-Overlap")),
        ("RS faster with NMC alone, geomean by TP (6.1.1)", "TP 8 7 %, TP 16 3 %", nmc_rs()),
        ("Ideal-RS+NMC over Ideal-GEMM-RS-Overlap, max (6.1.1)", "4 %",
         pct(max(nmc_extra)) if nmc_extra else "—"),
        ("T3, geomean / max (6.1.2)", "1.20× / 1.39×", pair("T3")),
        ("OP layers: T3 against Ideal-GEMM-RS-Overlap (6.1.2)", "close to it, above it in some",
         ratio_range(ops, "T3")),
        ("FC layers: T3 against Ideal-GEMM-RS-Overlap (6.1.2)", "many more than 15 % below",
         ratio_range(fcs, "T3")),
        ("T3-MCA, geomean / max (6.1.3)", "1.30× / 1.47×", pair("T3-MCA")),
        ("T3-MCA over T3, geomean / max (6.1.3)", "1.13× / 1.29×", over("T3-MCA", "T3")),
        ("T3-MCA's geomean below Ideal-GEMM-RS-Overlap's (6.1.3)", "5 %",
         pct(None if not (ideal_g and mca_g) else 1 - mca_g / ideal_g)),
        ("T-NLG FC-1 TP 16: T3-MCA against its ideal, far below (6.1.3)", "far",
         ratio_range(["T-NLG-FC-1-TP16"], "T3-MCA")),
        ("DRAM accesses saved, geomean / max (6.2)", "22 % / 36 %",
         f"{pct(dram['total'][0])} / {pct(dram['total'][1])}"),
        ("RS reads reduction, geomean by TP (6.2)", "2.4×: TP 8 2.5×, TP 16 2.2×",
         f"{x(dram['rs_reads'][0])}: {per_tp('rs_reads', x)}"),
        ("GEMM + RS writes saved, geomean by TP (6.2)", "10 %: TP 8 14 %, TP 16 7 %",
         f"{pct(dram['writes'][0])}: {per_tp('writes', pct)}"),
        ("GEMM reads reduction, geomean by TP (6.2)", "1.56×: TP 8 1.2×, TP 16 2×",
         f"{x(dram['gemm_reads'][0])}: {per_tp('gemm_reads', x)}"),
    ]


def _fc_op(results):
    return ([c for c in results if "-FC-" in c], [c for c in results if "-OP-" in c])


def directions_rows(results):
    """The paper's directions (section 6), each with the model's measure from ``results``
    (Figure 16's cases) and whether it holds there: ``[(direction, the paper, the model,
    holds)]``, ``holds`` ``None`` where the runs it needs are missing.  Memory-intensive GEMMs
    are the FC layers', as section 6.1.2 names them."""
    rows16, _ = figure16_rows(results)
    speed = {case: sp for case, sp, _ in rows16}
    fc, op = _fc_op(results)
    out = []

    def of(names, bar, base):
        return [speed[n][bar] / speed[n][base] for n in names
                if n in speed and speed[n].get(bar) and speed[n].get(base)]

    def span(values):
        return "—" if not values else f"{min(values):.2f}–{max(values):.2f}"
    t3_ideal = of(fc, "T3", "Ideal-GEMM-RS-Overlap")
    out.append(("FC layers: T3 below Ideal-GEMM-RS-Overlap (6.1.2)", "more than 15 % below",
                f"T3 {span(t3_ideal)} of the ideal",
                all(v < 1 for v in t3_ideal) if t3_ideal else None))
    mca_fc = of(fc, "T3-MCA", "T3")
    g = geomean(mca_fc)
    out.append(("FC layers: T3-MCA above T3 (6.1.3)", "1.13× geomean over T3, 1.29× max",
                f"{span(mca_fc)}, geomean {_f(g, '{:.2f}')}",
                None if g is None else g > 1))

    def thresholds(names):
        return [t for n in names for t in
                (results[n].get("t3-mca") or {}).get("arbiter_threshold") or ()]
    fc_thr, op_thr = thresholds(fc), thresholds(op)
    share = (sum(t in (5, 10) for t in fc_thr) / len(fc_thr)) if fc_thr else None
    out.append(("FC layers: MCA's calibration chooses 5 or 10 (4.5, 6.1.3)",
                "5 or 10 for a memory-intensive GEMM",
                "—" if share is None else f"5 or 10 on {share:.0%} of the GPUs",
                None if share is None else share > 0.5))
    mca_op = of(op, "T3-MCA", "T3")
    high = [t for t in op_thr if t not in (5, 10)]
    out.append(("OP layers: MCA leaves T3 as it is (4.5)",
                "30 or no limit for a GEMM that is not memory-intensive",
                "—" if not op_thr else f"30 or no limit on {len(high) / len(op_thr):.0%} of "
                f"the GPUs; T3-MCA {span(mca_op)} of T3",
                len(high) == len(op_thr) if op_thr else None))
    by_tp = _by_tp(results)
    gains = {}
    for tp, sub in by_tp.items():
        gains[tp] = geomean([runs["sequential"]["phase_cycles"]["rs"] /
                             runs[ISOLATED_RS]["phase_cycles"]["gemm_rs"]
                             for runs in sub.values()
                             if "sequential" in runs and ISOLATED_RS in runs])
    known = {tp: v for tp, v in gains.items() if v is not None}
    out.append(("The RS with NMC alone faster than Sequential's RS (6.1.1)",
                "7 % at TP 8, 3 % at TP 16",
                ", ".join(f"TP {tp} {100 * (v - 1):+.0f} %" for tp, v in known.items()) or "—",
                all(v > 1 for v in known.values()) if known else None))
    reads = {tp: figure18_rows(sub)[1]["gemm_reads"][0] for tp, sub in by_tp.items()}
    both = reads.get(8) is not None and reads.get(16) is not None
    out.append(("GEMM reads saved more at TP 16 than at TP 8 (6.2)", "2× against 1.2×",
                ", ".join(f"TP {tp} {_f(v, '{:.2f}×')}" for tp, v in reads.items()) or "—",
                reads[16] > reads[8] if both else None))
    return out


def directions_markdown(results):
    """:func:`directions_rows` as a Markdown table."""
    word = {True: "yes", False: "**no**", None: "—"}
    md = ["| the paper's direction (section) | the paper | the model | holds |",
          "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {word[h]} |" for a, b, c, h in directions_rows(results)]
    return md


def row_buffer_markdown(results):
    """The DRAM row buffer per case: the share of accesses that found their row open, of
    Sequential's GEMM alone (its phase's compute stream), of Sequential's RS alone (its
    phase), and under T3 and T3-MCA of the GEMM's and the RS's streams in their fused phase,
    where one in-order MCQ interleaves them (``dram_rows`` of the runs; ``—`` without)."""
    md = ["| case | Sequential's GEMM | Sequential's RS | T3: GEMM / RS | T3-MCA: GEMM / RS |",
          "|---|---:|---:|---:|---:|"]

    def rate(run, phase, streams):
        rows = ((run or {}).get("dram_rows") or {}).get(phase)
        if not rows:
            return None
        total = sum(rows[f"{k}_{s}"] for k in ("hits", "misses", "conflicts") for s in streams)
        return sum(rows[f"hits_{s}"] for s in streams) / total if total else None
    pct = (lambda v: _f(None if v is None else 100 * v, "{:.0f}%"))
    for case, runs in results.items():
        seq = runs.get("sequential")
        cells = [pct(rate(seq, "gemm", ("compute",))),
                 pct(rate(seq, "rs", ("compute", "comm")))]
        for config in ("t3", "t3-mca"):
            run = runs.get(config)
            cells.append(f"{pct(rate(run, 'gemm_rs', ('compute',)))} / "
                         f"{pct(rate(run, 'gemm_rs', ('comm',)))}")
        md.append(f"| {case} | " + " | ".join(cells) + " |")
    return md


def tp32_markdown(results):
    """Section 6.4's cases (``results`` of :data:`LARGE_CASES`): Figure 16's speedups, Figure
    18's DRAM reductions and the paper's geomean and max beside the model's."""
    rows, summary = figure16_rows(results)
    g, m = summary["T3-MCA"]
    missing = [c for c in LARGE_CASES if c not in results]
    md = ["**Section 6.4: GPT-3, PALM and MT-NLG at TP 32** (32-GPU rings; "
          f"{len(results)} of the {len(LARGE_CASES)} cases recorded"
          + (f"; `--cases {','.join(missing)}` adds the rest" if missing else "") + ")", ""]
    md += figure16_markdown(results) + [""] + figure18_markdown(results) + [""]
    md += ["| the paper states (section) | the paper | the model |", "|---|---|---|",
           f"| T3-MCA's sub-layer speedups at TP 32, geomean / max (6.4) | "
           f"{PAPER_STATED['TP32 geomean'][0]:.2f}× / {PAPER_STATED['TP32 max'][0]:.2f}× | "
           f"{_f(g, '{:.2f}')}× / {_f(m, '{:.2f}')}× |"]
    return md


def side_by_side_markdown(results):
    """:func:`side_by_side_rows` as a Markdown table."""
    md = ["| the paper states (section) | the paper | the model |", "|---|---|---|"]
    md += [f"| {a} | {b} | {c} |" for a, b, c in side_by_side_rows(results)]
    return md


# --- the report --------------------------------------------------------------------------------

_COLOURS = {"T3": "gold", "T3-MCA": "tab:green", "Ideal-GEMM-RS-Overlap": "tab:blue",
            "Ideal-RS+NMC": "tab:purple"}


def _plot16(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, _ = figure16_rows(results)
    fig, ax = plt.subplots(figsize=(max(6, 0.75 * len(rows) + 2), 4.5))
    width = 0.8 / len(BARS)
    for i, bar in enumerate(BARS):
        xs = [j + (i - (len(BARS) - 1) / 2) * width for j in range(len(rows))]
        ys = [100 * (s[bar] - 1) if s[bar] is not None else 0 for _, s, _ in rows]
        ax.bar(xs, ys, width, label=bar, color=_COLOURS[bar])
    ax.set_xticks(range(len(rows)), [case for case, _, _ in rows], rotation=45, ha="right",
                  fontsize="small")
    ax.axhline(0, color="black", linewidth=0.8)
    _save(plt, fig, ax, "% speedup over Sequential", "Figure 16 on the RTL: sub-layer speedups",
          path)


def _plot18(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, _ = figure18_rows(results)
    bars = [(case, c, d) for case, per_gpu, _ in rows for c, d in per_gpu.items()]
    fig, ax = plt.subplots(figsize=(max(6, 0.3 * len(bars) + 2), 4.8))
    bottom = [0.0] * len(bars)
    for cat in CATEGORIES:
        values = [d[cat] for _, _, d in bars]
        ax.bar(range(len(bars)), values, bottom=bottom, label=cat)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(bars)), [f"{case} {c}" for case, c, _ in bars], rotation=90,
                  fontsize="x-small")
    _save(plt, fig, ax, "DRAM accesses per GPU (32-byte beats)",
          "Figure 18 on the RTL: DRAM accesses by category", path)


def _save(plt, fig, ax, ylabel, title, path):
    """Label, legend, and ``path`` as PNG and SVG."""
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    for suffix in (".png", ".svg"):
        fig.savefig(path.with_suffix(suffix))
    plt.close(fig)


def _untraced(results):
    """``results`` without the runs' timeline samples (the traces hold them)."""
    return {case: {config: {k: v for k, v in r.items() if k != "timeline"}
                   for config, r in runs.items()} for case, runs in results.items()}


def write_traces(results, folder):
    """``t3 paper --trace DIR``: one trace per case in ``folder`` (``CASE.json``), its runs
    side by side (:func:`sim.system.trace.write`); a case none of whose runs sampled a
    timeline (taken from the record) gets none.  Returns the files written."""
    from sim.system.trace import write
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for case, runs in results.items():
        traced = {config: r for config, r in runs.items() if "timeline" in r}
        if traced:
            files.append(write(traced, folder / f"{case}.json"))
    return files


def write_report(results, failures, out, *, scale=1.0, wall_s=None):
    """``out/report.md``, ``out/figure16.{png,svg}``, ``out/figure18.{png,svg}`` and
    ``out/results.json``; returns the report's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(
        {"scale": scale, "wall_s": wall_s, "results": _untraced(results), "failures": failures},
        indent=1))
    _plot16(results, out / "figure16")
    _plot18(results, out / "figure18")
    runs = [r for runs in results.values() for r in runs.values()]
    md = ["# T3 on the RTL: the paper's evaluation", "",
          f"Scale {scale:g} (the scaled GPU has {scaled_cus(scale)} CUs; `docs/paper.md` "
          f"derives every scaling choice). {len(runs)} runs, "
          f"{'every one' if all(r['verified'] for r in runs) else 'NOT every one'} verified "
          f"bit for bit"
          + (f"; {len(failures)} failed" if failures else "")
          + (f"; {wall_s / 60:.1f} minutes of wall time" if wall_s else "") + ".", ""]
    if failures:
        md += ["## Failed runs", ""] + [f"- `{name}`: {error}" for name, error in
                                        failures.items()] + [""]
    md += ["## Figure 16: speedup over Sequential", "", "![Figure 16](figure16.png)", ""]
    md += figure16_markdown(results)
    md += ["", "The GEMM's waits at the MC arbiter (cycles per GPU during its phase) and the "
           "L2's hits among its reads:", ""] + stall_markdown(results)
    md += ["", "The paper (section 6.1): " + ", ".join(
        f"{k} {v[0]:.2f}" for k, v in PAPER_STATED.items() if k.split()[0] in
        ("T3", "T3-MCA", "Ideal-GEMM-RS-Overlap")) + ".", "",
           "## Figure 18: DRAM accesses per GPU", "", "![Figure 18](figure18.png)", "",
           "| case | config | " + " | ".join(CATEGORIES) + " | total |",
           "|---|---|" + "---:|" * (len(CATEGORIES) + 1)]
    rows18, _ = figure18_rows(results)
    for case, per_gpu, red in rows18:
        for c, d in per_gpu.items():
            md.append(f"| {case} | {c} | " + " | ".join(f"{d[k]:.0f}" for k in
                                                        CATEGORIES)
                      + f" | {sum(d.values()):.0f} |")
    md += ["", "T3-MCA against Sequential:", ""] + figure18_markdown(results)
    md += ["", "## Runs", "", "| run | GPUs | cycles | phases | simulated in |",
           "|---|---:|---:|---|---:|"]
    for case, runs_ in results.items():
        for config, r in runs_.items():
            phases = ", ".join(f"{k} {v}" for k, v in r["phase_cycles"].items())
            took = (f"{r['wall_s']:.0f} s" if "wall_s" in r else "—") + \
                (f" (the run of {r['shared_with']})" if "shared_with" in r else "")
            md.append(f"| {case} {config} | {r['gpus']} | {r['cycles']} | {phases} | "
                      f"{took} |")
    path = out / "report.md"
    path.write_text("\n".join(md) + "\n")
    return path
