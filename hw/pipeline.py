"""Register slices for streams: cut the combinational paths between two blocks without
losing a cycle of throughput.

On an FPGA the wires between blocks that sit far apart on the chip take most of a clock
period (``docs/fpga.md``): a path that leaves one block's registers, crosses another block's
decision logic and ends in a third block's registers does not close timing however short its
logic is.  :class:`SkidBuffer` registers both directions of a stream — ``o.valid`` and
``o.payload`` come from registers, and so does ``i.ready`` — so that neither side's logic
sees the other's in the same cycle.
"""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """A two-entry register slice: one beat per cycle, every output a register.

    Parameters
    ----------
    shape : shape-castable
        The payload's shape (a layout, for instance).

    Ports
    -----
    i : In(stream.Signature(shape))
        ``i.ready`` is a register: high unless the spare (skid) register holds a beat.
    o : Out(stream.Signature(shape))
        ``o.valid`` and ``o.payload`` are registers.

    Timing
    ------
    A beat taken on ``i`` in cycle ``c`` is offered on ``o`` from cycle ``c + 1``.  When ``o``
    stalls, the beat taken in that cycle (``i.ready`` was high) goes to the skid register and
    ``i.ready`` drops the next cycle; when ``o`` moves again the skid's beat goes first.  With
    ``o.ready`` held high, one beat passes per cycle.  Beats leave in the order they came; none
    is dropped or duplicated (it is a two-entry FIFO: :class:`collections.deque` is its model in
    ``tests/test_pipeline.py``).
    """

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid = Signal.like(self.i.payload)
        take = self.i.valid & self.i.ready
        move = ~self.o.valid | self.o.ready            # the output register takes a beat
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(move):
            with m.If(skid_valid):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(skid), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.valid.eq(take), self.o.payload.eq(self.i.payload)]
        with m.Elif(take):
            m.d.sync += [skid_valid.eq(1), skid.eq(self.i.payload)]
        return m
