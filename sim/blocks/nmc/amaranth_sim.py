"""Drive the near-bank unit under Amaranth's simulator: commands in with optional gaps,
responses out with optional backpressure; returns the responses with the cycle each was
taken, the cycle each command was taken, and the registers.  A bank-parallel unit's commands
are announced on ``ahead`` in order, each no later than the cycle it is first offered on
``cmd``, as early as the port takes them (``announce=False``: never).  An FR-FCFS unit
(:class:`nmc.frfcfs.FRFCFSUnit`) takes a command into its queue; ``issued`` holds the cycles of
its column commands (``retired``)."""

import dataclasses
import random
import time

from hw.interfaces import Packer, mem_request_layout, mem_response_layout
from hw.testing import reg_read, run_testbench
from nmc.frfcfs import FRFCFSUnit
from nmc.rtl import NMCUnit


__all__ = ["simulate_nmc", "NMCRun"]


@dataclasses.dataclass
class NMCRun:
    responses: list      # [(cycle, response dict)]
    taken: list          # cycle each command left cmd
    heads: list          # per cycle from the first: the command index offered, or None
    regs: dict
    wall_s: float
    aheads: list = None  # per cycle: the command index announced on ``ahead``, or None
    issued: list = None  # FR-FCFS: the cycles of the column commands (and refusals)


def simulate_nmc(params, nparams, commands, *, in_gap=0.0, resp_stall=0.0, seed=0,
                 max_cycles=None, vcd=None, lead=0, announce=True, ahead_gap=0.0,
                 bypass_cap=None):
    frfcfs = nparams.scheduler == "fr-fcfs"
    if frfcfs:
        dut = FRFCFSUnit(params, nparams, **({} if bypass_cap is None else
                                             {"bypass_cap": bypass_cap}))
    else:
        dut = NMCUnit(params, nparams)
    pin, pout = Packer(mem_request_layout(params)), Packer(mem_response_layout(params))
    rng = random.Random(seed)
    max_cycles = max_cycles or 200 * len(commands) + 1000
    responses, taken, heads, regs, state = [], [], [], {}, {}
    bank_parallel = nparams.scheduler == "bank-parallel"
    aheads = [] if bank_parallel else None
    issued = [] if frfcfs else None

    async def bench(ctx):
        if lead:                            # idle cycles first; cycles count from the end
            await ctx.tick().repeat(lead)
        start = time.perf_counter()
        index = cycle = announced = 0
        offering = False
        while len(responses) < len(commands) and cycle < max_cycles:
            telling = None
            if bank_parallel:
                if announce and announced < len(commands) and ctx.get(dut.ahead.ready) and \
                        not (ahead_gap and rng.random() < ahead_gap):
                    telling = announced
                    ctx.set(dut.ahead.payload, commands[announced]["addr"])
                ctx.set(dut.ahead.valid, telling is not None)
            # a command is offered once announced (in this cycle or before)
            told = announced + (telling is not None) if bank_parallel and announce \
                else len(commands)
            if index < told and (offering or not (in_gap and rng.random() < in_gap)):
                offering = True
                ctx.set(dut.cmd.payload.as_value(), pin.pack(commands[index]))
            else:
                offering = False
            ctx.set(dut.cmd.valid, offering)
            heads.append(index if offering else None)
            ctx.set(dut.resp.ready, not (resp_stall and rng.random() < resp_stall))
            _, _, c_ready, r_valid, r_ready, r_payload, retired = await ctx.tick().sample(
                dut.cmd.ready, dut.resp.valid, dut.resp.ready, dut.resp.payload.as_value(),
                dut.retired if frfcfs else dut.cmd.ready)
            if frfcfs and retired:
                issued.append(cycle)
            if bank_parallel:
                aheads.append(telling)              # offered only with ready: taken
                if telling is not None:
                    announced += 1
            if offering and c_ready:
                taken.append(cycle)
                index += 1
                offering = False
            if r_valid and r_ready:
                responses.append((cycle, pout.unpack(r_payload)))
            cycle += 1
        ctx.set(dut.cmd.valid, 0)
        state["wall"] = time.perf_counter() - start
        for reg in dut.regs.regs:
            if reg.access != "wo":
                regs[reg.name] = await reg_read(ctx, dut.csr, dut.regs, reg.name)

    run_testbench(dut, bench, vcd)
    return NMCRun(responses, taken, heads, regs, state["wall"], aheads, issued)
