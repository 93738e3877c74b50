"""Every endpoint's slack from an SDF (``hw/sta.py``), on a design small enough to add up by
hand; on placed designs ``tests/test_pnr.py`` checks it against nextpnr's critical path."""

import pytest

from hw.sta import analyse, group_of

#: ``a`` (a flip-flop) feeds a LUT and then ``b`` and, through a second LUT, ``c``; ``a`` also
#: feeds ``d`` directly.  Delays in ps (min:typ:max, the max counts); clock-to-Q 500, setup of
#: M 0 and of CE 150.
SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT a_TRELLIS_FF_Q/Q lut1/A (1000:1500:2000) (1000:1500:2000))
        (INTERCONNECT lut1/F ctr\[3\]_TRELLIS_FF_Q_7/M (100:200:300) (100:200:300))
        (INTERCONNECT lut1/F lut2/B (100:300:500) (100:300:500))
        (INTERCONNECT lut2/F c_TRELLIS_FF_Q_2/CE (100:200:6000) (100:200:6000))
        (INTERCONNECT a_TRELLIS_FF_Q/Q d_TRELLIS_FF_Q/M (100:200:400) (100:200:400))
      )
    )
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE a_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE (IOPATH CLK Q (400:450:500) (400:450:500))))
    (TIMINGCHECK (SETUPHOLD (posedge M) (posedge CLK) (0:0:0) (100:100:100)))
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE lut1)
    (DELAY (ABSOLUTE (IOPATH A F (200:218:236) (200:218:236))))
  )
  (CELL
    (CELLTYPE "TRELLIS_COMB")
    (INSTANCE lut2)
    (DELAY (ABSOLUTE (IOPATH B F (200:218:236) (200:218:236))))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE ctr\[3\]_TRELLIS_FF_Q_7)
    (DELAY (ABSOLUTE (IOPATH CLK Q (400:450:500) (400:450:500))))
    (TIMINGCHECK (SETUPHOLD (posedge M) (posedge CLK) (0:0:0) (100:100:100)))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE c_TRELLIS_FF_Q_2)
    (DELAY (ABSOLUTE (IOPATH CLK Q (400:450:500) (400:450:500))))
    (TIMINGCHECK (SETUPHOLD (posedge CE) (posedge CLK) (150:150:150) (0:0:0)))
  )
  (CELL
    (CELLTYPE "TRELLIS_FF")
    (INSTANCE d_TRELLIS_FF_Q)
    (DELAY (ABSOLUTE (IOPATH CLK Q (400:450:500) (400:450:500))))
    (TIMINGCHECK (SETUPHOLD (posedge M) (posedge CLK) (0:0:0) (100:100:100)))
  )
)
"""

# arrivals: a.Q 500; lut1.F 500 + 2000 + 236 = 2736; ctr.M 2736 + 300 = 3036;
# lut2.F 2736 + 500 + 236 = 3472; c.CE 3472 + 6000 = 9472 (+150 setup: 9622); d.M 900


def test_each_endpoint_gets_its_latest_arrival():
    timing = analyse(SDF.splitlines(), period_ns=9.0)
    # three endpoints with a path (a's own M has none); c misses 9 ns by 0.622 ns
    assert timing.endpoints == 3
    assert (timing.failing, timing.worst_ns, timing.tns_ns) == (1, -0.622, -0.622)
    assert timing.fmax_mhz == pytest.approx(1000 / 9.622)
    # each endpoint in the bin of the lowest upper bound above its slack
    assert timing.histogram[-0.75] == 0 and timing.histogram[-0.5] == 1


def test_a_family_is_its_start_and_end_registers_and_its_worst_path():
    timing = analyse(SDF.splitlines(), period_ns=9.0, margin_ns=8.5)
    by_end = {f.end: f for f in timing.families}
    assert set(by_end) == {"c.CE", "ctr[].M", "d.M"}
    c = by_end["c.CE"]
    assert (c.start, c.slack_ns, c.failing, c.near) == ("a", -0.622, 1, 1)
    # the steps: the start register, then each cell with the wire into it and its own delay
    assert c.path == [("a_TRELLIS_FF_Q", 0.0, 0.5), ("lut1", 2.0, 0.236), ("lut2", 0.5, 0.236),
                      ("c_TRELLIS_FF_Q_2", 6.0, 0.0)]
    assert by_end["ctr[].M"].slack_ns == 9.0 - 3.036 and by_end["d.M"].slack_ns == 9.0 - 0.9
    # only the endpoints within the margin: d's (8.1 ns to spare) not within 6 ns
    assert {f.end for f in analyse(SDF.splitlines(), 9.0, margin_ns=6.0).families} == \
        {"c.CE", "ctr[].M"}
    assert [f.slack_ns for f in timing.families] == sorted(f.slack_ns for f in timing.families)
    # within the default margin of 0.25 ns only c's family
    assert [f.end for f in analyse(SDF.splitlines(), period_ns=9.0).families] == ["c.CE"]


def test_a_design_without_a_path_is_refused():
    with pytest.raises(ValueError, match="^the SDF has no path between registers$"):
        analyse(["(DELAYFILE", ")"], period_ns=10)


@pytest.mark.parametrize("cell,group", [
    ("tracker.s2_row[3]_TRELLIS_FF_Q_42", "tracker.s2_row[]"),
    ("tracker.table.0.7_DOA14", "tracker.table"),
    ("dma.offset_LUT4_B_D_LUT4_Z", "dma.offset"),
    ("$nextpnr_CCU2C_539", ""),
    ("arbiter.mcq.storage.0.3", "arbiter.mcq.storage"),
])
def test_the_tools_suffixes_are_taken_off_a_group(cell, group):
    assert group_of(cell) == group
