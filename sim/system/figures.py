"""Figures that stay true: the paper tables of ``docs/paper.md`` are generated from committed
results files (``docs/results/paper-<scale>.json``, written by ``t3 paper --record``; Figure
17's ``docs/results/figure17-<scale>.{json,png}`` by ``t3 paper --figure17 --record``), and
each file records what its runs ran.

What a run ran is its key (:mod:`sim.system.runkey`): the digests of the ring's Verilog, of
everything the host put into it, of the simulator with its build options and of the harness
code that decides its cycles.  ``t3 docs --check`` (and the test suite) reports a results
file whose runs would not run the same today, naming what moved and for which runs: its
figures are claims about a design or a run that no longer exists, and the set must be run
again (``t3 paper --scale S --record``) before the change lands.  A change that moves none of
them (a refactor of the Python, a new option) leaves the records valid.  It also reports a
table that is not what its results file gives (``t3 docs`` rewrites it).
"""

import json
import os
from pathlib import Path


__all__ = ["results_path", "record", "load", "SCALES", "sections", "refresh", "stale_results",
           "pending", "figure17_path", "record_figure17", "load_figure17", "missing_cases",
           "paper_runs", "figure17_runs", "key_of", "moved_inputs", "stamped", "restamp"]

#: The scales whose results are committed (the default scale and scale 1).
SCALES = (0.5, 1.0)

#: The repository's root.
ROOT = Path(__file__).resolve().parent.parent.parent

#: The page holding the generated tables.
PAGE = "docs/paper.md"


def results_path(scale, root=ROOT):
    return Path(root) / "docs" / "results" / f"paper-{scale:g}.json"


def paper_runs(results, scale):
    """``{"case/config": (case, config, scale, timeline)}`` of a paper record's runs, each
    keyed by the case that ran (a twin's by the case whose run it shares)."""
    return {f"{case}/{config}": (r.get("shared_with", case), config, scale, None)
            for case, runs in results.items() for config, r in runs.items()}


def figure17_runs(runs, scale):
    """The same of a Figure 17 record's ``runs`` (``{config: run}``)."""
    from sim.system.figure17 import CASE, PERIOD
    return {f"{CASE}/{config}": (CASE, config, scale, r.get("period", PERIOD))
            for config, r in runs.items()}


def _recorded_sim(data):
    return ((data.get("key") or {}).get("simulator") or {}).get("simulator")


def _harness(kind):
    from sim.system import runkey
    return runkey.HARNESS if kind == "paper" else runkey.FIGURE17_HARNESS


def key_of(kind, data, sim=None, progress=None):
    """Today's key (:func:`sim.system.runkey.record_key`) of the runs of a record ``data``
    of ``kind`` (``"paper"`` or ``"figure17"``), on the simulator it was recorded on (or
    ``sim``)."""
    from sim.system import runkey
    sim = sim or _recorded_sim(data)
    if kind == "paper":
        runs = paper_runs(data["results"], data["scale"])
    else:
        runs = figure17_runs(data["runs"], data["scale"])
    return runkey.record_key(runs, sim, _harness(kind), progress)


def stamped(kind, data):
    """Whether the record ``data``'s stamp is today's
    (:func:`sim.system.runkey.source_stamp`): then its key is today's, not computed."""
    from sim.system import runkey
    key = data.get("key") or {}
    return bool(key.get("stamp")) and \
        key["stamp"] == runkey.source_stamp(_harness(kind), _recorded_sim(data))


def moved_inputs(kind, data, progress=None):
    """What moved since the record ``data`` of ``kind`` was made (phrases of
    :func:`sim.system.runkey.moved`; ``[]``: it is current)."""
    from sim.system import runkey
    if not data.get("key"):
        return ["it holds no key of what its runs ran (recorded in an older format)"]
    if stamped(kind, data):
        return []
    return runkey.moved(data["key"], key_of(kind, data, progress=progress))


def _write(path, data):
    from sim.sweep import write_atomic
    from sim.system.runkey import provenance
    data = dict(data, provenance=provenance())
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def record(results, scale, root=ROOT, sim=None, progress=None):
    """Write the results of a paper run at ``scale`` (Figure 16 cases with every run each,
    none failed: the caller checks) with their key (:mod:`sim.system.runkey`; ``sim``: the
    simulator they ran on).  A results file whose runs are current keeps them beside the new
    ones, so a set too long for one sitting is recorded a few cases at a time; the runs of one
    that is not current are dropped, never merged with today's."""
    path = results_path(scale, root)
    old = load(scale, root)
    keep = {}
    if old is not None and stamped("paper", old) and \
            _recorded_sim(old) == (sim or _sim()):
        keep = dict(old["results"])
    elif old is not None and old.get("key"):
        # keep the runs whose inputs did not move, if the simulator and harness did not
        today = key_of("paper", old, sim=sim, progress=progress)
        if today["simulator"] == old["key"].get("simulator") and \
                today["harness"] == old["key"].get("harness"):
            stored = old["key"].get("runs") or {}
            for case, runs in old["results"].items():
                if all(stored.get(f"{case}/{config}") == today["runs"][f"{case}/{config}"]
                       for config in runs):
                    keep[case] = runs
    keep.update({case: {config: {k: v for k, v in r.items() if k not in ("wall_s", "timeline")}
                        for config, r in runs.items()} for case, runs in results.items()})
    data = {"scale": scale, "results": keep}
    data["key"] = key_of("paper", data, sim=sim or _sim(), progress=progress)
    _write(path, data)
    return path


def _sim():
    from sim.harness.runner import default_sim
    return default_sim()


def missing_cases(data):
    """The Figure 16 cases a results file does not hold yet, in the paper's order."""
    from sim.system.paper import FIGURE16_CASES
    return [case for case in FIGURE16_CASES if case not in data["results"]]


def load(scale, root=ROOT):
    """``{"key", "scale", "results", "provenance"}`` of the committed results at ``scale``, or
    None."""
    path = results_path(scale, root)
    return json.loads(path.read_text()) if path.exists() else None


def figure17_path(scale, root=ROOT, suffix=".json"):
    """The committed Figure 17 at ``scale``: its runs (``.json``) or its picture (``.png``)."""
    return Path(root) / "docs" / "results" / f"figure17-{scale:g}{suffix}"


def record_figure17(runs, scale, root=ROOT, sim=None):
    """Write Figure 17's runs at ``scale`` (``{config: run}`` of
    :func:`sim.system.figure17.run_timeline`, every config) and its picture, with their key
    (``sim``: the simulator they ran on)."""
    from sim.system.figure17 import draw
    path = figure17_path(scale, root)
    keep = {config: {k: v for k, v in r.items() if k != "wall_s"} for config, r in runs.items()}
    data = {"scale": scale, "runs": keep}
    data["key"] = key_of("figure17", data, sim=sim or _sim())
    _write(path, data)
    png = figure17_path(scale, root, ".png")
    tmp = png.with_name(f".{png.stem}.tmp.png")     # drawn whole, then renamed
    draw(keep, tmp)
    os.replace(tmp, png)
    return path


def load_figure17(scale, root=ROOT):
    """``{"key", "scale", "runs", "provenance"}`` of the committed Figure 17 at ``scale``, or
    None."""
    path = figure17_path(scale, root)
    return json.loads(path.read_text()) if path.exists() else None


#: The generated sections' kinds: the paper's tables (``paper``), Figure 17 (``figure17``).
KINDS = ("paper", "figure17")


def _marker(kind, scale, end=False):
    return f"<!-- figures:{'end' if end else 'begin'} {kind}-{scale:g} -->"


def tables(results):
    """The markdown of one scale's generated section: Figure 16's speedups, the GEMM's waits
    at the MC, Figure 18's reductions, every number the paper states beside the model's, the
    paper's directions and whether they hold (:func:`sim.system.paper.directions_markdown`),
    where T3's time goes against Sequential's GEMM (:func:`sim.system.paper.causes_markdown`)
    and the DRAM row buffer's hit rates (:func:`sim.system.paper.row_buffer_markdown`), over
    the Figure 16 cases; then, when the record holds section 6.4's TP-32 cases, their
    speedups and DRAM reductions (:func:`sim.system.paper.tp32_markdown`)."""
    from sim.system.paper import (FIGURE16_CASES, LARGE_CASES, causes_markdown,
                                  directions_markdown, figure16_markdown, figure18_markdown,
                                  row_buffer_markdown, side_by_side_markdown, stall_markdown,
                                  tp32_markdown)
    fig16 = {c: r for c, r in results.items() if c in FIGURE16_CASES}
    large = {c: r for c, r in results.items() if c in LARGE_CASES}
    return "\n".join(figure16_markdown(fig16) + [""] + stall_markdown(fig16) + [""] +
                     figure18_markdown(fig16) + [""] + side_by_side_markdown(fig16) + [""] +
                     directions_markdown(fig16) + [""] + causes_markdown(fig16) + [""] +
                     row_buffer_markdown(fig16) +
                     ([""] + tp32_markdown(large) if large else []))


def _record_command(kind, scale):
    extra = " --figure17" if kind == "figure17" else ""
    return f"t3 paper{extra} --scale {scale:g} --record"


def _path(kind, scale, root):
    return results_path(scale, root) if kind == "paper" else figure17_path(scale, root)


def pending(scale, root=ROOT, kind="paper"):
    """What a section says while its scale has no results file."""
    return (f"*No results recorded: `{_path(kind, scale, root).relative_to(root)}` does not "
            f"exist. `{_record_command(kind, scale)}` runs "
            f"{'the set' if kind == 'paper' else 'its three runs'} on today's code and writes "
            f"it and {'these tables' if kind == 'paper' else 'this table and picture'}.*")


def sections(text):
    """``{(kind, scale): (start, end)}``: the character spans between each generated
    section's markers."""
    out = {}
    for kind in KINDS:
        for scale in SCALES:
            begin, end = _marker(kind, scale), _marker(kind, scale, end=True)
            i = text.find(begin)
            if i < 0:
                continue
            j = text.find(end, i)
            if j < 0:
                raise ValueError(f"{PAGE}: {begin} without {end}")
            out[kind, scale] = (i + len(begin), j)
    return out


def _generated(kind, scale, root):
    """A section's text from its results file (or the note that there is none)."""
    if kind == "paper":
        data = load(scale, root)
        body = None if data is None else tables(data["results"])
        missing = [] if data is None else missing_cases(data)
        if missing:
            from sim.system.paper import FIGURE16_CASES
            n = len(FIGURE16_CASES)
            body = (f"*{n - len(missing)} of the {n} Figure 16 cases recorded; every table "
                    f"and geomean below covers those only. `t3 paper --scale {scale:g} --cases "
                    f"{','.join(missing)} --record` adds the rest.*\n\n" + body)
    else:
        from sim.system.figure17 import markdown
        data = load_figure17(scale, root)
        image = figure17_path(scale, root, ".png").relative_to(Path(root) / "docs")
        body = None if data is None else "\n".join(markdown(data, image.as_posix()))
    return "\n" + (pending(scale, root, kind) if body is None else body) + "\n"


def refresh(root=ROOT, write=True):
    """Regenerate every generated section of :data:`PAGE` from its results file; returns the
    sections that were not current (``"docs/paper.md (scale S)"``, ``"docs/paper.md
    (Figure 17, scale S)"``)."""
    path = Path(root) / PAGE
    text = path.read_text()
    stale = []
    for (kind, scale), (start, end) in sorted(sections(text).items(),
                                              key=lambda item: item[1][0], reverse=True):
        want = _generated(kind, scale, root)
        if text[start:end] != want:
            label = "" if kind == "paper" else "Figure 17, "
            stale.append(f"{PAGE} ({label}scale {scale:g})")
            text = text[:start] + want + text[end:]
    if stale and write:
        path.write_text(text)
    return stale


def _records(root):
    """``(kind, scale, path, data)`` of every committed record."""
    for kind in KINDS:
        for scale in SCALES:
            data = load(scale, root) if kind == "paper" else load_figure17(scale, root)
            if data is not None:
                yield kind, scale, _path(kind, scale, root), data


def restamp(root=ROOT, progress=None):
    """Stamp every record that a full check finds current with today's
    :func:`sim.system.runkey.source_stamp` (its figures stay as they are); returns the files
    stamped."""
    from sim.sweep import write_atomic
    from sim.system import runkey
    out = []
    for kind, scale, path, data in _records(root):
        if not data.get("key") or stamped(kind, data):
            continue
        today = key_of(kind, data, progress=progress)
        if not runkey.moved(data["key"], today):
            data["key"]["stamp"] = today["stamp"]
            write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
            out.append(str(path.relative_to(root)))
    return out


def stale_results(root=ROOT, progress=None):
    """One line per committed results file whose runs would not run the same today, naming
    what moved (:func:`moved_inputs`) and the command that renews it."""
    out = []
    for kind, scale, path, data in _records(root):
        what = moved_inputs(kind, data, progress=progress)
        if what:
            out.append(f"{path.relative_to(root)}: what its runs ran has moved: "
                       f"{'; '.join(what)}; its figures are stale: run "
                       f"`{_record_command(kind, scale)}`")
    return out
