# amaranth: UnusedElaboratable=no
"""Shared parameters, payload packing, the register file, Verilog export and the Tracker's
driver-side checks: every refusal names the field and the value."""

import re

import pytest

from hw.csr import Reg, RegisterFile, RegisterMap, csr_signature
from hw.export import to_verilog
from hw.interfaces import ElemType, Op, Source, Stream, mem_request_layout, pack, unpack
from hw.params import T3Params
from tracker.config import (PAPER_TABLE_BITS, Region, TrackerParams, check_regions,
                            check_schedule, table_bits)
from tracker.rtl import Tracker
from hw.testing import run_testbench


# --- T3Params ---------------------------------------------------------------------------

def test_params_defaults_and_json_round_trip():
    p = T3Params()
    assert (p.beat_bits, p.beat_bytes, p.beat_offset_bits) == (256, 32, 5)
    assert T3Params.from_json(T3Params(addr_bits=40).to_json()) == T3Params(addr_bits=40)


@pytest.mark.parametrize("kwargs,message", [
    (dict(beat_bits=200), r"^beat_bits must be a power of two from 32 to 1024, not 200$"),
    (dict(beat_bits=2048), r"^beat_bits must be a power of two from 32 to 1024, not 2048$"),
    (dict(addr_bits=11), r"^addr_bits must be an integer from 12 to 64, not 11$"),
    (dict(addr_bits=65), r"^addr_bits must be an integer from 12 to 64, not 65$"),
    (dict(wg_id_bits=0), r"^wg_id_bits must be an integer from 1 to 32, not 0$"),
    (dict(wf_id_bits=7), r"^wf_id_bits must be an integer from 0 to 6, not 7$"),
    (dict(tag_bits=True), r"^tag_bits must be an integer from 0 to 16, not True$"),
    (dict(wg_id_bits="8"), r"^wg_id_bits must be an integer from 1 to 32, not '8'$"),
])
def test_params_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        T3Params(**kwargs)


def _declared():
    """Every params dataclass field declared with :func:`hw.params.param`: ``(cls, field)``."""
    import dataclasses
    from dma.config import DMAParams
    from mc_arbiter.config import ArbiterParams
    from nmc.config import NMCParams
    return [(cls, f) for cls in (T3Params, TrackerParams, ArbiterParams, NMCParams, DMAParams)
            for f in dataclasses.fields(cls) if "doc" in f.metadata]


@pytest.mark.parametrize("cls, field", _declared(), ids=lambda x: getattr(x, "name",
                                                                          getattr(x, "__name__", "")))
def test_a_declared_parameter_is_checked_and_helped_from_its_one_declaration(cls, field):
    """A field declared with ``param`` (its range and help once): the dataclass refuses a value
    just outside the range, naming the field and quoting the value, and takes its bounds (and
    with ``pow2`` no other value between them); ``t3``'s option for it shows that range and
    the dataclass's default."""
    from hw.params import param_help
    m = field.metadata
    kind = "a power of two" if m["pow2"] else "an integer"
    for bad in (m["lo"] - 1, m["hi"] + 1):
        with pytest.raises(ValueError, match=rf"^{field.name} must be {kind} from {m['lo']} "
                                             rf"to {m['hi']}, not {bad}$"):
            cls(**{field.name: bad})
    for good in (m["lo"], m["hi"]):
        try:
            cls(**{field.name: good})
        except ValueError as error:     # another field's check (a cross-field bound)
            assert not str(error).startswith(f"{field.name} must be"), error
    if m["pow2"] and m["hi"] >= 4:
        with pytest.raises(ValueError, match=rf"^{field.name} must be a power of two"):
            cls(**{field.name: 3})
    assert param_help(cls, field.name) == \
        f"{m['doc']}: {kind} from {m['lo']} to {m['hi']} (default {field.default})"


def test_params_frozen():
    with pytest.raises(AttributeError):
        T3Params().beat_bits = 128


# --- payloads -----------------------------------------------------------------------------

@pytest.mark.parametrize("width", [1, 2, 3, 12, 32])
def test_popcount_counts_the_set_bits(width):
    # the balanced adder tree against Python's bit count, on a value and on a list of bits
    import random
    from amaranth import Elaboratable, Module, Signal
    from hw.interfaces import popcount

    class Count(Elaboratable):
        def __init__(self):
            self.x = Signal(width)
            self.n, self.n_list = Signal(8), Signal(8)

        def elaborate(self, platform):
            m = Module()
            m.d.comb += [self.n.eq(popcount(self.x)),
                         self.n_list.eq(popcount([self.x[k] for k in range(width)]))]
            return m

    rng = random.Random(width)
    values = range(1 << width) if width <= 12 else \
        [0, (1 << width) - 1] + [rng.getrandbits(width) for _ in range(2000)]
    dut, wrong = Count(), []

    async def bench(ctx):
        for v in values:
            ctx.set(dut.x, v)
            if (ctx.get(dut.n), ctx.get(dut.n_list)) != (bin(v).count("1"),) * 2:
                wrong.append(v)

    run_testbench(dut, bench, clock=None)
    assert not wrong, f"{width} bits: wrong count of {wrong[:5]}"


def test_pack_unpack_round_trip_and_refusals():
    layout = mem_request_layout(T3Params())
    value = {"addr": 0xDEAD_BEE0, "data": (1 << 256) - 1, "mask": 0xFFFF_0000,
             "op": Op.UPDATE, "stream": Stream.COMM, "source": Source.DMA, "wg_id": 0xABCD,
             "wf_id": 7, "tracked": 1, "etype": ElemType.BF16, "tag": 9}
    back = unpack(layout, pack(layout, value))
    assert back == {k: (v.value if hasattr(v, "value") else v) for k, v in value.items()}
    with pytest.raises(ValueError, match=r"^field 'wf_id' value 8 does not fit 3 bits$"):
        pack(layout, {"wf_id": 8})
    with pytest.raises(ValueError, match=r"^unknown field\(s\) \['bogus'\]"):
        pack(layout, {"bogus": 1})


# --- register file --------------------------------------------------------------------------

def test_register_file_layout_and_refusals():
    regs = RegisterMap([Reg("a", 1, "rw", "a"), Reg("wide", 40, "rw", "w"),
                        Reg("st", 3, "w1c", "s"), Reg("go", 1, "wo", "g")])
    assert [regs.address(n) for n in ("a", "wide", "st", "go")] == [0, 1, 3, 4]
    assert regs.addr_bits == 3
    assert regs.word_writes("wide", 0x12_3456_789A) == [(1, 0x3456_789A), (2, 0x12)]
    with pytest.raises(ValueError, match=r"^register 'a' is 1 bits; 2 does not fit$"):
        regs.word_writes("a", 2)
    with pytest.raises(KeyError, match="no register named 'nope'"):
        regs.address("nope")
    with pytest.raises(ValueError, match=r"^register 'x' is defined twice$"):
        RegisterMap([Reg("x", 1, "rw", ""), Reg("x", 1, "ro", "")])
    with pytest.raises(TypeError, match=r"^a RegisterFile is built from a RegisterMap, not "
                                        r"\[Reg"):
        RegisterFile([Reg("x", 1, "rw", "")])
    with pytest.raises(ValueError, match=r"^register 'y': access must be one of"):
        Reg("y", 1, "rx", "")
    with pytest.raises(ValueError, match=r"^register 'z': a w1c register is at most 32 bits, "
                                         r"not 33$"):
        Reg("z", 33, "w1c", "")
    assert "| 0x01-0x02 | `wide` | 40 | rw |" in regs.markdown()


@pytest.mark.parametrize("latency", [1, 2])
def test_register_file_rtl_read_write_and_unmapped(latency):
    from amaranth import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In

    rmap = RegisterMap([Reg("a", 8, "rw", "", reset=5), Reg("wide", 40, "rw", ""),
                        Reg("ro", 32, "ro", ""), Reg("go", 1, "wo", "")], read_latency=latency)
    regs = RegisterFile(rmap)

    class Dut(wiring.Component):
        csr: In(csr_signature(rmap.addr_bits))
        pulses: wiring.Out(8)

        def elaborate(self, platform):
            m = Module()
            regs.elaborate(m, self.csr, {"ro": 0xCAFE_F00D})
            with m.If(regs.write_strobe("go")):
                m.d.sync += self.pulses.eq(self.pulses + 1)
            return m

    dut = Dut()
    seen = {}

    async def bench(ctx):
        from hw.testing import csr_read, csr_write, reg_read, reg_write
        seen["reset"] = await reg_read(ctx, dut.csr, rmap, "a")
        await reg_write(ctx, dut.csr, rmap, "wide", 0xAB_1234_5678)
        seen["wide"] = await reg_read(ctx, dut.csr, rmap, "wide")
        seen["ro"] = await reg_read(ctx, dut.csr, rmap, "ro")
        await csr_write(ctx, dut.csr, rmap.address("ro"), 0)       # ignored
        seen["ro_after"] = await reg_read(ctx, dut.csr, rmap, "ro")
        await csr_write(ctx, dut.csr, rmap.address("go"), 1)
        await csr_write(ctx, dut.csr, rmap.address("go"), 1)
        seen["go_read"] = await csr_read(ctx, dut.csr, rmap.address("go"), latency)
        seen["unmapped"] = await csr_read(ctx, dut.csr, 7, latency)
        seen["pulses"] = ctx.get(dut.pulses)

    run_testbench(dut, bench)
    assert seen == {"reset": 5, "wide": 0xAB_1234_5678, "ro": 0xCAFE_F00D,
                    "ro_after": 0xCAFE_F00D, "go_read": 0, "unmapped": 0, "pulses": 2}


def test_a_two_cycle_read_answers_every_word_as_it_was_at_its_address():
    """``read_latency=2``: words in several groups of 8 (and a group with holes), each read
    two cycles after its address with the value of the address's cycle (a free-running
    counter in every word shows which cycle), a new address every cycle; an unmapped word
    or a hole reads as zero; a map refuses any other latency."""
    from amaranth import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In

    with pytest.raises(ValueError, match=r"^read_latency must be 1 or 2, not 3$"):
        RegisterMap([Reg("x", 1, "rw", "")], read_latency=3)
    # 20 one-word counters at words 0-19, a wo word (a hole that reads zero) at 20, 21-22 a
    # two-word ro; words 23-31 unmapped
    names = [f"c{k}" for k in range(20)]
    rmap = RegisterMap([Reg(n, 32, "ro", "") for n in names] + [Reg("go", 1, "wo", ""),
                       Reg("wide", 64, "ro", "")], read_latency=2)
    assert rmap.addr_bits == 5

    class Dut(wiring.Component):
        csr: In(csr_signature(rmap.addr_bits))

        def elaborate(self, platform):
            m = Module()
            now = Signal(16)
            m.d.sync += now.eq(now + 1)
            RegisterFile(rmap).elaborate(m, self.csr, {
                **{n: (k << 16) | now for k, n in enumerate(names)},
                "wide": (0xAB << 48) | (21 << 32) | now})
            return m

    dut = Dut()
    expected, seen = {}, []

    def word(addr, cycle):
        if addr < 20:
            return (addr << 16) | cycle
        return {21: cycle, 22: (0xAB << 16) | 21}.get(addr, 0)

    async def bench(ctx):
        import random
        rng = random.Random(5)
        addrs = list(range(32)) + [rng.randrange(32) for _ in range(60)]
        for cycle, addr in enumerate(addrs + [0, 0]):
            ctx.set(dut.csr.addr, addr)
            if cycle >= 2:
                seen.append(ctx.get(dut.csr.r_data))
            expected[cycle] = word(addr, cycle)
            await ctx.tick()

    run_testbench(dut, bench)
    assert seen == [expected[c] for c in range(len(seen))]
    assert len(seen) == 92


def test_rw_next_is_what_the_register_holds_next_cycle():
    # random host writes to a two-word register, its neighbour and a hole, under a lock that
    # comes and goes: the value rw_next shows in a cycle is the register's in the next one
    import random
    from amaranth import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In

    rmap = RegisterMap([Reg("a", 8, "rw", "", reset=5), Reg("wide", 40, "rw", ""),
                        Reg("b", 20, "rw", "", reset=7)])
    regs = RegisterFile(rmap)

    class Dut(wiring.Component):
        csr: In(csr_signature(rmap.addr_bits))
        locked: In(1)

        def elaborate(self, platform):
            m = Module()
            regs.elaborate(m, self.csr, {})
            regs.lock(m, ["wide", "b"], self.locked)
            self.predicted = {name: Signal(rmap[name].width, name=f"pred_{name}")
                              for name in ("a", "wide")}
            for name, pred in self.predicted.items():
                m.d.sync += pred.eq(regs.rw_next(m, name))
            # the sum of two registers' next values, made from registers (next_sum)
            self.sum = Signal(21)
            m.d.sync += self.sum.eq(regs.next_sum(m, "a", "b"))
            return m

    dut = Dut()
    checks = []

    async def bench(ctx):
        rng = random.Random(3)
        await ctx.tick()
        for _ in range(400):
            ctx.set(dut.csr.addr, rng.randrange(1 << rmap.addr_bits))
            ctx.set(dut.csr.w_stb, rng.random() < 0.7)
            ctx.set(dut.csr.w_data, rng.getrandbits(32))
            ctx.set(dut.locked, rng.random() < 0.3)
            await ctx.tick()
            for name, pred in dut.predicted.items():
                checks.append((name, ctx.get(pred), ctx.get(regs.rw(name))))
            checks.append(("a+b", ctx.get(dut.sum), ctx.get(regs.rw("a")) + ctx.get(regs.rw("b"))))

    run_testbench(dut, bench)
    wrong = [c for c in checks if c[1] != c[2]]
    assert not wrong and len(checks) == 1200
    assert len({value for name, value, _ in checks if name == "wide"}) > 50   # it did move
    # the sum moved with writes of either register, locked ones refused
    assert len({c[1] for c in checks if c[0] == "a+b"}) > 100


def test_next_sum_refuses_registers_it_cannot_sum():
    from amaranth import Module
    from amaranth.lib import wiring
    rmap = RegisterMap([Reg("a", 8, "rw", ""), Reg("wide", 40, "rw", ""), Reg("r", 8, "ro", "")])
    regs = RegisterFile(rmap)
    m = Module()
    regs.elaborate(m, csr_signature(rmap.addr_bits).flip().create(), {"r": 0})
    for other in ("wide", "r"):
        with pytest.raises(ValueError, match=rf"^next_sum needs two one-word rw registers, not "
                                             rf"'a' and '{other}'$"):
            regs.next_sum(m, "a", other)


def test_register_fields_place_encode_decode_and_refuse():
    from hw.csr import Field
    reg = Reg("mode", None, "rw", "m", fields=(Field("valid"), Field("op", 2),
                                               Field("gpu", 8, lsb=8)))
    assert reg.width == 16 and [f.lsb for f in reg.fields] == [0, 1, 8]
    assert [f.bits for f in reg.fields] == ["[0]", "[2:1]", "[15:8]"]
    assert reg.encode(valid=1, op=2, gpu=0x35) == 0x3505
    assert reg.decode(0x3505) == {"valid": 1, "op": 2, "gpu": 0x35}
    assert reg.mask("op", "gpu") == 0xFF06
    flags = Reg("status", None, "w1c", "", fields=(Field("a"), Field("b", lsb=4))).flags(
        "S", {"BOTH": ["a", "b"]})
    assert (flags.A, flags.B, flags.BOTH) == (1, 16, 17)
    with pytest.raises(ValueError, match=r"^register 'mode' field 'op' is 2 bits; 4 does not "
                                         r"fit$"):
        reg.encode(op=4)
    with pytest.raises(KeyError, match="register 'mode' has no field 'nope'"):
        reg.encode(nope=1)
    with pytest.raises(ValueError, match=r"^register 'r': field 'b' at bit 1 overlaps the "
                                         r"field below it$"):
        Reg("r", None, "rw", "", fields=(Field("a", 2), Field("b", lsb=1)))
    with pytest.raises(ValueError, match=r"^register 'r': fields need 9 bits, more than its "
                                         r"width 8$"):
        Reg("r", 8, "rw", "", fields=(Field("a", 9),))
    with pytest.raises(ValueError, match=r"^register 'r': only a w1c register has live "
                                         r"fields$"):
        Reg("r", None, "rw", "", fields=(Field("a", live=True),))


def test_register_fields_in_the_rtl_status_command_and_views():
    """A w1c register kept by ``RegisterFile.status``: a sticky bit sets the cycle after its
    event, stays, clears on a write of 1 (an event in the same cycle wins), a live bit reads
    its input; a wo field's strobe lasts one cycle; an rw register is a View of its fields."""
    from amaranth import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out
    from hw.csr import Field
    from hw.testing import csr_read, csr_write, reg_read

    rmap = RegisterMap([
        Reg("ctrl", None, "rw", "", reset=0b10, fields=(Field("a"), Field("b"))),
        Reg("cmd", None, "wo", "", fields=(Field("x"), Field("y"))),
        Reg("status", None, "w1c", "", fields=(Field("err"), Field("busy", lsb=4, live=True))),
    ])
    regs = RegisterFile(rmap)

    class Dut(wiring.Component):
        csr: In(csr_signature(rmap.addr_bits))
        event: In(1)
        busy: In(1)
        ys: Out(8)
        b: Out(1)

        def elaborate(self, platform):
            m = Module()
            regs.elaborate(m, self.csr, {})
            regs.status(m, "status", err=self.event, busy=self.busy)
            with m.If(regs.command("cmd", "y")):
                m.d.sync += self.ys.eq(self.ys + 1)
            m.d.comb += self.b.eq(regs.rw("ctrl").b)
            return m

    dut = Dut()
    seen = []
    status = rmap.address("status")

    async def bench(ctx):
        seen.append(ctx.get(dut.b))                                 # reset value of a field
        ctx.set(dut.event, 1)
        await ctx.tick()
        ctx.set(dut.event, 0)
        ctx.set(dut.busy, 1)
        seen.append(await reg_read(ctx, dut.csr, rmap, "status"))  # err sticky, busy live
        await csr_write(ctx, dut.csr, status, 0b1_0001)            # clear err (busy: no)
        seen.append(await csr_read(ctx, dut.csr, status))
        ctx.set(dut.event, 1)                                       # event and clear together
        await csr_write(ctx, dut.csr, status, 1)
        ctx.set(dut.event, 0)
        ctx.set(dut.busy, 0)
        seen.append(await csr_read(ctx, dut.csr, status))
        await csr_write(ctx, dut.csr, rmap.address("cmd"), 0b10)
        await csr_write(ctx, dut.csr, rmap.address("cmd"), 0b01)
        seen.append(ctx.get(dut.ys))

    run_testbench(dut, bench)
    assert seen == [1, 0b1_0001, 0b1_0000, 0b0_0001, 1]
    with pytest.raises(ValueError, match=r"^register 'status': inputs must name exactly its "
                                         r"fields; these differ: \['busy'\]$"):
        regs.status(Module(), "status", err=Signal())


# --- export -----------------------------------------------------------------------------------

def test_counters_and_sums_saturate_and_clear():
    """hw.csr.count and hw.csr.accumulate on 4-bit registers: they add what they are given,
    stop at 15 instead of wrapping, and a clear wins over an event in the same cycle."""
    from amaranth import Elaboratable, Module, Signal
    from hw.csr import accumulate, count

    class Dut(Elaboratable):
        def __init__(self):
            self.event, self.amount, self.clear = Signal(), Signal(3), Signal()
            self.n, self.total = Signal(4), Signal(4)

        def elaborate(self, platform):
            m = Module()
            count(m, self.n, self.event, self.clear)
            accumulate(m, self.total, self.amount, self.clear)
            return m

    dut = Dut()
    steps = [(1, 5, 0)] * 4 + [(1, 7, 1), (1, 7, 0), (0, 0, 0)] + [(1, 7, 0)] * 3
    seen, n, total = [], 0, 0
    want = []
    for event, amount, clear in steps:
        n = 0 if clear else min(15, n + event)
        total = 0 if clear else min(15, total + amount)
        want.append((n, total))

    async def bench(ctx):
        for event, amount, clear in steps:
            ctx.set(dut.event, event)
            ctx.set(dut.amount, amount)
            ctx.set(dut.clear, clear)
            await ctx.tick()
            seen.append((ctx.get(dut.n), ctx.get(dut.total)))

    run_testbench(dut, bench)
    assert seen == want
    assert seen[3] == (4, 15) and seen[4] == (0, 0) and seen[-1] == (4, 15)


def test_export_refuses_a_constant_only_comb_block():
    """A comb signal with a constant-only part becomes an ``always @*`` block with nothing to
    trigger it: simulators never run it, so the export refuses the design, naming it."""
    from amaranth import Module, Signal
    from amaranth.lib import data, wiring
    from amaranth.lib.wiring import In, Out

    class Dut(wiring.Component):
        a: In(8)
        o: Out(16)

        def elaborate(self, platform):
            m = Module()
            pair = Signal(data.StructLayout({"lo": 8, "hi": 8}))
            m.d.comb += [pair.hi.eq(0x5A)]
            with m.If(self.a[0]):
                m.d.comb += pair.lo.eq(self.a)
            m.d.comb += self.o.eq(pair)
            return m

    with pytest.raises(ValueError, match=r"^dut: the Verilog of .* is a constant-only always "
                                         r"@\* block that no simulator runs"):
        to_verilog(Dut(), "dut")


def test_export_names_the_module_and_has_no_source_paths():
    tracker = Tracker(T3Params(), TrackerParams(sets=4, ways=2))
    with pytest.raises(ValueError, match=r"^Verilog module name must be an identifier, "
                                         r"not 't3-tracker'$"):
        to_verilog(tracker, "t3-tracker")
    text = to_verilog(tracker, "t3_tracker")
    assert re.search(r"^module t3_tracker\(", text, re.M)
    assert "module top" not in text and ".py:" not in text and "/work" not in text
    for port in ("i__valid", "i__ready", "i__payload", "o__valid", "o__ready", "o__payload",
                 "csr__addr", "csr__w_stb", "csr__w_data", "csr__r_data", "clk", "rst"):
        assert re.search(rf"\b(input|output)\b[^;]*\b{port};", text), port


def test_a_memorys_contents_are_written_as_amaranth_writes_them():
    """hw.export writes a memory's initial contents in one step (``_emit_memory``): the
    Verilog is Amaranth's own, byte for byte, for contents of every kind (signed rows,
    widths that are not a byte's multiple, one row, all zeros, and a Tracker's real ones);
    and a design with no memory is untouched."""
    import random
    from amaranth import Module, Signal, signed
    from amaranth.lib import memory, wiring
    from amaranth.lib.wiring import In, Out
    from hw.export import _memory_init_in_one_step

    class Mems(wiring.Component):
        def __init__(self, shapes):
            self.shapes = shapes
            super().__init__({"addr": In(8), "o": Out(sum(s[0] for s in shapes) + 1)})

        def elaborate(self, platform):
            m = Module()
            outs = []
            for k, (width, depth, init, sign) in enumerate(self.shapes):
                shape = signed(width) if sign else width
                mem = m.submodules[f"mem{k}"] = memory.Memory(shape=shape, depth=depth,
                                                             init=init)
                port = mem.read_port()
                m.d.comb += port.addr.eq(self.addr)
                outs.append(port.data)
            flag = Signal()
            m.d.sync += flag.eq(~flag)
            m.d.comb += self.o.eq(Cat(*outs, flag))
            return m

    from amaranth import Cat
    rng = random.Random(7)
    shapes = [(13, 37, [rng.getrandbits(13) for _ in range(37)], False),
              (9, 16, [rng.randrange(-256, 256) for _ in range(16)], True),
              (64, 1, [rng.getrandbits(64)], False),
              (32, 64, [0] * 64, False),
              (8, 12, [], False)]
    designs = [lambda: Mems(shapes), lambda: Tracker(T3Params(), TrackerParams(sets=4, ways=2))]
    texts = []
    for make in designs:
        with _memory_init_in_one_step(fast=False):
            theirs = to_verilog(make(), "dut")
        texts.append(to_verilog(make(), "dut"))
        assert texts[-1] == theirs
    # the contents are in it: every row of the first memory, as Yosys writes its initial block
    for row, value in enumerate(shapes[0][2]):
        assert f"mem0[{row}] = 13'h{value:04x};" in texts[0], row


# --- Tracker geometry and driver-side checks ----------------------------------------------------

@pytest.mark.parametrize("kwargs,message", [
    (dict(sets=3), r"^sets must be a power of two from 1 to 4096, not 3$"),
    (dict(sets=8192), r"^sets must be a power of two from 1 to 4096, not 8192$"),
    (dict(ways=0), r"^ways must be an integer from 1 to 16, not 0$"),
    (dict(regions=17), r"^regions must be an integer from 1 to 16, not 17$"),
    (dict(count_bits=33), r"^count_bits must be an integer from 1 to 32, not 33$"),
])
def test_tracker_params_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrackerParams(**kwargs)


def test_tracker_geometry_needs_enough_wg_id_bits():
    with pytest.raises(ValueError, match=r"^sets 256 needs 8 wg_id bits to index, but "
                                         r"wg_id_bits is 4$"):
        TrackerParams(sets=256).check_against(T3Params(wg_id_bits=4))


P, TP = T3Params(), TrackerParams(sets=4, ways=2, regions=2, count_bits=8)


@pytest.mark.parametrize("regions,message", [
    ([Region(0, 32, 1)] * 3, r"^3 regions given but the Tracker has 2 region registers$"),
    ([Region(16, 32, 1)], r"^region 0: base 0x10 is not a multiple of the beat size 32$"),
    ([Region(0, 48, 1)], r"^region 0: size 0x30 is not a multiple of the beat size 32$"),
    ([Region(0, 0, 1)], r"^region 0: size must be positive, not 0$"),
    ([Region(0xFFFF_FFE0, 64, 1)], r"^region 0: base 0xffffffe0 \+ size 0x40 passes the "
                                   r"32-bit address space$"),
    ([Region(0, 32, 0)], r"^region 0: tile_elems must be from 1 to 255, not 0$"),
    ([Region(0, 32, 4, 0)], r"^region 0: updates_per_element must be from 1 to 255, not 0$"),
    ([Region(0, 32, 200, 2)], r"^region 0: threshold 200 x 2 = 400 does not fit count_bits 8 "
                              r"\(max 255\)$"),
    ([Region(0, 64, 1), Region(32, 64, 1)], r"^region 0 \[0x0, 0x40\) overlaps region 1 "
                                            r"\[0x20, 0x60\)$"),
    ([Region(-32, 64, 1)], r"^region 0: base must be a non-negative integer, not -32$"),
])
def test_check_regions_refusals(regions, message):
    with pytest.raises(ValueError, match=message):
        check_regions(P, TP, regions)


def test_check_regions_accepts_adjacent():
    regions = [Region(0, 64, 4), Region(64, 64, 4)]
    assert check_regions(P, TP, regions) == regions


def test_check_schedule_accepts_the_ring_schedule_and_refuses_overfull_sets():
    tp = TrackerParams(sets=256, ways=8)
    # 256 WGs per stage, one WF each, global wg_ids: two open stages put 2 tiles per set
    stages = [range(s * 256, (s + 1) * 256) for s in range(4)]
    check_schedule(P, tp, stages, wfs_per_wg=1)
    # 4 WFs per WG: 2 stages x 4 = 8 tiles per set, exactly the ways
    check_schedule(P, tp, stages, wfs_per_wg=4)
    with pytest.raises(ValueError, match=r"^set 0 would hold 10 open tiles in stages 0-1 "
                                         r"\(2 workgroups x 5 wavefronts\) but the Tracker "
                                         r"has 8 ways$"):
        check_schedule(P, tp, stages, wfs_per_wg=5)
    with pytest.raises(ValueError, match=r"^set 0 would hold 12 open tiles in stages 0-2 "):
        check_schedule(P, tp, stages, wfs_per_wg=4, open_stages=3)


@pytest.mark.parametrize("args,message", [
    (dict(stages=[[0, 1], [1]], wfs_per_wg=1),
     r"^wg_id 1 appears more than once in stages 0-1, which can be open together$"),
    (dict(stages=[[1 << 16]], wfs_per_wg=1), r"^stage 0: wg_id 65536 does not fit "
                                              r"wg_id_bits 16$"),
    (dict(stages=[[0]], wfs_per_wg=9), r"^wfs_per_wg must be an integer from 1 to 8 \(wf_id_bits 3\), "
                                       r"not 9$"),
    (dict(stages=[[0]], wfs_per_wg=1, open_stages=0),
     r"^open_stages must be a positive integer, not 0$"),
])
def test_check_schedule_refusals(args, message):
    with pytest.raises(ValueError, match=message):
        check_schedule(P, TrackerParams(), **args)


def test_paper_configuration_cost():
    # 256 sets x 8 ways, wg_id 12 bits (wg_msb 4), wf_id 3, 48-bit addresses, 16-bit counters
    bits = table_bits(T3Params(addr_bits=48, wg_id_bits=12), TrackerParams(sets=256, ways=8))
    # entry = valid 1 + tag 7 + start 43 + count 16 + region 2 = 69 bits
    assert bits == 256 * 8 * 69
    assert bits <= PAPER_TABLE_BITS
