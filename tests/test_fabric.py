# amaranth: UnusedElaboratable=no
"""The fully connected topology's router and merge (``system/fabric.py``) under Amaranth's
simulator, against their golden model (``system/fabric_model.py``): random packets, random
gaps on every input and random backpressure on every output; every beat where the model says,
whole packets, nothing lost, duplicated or reordered on a path; a beat a cycle."""

import random

import pytest

from hw.params import T3Params
from hw.testing import run_testbench
from system.fabric import FullMesh, Merge, Router, mesh_routes
from system.fabric_model import check_merge, mesh, packets_of, route


P = T3Params(beat_bits=32)


def random_packet(rng, dst, gpu_bits=3):
    """A header beat for ``dst`` and 0 to 4 payload beats."""
    header = (rng.getrandbits(P.beat_bits) & ~((1 << gpu_bits) - 1)) | dst
    beats = [(header, rng.getrandbits(P.beat_bytes), 0, 1)]
    beats += [(rng.getrandbits(P.beat_bits), rng.getrandbits(P.beat_bytes), 0, 0)
              for _ in range(rng.randrange(5))]
    d, k, _, u = beats[-1]
    beats[-1] = (d, k, 1, u)
    return beats


def drive(ctx, port, beat, valid):
    ctx.set(port.tvalid, valid)
    if beat is not None:
        d, k, last, user = beat
        ctx.set(port.tdata, d)
        ctx.set(port.tkeep, k)
        ctx.set(port.tlast, last)
        ctx.set(port.tuser, user)


def sample(ctx, port):
    return (ctx.get(port.tdata), ctx.get(port.tkeep), ctx.get(port.tlast), ctx.get(port.tuser))


def run_streams(dut, ins, outs, streams, rng, valid_p, ready_p, cycles=20_000, probe=None):
    """Offer ``streams[k]`` (beats) on ``ins[k]`` with random gaps (a beat once offered held
    until taken), take from every ``outs`` port with random backpressure; returns the beats
    each output gave and the cycles until the last one.  ``probe``: a dict of signals, each
    replaced by its value at the end."""
    got = [[] for _ in outs]
    end = [0]

    async def bench(ctx):
        at = [0] * len(ins)
        offered = [False] * len(ins)
        for now in range(cycles):
            for k, port in enumerate(ins):
                more = at[k] < len(streams[k])
                offered[k] = more and (offered[k] or rng.random() < valid_p)
                drive(ctx, port, streams[k][at[k]] if more else None, offered[k])
            readies = [rng.random() < ready_p for _ in outs]
            for port, r in zip(outs, readies):
                ctx.set(port.tready, r)
            await ctx.delay(1e-10)
            for k, port in enumerate(ins):
                if offered[k] and ctx.get(port.tready):
                    at[k] += 1
                    offered[k] = False
            for n, (port, r) in enumerate(zip(outs, readies)):
                if r and ctx.get(port.tvalid):
                    got[n].append(sample(ctx, port))
                    end[0] = now + 1
            await ctx.tick()
            if all(a == len(s) for a, s in zip(at, streams)) and now > end[0] + 4:
                break
        assert all(a == len(s) for a, s in zip(at, streams)), "the inputs were not all taken"
        for name, signal in (probe or {}).items():
            probe[name] = ctx.get(signal)

    run_testbench(dut, bench)
    return got, end[0]


# routes of GPU 2 of 5 (gpu_bits 3): each other GPU its own link, GPU 2 itself, 5-7 none
ROUTES = (0, 1, None, 2, 3)


@pytest.mark.parametrize("seed,valid_p,ready_p", [(1, 1.0, 1.0), (2, 0.7, 0.6), (3, 0.4, 0.9),
                                                  (4, 0.9, 0.3)])
def test_the_router_sends_every_packet_to_its_destinations_link(seed, valid_p, ready_p):
    rng = random.Random(seed)
    beats = []
    for _ in range(120):
        if rng.random() < 0.05:       # a stray payload beat between packets
            beats.append((rng.getrandbits(32), 0xF, rng.random() < 0.5, 0))
        dst = rng.choice([0, 1, 3, 4] * 5 + [2, 5, 7])
        beats += random_packet(rng, dst)
    dut = Router(P, 3, ROUTES)
    want, unroutable, stray = route(beats, ROUTES, 3)
    assert unroutable > 0 and stray > 0, "the traffic must try both drops"

    counters = {"unroutable": dut.unroutable, "stray": dut.stray}
    got, _ = run_streams(dut, [dut.i], list(dut.o), [beats], rng, valid_p, ready_p,
                         probe=counters)
    assert got == want
    assert counters == {"unroutable": unroutable, "stray": stray}
    for k, packets in enumerate(map(packets_of, got)):
        assert all(p[0][3] and p[-1][2] for p in packets)        # whole packets
        assert all((p[0][0] & 7) == ROUTES.index(k) for p in packets)


def test_the_routers_counters_are_the_models():
    rng = random.Random(9)
    beats = random_packet(rng, 2) + random_packet(rng, 0) + [(5, 0xF, 1, 0), (6, 0xF, 0, 0)] + \
        random_packet(rng, 6) + random_packet(rng, 4)
    dut = Router(P, 3, ROUTES)
    want, unroutable, stray = route(beats, ROUTES, 3)
    assert (unroutable, stray) == (2, 2)
    seen = {}

    async def bench(ctx):
        for beat in beats:
            drive(ctx, dut.i, beat, 1)
            for o in dut.o:
                ctx.set(o.tready, 1)
            await ctx.tick().until(dut.i.tready)
        ctx.set(dut.i.tvalid, 0)
        await ctx.tick()
        seen.update(unroutable=ctx.get(dut.unroutable), stray=ctx.get(dut.stray))

    run_testbench(dut, bench)
    assert seen == {"unroutable": 2, "stray": 2}


def test_the_router_takes_a_beat_a_cycle():
    rng = random.Random(5)
    beats = [b for _ in range(50) for b in random_packet(rng, rng.choice([0, 1, 3, 4]))]
    dut = Router(P, 3, ROUTES)
    got, end = run_streams(dut, [dut.i], list(dut.o), [beats], rng, 1.0, 1.0)
    assert sum(map(len, got)) == len(beats)
    assert end == len(beats)          # the last beat left in cycle len(beats) - 1


@pytest.mark.parametrize("seed,valid_p,ready_p", [(1, 1.0, 1.0), (2, 0.5, 0.7), (3, 0.9, 0.3)])
def test_the_merge_passes_whole_packets_in_each_inputs_order(seed, valid_p, ready_p):
    rng = random.Random(seed)
    inputs = [[random_packet(rng, 1) for _ in range(rng.randrange(10, 30))] for _ in range(4)]
    dut = Merge(P, 4)
    got, _ = run_streams(dut, list(dut.i), [dut.o], [[b for p in ps for b in p] for ps in inputs],
                         rng, valid_p, ready_p)
    order = check_merge(inputs, got[0])
    assert sorted(set(order)) == [0, 1, 2, 3]


def test_the_merge_grants_round_robin_a_beat_a_cycle():
    """Every input always offering: packets leave from inputs 0, 1, 2, 0, 1, 2, ... with no
    cycle lost between them."""
    rng = random.Random(7)
    inputs = [[random_packet(rng, 1) for _ in range(8)] for _ in range(3)]
    dut = Merge(P, 3)
    got, end = run_streams(dut, list(dut.i), [dut.o], [[b for p in ps for b in p] for ps in inputs],
                           rng, 1.0, 1.0)
    assert check_merge(inputs, got[0]) == [0, 1, 2] * 8
    assert end == sum(len(p) for ps in inputs for p in ps)


def test_the_model_catches_a_broken_merge():
    rng = random.Random(11)
    a, b = [random_packet(rng, 1) for _ in range(2)], [random_packet(rng, 1) for _ in range(2)]
    beats = a[0] + b[0] + a[1] + b[1]
    assert check_merge([a, b], beats) == [0, 1, 0, 1]
    with pytest.raises(AssertionError, match=r"^output packet 1 \(\d+ beats\) is no input's next"):
        check_merge([a, b], a[0] + a[1][:1] + b[0] + a[1][1:] + b[1])     # interleaved
    with pytest.raises(AssertionError, match=r"^packets never left the merge \(input: count\): "
                                             r"\{1: 1\}"):
        check_merge([a, b], a[0] + b[0] + a[1])


def test_bad_routes_are_refused_by_name():
    with pytest.raises(ValueError, match=r"^routes must use outputs 0, 1, \.\.\. without a gap, "
                                         r"not \[0, 2\]$"):
        Router(P, 2, (0, 2))
    with pytest.raises(ValueError, match=r"^routes must name 1 to 4 destinations \(gpu_bits 2\), "
                                         r"not 5$"):
        Router(P, 2, (0, 1, 2, 3, None))
    with pytest.raises(ValueError, match=r"^inputs must be an integer from 1 to 64"):
        Merge(P, 0)


@pytest.mark.parametrize("gpus,seed,ready_p", [(2, 1, 1.0), (4, 2, 0.7), (5, 3, 0.4)])
def test_the_full_mesh_delivers_every_packet_to_its_gpu(gpus, seed, ready_p):
    """Every GPU sends to random GPUs (itself, now and then: dropped and counted) through
    dedicated links of latency 6 at 1/2 a beat a cycle: each GPU receives exactly the packets
    for it, whole, each sender's in order."""
    rng = random.Random(seed)
    streams = []
    for g in range(gpus):
        others = [d for d in range(gpus) if d != g]
        streams.append([b for _ in range(25) for b in random_packet(
            rng, g if rng.random() < 0.04 else rng.choice(others))])
    streams[0] += random_packet(rng, 0)             # at least one to itself
    dut = FullMesh(P, gpus, 3, latency=6, num=1, den=2, charge_headers=False)
    want, unroutable, stray = mesh(streams, gpus, 3, mesh_routes)
    counters = {"unroutable": dut.unroutable, "stray": dut.stray}
    got, _ = run_streams(dut, list(dut.tx), list(dut.rx), streams, rng, 0.8, ready_p,
                         probe=counters)
    for d in range(gpus):
        check_merge(want[d], got[d])
        assert all((p[0][0] & 7) == d for p in packets_of(got[d]))
    assert unroutable >= 1 and stray == 0
    assert counters == {"unroutable": unroutable, "stray": stray}
