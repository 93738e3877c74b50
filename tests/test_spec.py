"""A ring's hardware as one value (:mod:`system.spec`): its defaults, its checks, its round trip
through JSON, and the sizing of a ring for its GPUs."""

import dataclasses
import json

import pytest

from dma.config import MAX_REMOTE_WINDOWS
from hw.params import T3Params
from l2.config import L2Params
from linklayer.config import LinkLayerParams
from system.engine.config import EngineParams
from system.node import NodeParams
from system.spec import (ENGINE_PARAMS, LINK_BANDWIDTH, LINK_CHARGES_HEADERS, LINK_LATENCY,
                         MAX_MESH_GPUS, RING_LINKLAYER, RingSpec, node_for, ring_for)


def test_the_defaults_are_the_scaled_systems():
    """One default a field: the scaled system's link (64 cycles, 3/80 beat a cycle, headers
    free as in the paper's link model, section 5.1.1), nodes sized for the ring, no engines."""
    ring = RingSpec()
    assert (ring.gpus, ring.topology, ring.latency, ring.bandwidth, ring.charge_headers,
            ring.faults, ring.engines) == (4, "ring", 64, (3, 80), False, False, None)
    assert (LINK_LATENCY, LINK_BANDWIDTH, LINK_CHARGES_HEADERS) == (64, (3, 80), False)
    assert ring.node == node_for(4) and ring.params == T3Params()
    assert ring.top == "t3_ring4"


@pytest.mark.parametrize("ring", [
    RingSpec(),
    ring_for(17, engines=True, l2=L2Params(sets=16, ways=4), linklayer=True, faults=True,
             mcq_depth=32, dma_buffer=64, dram_scheduler="fr-fcfs", latency=20,
             bandwidth=(1, 8), charge_headers=True),
    ring_for(5, engines=EngineParams(local_beats=2048, streaming=True), topology="mesh",
             formats=("fp32",), dram_scheduler="bank-parallel"),
], ids=["default", "everything", "mesh"])
def test_a_spec_survives_json(ring):
    """What the testbench and the records read back is the spec itself."""
    back = RingSpec.from_dict(json.loads(json.dumps(ring.to_dict())))
    assert back == ring and back.top == ring.top


def test_ring_for_sizes_the_nodes_and_engines_for_the_gpus():
    """GPU numbers as wide as the ring needs (4 bits up to 16 GPUs), memory and engines'
    local memory growing by powers of two beyond 8 and 16 GPUs."""
    for gpus, bits, rows, local in ((4, 4, 8, 4096), (9, 4, 16, 4096), (17, 5, 32, 8192),
                                    (64, 6, 64, 16384)):
        ring = ring_for(gpus, engines=True)
        assert (ring.node.dma.gpu_bits, ring.node.nmc.rows, ring.engines.local_beats) == \
            (bits, rows, local), gpus
        assert ring.engines == dataclasses.replace(ENGINE_PARAMS, local_beats=local)
    ll = ring_for(4, linklayer=True)
    assert ll.node.linklayer == RING_LINKLAYER and ll.top == "t3_ring4l"
    fr = ring_for(4, mcq_depth=32, dram_scheduler="fr-fcfs").node
    assert (fr.arbiter.depth, fr.nmc.scheduler, fr.nmc.resp_depth) == (32, "fr-fcfs", 48)
    assert ring_for(4, engines=True, faults=True, linklayer=True,
                    topology="ring").top == "t3_ring4elf"


@pytest.mark.parametrize("fields, message", [
    ({"gpus": 1}, "gpus must be an integer from 2 to 64, not 1"),
    ({"gpus": 65}, "gpus must be an integer from 2 to 64, not 65"),
    ({"topology": "torus"}, "topology must be one of ring, mesh, not 'torus'"),
    ({"topology": "mesh", "gpus": MAX_MESH_GPUS + 1, "node": node_for(MAX_MESH_GPUS + 1)},
     f"gpus {MAX_MESH_GPUS + 1}: a mesh has a link from every GPU to every other, and the "
     f"system builds one of up to {MAX_MESH_GPUS} GPUs"),
    ({"topology": "mesh", "node": node_for(4, linklayer=True)},
     "topology mesh has no link layer: linklayer must be off"),
    ({"latency": 1}, "link latency must be an integer >= 2, not 1"),
    ({"bandwidth": (5, 4)}, "link bandwidth 5/4 exceeds one beat per cycle"),
    ({"bandwidth": 3}, "bandwidth must be (num, den) beats a cycle, not 3"),
    ({"charge_headers": 1}, "charge_headers must be True or False, not 1"),
    ({"faults": True}, "faults need the link layer (node.linklayer): without it a fault on "
                       "the link is a wrong result"),
    ({"gpus": 17, "node": NodeParams()}, "gpus 17 needs more than node.dma.gpu_bits 4"),
    ({"node": "big"}, "node must be a NodeParams, not 'big'"),
    ({"engines": True}, "engines must be an EngineParams or None, not True"),
])
def test_a_spec_out_of_range_is_refused_naming_the_field(fields, message):
    with pytest.raises(ValueError) as error:
        RingSpec(**fields)
    assert str(error.value).startswith(message), str(error.value)


def test_the_mesh_limit_is_its_collectives_reach():
    """A mesh as large as a collective that sends to every GPU can use (a remote window per
    other GPU) builds; its refusal comes before anything is elaborated."""
    assert MAX_MESH_GPUS == MAX_REMOTE_WINDOWS + 1
    RingSpec(gpus=MAX_MESH_GPUS, topology="mesh", node=node_for(MAX_MESH_GPUS))


def test_node_for_refuses_what_it_cannot_size():
    with pytest.raises(ValueError, match="^dram_scheduler must be one of in-order, "
                                         "bank-parallel, fr-fcfs, not 'fifo'$"):
        node_for(dram_scheduler="fifo")
    with pytest.raises(ValueError, match="^linklayer must be True or a LinkLayerParams, not 3$"):
        node_for(linklayer=3)
    assert node_for(linklayer=LinkLayerParams(replay_beats=512)).linklayer.replay_beats == 512
