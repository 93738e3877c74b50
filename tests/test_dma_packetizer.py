"""The DMA engine's send side alone (:class:`dma.packetizer.Packetizer`) in Amaranth's
simulator: random tiles and remote runs offered with pauses on all four inputs and
backpressure on ``tx``, scored by :func:`dma.model.check_packetized`; AXI4-Stream's rule that
an offered beat holds; its events; and its timing (turns, the header waiting for its first
payload beat, one beat a cycle)."""

import random

import pytest

from dma.config import DMAParams
from dma.model import check_packetized
from dma.packetizer import TX_EVENTS, Packetizer
from hw.interfaces import Source
from hw.params import T3Params
from hw.testing import run_testbench
from sim.blocks.dma.traffic import random_packets


P, DP = T3Params(), DMAParams()


def run(tiles, runs, *, pause=0.0, tx_stall=0.0, seed=0, data_from=0, stall_until=0,
        max_cycles=50_000):
    """Offer the headers and the beats of ``tiles`` and ``runs`` on the four inputs (each
    source holds a beat it offers until taken; pauses delay new offers; ``tile_data`` starts
    in cycle ``data_from``), take ``tx`` under stalls (and none before ``stall_until``);
    every new header offered is checked against the turns (the kind not sent last when both
    wait, else the one waiting), and an offered beat must stay until taken.  Returns the link
    beats, the cycle of each, the events per cycle and the number of cycles."""
    dut = Packetizer(P, DP)
    rng = random.Random(seed)
    hdr_pk = dut.hdr_layout
    sources = {
        "tile_hdr": [h for h, _ in tiles],
        "tile_data": [d for _, beats in tiles for d, _ in beats],
        "run_hdr": [h for h, _ in runs],
        "run_data": [{"data": d, "keep": k} for _, beats in runs for d, k in beats],
    }
    sent, sent_at, events, state = [], [], [], {}
    H = hdr_pk.as_shape().width
    hdr_word = {name: [hdr_pk.const(h).as_value().value for h in sources[name]]
                for name in ("tile_hdr", "run_hdr")}

    async def bench(ctx):
        nxt = dict.fromkeys(sources, 0)
        offering = dict.fromkeys(sources, False)
        held = None                 # the beat offered and not taken last cycle
        last = "run"                # the kind of the last header sent: a tile goes first
        cycle = 0
        total = sum(1 + len(b) for _, b in tiles + runs)
        while len(sent) < total and cycle < max_cycles:
            for name, items in sources.items():
                port = getattr(dut, name)
                if not offering[name] and nxt[name] < len(items) and rng.random() >= pause \
                        and (name != "tile_data" or cycle >= data_from):
                    item = items[nxt[name]]
                    if name.endswith("hdr"):
                        ctx.set(port.payload, hdr_pk.const(item))
                    elif name == "run_data":
                        ctx.set(port.payload, port.payload.shape().const(item))
                    else:
                        ctx.set(port.payload, item)
                    offering[name] = True
                ctx.set(port.valid, offering[name])
            ready = cycle >= stall_until and rng.random() >= tx_stall
            ctx.set(dut.tx.tready, ready)
            tx = dut.tx
            valid = ctx.get(tx.tvalid)
            beat = (ctx.get(tx.tdata), ctx.get(tx.tkeep), ctx.get(tx.tuser), ctx.get(tx.tlast))
            if held is not None:
                assert valid and beat == held, \
                    f"cycle {cycle}: {beat} offered after {held} was not taken"
            kind = None
            if valid and beat[2]:       # a header: which one, and whose turn it was
                word = beat[0] & ((1 << H) - 1)
                kind = next(k for k, name in (("tile", "tile_hdr"), ("run", "run_hdr"))
                            if offering[name] and word == hdr_word[name][nxt[name]])
                if held is None:        # a new offer (a held one keeps its kind)
                    waiting = {"tile": offering["tile_hdr"] and offering["tile_data"],
                               "run": offering["run_hdr"]}
                    turn = ("run" if last == "tile" else "tile") if all(waiting.values()) \
                        else next(k for k, w in waiting.items() if w)
                    assert kind == turn, f"cycle {cycle}: a {kind} header offered, the " \
                                         f"{turn}'s turn (last sent: a {last})"
            ev = {k for k in TX_EVENTS if ctx.get(getattr(dut.events, k))}
            if valid and ready:
                if kind is not None:
                    last = kind
                sent.append(beat)
                sent_at.append(cycle)
                held = None
            else:
                assert not ev, f"cycle {cycle}: events {ev} without a beat sent"
                held = beat if valid else None
            events.append(ev)
            for name in sources:
                port = getattr(dut, name)
                if offering[name] and ctx.get(port.ready):
                    offering[name] = False
                    nxt[name] += 1
            await ctx.tick()
            cycle += 1
        state["cycles"] = cycle
        assert len(sent) == total, f"{total - len(sent)} beats not sent in {max_cycles} cycles"

    run_testbench(dut, bench)
    return sent, sent_at, events, state["cycles"]


@pytest.mark.parametrize("seed", range(4))
def test_random_tiles_and_runs_against_the_scoreboard(seed):
    """60 tiles and 60 runs under pauses and backpressure: every packet whole, each kind in its
    order; one event per header and per payload beat, of its kind."""
    rng = random.Random(seed)
    tiles = random_packets(P, rng, 60, Source.DMA)
    runs = random_packets(P, rng, 60, Source.REMOTE)
    sent, _, events, _ = run(tiles, runs, pause=0.3, tx_stall=0.3, seed=seed)
    order = check_packetized(P, DP, tiles, runs, sent)
    assert order.count("tile") == 60 and order.count("run") == 60
    count = {k: sum(k in e for e in events) for k in TX_EVENTS}
    assert count == {"tile": 60, "run": 60,
                     "tile_beat": sum(len(b) for _, b in tiles),
                     "run_beat": sum(len(b) for _, b in runs)}


def test_the_kinds_take_turns_and_the_link_never_idles():
    """Everything offered from the start, ``tx`` always ready: a tile first, then a run, a
    tile... while both wait, the rest of the longer list after; one beat every cycle."""
    rng = random.Random(3)
    tiles = random_packets(P, rng, 8, Source.DMA)
    runs = random_packets(P, rng, 5, Source.REMOTE)
    sent, sent_at, _, cycles = run(tiles, runs)
    order = check_packetized(P, DP, tiles, runs, sent)
    assert order == ["tile", "run"] * 5 + ["tile"] * 3
    assert sent_at == list(range(len(sent)))


def test_a_tiles_header_waits_for_its_first_payload_beat():
    """A tile whose payload is not there yet: nothing goes out (no header then a gap) until
    its first beat arrives; then the header and the beats, one a cycle."""
    rng = random.Random(4)
    tiles = random_packets(P, rng, 1, Source.DMA)
    sent, sent_at, _, _ = run(tiles, [], data_from=20)
    check_packetized(P, DP, tiles, [], sent)
    assert sent_at == list(range(20, 20 + len(sent)))


def test_a_held_header_keeps_the_turns():
    """A run's header offered alone and held by backpressure while a tile becomes ready: the
    run still goes (an offered beat stays), and it counts as the run's turn, so the tile goes
    before the next run (the random runs above keep both kinds waiting and never meet this)."""
    rng = random.Random(5)
    tiles = random_packets(P, rng, 1, Source.DMA)
    runs = random_packets(P, rng, 2, Source.REMOTE)
    sent, _, _, _ = run(tiles, runs, data_from=2, stall_until=4)
    assert check_packetized(P, DP, tiles, runs, sent) == ["run", "tile", "run"]
