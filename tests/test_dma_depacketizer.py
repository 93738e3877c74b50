"""The DMA engine's receive side alone (:class:`dma.depacketizer.Depacketizer`) in Amaranth's
simulator: random link traffic, good packets and every framing fault of
``sim.blocks.dma.traffic.LINK_FAULTS``, with pauses on ``rx`` and backpressure on ``o``,
against its golden model (:func:`dma.model.depacketize`) beat by beat; and its timing."""

import random

import pytest

from dma.config import DMAParams, header_packer
from dma.depacketizer import RX_EVENTS, Depacketizer
from dma.model import depacketize
from hw.interfaces import Packer, mem_request_layout
from hw.params import T3Params
from hw.testing import run_testbench
from sim.blocks.dma.traffic import LINK_FAULTS, random_link_beats


P, DP = T3Params(), DMAParams()
GPU = 5
WINDOW = (0x4000, 0x2000)
EVENTS = (*RX_EVENTS, "packet")


def run(beats, *, rx_pause=0.0, o_stall=0.0, seed=0, window=WINDOW, max_cycles=100_000):
    """Offer ``beats`` on ``rx`` (``tvalid`` held while waiting, as AXI4-Stream requires),
    take ``o`` under random stalls.  Returns the requests taken, each beat's events (names),
    ``open`` at the end, and each beat's handshake cycle and each request's."""
    dut = Depacketizer(P, DP)
    rng = random.Random(seed)
    req = Packer(mem_request_layout(P))
    out, events, taken_at, out_at, state = [], [], [], [], {}

    async def bench(ctx):
        ctx.set(dut.gpu_id, GPU)
        ctx.set(dut.rx_base, window[0])
        ctx.set(dut.rx_end, window[0] + window[1])
        i, offering, cycle = 0, False, 0
        while cycle < max_cycles and (i < len(beats) or ctx.get(dut.o.valid)):
            if not offering:
                offering = i < len(beats) and rng.random() >= rx_pause
            if offering:
                tdata, tkeep, tuser, tlast = beats[i]
                ctx.set(dut.rx.tdata, tdata)
                ctx.set(dut.rx.tkeep, tkeep)
                ctx.set(dut.rx.tuser, tuser)
                ctx.set(dut.rx.tlast, tlast)
            ctx.set(dut.rx.tvalid, offering)
            ready = rng.random() >= o_stall
            ctx.set(dut.o.ready, ready)
            ev = {k for k in EVENTS if ctx.get(getattr(dut.events, k))}
            if offering and ctx.get(dut.rx.tready):
                events.append(ev)
                taken_at.append(cycle)
                i, offering = i + 1, False
            else:
                assert not ev, f"cycle {cycle}: events {sorted(ev)} without a beat taken"
            if ready and ctx.get(dut.o.valid):
                out.append(req.unpack(ctx.get(dut.o.payload.as_value())))
                out_at.append(cycle)
            await ctx.tick()
            cycle += 1
        assert i == len(beats), f"{len(beats) - i} beats not taken in {max_cycles} cycles"
        state["open"] = bool(ctx.get(dut.open))

    run_testbench(dut, bench)
    return out, events, state["open"], taken_at, out_at


def check_against_model(beats, got, window=WINDOW):
    out, events, is_open = got[:3]
    want, want_events, want_open = depacketize(P, DP, beats, GPU, window)
    assert len(events) == len(want_events)
    for k, (g, w) in enumerate(zip(events, want_events)):
        assert g == w, f"beat {k} {beats[k][2:]}: events {sorted(g)}, model {sorted(w)}"
    assert len(out) == len(want), f"{len(out)} requests, model {len(want)}"
    for k, (g, w) in enumerate(zip(out, want)):
        assert g == w, f"request {k}: {g} != model {w}"
    assert is_open == want_open


@pytest.mark.parametrize("seed", range(4))
def test_random_traffic_against_the_model(seed):
    """300 packets, 40 % of them broken, under pauses and backpressure: the requests, each
    beat's events and the open flag are the model's."""
    rng = random.Random(seed)
    beats = random_link_beats(P, DP, rng, GPU, 300, WINDOW)
    got = run(beats, rx_pause=0.3, o_stall=0.4, seed=seed)
    check_against_model(beats, got)
    # the traffic reached every case it is meant to: each event of the model, at least once
    seen = set().union(*got[1])
    assert seen == set(EVENTS), f"never raised: {set(EVENTS) - seen}"


@pytest.mark.parametrize("fault", LINK_FAULTS)
def test_each_fault_then_a_good_packet(fault):
    """Every fault alone, between good packets: the fault's event, and the good packet after
    it lands whole where its header says (a fault never moves the next packet)."""
    rng = random.Random(LINK_FAULTS.index(fault))
    good = random_link_beats(P, DP, rng, GPU, 1, WINDOW, faults=0)
    bad = random_link_beats(P, DP, rng, GPU, 1, WINDOW, faults=1, kinds=(fault,))
    beats = good + bad + good
    got = run(beats, rx_pause=0.2, o_stall=0.2)
    check_against_model(beats, got)
    want = {"wrong_gpu": "rx_wrong_gpu", "bad_check": "rx_check",
            "outside_window": "rx_window"}.get(fault, "rx_framing")
    assert any(want in e for e in got[1]), f"{fault}: no {want} in {got[1]}"
    n_good = sum(1 for b in good if not b[2])
    assert got[0][-n_good:] == got[0][:n_good], "the good packet after the fault moved"


def test_one_payload_beat_a_cycle_and_one_cycle_through():
    """No pauses, ``o.ready`` high: ``rx.tready`` stays high (a header and its payload take one
    cycle per beat), and each payload beat is offered on ``o`` the cycle after it was taken."""
    rng = random.Random(7)
    beats = random_link_beats(P, DP, rng, GPU, 40, WINDOW, faults=0)
    out, events, _, taken_at, out_at = run(beats)
    assert taken_at == list(range(len(beats)))
    payload_at = [c for c, b in zip(taken_at, beats) if not b[2]]
    assert out_at == [c + 1 for c in payload_at]
    check_against_model(beats, (out, events, False))


def test_a_header_is_refused_by_its_check_alone():
    """A header whose fields are good but one check bit flipped is dropped with its payload
    (``rx_check``); flipped back, the same packet is written."""
    packer = header_packer(P, DP)
    h = {"dst_gpu": GPU, "src_gpu": 1, "addr": WINDOW[0], "op": 1, "etype": 0, "source": 1,
         "tracked": 1, "wg_id": 3, "wf_id": 2, "beats": 2, "seg_beats": 2, "stride": 64}
    word = packer.pack(h)
    payload = [(11, (1 << 32) - 1, 0, 0), (12, (1 << 32) - 1, 0, 1)]
    for flip, written, event in ((1 << packer.width, 0, "rx_check"), (0, 2, "packet")):
        beats = [(word ^ flip, (1 << 32) - 1, 1, 0), *payload]
        out, events, *_ = run(beats)
        assert len(out) == written and events[0] == {event}
        check_against_model(beats, (out, events, False))
