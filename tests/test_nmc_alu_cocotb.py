"""The near-bank ALU's exported Verilog under cocotb: at least 200,000 operand pairs per float
type (Verilator; 20,000 on Icarus, which is ~10x slower on this design; 10^7 total with
``--soak``), lanes drawn across every operand class, random output backpressure, bit for bit
against numpy (a NaN lane matches any NaN)."""

import cocotb
import numpy as np
import pytest

from hw.interfaces import ELEM_BYTES, ElemType, Op
from hw.params import T3Params
from nmc.alu import NearBankALU, alu_in_layout, alu_out_layout
from nmc.fpadd import BF16, FP16, FP32
from nmc.model import alu_reference, same_result
from sim.harness.agents import Bench, StreamSink, StreamSource, random_pauses
from sim.blocks.nmc.operands import operand_pairs
from sim.harness.runner import run_cocotb, tb_config


FMT = {ElemType.FP16: FP16, ElemType.BF16: BF16, ElemType.FP32: FP32}


@cocotb.test()
async def operand_sweep(dut):
    cfg = tb_config()
    params = T3Params(**cfg["params"])
    bench = Bench(dut)
    source = bench.add(StreamSource(dut, "i", alu_in_layout(params)))
    sink = bench.add(StreamSink(dut, "o", alu_out_layout(params)))
    sink.set_pause_generator(random_pauses(0.2, cfg["seed"]))
    await bench.start()
    full = (1 << params.beat_bytes) - 1
    requests = []
    for etype in (ElemType.FP16, ElemType.BF16, ElemType.FP32, ElemType.INT32):
        lanes = params.beat_bytes // ELEM_BYTES[etype]
        if etype == ElemType.INT32:
            rng = np.random.default_rng(cfg["seed"])
            raw = rng.integers(0, 1 << 32, (2, cfg["pairs"] // 10), dtype=np.uint64)
            x, y = raw.astype(np.uint32)
        else:
            x, y = operand_pairs(FMT[etype], cfg["pairs"], seed=cfg["seed"])
        n = len(x) // lanes
        x, y = x[:n * lanes].reshape(n, lanes), y[:n * lanes].reshape(n, lanes)
        for k in range(n):
            requests.append({"old": int.from_bytes(x[k].tobytes(), "little"),
                             "data": int.from_bytes(y[k].tobytes(), "little"),
                             "mask": full, "op": Op.UPDATE.value, "etype": etype.value})
    for r in requests:
        source.send_nowait(r)
    await bench.until(lambda: len(sink.received) == len(requests), 4 * len(requests) + 100)
    for k, (req, (_, out)) in enumerate(zip(requests, sink.received)):
        want, error = alu_reference(params, req["old"], req["data"], req["mask"], req["op"],
                                    req["etype"])
        assert out["error"] == error == 0
        assert same_result(params, req["etype"], out["result"], want), \
            f"beat {k} ({ElemType(req['etype']).name}): {req['old']:#x} + {req['data']:#x}: " \
            f"hardware {out['result']:#x}, numpy {want:#x}"
    dut._log.info("%d beats checked", len(requests))


@pytest.mark.cocotb
def test_nmc_alu_cocotb(sim, tmp_path, t3_options, request):
    params = T3Params()
    pairs = 10_000_000 if t3_options.soak else (200_000 if sim == "verilator" else 20_000)
    config = {"params": params.to_dict(), "pairs": pairs, "seed": t3_options.seed}
    # A quick build unless soaking (measured: 213 s for this test in the suite, 54 s quick).
    # Verilator's conditional-merging pass spends 107 of the 110 s it takes to convert the 40
    # pipelined adders (--stats: 111_merge_cond), and their C++ takes minutes at -O3; this
    # run's 200,000 pairs take 16 s at -O0 against 13 s.
    quick = not t3_options.soak
    run_cocotb(NearBankALU(params), "t3_nmc_alu", request.module, tmp_path, config=config,
               sim=sim, waves=t3_options.waves, cxx_opt="-O0" if quick else None,
               verilator_args=("-fno-merge-cond",) if quick else ())
