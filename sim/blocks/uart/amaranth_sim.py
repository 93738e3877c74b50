"""The serial bridge under Amaranth's simulator: a host on the line, a bus behind it.

:func:`run_bridge` plays line items (bytes, :data:`hw.uart_model.FRAMING`, :class:`Gap`) into
``rx`` bit by bit, decodes every byte on ``tx`` from its bits, and answers the bus as
:class:`RegisterSpace` with random ready and answer delays; it returns what came back and what
the bus saw, for the tests to hold against :class:`hw.uart_model.BridgeModel`.
"""

import random

from amaranth.sim import Simulator

from hw.uart import UARTBridge
from hw.uart_model import FRAMING, OKAY, SLVERR, Gap


__all__ = ["RegisterSpace", "run_bridge", "line_bits"]


class RegisterSpace:
    """Words behind the bus: every aligned address reads what was last written there (at
    first a value made from the address); a misaligned one answers ``SLVERR`` and zero, as
    :class:`hw.axil.AXILiteToCSR` does."""

    def __init__(self):
        self.words = {}

    def read(self, addr):
        if addr % 4:
            return SLVERR, 0
        return OKAY, self.words.get(addr, (addr * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFF_FFFF)

    def write(self, addr, data):
        if addr % 4:
            return SLVERR
        self.words[addr] = data
        return OKAY


def line_bits(items, divisor):
    """The ``rx`` level of every cycle for ``items``, with one idle byte time at each end."""
    idle_byte = [1] * (10 * divisor)
    levels = list(idle_byte)
    for item in items:
        if isinstance(item, Gap):
            levels += [1] * round(item.byte_times * 10 * divisor)
            continue
        value, stop = (0xA5, 0) if item is FRAMING else (item, 1)
        for bit in [0] + [(value >> k) & 1 for k in range(8)] + [stop]:
            levels += [bit] * divisor
    return levels + idle_byte


def run_bridge(items, *, addr_bits=12, divisor=4, fifo_depth=16, timeout=16, space=None,
               bus_stall=0.3, seed=0, hold_bus=None, levels=None, vcd=None):
    """Simulate the bridge with ``items`` on its line.  ``bus_stall``: the chance each cycle
    that the bus is not ready or holds its answer back; ``hold_bus``: ``(first, last)`` byte
    times of the run during which the bus takes nothing; ``levels``: the line's level in
    every cycle, instead of ``items``'.  Returns ``(answers, transactions, status)``: the bytes on ``tx``, the bus's ``("W", addr, data)``/``("R", addr)`` and the
    bridge's counters."""
    dut = UARTBridge(addr_bits, divisor, fifo_depth, timeout)
    space = space or RegisterSpace()
    levels = line_bits(items, divisor) if levels is None else levels
    rng = random.Random(seed)
    answers, transactions, status = bytearray(), [], {}
    byte_cycles = 10 * divisor

    async def line(ctx):
        for level in levels:
            ctx.set(dut.rx, level)
            await ctx.tick()
        # then the bus's hold, a timeout, and the answers of a full FIFO going out
        held = hold_bus[1] * byte_cycles - len(levels) if hold_bus else 0
        await ctx.tick().repeat(max(held, 0) + (timeout + fifo_depth + 8) * byte_cycles)
        for name in ("overruns", "framing", "bad_commands", "timeouts"):
            status[name] = ctx.get(getattr(dut.status, name))

    async def listener(ctx):
        # samples ``tx`` in the middle of each bit, as a host's UART does
        # (plain ticks: a background testbench stopped inside ``until`` warns at exit)
        while True:
            await ctx.tick()
            if ctx.get(dut.tx):
                continue
            await ctx.tick().repeat(divisor // 2)
            value = 0
            for k in range(8):
                await ctx.tick().repeat(divisor)
                value |= ctx.get(dut.tx) << k
            await ctx.tick().repeat(divisor)
            assert ctx.get(dut.tx) == 1, "a stop bit on tx is low"
            answers.append(value)

    async def bus_slave(ctx):
        bus = dut.bus
        cycle = 0

        def stalled():
            held = hold_bus and hold_bus[0] * byte_cycles <= cycle < hold_bus[1] * byte_cycles
            return held or rng.random() < bus_stall

        async def tick():
            nonlocal cycle
            cycle += 1
            await ctx.tick()

        async def answer(valid, ready, fields):
            while stalled():                        # the answer held back
                await tick()
            for signal, value in fields:
                ctx.set(signal, value)
            ctx.set(valid, 1)
            while not ctx.get(ready):
                await tick()
            await tick()
            ctx.set(valid, 0)

        while True:
            if ctx.get(bus.awvalid) or ctx.get(bus.wvalid):
                # the address and the data taken in cycles of their own, in either order; a
                # channel already taken must not be offered again
                addr = data = None
                while addr is None or data is None:
                    assert not (addr is not None and ctx.get(bus.awvalid)), "AW offered twice"
                    assert not (data is not None and ctx.get(bus.wvalid)), "W offered twice"
                    take_aw = addr is None and ctx.get(bus.awvalid) and not stalled()
                    take_w = data is None and ctx.get(bus.wvalid) and not stalled()
                    ctx.set(bus.awready, take_aw)
                    ctx.set(bus.wready, take_w)
                    if take_aw:
                        addr = ctx.get(bus.awaddr)
                    if take_w:
                        data = ctx.get(bus.wdata)
                        assert ctx.get(bus.wstrb) == 0xF
                    await tick()
                ctx.set(bus.awready, 0)
                ctx.set(bus.wready, 0)
                transactions.append(("W", addr, data))
                await answer(bus.bvalid, bus.bready, [(bus.bresp, space.write(addr, data))])
            elif ctx.get(bus.arvalid) and not stalled():
                addr = ctx.get(bus.araddr)
                ctx.set(bus.arready, 1)
                await tick()
                ctx.set(bus.arready, 0)
                transactions.append(("R", addr))
                resp, data = space.read(addr)
                await answer(bus.rvalid, bus.rready, [(bus.rresp, resp), (bus.rdata, data)])
            else:
                await tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(line)
    sim.add_testbench(listener, background=True)
    sim.add_testbench(bus_slave, background=True)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return bytes(answers), transactions, status
