"""The GPU-side traffic engine under Amaranth's simulator, request by request against its
golden model: GEMM programs (T3's flags, sequential stores, the isolated RS's free GEMM) and
step programs (reduce-scatter adds, copies, captures), under backpressure."""

import dataclasses

import numpy as np
import pytest

from hw.interfaces import ElemType
from hw.params import T3Params
from sim.blocks.engine.env import EngineEnv, simulate_engine
from sim.system.configure import allocate
from sim.system.driver import REMOTE_SPACE, Driver
from system.spec import node_for
from sim.system.workload import GemmSpec, Workload
from system.engine.config import MODE, STATUS, Z_CAPTURE, EngineParams, Kernel, desc_beats
from sim.system.programs import gemm_program
from system.engine.model import gemm_requests, run_steps
from system.engine.program import Step, pack_step, pack_wg, partial_beats, program_beats
from system.engine.rtl import CUEngine


P = T3Params()
EP = EngineParams(local_beats=256, slots=4, buffer_beats=32, pending=64)
PROG = 1 << EP.local_bits           # the bulk port's program-memory half


def _gemm_case(mode, gpus=2, g=1, free=False, cus=2, p=P, k_slice=None, flops=None):
    spec = GemmSpec(m=32, n=32 * gpus, k=32, wfs_per_wg=2, cus=cus, k_slice=k_slice,
                    flops_per_cycle=flops)
    wl = Workload(spec, gpus, p)
    nparams = node_for()
    layout = allocate(Driver(p, nparams, gpus), wl)
    program = gemm_program(wl, g, layout, mode, REMOTE_SPACE, free=free)
    partials = partial_beats(wl.partials[g], p.beat_bytes)
    return wl, layout, program, partials


def _run_gemm(program, partials, etype, mca=False, ready_p=0.7, seed=1, latency=5, p=P,
             flush=False, flush_delay=5, ep=EP):
    dut = CUEngine(p, ep)
    regs = [("mode", dut.regs["mode"].encode(kernel=Kernel.GEMM, etype=etype, mca=int(mca),
                                             flush=int(flush))),
            ("prog_base", 0), ("prog_count", len(program.wgs)), ("partials", 0),
            *program.registers.items()]
    load = list(enumerate(program_beats(p, [pack_wg(p, d) for d in program.wgs]), PROG))
    load += list(enumerate(partials))
    memory = {program.registers["a_base"] + p.beat_bytes * i: i for i in range(64)}
    env = EngineEnv(p, memory, REMOTE_SPACE, latency=latency, ready_p=ready_p, seed=seed)
    cycles, stats, _, strobes = simulate_engine(dut, env, regs, load, flush_delay=flush_delay)
    return env, stats, strobes


@pytest.mark.parametrize("mode, free", [("t3", False), ("sequential", False), ("t3", True)])
def test_gemm_requests_match_the_model(mode, free):
    wl, layout, program, partials = _gemm_case(mode, free=free)
    etype = ElemType.FP16.value
    env, stats, strobes = _run_gemm(program, partials, etype)
    want = gemm_requests(P, program, partials, etype)
    got = {}
    for _, req in env.requests:
        got.setdefault(req["wg_id"], []).append(req)
    assert sorted(got) == sorted(want)
    for wg_id, reqs in want.items():
        assert len(got[wg_id]) == len(reqs), f"WG {wg_id}"
        for i, (g_req, w_req) in enumerate(zip(got[wg_id], reqs)):
            assert g_req == w_req, f"WG {wg_id} request {i}: {g_req} != {w_req}"
    n = sum(len(r) for r in want.values())
    reads = sum(1 for r in want.values() for q in r if q["op"] == 0)
    assert stats["requests"] == n and stats["reads"] == reads and stats["stores"] == n - reads
    assert stats["status"] == STATUS.encode(done=1)
    # a remote store gets no response; every other request does
    assert stats["responses"] == n - len(env.remote)
    assert all(q["addr"] >= REMOTE_SPACE for q in env.remote)
    assert strobes == {"calib_start": [], "calib_end": [], "drain": [], "l2_flush": [],
                       "l2_flushed": []}


STREAMING = dataclasses.replace(EP, streaming=True)


def _per_wg(env):
    got = {}
    for _, req in env.requests:
        got.setdefault(req["wg_id"], []).append(req)
    return got


@pytest.mark.parametrize("mode, free", [("t3", False), ("sequential", False), ("t3", True)])
def test_a_streaming_engine_reads_slice_by_slice_as_the_model(mode, free):
    """A WG of a streaming engine reads its panels a K slice at a time (4 slices of 3 beats
    here: 2 of A, 1 of B, each from where the slice before ended), then stores its tiles,
    request for request as the model, under backpressure (a free GEMM: one slice, no
    reads)."""
    wl, _, program, partials = _gemm_case(mode, free=free, k_slice=8)
    assert wl.wg_slices() == 4
    assert program.registers["k_slices"] == (1 if free else 4)
    assert not free or program.registers["read_beats"] == 0
    etype = ElemType.FP16.value
    env, stats, _ = _run_gemm(program, partials, etype, ep=STREAMING)
    want = gemm_requests(P, program, partials, etype)
    assert _per_wg(env) == want
    reads = [q for r in want.values() for q in r if q["op"] == 0]
    assert len(reads) == (0 if free else len(program.wgs) * wl.wg_read_beats())
    # a WG's A panel is the 4 slices' A beats back to back, its B panel likewise
    for desc in program.wgs[:2] if not free else ():
        a = [q["addr"] for q in want[desc.wg_id] if q["op"] == 0][::3]
        assert a == [program.registers["a_base"] + 32 * (desc.a_off + 2 * j) for j in range(4)]
    assert stats["status"] == STATUS.encode(done=1)


def test_one_slice_streams_as_the_whole_panels():
    """With ``k_slices`` = 1 the streaming engine issues every request in the cycle the
    whole-panel engine does (the same program, the same backpressure)."""
    _, _, program, partials = _gemm_case("t3")
    etype = ElemType.FP16.value
    env, _, _ = _run_gemm(program, partials, etype, seed=3)
    one = dataclasses.replace(program, registers={**program.registers, "k_slices": 1})
    streaming, _, _ = _run_gemm(one, partials, etype, seed=3, ep=STREAMING)
    assert streaming.requests == env.requests


def test_a_slice_is_read_while_the_one_before_computes():
    """Two slices staged: slice j + 1's reads go out as slice j's compute starts, so with a
    compute longer than a slice's round trip a WG takes its slices' compute plus one round
    trip, and the whole-panel WG (the same reads and compute, K in one slice) each slice's
    reads and a round trip more.  One CU, no backpressure, a latency of 20 cycles."""
    latency, etype = 20, ElemType.FP16.value
    # one CU at 128 flop/cycle: a slice of 2 x 16 x 16 x 4 x 2 flop computes for 32 cycles
    _, _, program, partials = _gemm_case("sequential", cus=1, k_slice=4, flops=128)
    reg = program.registers
    s, r, c = reg["k_slices"], reg["read_beats"], reg["compute_cycles"]
    assert (s, r, c) == (8, 2, 32) and c > r + latency
    env, _, _ = _run_gemm(program, partials, etype, ready_p=1.0, latency=latency,
                          ep=STREAMING)
    whole = dataclasses.replace(program, registers={
        **reg, "k_slices": 1, "read_beats": s * r, "a_read": s * reg["a_read"],
        "compute_cycles": s * c})
    env1, _, _ = _run_gemm(whole, partials, etype, ready_p=1.0, latency=latency, ep=STREAMING)

    def span(env, wg_id):
        cycles = [(cycle, q["op"]) for cycle, q in env.requests if q["wg_id"] == wg_id]
        return cycles[0][0], next(cycle for cycle, op in cycles if op != 0)

    for desc in program.wgs:
        first, store = span(env, desc.wg_id)
        first1, store1 = span(env1, desc.wg_id)
        # the first slice's round trip, then every slice's compute, each ready in time
        trip = r + latency
        assert s * c + trip <= store - first <= s * c + trip + 4 * s, desc.wg_id
        # the whole panel: all its reads, their round trip, all the compute
        assert s * c + s * r + latency <= store1 - first1 <= s * c + s * r + latency + 4
    assert sorted(q["addr"] for _, q in env.requests) == \
        sorted(q["addr"] for _, q in env1.requests)


def test_descriptors_of_two_beats_on_a_128_bit_engine():
    """With 128-bit beats (the board's) a descriptor is two program beats, low half first:
    a GEMM program and a step program from a ``prog_base`` past zero run as the model says."""
    p = T3Params(beat_bits=128)
    assert desc_beats(P) == 1 and desc_beats(p) == 2
    etype = ElemType.FP16.value
    _, _, program, partials = _gemm_case("t3", p=p)
    env, stats, _ = _run_gemm(program, partials, etype, p=p)
    want = gemm_requests(p, program, partials, etype)
    got = {}
    for _, req in env.requests:
        got.setdefault(req["wg_id"], []).append(req)
    assert got == want and stats["status"] == STATUS.encode(done=1)

    rng = np.random.default_rng(7)
    n, beat = 6, p.beat_bytes
    memory = {0x1000 + beat * i: int(rng.integers(0, 1 << 62)) for i in range(n)}
    memory.update({0x2000 + beat * i: int(rng.integers(0, 1 << 62)) for i in range(n)})
    steps = [Step(n, 0x1000, REMOTE_SPACE + 0x400, 0x2000), Step(n, 0x2000, 20, z_kind=Z_CAPTURE)]
    want, captures = run_steps(p, steps, dict(memory), ElemType.INT32.value, REMOTE_SPACE)
    dut = CUEngine(p, EP, formats=(ElemType.INT32,))
    regs = [("mode", dut.regs["mode"].encode(kernel=Kernel.STEPS, etype=ElemType.INT32.value)),
            ("prog_base", 3), ("prog_count", len(steps)), ("remote_space", REMOTE_SPACE)]
    load = list(enumerate(program_beats(p, [pack_step(p, s) for s in steps]), PROG + 3 * 2))
    env = EngineEnv(p, memory, REMOTE_SPACE, ready_p=0.6, seed=4)
    _, stats, beats, _ = simulate_engine(dut, env, regs, load, read_back=range(20, 20 + n))
    assert [req for _, req in env.requests] == want
    assert beats == captures and stats["status"] == STATUS.encode(done=1)


def test_gemm_keeps_cus_wgs_in_flight_and_strobes_the_arbiter():
    """With ``mca`` the calibration window opens at the start and closes when the first
    stage's WGs (the first ring step's, more than ``cus``) have finished (``first_stage``),
    the drain comes with the last WG; at most ``cus`` WGs have requests between their first
    read and their last store."""
    wl, _, program, partials = _gemm_case("t3", cus=1)      # a stage of 2 WGs on 1 CU
    env, stats, strobes = _run_gemm(program, partials, ElemType.FP16.value, mca=True)
    # the window is the first stage: the first ring step's WGs (paper section 4.5)
    stage = {wg.wg_id for wg in wl.schedule[1] if wg.step == 1}
    assert program.registers["stage_wgs"] == len(stage) > program.registers["cus"]
    last = {}
    for cycle, req in env.requests:
        last[req["wg_id"]] = cycle
    assert max(last[w] for w in stage) < strobes["calib_end"][0]
    assert max(last[w] for w in last if w not in stage) > strobes["calib_end"][0]
    # registered strobes: the cycle after the start, after the first stage, after the last WG
    assert strobes["calib_start"] == [1]
    assert len(strobes["calib_end"]) == 1 and len(strobes["drain"]) == 1
    assert strobes["calib_end"][0] == stats["first_stage"] + 1
    assert strobes["calib_end"][0] < strobes["drain"][0] <= stats["cycles"] + 1
    spans = {}
    for cycle, req in env.requests:
        first, _ = spans.get(req["wg_id"], (cycle, cycle))
        spans[req["wg_id"]] = (first, cycle)
    for cycle in range(0, stats["cycles"]):
        live = sum(1 for a, b in spans.values() if a <= cycle <= b)
        assert live <= 1, f"{live} WGs in flight at cycle {cycle}"


@pytest.mark.parametrize("mode", ["sequential", "t3"])
def test_a_flushing_kernel_flushes_the_l2_after_its_last_response_and_waits(mode):
    """With ``mode.flush`` the engine strobes ``l2_flush`` once, after the kernel's last
    response (every request answered: the L2 holds nothing in flight), and is done only
    after ``l2_flushed``; the requests are the same as without."""
    _, _, program, partials = _gemm_case(mode)
    etype = ElemType.FP16.value
    plain, _, plain_strobes = _run_gemm(program, partials, etype)
    env, stats, strobes = _run_gemm(program, partials, etype, flush=True, flush_delay=37)
    assert [r for _, r in env.requests] == [r for _, r in plain.requests]
    assert plain_strobes["l2_flush"] == []
    assert len(strobes["l2_flush"]) == 1 and len(strobes["l2_flushed"]) == 1
    flush, = strobes["l2_flush"]
    assert flush > max(env.responses) and flush > max(c for c, _ in env.requests)
    assert strobes["l2_flushed"] == [flush + 37]
    # done (the last cycle the bench ran is the first with done high) after the flushed
    # strobe is registered
    assert stats["cycles"] >= flush + 37 + 1
    assert stats["status"] == STATUS.encode(done=1)


def _beats(rng, n, dtype):
    values = rng.standard_normal(n * 32 // np.dtype(dtype).itemsize).astype(dtype)
    raw = values.tobytes()
    return [int.from_bytes(raw[i:i + 32], "little") for i in range(0, len(raw), 32)]


@pytest.mark.parametrize("etype, dtype", [(ElemType.FP16, np.float16),
                                          (ElemType.FP32, np.float32)])
def test_steps_match_the_model(etype, dtype):
    """A reduce-scatter-like program: an add stored remotely (waiting for arrivals), an add
    stored locally, a copy, and a capture of the local result into the engine's memory."""
    rng = np.random.default_rng(3)
    n = 12
    x, y, z = 0x1000, 0x2000, 0x3000
    memory = {}
    for base in (x, y):
        for i, v in enumerate(_beats(rng, n, dtype)):
            memory[base + 32 * i] = v
    steps = [Step(n, x, REMOTE_SPACE + 0x400, y),
             Step(n, y, z, x, wait_arrivals=5),
             Step(n, z, REMOTE_SPACE + 0x800),
             Step(n, z, 40, z_kind=Z_CAPTURE)]
    want, captures = run_steps(P, steps, dict(memory), etype.value, REMOTE_SPACE)
    dut = CUEngine(P, EP)
    regs = [("mode", dut.regs["mode"].encode(kernel=Kernel.STEPS, etype=etype.value)),
            ("prog_base", 3), ("prog_count", len(steps)), ("remote_space", REMOTE_SPACE)]
    load = [(PROG + 3 + i, pack_step(P, s)) for i, s in enumerate(steps)]
    arrivals = range(200, 205)
    env = EngineEnv(P, memory, REMOTE_SPACE, ready_p=0.6, seed=4, arrivals=arrivals)
    cycles, stats, beats, _ = simulate_engine(dut, env, regs, load,
                                              read_back=range(40, 40 + n))
    got = [req for _, req in env.requests]
    assert len(got) == len(want)
    for i, (g_req, w_req) in enumerate(zip(got, want)):
        assert g_req == w_req, f"request {i}: {g_req} != {w_req}"
    assert beats == captures
    # the second step (from request 3n: n x reads, n y reads, n stores before it) waited for
    # the five arrivals
    assert env.requests[3 * n][0] > max(arrivals) >= env.requests[3 * n - 1][0]
    assert stats["arrivals"] == 5 and stats["status"] == STATUS.encode(done=1)


def test_a_bad_step_is_skipped_and_latched():
    dut = CUEngine(P, EP)
    steps = [Step(EP.buffer_beats + 1, 0x1000, 0x2000), Step(1, 0x1000, 0x2000)]
    regs = [("mode", dut.regs["mode"].encode(kernel=Kernel.STEPS)), ("prog_base", 0),
            ("prog_count", 2), ("remote_space", REMOTE_SPACE)]
    load = [(PROG + i, pack_step(P, s)) for i, s in enumerate(steps)]
    env = EngineEnv(P, {0x1000: 7}, REMOTE_SPACE)
    _, stats, _, _ = simulate_engine(dut, env, regs, load)
    assert [req["addr"] for _, req in env.requests] == [0x1000, 0x2000]
    assert env.memory[0x2000] == 7
    assert stats["status"] == STATUS.encode(bad_step=1, done=1)


@pytest.mark.parametrize("formats", [(ElemType.FP16,), ()])
def test_an_add_without_its_adders_is_skipped_and_latched(formats):
    """An engine built without fp32 adders (the board's have none) refuses an fp32 add step
    rather than storing ``x`` as if it were ``x + y``; a copy step of the same type runs."""
    dut = CUEngine(P, EP, formats=formats)
    steps = [Step(1, 0x1000, 0x2000, y=0x3000), Step(1, 0x1000, 0x2040)]
    regs = [("mode", dut.regs["mode"].encode(kernel=Kernel.STEPS, etype=ElemType.FP32.value)),
            ("prog_base", 0), ("prog_count", 2), ("remote_space", REMOTE_SPACE)]
    load = [(PROG + i, pack_step(P, s)) for i, s in enumerate(steps)]
    env = EngineEnv(P, {0x1000: 7, 0x3000: 9}, REMOTE_SPACE)
    _, stats, _, _ = simulate_engine(dut, env, regs, load)
    assert [req["addr"] for _, req in env.requests] == [0x1000, 0x2040]
    assert 0x2000 not in env.memory and env.memory[0x2040] == 7
    assert stats["status"] == STATUS.encode(bad_step=1, done=1)


def test_an_engine_without_formats_builds_no_alu():
    """With no formats every add step is refused (above), so no beat can reach an adder: the
    engine leaves out the near-bank ALU and its pipeline (on the board about 1,000 flip-flops
    per engine), and builds it as soon as one format is asked for."""
    from amaranth.hdl import Fragment

    def parts(formats):
        fragment = Fragment.get(CUEngine(P, EP, formats=formats), None)
        return [name for _, name, *_ in fragment.subfragments]

    assert "alu" in parts((ElemType.FP16,))
    assert "alu" not in parts(())
    assert {"opbuf", "stq"} <= set(parts(()))


# --- the exported Verilog under cocotb ------------------------------------------------------------

@pytest.mark.cocotb
@pytest.mark.parametrize("program", ["gemm", "streaming", "steps"])
def test_engine_cocotb_matches_the_model(program, sim, tmp_path):
    """The same comparisons on the exported Verilog (Verilator and Icarus); ``streaming``: a
    streaming engine's WGs in K slices."""
    from sim.harness.runner import run_for_result
    import sim.blocks.engine.cocotb_tests as tb
    etype = ElemType.FP16.value
    mode = MODE
    ep = STREAMING if program == "streaming" else EP
    if program != "steps":
        _, _, prog, partials = _gemm_case("t3", k_slice=8 if program == "streaming" else None)
        registers = [("mode", mode.encode(kernel=Kernel.GEMM, etype=etype)), ("prog_base", 0),
                     ("prog_count", len(prog.wgs)), ("partials", 0), *prog.registers.items()]
        load = [(PROG + i, pack_wg(P, d)) for i, d in enumerate(prog.wgs)]
        load += list(enumerate(partials))
        memory, read_back = {}, []
    else:
        rng = np.random.default_rng(5)
        memory = {0x1000 + 32 * i: v for i, v in enumerate(_beats(rng, 8, np.float16))}
        memory.update({0x2000 + 32 * i: v for i, v in enumerate(_beats(rng, 8, np.float16))})
        steps = [Step(8, 0x1000, 0x3000, 0x2000), Step(8, 0x3000, REMOTE_SPACE + 0x100),
                 Step(8, 0x3000, 16, z_kind=Z_CAPTURE)]
        registers = [("mode", mode.encode(kernel=Kernel.STEPS, etype=etype)), ("prog_base", 0),
                     ("prog_count", len(steps)), ("remote_space", REMOTE_SPACE)]
        load = [(PROG + i, pack_step(P, s)) for i, s in enumerate(steps)]
        read_back = list(range(16, 24))
    config = {"params": P.to_dict(), "eparams": ep.to_dict(), "registers": registers,
              "load": load, "read_back": read_back,
              "env": {"memory": list(memory.items()), "remote_space": REMOTE_SPACE,
                      "ready_p": 0.7, "seed": 2}}
    result = run_for_result(CUEngine(P, ep), "t3_engine", tb.__name__, "run_program", config,
                            sim, tmp_path)
    got = [req for _, req in result["requests"]]
    if program != "steps":
        want = gemm_requests(P, prog, partials, etype)
        per_wg = {}
        for req in got:
            per_wg.setdefault(req["wg_id"], []).append(req)
        assert per_wg == want
    else:
        want, captures = run_steps(P, steps, dict(memory), etype, REMOTE_SPACE)
        assert got == want
        assert {int(k): v for k, v in result["beats"].items()} == captures
    assert result["regs"]["status"] == STATUS.encode(done=1)
    assert result["regs"]["requests"] == len(got)
