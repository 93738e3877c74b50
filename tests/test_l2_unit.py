"""The L2 under Amaranth's simulator: random traffic against the golden model (responses, what
reaches memory, the image after a flush, the counters) for several geometries and
backpressures; directed cases for the hazards random traffic rarely meets; the hit latency,
the throughput and the banks' timing exactly; the policies' refusals and the driver-side
checks."""

import pytest

from hw.interfaces import ElemType, Op
from hw.params import T3Params
from hw.testing import reg_read, reg_write, run_testbench
from l2.config import (L2Config, L2Params, Status, Window, check_windows,
                       config_values, l2_registers)
from l2.rtl import L2Cache
from sim.blocks.l2.env import L2Env, check_run, random_requests, simulate_l2, traffic_windows


P = T3Params()
FULL = (1 << P.beat_bytes) - 1


def check_random(lparams, config=L2Config(), n=400, seed=1, **env):
    windows = traffic_windows(P, 12)
    config = L2Config(**{**config.__dict__, "windows": windows})
    requests = random_requests(P, n, windows, seed=seed)
    e = L2Env(P, requests, seed=seed, **env)
    counters, status, _ = simulate_l2(L2Cache(P, lparams), e, config)
    model = check_run(P, lparams, config, requests, [r for _, r in e.responses], e.downstream,
                      e.memory, counters)
    assert counters["lines"] == counters["dirty_lines"] == 0      # after the flush
    assert status & Status.EMPTY and not status & Status.CONFIG_BUSY
    return counters, model


@pytest.mark.parametrize("lparams, config, env", [
    (L2Params(sets=4, ways=4, mshrs=4, depth=16, windows=2, max_hit_latency=16),
     L2Config(hit_latency=4), dict(i_p=1, o_p=1, mem_p=1, latency=(1, 3))),
    (L2Params(sets=2, ways=3, mshrs=2, depth=8, windows=2, max_hit_latency=8, banks=2),
     L2Config(hit_latency=8, bank_cycles=3), dict(i_p=0.9, o_p=0.3, mem_p=0.4, latency=(2, 40))),
    (L2Params(sets=8, ways=2, mshrs=1, depth=4, windows=2, max_hit_latency=20, banks=1),
     L2Config(hit_latency=5, sets_used=4), dict(i_p=0.5, o_p=0.9, mem_p=0.9, latency=(1, 10))),
    (L2Params(sets=1, ways=1, mshrs=3, depth=6, windows=2, max_hit_latency=4, banks=1),
     L2Config(hit_latency=4), dict()),
    (L2Params(sets=16, ways=8, mshrs=8, depth=32, windows=2, max_hit_latency=40),
     L2Config(hit_latency=30, ways_used=5, sets_used=2),
     dict(i_p=1, o_p=1, mem_p=0.5, latency=(20, 60))),
], ids=["4x4-free", "2x3-backpressure", "8x2-one-mshr", "1x1", "16x8-five-ways-two-sets"])
def test_random_traffic_matches_the_model(lparams, config, env, t3_options):
    counters, model = check_random(lparams, config, seed=t3_options.seed,
                                   n=4000 if t3_options.soak else 400, **env)
    # the traffic reached every path
    for name in ("read_hits", "read_misses", "store_hits", "store_allocs", "write_backs",
                 "bypass_reads", "bypass_writes", "refused"):
        assert counters[name] > 0, name


def run_directed(lparams, config, requests, latency=(30, 30), memory=None):
    e = L2Env(P, requests, memory, i_p=1, o_p=1, mem_p=1, latency=latency)
    counters, status, cycles = simulate_l2(L2Cache(P, lparams), e, config)
    check_run(P, lparams, config, requests, [r for _, r in e.responses], e.downstream, e.memory,
              counters, memory_before=memory)
    return counters, e


def req(addr, op=Op.READ, data=0, mask=FULL, tag=0):
    return {"addr": addr, "op": op.value, "data": data, "mask": mask, "tag": tag,
            "etype": ElemType.INT32.value, "stream": 0, "source": 0, "wg_id": 0, "wf_id": 0,
            "tracked": 0}


ONE_WAY = L2Params(sets=1, ways=1, banks=1, mshrs=2, depth=8, windows=1, max_hit_latency=8)
WINDOW = Window(0x1000, 0x400)


def test_a_store_waits_for_the_fill_of_the_line_it_evicts():
    """One way: a READ miss of A is being filled when a whole STORE to B would take its way.
    The STORE waits for A's fill; had it not, A's fill would land on B's data and the READ of
    B would return A."""
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    a, b = 0x1000, 0x1020
    counters, e = run_directed(ONE_WAY, config, [req(a), req(b, Op.STORE, data=0xB),
                                                 req(b, tag=1)],
                               memory={a: 0xA})
    assert [r["data"] for _, r in e.responses] == [0xA, 0, 0xB]
    assert counters["miss_stalls"] > 0


def test_reads_of_a_line_being_filled_merge_into_its_fill():
    two = L2Params(sets=1, ways=2, banks=1, mshrs=1, depth=8, windows=1, max_hit_latency=8)
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    counters, e = run_directed(two, config, [req(0x1000, tag=k) for k in range(4)],
                               memory={0x1000: 7})
    assert [r["data"] for _, r in e.responses] == [7] * 4
    assert counters["read_misses"] == 1 and counters["read_merged"] == 3
    assert len(e.downstream) == 1


def test_two_hundred_misses_are_in_flight_at_once():
    """The paper's GPU keeps hundreds of L2 misses in flight (``docs/paper.md``, the machine's
    table): with 200 MSHRs and a slow memory, 200 reads of distinct lines all reach memory
    before its first answer, the 201st waits for an MSHR, and every response is the model's.
    ``info.mshrs`` reads 200 (its field is wider from 128 MSHRs)."""
    lp = L2Params(sets=64, ways=4, banks=4, mshrs=200, depth=256, windows=1)
    config = L2Config(windows=(Window(0x1000, 256 * 32),), hit_latency=4)
    lines = [0x1000 + 32 * k for k in range(210)]      # at most 4 a set: nothing is evicted
    counters, e = run_directed(lp, config, [req(a, tag=k % 16) for k, a in enumerate(lines)],
                               latency=(400, 400), memory={a: a >> 5 for a in lines})
    assert [r["data"] for _, r in e.responses] == [a >> 5 for a in lines]
    in_flight = sum(1 for c in e.sent if c < e.returned[0])
    assert in_flight == lp.mshrs
    assert counters["read_misses"] == 210 and counters["miss_stalls"] > 0
    assert e.info["mshrs"] == 200
    assert l2_registers(P, lp)["info"].field("mshrs").width == 8
    assert l2_registers(P, L2Params())["info"].field("mshrs").width == 7


def test_a_store_to_a_line_being_filled_waits_for_the_fill():
    """A STORE's data must not be overwritten by the fill that was on its way."""
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    counters, e = run_directed(ONE_WAY, config, [req(0x1000), req(0x1000, Op.STORE, data=5,
                                                                  mask=0xF), req(0x1000)],
                               memory={0x1000: 0x1234_5678_9abc})
    assert e.responses[2][1]["data"] == 0x1234_0000_0005     # the low four bytes stored
    assert counters["miss_stalls"] > 0


def test_the_least_recently_used_way_is_evicted():
    two = L2Params(sets=1, ways=2, banks=1, mshrs=2, depth=8, windows=1, max_hit_latency=8)
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    a, b, c = 0x1000, 0x1020, 0x1040
    # A, B fill the ways; A is used again, so C evicts B: A still hits, B misses again
    counters, e = run_directed(two, config, [req(a), req(b), req(a), req(c), req(a), req(b)],
                               latency=(2, 2))
    assert counters["read_misses"] == 4 and counters["read_hits"] == 2
    assert [d["addr"] for d in e.downstream] == [a, b, c, b]


def timing_run(lparams, config, requests):
    """``(cycle taken, cycle answered)`` of each request, everything always ready."""
    e = L2Env(P, requests, i_p=1, o_p=1, mem_p=1, latency=(3, 3))
    simulate_l2(L2Cache(P, lparams), e, config, flush=False)
    return list(zip(e.taken, [c for c, _ in e.responses]))


@pytest.mark.parametrize("latency", [4, 5, 17])
def test_a_hit_answers_after_exactly_the_hit_latency(latency):
    lp = L2Params(sets=4, ways=2, banks=4, max_hit_latency=32)
    config = L2Config(windows=(WINDOW,), hit_latency=latency)
    warm = [req(0x1000 + 32 * k, Op.STORE, data=k) for k in range(4)]
    times = timing_run(lp, config, warm + [req(0x1020)])
    taken, answered = times[-1]
    assert answered - taken == latency


def test_hits_stream_one_per_cycle_across_banks():
    lp = L2Params(sets=8, ways=2, banks=4, max_hit_latency=8)
    config = L2Config(windows=(WINDOW,), hit_latency=6, bank_cycles=4)
    lines = [0x1000 + 32 * k for k in range(8)]          # consecutive sets, four banks
    stores = [req(a, Op.STORE, data=k) for k, a in enumerate(lines)]
    reads = [req(lines[k % 8]) for k in range(64)]
    times = timing_run(lp, config, stores + reads)[len(stores):]
    answered = [a for _, a in times]
    assert answered[-1] - answered[0] == len(reads) - 1
    assert all(a - t == 6 for t, a in times[:1])


def test_accesses_to_one_bank_wait_its_cycle_time():
    lp = L2Params(sets=8, ways=2, banks=4, max_hit_latency=8)
    config = L2Config(windows=(WINDOW,), hit_latency=6, bank_cycles=3)
    stores = [req(0x1000, Op.STORE, data=1)]
    reads = [req(0x1000) for _ in range(10)]            # one set, so one bank
    answered = [a for _, a in timing_run(lp, config, stores + reads)[1:]]
    assert [b - a for a, b in zip(answered, answered[1:])] == [3] * 9


def test_an_update_in_a_cached_window_is_refused_and_nothing_is_written():
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    counters, e = run_directed(ONE_WAY, config, [req(0x1000, Op.UPDATE, data=3)],
                               memory={0x1000: 9})
    assert e.responses[0][1]["error"] == 1 and counters["refused"] == 1
    assert e.downstream == [] and e.memory == {0x1000: 9}


def test_outside_the_windows_everything_passes_unchanged():
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    requests = [req(0x2000, Op.UPDATE, data=3), req(0x2000), req(0x2000, Op.STORE, data=1)]
    counters, e = run_directed(ONE_WAY, config, requests, memory={0x2000: 4})
    assert e.downstream == requests
    assert counters["lines"] == 0 and e.responses[1][1]["data"] == 7


def registers_bench(lparams, program, store_then):
    """Write ``program`` (``[(register, value)]``) into an empty L2, take one STORE of a whole
    beat at the window's start and wait for its answer, then write ``store_then`` and read
    every register written and ``status`` and ``lines``."""
    from hw.interfaces import Packer, mem_request_layout
    dut = L2Cache(P, lparams)
    out = {}
    pack = Packer(mem_request_layout(P)).pack

    async def bench(ctx):
        for name, value in program:
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.mem.ready, 1)
        ctx.set(dut.i.payload.as_value(), pack({"addr": WINDOW.base, "op": Op.STORE.value,
                                                "mask": FULL, "data": 1}))
        ctx.set(dut.i.valid, 1)
        await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        await ctx.tick().until(dut.o.valid)
        for name, value in store_then:
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        for name in [n for n, _ in program + store_then] + ["status", "lines"]:
            out[name] = await reg_read(ctx, dut.csr, dut.regs, name)

    run_testbench(dut, bench)
    return out


def test_configuration_is_locked_while_the_l2_holds_lines():
    lp = L2Params(sets=4, ways=4, windows=1)
    program = list(config_values(P, lp, L2Config(windows=(WINDOW,), ways_used=2)).items())
    out = registers_bench(lp, program, [("ways_used", 3), ("win0_size", 0)])
    assert out["lines"] == 1
    assert out["ways_used"] == 2 and out["win0_size"] == WINDOW.size     # refused
    assert out["status"] & Status.CONFIG_BUSY


def test_a_configuration_the_geometry_cannot_have_is_clamped_and_reported():
    lp = L2Params(sets=4, ways=4, windows=1)
    program = list(config_values(P, lp, L2Config(windows=(WINDOW,))).items())
    out = registers_bench(lp, program + [("ways_used", 9)], [])
    assert out["ways_used"] == 9 and out["status"] & Status.BAD_CONFIG
    assert out["lines"] == 1 and not out["status"] & Status.CONFIG_BUSY


def test_flush_writes_back_every_dirty_line_once():
    lp = L2Params(sets=4, ways=2, banks=1, windows=1, max_hit_latency=8)
    config = L2Config(windows=(WINDOW,), hit_latency=4)
    stores = [req(0x1000 + 32 * k, Op.STORE, data=k + 1) for k in range(8)]
    counters, e = run_directed(lp, config, stores, latency=(3, 3))
    assert counters["flush_write_backs"] == 8 and counters["write_backs"] == 0
    assert e.memory == {0x1000 + 32 * k: k + 1 for k in range(8)}


def test_driver_checks_name_the_window_and_the_value():
    lp = L2Params(windows=2)
    with pytest.raises(ValueError, match=r"^windows: 3 cached windows, the L2 has 2$"):
        check_windows(P, lp, [Window(0, 32)] * 3)
    with pytest.raises(ValueError, match=r"^window 1 base 0x10 is not beat aligned "
                                         r"\(32 bytes\)$"):
        check_windows(P, lp, [Window(0, 32), Window(16, 32)])
    with pytest.raises(ValueError, match=r"^windows 0 and 1 overlap at 0x20$"):
        check_windows(P, lp, [Window(0, 64), Window(32, 64)])
    with pytest.raises(ValueError, match=r"^ways_used must be an integer from 1 to 16, "
                                         r"not 17$"):
        config_values(P, L2Params(), L2Config(ways_used=17))
    with pytest.raises(ValueError, match=r"^sets_used must be a power of two from 1 to 128, "
                                         r"not 96$"):
        config_values(P, L2Params(), L2Config(sets_used=96))
    with pytest.raises(ValueError, match=r"^hit_latency must be an integer from 4 to 64 "
                                         r"cycles, not 3$"):
        config_values(P, L2Params(), L2Config(hit_latency=3))
    with pytest.raises(ValueError, match=r"^banks must be a power of two from 1 to 4, "
                                         r"not 8$"):
        L2Params(sets=4, banks=8)


# --- the exported Verilog under cocotb ------------------------------------------------------------

@pytest.mark.cocotb
def test_l2_cocotb_matches_the_model(sim, tmp_path, t3_options):
    """Random traffic under backpressure on the exported Verilog (Verilator and Icarus), then a
    flush: responses, memory's requests, the memory image and the counters are the model's."""
    from sim.harness.runner import run_for_result
    import sim.blocks.l2.cocotb_tests as tb
    lp = L2Params(sets=4, ways=4, mshrs=4, depth=16, windows=2, max_hit_latency=16)
    windows = traffic_windows(P, 12)
    config = L2Config(windows=windows, hit_latency=7)
    n = 4000 if t3_options.soak else 600
    traffic = {"n": n, "windows": windows, "seed": t3_options.seed}
    requests = random_requests(P, **traffic)
    env = {"i_p": 0.8, "o_p": 0.6, "mem_p": 0.6, "latency": [4, 40], "seed": t3_options.seed}
    traffic["windows"] = [[w.base, w.size] for w in windows]
    result = run_for_result(L2Cache(P, lp), "t3_l2", tb.__name__, "run_traffic", {
        "params": P.to_dict(), "lparams": lp.to_dict(), "traffic": traffic, "env": env,
        "registers": list(config_values(P, lp, config).items())}, sim, tmp_path)
    counters = dict(result["counters"])
    status = counters.pop("status")
    check_run(P, lp, config, requests, result["responses"], result["downstream"],
              {a: v for a, v in result["memory"]}, counters)
    assert status & Status.EMPTY and counters["lines"] == 0
    assert counters["write_backs"] and counters["flush_write_backs"] and counters["read_merged"]


def test_a_window_written_in_the_cycle_a_request_is_taken_is_refused():
    """The L2 is empty, but the STORE taken in that cycle was classified under the old window:
    the write must be refused (``config_busy``), else a READ under the new window would miss
    the STORE's dirty line and read memory (found by the ``l2_coherence`` proof)."""
    from hw.interfaces import Packer, mem_request_layout, mem_response_layout
    lp = L2Params(sets=4, ways=4, windows=1)
    dut = L2Cache(P, lp)
    pack = Packer(mem_request_layout(P)).pack
    unpack = Packer(mem_response_layout(P)).unpack
    out = {}

    async def bench(ctx):
        for name, value in config_values(P, lp, L2Config(windows=(WINDOW,))).items():
            await reg_write(ctx, dut.csr, dut.regs, name, value)
        while ctx.get(dut.regfile.rw("win0_size")) == 0 or not ctx.get(dut.i.ready):
            await ctx.tick()
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.mem.ready, 1)
        ctx.set(dut.mem_resp.valid, 0)
        # the STORE and the window's move, in one cycle
        addr, word = dut.regs.word_writes("win0_base", 0x8000)[0]
        ctx.set(dut.csr.addr, addr)
        ctx.set(dut.csr.w_data, word)
        ctx.set(dut.csr.w_stb, 1)
        ctx.set(dut.i.payload.as_value(), pack({"addr": WINDOW.base, "op": Op.STORE.value,
                                                "mask": FULL, "data": 0x5A}))
        ctx.set(dut.i.valid, 1)
        assert ctx.get(dut.i.ready)
        await ctx.tick()
        ctx.set(dut.csr.w_stb, 0)
        ctx.set(dut.i.payload.as_value(), pack({"addr": WINDOW.base, "op": Op.READ.value,
                                                "mask": FULL, "tag": 1}))
        await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)
        answers = []
        while len(answers) < 2:
            await ctx.tick()
            assert not ctx.get(dut.mem.valid), "a request went to memory"
            if ctx.get(dut.o.valid):
                answers.append(unpack(ctx.get(dut.o.payload.as_value())))
        out["answers"] = answers
        out["base"] = await reg_read(ctx, dut.csr, dut.regs, "win0_base")
        out["status"] = await reg_read(ctx, dut.csr, dut.regs, "status")

    run_testbench(dut, bench)
    assert out["base"] == WINDOW.base and out["status"] & Status.CONFIG_BUSY
    assert out["answers"][1]["data"] == 0x5A
