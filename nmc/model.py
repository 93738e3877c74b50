"""Golden model of the near-bank unit, with numpy's arithmetic.

:func:`alu_reference` is what :class:`nmc.alu.NearBankALU` must compute for one beat (numpy's
sums, with NaN lanes replaced by the hardware's canonical quiet NaN, since numpy keeps a
payload); :func:`same_result` compares two beats lane by lane, accepting any NaN for a NaN.
:class:`NMCModel` is the whole unit, cycle by cycle.
"""

import numpy as np

from hw.interfaces import ELEM_BYTES, ElemType, Op
from .config import WRITE_DELAY


__all__ = ["alu_reference", "same_result", "lane_dtype", "NMCModel", "FRFCFSModel"]


def lane_dtype(etype):
    """numpy's type of a lane of ``etype``.  ml_dtypes is imported for bf16 only: its import
    registers its casts with numpy one by one, over a second of every process that needs it."""
    etype = ElemType(etype)
    if etype == ElemType.BF16:
        import ml_dtypes
        return ml_dtypes.bfloat16
    return {ElemType.FP16: np.float16, ElemType.FP32: np.float32,
            ElemType.INT32: np.int32}[etype]


def alu_reference(params, old, data, mask, op, etype):
    """``(result, error)`` for one beat (integers, little-endian lanes)."""
    op, etype = Op(op), ElemType(etype)
    if op == Op.READ:
        return old, 0
    n = params.beat_bytes
    ebytes = ELEM_BYTES[etype]
    if op == Op.UPDATE:
        group = (1 << ebytes) - 1
        if any(((mask >> k) & group) not in (0, group) for k in range(0, n, ebytes)):
            return old, 1
        dt = lane_dtype(etype)
        a = np.frombuffer(old.to_bytes(n, "little"), dtype=dt)
        b = np.frombuffer(data.to_bytes(n, "little"), dtype=dt)
        with np.errstate(all="ignore"):
            total = (a + b).astype(dt)
        if etype != ElemType.INT32:
            # the hardware's NaN is one canonical quiet NaN; numpy keeps a payload
            from .fpadd import BF16, FP16, FP32
            fmt = {ElemType.FP16: FP16, ElemType.BF16: BF16, ElemType.FP32: FP32}[etype]
            raw = total.view(np.uint16 if ebytes == 2 else np.uint32).copy()
            raw[np.isnan(total.astype(np.float32))] = fmt.qnan
            total = raw
        source = total.tobytes()
    else:
        source = data.to_bytes(n, "little")
    old_bytes = old.to_bytes(n, "little")
    merged = bytes(source[k] if (mask >> k) & 1 else old_bytes[k] for k in range(n))
    return int.from_bytes(merged, "little"), 0


def same_result(params, etype, got, want):
    """Beats equal lane by lane, a NaN lane matching any NaN."""
    if got == want:
        return True
    etype = ElemType(etype)
    if etype == ElemType.INT32:
        return False
    n = params.beat_bytes
    dt = lane_dtype(etype)
    g = np.frombuffer(got.to_bytes(n, "little"), dtype=dt)
    w = np.frombuffer(want.to_bytes(n, "little"), dtype=dt)
    gi = np.frombuffer(got.to_bytes(n, "little"), dtype=np.uint8)
    wi = np.frombuffer(want.to_bytes(n, "little"), dtype=np.uint8)
    eb = ELEM_BYTES[etype]
    for k in range(len(g)):
        lane_equal = bytes(gi[k * eb:(k + 1) * eb]) == bytes(wi[k * eb:(k + 1) * eb])
        both_nan = bool(np.isnan(g[k].astype(np.float32)) and np.isnan(w[k].astype(np.float32)))
        if not (lane_equal or both_nan):
            return False
    return True


class NMCModel:
    """Cycle-level model of :class:`nmc.rtl.NMCUnit`: values (numpy arithmetic) and timing.

    ``step(cmd, ahead=None)`` advances one cycle with ``cmd`` (a request dict) at the head of
    the input, or ``None``, and with a bank-parallel scheduler ``ahead``, the request dict
    announced on the ``ahead`` port in this cycle (taken: offer one only while
    :attr:`ahead_ready`); it returns the head's action (``"pre"``, ``"act"`` — in-order only —,
    ``"col"`` — the command was executed and left the input —, ``"err"`` — refused and left —,
    or ``None``).  Responses are appended to ``responses`` as ``(cycle valid on resp, response
    dict)`` assuming ``resp`` is always ready.  The rules are the RTL's, listed in its
    docstring; a command takes no action in its first cycle at the head (the RTL computes its
    flags then).
    """

    def __init__(self, params, nparams):
        self.params, self.n = params, nparams
        t = nparams.timing
        self.t = t
        nb = nparams.bank_groups * nparams.banks
        self.open = [False] * nb
        self.row = [0] * nb
        self.col_ok = [0] * nb
        self.ras_ok = [0] * nb
        self.act_ok = [0] * nb
        self.bg_free = [0] * nparams.bank_groups
        self.wtr_l = [0] * nparams.bank_groups
        self.any_free = 0
        self.wtr_s = 0
        self.writes = []                     # (cycle, beat) of recent write column commands
        self.head_conflict = self.head_miss = False
        # the bank-parallel scheduler: the rows announced per bank, oldest first; the kind of
        # row command each bank's oldest command needed; the timers of its row commands
        self.bank_parallel = nparams.scheduler == "bank-parallel"
        self.announced = [[] for _ in range(nb)]
        self.bank_conflict = [False] * nb
        self.bank_miss = [False] * nb
        self.wtp = [0] * nb
        self.rrd = 0
        self.now = 0
        self.fresh = True                    # the head command is new at the head this cycle
        self.memory = {}
        self.responses = []
        self.counters = {"errors": 0, "busy": 0}
        from .config import COUNTERS
        for name in COUNTERS:
            for stream in ("compute", "comm"):
                self.counters[f"{name}_{stream}"] = 0
        self.status = 0

    def _outstanding(self):
        """Responses issued and not yet taken from ``resp`` (completion cycles ascend)."""
        count = 0
        for cycle, _ in reversed(self.responses):
            if cycle < self.now:
                break
            count += 1
        return count

    @property
    def ahead_ready(self):
        """The ``ahead`` port takes an announcement in this cycle."""
        return sum(map(len, self.announced)) < self.n.ahead_depth

    def _bank_row(self, addr):
        """``(flat bank, row)`` of ``addr`` as the RTL decodes it, a bad address included (its
        beat's bits below the capacity)."""
        from .config import decode
        n = self.n
        g, b, row = decode(n, (addr >> self.params.beat_offset_bits) % n.capacity_beats)
        return b * n.bank_groups + g, row

    def _row_commands(self, cmd):
        """The bank-parallel scheduler's row command of this cycle, from the state at its
        start: ``(bank, "pre" | "act", the row it is for)`` or None."""
        now, nb = self.now, len(self.open)
        head = self._bank_row(cmd["addr"]) if cmd is not None else (None, None)
        cand = []
        for b in range(nb):
            if not self.announced[b] and head[0] != b:
                continue
            want = self.announced[b][0] if self.announced[b] else head[1]
            if self.open[b]:
                if self.row[b] != want and now >= self.ras_ok[b] and now >= self.wtp[b]:
                    cand.append(b)
            elif now >= self.act_ok[b] and now >= self.rrd:
                cand.append(b)
        if not cand:
            return None
        b = head[0] if head[0] in cand else cand[0]
        return b, ("pre" if self.open[b] else "act"), \
            (self.announced[b][0] if self.announced[b] else head[1])

    def step(self, cmd, ahead=None):
        from .config import decode
        p, n, t, now = self.params, self.n, self.t, self.now
        action = None
        fresh, self.fresh = self.fresh, cmd is None
        row_command = self._row_commands(cmd) if self.bank_parallel else None
        if ahead is not None and not self.bank_parallel:
            raise ValueError("an in-order unit has no ahead port")
        if cmd is not None:
            self.counters["busy"] += 1
        if cmd is not None and not fresh:
            room = self._outstanding() < n.resp_depth
            beat = cmd["addr"] >> p.beat_offset_bits
            bad = cmd["addr"] % p.beat_bytes != 0 or beat >= n.capacity_beats
            if bad:
                action = "err" if room else None
            else:
                g, b, row = decode(n, beat)
                k = b * n.bank_groups + g
                if self.open[k] and self.row[k] == row:
                    reading = cmd["op"] == Op.READ.value
                    ok = (now >= self.col_ok[k] and now >= self.bg_free[g]
                          and now >= self.any_free
                          and (not reading or (now >= self.wtr_l[g] and now >= self.wtr_s))
                          and not any(now - c < WRITE_DELAY and b == beat
                                      for c, b in self.writes)
                          and room)
                    action = "col" if ok else None
                elif self.bank_parallel:
                    action = None
                elif self.open[k]:
                    action = "pre" if now >= self.ras_ok[k] else None
                else:
                    action = "act" if now >= self.act_ok[k] else None
                if action == "pre":
                    self.open[k] = False
                    self.act_ok[k] = now + t.RP
                    self.head_conflict = True
                elif action == "act":
                    self.open[k], self.row[k] = True, row
                    self.col_ok[k], self.ras_ok[k] = now + t.RCD, now + t.RAS
                    self.head_miss = not self.head_conflict
                elif action == "col":
                    self._execute(cmd, beat, g)
        if row_command is not None:
            b, kind, want = row_command
            if kind == "pre":
                self.open[b] = False
                self.act_ok[b] = now + t.RP
                self.bank_conflict[b] = True
            else:
                self.open[b], self.row[b] = True, want
                self.col_ok[b], self.ras_ok[b] = now + t.RCD, now + t.RAS
                self.rrd = now + t.RRD
                self.bank_miss[b] = True
        if self.bank_parallel and action in ("col", "err"):
            k = self._bank_row(cmd["addr"])[0]
            if self.announced[k]:
                self.announced[k].pop(0)
            else:
                self.status |= 2                    # unannounced
        if ahead is not None:
            if not self.ahead_ready:
                raise ValueError("an announcement offered while the ahead port is full")
            b, row = self._bank_row(ahead["addr"])
            self.announced[b].append(row)
        if action in ("col", "err"):
            self.fresh = True
            if action == "err":
                self.counters["errors"] += 1
                self.status |= 1
                response = {"data": 0, "error": 1}
            else:
                response = self._last_response
            response.update(tag=cmd["tag"], op=cmd["op"], stream=cmd["stream"])
            previous = self.responses[-1][0] if self.responses else -1
            self.responses.append((max(now + t.CL, previous + 1), response))
        self.now += 1
        return action

    def _execute(self, cmd, beat, g):
        k = self._bank_row(cmd["addr"])[0]
        if self.bank_parallel:
            conflict, miss = self.bank_conflict[k], self.bank_miss[k]
            self.bank_conflict[k] = self.bank_miss[k] = False
        else:
            conflict, miss = self.head_conflict, self.head_miss
            self.head_conflict = self.head_miss = False
        self._last_response = _column(self, cmd, beat, g, k, conflict, miss)


def _column(model, cmd, beat, g, k, conflict, miss):
    """A column command's effects on ``model`` (either model): its counters (a conflict or a
    miss by the row commands taken for it, else a hit), its bank group's, bank's and the
    channel's timers, the storage; returns its response's ``data`` and ``error``."""
    p, t, now = model.params, model.t, model.now
    op = Op(cmd["op"])
    stream = "comm" if cmd["stream"] else "compute"
    kind = "row_conflicts" if conflict else "row_misses" if miss else "row_hits"
    model.counters[f"{kind}_{stream}"] += 1
    model.bg_free[g] = now + (t.CCDWL if op == Op.UPDATE else t.CCD_L)
    model.any_free = now + t.CCD_S
    old = model.memory.get(beat, 0)
    if op == Op.READ:
        model.counters[f"reads_{stream}"] += 1
        return {"data": old, "error": 0}
    model.counters[f"{'updates' if op == Op.UPDATE else 'stores'}_{stream}"] += 1
    model.wtr_l[g], model.wtr_s, model.wtp[k] = now + t.WTR_L, now + t.WTR_S, now + t.WTP
    model.writes = [(c, b) for c, b in model.writes if now - c < WRITE_DELAY - 1] + \
        [(now, beat)]
    result, error = alu_reference(p, old, cmd["data"], cmd["mask"], cmd["op"], cmd["etype"])
    if op == Op.UPDATE and ElemType(cmd["etype"]) not in model.n.elem_types:
        result, error = old, 1          # no adder of that type was built
    model.memory[beat] = result
    if error:
        model.counters["errors"] += 1
        model.status |= 1
    return {"data": 0, "error": error}


class FRFCFSModel:
    """Cycle-level model of :class:`nmc.frfcfs.FRFCFSUnit` (values and timing).

    ``step(cmd)`` advances one cycle with ``cmd`` (a request dict, or ``None``) offered on
    ``cmd`` and returns whether the unit took it.  ``responses`` holds ``(cycle valid on resp,
    response dict)`` in the order taken, assuming ``resp`` is always ready; ``issued`` the
    cycle of each command's column command (or refusal), in the order taken.  The rules are
    the RTL's, listed in its docstring; every decision of a cycle is made from the state at
    its start.
    """

    def __init__(self, params, nparams, bypass_cap=None):
        from .config import BYPASS_CAP, COUNTERS
        self.params, self.n, self.t = params, nparams, nparams.timing
        self.cap = BYPASS_CAP if bypass_cap is None else bypass_cap
        nb = nparams.bank_groups * nparams.banks
        self.open = [False] * nb
        self.row = [0] * nb
        self.col_ok, self.ras_ok, self.act_ok, self.wtp = ([0] * nb for _ in range(4))
        self.bg_free = [0] * nparams.bank_groups
        self.wtr_l = [0] * nparams.bank_groups
        self.any_free = self.wtr_s = self.rrd = 0
        self.writes = []                        # (cycle, beat) of write column commands
        self.queue = []                         # the waiting commands, oldest first
        self.taken = 0
        self.passed = 0
        self.now = 0
        self.memory = {}
        self.results = {}                       # arrival index -> response dict
        self.issued = {}                        # arrival index -> cycle of its column command
        self.responses = []
        self.counters = {"errors": 0, "busy": 0, "capped": 0}
        for name in COUNTERS:
            for stream in ("compute", "comm"):
                self.counters[f"{name}_{stream}"] = 0
        self.status = 0

    def _held(self):
        """Commands taken and not yet answered at the start of this cycle."""
        self._flush()
        return self.taken - sum(1 for c, _ in self.responses if c < self.now)

    def _flush(self):
        """Append the responses whose cycle is now known (every earlier one issued)."""
        while len(self.responses) in self.issued:
            k = len(self.responses)
            previous = self.responses[-1][0] if self.responses else -1
            self.responses.append((max(self.issued[k] + self.t.CL, previous + 1),
                                   self.results.pop(k)))

    def _hit(self, e):
        return self.open[e["bank"]] and self.row[e["bank"]] == e["row"]

    def _column_ready(self, e, now):
        if e["bad"]:
            return True
        if not self._hit(e):
            return False
        if any(o["beat"] == e["beat"] and not o["bad"] for o in self.queue
               if o["index"] < e["index"]):
            return False
        if any(now - c < WRITE_DELAY and b == e["beat"] for c, b in self.writes):
            return False
        g, k = e["group"], e["bank"]
        return (now >= self.col_ok[k] and now >= self.bg_free[g] and now >= self.any_free and
                (e["op"] != Op.READ or (now >= self.wtr_l[g] and now >= self.wtr_s)))

    def step(self, cmd):
        from .config import decode
        p, n, t, now = self.params, self.n, self.t, self.now
        if self.queue:
            self.counters["busy"] += 1
        capped = self.passed == self.cap
        oldest = self.queue[0] if self.queue else None
        candidates = [oldest] if capped and oldest else self.queue
        col = next((e for e in candidates if self._column_ready(e, now)), None)
        queued_hit = {e["bank"] for e in self.queue if not e["bad"] and self._hit(e)}
        row_cmd = None
        for e in candidates:
            if e["bad"] or self._hit(e):
                continue
            k = e["bank"]
            if self.open[k]:
                if now >= self.ras_ok[k] and now >= self.wtp[k] and \
                        (capped or k not in queued_hit):
                    row_cmd = (e, "pre")
                    break
            elif now >= self.act_ok[k] and now >= self.rrd:
                row_cmd = (e, "act")
                break
        # the command offered now, with its bank's row after this cycle's row command
        took = cmd is not None and self._held() < n.resp_depth
        # effects: the row command, the column command, the arrival
        if row_cmd is not None:
            e, kind = row_cmd
            k = e["bank"]
            if kind == "pre":
                self.open[k] = False
                self.act_ok[k] = now + t.RP
                e["conflict"] = True
            else:
                self.open[k], self.row[k] = True, e["row"]
                self.col_ok[k], self.ras_ok[k], self.rrd = now + t.RCD, now + t.RAS, now + t.RRD
                e["miss"] = True
        if col is not None:
            self.queue.remove(col)
            if col is oldest:
                self.passed = 0
            else:
                self.passed += 1
                if self.passed == self.cap:
                    self.counters["capped"] += 1
            self.issued[col["index"]] = now
            if col["bad"]:
                self.counters["errors"] += 1
                self.status |= 1
                response = {"data": 0, "error": 1}
            else:
                response = self._execute(col)
            response.update(tag=col["cmd"]["tag"], op=col["cmd"]["op"],
                            stream=col["cmd"]["stream"])
            self.results[col["index"]] = response
        if took:
            beat = cmd["addr"] >> p.beat_offset_bits
            bad = cmd["addr"] % p.beat_bytes != 0 or beat >= n.capacity_beats
            g, b, row = decode(n, beat % n.capacity_beats)
            self.queue.append({"index": self.taken, "cmd": cmd, "op": Op(cmd["op"]),
                               "beat": beat % n.capacity_beats, "bad": bad, "group": g,
                               "bank": b * n.bank_groups + g, "row": row,
                               "conflict": False, "miss": False})
            self.taken += 1
        self.now += 1
        self._flush()
        return took

    def _execute(self, e):
        return _column(self, e["cmd"], e["beat"], e["group"], e["bank"], e["conflict"],
                       e["miss"])
