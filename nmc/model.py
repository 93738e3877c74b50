"""Golden model of the near-bank unit (so far: the ALU), with numpy's arithmetic.

:func:`alu_reference` is what :class:`nmc.alu.NearBankALU` must compute for one beat;
:func:`same_result` compares two beats lane by lane, accepting any NaN for a NaN (the hardware
returns one canonical quiet NaN, numpy keeps a payload).
"""

import numpy as np

from hw.interfaces import ELEM_BYTES, ElemType, Op


__all__ = ["alu_reference", "same_result", "lane_dtype"]


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
            source = (a + b).astype(dt).tobytes()
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
