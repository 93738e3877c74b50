"""The records' key (``sim/system/runkey.py``): what a run ran, so that a change which moves no
gate, no programmed word and no build option leaves the records valid, and one that does
stales them, saying which input moved."""

import json
from pathlib import Path

import numpy as np
import pytest

from sim.system import runkey


ROOT = Path(__file__).resolve().parent.parent


TOY = '''
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Toy(wiring.Component):
    a: In(4)
    b: In(4)
    o: Out(4)

    def elaborate(self, platform):
        m = Module()
{body}
        return m
'''

#: The toy's logic three ways: as written, refactored (a helper, other names, comments: the
#: same gates), and with one gate changed (an AND made an OR).
BODIES = {
    "first": "        r = Signal(4)\n        m.d.sync += r.eq(self.a & self.b)\n"
             "        m.d.comb += self.o.eq(r)\n",
    "refactor": "        both = _both(self.a, self.b)  # the AND, registered\n"
                "        r = Signal(4)\n        m.d.sync += r.eq(both)\n"
                "        m.d.comb += self.o.eq(r)\n",
    "one gate": "        r = Signal(4)\n        m.d.sync += r.eq(self.a | self.b)\n"
                "        m.d.comb += self.o.eq(r)\n",
}
HELPER = "\n\ndef _both(x, y):\n    \"\"\"Both.\"\"\"\n    return x & y\n"


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """Writes the toy package in one of :data:`BODIES` and returns its plan (top, make, the
    design key of the build cache, as :func:`sim.system.run.ring_build` makes them)."""
    import importlib
    import sys
    from sim.harness.runner import design_key
    pkg = tmp_path / "toypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("hw.export._ROOT", tmp_path)
    monkeypatch.setenv("T3_BUILD_CACHE", str(tmp_path / "cache"))

    def plan(which):
        (pkg / "rtl.py").write_text(TOY.format(body=BODIES[which]) +
                                    (HELPER if which == "refactor" else ""))
        sys.modules.pop("toypkg.rtl", None)
        importlib.invalidate_caches()
        module = importlib.import_module("toypkg.rtl")

        class Plan:
            top = "t3_toy"
            key = design_key("toypkg.rtl", 4)
            make = module.Toy
        return Plan
    return plan


def test_a_refactor_that_moves_no_gate_keeps_the_verilog_and_one_gate_stales_it(toy):
    first = toy("first")
    digest = runkey.verilog_digest(first)
    refactor = toy("refactor")
    assert refactor.key != first.key            # the source moved: the build cache's key did
    assert runkey.verilog_digest(refactor) == digest
    one_gate = toy("one gate")
    assert runkey.verilog_digest(one_gate) != digest


def test_the_verilog_digest_is_cached_and_taken_from_a_finished_build(toy, tmp_path):
    from hw.export import verilog_text
    from sim.harness.runner import build_cache_dir, cached_builds
    plan = toy("first")
    cache = runkey._Cache()
    digest = runkey.verilog_digest(plan, cache)
    cache.save()
    assert json.loads((build_cache_dir() / "run-digests.json").read_text())["verilog"] == \
        {plan.key: digest}
    # a finished build of the same key is read, not exported again
    built = build_cache_dir() / f"t3_toy-verilator-{plan.key}-abcdef"
    built.mkdir(parents=True)
    (built / "t3_toy.v").write_text(verilog_text(plan.make(), "t3_toy"))
    (built / ".built").write_text("t3_toy")
    assert cached_builds("t3_toy", plan.key) == [built / "t3_toy.v"]
    (build_cache_dir() / "run-digests.json").unlink()
    (built / "t3_toy.v").write_text("module other;\nendmodule\n")
    assert runkey.verilog_digest(plan, runkey._Cache()) != digest


def test_a_build_flag_stales_the_records(monkeypatch):
    """The simulator part of the key: Verilator's version, options and the C++ model's flags."""
    from sim.harness import runner
    from sim.system import run
    monkeypatch.setattr(run, "CXX_OPT", run.DEFAULT_CXX_OPT)     # the suite's own is -O1
    stored = {"simulator": runkey.simulator("verilator"), "harness": runkey.harness_digests(),
              "runs": {}}
    today = dict(stored)
    assert runkey.moved(stored, today) == []
    with monkeypatch.context() as m:
        m.setattr(runner, "VERILATOR_ARGS", runner.VERILATOR_ARGS + ("-fno-dfg",))
        flag = dict(stored, simulator=runkey.simulator("verilator"))
    assert runkey.moved(stored, flag) == [
        "the simulator or its build options (args ['-Wno-fatal', '-O3'] -> "
        "['-Wno-fatal', '-O3', '-fno-dfg'])"]
    opt = dict(stored, simulator=runkey.simulator("verilator", cxx_opt="-O2"))
    (line,) = runkey.moved(stored, opt)
    assert "OPT_FAST=-O3" in line and "OPT_FAST=-O2" in line
    with monkeypatch.context() as m:                # the models' C++ compiler
        m.setenv("T3_CXX", "g++")
        compiler = dict(stored, simulator=runkey.simulator("verilator"))
    (line,) = runkey.moved(stored, compiler)
    assert "CXX=clang++" in line and "CXX=g++" in line
    assert runkey.simulator("verilator")["version"] == "5.48.0"


def test_the_harness_digest_sees_code_and_not_comments(tmp_path):
    mod = tmp_path / "mod.py"
    mod.write_text('"""Doc."""\n\ndef f():\n    """Doc."""\n    return 1  # one\n')
    first = runkey.code_digest(mod)
    mod.write_text('"""Other doc."""\n\n\ndef f():\n    """Other."""\n    # a comment\n'
                   '    return 1\n')
    assert runkey.code_digest(mod) == first
    mod.write_text('"""Doc."""\n\ndef f():\n    return 2\n')
    assert runkey.code_digest(mod) != first
    assert set(runkey.harness_digests()) == set(runkey.HARNESS)


# --- the stimulus -----------------------------------------------------------------------------

def _tb(config="t3", gpus=2, seed=1, **kw):
    """The testbench configuration of a small run of the default workload."""
    from sim.system.run import run_plan
    from sim.system.workload import workload_spec
    return run_plan(workload_spec(gpus), gpus, config, seed=seed, **kw).tb


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("T3_BUILD_CACHE", str(tmp_path / "cache"))
    runkey._workload.cache_clear()


def test_the_stimulus_is_every_word_the_host_puts_into_the_ring(fresh):
    """What the host writes, loads and starts, in order: it follows the configuration, the
    inputs' seed and the L2's programming, and not the Python that makes it."""
    from l2.config import L2Params
    from sim.system.run import SYSTEM_L2_CONFIG
    t3 = runkey._stimulus(_tb())
    assert t3.read_back and t3.calls > 10
    assert runkey._stimulus(_tb()).digest == t3.digest
    runkey._workload.cache_clear()                      # a workload of its own: the same
    assert runkey._stimulus(_tb()).digest == t3.digest
    others = {runkey._stimulus(tb).digest for tb in (
        _tb("sequential"), _tb("t3-mca"), _tb(seed=2), _tb(gpus=4), _tb(timeline=100))}
    assert len(others) == 5 and t3.digest not in others
    import dataclasses
    l2 = L2Params(sets=16, ways=4, banks=4, mshrs=4, depth=16)
    all_ways = _tb(l2=l2)
    one_way = _tb(l2=l2, l2_config=dataclasses.replace(SYSTEM_L2_CONFIG, ways_used=1))
    assert runkey._stimulus(all_ways).digest != runkey._stimulus(one_way).digest


def test_the_stimulus_follows_neither_the_blas_kernel_nor_its_threads():
    """The partial outputs the engines store are fp32 products; a BLAS orders their sums by
    the kernel it picks for the CPU and by its threads (OpenBLAS's Prescott, Haswell and
    SkylakeX kernels gave three digests for this run), so the workload sums them in the
    order of K (:func:`sim.system.workload.product_fp32`): one digest in processes whose
    OpenBLAS runs other kernels (``OPENBLAS_CORETYPE``) with one or two threads."""
    import os
    import subprocess
    import sys
    code = ("from sim.system.runkey import case_plan, _stimulus; "
            "print(_stimulus(case_plan('Mega-GPT-2-FC-1-TP8', 't3', 0.5).tb).digest)")
    digests = set()
    for core, threads in (("Prescott", "1"), ("Haswell", "2")):
        env = dict(os.environ, OPENBLAS_CORETYPE=core, OPENBLAS_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests


def test_the_partials_sum_each_elements_products_in_the_order_of_k():
    """``product_fp32``'s definition, element by element in fp32 scalars."""
    from sim.system.workload import product_fp32
    rng = np.random.default_rng(3)
    a = [(rng.standard_normal((4, 300)) / 17).astype(np.float16) for _ in range(2)]
    b = [rng.standard_normal((300, 5)).astype(np.float16) for _ in range(2)]
    got = product_fp32(a, b)
    for g in range(2):
        assert got[g].dtype == np.float32 and got[g].shape == (4, 5)
        for i in range(4):
            for j in range(5):
                acc = np.float32(0)
                for k in range(300):
                    acc = np.float32(acc + np.float32(a[g][i, k]) * np.float32(b[g][k, j]))
                assert got[g][i, j] == acc, (g, i, j)


def test_a_program_change_moves_the_stimulus(fresh, monkeypatch):
    """A change to an engine's program (one descriptor field) is a change of what ran."""
    import sim.system.host as host
    base = runkey._stimulus(_tb("sequential")).digest
    real = host.pack_step

    def other(params, step):
        return real(params, step) ^ 1
    monkeypatch.setattr(host, "pack_step", other)
    assert runkey._stimulus(_tb("sequential")).digest != base


def test_the_stimulus_is_cached_under_the_hosts_source(fresh):
    tb = _tb()
    cache = runkey._Cache()
    digest = runkey.stimulus_digest(tb, cache)
    assert list(cache.added["stimulus"].values()) == [digest]
    cache.save()
    again = runkey._Cache()
    assert runkey.stimulus_digest(tb, again) == digest and not again.added["stimulus"]


def test_an_unreadable_digest_cache_is_empty(fresh):
    from sim.harness.runner import build_cache_dir
    build_cache_dir().mkdir(parents=True)
    (build_cache_dir() / "run-digests.json").write_text('{"verilog": {"x": ')
    assert runkey._Cache().data == {"verilog": {}, "stimulus": {}}


# --- records ----------------------------------------------------------------------------------

def _record(tmp_path, monkeypatch, digests):
    """A paper record of two cases at scale 1 under a fake :func:`runkey.run_key` that
    returns ``digests[(case, config)]`` (a ring and its two digests) and a fake stamp."""
    from sim.system import figures
    monkeypatch.setattr(runkey, "run_key",
                        lambda case, config, scale, sim=None, seed=1, timeline=None,
                        cache=None: dict(digests[case, config]))
    monkeypatch.setattr(runkey, "source_stamp", lambda harness=None, sim=None: "stamp")
    monkeypatch.setattr(runkey, "_fill", lambda *args: None)        # nothing to compute

    def run(case, config):
        return {"case": case, "config": config, "cycles": 100, "verified": True,
                "wall_s": 1.0}
    results = {case: {config: run(case, config) for config in ("sequential", "t3")}
               for case in ("A-FC-1-TP8", "B-OP-TP16")}
    results["A-FC-1-TP8"]["t3"]["shared_with"] = "A-FC-2-TP8"
    (tmp_path / "docs" / "results").mkdir(parents=True)
    return figures.record(results, 1.0, tmp_path, sim="verilator")


def test_stale_results_name_what_moved(tmp_path, monkeypatch):
    from sim.system import figures
    digests = {(case, config): {"ring": ring, "verilog": f"v-{ring}", "stimulus": f"s-{config}"}
               for case, ring in (("A-FC-1-TP8", "t3_ring8e"), ("A-FC-2-TP8", "t3_ring8e"),
                                  ("B-OP-TP16", "t3_ring16e"))
               for config in ("sequential", "t3")}
    path = _record(tmp_path, monkeypatch, digests)
    data = json.loads(path.read_text())
    assert set(data["key"]["runs"]) == {"A-FC-1-TP8/sequential", "A-FC-1-TP8/t3",
                                        "B-OP-TP16/sequential", "B-OP-TP16/t3"}
    assert data["key"]["stamp"] == "stamp" and "wall_s" not in \
        data["results"]["B-OP-TP16"]["t3"]
    assert set(data["provenance"]) == {"amaranth", "cocotb", "numpy"}
    assert figures.stale_results(tmp_path) == []
    # the stamp is not today's: the key is computed, and it is still today's
    monkeypatch.setattr(runkey, "source_stamp", lambda harness=None, sim=None: "other")
    assert figures.stale_results(tmp_path) == []
    # a gate of the 16-GPU ring, a program of a twin's run (keyed by the case it shares)
    digests["B-OP-TP16", "sequential"]["verilog"] = "v2"
    digests["B-OP-TP16", "t3"]["verilog"] = "v2"
    digests["A-FC-2-TP8", "t3"]["stimulus"] = "s2"
    (line,) = figures.stale_results(tmp_path)
    assert line == (
        "docs/results/paper-1.json: what its runs ran has moved: the Verilog of t3_ring16e "
        "(2 runs: B-OP-TP16/sequential, B-OP-TP16/t3); the host's programs and register "
        "writes (1 runs: A-FC-1-TP8/t3); its figures are stale: run "
        "`t3 paper --scale 1 --record`")
    # a harness module's code
    monkeypatch.setattr(runkey, "harness_digests",
                        lambda modules=runkey.HARNESS: dict.fromkeys(modules, "x"))
    (line,) = figures.stale_results(tmp_path)
    assert "the harness module sim.system.host's code" in line


def test_a_record_keeps_its_current_runs_and_drops_the_moved(tmp_path, monkeypatch):
    from sim.system import figures
    digests = {(case, config): {"ring": "r", "verilog": "v", "stimulus": f"s-{case}"}
               for case in ("A-FC-1-TP8", "A-FC-2-TP8", "B-OP-TP16", "C-IP-TP8")
               for config in ("sequential", "t3")}
    _record(tmp_path, monkeypatch, digests)
    monkeypatch.setattr(runkey, "source_stamp", lambda harness=None, sim=None: "new")
    digests["B-OP-TP16", "t3"]["stimulus"] = "moved"
    new = {"C-IP-TP8": {c: {"case": "C-IP-TP8", "config": c, "cycles": 1} for c in
                        ("sequential", "t3")}}
    figures.record(new, 1.0, tmp_path, sim="verilator")
    data = figures.load(1.0, tmp_path)
    assert sorted(data["results"]) == ["A-FC-1-TP8", "C-IP-TP8"]
    assert figures.stale_results(tmp_path) == []


def test_a_record_without_a_key_is_stale_and_a_current_one_is_restamped(tmp_path,
                                                                          monkeypatch):
    from sim.system import figures
    digests = {(case, config): {"ring": "r", "verilog": "v", "stimulus": "s"}
               for case in ("A-FC-1-TP8", "A-FC-2-TP8", "B-OP-TP16")
               for config in ("sequential", "t3")}
    path = _record(tmp_path, monkeypatch, digests)
    monkeypatch.setattr(runkey, "source_stamp", lambda harness=None, sim=None: "new")
    assert figures.restamp(tmp_path) == ["docs/results/paper-1.json"]
    assert json.loads(path.read_text())["key"]["stamp"] == "new"
    assert figures.restamp(tmp_path) == []
    data = json.loads(path.read_text())
    del data["key"]
    path.write_text(json.dumps(data))
    (line,) = figures.stale_results(tmp_path)
    assert "it holds no key of what its runs ran (recorded in an older format)" in line
