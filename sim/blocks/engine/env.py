"""A cycle environment around the GPU-side traffic engine, with no simulator in it: a memory
that answers the engine's local requests in order after a latency (reads with its contents,
stores by writing it), random backpressure on ``compute``, and ``comm_done`` pulses on a
schedule.  The Amaranth adapter (:func:`simulate_engine`) steps it once per cycle."""

import random

from hw.interfaces import Op, Packer, mem_request_layout, mem_response_layout
from hw.testing import reg_read, reg_write, run_testbench


__all__ = ["EngineEnv", "simulate_engine"]


class EngineEnv:
    """Memory ``{byte address: beat}`` below ``remote_space``; stores at or above it are
    recorded in ``remote`` and get no response.  ``ready_p``: probability of ``compute.ready``
    each cycle; ``latency``: cycles from a request to its response (at least 1);
    ``arrivals``: cycles at which ``comm_done`` pulses."""

    def __init__(self, params, memory, remote_space, latency=6, ready_p=0.8, seed=1,
                 arrivals=()):
        self.params = params
        self.memory = dict(memory)
        self.remote_space = remote_space
        self.latency = latency
        self.rng = random.Random(seed)
        self.ready_p = ready_p
        self.arrivals = sorted(arrivals)
        self.requests = []          # (cycle, request) in the order the engine issued them
        self.responses = []         # cycles at which a response was taken
        self.remote = []
        self.queue = []             # (due cycle, response)
        self.req = Packer(mem_request_layout(params))
        self.resp = Packer(mem_response_layout(params))

    def inputs(self, cycle):
        """``(ready, response or None, comm_done)`` to drive in ``cycle``."""
        ready = self.rng.random() < self.ready_p
        response = self.queue[0][1] if self.queue and self.queue[0][0] <= cycle else None
        return ready, response, int(cycle in self.arrivals)

    def outputs(self, cycle, valid, ready, payload, resp_taken):
        """What the design did in ``cycle``: a request offered (``valid``, taken if
        ``ready``) and whether the response offered was taken."""
        if resp_taken:
            self.queue.pop(0)
            self.responses.append(cycle)
        if not (valid and ready):
            return
        req = self.req.unpack(payload)
        self.requests.append((cycle, req))
        if req["op"] == Op.READ.value:
            data = self.memory.get(req["addr"], 0)
        elif req["addr"] >= self.remote_space:
            self.remote.append(req)
            return
        else:
            self.memory[req["addr"]] = req["data"]
            data = 0
        due = max(cycle + self.latency, self.queue[-1][0] if self.queue else 0)
        self.queue.append((due, {"data": data, "op": req["op"]}))


def simulate_engine(dut, env, registers, load=(), max_cycles=200_000, vcd=None,
                    read_back=(), flush_delay=5):
    """Program ``dut`` (``registers``: ``[(name, value)]``; ``load``: ``[(addr, beat)]`` through
    the bulk port), start it, run ``env`` until ``done`` (or ``max_cycles``: AssertionError),
    then read the engine's registers and ``read_back`` local beats.  An ``l2_flush`` strobe
    is answered by ``l2_flushed`` ``flush_delay`` cycles later (the node's L2).  Returns
    ``(cycles_run, {register: value}, {beat: value}, strobes)`` where ``strobes`` lists the
    cycles of ``calib_start``, ``calib_end``, ``drain``, ``l2_flush`` and ``l2_flushed``."""
    from system.engine.config import STAT_REGISTERS
    out = {}

    async def bench(ctx):
        for name, value in registers:
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        for addr, value in load:
            ctx.set(dut.load.addr, addr)
            ctx.set(dut.load.w_data, value)
            ctx.set(dut.load.w_en, 1)
            await ctx.tick()
        ctx.set(dut.load.w_en, 0)
        strobes = {"calib_start": [], "calib_end": [], "drain": [], "l2_flush": []}
        flushed = []
        ctx.set(dut.start, 1)
        for name in strobes:
            if ctx.get(getattr(dut, name)):
                strobes[name].append(0)
        await ctx.tick()
        ctx.set(dut.start, 0)
        cycle = 1
        while not ctx.get(dut.done):
            assert cycle < max_cycles, f"the engine is not done after {max_cycles} cycles"
            ready, response, comm = env.inputs(cycle)
            ctx.set(dut.compute.ready, ready)
            ctx.set(dut.comm_done, comm)
            ctx.set(dut.l2_flushed, cycle in flushed)
            ctx.set(dut.resp.valid, response is not None)
            if response is not None:
                ctx.set(dut.resp.payload.as_value(), env.resp.pack(response))
            valid = ctx.get(dut.compute.valid)
            payload = ctx.get(dut.compute.payload.as_value()) if valid else 0
            for name in strobes:
                if ctx.get(getattr(dut, name)):
                    strobes[name].append(cycle)
            if ctx.get(dut.l2_flush):
                flushed.append(cycle + flush_delay)
            env.outputs(cycle, valid, ready, payload,
                        response is not None and ctx.get(dut.resp.ready))
            await ctx.tick()
            cycle += 1
        ctx.set(dut.compute.ready, 0)
        ctx.set(dut.resp.valid, 0)
        ctx.set(dut.comm_done, 0)
        ctx.set(dut.l2_flushed, 0)
        strobes["l2_flushed"] = [c for c in flushed if c < cycle]
        out["cycles"] = cycle
        out["regs"] = {name: await reg_read(ctx, dut.csr, dut.regs, name)
                       for name in STAT_REGISTERS}
        beats = {}
        for addr in read_back:
            ctx.set(dut.load.addr, addr)
            await ctx.tick()
            beats[addr] = ctx.get(dut.load.r_data)
        out["beats"] = beats
        out["strobes"] = strobes

    run_testbench(dut, bench, vcd=vcd)
    return out["cycles"], out["regs"], out["beats"], out["strobes"]
