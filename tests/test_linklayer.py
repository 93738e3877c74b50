# amaranth: UnusedElaboratable=no
"""The link layer (``linklayer/``) under Amaranth's simulator: a sender and a receiver joined
by a wire that drops, corrupts and duplicates beats and acknowledgements at random, the
DMA's packets on one side and a sink with random backpressure on the other.  Every packet
must arrive once, intact and in order; the receiver's every decision (deliveries,
acknowledgements, counters) must be the golden model's on the beats it took; the CRC must be
:func:`zlib.crc32`'s."""

import random
import zlib

import pytest

from amaranth import Module

from hw.params import T3Params
from hw.testing import run_testbench
from linklayer.config import LinkLayerParams, ack_crc, packet_crc
from linklayer.crc import PRESET, finish, serial_update, update_matrices
from linklayer.model import Ack, RxModel, wire_beats
from linklayer.rtl import LinkRx, LinkTx
from sim.blocks.linklayer.traffic import ACK_FIELDS, BEAT_FIELDS, Wire, random_packets


P = T3Params(beat_bits=64)
LP = LinkLayerParams(seq_bits=5, max_packet_beats=8, replay_beats=64, replay_packets=8,
                     rx_beats=32, timeout=300)


def test_the_crc_is_zlibs():
    rng = random.Random(3)
    for n in (1, 2, 9, 37):
        data = bytes(rng.randrange(256) for _ in range(n))
        assert finish(serial_update(PRESET, int.from_bytes(data, "little"), 8 * n)) == \
            zlib.crc32(data)
    # the matrices are the serial update, for any register and record
    a, b = update_matrices(80)
    for _ in range(20):
        c, r = rng.getrandbits(32), rng.getrandbits(80)
        out = sum(((bin(c & a[i]).count("1") + bin(r & b[i]).count("1")) & 1) << i
                  for i in range(32))
        assert out == serial_update(c, r, 80)


def test_parameters_are_refused_by_name():
    with pytest.raises(ValueError, match=r"^seq_bits must be an integer from 4 to 15, not 3$"):
        LinkLayerParams(seq_bits=3)
    with pytest.raises(ValueError, match=r"^replay_packets must be a power of two from 1 to 8"):
        LinkLayerParams(seq_bits=4, replay_packets=16)
    with pytest.raises(ValueError, match=r"^max_packet_beats must be an integer from 1 to 16"):
        LinkLayerParams(rx_beats=32, max_packet_beats=17)


def run_link(seed, packets=40, rates=None, ack_rates=None, latency=12, ready_p=0.8,
             valid_p=0.9, cycles=40_000, stop_when_done=True):
    """Send ``packets`` random packets through LinkTx, a faulty wire and LinkRx; returns
    ``(sent, delivered, model, hardware counters, wire, ack wire, acks)``."""
    rng = random.Random(seed)
    m = Module()
    m.submodules.tx = tx = LinkTx(P, LP)
    m.submodules.rx = rx = LinkRx(P, LP)
    sent = random_packets(rng, P, LP, packets)
    wire = Wire(rng, latency, rates or {}, BEAT_FIELDS(P))
    acks = Wire(rng, latency, ack_rates or {}, ACK_FIELDS(LP))
    model = RxModel(P, LP)
    delivered, current, hw_acks = [], [], []
    counters = {}

    async def bench(ctx):
        beats = [(b, k == len(p) - 1) for p in sent for k, b in enumerate(p)]
        at = 0
        for now in range(cycles):
            # the DMA's side
            valid = at < len(beats) and rng.random() < valid_p
            if valid:
                (d, k, u), last = beats[at]
                ctx.set(tx.i.tdata, d)
                ctx.set(tx.i.tkeep, k)
                ctx.set(tx.i.tuser, u)
                ctx.set(tx.i.tlast, last)
            ctx.set(tx.i.tvalid, valid)
            took = valid and ctx.get(tx.i.tready)
            # the wire, out of the sender
            ctx.set(tx.o.tready, 1)
            if ctx.get(tx.o.tvalid):
                wire.send(now, {f: ctx.get(getattr(tx.o, f))
                                for f in ("tdata", "tkeep", "tlast", "tuser")})
            # into the receiver
            beat = wire.head(now)
            ctx.set(rx.i.tvalid, beat is not None)
            if beat is not None:
                for f, v in beat.items():
                    ctx.set(getattr(rx.i, f), v)
            into_rx = beat is not None and ctx.get(rx.i.tready)
            # the sink
            ready = rng.random() < ready_p
            ctx.set(rx.o.tready, ready)
            if ready and ctx.get(rx.o.tvalid):
                current.append((ctx.get(rx.o.tdata), ctx.get(rx.o.tkeep), ctx.get(rx.o.tuser)))
                if ctx.get(rx.o.tlast):
                    delivered.append(current[:])
                    current.clear()
            # acknowledgements, back
            if ctx.get(rx.ack.valid):
                msg = {f: ctx.get(getattr(rx.ack, f)) for f in ("seq", "nak", "crc")}
                hw_acks.append(Ack(msg["seq"], msg["nak"]))
                assert msg["crc"] == ack_crc(msg["seq"], msg["nak"])
                acks.send(now, msg)
            back = acks.head(now)
            ctx.set(tx.ack.valid, back is not None)
            if back is not None:
                for f, v in back.items():
                    ctx.set(getattr(tx.ack, f), v)
                acks.pop()
            await ctx.tick()
            if took:
                at += 1
            if into_rx:
                wire.pop()
                model.beat(beat["tdata"], beat["tkeep"], beat["tlast"], beat["tuser"])
            if stop_when_done and len(delivered) == len(sent) and not wire.queue:
                break
        counters["cycles"] = now
        for name in ("delivered", "crc_errors", "seq_errors", "duplicates", "too_long",
                     "naks"):
            counters[name] = ctx.get(getattr(rx, name))
        for name in ("packets", "replayed", "naks", "timeouts", "ack_errors"):
            counters["tx_" + name] = ctx.get(getattr(tx, name))
        counters["tx_status"] = ctx.get(tx.status.as_value())
        counters["rx_status"] = ctx.get(rx.status.as_value())

    run_testbench(m, bench)
    return sent, delivered, model, counters, wire, acks, hw_acks


def check_run(sent, delivered, model, counters, hw_acks):
    assert delivered == sent, "every packet once, intact, in order"
    assert model.delivered == sent
    assert {k: counters[k] for k in model.counters} == model.counters
    assert hw_acks == model.acks
    assert counters["tx_status"] == counters["rx_status"] == 0


def test_a_clean_link_carries_every_packet_with_its_crc():
    """No faults: the wire holds each packet's beats then a trailer with ``zlib.crc32``'s CRC
    (the golden model's wire beats), nothing is replayed, one ACK a packet."""
    sent, delivered, model, counters, wire, _, hw_acks = run_link(1, packets=24)
    check_run(sent, delivered, model, counters, hw_acks)
    assert counters["tx_packets"] == 24 and counters["tx_replayed"] == 0
    assert counters["delivered"] == 24 and model.acks == [Ack(s % 32, 0) for s in range(24)]
    # the trailers carry the model's CRCs over the packets as sent, sequence numbers wrapping
    assert [wire_beats(P, p, s % 32)[-1][0] >> 16 for s, p in enumerate(sent)] == \
        [packet_crc(P, p, s % 32) for s, p in enumerate(sent)]


@pytest.mark.parametrize("seed, rates", [
    (11, {"drop": 0.02}), (12, {"flip": 0.03}), (13, {"dup": 0.03}),
    (14, {"drop": 0.01, "flip": 0.01, "dup": 0.01})])
def test_faults_on_the_wire_are_replayed(seed, rates):
    """Beats dropped, flipped or duplicated at random: every packet still arrives once and
    intact, in order; the receiver decided as the model does on what it took; the sender
    replayed."""
    sent, delivered, model, counters, wire, _, hw_acks = run_link(seed, packets=40,
                                                                  rates=rates)
    check_run(sent, delivered, model, counters, hw_acks)
    assert sum(wire.done.values()) > 0 and counters["tx_replayed"] > 0
    bad = counters["crc_errors"] + counters["seq_errors"] + counters["too_long"] + \
        counters["duplicates"]
    assert bad > 0


def test_lost_and_corrupted_acknowledgements_are_covered():
    """Acknowledgements dropped or corrupted: the sender ignores a bad one (counted), and a
    later ACK acknowledges the earlier packets too."""
    sent, delivered, model, counters, wire, acks, hw_acks = run_link(
        7, packets=30, ack_rates={"drop": 0.3, "flip": 0.2})
    check_run(sent, delivered, model, counters, hw_acks)
    assert acks.done["dropped"] and counters["tx_ack_errors"] == acks.done["flipped"] > 0


def test_a_packet_whose_ack_never_comes_is_sent_again_after_the_timeout():
    """Every acknowledgement after the 20th lost: the sender's last packets wait, it replays
    them after ``timeout`` cycles (again and again, nothing acknowledging them), and the
    receiver takes each replay as a duplicate: delivered once."""
    sent, delivered, model, counters, wire, acks, hw_acks = run_link(
        8, packets=24, ack_rates={"lose_from": 20}, cycles=3_000, stop_when_done=False)
    assert delivered == sent == model.delivered
    assert counters["tx_timeouts"] >= 2 and counters["duplicates"] > 0
    assert counters["tx_naks"] == 0 and counters["delivered"] == 24


def test_line_rate():
    """Nothing lost and nothing waiting: a beat a cycle and a trailer a packet, the receiver's
    store-and-forward adding a packet's time once (the replay buffer holds the round trip)."""
    sent, delivered, model, counters, _, _, hw_acks = run_link(5, packets=30, ready_p=1.0,
                                                               valid_p=1.0, latency=8)
    check_run(sent, delivered, model, counters, hw_acks)
    beats = sum(len(p) for p in sent)
    assert counters["cycles"] <= beats + len(sent) + 8 + LP.max_packet_beats + 8


def test_a_packet_too_long_stops_the_sender_with_its_status():
    """A packet of more than ``max_packet_beats``: the sender takes its first
    ``max_packet_beats - 1`` beats, then refuses the next for good and latches
    ``status.too_long``; the packets before it arrive, it never does (no trailer)."""
    rng = random.Random(9)
    dut = LinkTx(P, LP)
    packets = [[(rng.getrandbits(64), 0xFF, 1)] * 3, [(5, 0xFF, 1)] * (LP.max_packet_beats + 1)]
    out = []

    async def bench(ctx):
        ctx.set(dut.o.tready, 1)
        beats = [(b, k == len(p) - 1) for p in packets for k, b in enumerate(p)]
        at = 0
        for _ in range(200):
            if at < len(beats):
                (d, k, u), last = beats[at]
                ctx.set(dut.i.tdata, d)
                ctx.set(dut.i.tkeep, k)
                ctx.set(dut.i.tuser, u)
                ctx.set(dut.i.tlast, last)
                ctx.set(dut.i.tvalid, 1)
            took = at < len(beats) and ctx.get(dut.i.tready)
            if ctx.get(dut.o.tvalid):
                out.append((ctx.get(dut.o.tdata), ctx.get(dut.o.tlast)))
            await ctx.tick()
            at += took
        assert at == 3 + LP.max_packet_beats - 1
        assert ctx.get(dut.status.too_long) == 1 and ctx.get(dut.i.tready) == 0
        assert ctx.get(dut.packets) == 1

    run_testbench(dut, bench)
    trailers = [d for d, last in out if last]
    assert len(trailers) == 1 and trailers[0] >> 16 == packet_crc(P, packets[0], 0)
    assert len(out) == 3 + 1 + LP.max_packet_beats - 1
