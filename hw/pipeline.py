"""Register slices for streams: cut the combinational paths between two blocks without
losing a cycle of throughput.

On an FPGA the wires between blocks that sit far apart on the chip take most of a clock
period (``docs/fpga.md``): a path that leaves one block's registers, crosses another block's
decision logic and ends in a third block's registers does not close timing however short its
logic is.  :class:`SkidBuffer` registers both directions of a stream — ``o.valid`` and
``o.payload`` come from registers, and so does ``i.ready`` — so that neither side's logic
sees the other's in the same cycle, and the consumer's ``o.ready`` reaches a few flip-flops,
not the enable of every payload bit.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """A two-entry register slice: one beat per cycle, every handshake signal a register.

    Parameters
    ----------
    shape : shape-castable
        The payload's shape (a layout, for instance).

    Ports
    -----
    i : In(stream.Signature(shape))
        ``i.ready`` is a register: high unless both entries hold a beat.
    o : Out(stream.Signature(shape))
        ``o.valid`` is a register; ``o.payload`` is one of the two entry registers (a 2:1
        multiplexer after them).

    Timing
    ------
    A beat taken on ``i`` in cycle ``c`` is offered on ``o`` from cycle ``c + 1``.  The two
    entries are written in turn and read in turn (a two-entry ring), so ``o.ready`` reaches
    only the read pointer and the count — not the enable of every payload flip-flop, which on
    an FPGA is a net of hundreds of loads: the consumer's ready logic, however deep, ends a
    few flip-flops away.  Nor does ``i.valid``: the entry written next loads ``i.payload`` in
    every cycle it is free, and the beat counts only with ``i.valid`` (``o.payload`` is
    undefined while ``o.valid`` is low).  With ``o.ready`` held high, one beat passes per
    cycle.  Beats leave in the order they came; none is dropped or duplicated (it is a
    two-entry FIFO: :class:`collections.deque` is its model in ``tests/test_pipeline.py``).
    """

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        entries = [Signal.like(self.i.payload, name=f"entry{k}") for k in range(2)]
        write, read = Signal(), Signal()       # the entry written next, read next
        count = Signal(range(3))
        take = self.i.valid & self.i.ready
        give = self.o.valid & self.o.ready
        m.d.comb += [
            self.i.ready.eq(count != 2),
            self.o.valid.eq(count != 0),
            self.o.payload.eq(Mux(read, entries[1], entries[0])),
        ]
        # the entry to be written next is free whenever there is room, so it takes the payload
        # in every such cycle, a beat or not: its enable is the write pointer and the count,
        # registers, not the producer's valid (a decision that, on an FPGA, then reached the
        # enables of hundreds of flip-flops across the chip in the same cycle)
        with m.If(self.i.ready):
            with m.If(write):
                m.d.sync += entries[1].eq(self.i.payload)
            with m.Else():
                m.d.sync += entries[0].eq(self.i.payload)
        with m.If(take):
            m.d.sync += write.eq(~write)
        with m.If(give):
            m.d.sync += read.eq(~read)
        m.d.sync += count.eq(count + take - give)
        return m
