"""Operand pairs for testing floating-point adders, drawn across every class of input.

:func:`operand_pairs` returns two arrays of raw bit patterns (``uint16``/``uint32``) in equal
shares of: uniformly random patterns; normal numbers with nearby exponents (where alignment and
rounding matter most); subnormals and zeros; infinities and NaNs against anything; values near
the overflow threshold; exact cancellations (``b = -a``); and same-exponent pairs whose
significands carry into the next binade.  :func:`reference_sum` is numpy's (or ml_dtypes')
addition of the same patterns.
"""

import numpy as np

from nmc.fpadd import BF16, FP16, FP32


__all__ = ["FORMATS", "operand_pairs", "reference_sum", "is_nan"]


def _numpy_types(fmt):
    """``(float type, raw type)`` of ``fmt``; ml_dtypes (a second's import) for bf16 only."""
    if fmt == BF16:
        import ml_dtypes
        return ml_dtypes.bfloat16, np.uint16
    return {FP16: (np.float16, np.uint16), FP32: (np.float32, np.uint32)}[fmt]


FORMATS = {"fp16": FP16, "bf16": BF16, "fp32": FP32}


def operand_pairs(fmt, n, seed=0):
    """``(a, b)``: ``n`` pairs of raw patterns of ``fmt``, across all classes."""
    _, ut = _numpy_types(fmt)
    rng = np.random.default_rng(seed)
    E, F = fmt.exp_bits, fmt.frac_bits
    exp_max = (1 << E) - 1

    def pattern(sign, exp, frac):
        return ((sign.astype(np.uint64) << (E + F)) | (exp.astype(np.uint64) << F) |
                frac.astype(np.uint64))

    def rand(lo, hi, k):
        return rng.integers(lo, hi, k, dtype=np.int64)

    classes = 7
    k = -(-n // classes)
    sign = lambda: rand(0, 2, k)
    frac = lambda: rand(0, 1 << F, k)
    a_parts, b_parts = [], []
    # 1. uniform bit patterns
    a_parts.append(rand(0, 1 << fmt.width, k)); b_parts.append(rand(0, 1 << fmt.width, k))
    # 2. normal numbers with exponents within a few of each other
    e = rand(1, exp_max, k)
    e2 = np.clip(e + rand(-(F + 4), F + 5, k), 1, exp_max - 1)
    a_parts.append(pattern(sign(), e, frac())); b_parts.append(pattern(sign(), e2, frac()))
    # 3. subnormals and zeros against small numbers
    a_parts.append(pattern(sign(), np.zeros(k, np.int64), frac() * rand(0, 2, k)))
    b_parts.append(pattern(sign(), rand(0, 3, k), frac()))
    # 4. infinities and NaNs against anything
    special = pattern(sign(), np.full(k, exp_max), frac() * rand(0, 2, k))
    a_parts.append(special); b_parts.append(np.where(rand(0, 2, k) == 1, special[::-1],
                                                     rand(0, 1 << fmt.width, k)))
    # 5. near overflow
    a_parts.append(pattern(sign(), np.full(k, exp_max - 1), frac()))
    b_parts.append(pattern(sign(), exp_max - 1 - rand(0, 3, k), frac()))
    # 6. exact cancellation
    x = rand(0, 1 << fmt.width, k)
    a_parts.append(x); b_parts.append(x ^ (1 << (E + F)))
    # 7. same exponent, same sign: the significands carry into the next binade
    e = rand(0, exp_max - 1, k)
    s = sign()
    a_parts.append(pattern(s, e, frac())); b_parts.append(pattern(s, e, frac()))
    a = np.concatenate(a_parts)[:n].astype(ut)
    b = np.concatenate(b_parts)[:n].astype(ut)
    order = rng.permutation(n)
    return a[order], b[order]


def reference_sum(fmt, a, b):
    """Raw patterns of ``a + b`` computed by numpy (``ml_dtypes`` for bf16)."""
    dt, ut = _numpy_types(fmt)
    with np.errstate(all="ignore"):
        return (a.view(dt) + b.view(dt)).view(ut)


def is_nan(fmt, patterns):
    patterns = np.asarray(patterns, dtype=np.uint64)
    exp = (patterns >> fmt.frac_bits) & ((1 << fmt.exp_bits) - 1)
    frac = patterns & ((1 << fmt.frac_bits) - 1)
    return (exp == (1 << fmt.exp_bits) - 1) & (frac != 0)
