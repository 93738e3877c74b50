"""Golden model of the near-bank unit, with numpy's arithmetic.

:func:`alu_reference` is what :class:`nmc.alu.NearBankALU` must compute for one beat (numpy's
sums, with NaN lanes replaced by the hardware's canonical quiet NaN, since numpy keeps a
payload); :func:`same_result` compares two beats lane by lane, accepting any NaN for a NaN.
:class:`NMCModel` is the whole unit, cycle by cycle.
"""

import numpy as np

from hw.interfaces import ELEM_BYTES, ElemType, Op
from .config import WRITE_DELAY


__all__ = ["alu_reference", "same_result", "lane_dtype", "NMCModel"]


def lane_dtype(etype):
    import ml_dtypes
    return {ElemType.FP16: np.float16, ElemType.BF16: ml_dtypes.bfloat16,
            ElemType.FP32: np.float32, ElemType.INT32: np.int32}[ElemType(etype)]


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

    ``step(cmd)`` advances one cycle with ``cmd`` (a request dict) at the head of the input, or
    ``None``; it returns the action taken (``"pre"``, ``"act"``, ``"col"`` — the command was
    executed and left the input —, ``"err"`` — refused and left —, or ``None``).  Responses are
    appended to ``responses`` as ``(cycle valid on resp, response dict)`` assuming ``resp`` is
    always ready.  The rules are the RTL's, listed in its docstring; a command takes no action
    in its first cycle at the head (the RTL computes its flags then).
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

    def step(self, cmd):
        from .config import decode
        p, n, t, now = self.params, self.n, self.t, self.now
        action = None
        fresh, self.fresh = self.fresh, cmd is None
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
        if action in ("col", "err"):
            self.fresh = True
            if action == "err":
                self.counters["errors"] += 1
                self.status = 1
                response = {"data": 0, "error": 1}
            else:
                response = self._last_response
            response.update(tag=cmd["tag"], op=cmd["op"], stream=cmd["stream"])
            previous = self.responses[-1][0] if self.responses else -1
            self.responses.append((max(now + t.CL, previous + 1), response))
        self.now += 1
        return action

    def _execute(self, cmd, beat, g):
        p, t, now = self.params, self.t, self.now
        op = Op(cmd["op"])
        stream = "comm" if cmd["stream"] else "compute"
        kind = "row_conflicts" if self.head_conflict else "row_misses" if self.head_miss \
            else "row_hits"
        self.counters[f"{kind}_{stream}"] += 1
        self.head_conflict = self.head_miss = False
        self.bg_free[g] = now + (t.CCDWL if op == Op.UPDATE else t.CCD_L)
        self.any_free = now + t.CCD_S
        old = self.memory.get(beat, 0)
        if op == Op.READ:
            self.counters[f"reads_{stream}"] += 1
            self._last_response = {"data": old, "error": 0}
            return
        self.counters[f"{'updates' if op == Op.UPDATE else 'stores'}_{stream}"] += 1
        self.wtr_l[g], self.wtr_s = now + t.WTR_L, now + t.WTR_S
        self.writes = [(c, b) for c, b in self.writes if now - c < WRITE_DELAY - 1] + \
            [(now, beat)]
        result, error = alu_reference(p, old, cmd["data"], cmd["mask"], cmd["op"], cmd["etype"])
        if op == Op.UPDATE and ElemType(cmd["etype"]) not in self.n.elem_types:
            result, error = old, 1          # no adder of that type was built
        self.memory[beat] = result
        if error:
            self.counters["errors"] += 1
            self.status = 1
        self._last_response = {"data": 0, "error": error}
