"""Figures that stay true: the paper tables of ``docs/paper.md`` are generated from committed
results files (``docs/results/paper-<scale>.json``, written by ``t3 paper --record``), and
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
           "stale_results", "pending", "RUN_MODULE"]


#: The module whose import closure is what a paper run executes.
RUN_MODULE = "sim.system.cases"

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
    """Write the results of a complete paper run at ``scale`` (every Figure 16 case, every
    run, none failed: the caller checks) with today's :func:`code_digest`."""
    path = results_path(scale, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    keep = {case: {config: {k: v for k, v in r.items() if k not in ("wall_s",)}
                   for config, r in runs.items()} for case, runs in results.items()}
    path.write_text(json.dumps({"code": code_digest(), "scale": scale, "results": keep},
                               indent=1, sort_keys=True) + "\n")
    return path


def load(scale, root=ROOT):
    """``{"code", "scale", "results"}`` of the committed results at ``scale``, or None."""
    path = results_path(scale, root)
    return json.loads(path.read_text()) if path.exists() else None


def _marker(scale, end=False):
    return f"<!-- figures:{'end' if end else 'begin'} paper-{scale:g} -->"


def tables(results):
    """The markdown of one scale's generated section: Figure 16's speedups, the GEMM's waits
    at the MC, Figure 18's reductions, and every number the paper states beside the model's."""
    from sim.system.paper import (figure16_markdown, figure18_markdown, side_by_side_markdown,
                                  stall_markdown)
    return "\n".join(figure16_markdown(results) + [""] + stall_markdown(results) + [""] +
                     figure18_markdown(results) + [""] + side_by_side_markdown(results))


def pending(scale, root=ROOT):
    """What a section says while its scale has no results file."""
    return (f"*No results recorded: `{results_path(scale, root).relative_to(root)}` does not "
            f"exist. `t3 paper --scale {scale:g} --record` runs the set on today's code and "
            f"writes it and these tables.*")


def sections(text):
    """``{scale: (start, end)}``: the character spans between each scale's markers."""
    out = {}
    for scale in SCALES:
        begin, end = _marker(scale), _marker(scale, end=True)
        i = text.find(begin)
        if i < 0:
            continue
        j = text.find(end, i)
        if j < 0:
            raise ValueError(f"{PAGE}: {begin} without {end}")
        out[scale] = (i + len(begin), j)
    return out


def refresh(root=ROOT, write=True):
    """Regenerate every scale's tables in :data:`PAGE` from its results file; returns the
    sections that were not current (``"docs/paper.md (scale S)"``)."""
    path = Path(root) / PAGE
    text = path.read_text()
    stale = []
    for scale, (start, end) in sorted(sections(text).items(), reverse=True):
        data = load(scale, root)
        if data is None:                    # nothing measured on today's code: say so
            want = "\n" + pending(scale, root) + "\n"
        else:
            want = "\n" + tables(data["results"]) + "\n"
        if text[start:end] != want:
            stale.append(f"{PAGE} (scale {scale:g})")
            text = text[:start] + want + text[end:]
    if stale and write:
        path.write_text(text)
    return stale


def stale_results(root=ROOT):
    """One line per committed results file whose runs executed other code than today's."""
    out = []
    now = code_digest()
    for scale in SCALES:
        data = load(scale, root)
        if data is not None and data["code"] != now:
            out.append(f"{results_path(scale, root).relative_to(root)}: measured on code "
                       f"{data['code']}, today's is {now}: its figures are stale; run "
                       f"`t3 paper --scale {scale:g} --record`")
    return out
