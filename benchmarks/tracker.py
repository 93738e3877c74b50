"""Tracker figures (``t3 bench tracker`` or ``python -m benchmarks.tracker``).

- ``tracker.throughput``: accesses taken per cycle while one GPU's ring reduce-scatter step is
  offered every cycle with the trigger output always ready and no set conflicts (the schedule
  passes :func:`tracker.config.check_schedule`); limit 1.0.
- ``tracker.trigger_latency``: cycles from the handshake of a tile's completing access to its
  trigger on ``o`` (the documented 4).
- ``tracker.sim_speed.<sim>``: simulated cycles per wall-clock second, Python driver and golden
  model included, for Amaranth's simulator and cocotb on Icarus and Verilator.
- ``tracker.table_bits.paper``: bits of the paper's configuration (256 sets x 8 ways, 12-bit
  wg_id, 3-bit wf_id, 48-bit addresses, 16-bit counters) against the paper's 19 KB.
- ``tracker.synth.<target>.<resource>``: Yosys cell counts of the default geometry (256 x 8,
  32-bit addresses) for Xilinx 7-series and iCE40, against a reference device
  (:mod:`benchmarks.synth`); skipped with ``synth=False``.

Every run is checked against the golden model; a mismatch fails the benchmark.
"""

import sys

from hw.params import T3Params
from tracker.config import PAPER_TABLE_BITS, TrackerParams, entry_bits, table_bits


#: accesses per run on each simulator: sized for a few seconds each
WORKLOADS = {"verilator": 128, "icarus": 32, "amaranth": 16}     # workgroups, 4 WFs each


def main(sims=None, synth=True):
    from sim.blocks.tracker.demo import run_ring_step
    sims = sims or ["verilator", "icarus", "amaranth"]
    params = T3Params(wg_id_bits=12)
    tparams = TrackerParams(sets=256, ways=8)
    speed = {}
    for sim in sims:
        if sim not in WORKLOADS:
            raise ValueError(f"simulator must be one of {', '.join(WORKLOADS)}, not {sim!r}")
        result = run_ring_step(sim, params, tparams, WORKLOADS[sim], 4, 256)
        if not result["verified"]:
            print(f"tracker: {sim} run disagreed with the golden model", file=sys.stderr)
            return 1
        speed[sim] = result["cycles_per_s"]
        if sim == sims[0]:
            rate = result["accesses_per_cycle"]
            print(f"tracker.throughput: {rate:.3f} accesses/cycle "
                  f"(limit 1.0, ratio {rate:.3f}; {result['accesses']} accesses on {sim})")
            print(f"tracker.trigger_latency: {result['latency_max']} cycles "
                  f"(min {result['latency_min']}, max {result['latency_max']} over "
                  f"{result['triggers']} triggers)")
    for sim, value in speed.items():
        print(f"tracker.sim_speed.{sim}: {value:.0f} cycles/s")
    paper = T3Params(addr_bits=48, wg_id_bits=12)
    bits = table_bits(paper, tparams)
    print(f"tracker.table_bits.paper: {bits} bits ({entry_bits(paper, tparams)} per entry; "
          f"limit {PAPER_TABLE_BITS} = 19 KB, ratio {bits / PAPER_TABLE_BITS:.3f})")
    if synth:
        from tracker.rtl import Tracker
        from benchmarks.synth import resource_lines
        for line in resource_lines("tracker", Tracker(T3Params(), tparams), "t3_tracker"):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
