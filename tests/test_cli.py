"""The ``t3`` command: demo, export and refusals, in-process."""

import re

import pytest

from hw.cli import main


def test_demo_on_amaranth_verifies(capsys):
    assert main(["demo", "--sim", "amaranth", "--wgs", "4", "--wfs", "2",
                 "--tile-elems", "32"]) == 0
    out = capsys.readouterr().out
    assert "triggers   8 of 8 tiles fired" in out
    assert "verified   yes" in out
    rate = float(re.search(r"throughput (\S+) accesses/cycle", out).group(1))
    assert rate == 1.0          # offered every cycle, output always ready, no full set


def test_demo_writes_a_waveform(tmp_path, capsys):
    wave = tmp_path / "demo.vcd"
    assert main(["demo", "--sim", "amaranth", "--wgs", "1", "--wfs", "1",
                 "--tile-elems", "16", "--wave", str(wave)]) == 0
    text = wave.read_text()
    assert "$enddefinitions" in text
    assert re.search(r"\$var wire 1 \S+ i__valid \$end", text)
    assert re.search(r"^#\d+$", text, re.M)            # value changes over time


def test_demo_refuses_a_schedule_that_overfills_a_set(capsys):
    # 8 workgroups on 4 sets: 2 per set, x 2 wavefronts = 4 open tiles > 2 ways
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--sim", "amaranth", "--sets", "4", "--ways", "2", "--wgs", "8",
              "--wfs", "2"])
    assert exit_info.value.code == 2
    assert "t3: error: set 0 would hold 4 open tiles in stages 0-0 (2 workgroups x 2 " \
           "wavefronts) but the Tracker has 2 ways" in capsys.readouterr().err


def test_demo_refuses_bad_geometry(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--sim", "amaranth", "--sets", "3"])
    assert exit_info.value.code == 2
    assert "t3: error: sets must be a power of two from 1 to 4096, not 3" in \
        capsys.readouterr().err


def test_export_tracker(tmp_path, capsys):
    assert main(["export", "tracker", "--out", str(tmp_path), "--sets", "16",
                 "--ways", "2"]) == 0
    verilog = (tmp_path / "t3_tracker.v").read_text()
    assert re.search(r"^module t3_tracker\(", verilog, re.M)
    assert re.search(r"input \[\d+:0\] i__payload;", verilog)
    registers = (tmp_path / "t3_tracker_registers.md").read_text()
    assert "`region3_updates`" in registers


def test_export_mc_arbiter(tmp_path, capsys):
    assert main(["export", "mc_arbiter", "--out", str(tmp_path), "--depth", "16"]) == 0
    verilog = (tmp_path / "t3_mc_arbiter.v").read_text()
    assert re.search(r"^module t3_mc_arbiter\(", verilog, re.M)
    for port in ("compute__valid", "comm__ready", "tap__payload", "o__valid", "drain",
                 "calib_start", "calib_end", "occupancy"):
        assert re.search(rf"\b(input|output)\b[^;]*\b{port};", verilog), port
    assert "`starve_limit`" in (tmp_path / "t3_mc_arbiter_registers.md").read_text()
