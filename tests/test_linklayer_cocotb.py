"""The link layer's exported Verilog under cocotb (Verilator and Icarus): a sender and a
receiver through a wire that drops, flips and repeats beats and acknowledgements, with
backpressure on both ends; every packet once, intact and in order, and the receiver's every
decision the golden model's (:mod:`sim.blocks.linklayer.cocotb_tests`)."""

import json

import cocotb
import pytest

from hw.params import T3Params
from linklayer.config import LinkLayerParams
from linklayer.rtl import LinkPair
from sim.blocks.linklayer.cocotb_tests import VERILATOR_ARGS, run_link
from sim.harness.runner import run_cocotb


@cocotb.test()
async def faulty_wire(dut):
    await run_link(dut)


#: 64-bit beats and 5-bit sequence numbers (they wrap within a run), small buffers.
P = T3Params(beat_bits=64)
LP = LinkLayerParams(seq_bits=5, max_packet_beats=8, replay_beats=64, replay_packets=8,
                     rx_beats=32, timeout=300)


@pytest.mark.cocotb
def test_link_layer_cocotb(sim, tmp_path, t3_options, request):
    out = tmp_path / "result.json"
    config = {"params": P.to_dict(), "lparams": LP.to_dict(), "seed": t3_options.seed,
              "packets": 200 if t3_options.soak else 60, "latency": 10, "valid_p": 0.9,
              "ready_p": 0.7, "cycles": 60_000, "out": str(out),
              "rates": {"drop": 0.01, "flip": 0.01, "dup": 0.01},
              "ack_rates": {"drop": 0.1, "flip": 0.05}}
    run_cocotb(LinkPair(P, LP), "t3_link_pair", request.module, tmp_path, config=config,
               testcase="faulty_wire", sim=sim, waves=t3_options.waves,
               verilator_args=VERILATOR_ARGS if sim == "verilator" else ())
    result = json.loads(out.read_text())
    # the wire did damage, and the link layer saw and repaired it
    assert sum(result["wire"].values()) > 0 and result["counters"]["tx_replayed"] > 0
    assert result["counters"]["delivered"] == config["packets"]
