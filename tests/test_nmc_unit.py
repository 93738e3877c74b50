"""The near-bank unit (HBM2 pseudo-channel with ALUs) against the cycle-level model, and its
timing against the settings it was given."""

import dataclasses
import random

import numpy as np
import pytest

from hw.interfaces import ElemType, Op, Stream
from hw.params import T3Params
from nmc.config import WRITE_DELAY, HBMTiming, NMCParams, Status, beat_index
from nmc.model import FRFCFSModel, NMCModel
from sim.blocks.nmc.amaranth_sim import simulate_nmc


PARAMS = T3Params()
NP = NMCParams(rows=4)
T = NP.timing
FULL = (1 << PARAMS.beat_bytes) - 1


def command(beat, op, data=0, mask=FULL, etype=ElemType.FP32, stream=Stream.COMPUTE, tag=0,
            addr=None):
    return {"addr": beat * PARAMS.beat_bytes if addr is None else addr, "data": data,
            "mask": mask, "op": op.value, "etype": etype.value, "stream": stream.value,
            "tag": tag, "source": 0, "wg_id": 0, "wf_id": 0, "tracked": 0}


def beat_of(group, bank, row, column=0):
    return beat_index(NP, group, bank, row, column)


def replay(commands, run, nparams=NP):
    """The model fed, cycle by cycle, what ``run``'s unit was offered on ``cmd`` (and, for a
    bank-parallel unit, announced on ``ahead``)."""
    model = NMCModel(PARAMS, nparams)
    told = run.aheads if run.aheads is not None else [None] * len(run.heads)
    for head, ahead in zip(run.heads, told):
        model.step(commands[head] if head is not None else None,
                   commands[ahead] if ahead is not None else None)
    return model


def check_against_the_model(run, model, n):
    """Every response in its cycle with the model's fields, and every counter, equal."""
    assert len(run.responses) == len(model.responses) == n
    for k, ((cycle, got), (want_cycle, want)) in enumerate(zip(run.responses, model.responses)):
        assert cycle == want_cycle, f"response {k}: cycle {cycle}, model {want_cycle}"
        assert {f: got[f] for f in want} == want, f"response {k}: {got} != {want}"
    for name, value in model.counters.items():
        assert run.regs[name] == value, f"{name}: hardware {run.regs[name]}, model {value}"


def length(n, t3_options):
    """Commands of a random stream: ``n`` in the default suite (Amaranth's simulator takes
    about 25 ms a command under backpressure), four times as many with ``--soak``."""
    return 4 * n if t3_options.soak else n


def random_commands(n, seed):
    rng = random.Random(seed)
    beats = [rng.randrange(NP.capacity_beats) for _ in range(16)]
    out = []
    for i in range(n):
        op = rng.choice([Op.READ, Op.STORE, Op.UPDATE, Op.UPDATE])
        addr = None
        if rng.random() < 0.03:
            addr = rng.choice([NP.capacity_beats * PARAMS.beat_bytes, 4])     # refused
        out.append(command(rng.choice(beats), op, rng.getrandbits(PARAMS.beat_bits),
                           FULL if rng.random() < 0.8 else rng.getrandbits(PARAMS.beat_bytes),
                           rng.choice(list(ElemType)), Stream(rng.randrange(2)), i % 16, addr))
    return out


@pytest.mark.parametrize("in_gap", [0.0, 0.4])
def test_random_commands_match_the_model_in_values_cycles_and_counters(in_gap, t3_options):
    commands = random_commands(length(200, t3_options), seed=int(in_gap * 10) + 1)
    run = simulate_nmc(PARAMS, NP, commands, in_gap=in_gap, seed=3)
    model = replay(commands, run)
    check_against_the_model(run, model, len(commands))
    assert run.regs["status"] == model.status == 1
    assert model.counters["row_conflicts_compute"] + model.counters["row_conflicts_comm"] > 0


def test_backpressure_keeps_values_and_order(t3_options):
    commands = random_commands(length(150, t3_options), seed=7)
    free = simulate_nmc(PARAMS, NP, commands)
    stalled = simulate_nmc(PARAMS, NP, commands, in_gap=0.2, resp_stall=0.5, seed=4)
    assert [r for _, r in stalled.responses] == [r for _, r in free.responses]
    assert [r["tag"] for _, r in stalled.responses] == [c["tag"] for c in commands]
    assert stalled.responses[-1][0] > free.responses[-1][0]        # the stalls did bite


def issue_gaps(commands):
    run = simulate_nmc(PARAMS, NP, commands)
    return [b - a for a, b in zip(run.taken, run.taken[1:])], run


def test_updates_in_one_bank_group_are_spaced_ccdwl():
    beats = [beat_of(0, 0, 0, c) for c in range(6)]
    gaps, _ = issue_gaps([command(b, Op.UPDATE) for b in beats])
    assert gaps == [T.CCDWL] * 5


def test_stores_in_one_bank_group_are_spaced_ccd_l():
    gaps, _ = issue_gaps([command(beat_of(0, 0, 0, c), Op.STORE) for c in range(6)])
    assert gaps == [T.CCD_L] * 5


def test_updates_across_bank_groups_are_spaced_ccd_s():
    # open a row in each bank group first, then update round-robin across the groups
    opens = [command(beat_of(g, 0, 0), Op.READ) for g in range(NP.bank_groups)]
    updates = [command(beat_of(k % NP.bank_groups, 0, 0, k // NP.bank_groups), Op.UPDATE)
               for k in range(8)]
    gaps, _ = issue_gaps(opens + updates)
    # two op-and-stores per bank group per CCDWL: CCD_S apart while a group is free
    assert gaps[len(opens):] == [T.CCD_S] * 3 + [max(T.CCD_S, T.CCDWL - 3 * T.CCD_S)] + \
        [T.CCD_S] * 3


def test_row_miss_and_conflict_cost_what_the_timing_says():
    b0 = beat_of(1, 2, 0)
    b1 = beat_of(1, 2, 1)                     # same bank, another row
    commands = [command(b0, Op.READ), command(beat_of(1, 2, 0, 1), Op.READ),
                command(b1, Op.READ)]
    run = simulate_nmc(PARAMS, NP, commands)
    first, hit, conflict = run.taken
    # a command's first cycle at the head is its check; the bank is closed at reset: ACT at
    # 1, READ at 1 + RCD
    assert first == 1 + T.RCD
    assert hit - first == T.CCD_L             # same bank group
    # conflict: PRE when the row has been open RAS cycles (and not before the command's
    # second cycle at the head), ACT after RP, READ after RCD
    assert conflict == max(hit + 2, 1 + T.RAS) + T.RP + T.RCD
    assert run.regs["row_misses_compute"] == 1 and run.regs["row_hits_compute"] == 1
    assert run.regs["row_conflicts_compute"] == 1
    assert [c for c, _ in run.responses] == [t + T.CL for t in run.taken]


@pytest.mark.parametrize("op", [Op.READ, Op.STORE])
def test_consecutive_beats_take_turns_among_the_bank_groups(op):
    """Beat i is in bank group i mod bank_groups: a stream of consecutive beats (one open row
    in each group) issues a column command every CCD_S cycles, not every CCD_L (the mapping
    that put 32 consecutive beats in one group gave half that rate)."""
    assert [beat_of(g, 0, 0, c) for c in range(2) for g in range(NP.bank_groups)] == \
        list(range(2 * NP.bank_groups))
    n = 8 * NP.bank_groups
    commands = [command(k, op) for k in range(n)]
    run = simulate_nmc(PARAMS, NP, commands)
    steady = run.taken[NP.bank_groups:]           # after each group's row is open
    assert [b - a for a, b in zip(steady, steady[1:])] == [T.CCD_S] * (len(steady) - 1)


@pytest.mark.parametrize("lead", [1, 37, 3000])
def test_timing_does_not_depend_on_when_the_traffic_starts(lead):
    """The same commands after ``lead`` idle cycles (longer than any timer's range for the
    largest) keep every delay: ACT→READ is RCD, the conflict's PRE/ACT/READ, CL to each
    response.  Each constraint is a down-counter that rests at zero; cycle stamps would wrap
    (32-bit stamps started near 2**32 would let a READ to a closed bank issue after 1 cycle
    instead of RCD)."""
    b0, b1 = beat_of(1, 2, 0), beat_of(1, 2, 1)
    commands = [command(b0, Op.READ), command(beat_of(1, 2, 0, 1), Op.UPDATE),
                command(b1, Op.READ)]
    base = simulate_nmc(PARAMS, NP, commands)
    run = simulate_nmc(PARAMS, NP, commands, lead=lead)
    assert run.taken == base.taken and run.responses == base.responses
    assert run.taken[0] == 1 + T.RCD          # the check, ACT, RCD
    assert [c for c, _ in run.responses] == [t + T.CL for t in run.taken]


def test_back_to_back_updates_to_one_address_give_the_sum():
    values = np.arange(1, 41, dtype=np.float32)
    beat = beat_of(3, 1, 2, 5)
    commands = [command(beat, Op.UPDATE, int.from_bytes(np.full(8, v).tobytes(), "little"))
                for v in values]
    commands.append(command(beat, Op.READ))
    run = simulate_nmc(PARAMS, NP, commands)
    lanes = np.frombuffer(run.responses[-1][1]["data"].to_bytes(32, "little"), np.float32)
    assert (lanes == values.sum()).all()


def test_the_atomicity_stall_waits_out_the_alu_pipeline():
    # With bank timing shorter than the ALU's pipeline (CCD 1), a command that reads a beat
    # still being written must wait until the write lands: WRITE_DELAY cycles after the
    # column command that writes it.  Without the stall each update would read a stale beat.
    fast = NMCParams(rows=4, timing=HBMTiming(CCD_S=1, CCD_L=1, CCDWL=1, WTR_S=1, WTR_L=1))
    values = np.arange(1, 21, dtype=np.float32)
    beat = beat_of(2, 0, 1, 3)
    other = beat_of(1, 0, 1, 3)         # another bank group: not held by the stall
    commands = [command(beat, Op.READ), command(other, Op.READ)]     # open both rows first
    for v in values:
        commands.append(command(beat, Op.UPDATE, int.from_bytes(np.full(8, v).tobytes(),
                                                                 "little")))
        commands.append(command(other, Op.READ))
    commands.append(command(beat, Op.READ))
    run = simulate_nmc(PARAMS, fast, commands)
    model = NMCModel(PARAMS, fast)
    for head in run.heads:
        model.step(commands[head] if head is not None else None)
    assert [c for c, _ in run.responses] == [c for c, _ in model.responses]
    lanes = np.frombuffer(run.responses[-1][1]["data"].to_bytes(32, "little"), np.float32)
    assert (lanes == values.sum()).all()
    # responses come CL after their column commands: the updates are WRITE_DELAY apart, and
    # the read of the other bank group fills one of the cycles between them
    updates = [run.responses[k][0] for k in range(2, 2 * len(values) + 2, 2)]
    assert set(np.diff(updates)) == {WRITE_DELAY}
    reads = [run.responses[k][0] for k in range(3, 2 * len(values) + 2, 2)]
    assert all(u < r < u + WRITE_DELAY for u, r in zip(updates, reads))


def test_bad_addresses_are_refused_and_touch_nothing():
    beat = beat_of(0, 0, 0)
    commands = [command(beat, Op.STORE, 0x1234),
                command(0, Op.STORE, 0xFFFF, addr=beat * 32 + 8),                 # unaligned
                command(0, Op.STORE, 0xFFFF, addr=NP.capacity_beats * 32),         # beyond
                command(beat, Op.READ)]
    run = simulate_nmc(PARAMS, NP, commands)
    assert [r["error"] for _, r in run.responses] == [0, 1, 1, 0]
    assert run.responses[-1][1]["data"] == 0x1234
    assert run.regs["errors"] == 2 and run.regs["status"] == 1


@pytest.mark.parametrize("kwargs,message", [
    (dict(CCDWL=3), r"^CCDWL 3 is less than CCD_L 4: an op-and-store cannot free its bank "
                    r"group sooner than a column command$"),
    (dict(CCD_L=1), r"^CCDWL 8 is|^CCD_L 1 is less than CCD_S 2$"),
    (dict(CL=WRITE_DELAY), rf"^CL {WRITE_DELAY} is shorter than the {WRITE_DELAY + 1}-cycle "
                           r"read-add-write pipeline$"),
    (dict(RP=0), r"^RP must be an integer from 1 to 255 cycles, not 0$"),
])
def test_impossible_timing_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HBMTiming(**kwargs)


def test_geometry_refused():
    with pytest.raises(ValueError, match=r"^banks must be a power of two from 1 to 4096, "
                                         r"not 3$"):
        NMCParams(banks=3)



def test_formats_left_out_are_refused():
    """A unit built with fp16 and fp32 adders only refuses a bf16 or int32 UPDATE (error,
    memory unchanged) and still adds fp16 and fp32; responses, cycles and counters equal the
    model's."""
    nparams = NMCParams(rows=NP.rows, formats=("fp16", "fp32"))
    rng = random.Random(3)
    commands = [command(rng.randrange(64), rng.choice([Op.UPDATE, Op.READ]),
                        rng.getrandbits(PARAMS.beat_bits), FULL, rng.choice(list(ElemType)),
                        tag=i % 16) for i in range(80)]
    run = simulate_nmc(PARAMS, nparams, commands)
    model = NMCModel(PARAMS, nparams)
    for head in run.heads:
        model.step(commands[head] if head is not None else None)
    for k, ((cycle, got), (want_cycle, want)) in enumerate(zip(run.responses, model.responses)):
        assert cycle == want_cycle and {f: got[f] for f in want} == want, f"response {k}"
    refused = sum(c["op"] == Op.UPDATE.value and c["etype"] in (ElemType.BF16.value,
                                                                ElemType.INT32.value)
                  for c in commands)
    assert refused > 0 and run.regs["errors"] == model.counters["errors"] == refused


def test_formats_refused():
    with pytest.raises(ValueError, match="formats must be distinct names"):
        NMCParams(formats=("fp16", "fp8"))


@pytest.mark.parametrize("timing", ["default", "fast"])
def test_a_storage_in_banks_reads_what_the_model_reads(monkeypatch, timing, t3_options):
    # The node's storage (4,096 beats) is two banks of nmc.config.READ_BANK_BEATS, each read
    # into a register of its own, the bank chosen after, the two writes the read does not see
    # (the one in the read's cycle and the next) forwarded apart; here four banks of 512 beats.
    # With the fast timing commands to one beat follow each other as closely as the atomicity
    # stall allows, so the writes in the read's cycle and the next are both taken.
    import nmc.rtl
    from amaranth import Fragment
    monkeypatch.setattr(nmc.rtl, "READ_BANK_BEATS", 512)
    nparams = NP if timing == "default" else NMCParams(
        rows=4, timing=HBMTiming(CCD_S=1, CCD_L=1, CCDWL=1, WTR_S=1, WTR_L=1))
    unit = nmc.rtl.NMCUnit(PARAMS, nparams)
    names = {sub[1] for sub in Fragment.get(unit, None).subfragments}
    assert {"storage0", "storage1", "storage2", "storage3"} <= names
    commands = random_commands(length(150, t3_options), seed=7)
    # and every beat read at the end: a stale read that an update or a masked store wrote back
    # shows there
    commands += [command(0, Op.READ, tag=k % 16, addr=addr) for k, addr in enumerate(
        sorted({c["addr"] for c in commands if c["addr"] < NP.capacity_beats * 32}))]
    run = simulate_nmc(PARAMS, nparams, commands, in_gap=0.3, seed=5)
    model = NMCModel(PARAMS, nparams)
    for head in run.heads:
        model.step(commands[head] if head is not None else None)
    assert len(run.responses) == len(model.responses) == len(commands)
    for k, ((cycle, got), (want_cycle, want)) in enumerate(zip(run.responses, model.responses)):
        assert cycle == want_cycle, f"response {k}: cycle {cycle}, model {want_cycle}"
        assert {f: got[f] for f in want} == want, f"response {k}: {got} != {want}"


@pytest.mark.parametrize("bank_beats", [2048, 512])
@pytest.mark.parametrize("ccdwl", [WRITE_DELAY, WRITE_DELAY + 1])
def test_the_writes_a_read_does_not_see_are_forwarded(monkeypatch, bank_beats, ccdwl):
    # Updates to one beat spaced CCDWL apart: with CCDWL = WRITE_DELAY each lands in the cycle
    # its successor issues (after the successor's read, a cycle ahead); with WRITE_DELAY + 1
    # in the cycle of that read itself, which the read port does not see.  Either is forwarded,
    # or the sum would miss updates.
    import nmc.rtl
    monkeypatch.setattr(nmc.rtl, "READ_BANK_BEATS", bank_beats)
    nparams = NMCParams(rows=4, timing=HBMTiming(CCD_S=1, CCD_L=1, CCDWL=ccdwl, WTR_S=1,
                                                 WTR_L=1))
    values = np.arange(1, 11, dtype=np.float32)
    beat = beat_of(2, 0, 1, 3)
    commands = [command(beat, Op.READ)]
    commands += [command(beat, Op.UPDATE, int.from_bytes(np.full(8, v).tobytes(), "little"))
                 for v in values]
    commands.append(command(beat, Op.READ))
    run = simulate_nmc(PARAMS, nparams, commands)
    assert set(np.diff(run.taken[1:-1])) == {ccdwl}
    lanes = np.frombuffer(run.responses[-1][1]["data"].to_bytes(32, "little"), np.float32)
    assert (lanes == values.sum()).all()


# --- the bank-parallel scheduler ----------------------------------------------------------------

#: a bank-parallel unit whose ``ahead`` port fills (4 announcements) under the tests' traffic
BP = NMCParams(rows=4, scheduler="bank-parallel", ahead_depth=4)


@pytest.mark.parametrize("gap", [0.0, 0.4])
def test_bank_parallel_matches_the_model_in_values_cycles_and_counters(gap, t3_options):
    """Random commands (refused ones among them), announced as early as a four-entry
    ``ahead`` port takes them, with gaps on both ports: the RTL against the model, cycle for
    cycle."""
    commands = random_commands(length(200, t3_options), seed=11 + int(gap * 10))
    run = simulate_nmc(PARAMS, BP, commands, in_gap=gap, ahead_gap=gap, seed=5)
    model = replay(commands, run, BP)
    check_against_the_model(run, model, len(commands))
    assert run.regs["status"] == model.status == Status.REFUSED
    if not gap:     # with no gaps, a cycle without an announcement before the last one: full
        assert run.aheads.index(None) < run.aheads.index(len(commands) - 1)


def test_bank_parallel_keeps_values_and_order_under_backpressure(t3_options):
    commands = random_commands(length(100, t3_options), seed=7)
    free = simulate_nmc(PARAMS, NP, commands)
    stalled = simulate_nmc(PARAMS, BP, commands, in_gap=0.2, resp_stall=0.5, ahead_gap=0.3,
                           seed=4)
    assert [r for _, r in stalled.responses] == [r for _, r in free.responses]


def test_bank_parallel_opens_each_banks_rows_in_the_same_order(t3_options):
    """Each bank's rows open in the order of its commands under either scheduler, so a
    command stream (every address valid) has the same row hits, misses and conflicts; only
    when they happen moves."""
    commands = [c for c in random_commands(length(120, t3_options), seed=3)
                if c["addr"] % PARAMS.beat_bytes == 0
                and c["addr"] < NP.capacity_beats * PARAMS.beat_bytes]
    in_order = simulate_nmc(PARAMS, NP, commands)
    parallel = simulate_nmc(PARAMS, BP, commands)
    for name in in_order.regs:
        if name.startswith("row_"):
            assert parallel.regs[name] == in_order.regs[name], name
    assert parallel.taken[-1] < in_order.taken[-1]


def test_bank_parallel_overlaps_the_row_commands_of_other_banks():
    """One read to each of the 16 banks, each to a closed bank: in order, every read waits for
    its own ACT and RCD; bank-parallel, the ACTs follow each other RRD apart from the first
    cycle and each read issues RCD after its own, so the last issues by (banks - 1) RRD + RCD
    plus the first command's check and announcement."""
    banks = [(g, b) for b in range(NP.banks) for g in range(NP.bank_groups)]
    commands = [command(beat_of(g, b, 1), Op.READ, tag=i % 16)
                for i, (g, b) in enumerate(banks)]
    bp = NMCParams(rows=4, scheduler="bank-parallel", ahead_depth=16)
    parallel = simulate_nmc(PARAMS, bp, commands)
    in_order = simulate_nmc(PARAMS, NP, commands)
    assert parallel.taken[-1] <= (len(banks) - 1) * T.RRD + T.RCD + 2
    assert in_order.taken[-1] >= len(banks) * T.RCD
    assert parallel.regs["row_misses_compute"] == len(banks)


def test_bank_parallel_waits_for_a_write_to_recover_before_closing_its_row():
    """A store, then a read of another row of the same bank: the PRE waits WTP after the
    store's column command (and RAS after the ACT), then RP and RCD."""
    commands = [command(beat_of(0, 0, 0), Op.STORE), command(beat_of(0, 0, 1), Op.READ)]
    run = simulate_nmc(PARAMS, NMCParams(rows=4, scheduler="bank-parallel"), commands)
    store, read = run.taken
    act = store - T.RCD                        # the ACT that opened row 0
    assert read == max(store + T.WTP, act + T.RAS) + T.RP + T.RCD


def test_an_unannounced_command_still_executes_and_is_reported():
    commands = random_commands(30, seed=2)
    free = simulate_nmc(PARAMS, NP, commands)
    run = simulate_nmc(PARAMS, BP, commands, announce=False)
    assert [r for _, r in run.responses] == [r for _, r in free.responses]
    assert run.regs["status"] & Status.UNANNOUNCED
    assert replay(commands, run, BP).status == run.regs["status"]


def test_a_scheduler_that_does_not_exist_is_refused():
    with pytest.raises(ValueError, match=r"scheduler must be one of .*'fifo'"):
        NMCParams(scheduler="fifo")
    with pytest.raises(ValueError, match="ahead_depth"):
        NMCParams(scheduler="bank-parallel", ahead_depth=3)


# --- the FR-FCFS scheduler ------------------------------------------------------------------------

#: an FR-FCFS unit of 16 slots, which fill under the tests' traffic
FR = NMCParams(rows=4, scheduler="fr-fcfs", resp_depth=16)


def replay_frfcfs(commands, run, nparams=FR, bypass_cap=None):
    """The FR-FCFS model fed, cycle by cycle, what ``run``'s unit was offered on ``cmd``; it
    must take each command in the cycle the unit did."""
    model = FRFCFSModel(PARAMS, nparams, bypass_cap)
    taken = [cycle for cycle, head in enumerate(run.heads)
             if head is not None and model.step(commands[head])
             or head is None and model.step(None)]
    assert taken == run.taken
    assert sorted(model.issued.values()) == run.issued
    return model


def wide_commands(n, seed):
    """Reads, stores and updates over every bank and row: half to random beats, half to the
    first four rows' columns (rows reused, so that hits wait behind misses)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        op = rng.choice([Op.READ, Op.READ, Op.STORE, Op.UPDATE])
        beat = rng.randrange(NP.capacity_beats) if rng.random() < 0.5 else \
            beat_of(rng.randrange(4), rng.randrange(4), rng.randrange(4), rng.randrange(32))
        out.append(command(beat, op, rng.getrandbits(PARAMS.beat_bits), FULL, ElemType.FP32,
                           Stream(rng.randrange(2)), i % 16))
    return out


@pytest.mark.parametrize("gen, gap, slots, cap", [
    (random_commands, 0.0, 16, None), (random_commands, 0.4, 8, 2),
    (wide_commands, 0.2, 32, 3)])
def test_frfcfs_matches_the_model_in_values_cycles_and_counters(gen, gap, slots, cap,
                                                                t3_options):
    """Random commands (refused ones among them, repeated beats, every bank) with gaps: the
    RTL against the model, cycle for cycle (each command taken, each column command, each
    response) and counter for counter; every response the in-order unit's (commands to one
    beat keep their order), all of them sooner."""
    nparams = dataclasses.replace(FR, resp_depth=slots)
    commands = gen(length(200, t3_options), seed=slots + int(gap * 10))
    run = simulate_nmc(PARAMS, nparams, commands, in_gap=gap, seed=3, bypass_cap=cap)
    model = replay_frfcfs(commands, run, nparams, cap)
    check_against_the_model(run, model, len(commands))
    assert run.regs["status"] == model.status
    in_order = simulate_nmc(PARAMS, NP, commands, in_gap=gap, seed=3)
    assert [r for _, r in run.responses] == [r for _, r in in_order.responses]
    assert run.responses[-1][0] < in_order.responses[-1][0]
    assert (run.regs["capped"] > 0) == (cap is not None)     # a cap of 2 or 3 binds


def test_frfcfs_keeps_values_and_order_under_backpressure(t3_options):
    commands = random_commands(length(150, t3_options), seed=7)
    free = simulate_nmc(PARAMS, NP, commands)
    stalled = simulate_nmc(PARAMS, FR, commands, in_gap=0.2, resp_stall=0.5, seed=4)
    assert [r for _, r in stalled.responses] == [r for _, r in free.responses]


def test_frfcfs_serves_a_banks_row_hit_before_its_older_miss():
    """Row 0 of bank 0, then row 1, then row 0 again: in order, the third command closes row
    1 again (two conflicts); FR-FCFS serves it while row 0 is open (a hit) and the second
    command last, its PRE waiting RAS after the ACT.  The responses stay in order."""
    commands = [command(beat_of(0, 0, 0, 0), Op.READ, tag=0),
                command(beat_of(0, 0, 1, 0), Op.READ, tag=1),
                command(beat_of(0, 0, 0, 1), Op.READ, tag=2)]
    in_order = simulate_nmc(PARAMS, NP, commands)
    fr = simulate_nmc(PARAMS, FR, commands)
    assert [r["tag"] for _, r in fr.responses] == [0, 1, 2]
    assert in_order.regs["row_conflicts_compute"] == 2
    assert (fr.regs["row_misses_compute"], fr.regs["row_hits_compute"],
            fr.regs["row_conflicts_compute"]) == (1, 1, 1)
    model = replay_frfcfs(commands, fr)
    act = model.issued[0] - T.RCD                       # the ACT of row 0
    assert model.issued[2] == model.issued[0] + T.CCD_L  # the same bank group, next column
    assert model.issued[1] == act + T.RAS + T.RP + T.RCD
    assert fr.responses[-1][0] < in_order.responses[-1][0]


def test_frfcfs_bypass_cap_bounds_how_often_the_oldest_command_is_passed():
    """A read of row 1 of bank 0 behind a hit of row 0, then a run of hits to row 0: with a
    cap of 4, four hits pass the row-1 read, then it is served alone (its PRE, ACT and
    column command before any later hit); without the cap every hit passes it."""
    hits = [command(beat_of(0, 0, 0, c), Op.READ, tag=c % 16) for c in range(1, 12)]
    commands = [command(beat_of(0, 0, 0, 0), Op.READ), command(beat_of(0, 0, 1, 0), Op.READ,
                                                                  tag=15)] + hits
    capped = simulate_nmc(PARAMS, FR, commands, bypass_cap=4)
    model = replay_frfcfs(commands, capped, bypass_cap=4)
    order = sorted(model.issued, key=model.issued.get)
    assert order[:6] == [0, 2, 3, 4, 5, 1] and capped.regs["capped"] == 1
    free = simulate_nmc(PARAMS, FR, commands)
    model = replay_frfcfs(commands, free)
    assert sorted(model.issued, key=model.issued.get)[-1] == 1 and free.regs["capped"] == 0


def test_frfcfs_refusals():
    from nmc.frfcfs import FRFCFSUnit
    from nmc.rtl import NMCUnit
    from system.node import NodeParams
    with pytest.raises(ValueError, match="FRFCFSUnit"):
        NMCUnit(PARAMS, FR)
    with pytest.raises(ValueError, match="scheduler 'fr-fcfs'"):
        FRFCFSUnit(PARAMS, NP)
    with pytest.raises(ValueError, match="bypass_cap must be an integer from 1"):
        FRFCFSUnit(PARAMS, FR, bypass_cap=0)
    with pytest.raises(ValueError, match=r"nmc.resp_depth 64 must hold the MCQ's requests "
                                         r"and the responses in flight: arbiter.depth 64 \+ 16"):
        NodeParams(nmc=NMCParams(scheduler="fr-fcfs", resp_depth=64))
