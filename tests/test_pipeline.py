# amaranth: UnusedElaboratable=no
"""The register slice between blocks (``hw/pipeline.py``) against its model, a two-entry
FIFO: every beat leaves once and in order, ``i.ready`` and ``o.valid`` are what the FIFO's
occupancy at the start of the cycle says (so both are registers), and one beat passes per
cycle when nothing stalls."""

import collections
import random

import pytest

from hw.pipeline import SkidBuffer
from hw.testing import run_testbench


def run_skid(valid_p, ready_p, cycles=600, seed=1):
    """Drive a :class:`SkidBuffer` with random ``i.valid`` and ``o.ready`` (probabilities
    ``valid_p``, ``ready_p``), checking it against a deque each cycle; returns
    ``(beats in, beats out)``."""
    dut = SkidBuffer(16)
    rng = random.Random(seed)
    model = collections.deque()
    sent, received = [], []

    async def bench(ctx):
        value = 0
        for _ in range(cycles):
            valid, ready = rng.random() < valid_p, rng.random() < ready_p
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload, value)
            ctx.set(dut.o.ready, ready)
            # the model's occupancy at the start of the cycle decides both handshakes
            assert ctx.get(dut.i.ready) == (len(model) < 2)
            assert ctx.get(dut.o.valid) == (len(model) > 0)
            if model:
                assert ctx.get(dut.o.payload) == model[0]
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


@pytest.mark.parametrize("valid_p,ready_p", [(0.5, 0.5), (0.9, 0.3), (0.3, 0.9), (1, 1)])
def test_skid_buffer_is_a_two_entry_fifo(valid_p, ready_p):
    sent, received = run_skid(valid_p, ready_p, seed=int(valid_p * 10 + ready_p * 100))
    assert len(sent) - len(received) in (0, 1, 2)
    assert len(received) > 0


def test_skid_buffer_passes_a_beat_every_cycle():
    """Line rate: with ``i.valid`` and ``o.ready`` held high, after the first cycle's fill
    every cycle takes one beat and gives one."""
    sent, received = run_skid(1, 1, cycles=100)
    assert (len(sent), len(received)) == (100, 99)
