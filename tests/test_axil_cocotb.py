"""The ring host's AXI4-Lite master (:class:`sim.harness.axil.AxiLiteBatch`) on exported Verilog,
under Verilator and Icarus, against two slaves at once:

- port ``p0``: a register slice (:class:`hw.axil.AXILiteInputSlice`) in front of cocotbext-axi's
  ``AxiLiteRam``, which pauses every channel at random (backpressure on the requests, late
  answers);
- port ``p1``: the nodes' own slave (:class:`hw.axil.AXILiteToCSR`) in front of a register file;
- batches begun while another runs wait their turn;
- and the nodes' slave on its own against cocotbext-axi's ``AxiLiteMaster``, the library's
  master, with many accesses in flight.

Scored against a dict of what was written; an error answer raises naming the port, the access
and the address, and a slave that never answers raises after the master's limit.
"""

import logging
import random

import cocotb
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, connect

from hw.axil import AXILiteInputSlice, AXILiteToCSR, axil_signature
from hw.csr import Reg, RegisterFile, RegisterMap, csr_signature
from sim.harness.runner import run_cocotb, tb_config


ADDR_BITS = 12
REGS = 4            # rw registers behind p1: byte addresses 0, 4, 8, 12


class _RegBlock(wiring.Component):
    def __init__(self):
        self.regs = RegisterMap([Reg(f"r{k}", 32, "rw", "") for k in range(REGS)])
        super().__init__({"csr": In(csr_signature(ADDR_BITS - 2))})

    def elaborate(self, platform):
        m = Module()
        RegisterFile(self.regs).elaborate(m, self.csr, {})
        return m


class TwoSlaves(wiring.Component):
    def __init__(self):
        super().__init__({"p0": In(axil_signature(ADDR_BITS)),
                          "p1": In(axil_signature(ADDR_BITS)),
                          "ram": Out(axil_signature(ADDR_BITS))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.slice = slice_ = AXILiteInputSlice(ADDR_BITS)
        connect(m, wiring.flipped(self.p0), slice_.i)
        connect(m, slice_.o, wiring.flipped(self.ram))
        m.submodules.axil = axil = AXILiteToCSR(ADDR_BITS)
        m.submodules.block = block = _RegBlock()
        connect(m, wiring.flipped(self.p1), axil.axil)
        connect(m, axil.csr, block.csr)
        return m


async def _start(dut, pause=0.3, seed=1):
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles
    from cocotbext.axi import AxiLiteBus, AxiLiteRam
    from sim.harness.axil import AxiLiteBatch
    host = AxiLiteBatch(dut, ["p0", "p1"], dut.clk, limit=200)
    ram = AxiLiteRam(AxiLiteBus.from_prefix(dut, "ram_"), dut.clk, dut.rst, size=1 << ADDR_BITS)
    rng = random.Random(seed)

    def pauses():
        while True:
            yield rng.random() < pause
    for channel in (ram.write_if.aw_channel, ram.write_if.w_channel, ram.write_if.b_channel,
                    ram.read_if.ar_channel, ram.read_if.r_channel):
        channel.set_pause_generator(pauses())
    dut.rst.value = 1
    Clock(dut.clk, 1, unit="ns").start()
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    return host, ram


@cocotb.test()
async def batches_scored(dut):
    """Batches of random writes then reads on both ports at once, reads interleaved with
    writes to the same addresses across batches: every word read is the last one written."""
    cfg = tb_config()
    rng = random.Random(cfg["seed"])
    host, _ = await _start(dut, seed=cfg["seed"])
    want = [{}, {}]
    for _ in range(cfg["rounds"]):
        writes = [[(4 * rng.randrange(64), rng.getrandbits(32))
                   for _ in range(rng.randrange(0, 12))],
                  [(4 * rng.randrange(REGS), rng.getrandbits(32))
                   for _ in range(rng.randrange(0, 6))]]
        await host.write(writes)
        for port, pairs in enumerate(writes):
            want[port].update(pairs)
        reads = [rng.sample(sorted(w), min(len(w), rng.randrange(1, 10))) for w in want]
        got = await host.read(reads)
        for port in range(2):
            assert got[port] == [want[port][a] for a in reads[port]], (port, reads[port])
    assert len(want[0]) > 20 and len(want[1]) == REGS


@cocotb.test()
async def overlapping_batches(dut):
    """A batch begun while another runs (the timeline's sampler beside a phase's counters)
    waits for it: they run in the order they began, neither loses an access."""
    host, _ = await _start(dut)
    await host.write([[(0, 1), (4, 2)], [(0, 3)]])
    writer = cocotb.start_soon(host.write([[(0, 10), (4, 20)], [(0, 30)]]))
    reader = cocotb.start_soon(host.read([[0, 4], [0]]))
    assert await writer is None
    assert await reader == [[10, 20], [30]]
    assert await host.read([[4, 0], [0]]) == [[20, 10], [30]]


@cocotb.test()
async def error_answer(dut):
    """The nodes' slave answers a misaligned access SLVERR: the batch raises, naming it."""
    from sim.harness.axil import AxiLiteError
    host, _ = await _start(dut)
    await host.write([[], [(4, 0x1234_5678)]])
    try:
        await host.read([[], [4, 6]])
    except AxiLiteError as error:
        assert str(error) == "p1: read of 0x6 answered resp 2", error
    else:
        raise AssertionError("a misaligned read was answered OKAY")
    try:
        await host.write([[], [(9, 1)]])
    except AxiLiteError as error:
        assert str(error) == "p1: write of 0x9 answered resp 2", error
    else:
        raise AssertionError("a misaligned write was answered OKAY")
    assert await host.read([[], [4]]) == [[], [0x1234_5678]]     # nothing half written


@cocotb.test()
async def no_answer(dut):
    """A slave that never takes a request: the batch raises after the master's limit."""
    from sim.harness.axil import AxiLiteError
    host, ram = await _start(dut)
    ram.read_if.ar_channel.set_pause_generator(iter(lambda: True, None))
    try:
        await host.read([[0, 4], []])
    except AxiLiteError as error:
        assert str(error) == "p0: no handshake or answer for 200 cycles (1 taken, 0 of 2 accesses " \
            "answered)", error
    else:
        raise AssertionError("a read nobody answered returned")


@cocotb.test()
async def library_master_on_the_nodes_slave(dut):
    """cocotbext-axi's ``AxiLiteMaster`` on ``p1`` (the nodes' ``AXILiteToCSR``), every access
    of a round queued at once: each read returns the last word written there; a misaligned
    access is answered SLVERR and changes nothing."""
    from cocotb.clock import Clock
    from cocotb.triggers import ClockCycles
    from cocotbext.axi import AxiLiteBus, AxiLiteMaster
    cfg = tb_config()
    rng = random.Random(cfg["seed"])
    logging.getLogger(f"cocotb.{dut._name}.p1_").setLevel(logging.WARNING)  # (every access)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "p1_"), dut.clk, dut.rst)
    dut.rst.value = 1
    Clock(dut.clk, 1, unit="ns").start()
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    want = {}
    for _ in range(cfg["rounds"]):
        writes = [(4 * rng.randrange(REGS), rng.getrandbits(32))
                  for _ in range(rng.randrange(1, 8))]
        events = [master.init_write(addr, word.to_bytes(4, "little")) for addr, word in writes]
        reads = [4 * rng.randrange(REGS) for _ in range(rng.randrange(1, 8))]
        for event in events:
            await event.wait()
            assert event.data.resp == 0, event.data
        want.update(writes)
        events = [master.init_read(addr, 4) for addr in reads]
        for addr, event in zip(reads, events):
            await event.wait()
            assert event.data.resp == 0, event.data
            assert int.from_bytes(event.data.data, "little") == want.get(addr, 0), addr
    assert len(want) == REGS
    event = master.init_write(4 * 1 + 2, b"\xff\xff")
    await event.wait()
    assert int(event.data.resp) == 2, event.data
    got = await master.read(4, 4)
    assert int.from_bytes(got.data, "little") == want[4]


@cocotb.test()
async def only_the_test_modules_assertions_are_rewritten(dut):
    """The simulator's Python has pytest rewrite this module's assertions (their messages name
    the values) and no library's: rewriting numpy, Amaranth and the rest at every start cost a
    second or more of each run (``sim.harness.runner.run_cocotb``)."""
    import sys

    import amaranth
    import numpy
    from _pytest.assertion.rewrite import AssertionRewritingHook

    import sim.harness.axil
    assert isinstance(sys.modules[__name__].__loader__, AssertionRewritingHook), __loader__
    for module in (numpy, amaranth, sim.harness.axil):
        assert not isinstance(module.__loader__, AssertionRewritingHook), module.__name__


@pytest.mark.cocotb
def test_axil_batch_cocotb(sim, tmp_path, t3_options, request, monkeypatch):
    monkeypatch.delenv("COCOTB_REWRITE_ASSERTION_FILES", raising=False)     # the default
    run_cocotb(TwoSlaves(), "t3_axil_two", request.module, tmp_path, sim=sim,
               config={"seed": t3_options.seed, "rounds": 200 if t3_options.soak else 40},
               waves=t3_options.waves)
