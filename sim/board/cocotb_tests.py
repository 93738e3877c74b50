"""cocotb testbench of the board core's exported Verilog (``tests/test_board.py``): the host
program of :mod:`sim.board.host`, the one a PC runs, drives the core's serial pins through
cocotbext-uart's ``UartSource`` (on ``rx``) and ``UartSink`` (on ``tx``) and checks the run bit
for bit."""

import json
import logging
import time

import cocotb
from cocotb.triggers import ClockCycles

from sim.board.host import BoardError, board_host
from sim.harness.runner import tb_config


__all__ = ["CocotbLine", "run_board"]


#: the clock period of the simulation (the protocol counts cycles; any period would do)
PERIOD_NS = 10


class CocotbLine:
    """The serial line of :mod:`sim.board.host` on the simulated pins: bytes go out through
    ``source`` and come back through ``sink``; a ``recv`` that waits ``timeout_bytes`` byte
    times for a byte raises :class:`sim.board.host.BoardError`."""

    def __init__(self, source, sink, divisor, timeout_bytes=200):
        self.source, self.sink = source, sink
        self.timeout_ns = timeout_bytes * 10 * divisor * PERIOD_NS

    async def send(self, data):
        await self.source.write(data)

    async def recv(self, count):
        data = bytearray()
        while len(data) < count:
            if self.sink.empty():
                await self.sink.wait(self.timeout_ns, "ns")
                if self.sink.empty():
                    raise BoardError(f"the board answered {len(data)} of {count} bytes")
            data += self.sink.read_nowait(min(self.sink.count(), count - len(data)))
        return bytes(data)


@cocotb.test()
async def run_board(dut):
    """One configuration end to end through the serial pins; writes the results to
    ``cfg["out"]``.  Configuration: ``board`` (:class:`system.board.BoardParams`), ``spec``
    (:class:`sim.system.workload.GemmSpec` fields), ``config``, ``seed``, ``out``."""
    from cocotb.clock import Clock
    from cocotbext.uart import UartSink, UartSource
    from sim.system.workload import GemmSpec, Workload
    from system.board import BoardParams
    cfg = tb_config()
    bparams = BoardParams.from_dict(cfg["board"])
    baud = 1e9 / (PERIOD_NS * bparams.divisor)
    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
    dut.rx.value = 1
    dut.rst.value = 1
    source = UartSource(dut.rx, baud=baud, bits=8, stop_bits=1)
    sink = UartSink(dut.tx, baud=baud, bits=8, stop_bits=1)
    for agent in (source, sink):                    # a line per byte otherwise
        agent.log.setLevel(logging.WARNING)
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 4)
    wl = Workload(GemmSpec(**cfg["spec"]), bparams.gpus, bparams.params, seed=cfg["seed"])
    system = board_host(CocotbLine(source, sink, bparams.divisor), bparams, wl, cfg["config"],
                        progress=dut._log.info)
    start = time.perf_counter()
    result = {"verified": False}
    try:
        result["verified"] = await system.run()
        result.update(system.results())
    finally:
        result["wall_s"] = time.perf_counter() - start
        result["sim_cycles"] = int(cocotb.utils.get_sim_time("ns")) // PERIOD_NS
        result["leds"] = int(dut.leds.value)
        with open(cfg["out"], "w") as f:
            json.dump(result, f, indent=1, default=str)
