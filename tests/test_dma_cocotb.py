"""The DMA engine's exported Verilog under cocotb (Verilator and Icarus): random command tables
and trigger orders through the link loopback with backpressure on every port, against the
golden model and numpy; and the link ports driven by cocotbext-axi's AXI4-Stream agents."""

import cocotb
import pytest

from dma.config import DMAParams
from dma.rtl import DMAEngine
from hw.params import T3Params
from sim.blocks.dma.cocotb_tests import run_axis, run_random
from sim.harness.runner import run_cocotb


@cocotb.test()
async def random_loopback(dut):
    await run_random(dut)


@cocotb.test()
async def axis_agents(dut):
    await run_axis(dut)


STALLS = {"trig_pause": 0.3, "remote_pause": 0.3, "resp_pause": 0.2, "rx_pause": 0.2,
          "mem_stall": 0.3, "tx_stall": 0.3, "mem_latency": 12}


@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", ["random_loopback", "axis_agents"])
def test_dma_cocotb(sim, testcase, tmp_path, t3_options, request):
    params, dparams = T3Params(), DMAParams()
    config = {"params": params.to_dict(), "dparams": dparams.to_dict(),
              "seed": t3_options.seed,
              "scenario": {"remote_stores": 200 if t3_options.soak else 40}, "env": STALLS}
    run_cocotb(DMAEngine(params, dparams), "t3_dma", request.module, tmp_path, config=config,
               testcase=testcase, sim=sim, waves=t3_options.waves)
