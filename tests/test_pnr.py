"""Place and route (``hw/pnr.py``, ``t3 synth``): the flow on a small block, and its refusals.
The blocks' own figures are in ``docs/fpga.md`` (``t3 synth ecp5 BLOCK``)."""

import pytest

from hw.params import T3Params
from hw.pnr import place_and_route
from system.link import LinkModel


def test_place_and_route_reports_fmax_resources_and_the_critical_path():
    result = place_and_route(LinkModel(T3Params(), latency=4, num=3, den=80), "t3_link",
                             "ecp5", freq_mhz=50)
    achieved, asked = result.fmax["clk"]
    assert asked == 50 and achieved > 0
    # the clock rate is what the critical path allows: its delay bounds the period
    assert 1000 / achieved == pytest.approx(result.path_ns, rel=0.05)
    assert result.path_from and result.path_to and result.path_logic >= 1
    assert result.utilization["TRELLIS_FF"][0] > 0 and result.utilization["TRELLIS_COMB"][0] > 0
    assert all(used <= available for used, available in result.utilization.values())
    lines = result.lines("t3_link")
    assert lines[0].startswith("t3_link.ecp5.fmax.clk: ")


def test_place_and_route_refuses_bad_arguments():
    link = None                     # refused before the component is looked at
    with pytest.raises(ValueError, match="target must be one of ecp5, not 'xc7'"):
        place_and_route(link, "t3_link", "xc7")
    with pytest.raises(ValueError, match="freq_mhz must be a number in \\(0, 1000\\], not 0"):
        place_and_route(link, "t3_link", "ecp5", freq_mhz=0)
