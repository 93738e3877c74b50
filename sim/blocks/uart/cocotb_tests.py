"""cocotb testbench of the serial bridge's exported Verilog (``tests/test_uart_cocotb.py``).

The host is cocotbext-uart's ``UartSource`` on ``rx`` and ``UartSink`` on ``tx``; the bus is
cocotbext-axi's ``AxiLiteRam`` behind ``bus``, with random pauses on all five channels (the
backpressure).  The scoreboard is :class:`hw.uart_model.BridgeModel` over a model of that RAM:
every answer byte, and the RAM's words at the end, must be the model's.
"""

import logging

from cocotb.triggers import ClockCycles, RisingEdge, Timer

from hw.uart import bridge_status_layout
from hw.uart_model import BridgeModel, Gap
from sim.harness.agents import random_pauses
from sim.harness.runner import tb_config


__all__ = ["RamSpace", "run_commands"]


class RamSpace:
    """``AxiLiteRam`` as the model sees it: words at aligned addresses (an address is aligned
    down), zero at first, every answer OKAY."""

    def __init__(self):
        self.words = {}

    def read(self, addr):
        return 0, self.words.get(addr & ~3, 0)

    def write(self, addr, data):
        self.words[addr & ~3] = data
        return 0


async def run_commands(dut, items, *, bus_stall, seed):
    """Play ``items`` (bytes and :class:`Gap`) on the line; returns ``(answers, ram)``."""
    from cocotb import start_soon
    from cocotb.clock import Clock
    from cocotbext.axi import AxiLiteBus, AxiLiteRam
    from cocotbext.uart import UartSink, UartSource

    cfg = tb_config()
    period_ns, divisor, addr_bits = 10, cfg["divisor"], cfg["addr_bits"]
    baud = 1e9 / (period_ns * divisor)
    start_soon(Clock(dut.clk, period_ns, unit="ns").start())
    dut.rx.value = 1
    dut.rst.value = 1
    ram = AxiLiteRam(AxiLiteBus.from_prefix(dut, "bus_"), dut.clk, dut.rst, size=1 << addr_bits)
    for k, channel in enumerate((ram.write_if.aw_channel, ram.write_if.w_channel,
                                 ram.write_if.b_channel, ram.read_if.ar_channel,
                                 ram.read_if.r_channel)):
        if bus_stall:
            channel.set_pause_generator(random_pauses(bus_stall, seed + k))
    source = UartSource(dut.rx, baud=baud, bits=8, stop_bits=1)
    sink = UartSink(dut.tx, baud=baud, bits=8, stop_bits=1)
    for agent in (ram.write_if, ram.read_if, source, sink):     # a line per byte otherwise
        agent.log.setLevel(logging.WARNING)
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 4)

    for item in items:
        if isinstance(item, Gap):
            await source.wait()
            await Timer(round(item.byte_times * 10 * divisor) * period_ns, unit="ns")
        else:
            await source.write(bytes([item]))
    await source.wait()

    space = RamSpace()
    model = BridgeModel(addr_bits, space.read, space.write, timeout=cfg["timeout"])
    expected = model.feed(items)
    answers = bytearray()
    for _ in range(len(expected) * 20 * divisor * 10 + 2000):     # answers trail the line
        await RisingEdge(dut.clk)
        answers += sink.read_nowait(sink.count())
        if len(answers) >= len(expected):
            break
    await ClockCycles(dut.clk, 40 * divisor)                      # nothing more comes
    answers += sink.read_nowait(sink.count())
    assert bytes(answers) == expected, (
        f"answers differ from the model's at byte "
        f"{next(k for k, (a, b) in enumerate(zip(answers + b'?', expected)) if a != b)}")
    for addr, word in space.words.items():
        assert int.from_bytes(ram.read(addr, 4), "little") == word, f"RAM word {addr:#x}"
    status = int(dut.status.value)
    for name, field in bridge_status_layout():
        value = (status >> field.offset) & ((1 << field.width) - 1)
        assert value == model.counters[name], f"status.{name} {value}, model {model.counters}"
    return bytes(answers), model
