"""The serial bridge's exported Verilog under cocotb (Verilator and Icarus): cocotbext-uart on
the line, cocotbext-axi's RAM with random pauses on every channel behind the bus, scored
against the golden model byte for byte (``sim/blocks/uart/cocotb_tests.py``).

- ``random_commands``: writes, reads (aligned or not, inside the bus's range or beyond it),
  bytes that are no command, and pauses short of the timeout;
- ``abandoned_commands``: a pause past the timeout inside a command abandons it, and the
  commands after it are answered as if it had never started.
"""

import random

import cocotb
import pytest

from hw.uart import UARTBridge
from hw.uart_model import Gap, encode_read, encode_write
from sim.blocks.uart.cocotb_tests import run_commands
from sim.harness.runner import run_cocotb, tb_config


@cocotb.test()
async def random_commands(dut):
    cfg = tb_config()
    rng = random.Random(cfg["seed"])
    items = []
    for _ in range(cfg["n"]):
        addr = rng.randrange(1 << (cfg["addr_bits"] + 1))
        r = rng.random()
        if r < 0.1:
            items.append(rng.choice([0x00, 0x41, 0xFF]))
        elif r < 0.55:
            items += list(encode_write(addr, rng.getrandbits(32)))
        else:
            items += list(encode_read(addr))
        if rng.random() < 0.1:
            items.append(Gap(rng.choice([0.5, 2, cfg["timeout"] - 3])))
    answers, model = await run_commands(dut, items, bus_stall=0.4, seed=cfg["seed"])
    # half the addresses lie beyond the bus (answered without it): about 45 % reach it
    assert len(model.transactions) > cfg["n"] // 4 and model.counters["bad_commands"] > 0


@cocotb.test()
async def abandoned_commands(dut):
    cfg = tb_config()
    items = list(encode_write(0x10, 0x1234_5678)[:5]) + [Gap(cfg["timeout"] + 2)] + \
        list(encode_write(0x14, 0xCAFE_F00D)) + list(encode_read(0x10)) + list(encode_read(0x14))
    answers, model = await run_commands(dut, items, bus_stall=0.2, seed=cfg["seed"] + 1)
    assert model.counters["timeouts"] == 1
    assert answers == bytes([0, 0, 0, 0, 0, 0]) + bytes([0]) + (0xCAFE_F00D).to_bytes(4, "little")


@pytest.mark.cocotb
def test_uart_bridge_cocotb(sim, tmp_path, t3_options, request):
    addr_bits, divisor, timeout = 10, 8, 12
    config = {"addr_bits": addr_bits, "divisor": divisor, "timeout": timeout,
              "n": 400 if t3_options.soak else 60, "seed": t3_options.seed}
    run_cocotb(UARTBridge(addr_bits, divisor, timeout=timeout), "t3_uart_bridge",
               request.module, tmp_path, config=config, sim=sim, waves=t3_options.waves)
