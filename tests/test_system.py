"""The whole system end to end: N GPUs in a ring (exported Verilog under cocotb, on Verilator
and Icarus; each GPU's traffic from its GPU-side engine), a GEMM whose partial outputs are real
numbers, the reduce-scatter in each configuration, the all-gather, and every GPU's output
checked bit for bit against the ring-ordered numpy reference.  Also: DRAM traffic against its
analytic counts, and a compute/communication-balanced case where the fused configurations beat
Sequential.
"""

import os

import pytest

from hw.params import T3Params
from l2.config import L2Params
from sim.harness.runner import SIMULATORS, default_sim
from sim.system.configure import CONFIGS
from sim.system.run import run_config
from system.spec import LINK_BANDWIDTH, LINK_CHARGES_HEADERS
from sim.system.workload import (GemmSpec, Workload,
                                 balanced_k)


SMALL = dict(m=32, k=64, tile_rows=16, tile_cols=16, wfs_per_wg=2, cus=2)

SIMS = [default_sim()] if os.environ.get("SIM") else list(SIMULATORS)

#: Icarus runs the engines' ring about twenty times slower than Verilator: it runs every
#: 2-GPU case and one 4-GPU case; Verilator runs them all.
CASES = [(sim, gpus, dtype, config) for sim in SIMS for gpus in (2, 4)
         for dtype in ("fp16", "fp32") for config in CONFIGS
         if sim == "verilator" or gpus == 2 or (dtype, config) == ("fp16", "t3-mca")]


def _default_suite(case):
    """Whether the default suite runs ``case`` (the others under ``--soak``): every
    configuration in fp16 on Verilator, on rings of 2 and 4 GPUs: the mechanism each case
    adds is then in the default suite once.  Icarus runs the same Verilog; its run in the
    default suite is ``tests/test_waves.py``'s (a 2-GPU ring, verified, with its wave).  fp32
    rings (a build of their own, about a minute) run under ``--soak``: their adder lanes are
    the blocks' (``tests/test_nmc_alu_cocotb.py``, ``tests/test_engine.py``), the ring
    around them the fp16 ring's."""
    sim, gpus, dtype, config = case
    if sim == "icarus":         # unless Icarus is the only simulator (SIM=icarus)
        return len(SIMS) == 1 and (gpus, dtype, config) == (2, "fp16", "t3")
    return dtype == "fp16"


def _soak_unless(keep, cases):
    return [c if keep(c) else pytest.param(*c, marks=pytest.mark.soak) for c in cases]


def chunk_beats(spec, gpus):
    return spec.m * (spec.n // gpus) * spec.elem_bytes // 32


def check_traffic(r, spec, gpus, config):
    """DRAM accesses by category equal what the schedule implies (in beats, all GPUs); the
    GEMM's reads are every WG's panels (:meth:`sim.system.workload.Workload.wg_read_beats`),
    or with an L2 the reads it answered."""
    cb = chunk_beats(spec, gpus)
    d = r["dram"]
    wl = Workload(spec, gpus, T3Params())
    reads = sum(len(wl.schedule[g]) for g in range(gpus)) * wl.wg_read_beats()
    if r["l2"] is None:
        assert d["gemm_reads"] == reads, "every WG reads its A and B panels once"
    else:       # each read answered by the L2 one way: a hit, a miss, merged, bypassed
        c = r["l2"]["gemm" if config == "sequential" else "gemm_rs"]
        assert sum(c[k] for k in ("read_hits", "read_misses", "read_merged",
                                  "bypass_reads")) == reads, c
    assert d["gemm_writes"] == gpus * gpus * cb, "every partial beat is written once"
    assert d["ag_reads"] == d["ag_writes"] == gpus * (gpus - 1) * cb
    if config == "sequential":
        assert d["rs_reads"] == gpus * (1 + 2 * (gpus - 1)) * cb     # local + received
        assert d["rs_writes"] == gpus * gpus * cb                    # G-1 sends + the final
    else:
        assert d["rs_reads"] == d["rs_writes"] == gpus * (gpus - 2) * cb   # DMA tiles
    # over the links: every GPU sends G-1 chunks during the reduce-scatter, each payload beat
    # once, and at most one header per payload beat; the utilisation is the beats that cost
    # bandwidth (the payload's: LINK_CHARGES_HEADERS is off) over what the links can carry,
    # so at most 1
    assert d["link_payload_beats"] == gpus * (gpus - 1) * cb
    assert d["link_payload_beats"] < d["link_busy_beats"] <= 2 * d["link_payload_beats"]
    # the GEMM's waits at the MC arbiter: at most one per GPU and cycle of its phase
    gemm_cycles = r["phase_cycles"]["gemm" if config == "sequential" else "gemm_rs"]
    assert 0 <= r["compute_wait"] <= gpus * gemm_cycles
    cycles = r["phase_cycles"]["rs" if config == "sequential" else "gemm_rs"]
    num, den = LINK_BANDWIDTH
    charged = d["link_busy_beats"] if LINK_CHARGES_HEADERS else d["link_payload_beats"]
    assert d["link_utilization"] == pytest.approx(charged / (cycles * gpus * num / den))
    assert d["link_utilization"] <= 1.0


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator, gpus, dtype, config", _soak_unless(_default_suite, CASES))
def test_end_to_end_bit_exact(simulator, gpus, dtype, config, tmp_path, t3_options):
    spec = GemmSpec(n=16 * gpus, dtype=dtype, **SMALL)
    r = run_config(spec, gpus, config, sim=simulator, build_dir=tmp_path,
                   seed=t3_options.seed)
    assert r["verified"] is True
    assert r["gpus"] == gpus and r["config"] == config
    check_traffic(r, spec, gpus, config)


#: The L2 of the ring tests: small enough that the GEMM's inputs and Sequential's output
#: evict each other (16 sets of 4 ways: 2 KiB).
TEST_L2 = L2Params(sets=16, ways=4, banks=2, mshrs=8, depth=32)

#: Every ring configuration on Verilator, Sequential (the one whose output is cached and
#: written back) on Icarus too (under ``--soak``: the Icarus ring runs the same Verilog).
L2_CASES = [(sim, config) for sim in SIMS for config in CONFIGS
            if sim == "verilator" or config == "sequential"]


def check_l2(r, config):
    """The L2's counters against the DRAM's: every request answered one way; every DRAM read
    of the CUs a miss or a bypassed read; every write of a cached output a write-back."""
    assert r["l2"] is not None
    for phase, c in r["l2"].items():
        kinds = ("read_hits", "read_misses", "read_merged", "store_hits", "store_allocs",
                 "bypass_reads", "bypass_writes", "refused")
        assert c["requests"] == sum(c[k] for k in kinds), (phase, c)
        assert c["refused"] == 0, (phase, c)
    d = r["dram"]
    if config == "sequential":
        g = r["l2"]["gemm"]
        # the GEMM's reads are all cached (A and B) and its stores too (C, whole beats)
        assert g["bypass_reads"] == g["bypass_writes"] == 0, g
        assert d["gemm_reads"] == g["read_misses"]
        assert d["gemm_writes"] == g["write_backs"] + g["flush_write_backs"]
    else:
        g = r["l2"]["gemm_rs"]
        # T3's output updates bypass the L2; its reads are cached
        assert g["store_hits"] == g["store_allocs"] == g["bypass_reads"] == 0, g
        assert g["write_backs"] == g["flush_write_backs"] == 0, g
        assert d["gemm_reads"] == g["read_misses"]


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator, config",
                         _soak_unless(lambda c: c[0] == "verilator" or len(SIMS) == 1,
                                      L2_CASES))
def test_end_to_end_bit_exact_with_an_l2(simulator, config, tmp_path, t3_options):
    """The paper rings' node and engines: an L2 between the CUs and the memory controller, NMC
    units that schedule FR-FCFS (``docs/nmc.md``) behind an MC arbiter that counts each
    request until its column command (``retire``), and WGs that stream their panels in K
    slices (four here, two staged: ``docs/engine.md``).  The same bit-exact result and DRAM
    writes by category as without an L2 and in-order units (the L2 writes every cached output
    beat back once), and the L2's counters agree with the DRAM's; no status bit latched, every
    DRAM access of the timed phases a row hit, miss or conflict, and the bypass cap's count
    per phase within what the phase's accesses allow (each time needs ``BYPASS_CAP`` column
    commands passing the oldest).  The timeline samples the L2's read hits and misses too:
    never more than the run's, a hit rate in [0, 1] in the GEMM's intervals, and the trace's
    hit-rate counter carries it."""
    from nmc.config import BYPASS_CAP
    from sim.system.timeline import series
    from sim.system.trace import events
    gpus = 2
    spec = GemmSpec(n=16 * gpus, k_slice=16, **SMALL)
    r = run_config(spec, gpus, config, sim=simulator, build_dir=tmp_path,
                   seed=t3_options.seed, l2=TEST_L2, timeline=50, dram_scheduler="fr-fcfs")
    assert r["verified"] is True
    assert Workload(spec, gpus, T3Params()).wg_slices() == 4
    check_traffic(r, spec, gpus, config)
    check_l2(r, config)
    check_bank_parallel(r)
    assert set(r["dram_capped"]) == set(r["dram_rows"])
    for phase, capped in r["dram_capped"].items():
        assert 0 <= capped * BYPASS_CAP <= sum(r["dram_rows"][phase].values()), (phase, capped)
    regs = r["timeline"]["regs"]
    assert regs[-2:] == ["l2.read_hits", "l2.read_misses"]
    last = r["timeline"]["samples"][-1]["gpus"]
    for k, name in ((-2, "read_hits"), (-1, "read_misses")):
        assert sum(v[k] for v in last) <= sum(p[name] for p in r["l2"].values())
    rates = [x for g in series(r)["l2_hits"] for x in g if x == x]     # NaN: no reads
    assert rates and all(0 <= x <= 1 for x in rates)
    counted = [e for e in events(r) if e["name"] == "L2 read hit rate"]
    assert len(counted) == len(rates)


@pytest.mark.cocotb
@pytest.mark.parametrize("simulator", [s for s in SIMS if s == "verilator"] or SIMS[:1])
def test_balanced_case_t3_beats_sequential(simulator, tmp_path, t3_options):
    """GEMM and RS of about equal length (K from the scaling rule): both fused
    configurations finish sooner than Sequential, while their fused phase is no shorter than
    the GEMM alone (overlap cannot beat its longer half); T3-MCA's DRAM accesses are no more
    than Sequential's."""
    gpus = 4
    spec = GemmSpec(m=32, n=64, k=balanced_k(gpus), tile_rows=16, tile_cols=16,
                    wfs_per_wg=2, cus=2)
    results = {c: run_config(spec, gpus, c, sim=simulator, build_dir=tmp_path / c,
                             seed=t3_options.seed) for c in CONFIGS}
    assert all(r["verified"] for r in results.values())
    seq = results["sequential"]
    ph = seq["phase_cycles"]
    for config in ("t3", "t3-mca"):
        r = results[config]
        assert r["cycles"] < seq["cycles"], f"{config}: {r['cycles']} >= {seq['cycles']}"
        fused = r["phase_cycles"]["gemm_rs"]
        # the fused phase runs the same GEMM (its stores become op-and-stores) plus the RS
        assert fused >= ph["gemm"], f"{config}: fused phase {fused} shorter than the GEMM " \
                                    f"alone ({ph['gemm']})"
    total = {c: sum(v for k, v in r["dram"].items() if k.endswith(("reads", "writes")))
             for c, r in results.items()}
    assert total["t3-mca"] <= total["sequential"], total


def check_bank_parallel(r):
    """No status bit latched (an unannounced command would latch one) and every DRAM access
    of the timed phases a row hit, miss or conflict."""
    assert not any(any(st.values()) for st in r["status"].values()), r["status"]
    rows = sum(sum(phase.values()) for phase in r["dram_rows"].values())
    assert rows == sum(v for k, v in r["dram"].items() if k.endswith(("_reads", "_writes")))


@pytest.mark.cocotb
@pytest.mark.soak       # rings of their own; the paper rings' units, FR-FCFS, run by default
@pytest.mark.parametrize("l2", [False, True], ids=["no-l2", "l2"])
def test_end_to_end_bit_exact_with_bank_parallel_row_commands(l2, tmp_path, t3_options):
    """Nodes whose NMC units schedule row commands bank-parallel, without an L2 and with one
    (its WGs streaming K slices): each configuration bit-exact with the same DRAM traffic by
    category as in order (:func:`check_traffic`, :func:`check_bank_parallel`), and with the
    L2 its counters agreeing with the DRAM's."""
    gpus = 2
    spec = GemmSpec(n=16 * gpus, **SMALL, **({"k_slice": 16} if l2 else {}))
    for config in CONFIGS:
        r = run_config(spec, gpus, config, build_dir=tmp_path / config,
                       seed=t3_options.seed, dram_scheduler="bank-parallel",
                       **({"l2": TEST_L2} if l2 else {}))
        assert r["verified"] is True
        check_traffic(r, spec, gpus, config)
        check_bank_parallel(r)
        if l2:
            check_l2(r, config)


@pytest.mark.cocotb
def test_isolated_ring_rs_with_nmc(tmp_path, t3_options):
    """``rs-nmc`` on the ring, the paper's Ideal-RS+NMC: the output is in memory before its
    phase but for the step-1 chunk, which the phase begins by storing as tracked updates;
    every step is a DMA transfer (the links carry exactly the G - 1 chunks each GPU sends),
    reduced by the receivers' near-bank ALUs; its phase reads no GEMM input and lasts at
    least what the link needs for G - 1 chunks; bit-exact."""
    gpus = 4
    spec = GemmSpec(n=16 * gpus, **SMALL)
    r = run_config(spec, gpus, "rs-nmc", build_dir=tmp_path, seed=t3_options.seed)
    assert r["verified"] is True
    assert set(r["phase_cycles"]) == {"gemm_rs", "ag"}
    beats = spec.m * spec.n * spec.elem_bytes // T3Params().beat_bytes // gpus   # a chunk
    d = r["dram"]
    assert d["link_payload_beats"] == gpus * (gpus - 1) * beats
    assert d["gemm_reads"] == 0
    # in its phase the engines store only the step-1 chunk (the rest was stored before it)
    assert d["gemm_writes"] == gpus * beats
    # every DRAM access of the phase found its row open, its bank closed or another row open
    rows = r["dram_rows"]["gemm_rs"]
    for stream, total in (("compute", d["gemm_reads"] + d["gemm_writes"]),
                          ("comm", d["rs_reads"] + d["rs_writes"])):
        assert sum(rows[f"{k}_{stream}"] for k in ("hits", "misses", "conflicts")) == total
    num, den = LINK_BANDWIDTH
    assert r["phase_cycles"]["gemm_rs"] >= (gpus - 1) * beats * den / num
