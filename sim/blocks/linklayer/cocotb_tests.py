"""cocotb testbench of the link layer's exported Verilog (:class:`linklayer.rtl.LinkPair`): the
sender and the receiver of one direction joined by a faulty wire in Python
(:class:`sim.blocks.linklayer.traffic.Wire`), random packets in, a sink with backpressure out.
The same checks as the Amaranth layer: every packet once, intact and in order; the
receiver's deliveries, acknowledgements and counters the golden model's on the beats it took.

Each cycle the testbench drives the inputs after the falling edge and reads the handshakes at
``ReadOnly`` (the receiver's ``tready`` depends on the beat it is shown), so a transfer is what
the next rising edge takes, on either simulator.

Configuration (:func:`sim.harness.runner.tb_config`): ``params``, ``lparams``, ``seed``,
``packets``, ``length`` (beats a packet; default random), ``rates`` and ``ack_rates`` (:class:`Wire`), ``latency``, ``valid_p``,
``ready_p``, ``cycles``, ``stop_when_done``, ``out`` (JSON: the counters, what the wires did,
the beats the sender put on the wire, the cycles of the first and the last delivery).
"""

import json
import random

import cocotb

from hw.params import T3Params
from linklayer.config import LinkLayerParams, ack_crc
from linklayer.model import Ack, RxModel
from linklayer.rtl import LinkPair
from sim.blocks.linklayer.traffic import ACK_FIELDS, BEAT_FIELDS, Wire, random_packets
from sim.harness.runner import NO_DFG, tb_config


__all__ = ["run_link", "VERILATOR_ARGS"]


#: The block's Verilator options: without the data-flow optimiser, which miscompiles the
#: receiver's trailer check (:data:`sim.harness.runner.NO_DFG`).
VERILATOR_ARGS = NO_DFG


async def run_link(dut):
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly
    cfg = tb_config()
    params = T3Params(**cfg["params"])
    lparams = LinkLayerParams(**cfg["lparams"])
    rng = random.Random(cfg["seed"])
    sent = random_packets(rng, params, lparams, cfg["packets"], cfg.get("length"))
    wire = Wire(rng, cfg["latency"], cfg.get("rates") or {}, BEAT_FIELDS(params))
    acks = Wire(rng, cfg["latency"], cfg.get("ack_rates") or {}, ACK_FIELDS(lparams))
    model = RxModel(params, lparams)
    beats = [(b, k == len(p) - 1) for p in sent for k, b in enumerate(p)]
    delivered, current, hw_acks = [], [], []
    first_delivery = last_delivery = None
    fields = ("tdata", "tkeep", "tlast", "tuser")

    for name in ("tx_i__tvalid", "rx_i__tvalid", "ack_i__valid", "rx_o__tready",
                 "tx_o__tready"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    Clock(dut.clk, 1, unit="ns").start()
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    at, now = 0, 0
    for now in range(cfg["cycles"]):
        await FallingEdge(dut.clk)
        valid = at < len(beats) and rng.random() < cfg["valid_p"]
        if valid:
            (d, k, u), last = beats[at]
            dut.tx_i__tdata.value, dut.tx_i__tkeep.value = d, k
            dut.tx_i__tuser.value, dut.tx_i__tlast.value = u, int(last)
        dut.tx_i__tvalid.value = int(valid)
        dut.tx_o__tready.value = 1
        beat = wire.head(now)
        dut.rx_i__tvalid.value = int(beat is not None)
        if beat is not None:
            for f in fields:
                getattr(dut, f"rx_i__{f}").value = beat[f]
        ready = rng.random() < cfg["ready_p"]
        dut.rx_o__tready.value = int(ready)
        back = acks.head(now)
        dut.ack_i__valid.value = int(back is not None)
        if back is not None:
            for f, v in back.items():
                getattr(dut, f"ack_i__{f}").value = v
            acks.pop()
        await ReadOnly()
        if valid and int(dut.tx_i__tready.value):
            at += 1
        if int(dut.tx_o__tvalid.value):
            wire.send(now, {f: int(getattr(dut, f"tx_o__{f}").value) for f in fields})
        if beat is not None and int(dut.rx_i__tready.value):
            wire.pop()
            model.beat(beat["tdata"], beat["tkeep"], beat["tlast"], beat["tuser"])
        if ready and int(dut.rx_o__tvalid.value):
            current.append((int(dut.rx_o__tdata.value), int(dut.rx_o__tkeep.value),
                            int(dut.rx_o__tuser.value)))
            if int(dut.rx_o__tlast.value):
                delivered.append(current[:])
                current.clear()
                first_delivery = now if first_delivery is None else first_delivery
                last_delivery = now
        if int(dut.ack_o__valid.value):
            msg = {f: int(getattr(dut, f"ack_o__{f}").value) for f in ("seq", "nak", "crc")}
            assert msg["crc"] == ack_crc(msg["seq"], msg["nak"]), msg
            hw_acks.append(Ack(msg["seq"], msg["nak"]))
            acks.send(now, msg)
        if cfg.get("stop_when_done", True) and len(delivered) == len(sent) and not wire.queue:
            break
    await FallingEdge(dut.clk)
    counters = {f"tx_{n}": int(getattr(dut, f"tx_{n}").value) for n in LinkPair.TX_COUNTERS}
    counters.update({n: int(getattr(dut, f"rx_{n}").value) for n in LinkPair.RX_COUNTERS})
    counters["tx_status"] = int(dut.tx_status.value)
    counters["rx_status"] = int(dut.rx_status.value)
    assert delivered == sent, (f"{len(delivered)} of {len(sent)} packets delivered intact and "
                               f"in order; counters {counters}, wire {dict(wire.done)}, "
                               f"{at} beats taken")
    assert model.delivered == sent
    assert {k: counters[k] for k in model.counters} == model.counters, \
        (counters, model.counters)
    assert hw_acks == model.acks
    assert counters["tx_status"] == counters["rx_status"] == 0
    if cfg.get("out"):
        with open(cfg["out"], "w") as f:
            json.dump({"counters": counters, "cycles": now, "wire": dict(wire.done),
                       "wire_beats": wire.sent, "first_delivery": first_delivery,
                       "last_delivery": last_delivery,
                       "acks": dict(acks.done)}, f)


@cocotb.test()
async def bench_link(dut):
    """:func:`run_link` as ``t3 bench linklayer`` runs it."""
    await run_link(dut)
