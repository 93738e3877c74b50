# amaranth: UnusedElaboratable=no
"""The register slice between blocks (``hw/pipeline.py``) against its model, a two-entry
FIFO: every beat leaves once and in order, ``i.ready`` and ``o.valid`` are what the FIFO's
occupancy at the start of the cycle says (so both are registers), and one beat passes per
cycle when nothing stalls.  The block-RAM queue with a bypass against Amaranth's ``SyncFIFO``
(which reads its storage asynchronously), cycle by cycle."""

import collections
import random

import pytest

from amaranth import Module, Signal, Value
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered

from hw.pipeline import BypassFIFO, SkidBuffer, WriteAheadFIFO, WriteAheadSyncFIFO
from hw.testing import run_testbench


#: a payload of two fields, for the form whose head register holds one of them
FIELDS = data.StructLayout({"low": 5, "high": 11})


def run_skid(valid_p, ready_p, cycles=600, seed=1, registered_out=False):
    """Drive a :class:`SkidBuffer` (the ring; with ``registered_out`` True the head register
    and its skid; with a field's name, that field in the head register and the other in the
    ring) with random ``i.valid`` and ``o.ready`` (probabilities ``valid_p``, ``ready_p``),
    checking it against a deque each cycle; returns ``(beats in, beats out)``."""
    shape = FIELDS if isinstance(registered_out, tuple) else 16
    dut = SkidBuffer(shape, registered_out=registered_out)
    i_payload, o_payload = Value.cast(dut.i.payload), Value.cast(dut.o.payload)
    rng = random.Random(seed)
    model = collections.deque()
    sent, received = [], []

    async def bench(ctx):
        value = 0
        for _ in range(cycles):
            valid, ready = rng.random() < valid_p, rng.random() < ready_p
            ctx.set(dut.i.valid, valid)
            ctx.set(i_payload, value)
            ctx.set(dut.o.ready, ready)
            # the model's occupancy at the start of the cycle decides both handshakes
            assert ctx.get(dut.i.ready) == (len(model) < 2)
            assert ctx.get(dut.o.valid) == (len(model) > 0)
            if model:
                assert ctx.get(o_payload) == model[0]
            if ready and model:
                received.append(model.popleft())
            if valid and ctx.get(dut.i.ready):
                model.append(value)
                sent.append(value)
                value = (value + 1) & 0xFFFF
            await ctx.tick()

    run_testbench(dut, bench)
    assert received == sent[:len(received)]
    return sent, received


@pytest.mark.parametrize("registered_out", [False, True, ("low",)],
                         ids=["ring", "registered", "one-field-registered"])
@pytest.mark.parametrize("valid_p,ready_p", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1, 1)])
def test_skid_buffer_is_a_two_entry_fifo(valid_p, ready_p, registered_out):
    sent, received = run_skid(valid_p, ready_p, seed=int(valid_p * 10 + ready_p * 100),
                              registered_out=registered_out)
    assert len(sent) - len(received) in (0, 1, 2)
    assert len(received) > 0


@pytest.mark.parametrize("registered_out", [False, True, ("low",)],
                         ids=["ring", "registered", "one-field-registered"])
def test_skid_buffer_passes_a_beat_every_cycle(registered_out):
    """Line rate: with ``i.valid`` and ``o.ready`` held high, after the first cycle's fill
    every cycle takes one beat and gives one."""
    sent, received = run_skid(1, 1, cycles=100, registered_out=registered_out)
    assert (len(sent), len(received)) == (100, 99)


def test_skid_buffer_refuses_fields_it_does_not_have():
    with pytest.raises(ValueError, match=r"^registered_out must name fields of the payload "
                                         r"\(low, high\), not \('mid',\)$"):
        SkidBuffer(FIELDS, registered_out=("mid",))
    with pytest.raises(TypeError, match=r"^registered_out names fields, but 16 has none$"):
        SkidBuffer(16, registered_out=("low",))


@pytest.mark.parametrize("registered_out", [True, ("low",)],
                         ids=["registered", "one-field-registered"])
@pytest.mark.parametrize("valid_p,ready_p", [(0.5, 0.5), (0.9, 0.3), (1, 1)])
def test_skid_buffer_ahead_is_fn_of_the_head_against_last_cycles_state(valid_p, ready_p,
                                                                       registered_out):
    """``ahead``: whenever ``o.valid``, ``o_ahead`` is ``fn`` of the head's field as ``fn``
    saw it in the cycle before -- here ``low`` plus a counter that moves every cycle, so a
    value made in any other cycle, or of another beat, differs."""
    top = Module()
    step = Signal(5)
    top.d.sync += step.eq(step + 3)
    dut = SkidBuffer(FIELDS, registered_out=registered_out,
                     ahead=(5, lambda f: (f["low"] + step)[:5]))
    top.submodules.dut = dut
    rng = random.Random(int(valid_p * 10 + ready_p * 100))
    checked = []

    async def bench(ctx):
        value = 0
        for cycle in range(500):
            ctx.set(dut.i.valid, rng.random() < valid_p)
            ctx.set(Value.cast(dut.i.payload), value)
            ctx.set(dut.o.ready, rng.random() < ready_p)
            if ctx.get(dut.o.valid):
                low = ctx.get(dut.o.payload.low)
                # the counter one cycle back (it moves by 3 a cycle)
                assert ctx.get(dut.o_ahead) == (low + ctx.get(step) - 3) % 32, cycle
                checked.append(cycle)
            if ctx.get(dut.i.valid) and ctx.get(dut.i.ready):
                value = (value + 7) & 0xFFFF
            await ctx.tick()

    run_testbench(top, bench)
    assert len(checked) > 100


def test_skid_buffer_refuses_ahead_without_its_registers():
    with pytest.raises(ValueError, match=r"^ahead needs registered_out: fn reads the head's "
                                         r"registers$"):
        SkidBuffer(FIELDS, ahead=(1, lambda f: f["low"][0]))
    with pytest.raises(TypeError, match=r"^ahead passes fn the payload's fields, but 16 has "
                                        r"none$"):
        SkidBuffer(16, registered_out=True, ahead=(1, lambda f: 0))


def run_bypass_fifo(depth, w_p, r_p, cycles=800, seed=1, dut_cls=BypassFIFO, ref_cls=SyncFIFO):
    """Drive a :class:`BypassFIFO` and a ``SyncFIFO`` of the same depth (or ``dut_cls`` and
    ``ref_cls``) with the same random writes and reads (probabilities ``w_p``, ``r_p``); every
    cycle both show the same ``w_rdy``, ``r_rdy``, ``level`` and, while ``r_rdy``, ``r_data``.
    Returns how many beats went in and came out, and the cycles that did both."""
    dut, ref = dut_cls(width=12, depth=depth), ref_cls(width=12, depth=depth)
    top = Module()
    top.submodules.dut, top.submodules.ref = dut, ref
    rng = random.Random(seed)
    counts = {"in": 0, "out": 0, "both_cycles": 0}

    async def bench(ctx):
        value = 0
        for cycle in range(cycles):
            w_en, r_en = rng.random() < w_p, rng.random() < r_p
            # no beat offered: other data on w_data, which no queue may keep
            offered = value if w_en else rng.randrange(1 << 12)
            for fifo in (dut, ref):
                ctx.set(fifo.w_en, w_en)
                ctx.set(fifo.w_data, offered)
                ctx.set(fifo.r_en, r_en)
            for name in ("w_rdy", "r_rdy", "level"):
                got, want = ctx.get(getattr(dut, name)), ctx.get(getattr(ref, name))
                assert got == want, f"cycle {cycle}: {name} {got}, {ref_cls.__name__} {want}"
            if ctx.get(ref.r_rdy):
                assert ctx.get(dut.r_data) == ctx.get(ref.r_data), f"cycle {cycle}: r_data"
            wrote = w_en and ctx.get(ref.w_rdy)
            read = r_en and ctx.get(ref.r_rdy)
            counts["in"] += wrote
            counts["out"] += read
            counts["both_cycles"] += wrote and read
            if wrote:
                value = (value + 1) & 0xFFF
            await ctx.tick()

    run_testbench(top, bench)
    return counts


@pytest.mark.parametrize("depth", [2, 3, 8])
@pytest.mark.parametrize("w_p,r_p", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1, 1), (0.8, 0.8)])
def test_bypass_fifo_times_like_sync_fifo(depth, w_p, r_p):
    counts = run_bypass_fifo(depth, w_p, r_p, seed=depth * 1000 + int(w_p * 10 + r_p * 100))
    # the run exercised the queue: beats went through, and in the stalling mixes it filled up
    assert counts["out"] > 100
    assert 0 <= counts["in"] - counts["out"] <= depth


def test_bypass_fifo_passes_a_beat_every_cycle():
    """Line rate with the bypass: writing and reading every cycle, a beat written in one cycle
    is read in the next, so after the first cycle every cycle both writes and reads."""
    counts = run_bypass_fifo(4, 1, 1, cycles=100)
    assert (counts["in"], counts["out"], counts["both_cycles"]) == (100, 99, 99)


def test_bypass_fifo_refuses_a_depth_below_two():
    with pytest.raises(ValueError, match="depth must be at least 2, not 1"):
        BypassFIFO(width=4, depth=1)


@pytest.mark.parametrize("depth", [2, 3, 8])
@pytest.mark.parametrize("w_p,r_p", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1, 1)])
def test_write_ahead_fifo_is_sync_fifo_buffered(depth, w_p, r_p):
    """The RAM written in every cycle with room, a beat offered or not, changes nothing a
    user sees: cycle for cycle the ports of ``SyncFIFOBuffered`` (the data, and the offered
    ``w_data`` changing every cycle, so a slot written ahead and not taken would show)."""
    counts = run_bypass_fifo(depth, w_p, r_p, seed=depth * 1000 + int(w_p * 10 + r_p * 100),
                             dut_cls=WriteAheadFIFO, ref_cls=SyncFIFOBuffered)
    assert counts["out"] > 100
    assert 0 <= counts["in"] - counts["out"] <= depth


@pytest.mark.parametrize("depth", [2, 3, 8])
@pytest.mark.parametrize("w_p,r_p", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1, 1)])
def test_read_ahead_fifo_is_sync_fifo_buffered(depth, w_p, r_p):
    """``r_data`` a register loaded from a RAM read a cycle ahead (or from last cycle's
    ``w_data``): cycle for cycle the ports of ``SyncFIFOBuffered``, the head's data included
    whether its beat was written long ago, in the last cycle, or into a queue just emptied."""
    counts = run_bypass_fifo(depth, w_p, r_p, seed=depth * 7000 + int(w_p * 10 + r_p * 100),
                             dut_cls=lambda **kw: WriteAheadFIFO(**kw, read_ahead=True),
                             ref_cls=SyncFIFOBuffered)
    assert counts["out"] > 100
    assert 0 <= counts["in"] - counts["out"] <= depth


def test_write_ahead_fifo_refuses_a_depth_below_two():
    with pytest.raises(ValueError, match="WriteAheadFIFO depth must be at least 2, not 1"):
        WriteAheadFIFO(width=4, depth=1)


@pytest.mark.parametrize("depth", [1, 2, 3, 8, 32])
@pytest.mark.parametrize("w_p,r_p", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1, 1), (0.8, 0.8)])
def test_write_ahead_sync_fifo_is_sync_fifo(depth, w_p, r_p):
    """The LUT RAM written in every cycle with room, a beat offered or not, changes nothing a
    user sees: cycle for cycle the ports of ``SyncFIFO`` (the data, and the offered ``w_data``
    changing every cycle, so a slot written ahead and not taken would show)."""
    counts = run_bypass_fifo(depth, w_p, r_p, seed=depth * 3000 + int(w_p * 10 + r_p * 100),
                             dut_cls=WriteAheadSyncFIFO)
    assert counts["out"] > 100
    assert 0 <= counts["in"] - counts["out"] <= depth


def test_write_ahead_sync_fifo_passes_a_beat_every_cycle():
    counts = run_bypass_fifo(4, 1, 1, cycles=100, dut_cls=WriteAheadSyncFIFO)
    assert (counts["in"], counts["out"], counts["both_cycles"]) == (100, 99, 99)


def test_write_ahead_sync_fifo_refuses_a_depth_below_one():
    with pytest.raises(ValueError, match="^WriteAheadSyncFIFO depth must be at least 1, not 0$"):
        WriteAheadSyncFIFO(width=4, depth=0)
