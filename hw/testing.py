"""Helpers for testbenches under Amaranth's own simulator (``amaranth.sim``).

In the style of Glasgow's gateware tests: ``await stream_put(ctx, port, payload)`` and
``await stream_get(ctx, port)`` move one transfer across a ``stream.Signature`` port;
``csr_write``/``csr_read`` use a block's :func:`hw.csr.csr_signature` port, ``axil_write``/
``axil_read`` an AXI4-Lite port (:func:`hw.axil.axil_signature`) as its master.  Payloads are the
integer value of the port's layout (build them with :func:`hw.interfaces.pack`).
"""

__all__ = ["stream_put", "stream_get", "csr_write", "csr_read", "reg_write", "reg_read",
           "axil_write", "axil_read", "run_testbench"]


async def stream_put(ctx, port, payload):
    """Offer ``payload`` on ``port`` until the design takes it; returns after that edge."""
    ctx.set(port.payload.as_value(), payload)
    ctx.set(port.valid, 1)
    await ctx.tick().until(port.ready)
    ctx.set(port.valid, 0)


async def stream_get(ctx, port):
    """Accept one transfer from ``port``; returns its payload as an integer."""
    ctx.set(port.ready, 1)
    payload, = await ctx.tick().sample(port.payload.as_value()).until(port.valid)
    ctx.set(port.ready, 0)
    return payload


async def csr_write(ctx, bus, addr, value):
    ctx.set(bus.addr, addr)
    ctx.set(bus.w_data, value)
    ctx.set(bus.w_stb, 1)
    await ctx.tick()
    ctx.set(bus.w_stb, 0)


async def csr_read(ctx, bus, addr, latency=1):
    """The word at ``addr``, ``latency`` cycles after the address (the port's map's
    :attr:`hw.csr.RegisterMap.read_latency`)."""
    ctx.set(bus.addr, addr)
    await ctx.tick().repeat(latency)
    return ctx.get(bus.r_data)


async def reg_write(ctx, bus, regs, name, value):
    """Write register ``name`` of :class:`hw.csr.RegisterMap` ``regs`` (all its words)."""
    for addr, word in regs.word_writes(name, value):
        await csr_write(ctx, bus, addr, word)


async def reg_read(ctx, bus, regs, name):
    """Read register ``name`` of ``regs`` (all its words)."""
    base = regs.address(name)
    words = [await csr_read(ctx, bus, base + k, regs.read_latency)
             for k in range(regs[name].words)]
    return regs.from_words(name, words)


async def axil_write(ctx, bus, addr, data, strb=0xF):
    """One AXI4-Lite write as the master of ``bus``; returns ``bresp``."""
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, data)
    ctx.set(bus.wstrb, strb)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    await ctx.tick().until(bus.awready)
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    resp, = await ctx.tick().sample(bus.bresp).until(bus.bvalid)
    ctx.set(bus.bready, 0)
    return resp


async def axil_read(ctx, bus, addr):
    """One AXI4-Lite read as the master of ``bus``; returns ``(rdata, rresp)``."""
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    await ctx.tick().until(bus.arready)
    ctx.set(bus.arvalid, 0)
    data, resp = await ctx.tick().sample(bus.rdata, bus.rresp).until(bus.rvalid)
    ctx.set(bus.rready, 0)
    return data, resp


def run_testbench(dut, bench, vcd=None, clock=1e-9):
    """Simulate ``dut`` with one ``sync`` clock (none with ``clock=None``, for a combinational
    design) and the testbench coroutine ``bench(ctx)``; with ``vcd`` (a path) also write a
    waveform."""
    from amaranth.sim import Simulator
    sim = Simulator(dut)
    if clock is not None:
        sim.add_clock(clock)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
