"""Figures that stay true: the paper tables of ``docs/paper.md`` are generated from committed
results files (``docs/results/paper-<scale>.json``, written by ``t3 paper --record``; Figure
17's ``docs/results/figure17-<scale>.{json,png}`` by ``t3 paper --figure17 --record``), and
each file records the code its runs executed.

The code is :func:`code_digest` of everything a paper run executes (the job
:func:`sim.system.cases.run_case` and every project module it imports: the hardware, the
engines' programs, the testbench), its comments and docstrings left out.  ``t3 docs --check``
(and the test suite) reports a results file whose code differs from today's: its figures are
claims about hardware that no longer exists, and the set must be run again
(``t3 paper --scale S --record``) before the change lands.  It also reports a table that is
not what its results file gives (``t3 docs`` rewrites it).
"""

import ast
import hashlib
import json
from pathlib import Path


__all__ = ["code_digest", "results_path", "record", "load", "SCALES", "sections", "refresh",
           "stale_results", "pending", "RUN_MODULE", "FIGURE17_MODULE", "figure17_path",
           "record_figure17", "load_figure17", "missing_cases"]


#: The module whose import closure is what a paper run executes.
RUN_MODULE = "sim.system.cases"

#: The module whose import closure a Figure 17 run executes (:mod:`sim.system.figure17`).
FIGURE17_MODULE = "sim.system.figure17"

#: The scales whose results are committed (the default scale and scale 1).
SCALES = (0.5, 1.0)

#: The repository's root.
ROOT = Path(__file__).resolve().parent.parent.parent

#: The page holding the generated tables.
PAGE = "docs/paper.md"


def _code(path):
    """A module's code without comments, docstrings and layout (its AST, dumped)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def code_digest(module=RUN_MODULE):
    """SHA-256 over the names and code of ``module`` and every project module it imports
    (:func:`hw.export.hardware_modules`), comments and docstrings left out: it changes when
    what a run executes may change, not when its documentation does."""
    from hw.export import hardware_modules
    h = hashlib.sha256()
    for name, path in hardware_modules(module).items():
        h.update(name.encode() + b"\0" + _code(path).encode() + b"\0")
    return h.hexdigest()[:20]


def results_path(scale, root=ROOT):
    return Path(root) / "docs" / "results" / f"paper-{scale:g}.json"


def record(results, scale, root=ROOT):
    """Write the results of a paper run at ``scale`` (Figure 16 cases with every run each,
    none failed: the caller checks) with today's :func:`code_digest`.  A results file of the
    same code keeps its other cases, so a set too long for one sitting is recorded a few
    cases at a time; one of other code is replaced, never merged with today's."""
    path = results_path(scale, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    code = code_digest()
    old = load(scale, root)
    keep = dict(old["results"]) if old is not None and old["code"] == code else {}
    keep.update({case: {config: {k: v for k, v in r.items() if k not in ("wall_s", "timeline")}
                        for config, r in runs.items()} for case, runs in results.items()})
    path.write_text(json.dumps({"code": code, "scale": scale, "results": keep},
                               indent=1, sort_keys=True) + "\n")
    return path


def missing_cases(data):
    """The Figure 16 cases a results file does not hold yet, in the paper's order."""
    from sim.system.paper import FIGURE16_CASES
    return [case for case in FIGURE16_CASES if case not in data["results"]]


def load(scale, root=ROOT):
    """``{"code", "scale", "results"}`` of the committed results at ``scale``, or None."""
    path = results_path(scale, root)
    return json.loads(path.read_text()) if path.exists() else None


def figure17_path(scale, root=ROOT, suffix=".json"):
    """The committed Figure 17 at ``scale``: its runs (``.json``) or its picture (``.png``)."""
    return Path(root) / "docs" / "results" / f"figure17-{scale:g}{suffix}"


def record_figure17(runs, scale, root=ROOT):
    """Write Figure 17's runs at ``scale`` (``{config: run}`` of
    :func:`sim.system.figure17.run_timeline`, every config) and its picture, with the
    digest of the code they ran on."""
    from sim.system.figure17 import draw
    path = figure17_path(scale, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = {config: {k: v for k, v in r.items() if k != "wall_s"} for config, r in runs.items()}
    path.write_text(json.dumps({"code": code_digest(FIGURE17_MODULE), "scale": scale,
                                "runs": keep}, indent=1, sort_keys=True) + "\n")
    draw(keep, figure17_path(scale, root, ".png"))
    return path


def load_figure17(scale, root=ROOT):
    """``{"code", "scale", "runs"}`` of the committed Figure 17 at ``scale``, or None."""
    path = figure17_path(scale, root)
    return json.loads(path.read_text()) if path.exists() else None


#: The generated sections' kinds: the paper's tables (``paper``), Figure 17 (``figure17``).
KINDS = ("paper", "figure17")


def _marker(kind, scale, end=False):
    return f"<!-- figures:{'end' if end else 'begin'} {kind}-{scale:g} -->"


def tables(results):
    """The markdown of one scale's generated section: Figure 16's speedups, the GEMM's waits
    at the MC, Figure 18's reductions, every number the paper states beside the model's, and
    where T3's time goes against Sequential's GEMM (:func:`sim.system.paper.causes_markdown`),
    over the Figure 16 cases; then, when the record holds section 6.4's TP-32 cases, their
    speedups and DRAM reductions (:func:`sim.system.paper.tp32_markdown`)."""
    from sim.system.paper import (FIGURE16_CASES, LARGE_CASES, causes_markdown,
                                  figure16_markdown, figure18_markdown, side_by_side_markdown,
                                  stall_markdown, tp32_markdown)
    fig16 = {c: r for c, r in results.items() if c in FIGURE16_CASES}
    large = {c: r for c, r in results.items() if c in LARGE_CASES}
    return "\n".join(figure16_markdown(fig16) + [""] + stall_markdown(fig16) + [""] +
                     figure18_markdown(fig16) + [""] + side_by_side_markdown(fig16) + [""] +
                     causes_markdown(fig16) + ([""] + tp32_markdown(large) if large else []))


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


def stale_results(root=ROOT):
    """One line per committed results file whose runs executed other code than today's."""
    out = []
    now = {"paper": code_digest(), "figure17": code_digest(FIGURE17_MODULE)}
    for kind in KINDS:
        for scale in SCALES:
            data = load(scale, root) if kind == "paper" else load_figure17(scale, root)
            if data is not None and data["code"] != now[kind]:
                out.append(f"{_path(kind, scale, root).relative_to(root)}: measured on code "
                           f"{data['code']}, today's is {now[kind]}: its figures are stale; "
                           f"run `{_record_command(kind, scale)}`")
    return out
