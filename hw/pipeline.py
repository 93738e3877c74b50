"""Register slices for streams: cut the combinational paths between two blocks without
losing a cycle of throughput.

On an FPGA the wires between blocks that sit far apart on the chip take most of a clock
period (``docs/fpga.md``): a path that leaves one block's registers, crosses another block's
decision logic and ends in a third block's registers does not close timing however short its
logic is.  :class:`SkidBuffer` registers both directions of a stream — ``o.valid`` and
``o.payload`` come from registers, and so does ``i.ready`` — so that neither side's logic
sees the other's in the same cycle, and the consumer's ``o.ready`` reaches a few flip-flops,
not the enable of every payload bit.

:class:`BypassFIFO` is a queue with the interface and timing of Amaranth's ``SyncFIFO`` (a
beat written in cycle ``c`` can be read from ``c + 1``) whose storage is block RAM, which
reads synchronously: a write into an empty queue goes straight to the output register.

:class:`WriteAheadFIFO` is Amaranth's ``SyncFIFOBuffered``, cycle for cycle, whose storage is
written in every cycle it has room, whether or not a beat is offered: ``w_en`` moves only the
write pointer and the level, never the enable of the storage's cells.
:class:`WriteAheadSyncFIFO` is Amaranth's ``SyncFIFO`` (LUT RAM, read as it stands) written
ahead the same way.
"""

from types import SimpleNamespace

from amaranth import Cat, Elaboratable, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import FIFOInterface
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


__all__ = ["SkidBuffer", "BypassFIFO", "WriteAheadFIFO", "WriteAheadSyncFIFO",
           "COLLISION_UNUSED"]

#: A memory attribute (value 1): no read of this memory that meets a write to the same address
#: in the same cycle is ever used.  The design's simulation reads the old data there, as
#: Amaranth's read port does; the FPGA flow (``hw.pnr``) tells Yosys the value is undefined, so
#: that Yosys builds no bypass (a register of the write data, an address compare and a select
#: per bit) between the block RAM and the read's register, which can then be the block RAM's
#: own output register.  The design that sets it forwards those writes itself.
COLLISION_UNUSED = "t3_collision_unused"


class SkidBuffer(wiring.Component):
    """A two-entry register slice: one beat per cycle, every handshake signal a register.

    Parameters
    ----------
    shape : shape-castable
        The payload's shape (a layout, for instance).
    registered_out : bool or tuple of str
        ``False`` (the default): the entries form a ring and ``o.payload`` is a 2:1
        multiplexer after them, selected by the read pointer.  ``True``: ``o.payload`` is a
        register (the head) and the other entry its skid.  A tuple of field names (``shape`` a
        :class:`~amaranth.lib.data.StructLayout`): those fields come from the head's register,
        the others from the ring.  For a consumer that decodes some fields at once (an address
        into a bank's or a region's state) while its ready comes from its own registers: the
        ready then reaches the enables of those fields' flip-flops, so a wide field the
        consumer only stores (a beat's data) is best left in the ring.  The handshakes and the
        timing are the same.

    Ports
    -----
    i : In(stream.Signature(shape))
        ``i.ready`` is a register: high unless both entries hold a beat.
    o : Out(stream.Signature(shape))
        ``o.valid`` is a register; ``o.payload`` is one of the two entry registers (a 2:1
        multiplexer after them), or for the fields ``registered_out`` names the head's register.

    Timing
    ------
    A beat taken on ``i`` in cycle ``c`` is offered on ``o`` from cycle ``c + 1``.  With the
    ring the two entries are written in turn and read in turn, so ``o.ready`` reaches only the
    read pointer and the count — not the enable of every payload flip-flop, which on an FPGA
    is a net of hundreds of loads: the consumer's ready logic, however deep, ends a few
    flip-flops away.  The read pointer reaches every payload bit's multiplexer instead, and a
    consumer's decode starts after it (on an ECP5 about 2.5 ns of a node's paths: the pointer's
    net and the multiplexer).  A registered field's head loads in every cycle the head leaves
    or is empty, so ``o.ready`` reaches its enable (keep that ready shallow, and the registered
    fields few: the NMC unit's ready into all 330 bits of its command, data included, placed
    at 15.8 ns, 14.3 of it three wires) and the field starts at the register.  Nor does
    ``i.valid`` reach any enable: the entry written next loads ``i.payload`` in every cycle it
    is free, and the beat counts only with ``i.valid`` (``o.payload`` is undefined while
    ``o.valid`` is low).  With ``o.ready`` held high, one beat passes per cycle.  Beats leave
    in the order they came; none is dropped or duplicated (it is a two-entry FIFO:
    :class:`collections.deque` is its model in ``tests/test_pipeline.py``, for each form).

    Lookahead (``ahead``, with ``registered_out``): ``ahead = (shape, fn)`` adds ``o_ahead``, a
    register of ``shape`` that holds ``fn`` of the head's registered fields as of this cycle,
    computed in the cycle before.  ``fn(fields)`` (``fields``: a dict of the registered
    fields' values) is called three times, on the beat that can become the head (the input's
    and the skid's) and on the head itself, and the slice registers the one the head loads
    (the choice after ``fn``, by the count and ``o.ready``).  ``fn`` sees the state of the
    cycle it runs in, so a consumer whose own state changes as the head leaves folds that
    change in (from its registers, chosen by its ready at the end): its decision on the head
    then starts at a register, not at the head's fields and a compare.
    """

    def __init__(self, shape, *, registered_out=False, ahead=None):
        if registered_out is True or registered_out is False:
            self.registered_out = registered_out
        else:
            names = tuple(registered_out)
            fields = getattr(shape, "members", None)
            if fields is None:
                raise TypeError(f"registered_out names fields, but {shape!r} has none")
            unknown = [n for n in names if n not in fields]
            if not names or unknown:
                raise ValueError(f"registered_out must name fields of the payload "
                                 f"({', '.join(fields)}), not {names!r}")
            self.registered_out = names
        if ahead is not None and registered_out is False:
            raise ValueError("ahead needs registered_out: fn reads the head's registers")
        if ahead is not None and getattr(shape, "members", None) is None:
            raise TypeError(f"ahead passes fn the payload's fields, but {shape!r} has none")
        self.ahead = ahead
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})
        if ahead is not None:
            self.o_ahead = Signal(ahead[0], name="o_ahead")

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(3))
        take = self.i.valid & self.i.ready
        give = self.o.valid & self.o.ready
        # the handshakes are flip-flops of their own, kept with the count (decoded from the
        # count, each was a LUT and a net more at the start of the consumer's and the
        # producer's decisions: the arbiter's policy from the compute port's count, the MCQ's
        # readies from the NMC unit's slice, 10.6-11.6 ns in a node)
        count_next = Signal(range(3))
        i_ready, o_valid = Signal(init=1, name="i_ready"), Signal(name="o_valid")
        m.d.comb += [count_next.eq(count + take - give),
                     self.i.ready.eq(i_ready), self.o.valid.eq(o_valid)]
        # each from the count's flags and the two handshakes, with no sum in front (the
        # consumer's ready through the count's sum into i_ready was a node's path, 11.1 ns)
        one = count == 1
        m.d.sync += [count.eq(count_next),
                     i_ready.eq(~((one & take & ~give) | (~i_ready & ~give))),
                     o_valid.eq(~((~o_valid & ~take) | (one & give & ~take)))]

        if self.registered_out is not True:
            # the ring: the entry to be written next is free whenever there is room, so it
            # takes the payload in every such cycle, a beat or not: its enable is the write
            # pointer and the count, registers, not the producer's valid (a decision that, on
            # an FPGA, then reached the enables of hundreds of flip-flops across the chip in
            # the same cycle)
            entries = [Signal.like(self.i.payload, name=f"entry{k}") for k in range(2)]
            write, read = Signal(), Signal()       # the entry written next, read next
            m.d.comb += self.o.payload.eq(Mux(read, entries[1], entries[0]))
            with m.If(self.i.ready):
                with m.If(write):
                    m.d.sync += entries[1].eq(self.i.payload)
                with m.Else():
                    m.d.sync += entries[0].eq(self.i.payload)
            with m.If(take):
                m.d.sync += write.eq(~write)
            with m.If(give):
                m.d.sync += read.eq(~read)

        if self.registered_out is not False:
            # the head register and its skid, for every field or the named ones (assigned
            # after the ring's select: they take the place of its output)
            if self.registered_out is True:
                parts = [(Value.cast(self.i.payload), Value.cast(self.o.payload))]
            else:
                parts = [(Value.cast(self.i.payload[n]), Value.cast(self.o.payload[n]))
                         for n in self.registered_out]
            i_part = Cat(*(i for i, _ in parts))
            head = Signal(len(i_part), name="head")     # the head's fields
            skid = Signal(len(i_part), name="skid")     # the second beat's, when count is 2
            offset = 0
            for _, o in parts:
                m.d.comb += o.eq(head[offset:offset + len(o)])
                offset += len(o)
            # the skid is free while there is room: it takes the payload in every such cycle,
            # and holds the beat it took when the count goes to 2 (the head stays)
            with m.If(self.i.ready):
                m.d.sync += skid.eq(i_part)
            # the head loads whenever it is empty or leaves: the skid's beat if it holds one,
            # else the input's (a beat if i.valid, else nothing: the count says)
            with m.If(~o_valid | give):
                m.d.sync += head.eq(Mux(~i_ready, skid, i_part))
            if self.ahead is not None:
                layout = self.i.payload.shape()

                def fields(bits):
                    if self.registered_out is True:     # the whole payload, by its layout
                        return {name: bits[f.offset:f.offset + f.width] for name, f in layout}
                    out, offset = {}, 0
                    for name, (_, o) in zip(self.registered_out, parts):
                        out[name] = bits[offset:offset + len(o)]
                        offset += len(o)
                    return out
                shape, fn = self.ahead
                of_input, of_skid, of_head = (Value.cast(fn(fields(bits)))
                                              for bits in (i_part, skid, head))
                with m.If(~o_valid | give):
                    m.d.sync += self.o_ahead.eq(Mux(~i_ready, of_skid, of_input))
                with m.Else():
                    m.d.sync += self.o_ahead.eq(of_head)
        return m


class _RAMQueue(Elaboratable, FIFOInterface):
    """What :class:`BypassFIFO` and :class:`WriteAheadFIFO` share: ``depth - 1`` beats in a RAM
    (``storage``), read synchronously into the output register, whose pointers and level
    follow three strobes the queue drives: ``push`` (a beat into the RAM), ``ram_we`` (the
    RAM's write enable, at the write pointer) and ``pop`` (the next beat into the read
    register).  ``w_rdy`` is "the RAM has room"; ``level`` counts the RAM's beats and the
    output register's (``r_rdy``)."""

    def __init__(self, *, width, depth):
        if depth < 2:
            raise ValueError(f"{type(self).__name__} depth must be at least 2, not {depth}")
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def _storage(self, m, ram_style=None, read_ahead=False):
        """The RAM and its pointers in ``m``; returns the strobes to drive (``push``,
        ``ram_we``, ``pop``), ``any`` (the RAM holds a beat), ``level`` (how many) and
        ``data`` (its read register).  With ``read_ahead`` the RAM is read in every cycle at
        the slot after the head (a register), so after a ``pop`` ``data`` is the new head's
        slot as it was at the end of the last cycle (a beat pushed in the last cycle is not in
        it yet), rather than the beat that ``pop`` took."""
        inner_depth = self.depth - 1
        q = SimpleNamespace(push=Signal(), ram_we=Signal(), pop=Signal())
        inner_level = Signal(range(inner_depth + 1))
        storage = m.submodules.storage = Memory(shape=self.width, depth=inner_depth, init=[])
        if ram_style is not None:
            storage.attrs["ram_style"] = ram_style
        w_port = storage.write_port()
        r_port = storage.read_port(domain="sync")
        produce = Signal(range(inner_depth))
        consume = Signal(range(inner_depth))

        def incr(ptr):
            return Mux(ptr == inner_depth - 1, 0, ptr + 1)

        m.d.comb += [
            self.w_rdy.eq(inner_level != inner_depth),
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
            self.level.eq(inner_level + self.r_rdy),
            w_port.addr.eq(produce),
            w_port.data.eq(self.w_data),
            w_port.en.eq(q.ram_we),
        ]
        if read_ahead:
            # the slot after the head, a register: the read port's address and enable come
            # from no decision
            consume_next = Signal(range(inner_depth), init=1 % inner_depth)
            with m.If(q.pop):
                m.d.sync += consume_next.eq(incr(consume_next))
            m.d.comb += [r_port.addr.eq(consume_next), r_port.en.eq(1)]
        else:
            m.d.comb += [r_port.addr.eq(consume), r_port.en.eq(q.pop)]
        with m.If(q.push):
            m.d.sync += produce.eq(incr(produce))
        with m.If(q.pop):
            m.d.sync += consume.eq(incr(consume))
        m.d.sync += inner_level.eq(inner_level + q.push - q.pop)
        q.any, q.level, q.data = inner_level != 0, inner_level, r_port.data
        return q


class BypassFIFO(_RAMQueue):
    """A first-in first-out queue in block RAM that keeps the timing of a queue in registers.

    Amaranth's ``SyncFIFOBuffered`` puts its storage in block RAM by reading it synchronously
    into an output register, at the price of a cycle: a beat written into an empty queue is
    readable two cycles later.  Here that beat goes straight into the output register (the
    *bypass*) when the RAM holds nothing and the output register is free or being read in
    the same cycle; otherwise it is written into the RAM, which refills the output register as
    ``SyncFIFOBuffered`` does.  Ports, capacity and timing are those of ``SyncFIFO`` (whose
    storage is read asynchronously, so LUT RAM) of the same depth, cycle for cycle
    (``tests/test_pipeline.py`` compares the two on random traffic, and the proof
    ``bypass_fifo`` in ``tests/test_formal.py`` on every trace of up to 8 cycles at depth 3).

    Parameters
    ----------
    width, depth : int
        As ``SyncFIFO``; ``depth`` ≥ 2 (``depth - 1`` entries in the RAM, one in the output
        register).
    ram_style : str or None
        A ``ram_style`` attribute for the RAM (``"block"`` asks Yosys for block RAM however
        shallow the queue).

    Ports
    -----
    ``w_data``, ``w_en``, ``w_rdy``, ``w_level``, ``r_data``, ``r_en``, ``r_rdy``,
    ``r_level``, ``level``: as ``SyncFIFO``.

    Timing
    ------
    A beat written in cycle ``c`` is on ``r_data`` (``r_rdy`` high) from ``c + 1`` if every
    beat before it has been read by the end of ``c``, else from the cycle after the last of
    them is read; with ``r_en`` held high one beat leaves per cycle.  ``r_rdy`` is a register;
    ``r_data`` is a 2:1 select, by a register, between the RAM's read register and the bypass
    register.  The RAM's write enable is ``w_rdy``: the slot at the write pointer is free while
    the RAM has room, so it takes ``w_data`` in every such cycle, a beat or not (as
    :class:`WriteAheadFIFO`'s); a beat that bypasses it leaves the pointer where it was, and
    the next cycle's ``w_data`` overwrites the copy.  ``w_en`` and ``r_en`` reach the RAM's
    read enable, the pointers and the bypass register's enable, never the RAM's write enable,
    ``w_rdy`` or ``r_rdy`` in the same cycle.
    """

    def __init__(self, *, width, depth, ram_style=None):
        super().__init__(width=width, depth=depth)
        self.ram_style = ram_style

    def elaborate(self, platform):
        m = Module()
        q = self._storage(m, self.ram_style)
        bypass_data = Signal(self.width)
        from_bypass = Signal()      # the output register is the bypass register

        out_free = ~self.r_rdy | self.r_en          # the output register takes a beat now
        do_write = self.w_en & self.w_rdy
        # a beat written into an empty queue goes to the output register; nothing in the RAM
        # can be ahead of it, and nothing in the output register stays
        bypass = do_write & ~q.any & out_free
        m.d.comb += [
            q.push.eq(do_write & ~bypass),
            # the slot at the write pointer holds no beat while the RAM has room: it takes
            # w_data in every such cycle (as WriteAheadFIFO's), so the RAM's write enable is a
            # function of the level register, not of the bypass decision and the reader's
            # r_en behind it (the node's consumer ready, through out_free, into the block
            # RAMs' write enables was the node's critical path, 12.9 ns, 11.3 of it wires)
            q.ram_we.eq(self.w_rdy),
            q.pop.eq(q.any & out_free),
            self.r_data.eq(Mux(from_bypass, bypass_data, q.data)),
        ]
        with m.If(bypass):
            m.d.sync += bypass_data.eq(self.w_data)
        with m.If(out_free):
            m.d.sync += [self.r_rdy.eq(q.pop | bypass), from_bypass.eq(bypass)]
        return m


class WriteAheadFIFO(_RAMQueue):
    """Amaranth's ``SyncFIFOBuffered`` whose RAM is written ahead of the beat.

    The storage's next slot (at the write pointer) is free whenever the queue has room, so it
    takes ``w_data`` in every such cycle, a beat or not; ``w_en`` only advances the pointer and
    the level.  The RAM's write enable is then ``w_rdy``, a function of the level register,
    instead of the producer's decision: on an FPGA a shallow queue's LUT RAM is tens of cells,
    and a ``w_en`` at the end of a deep decision (the DMA's remote-window compare) spent 4 ns
    of routing reaching all of their write enables (``docs/fpga.md``).  What it stores is the
    same as ``SyncFIFOBuffered``'s: a slot written ahead is overwritten by the next cycle's
    ``w_data`` until a beat is taken into it, and a slot holding a beat is never written
    (``tests/test_pipeline.py`` compares the two on random traffic, cycle for cycle, and the
    proof ``write_ahead_fifo`` in ``tests/test_formal.py`` on every trace of up to 8 cycles).

    Parameters
    ----------
    width, depth : int
        As ``SyncFIFOBuffered``; ``depth`` >= 2 (``depth - 1`` entries in the RAM, one in the
        output register).
    ram_style : str or None
        A ``ram_style`` attribute for the RAM (``"distributed"`` keeps a wide, shallow queue
        in LUT RAM, where ``SyncFIFOBuffered``'s asynchronously read storage goes, rather than
        in block RAM, whose read register is slow to leave on an ECP5).
    read_ahead : bool
        ``r_data`` is a register of its own, loaded with the RAM's head, which is read ahead:
        the RAM is read in every cycle at the slot after the head (a register, so the read
        port's address and enable come from no decision), and the head is kept in a register
        beside it, or taken from a register of the last cycle's ``w_data`` when it was written
        in the last cycle (a slot read ahead of its write); a register chooses which, between
        the RAM's read register and one other register.  For a
        deep queue in block RAM whose reader is far away: the RAM's read register (on an ECP5
        5.8 ns from the clock to its output) then ends at registers that can sit beside it,
        and the reader starts from a flip-flop.  (Reading at the next head's address, chosen
        by the pop, put the reader's ready through the pointer's increment onto the address
        of every block RAM: the node's worst path, 12.3-14.0 ns.)  The same
        timing and capacity (compared with ``SyncFIFOBuffered`` as above: the proof
        ``read_ahead_fifo``); ``width`` more flip-flops twice.

    Ports
    -----
    ``w_data``, ``w_en``, ``w_rdy``, ``w_level``, ``r_data``, ``r_en``, ``r_rdy``,
    ``r_level``, ``level``: as ``SyncFIFOBuffered``.

    Timing
    ------
    As ``SyncFIFOBuffered``: a beat written into an empty queue in cycle ``c`` is on ``r_data``
    from ``c + 2``; with ``r_en`` held high one beat leaves per cycle.  ``w_rdy`` and ``r_rdy``
    are functions of registers; ``w_en`` reaches the write pointer and the level only.
    """

    def __init__(self, *, width, depth, ram_style=None, read_ahead=False):
        super().__init__(width=width, depth=depth)
        self.ram_style = ram_style
        self.read_ahead = bool(read_ahead)

    def elaborate(self, platform):
        m = Module()
        q = self._storage(m, self.ram_style, self.read_ahead)
        m.d.comb += [
            q.push.eq(self.w_en & self.w_rdy),
            # the slot at the write pointer holds no beat while there is room: write it in
            # every such cycle
            q.ram_we.eq(self.w_rdy),
            q.pop.eq(q.any & (~self.r_rdy | self.r_en)),
        ]
        if self.read_ahead:
            # the RAM's head, ``head``: the RAM's read register if ``ram_head`` (the last
            # cycle popped, so the register read the slot after the old head, the new head's,
            # at the end of that cycle, and the new head was not pushed in that cycle), else
            # ``other``: last cycle's ``w_data`` if the head was pushed in the last cycle (it
            # was the only beat then), else the head as it was.  Both are registers, set a
            # cycle ahead from the same three cases, so the RAM's word meets one choice of
            # two registers on its way into ``out`` (a choice of three, made from the
            # choice's own registers, put two logic levels and 4.1 ns of wires behind the
            # block RAM's 5.8 ns: a node's worst path, 10.5 ns)
            ram_head = Signal()
            other = Signal(self.width)
            out = Signal(self.width)
            head = Mux(ram_head, q.data, other)
            # the RAM is empty at the end of this cycle but for a push in it: the head is then
            # this cycle's w_data if it is pushed, and there is no head if not (so ``other``
            # takes w_data whether it is pushed or not, and w_en still reaches the pointer
            # and the level only)
            empty_next = (q.level == 0) | ((q.level == 1) & q.pop)
            m.d.sync += [
                ram_head.eq(q.pop & ~empty_next),
                other.eq(Mux(empty_next, self.w_data, head)),
            ]
            with m.If(q.pop):
                m.d.sync += out.eq(head)
            m.d.comb += self.r_data.eq(out)
        else:
            m.d.comb += self.r_data.eq(q.data)
        with m.If(q.pop):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


class WriteAheadSyncFIFO(Elaboratable, FIFOInterface):
    """Amaranth's ``SyncFIFO``, cycle for cycle, whose storage is written ahead.

    The storage is LUT RAM read as it stands at the read pointer (a beat written in cycle
    ``c`` is on ``r_data`` from ``c + 1``, ``r_rdy`` high, if every beat before it has been
    read), and its slot at the write pointer is free whenever the queue has room, so it takes
    ``w_data`` in every such cycle, a beat or not: its write enable is ``w_rdy``, a register
    (as is ``r_rdy``), and ``w_en`` moves only the write pointer and the level (as
    :class:`WriteAheadFIFO`'s).  For a wide, shallow queue whose reader is far away and whose
    writer decides late: the reader starts from the read pointer's register and the LUT RAM
    (on an ECP5 about a nanosecond, where a block RAM's read leaves 5.6 ns after the clock),
    and the writer's decision reaches a few flip-flops, not the write enables of every LUT-RAM
    cell.  (The MCQ's block RAM into the NMC unit's command slice was the node's longest path
    at several placements, 11.0 ns.)  The same timing and capacity as ``SyncFIFO``
    (``tests/test_pipeline.py`` compares the two on random traffic; the proof
    ``write_ahead_sync_fifo`` on every trace of up to 8 cycles).

    Parameters
    ----------
    width, depth : int
        As ``SyncFIFO``; ``depth`` >= 1.

    Ports
    -----
    ``w_data``, ``w_en``, ``w_rdy``, ``w_level``, ``r_data``, ``r_en``, ``r_rdy``,
    ``r_level``, ``level``: as ``SyncFIFO``.
    """

    def __init__(self, *, width, depth):
        if depth < 1:
            raise ValueError(f"WriteAheadSyncFIFO depth must be at least 1, not {depth}")
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        storage = m.submodules.storage = Memory(shape=self.width, depth=self.depth, init=[])
        storage.attrs["ram_style"] = "distributed"
        w_port = storage.write_port()
        r_port = storage.read_port(domain="comb")
        produce = Signal(range(self.depth))
        consume = Signal(range(self.depth))

        def incr(ptr):
            return Mux(ptr == self.depth - 1, 0, ptr + 1)

        do_write = self.w_en & self.w_rdy
        do_read = self.r_en & self.r_rdy
        # the readies are registers kept with the level (the level's compare with the depth
        # into the write enables of a hundred LUT-RAM cells was the node's longest path in the
        # MCQ at one placement, 10.0 ns, 8.8 of it wires)
        w_rdy = Signal(init=1, name="w_rdy_r")
        r_rdy = Signal(name="r_rdy_r")
        level_next = self.level + do_write - do_read
        # each the level's compare for every way it can move, from registers, chosen by this
        # cycle's write and read (the far reader's ready through the level's adder into the
        # readies was a node's path, 11.5 ns: now it reaches a 2:1 select)
        up, down = do_write & ~do_read, do_read & ~do_write
        m.d.sync += [
            w_rdy.eq(Mux(up, self.level != self.depth - 1, Mux(down, 1, w_rdy))),
            r_rdy.eq(Mux(up, 1, Mux(down, self.level != 1, r_rdy))),
        ]
        m.d.comb += [
            self.w_rdy.eq(w_rdy),
            self.r_rdy.eq(r_rdy),
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
            # the slot at the write pointer holds no beat while there is room: written in
            # every such cycle
            w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(self.w_rdy),
            r_port.addr.eq(consume), self.r_data.eq(r_port.data),
        ]
        with m.If(do_write):
            m.d.sync += produce.eq(incr(produce))
        with m.If(do_read):
            m.d.sync += consume.eq(incr(consume))
        m.d.sync += self.level.eq(level_next)
        return m
