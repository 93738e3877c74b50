"""Golden model of the L2 (:class:`l2.rtl.L2Cache`), request by request.

The L2 looks requests up strictly in the order it accepts them, and a miss's victim is always
the set's least recently used line (a miss whose victim is still being filled waits rather
than pick another).  So what it sends to memory, in order, what it answers, and its state are
functions of the request sequence alone, whatever the timing: :class:`L2Model` computes them
with a flat memory behind it.  Only two things depend on timing: whether a READ of a line
whose fill is still on its way counts as ``read_merged`` or ``read_hits`` (the model gives
their sum as ``read_hits``), and the stall counters.

Policies (``docs/l2.md``):

* an access inside a cached window (:class:`l2.config.Window`) is cached: a READ allocates on
  a miss and fills from memory; a STORE of a whole beat allocates without a fill (the
  write-allocate of a sectored L2: nothing of the old line is kept); a partial STORE merges
  into a line that is there and otherwise goes to memory (write-around); written lines are
  dirty and written back on eviction or flush;
* an ``UPDATE`` inside a cached window is refused (``error``, nothing written); outside the
  windows everything goes to memory unchanged;
* victim: the lowest invalid way among ``ways_used``, else the least recently used one; every
  access to a line makes it the most recently used;
* to memory, per request in order: a READ miss's fill, or a bypassed request; then, one cycle
  later in the hardware, the write-back of a dirty victim.
"""

import dataclasses

from hw.interfaces import Op, Stream
from nmc.model import alu_reference
from .config import L2Config, L2Params


__all__ = ["L2Model", "line_of"]


def line_of(params, addr):
    return addr >> params.beat_offset_bits


@dataclasses.dataclass
class _Way:
    valid: bool = False
    dirty: bool = False
    line: int = 0
    data: int = 0


class L2Model:
    """The L2 with ``memory`` behind it (``{byte address: beat}``, missing beats read 0).

    ``access(request)`` takes one request (a dict of :func:`hw.interfaces.mem_request_layout`
    fields) and returns its response (a dict of :func:`hw.interfaces.mem_response_layout`
    fields); ``flush()`` writes back and invalidates.  ``downstream`` lists every request sent
    to memory, in order; ``counters`` the statistics the registers hold."""

    def __init__(self, params, lparams: L2Params, config: L2Config = L2Config(), memory=None):
        self.params, self.lparams = params, lparams
        self.config = config.resolve(lparams)
        self.memory = dict(memory or {})
        self.full = (1 << params.beat_bytes) - 1
        self.sets = [[_Way() for _ in range(lparams.ways)] for _ in range(lparams.sets)]
        self.lru = [list(range(lparams.ways)) for _ in range(lparams.sets)]
        self.downstream = []
        self.counters = dict.fromkeys(
            ("requests", "read_hits", "read_misses", "store_hits", "store_allocs",
             "write_backs", "flush_write_backs", "bypass_reads", "bypass_writes", "refused"), 0)
        self.status = {"update_cached": 0}

    # --- state ---------------------------------------------------------------------------------

    @property
    def lines(self):
        return sum(w.valid for s in self.sets for w in s)

    @property
    def dirty_lines(self):
        return sum(w.valid and w.dirty for s in self.sets for w in s)

    def cached(self, addr):
        return any(addr in w for w in self.config.windows if w.size)

    def _index(self, line):
        return line & (self.config.sets_used - 1)

    def _touch(self, s, way):
        order = self.lru[s]
        order.remove(way)
        order.insert(0, way)

    def _victim(self, s):
        ways = self.sets[s]
        used = self.config.ways_used
        for w in range(used):
            if not ways[w].valid:
                return w
        return next(w for w in reversed(self.lru[s]) if w < used)

    # --- memory behind the L2 ------------------------------------------------------------------

    def _send(self, req):
        """A request to memory: applied to ``memory`` at once (memory answers in order);
        returns ``(data, error)``."""
        self.downstream.append(dict(req))
        addr = req["addr"]
        old = self.memory.get(addr, 0)
        if req["op"] == Op.READ.value:
            return old, 0
        value, error = alu_reference(self.params, old, req["data"], req["mask"], req["op"],
                                     req["etype"])
        if not error:
            self.memory[addr] = value
        return 0, error

    def _write_back(self, line, data):
        self._send(_request(addr=line << self.params.beat_offset_bits, data=data,
                            mask=self.full, op=Op.STORE.value))

    # --- requests ------------------------------------------------------------------------------

    def access(self, req):
        p = self.params
        self.counters["requests"] += 1
        op, addr = req["op"], req["addr"]
        resp = {"data": 0, "tag": req.get("tag", 0), "op": op,
                "stream": req.get("stream", Stream.COMPUTE.value), "error": 0}
        if not self.cached(addr):
            resp["data"], resp["error"] = self._send(req)
            self.counters["bypass_reads" if op == Op.READ.value else "bypass_writes"] += 1
            return resp
        if op == Op.UPDATE.value:
            self.counters["refused"] += 1
            self.status["update_cached"] = 1
            resp["error"] = 1
            return resp
        line = line_of(p, addr)
        s = self._index(line)
        ways = self.sets[s]
        hit = next((w for w in range(self.config.ways_used)
                    if ways[w].valid and ways[w].line == line), None)
        if op == Op.READ.value:
            if hit is not None:
                self.counters["read_hits"] += 1
                self._touch(s, hit)
                resp["data"] = ways[hit].data
                return resp
            self.counters["read_misses"] += 1
            victim = self._victim(s)
            old = ways[victim]
            data, resp["error"] = self._send(dict(req, mask=self.full))
            if old.valid and old.dirty:
                self.counters["write_backs"] += 1
                self._write_back(old.line, old.data)
            ways[victim] = _Way(True, False, line, data)
            self._touch(s, victim)
            resp["data"] = data
            return resp
        # STORE
        mask = req["mask"]
        if hit is not None:
            self.counters["store_hits"] += 1
            way = ways[hit]
            way.data, _ = alu_reference(p, way.data, req["data"], mask, Op.STORE.value, 0)
            way.dirty = True
            self._touch(s, hit)
            return resp
        if mask != self.full:
            self.counters["bypass_writes"] += 1
            resp["data"], resp["error"] = self._send(req)
            return resp
        self.counters["store_allocs"] += 1
        victim = self._victim(s)
        old = ways[victim]
        if old.valid and old.dirty:
            self.counters["write_backs"] += 1
            self._write_back(old.line, old.data)
        ways[victim] = _Way(True, True, line, req["data"])
        self._touch(s, victim)
        return resp

    def flush(self):
        """Write back every dirty line (set by set, way by way) and invalidate them all."""
        for s in range(self.config.sets_used):
            for w, way in enumerate(self.sets[s]):
                if way.valid and way.dirty:
                    self.counters["flush_write_backs"] += 1
                    self._write_back(way.line, way.data)
            self.sets[s] = [_Way() for _ in range(self.lparams.ways)]
            self.lru[s] = list(range(self.lparams.ways))


def _request(**fields):
    out = {"addr": 0, "data": 0, "mask": 0, "op": 0, "stream": 0, "source": 0, "wg_id": 0,
           "wf_id": 0, "tracked": 0, "etype": 0, "tag": 0}
    out.update(fields)
    return out
