"""Drive the Tracker RTL under Amaranth's simulator (the fast in-process test layer).

:func:`simulate_tracker` programs the regions through the register port, streams ``requests``
in with random input gaps, takes triggers out under random backpressure, and returns what the
hardware did (triggers with their cycle numbers, the cycle each access was taken, registers),
ready to compare against :class:`tracker.model.TrackerModel`.
"""

import dataclasses
import random
import time

from hw.interfaces import Packer, mem_request_layout
from hw.testing import reg_read, reg_write, run_testbench
from tracker.config import STAT_REGISTERS, register_values
from hw.interfaces import trigger_layout
from tracker.rtl import Tracker


__all__ = ["simulate_tracker", "TrackerRun"]




@dataclasses.dataclass
class TrackerRun:
    triggers: list          # [(cycle o handshaked, payload dict)]
    taken: list             # cycle each request was taken on i
    regs: dict              # STAT_REGISTERS name -> value
    cycles: int             # cycles from the first access offered to the end of the run
    wall_s: float           # wall-clock seconds of those cycles (elaboration excluded)


def simulate_tracker(params, tparams, regions, requests, *, seed=0, in_gap=0.0, out_stall=0.0,
                     enable=True, max_cycles=None, vcd=None, extra_writes=()):
    """Run ``requests`` (dicts of request fields) through a fresh Tracker.

    ``in_gap`` and ``out_stall`` are the per-cycle probabilities of an idle input cycle and of
    ``o.ready`` low.  The run ends when every request was taken and ``o`` has been idle for a
    few cycles, or after ``max_cycles`` (then fewer requests are taken: a set-full stall).
    """
    dut = Tracker(params, tparams)
    req_layout = mem_request_layout(params)
    trig_packer = Packer(trigger_layout(params, tparams.regions))
    rng = random.Random(seed)
    max_cycles = max_cycles or 20 * len(requests) + tparams.sets + 200
    triggers, taken, regs = [], [], {}
    state = {"cycles": 0}

    async def bench(ctx):
        # One testbench drives both ports so that input and output share one cycle count.
        for name, value in list(register_values(tparams, regions, enable)) + list(extra_writes):
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        while not ctx.get(dut.i.ready):          # the table flush after reset
            await ctx.tick()
        packer = Packer(req_layout)
        words = [packer.pack(r) for r in requests]
        index = cycle = quiet = 0
        state["start"] = time.perf_counter()
        while cycle < max_cycles and (index < len(words) or quiet < 8):
            offer = index < len(words) and not (in_gap and rng.random() < in_gap)
            if offer:
                ctx.set(dut.i.payload.as_value(), words[index])
            ctx.set(dut.i.valid, offer)
            ctx.set(dut.o.ready, not (out_stall and rng.random() < out_stall))
            _, _, i_valid, i_ready, o_valid, o_ready, o_payload = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload.as_value())
            if i_valid and i_ready:
                taken.append(cycle)
                index += 1
            if o_valid and o_ready:
                triggers.append((cycle, trig_packer.unpack(o_payload)))
            quiet = 0 if (o_valid or index < len(words)) else quiet + 1
            cycle += 1
        ctx.set(dut.i.valid, 0)
        state["cycles"] = cycle
        state["wall_s"] = time.perf_counter() - state["start"]
        for name in STAT_REGISTERS:
            regs[name] = await reg_read(ctx, dut.csr, dut.regs, name)

    run_testbench(dut, bench, vcd)
    return TrackerRun(triggers, taken, regs, state["cycles"], state["wall_s"])
