"""Golden model of the Tracker: the same semantics as :class:`tracker.rtl.Tracker`, one access
at a time, in plain Python.

The hardware processes accesses strictly in order, so the sequence of triggers, the error
counts, the status bits and the table occupancy after each access are functions of the access
sequence alone; both test layers compare the RTL against this model.  Timing is not modelled
here beyond the documented constants (:data:`TRIGGER_LATENCY`).
"""

import dataclasses

from hw.interfaces import ELEM_BYTES, ElemType, Op
from hw.params import T3Params
from .config import Status, TrackerParams


__all__ = ["TrackerModel", "Outcome", "TRIGGER_LATENCY", "check_run"]


#: Cycles from the input handshake of a tile's completing access to its trigger on ``o``.
TRIGGER_LATENCY = 4


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one access did.

    ``kind`` is ``"pass"`` (not counted), ``"count"``, ``"fire"`` (counted and completed its
    tile; ``trigger`` is a dict like the RTL's trigger payload), ``"error"`` (``error`` is the
    :class:`Status` bit) or ``"full"`` (needs a way in a full set: the RTL holds it; the model's
    state is unchanged and the caller decides what to do).
    """
    kind: str
    trigger: dict = None
    error: int = 0


@dataclasses.dataclass
class _Entry:
    tag: int
    start: int
    count: int
    region: int


class TrackerModel:
    """Transaction-level Tracker.

    Parameters
    ----------
    params, tparams
        As for the RTL.
    regions : list of :class:`tracker.config.Region`
        Programmed regions, index = region register number (``None`` for an unused one).
    enable : bool
    """

    def __init__(self, params: T3Params, tparams: TrackerParams, regions=(), enable=True):
        tparams.check_against(params)
        self.params = params
        self.tparams = tparams
        self.regions = list(regions) + [None] * (tparams.regions - len(regions))
        if len(self.regions) > tparams.regions:
            raise ValueError(f"{len(regions)} regions given but the Tracker has "
                             f"{tparams.regions} region registers")
        self.enable = enable
        self.sets = [[None] * tparams.ways for _ in range(tparams.sets)]
        self.status = 0
        self.counters = dict.fromkeys(
            ("errors", "accesses", "tracked", "triggers"), 0)
        self.occupancy = 0
        self.peak_occupancy = 0

    def region_of(self, addr):
        """Index of the lowest-numbered region containing ``addr``, or ``None``."""
        for index, region in enumerate(self.regions):
            if region is not None and region.size and region.contains(addr):
                return index
        return None

    def increment(self, req):
        """Elements the access's mask enables, or ``None`` if the access is malformed."""
        p = self.params
        ebytes = ELEM_BYTES[ElemType(req["etype"])]
        mask = req["mask"]
        if mask == 0 or req["addr"] % p.beat_bytes:
            return None
        lane_mask = (1 << ebytes) - 1
        for k in range(0, p.beat_bytes, ebytes):
            lanes = (mask >> k) & lane_mask
            if lanes not in (0, lane_mask):
                return None
        return bin(mask).count("1") // ebytes

    def access(self, req):
        """Apply one access (a dict of :func:`hw.interfaces.mem_request_layout` fields)."""
        outcome = self._access(req)
        self.counters["accesses"] += 1      # the RTL takes a held access from its input too
        if outcome.kind in ("count", "fire"):
            self.counters["tracked"] += 1
        if outcome.kind == "fire":
            self.counters["triggers"] += 1
        if outcome.kind == "error":
            self.counters["errors"] += 1
        if outcome.kind in ("error", "full"):
            self.status |= outcome.error
        self.peak_occupancy = max(self.peak_occupancy, self.occupancy)
        return outcome

    def _access(self, req):
        p, tp = self.params, self.tparams
        region = self.region_of(req["addr"])
        if not (self.enable and req["tracked"] and req["op"] in (Op.STORE.value, Op.UPDATE.value)
                and region is not None):
            return Outcome("pass")
        inc = self.increment(req)
        if inc is None:
            return Outcome("error", error=Status.BAD_ACCESS)
        threshold = self.regions[region].threshold
        row = self.sets[req["wg_id"] % tp.sets]
        tag = (req["wg_id"] >> tp.set_bits, req["wf_id"])
        beat = req["addr"] >> p.beat_offset_bits
        way = next((w for w, e in enumerate(row) if e is not None and e.tag == tag), None)
        if way is not None:
            entry = row[way]
            if entry.region != region:
                return Outcome("error", error=Status.REGION_MISMATCH)
            count, start = entry.count + inc, min(entry.start, beat)
        else:
            count, start = inc, beat
        if threshold > tp.max_count:        # the counter cannot reach it: nothing counts
            return Outcome("error", error=Status.COUNT_OVERFLOW)
        if count > threshold:
            return Outcome("error", error=Status.OVER_THRESHOLD)
        if count == threshold:
            if way is not None:
                row[way] = None
                self.occupancy -= 1
            return Outcome("fire", trigger={
                "wg_id": req["wg_id"], "wf_id": req["wf_id"],
                "addr": start << p.beat_offset_bits, "region": region})
        if way is None:
            way = next((w for w, e in enumerate(row) if e is None), None)
            if way is None:
                return Outcome("full", error=Status.SET_FULL)
            row[way] = _Entry(tag, start, count, region)
            self.occupancy += 1
        else:
            row[way].count, row[way].start = count, start
        return Outcome("count")

    def set_region(self, index, region, writes=4):
        """Write region register ``index`` (a :class:`tracker.config.Region`, or ``None`` for
        off) with ``writes`` register writes (``register_values`` makes 4, 1 for off);
        refused, with ``status.region_busy`` and one error per write, while the region has
        open tiles.  Returns whether the writes were taken."""
        if any(e is not None and e.region == index for row in self.sets for e in row):
            self.status |= Status.REGION_BUSY
            self.counters["errors"] += writes
            return False
        self.regions[index] = region
        return True

    def flush(self):
        """``cmd.flush``: every entry invalid."""
        self.sets = [[None] * self.tparams.ways for _ in range(self.tparams.sets)]
        self.occupancy = 0


def check_run(model, outcomes, triggers, taken, regs):
    """Scoreboard shared by both test layers: compare what the RTL did with the model.

    ``outcomes`` are the model's :class:`Outcome` for the same requests, ``triggers`` the RTL's
    ``[(cycle, payload dict)]``, ``taken`` the cycle each request was taken, ``regs`` the
    registers of :data:`tracker.config.STAT_REGISTERS` read after the run.  Raises
    :class:`AssertionError` naming the first difference; returns the indices of the requests
    that fired.
    """
    fires = [i for i, o in enumerate(outcomes) if o.kind == "fire"]
    got = [t for _, t in triggers]
    for k, (g, index) in enumerate(zip(got, fires)):
        assert g == outcomes[index].trigger, \
            f"trigger {k} (request {index}): hardware {g}, model {outcomes[index].trigger}"
    assert len(got) == len(fires), f"hardware fired {len(got)} triggers, model {len(fires)}"
    for name in ("errors", "accesses", "tracked", "triggers"):
        assert regs[name] == model.counters[name], \
            f"{name}: hardware {regs[name]}, model {model.counters[name]}"
    for name, want in (("occupancy", model.occupancy),
                       ("peak_occupancy", model.peak_occupancy), ("status", model.status)):
        assert regs[name] == want, f"{name}: hardware {regs[name]:#x}, model {want:#x}"
    for (cycle, _), index in zip(triggers, fires):
        assert cycle - taken[index] >= TRIGGER_LATENCY, \
            f"request {index} taken at {taken[index]} fired at {cycle}"
    return fires
