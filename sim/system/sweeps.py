"""``t3 sweep``: one workload over the values of workload and hardware parameters, every point
and configuration an independent job on Dask (:mod:`sim.sweep`), every run verified.

Parameters (:data:`PARAMETERS`): the workload's ``m``, ``n``, ``k``, ``cus``, ``wfs_per_wg``,
``dtype``, ``flops_per_cycle`` (the scaled GPU's flop rate, all its CUs together; default the
paper's GPU's, :attr:`sim.system.workload.GemmSpec.flops`), ``k_slice`` (elements of ``K`` a WG
streams at a time, :attr:`sim.system.workload.GemmSpec.k_slice`, its engines built streaming;
0: whole panels); the ring's ``link_bw`` (``NUM/DEN``
beats per cycle), ``link_latency`` (cycles), ``link_headers`` (``charged``: a packet's header beat costs link bandwidth; ``free``: only
the payload does, the paper's link model and the default), ``mcq_depth`` (the memory
controller queue's entries), ``memory_rows``, ``l2_ways`` (the ways of every node's L2 in
use, of the preset's L2 or :data:`system.spec.PAPER_L2`; 0: no L2), ``l2_mshrs`` and
``l2_depth`` (its MSHRs and the requests it takes in flight), ``dma_buffer`` (the DMA
engine's payload buffer in beats: the tile reads it keeps in flight), ``dram_scheduler``
(``in-order``, ``bank-parallel`` or ``fr-fcfs``: how the NMC unit schedules).  A point that
changes the ring builds (and caches) that ring once.
"""

import dataclasses
import itertools
import time

from hw.params import check_int


__all__ = ["PARAMETERS", "parse_vary", "sweep_points", "run_point", "sweep_jobs", "sweep_lines",
           "trace_name", "write_traces"]


def _bw(text):
    try:
        num, den = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ValueError(f"link_bw must be NUM/DEN (e.g. 3/80), not {text!r}") from None
    if not 0 < num <= den:
        raise ValueError(f"link_bw must be NUM/DEN with 0 < NUM <= DEN, not {text!r}")
    return [num, den]


def _int(name, lo, hi=None):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{name} must be an integer, not {text!r}") from None
        return check_int(name, value, lo, hi)
    return parse


def _rate(name):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{name} must be a number, not {text!r}") from None
        if not 0 < value < float("inf"):
            raise ValueError(f"{name} must be positive, not {text!r}")
        return value
    return parse


def _dtype(text):
    if text not in ("fp16", "fp32"):
        raise ValueError(f"dtype must be fp16 or fp32, not {text!r}")
    return text


def _headers(text):
    if text not in ("charged", "free"):
        raise ValueError(f"link_headers must be charged or free, not {text!r}")
    return text


def _k_slice(text):
    value = _int("k_slice", 0)(text)
    return value or None            # 0: whole panels


def _scheduler(text):
    from nmc.config import SCHEDULERS
    if text not in SCHEDULERS:
        raise ValueError(f"dram_scheduler must be one of {', '.join(SCHEDULERS)}, not {text!r}")
    return text


#: name -> (parser of one value, "workload" or "ring").
PARAMETERS = {"m": (_int("m", 1), "workload"), "n": (_int("n", 1), "workload"),
              "k": (_int("k", 1), "workload"), "cus": (_int("cus", 1, 16), "workload"),
              "wfs_per_wg": (_int("wfs_per_wg", 1, 8), "workload"),
              "dtype": (_dtype, "workload"),
              "flops_per_cycle": (_rate("flops_per_cycle"), "workload"),
              "k_slice": (_k_slice, "workload"),
              "link_bw": (_bw, "ring"),
              "link_latency": (_int("link_latency", 2, 100_000), "ring"),
              "mcq_depth": (_int("mcq_depth", 2, 1024), "ring"),
              "memory_rows": (_int("memory_rows", 1, 1024), "ring"),
              "link_headers": (_headers, "ring"),
              "l2_ways": (_int("l2_ways", 0, 64), "ring"),
              "l2_mshrs": (_int("l2_mshrs", 1, 256), "ring"),
              "l2_depth": (_int("l2_depth", 4, 1024), "ring"),
              "dma_buffer": (_int("dma_buffer", 4, 1024), "ring"),
              "dram_scheduler": (_scheduler, "ring")}


def parse_vary(texts):
    """``["k=64,128", "link_bw=3/80,3/40"]`` -> ``{"k": [64, 128], "link_bw": [[3, 80],
    [3, 40]]}``; refuses an unknown name or a bad value with one line."""
    out = {}
    for text in texts or ():
        name, sep, values = text.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ValueError(f"--vary must be NAME=V1,V2,..., not {text!r}")
        if name not in PARAMETERS:
            raise ValueError(f"--vary: {name!r} is not one of {', '.join(PARAMETERS)}")
        if name in out:
            raise ValueError(f"--vary: {name} given twice")
        out[name] = [PARAMETERS[name][0](v.strip()) for v in values.split(",")]
        if len({repr(v) for v in out[name]}) != len(out[name]):
            raise ValueError(f"--vary: {name}'s values must differ, not {values!r}")
    return out


def sweep_points(base_spec, vary):
    """Every combination of ``vary``'s values: ``[(label, spec fields, ring settings)]``."""
    names = list(vary)
    points = []
    for values in itertools.product(*(vary[n] for n in names)) if names else [()]:
        fields = dataclasses.asdict(base_spec)
        ring = {}
        for name, value in zip(names, values):
            if PARAMETERS[name][1] == "workload":
                fields[name] = value
            else:
                ring[name] = value
        label = ", ".join(f"{n}={'/'.join(map(str, v)) if isinstance(v, list) else v}"
                          for n, v in zip(names, values)) or "base"
        points.append((label, fields, ring))
    return points


def _ring_kwargs(ring, base_ring):
    out = dict(base_ring)
    if "link_bw" in ring:
        out["bandwidth"] = tuple(ring["link_bw"])
    if "link_latency" in ring:
        out["latency"] = ring["link_latency"]
    for name in ("mcq_depth", "memory_rows", "dma_buffer", "dram_scheduler"):
        if name in ring:
            out[name] = ring[name]
    if "link_headers" in ring:
        out["charge_headers"] = ring["link_headers"] == "charged"
    if "l2_ways" in ring:
        from sim.system.run import SYSTEM_L2_CONFIG
        from system.spec import PAPER_L2
        ways = ring["l2_ways"]
        if ways == 0:
            out["l2"] = out["l2_config"] = None
        else:
            l2 = out.get("l2") or PAPER_L2
            if ways > l2.ways:
                raise ValueError(f"l2_ways {ways} exceeds the L2's {l2.ways} ways")
            out["l2"] = l2
            out["l2_config"] = dataclasses.replace(out.get("l2_config") or SYSTEM_L2_CONFIG,
                                                   ways_used=ways)
    for name, field in (("l2_mshrs", "mshrs"), ("l2_depth", "depth")):
        if name in ring:
            from system.spec import PAPER_L2
            if ring.get("l2_ways") == 0:
                raise ValueError(f"{name} {ring[name]} with l2_ways 0: there is no L2")
            out["l2"] = dataclasses.replace(out.get("l2") or PAPER_L2, **{field: ring[name]})
    return out


def check_points(points, gpus, configs, base_ring):
    """Refuse a point the ring cannot run, naming it, before any job."""
    from sim.system.run import run_plan
    from sim.system.workload import GemmSpec
    for label, fields, ring in points:
        try:
            for config in configs:
                run_plan(GemmSpec(**fields), gpus, config, **_ring_kwargs(ring, base_ring))
        except ValueError as error:
            raise ValueError(f"sweep point {label}: {error}") from None


def run_point(fields, gpus, config, ring, seed=1, sim=None, timeline=None):
    """One run of a sweep point (the job): the :class:`GemmSpec` ``fields`` on ``gpus`` GPUs in
    ``config`` with ``ring``'s settings (JSON: ``bandwidth``, ``latency``, ``mcq_depth``,
    ``dma_buffer``, ``dram_scheduler``,
    ``memory_rows``, ``engines``, ``l2`` and ``l2_config`` as dicts); returns what the table
    needs and what a paper record keeps of a run (:func:`sim.system.cases.run_case`: the
    GEMM's waits at the MC arbiter, MCA's thresholds, the L2's counters), and with
    ``timeline`` (a sampling period) the run's timeline samples for its trace."""
    from sim.system.run import run_config
    from sim.system.workload import GemmSpec
    from system.engine.config import EngineParams
    kw = dict(ring)
    if "bandwidth" in kw:
        kw["bandwidth"] = tuple(kw["bandwidth"])
    if isinstance(kw.get("engines"), dict):
        kw["engines"] = EngineParams(**kw["engines"])
    if isinstance(kw.get("l2"), dict):
        from l2.config import L2Params
        kw["l2"] = L2Params(**kw["l2"])
    if isinstance(kw.get("l2_config"), dict):
        from l2.config import L2Config
        kw["l2_config"] = L2Config(**kw["l2_config"])
    start = time.monotonic()
    if timeline is not None:
        kw["timeline"] = timeline
    r = run_config(GemmSpec(**fields), gpus, config, sim=sim, seed=seed, **kw)
    if not r.get("verified"):
        raise AssertionError(f"{config}: the result is not bit-exact")
    out = {"config": config, "gpus": gpus, "workload": r["workload"], "cycles": r["cycles"],
           "phase_cycles": r["phase_cycles"], "dram": r["dram"], "verified": True,
           "arbiter_threshold": r["arbiter_threshold"], "compute_wait": r["compute_wait"],
           "mcq_occupancy": r["mcq_occupancy"], "dram_rows": r["dram_rows"],
           "dram_capped": r["dram_capped"],
           "l2": r["l2"], "wall_s": round(time.monotonic() - start, 1)}
    if timeline is not None:
        out["timeline"] = r["timeline"]
    return out


def sweep_jobs(points, gpus, configs, base_ring, seed=1, sim=None, timeline=None):
    """One :class:`sim.sweep.Job` per point and configuration (``timeline``: each run's
    timeline sampled every that many cycles, for a trace)."""
    from sim.sweep import Job
    jobs = []
    for label, fields, ring in points:
        kw = _ring_kwargs(ring, base_ring)
        if "bandwidth" in kw:
            kw["bandwidth"] = list(kw["bandwidth"])
        if kw.get("engines") is not None and not isinstance(kw["engines"], bool):
            kw["engines"] = kw["engines"].to_dict()
        for name in ("l2", "l2_config"):        # JSON: the jobs' cache keys
            if kw.get(name) is not None:
                kw[name] = dataclasses.asdict(kw[name])
        for config in configs:
            extra = {"seed": seed}
            if sim:
                extra["sim"] = sim
            if timeline is not None:
                extra["timeline"] = timeline
            jobs.append(Job(f"{label}/{config}", "sim.system.sweeps:run_point",
                            (fields, gpus, config, kw), extra))
    return jobs


def trace_name(label):
    """The file name of a point's trace: its label with every run of characters other than
    letters, digits, ``.`` and ``-`` made one ``_`` (``k=64, link_bw=3/80`` ->
    ``k=64_link_bw=3_80.json``)."""
    import re
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", label).strip("_") + ".json"


def write_traces(points, outcomes, folder):
    """One trace per point in ``folder`` (:func:`trace_name`), its configurations side by
    side (:func:`sim.system.trace.write`); returns the files written (a point whose runs all
    failed gets none)."""
    from pathlib import Path
    from sim.system.trace import write
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for label, _, _ in points:
        # a label may hold "/" (link_bw=3/80); a configuration's name does not
        runs = {name.rpartition("/")[2]: o.value for name, o in outcomes.items()
                if name.rpartition("/")[0] == label and o.ok}
        if runs:
            files.append(write(runs, folder / trace_name(label)))
    return files


def sweep_lines(points, configs, outcomes):
    """The table: a row per point, cycles per configuration and, with Sequential, the
    speedups over it; failed jobs by name."""
    lines = [f"  {'point':32s}" + "".join(f"{c:>12s}" for c in configs) +
             ("".join(f"{c + ' x':>12s}" for c in configs if c != "sequential")
              if "sequential" in configs else "")]
    failed = []
    for label, _, _ in points:
        row = {}
        for c in configs:
            out = outcomes[f"{label}/{c}"]
            if out.ok:
                row[c] = out.value["cycles"]
            else:
                failed.append(f"  FAILED {label}/{c}: {out.error}")
        line = f"  {label:32s}" + "".join(f"{row[c]:12d}" if c in row else f"{'—':>12s}"
                                          for c in configs)
        if "sequential" in configs:
            for c in configs:
                if c != "sequential":
                    line += (f"{row['sequential'] / row[c]:12.3f}"
                             if "sequential" in row and c in row else f"{'—':>12s}")
        lines.append(line)
    return lines + failed
