"""cocotb testbench of the near-bank unit's exported Verilog (``tests/test_nmc_cocotb.py`` and
``t3 bench nmc``): random command streams (:func:`random_commands`) through a source with gaps,
responses into a sink with backpressure, scored against :class:`nmc.model.NMCModel` or, for an
FR-FCFS unit, :class:`nmc.model.FRFCFSModel` (values and order always; completion cycles when
``resp`` is never stalled)."""

import json
import random
import time

import cocotb
from amaranth.lib import data

from hw.interfaces import ElemType, Op, Stream, mem_request_layout, mem_response_layout
from hw.params import T3Params
from nmc.config import NMCParams, beat_index, nmc_registers
from nmc.model import FRFCFSModel, NMCModel
from sim.harness.agents import Bench, CsrMaster, StreamSink, StreamSource, random_pauses
from sim.harness.runner import tb_config


__all__ = ["random_commands", "run_commands"]


class _Heads:
    """Per cycle, the index of the command offered on ``cmd`` (for the model's replay)."""

    def __init__(self, dut, source, bench):
        self.dut, self.source, self.bench = dut, source, bench
        self.heads, self.on, self.first = [], False, None

    def reset(self):
        pass

    def on_edge(self, cycle):
        pass

    def on_settle(self):
        if self.on:
            if self.first is None:
                self.first = self.bench.cycle     # this settle follows edge `first`
            offering = bool(self.dut.cmd__valid.value)
            self.heads.append(len(self.source.sent) if offering else None)


class _Announcer:
    """A bank-parallel unit's announcements: every command goes to ``ahead`` first and to
    ``cmd``'s source from the edge its announcement was taken (so it reaches ``cmd`` no earlier
    than the cycle after); per cycle, the index of the command announced (for the model)."""

    def __init__(self, dut, ahead, source, commands):
        self.dut, self.ahead, self.source = dut, ahead, source
        self.commands, self.passed = commands, 0
        self.aheads, self.on = [], False

    def reset(self):
        pass

    def on_edge(self, cycle):
        while self.passed < len(self.ahead.sent):
            self.source.send_nowait(self.commands[self.passed])
            self.passed += 1

    def on_settle(self):
        if self.on:
            taken = bool(self.dut.ahead__valid.value) and bool(self.dut.ahead__ready.value)
            self.aheads.append(len(self.ahead.sent) if taken else None)


def random_commands(params, nparams, n, seed, hot=16):
    rng = random.Random(seed)
    full = (1 << params.beat_bytes) - 1
    beats = [rng.randrange(nparams.capacity_beats) for _ in range(hot)]
    out = []
    for i in range(n):
        op = rng.choice([Op.READ, Op.STORE, Op.UPDATE, Op.UPDATE])
        addr = rng.choice(beats) * params.beat_bytes
        if rng.random() < 0.02:
            addr = rng.choice([nparams.capacity_beats * params.beat_bytes, 4])
        out.append({"addr": addr, "data": rng.getrandbits(params.beat_bits),
                    "mask": full if rng.random() < 0.8 else rng.getrandbits(params.beat_bytes),
                    "op": op.value, "etype": rng.choice(list(ElemType)).value,
                    "stream": rng.randrange(2), "tag": i % (1 << params.tag_bits),
                    "source": 0, "wg_id": 0, "wf_id": 0, "tracked": 0})
    return out


def _in_order(params, nparams, commands):
    """An in-order model that executed ``commands`` back to back."""
    import dataclasses
    model = NMCModel(params, dataclasses.replace(nparams, scheduler="in-order"))
    for c in commands:
        while model.step(c) not in ("col", "err"):
            pass
    return model


async def run_commands(dut, commands, in_gap, resp_stall, seed):
    cfg = tb_config()
    params, nparams = T3Params(**cfg["params"]), NMCParams.from_dict(cfg["nparams"])
    bench = Bench(dut)
    source = bench.add(StreamSource(dut, "cmd", mem_request_layout(params)))
    sink = bench.add(StreamSink(dut, "resp", mem_response_layout(params)))
    csr = bench.add(CsrMaster(dut, "csr", nmc_registers(params, nparams)))
    heads = bench.add(_Heads(dut, source, bench))
    bank_parallel = nparams.scheduler == "bank-parallel"
    if bank_parallel:
        # stepped before ``cmd``'s source, which the announcer feeds
        ahead = StreamSource(dut, "ahead", data.StructLayout({"addr": params.addr_bits}))
        announcer = _Announcer(dut, ahead, source, commands)
        bench.agents[0:0] = [ahead, announcer]
        if in_gap:
            ahead.set_pause_generator(random_pauses(in_gap, seed + 2))
    if in_gap:
        source.set_pause_generator(random_pauses(in_gap, seed))
    if resp_stall:
        sink.set_pause_generator(random_pauses(resp_stall, seed + 1))
    await bench.start()
    start = time.perf_counter()
    start_cycle = bench.cycle
    heads.on = True
    if bank_parallel:
        announcer.on = True
        for c in commands:
            ahead.send_nowait({"addr": c["addr"]})
    else:
        for c in commands:
            source.send_nowait(c)
    await bench.until(lambda: len(sink.received) == len(commands), 300 * len(commands) + 500)
    heads.on = False
    wall, cycles = time.perf_counter() - start, bench.cycle - start_cycle
    regs = {reg.name: await csr.read_reg(reg.name) for reg in csr.regs.regs
            if reg.access != "wo"}
    frfcfs = nparams.scheduler == "fr-fcfs"
    if frfcfs:
        # the model's queue frees a slot as its response leaves, which assumes ``resp``
        # always ready: under backpressure the values are scored against the in-order model's
        # (an FR-FCFS unit's responses are the in-order unit's), below
        model = FRFCFSModel(params, nparams) if not resp_stall else \
            _in_order(params, nparams, commands)
        for head in heads.heads if not resp_stall else ():
            model.step(commands[head] if head is not None else None)
    else:
        model = NMCModel(params, nparams)
        told = announcer.aheads if bank_parallel else [None] * len(heads.heads)
        for head, ahead_index in zip(heads.heads, told):
            model.step(commands[head] if head is not None else None,
                       commands[ahead_index] if ahead_index is not None else None)
    got = [r for _, r in sink.received]
    want = [r for _, r in model.responses]
    for k, (g, w) in enumerate(zip(got, want)):
        assert {f: g[f] for f in w} == w, f"response {k}: hardware {g}, model {w}"
    assert len(got) == len(want) == len(commands)
    if not resp_stall:
        # a handshake recorded at edge c happened in the cycle after edge c - 1
        cycles_got = [c - 1 - heads.first for c, _ in sink.received]
        cycles_want = [c for c, _ in model.responses]
        assert cycles_got == cycles_want, "completion cycles differ from the model"
        for name, value in model.counters.items():
            assert regs[name] == value, f"{name}: hardware {regs[name]}, model {value}"
    else:
        # under backpressure the timing differs from the model's, but not what was done:
        # every count but ``busy`` (cycles a command waited) is a function of the command
        # order alone (rows open and close only as commands ask), so a model fed the same
        # commands back to back must agree; and the status
        alone = NMCModel(params, nparams if not frfcfs else
                         NMCParams.from_dict({**nparams.to_dict(), "scheduler": "in-order"}))
        for c in commands:
            for first in range(1000):
                if alone.step(c, c if first == 0 and bank_parallel else None) in ("col",
                                                                                  "err"):
                    break
            else:
                raise AssertionError(f"the model never took command {c}")
        for name, value in alone.counters.items():
            # FR-FCFS's row hits depend on when each command arrived, not on the order
            # alone: their sum is every executed command
            if name != "busy" and not (frfcfs and name.startswith("row_")):
                assert regs[name] == value, f"{name}: hardware {regs[name]}, model {value}"
        if frfcfs:
            executed = sum(v for k, v in alone.counters.items() if k.startswith("row_"))
            assert sum(v for k, v in regs.items() if k.startswith("row_")) == executed
        assert regs["busy"] >= len(commands)
    assert regs["status"] == model.status, f"status: hardware {regs['status']}, model " \
                                           f"{model.status}"
    return {"cycles": cycles, "wall_s": wall, "cycles_per_s": cycles / wall,
            "taken": [c for c, _ in source.sent], "registers": regs}


@cocotb.test()
async def spread_updates(dut):
    """``t3 bench nmc``: op-and-stores spread over the bank groups with their rows open, no
    stalls: the rate against bank groups / CCDWL; summary to ``cfg["out"]``."""
    cfg = tb_config()
    params, nparams = T3Params(**cfg["params"]), NMCParams.from_dict(cfg["nparams"])
    full = (1 << params.beat_bytes) - 1
    groups, cols = nparams.bank_groups, nparams.columns
    commands = []
    for k in range(cfg["n"]):
        group, column = k % groups, (k // groups) % cols
        beat = beat_index(nparams, group, 0, 0, column)    # bank 0, row 0 of each group
        commands.append({"addr": beat * params.beat_bytes, "data": k, "mask": full,
                         "op": Op.UPDATE.value, "etype": ElemType.INT32.value,
                         "stream": Stream.COMM.value, "tag": k % 16, "source": 0,
                         "wg_id": 0, "wf_id": 0, "tracked": 0})
    result = await run_commands(dut, commands, 0.0, 0.0, cfg["seed"])
    taken = result["taken"][groups:]               # after each group's first (row opening)
    result["updates_per_cycle"] = (len(taken) - 1) / (taken[-1] - taken[0])
    with open(cfg["out"], "w") as f:
        json.dump(result, f)
