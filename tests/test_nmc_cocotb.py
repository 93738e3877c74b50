"""The near-bank unit's exported Verilog under cocotb (Verilator and Icarus), with either
scheduler: random command streams against the cycle-level model — values, order,
completion cycles and counters without backpressure; values and order with random gaps on
``cmd`` (and ``ahead``) and backpressure on ``resp``."""

import cocotb
import pytest

from hw.params import T3Params
from nmc.config import NMCParams
from nmc.frfcfs import FRFCFSUnit
from nmc.rtl import NMCUnit
from sim.blocks.nmc.cocotb_tests import random_commands, run_commands
from sim.harness.runner import run_cocotb, tb_config


def _commands(seed):
    cfg = tb_config()
    return random_commands(T3Params(**cfg["params"]), NMCParams.from_dict(cfg["nparams"]),
                           cfg["n"], seed)


@cocotb.test()
async def exact_timing(dut):
    await run_commands(dut, _commands(tb_config()["seed"]), 0.0, 0.0, 1)


@cocotb.test()
async def under_backpressure(dut):
    await run_commands(dut, _commands(tb_config()["seed"] + 1), 0.3, 0.4, 2)


@pytest.mark.cocotb
@pytest.mark.parametrize("scheduler", ["in-order", "bank-parallel", "fr-fcfs"])
def test_nmc_cocotb(sim, scheduler, tmp_path, t3_options, request):
    # bank-parallel: an ``ahead`` port that fills (four announcements) under the traffic;
    # FR-FCFS: a queue of 16 that fills
    params = T3Params()
    nparams = NMCParams(rows=4, scheduler=scheduler, ahead_depth=4, resp_depth=16)
    # Icarus runs the same Verilog about five times slower: a shorter stream (as for the ALU)
    n = 20_000 if t3_options.soak else (1_500 if sim == "verilator" else 500)
    config = {"params": params.to_dict(), "nparams": nparams.to_dict(), "n": n,
              "seed": t3_options.seed}
    # a quick Verilator build unless soaking, as for the ALU alone (tests/test_nmc_alu_cocotb.py)
    quick = not t3_options.soak
    unit = (FRFCFSUnit if scheduler == "fr-fcfs" else NMCUnit)(params, nparams)
    run_cocotb(unit, "t3_nmc", request.module, tmp_path, config=config,
               sim=sim, waves=t3_options.waves, cxx_opt="-O0" if quick else None,
               verilator_args=("-fno-merge-cond",) if quick else ())
