"""The link layer in the ring (``NodeParams.linklayer``, ``docs/linklayer.md``): a real GEMM ->
reduce-scatter -> all-gather on GPU nodes whose DMA engines talk through the link layer, on
the exported Verilog (Verilator), checked bit for bit; with faults injected at random on
every link's beats and acknowledgements (:class:`system.link.LinkFaults`), the run still ends
bit-exact, the memory sees exactly the traffic of a clean run (a repair never reaches it),
and the retries are counted.  And the refusals, before any build.
"""

import pytest

from linklayer.config import LinkLayerParams
from sim.system.run import run_config
from sim.system.workload import GemmSpec

from test_system import SMALL, check_traffic


GPUS = 4
SPEC = GemmSpec(n=16 * GPUS, **SMALL)

#: The link layer's counters of repairs (none on a clean wire).
REPAIRS = ("tx_replayed", "tx_naks", "tx_timeouts", "tx_ack_errors", "rx_crc_errors",
           "rx_seq_errors", "rx_duplicates", "rx_too_long", "rx_naks")


def check_delivery(r, config):
    """Bit-exact, the traffic a clean run has, every packet sent delivered once, nothing the
    link layer could not repair."""
    assert r["verified"] is True
    check_traffic(r, SPEC, GPUS, config)
    ll = r["linklayer"]
    assert ll["tx_packets"] == ll["rx_delivered"] > 0
    assert all(v == 0 for g in r["status"].values() for v in g.values()), r["status"]
    return ll


def test_only_a_ring_with_the_link_layer_builds_without_verilators_dfg():
    """Verilator's data-flow optimiser miscompiles the receiver's trailer check
    (:data:`sim.harness.runner.NO_DFG`): a ring whose nodes have the link layer builds
    without it under Verilator, and its run's key says so; a ring without one keeps it (7 %
    of its speed).  The clean ring's run below (no CRC error on a clean wire) is what catches
    the miscompile in the ring's build."""
    from sim.harness.runner import NO_DFG
    from sim.system.run import run_plan
    assert NO_DFG == ("-fno-dfg",)
    plan = run_plan(SPEC, GPUS, "t3", sim="verilator", linklayer=True, check=False)
    assert plan.verilator_args == NO_DFG and plan.top.endswith("l")
    assert run_plan(SPEC, GPUS, "t3", sim="verilator", check=False).verilator_args == ()
    assert run_plan(SPEC, GPUS, "t3", sim="icarus", linklayer=True,
                    check=False).verilator_args == ()


@pytest.mark.cocotb
@pytest.mark.parametrize("config", ["t3", "sequential"])
def test_a_clean_ring_repairs_nothing(config, tmp_path, t3_options):
    r = run_config(SPEC, GPUS, config, linklayer=True, build_dir=tmp_path,
                   seed=t3_options.seed)
    ll = check_delivery(r, config)
    assert {k: ll[k] for k in REPAIRS} == dict.fromkeys(REPAIRS, 0)
    assert ll["acks_lost"] == 0 and r["faults"] is None


@pytest.mark.cocotb
@pytest.mark.parametrize("kinds", [("drop",), ("flip",), ("dup",), ("drop", "flip", "dup")])
def test_faults_on_every_link_end_bit_exact(kinds, tmp_path, t3_options):
    """1 % of the beats and acknowledgements hit, by each kind alone and all together (each
    kind alone under ``--soak``: the three together repair every kind in the default suite,
    and the link layer's own tests take each kind alone)."""
    if len(kinds) == 1 and not t3_options.soak:
        pytest.skip(f"{kinds[0]} faults alone: the default suite runs the three kinds together; "
                    f"run with --soak")
    r = run_config(SPEC, GPUS, "t3", linklayer=True, build_dir=tmp_path, seed=t3_options.seed,
                   faults={"rate": 0.01, "kinds": kinds})
    ll = check_delivery(r, "t3")
    f = r["faults"]
    hit = {"drop": f["faults_dropped"], "flip": f["faults_flipped"],
           "dup": f["faults_duplicated"]}
    assert all(hit[k] > 0 for k in kinds) and all(hit[k] == 0 for k in hit if k not in kinds)
    # every beat fault costs at least one packet's replay or a duplicate dropped
    assert ll["tx_replayed"] + ll["rx_duplicates"] > 0
    assert ll["rx_crc_errors"] + ll["rx_seq_errors"] + ll["rx_duplicates"] > 0


def test_faults_need_the_link_layer():
    with pytest.raises(ValueError, match=r"^faults need the link layer \(linklayer=True\)"):
        run_config(SPEC, GPUS, "t3", faults={"rate": 0.01})


@pytest.mark.parametrize("faults, match", [
    ({"rate": 0}, r"^faults rate must be a probability per beat from 2\*\*-24 to 0\.5, not 0$"),
    ({"rate": 0.9}, r"^faults rate must be .* not 0\.9$"),
    ({"rate": 0.01, "kinds": ("burn",)},
     r"^faults kinds must be some of drop, flip, dup, not \('burn',\)$"),
])
def test_bad_fault_settings_are_refused(faults, match):
    with pytest.raises(ValueError, match=match):
        run_config(SPEC, GPUS, "t3", linklayer=True, faults=faults)


def test_a_tile_longer_than_the_link_layer_takes_is_refused():
    """A 16 x 16 fp16 tile is 16 beats and its header: the sender would stop at it."""
    short = LinkLayerParams(max_packet_beats=16)
    with pytest.raises(ValueError, match=r"^command 0: a tile of 16 x 16 is 16 beats and its "
                                         r"header, longer than the link layer's "
                                         r"max_packet_beats 16$"):
        run_config(SPEC, GPUS, "t3", linklayer=short)


def test_a_remote_packet_longer_than_the_link_layer_takes_is_refused():
    import dataclasses
    from system.node import NodeParams
    from dma.config import DMAParams
    with pytest.raises(ValueError, match=r"^linklayer.max_packet_beats 8 must hold a "
                                         r"remote-store packet: dma.remote_burst 8 beats"):
        NodeParams(dma=DMAParams(trigger_depth=512),
                   linklayer=dataclasses.replace(LinkLayerParams(), max_packet_beats=8))


@pytest.mark.cocotb
@pytest.mark.parametrize("linklayer", [False, True])
def test_a_gpu_reset_mid_run_is_a_clear_error(linklayer, tmp_path, t3_options):
    """GPU 1 alone reset 200 cycles into the fused phase: never a result reported verified."""
    with pytest.raises(AssertionError, match=r"GPUReset: phase gemm_rs: GPU 1 was reset "
                                             r"while the ring ran"):
        run_config(SPEC, GPUS, "t3", linklayer=linklayer, build_dir=tmp_path,
                   seed=t3_options.seed, reset_gpu={"gpu": 1, "phase": "gemm_rs", "at": 200})


@pytest.mark.cocotb
def test_the_driver_recovers_from_a_gpu_reset(tmp_path, t3_options):
    """With recovery, the whole ring is reset and the job run again: bit-exact."""
    r = run_config(SPEC, GPUS, "t3", linklayer=True, build_dir=tmp_path, seed=t3_options.seed,
                   reset_gpu={"gpu": 2, "phase": "ag", "at": 100}, recover=True)
    assert r["recovered"].startswith("phase ag: GPU 2 was reset while the ring ran")
    check_delivery(r, "t3")


@pytest.mark.parametrize("reset, match", [
    ({"gpu": 4, "phase": "ag", "at": 0}, r"^reset_gpu gpu must be"),
    ({"gpu": 0, "phase": "rs", "at": 0}, r"^reset_gpu phase must be one of gemm_rs, ag, check "
                                         r"\(the phases of t3\), not 'rs'$"),
    ({"gpu": 0, "phase": "ag", "at": -1}, r"^reset_gpu at must be"),
])
def test_bad_resets_are_refused(reset, match):
    with pytest.raises(ValueError, match=match):
        run_config(SPEC, GPUS, "t3", reset_gpu=reset)
