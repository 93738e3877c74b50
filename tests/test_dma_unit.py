# amaranth: UnusedElaboratable=no
"""The DMA engine under Amaranth's simulator: driver-side checks, random command tables and
trigger orders through the link loopback under backpressure on every port (scoreboard: link
packets against the golden model, the memory image against numpy, counters and status), error
paths, block granularity, trigger backpressure, link utilisation and first-beat latency."""

import dataclasses
import random

import pytest

from dma.config import (CMD, Command, DMAParams, RemoteWindow, Status, check_commands,
                        check_remote, check_remotes)
from dma.model import check_dma_run
from dma.rtl import FIRST_BEAT_LATENCY
from hw.interfaces import ElemType, Op
from hw.params import T3Params
from sim.blocks.dma.amaranth_sim import simulate_dma
from sim.blocks.dma.env import run_model
from sim.blocks.dma.traffic import long_transfer_scenario, random_scenario


P, DP = T3Params(), DMAParams()
STALLS = dict(trig_pause=0.3, remote_pause=0.3, resp_pause=0.25, rx_pause=0.25,
              mem_stall=0.3, tx_stall=0.3, mem_latency=10)


def run_and_check(params, dparams, scenario, *, extra_status=0, extra_errors=0, **env):
    run = simulate_dma(params, dparams, scenario, **env)
    model, expected = run_model(params, dparams, scenario, run.env)
    model.status |= extra_status
    model.counters["errors"] += extra_errors
    check_dma_run(model, run.env.packets(), run.env.memory, expected, run.regs)
    return run, model


# --- driver-side checks ------------------------------------------------------------------------

GOOD = Command(src_base=0x1000, rows=32, cols=8, ld=48, tile_rows=16, tile_cols=4, dst_gpu=1,
               dst_base=0x8000, op=Op.UPDATE, etype=ElemType.FP16, granularity=2)


@pytest.mark.parametrize("change, message", [
    ({"src_base": 0x1010}, "command 0: src_base 0x1010 is not aligned"),
    ({"dst_base": 0x8004}, "command 0: dst_base 0x8004 is not aligned"),
    ({"tile_rows": 8, "rows": 32}, "tile_rows 8 x 2 bytes = 16 is not a whole number"),
    ({"ld": 40}, "ld 40 x 2 bytes = 80 is not a whole number"),
    ({"ld": 16}, "ld 16 is smaller than rows 32"),
    ({"rows": 40, "ld": 48}, "rows 40 is not a multiple of tile_rows 16"),
    ({"cols": 6}, "cols 6 is not a multiple of tile_cols 4"),
    ({"granularity": 3}, "granularity 3 does not divide the region's 4 tiles"),
    ({"granularity": 9}, "granularity must be from 1 to 8, not 9"),
    ({"granularity": 0}, "granularity must be from 1 to 8, not 0"),
    ({"op": Op.READ}, "op must be Op.STORE or Op.UPDATE, not READ"),
    ({"dst_gpu": 4}, "dst_gpu must be below 4, not 4"),
    ({"dst_base": 0xFE00}, "is outside GPU 1's 0x10000 bytes of memory"),
    ({"rows": 0}, "rows must be from 1 to 65535"),
    ({"tile_cols": -1}, "tile_cols must be a non-negative integer, not -1"),
])
def test_command_refused(change, message):
    bad = dataclasses.replace(GOOD, **change)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_commands(P, DP, [bad], dst_capacity={1: 0x10000}, gpus=4)


def test_command_table_refused():
    check_commands(P, DP, [GOOD], dst_capacity=0x10000, gpus=4)
    other = dataclasses.replace(GOOD, src_base=0x1000 + GOOD.size - 32, dst_base=0x4000)
    with pytest.raises(ValueError, match="command 0 source .* overlaps command 1 source"):
        check_commands(P, DP, [GOOD, other])
    other = dataclasses.replace(GOOD, src_base=0x4000, dst_base=0x8000 + 64)
    with pytest.raises(ValueError, match="command 0 destination .* overlaps command 1 "
                                         "destination on GPU 1"):
        check_commands(P, DP, [GOOD, other])
    # the same destination range on different GPUs is fine
    check_commands(P, DP, [GOOD, dataclasses.replace(other, dst_gpu=2)])
    with pytest.raises(ValueError, match="5 commands given but the DMA engine has 4"):
        check_commands(P, DP, [GOOD] * 5)


@pytest.mark.parametrize("window, message", [
    (RemoteWindow(0x100, 0, 1, 0), "size must be positive"),
    (RemoteWindow(0x104, 64, 1, 0), "src_base 0x104 is not aligned"),
    (RemoteWindow(0x100, 64, 16, 0), "dst_gpu must be below 16, not 16"),
    (RemoteWindow(0x100, 64, 1, 0xFFE0), "outside GPU 1's memory"),
])
def test_remote_window_refused(window, message):
    with pytest.raises(ValueError, match=message):
        check_remote(P, DP, window, dst_capacity=0x10000)


@pytest.mark.parametrize("field, value", [
    ("commands", 0), ("commands", 17), ("trigger_depth", 1), ("buffer_beats", 2),
    ("max_granularity", 0), ("gpu_bits", 9), ("dim_bits", True)])
def test_params_refused(field, value):
    with pytest.raises(ValueError, match=f"{field} must be an integer"):
        DMAParams(**{field: value})


# --- random runs -------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_random_loopback(seed, t3_options):
    seed += 100 * t3_options.seed
    scenario = random_scenario(P, DP, seed, remote_stores=30)
    run, model = run_and_check(P, DP, scenario, seed=seed, **STALLS)
    assert run.regs["tiles_sent"] == sum(c.tiles for c in scenario.commands)
    assert run.regs["remote_sent"] == 30


@pytest.mark.parametrize("params, dparams", [
    (T3Params(tag_bits=2), DMAParams(commands=1, max_granularity=1, buffer_beats=4,
                                     trigger_depth=2)),
    (T3Params(tag_bits=2, addr_bits=24), DMAParams(commands=3, max_granularity=5,
                                                   buffer_beats=6, trigger_depth=3)),
    (T3Params(beat_bits=512), DMAParams(commands=2, buffer_beats=64)),
])
def test_geometries(params, dparams):
    for seed in range(2):
        scenario = random_scenario(params, dparams, seed, remote_stores=10)
        run_and_check(params, dparams, scenario, seed=seed, **STALLS)


def test_header_must_fit_a_beat():
    from dma.rtl import DMAEngine
    with pytest.raises(ValueError, match="the link header needs 146 bits, more than one beat "
                                         "of beat_bits 128"):
        DMAEngine(T3Params(beat_bits=128), DP)


def test_a_narrow_header_carries_a_128_bit_link():
    # the board's geometry: one-bit GPU numbers and 10-bit beat counts make the header and its
    # check exactly one 128-bit beat; random tables and stores through the loopback, against
    # the model, with every port stalling
    from dma.config import HEADER_CHECK_BITS, header_layout
    params, dparams = T3Params(beat_bits=128), DMAParams(gpu_bits=1, len_bits=10)
    assert header_layout(params, dparams).size + HEADER_CHECK_BITS == 128
    for seed in (1, 2):
        scenario = random_scenario(params, dparams, seed, remote_stores=12)
        run, _ = run_and_check(params, dparams, scenario, seed=seed, **STALLS)
        assert run.regs["status"] == 0
        assert run.regs["tiles_sent"] > 0 and run.regs["remote_packets"] > 0


def test_a_tile_longer_than_the_header_can_count_is_refused():
    # check_commands refuses it; a host that writes the registers anyway gets `no_command`
    # for each trigger and nothing on the link (a 7-bit count would carry 128 beats as 0)
    narrow = DMAParams(len_bits=7)
    scenario = long_transfer_scenario(P, DP, tile_beats=128, tiles=3)
    with pytest.raises(ValueError, match="a tile of 128 beats does not fit the header's 7-bit "
                                         r"beat count \(len_bits\)"):
        check_commands(P, narrow, scenario.commands, dst_capacity=len(scenario.memory))
    run, model = run_and_check(P, narrow, scenario, seed=5, **STALLS)
    assert run.regs["status"] == Status.NO_COMMAND
    assert run.regs["errors"] == 3 and run.regs["beats_sent"] == 0 and not model.sent


# --- error paths -------------------------------------------------------------------------------

def test_bad_triggers_are_dropped_and_counted():
    """Triggers of an unprogrammed command, and tiles that start below, past or inside
    their region: status bits, counts, nothing sent; the good ones still arrive."""
    dparams = DMAParams(commands=3)
    scenario = random_scenario(P, dparams, 7, commands=2)
    c0 = scenario.commands[0]
    bad = [
        {"wg_id": 1, "wf_id": 0, "addr": c0.src_base, "region": 2},       # no command 2
        {"wg_id": 2, "wf_id": 0, "addr": c0.src_base, "region": 3},       # no register 3
        {"wg_id": 3, "wf_id": 0, "addr": c0.src_base - 32, "region": 0},  # below
        {"wg_id": 4, "wf_id": 0, "addr": c0.src_base + c0.size, "region": 0},    # past
        {"wg_id": 5, "wf_id": 0, "addr": c0.src_base + c0.size - c0.seg_bytes, "region": 0},
        {"wg_id": 6, "wf_id": 0, "addr": c0.src_base + 2, "region": 0},   # unaligned
    ]
    triggers = scenario.triggers + bad
    random.Random(1).shuffle(triggers)
    scenario = dataclasses.replace(scenario, triggers=triggers)
    run, model = run_and_check(P, dparams, scenario, seed=3, **STALLS)
    assert run.regs["status"] == Status.NO_COMMAND | Status.OUT_OF_REGION
    assert run.regs["errors"] == 6


def test_the_last_tile_that_fits_goes_and_one_beat_further_is_refused():
    """The range check's edge: the highest beat-aligned start whose tile ends inside its
    command's buffer (``src_base + ld * cols`` elements) goes, like the model's; a start one
    beat further overruns the end by at most a beat and is refused (``out_of_region``)."""
    for seed in (7, 8, 9):
        scenario = random_scenario(P, DP, seed, commands=2)
        edge = []
        for region, c in enumerate(scenario.commands):
            span = (c.tile_cols - 1) * c.stride + c.seg_bytes
            last = (c.src_base + c.size - span) // P.beat_bytes * P.beat_bytes
            assert last >= c.src_base
            edge += [{"wg_id": 1, "wf_id": 0, "addr": last, "region": region},
                     {"wg_id": 2, "wf_id": 0, "addr": last + P.beat_bytes, "region": region}]
        triggers = scenario.triggers + edge
        random.Random(seed).shuffle(triggers)
        scenario = dataclasses.replace(scenario, triggers=triggers)
        run, model = run_and_check(P, DP, scenario, seed=seed, **STALLS)
        # two refused, one per command: the starts a beat further (the model, which refuses
        # exactly those, sent every other tile the engine did)
        assert run.regs["status"] == Status.OUT_OF_REGION
        assert run.regs["errors"] == 2 and run.regs["triggers"] == len(triggers)


def test_remote_outside_window_is_dropped():
    scenario = random_scenario(P, DP, 11, commands=1, remote_stores=10)
    w = scenario.remote
    stray = dict(scenario.remote_stores[0], addr=w.src_base + w.size)
    read = dict(scenario.remote_stores[1], op=Op.READ.value)
    below = dict(scenario.remote_stores[2], addr=w.src_base - 32)
    stores = scenario.remote_stores[:5] + [stray, read, below] + scenario.remote_stores[5:]
    run, _ = run_and_check(P, DP, dataclasses.replace(scenario, remote_stores=stores), seed=2,
                           **STALLS)
    assert run.regs["status"] == Status.REMOTE_RANGE and run.regs["errors"] == 3
    assert run.regs["remote_sent"] == 10


def test_remote_stores_are_combined():
    """Runs of stores to consecutive addresses with equal attributes share a packet of at most
    ``remote_burst`` beats; a change of attributes, a gap in the addresses or a pause of
    ``remote_flush`` cycles closes it.  The stores arrive in order, unchanged."""
    scenario = random_scenario(P, DP, 13, commands=1, remote_stores=1)
    w = scenario.remote
    base = dict(scenario.remote_stores[0], op=Op.UPDATE.value, tracked=1, wg_id=5, wf_id=2)
    stores = [dict(base, addr=w.src_base + 32 * k, data=k) for k in range(11)]     # 8 + 3
    stores += [dict(base, addr=w.src_base + 32 * 11, data=11, wf_id=3)]            # new attrs
    stores += [dict(base, addr=w.src_base + 32 * 13, data=13, wf_id=3)]            # a gap
    run, _ = run_and_check(P, DP, dataclasses.replace(scenario, remote_stores=stores,
                                                      triggers=[]), seed=1)
    sizes = [pk.header["beats"] for pk in run.env.packets() if pk.header["source"] == 1]
    assert sizes == [8, 3, 1, 1], sizes
    # with random pauses between the stores, a run goes on while the next store comes within
    # remote_flush cycles of the last, and closes otherwise: the packet sizes follow exactly
    # from the cycles the stores were taken
    run, _ = run_and_check(P, DP, dataclasses.replace(scenario, remote_stores=stores[:11],
                                                      triggers=[]), remote_pause=0.8, seed=2)
    sizes = [pk.header["beats"] for pk in run.env.packets() if pk.header["source"] == 1]
    want = [1]
    for gap in (b - a for a, b in zip(run.env.remote_taken, run.env.remote_taken[1:])):
        if gap <= DP.remote_flush and want[-1] < DP.remote_burst:
            want[-1] += 1
        else:
            want.append(1)
    assert sizes == want, (sizes, run.env.remote_taken)
    assert 1 < len(want) < 11, "the pauses should split some runs and not others"


@pytest.mark.parametrize("seed", range(3))
def test_several_remote_windows_each_send_to_their_own_place(seed, t3_options):
    """Three adjacent remote windows (``remote_windows``), each to a place of its own: every
    store leaves by its window's mapping, and a run of consecutive stores that crosses from
    one window into the next leaves as two packets (the model's beats, the memory image)."""
    seed += 100 * t3_options.seed
    dp = dataclasses.replace(DP, remote_windows=3)
    scenario = random_scenario(P, dp, seed, commands=2, remote_stores=60)
    assert len(scenario.remote) == 3
    run, model = run_and_check(P, dp, scenario, seed=seed, **STALLS)
    assert run.regs["remote_sent"] == 60
    ends = {w.src_base + w.size for w in scenario.remote[:-1]}
    crossed = sum(1 for a, b in zip(scenario.remote_stores, scenario.remote_stores[1:])
                  if b["addr"] == a["addr"] + P.beat_bytes and b["addr"] in ends)
    assert crossed > 0, "the stores must cross a window boundary"


def test_overlapping_or_too_many_remote_windows_are_refused():
    dp = dataclasses.replace(DP, remote_windows=2)
    w = RemoteWindow(src_base=0x1000, size=0x100, dst_gpu=1, dst_base=0x100)
    with pytest.raises(ValueError, match=r"^remote windows \[0x1000, 0x1100\) and \[0x10e0, "
                                         r"0x11e0\) overlap$"):
        check_remotes(P, dp, [w, dataclasses.replace(w, src_base=0x10E0)], 0x10000)
    with pytest.raises(ValueError, match=r"^3 remote windows, more than the DMA engine's "
                                         r"remote_windows 2$"):
        check_remotes(P, dp, [w] * 3, 0x10000)
    with pytest.raises(ValueError, match=r"^remote_windows must be an integer from 1 to 16"):
        DMAParams(remote_windows=17)


def test_memory_errors_latch_and_data_goes_out():
    """A read answered with the error flag latches ``mem_error`` and counts; the data still
    goes out as read (nothing is dropped)."""
    scenario = random_scenario(P, DP, 5)
    run, _ = run_and_check(P, DP, scenario, error_reads={3}, extra_status=Status.MEM_ERROR,
                           extra_errors=1)
    assert run.regs["status"] == Status.MEM_ERROR


def test_an_extra_response_is_dropped():
    """A read answered twice: the duplicate is dropped (``resp_order``, one error) and every
    tile still arrives intact, the later ones included (it used to shift them all a beat)."""
    scenario = random_scenario(P, DP, 5)
    run, _ = run_and_check(P, DP, scenario, extra_resps={3}, extra_status=Status.RESP_ORDER,
                           extra_errors=1, **STALLS)
    assert run.regs["status"] == Status.RESP_ORDER


@pytest.mark.parametrize("fault", ["lost_resps", "bad_tags"])
def test_a_lost_response_stops_the_tiles(fault):
    """A read never answered (or answered with another tag): the responses after it are
    dropped (``resp_order``), the tiles before it arrive intact, and no later tile is sent
    complete: their payload is never shifted into place of the missing beat."""
    scenario = random_scenario(P, DP, 5, commands=1)
    from dma.model import DMAModel
    model = DMAModel(P, DP, scenario.commands, scenario.gpu_id, scenario.remote)
    want = [pk for t in scenario.triggers for pk in model.trigger(t, bytearray(scenario.memory))]
    assert len(want) >= 3, "the scenario needs three tiles"
    lost = len(want[0].beats) + len(want[1].beats) + 1        # the third tile's second beat
    run = simulate_dma(P, DP, dataclasses.replace(scenario, remote_stores=[]), link="sink",
                       **{fault: {lost}}, seed=2, resp_pause=0.2, mem_stall=0.2)
    got = run.env.packets()
    assert got == want[:2], f"{len(got)} packets sent, the first two expected intact"
    assert run.regs["status"] == Status.RESP_ORDER and run.regs["errors"] >= 1
    assert run.regs["tiles_sent"] == 3      # the third one's header left with its first beat


@pytest.mark.parametrize("bits", [0, 1])
def test_tags_are_required(bits):
    """No tags, or one bit, in which a duplicate (the last tag again) and a lost response
    (the next tag) are the same tag: refused."""
    with pytest.raises(ValueError, match=r"^the DMA engine checks its read responses by tag: "
                                         rf"tag_bits must be at least 2, not {bits}$"):
        DMAParams().check_against(T3Params(tag_bits=bits))


def _frame(header, payload, tlast_at=None, first_tuser=1):
    from dma.config import header_packer
    pk = header_packer(P, DP)
    full = (1 << P.beat_bytes) - 1
    beats = [(pk.pack(header), full, first_tuser, 0)] + [(d, full, 0, 0) for d in payload]
    end = len(beats) - 1 if tlast_at is None else tlast_at
    return [b[:3] + (int(k == end),) for k, b in enumerate(beats[:end + 1])]


def _receiver(**header):
    """A receiving GPU 2 with 1 KiB of zeroed memory at ``base``, and a STORE header there."""
    scenario = random_scenario(P, DP, 3, commands=0, gpu_id=2)
    scenario.memory.extend(bytes(1024))
    base = len(scenario.memory) - 1024
    h = {"dst_gpu": 2, "src_gpu": 1, "addr": base, "op": Op.STORE.value,
         "etype": ElemType.FP16.value, "source": 2, "tracked": 1, "wg_id": 9, "wf_id": 1,
         **header}
    return scenario, base, h


def _receive(scenario, frames):
    """Offer ``frames`` on rx under stalls; returns the run and a reader of memory beats."""
    run = simulate_dma(P, DP, scenario, rx_frames=frames, seed=1, rx_pause=0.3, mem_stall=0.3)
    mem = run.env.memory
    return run, lambda a: int.from_bytes(mem[a:a + 32], "little")


def test_rx_framing_and_wrong_gpu():
    """Malformed packets: what was received with a valid header is written where the header
    says, the rest is dropped, never written elsewhere; the status says which."""
    scenario, base, h = _receiver(beats=2, seg_beats=1, stride=64)
    d = [random.Random(k).getrandbits(256) for k in range(8)]
    frames = [
        _frame(dict(h, dst_gpu=3), d[:2]),                          # another GPU's packet
        _frame(h, [], tlast_at=0),                                  # header alone
        _frame(h, d[:2], first_tuser=0),                            # no header
        _frame(dict(h, addr=base + 256, beats=3), d[2:4]),          # short: 2 of 3 beats
        _frame(dict(h, addr=base + 512, beats=1), d[4:7]),          # long: 3 beats for 1
        _frame(dict(h, addr=base + 768), d[7:8] + d[0:1]),          # good
    ]
    run, beat = _receive(scenario, frames)
    assert beat(base) == 0 and beat(base + 64) == 0
    assert [beat(base + 256), beat(base + 320), beat(base + 384)] == [d[2], d[3], 0]
    assert [beat(base + 512), beat(base + 576)] == [d[4], 0]
    assert [beat(base + 768), beat(base + 832)] == [d[7], d[0]]
    assert run.regs["status"] == Status.RX_FRAMING | Status.RX_WRONG_GPU
    assert run.regs["errors"] == 5
    assert run.regs["packets_received"] == 3 and run.regs["beats_received"] == 5


def test_a_truncated_packet_does_not_move_the_next():
    """A packet cut short without ``tlast``, then a good packet: what arrived of the first is
    written where its header said, the good packet lands in its own range, whole
    (``rx_framing``, one error; it used to land in the first packet's range)."""
    scenario, base, h = _receiver(beats=3, seg_beats=3, stride=96)
    d = [random.Random(k).getrandbits(256) for k in range(5)]
    cut = _frame(h, d[:3])[:2]                                  # header and one beat, no tlast
    assert not any(b[3] for b in cut)
    frames = [cut, _frame(dict(h, addr=base + 512, beats=2, seg_beats=2), d[3:5]),
              _frame(dict(h, addr=base + 768, beats=1, seg_beats=1), d[:1])]
    run, beat = _receive(scenario, frames)
    assert [beat(base), beat(base + 32), beat(base + 64)] == [d[0], 0, 0]
    assert [beat(base + 512), beat(base + 544)] == [d[3], d[4]]
    assert beat(base + 768) == d[0]
    assert run.regs["status"] == Status.RX_FRAMING and run.regs["errors"] == 1
    assert run.regs["packets_received"] == 3 and run.regs["beats_received"] == 4


def test_a_command_holding_tiles_refuses_reprogramming():
    """Lowering a command's granularity, or moving its destination, while it holds 3 tiles of a
    4-tile block is refused (``cmd_busy``, an error per write); the block leaves whole to the
    destination it was triggered for.  After the block (or a ``forget``) the same writes are
    taken.  Before, the held count ran past its slots and tiles went to the new place."""
    scenario = random_scenario(P, DP, 0, commands=0)
    from dma.model import DMAModel
    from sim.blocks.dma.traffic import _align
    base = _align(len(scenario.memory), 32)
    cmd = Command(src_base=base, rows=16, cols=8, ld=16, tile_rows=16, tile_cols=1, dst_gpu=9,
                  dst_base=0x4000, op=Op.STORE, granularity=4)
    moved = dataclasses.replace(cmd, granularity=2, dst_base=0x6000)
    scenario.memory.extend(bytes(base - len(scenario.memory) + cmd.size))
    trig = [{"wg_id": k, "wf_id": 0, "addr": a, "region": 0}
            for k, a in enumerate(cmd.tile_starts())]
    rewrite = [("cmd0_mode", moved.mode()), ("cmd0_dst_base", moved.dst_base)]
    scenario = dataclasses.replace(scenario, commands=[cmd], triggers=trig[:3])
    run = simulate_dma(P, DP, scenario, link="sink",
                       then=[(rewrite, trig[3:4]), (rewrite, trig[4:6])])
    model = DMAModel(P, DP, [cmd], scenario.gpu_id)
    memory = bytearray(scenario.memory)
    want = [pk for t in trig[:3] for pk in model.trigger(t, memory)]
    assert not model.program(0, moved, writes=len(rewrite))
    want += model.trigger(trig[3], memory)
    assert model.program(0, moved, writes=len(rewrite))
    want += [pk for t in trig[4:6] for pk in model.trigger(t, memory)]
    got = run.env.packets()
    assert got == want
    assert [pk.header["addr"] for pk in got] == \
        [0x4000 + 32 * k for k in range(4)] + [0x6000 + 32 * k for k in (4, 5)]
    assert run.regs["status"] == Status.CMD_BUSY == model.status
    assert run.regs["errors"] == 2 == model.counters["errors"]
    assert run.regs["blocks"] == 2


def test_forget_drops_held_tiles():
    """``cmd.forget`` forgets the tiles held for an incomplete block: after it, the block is
    counted afresh (the forgotten tile 0 is never sent; without the forget, tiles 0 and 1
    would form the first block)."""
    scenario = random_scenario(P, DP, 0, commands=0)
    from sim.blocks.dma.traffic import _align
    base = _align(len(scenario.memory), 32)
    cmd = Command(src_base=base, rows=16, cols=4, ld=16, tile_rows=16, tile_cols=1, dst_gpu=9,
                  dst_base=0, op=Op.STORE, granularity=2)
    scenario.memory.extend(bytes(base - len(scenario.memory) + cmd.size))
    starts = cmd.tile_starts()
    trig = [{"wg_id": k, "wf_id": 0, "addr": a, "region": 0} for k, a in enumerate(starts)]
    scenario = dataclasses.replace(scenario, commands=[cmd], triggers=trig[:1])
    run = simulate_dma(P, DP, scenario, link="sink",
                       then=[([("cmd", CMD.encode(forget=1))], trig[1:2]), ([], trig[2:4])])
    sent = [pk.header["wg_id"] for pk in run.env.packets()]
    assert sent == [1, 2], f"sent tiles of wg {sent}"
    assert run.regs["triggers"] == 4 and run.regs["blocks"] == 1


# --- flow control and timing -------------------------------------------------------------------

def test_trigger_backpressure_loses_nothing():
    """A two-entry trigger queue behind a link that is mostly stalled: the Tracker side waits
    (``trigger_stall`` counts it) and every tile still arrives once."""
    dparams = DMAParams(trigger_depth=2)
    scenario = random_scenario(P, dparams, 21)
    run, _ = run_and_check(P, dparams, scenario, seed=4, tx_stall=0.85, mem_latency=6)
    assert run.regs["trigger_stall"] > 0


def test_block_leaves_after_its_last_tile():
    """With granularity > 1, no tile of a block is sent before the block's last trigger was
    taken, and the block's tiles leave back to back in trigger order."""
    found = 0
    for seed in range(40):
        scenario = random_scenario(P, DP, seed, commands=1)
        cmd = scenario.commands[0]
        if cmd.granularity < 2:
            continue
        found += 1
        run, model = run_and_check(P, DP, scenario, seed=seed, trig_pause=0.5)
        env = run.env
        for b in range(len(env.frames) // cmd.granularity):
            last_trigger = env.trig_taken[(b + 1) * cmd.granularity - 1]
            first = env.frame_starts[b * cmd.granularity]
            assert first > last_trigger, f"block {b} left at {first} before its last tile " \
                                         f"arrived at {last_trigger}"
        if found == 3:
            break
    assert found == 3


@pytest.mark.parametrize("latency", [4, 8, 20])
def test_link_busy_on_long_transfers(latency):
    """With a memory that answers one beat per cycle after ``latency`` cycles and a payload
    buffer that covers the round trip, the link carries a beat every cycle from the first tile
    to the last (requirement: >= 95%); the first header leaves ``FIRST_BEAT_LATENCY +
    latency`` cycles after its trigger."""
    scenario = long_transfer_scenario(P, DP, tile_beats=64, tiles=8)
    run, _ = run_and_check(P, DP, scenario, link="sink", mem_latency=latency)
    env = run.env
    assert env.link_utilisation() >= 0.95
    assert len(env.tx_beats) == 8 * 65
    assert env.tx_beats[0] - env.trig_taken[0] == FIRST_BEAT_LATENCY + latency


def test_small_buffer_bounds_the_link():
    """The other side of the same rule: reads in flight never exceed ``buffer_beats``, so with
    a round trip longer than the buffer, the link carries at most ``buffer_beats`` per round
    trip."""
    dparams = DMAParams(buffer_beats=8)
    latency = 30
    scenario = long_transfer_scenario(P, dparams, tile_beats=64, tiles=4)
    run, _ = run_and_check(P, dparams, scenario, link="sink", mem_latency=latency)
    assert run.env.link_utilisation() <= 8 / latency + 0.02


def test_the_rx_window_bounds_where_received_beats_land():
    """A window over the middle two of a packet's four beats: those are written, the first
    and the last are not (``rx_window``, an error each), and nothing outside moves; the next
    packet, inside, lands whole.  The model says the same."""
    from dma.model import DMAModel, Packet
    scenario, base, h = _receiver(beats=4, seg_beats=4, stride=128)
    scenario = dataclasses.replace(scenario, rx_window=(base + 32, 64))
    d = [random.Random(k).getrandbits(256) for k in range(6)]
    h2 = dict(h, addr=base + 32, beats=2, seg_beats=2, stride=64)
    run, beat = _receive(scenario, [_frame(h, d[:4]), _frame(h2, d[4:6])])
    assert [beat(base + 32 * k) for k in range(5)] == [0, d[4], d[5], 0, 0]
    assert run.regs["status"] == Status.RX_WINDOW and run.regs["errors"] == 2
    assert run.regs["beats_received"] == 4
    model = DMAModel(P, DP, [], gpu_id=2, rx_window=(base + 32, 64))
    writes = model.receive(Packet(h, [(x, (1 << 32) - 1) for x in d[:4]]))
    assert [w["addr"] for w in writes] == [base + 32, base + 64]
    assert model.status == Status.RX_WINDOW and model.counters["errors"] == 2
