# amaranth: UnusedElaboratable=no
"""The board (``system/board.py``): its register block under Amaranth's simulator against its
golden model (``system/board_model.py``), the AXI4-Lite decoder, the parameters' refusals, and
the whole board core in Verilator driven through its serial pins by the host program a PC runs
(``sim/board/host.py``), checked bit for bit and cycle for cycle against the simulation ring."""

import random

import pytest

from amaranth.sim import Simulator

from hw.axil import OKAY, SLVERR, AXILiteDecoder, AXILiteToCSR
from hw.testing import axil_read, axil_write
from system.board import CTRL, STATUS, BoardParams, board_registers
from system.board_model import BoardHostModel
from sim.board.amaranth_sim import run_host


def random_ops(rng, bparams, n):
    """``n`` operations on the board block's registers: the load registers (GPU numbers
    beyond the ring among them), commands in every combination, status clears, and reads of
    every word (and of words beyond the map, up to the end of the register bus's space)."""
    regs = board_registers(bparams)
    words = regs.words
    space = 1 << regs.addr_bits
    gpu_top = 1 << regs["load_gpu"].width
    ops = []
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            ops.append(("w", regs.address("load_gpu"), rng.randrange(gpu_top)))
        elif r < 0.2:
            top = 1 << regs["load_addr"].width      # mostly a few beats: reads meet writes
            ops.append(("w", regs.address("load_addr"),
                        rng.choice([rng.randrange(8), top - 1 - rng.randrange(4),
                                    rng.randrange(top)])))
        elif r < 0.45:
            word = regs.address("load_data") + rng.randrange(regs["load_data"].words)
            ops.append(("w", word, rng.getrandbits(32)))
        elif r < 0.65:
            ops.append(("w", regs.address("ctrl"), CTRL.encode(
                start=rng.random() < 0.2, write=rng.random() < 0.6, read=rng.random() < 0.5)))
        elif r < 0.7:
            ops.append(("w", regs.address("status"), rng.getrandbits(3)))
        elif r < 0.75:
            ops.append(("w", rng.randrange(min(words + 4, space)), rng.getrandbits(32)))
        else:
            ops.append(("r", rng.randrange(min(words + 2, space))))
    return ops


@pytest.mark.parametrize("gpus", [2, 3])
def test_board_host_matches_its_model(gpus, t3_options):
    # three GPUs: load_gpu can name a fourth, which must do nothing and latch bad_gpu
    bparams = BoardParams(gpus=gpus)
    rng = random.Random(t3_options.seed + gpus)
    ops = random_ops(rng, bparams, 3000 if t3_options.soak else 1000)
    reads, starts, memories = run_host(bparams, ops, done=1, uart=0x0403_0201)
    model = BoardHostModel(bparams)
    model.done, model.uart = 1, 0x0403_0201
    expected, beats_read = [], 0
    rdata = board_registers(bparams).address("load_rdata")
    for op in ops:
        if op[0] == "w":
            model.write(op[1], op[2])
        else:
            expected.append(model.read(op[1]))
            beats_read += rdata <= op[1] and expected[-1] != 0
    assert reads == expected, next(f"read {k} ({ops[[o[0] for o in ops].index('r')]}...): "
                                   f"{a:#x}, model {b:#x}" for k, (a, b) in
                                   enumerate(zip(reads, expected)) if a != b)
    assert starts == model.starts
    for g in range(gpus):
        assert memories[g] == {a: b for a, b in model.memories[g].items() if b}, f"GPU {g}"
    # the test can fail: it wrote, read, and for three GPUs refused
    assert any(model.memories) and beats_read and model.starts
    assert model.bad_gpu or gpus == 2 or any(
        op[0] == "w" and op[1] == board_registers(bparams).address("status") for op in ops)


def test_a_bad_gpu_writes_nothing_and_latches_status():
    bparams = BoardParams(gpus=3)
    regs = board_registers(bparams)
    ops = [("w", regs.address("load_gpu"), 3), ("w", regs.address("load_data"), 0xAB),
           ("w", regs.address("ctrl"), CTRL.encode(write=1)),
           ("r", regs.address("status")), ("r", regs.address("load_addr")),
           ("w", regs.address("status"), STATUS.mask("bad_gpu")), ("r", regs.address("status"))]
    reads, _, memories = run_host(bparams, ops)
    assert STATUS.decode(reads[0]) == {"done": 0, "reading": 0, "bad_gpu": 1}
    assert reads[1] == 0                                # load_addr did not move
    assert STATUS.decode(reads[2])["bad_gpu"] == 0      # cleared by writing 1
    assert memories == [{}, {}, {}]


def test_a_read_takes_read_latency_cycles():
    # status.reading is high right after the command and load_rdata holds the beat after it
    from system.board import READ_LATENCY
    bparams = BoardParams()
    regs = board_registers(bparams)
    addr, data, ctrl = (regs.address(n) for n in ("load_addr", "load_data", "ctrl"))
    ops = [("w", data, 0x1234), ("w", ctrl, CTRL.encode(write=1)), ("w", addr, 0),
           ("w", ctrl, CTRL.encode(read=1)), ("r", regs.address("status")),
           ("r", regs.address("load_rdata")), ("r", regs.address("load_rdata"))]
    gaps = [4, 4, 4, 0, 0, READ_LATENCY - 3, 0]
    reads, _, _ = run_host(bparams, ops, gaps=gaps)
    assert STATUS.decode(reads[0])["reading"] == 1
    # the read of status took a cycle, the gap READ_LATENCY - 2 more: the capture is at cycle
    # READ_LATENCY after the command, one before the second read of load_rdata returns it
    assert reads[1:] == [0, 0x1234]


@pytest.mark.parametrize("kwargs,message", [
    (dict(gpus=1), r"^gpus must be an integer from 2 to 16, not 1$"),
    (dict(tracker_ways=0), r"^tracker_ways must be an integer from 1 to 8, not 0$"),
    # 50 MHz / 4 Mbaud is 12.5 cycles a bit: 12 makes 4.17 Mbaud
    (dict(baud=4_000_000), r"^baud 4000000 is 4\.2% off at clock_hz 50000000 \(divisor 12\); "
                           r"a serial line needs it within 2 %$"),
    (dict(baud=100), r"^baud must be an integer from 1200 to 12500000, not 100$"),
    (dict(clock_hz=52_000_000), r"^clock_hz 52000000 cannot be made exactly from 25000000 Hz "
                                r"by the ECP5 PLL"),
    (dict(link_latency=1), r"^link latency must be an integer >= 2, not 1$"),
    (dict(engine_formats=("fp32",)),
     r"^engine_formats \('fp32',\) must be among formats \('fp16',\)$"),
    (dict(beat_bits=100), r"^beat_bits must be a power of two from 32 to 1024, not 100$"),
    # 122 bits: the header's other fields (108 with 1-bit GPU numbers, the check among them)
    # and two 7-bit beat counts, the narrowest the DMA takes
    (dict(beat_bits=64), r"^beat_bits 64 cannot hold the DMA's link header \(122 bits with "
                         r"7-bit beat counts\)$"),
])
def test_impossible_boards_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BoardParams(**kwargs)


@pytest.mark.parametrize("beat_bits, len_bits", [(128, 10), (256, 16)])
def test_the_boards_link_header_fills_one_beat_at_most(beat_bits, len_bits):
    # the widest beat counts whose header (and check) still fits one beat, at most 16 bits
    from dma.config import HEADER_CHECK_BITS, header_layout
    b = BoardParams(beat_bits=beat_bits)
    dma = b.dma_params
    assert (dma.gpu_bits, dma.len_bits) == (1, len_bits)
    size = header_layout(b.params, dma).size + HEADER_CHECK_BITS
    assert size <= beat_bits
    assert len_bits == 16 or size + 2 > beat_bits      # one more bit per count would not fit


def test_sequential_needs_the_engines_adders():
    # the board's engines have no step adders: the sequential reduce-scatter (which adds on
    # them) is refused before any build, and allowed on a board that builds them
    from sim.board.run import BOARD_SPEC, check_board_config
    with pytest.raises(ValueError, match=r"^config 'sequential' adds on the engines, and the "
                       r"board's engine_formats \(\) has no fp16 adders \(its reduce-scatter "
                       r"runs on the near-bank ALUs: use t3 or t3-mca\)$"):
        check_board_config(BOARD_SPEC, "sequential", BoardParams())
    check_board_config(BOARD_SPEC, "t3", BoardParams())
    check_board_config(BOARD_SPEC, "sequential", BoardParams(engine_formats=("fp16",)))


# --- the AXI4-Lite decoder ------------------------------------------------------------------------

def test_the_decoder_routes_by_window_and_refuses_holes():
    # two slaves of 4 and 6 address bits in windows of 6 bits: a write reaches only its
    # slave, at the address within the window; an address past a slave's bits, or past the
    # last window, answers SLVERR (and zero for a read) and reaches no slave
    dec = AXILiteDecoder(6, [("a", 4), ("b", 6)])
    assert dec.addr_bits == 7
    slaves = {"a": AXILiteToCSR(4), "b": AXILiteToCSR(6)}
    words = {"a": {}, "b": {}}
    from amaranth import Module
    from amaranth.lib.wiring import connect
    m = Module()
    m.submodules.dec = dec
    for name, slave in slaves.items():
        m.submodules[name] = slave
        connect(m, getattr(dec, name), slave.axil)
    bus = dec.bus
    results = []

    async def memories(ctx):
        # each slave's register bus: one cycle of read latency, as hw.csr's register files
        async for _, _, *values in ctx.tick().sample(*(v for s in slaves.values() for v in
                                                       (s.csr.addr, s.csr.w_stb,
                                                        s.csr.w_data))):
            for k, name in enumerate(slaves):
                addr, stb, data = values[3 * k:3 * k + 3]
                if stb:
                    words[name][addr] = data
                ctx.set(slaves[name].csr.r_data, words[name].get(addr, 0))

    async def host(ctx):
        async def write(addr, data):
            return await axil_write(ctx, bus, addr, data)

        async def read(addr):
            data, resp = await axil_read(ctx, bus, addr)
            return resp, data
        results.append(await write(0x04, 0x11))          # a, word 1
        results.append(await write(0x40 + 0x08, 0x22))   # b, word 2
        results.append(await write(0x14, 0x33))          # a's window past its 4 bits
        results.append(await read(0x04))
        results.append(await read(0x48))
        results.append(await read(0x14))
        results.append(await write(0x40 + 0x3C, 0x44))   # b's last word
        results.append(await read(0x40 + 0x3C))

    sim = Simulator(m)
    sim.add_clock(1e-9)
    sim.add_process(memories)
    sim.add_testbench(host)
    sim.run()
    assert results == [OKAY, OKAY, SLVERR, (OKAY, 0x11), (OKAY, 0x22), (SLVERR, 0), OKAY,
                       (OKAY, 0x44)]
    assert words == {"a": {1: 0x11}, "b": {2: 0x22, 15: 0x44}}


# --- the whole board through its serial pins ------------------------------------------------------

@pytest.mark.cocotb
def test_the_host_program_runs_a_gemm_rs_on_the_board_core():
    # The program a PC runs, through the serial pins of the exported board core (Verilator):
    # configuration, loads, starts and read-back all over the bridge.  The result is checked
    # bit for bit by the program itself (the ring-ordered numpy reference).
    from sim.board.run import BOARD_SPEC, simulate_board
    result = simulate_board(BOARD_SPEC, "t3")
    assert result["verified"] is True
    assert result["leds"] & 0b1110 == 0b0010            # done; no line error, no bad GPU
    assert not any(v for st in result["status"].values() for v in st.values())


@pytest.mark.cocotb
@pytest.mark.soak       # a ring of the board's geometry, built for this comparison alone
def test_the_board_core_runs_the_simulation_rings_cycles():
    # The engines' cycle counts on the board core are those of the simulation ring built
    # from the same parameters (the same RTL, started in one cycle; only the way the host
    # reaches it differs).  The board's links are wires: a packet's header takes a beat of
    # their bandwidth like its payload, so the ring is built with charged headers, not the
    # paper rings' free ones.
    from sim.board.run import BOARD_SPEC, sim_board, simulate_board
    from sim.system.run import run_config
    result = simulate_board(BOARD_SPEC, "t3")
    b = sim_board()
    ring = run_config(BOARD_SPEC, b.gpus, "t3", geometry=(b.params, b.nparams), engines=b.engine,
                      latency=b.link_latency, bandwidth=(b.link_num, b.link_den),
                      charge_headers=True)
    assert result["verified"] is True and ring["verified"] is True
    assert result["phase_cycles"] == ring["phase_cycles"]
    assert result["dram"] == ring["dram"]


def test_the_board_links_are_the_simulation_systems():
    # the board runs what `t3 run` simulates: the same scaled links, in bytes per cycle
    # (the board's beats are narrower than the system's)
    from fractions import Fraction
    from hw.params import T3Params
    from system.spec import LINK_BANDWIDTH, LINK_LATENCY
    b = BoardParams()
    assert b.link_latency == LINK_LATENCY
    assert Fraction(b.link_num, b.link_den) * b.params.beat_bytes == \
        Fraction(*LINK_BANDWIDTH) * T3Params().beat_bytes


# --- the host program's refusals ------------------------------------------------------------------

class _AnsweringLine:
    """A serial line whose far end answers every command with ``resp`` (and ``data`` for a
    read)."""

    def __init__(self, resp, data=0):
        self.resp, self.data, self.pending = resp, data, b""

    async def send(self, data):
        from hw.uart_model import READ
        out, k = b"", 0
        while k < len(data):
            if data[k] == READ:
                out += bytes([self.resp]) + self.data.to_bytes(4, "little")
                k += 5
            else:
                out += bytes([self.resp])
                k += 9
        self.pending += out

    async def recv(self, count):
        data, self.pending = self.pending[:count], self.pending[count:]
        return data


@pytest.mark.parametrize("resp, data, message", [
    (0, 0xDEADBEEF, r"^the board's id reads 0xdeadbeef, not 0x54330001: not a T3 board"),
    (0x15, 0, r"^read of byte address 0x4000: NAK$"),
    (2, 0, r"^read of byte address 0x4000: resp 2$"),
])
def test_the_host_program_refuses_a_board_that_is_not_one(resp, data, message):
    import asyncio
    from sim.board.host import BoardError, board_host
    from sim.board.run import BOARD_SPEC
    from sim.system.workload import Workload
    b = BoardParams()
    assert 2 << b.window_bits == 0x4000         # the board block's id, the first thing read
    system = board_host(_AnsweringLine(resp, data), b, Workload(BOARD_SPEC, 2, b.params),
                        "t3")
    with pytest.raises(BoardError, match=message):
        asyncio.run(system.run())
