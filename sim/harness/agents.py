"""cocotb agents for the T3 blocks' exported Verilog.

Amaranth exports a stream port ``i`` as ``i__valid``, ``i__ready`` and ``i__payload`` (one
vector laid out by the port's ``data.StructLayout``); a register port ``csr`` as ``csr__addr``,
``csr__w_stb``, ``csr__w_data``, ``csr__r_data``.  The agents here take such a prefix and a
layout and move ``dict`` payloads (:func:`hw.interfaces.pack` / :func:`hw.interfaces.unpack`).

All agents of one clock are stepped by one :class:`Bench` coroutine, twice per cycle: right
after the rising edge (decide the handshake that edge completed, drive the next values) and at
``ReadOnly`` (sample what the design answers).  Handshakes are therefore judged on settled
values, the same way on Icarus and Verilator, and a testbench with several agents costs two
simulator callbacks per cycle rather than two per agent.

Idle and backpressure insertion follow cocotbext-axi: ``set_pause_generator(gen)`` takes an
iterator of booleans, one per cycle, ``True`` meaning "pause this cycle" (a source offers
nothing new, a sink drops ``ready``).  ``itertools.cycle([1, 1, 1, 0])`` pauses three cycles in
four; :func:`random_pauses` gives a seeded random pattern.
"""

import collections
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Event, ReadOnly, RisingEdge

from hw.interfaces import Packer


__all__ = ["Bench", "StreamSource", "StreamSink", "StreamMonitor", "CsrMaster",
           "random_pauses", "reset_and_program"]


async def reset_and_program(dut, regs, registers, idle=()):
    """Hold the ports ``idle`` (names) at 0, start a 1 ns clock on ``dut.clk``, reset for two
    cycles, then write ``registers`` (``[(name, value)]`` of :class:`hw.csr.RegisterMap`
    ``regs``) through the ``csr`` port, one word a cycle: the opening of a block's cocotb
    test that drives its ports itself."""
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles
    for name in (*idle, "csr__w_stb"):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    Clock(dut.clk, 1, unit="ns").start()
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    for name, value in registers:
        for addr, word in regs.word_writes(name, value):
            dut.csr__addr.value, dut.csr__w_data.value, dut.csr__w_stb.value = addr, word, 1
            await RisingEdge(dut.clk)
    dut.csr__w_stb.value = 0


def random_pauses(probability, seed, burst=1):
    """Endless seeded iterator: ``True`` (pause) in a share ``probability`` of the cycles.  With
    ``burst`` 1 each cycle on its own; with a larger ``burst`` the pauses come in runs of
    ``burst`` cycles on average (a run ends with probability ``1 / burst`` each cycle), the
    runs between them as long as the share asks: a backpressure that fills queues."""
    rng = random.Random(seed)
    if burst <= 1:
        while True:
            yield rng.random() < probability
    start = probability / (burst * (1 - probability)) if probability < 1 else 1.0
    paused = False
    while True:
        paused = rng.random() >= 1 / burst if paused else rng.random() < start
        yield paused


class Bench:
    """Clock, reset and the per-cycle stepping of a set of agents.

    ``cycle`` counts rising edges since :meth:`start`.
    """

    def __init__(self, dut, clk="clk", rst="rst", period_ns=1):
        self.dut = dut
        self.clk = getattr(dut, clk)
        self.rst = getattr(dut, rst)
        self.period_ns = period_ns
        self.agents = []
        self.cycle = 0

    def add(self, agent):
        self.agents.append(agent)
        return agent

    async def start(self, reset_cycles=2):
        """Start the clock and the agents, hold reset for ``reset_cycles``."""
        for agent in self.agents:
            agent.reset()
        self.rst.value = 1
        Clock(self.clk, self.period_ns, unit="ns").start()
        for _ in range(reset_cycles):
            await RisingEdge(self.clk)
        self.rst.value = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        clk = self.clk
        agents = self.agents
        while True:
            await RisingEdge(clk)
            self.cycle += 1
            for agent in agents:
                agent.on_edge(self.cycle)
            await ReadOnly()
            for agent in agents:
                agent.on_settle()

    async def cycles(self, n):
        for _ in range(n):
            await RisingEdge(self.clk)

    async def until(self, condition, timeout):
        """Wait until ``condition()`` holds (checked each cycle); fail after ``timeout``."""
        for _ in range(timeout):
            if condition():
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"timed out after {timeout} cycles waiting for {condition}")


class _StreamAgent:
    def __init__(self, dut, prefix, layout):
        self.packer = Packer(layout)
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self._pause = None

    def set_pause_generator(self, generator=None):
        self._pause = iter(generator) if generator is not None else None

    def _paused(self):
        return bool(next(self._pause)) if self._pause is not None else False


class StreamSource(_StreamAgent):
    """Drives a stream port the design receives (``In(stream.Signature(...))``).

    ``send_nowait(item)`` queues a payload dict; ``sent`` lists ``(cycle, item)`` for every
    handshake, ``cycle`` being the :class:`Bench` cycle of the edge that took it.
    ``valid`` stays high until its payload is taken (pauses only delay new offers).
    """

    def __init__(self, dut, prefix, layout):
        super().__init__(dut, prefix, layout)
        self.queue = collections.deque()
        self.sent = []
        self._offering = None
        self._ready = False

    def reset(self):
        self.valid.value = 0
        self._offering = None

    def send_nowait(self, item):
        self.queue.append(item)

    def idle(self):
        return not self.queue and self._offering is None

    def on_edge(self, cycle):
        if self._offering is not None and self._ready:
            self.sent.append((cycle, self._offering))
            self._offering = None
        if self._offering is None:
            if self.queue and not self._paused():
                self._offering = self.queue.popleft()
                self.payload.value = self.packer.pack(self._offering)
                self.valid.value = 1
            else:
                self.valid.value = 0

    def on_settle(self):
        self._ready = self._offering is not None and bool(self.ready.value)


class StreamSink(_StreamAgent):
    """Receives a stream port the design drives (``Out(stream.Signature(...))``).

    ``received`` lists ``(cycle, payload dict)``; ``ready`` follows the pause generator.
    """

    def __init__(self, dut, prefix, layout):
        super().__init__(dut, prefix, layout)
        self.received = []
        self._valid = False
        self._word = 0
        self._ready_driven = False

    def reset(self):
        self.ready.value = 0
        self._ready_driven = False

    def on_edge(self, cycle):
        if self._valid and self._ready_driven:
            self.received.append((cycle, self.packer.unpack(self._word)))
        self._ready_driven = not self._paused()
        self.ready.value = int(self._ready_driven)

    def on_settle(self):
        self._valid = bool(self.valid.value)
        if self._valid:
            self._word = int(self.payload.value)


class StreamMonitor(_StreamAgent):
    """Records every handshake on a stream port without driving it."""

    def __init__(self, dut, prefix, layout):
        super().__init__(dut, prefix, layout)
        self.seen = []
        self._fire = False
        self._word = 0

    def reset(self):
        pass

    def on_edge(self, cycle):
        if self._fire:
            self.seen.append((cycle, self.packer.unpack(self._word)))

    def on_settle(self):
        self._fire = bool(self.valid.value) and bool(self.ready.value)
        if self._fire:
            self._word = int(self.payload.value)


class CsrMaster:
    """Host side of a :func:`hw.csr.csr_signature` port: ``await write(addr, word)``,
    ``await read(addr)``; ``write_reg``/``read_reg`` take a register name of a
    :class:`hw.csr.RegisterMap` and move all its words.  A read's word is taken the map's
    :attr:`~hw.csr.RegisterMap.read_latency` cycles after its address (1 without a map)."""

    def __init__(self, dut, prefix="csr", regs=None):
        self.addr = getattr(dut, f"{prefix}__addr")
        self.w_stb = getattr(dut, f"{prefix}__w_stb")
        self.w_data = getattr(dut, f"{prefix}__w_data")
        self.r_data = getattr(dut, f"{prefix}__r_data")
        self.regs = regs
        self.latency = regs.read_latency if regs is not None else 1
        self.queue = collections.deque()
        self._current = None
        self._phase = 0

    def reset(self):
        self.addr.value = 0
        self.w_stb.value = 0
        self.w_data.value = 0

    async def write(self, addr, word):
        done = Event()
        self.queue.append(("w", addr, word, done, None))
        await done.wait()

    async def read(self, addr):
        done = Event()
        result = []
        self.queue.append(("r", addr, 0, done, result))
        await done.wait()
        return result[0]

    async def write_reg(self, name, value):
        for addr, word in self.regs.word_writes(name, value):
            await self.write(addr, word)

    async def read_reg(self, name):
        base = self.regs.address(name)
        words = [await self.read(base + k) for k in range(self.regs[name].words)]
        return self.regs.from_words(name, words)

    def on_edge(self, cycle):
        # An op is driven for one cycle; a read's data is on r_data `latency` cycles after.
        if self._current is not None:
            kind, _, _, done, result = self._current
            if kind == "w" or self._phase == self.latency:
                if kind == "r":
                    result.append(self._r_word)
                done.set()
                self._current = None
            else:
                self._phase += 1
        if self._current is None and self.queue:
            self._current = self.queue.popleft()
            self._phase = 0
            kind, addr, word, _, _ = self._current
            self.addr.value = addr
            self.w_data.value = word
            self.w_stb.value = int(kind == "w")
        else:
            self.w_stb.value = 0

    def on_settle(self):
        if self._current is not None and self._phase == self.latency:
            self._r_word = int(self.r_data.value)
