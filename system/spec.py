"""A ring's hardware as one value: :class:`RingSpec`, and how a ring of G GPUs is sized.

Every ``t3`` command that builds a ring — ``t3 run``, ``t3 compare``, ``t3 sweep``,
``t3 paper``, ``t3 export ring`` — describes it with a :class:`RingSpec` and builds it with
:meth:`RingSpec.build`, so that the ring a user exports is the ring a run simulates: one
default for every field, one range check for every field (fields that depend on each other,
such as a mesh's size, included), and ``to_dict``/``from_dict`` for the testbench and the
records.  :func:`ring_for` sizes a ring's nodes and engines for its GPUs from a few knobs
(memory rows, MCQ depth, DMA buffer, DRAM scheduler, L2, link layer, element types).

The defaults are the scaled system's (``docs/system.md``): the paper's HBM, link and CU
rates divided by the same factor, so that a GPU of the model sees the paper's GPU's ratios.
"""

import dataclasses

from dma.config import MAX_REMOTE_WINDOWS, DMAParams
from hw.params import T3Params, check_int, is_int
from l2.config import L2Params
from linklayer.config import LinkLayerParams
from nmc.config import SCHEDULERS, NMCParams
from system.engine.config import EngineParams
from system.link import check_link
from system.node import FRFCFS_IN_FLIGHT, NodeParams
from system.ring import MAX_GPUS, TOPOLOGIES, Ring


__all__ = ["RingSpec", "ring_for", "node_for", "with_linklayer", "check_topology", "memory_rows_for", "engine_params_for",
           "gpu_bits_for", "ahead_depth_for", "LINK_LATENCY", "LINK_BANDWIDTH",
           "LINK_CHARGES_HEADERS", "FORMATS", "MEMORY_ROWS", "ENGINE_PARAMS", "RING_LINKLAYER",
           "MAX_MESH_GPUS", "PAPER_MEMORY_ROWS", "paper_memory_rows", "PAPER_ENGINE", "PAPER_L2",
           "PAPER_DMA_BUFFER", "PAPER_DRAM_SCHEDULER"]


#: Link latency of the scaled system, cycles (the paper's 500 ns at 1 GHz is 500 cycles; the
#: scaled workloads are small enough that this would dominate a step: see docs/system.md).
LINK_LATENCY = 64

#: Link bandwidth of the scaled system: 1.2 B/cycle, 3/80 of a 32-byte beat per cycle (the
#: paper's 75 B/cycle each way, Table 1, divided by the HBM's scale of 62.5,
#: ``sim.system.workload.SCALE``).
LINK_BANDWIDTH = (3, 80)

#: Whether a link packet's header beat costs link bandwidth.  The paper models the ring with
#: "a simple link bandwidth and latency model" (section 5.1.1): the data a GPU sends takes
#: link time, framing does not.  Charged, the CUs' write-combined remote stores (runs of a few
#: beats, one header each) would pay about a third more link time than the DMA's tile packets
#: for the same payload, which tilts the comparison towards T3 (``docs/paper.md``).
LINK_CHARGES_HEADERS = False

#: The element types the near-bank ALUs and the engines' adders of a ring built for no
#: particular workload add (the driver's and ``t3 export``'s nodes): the workloads' types.  A
#: run builds its ring for its workload's type only (``sim.system.run.run_formats``).
FORMATS = ("fp16", "fp32")

#: HBM rows per bank of a node when none is named (128 KiB), the node ``t3 export`` and
#: ``t3 synth`` build, and of a ring's nodes up to 8 GPUs: beyond, as many times more as the
#: ring is times 8 GPUs, rounded up to a power of two (:func:`memory_rows_for`).
MEMORY_ROWS = 8

#: The GPU-side engines of the system's simulation top: a local memory as large as the node's
#: (partials and read-back), eight WGs in flight at most, steps of up to 512 beats.
ENGINE_PARAMS = EngineParams(local_beats=4096, slots=8, buffer_beats=512, pending=256)

#: The link layer of the rings' nodes when a run asks for one (``linklayer=True``): the
#: default geometry, whose replay buffer (256 beats) holds the 136 a link of
#: :data:`LINK_LATENCY` cycles and :data:`LINK_BANDWIDTH` needs for line rate
#: (``t3 bench linklayer``).
RING_LINKLAYER = LinkLayerParams()

#: The largest full mesh the system builds: the largest its collectives that send to every GPU
#: reach (a remote window per other GPU, ``dma.config.MAX_REMOTE_WINDOWS``).  A mesh of G GPUs
#: has ``G (G - 1)`` links, each a link model with its buffer: its elaboration grows with the
#: square of G (with engines, to Verilog: 15 s and 0.2 GB at 8 GPUs, 35 s and 0.4 GB at 16,
#: 63 s and 1 GB at 24; at 64, more than five minutes and 5.7 GB).
MAX_MESH_GPUS = MAX_REMOTE_WINDOWS + 1


#: HBM rows per bank of the nodes of the rings the Table 2 presets run on up to TP 16 (1 MiB
#: per GPU: the output, receive slots and input panels of the largest Figure 16 case at scale
#: 1 fit; at 512 KiB the FC cases at TP 8 did not); twice as many at TP 32
#: (:func:`paper_memory_rows`: PALM's and MT-NLG's FC and IP cases at scale 1 need 1-1.5 MiB).
PAPER_MEMORY_ROWS = 64

#: The GPU-side engines of those rings: the engine's memory holds the GPU's partial output
#: and its read-back (2 x 5,120 beats for Mega-GPT-2 at TP 16); their WGs stream their panels
#: in K slices, as the paper's GPU's library GEMMs
#: (:data:`sim.system.workload.LIBRARY_K_SLICE`).
PAPER_ENGINE = dataclasses.replace(ENGINE_PARAMS, local_beats=16384, streaming=True)


#: The L2 of the paper rings' nodes: 128 sets of 16 ways (64 KiB), of which each case uses
#: the ways that keep the paper's ratio of working set to L2 (``sim.system.run.paper_l2_config``).  Its
#: misses in flight are the paper's GPU's in time: Accel-Sim's QV100 L2 has 192 MSHRs in
#: each of its 64 slices, 12,288 sectors, which at 1 TB/s are 393 ns of misses; at the
#: model's 16 B/cycle 393 cycles of misses are 197 (``docs/paper.md``, the machine's
#: table).  It takes 256 requests in flight: the requests it holds bound its misses too, so
#: no fewer than its MSHRs.
PAPER_L2 = L2Params(sets=128, ways=16, banks=4, mshrs=197, depth=256)

#: The DMA payload buffer of the paper rings' nodes, in beats: the paper's RS reads are
#: "issued as soon as both the local and neighbors' copies have updated the memory", in
#: bursts (section 6.1.2), not paced by the link: 1,024 beats (the hardware's most) hold a
#: ring step's chunk of every case (608 beats at most, Mega-GPT-2 at TP 8 and scale 1), so
#: a triggered tile's reads wait for no room in the buffer until more than a step's chunk
#: waits for the link.
PAPER_DMA_BUFFER = 1024

#: The DRAM scheduler of the paper rings' NMC units: Accel-Sim's HBM, the paper's simulator's,
#: schedules FR-FCFS (``gpgpu_dram_scheduler 1``: a bank's oldest row hit first, else its
#: oldest request) with a row bus beside the column bus (``dram_dual_bus_interface 1``: a row
#: command and a column command a cycle, for any banks).  The model's FR-FCFS unit does that
#: over the MCQ's requests (``docs/nmc.md``; the machine's table in ``docs/paper.md``).
PAPER_DRAM_SCHEDULER = "fr-fcfs"


def _times_pow2(gpus, per):
    """How many ``per``-GPU groups a ring of ``gpus`` spans, rounded up to a power of two."""
    groups = -(-gpus // per)
    return 1 << (groups - 1).bit_length()


def memory_rows_for(gpus):
    """The HBM rows per bank of a ring of ``gpus``' nodes when the caller names none: 8 up to
    8 GPUs, 16 up to 16, 32 up to 32, 64 up to 64 (a workload that needs more asks for it:
    ``sim.system.run.workload_memory_rows``).  The model's memory costs simulation time by its
    size (each of its banks is read every cycle), so a ring gets no more than it needs."""
    return MEMORY_ROWS * _times_pow2(gpus, 8)


def engine_params_for(gpus):
    """The GPU-side engines of a ring of ``gpus`` when the caller names none:
    :data:`ENGINE_PARAMS` up to 16 GPUs; beyond, a local memory as many times larger as the
    ring is times 16 GPUs, rounded up to a power of two (it holds the partial output and its
    read-back, which grow with the default workload's N)."""
    return dataclasses.replace(ENGINE_PARAMS,
                               local_beats=ENGINE_PARAMS.local_beats * _times_pow2(gpus, 16))


def gpu_bits_for(gpus):
    """The width of a GPU number on the link (the DMA's ``gpu_bits``) in a ring of ``gpus``:
    the DMA's default 4 up to 16 GPUs (so those rings' hardware does not change with the
    limit), the bits that number ``gpus`` GPUs beyond."""
    return max(DMAParams.gpu_bits, (gpus - 1).bit_length())


def ahead_depth_for(mcq_depth):
    """The ``ahead`` port of a bank-parallel NMC unit behind an MCQ of ``mcq_depth``: every
    command on its way to the unit (:class:`system.node.NodeParams`), to a power of two."""
    return 1 << (mcq_depth + 2 - 1).bit_length()


def node_for(gpus=None, *, memory_rows=None, mcq_depth=None, l2=None, formats=FORMATS,
             dma_buffer=None, dram_scheduler=None, linklayer=None):
    """The :class:`system.node.NodeParams` of a ring of ``gpus``' nodes: ALUs for ``formats``
    (default :data:`FORMATS`), memory of ``memory_rows`` rows per bank (default
    :func:`memory_rows_for` the ring; without ``gpus`` :data:`MEMORY_ROWS`, 128 KiB a GPU), an
    MCQ of ``mcq_depth`` entries (default the node's, 64), an L2 of geometry ``l2`` (an
    :class:`l2.config.L2Params`; default none), GPU numbers wide enough for the ring
    (:func:`gpu_bits_for`; without ``gpus`` 16 GPUs), a DMA payload buffer of ``dma_buffer``
    beats (the tile reads it keeps in flight; default the node's, 32), the NMC unit's row
    commands scheduled by ``dram_scheduler`` (one of :data:`nmc.config.SCHEDULERS`; default
    the unit's, in order; bank-parallel with an ``ahead`` port for every command between the
    arbiter and the unit, :func:`ahead_depth_for`; FR-FCFS with a queue of the MCQ's depth
    and :data:`system.node.FRFCFS_IN_FLIGHT` responses), and the link layer ``linklayer``
    (``True``: :data:`RING_LINKLAYER`, or a :class:`linklayer.config.LinkLayerParams`;
    default none).  Refuses a value out of range naming the field."""
    if dram_scheduler is not None and dram_scheduler not in SCHEDULERS:
        raise ValueError(f"dram_scheduler must be one of {', '.join(SCHEDULERS)}, not "
                         f"{dram_scheduler!r}")
    if memory_rows is None:
        memory_rows = MEMORY_ROWS if gpus is None else memory_rows_for(gpus)
    node = NodeParams(nmc=NMCParams(rows=memory_rows, formats=tuple(formats)), l2=l2)
    if gpus is not None and gpu_bits_for(gpus) != node.dma.gpu_bits:
        node = dataclasses.replace(node, dma=dataclasses.replace(
            node.dma, gpu_bits=gpu_bits_for(gpus)))
    if mcq_depth is not None:
        node = dataclasses.replace(node, arbiter=dataclasses.replace(node.arbiter,
                                                                     depth=mcq_depth))
    if dma_buffer is not None:
        node = dataclasses.replace(node, dma=dataclasses.replace(node.dma,
                                                                 buffer_beats=dma_buffer))
    if dram_scheduler == "fr-fcfs":
        node = dataclasses.replace(node, nmc=dataclasses.replace(
            node.nmc, scheduler=dram_scheduler,
            resp_depth=node.arbiter.depth + FRFCFS_IN_FLIGHT))
    elif dram_scheduler is not None and dram_scheduler != node.nmc.scheduler:
        node = dataclasses.replace(node, nmc=dataclasses.replace(
            node.nmc, scheduler=dram_scheduler, ahead_depth=ahead_depth_for(node.arbiter.depth)))
    return with_linklayer(node, linklayer)


def with_linklayer(node, linklayer):
    """``node`` (a :class:`system.node.NodeParams`) with the link layer ``linklayer``
    (``True``: :data:`RING_LINKLAYER`; a :class:`linklayer.config.LinkLayerParams`;
    ``None``/``False``: as it is)."""
    if not linklayer:
        return node
    ll = RING_LINKLAYER if linklayer is True else linklayer
    if not isinstance(ll, LinkLayerParams):
        raise ValueError(f"linklayer must be True or a LinkLayerParams, not {linklayer!r}")
    return dataclasses.replace(node, linklayer=ll)


def check_topology(topology, gpus, linklayer=False):
    """Refuse a topology the system does not build for ``gpus`` GPUs (``linklayer``: whether
    the nodes have a link layer), naming the field: ``"ring"`` or ``"mesh"``, a mesh of up to
    :data:`MAX_MESH_GPUS` and without a link layer."""
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, not {topology!r}")
    if topology == "mesh":
        if is_int(gpus) and gpus > MAX_MESH_GPUS:
            raise ValueError(f"gpus {gpus}: a mesh has a link from every GPU to every other, "
                             f"and the system builds one of up to {MAX_MESH_GPUS} GPUs (its "
                             f"collectives' reach)")
        if linklayer:
            raise ValueError("topology mesh has no link layer: linklayer must be off")


def paper_memory_rows(gpus):
    """The HBM rows per bank of a Table 2 preset's ring of ``gpus``: :data:`PAPER_MEMORY_ROWS`
    up to 16 GPUs, twice as many beyond."""
    return PAPER_MEMORY_ROWS * (1 if gpus <= 16 else 2)


@dataclasses.dataclass(frozen=True)
class RingSpec:
    """The hardware of ``gpus`` GPUs joined by links: what :meth:`build` makes.

    ``node``: every GPU's :class:`system.node.NodeParams` (default :func:`node_for` the
    ring); ``engines``: the GPU-side engines of a simulation top
    (:class:`system.engine.config.EngineParams`: each GPU a :class:`system.gpu.GPU`, the
    ring ``t3 run`` simulates) or ``None`` (bare nodes whose compute ports are the ring's);
    ``topology``: ``"ring"`` or ``"mesh"`` (every GPU linked to every other, up to
    :data:`MAX_MESH_GPUS`; no link layer); ``latency`` (cycles) and ``bandwidth``
    (``(num, den)`` beats a cycle) of every link; ``charge_headers``: whether a packet's
    header costs a beat of the link's bandwidth; ``faults``: fault injectors on every link
    (the nodes need a link layer); ``params``: the system's widths.  A value out of range is
    refused with a ``ValueError`` naming the field, before anything is built."""
    gpus: int = 4
    node: NodeParams = None
    engines: EngineParams = None
    topology: str = "ring"
    latency: int = LINK_LATENCY
    bandwidth: tuple = LINK_BANDWIDTH
    charge_headers: bool = LINK_CHARGES_HEADERS
    faults: bool = False
    params: T3Params = T3Params()

    def __post_init__(self):
        check_int("gpus", self.gpus, 2, MAX_GPUS)
        if self.node is None:
            object.__setattr__(self, "node", node_for(self.gpus))
        if not isinstance(self.node, NodeParams):
            raise ValueError(f"node must be a NodeParams, not {self.node!r}")
        if self.engines is not None and not isinstance(self.engines, EngineParams):
            raise ValueError(f"engines must be an EngineParams or None, not {self.engines!r}")
        if not isinstance(self.params, T3Params):
            raise ValueError(f"params must be a T3Params, not {self.params!r}")
        check_topology(self.topology, self.gpus, self.node.linklayer is not None)
        try:
            num, den = self.bandwidth
        except (TypeError, ValueError):
            raise ValueError(f"bandwidth must be (num, den) beats a cycle, not "
                             f"{self.bandwidth!r}") from None
        object.__setattr__(self, "bandwidth", (num, den))
        check_link(self.latency, num, den)
        if self.gpus > self.node.dma.max_gpus:
            raise ValueError(f"gpus {self.gpus} needs more than node.dma.gpu_bits "
                             f"{self.node.dma.gpu_bits}")
        for name in ("charge_headers", "faults"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, not {getattr(self, name)!r}")
        if self.faults and self.node.linklayer is None:
            raise ValueError("faults need the link layer (node.linklayer): without it a fault "
                             "on the link is a wrong result")

    @property
    def top(self):
        """The Verilog module name of the ring: ``t3_ring<G>`` and a letter for each of
        engines (``e``), a link layer (``l``), fault injectors (``f``) and a mesh (``m``)."""
        return f"t3_ring{self.gpus}" + ("e" if self.engines else "") \
            + ("l" if self.node.linklayer else "") + ("f" if self.faults else "") \
            + ("m" if self.topology == "mesh" else "")

    def build(self):
        """The :class:`system.ring.Ring` of this spec (clocked, its GPUs instances of one
        module)."""
        num, den = self.bandwidth
        return Ring(self.params, self.node, gpus=self.gpus, latency=self.latency, num=num,
                    den=den, engines=self.engines, charge_headers=self.charge_headers,
                    faults=self.faults, topology=self.topology)

    def to_dict(self):
        return {"gpus": self.gpus, "node": self.node.to_dict(),
                "engines": self.engines.to_dict() if self.engines is not None else None,
                "topology": self.topology, "latency": self.latency,
                "bandwidth": list(self.bandwidth), "charge_headers": self.charge_headers,
                "faults": self.faults, "params": self.params.to_dict()}

    @classmethod
    def from_dict(cls, d):
        engines = d.get("engines")
        return cls(gpus=d["gpus"], node=NodeParams.from_dict(d["node"]),
                   engines=EngineParams(**engines) if engines is not None else None,
                   topology=d["topology"], latency=d["latency"],
                   bandwidth=tuple(d["bandwidth"]), charge_headers=d["charge_headers"],
                   faults=d["faults"], params=T3Params(**d["params"]))


def ring_for(gpus=4, *, engines=False, memory_rows=None, mcq_depth=None, l2=None,
             formats=FORMATS, dma_buffer=None, dram_scheduler=None, linklayer=None, **link):
    """The :class:`RingSpec` of ``gpus`` GPUs sized for them: nodes of :func:`node_for` (the
    knobs as there) and with ``engines`` (``True``: :func:`engine_params_for` the ring, or an
    :class:`system.engine.config.EngineParams`) the GPU-side engines; ``link``: the spec's
    other fields (``topology``, ``latency``, ``bandwidth``, ``charge_headers``, ``faults``,
    ``params``)."""
    check_int("gpus", gpus, 2, MAX_GPUS)
    if engines is True:
        engines = engine_params_for(gpus)
    elif engines is False:
        engines = None
    node = node_for(gpus, memory_rows=memory_rows, mcq_depth=mcq_depth, l2=l2, formats=formats,
                    dma_buffer=dma_buffer, dram_scheduler=dram_scheduler, linklayer=linklayer)
    return RingSpec(gpus=gpus, node=node, engines=engines, **link)
