"""Run the DMA engine RTL in its :class:`sim.blocks.dma.env.DMAEnv` under Amaranth's simulator."""

import dataclasses
import time

from amaranth.lib import data

from dma.config import CMD, STAT_REGISTERS, register_values
from dma.rtl import DMAEngine
from hw.testing import reg_read, reg_write, run_testbench
from sim.blocks.dma.env import INPUTS, OUTPUTS, DMAEnv


__all__ = ["simulate_dma", "DMARun"]


@dataclasses.dataclass
class DMARun:
    env: DMAEnv
    regs: dict
    cycles: int
    wall_s: float


def _port(dut, name):
    port, member = name.split("__")
    sig = getattr(getattr(dut, port), member)
    return sig.as_value() if isinstance(sig, data.View) else sig


def simulate_dma(params, dparams, scenario, *, max_cycles=200_000, vcd=None, then=(),
                 reset_at=None, **env_args):
    """Program ``scenario``'s command table, run it to quiescence, read the statistics.

    ``then``: further phases ``[(register writes, triggers), ...]``; after each quiescence the
    writes (``[(name, value)]``) are made and the triggers offered, and the run goes on.
    ``reset_at``: in that cycle the engine is reset (two cycles) mid-run, as a host would after
    a fault: what the link carried of a packet it was sending is delivered cut short, the
    registers are programmed again and every trigger of the scenario is offered again."""
    from amaranth.hdl import ResetInserter
    from amaranth import Signal
    dut = DMAEngine(params, dparams)
    rst = Signal()
    top = ResetInserter({"sync": rst})(dut)
    env = DMAEnv(params, dparams, scenario, **env_args)
    inputs = {name: _port(dut, name) for name in INPUTS if env.link or "x__" not in name}
    outputs = [name for name in OUTPUTS if env.link or "x__" not in name]
    out_sigs = [_port(dut, name) for name in outputs]
    regs, state = {}, {}

    async def program(ctx):
        for name, value in register_values(params, dparams, scenario.commands, scenario.gpu_id,
                                           scenario.remote, rx_window=scenario.rx_window):
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        await reg_write(ctx, dut.csr, dut.regs, "cmd", CMD.encode(clear=1))

    async def reset(ctx):
        for name in inputs:
            if name.endswith("valid"):
                ctx.set(inputs[name], 0)
        ctx.set(rst, 1)
        await ctx.tick().repeat(2)
        ctx.set(rst, 0)
        env.engine_reset()
        await program(ctx)
        env.trig.queue.extend(scenario.triggers)

    async def bench(ctx):
        await program(ctx)
        start = time.perf_counter()
        for phase in [None, *then]:
            if phase is not None:
                writes, triggers = phase
                for name in inputs:
                    if name.endswith("valid"):
                        ctx.set(inputs[name], 0)
                for name, value in writes:
                    await reg_write(ctx, dut.csr, dut.regs, name, value)
                env.trig.queue.extend(triggers)
                env.quiet = 0
            while not env.done() and env.cycle < max_cycles:
                if env.cycle == reset_at:
                    await reset(ctx)
                for name, value in env.drive().items():
                    if name in inputs:
                        ctx.set(inputs[name], value)
                values = await ctx.tick().sample(*out_sigs)
                env.observe(dict(zip(outputs, values[2:])))
            assert env.done(), f"not quiescent after {max_cycles} cycles"
        state["wall"] = time.perf_counter() - start
        for name in STAT_REGISTERS:
            regs[name] = await reg_read(ctx, dut.csr, dut.regs, name)

    run_testbench(top, bench, vcd)
    return DMARun(env, regs, env.cycle, state["wall"])
