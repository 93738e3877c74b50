"""IEEE-754 addition for the near-bank ALU lanes: fp16, bf16 and fp32, round to nearest even.

:func:`float_layout` describes a format as a ``data.StructLayout`` in the style of Amaranth's own
IEEE-754 example (``fraction``, ``exponent``, ``sign``, least significant first).
:class:`FPAdd` adds two values of one format, combinationally or in a pipeline of up to
six stages (order by exponent; align, beside the close path's difference; add and count
leading zeros; normalise; round; the registered result):
subnormal inputs and outputs, signed zeros, infinities and NaN are handled; every result that
is not a NaN is the correctly
rounded sum (bit for bit what numpy's ``float16``/``float32`` addition and ``ml_dtypes``'
``bfloat16`` addition give), and a NaN input or ``inf - inf`` gives the quiet NaN
``0 11..1 10..0``.

The algorithm is the textbook one with guard, round and sticky bits and two paths: align the
operand of the smaller exponent (bits shifted out fold into the sticky bit), add or subtract
magnitudes (a difference of operands at most one exponent apart, the close path, is taken
apart, both ways at once), renormalise (one bit
right after a carry; left by the leading-zero count after a cancellation, but never below the
smallest exponent, which yields subnormals), round to nearest even, and saturate to infinity.
"""

from amaranth import C, Cat, Const, Module, Mux, Signal, Elaboratable
from amaranth.lib import data


__all__ = ["FloatFormat", "FP16", "BF16", "FP32", "float_layout", "FPAdd"]


class FloatFormat:
    """An IEEE-754 binary format: ``exp_bits`` exponent bits, ``frac_bits`` fraction bits."""

    def __init__(self, name, exp_bits, frac_bits):
        self.name = name
        self.exp_bits = exp_bits
        self.frac_bits = frac_bits

    @property
    def width(self):
        return 1 + self.exp_bits + self.frac_bits

    @property
    def qnan(self):
        """The quiet NaN the adder produces: sign 0, exponent all ones, fraction MSB set."""
        return ((1 << self.exp_bits) - 1) << self.frac_bits | 1 << (self.frac_bits - 1)

    def __repr__(self):
        return f"FloatFormat({self.name})"


FP16 = FloatFormat("fp16", 5, 10)
BF16 = FloatFormat("bf16", 8, 7)
FP32 = FloatFormat("fp32", 8, 23)


def float_layout(fmt: FloatFormat):
    return data.StructLayout({
        "fraction": fmt.frac_bits,
        "exponent": fmt.exp_bits,
        "sign": 1,
    })


def leading_zeros(m, value, *, of_zero=True):
    """The number of leading zeros of ``value`` (``len(value)`` when it is zero; with
    ``of_zero`` False, any count then, for a caller that knows a zero otherwise: the zero
    test and its select, a wide AND, are left out), counted by a
    tree: each pair of bits says whether it is zero and, if not, its count (one bit); two
    halves combine into whether both are zero and the count (the upper half's count, or, when
    the upper half is zero, its width plus the lower half's), one 2:1 select per level.  The
    depth is ``log2(width)`` small steps; counting by shifting out zero halves in turn (the
    previous form) put a wide zero test and a shift at every level, one after the other, and
    was most of the adder's add stage on an FPGA."""
    width = len(value)
    stages = max(1, (width - 1).bit_length())
    size = 1 << stages
    v = Signal(size, name="lzc_in")
    m.d.comb += v.eq(Cat(Const(0, size - width), value))     # zeros below: count unchanged
    # (zero, count) of each pair of bits, most significant pair first
    nodes = []
    for k in reversed(range(0, size, 2)):
        zero = Signal(name=f"lzc_z2_{k}")
        m.d.comb += zero.eq(~v[k + 1] & ~v[k])
        nodes.append((zero, ~v[k + 1]))
    level = 2
    while len(nodes) > 1:
        level *= 2
        up = []
        for i in range(0, len(nodes), 2):
            (z_hi, c_hi), (z_lo, c_lo) = nodes[i], nodes[i + 1]
            zero = Signal(name=f"lzc_z{level}_{i}")
            count = Signal(len(c_hi) + 1, name=f"lzc_c{level}_{i}")
            m.d.comb += [zero.eq(z_hi & z_lo),
                         count.eq(Mux(z_hi, Cat(c_lo, C(1, 1)), Cat(c_hi, C(0, 1))))]
            up.append((zero, count))
        nodes = up
    count = nodes[0][1]
    return Mux(value == 0, width, count) if of_zero else count


class FPAdd(Elaboratable):
    """``s = a + b`` in ``fmt``, combinational or pipelined.

    Parameters
    ----------
    fmt : FloatFormat
    latency : int
        Pipeline registers inside the adder: 0 (combinational), 1 (after the magnitude
        add and the leading-zero count), 2 (also after the alignment shift), 3 (also after
        the normalising shift, before the rounding), 4 (also after the magnitude compare
        and swap, before the alignment shift) or 5 (also after the rounding and the choice
        of special results: ``s`` comes straight from a register).  ``s`` is the sum
        of the ``a`` and ``b`` presented ``latency`` cycles (of ``en`` high) earlier.

    Attributes
    ----------
    a, b : Signal(float_layout(fmt)), in
    en : Signal, in
        The pipeline registers load when ``en`` is high (default high); the adder then holds.
    s : Signal(float_layout(fmt)), out
    """

    LATENCIES = (0, 1, 2, 3, 4, 5)

    def __init__(self, fmt: FloatFormat, latency: int = 0):
        if latency not in self.LATENCIES:
            raise ValueError(f"latency must be one of {self.LATENCIES}, not {latency!r}")
        self.fmt = fmt
        self.latency = latency
        layout = float_layout(fmt)
        self.a = Signal(layout)
        self.b = Signal(layout)
        self.en = Signal(init=1)
        self.s = Signal(layout)

    def elaborate(self, platform):
        m = Module()
        fmt = self.fmt
        E, F = fmt.exp_bits, fmt.frac_bits
        exp_max = (1 << E) - 1
        W = F + 4                      # hidden bit + fraction + guard, round, sticky

        def cut(after, **values):
            """The values, through a pipeline register if the adder has one ``after`` here."""
            if self.latency < {"add": 1, "align": 2, "normalise": 3, "swap": 4, "result": 5}[after]:
                return values.values()
            out = []
            for name, value in values.items():
                reg = Signal.like(value, name=f"{after}_{name}") if isinstance(value, Signal) \
                    else Signal(len(value), name=f"{after}_{name}")
                with m.If(self.en):
                    m.d.sync += reg.eq(value)
                out.append(reg)
            return out

        a, b = self.a, self.b

        # --- classify: the special results are settled here --------------------------------
        def special(x):
            return x.exponent == exp_max

        a_nan = special(a) & (a.fraction != 0)
        b_nan = special(b) & (b.fraction != 0)
        a_inf = special(a) & (a.fraction == 0)
        b_inf = special(b) & (b.fraction == 0)
        nan = Signal()
        inf = Signal()
        inf_sign = Signal()
        zero_sign = Signal()
        m.d.comb += [
            nan.eq(a_nan | b_nan | (a_inf & b_inf & (a.sign != b.sign))),
            inf.eq(a_inf | b_inf),
            inf_sign.eq(Mux(a_inf, a.sign, b.sign)),
            zero_sign.eq(a.sign & b.sign),   # an exact zero sum: -0 only for (-0) + (-0)
        ]

        # --- order by exponent: x has the larger ------------------------------------------------
        # The operands are ordered by their exponent fields alone, not by their whole
        # magnitudes: for different exponents the two orders agree; for equal ones the
        # order does not matter to a sum, and a difference is the close path's (below),
        # which takes its magnitude whichever operand is larger, and whose borrow gives the
        # result's sign.  The mantissas' 2:1 selects wait on an 8-bit compare, not a 31-bit
        # one (the NMC operand register through an fp32 adder's whole compare into the
        # swapped mantissas' registers was the node's worst path at one seed, 10.6 ns).
        exp_swap = b.exponent > a.exponent
        x = float_layout(fmt)(Signal(fmt.width))
        y = float_layout(fmt)(Signal(fmt.width))
        m.d.comb += [x.eq(Mux(exp_swap, b, a)), y.eq(Mux(exp_swap, a, b))]

        def unpack(v):
            subnormal = v.exponent == 0
            exp = Mux(subnormal, 1, v.exponent)
            mant = Cat(v.fraction, ~subnormal)          # hidden bit
            return exp, mant

        x_exp = Signal(E)
        x_mant = Signal(F + 1)
        y_mant = Signal(F + 1)
        m.d.comb += [x_mant.eq(unpack(x)[1]), y_mant.eq(unpack(y)[1])]
        # the larger exponent and the exponent difference (both ways at once, not a
        # subtraction after the swap)
        a_exp, _ = unpack(a)
        b_exp, _ = unpack(b)
        shift = Signal(E)
        m.d.comb += [x_exp.eq(Mux(exp_swap, b_exp, a_exp)),
                     shift.eq(Mux(exp_swap, b_exp - a_exp, a_exp - b_exp))]
        subtract = Signal()
        x_sign = Signal()
        # x's sign; for a difference of equal exponents, the close path's borrow (below) says
        # whether y is the larger magnitude and the result takes y's sign instead
        m.d.comb += [subtract.eq(a.sign ^ b.sign), x_sign.eq(x.sign)]

        (x_mant, y_mant, x_exp, shift, subtract, x_sign, nan, inf, inf_sign, zero_sign) = cut(
            "swap", x_mant=x_mant, y_mant=y_mant, x_exp=x_exp, shift=shift, subtract=subtract,
            x_sign=x_sign, nan=nan, inf=inf, inf_sign=inf_sign, zero_sign=zero_sign)

        # --- align y to x (guard, round, sticky) ----------------------------------------------
        y_ext = Signal(W + W)                     # y mantissa, 3 GRS bits, room to shift into
        m.d.comb += y_ext.eq(Cat(Const(0, W), Const(0, 3), y_mant) >> shift)
        # the sticky bit, the OR of what lands at or below its place (bit W of y_ext), as the
        # bits of y whose shift takes them there (a compare of the shift with a constant each),
        # not as an OR of the shifter's low half: that waited for the whole shift (an fp32
        # adder's shift through the shifter and the OR into its aligned operand was a node's
        # worst path at one seed of round 26, 10.2 ns); equal wherever it is used (a shift
        # below W, where no bit of y falls off the end of y_ext)
        sticky = Signal()
        m.d.comb += sticky.eq(Cat(y_mant[i] & (shift > i + 2) for i in range(F + 1)).any())
        y_aligned = Signal(W)
        m.d.comb += y_aligned.eq(Cat(sticky, y_ext[W + 1:]))
        far = shift >= W                          # everything shifted out: only sticky left
        y_al = Signal(W)
        m.d.comb += y_al.eq(Mux(far, y_mant != 0, y_aligned))
        x_al = Signal(W)
        m.d.comb += x_al.eq(Cat(Const(0, 3), x_mant))
        # for a subtraction y enters the add inverted (x - y = x + ~y + 1, the 1 the add's
        # carry in), in the LUT that already chooses it: the add is then one carry chain,
        # where a sum and a difference chosen after were two chains, a select and a wire more
        # in front of the leading-zero count
        y_in = Signal(W)
        m.d.comb += y_in.eq(y_al ^ subtract.replicate(W))
        # normalise never shifts below the smallest exponent (1), so by at most x_exp - 1: a
        # one at that shift's place (bit W - x_exp, none when x_exp > W) among the count's
        # input caps the leading-zero count there, and normalise shifts by the count as
        # registered, with no compare and select in front of its shift
        cap = Signal(W)
        m.d.comb += cap.eq(Cat(x_exp == W - i for i in range(W)))
        # The close path: a difference of operands at most one exponent apart, the only sums
        # that can cancel more than one leading bit.  Its alignment is a 1-bit select, so its
        # difference is taken here, beside the far path's alignment shift: |x - y| (both ways
        # at once, the one that does not borrow chosen; for equal exponents y may be the
        # larger, x having been chosen by exponent alone), exact (a 1-bit shift goes into the
        # guard bit).  The add stage then counts the leading zeros of a register, not of the
        # add's carry chain (an fp32 adder's aligned operand through the add into the count's
        # register was the node's worst path at one seed, 10.9 ns); the far path's sum has
        # at most one leading zero, read off its top bit.
        close = Signal()
        m.d.comb += close.eq(subtract & (shift[1:] == 0))
        y_close = Signal(W)
        m.d.comb += y_close.eq(Mux(shift[0], Cat(Const(0, 2), y_mant), Cat(Const(0, 3), y_mant)))
        x_minus_y = Signal(W + 1)
        y_minus_x = Signal(W + 1)
        m.d.comb += [x_minus_y.eq(x_al - y_close), y_minus_x.eq(y_close - x_al)]
        close_diff = Signal(W)
        m.d.comb += close_diff.eq(Mux(x_minus_y[W], y_minus_x[:W], x_minus_y[:W]))
        # the sign of the larger magnitude (an exact cancellation's is the zero flag's): x's,
        # unless the close path's x - y borrows (only with equal exponents: y is then the
        # larger, of the other sign).  Taken from the borrow here, not from a whole-magnitude
        # compare of the operands in the swap stage (an fp32 adder's operand through that
        # 31-bit compare into the sign's register was a node's path at one seed of round 25)
        sign = Signal()
        m.d.comb += sign.eq(x_sign ^ (close & x_minus_y[W]))

        # the count's input, the difference with the cap's one, is made here, in the LUT that
        # chooses the difference, and registered: counted from the registers of both, it put
        # an OR in front of the count (an fp16 adder's cap into its count's register was one of
        # round 26's near misses); the far path's count needs the cap's top bit only
        counted = Signal(W)
        m.d.comb += counted.eq(close_diff | cap)
        cap_top = cap[W - 1]
        (x_al, y_in, counted, cap_top, close, close_diff, subtract, x_sign, x_exp, nan, inf,
         inf_sign, zero_sign) = cut(
            "align", x_al=x_al, y_in=y_in, counted=counted, cap_top=cap_top, close=close,
            close_diff=close_diff,
            subtract=subtract, x_sign=sign, x_exp=x_exp, nan=nan, inf=inf, inf_sign=inf_sign,
            zero_sign=zero_sign)

        # --- add or subtract magnitudes -------------------------------------------------------
        # one adder with the carry in: (2x + c) + (2y + c) = 2 (x + y + c)
        chain = Signal(W + 2)
        m.d.comb += chain.eq(Cat(subtract, x_al) + Cat(subtract, y_in))
        far_total = Signal(W + 1)
        # off the close path x > y, so a difference never borrows: its carry out is the 2^W
        # of x + ~y + 1, not a carry of the magnitudes
        m.d.comb += far_total.eq(Cat(chain[1:W + 1], chain[W + 1] & ~subtract))
        total = Signal(W + 1)
        m.d.comb += total.eq(Mux(close, close_diff, far_total))
        # leading zeros below the hidden position (bit W-1), capped at x_exp - 1
        # (a zero count input is a zero total: the result is then the zero flag's, the count
        # unused; the count's zero test reached the count register's reset, an adder's path
        # at every seed of a node).  Off the close path the count is 0 or 1: a sum's x is
        # normal (its top bit set) or x_exp is 1 (the cap's top bit set), and a difference
        # of exponents two or more apart is above half of x's hidden bit (y below a
        # quarter of it, or at most half for a shift of exactly 2, without sticky), so one
        # of the top two bits is set; a carried sum's count is unused.
        lz = Signal(range(W + 1))
        m.d.comb += lz.eq(Mux(close, leading_zeros(m, counted, of_zero=False),
                              ~(far_total[W - 1] | cap_top)))

        (total, lz, x_sign, x_exp, nan, inf, inf_sign, zero_sign) = cut(
            "add", total=total, lz=lz, x_sign=x_sign, x_exp=x_exp, nan=nan, inf=inf,
            inf_sign=inf_sign, zero_sign=zero_sign)

        # --- normalise ---------------------------------------------------------------------------
        carry = total[W]
        # never below the smallest exponent (1), which yields a subnormal result: the count is
        # capped at x_exp - 1 (the add stage's cap)
        left = lz
        norm = Signal(W)
        norm_exp = Signal(E + 2)
        with m.If(carry):
            m.d.comb += [norm.eq(Cat(total[0] | total[1], total[2:W + 1])),
                         norm_exp.eq(x_exp + 1)]
        with m.Else():
            m.d.comb += [norm.eq(total[:W] << left), norm_exp.eq(x_exp - left)]

        # settled beside the shift, not after the rounding's carry chain, and from the stage's
        # registers, not the shift's or the subtraction's results: a zero sum (a result that
        # is subnormal is exact, so a nonzero one keeps a nonzero mantissa through the
        # rounding) is a zero total, as the shift only removes leading zeros (left is at
        # most the total's count); whether the exponent overflows, with and without the
        # rounding's carry (norm_exp >= exp_max, norm_exp >= exp_max - 1): with the add's
        # carry norm_exp is x_exp + 1; without it, x_exp - left, which reaches x_exp only
        # with no shift (the capped count is 0 for a total without leading zeros, or for
        # x_exp = 1, far below the top)
        zero = Signal()
        ovf_carry, ovf_plain = Signal(), Signal()
        no_shift = lz == 0
        m.d.comb += [zero.eq(total == 0),
                     ovf_plain.eq(Mux(carry, x_exp >= exp_max - 1, no_shift & (x_exp >= exp_max))),
                     ovf_carry.eq(Mux(carry, x_exp >= exp_max - 2,
                                      no_shift & (x_exp >= exp_max - 1)))]

        (norm, norm_exp, zero, ovf_carry, ovf_plain, x_sign, nan, inf, inf_sign, zero_sign) = cut(
            "normalise", norm=norm, norm_exp=norm_exp, zero=zero, ovf_carry=ovf_carry,
            ovf_plain=ovf_plain, x_sign=x_sign, nan=nan, inf=inf, inf_sign=inf_sign,
            zero_sign=zero_sign)

        # --- round to nearest, ties to even ---------------------------------------------------------
        guard, rnd, sticky = norm[2], norm[1], norm[0]
        mant = norm[3:]                           # hidden + fraction, F + 1 bits
        round_up = guard & (rnd | sticky | mant[0])
        rounded = Signal(F + 2)
        m.d.comb += rounded.eq(mant + round_up)
        # whether the rounding carries out and whether the result is normal, from the bits
        # rather than the increment's carry chain: the increment carries out exactly when
        # every bit is one, and a result without its hidden bit never rounds up (a sum whose
        # result is subnormal is exact), so the exponent, the special results and the result
        # register's reset wait on a tree of ANDs, not on the chain (SAT-proved equal to
        # taking both from the increment; an fp32 adder's normalised mantissa through the
        # chain into the result register's reset was the node's longest path in the adders
        # at two placements, 10.5 ns)
        carried = Signal()
        is_normal = Signal()
        m.d.comb += [carried.eq(round_up & mant.all()), is_normal.eq(mant[F])]
        r_mant = Signal(F + 1)
        r_exp = Signal(E + 2)
        with m.If(carried):                       # rounding carried out: 10.000 -> 1.000, exp+1
            m.d.comb += [r_mant.eq(rounded[1:]), r_exp.eq(norm_exp + 1)]
        with m.Else():
            m.d.comb += [r_mant.eq(rounded[:F + 1]), r_exp.eq(norm_exp)]
        # subnormal (or zero) result: no hidden bit, exponent field 0
        field_exp = Mux(is_normal, r_exp, 0)
        overflow = is_normal & Mux(carried, ovf_carry, ovf_plain)
        # the fraction's zeroing without the rounding's carry-out: a carried rounding's
        # fraction is zero already (10.000), and an overflow without it needs ovf_plain, which
        # implies ovf_carry (SAT-proved equal; the normalised mantissa through the carry-out
        # into the fraction register's reset was an fp32 adder's path in the node, 10.4 ns)
        frac_zero = inf | zero | (is_normal & ovf_plain)

        # --- result -----------------------------------------------------------------------------------
        s = float_layout(fmt)(Signal(fmt.width, name="result"))
        with m.If(nan):
            m.d.comb += s.as_value().eq(fmt.qnan)
        with m.Else():
            with m.If(inf):
                m.d.comb += [s.exponent.eq(exp_max), s.sign.eq(inf_sign)]
            with m.Elif(zero):
                m.d.comb += [s.exponent.eq(0), s.sign.eq(zero_sign)]
            with m.Elif(overflow):
                m.d.comb += [s.exponent.eq(exp_max), s.sign.eq(x_sign)]
            with m.Else():
                m.d.comb += [s.exponent.eq(field_exp), s.sign.eq(x_sign)]
            m.d.comb += s.fraction.eq(Mux(frac_zero, 0, r_mant[:F]))
        (s,) = cut("result", s=s.as_value())
        m.d.comb += self.s.as_value().eq(s)
        return m
