# amaranth: UnusedElaboratable=no
"""The serial bridge (``hw/uart.py``) under Amaranth's simulator, byte for byte against its
golden model (``hw/uart_model.py``): the line driven bit by bit, the answers decoded from the
``tx`` line's bits, the bus answering with random delays."""

import random

import pytest

from hw.uart import NAK, READ, WRITE, UARTBridge
from hw.uart_model import (FRAMING, OKAY, SLVERR, BridgeModel, Gap, decode_answers,
                           encode_read, encode_write)
from sim.blocks.uart.amaranth_sim import RegisterSpace, line_bits, run_bridge


ADDR_BITS, TIMEOUT = 12, 16


def random_commands(rng, n, bad=0.1):
    """``n`` commands: writes and reads over the bus's range (some misaligned, some beyond
    ``ADDR_BITS``), and with probability ``bad`` a byte that is no command; as one list of
    line items, with short pauses."""
    items, commands = [], []
    for _ in range(n):
        r = rng.random()
        addr = rng.randrange(1 << (ADDR_BITS + 1))          # a half beyond the bus
        addr &= ~3 if rng.random() < 0.9 else ~0
        if r < bad:
            command = bytes([rng.choice([b for b in range(256) if b not in (WRITE, READ)])])
        elif r < 0.55:
            command = encode_write(addr, rng.getrandbits(32))
        else:
            command = encode_read(addr)
        commands.append(command)
        items += list(command)
        if rng.random() < 0.2:
            items.append(Gap(rng.choice([0.2, 1, 3, TIMEOUT - 3])))
    return items, commands


def check_against_model(items, **kwargs):
    answers, transactions, status = run_bridge(items, addr_bits=ADDR_BITS, timeout=TIMEOUT,
                                               **kwargs)
    space = RegisterSpace()
    model = BridgeModel(ADDR_BITS, space.read, space.write, timeout=TIMEOUT)
    expected = model.feed(items)
    assert transactions == model.transactions
    assert answers == expected
    assert status == model.counters
    return answers, transactions, status


@pytest.mark.parametrize("bus_stall", [0.0, 0.6])
def test_commands_against_the_model(bus_stall, t3_options):
    rng = random.Random(t3_options.seed + int(bus_stall * 10))
    items, commands = random_commands(rng, 400 if t3_options.soak else 60)
    answers, transactions, status = check_against_model(items, bus_stall=bus_stall,
                                                        seed=t3_options.seed)
    # what a host reads back: one answer per command, a read returning the last write
    decoded = decode_answers(commands, answers)
    assert len(decoded) == len(commands)
    assert status["bad_commands"] == sum(resp == NAK and c[0] not in (WRITE, READ)
                                         for c, (resp, _) in zip(commands, decoded)) > 0
    assert any(t[0] == "W" for t in transactions) and any(t[0] == "R" for t in transactions)


def test_a_read_returns_the_word_written_and_errors_are_answered():
    commands = [encode_write(0x40, 0xDEADBEEF), encode_read(0x40), encode_read(0x42),
                encode_write(1 << ADDR_BITS, 1), encode_read(1 << 31), bytes([0x00])]
    items = [b for c in commands for b in c]
    answers, transactions, _ = check_against_model(items, bus_stall=0.3)
    assert decode_answers(commands, answers) == [
        (OKAY, None), (OKAY, 0xDEADBEEF), (SLVERR, 0),       # misaligned: the bus's SLVERR
        (SLVERR, None), (SLVERR, 0),                        # beyond the bus: never on it
        (NAK, None)]
    assert transactions == [("W", 0x40, 0xDEADBEEF), ("R", 0x40), ("R", 0x42)]


def test_a_framing_error_or_a_pause_abandons_the_command_and_the_host_resyncs():
    good = encode_read(0x80)
    cut_by_framing = list(encode_write(0x84, 7)[:4]) + [FRAMING]
    cut_by_pause = list(encode_write(0x88, 9)[:6]) + [Gap(TIMEOUT + 1)]
    slow_but_whole = list(encode_write(0x8C, 5)[:3]) + [Gap(TIMEOUT - 3)] + \
        list(encode_write(0x8C, 5)[3:])
    items = cut_by_framing + list(good) + cut_by_pause + list(good) + slow_but_whole + \
        [FRAMING] + list(encode_read(0x8C))
    answers, transactions, status = check_against_model(items, bus_stall=0.2)
    assert transactions == [("R", 0x80), ("R", 0x80), ("W", 0x8C, 5), ("R", 0x8C)]
    assert status == {"overruns": 0, "framing": 2, "bad_commands": 0, "timeouts": 1}
    assert answers[-4:] == (5).to_bytes(4, "little")


def test_bytes_beyond_a_full_fifo_are_dropped_and_counted():
    # the bus takes nothing for a while: a read waits on it, and the bytes behind it fill the
    # receive FIFO; the three beyond its depth are dropped, never parsed
    depth = 8
    writes = encode_write(0x20, 1) + encode_write(0x24, 2)
    items = list(encode_read(0x10)) + list(writes[:depth + 3])
    answers, transactions, status = run_bridge(
        items, addr_bits=ADDR_BITS, fifo_depth=depth, timeout=TIMEOUT, bus_stall=0.0,
        hold_bus=(5, 5 + len(items) + 4))
    # kept: the first write's opcode, address and three of its data bytes; dropped: its last
    # data byte and the next write's first two bytes.  The kept write is incomplete, so the
    # quiet line after it abandons it: nothing dropped was ever parsed into a command.
    assert status == {"overruns": 3, "framing": 0, "bad_commands": 0, "timeouts": 1}
    assert transactions == [("R", 0x10)]
    assert decode_answers([encode_read(0x10)], answers) == [RegisterSpace().read(0x10)]


def test_a_glitch_on_the_line_is_not_a_byte():
    # a low pulse shorter than half a bit is ignored; then a command is taken as usual
    levels = [1] * 20 + [0] + [1] * 40 + line_bits(list(encode_read(0x4)), 4)
    answers, transactions, status = run_bridge([], addr_bits=ADDR_BITS, divisor=4,
                                               levels=levels)
    assert transactions == [("R", 0x4)] and len(answers) == 5
    assert status == {"overruns": 0, "framing": 0, "bad_commands": 0, "timeouts": 0}


@pytest.mark.parametrize("kwargs, message", [
    (dict(addr_bits=12, divisor=3), "divisor must be an integer from 4 to 1048576, not 3"),
    (dict(addr_bits=40, divisor=4), "addr_bits must be an integer from 3 to 32, not 40"),
    (dict(addr_bits=12, divisor=4, fifo_depth=1),
     "fifo_depth must be an integer from 2 to 4096, not 1"),
])
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        UARTBridge(**kwargs)


def test_the_model_refuses_what_is_not_a_line_item():
    model = BridgeModel(ADDR_BITS, RegisterSpace().read, RegisterSpace().write)
    with pytest.raises(ValueError, match="a line item must be a byte, FRAMING or a Gap, not 300"):
        model.feed([300])
    with pytest.raises(ValueError, match="answers: 1 bytes, fewer than the commands' 5"):
        decode_answers([encode_read(0)], b"\x00")
