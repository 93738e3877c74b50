"""Near-bank unit figures (``t3 bench nmc`` or ``python -m benchmarks.nmc``).

- ``nmc.update_rate``: op-and-stores per cycle with updates spread over the bank groups and their
  rows open (cocotb, exported Verilog, checked against the model); limit bank groups / CCDWL.
- ``nmc.alu_rate``: beats per cycle through the ALU with the output always ready; limit 1.0.
- ``nmc.sim_speed.<sim>``: simulated cycles per second (Python driver and model included).
- ``nmc.synth.<target>.<resource>``: Yosys cell counts of the ALU (the unit's storage is the
  simulation's backing memory, not something to put on an FPGA).
"""

import sys

from hw.params import T3Params
from nmc.config import NMCParams


def spread_updates(sim, n):
    from nmc.rtl import NMCUnit
    from sim.harness.runner import run_for_result
    import sim.blocks.nmc.cocotb_tests as tb
    params, nparams = T3Params(), NMCParams()
    config = {"params": params.to_dict(), "nparams": nparams.to_dict(), "n": n, "seed": 1}
    return run_for_result(NMCUnit(params, nparams), "t3_nmc", tb.__name__, "spread_updates",
                          config, sim)


def alu_rate(beats=200):
    import random
    from hw.interfaces import ElemType, Op
    from hw.testing import run_testbench
    from nmc.alu import NearBankALU
    params = T3Params()
    dut = NearBankALU(params)
    taken = []

    async def bench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.payload.op, Op.UPDATE)
        ctx.set(dut.i.payload.etype, ElemType.FP16)
        ctx.set(dut.i.payload.mask, (1 << params.beat_bytes) - 1)
        for cycle in range(beats):
            ctx.set(dut.i.payload.data, random.getrandbits(params.beat_bits))
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            if ready:
                taken.append(cycle)

    run_testbench(dut, bench)
    return len(taken) / beats


def main(sims=None, synth=True):
    sims = sims or ["verilator", "icarus"]
    nparams = NMCParams()
    limit = nparams.bank_groups / nparams.timing.CCDWL
    speeds = {}
    for index, sim in enumerate(sims):
        result = spread_updates(sim, 20_000 if sim == "verilator" else 2_000)
        speeds[sim] = result["cycles_per_s"]
        if index == 0:
            rate = result["updates_per_cycle"]
            print(f"nmc.update_rate: {rate:.3f} op-and-stores/cycle (limit {limit:.3f} = "
                  f"{nparams.bank_groups} bank groups / CCDWL {nparams.timing.CCDWL}, ratio "
                  f"{rate / limit:.3f})", flush=True)
    rate = alu_rate()
    print(f"nmc.alu_rate: {rate:.3f} beats/cycle (limit 1.0, ratio {rate:.3f})")
    for sim, value in speeds.items():
        print(f"nmc.sim_speed.{sim}: {value:.0f} cycles/s")
    if synth:
        from nmc.alu import NearBankALU
        from benchmarks.synth import resource_lines
        for line in resource_lines("nmc.alu", NearBankALU(T3Params()), "t3_nmc_alu"):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-synth"] or None,
                  synth="--no-synth" not in sys.argv))
