# amaranth: UnusedElaboratable=no
"""The system's own hardware (AXI4-Lite bridge, register decoder, link model) under Amaranth's
simulator, and the software side (driver API, workload generator, ring reference) in Python."""

import dataclasses
import math
import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hw.axil import OKAY, SLVERR, AXILiteInputSlice, AXILiteToCSR, CSRDecoder, axil_signature
from hw.csr import Reg, RegisterFile, RegisterMap
from system.link import LinkModel
from system.node import NodeParams, block_registers
from system.spec import ENGINE_PARAMS, node_for, ring_for
from hw.params import T3Params
from hw.testing import axil_read, axil_write, run_testbench
from sim.system.driver import Driver
from sim.system.configure import allocate, configure_fused, map_ring_windows
from sim.system.workload import PRESETS, GemmSpec, Workload, balanced_k, preset, ring_reference


P = T3Params()


# --- AXI4-Lite and the register decoder -----------------------------------------------------------

class _TwoBlocks(wiring.Component):
    """An AXI4-Lite port in front of two register files (windows of 4 words)."""

    def __init__(self, registered=False, latency_a=1):
        self.a = RegisterMap([Reg("x", 32, "rw", "x"), Reg("y", 8, "rw", "y")],
                             read_latency=latency_a)
        self.b = RegisterMap([Reg("z", 40, "rw", "z")])
        self.dec = CSRDecoder(2, [("a", self.a.addr_bits, self.a.read_latency),
                                  ("b", self.b.addr_bits)], registered=registered)
        super().__init__({"axil": In(axil_signature(self.dec.addr_bits + 2))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = AXILiteToCSR(self.dec.addr_bits + 2,
                                                    self.dec.read_latency)
        m.submodules.dec = self.dec
        wiring.connect(m, wiring.flipped(self.axil), bridge.axil)
        wiring.connect(m, bridge.csr, self.dec.bus)
        RegisterFile(self.a).elaborate(m, wiring.flipped(self.dec.a), {})
        RegisterFile(self.b).elaborate(m, wiring.flipped(self.dec.b), {})
        return m


@pytest.mark.parametrize("registered", [False, True])
@pytest.mark.parametrize("latency_a", [1, 2])
def test_axi_lite_reaches_each_block_and_refuses_partial_writes(registered, latency_a):
    """Block ``a`` answering one or two cycles after an address, ``b`` one (its answer
    delayed to match): every read reaches the word written, behind a plain or registered
    decoder."""
    dut = _TwoBlocks(registered, latency_a)
    assert dut.dec.read_latency == latency_a + registered
    seen = {}

    async def bench(ctx):
        bus = dut.axil
        assert await axil_write(ctx, bus, 0x0, 0xDEADBEEF) == OKAY         # a.x
        assert await axil_write(ctx, bus, 0x4, 0x1AB) == OKAY              # a.y (8 bits)
        assert await axil_write(ctx, bus, 0x10, 0x12345678) == OKAY        # b.z low word
        assert await axil_write(ctx, bus, 0x14, 0xFF) == OKAY              # b.z high word
        assert await axil_write(ctx, bus, 0x0, 0x11111111, strb=0x3) == SLVERR
        assert await axil_write(ctx, bus, 0x2, 0x22222222) == SLVERR       # misaligned
        assert await axil_write(ctx, bus, 0xC, 0x5) == OKAY                # outside a: ignored
        for addr in (0x0, 0x4, 0x10, 0x14, 0xC, 0x1C):
            seen[addr] = await axil_read(ctx, bus, addr)
        seen["bad"] = await axil_read(ctx, bus, 0x3)

    run_testbench(dut, bench)
    assert seen[0x0] == (0xDEADBEEF, OKAY)          # the partial write changed nothing
    assert seen[0x4] == (0xAB, OKAY)
    assert seen[0x10] == (0x12345678, OKAY) and seen[0x14] == (0xFF, OKAY)
    assert seen[0xC] == (0, OKAY) and seen[0x1C] == (0, OKAY)
    assert seen["bad"] == (0, SLVERR)


def test_decoder_and_bridge_refuse_latencies_they_cannot_keep():
    with pytest.raises(ValueError, match=r"^block 'a': a read latency of 1 or 2 cycles, not "
                                         r"\('a', 2, 3\)$"):
        CSRDecoder(2, [("a", 2, 3)])
    with pytest.raises(ValueError, match=r"^read_latency must be 1 to 8 cycles, not 0$"):
        AXILiteToCSR(6, 0)


def test_a_registered_decoder_has_no_path_from_its_bus_to_a_block():
    """Registered, a block's ``addr``, ``w_stb`` and ``w_data`` change only at a clock edge,
    and a read is answered two cycles after its address."""
    dec = CSRDecoder(2, [("a", 2), ("b", 1)], registered=True)
    seen = []

    async def bench(ctx):
        ports = [getattr(dec, n).addr for n in "ab"] + [getattr(dec, n).w_stb for n in "ab"] + \
            [getattr(dec, n).w_data for n in "ab"]
        for addr, stb, word in [(1, 1, 0x1234), (4, 1, 0x55), (5, 0, 7), (0, 0, 0)]:
            before = [ctx.get(p) for p in ports]
            ctx.set(dec.bus.addr, addr)
            ctx.set(dec.bus.w_stb, stb)
            ctx.set(dec.bus.w_data, word)
            assert [ctx.get(p) for p in ports] == before
            await ctx.tick()
            port = dec.b if addr >= 4 else dec.a
            assert (ctx.get(port.addr), ctx.get(port.w_stb), ctx.get(port.w_data)) == \
                (addr & 3 if addr < 4 else addr & 1, stb, word)
        # a read of b's word 1 among reads of a's word 0; each block answers the address of
        # the previous cycle (a register file's latency) with 0xA0 / 0xB0 plus that address
        last = {"a": 0, "b": 0}
        for addr in (0, 5, 0, 0, 0):
            ctx.set(dec.bus.addr, addr)
            for name in "ab":
                ctx.set(getattr(dec, name).r_data, (0xA0 if name == "a" else 0xB0) + last[name])
            seen.append(ctx.get(dec.bus.r_data))
            last = {name: ctx.get(getattr(dec, name).addr) for name in "ab"}
            await ctx.tick()

    run_testbench(dec, bench)
    # the address of two cycles before: a's word 0 (0xA0), then b's word 1 (0xB1) in cycle 3
    assert seen[2:] == [0xA0, 0xB1, 0xA0]


class _Sliced(wiring.Component):
    """:class:`_TwoBlocks` behind an :class:`hw.axil.AXILiteInputSlice`."""

    def __init__(self):
        self.inner = _TwoBlocks()
        self.slice = AXILiteInputSlice(self.inner.dec.addr_bits + 2)
        super().__init__({"axil": In(axil_signature(self.inner.dec.addr_bits + 2))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.slice = sl = self.slice
        m.submodules.inner = self.inner
        wiring.connect(m, wiring.flipped(self.axil), sl.i)
        wiring.connect(m, sl.o, self.inner.axil)
        return m


def test_axi_lite_slice_registers_every_channel():
    """Behind the slice the port answers as before, with the host holding ``bready`` and
    ``rready`` low for a while (nothing lost or repeated), and no output of the slice, on either
    side, changes when the host changes an input until the next clock edge (no combinational
    path through it)."""
    dut = _Sliced()
    rng = random.Random(3)
    outputs = [getattr(dut.axil, name) for name in ("awready", "wready", "arready", "bvalid",
                                                    "bresp", "rvalid", "rdata", "rresp")]
    outputs += [getattr(dut.slice.o, name) for name in (
        "awvalid", "awaddr", "wvalid", "wdata", "wstrb", "arvalid", "araddr", "bready",
        "rready")]
    comb_paths = []

    async def settle(ctx, bus, **inputs):
        before = [ctx.get(o) for o in outputs]
        for name, value in inputs.items():
            ctx.set(getattr(bus, name), value)
        after = [ctx.get(o) for o in outputs]
        if before != after:
            comb_paths.append((inputs, before, after))

    async def write(ctx, bus, addr, data):
        await settle(ctx, bus, awaddr=addr, wdata=data, wstrb=0xF, awvalid=1, wvalid=1,
                     bready=0)
        aw = w = False
        while not (aw and w):
            _, _, awr, wr = await ctx.tick().sample(bus.awready, bus.wready)
            aw, w = aw or awr, w or wr
            await settle(ctx, bus, awvalid=int(not aw), wvalid=int(not w))
        for _ in range(rng.randrange(6)):           # the host is not ready for the response
            await ctx.tick()
        await settle(ctx, bus, bready=1)
        resp, = await ctx.tick().sample(bus.bresp).until(bus.bvalid)
        await settle(ctx, bus, bready=0)
        return resp

    async def read(ctx, bus, addr):
        await settle(ctx, bus, araddr=addr, arvalid=1, rready=0)
        await ctx.tick().until(bus.arready)
        await settle(ctx, bus, arvalid=0)
        for _ in range(rng.randrange(6)):
            await ctx.tick()
        await settle(ctx, bus, rready=1)
        data, resp = await ctx.tick().sample(bus.rdata, bus.rresp).until(bus.rvalid)
        await settle(ctx, bus, rready=0)
        return data, resp

    seen = {}

    async def bench(ctx):
        bus = dut.axil
        for addr, data in ((0x0, 0xDEADBEEF), (0x4, 0x1AB), (0x10, 0x12345678)):
            seen["w", addr] = await write(ctx, bus, addr, data)
        seen["w", 0x2] = await write(ctx, bus, 0x2, 0x5)                   # misaligned
        for addr in (0x0, 0x4, 0x10, 0x3):
            seen["r", addr] = await read(ctx, bus, addr)

    run_testbench(dut, bench)
    assert [seen["w", a] for a in (0x0, 0x4, 0x10, 0x2)] == [OKAY, OKAY, OKAY, SLVERR]
    assert seen["r", 0x0] == (0xDEADBEEF, OKAY) and seen["r", 0x4] == (0xAB, OKAY)
    assert seen["r", 0x10] == (0x12345678, OKAY) and seen["r", 0x3] == (0, SLVERR)
    assert comb_paths == []


def test_run_checks_the_engines_programs_before_a_simulator_starts(monkeypatch, t3_options):
    """A GEMM whose per-WG compute time does not fit the engine's 24-bit register is refused
    by run_config, naming the GPU, the register and the value, before any build; the same
    workload is fine for the Python-driven ring, which has no such register.  The default
    run of a ring size passes the same check with the memory it gets by default: every size
    under ``--soak``, else the sizes at and beside each step of the default memory and the
    engines and the GPU number's width (8, 16, 32 GPUs) and the ends."""
    import sim.harness.runner as runner
    from hw.params import T3Params
    from sim.system.run import check_config, run_config, workload_memory_rows
    from system.spec import engine_params_for, memory_rows_for
    monkeypatch.setattr(runner, "run_cocotb", lambda *a, **k: pytest.fail("a build started"))
    from sim.system.workload import workload_spec
    spec = GemmSpec(m=32, n=64, k=64, cus=2, flops_per_cycle=0.001)   # 131,072,000 cycles
    with pytest.raises(ValueError, match=r"GPU 0's engine: register 'compute_cycles' is 24 "
                                         r"bits; 131072000 does not fit"):
        run_config(spec, 2, "t3")
    check_config(spec, 2, "t3", T3Params(), node_for(), None)
    assert check_config(GemmSpec(m=32, n=64, k=64, cus=2), 2, "t3", T3Params(), node_for(),
                        ENGINE_PARAMS) is None
    sizes = range(2, 65) if t3_options.soak else (2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63,
                                                  64)
    for gpus in sizes:              # each ring size's default run fits its default memory
        spec = workload_spec(gpus)
        rows = workload_memory_rows(gpus, spec)
        check_config(spec, gpus, "t3", T3Params(), node_for(gpus, memory_rows=rows),
                     engine_params_for(gpus))
        # ... which is the ring size's, or the fewest twice as many that hold the workload
        if rows != memory_rows_for(gpus):
            assert rows // 2 >= memory_rows_for(gpus)
            with pytest.raises(ValueError, match="exceed GPU 0's memory"):
                check_config(spec, gpus, "t3", T3Params(),
                             node_for(gpus, memory_rows=rows // 2), engine_params_for(gpus))
    assert workload_memory_rows(4, workload_spec(4)) == memory_rows_for(4) == 8


# --- the link model ---------------------------------------------------------------------------

@pytest.mark.parametrize("latency, num, den, stall", [(4, 1, 1, 0.0), (10, 1, 4, 0.0),
                                                      (7, 3, 80, 0.0), (5, 1, 2, 0.5)])
def test_link_latency_bandwidth_order(latency, num, den, stall):
    """Beats leave in order and unchanged, the first ``latency`` cycles after it entered; a
    saturated link carries ``num / den`` beats per cycle; backpressure loses nothing."""
    dut = LinkModel(P, latency, num, den)
    n = 60
    sent, got = [], []
    rng = random.Random(1)

    async def bench(ctx):
        k = cycle = 0
        while len(got) < n and cycle < 20_000:
            ctx.set(dut.i.tvalid, k < n)
            ctx.set(dut.i.tdata, k * 0x1234567)
            ctx.set(dut.i.tkeep, k)
            ctx.set(dut.i.tlast, k % 3 == 0)
            ready = not (stall and rng.random() < stall)
            ctx.set(dut.o.tready, ready)
            _, _, i_rdy, o_v, d, keep, last = await ctx.tick().sample(
                dut.i.tready, dut.o.tvalid, dut.o.tdata, dut.o.tkeep, dut.o.tlast)
            if k < n and i_rdy:
                sent.append(cycle)
                k += 1
            if o_v and ready:
                got.append((cycle, d, keep, last))
            cycle += 1

    run_testbench(dut, bench)
    assert [(d, kp, la) for _, d, kp, la in got] == \
        [(k * 0x1234567, k % (1 << P.beat_bytes), int(k % 3 == 0)) for k in range(n)]
    assert got[0][0] - sent[0] == latency if not stall else got[0][0] - sent[0] >= latency
    if not stall:
        rate = (len(sent) - 1) / (sent[-1] - sent[0])
        assert abs(rate - num / den) < 0.02 * num / den + 1 / (sent[-1] - sent[0])
        assert all(c - s >= latency for (c, *_), s in zip(got, sent))


@pytest.mark.parametrize("charge_headers", [True, False])
def test_link_header_cost(charge_headers):
    """Saturated with packets of one header and two payload beats, a link that charges headers
    carries ``num / den`` beats per cycle; one that does not (the paper's link model) carries
    ``num / den`` payload beats per cycle, its headers riding between them."""
    num, den = 1, 4
    dut = LinkModel(P, 4, num, den, charge_headers=charge_headers)
    n = 90
    sent = []

    async def bench(ctx):
        k = cycle = 0
        ctx.set(dut.o.tready, 1)
        while k < n and cycle < 5_000:
            ctx.set(dut.i.tvalid, 1)
            ctx.set(dut.i.tuser, k % 3 == 0)
            ctx.set(dut.i.tlast, k % 3 == 2)
            _, _, i_rdy = await ctx.tick().sample(dut.i.tready)
            if i_rdy:
                sent.append((cycle, k % 3 == 0))
                k += 1
            cycle += 1

    run_testbench(dut, bench)
    assert len(sent) == n
    span = sent[-1][0] - sent[0][0]
    charged = [c for c, header in sent if charge_headers or not header]
    rate = (len(charged) - 1) / (charged[-1] - charged[0])
    assert abs(rate - num / den) < 0.02 * num / den + 1 / span
    if not charge_headers:      # all beats, headers included, at 3/2 the bandwidth
        assert (n - 1) / span == pytest.approx(1.5 * num / den, rel=0.05)


def test_link_settings_refused():
    with pytest.raises(ValueError, match="link latency must be an integer >= 2, not 1"):
        LinkModel(P, 1)
    with pytest.raises(ValueError, match="link bandwidth 5/4 exceeds one beat per cycle"):
        LinkModel(P, 4, 5, 4)


# --- driver API -----------------------------------------------------------------------------------

NP = NodeParams()


def _fused_driver(gpus, spec=None):
    spec = spec or GemmSpec(m=32, n=16 * gpus, k=32, wfs_per_wg=2)
    wl = Workload(spec, gpus, P)
    # beyond 16 GPUs: wider GPU numbers, and the memory the system gives such a ring
    nparams = NP if gpus <= 16 else node_for(gpus)
    driver = Driver(P, nparams, gpus)
    layout = allocate(driver, wl)
    return driver, wl, layout


@pytest.mark.parametrize("gpus", [2, 3, 4, 8, 16, 32, 64])
def test_fused_configuration_fits_every_ring(gpus):
    """The fused set-up of docs/design.md section 3 passes every check for 2 to 64 GPUs, with at
    most 3 Tracker regions (chunks of steps 2..G-1 in up to two runs, plus the neighbour's
    final chunk) and one remote window per GPU."""
    driver, wl, layout = _fused_driver(gpus)
    configure_fused(driver, wl, layout, "MCA")
    for g in range(gpus):
        regions, commands = driver.regions(g), driver.commands(g)
        assert len(regions) == len(commands) <= 3
        tracked = sum(c.cols for c in commands) // wl.chunk_cols
        assert tracked == max(0, gpus - 2)
        assert sum(not c.tracked for c in commands) == (1 if gpus > 2 else 0)
        assert all(c.dst_gpu == (g - 1) % gpus for c in commands)
        assert [w.dst_gpu for w in driver.remote(g)] == [(g - 1) % gpus]
        assert driver.register_writes(g, block_registers(P, driver.nparams))
    map_ring_windows(driver, wl, "R")
    assert all(driver.regions(g) == [] for g in range(gpus))


def test_each_kernels_programming_starts_with_a_flush_and_a_forget():
    """Between kernels the driver clears what the last one may have left: the Tracker's open
    tiles (``cmd.flush``) and the DMA's held tiles (``cmd.forget``), before any region or
    command register is written (the hardware refuses those writes otherwise)."""
    from dma.config import CMD as DMA_CMD
    from tracker.config import CMD as TRACKER_CMD
    driver, wl, layout = _fused_driver(4)
    configure_fused(driver, wl, layout, "MCA")
    for g in range(4):
        writes = driver.named_writes(g)
        assert writes[:2] == [("tracker", "cmd", TRACKER_CMD.encode(flush=1)),
                              ("dma", "cmd", DMA_CMD.encode(forget=1))]
        assert all(name != "cmd" for _, name, _ in writes[2:])


def _refused(driver, message, call, *args, **kwargs):
    before = driver.configuration()
    writes = [driver.named_writes(g) for g in range(driver.gpus)]
    with pytest.raises(ValueError, match=message):
        call(*args, **kwargs)
    assert driver.configuration() == before, "a refused call changed the configuration"
    assert [driver.named_writes(g) for g in range(driver.gpus)] == writes


def test_driver_refusals_name_the_field_and_touch_nothing():
    driver, wl, layout = _fused_driver(4)
    configure_fused(driver, wl, layout, "ROUND_ROBIN")
    c0, c3 = driver.buffer(0, "C"), driver.buffer(3, "C")
    _refused(driver, "exceed GPU 1's memory of 131072 bytes", driver.malloc, "big", 1, 1024,
             1024)
    _refused(driver, "dtype must be one of", driver.malloc, "x", 1, 16, 16, "fp8")
    _refused(driver, "GPU 0 already has a buffer 'C'", driver.malloc, "C", 0, 16, 16)
    _refused(driver, r"gpu must be an integer from 0 to 3 \(a GPU of the ring\), not 4",
             driver.malloc, "x", 4,
             16, 16)
    _refused(driver, r"already has 1 remote window, all its DMA engine has \(remote_windows\)",
             driver.remote_map, c0.cols_range(0, 16), 3, c3.cols_range(0, 16))
    _refused(driver, "src size 1024 != dst size 2048", driver.remote_map,
             c0.cols_range(0, 16), 3, c3.cols_range(0, 32))
    _refused(driver, "tile_rows 8 x 2 bytes = 16 is not a whole number",
             driver.dma_map, c0.cols_range(0, 16), 3, c3.cols_range(0, 16), tile=(8, 16))
    _refused(driver, "overlaps region", driver.dma_map, c0.cols_range(32, 16), 3,
             c3.cols_range(0, 16), tile=(16, 16))
    _refused(driver, "op must be 'update' or 'store'", driver.dma_map, c0.cols_range(0, 16),
             3, c3.cols_range(0, 16), op="add")
    _refused(driver, "granularity 3 does not divide", driver.dma_map, c0.cols_range(0, 16), 3,
             c3.cols_range(0, 16), granularity=3)
    _refused(driver, "policy must be one of", driver.set_arbitration, "fastest")
    # what the hardware would drop or misread: refused before it is programmed
    c1 = driver.buffer(1, "C")
    _refused(driver, r"dst_gpu must be GPU 0's ring neighbour 3 .*, not 1", driver.dma_map,
             c0.cols_range(0, 16), 1, c1.cols_range(0, 16))
    _refused(driver, r"dst_gpu must be GPU 0's ring neighbour 3 .*, not 0", driver.remote_map,
             c0.cols_range(0, 16), 0, c0.cols_range(16, 16))
    adds = Driver(P, node_for(), 4)          # the system's ALUs: fp16 and fp32
    b0, b3 = adds.malloc("b0", 0, 16, 16, "bf16"), adds.malloc("b3", 3, 16, 16, "bf16")
    _refused(adds, r"op 'update' on bf16: the nodes' near-bank ALUs add fp16, fp32 only",
             adds.dma_map, b0.whole(), 3, b3.whole())
    assert adds.dma_map(b0.whole(), 3, b3.whole(), op="store") == 0     # a copy needs no ALU
    _refused(driver, "tracked_at_dst must be True or False, not 'no'", driver.dma_map,
             c0.cols_range(0, 16), 3, c3.cols_range(0, 16), tracked_at_dst="no")
    _refused(driver, r"tile must be \(tile_rows, tile_cols\), not None", driver.dma_map,
             c0.cols_range(0, 16), 3, c3.cols_range(0, 16), tile=None)
    _refused(driver, r"src must be a Range \(Buffer.cols_range or Buffer.whole\), not None",
             driver.remote_map, None, 3, c3.cols_range(0, 16))
    _refused(driver, "auto_threshold must be True or False, not 2", driver.set_arbitration,
             "MCA", auto_threshold=2)
    _refused(driver, r"tracked_gpu must be an integer from 0 to 3 .*, not 99", driver.gemm,
             c0, [[0]], 1, tracked_gpu=99)
    _refused(driver, "first must be a non-negative integer, not 1.5", c0.cols_range, 1.5, 2)
    with pytest.raises(ValueError, match="gpus must be an integer from 2 to 64, not 65"):
        Driver(P, NP, 65)
    # a ring larger than the GPU numbers count (4 bits: 16 GPUs), as the ring's own check
    with pytest.raises(ValueError, match="^gpus 17 needs more than gpu_bits 4$"):
        Driver(P, NP, 17)
    # more open tiles in one Tracker set than it has ways
    stages = [[k * NP.tracker.sets for k in range(5)], []]
    _refused(driver, "set 0 would hold 10 open tiles", driver.gemm, c0, stages, 2)


def test_a_driver_call_copies_and_checks_only_the_gpus_it_changes(monkeypatch):
    """A call on one GPU of a ring copies that GPU's configuration alone and checks it alone;
    the others are the same objects after it (a paper run's set-up makes thousands of calls
    on rings of 32 GPUs)."""
    from sim.system import driver as driver_module
    driver = Driver(P, NP, 4)
    before = list(driver._gpu)
    checked = []
    validate = driver_module.Driver._validate
    monkeypatch.setattr(driver_module.Driver, "_validate",
                        lambda self, gpu, cfg: (checked.append(gpu), validate(self, gpu, cfg)))
    c2 = driver.malloc("C", 2, 16, 16)
    assert c2.gpu == 2 and checked == [2]
    assert [g is b for g, b in zip(driver._gpu, before)] == [True, True, False, True]
    driver.set_arbitration("MCA")                   # every GPU's policy: every GPU checked
    assert checked == [2, 0, 1, 2, 3]


def test_an_fp16_run_imports_ml_dtypes_in_neither_process():
    """ml_dtypes is for bf16's lanes alone: its import registers its casts with numpy one by
    one, over a second in the driver's process and again in the simulator's.  A fresh
    interpreter that imports what a run's two processes import (the driver, the testbench, the
    blocks' golden models) and makes an fp16 workload has not imported it; bf16's lane type is
    still ml_dtypes' bfloat16."""
    import subprocess
    import sys
    code = ("import sys, numpy as np\n"
            "import sim.system.run, sim.system.testbench, dma.model, nmc.model\n"
            "from hw.interfaces import ElemType\n"
            "from hw.params import T3Params\n"
            "from sim.system.workload import GemmSpec, Workload\n"
            "Workload(GemmSpec(m=32, n=64, k=16), 4, T3Params()).input_beats()\n"
            "assert nmc.model.lane_dtype(ElemType.FP16) is np.float16\n"
            "print('ml_dtypes' in sys.modules)\n"
            "import ml_dtypes\n"
            "print(nmc.model.lane_dtype(ElemType.BF16) is ml_dtypes.bfloat16)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_a_region_past_the_commands_is_refused():
    driver, wl, layout = _fused_driver(4)
    c0, c3 = driver.buffer(0, "C"), driver.buffer(3, "C")
    for k in range(NP.tracker.regions):
        driver.dma_map(c0.cols_range(16 * k, 16), 3, c3.cols_range(16 * k, 16))
    _refused(driver, "5 regions given but the Tracker has 4", driver.dma_map,
             driver.buffer(0, "R").cols_range(0, 16), 3, driver.buffer(3, "R").cols_range(0, 16))


# --- workload -------------------------------------------------------------------------------------

def test_ring_reference_is_the_ring_ordered_sum():
    """Chunk o = (((0 + p[o-1]) + p[o-2]) + ...) + p[o], each sum rounded to fp16: checked
    against a direct evaluation in that order, and different from the plain sum order."""
    rng = np.random.default_rng(5)
    g = 4
    parts = [(rng.standard_normal((8, 8)) * 1000).astype(np.float16) for _ in range(g)]
    ref = ring_reference(parts, np.float16)
    for o in range(g):
        cols = slice(2 * o, 2 * o + 2)
        acc = np.zeros((8, 2), np.float16)
        for d in (1, 2, 3, 0):
            acc = (acc + parts[(o - d) % g][:, cols]).astype(np.float16)
        assert acc.tobytes() == ref[:, cols].tobytes()
    plain = sum(p.astype(np.float16) for p in parts)
    assert plain.tobytes() != ref.tobytes()         # the order matters at fp16


def test_workload_refuses_and_balances():
    with pytest.raises(ValueError, match="n 48 is not a multiple of gpus x tile_cols"):
        GemmSpec(m=32, n=48, k=16).check(P, 4)
    with pytest.raises(ValueError, match="tile_rows 8 x 2 bytes"):
        GemmSpec(m=32, n=64, k=16, tile_rows=8).check(P, 4)
    with pytest.raises(ValueError, match="dtype must be 'fp16' or 'fp32'"):
        GemmSpec(dtype="bf16")
    for gpus in (2, 4, 8):
        spec = GemmSpec(m=64, n=32 * gpus, k=balanced_k(gpus))
        assert abs(Workload.estimate(spec, gpus, P)["ratio"] - 1) < 0.1
    # a preset keeps the paper's GEMM : RS ratio at its TP degree whatever the ring size
    paper = preset("T-NLG-FC-1-TP16", 16)
    for gpus in (4, 8):
        spec = preset("T-NLG-FC-1-TP16", gpus)
        r = Workload.estimate(spec, gpus, P)["ratio"]
        assert abs(r / Workload.estimate(paper, 16, P)["ratio"] - 1) < 0.05


def test_wg_ids_name_the_same_tile_on_every_gpu():
    wl = Workload(GemmSpec(m=32, n=64, k=16, wfs_per_wg=2), 4, P)
    where = [{wg.wg_id: (wg.chunk, tuple(wg.tiles)) for wg in wl.schedule[g]} for g in range(4)]
    assert all(w == where[0] for w in where)
    # and each GPU runs its chunks in the staggered order
    assert [wg.chunk for wg in wl.schedule[1]] == [2, 3, 0, 1]


def test_driver_refuses_more_tracked_tiles_than_the_trigger_queue_holds():
    """Each tracked tile fires one trigger; a full trigger queue stalls the Tracker and with it
    the memory controller the DMA needs to drain the queue (docs/dma.md): a launch whose
    tracked tiles outnumber the queue is refused, one that fits is taken."""
    import dataclasses
    from dma.config import DMAParams
    nparams = dataclasses.replace(NodeParams(), dma=DMAParams(trigger_depth=8))
    driver = Driver(P, nparams, 4)
    out = driver.malloc("C", 0, 64, 128, "fp16")
    with pytest.raises(ValueError, match="gemm: 10 tracked tiles exceed the DMA's "
                                         "trigger_depth 8: a full trigger queue can deadlock"):
        driver.gemm(out, [[0, 1, 2], [3, 4]], 2)
    assert driver.gemm(out, [[0, 1], [2, 3]], 2)["update"] is True
    # the system's nodes hold a whole kernel's triggers: the largest Figure 16 case fits
    spec = preset("Mega-GPT-2-FC-2-TP16")
    tiles = (spec.m // 16) * (spec.n // 16) // 16 * (16 - 2)
    assert tiles <= NodeParams().dma.trigger_depth


# --- the L2 in the nodes: the driver's cached buffers and the node's parameters ---------------

def test_the_driver_programs_the_l2_windows_from_its_cached_buffers():
    """Each GPU's cached buffers, in address order, are the L2's windows; the rest of its
    registers come from ``set_l2``; the writes follow the other blocks'."""
    from l2.config import L2Config, L2Params, l2_registers
    nparams = node_for(l2=L2Params(sets=16, ways=4))
    driver = Driver(P, nparams, 2)
    c = driver.malloc("C", 0, 32, 32)
    b = driver.malloc("B", 0, 32, 16, uncached=False)
    a = driver.malloc("A", 0, 32, 8, uncached=False)
    driver.set_l2(L2Config(sets_used=8, ways_used=2, hit_latency=20, bank_cycles=3))
    writes = driver.named_writes(0)
    l2 = {name: value for block, name, value in writes if block == "l2"}
    assert [block for block, _, _ in writes][-len(l2):] == ["l2"] * len(l2)
    assert set(l2) == {r.name for r in l2_registers(P, nparams.l2).regs if r.access == "rw"}
    assert (l2["win0_base"], l2["win0_size"]) == (b.base, b.size)
    assert (l2["win1_base"], l2["win1_size"]) == (a.base, a.size)
    assert l2["win2_size"] == l2["win3_size"] == 0
    assert all(not (c.base <= l2[f"win{k}_base"] < c.base + c.size) for k in range(2))
    assert (l2["sets_used"], l2["ways_used"], l2["hit_latency"], l2["bank_cycles"]) == \
        (3, 2, 20, 3)
    # GPU 1 has no cached buffer: every window is off
    assert all(v == 0 for block, name, v in driver.named_writes(1)
               if block == "l2" and name.startswith("win"))
    # without an L2 nothing is written to its window
    plain = Driver(P, node_for(), 2)
    plain.malloc("C", 0, 32, 32)
    assert all(block != "l2" for block, _, _ in plain.named_writes(0))


def test_the_driver_refuses_what_the_l2_cannot_hold():
    from l2.config import L2Config, L2Params, Window
    nparams = node_for(l2=L2Params(sets=16, ways=4, windows=2))
    driver = Driver(P, nparams, 2)
    driver.malloc("A", 0, 32, 8, uncached=False)
    driver.malloc("B", 0, 32, 8, uncached=False)
    _refused(driver, "windows: 3 cached windows, the L2 has 2", driver.malloc, "C", 0, 32, 8,
             uncached=False)
    _refused(driver, "uncached must be True or False, not 0", driver.malloc, "D", 0, 32, 8,
             uncached=0)
    _refused(driver, r"hit_latency must be an integer from 4 to 64 cycles, not 2",
             driver.set_l2, L2Config(hit_latency=2))
    _refused(driver, "sets_used must be a power of two", driver.set_l2, L2Config(sets_used=6))
    _refused(driver, "config.windows must be empty", driver.set_l2,
             L2Config(windows=(Window(0, 32),)))
    plain = Driver(P, node_for(), 2)
    _refused(plain, r"uncached=False, but the nodes have no L2 \(NodeParams.l2 is None\)",
             plain.malloc, "A", 0, 32, 8, uncached=False)
    _refused(plain, r"set_l2: the nodes have no L2", plain.set_l2, L2Config())


def test_node_params_carry_the_l2_through_a_dict():
    from l2.config import L2Params
    with_l2 = NodeParams(l2=L2Params(sets=32, ways=2))
    assert NodeParams.from_dict(with_l2.to_dict()) == with_l2
    assert NodeParams.from_dict(NodeParams().to_dict()) == NodeParams()
    assert "l2" in block_registers(P, with_l2) and "l2" not in block_registers(P, NodeParams())
    with pytest.raises(ValueError, match="l2 must be an L2Params or None, not 4"):
        NodeParams(l2=4)


@pytest.mark.parametrize("name", ["Mega-GPT-2-OP-TP8", "T-NLG-FC-1-TP16", "T-NLG-OP-TP16"])
def test_k_slices_share_out_a_wgs_reads_and_compute(name):
    """Streamed in the library's 32-element slices of K, a WG reads and computes what its
    whole panels do: exactly when K is a multiple of the slice, else within half a beat a
    slice of its reads and a cycle a slice of its compute (the engine's slices are all
    alike); each slice reads A and B as the panels do, 2 : 1."""
    from sim.system.workload import LIBRARY_K_SLICE
    spec = preset(name)
    assert spec.k_slice == LIBRARY_K_SLICE == 32
    gpus = PRESETS[name]["tp"]
    whole = Workload(dataclasses.replace(spec, k_slice=None), gpus, P)
    sliced = Workload(spec, gpus, P)
    n = sliced.wg_slices()
    assert whole.wg_slices() == 1 and n in (spec.k // 32, -(-spec.k // 32)) and n > 1
    assert abs(sliced.wg_read_beats() - whole.wg_read_beats()) <= n / 2
    assert 0 <= sliced.wg_compute_cycles() - whole.wg_compute_cycles() <= n
    if spec.k % 32 == 0:
        assert sliced.wg_read_beats() == whole.wg_read_beats()
    a, b = sliced.slice_read_split()
    assert a + b == sliced.slice_read_beats() and abs(a - 2 * b) <= 1
    assert sliced.wg_read_split() == (n * a, n * b)


def test_a_sliced_workload_programs_a_streaming_engine():
    """A workload with ``k_slice`` writes a slice's reads and compute and the slices'
    count; a run of it builds its engines streaming, and an engine that does not stream is
    refused by name before any build."""
    from sim.system import run
    from sim.system.programs import gemm_program
    from sim.system.driver import REMOTE_SPACE
    spec = GemmSpec(m=32, n=64, k=64, cus=2, k_slice=16)
    wl = Workload(spec, 2, P)
    layout = allocate(Driver(P, node_for(), 2), wl)
    reg = gemm_program(wl, 0, layout, "t3", REMOTE_SPACE).registers
    assert (reg["k_slices"], reg["read_beats"], reg["compute_cycles"]) == \
        (4, wl.slice_read_beats(), wl.slice_compute_cycles())
    free = gemm_program(wl, 0, layout, "rs-nmc", REMOTE_SPACE, free=True).registers
    assert (free["k_slices"], free["read_beats"], free["compute_cycles"]) == (1, 0, 0)
    assert "k_slices" not in gemm_program(Workload(dataclasses.replace(spec, k_slice=None), 2,
                                                   P), 0, layout, "t3", REMOTE_SPACE).registers
    with pytest.raises(ValueError, match=r"^k_slice 16: the engines do not stream their WGs' "
                                         r"panels \(EngineParams.streaming is False\)$"):
        run.check_config(spec, 2, "t3", P, node_for(), ENGINE_PARAMS)
    plan = run.run_plan(spec, 2, "t3", sim="verilator")
    assert plan.tb["engines"]["streaming"] is True
    assert run.run_plan(dataclasses.replace(spec, k_slice=None), 2, "t3",
                        sim="verilator").tb["engines"]["streaming"] is False
    with pytest.raises(ValueError, match="k_slice must be"):
        GemmSpec(k=64, k_slice=65)


@pytest.mark.parametrize("name", ["Mega-GPT-2-OP-TP8", "T-NLG-FC-2-TP16", None])
def test_wgs_read_their_own_panels_of_a_and_b(name):
    """Each WG reads its A panel and its B panel (256 : 128 of its reads, as the macro tile's
    inputs): WGs in one row of a chunk's grid share the A panel, WGs in one column of a chunk
    share the B panel, no two chunks share a B panel, and together the panels cover A and B
    exactly once each."""
    spec = preset(name) if name else GemmSpec(m=64, n=128, k=96, wfs_per_wg=2)
    gpus = PRESETS[name]["tp"] if name else 4
    wl = Workload(spec, gpus, P)
    rows, cols = wl.grid()
    a, b = wl.wg_read_split()
    assert a + b == wl.wg_read_beats() and abs(a - 2 * b) <= 2
    a_total, b_total = wl.input_beats()
    for g in range(gpus):
        a_seen, b_seen = {}, {}
        for wg in wl.schedule[g]:
            a_off, b_off = wl.read_offsets(wg)
            assert 0 <= a_off and a_off + a <= a_total and 0 <= b_off and b_off + b <= b_total
            assert a_off % a == 0 and b_off % b == 0
            a_seen.setdefault(a_off, set()).add((wg.chunk, wg.wg_id))
            b_seen.setdefault(b_off, set()).add(wg.chunk)
        assert all(len(chunks) == 1 for chunks in b_seen.values()), "a B panel in two chunks"
        assert sorted(b_seen) == [i * b for i in range(gpus * cols)], "B covered once"
        assert sorted(a_seen) == [i * a for i in range(rows)], "A covered once"
    # in dispatch order the WGs of a chunk go down a grid column first: the first `rows` WGs
    # of a chunk read `rows` different A panels and one B panel
    first = [w for w in wl.schedule[0] if w.step == 1][:rows]
    assert len({wl.read_offsets(w)[0] for w in first}) == rows
    assert len({wl.read_offsets(w)[1] for w in first}) == 1
    if name:
        tokens, hidden, _ = PRESETS[name]["paper_mnk"]
        assert cols == round(hidden / PRESETS[name]["tp"] / 128)


def _node_latencies(hit_latency):
    """Cycles from a request's handshake on a node's compute port to its response: a store
    and a read with no L2 window (both pass the L2), then the same read inside a window
    (a miss), again (a hit), and a read of another line (a miss); with their data."""
    from hw.interfaces import Op, Packer, mem_request_layout, mem_response_layout
    from hw.testing import axil_write
    from l2.config import L2Params
    from system.node import GPUNode, register_address
    nparams = node_for(l2=L2Params(sets=16, ways=4))
    dut = GPUNode(P, nparams)
    regs = block_registers(P, nparams)["l2"]
    req, resp = Packer(mem_request_layout(P)), Packer(mem_response_layout(P))
    out = {}

    async def write(ctx, name, value):
        for word, data in regs.word_writes(name, value):
            await axil_write(ctx, dut.cfg, register_address("l2", word), data)

    async def access(ctx, name, addr, op=Op.READ, data=0):
        ctx.set(dut.compute.payload.as_value(), req.pack(dict(
            addr=addr, data=data, mask=(1 << P.beat_bytes) - 1, op=op.value)))
        ctx.set(dut.compute.valid, 1)
        ctx.set(dut.resp.ready, 1)
        await ctx.tick().until(dut.compute.ready)
        ctx.set(dut.compute.valid, 0)
        n = 1
        while not ctx.get(dut.resp.valid):
            await ctx.tick()
            n += 1
        out[name] = (n, resp.unpack(ctx.get(dut.resp.payload.as_value()))["data"])
        await ctx.tick()

    async def bench(ctx):
        await ctx.tick().repeat(20)                 # the L2 invalidates its 16 sets
        await access(ctx, "store", 64, Op.STORE, 0x1234)
        await access(ctx, "bypass", 64)
        await write(ctx, "win0_base", 0)
        await write(ctx, "win0_size", 4096)
        await write(ctx, "hit_latency", hit_latency)
        await access(ctx, "miss", 64)
        await access(ctx, "hit", 64)
        await access(ctx, "other", 64 + 40 * P.beat_bytes)

    run_testbench(dut, bench)
    return out


def test_the_system_l2_hits_at_its_fraction_of_a_miss():
    """In a node, a repeated read inside a window is answered from the L2 after its
    ``hit_latency`` (plus the compute port's slice: changing the register by 16 moves it by
    16), with the stored data; a miss takes as long as a read that bypasses the L2; and the
    system's ``L2_HIT_LATENCY`` puts an unloaded hit at ``L2_HIT_FRACTION`` of an unloaded
    miss, to the cycle."""
    from sim.system.run import L2_HIT_FRACTION, L2_HIT_LATENCY
    fast, slow = _node_latencies(4), _node_latencies(20)
    for out in (fast, slow):
        assert out["bypass"][1] == out["miss"][1] == out["hit"][1] == 0x1234
        assert out["other"][1] == 0
        assert out["miss"][0] == out["other"][0] == out["bypass"][0]
    assert slow["hit"][0] - fast["hit"][0] == 16
    port = fast["hit"][0] - 4                      # the cycles the node adds to a hit
    miss = fast["miss"][0]
    assert L2_HIT_LATENCY + port == round(L2_HIT_FRACTION * miss), (miss, port)


def test_the_paper_l2_keeps_each_cases_ratio_of_working_set_to_l2():
    """Each Figure 16 case's L2, at scales 0.5 and 1, holds the scaled working set of a ring
    step (A, one chunk's B panels and the chunk's output) in the ratio the paper's 16 MB
    holds the real one (Table 2's M K + K H / TP + M H / TP elements), within the steps of
    its geometries (128, 64 or 32 sets of whole ways: under 6.25 % from 512 beats up, 3.4 %
    below) and as near as any of them; the OP GEMMs' inputs fit, the FC GEMMs' at TP 8 do
    not."""
    from sim.system.paper import FIGURE16_CASES
    from sim.system.run import PAPER_L2_BYTES, paper_l2_config
    from system.spec import PAPER_L2
    for name, scale in [(n, s) for n in FIGURE16_CASES for s in (0.5, 1.0)]:
        spec = preset(name, scale=scale)
        tp = PRESETS[name]["tp"]
        tokens, hidden, k = PRESETS[name]["paper_mnk"]
        paper_in = (tokens * k + k * hidden / tp) * 2 / PAPER_L2_BYTES
        paper = paper_in + tokens * hidden / tp * 2 / PAPER_L2_BYTES
        cfg = paper_l2_config(spec, tp)
        beats = cfg.sets_used * cfg.ways_used
        a, b = Workload(spec, tp, P).input_beats()
        out = spec.m * spec.n // tp * 2 // 32
        model = (a + b / tp + out) / beats
        assert cfg.sets_used in (32, 64, 128) and 1 <= cfg.ways_used <= PAPER_L2.ways
        target = beats * model / paper
        step = 0.0625 if target >= 512 else 0.034
        assert abs(model / paper - 1) <= step, (name, scale, model, paper)
        # no other geometry is nearer
        assert all(abs(math.log(s * w / target)) >= abs(math.log(beats / target)) - 1e-12
                   for s in (32, 64, 128) for w in range(1, 17)), (name, scale)
        if "OP" in name:
            assert (a + b / tp) / beats < 1 and paper_in < 1, name
        if "FC" in name and tp == 8:
            assert (a + b / tp) / beats > 1 and paper_in > 1, name


def test_a_mesh_driver_maps_a_window_to_every_other_gpu():
    """On a full mesh each GPU's slices of ``C`` go each to its owner (paper section 7.1): a
    remote window per other GPU (``DMAParams.remote_windows``), programmed as the DMA's
    registers name them; the receiving side's rx window covers every slice aimed at it; a
    window to the GPU itself, one too many and a ring's non-neighbour are refused by name."""
    gpus = 4
    nparams = dataclasses.replace(NP, dma=dataclasses.replace(NP.dma, remote_windows=gpus - 1))
    driver = Driver(P, nparams, gpus, topology="mesh")
    bufs = [driver.malloc("C", g, 32, 16 * gpus) for g in range(gpus)]
    for g in range(gpus):
        for d in range(gpus):
            if d != g:
                driver.remote_map(bufs[g].cols_range(16 * d, 16), d,
                                  bufs[d].cols_range(16 * d, 16))
    for g in range(gpus):
        assert sorted(w.dst_gpu for w in driver.remote(g)) == [d for d in range(gpus) if d != g]
        names = dict((n, v) for b, n, v in driver.named_writes(g) if b == "dma")
        assert {names[f"remote{k}_dst_gpu" if k else "remote_dst_gpu"] for k in range(3)} == \
            {d for d in range(gpus) if d != g}
        chunk = bufs[g].cols_range(16 * g, 16)
        assert driver.rx_window(g) == (chunk.base, chunk.size)
    with pytest.raises(ValueError, match=r"^dst_gpu must be another GPU of the mesh than GPU 1 "
                                         r"itself$"):
        driver.remote_map(bufs[1].cols_range(0, 16), 1, bufs[1].cols_range(0, 16))
    with pytest.raises(ValueError, match=r"^GPU 0 already has 3 remote windows, all its DMA "
                                         r"engine has \(remote_windows\); remote_unmap first$"):
        driver.remote_map(bufs[0].cols_range(0, 16), 1, bufs[1].cols_range(0, 16))
    ring = Driver(P, nparams, gpus)
    rbufs = [ring.malloc("C", g, 32, 16 * gpus) for g in range(gpus)]
    with pytest.raises(ValueError, match=r"^dst_gpu must be GPU 0's ring neighbour 3"):
        ring.remote_map(rbufs[0].cols_range(0, 16), 2, rbufs[2].cols_range(0, 16))
    with pytest.raises(ValueError, match=r"^topology must be one of ring, mesh, not 'star'$"):
        Driver(P, nparams, gpus, topology="star")


def _mesh(gpus):
    """A small workload on a mesh of ``gpus`` whose DMAs have the most remote windows, and
    its buffers: ``(wl, nparams, driver, layout)``."""
    wl = Workload(GemmSpec(m=32, n=16 * gpus, k=32, wfs_per_wg=2), gpus, P)
    nparams = dataclasses.replace(NP, dma=dataclasses.replace(NP.dma, remote_windows=15))
    driver = Driver(P, nparams, gpus, topology="mesh")
    return wl, nparams, driver, allocate(driver, wl)


@pytest.mark.parametrize("gpus", [2, 3, 4, 8, 16])
def test_the_direct_configuration_fits_every_mesh(gpus):
    """The direct reduce-scatter's set-up passes every check for 2 to 16 GPUs: a window per
    other GPU, each to that GPU's chunk, no Tracker region or DMA command; the GEMM program
    sends every other chunk's tiles as remote updates, its own chunk's locally, none tracked.
    Refused on a ring, and with too few remote windows, by name."""
    from sim.system.programs import gemm_program
    from sim.system.configure import configure_direct
    from sim.system.driver import REMOTE_SPACE
    wl, nparams, driver, layout = _mesh(gpus)
    configure_direct(driver, wl, layout, "MCA")
    cb = layout["chunk_beats"] * P.beat_bytes
    for g in range(gpus):
        assert driver.regions(g) == [] and driver.commands(g) == []
        windows = driver.remote(g)
        assert sorted(w.dst_gpu for w in windows) == [c for c in range(gpus) if c != g]
        c_base = layout["C"].base
        for w in windows:
            assert w.src_base == REMOTE_SPACE + c_base + w.dst_gpu * cb
            assert (w.dst_base, w.size) == (c_base + w.dst_gpu * cb, cb)
        assert driver.rx_window(g) == (c_base + g * cb, cb)
        assert driver.register_writes(g, block_registers(P, driver.nparams))
        program = gemm_program(wl, g, layout, "direct", REMOTE_SPACE)
        assert not any(d.tracked for d in program.wgs) and all(d.update for d in program.wgs)
        assert sum(d.remote for d in program.wgs) == len(program.wgs) * (gpus - 1) // gpus
    ring = Driver(P, nparams, gpus)
    with pytest.raises(ValueError, match=r"^the direct reduce-scatter needs a link to every "
                                         r"GPU: topology must be mesh, not 'ring'$"):
        configure_direct(ring, wl, allocate(ring, wl), "MCA")
    if gpus > 2:
        few = Driver(P, NP, gpus, topology="mesh")
        with pytest.raises(ValueError, match=r"^GPU 0 already has 1 remote window, all its "
                                             r"DMA engine has \(remote_windows\)"):
            configure_direct(few, wl, allocate(few, wl), "MCA")


@pytest.mark.parametrize("gpus", [2, 3, 4, 8])
def test_the_sequential_direct_reduce_scatter_sums_every_chunk_at_its_owner(gpus):
    """The Sequential baseline of the direct reduce-scatter, played on a model of the GPUs'
    memories (each beat a multiset of the (GPU, beat of C) partials it holds): the copy steps
    through :func:`map_direct_windows`'s windows put each sender's chunk into its own slot at
    the owner (no two senders in one slot, every slot filled before the reduce's first step
    may start, by its arrival count), and the reduce passes leave each GPU's own chunk holding
    every GPU's partial of it once."""
    from collections import Counter
    from sim.system.programs import direct_rs_steps
    from sim.system.configure import map_direct_windows
    from sim.system.driver import REMOTE_SPACE
    wl, nparams, driver, layout = _mesh(gpus)
    map_direct_windows(driver, wl)
    beat, cb = P.beat_bytes, layout["chunk_beats"]
    c_base = layout["C"].base
    # every GPU's C holds its own partial of every chunk
    mem = [{c_base + i * beat: Counter([(g, i)]) for i in range(gpus * cb)}
           for g in range(gpus)]
    arrived = [0] * gpus
    programs = [direct_rs_steps(wl, g, layout, REMOTE_SPACE) for g in range(gpus)]
    copies = [[s for s in p if s.y is None] for p in programs]
    reduces = [[s for s in p if s.y is not None] for p in programs]
    assert [len(c) for c in copies] == [len(r) for r in reduces]  # as many slices each
    for g in range(gpus):
        for s in copies[g]:
            assert s.z >= REMOTE_SPACE and s.wait_arrivals == 0
            (w,) = [w for w in driver.remote(g) if w.src_base <= s.z < w.src_base + w.size]
            for i in range(s.n):
                dst = w.dst_base + s.z - w.src_base + i * beat
                assert dst not in mem[w.dst_gpu], f"GPU {g} overwrites {dst:#x}"
                mem[w.dst_gpu][dst] = Counter(mem[g][s.x + i * beat])
                arrived[w.dst_gpu] += 1
    for g in range(gpus):
        assert arrived[g] == (gpus - 1) * cb == reduces[g][0].wait_arrivals
        for s in reduces[g]:
            assert s.z == s.x < REMOTE_SPACE
            for i in range(s.n):
                mem[g][s.z + i * beat] = mem[g][s.x + i * beat] + mem[g][s.y + i * beat]
        for i in range(cb):
            want = Counter((h, g * cb + i) for h in range(gpus))
            assert mem[g][c_base + (g * cb + i) * beat] == want, (g, i)


@pytest.mark.parametrize("gpus", [2, 3, 4, 16])
def test_the_all_to_all_sends_each_chunk_into_its_own_slot_at_its_owner(gpus):
    """The all-to-all's set-up (:func:`configure_all_to_all`): every GPU's window for chunk
    ``c`` lands in GPU ``c``'s ``R``, in the slot the host reads back as that sender's; no two
    senders share a slot; the GEMM program sends every other chunk as remote plain stores and
    writes only its own chunk locally; refused on a ring by name."""
    from sim.system.programs import direct_slot, gemm_program
    from sim.system.configure import configure_all_to_all
    from sim.system.driver import REMOTE_SPACE
    wl, nparams, driver, layout = _mesh(gpus)
    configure_all_to_all(driver, wl, layout, "MCA")
    cb = layout["chunk_beats"] * P.beat_bytes
    c_base, r_base = layout["C"].base, layout["R"].base
    landed = set()
    for g in range(gpus):
        assert driver.regions(g) == [] and driver.commands(g) == []
        for w in driver.remote(g):
            c = w.dst_gpu
            assert w.src_base == REMOTE_SPACE + c_base + c * cb and w.size == cb
            assert w.dst_base == r_base + direct_slot(g, c, gpus) * cb
            landed.add((c, w.dst_base))
        assert driver.register_writes(g, block_registers(P, driver.nparams))
        program = gemm_program(wl, g, layout, "all-to-all", REMOTE_SPACE)
        assert not any(d.tracked or d.update for d in program.wgs)
        assert sum(d.remote for d in program.wgs) == len(program.wgs) * (gpus - 1) // gpus
    assert len(landed) == gpus * (gpus - 1)
    ring = Driver(P, nparams, gpus)
    with pytest.raises(ValueError, match=r"^the all-to-all needs a link to every GPU: topology "
                                         r"must be mesh, not 'ring'$"):
        configure_all_to_all(ring, wl, allocate(ring, wl), "MCA")


@pytest.mark.parametrize("gpus", [2, 3, 4, 16])
def test_the_all_reduce_sends_each_reduced_chunk_round_the_ring_once(gpus):
    """The all-reduce's set-up (:func:`configure_all_reduce`), followed chunk by chunk: at its
    owner a region counts each tile complete at ``G`` updates per element (the direct RS's),
    and every command stores to the GPU ``g - 1``, whose region counts the tile at one update
    per element and sends it on, until the chunk's last stop (GPU ``owner + 1``: no region
    there, the command before it untracked); so every chunk reaches every GPU once, in
    ``G - 1`` hops.  The Tracker's capacity check counts the forwarded tiles: with only the
    ways the owner's tiles take in their fullest set, the set-up is refused by name (one
    forwarded tile is open at a time, in any set); with one more, accepted.  Each GPU's
    trigger queue takes the owner's and the forwarded tiles' triggers."""
    from collections import Counter
    from sim.system.configure import configure_all_reduce
    wl, nparams, driver, layout = _mesh(gpus)
    configure_all_reduce(driver, wl, layout, "MCA")
    cb = layout["chunk_beats"] * P.beat_bytes
    c_base = layout["C"].base

    e = wl.spec.elem_bytes

    def over(g, chunk):
        """GPU ``g``'s region and command over ``chunk``'s first byte, or ``(None, None)``."""
        addr = c_base + chunk * cb
        regions = [r for r in driver.regions(g) if r.contains(addr)]
        commands = [c for c in driver.commands(g)
                    if c.src_base <= addr < c.src_base + c.ld * c.cols * e]
        assert len(regions) == len(commands) <= 1
        return (regions[0], commands[0]) if regions else (None, None)

    for owner in range(gpus):
        g, hops = owner, 0
        while True:
            region, command = over(g, owner)
            if region is None:
                break
            assert region.updates_per_element == (gpus if g == owner else 1), (owner, g)
            assert command.dst_gpu == (g - 1) % gpus and command.op.name == "STORE"
            nxt = (g - 1) % gpus
            assert command.tracked == (nxt != (owner + 1) % gpus), (owner, g)
            assert command.dst_base == c_base + (command.src_base - c_base)
            g, hops = nxt, hops + 1
        assert (g, hops) == ((owner + 1) % gpus, gpus - 1), owner
    # the Tracker's ways: the owner's tiles in their fullest set, then one more
    per_set = max(max(Counter(wg % NP.tracker.sets for wg in wl.stages(g, [gpus])[0]).values())
                  for g in range(gpus))
    for extra, refused in ((0, True), (1, False)):
        tight = dataclasses.replace(nparams, tracker=dataclasses.replace(
            NP.tracker, ways=per_set * wl.spec.wfs_per_wg + extra))
        d = Driver(P, tight, gpus, topology="mesh")
        if refused and gpus > 2:    # two GPUs forward nothing
            with pytest.raises(ValueError, match=r"^set \d+ would hold \d+ and 1 passing open "
                                                 r"tiles in stages 0-0"):
                configure_all_reduce(d, wl, allocate(d, wl), "MCA")
        else:
            configure_all_reduce(d, wl, allocate(d, wl), "MCA")
    # a forwarded tile that is also the GEMM's would share its Tracker entry
    own = wl.stages(0, [gpus])[0]
    with pytest.raises(ValueError, match=rf"^gemm: wg_id {min(own)} is both the GEMM's and "
                                         r"forwarded"):
        driver.gemm(driver.buffer(0, "C"), [own], wl.spec.wfs_per_wg, forwarded=own)
    # the trigger queue: every tracked tile's trigger, the owner's and the forwarded
    triggers = len(wl.stages(0, [gpus])[0]) * wl.spec.wfs_per_wg * (gpus - 1)
    if triggers > 2:    # the shallowest queue holds 2
        shallow = dataclasses.replace(nparams, dma=dataclasses.replace(
            nparams.dma, trigger_depth=triggers - 1))
        d = Driver(P, shallow, gpus, topology="mesh")
        with pytest.raises(ValueError, match=rf"^gemm: {triggers} tracked tiles exceed the "
                                             r"DMA's trigger_depth"):
            configure_all_reduce(d, wl, allocate(d, wl), "MCA")


@pytest.mark.parametrize("gpus", [2, 3, 4, 5, 8, 16])
def test_the_ring_all_reduce_reduces_each_chunk_then_sends_it_round_the_ring(gpus):
    """The all-reduce on the ring (:func:`configure_fused` with ``all_reduce``), followed chunk
    by chunk.  The reduce-scatter: the GEMM of GPU ``c - 1`` stores its chunk-``c`` tiles into
    GPU ``c - 2`` (tracked there), whose region counts them at two updates per element and whose
    command adds them into ``c - 3``, and so on to the owner ``c``, where a region counts the
    chunk at two (the owner's GEMM's update and ``c + 1``'s: every update tracked).  The
    all-gather: the owner's command stores the reduced chunk into slot 0 of ``R`` on ``c - 1``,
    whose region counts it at one update per element and sends it on to slot 1 of ``c - 2``,
    until its last stop ``c + 1`` (untracked, no region there): every GPU gets the chunk once,
    in slot ``c - g - 1`` of its ``R``.  At most :data:`RING_ALL_REDUCE_REGIONS` regions per
    GPU, which the node's four do not hold from four GPUs on (refused by name); the GEMM's
    tiles all tracked updates, remote at step 1."""
    from sim.system.programs import gemm_program
    from sim.system.driver import REMOTE_SPACE
    from sim.system.run import RING_ALL_REDUCE_REGIONS, for_collective
    wl = Workload(GemmSpec(m=32, n=16 * gpus, k=32, wfs_per_wg=2), gpus, P)
    nparams = for_collective(NP, gpus, "all-reduce", "ring")
    driver = Driver(P, nparams, gpus)
    layout = allocate(driver, wl)
    configure_fused(driver, wl, layout, "MCA", all_reduce=True)
    cb = layout["chunk_beats"] * P.beat_bytes
    c_base, r_base = layout["C"].base, layout["R"].base
    e = wl.spec.elem_bytes

    def over(g, addr):
        """GPU ``g``'s region over byte ``addr``, its command, and where that sends the byte;
        or ``(None, None, None)``."""
        regions = [r for r in driver.regions(g) if r.contains(addr)]
        commands = [c for c in driver.commands(g)
                    if c.src_base <= addr < c.src_base + c.ld * c.cols * e]
        assert len(regions) == len(commands) <= 1
        if not regions:
            return None, None, None
        return regions[0], commands[0], commands[0].dst_base + addr - commands[0].src_base

    for c in range(gpus):
        # the reduce-scatter: from GPU c - 2 (the step-1 stores of c - 1 land there) to c
        g, hops = (c - 2) % gpus, 0
        while g != c:
            region, command, to = over(g, c_base + c * cb)
            assert region.updates_per_element == 2 and command.op.name == "UPDATE", (c, g)
            assert command.dst_gpu == (g - 1) % gpus and command.tracked
            assert to == c_base + c * cb
            g, hops = (g - 1) % gpus, hops + 1
        assert hops == max(gpus - 2, 0), c
        region, command, to = over(c, c_base + c * cb)
        assert region.updates_per_element == 2 and command.op.name == "STORE"
        assert command.dst_gpu == (c - 1) % gpus and to == r_base
        assert command.tracked == (gpus > 2)
        # the all-gather: slot s of GPU g - s - 1 ... until c + 1
        g, slot = (c - 1) % gpus, 0
        while True:
            assert (c - g - 1) % gpus == slot
            region, command, to = over(g, r_base + slot * cb)
            if region is None:
                break
            assert region.updates_per_element == 1 and command.op.name == "STORE"
            assert command.dst_gpu == (g - 1) % gpus and to == r_base + (slot + 1) * cb
            assert command.tracked == ((g - 1) % gpus != (c + 1) % gpus), (c, g)
            g, slot = (g - 1) % gpus, slot + 1
        assert (g, slot) == ((c + 1) % gpus, gpus - 2), c
    most = max(len(driver.regions(g)) for g in range(gpus))
    assert most <= RING_ALL_REDUCE_REGIONS
    for g in range(gpus):
        assert driver.register_writes(g, block_registers(P, nparams))
        program = gemm_program(wl, g, layout, "ring-all-reduce", REMOTE_SPACE)
        assert all(d.update and d.tracked for d in program.wgs)
        assert [d.remote for d in program.wgs] == [wg.step == 1 for wg in wl.schedule[g]]
    if most > NP.tracker.regions:
        d = Driver(P, NP, gpus)
        with pytest.raises(ValueError, match=rf"^{NP.tracker.regions + 1} regions given but "
                                             rf"the Tracker has {NP.tracker.regions} region "
                                             r"registers"):
            configure_fused(d, wl, allocate(d, wl), "MCA", all_reduce=True)
    assert (most > NP.tracker.regions) == (gpus >= 4)


def test_the_idle_rate_of_a_workload_is_its_runs_ring(monkeypatch):
    """``idle_rate(plan.ring)`` idles the ring a ``t3`` run of that workload runs on (at 8
    GPUs the default workload's ring holds twice the rows of the size's default ring), not
    the ring size's default: ``t3 bench system`` compares the two rates."""
    from sim.system import run
    from sim.system.workload import workload_spec
    keys = []
    monkeypatch.setattr(run, "run_for_result",
                        lambda make, top, *args, cache_key, **kw: keys.append(cache_key))
    plan = run.run_plan(workload_spec(8), 8, "t3", sim="verilator", check=False)
    run.idle_rate(plan.ring, sim="verilator")
    run.idle_rate(ring_for(8, engines=True, formats=("fp16",)), sim="verilator")
    assert keys[0] == plan.key and plan.ring.node.nmc.rows == 16
    assert keys[1] != keys[0]


def test_a_machine_without_the_models_compiler_is_refused_before_a_build(monkeypatch):
    """Verilator's models are compiled with Clang (``T3_CXX`` names another): a machine
    without it gets one line naming the compiler and what to do, before anything is built;
    ``T3_CXX=g++`` builds with GCC."""
    import sim.harness.runner as runner
    from sim.system.run import run_config
    monkeypatch.setattr(runner, "run_cocotb", lambda *a, **k: pytest.fail("a build started"))
    monkeypatch.setenv("T3_CXX", "no-such-c++")
    with pytest.raises(ValueError, match=r"^Verilator's models are compiled with no-such-c\+\+, "
                                         r"which this machine lacks: install it .* set T3_CXX"):
        run_config(GemmSpec(m=32, n=64, k=64, cus=2), 2, "t3", sim="verilator")
    monkeypatch.setenv("T3_CXX", "g++")
    assert "CXX=g++" in runner.build_settings("verilator")["make"]


@pytest.mark.parametrize("fails", [False, True], ids=["passes", "fails"])
def test_a_run_without_a_folder_leaves_none_behind_unless_it_fails(fails, tmp_path,
                                                                  monkeypatch):
    """A run given no ``build_dir`` (a ring's, an idle ring's, any block's through
    :func:`sim.harness.runner.run_for_result`) works in a temporary folder that it removes
    once it has the result: a ``t3 paper`` of 84 runs leaves nothing in the system's
    temporary folder.  A run that fails keeps its folder, whose simulator log its error
    names."""
    import json
    import tempfile
    from pathlib import Path
    import sim.harness.runner as runner
    from sim.system import run
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def simulate(component, toplevel, test_module, build_dir, *, config, **kwargs):
        (build_dir / "sim.log").write_text("the simulator's log\n")
        if fails:
            raise AssertionError(f"1 of 1 cocotb tests failed; log: {build_dir / 'sim.log'}")
        Path(config["out"]).write_text(json.dumps({"verified": True}))
    monkeypatch.setattr(runner, "run_cocotb", simulate)
    spec = GemmSpec(m=32, n=64, k=64, cus=2)
    if fails:
        with pytest.raises(AssertionError, match="cocotb tests failed") as failure:
            run.run_config(spec, 2, "t3", sim="verilator")
        (kept,) = tmp_path.iterdir()
        assert kept.name.startswith("t3_system_t3_")
        assert str(kept / "sim.log") in str(failure.value) and (kept / "sim.log").exists()
    else:
        assert run.run_config(spec, 2, "t3", sim="verilator") == {"verified": True}
        assert run.idle_rate(ring_for(2, engines=True), sim="verilator") == {"verified": True}
        assert runner.run_for_result(None, "t3_toy", "tb", "t", {}, "icarus") == \
            {"verified": True}
        assert list(tmp_path.iterdir()) == []
