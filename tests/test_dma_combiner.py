"""The DMA engine's remote-store write combining alone (:class:`dma.combiner.Combiner`) in
Amaranth's simulator: random CU stores (streams, broken streams, jumps, ``READ``\\ s, stores in
no window) into one and three windows, against the golden model :func:`dma.model.combine`
exactly while the outputs are taken, and against the scoreboard
:func:`dma.model.check_combined` under backpressure; the dropped stores' events; and the
timing its docstring states (one store a cycle, a run's flush and a full run's close)."""

import dataclasses
import random

import pytest

from dma.combiner import Combiner, target_of
from dma.config import DMAParams, RemoteWindow
from dma.model import check_combined, combine
from hw.interfaces import ElemType, Op, mem_request_layout, unpack
from hw.params import T3Params
from hw.testing import run_testbench
from sim.blocks.dma.traffic import random_remote_stores, random_windows


P, DP = T3Params(), DMAParams()
#: three windows, short runs and a short flush: every rule meets every other often
DP3 = dataclasses.replace(DP, remote_windows=3, remote_burst=3, remote_flush=2)
GPU = 5


def run(dp, windows, stores, *, pause=0.0, hdr_stall=0.0, data_stall=0.0, seed=0,
        hdr_from=0, max_cycles=50_000, change=None, kept=None):
    """Offer ``stores`` on ``remote`` (each held until taken; pauses delay new offers), take
    ``run_hdr`` and ``run_data`` under stalls, until every store in a window has left.
    Returns ``(runs, taken_at, dropped_at, hdr_at, port_at)``: the runs assembled from the
    two outputs, the cycle each store was taken into the combining (``events.taken``), the
    cycles of the ``remote_range`` events, the cycle each header was taken in, the cycle each
    store was taken on ``remote``.  ``run_hdr`` is not taken before cycle ``hdr_from``.
    ``change = (cycle, windows)``: the windows change in that cycle, with ``windows_written``
    high in it (as the DMA drives them, a cycle after the host's write); ``kept`` then says
    how many stores are in a window."""
    dut = Combiner(P, dp)
    rng = random.Random(seed)
    req = mem_request_layout(P)
    if kept is None:
        kept = sum(len(b) for _, b in combine(P, dp, windows, GPU, stores)[0])
    headers, beats, hdr_at, taken_at, dropped_at, port_at = [], [], [], [], [], []
    state = {}

    async def bench(ctx):
        ctx.set(dut.gpu_id, GPU)
        for k, w in enumerate(windows):
            ctx.set(dut.windows[k], dut.windows[k].shape().const(target_of(w)))
        nxt, offering, cycle = 0, False, 0
        held = {"run_hdr": None, "run_data": None}
        while (nxt < len(stores) or len(beats) < kept or
               sum(h["beats"] for h in headers) < kept) and cycle < max_cycles:
            if not offering and nxt < len(stores) and rng.random() >= pause:
                ctx.set(dut.remote.payload, req.const(stores[nxt]))
                offering = True
            ctx.set(dut.remote.valid, offering)
            if change is not None and cycle in (change[0], change[0] + 1):
                if cycle == change[0]:
                    for k, w in enumerate(change[1]):
                        ctx.set(dut.windows[k], dut.windows[k].shape().const(target_of(w)))
                ctx.set(dut.windows_written, cycle == change[0])
            ready = {"run_hdr": rng.random() >= hdr_stall and cycle >= hdr_from,
                     "run_data": rng.random() >= data_stall}
            for name, r in ready.items():
                port = getattr(dut, name)
                ctx.set(port.ready, r)
                valid = ctx.get(port.valid)
                payload = unpack(port.payload.shape(), ctx.get(port.payload.as_value()))
                if held[name] is not None:
                    assert valid and payload == held[name], \
                        f"cycle {cycle}: {name} changed or withdrawn before it was taken"
                held[name] = payload if valid and not r else None
                if valid and r:
                    if name == "run_hdr":
                        headers.append(payload)
                        hdr_at.append(cycle)
                    else:
                        beats.append((payload["data"], payload["keep"]))
            if ctx.get(dut.events.taken):
                taken_at.append(cycle)
                assert len(taken_at) <= len(port_at), \
                    f"cycle {cycle}: a store taken into the combining that never came"
                if ctx.get(dut.events.remote_range):
                    dropped_at.append(cycle)
            else:
                assert not ctx.get(dut.events.remote_range), \
                    f"cycle {cycle}: remote_range with no store taken"
            if offering and ctx.get(dut.remote.ready):
                port_at.append(cycle)
                offering = False
                nxt += 1
            await ctx.tick()
            cycle += 1
        state["cycles"] = cycle
        assert nxt == len(stores) and len(beats) == kept, \
            f"{len(stores) - nxt} stores not taken, {kept - len(beats)} beats not sent " \
            f"in {max_cycles} cycles"
        ctx.set(dut.remote.valid, 0)
        for _ in range(2 * dp.remote_flush + 8):         # nothing more comes out
            assert not ctx.get(dut.run_hdr.valid) and not ctx.get(dut.run_data.valid)
            if ctx.get(dut.events.taken):                # the last dropped stores
                taken_at.append(state["cycles"])
                if ctx.get(dut.events.remote_range):
                    dropped_at.append(state["cycles"])
            await ctx.tick()
            state["cycles"] += 1
        assert len(taken_at) == len(stores), \
            f"{len(port_at)} stores came, {len(taken_at)} taken into the combining"
        # each a cycle after it came at the earliest, in order
        assert all(t > c for t, c in zip(taken_at, port_at)), (port_at, taken_at)

    run_testbench(dut, bench)
    runs, k = [], 0
    for h in headers:
        runs.append((h, beats[k:k + h["beats"]]))
        k += h["beats"]
    return runs, taken_at, dropped_at, hdr_at, port_at


def scenario(dp, seed, n):
    rng = random.Random(seed)
    windows = random_windows(P, dp, rng)
    return windows, random_remote_stores(P, rng, windows, n)


@pytest.mark.parametrize("dp", [DP, DP3], ids=["one_window", "three_windows"])
@pytest.mark.parametrize("seed", range(3))
def test_random_stores_against_the_model(dp, seed):
    """300 stores with pauses, both outputs always taken: the runs are exactly the model's
    (with the cycle each store was taken in), and every dropped store raised its event in the
    cycle it was taken."""
    windows, stores = scenario(dp, seed, 300)
    runs, taken_at, dropped_at, _, _ = run(dp, windows, stores, pause=0.5, seed=seed)
    want, dropped = combine(P, dp, windows, GPU, stores, taken_at)
    assert len(runs) == len(want), f"{len(runs)} runs, the model {len(want)}"
    for r, (g, w) in enumerate(zip(runs, want)):
        assert g == w, f"run {r}: {g} != model {w}"
    assert dropped_at == [taken_at[i] for i in dropped]
    assert dropped and any(len(b) == dp.remote_burst for _, b in want) and \
        any(1 < len(b) < dp.remote_burst for _, b in want)


@pytest.mark.parametrize("dp", [DP, DP3], ids=["one_window", "three_windows"])
@pytest.mark.parametrize("seed", range(3))
def test_random_stores_under_backpressure(dp, seed):
    """The same with both outputs stalled, so that a full run queue holds runs open past their
    flush (fewer runs than the exact model's, each legal): the scoreboard, and the outputs
    hold what they offer until taken."""
    windows, stores = scenario(dp, 10 + seed, 300)
    runs, taken_at, dropped_at, _, _ = run(dp, windows, stores, pause=0.3, hdr_stall=0.85,
                                           data_stall=0.4, seed=seed)
    check_combined(P, dp, windows, GPU, stores, taken_at, runs)
    exact, dropped = combine(P, dp, windows, GPU, stores, taken_at)
    assert dropped_at == [taken_at[i] for i in dropped]
    # the stalls held some run open past its flush: it took a store that came later
    assert len(runs) < len(exact)


def test_the_scoreboard_refuses_a_run_cut_or_joined_wrongly():
    """``check_combined`` fails on a run split where the store continues it in time, on two
    runs joined across a change of attribute, and on a lost beat (it can fail)."""
    windows, stores = scenario(DP, 3, 120)
    taken_at = list(range(len(stores)))
    runs, _ = combine(P, DP, windows, GPU, stores, taken_at)
    check_combined(P, DP, windows, GPU, stores, taken_at, runs)
    _, dropped = combine(P, DP, windows, GPU, stores)
    kept = [i for i in range(len(stores)) if i not in dropped]
    r = next(i for i, (_, b) in enumerate(runs) if len(b) >= 2)
    second = kept[sum(len(b) for _, b in runs[:r]) + 1]
    late = taken_at[:second] + [t + 100 for t in taken_at[second:]]
    split, _ = combine(P, DP, windows, GPU, stores, late)
    assert len(split) == len(runs) + 1
    with pytest.raises(AssertionError, match=f"ended before store {second}"):
        check_combined(P, DP, windows, GPU, stores, taken_at, split)
    j = next(i for i in range(len(runs) - 1) if len(runs[i][1]) + len(runs[i + 1][1]) <=
             DP.remote_burst)
    joined = (dict(runs[j][0], beats=len(runs[j][1]) + len(runs[j + 1][1]),
                   seg_beats=len(runs[j][1]) + len(runs[j + 1][1])),
              runs[j][1] + runs[j + 1][1])
    with pytest.raises(AssertionError, match="does not continue"):
        check_combined(P, DP, windows, GPU, stores, taken_at, runs[:j] + [joined] + runs[j + 2:])
    h, b = runs[r]
    lost = runs[:r] + [(dict(h, beats=len(b) - 1, seg_beats=len(b) - 1), b[:-1])] + runs[r + 1:]
    with pytest.raises(AssertionError, match="header|ended before|in no run"):
        check_combined(P, DP, windows, GPU, stores, taken_at, lost)


def _stream(window, n, start=0, **attrs):
    base = {"data": 0, "mask": 1, "op": Op.UPDATE.value, "etype": ElemType.FP16.value,
            "tracked": 1, "wg_id": 7, "wf_id": 2, "stream": 0, "source": 0, "tag": 0}
    return [dict(base, **attrs, data=i + 1, addr=window.src_base + (start + i) * P.beat_bytes)
            for i in range(n)]


def test_one_store_a_cycle_and_the_runs_timing():
    """Stores offered back to back are taken one a cycle, each into the combining the cycle
    after (the input slice); a full run's header is on ``run_hdr`` two cycles after the cycle
    after its last store, a run that stops growing ``remote_flush + 2`` cycles after its last
    store."""
    w = RemoteWindow(0x1000, 0x1000, 3, 0x8000)
    stores = _stream(w, DP.remote_burst + 3)
    runs, taken_at, _, hdr_at, port_at = run(DP, [w], stores)
    assert port_at == list(range(len(stores)))
    assert taken_at == list(range(1, len(stores) + 1))
    assert [len(b) for _, b in runs] == [DP.remote_burst, 3]
    assert runs[0][0]["addr"] == 0x8000 and runs[0][0]["dst_gpu"] == 3
    assert runs[1][0]["addr"] == 0x8000 + DP.remote_burst * P.beat_bytes
    # the full run closes when the next store opens a run; the last run flushes remote_flush
    # cycles after its last store
    assert hdr_at == [taken_at[DP.remote_burst] + 2, taken_at[-1] + DP.remote_flush + 2]


def test_a_window_at_the_top_of_the_address_space():
    """A window whose end is the address space's: its last beat is inside (the end is one bit
    wider than an address), and the first address past the window below it is outside."""
    top = 1 << P.addr_bits
    w = RemoteWindow(top - 4 * P.beat_bytes, 4 * P.beat_bytes, 1, 0x100)
    stores = _stream(w, 4) + [dict(_stream(w, 1)[0], addr=w.src_base - P.beat_bytes)]
    runs, taken_at, dropped_at, _, _ = run(DP, [w], stores)
    assert [(h["addr"], len(b)) for h, b in runs] == [(0x100, 4)]
    assert dropped_at == [taken_at[4]]


@pytest.mark.parametrize("hold", range(10, 30, 3))
def test_a_run_held_past_its_flush_closes_when_there_is_room(hold):
    """Five runs of one store each (the attributes change) fill the run queue with four
    headers while the fifth run is open; ``run_hdr`` is not taken for ``hold`` cycles, long
    past the fifth run's flush.  The fifth run closes as soon as the queue has room: the five
    headers leave one a cycle from ``hold`` on, however long the hold was."""
    w = RemoteWindow(0x1000, 0x1000, 3, 0x8000)
    stores = [dict(s, wg_id=i) for i, s in enumerate(_stream(w, 5))]
    runs, taken_at, _, hdr_at, _ = run(DP, [w], stores, hdr_from=hold)
    assert taken_at == list(range(1, 6)) and [len(b) for _, b in runs] == [1] * 5
    assert hdr_at == list(range(hold, hold + 5))


@pytest.mark.parametrize("hold", [12, 20])
def test_a_store_to_drop_waits_for_room_as_one_to_keep(hold):
    """The combining takes a store when its queues have room, whatever the verdict on it
    (the decision from registers): with the run queue full (four headers) and a fifth run
    open, a store in no window is not taken into the combining until the queue has room
    again -- as a store in the window would not be -- and its ``remote_range`` event is
    raised once, in that cycle."""
    w = RemoteWindow(0x1000, 0x1000, 3, 0x8000)
    stores = [dict(s, wg_id=i) for i, s in enumerate(_stream(w, 5))]
    stores.append(dict(stores[0], addr=w.src_base + w.size))    # just past the window
    runs, taken_at, dropped_at, hdr_at, port_at = run(DP, [w], stores, hdr_from=hold)
    assert taken_at[:5] == list(range(1, 6)) and [len(b) for _, b in runs] == [1] * 5
    assert port_at[5] == 5              # into the input slice at once
    # the queue has room from the cycle after the first header leaves (cycle ``hold``)
    assert taken_at[5] == hold + 1, taken_at
    assert dropped_at == [taken_at[5]]


def test_a_window_written_acts_on_the_stores_taken_after():
    """The verdicts on the head are made a cycle ahead: in the cycle after a window changes
    (``windows_written``) the combining takes nothing, and from the next cycle on it judges
    by the new window.  A stream in a window that shrinks to two beats mid-stream: the stores
    taken before the change are kept, none is taken in the cycle of the change, and every
    one after it is dropped (beyond the new end).  Without the pause the store taken in that
    cycle would be judged by the old window and kept."""
    w = RemoteWindow(0x1000, 0x1000, 3, 0x8000)
    stores = _stream(w, 20)
    at = 9
    runs, taken_at, dropped_at, _, _ = run(
        DP, [w], stores, change=(at, [RemoteWindow(0x1000, 2 * P.beat_bytes, 3, 0x8000)]),
        kept=at - 1)
    assert at not in taken_at and taken_at[at - 1] == at + 1, taken_at
    assert [len(b) for _, b in runs] == [DP.remote_burst] * ((at - 1) // DP.remote_burst) + \
        ([(at - 1) % DP.remote_burst] if (at - 1) % DP.remote_burst else [])
    assert dropped_at == taken_at[at - 1:]
