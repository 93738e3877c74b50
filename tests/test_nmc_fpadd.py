# amaranth: UnusedElaboratable=no
"""The near-bank ALU's IEEE-754 adder, bit for bit against numpy (ml_dtypes for bf16).

Groundwork of the nmc/ issue: one lane of each format under Amaranth's simulator, operands drawn
across every class (:mod:`sim.blocks.nmc.operands`).  Every non-NaN result must equal numpy's bit
pattern, signed zeros included; a NaN result must be a NaN.
"""

import numpy as np
import pytest

from hw.testing import run_testbench
from nmc.fpadd import FPAdd, leading_zeros
from sim.blocks.nmc.operands import FORMATS, is_nan, operand_pairs, reference_sum


def check_fpadd(fmt, a, b, want=None, latency=0, hold=0.0, seed=0):
    """``a + b`` through ``FPAdd(fmt, latency)``: one pair a cycle, ``en`` low with probability
    ``hold`` (the pipeline must then keep its contents), each sum read on ``s`` once
    ``latency`` enabled edges have taken it through the pipeline."""
    want = reference_sum(fmt, a, b) if want is None else want
    dut = FPAdd(fmt, latency)
    got = np.zeros_like(want)
    rng = np.random.default_rng(seed)

    async def comb_bench(ctx):
        for i in range(len(a)):
            ctx.set(dut.a.as_value(), int(a[i]))
            ctx.set(dut.b.as_value(), int(b[i]))
            got[i] = ctx.get(dut.s.as_value())

    async def clocked_bench(ctx):
        captured, i = [], 0
        while len(captured) < len(a) + latency:
            en = not (hold and rng.random() < hold)
            if i < len(a):
                ctx.set(dut.a.as_value(), int(a[i]))
                ctx.set(dut.b.as_value(), int(b[i]))
            ctx.set(dut.en, en)
            await ctx.tick()
            if en:
                captured.append(i)
                i += 1
                # the last stage's register took the pair of latency enabled edges ago
                if len(captured) >= latency and captured[-latency] < len(a):
                    got[captured[-latency]] = ctx.get(dut.s.as_value())

    if latency:
        run_testbench(dut, clocked_bench)
    else:
        run_testbench(dut, comb_bench, clock=None)
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
    check_fpadd(fmt, a.astype(dtype), b.astype(dtype), latency=4, hold=0.2)


@pytest.mark.parametrize("latency", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_pipelined_adder_one_sum_a_cycle(name, latency, t3_options):
    # the NMC's ALU uses latency 5 (nmc.alu.FP_LATENCY); the pipeline holds whatever it has while ``en`` is low
    fmt = FORMATS[name]
    a, b = operand_pairs(fmt, 20_000 if t3_options.soak else 2_000, seed=t3_options.seed + 1)
    check_fpadd(fmt, a, b, latency=latency, hold=0.3, seed=latency)


def test_pipelined_adder_latency_is_checked():
    with pytest.raises(ValueError, match=r"^latency must be one of \(0, 1, 2, 3, 4, 5\), not 6$"):
        FPAdd(FORMATS["fp16"], 6)


def test_the_check_can_fail():
    # against the sums of other pairs, the comparison must object
    fmt = FORMATS["fp16"]
    a, b = operand_pairs(fmt, 200, seed=5)
    with pytest.raises(AssertionError, match=r"^(0x[0-9a-f]+ \+ 0x[0-9a-f]+: hardware "
                                             r"0x[0-9a-f]+, numpy 0x[0-9a-f]+(; )?)+|^NaN where"):
        check_fpadd(fmt, a, b, want=reference_sum(fmt, a, np.roll(b, 1)))


@pytest.mark.parametrize("of_zero", [True, False])
@pytest.mark.parametrize("width", [1, 2, 3, 5, 8, 12, 14, 15, 27, 28])
def test_leading_zero_count(width, of_zero):
    # the adder's normalising count (a tree of pairs), against Python's bit_length: every
    # value up to 12 bits; above, zero, every power of two, every all-ones tail and random
    # values with their top bit at every position
    from amaranth import Elaboratable, Module, Signal

    class Counter(Elaboratable):
        def __init__(self):
            self.x, self.n = Signal(width), Signal(range(width + 1))

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.n.eq(leading_zeros(m, self.x, of_zero=of_zero))
            return m

    rng = np.random.default_rng(width)
    if width <= 12:
        values = range(1 << width)
    else:
        values = [0] + [1 << k for k in range(width)] + [(1 << k) - 1 for k in range(width)] + \
            [int(rng.integers(1 << k, 1 << (k + 1))) for k in range(width) for _ in range(20)]
    dut, wrong = Counter(), []

    async def bench(ctx):
        for v in values if of_zero else [v for v in values if v]:   # a zero's: any
            ctx.set(dut.x, v)
            if ctx.get(dut.n) != width - v.bit_length():
                wrong.append((v, ctx.get(dut.n)))

    run_testbench(dut, bench, clock=None)
    assert not wrong, f"{width} bits: {wrong[:5]} (value, count)"
