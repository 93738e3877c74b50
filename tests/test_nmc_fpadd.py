"""The near-bank ALU's IEEE-754 adder, bit for bit against numpy (ml_dtypes for bf16).

Groundwork of the nmc/ issue: one lane of each format under Amaranth's simulator, operands drawn
across every class (:mod:`sim.blocks.nmc.operands`).  Every non-NaN result must equal numpy's bit
pattern, signed zeros included; a NaN result must be a NaN.
"""

import numpy as np
import pytest

from hw.testing import run_testbench
from nmc.fpadd import FPAdd
from sim.blocks.nmc.operands import FORMATS, is_nan, operand_pairs, reference_sum


def check_fpadd(fmt, a, b, want=None):
    want = reference_sum(fmt, a, b) if want is None else want
    dut = FPAdd(fmt)
    got = np.zeros_like(want)

    async def bench(ctx):
        for i in range(len(a)):
            ctx.set(dut.a.as_value(), int(a[i]))
            ctx.set(dut.b.as_value(), int(b[i]))
            got[i] = ctx.get(dut.s.as_value())

    run_testbench(dut, bench, clock=None)
    want_nan = is_nan(fmt, want)
    assert np.array_equal(is_nan(fmt, got), want_nan), "NaN where numpy has none, or missed"
    wrong = np.flatnonzero(~want_nan & (got != want))
    assert wrong.size == 0, "; ".join(
        f"{a[i]:#x} + {b[i]:#x}: hardware {got[i]:#x}, numpy {want[i]:#x}" for i in wrong[:5])


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_random_operands_across_classes(name, t3_options):
    fmt = FORMATS[name]
    n = 200_000 if t3_options.soak else 14_000
    a, b = operand_pairs(fmt, n, seed=t3_options.seed)
    check_fpadd(fmt, a, b)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_edge_values(name):
    fmt = FORMATS[name]
    E, F = fmt.exp_bits, fmt.frac_bits
    sign = 1 << (E + F)
    inf = ((1 << E) - 1) << F
    values = [0, sign, 1, sign | 1, (1 << F) - 1, 1 << F, inf - 1, inf, sign | inf,
              inf | 1, fmt.qnan, sign | (1 << F) | 1, (1 << (E + F - 1)),
              ((1 << E) - 2) << F | ((1 << F) - 1)]      # largest finite
    a = np.array([x for x in values for _ in values], dtype=np.uint64)
    b = np.array([y for _ in values for y in values], dtype=np.uint64)
    dtype = np.uint16 if fmt.width == 16 else np.uint32
    check_fpadd(fmt, a.astype(dtype), b.astype(dtype))


def test_the_check_can_fail():
    # against the sums of other pairs, the comparison must object
    fmt = FORMATS["fp16"]
    a, b = operand_pairs(fmt, 200, seed=5)
    with pytest.raises(AssertionError, match=r"^(0x[0-9a-f]+ \+ 0x[0-9a-f]+: hardware "
                                             r"0x[0-9a-f]+, numpy 0x[0-9a-f]+(; )?)+|^NaN where"):
        check_fpadd(fmt, a, b, want=reference_sum(fmt, a, np.roll(b, 1)))
