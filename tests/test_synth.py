"""The exported design synthesizes, and the Tracker's table lands in block RAM."""

from benchmarks.synth import synth_cells
from hw.params import T3Params
from tracker.config import TrackerParams, entry_bits
from tracker.rtl import Tracker


def test_tracker_table_is_block_ram_on_ice40():
    params, tparams = T3Params(), TrackerParams(sets=64, ways=2, regions=1)
    cells = synth_cells(Tracker(params, tparams), "t3_tracker", "ice40")
    table_bits = tparams.sets * tparams.ways * entry_bits(params, tparams)
    flops = sum(n for cell, n in cells.items() if cell.startswith("SB_DFF"))
    # 64 x 2 x 57 = 7296 bits: two 4-kbit RAMs at least, and far fewer flip-flops than bits
    assert cells.get("SB_RAM40_4K", 0) >= table_bits // 4096 + 1
    assert flops < table_bits // 2
