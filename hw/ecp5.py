"""Lattice ECP5 primitives the board needs: the PLL (``EHXPLLL``) that makes its clock, and a
primary (global) network for a signal of many loads.

:func:`pll_config` finds the dividers of an ``EHXPLLL`` that make an output clock **exactly**
from an input clock, within the device's ranges (FPGA-TN-02200, "ECP5 and ECP5-5G sysCLOCK
PLL/DLL Design and User Guide"): the phase detector's ``f_in / CLKI_DIV`` from 3.125 to
400 MHz, the VCO's ``f_pfd * CLKFB_DIV * CLKOP_DIV`` from 400 to 800 MHz, the output
``f_vco / CLKOP_DIV`` from 10 to 400 MHz, with the feedback taken from ``CLKOP`` so that
``f_out = f_in * CLKFB_DIV / CLKI_DIV``.  An output no set of dividers makes exactly is
refused (the board's serial divisor and its documentation are computed from the clock it
asks, so a PLL a little off would make both wrong).  :class:`ECP5PLL` instantiates it.
"""

import dataclasses
from fractions import Fraction

from amaranth import C, Elaboratable, Instance, Module, Signal


__all__ = ["PLLConfig", "pll_config", "pll_frequencies", "ECP5PLL", "ecp5_global"]


#: The EHXPLLL's ranges (MHz) and its dividers' (FPGA-TN-02200, table "PLL Specifications"
#: of the ECP5 data sheet FPGA-DS-02012).
PFD_MHZ = (Fraction("3.125"), 400)
VCO_MHZ = (400, 800)
OUT_MHZ = (10, 400)
IN_MHZ = (8, 400)
CLKI_DIV, CLKFB_DIV, CLKOP_DIV = range(1, 129), range(1, 81), range(1, 129)


@dataclasses.dataclass(frozen=True)
class PLLConfig:
    """One ``EHXPLLL`` set-up: its three dividers, the output's coarse phase (half a period of
    the output in VCO cycles: 180 degrees, as Lattice's tools and ``ecppll`` set it), and the
    input, VCO and output frequencies it runs at (Hz)."""
    clki_div: int
    clkfb_div: int
    clkop_div: int
    in_hz: int
    vco_hz: int
    out_hz: int

    @property
    def clkop_cphase(self):
        return self.clkop_div // 2


def pll_config(in_hz, out_hz):
    """The :class:`PLLConfig` that makes ``out_hz`` exactly from ``in_hz`` (its VCO the
    closest to 600 MHz, the middle of its range, among those that do); ``ValueError`` naming
    the frequency when none does."""
    for name, hz, (lo, hi) in (("input", in_hz, IN_MHZ), ("clock_hz", out_hz, OUT_MHZ)):
        if not isinstance(hz, int) or not lo * 10**6 <= hz <= hi * 10**6:
            raise ValueError(f"{name} must be an integer number of Hz from {lo} to {hi} MHz "
                             f"for the ECP5 PLL, not {hz!r}")
    best = None
    for idiv in CLKI_DIV:
        pfd = Fraction(in_hz, idiv * 10**6)
        if not PFD_MHZ[0] <= pfd <= PFD_MHZ[1]:
            continue
        fbdiv = Fraction(out_hz, 10**6) / pfd
        if fbdiv.denominator != 1 or fbdiv.numerator not in CLKFB_DIV:
            continue
        for odiv in CLKOP_DIV:
            vco = Fraction(out_hz * odiv, 10**6)
            if VCO_MHZ[0] <= vco <= VCO_MHZ[1] and (best is None or
                                                    abs(vco - 600) < abs(best[2] - 600)):
                best = (idiv, fbdiv.numerator, vco, odiv)
    if best is None:
        raise ValueError(f"clock_hz {out_hz} cannot be made exactly from {in_hz} Hz by the "
                         f"ECP5 PLL (f_in * CLKFB_DIV / CLKI_DIV with CLKFB_DIV <= 80 and a "
                         f"phase detector of at least 3.125 MHz; "
                         f"{', '.join(f'{f / 1e6:g}' for f in pll_frequencies(in_hz, out_hz))}"
                         f" MHz are near it)")
    idiv, fbdiv, vco, odiv = best
    return PLLConfig(idiv, fbdiv, odiv, in_hz, int(vco * 10**6), out_hz)


def pll_frequencies(in_hz, near_hz, count=4):
    """The ``count`` output frequencies (Hz, whole) the PLL makes from ``in_hz`` nearest
    ``near_hz``, in order of frequency: what to ask instead of one it cannot make."""
    made = set()
    for idiv in CLKI_DIV:
        if not PFD_MHZ[0] * 10**6 <= Fraction(in_hz, idiv) <= PFD_MHZ[1] * 10**6:
            continue
        for fbdiv in CLKFB_DIV:
            out = Fraction(in_hz * fbdiv, idiv)
            if out.denominator == 1 and OUT_MHZ[0] * 10**6 <= out <= OUT_MHZ[1] * 10**6:
                made.add(int(out))
    return sorted(sorted(made, key=lambda f: (abs(f - near_hz), f))[:count])


class ECP5PLL(Elaboratable):
    """An ``EHXPLLL`` making ``clk_out`` at ``config.out_hz`` from ``clk_in`` at
    ``config.in_hz`` (:func:`pll_config`), its feedback from ``CLKOP``.

    Signals: ``clk_in`` (in), ``clk_out`` (out: the primary output, ``CLKOP``), ``locked``
    (out: high while the loop is locked; asynchronous to either clock, so a design holds its
    reset until it is high and synchronizes it first).  Synthesis only: no simulator models
    the primitive (the board's simulation starts from :class:`system.board.BoardCore`, whose
    clock is a port).
    """

    def __init__(self, config: PLLConfig):
        self.config = config
        self.clk_in = Signal()
        self.clk_out = Signal()
        self.locked = Signal()

    def elaborate(self, platform):
        m = Module()
        c = self.config
        zero, one = C(0, 1), C(1, 1)
        m.submodules.pll = Instance(
            "EHXPLLL",
            # the frequencies nextpnr derives the output's constraint from
            a_FREQUENCY_PIN_CLKI=f"{c.in_hz / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{c.out_hz / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=c.clki_div, p_CLKFB_DIV=c.clkfb_div, p_FEEDBK_PATH="CLKOP",
            p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=c.clkop_div,
            p_CLKOP_CPHASE=c.clkop_cphase, p_CLKOP_FPHASE=0,
            i_CLKI=self.clk_in, i_CLKFB=self.clk_out, o_CLKOP=self.clk_out,
            o_LOCK=self.locked, i_RST=zero, i_STDBY=zero, i_PHASESEL0=zero, i_PHASESEL1=zero,
            i_PHASEDIR=one, i_PHASESTEP=one, i_PHASELOADREG=one, i_PLLWAKESYNC=zero,
            i_ENCLKOP=zero)
        return m


def ecp5_global(m, signal):
    """``signal`` through an ECP5 ``DCCA`` onto one of the chip's primary (global) networks,
    which reach every slice's clock, reset and enable inputs.  nextpnr promotes only clocks on
    its own; the board's reset has about 25,000 flip-flop loads, and left in the general
    routing it made the design unroutable (router2 levelled off at 10,000 overused wires at
    59 % of the LUTs; ``docs/fpga.md``)."""
    out = Signal()
    m.submodules.reset_global = Instance("DCCA", i_CLKI=signal, i_CE=C(1, 1), o_CLKO=out)
    return out
