"""The DMA engine's tile reader alone (:class:`dma.reader.TileReader`) in Amaranth's simulator:
random tiles (any segments and strides) read from a memory that answers in order after a
random latency, with pauses on every input and backpressure on every output; each tile's
header, every read (its address by :func:`dma.model.packet_addresses` at the tile's source,
its fields, its tag) and every payload beat against the memory; the read credit's bound every
cycle; responses out of order and with errors; and the timing its docstring states."""

import collections
import dataclasses
import random

import pytest

from dma.config import DMAParams
from dma.model import packet_addresses
from dma.reader import READ_EVENTS, TileReader
from hw.interfaces import ElemType, Op, Source, Stream, mem_response_layout, unpack
from hw.params import T3Params
from hw.testing import run_testbench
from sim.blocks.dma.traffic import address_beat, random_jobs


P, DP = T3Params(), DMAParams()


def run(dp, jobs, *, pause=0.0, read_stall=0.0, resp_pause=0.0, hdr_stall=0.0,
        data_stall=0.0, latency=(1, 12), seed=0, fault=None, hdr_from=0, max_cycles=50_000):
    """Offer ``jobs`` (``(header, src)``), take ``read`` under stalls into a memory that
    answers each read after a random latency in order (``fault``: ``("lose", k)`` never
    answers read ``k``, ``("twice", k)`` answers it twice, ``("error", k)`` with its error
    flag), take ``tile_hdr`` and ``tile_data`` under stalls, until every beat has left (or,
    with a fault that loses, 200 quiet cycles); ``tile_hdr`` is not taken before cycle
    ``hdr_from``.  Returns a dict of what was seen."""
    dut = TileReader(P, dp)
    rng = random.Random(seed)
    resp_layout = mem_response_layout(P)
    total = sum(h["beats"] for h, _ in jobs)
    seen = {"hdr": [], "hdr_at": [], "reads": [], "read_at": [], "data": [], "data_at": [],
            "job_at": [], "events": collections.defaultdict(list), "max_reserved": 0}
    state = {}

    async def bench(ctx):
        nxt, offering, cycle, quiet = 0, False, 0, 0
        mem_q = collections.deque()          # (due cycle, response dict)
        pending_resp = None
        answered = 0
        held = {}
        while cycle < max_cycles:
            if len(seen["data"]) == total or (fault and fault[0] == "lose" and quiet > 200):
                break
            # the credit: the reads issued before this cycle less the beats that left
            reserved = ctx.get(dut.reserved)
            assert reserved == len(seen["events"]["read"]) - len(seen["data"]) <= \
                dp.buffer_beats, f"cycle {cycle}: {reserved} beats reserved"
            seen["max_reserved"] = max(seen["max_reserved"], reserved)
            if not offering and nxt < len(jobs) and rng.random() >= pause:
                header, src = jobs[nxt]
                ctx.set(dut.job.payload, dut.job.payload.shape().const({"hdr": header,
                                                                         "src": src}))
                offering = True
            ctx.set(dut.job.valid, offering)
            # the memory: a response offered holds until taken
            if pending_resp is None and mem_q and mem_q[0][0] <= cycle and \
                    rng.random() >= resp_pause:
                pending_resp = mem_q.popleft()[1]
            ctx.set(dut.resp.valid, pending_resp is not None)
            if pending_resp is not None:
                ctx.set(dut.resp.payload, resp_layout.const(pending_resp))
            ready = {"read": rng.random() >= read_stall,
                     "tile_hdr": rng.random() >= hdr_stall and cycle >= hdr_from,
                     "tile_data": rng.random() >= data_stall}
            for name, r in ready.items():
                ctx.set(getattr(dut, name).ready, r)
            for name in ready:
                port = getattr(dut, name)
                valid = ctx.get(port.valid)
                word = ctx.get(port.payload.as_value()) if name != "tile_data" else \
                    ctx.get(port.payload)
                if name in held:
                    assert valid and word == held[name], \
                        f"cycle {cycle}: {name} changed or withdrawn before it was taken"
                    del held[name]
                if valid and not ready[name]:
                    held[name] = word
            progress = False
            ev = {k for k in READ_EVENTS if ctx.get(getattr(dut.events, k))}
            for k in ev:
                seen["events"][k].append(cycle)
            if ctx.get(dut.tile_hdr.valid) and ready["tile_hdr"]:
                seen["hdr"].append(unpack(dut.hdr_layout, ctx.get(dut.tile_hdr.payload.as_value())))
                seen["hdr_at"].append(cycle)
            if ctx.get(dut.tile_data.valid) and ready["tile_data"]:
                seen["data"].append(ctx.get(dut.tile_data.payload))
                seen["data_at"].append(cycle)
                progress = True
            if ctx.get(dut.read.valid) and ready["read"]:
                req = unpack(dut.read.payload.shape(), ctx.get(dut.read.payload.as_value()))
                k = len(seen["reads"])
                seen["reads"].append(req)
                seen["read_at"].append(cycle)
                due = cycle + rng.randint(*latency)
                answer = {"data": address_beat(P, req["addr"]), "tag": req["tag"],
                          "op": Op.READ.value, "stream": Stream.COMM.value, "error": 0}
                if fault == ("error", k):
                    answer["error"] = 1
                if fault != ("lose", k):
                    mem_q.append((due, answer))
                if fault == ("twice", k):
                    mem_q.append((due, answer))
                progress = True
            if pending_resp is not None:
                assert ctx.get(dut.resp.ready), f"cycle {cycle}: a response refused"
                pending_resp = None
                answered += 1
            if offering and ctx.get(dut.job.ready):
                seen["job_at"].append(cycle)
                offering = False
                nxt += 1
            quiet = 0 if progress else quiet + 1
            await ctx.tick()
            cycle += 1
        state["cycles"] = cycle

    run_testbench(dut, bench)
    seen["cycles"] = state["cycles"]
    return seen


def want_reads(jobs):
    return [a for h, src in jobs for a in packet_addresses(P, dict(h, addr=src))]


def check_reads(seen, jobs):
    addrs = want_reads(jobs)
    assert [r["addr"] for r in seen["reads"]] == addrs[:len(seen["reads"])]
    for k, r in enumerate(seen["reads"]):
        assert (r["op"], r["stream"], r["source"], r["mask"], r["etype"], r["tag"]) == \
            (Op.READ.value, Stream.COMM.value, Source.DMA.value, (1 << P.beat_bytes) - 1,
             ElemType.FP16.value, k % (1 << P.tag_bits)), f"read {k}: {r}"


@pytest.mark.parametrize("seed", range(4))
def test_random_tiles_under_pauses_and_backpressure(seed):
    """40 tiles with pauses on ``job`` and ``resp`` and stalls on the three outputs: the
    headers in order, every read where the tile's segments are, the payload the memory's
    beats in order; the credit never past ``buffer_beats`` (and reached: the memory is slow)."""
    rng = random.Random(seed)
    jobs = random_jobs(P, rng, 40)
    seen = run(DP, jobs, pause=0.3, read_stall=0.3, resp_pause=0.2, hdr_stall=0.3,
               data_stall=0.5, latency=(1, 40), seed=seed)
    assert seen["hdr"] == [h for h, _ in jobs]
    check_reads(seen, jobs)
    assert len(seen["reads"]) == sum(h["beats"] for h, _ in jobs)
    assert seen["data"] == [address_beat(P, a) for a in want_reads(jobs)]
    assert seen["events"]["read"] and len(seen["events"]["read"]) == len(seen["reads"])
    assert not seen["events"]["resp_order"] and not seen["events"]["mem_error"]
    assert seen["max_reserved"] == DP.buffer_beats


def test_a_small_buffer_and_a_slow_link_never_overrun():
    """Four beats of buffer, the link taking one beat in five: reads stop at the credit and
    every response still finds room."""
    dp = dataclasses.replace(DP, buffer_beats=4)
    jobs = random_jobs(P, random.Random(7), 12)
    seen = run(dp, jobs, data_stall=0.8, latency=(1, 3), seed=7)
    check_reads(seen, jobs)
    assert seen["data"] == [address_beat(P, a) for a in want_reads(jobs)]
    assert seen["max_reserved"] == 4


def test_a_duplicate_response_is_dropped():
    """Read 5 answered twice: the second is taken and dropped with ``resp_order``; every tile
    carries its own beats."""
    jobs = random_jobs(P, random.Random(8), 6)
    seen = run(DP, jobs, fault=("twice", 5), seed=8)
    assert seen["data"] == [address_beat(P, a) for a in want_reads(jobs)]
    assert len(seen["events"]["resp_order"]) == 1


def test_after_a_lost_response_the_tiles_wait():
    """Read 5 never answered, fewer than ``2 ** tag_bits`` reads after it: beats 0-4 leave,
    then nothing (every later response is dropped with ``resp_order``, none is taken as beat
    5)."""
    jobs = random_jobs(P, random.Random(9), 3, max_beats=5)
    seen = run(DP, jobs, fault=("lose", 5), seed=9)
    assert seen["data"] == [address_beat(P, a) for a in want_reads(jobs)][:5]
    assert len(seen["events"]["resp_order"]) == len(seen["reads"]) - 6 > 0


def test_a_response_with_an_error_raises_mem_error_and_keeps_its_place():
    jobs = random_jobs(P, random.Random(10), 4)
    seen = run(DP, jobs, fault=("error", 3), latency=(2, 2), seed=10)
    assert seen["data"] == [address_beat(P, a) for a in want_reads(jobs)]
    assert len(seen["events"]["mem_error"]) == 1


def test_the_timing():
    """Jobs offered back to back, the memory answering in 2 cycles, every output taken: the
    first job taken in cycle 0, its header from cycle 2, its first read on ``read`` in cycle
    2; one read a cycle within a tile; the next job taken the cycle after the last read was
    issued, its first read one cycle later than back to back; a response's beat on
    ``tile_data`` two cycles after it was taken."""
    rng = random.Random(11)
    jobs = random_jobs(P, rng, 5, max_beats=6)
    seen = run(DP, jobs, latency=(2, 2))
    assert seen["job_at"][0] == 0 and seen["hdr_at"][0] == 2 and seen["read_at"][0] == 2
    k = 0
    for j, (h, _) in enumerate(jobs):
        at = seen["read_at"][k:k + h["beats"]]
        assert at == list(range(at[0], at[0] + h["beats"])), f"tile {j}: reads at {at}"
        if j:
            # issued in the cycle before it is on ``read``; the job taken the cycle after
            assert seen["job_at"][j] == seen["read_at"][k - 1]
            assert at[0] == seen["job_at"][j] + 2
        k += h["beats"]
    # a read taken in c is answered (offered and taken) in c + 2, on tile_data from c + 4
    assert seen["data_at"] == [c + 4 for c in seen["read_at"]]


def test_a_full_header_queue_holds_the_jobs():
    """Tiles of one beat, their headers not taken for 40 cycles: two headers wait in the
    queue, the third job is not taken before the first header leaves, and every header
    arrives, in order."""
    rng = random.Random(12)
    jobs = [(dict(h, beats=1, seg_beats=1), src) for h, src in random_jobs(P, rng, 6)]
    seen = run(DP, jobs, hdr_from=40)
    assert seen["hdr"] == [h for h, _ in jobs]
    assert seen["job_at"][1] < 40 <= seen["job_at"][2]


@pytest.mark.parametrize("lost", [5, 40])
def test_after_a_lost_response_the_tiles_wait_however_many_reads_follow(lost):
    """A read never answered with ``buffer_beats`` (32) reads after it, twice the tags there
    are (``tag_bits`` 4): the 16th response after the lost one carries the lost one's tag and
    must not be taken in its place.  Nothing after the loss leaves, every later response is
    dropped with ``resp_order``."""
    jobs = random_jobs(P, random.Random(13), 24, max_beats=8)
    assert sum(h["beats"] for h, _ in jobs) > lost + DP.buffer_beats
    seen = run(DP, jobs, fault=("lose", lost), latency=(1, 4), seed=13)
    assert seen["data"] == [address_beat(P, a) for a in want_reads(jobs)][:lost]
    assert len(seen["reads"]) >= lost + 1 + (1 << P.tag_bits)
    assert len(seen["events"]["resp_order"]) == len(seen["reads"]) - lost - 1
