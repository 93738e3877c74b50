"""What a system run measures and checks: the counters read after each phase, the DRAM
accesses by category (paper section 6.2, Figure 18) and the bit-exact scoreboard."""

import numpy as np

from l2.config import COUNTERS as L2_COUNTER_REGS
from linklayer.config import LINK_COUNTERS


__all__ = ["COUNTERS", "L2_COUNTERS", "FRFCFS_COUNTERS", "CATEGORIES", "dram_accesses",
           "link_utilization", "compare_chunk"]


#: The DRAM access categories of :func:`dram_accesses` (paper Figure 18), in its table's order.
CATEGORIES = ("gemm_reads", "gemm_writes", "rs_reads", "rs_writes", "ag_reads", "ag_writes")


#: Counters read after each phase: (block, register).
COUNTERS = [("nmc", f"{k}_{s}") for k in ("reads", "stores", "updates", "row_hits",
                                         "row_misses", "row_conflicts") for s in
            ("compute", "comm")] + [
    ("node", "remote_out"), ("node", "comm_writes"), ("dma", "link_busy"),
    ("dma", "tiles_sent"), ("dma", "beats_sent"), ("dma", "status"), ("dma", "errors"),
    ("tracker", "peak_occupancy"), ("tracker", "triggers"), ("tracker", "status"),
    ("tracker", "errors"), ("tracker", "tracked"), ("tracker", "occupancy"), ("dma", "triggers"),
    ("dma", "reads"), ("dma", "beats_received"), ("nmc", "errors"), ("arbiter", "forced"),
    ("arbiter", "threshold"), ("arbiter", "comm_max_wait"), ("arbiter", "compute_wait"),
    ("arbiter", "occupancy_sum"), ("arbiter", "compute_occupancy_sum")]

#: Also read when the nodes have a link layer (``linklayer.config.LINK_COUNTERS``) and its
#: status.
LINK_LAYER_COUNTERS = [("link", name) for name in LINK_COUNTERS] + [("link", "status")]

#: Also read when the nodes have an L2 (``l2.config.COUNTERS``) and its status.
L2_COUNTERS = [("l2", name) for name, _ in L2_COUNTER_REGS] + [("l2", "status")]

#: Also read when the NMC units schedule FR-FCFS: the times the bypass cap held the oldest
#: command's place (:class:`nmc.frfcfs.FRFCFSUnit`; Accel-Sim's FR-FCFS has no cap).
FRFCFS_COUNTERS = [("nmc", "capped")]


def compare_chunk(gpu, chunk, got, want):
    """Bit-exact comparison; raises ``AssertionError`` naming GPU, chunk, element (row and
    column within the chunk) and both values."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    gb = got.view(np.uint8).reshape(got.shape + (-1,))
    wb = want.view(np.uint8).reshape(want.shape + (-1,))
    diff = np.argwhere(np.any(gb != wb, axis=-1))
    if diff.size:
        r, c = diff[0]
        raise AssertionError(
            f"GPU {gpu}, chunk {chunk}: {len(diff)} element(s) differ; first at row {r}, "
            f"column {c}: got {got[r, c]!r} (0x{gb[r, c].tobytes()[::-1].hex()}), want "
            f"{want[r, c]!r} (0x{wb[r, c].tobytes()[::-1].hex()})")




def _writes(s, stream):
    return s[f"nmc.stores_{stream}"] + s[f"nmc.updates_{stream}"]


def dram_accesses(config, sums):
    """DRAM beats by category from the counter deltas summed over the GPUs (``sums``:
    ``{phase: {"block.register": delta}}``).

    The ``rs`` categories are the collective's: a reduce-scatter's, or an all-to-all's.
    Sequential: each phase is its own category.  Fused (``t3``, ``t3-mca``, ``rs-nmc``): the
    compute stream is the GEMM's (its remote step-1 updates, counted at the sender as
    ``node.remote_out``, are GEMM writes that land in the neighbour's DRAM); the
    communication stream is the reduce-scatter's, less those arriving remote updates.
    """
    dram = dict.fromkeys(CATEGORIES, 0)
    if config == "sequential":
        for phase, key in (("gemm", "gemm"), ("rs", "rs")):
            s = sums[phase]
            dram[f"{key}_reads"] = s["nmc.reads_compute"] + s["nmc.reads_comm"]
            dram[f"{key}_writes"] = _writes(s, "compute") + _writes(s, "comm")
    else:
        f = sums["gemm_rs"]
        remote = f["node.remote_out"]
        dram["gemm_reads"] = f["nmc.reads_compute"]
        dram["gemm_writes"] = _writes(f, "compute") + remote
        dram["rs_reads"] = f["nmc.reads_comm"]
        dram["rs_writes"] = _writes(f, "comm") - remote
    a = sums.get("ag")                  # (an all-to-all has no all-gather)
    if a is not None:
        dram["ag_reads"] = a["nmc.reads_compute"] + a["nmc.reads_comm"]
        dram["ag_writes"] = _writes(a, "compute") + _writes(a, "comm")
    return dram


def link_utilization(phase, gpus, bandwidth, charge_headers=True, links=None):
    """Beats the DMA engines put on the links during ``phase`` (``{"cycles", "delta"}``) as a
    fraction of what the system's links (``links``; default ``gpus``, a ring's: a full mesh
    has ``gpus * (gpus - 1)``) of ``bandwidth = (num, den)`` beats per cycle carry: every
    beat, or with ``charge_headers=False`` (headers take no bandwidth) the payload's."""
    busy = sum(d["dma.link_busy" if charge_headers else "dma.beats_sent"]
               for d in phase["delta"])
    return busy / (phase["cycles"] * (links or gpus) * bandwidth[0] / bandwidth[1])
