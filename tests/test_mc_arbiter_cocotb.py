"""The MC arbiter's exported Verilog under cocotb (Verilator and Icarus), against the
cycle-level golden model.

Random gaps on both request streams, random backpressure on ``tap`` and on ``o``; a recorder
agent notes every cycle's inputs and which stream the hardware took, the model replays them and
must take the same stream in every cycle, and each stream must leave ``o`` in order, complete.
One cocotb test per policy, all in one simulation per simulator.
"""

import cocotb
import pytest

from hw.params import T3Params
from mc_arbiter.config import ArbiterParams, Policy
from mc_arbiter.rtl import MCArbiter
from sim.blocks.mc_arbiter.cocotb_tests import run_policy
from sim.harness.runner import run_cocotb


@cocotb.test()
async def round_robin(dut):
    result = await run_policy(dut, Policy.ROUND_ROBIN)
    assert result["registers"]["peak_occupancy"] == 16, "backpressure never filled the MCQ"


@cocotb.test()
async def compute_first(dut):
    await run_policy(dut, Policy.COMPUTE_FIRST)


@cocotb.test()
async def mca(dut):
    await run_policy(dut, Policy.MCA)


@pytest.mark.cocotb
def test_mc_arbiter_cocotb(sim, tmp_path, t3_options, request):
    params, aparams = T3Params(), ArbiterParams(depth=16)
    config = {"params": params.to_dict(), "aparams": aparams.to_dict(),
              "n": 20_000 if t3_options.soak else 2_000, "seed": t3_options.seed}
    run_cocotb(MCArbiter(params, aparams), "t3_mc_arbiter", request.module, tmp_path,
               config=config, sim=sim, waves=t3_options.waves)
