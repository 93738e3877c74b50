"""Tracker geometry, region configuration, register map and the driver-side checks.

Everything here is plain Python: the RTL (:mod:`tracker.rtl`), the golden model
(:mod:`tracker.model`) and the driver of the system issue all take these objects, so the
geometry and the register map exist once.
"""

import dataclasses
from collections import Counter

from hw.csr import Field, Reg, RegisterMap
from hw.interfaces import region_bits
from hw.params import T3Params, check_int, check_params, param


__all__ = [
    "TrackerParams", "Region", "Status", "tracker_registers", "check_regions",
    "check_schedule", "entry_bits", "table_bits", "register_values", "PAPER_TABLE_BITS",
    "STAT_REGISTERS", "INFO", "CTRL", "CMD", "STATUS",
]


#: The paper's Tracker size, 19 KB (section 4.2.1), in bits.
PAPER_TABLE_BITS = 19 * 1024 * 8

#: The statistics and status registers both test layers read back after a run.
STAT_REGISTERS = ("status", "errors", "accesses", "tracked", "triggers", "stall_full",
                  "stall_out", "occupancy", "peak_occupancy")

#: Width of the per-region ``updates_per_element`` field.
UPDATES_BITS = 8


@dataclasses.dataclass(frozen=True)
class TrackerParams:
    """Geometry of the Tracker table.

    Parameters
    ----------
    sets : int
        Number of sets, a power of two from 1 to 4096 (256 in the paper); the set index is the
        ``log2(sets)`` least significant bits of ``wg_id``.
    ways : int
        Entries per set, 1 to 16 (8 in the paper's 19 KB configuration: one per ``wf_id``).
    regions : int
        Entries of the region table, 1 to 16.
    count_bits : int
        Width of an entry's update counter, 1 to 32.  The threshold of every region must fit.
    """

    sets: int = param(256, "table sets", 1, 4096, pow2=True)
    ways: int = param(8, "ways per set", 1, 16)
    regions: int = param(4, "region registers", 1, 16)
    count_bits: int = param(16, "counter width", 1, 32)

    def __post_init__(self):
        check_params(self)

    @property
    def set_bits(self):
        return self.sets.bit_length() - 1

    @property
    def region_bits(self):
        return region_bits(self.regions)

    @property
    def max_count(self):
        return (1 << self.count_bits) - 1

    def check_against(self, params: T3Params):
        """Refuse a geometry that the system's ``wg_id`` cannot index."""
        if self.set_bits > params.wg_id_bits:
            raise ValueError(f"sets {self.sets} needs {self.set_bits} wg_id bits to index, "
                             f"but wg_id_bits is {params.wg_id_bits}")

    def to_dict(self):
        return dataclasses.asdict(self)


#: The ``info`` register: the geometry, read-only.
INFO = Reg("info", 32, "ro", "geometry", fields=(
    Field("set_bits", 8, "log2(sets)"), Field("ways", 8, "ways per set"),
    Field("regions", 8, "region registers"), Field("count_bits", 8, "counter width")))

#: The ``ctrl`` register.
CTRL = Reg("ctrl", None, "rw", "", fields=(
    Field("enable", doc="count tracked accesses (0: every access passes untouched)"),))

#: The ``cmd`` register: write 1 to a field to act.
CMD = Reg("cmd", None, "wo", "write 1 to act", fields=(
    Field("flush", doc="flush the table (the input stalls `sets` cycles)"),
    Field("clear", doc="clear the counters")))

#: The ``status`` register: sticky error bits (write 1 to clear) and the live flush state.
STATUS = Reg("status", None, "w1c", "errors and state", fields=(
    Field("set_full", doc="an access needed a way in a full set; the input stalled"),
    Field("over_threshold", doc="an update would take a tile past its threshold; not counted"),
    Field("count_overflow", doc="an update through a region whose threshold passes "
                                "2**count_bits - 1; not counted"),
    Field("region_mismatch", doc="an open tile was updated through another region; not "
                                 "counted"),
    Field("bad_access", doc="mask empty or not whole elements, or address not beat aligned"),
    Field("region_busy", doc="a write to a region's registers while it has open tiles (or "
                             "an access to it in flight, or a tracked write waits at the "
                             "input); ignored: flush first"),
    Field("flushing", lsb=8, live=True,
          doc="the table is being cleared (after reset or a flush)")))

_ERRORS = ["over_threshold", "count_overflow", "region_mismatch", "bad_access"]

#: The ``status`` bits as flags (from :data:`STATUS`), with ``ERRORS`` (the refused accesses)
#: and ``STICKY`` (every sticky bit).
Status = STATUS.flags("Status", {"ERRORS": _ERRORS,
                                 "STICKY": ["set_full", "region_busy"] + _ERRORS})


@dataclasses.dataclass(frozen=True)
class Region:
    """One programmed address range of tracked output.

    ``[base, base + size)`` in bytes; every wavefront tile in it expects
    ``tile_elems * updates_per_element`` element updates before it fires.
    """
    base: int
    size: int
    tile_elems: int
    updates_per_element: int = 2

    @property
    def threshold(self):
        return self.tile_elems * self.updates_per_element

    def contains(self, addr):
        return self.base <= addr < self.base + self.size


def check_regions(params: T3Params, tparams: TrackerParams, regions):
    """Refuse a region table the hardware would misinterpret.  Returns ``regions`` as a list.

    Checks: at most ``tparams.regions`` regions; ``base`` and ``size`` beat-aligned, ``size``
    non-zero, the range inside the address space; no two regions overlap; ``tile_elems`` and
    ``updates_per_element`` positive and fitting their registers; the threshold fits the
    counter.
    """
    regions = list(regions)
    if len(regions) > tparams.regions:
        raise ValueError(f"{len(regions)} regions given but the Tracker has "
                         f"{tparams.regions} region registers")
    for index, r in enumerate(regions):
        where = f"region {index}"
        for field in ("base", "size", "tile_elems", "updates_per_element"):
            check_int(f"{where}: {field}", getattr(r, field), 0)
        if r.size == 0:
            raise ValueError(f"{where}: size must be positive, not 0")
        for field in ("base", "size"):
            value = getattr(r, field)
            if value % params.beat_bytes:
                raise ValueError(f"{where}: {field} 0x{value:x} is not a multiple of the "
                                 f"beat size {params.beat_bytes}")
        if r.base + r.size > (1 << params.addr_bits):
            raise ValueError(f"{where}: base 0x{r.base:x} + size 0x{r.size:x} passes the "
                             f"{params.addr_bits}-bit address space")
        if not 1 <= r.tile_elems <= tparams.max_count:
            raise ValueError(f"{where}: tile_elems must be from 1 to {tparams.max_count}, "
                             f"not {r.tile_elems}")
        if not 1 <= r.updates_per_element < (1 << UPDATES_BITS):
            raise ValueError(f"{where}: updates_per_element must be from 1 to "
                             f"{(1 << UPDATES_BITS) - 1}, not {r.updates_per_element}")
        if r.threshold > tparams.max_count:
            raise ValueError(f"{where}: threshold {r.tile_elems} x {r.updates_per_element} = "
                             f"{r.threshold} does not fit count_bits {tparams.count_bits} "
                             f"(max {tparams.max_count})")
    for i, a in enumerate(regions):
        for j in range(i + 1, len(regions)):
            b = regions[j]
            if a.base < b.base + b.size and b.base < a.base + a.size:
                raise ValueError(f"region {i} [0x{a.base:x}, 0x{a.base + a.size:x}) overlaps "
                                 f"region {j} [0x{b.base:x}, 0x{b.base + b.size:x})")
    return regions


def check_schedule(params: T3Params, tparams: TrackerParams, stages, wfs_per_wg,
                   open_stages=2, passing=0):
    """Refuse a schedule that can put more open tiles in one set than it has ways.

    Parameters
    ----------
    stages : list of iterables of int
        The ``wg_id`` of every workgroup of each tracked producer stage, in stage order.
    wfs_per_wg : int
        Wavefronts per workgroup; each writes one tile, so each opens one Tracker entry.
    open_stages : int
        How many consecutive stages can have open tiles at once.  In the staggered ring
        reduce-scatter a tile of step ``s`` opens with the first of its local update (during
        step ``s``) and its neighbour's update (sent during the neighbour's step ``s - 1``), so
        two consecutive stages can be open together: the default is 2.
    passing : int
        Tracked tiles outside the schedule that can be open at once besides it, in any set
        (each holds a way while it is): the all-gather's forwarded tiles, which arrive one
        after another from one neighbour's DMA engine
        (:func:`sim.system.configure.configure_all_reduce`).  The default is 0.

    A tile is open from its first counted update until the update that fires its trigger.  If
    the tiles of any ``open_stages`` consecutive stages mapping to one set outnumber the ways,
    the Tracker could stall with a full set; this check is what guarantees that it never does
    for a configuration the driver accepts.  Also refused: a ``wg_id`` or ``wf_id`` that does
    not fit its field, and a ``wg_id`` used twice within a window (two open tiles would share
    an entry).
    """
    check_int("wfs_per_wg", wfs_per_wg, 1, 1 << params.wf_id_bits,
              note=f"wf_id_bits {params.wf_id_bits}")
    check_int("open_stages", open_stages, 1)
    check_int("passing", passing, 0, tparams.ways, note=f"ways {tparams.ways}")
    tparams.check_against(params)
    stages = [list(stage) for stage in stages]
    for index, stage in enumerate(stages):
        for wg in stage:
            if not 0 <= wg < (1 << params.wg_id_bits):
                raise ValueError(f"stage {index}: wg_id {wg} does not fit wg_id_bits "
                                 f"{params.wg_id_bits}")
    for first in range(max(1, len(stages) - open_stages + 1)):
        window = stages[first:first + open_stages]
        last = first + len(window) - 1
        ids = Counter(wg for stage in window for wg in stage)
        twice = sorted(wg for wg, n in ids.items() if n > 1)
        if twice:
            raise ValueError(f"wg_id {twice[0]} appears more than once in stages "
                             f"{first}-{last}, which can be open together")
        per_set = Counter(wg % tparams.sets for wg in ids)
        for set_index, n_wg in sorted(per_set.items()):
            if n_wg * wfs_per_wg + passing > tparams.ways:
                also = f" and {passing} passing" if passing else ""
                raise ValueError(
                    f"set {set_index} would hold {n_wg * wfs_per_wg}{also} open tiles in stages "
                    f"{first}-{last} ({n_wg} workgroups x {wfs_per_wg} wavefronts) but the "
                    f"Tracker has {tparams.ways} ways")


def entry_bits(params: T3Params, tparams: TrackerParams):
    """Bits of one table entry: valid, tag (``wg_msb``, ``wf_id``), beat start address,
    counter, region index."""
    tag = params.wg_id_bits - tparams.set_bits + params.wf_id_bits
    start = params.addr_bits - params.beat_offset_bits
    return 1 + tag + start + tparams.count_bits + tparams.region_bits


def table_bits(params: T3Params, tparams: TrackerParams):
    """Bits of the whole table (``sets * ways`` entries)."""
    return tparams.sets * tparams.ways * entry_bits(params, tparams)


def tracker_registers(params: T3Params, tparams: TrackerParams):
    """The Tracker's register map (a :class:`hw.csr.RegisterMap`)."""
    regs = [
        INFO, CTRL, CMD, STATUS,
        Reg("errors", 32, "ro", "accesses refused with an error (not counted into any tile) and "
                               "refused register writes; counts in the cycle after the status "
                               "bit latches"),
        Reg("accesses", 32, "ro", "accesses taken from the input"),
        Reg("tracked", 32, "ro", "accesses counted into a tile"),
        Reg("triggers", 32, "ro", "triggers fired"),
        Reg("stall_full", 32, "ro", "cycles the head access waited for a way in a full set"),
        Reg("stall_out", 32, "ro", "cycles an access waited at the input for room in the "
                                   "trigger queue"),
        Reg("occupancy", 32, "ro", "valid entries now"),
        Reg("peak_occupancy", 32, "ro", "most valid entries at once since the counters were "
                                        "cleared (it follows `occupancy` a cycle later)"),
    ]
    for r in range(tparams.regions):
        regs += [
            Reg(f"region{r}_base", params.addr_bits, "rw", f"region {r}: first byte address"),
            Reg(f"region{r}_size", params.addr_bits, "rw",
                f"region {r}: size in bytes (0: region off)"),
            Reg(f"region{r}_tile_elems", tparams.count_bits, "rw",
                f"region {r}: elements per wavefront tile"),
            Reg(f"region{r}_updates", UPDATES_BITS, "rw",
                f"region {r}: updates expected per element"),
        ]
    return RegisterMap(regs)


def register_values(tparams: TrackerParams, regions, enable=True):
    """``[(register name, value), ...]`` that program ``regions`` (unused region registers
    are switched off with size 0) and then ``ctrl.enable``.  Check the regions first with
    :func:`check_regions`."""
    values = []
    for index in range(tparams.regions):
        r = regions[index] if index < len(regions) else None
        if r is None:
            values.append((f"region{index}_size", 0))
            continue
        values += [
            (f"region{index}_base", r.base),
            (f"region{index}_size", r.size),
            (f"region{index}_tile_elems", r.tile_elems),
            (f"region{index}_updates", r.updates_per_element),
        ]
    values.append(("ctrl", CTRL.encode(enable=int(enable))))
    return values
