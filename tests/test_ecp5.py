# amaranth: UnusedElaboratable=no
"""The ECP5 PLL's set-up (``hw/ecp5.py``) against the device's ranges, enumerated here
independently, and the board's top with it: its clock made by the PLL, constrained at
``clock_hz``, its reset held until the PLL locks."""

from fractions import Fraction

import pytest

from hw.ecp5 import pll_config, pll_frequencies

IN_HZ = 25_000_000


def makeable(in_hz):
    """Every whole-Hz output from 10 to 400 MHz of ``in_hz * fb / idiv`` with a phase detector
    of 3.125 to 400 MHz, ``fb`` of 1 to 80 (the VCO's range, 400 to 800 MHz, is met by some
    output divider of 1 to 128 for each of them: 10 MHz x 40 to 400 MHz x 2)."""
    out = set()
    for idiv in range(1, 129):
        if 3_125_000 <= Fraction(in_hz, idiv) <= 400_000_000:
            for fb in range(1, 81):
                f = Fraction(in_hz * fb, idiv)
                if f.denominator == 1 and 10_000_000 <= f <= 400_000_000:
                    out.add(int(f))
    return out


def test_every_frequency_the_pll_makes_is_made_exactly_within_its_ranges():
    made = makeable(IN_HZ)
    assert 25_000_000 in made and 50_000_000 in made and 100_000_000 in made
    for f in sorted(made):
        c = pll_config(IN_HZ, f)
        pfd = Fraction(IN_HZ, c.clki_div)
        assert pfd * c.clkfb_div == f == c.out_hz                     # exact, fed from CLKOP
        assert c.vco_hz == f * c.clkop_div and 400e6 <= c.vco_hz <= 800e6
        assert 3.125e6 <= pfd <= 400e6
        assert c.clki_div in range(1, 129) and c.clkfb_div in range(1, 81)
        assert c.clkop_div in range(1, 129) and c.clkop_cphase == c.clkop_div // 2
        # among every set of dividers that makes f, the VCO nearest 600 MHz
        vcos = [f * op for op in range(1, 129) if 400e6 <= f * op <= 800e6]
        assert abs(c.vco_hz - 600e6) == min(abs(v - 600e6) for v in vcos)
    assert pll_frequencies(IN_HZ, 200_000_000, count=len(made)) == sorted(made)


def test_a_frequency_the_pll_cannot_make_is_refused_with_its_neighbours():
    made = makeable(IN_HZ)
    for mhz in range(10, 401):
        if mhz * 10**6 not in made:
            with pytest.raises(ValueError, match=f"^clock_hz {mhz}000000 cannot be made"):
                pll_config(IN_HZ, mhz * 10**6)
    with pytest.raises(ValueError, match=r"^clock_hz 52000000 cannot be made exactly from "
                       r"25000000 Hz by the ECP5 PLL \(f_in \* CLKFB_DIV / CLKI_DIV with "
                       r"CLKFB_DIV <= 80 and a phase detector of at least 3\.125 MHz; 50, "
                       r"53\.125, 55, 56\.25 MHz are near it\)$"):
        pll_config(IN_HZ, 52_000_000)
    with pytest.raises(ValueError, match=r"^clock_hz must be an integer number of Hz from 10 "
                                         r"to 400 MHz for the ECP5 PLL, not 5000000$"):
        pll_config(IN_HZ, 5_000_000)
    with pytest.raises(ValueError, match=r"^input must be an integer number of Hz from 8 to "
                                         r"400 MHz for the ECP5 PLL, not 25000000\.0$"):
        pll_config(25e6, 50_000_000)


def test_the_boards_serial_divisor_and_pll_follow_its_clock():
    # (a clock the PLL cannot make is refused with the board's other impossible parameters,
    # tests/test_board.py)
    from system.board import BoardParams
    b = BoardParams(clock_hz=55_000_000)
    # the serial divisor follows the clock: 55 MHz / 115,200 baud
    assert b.divisor == 477 and b.pll == pll_config(IN_HZ, 55_000_000)


def test_the_boards_top_runs_on_the_pll_and_constrains_its_clock():
    # the build plan amaranth-boards writes (no tools run): the PLL instance with the
    # board's dividers, fed from the 25 MHz oscillator (constrained so in the LPF: nextpnr
    # derives the output's constraint, clock_hz, from it and the dividers), its output the
    # core's clock
    import re
    from amaranth_boards.ulx3s import ULX3S_85F_Platform
    from system.board import BoardParams, BoardTop
    b = BoardParams(gpus=2, clock_hz=55_000_000)
    plan = ULX3S_85F_Platform().build(BoardTop(b), name="t3_board", do_build=False)
    lpf = plan.files["t3_board.lpf"]
    assert 'FREQUENCY PORT "clk25_0__io" 25000000.0 HZ;' in lpf and "FREQUENCY NET" not in lpf
    il = plan.files["t3_board.il"]
    cell = il[il.index("cell \\EHXPLLL"):]
    cell = cell[:cell.index("\n  end")]
    c = b.pll
    for name, value in (("CLKI_DIV", c.clki_div), ("CLKFB_DIV", c.clkfb_div),
                        ("CLKOP_DIV", c.clkop_div), ("CLKOP_CPHASE", c.clkop_cphase)):
        assert re.search(rf"parameter \\{name} {value}\n", cell), name
    assert 'parameter \\FEEDBK_PATH "CLKOP"' in cell
    assert "connect \\CLKFB \\clk_out" in cell and "connect \\CLKOP \\clk_out" in cell
    assert "connect \\LOCK \\locked" in cell
    # the core's clock is the PLL's output, and its reset the synchronized lock and button
    top = il[il.index("module \\t3_board\n"):]
    top = top[:top.index("\nend\n")]
    for connection in ("cell \\t3_board.core \\core", "connect \\clk \\pll_clk [0]",
                       "connect \\clk_out \\pll_clk [0]", "connect \\stage1 \\rst [0]",
                       "connect \\locked \\locked [0]"):
        assert connection in top, connection
