"""DMA engine figures (``t3 bench dma`` or ``python -m benchmarks.dma``).

- ``dma.link_utilisation``: beats per cycle on ``tx`` (header and payload) from the first
  beat to the last, 16 tiles of 256 beats, memory answering one beat per cycle after 8 cycles,
  link always ready (cocotb, exported Verilog, checked against the model); limit 1.0.
- ``dma.payload_share``: payload beats / all beats on the link; limit ``256 / 257`` (one
  header per tile).
- ``dma.first_beat_latency``: cycles from the trigger's handshake to its tile's header; the
  design's figure is ``FIRST_BEAT_LATENCY`` + the memory latency.
- ``dma.sim_speed.<sim>``: simulated cycles per second (Python environment and model included).
- ``dma.synth.<target>.<resource>``: Yosys cell counts.
"""

import sys

from dma.config import DMAParams
from hw.params import T3Params

TILE_BEATS, TILES, LATENCY = 256, 16, 8


def long_run(sim, tiles=TILES):
    from dma.rtl import DMAEngine
    from sim.harness.runner import run_for_result
    import sim.blocks.dma.cocotb_tests as tb
    params, dparams = T3Params(), DMAParams()
    config = {"params": params.to_dict(), "dparams": dparams.to_dict(),
              "tile_beats": TILE_BEATS, "tiles": tiles, "latency": LATENCY}
    return run_for_result(DMAEngine(params, dparams), "t3_dma", tb.__name__, "bench_long",
                          config, sim)


def main(sims=None, synth=True):
    from dma.rtl import FIRST_BEAT_LATENCY
    sims = sims or ["verilator", "icarus"]
    speeds = {}
    for index, sim in enumerate(sims):
        result = long_run(sim, TILES if sim == "verilator" else 4)
        speeds[sim] = result["cycles_per_s"]
        if index == 0:
            u = result["utilisation"]
            share = TILE_BEATS / (TILE_BEATS + 1)
            print(f"dma.link_utilisation: {u:.4f} beats/cycle (limit 1.0, ratio {u:.4f})")
            print(f"dma.payload_share: {share * u:.4f} of link cycles carry payload (limit "
                  f"{share:.4f} = {TILE_BEATS}/{TILE_BEATS + 1}, ratio {u:.4f})")
            design = FIRST_BEAT_LATENCY + LATENCY
            first = result["first_beat"]
            print(f"dma.first_beat_latency: {first} cycles (memory latency {LATENCY} + "
                  f"{FIRST_BEAT_LATENCY} pipeline = {design}, ratio {first / design:.3f})",
                  flush=True)
    for sim, value in speeds.items():
        print(f"dma.sim_speed.{sim}: {value:.0f} cycles/s")
    if synth:
        from dma.rtl import DMAEngine
        from benchmarks.synth import resource_lines
        for line in resource_lines("dma", DMAEngine(T3Params(), DMAParams()), "t3_dma"):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
