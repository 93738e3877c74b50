"""Fault campaign: the DMA engine's link loopback meets dropped, duplicated, truncated and
corrupted beats under random stalls on every port; every packet sent must be delivered intact or
reported, and nothing written outside the packets' destinations (the scoreboard is
:func:`sim.blocks.dma.faults.check_delivery`).  The driver meets random configurations
(Hypothesis): each call is taken or refused with a ``ValueError`` naming its field, a refused
call changes nothing, and what was taken always programs.  A short run by default; ``--soak``
runs many more seeds and examples.
"""

import collections

import pytest

from dma.config import DMAParams, Status
from hw.params import T3Params
from sim.blocks.dma.amaranth_sim import simulate_dma
from sim.blocks.dma.faults import KINDS, LinkFaults, check_delivery
from sim.blocks.dma.traffic import random_scenario


P, DP = T3Params(), DMAParams()
STALLS = dict(trig_pause=0.3, remote_pause=0.3, resp_pause=0.25, rx_pause=0.25,
              mem_stall=0.3, tx_stall=0.3, mem_latency=10)
RX_ERRORS = Status.RX_FRAMING | Status.RX_CHECK | Status.RX_WRONG_GPU | Status.RX_OPEN

#: Totals over the campaign, printed at the end (``pytest -s``) for the closing figures.
TALLY = collections.Counter()


def faulty_run(kinds, seed, rate=0.3):
    scenario = random_scenario(P, DP, seed, remote_stores=20)
    faults = LinkFaults(P, DP, kinds, rate=rate, seed=seed)
    run = simulate_dma(P, DP, scenario, seed=seed, link_fault=faults, **STALLS)
    intact, broken = check_delivery(P, DP, run.env, run.regs, scenario.gpu_id)
    # the sending side is untouched by the link's faults: every tile and store left once
    assert run.regs["tiles_sent"] == sum(c.tiles for c in scenario.commands)
    assert run.regs["remote_sent"] == 20
    assert run.regs["status"] & ~RX_ERRORS == 0, f"status {Status(run.regs['status'])!r}"
    return faults, intact, broken, run


@pytest.mark.parametrize("kind", KINDS)
def test_each_link_fault_is_delivered_or_reported(kind, t3_options):
    seeds = range(8) if t3_options.soak else range(2)
    injected = 0
    for s in seeds:
        faults, intact, broken, run = faulty_run([kind], 1000 * t3_options.seed + s)
        injected += faults.injected[kind]
        TALLY[f"{kind}:injected"] += faults.injected[kind]
        TALLY[f"{kind}:intact"] += intact
        TALLY[f"{kind}:reported"] += broken
        TALLY[f"{kind}:runs"] += 1
        if broken:
            assert run.regs["status"] & RX_ERRORS
    assert injected > 0, f"no {kind} fault was injected"


def test_mixed_faults_soak(t3_options):
    """Every kind at once, at a high rate: still intact or reported."""
    runs = 40 if t3_options.soak else 3
    for s in range(runs):
        faults, intact, broken, _ = faulty_run(KINDS, 5000 + 1000 * t3_options.seed + s,
                                               rate=0.6)
        TALLY["mixed:injected"] += sum(faults.injected.values())
        TALLY["mixed:runs"] += 1
        assert intact + broken > 0


def test_a_fault_free_loopback_is_all_intact():
    """The scoreboard can tell: without faults every packet is intact and nothing reported;
    a fault that goes unreported would fail it (checked on a doctored error count)."""
    faults, intact, broken, run = faulty_run(KINDS, 3, rate=0.0)
    assert broken == 0 and intact > 0 and run.regs["errors"] == 0
    _, _, broken, run = faulty_run(["drop"], 4, rate=1.0)
    assert broken > 0
    with pytest.raises(AssertionError, match=r"packets not delivered intact but only 0 errors"):
        check_delivery(P, DP, run.env, dict(run.regs, errors=0), 1)


def teardown_module():
    if TALLY:
        print("\nfault campaign:", dict(sorted(TALLY.items())))


# --- the driver under random configurations ------------------------------------------------------

def test_driver_takes_or_refuses_every_random_configuration(t3_options):
    """Random sequences of driver calls with good and bad arguments (Hypothesis): each call
    returns or raises ``ValueError`` with a one-line message; a refused call leaves the
    configuration as it was; whatever was taken programs every GPU (each register value fits
    its register)."""
    from hypothesis import HealthCheck, given, settings, strategies as st
    from sim.system.driver import Driver, Range
    from system.node import NodeParams, block_registers

    params, nparams = T3Params(), NodeParams()
    regs = block_registers(params, nparams)
    gpus = 4
    ints = st.one_of(st.integers(0, 4), st.integers(-2, 40),
                     st.sampled_from([16, 64, 256, 1 << 20]),
                     st.just(1.5), st.just(None), st.just("3"))
    dtypes = st.sampled_from(["fp16", "bf16", "fp32", "int32", "fp8", None])

    def call(driver, data):
        """One random driver call; returns its kind.  Half the calls draw every argument from
        values the driver should take, half mix in bad ones."""
        buffers = [b for g in range(gpus) for b in driver.configuration()[g].buffers.values()]
        sane = data.draw(st.booleans())

        def pick(good, bad=ints):
            return data.draw(good if sane else st.one_of(good, bad))

        def some_range():
            if not buffers or (not sane and data.draw(st.integers(0, 9)) == 0):
                return data.draw(st.sampled_from([None, 0, "C"]))
            buf = data.draw(st.sampled_from(buffers))
            first = pick(st.integers(0, buf.cols - 1))
            room = buf.cols - first if type(first) is int and 0 <= first < buf.cols else 8
            return buf.cols_range(first, pick(st.integers(1, room)))

        def dst_range(src, gpu):
            there = driver.configuration()[gpu % gpus].buffers.get("C") \
                if isinstance(gpu, int) else None
            if isinstance(src, Range) and there is not None and (sane or data.draw(
                    st.booleans())):
                return there.cols_range(src.first, src.count)
            return some_range()

        def dst_gpu(src):
            if isinstance(src, Range) and (sane or data.draw(st.booleans())):
                return (src.buffer.gpu - 1) % gpus
            return data.draw(ints)

        kind = data.draw(st.sampled_from(["malloc", "remote_map", "dma_map", "arbitration",
                                          "unmap", "gemm"]))
        if kind == "malloc":
            sizes = st.sampled_from([16, 32, 48])
            driver.malloc(data.draw(st.sampled_from(["A", "B", "C"])),
                          pick(st.integers(0, gpus - 1)), pick(sizes), pick(sizes),
                          pick(st.sampled_from(["fp16", "fp32"]), dtypes))
        elif kind == "remote_map":
            src = some_range()
            gpu = dst_gpu(src)
            driver.remote_map(src, gpu, dst_range(src, gpu))
        elif kind == "dma_map":
            src = some_range()
            gpu = dst_gpu(src)
            driver.dma_map(src, gpu, dst_range(src, gpu),
                           op=pick(st.sampled_from(["update", "store"]), st.just("add")),
                           updates_per_element=pick(st.integers(1, 4)),
                           granularity=pick(st.integers(1, 2)),
                           tile=pick(st.sampled_from([(16, 1), (32, 1)]),
                                     st.one_of(st.tuples(ints, ints), st.just(None))),
                           tracked_at_dst=pick(st.booleans(), st.sampled_from(["no", 1])))
        elif kind == "arbitration":
            driver.set_arbitration(pick(st.sampled_from(["MCA", "round_robin", "compute_first"]),
                                        st.sampled_from(["fifo", 3, None])),
                                   threshold=pick(st.one_of(st.none(), st.integers(0, 32))),
                                   auto_threshold=pick(st.booleans(), st.just(2)))
        elif kind == "unmap":
            data.draw(st.sampled_from([driver.remote_unmap, driver.dma_unmap]))(
                pick(st.one_of(st.none(), st.integers(0, gpus - 1))))
        else:
            out = data.draw(st.sampled_from(buffers)) if buffers else None
            driver.gemm(out, [[data.draw(st.integers(0, 300))]], pick(st.integers(1, 4)),
                        tracked_gpu=pick(st.one_of(st.none(), st.integers(0, gpus - 1))))
        return kind

    outcomes = collections.Counter()

    @settings(max_examples=3000 if t3_options.soak else 200, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        driver = Driver(params, nparams, gpus)
        dtype = data.draw(st.sampled_from(["fp16", "fp32"]))
        for g in range(gpus):
            driver.malloc("C", g, 32, 16, dtype)
        for _ in range(data.draw(st.integers(1, 12))):
            before = driver.configuration()
            try:
                outcomes[f"taken {call(driver, data)}"] += 1
            except ValueError as e:
                message = str(e)
                assert message and "\n" not in message, f"refusal message {message!r}"
                assert driver.configuration() == before, f"refused ({message}) but changed"
                outcomes["refused"] += 1
            for g in range(gpus):
                assert driver.register_writes(g, regs)

    run()
    for key, value in outcomes.items():
        TALLY[f"driver:{key}"] += value
    # the campaign reached every kind of call on both sides of the checks
    for kind in ("malloc", "remote_map", "dma_map", "arbitration", "unmap", "gemm"):
        assert outcomes[f"taken {kind}"], f"no {kind} call was ever taken"
    assert outcomes["refused"]


# --- reset mid-run -----------------------------------------------------------------------------

# early, mid-run, late; each must cut a packet (asserted below): at 40 the first one had not
# started once the trigger queue got its register slice
@pytest.mark.parametrize("at", [42, 150, 400])
def test_reset_mid_run_leaves_nothing_half_done(at, t3_options):
    """The engine is reset while tiles are in flight (``at`` cycles into the run), programmed
    again and given every trigger again, its link still delivering what was sent before: the
    packet the reset cut short is reported at the receiver (``rx_framing``), every frame sent
    after the reset is a whole packet the model would send, and the destination image ends
    exactly as a clean run leaves it (the commands store, so a tile sent twice is
    harmless)."""
    import dataclasses
    from dma.model import DMAModel, expected_image, frames_to_packets
    from hw.interfaces import Op
    seed = 700 + at + 1000 * t3_options.seed
    scenario = random_scenario(P, DP, seed)
    scenario = dataclasses.replace(scenario, commands=[
        dataclasses.replace(c, op=Op.STORE) for c in scenario.commands])
    run = simulate_dma(P, DP, scenario, seed=seed, reset_at=at, **STALLS)
    env = run.env
    model = DMAModel(P, DP, scenario.commands, scenario.gpu_id)
    memory = bytearray(scenario.memory)
    want = [pk for t in scenario.triggers for pk in model.trigger(t, memory)]
    sent = frames_to_packets(env.frames, env.hdr_pk)
    tiles = len(want)
    assert sorted(map(repr, sent[-tiles:])) == sorted(map(repr, want)), \
        "after the reset the engine sent other packets than a clean run"
    assert env.cut_frames, "the reset cut no packet: choose another cycle"
    assert run.regs["status"] & Status.RX_FRAMING
    tiles_sent = {c: [t["addr"] for t in scenario.triggers if t["region"] == c]
                  for c in range(len(scenario.commands))}
    image = expected_image(P, scenario.memory, scenario.commands, tiles_sent)
    assert bytes(env.memory) == bytes(image), "the destination differs from a clean run's"
    TALLY["reset:runs"] += 1
    TALLY["reset:cut packets"] += len(env.cut_frames)
