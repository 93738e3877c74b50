"""A cycle environment around the L2, with no simulator in it: the requests offered on ``i``
with random gaps, random backpressure on ``o`` and ``mem``, and a memory behind ``mem`` that
applies each request as it takes it (as the memory controller executes them, in order) and
answers after a random latency, in order.  :func:`random_requests` makes traffic with the
locality that exercises hits, misses, merges, evictions and write-backs; :func:`check_run`
is the scoreboard both test layers use.  The Amaranth adapter is :func:`simulate_l2`."""

import random

from hw.interfaces import ElemType, Op, Packer, mem_request_layout, mem_response_layout
from l2.config import L2Config, Window
from l2.model import L2Model
from nmc.model import alu_reference


__all__ = ["L2Env", "random_requests", "check_run", "simulate_l2", "traffic_windows"]


def traffic_windows(params, lines_per_window=48):
    """Two cached windows with an uncached gap between them and uncached memory above."""
    beat = params.beat_bytes
    size = lines_per_window * beat
    return (Window(0x1000, size), Window(0x1000 + 2 * size, size))


def random_requests(params, n, windows, seed=1, reads=0.55, stores=0.3, partial=0.05,
                    hot=24):
    """``n`` requests: addresses drawn from a few hot lines of each window (reuse), the whole
    windows (misses and evictions) and uncached memory; READs, whole and partial STOREs and
    UPDATEs (inside a window they are refused, outside they go to memory)."""
    rng = random.Random(seed)
    beat = params.beat_bytes
    full = (1 << beat) - 1
    hot_lines = [w.base + rng.randrange(w.size // beat) * beat for w in windows for _ in
                 range(hot // len(windows))]
    top = max(w.end for w in windows)
    out = []
    for k in range(n):
        r = rng.random()
        if r < 0.5:
            addr = rng.choice(hot_lines)
        elif r < 0.85:
            w = rng.choice(windows)
            addr = w.base + rng.randrange(w.size // beat) * beat
        else:
            addr = top + rng.randrange(32) * beat
        r = rng.random()
        if r < reads:
            op, mask = Op.READ, full
        elif r < reads + stores:
            op, mask = Op.STORE, full if rng.random() > partial / stores else \
                rng.randrange(1, full)
        else:
            op, mask = Op.UPDATE, full
        out.append({"addr": addr, "data": rng.getrandbits(params.beat_bits), "mask": mask,
                    "op": op.value, "etype": ElemType.INT32.value,
                    "tag": k % (1 << params.tag_bits),
                    "wg_id": k % 7, "stream": 0, "source": 0, "wf_id": 0, "tracked": 0})
    return out


class L2Env:
    """The L2's surroundings, stepped once per cycle.  ``requests`` are offered in order (each
    cycle with probability ``i_p``); ``o_p`` and ``mem_p`` are the probabilities of
    ``o.ready`` and ``mem.ready``; memory answers ``latency`` (a ``(lo, hi)`` range) cycles
    after taking a request, in order."""

    def __init__(self, params, requests, memory=None, i_p=0.8, o_p=0.8, mem_p=0.7,
                 latency=(4, 30), seed=1):
        self.params = params
        self.rng = random.Random(seed)
        self.requests = list(requests)
        self.next = 0
        self.memory = dict(memory or {})
        self.i_p, self.o_p, self.mem_p = i_p, o_p, mem_p
        self.latency = latency
        self.downstream = []            # requests memory took, in order
        self.sent = []                  # the cycle memory took each of them
        self.returned = []              # the cycle the L2 took each of memory's responses
        self.info = None                # the L2's ``info`` register, read after the run
        self.queue = []                 # (due cycle, response)
        self.responses = []             # (cycle, response) the L2 gave on o
        self.taken = []                 # cycle each request was taken on i
        self.req = Packer(mem_request_layout(params))
        self.resp = Packer(mem_response_layout(params))
        self._offer = False

    @property
    def finished(self):
        return self.next == len(self.requests) and len(self.responses) == len(self.requests)

    def inputs(self, cycle):
        """``(request payload or None, o.ready, mem.ready, memory response payload or
        None)`` to drive in ``cycle``."""
        if self.next < len(self.requests) and (self._offer or self.rng.random() < self.i_p):
            self._offer = True          # once offered, held until taken (a stream)
            req = self.req.pack(self.requests[self.next])
        else:
            req = None
        resp = self.resp.pack(self.queue[0][1]) if self.queue and self.queue[0][0] <= cycle \
            else None
        return req, self.rng.random() < self.o_p, self.rng.random() < self.mem_p, resp

    def outputs(self, cycle, taken, o, mem, resp_taken):
        """What the L2 did in ``cycle``: ``taken`` (the offered request), ``o`` (a response
        payload given, or None), ``mem`` (a request memory took, or None), whether memory's
        response was taken."""
        if taken:
            self.taken.append(cycle)
            self.next += 1
            self._offer = False
        if o is not None:
            self.responses.append((cycle, self.resp.unpack(o)))
        if resp_taken:
            self.queue.pop(0)
            self.returned.append(cycle)
        if mem is not None:
            req = self.req.unpack(mem)
            self.downstream.append(req)
            self.sent.append(cycle)
            old = self.memory.get(req["addr"], 0)
            if req["op"] == Op.READ.value:
                data, error = old, 0
            else:
                value, error = alu_reference(self.params, old, req["data"], req["mask"],
                                             req["op"], req["etype"])
                if not error:
                    self.memory[req["addr"]] = value
                data = 0
            due = max(cycle + self.rng.randint(*self.latency),
                      self.queue[-1][0] if self.queue else 0)
            self.queue.append((due, {"data": data, "tag": req["tag"], "op": req["op"],
                                     "stream": req["stream"], "error": error}))


def check_run(params, lparams, config, requests, responses, downstream, memory, counters,
              memory_before=None, flushed=True):
    """The scoreboard: the responses (in order) and what reached memory (in order) are the
    model's, request for request; after a flush memory holds the model's image; the counters
    are the model's (``read_hits`` + ``read_merged`` against the model's hits: which of the
    two a READ of a line being filled counts as depends on timing).  Returns the model."""
    model = L2Model(params, lparams, config, memory_before)
    want = [model.access(r) for r in requests]
    if flushed:
        model.flush()
    assert len(responses) == len(want), f"{len(responses)} responses for {len(want)} requests"
    for k, (got, exp) in enumerate(zip(responses, want)):
        assert got == exp, f"response {k} to {requests[k]}: {got} != {exp}"
    assert len(downstream) == len(model.downstream), \
        f"{len(downstream)} requests reached memory, the model sent {len(model.downstream)}"
    for k, (got, exp) in enumerate(zip(downstream, model.downstream)):
        assert got == exp, f"memory request {k}: {got} != {exp}"
    if flushed:
        assert memory == model.memory, "memory after the flush differs from the model's"
    c = dict(counters)
    c["read_hits"] = c.get("read_hits", 0) + c.pop("read_merged", 0)
    for name, value in model.counters.items():
        assert c[name] == value, f"counter {name}: {c[name]} != model {value}"
    return model


def simulate_l2(dut, env, config: L2Config, flush=True, max_cycles=200_000, vcd=None):
    """Program ``dut`` with ``config``, run ``env`` until every request is answered, then
    (``flush``) flush through the ``flush`` input and wait for ``flushed``.  Returns
    ``(counters, status, cycles)``: every register of :data:`l2.config.COUNTERS` plus
    ``lines`` and ``dirty_lines``, the status register, the cycles run."""
    from hw.testing import reg_read, reg_write, run_testbench
    from l2.config import COUNTERS, config_values
    out = {}

    async def bench(ctx):
        # (the configuration may be written while the invalidation after reset runs)
        for name, value in config_values(dut.params, dut.lparams, config).items():
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        cycle = 0
        flushing = False
        while True:
            assert cycle < max_cycles, f"not done after {max_cycles} cycles"
            if env.finished and not flushing:
                if not flush:
                    break
                ctx.set(dut.flush, 1)
                flushing = True
            elif flushing:
                ctx.set(dut.flush, 0)
                if ctx.get(dut.flushed):
                    break
            req, o_ready, mem_ready, resp = env.inputs(cycle)
            ctx.set(dut.i.valid, req is not None)
            if req is not None:
                ctx.set(dut.i.payload.as_value(), req)
            ctx.set(dut.o.ready, o_ready)
            ctx.set(dut.mem.ready, mem_ready)
            ctx.set(dut.mem_resp.valid, resp is not None)
            if resp is not None:
                ctx.set(dut.mem_resp.payload.as_value(), resp)
            taken = req is not None and ctx.get(dut.i.ready)
            o = ctx.get(dut.o.payload.as_value()) if ctx.get(dut.o.valid) and o_ready \
                else None
            mem = ctx.get(dut.mem.payload.as_value()) if ctx.get(dut.mem.valid) and \
                mem_ready else None
            env.outputs(cycle, taken, o, mem, resp is not None and ctx.get(dut.mem_resp.ready))
            await ctx.tick()
            cycle += 1
        for port in (dut.i.valid, dut.mem_resp.valid, dut.flush):
            ctx.set(port, 0)
        names = [n for n, _ in COUNTERS] + ["lines", "dirty_lines"]
        out["counters"] = {n: await reg_read(ctx, dut.csr, dut.regs, n) for n in names}
        out["status"] = await reg_read(ctx, dut.csr, dut.regs, "status")
        env.info = dut.regs["info"].decode(await reg_read(ctx, dut.csr, dut.regs, "info"))
        out["cycles"] = cycle

    run_testbench(dut, bench, vcd=vcd)
    return out["counters"], out["status"], out["cycles"]
