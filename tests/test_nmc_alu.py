"""The near-bank ALU beat by beat against numpy (groundwork of the nmc/ issue): every element
type, STORE and UPDATE under random byte masks, partial-element masks refused, one beat per
cycle under output backpressure."""

import random

import pytest

from hw.interfaces import ELEM_BYTES, ElemType, Op, Packer
from hw.params import T3Params
from hw.testing import run_testbench
from nmc.alu import LATENCY, NearBankALU, alu_in_layout, alu_out_layout
from nmc.fpadd import BF16, FP16, FP32
from nmc.model import alu_reference, same_result
from sim.blocks.nmc.operands import operand_pairs


PARAMS = T3Params()
FMT = {ElemType.FP16: FP16, ElemType.BF16: BF16, ElemType.FP32: FP32}


def beats(etype, n, rng, seed):
    """``n`` (old, data) beat pairs whose lanes are drawn across every operand class."""
    lanes = PARAMS.beat_bytes // ELEM_BYTES[etype]
    if etype == ElemType.INT32:
        a = [rng.getrandbits(PARAMS.beat_bits) for _ in range(n)]
        b = [rng.getrandbits(PARAMS.beat_bits) for _ in range(n)]
        return list(zip(a, b))
    x, y = operand_pairs(FMT[etype], n * lanes, seed=seed)
    x, y = x.reshape(n, lanes), y.reshape(n, lanes)
    return [(int.from_bytes(x[k].tobytes(), "little"), int.from_bytes(y[k].tobytes(), "little"))
            for k in range(n)]


def whole_mask(etype, rng):
    ebytes = ELEM_BYTES[etype]
    mask = 0
    for k in range(0, PARAMS.beat_bytes, ebytes):
        if rng.random() < 0.85:
            mask |= ((1 << ebytes) - 1) << k
    return mask


def run_alu(requests, out_stall, seed):
    dut = NearBankALU(PARAMS)
    pin, pout = Packer(alu_in_layout(PARAMS)), Packer(alu_out_layout(PARAMS))
    rng = random.Random(seed)
    results, taken = [], []

    async def bench(ctx):
        index = cycle = 0
        while len(results) < len(requests):
            if index < len(requests):
                ctx.set(dut.i.payload.as_value(), pin.pack(requests[index]))
            ctx.set(dut.i.valid, index < len(requests))
            ctx.set(dut.o.ready, not (out_stall and rng.random() < out_stall))
            _, _, i_valid, i_ready, o_valid, o_ready, o_payload = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload.as_value())
            if i_valid and i_ready:
                taken.append(cycle)
                index += 1
            if o_valid and o_ready:
                results.append((cycle, pout.unpack(o_payload)))
            cycle += 1

    run_testbench(dut, bench)
    return results, taken


@pytest.mark.parametrize("etype", list(ElemType), ids=lambda e: e.name.lower())
def test_update_and_store_match_numpy(etype):
    rng = random.Random(etype.value + 1)
    requests = []
    for old, data in beats(etype, 120, rng, seed=etype.value):
        op = Op.UPDATE if rng.random() < 0.8 else Op.STORE
        mask = whole_mask(etype, rng) if rng.random() < 0.9 else rng.getrandbits(32)
        requests.append({"old": old, "data": data, "mask": mask, "op": op.value,
                         "etype": etype.value})
    results, taken = run_alu(requests, out_stall=0.3, seed=etype.value)
    assert len(results) == len(requests)
    errors = 0
    for k, (req, (_, out)) in enumerate(zip(requests, results)):
        want, error = alu_reference(PARAMS, req["old"], req["data"], req["mask"], req["op"],
                                    req["etype"])
        assert out["error"] == error, f"beat {k}: error {out['error']}, model {error}"
        assert same_result(PARAMS, etype, out["result"], want), \
            f"beat {k} ({Op(req['op']).name}, mask {req['mask']:#x}): hardware " \
            f"{out['result']:#x}, numpy {want:#x}"
        errors += error
    assert 0 < errors < len(requests)            # partial masks were exercised, not all


def test_one_beat_per_cycle_and_latency():
    rng = random.Random(9)
    requests = [{"old": old, "data": data, "mask": (1 << 32) - 1, "op": Op.UPDATE.value,
                 "etype": ElemType.FP16.value} for old, data in beats(ElemType.FP16, 40, rng, 9)]
    results, taken = run_alu(requests, out_stall=0.0, seed=0)
    assert taken == list(range(taken[0], taken[0] + len(requests)))
    assert [cycle for cycle, _ in results] == [t + LATENCY for t in taken]
