"""Waves a person opens in their viewer: FST or VCD from Verilator and FST from Icarus, of one
instance of the ring when asked (``--wave-scope``), with a GTKWave save file whose every
signal the wave holds."""

import re

import pytest

from sim.harness.runner import check_wave_scope, instance_tree
from sim.system.waves import block_groups, save_file, wave_names as _names
from t3.cli import main


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator, suffix, root", [("verilator", ".fst", "t3_ring2e"),
                                                     ("icarus", ".fst", "t3_ring2e")])
def test_a_wave_of_one_gpu_holds_that_gpu_only(tmp_path, capsys, monkeypatch, simulator, suffix,
                                              root):
    """A 2-GPU run with ``--wave-scope gpu1``: verified; the wave holds GPU 1's signals (its
    engine's, its node's and the node's blocks') and none of GPU 0's or the links'; the save
    file opens that wave and names only signals it holds, one group per block.  Verilator's
    C++ at ``-O0``: the run is 5,400 cycles, and the build of a model with its trace is the
    suite's longest (this test from an empty cache: 75 s against 88 at ``-O1``)."""
    from sim.system import run
    monkeypatch.setattr(run, "CXX_OPT", "-O0")
    monkeypatch.setenv("T3_CXX_OPT", "-O0")
    wave = tmp_path / f"ring{suffix}"
    assert main(["run", "--sim", simulator, "--gpus", "2", "--m", "32", "--k", "64",
                 "--wave", str(wave), "--wave-scope", "gpu1"]) == 0
    out = capsys.readouterr().out
    assert "verified   yes" in out and "(gpu1 and below)" in out
    names = _names(wave)
    assert names and all(n.startswith(f"{root}.gpu1.") for n in names), sorted(names)[:5]
    for block in ("engine", "node.tracker", "node.dma", "node.nmc", "node.arbiter"):
        assert any(n.startswith(f"{root}.gpu1.{block}.") for n in names), block
    save = tmp_path / f"ring{suffix}.gtkw"
    text = save.read_text()
    assert f'[dumpfile] "{wave.resolve()}"' in text
    listed = [line for line in text.splitlines() if line.startswith(root)]
    assert listed and all(re.sub(r"\[\d+:0\]$", "", n) in names for n in listed), \
        [n for n in listed if re.sub(r"\[\d+:0\]$", "", n) not in names][:5]
    groups = re.findall(r"^@800200\n-(\S+)$", text, re.M)
    assert {"gpu1", "gpu1.node.tracker", "gpu1.node.dma", "gpu1.node.nmc"} <= set(groups)


def test_scopes_and_groups_follow_the_design(tmp_path):
    """The instance tree of an exported design, a scope it does not hold refused naming what
    is there, and the save file's groups from the module's own port declarations."""
    src = tmp_path / "top.v"
    src.write_text("""module top(clk, d, q);
  input clk;
  input [7:0] d;
  output [7:0] q;
  \\\\top.a  a (
    .clk(clk), .d(d), .q(q)
  );
endmodule
module \\\\top.a (clk, d, q);
  input clk;
  input [7:0] d;
  output [7:0] q;
  \\\\top.a.q  q_slice (
    .clk(clk)
  );
endmodule
module \\\\top.a.q (clk);
  input clk;
endmodule
""")
    assert instance_tree(src, "top") == {"a": "top.a", "a.q_slice": "top.a.q"}
    check_wave_scope(src, "top", "a.q_slice")
    with pytest.raises(ValueError, match=r"^wave scope 'a\.b': a has no instance 'b' "
                                         r"\(it has q_slice\)$"):
        check_wave_scope(src, "top", "a.b")
    # the slice is plumbing, not a block: no group of its own
    assert block_groups(src, "top") == [("a", [("clk", 1), ("d", 8), ("q", 8)])]
    names = {"TOP.top.a.clk", "TOP.top.a.d", "TOP.top.a.inner"}     # as Verilator's VCD
    text = save_file(tmp_path / "w.vcd", src, "top", names)
    assert "TOP.top.a.d[7:0]" in text and "@28\nTOP.top.a.clk" in text
    assert "q[7:0]" not in text                  # a port the wave lacks is not listed
    assert "[treeopen] TOP.\n[treeopen] TOP.top." in text
    assert "[treeopen] top." in save_file(tmp_path / "w.fst", src, "top", {"top.a.clk"})


def test_a_build_with_waves_compiles_at_o1_unless_told(monkeypatch, tmp_path):
    """A run with a wave builds its model's C++ at ``WAVES_CXX_OPT`` (``-O1``: half the build
    time of ``-O3``, nearly its speed, the trace being half the code); without a wave at
    ``CXX_OPT``; ``T3_CXX_OPT`` or the caller's ``cxx_opt`` wins either way."""
    from sim.system import run
    from sim.system.workload import GemmSpec
    monkeypatch.delenv("T3_CXX_OPT", raising=False)
    monkeypatch.setattr(run, "CXX_OPT", run.DEFAULT_CXX_OPT)      # the suite's own is -O1
    spec, wave = GemmSpec(m=32, k=64), str(tmp_path / "ring.fst")

    def opt(**kw):
        return run.run_plan(spec, 2, "t3", sim="verilator", check=False, **kw).cxx_opt
    assert run.WAVES_CXX_OPT == "-O1" and run.DEFAULT_CXX_OPT == "-O3"
    assert opt(wave=wave) == "-O1" and opt() == "-O3"
    assert opt(wave=wave, cxx_opt="-O2") == "-O2"
    monkeypatch.setenv("T3_CXX_OPT", "-O0")
    monkeypatch.setattr(run, "CXX_OPT", "-O0")
    assert opt(wave=wave) == "-O0" and opt() == "-O0"
