"""The layout holds: the import graph runs one way (hw <- blocks <- system <- sim <- t3), the
docs' register tables are the hardware's, the design key covers exactly the hardware, and the
repository stands on its own."""

import ast
import re
from pathlib import Path

import pytest

from system.blocks import BLOCKS as NODE_BLOCKS
from t3.docs import PAGES, documented


ROOT = Path(__file__).resolve().parent.parent
#: The blocks' packages: every block of the node's registry (``system.blocks.BLOCKS``).
BLOCKS = tuple(NODE_BLOCKS)

#: Package -> the packages it must never import (the layers above it).
FORBIDDEN = {
    "hw": set(BLOCKS) | {"system", "sim", "t3", "benchmarks"},
    **{block: {"system", "sim", "t3", "benchmarks"} for block in BLOCKS},
    "system": {"sim", "t3", "benchmarks"},
    "sim": {"t3", "benchmarks"},
    "benchmarks": {"t3"},
}


def imported_packages(path):
    """Top-level package of every absolute import in a file (nested imports included)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split(".")[0]


def test_imports_run_one_way():
    wrong = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for name in set(imported_packages(path)) & forbidden:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_the_import_check_sees_a_wrong_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from sim.system.run import run_config\n")
    assert "sim" in set(imported_packages(bad))


@pytest.mark.parametrize("page", sorted(PAGES))
def test_docs_register_tables_are_the_hardware_ones(page):
    _, table, _ = documented((ROOT / page).read_text())
    assert table == PAGES[page]().markdown(), f"{page} is stale: run `t3 docs`"


def test_design_key_covers_the_hardware_and_nothing_else():
    from hw.export import hardware_modules
    ring = set(hardware_modules("system.ring"))
    for block in BLOCKS:
        assert any(m.startswith(f"{block}.") for m in ring), block
    assert {"system.ring", "system.node", "system.link", "hw.csr", "nmc.fpadd"} <= ring
    assert not {m for m in ring if m.endswith((".model", ".cli", ".testing", ".formal"))
                or m.startswith(("sim.", "t3.", "benchmarks."))}
    assert set(hardware_modules("tracker.rtl")) == {"tracker.rtl", "tracker.config",
                                                    "hw.csr", "hw.interfaces", "hw.params"}


def test_the_repository_stands_on_its_own():
    """No file cites a document the repository does not hold, and nothing sets Amaranth's
    private attributes."""
    tracked = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml")
               and ".git" not in p.parts and "build" not in p.parts]
    this = Path(__file__).resolve()
    for path in tracked:
        if path.resolve() == this:
            continue
        text = path.read_text(errors="replace")
        assert "T3_SPEC" not in text, f"{path.relative_to(ROOT)} cites T3_SPEC.md"
        assert "_MustUse" not in text, f"{path.relative_to(ROOT)} sets _MustUse"
    for link in re.findall(r"\]\((docs/[^)#]+)", (ROOT / "README.md").read_text()):
        assert (ROOT / link).exists(), f"README links to missing {link}"


# --- figures that stay true ------------------------------------------------------------------

def test_the_paper_figures_were_measured_on_todays_code(monkeypatch):
    """Every committed paper results file records what its runs ran (sim/system/runkey.py:
    the rings' Verilog, the host's stimulus, the simulator and its build options, the
    harness's code); a change that moves any of it makes the file stale until the set is run
    again (`t3 paper --scale S --record`).  Checked against the default build, whatever this
    suite builds its rings with (tests/conftest.py)."""
    from sim.system import figures, run
    monkeypatch.setattr(run, "CXX_OPT", run.DEFAULT_CXX_OPT)
    stale = figures.stale_results()
    assert not stale, "\n".join(stale)


def test_the_paper_tables_are_their_results_files():
    """docs/paper.md's result tables are generated from the results files (or, where a scale
    has none, say that nothing is recorded): no table in it was typed in by hand."""
    from sim.system import figures
    text = (ROOT / figures.PAGE).read_text()
    assert ("paper", 0.5) in figures.sections(text), f"{figures.PAGE} has no generated figures"
    assert ("figure17", 0.5) in figures.sections(text), f"{figures.PAGE} has no Figure 17"
    assert not figures.refresh(write=False), f"{figures.PAGE} is stale: run `t3 docs`"


def test_a_set_is_recorded_a_few_cases_at_a_time(tmp_path, monkeypatch):
    """A record of today's code keeps the cases it holds and takes the new ones; one of other
    code is replaced, not merged; the section says how many cases it covers and how to add
    the rest."""
    import json
    from sim.system import figures, runkey
    from sim.system.paper import FIGURE16_CASES
    monkeypatch.setattr(runkey, "run_key", lambda case, config, scale, sim=None, seed=1,
                        timeline=None, cache=None: {"ring": "r", "verilog": "v",
                                                    "stimulus": "s"})
    monkeypatch.setattr(runkey, "source_stamp", lambda harness=None, sim=None: "today")
    monkeypatch.setattr(runkey, "_fill", lambda *args: None)

    def runs(cycles):
        run = {"gpus": 2, "cycles": cycles, "verified": True, "wall_s": 1.0,
               "phase_cycles": {"gemm": 400, "rs": 400, "ag": 200},
               "dram": dict.fromkeys(("gemm_reads", "gemm_writes", "rs_reads", "rs_writes",
                                      "ag_reads", "ag_writes"), 100)}
        return {"sequential": run}
    first, second = FIGURE16_CASES[:2]
    (tmp_path / "docs" / "results").mkdir(parents=True)
    path = figures.results_path(1.0, tmp_path)
    path.write_text(json.dumps({"code": "old", "scale": 1.0, "results": {"X": runs(9)}}))
    figures.record({first: runs(1000)}, 1.0, tmp_path, sim="verilator")
    data = figures.load(1.0, tmp_path)
    # X was recorded without a key of what it ran
    assert data["key"]["stamp"] == "today" and list(data["results"]) == [first]
    figures.record({second: runs(2000)}, 1.0, tmp_path, sim="verilator")
    data = figures.load(1.0, tmp_path)
    assert sorted(data["results"]) == sorted([first, second])
    assert "wall_s" not in data["results"][second]["sequential"]
    assert figures.missing_cases(data) == list(FIGURE16_CASES[2:])
    text = figures._generated("paper", 1.0, tmp_path)
    assert text.startswith("\n*2 of the 16 Figure 16 cases recorded;")
    assert f"--cases {','.join(FIGURE16_CASES[2:])} --record" in text


def test_stale_results_are_reported_by_name(tmp_path):
    """A results file that does not say what its runs ran is reported with the command that
    renews it; a section whose scale has no results file loses its tables and names the
    file."""
    import json
    from sim.system import figures
    (tmp_path / "docs" / "results").mkdir(parents=True)
    path = figures.results_path(0.5, tmp_path)
    path.write_text(json.dumps({"code": "0" * 20, "scale": 0.5, "results": {}}))
    lines = figures.stale_results(tmp_path)
    assert lines == ["docs/results/paper-0.5.json: what its runs ran has moved: it holds no "
                     "key of what its runs ran (recorded in an older format); its figures are "
                     "stale: run `t3 paper --scale 0.5 --record`"]
    page = tmp_path / "docs" / "paper.md"
    page.write_text("x\n<!-- figures:begin paper-1 -->\n| a | made-up |\n"
                    "<!-- figures:end paper-1 -->\n")
    assert figures.refresh(tmp_path) == ["docs/paper.md (scale 1)"]
    text = page.read_text()
    assert "made-up" not in text and "`docs/results/paper-1.json` does not exist" in text
    assert figures.refresh(tmp_path, write=False) == []
