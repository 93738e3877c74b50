"""The DMA engine's exported Verilog under cocotb (Verilator and Icarus): random command tables
and trigger orders through the link loopback with backpressure on every port, against the
golden model and numpy; the link ports driven by cocotbext-axi's AXI4-Stream agents; and the
send and receive sides', the write combining's and the tile reader's own Verilog (the
packetizer, the depacketizer, the combiner, the reader) against their models."""

import cocotb
import pytest

import dataclasses

from dma.combiner import Combiner
from dma.config import DMAParams
from dma.depacketizer import Depacketizer
from dma.packetizer import Packetizer
from dma.reader import TileReader
from dma.rtl import DMAEngine
from hw.params import T3Params
from sim.blocks.dma.cocotb_tests import (run_axis, run_combiner, run_depacketizer,
                                         run_packetizer, run_random, run_reader)
from sim.harness.runner import run_cocotb


@cocotb.test()
async def random_loopback(dut):
    await run_random(dut)


@cocotb.test()
async def axis_agents(dut):
    await run_axis(dut)


@cocotb.test()
async def receive_side_alone(dut):
    await run_depacketizer(dut)


@cocotb.test()
async def send_side_alone(dut):
    await run_packetizer(dut)


@cocotb.test()
async def write_combining_alone(dut):
    await run_combiner(dut)


@cocotb.test()
async def tile_reader_alone(dut):
    await run_reader(dut)


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


@pytest.mark.cocotb
def test_depacketizer_cocotb(sim, tmp_path, t3_options, request):
    """The receive side's own Verilog: random link traffic with every framing fault, pauses on
    ``rx`` and backpressure on ``o``, scored against ``dma.model.depacketize``."""
    params, dparams = T3Params(), DMAParams()
    config = {"params": params.to_dict(), "dparams": dparams.to_dict(),
              "seed": t3_options.seed, "gpu_id": 5, "rx_window": [0x4000, 0x2000],
              "packets": 1000 if t3_options.soak else 200, "rx_pause": 0.3, "o_stall": 0.4}
    run_cocotb(Depacketizer(params, dparams), "t3_dma_depacketizer", request.module,
               tmp_path, config=config, testcase="receive_side_alone", sim=sim,
               waves=t3_options.waves)


@pytest.mark.cocotb
def test_packetizer_cocotb(sim, tmp_path, t3_options, request):
    """The send side's own Verilog: random tiles and remote runs with pauses on its four
    inputs and backpressure on ``tx``, scored by ``dma.model.check_packetized``."""
    params, dparams = T3Params(), DMAParams()
    config = {"params": params.to_dict(), "dparams": dparams.to_dict(),
              "seed": t3_options.seed, "packets": 300 if t3_options.soak else 60,
              "pause": 0.3, "tx_stall": 0.3}
    run_cocotb(Packetizer(params, dparams), "t3_dma_packetizer", request.module,
               tmp_path, config=config, testcase="send_side_alone", sim=sim,
               waves=t3_options.waves)


@pytest.mark.cocotb
@pytest.mark.parametrize("stalls", [(0.0, 0.0), (0.85, 0.4)], ids=["exact", "stalled"])
def test_combiner_cocotb(sim, stalls, tmp_path, t3_options, request):
    """The write combining's own Verilog, three windows: random CU stores with pauses, the
    runs' outputs taken (the runs exactly the model's) or stalled (the scoreboard)."""
    params = T3Params()
    dparams = dataclasses.replace(DMAParams(), remote_windows=3, remote_burst=3,
                                  remote_flush=2)
    config = {"params": params.to_dict(), "dparams": dparams.to_dict(),
              "seed": t3_options.seed, "gpu_id": 5, "stores": 1500 if t3_options.soak else 300,
              "pause": 0.4, "hdr_stall": stalls[0], "data_stall": stalls[1]}
    run_cocotb(Combiner(params, dparams), "t3_dma_combiner", request.module, tmp_path,
               config=config, testcase="write_combining_alone", sim=sim,
               waves=t3_options.waves)


@pytest.mark.cocotb
def test_reader_cocotb(sim, tmp_path, t3_options, request):
    """The tile reader's own Verilog: random tiles with pauses, an in-order memory of random
    latency under stalls, the headers and the payload taken under stalls."""
    params, dparams = T3Params(), DMAParams()
    config = {"params": params.to_dict(), "dparams": dparams.to_dict(),
              "seed": t3_options.seed, "tiles": 200 if t3_options.soak else 40,
              "pause": 0.3, "read_stall": 0.3, "resp_pause": 0.2, "hdr_stall": 0.3,
              "data_stall": 0.5, "latency": [1, 40]}
    run_cocotb(TileReader(params, dparams), "t3_dma_reader", request.module, tmp_path,
               config=config, testcase="tile_reader_alone", sim=sim, waves=t3_options.waves)
