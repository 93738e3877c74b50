"""The near-bank ALU: one beat per cycle of op-and-store arithmetic.

``STORE`` writes ``data`` into the enabled bytes of the old beat; ``UPDATE`` adds ``data`` to the
old beat lane by lane in the element type: fp16 x16, bf16 x16, fp32 x8 (IEEE-754, round to
nearest even, :class:`nmc.fpadd.FPAdd`), int32 x8 (two's complement, wrapping).  Lanes whose
bytes are not enabled keep the old value.  An ``UPDATE`` whose mask enables part of an element
is refused: ``error`` is set and the old beat is returned unchanged (memory is not touched).
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.interfaces import ELEM_BYTES, ElemType, Op, mask_is_whole
from hw.params import T3Params
from .fpadd import BF16, FP16, FP32, FPAdd


__all__ = ["NearBankALU", "alu_in_layout", "alu_out_layout", "LATENCY"]


#: Pipeline registers inside each floating-point adder (:class:`nmc.fpadd.FPAdd`).
FP_LATENCY = 5

#: Cycles from an input handshake to its result on ``o`` (with ``o.ready`` high): the input
#: registers, the adders' five stages (``nmc.fpadd.FPAdd`` at latency 5) and the output register.
LATENCY = FP_LATENCY + 2


def alu_in_layout(params: T3Params):
    return data.StructLayout({
        "old": params.beat_bits, "data": params.beat_bits, "mask": params.beat_bytes,
        "op": Op, "etype": ElemType,
    })


def alu_out_layout(params: T3Params):
    return data.StructLayout({"result": params.beat_bits, "error": 1})


class NearBankALU(wiring.Component):
    """Op-and-store on one beat per cycle, in a pipeline of ``LATENCY`` = 7 stages.

    ``etypes`` lists the element types that get adders (all four by default); an ``UPDATE`` of
    another type is refused like a split element.

    Ports
    -----
    i : In(stream.Signature(alu_in_layout(params)))
        ``old`` (the beat read from the bank), ``data``, ``mask`` (byte enables), ``op``
        (``STORE`` or ``UPDATE``; ``READ`` returns ``old``), ``etype``.
    o : Out(stream.Signature(alu_out_layout(params)))
        ``result`` (the beat to write back) and ``error``.

    Timing
    ------
    Stage 0 (the input cycle): the input registered with one thing computed, the mask check
    (whether an ``UPDATE`` enables whole elements of a type with adders) — the command's
    fields and both beats once for the byte merge, and the two beats again for each element
    type's lanes, loaded only by an input of that type (a beat feeds 40 adders; from one
    register its wires spread over the adders' area: on an FPGA the fan-out, not the logic,
    set the first stage's delay); stage 1: the ``STORE`` merge, the bytes that take a sum
    (from the check's register: decided in stage 1 the check drove the reset of those
    bytes' registers, 12.0 ns in a node), the int32 sums and the adders' exponent compare
    and swap; stage 2: the adders' alignment shift and close-path difference; stage 3:
    their magnitude add and leading-zero count; stage 4: their normalising shift; stage 5:
    their rounding and choice of special results (NaN, infinity, zero); stage 6: the choice
    of the element type's sums, the lane merge, and the output register.  A result is
    valid on ``o`` ``LATENCY`` cycles after its input handshake; one input is taken every
    cycle while ``o.ready`` is high.  The whole pipeline moves together: ``i.ready`` =
    ``~o.valid | o.ready``, and nothing moves while ``o`` holds an unaccepted result.
    """

    def __init__(self, params: T3Params, etypes=tuple(ElemType)):
        self.params = params
        self.etypes = tuple(ElemType(e) for e in etypes)
        super().__init__({
            "i": In(stream.Signature(alu_in_layout(params))),
            "o": Out(stream.Signature(alu_out_layout(params))),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]

        # --- stage 0: the input registered -----------------------------------------------------
        req = Signal(alu_in_layout(p))
        valid = Signal()
        with m.If(advance):
            m.d.sync += [req.eq(self.i.payload), valid.eq(self.i.valid)]
        old, new, mask = req.old, req.data, req.mask
        # the mask check, from the input: an UPDATE of part of an element, or of a type without
        # adders, is refused; ``sum_ok``: an UPDATE that is not
        given = self.i.payload
        built = given.etype.as_value().matches(*(e.value for e in self.etypes))
        updating = given.op == Op.UPDATE
        refused = updating & (~mask_is_whole(given.mask, given.etype) | ~built)
        bad, sum_ok = Signal(name="bad"), Signal(name="sum_ok")
        with m.If(advance):
            m.d.sync += [bad.eq(refused), sum_ok.eq(updating & ~refused)]
        operands = {}
        for etype in self.etypes:
            # each type's own copy (its own load enable: Yosys cannot merge the copies)
            pair = Signal(2 * p.beat_bits, name=f"operands_{etype.name.lower()}")
            with m.If(advance & self.i.valid & (self.i.payload.etype == etype)):
                m.d.sync += pair.eq(Cat(self.i.payload.old, self.i.payload.data))
            operands[etype] = (pair[:p.beat_bits], pair[p.beat_bits:])

        def delay(value, name, cycles=FP_LATENCY):
            """``value`` as it was ``cycles`` advances ago (the adders' depth)."""
            for k in range(cycles):
                reg = Signal(len(value), name=f"{name}_d{k + 1}")
                with m.If(advance):
                    m.d.sync += reg.eq(value)
                value = reg
            return value

        # --- stage 1: the byte merge -----------------------------------------------------------
        # bytes that take the sum; every other byte is ``passthrough``: the old beat, or the
        # stored data where a STORE enables it
        take_sum = Signal(p.beat_bytes)
        m.d.comb += take_sum.eq(Mux(sum_ok, mask, 0))
        store = (req.op == Op.STORE)
        passthrough = Signal(p.beat_bits)
        m.d.comb += passthrough.eq(Cat(
            Mux(store & mask[k], new[8 * k:8 * k + 8], old[8 * k:8 * k + 8])
            for k in range(p.beat_bytes)))

        # --- lane-wise sums for every type, in the adders' pipeline ------------------------------
        sums = {}
        for etype, fmt in ((ElemType.FP16, FP16), (ElemType.BF16, BF16), (ElemType.FP32, FP32),
                           (ElemType.INT32, None)):
            if etype not in self.etypes:
                continue
            bits = 8 * ELEM_BYTES[etype]
            lanes = []
            lane_old, lane_new = operands[etype]
            for k in range(p.beat_bits // bits):
                a, b = lane_old[k * bits:(k + 1) * bits], lane_new[k * bits:(k + 1) * bits]
                if fmt is None:
                    lane = Signal(bits, name=f"int32_{k}")
                    m.d.comb += lane.eq(a + b)                     # wraps
                    lane = delay(lane, f"int32_{k}")
                else:
                    adder = FPAdd(fmt, FP_LATENCY)
                    m.submodules[f"{fmt.name}_{k}"] = adder
                    m.d.comb += [adder.a.as_value().eq(a), adder.b.as_value().eq(b),
                                 adder.en.eq(advance)]
                    lane = adder.s.as_value()
                lanes.append(lane)
            sums[etype] = Cat(*lanes)

        valid = delay(valid, "valid")
        etype = delay(req.etype.as_value(), "etype")
        take_sum = delay(take_sum, "take_sum")
        passthrough = delay(passthrough, "passthrough")
        bad = delay(bad, "bad")

        total = Signal(p.beat_bits)
        with m.Switch(etype):
            for e, value in sums.items():
                with m.Case(e):
                    m.d.comb += total.eq(value)
        result = Cat(Mux(take_sum[k], total[8 * k:8 * k + 8], passthrough[8 * k:8 * k + 8])
                     for k in range(p.beat_bytes))

        # --- output register -----------------------------------------------------------------------
        with m.If(advance):
            m.d.sync += [
                self.o.valid.eq(valid),
                self.o.payload.result.eq(result),
                self.o.payload.error.eq(bad),
            ]
        return m
