"""Drive the MC arbiter RTL under Amaranth's simulator.

:func:`simulate_arbiter` programs a configuration, clears the counters, then runs two request
sources (:mod:`sim.blocks.mc_arbiter.traffic`) into ``compute`` and ``comm`` with random ``tap`` and ``o``
backpressure (or a fixed DRAM service rate), and records every cycle's inputs and the stream the
hardware enqueued, for :func:`mc_arbiter.model.check_arbiter_run`.
"""

import dataclasses
import random
import time

from hw.interfaces import Packer, Stream, mem_request_layout
from hw.testing import reg_read, reg_write, run_testbench
from mc_arbiter.config import CMD, STAT_REGISTERS, register_values
from mc_arbiter.model import CycleInputs
from mc_arbiter.rtl import MCArbiter


__all__ = ["simulate_arbiter", "ArbiterRun"]


@dataclasses.dataclass
class ArbiterRun:
    cycles: list            # [(CycleInputs, issued)] from the first traffic cycle
    dequeued: list          # [(stream name, item)] in o order
    regs: dict
    wall_s: float


def simulate_arbiter(params, aparams, compute_src, comm_src, *, config=None, seed=0,
                     tap_stall=0.0, o_rate=1.0, drain_at=(), calib=None, max_cycles=100_000,
                     vcd=None, threshold_writes=None, mcq_ram=None, retire=None):
    """Run the two sources to completion (or ``max_cycles``).

    ``config`` is a dict of :func:`mc_arbiter.config.register_values` arguments; ``o_rate`` the
    probability that ``o.ready`` is high in a cycle (the DRAM's service rate); ``drain_at`` the
    cycles with ``drain`` high; ``calib`` a ``(start, end)`` pair of cycles, or a list of
    them (windows one after another);
    ``threshold_writes`` ``{cycle: value}`` host writes of ``threshold`` during the run;
    ``mcq_ram`` the arbiter's (:class:`mc_arbiter.rtl.MCArbiter`); ``retire``: an arbiter
    with the ``retire`` port, and the probability that a request handed out on ``o`` and not
    yet retired (of either stream, at random) retires in a cycle, as an FR-FCFS scheduler
    would report it.
    """
    threshold_writes = threshold_writes or {}
    dut = MCArbiter(params, aparams, mcq_ram, retire=retire is not None)
    held = []                   # retire: streams handed out on ``o`` and not yet retired
    packer = Packer(mem_request_layout(params))
    rng = random.Random(seed)
    record, dequeued, regs, state = [], [], {}, {}
    drain_at = set(drain_at)
    windows = [] if calib is None else [calib] if isinstance(calib[0], int) else list(calib)
    calib_starts, calib_ends = {w[0] for w in windows}, {w[1] for w in windows}

    async def bench(ctx):
        for name, value in register_values(aparams, **(config or {})):
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        await reg_write(ctx, dut.csr, dut.regs, "cmd", CMD.encode(clear=1))
        start = time.perf_counter()
        cycle = 0
        idle = 0
        while cycle < max_cycles and idle < 4:
            c_item, m_item = compute_src.offer(cycle), comm_src.offer(cycle)
            inputs = CycleInputs(
                compute_valid=c_item is not None, comm_valid=m_item is not None,
                tap_ready=not (tap_stall and rng.random() < tap_stall),
                o_ready=rng.random() < o_rate,
                drain=cycle in drain_at,
                calib_start=cycle in calib_starts,
                calib_end=cycle in calib_ends,
                threshold_write=threshold_writes.get(cycle))
            if retire is not None and held and rng.random() < retire:
                gone = held.pop(rng.randrange(len(held)))
                inputs = dataclasses.replace(inputs, retired=True, retired_comm=gone == "comm")
            if retire is not None:
                ctx.set(dut.retired, inputs.retired)
                ctx.set(dut.retired_comm, inputs.retired_comm)
            write = inputs.threshold_write is not None
            ctx.set(dut.csr.w_stb, write)
            if write:
                (addr, word), = dut.regs.word_writes("threshold", inputs.threshold_write)
                ctx.set(dut.csr.addr, addr)
                ctx.set(dut.csr.w_data, word)
            for port, item in ((dut.compute, c_item), (dut.comm, m_item)):
                ctx.set(port.valid, item is not None)
                if item is not None:
                    ctx.set(port.payload.as_value(), packer.pack(item))
            ctx.set(dut.tap.ready, inputs.tap_ready)
            ctx.set(dut.o.ready, inputs.o_ready)
            ctx.set(dut.drain, inputs.drain)
            ctx.set(dut.calib_start, inputs.calib_start)
            ctx.set(dut.calib_end, inputs.calib_end)
            _, _, c_rdy, m_rdy, o_valid, o_payload = await ctx.tick().sample(
                dut.compute.ready, dut.comm.ready, dut.o.valid, dut.o.payload.as_value())
            assert not (c_rdy and m_rdy), f"cycle {cycle}: both streams enqueued"
            issued = "compute" if c_rdy and c_item is not None else \
                "comm" if m_rdy and m_item is not None else None
            record.append((inputs, issued))
            if issued == "compute":
                compute_src.take(cycle)
            elif issued == "comm":
                comm_src.take(cycle)
            if o_valid and inputs.o_ready:
                item = packer.unpack(o_payload)
                name = "comm" if item["stream"] == Stream.COMM.value else "compute"
                item["stream"] = (Stream.COMPUTE if name == "compute" else Stream.COMM).value
                dequeued.append((name, item))
                if retire is not None:
                    held.append(name)
            busy = not (compute_src.finished and comm_src.finished) or o_valid or held
            idle = 0 if busy else idle + 1
            cycle += 1
        for port in (dut.compute, dut.comm):
            ctx.set(port.valid, 0)
        ctx.set(dut.csr.w_stb, 0)
        if retire is not None:
            ctx.set(dut.retired, 0)
        state["wall"] = time.perf_counter() - start
        for name in STAT_REGISTERS:
            regs[name] = await reg_read(ctx, dut.csr, dut.regs, name)

    run_testbench(dut, bench, vcd)
    return ArbiterRun(record, dequeued, regs, state["wall"])
