"""Request sources for exercising the MC arbiter, shared by both test layers and the demo.

A source is asked each cycle for the request it offers (``offer(cycle)``: the same item until
it is taken, or ``None``) and told when the request was taken (``take(cycle)``), so that a
source can depend on progress, as a GEMM's next read phase depends on its last one.

- :class:`RandomSource`: a list of requests with random idle cycles between offers.
- :class:`PhasedSource`: the compute stream of a tiled GEMM: read bursts separated by compute
  time that starts only when the burst has been fully enqueued (paper Figure 17(a)).
- :class:`BurstSource`: communication: bursts of requests released periodically (a stage's
  tiles completing at once, Figure 17(b)), each request offered as soon as possible.
"""

import random

from hw.interfaces import ElemType, Op, Source, Stream


__all__ = ["RandomSource", "PhasedSource", "BurstSource", "numbered_requests"]


def numbered_requests(params, n, stream, base=0):
    """``n`` distinct requests (``addr`` numbers them) for ``stream``."""
    stream = Stream(stream)
    op = Op.READ if stream == Stream.COMPUTE else Op.UPDATE
    return [{
        "addr": (base + k * params.beat_bytes) % (1 << params.addr_bits),
        "data": k, "mask": (1 << params.beat_bytes) - 1, "op": op.value,
        "stream": stream.value, "source": (Source.LOCAL if stream == Stream.COMPUTE
                                           else Source.DMA).value,
        "wg_id": k % (1 << params.wg_id_bits), "wf_id": 0, "tracked": 0,
        "etype": ElemType.FP16.value, "tag": k % (1 << params.tag_bits),
    } for k in range(n)]


class _Source:
    @property
    def finished(self):
        """Every request has been taken."""
        return self.index >= len(self.items)


class RandomSource(_Source):
    def __init__(self, items, gap=0.0, seed=0):
        self.items = list(items)
        self.index = 0
        self.gap = gap
        self.rng = random.Random(seed)
        self._offering = False
        self.done_cycle = None

    def offer(self, cycle):
        if self.index >= len(self.items):
            return None
        if not self._offering:
            if self.gap and self.rng.random() < self.gap:
                return None
            self._offering = True
        return self.items[self.index]

    def take(self, cycle):
        self.index += 1
        self._offering = False
        if self.index == len(self.items):
            self.done_cycle = cycle


class PhasedSource(_Source):
    """``phases`` bursts of ``burst`` requests; after a burst is fully taken, ``think`` idle
    cycles (the CUs computing on what they read) before the next burst."""

    def __init__(self, items, burst, think):
        self.items = list(items)
        self.burst = burst
        self.think = think
        self.index = 0
        self.resume = 0
        self.done_cycle = None

    def offer(self, cycle):
        if self.index >= len(self.items) or cycle < self.resume:
            return None
        return self.items[self.index]

    def take(self, cycle):
        self.index += 1
        if self.index % self.burst == 0:
            self.resume = cycle + 1 + self.think
        if self.index == len(self.items):
            self.done_cycle = cycle


class BurstSource(_Source):
    """A burst of ``burst`` requests released every ``period`` cycles from ``start``."""

    def __init__(self, items, burst, period, start=0):
        self.items = list(items)
        self.burst = burst
        self.period = period
        self.start = start
        self.index = 0
        self.done_cycle = None

    def offer(self, cycle):
        if self.index >= len(self.items):
            return None
        released = 0 if cycle < self.start else \
            ((cycle - self.start) // self.period + 1) * self.burst
        return self.items[self.index] if self.index < released else None

    def take(self, cycle):
        self.index += 1
        if self.index == len(self.items):
            self.done_cycle = cycle
