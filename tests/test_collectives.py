"""T3 beyond the ring reduce-scatter (paper section 7), on the exported Verilog (Verilator),
checked bit for bit: a full mesh (``system/fabric.py``) running the ring's algorithm, which
uses only the links from GPU ``g`` to GPU ``g - 1``, each of the ring's latency and bandwidth,
through a router and a merge that add no cycle, so every counter and every phase's cycles must
be the ring's; the direct reduce-scatter and the all-to-all of a full mesh with their
Sequential baselines (section 7.1); a small-token step (section 7.3); and the refusals, before
any build.
"""

import pytest

from sim.system.compare import run_all
from sim.system.run import run_config
from sim.system.workload import GemmSpec

from test_system import SMALL, chunk_beats


GPUS = 4
SPEC = GemmSpec(n=16 * GPUS, **SMALL)


@pytest.mark.cocotb
@pytest.mark.soak       # the mesh's fabric runs in the default suite under the direct RS
@pytest.mark.parametrize("config", ["t3", "sequential"])
def test_the_rings_algorithm_on_a_mesh_is_the_rings_cycle_for_cycle(config, tmp_path,
                                                                      t3_options):
    ring = run_config(SPEC, GPUS, config, build_dir=tmp_path / "ring", seed=t3_options.seed)
    mesh = run_config(SPEC, GPUS, config, build_dir=tmp_path / "mesh", seed=t3_options.seed,
                      topology="mesh")
    assert ring["verified"] is True and mesh["verified"] is True
    assert mesh["mesh"] == {"unroutable": 0, "stray": 0} and ring["mesh"] is None
    for key in ("cycles", "phase_cycles", "status", "compute_wait"):
        assert mesh[key] == ring[key], key
    util = "link_utilization"
    assert {k: v for k, v in mesh["dram"].items() if k != util} == \
        {k: v for k, v in ring["dram"].items() if k != util}
    # the same beats over G (G - 1) links, G of them used
    assert mesh["dram"][util] == pytest.approx(ring["dram"][util] / (GPUS - 1))


@pytest.mark.cocotb
def test_the_direct_reduce_scatter_on_a_mesh_is_the_gemms_stores(tmp_path, t3_options):
    """Paper section 7.1: each GPU's GEMM stores every other GPU's chunk straight into its
    owner's memory, where the near-memory ALUs add it to the owner's own: bit-exact (integer
    inputs, whose sums are alike in any order), and no memory access by the collective itself
    (no DMA tile read or write, no Tracker entry); every partial beat written once, locally or
    at its owner; each GPU sends its G - 1 other chunks, each payload beat once."""
    spec = GemmSpec(n=16 * GPUS, inputs="integers", **SMALL)
    r = run_config(spec, GPUS, "t3", topology="mesh", collective="direct", build_dir=tmp_path,
                   seed=t3_options.seed)
    assert r["verified"] is True and r["mesh"] == {"unroutable": 0, "stray": 0}
    cb = chunk_beats(spec, GPUS)
    d = r["dram"]
    assert d["rs_reads"] == d["rs_writes"] == 0 and d["tracker_peak_occupancy"] == 0
    assert d["gemm_writes"] == GPUS * GPUS * cb
    assert d["link_payload_beats"] == GPUS * (GPUS - 1) * cb
    assert 0 < d["link_utilization"] <= 1
    assert all(v == 0 for g in r["status"].values() for v in g.values()), r["status"]


@pytest.mark.cocotb
def test_the_direct_reduce_scatters_baselines(tmp_path, t3_options):
    """``t3 compare``'s runs of the direct reduce-scatter.  Its Sequential baseline
    (:func:`sim.system.programs.direct_rs_steps`): the GEMM's plain stores, then the CUs copy
    each other GPU's chunk into its slot at the owner and add the G - 1 slots into the owner's
    chunk, two operands a pass: per GPU (G - 1) chunks read and sent, G - 1 received, G - 1
    passes reading two chunks and writing one.  T3 and T3-MCA: no access by the collective.
    The isolated RS (``rs-nmc``): the GEMM's stores alone, no reads.  All bit-exact, T3 faster
    than Sequential, and neither faster than its ideal."""
    from sim.system.compare import speedups
    spec = GemmSpec(n=16 * GPUS, inputs="integers", **SMALL)
    results = run_all(spec, GPUS, seed=t3_options.seed, topology="mesh", collective="direct")
    assert all(r["verified"] is True for r in results.values())
    cb, g1 = chunk_beats(spec, GPUS), GPUS - 1
    seq = results["sequential"]["dram"]
    assert seq["rs_reads"] == GPUS * (g1 * cb + 2 * g1 * cb)
    assert seq["rs_writes"] == GPUS * (g1 * cb + g1 * cb)
    assert seq["gemm_writes"] == GPUS * GPUS * cb
    for config in ("t3", "t3-mca", "rs-nmc"):
        d = results[config]["dram"]
        assert d["rs_reads"] == d["rs_writes"] == 0, config
        assert d["gemm_writes"] == GPUS * GPUS * cb, config
    assert results["rs-nmc"]["dram"]["gemm_reads"] == 0
    s = speedups(results)
    assert s["T3"][1] > 1 and s["T3-MCA"][1] > 1
    assert s["Ideal-RS+NMC"][0] <= min(s["T3"][0], s["T3-MCA"][0])


@pytest.mark.cocotb
def test_the_all_to_all_sends_each_chunk_to_its_owner(tmp_path, t3_options):
    """``t3 compare``'s runs of the all-to-all (paper sections 7.1 and 7.2): T3's GEMM stores
    every other GPU's chunk straight into its slot at that GPU and not locally (G chunks
    written per GPU, G - 1 of them remote; no access by the collective, no Tracker entry);
    the Sequential baseline's CUs copy them after the GEMM (G - 1 chunks read and received per
    GPU).  No all-gather follows.  Every GPU's own chunk and slots are exact copies of the
    GEMMs' outputs, whatever the inputs."""
    spec = GemmSpec(n=16 * GPUS, **SMALL)
    results = run_all(spec, GPUS, seed=t3_options.seed, topology="mesh",
                      collective="all-to-all")
    assert all(r["verified"] is True for r in results.values())
    cb, g1 = chunk_beats(spec, GPUS), GPUS - 1
    for config, r in results.items():
        d = r["dram"]
        assert "ag" not in r["phase_cycles"] and d["ag_reads"] == d["ag_writes"] == 0
        assert d["gemm_writes"] == GPUS * GPUS * cb, config
        assert d["link_payload_beats"] == GPUS * g1 * cb, config
        assert r["mesh"] == {"unroutable": 0, "stray": 0}
        want = (GPUS * g1 * cb,) * 2 if config == "sequential" else (0, 0)
        assert (d["rs_reads"], d["rs_writes"]) == want, config
        assert d["tracker_peak_occupancy"] == 0
        assert all(v == 0 for g in r["status"].values() for v in g.values()), r["status"]
    assert results["t3"]["cycles"] < results["sequential"]["cycles"]


@pytest.mark.cocotb
def test_a_whole_all_reduce_runs_without_the_cus(tmp_path, t3_options):
    """The direct RS with its updates tracked, then the all-gather by track and trigger
    (:func:`configure_all_reduce`): one fused phase, no all-gather phase; bit-exact at every
    GPU and chunk; per GPU the collective's accesses are the DMA's reads of the G - 1 chunks
    it sends on (its own reduced one and those it forwards) and the stores of the G - 1 it
    receives; faster than the Sequential direct RS and AG; nothing dropped, no status."""
    spec = GemmSpec(n=16 * GPUS, inputs="integers", **SMALL)
    results = run_all(spec, GPUS, seed=t3_options.seed, topology="mesh",
                      collective="all-reduce")
    assert all(r["verified"] is True for r in results.values())
    cb, g1 = chunk_beats(spec, GPUS), GPUS - 1
    for config in ("t3", "t3-mca", "rs-nmc"):
        r = results[config]
        d = r["dram"]
        assert list(r["phase_cycles"]) == ["gemm_rs"], config
        assert d["rs_reads"] == d["rs_writes"] == GPUS * g1 * cb, config
        assert d["ag_reads"] == d["ag_writes"] == 0
        assert d["link_payload_beats"] == 2 * GPUS * g1 * cb
        assert r["mesh"] == {"unroutable": 0, "stray": 0}
        assert all(v == 0 for g in r["status"].values() for v in g.values()), r["status"]
    assert results["t3"]["cycles"] < results["sequential"]["cycles"]


@pytest.mark.cocotb
@pytest.mark.soak       # a ring of its own; the all-gather by track and trigger runs in the
                        # default suite on the mesh, the ring's RS in every ring test
def test_a_whole_all_reduce_on_the_ring_runs_without_the_cus(tmp_path, t3_options):
    """The ring reduce-scatter with every update tracked, then the all-gather by track and
    trigger out of place (:func:`configure_fused` with ``all_reduce``): one fused phase, no
    all-gather phase; bit-exact at every GPU and chunk against the ring-ordered reference
    (fp16: the ring adds two updates per element, alike in either order); per GPU the
    collective's accesses are the DMA's reads of the G - 2 chunks it adds on and the G - 1 it
    sends on (its own reduced one and those it forwards), and the stores of as many; every
    payload beat crosses a link once per hop; nothing dropped, no status."""
    results = run_all(SPEC, GPUS, seed=t3_options.seed, collective="all-reduce")
    assert all(r["verified"] is True for r in results.values())
    cb = chunk_beats(SPEC, GPUS)
    assert "ag" in results["sequential"]["phase_cycles"]
    for config in ("t3", "t3-mca", "rs-nmc"):
        r = results[config]
        d = r["dram"]
        assert list(r["phase_cycles"]) == ["gemm_rs"], config
        assert d["rs_reads"] == d["rs_writes"] == GPUS * (2 * GPUS - 3) * cb, config
        assert d["ag_reads"] == d["ag_writes"] == 0
        assert d["link_payload_beats"] == 2 * GPUS * (GPUS - 1) * cb
        assert all(v == 0 for g in r["status"].values() for v in g.values()), r["status"]
    assert results["t3-mca"]["cycles"] < results["sequential"]["cycles"]


@pytest.mark.cocotb
@pytest.mark.soak       # a preset's ring of its own; its mechanism is the ring RS's
def test_a_small_token_step_overlaps_its_latency_bound_reduce_scatter(tmp_path, t3_options):
    """Paper section 7.3: a generation step of 16 tokens (Mega-GPT-2's OP sub-layer on 4 GPUs
    at a quarter of the scaled GPU): one WG per ring step on two CUs, a link latency longer
    than a WG's output takes on the link; T3 bit-exact and faster than Sequential; the GEMM's
    reads those of the macro tile's 16 rows (most of them ``B``) in both."""
    from sim.system.run import preset_setup
    from sim.system.workload import Workload, link_latency_for, preset
    from hw.params import T3Params
    spec = preset("Mega-GPT-2-OP-TP8", GPUS, scale=0.25, tokens=16)
    wl = Workload(spec, GPUS, T3Params())
    assert wl.wgs_per_chunk == 1 < spec.cus
    assert link_latency_for(spec) > spec.m * spec.n // GPUS * 2 / 1.2
    ring = preset_setup(spec, GPUS)
    seq = run_config(spec, GPUS, "sequential", build_dir=tmp_path / "s", seed=t3_options.seed,
                     **ring)
    t3 = run_config(spec, GPUS, "t3", build_dir=tmp_path / "t", seed=t3_options.seed, **ring)
    assert seq["verified"] is True and t3["verified"] is True
    assert t3["cycles"] < seq["cycles"]
    # every WG's reads (through the nodes' L2, which a preset's ring has)
    reads = GPUS * GPUS * wl.wgs_per_chunk * wl.wg_read_beats()
    for r, phase in ((seq, "gemm"), (t3, "gemm_rs")):
        l2 = r["l2"][phase]
        assert l2["read_hits"] + l2["read_misses"] + l2["read_merged"] == reads


def test_a_bad_topology_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^topology must be one of ring, mesh, not 'torus'$"):
        run_config(SPEC, GPUS, "t3", topology="torus")
    with pytest.raises(ValueError, match=r"^topology mesh has no link layer: linklayer must "
                                         r"be off$"):
        run_config(SPEC, GPUS, "t3", topology="mesh", linklayer=True)
    with pytest.raises(ValueError, match=r"^collective direct needs a link to every GPU: "
                                         r"topology must be mesh, not 'ring'$"):
        run_config(SPEC, GPUS, "t3", collective="direct")
    with pytest.raises(ValueError, match=r"^engines must be True or an EngineParams, not "
                                         r"False$"):
        run_config(SPEC, GPUS, "sequential", topology="mesh", collective="direct",
                   engines=False)
    with pytest.raises(ValueError, match=r"^collective direct is checked bit for bit with "
                                         r"integer inputs"):
        run_config(SPEC, GPUS, "t3", topology="mesh", collective="direct")
    with pytest.raises(ValueError, match=r"^collective all-to-all needs a link to every GPU: "
                                         r"topology must be mesh, not 'ring'$"):
        run_config(SPEC, GPUS, "t3", collective="all-to-all")
    with pytest.raises(ValueError, match=r"^collective must be one of ring, direct, all-to-all, "
                                         r"all-reduce, not 'tree'"):
        run_config(SPEC, GPUS, "t3", collective="tree")
    with pytest.raises(ValueError, match=r"^collective all-reduce is checked bit for bit with "
                                         r"integer inputs"):
        run_config(SPEC, GPUS, "t3", topology="mesh", collective="all-reduce")
    big = GemmSpec(n=16 * 18, inputs="integers", **SMALL)
    with pytest.raises(ValueError, match=r"^gpus 18: a mesh has a link from every GPU to every "
                                         r"other, and the system builds one of up to 17 GPUs "
                                         r"\(its collectives' reach\)$"):
        run_config(big, 18, "t3", topology="mesh", collective="all-reduce")
