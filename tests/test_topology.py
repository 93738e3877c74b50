"""Topologies other than the ring (``Ring(topology=...)``, paper section 7.1), on the exported
Verilog (Verilator), checked bit for bit.  A full mesh (``system/fabric.py``) running the
ring's algorithm uses only the links from GPU ``g`` to GPU ``g - 1``, each of the ring's
latency and bandwidth, through a router and a merge that add no cycle: every counter and
every phase's cycles must be the ring's.  And the refusals, before any build.
"""

import pytest

from sim.system.run import run_config
from sim.system.workload import GemmSpec

from test_system import SMALL


GPUS = 4
SPEC = GemmSpec(n=16 * GPUS, **SMALL)


@pytest.mark.cocotb
@pytest.mark.parametrize("config", ["t3", "sequential"])
def test_the_rings_algorithm_on_a_mesh_is_the_rings_cycle_for_cycle(config, tmp_path,
                                                                      t3_options):
    ring = run_config(SPEC, GPUS, config, build_dir=tmp_path / "ring", seed=t3_options.seed)
    mesh = run_config(SPEC, GPUS, config, build_dir=tmp_path / "mesh", seed=t3_options.seed,
                      topology="mesh")
    assert ring["verified"] is True and mesh["verified"] is True
    assert mesh["mesh"] == {"unroutable": 0, "stray": 0} and ring["mesh"] is None
    for key in ("cycles", "phase_cycles", "dram", "status", "compute_wait"):
        assert mesh[key] == ring[key], key


def test_a_bad_topology_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^topology must be one of ring, mesh, not 'torus'$"):
        run_config(SPEC, GPUS, "t3", topology="torus")
    with pytest.raises(ValueError, match=r"^topology mesh has no link layer: linklayer must "
                                         r"be off$"):
        run_config(SPEC, GPUS, "t3", topology="mesh", linklayer=True)
