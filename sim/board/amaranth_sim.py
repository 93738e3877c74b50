"""The board block (:class:`system.board.BoardHost`) under Amaranth's simulator, with a
stand-in for each GPU's bulk port: a memory behind the same three edges of read latency as
:class:`system.gpu.GPU` (its input register, the memory, its output register).

:func:`run_host` plays register operations on the block's ``csr`` port and returns what the
reads returned, the ``start`` pulses and the memories, for the tests to hold against
:class:`system.board_model.BoardHostModel`.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from amaranth.sim import Simulator

from hw.testing import csr_read, csr_write
from system.board import READ_LATENCY, BoardHost
from system.engine.rtl import load_signature


__all__ = ["run_host"]


class _BulkMemory(wiring.Component):
    """A GPU's bulk port as the board sees it: ``r_data`` is the beat at the ``addr`` of three
    edges before; a write lands at the edge after the one that registers it."""

    def __init__(self, params, eparams):
        self.depth = 2 << eparams.local_bits
        self.width = params.beat_bits
        self.mem = Memory(shape=self.width, depth=self.depth, init=[])
        super().__init__({"load": In(load_signature(params, eparams))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = self.mem
        wr, rd = mem.write_port(), mem.read_port(transparent_for=())
        addr, w_en, w_data = Signal.like(self.load.addr), Signal(), Signal(self.width)
        m.d.sync += [addr.eq(self.load.addr), w_en.eq(self.load.w_en),
                     w_data.eq(self.load.w_data), self.load.r_data.eq(rd.data)]
        m.d.comb += [wr.addr.eq(addr), wr.en.eq(w_en), wr.data.eq(w_data), rd.addr.eq(addr)]
        return m


class _Bench(wiring.Component):
    def __init__(self, bparams):
        self.host = BoardHost(bparams)
        self.mems = [_BulkMemory(bparams.params, bparams.engine) for _ in range(bparams.gpus)]
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.host = self.host
        for g, mem in enumerate(self.mems):
            m.submodules[f"mem{g}"] = mem
            wiring.connect(m, getattr(self.host, f"load{g}"), mem.load)
        return m


def run_host(bparams, ops, *, done=0, uart=0, gaps=None):
    """``ops``: ``("w", word, data)`` and ``("r", word)`` on the block's register bus, each
    followed by ``gaps[k]`` idle cycles (default :data:`system.board.READ_LATENCY`, so a
    ``read`` has captured its beat before the next operation).  Returns ``(reads, starts,
    memories)``: the read data in order, the ``start`` pulses, and each GPU's memory as
    ``{address: beat}`` (the non-zero beats)."""
    bench = _Bench(bparams)
    host = bench.host
    reads, starts, memories = [], [0], []
    gaps = gaps or [READ_LATENCY] * len(ops)

    async def counter(ctx):
        async for _, _, start in ctx.tick().sample(host.start):
            starts[0] += start

    async def main(ctx):
        ctx.set(host.done, done)
        ctx.set(host.uart.as_value(), uart)
        for op, gap in zip(ops, gaps):
            if op[0] == "w":
                await csr_write(ctx, host.csr, op[1], op[2])
            else:
                reads.append(await csr_read(ctx, host.csr, op[1]))
            await ctx.tick().repeat(gap + 1)
        await ctx.tick().repeat(4)
        for mem in bench.mems:
            beats = {a: ctx.get(mem.mem.data[a]) for a in range(mem.depth)}
            memories.append({a: beat for a, beat in beats.items() if beat})

    sim = Simulator(bench)
    sim.add_clock(1e-9)
    sim.add_process(counter)
    sim.add_testbench(main)
    sim.run()
    return reads, starts[0], memories
