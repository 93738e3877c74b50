"""cocotb testbench of the DMA engine's exported Verilog.

:class:`EnvAgent` steps a :class:`sim.blocks.dma.env.DMAEnv` inside the :class:`sim.harness.agents.Bench`
(drive right after the edge, observe at ``ReadOnly``), so the cocotb layer checks exactly what
the Amaranth layer checks.  :func:`run_random` runs a :func:`sim.blocks.dma.traffic.random_scenario`
through the link loopback; :func:`run_axis` drives the link ports with cocotbext-axi's
``AxiStreamSource``/``AxiStreamSink`` instead; :func:`run_bench` measures link utilisation,
trigger-to-first-beat latency and simulation speed for ``t3 bench dma``;
:func:`run_depacketizer` drives the receive side alone (:class:`dma.depacketizer.Depacketizer`)
with random link traffic, framing faults included, against :func:`dma.model.depacketize`;
:func:`run_packetizer` the send side alone (:class:`dma.packetizer.Packetizer`) with random
tiles and remote runs, scored by :func:`dma.model.check_packetized`; :func:`run_combiner` the
write combining alone (:class:`dma.combiner.Combiner`) with random CU stores, against
:func:`dma.model.combine` and :func:`dma.model.check_combined`; :func:`run_reader` the tile
reader alone (:class:`dma.reader.TileReader`) with random tiles and an in-order memory.

Configuration (:func:`sim.harness.runner.tb_config`): ``params``, ``dparams``, ``seed``, ``scenario``
(keyword arguments of :func:`sim.blocks.dma.traffic.random_scenario`), ``env`` (keyword arguments of
:class:`sim.blocks.dma.env.DMAEnv`), ``out`` (JSON result file, for the command line).
"""

import collections
import json
import time

import cocotb

from dma.config import CMD, STAT_REGISTERS, DMAParams, dma_registers, register_values
from dma.model import check_dma_run, frames_to_packets
from hw.params import T3Params
from sim.harness.agents import Bench, CsrMaster
from sim.blocks.dma.env import INPUTS, OUTPUTS, DMAEnv, run_model
from sim.blocks.dma.traffic import long_transfer_scenario, random_scenario
from sim.harness.runner import tb_config


__all__ = ["EnvAgent", "run_random", "run_axis", "run_bench", "LinkBeatSource",
           "LinkBeatSink", "run_depacketizer", "run_packetizer", "run_combiner",
           "InOrderMemory", "run_reader"]


class EnvAgent:
    """Bench agent around a :class:`DMAEnv`: idle until :meth:`activate`."""

    def __init__(self, dut, env):
        self.env = env
        names = [n for n in INPUTS if env.link or "x__" not in n]
        self.inputs = {n: getattr(dut, n) for n in names}
        self.outputs = {n: getattr(dut, n) for n in OUTPUTS if env.link or "x__" not in n}
        self.active = False
        self._driven = False
        self._values = None

    def reset(self):
        for name, sig in self.inputs.items():
            sig.value = 0
        self._written = dict.fromkeys(self.inputs, 0)

    def activate(self):
        self.active = True

    def on_edge(self, cycle):
        if self._values is not None:
            self.env.observe(self._values)
            self._values = None
        self._driven = self.active
        if self.active:
            written = self._written
            for name, value in self.env.drive().items():
                # a write through the simulator interface is the costly part: skip repeats
                if name in self.inputs and written[name] != value:
                    self.inputs[name].value = value
                    written[name] = value

    #: data outputs, read only while their valid is high (they may be X otherwise)
    DATA = {"mem__valid": ("mem__payload",),
            "tx__tvalid": ("tx__tdata", "tx__tkeep", "tx__tlast", "tx__tuser")}

    def on_settle(self):
        if not self._driven:
            return
        values = {}
        outputs = self.outputs
        for name, sig in outputs.items():
            if name.endswith(("valid", "ready")):
                value = sig.value
                if not value.is_resolvable:
                    raise AssertionError(f"cycle {self.env.cycle}: {name} is {value}")
                values[name] = int(value)
        for valid, fields in self.DATA.items():
            for name in fields:
                if name not in outputs:
                    continue
                if values.get(valid):
                    value = outputs[name].value
                    if not value.is_resolvable:
                        raise AssertionError(f"cycle {self.env.cycle}: {name} is {value} "
                                             f"while {valid}")
                    values[name] = int(value)
                else:
                    values[name] = None
        self._values = values


async def _start(dut, params, dparams, scenario, env):
    bench = Bench(dut)
    regs = dma_registers(params, dparams)
    csr = bench.add(CsrMaster(dut, "csr", regs))
    agent = bench.add(EnvAgent(dut, env))
    await bench.start()
    for name, value in register_values(params, dparams, scenario.commands, scenario.gpu_id,
                                       scenario.remote, rx_window=scenario.rx_window):
        await csr.write_reg(name, value)
    await csr.write_reg("cmd", CMD.encode(clear=1))
    agent.activate()
    return bench, csr


async def _read_stats(csr):
    return {name: await csr.read_reg(name) for name in STAT_REGISTERS}


def _params(cfg):
    return T3Params(**cfg["params"]), DMAParams(**cfg["dparams"])


async def run_random(dut):
    """Random command table, triggers and remote stores through the loopback; scoreboard."""
    cfg = tb_config()
    params, dparams = _params(cfg)
    scenario = random_scenario(params, dparams, cfg["seed"], **cfg.get("scenario", {}))
    env = DMAEnv(params, dparams, scenario, seed=cfg["seed"], **cfg.get("env", {}))
    bench, csr = await _start(dut, params, dparams, scenario, env)
    await bench.until(env.done, 100 * (len(scenario.triggers) + 10) * 64)
    regs = await _read_stats(csr)
    model, expected = run_model(params, dparams, scenario, env)
    check_dma_run(model, env.packets(), env.memory, expected, regs)
    dut._log.info(f"{len(scenario.triggers)} triggers, {regs['tiles_sent']} tiles, "
                  f"{regs['remote_sent']} remote stores in {env.cycle} cycles")


def _beats_of(frame, params):
    """cocotbext-axi frame -> ``[(tdata, tkeep, tuser, tlast)]``."""
    n = params.beat_bytes
    data = bytes(frame.tdata)
    assert len(data) % n == 0, f"frame of {len(data)} bytes is not whole beats"
    count = len(data) // n
    # cocotbext-axi keeps sideband values per byte lane
    tuser = frame.tuser if isinstance(frame.tuser, list) else [frame.tuser] * len(data)
    return [(int.from_bytes(data[k * n:(k + 1) * n], "little"), (1 << n) - 1,
             int(tuser[k * n]),
             int(k == count - 1)) for k in range(count)]


async def run_axis(dut):
    """The link ports driven by cocotbext-axi: collect the frames the engine sends with an
    ``AxiStreamSink`` (with backpressure), check them against the model, then send them back
    with an ``AxiStreamSource`` (with gaps) and check the memory image."""
    from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

    from sim.harness.agents import random_pauses
    cfg = tb_config()
    params, dparams = _params(cfg)
    scenario = random_scenario(params, dparams, cfg["seed"], remote_stores=0)
    env = DMAEnv(params, dparams, scenario, seed=cfg["seed"], link=None,
                 **cfg.get("env", {}))
    dut.rx__tvalid.value = 0
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "tx_"), dut.clk, dut.rst)
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "rx_"), dut.clk, dut.rst)
    sink.set_pause_generator(random_pauses(0.3, cfg["seed"]))
    source.set_pause_generator(random_pauses(0.3, cfg["seed"] + 1))
    bench, csr = await _start(dut, params, dparams, scenario, env)
    model, expected = run_model(params, dparams, scenario, env)
    frames = []
    for _ in range(len(model.sent)):
        frames.append(_beats_of(await sink.recv(), params))
    sent = frames_to_packets(frames, env.hdr_pk)
    for beats in frames:
        await source.send(AxiStreamFrame(
            tdata=b"".join(d.to_bytes(params.beat_bytes, "little") for d, _, _, _ in beats),
            tuser=[u for _, _, u, _ in beats for _ in range(params.beat_bytes)]))
    await source.wait()
    await bench.until(env.done, 100_000)
    regs = await _read_stats(csr)
    # the model's receive side: every sent packet comes back
    for pk in sent:
        model.receive(pk)
    check_dma_run(model, sent, env.memory, expected, regs)
    dut._log.info(f"{len(frames)} frames through cocotbext-axi, {regs['beats_received']} "
                  f"beats written back")


async def run_bench(dut):
    """Long transfers into a sink that is always ready; memory latency ``cfg['latency']``."""
    cfg = tb_config()
    params, dparams = _params(cfg)
    scenario = long_transfer_scenario(params, dparams, cfg["tile_beats"], cfg["tiles"])
    env = DMAEnv(params, dparams, scenario, link="sink", mem_latency=cfg["latency"])
    bench, csr = await _start(dut, params, dparams, scenario, env)
    start, c0 = time.perf_counter(), env.cycle
    await bench.until(env.done, 1_000_000)
    wall = time.perf_counter() - start
    regs = await _read_stats(csr)
    model, expected = run_model(params, dparams, scenario, env)
    check_dma_run(model, env.packets(), env.memory, expected, regs)
    result = {"utilisation": env.link_utilisation(),
              "first_beat": env.tx_beats[0] - env.trig_taken[0],
              "cycles_per_s": (env.cycle - c0) / wall, "cycles": env.cycle - c0}
    with open(cfg["out"], "w") as f:
        json.dump(result, f)


@cocotb.test()
async def bench_long(dut):
    """``t3 bench dma``: see :func:`run_bench`."""
    await run_bench(dut)


class LinkBeatSource:
    """Bench agent that offers link beats ``(tdata, tkeep, tuser, tlast)`` on the port
    ``prefix`` (``rx``: ``rx__tdata``...) as they are, framing faults included (cocotbext-axi's
    source ends every frame with ``tlast``; a link that breaks must not).  ``tvalid`` holds
    until the beat is taken; pauses delay new offers.  ``taken`` lists, per beat, the value
    of the port ``watch`` in its handshake's cycle (the events a beat raises)."""

    def __init__(self, dut, beats, prefix="rx", watch="events"):
        self.sig = {k: getattr(dut, f"{prefix}__{k}")
                    for k in ("tdata", "tkeep", "tuser", "tlast", "tvalid", "tready")}
        self.watch = getattr(dut, watch)
        self.beats = list(beats)
        self.next = 0
        self.taken = []
        self._offering = False
        self._pause = None

    def set_pause_generator(self, generator):
        self._pause = iter(generator)

    def reset(self):
        self.sig["tvalid"].value = 0

    def done(self):
        return self.next == len(self.beats)

    def on_edge(self, cycle):
        if not self._offering:
            if self.next < len(self.beats) and not next(self._pause, False):
                tdata, tkeep, tuser, tlast = self.beats[self.next]
                self.sig["tdata"].value = tdata
                self.sig["tkeep"].value = tkeep
                self.sig["tuser"].value = tuser
                self.sig["tlast"].value = tlast
                self._offering = True
            self.sig["tvalid"].value = int(self._offering)

    def on_settle(self):
        if self._offering and self.sig["tready"].value:
            self.taken.append(int(self.watch.value))
            self.next += 1
            self._offering = False


async def run_depacketizer(dut):
    """The receive side alone: :func:`sim.blocks.dma.traffic.random_link_beats` (good packets
    and every framing fault) offered with pauses, ``o`` taken under backpressure; the requests
    written and each beat's events against :func:`dma.model.depacketize`."""
    import random

    from dma.depacketizer import RX_EVENTS
    from dma.model import depacketize
    from hw.interfaces import mem_request_layout
    from sim.blocks.dma.traffic import random_link_beats
    from sim.harness.agents import StreamSink, random_pauses
    cfg = tb_config()
    params, dparams = _params(cfg)
    gpu, (base, size) = cfg["gpu_id"], cfg["rx_window"]
    beats = random_link_beats(params, dparams, random.Random(cfg["seed"]), gpu,
                              cfg["packets"], (base, size))
    dut.gpu_id.value, dut.rx_base.value, dut.rx_end.value = gpu, base, base + size
    bench = Bench(dut)
    source = bench.add(LinkBeatSource(dut, beats))
    sink = bench.add(StreamSink(dut, "o", mem_request_layout(params)))
    source.set_pause_generator(random_pauses(cfg["rx_pause"], cfg["seed"]))
    sink.set_pause_generator(random_pauses(cfg["o_stall"], cfg["seed"] + 1))
    await bench.start()
    await bench.until(source.done, 20 * len(beats) + 100)
    want, want_events, want_open = depacketize(params, dparams, beats, gpu, (base, size))
    await bench.until(lambda: len(sink.received) >= len(want), 1000)
    await bench.cycles(10)
    names = (*RX_EVENTS, "packet")
    got_events = [{k for i, k in enumerate(names) if word >> i & 1} for word in source.taken]
    for k, (g, w) in enumerate(zip(got_events, want_events)):
        assert g == w, f"beat {k}: events {sorted(g)}, model {sorted(w)}"
    got = [item for _, item in sink.received]
    assert len(got) == len(want), f"{len(got)} requests written, model {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"request {k}: {g} != model {w}"
    assert bool(dut.open.value) == want_open
    seen = set().union(*got_events)
    assert seen == set(names), f"the traffic never raised {set(names) - seen}"
    dut._log.info(f"{len(beats)} beats, {len(got)} requests written, "
                  f"{sum(len(e) for e in got_events)} events, as the model")


class LinkBeatSink:
    """Bench agent that takes link beats on the port ``prefix`` (``tx``) with pauses on
    ``tready`` and records ``(tdata, tkeep, tuser, tlast)`` of each; it fails at once if a
    beat offered and not taken changes or is withdrawn (AXI4-Stream)."""

    def __init__(self, dut, prefix="tx"):
        self.sig = {k: getattr(dut, f"{prefix}__{k}")
                    for k in ("tdata", "tkeep", "tuser", "tlast", "tvalid", "tready")}
        self.beats = []
        self._pause = None
        self._ready = False
        self._offered = None

    def set_pause_generator(self, generator):
        self._pause = iter(generator)

    def reset(self):
        self.sig["tready"].value = 0

    def on_edge(self, cycle):
        self._ready = not next(self._pause, False)
        self.sig["tready"].value = int(self._ready)

    def on_settle(self):
        if not self.sig["tvalid"].value:
            assert self._offered is None, f"a beat offered was withdrawn: {self._offered}"
            return
        beat = tuple(int(self.sig[k].value) for k in ("tdata", "tkeep", "tuser", "tlast"))
        assert self._offered in (None, beat), f"{beat} offered after {self._offered}"
        if self._ready:
            self.beats.append(beat)
            self._offered = None
        else:
            self._offered = beat


async def run_packetizer(dut):
    """The send side alone: random tiles and remote runs offered with pauses on its four
    inputs, ``tx`` taken under backpressure; the link beats scored by
    :func:`dma.model.check_packetized`."""
    import random

    from amaranth.lib import data

    from dma.config import header_layout
    from dma.model import check_packetized
    from dma.packetizer import run_beat_layout
    from hw.interfaces import Source
    from sim.harness.agents import StreamSource, random_pauses
    from sim.blocks.dma.traffic import random_packets
    cfg = tb_config()
    params, dparams = _params(cfg)
    rng = random.Random(cfg["seed"])
    tiles = random_packets(params, rng, cfg["packets"], Source.DMA)
    runs = random_packets(params, rng, cfg["packets"], Source.REMOTE)
    hdr = header_layout(params, dparams)
    bench = Bench(dut)
    srcs = {
        "tile_hdr": (hdr, [h for h, _ in tiles]),
        "tile_data": (data.StructLayout({"data": params.beat_bits}),
                      [{"data": d} for _, beats in tiles for d, _ in beats]),
        "run_hdr": (hdr, [h for h, _ in runs]),
        "run_data": (run_beat_layout(params),
                     [{"data": d, "keep": k} for _, beats in runs for d, k in beats]),
    }
    for k, (name, (layout, items)) in enumerate(srcs.items()):
        src = bench.add(StreamSource(dut, name, layout))
        src.set_pause_generator(random_pauses(cfg["pause"], cfg["seed"] + k))
        for item in items:
            src.send_nowait(item)
    sink = bench.add(LinkBeatSink(dut))
    sink.set_pause_generator(random_pauses(cfg["tx_stall"], cfg["seed"] + 9))
    total = sum(1 + len(b) for _, b in tiles + runs)
    await bench.start()
    await bench.until(lambda: len(sink.beats) >= total, 20 * total)
    await bench.cycles(10)
    order = check_packetized(params, dparams, tiles, runs, sink.beats)
    dut._log.info(f"{order.count('tile')} tiles and {order.count('run')} runs, "
                  f"{len(sink.beats)} beats, scored")


class PulseWatch:
    """Bench agent that lists the cycles in which an output is not zero, numbered as
    :class:`sim.harness.agents.StreamSource` numbers a handshake (the edge that ends the
    cycle), and its values then."""

    def __init__(self, signal):
        self.signal = signal
        self.cycles, self.values = [], []
        self._cycle = 0

    def reset(self):
        pass

    def on_edge(self, cycle):
        self._cycle = cycle

    def on_settle(self):
        value = int(self.signal.value)
        if value:
            self.cycles.append(self._cycle + 1)
            self.values.append(value)


async def run_combiner(dut):
    """The write combining alone: :func:`sim.blocks.dma.traffic.random_remote_stores` into
    :func:`sim.blocks.dma.traffic.random_windows`, offered with pauses; the runs' headers and
    beats taken with stalls (``hdr_stall``, ``data_stall``).  Without stalls the runs must be
    exactly :func:`dma.model.combine`'s for the cycles the stores were taken in, with them
    :func:`dma.model.check_combined` holds; every dropped store raises ``remote_range`` in the
    cycle it is taken."""
    import random

    from dma.combiner import target_layout, target_of
    from dma.config import header_layout
    from dma.model import check_combined, combine
    from dma.packetizer import run_beat_layout
    from hw.interfaces import Packer, mem_request_layout
    from sim.blocks.dma.traffic import random_remote_stores, random_windows
    from sim.harness.agents import StreamSink, StreamSource, random_pauses
    cfg = tb_config()
    params, dparams = _params(cfg)
    rng = random.Random(cfg["seed"])
    gpu = cfg["gpu_id"]
    windows = random_windows(params, dparams, rng)
    stores = random_remote_stores(params, rng, windows, cfg["stores"])
    want_beats = sum(len(b) for _, b in combine(params, dparams, windows, gpu, stores)[0])
    dut.gpu_id.value = gpu
    dut.windows_written.value = 0
    target = Packer(target_layout(params, dparams))
    for k, w in enumerate(windows):
        getattr(dut, f"windows__{k}").value = target.pack(target_of(w))
    bench = Bench(dut)
    src = bench.add(StreamSource(dut, "remote", mem_request_layout(params)))
    src.set_pause_generator(random_pauses(cfg["pause"], cfg["seed"]))
    for store in stores:
        src.send_nowait(store)
    hdrs = bench.add(StreamSink(dut, "run_hdr", header_layout(params, dparams)))
    beats = bench.add(StreamSink(dut, "run_data", run_beat_layout(params)))
    stalled = cfg["hdr_stall"] or cfg["data_stall"]
    hdrs.set_pause_generator(random_pauses(cfg["hdr_stall"], cfg["seed"] + 1))
    beats.set_pause_generator(random_pauses(cfg["data_stall"], cfg["seed"] + 2))
    events = bench.add(PulseWatch(dut.events))     # [0] remote_range, [1] taken
    await bench.start()
    await bench.until(lambda: len(src.sent) == len(stores) and
                      len(beats.received) >= want_beats and
                      sum(h["beats"] for _, h in hdrs.received) >= want_beats,
                      40 * len(stores) + 200)
    await bench.cycles(2 * dparams.remote_flush + 8)
    assert sum(h["beats"] for _, h in hdrs.received) == want_beats == len(beats.received), \
        "more came out than the stores taken"
    # the cycles the stores were taken into the combining (its input slice's head), which
    # the flush counts from; each a cycle after the port's at the earliest
    taken_at = [c for c, v in zip(events.cycles, events.values) if v & 2]
    dropped_at = [c for c, v in zip(events.cycles, events.values) if v & 1]
    assert len(taken_at) == len(stores), f"{len(taken_at)} of {len(stores)} stores taken"
    assert all(t > c for t, (c, _) in zip(taken_at, src.sent)), "taken before it came"
    runs, k = [], 0
    for _, h in hdrs.received:
        runs.append((h, [(b["data"], b["keep"]) for _, b in beats.received[k:k + h["beats"]]]))
        k += h["beats"]
    exact, dropped = combine(params, dparams, windows, gpu, stores, taken_at)
    if stalled:
        check_combined(params, dparams, windows, gpu, stores, taken_at, runs)
    else:
        assert len(runs) == len(exact), f"{len(runs)} runs, the model {len(exact)}"
        for r, (g, w) in enumerate(zip(runs, exact)):
            assert g == w, f"run {r}: {g} != model {w}"
    assert dropped_at == [taken_at[i] for i in dropped], "remote_range not as the model's drops"
    dut._log.info(f"{len(stores)} stores, {len(dropped)} dropped, {len(runs)} runs "
                  f"({len(exact)} without stalls), as the model")


class InOrderMemory:
    """Bench agent: a memory that takes requests on the stream ``prefix`` (``read``) under
    stalls and answers each on ``resp`` (a :class:`sim.harness.agents.StreamSource`) after a
    random latency in ``latency`` cycles, in order, with ``answer(request)`` (a response
    dict).  ``requests`` lists the requests taken."""

    def __init__(self, dut, request_layout, resp, answer, latency, seed, stall=0.0,
                 prefix="read"):
        import random

        from sim.harness.agents import StreamSink, random_pauses
        self.sink = StreamSink(dut, prefix, request_layout)
        self.sink.set_pause_generator(random_pauses(stall, seed))
        self.resp, self.answer, self.latency = resp, answer, latency
        self.rng = random.Random(seed)
        self.due = collections.deque()
        self.requests = []
        self._cycle = 0

    def reset(self):
        self.sink.reset()

    def on_edge(self, cycle):
        self._cycle = cycle
        self.sink.on_edge(cycle)
        while len(self.requests) < len(self.sink.received):
            request = self.sink.received[len(self.requests)][1]
            self.requests.append(request)
            last = self.due[-1][0] if self.due else 0
            self.due.append((max(last, cycle + self.rng.randint(*self.latency)),
                             self.answer(request)))
        while self.due and self.due[0][0] <= cycle:
            self.resp.send_nowait(self.due.popleft()[1])

    def on_settle(self):
        self.sink.on_settle()


async def run_reader(dut):
    """The tile reader alone: :func:`sim.blocks.dma.traffic.random_jobs` offered with pauses,
    the reads taken under stalls by an :class:`InOrderMemory` of
    :func:`sim.blocks.dma.traffic.address_beat`, the headers and the payload taken under
    stalls; the headers in order, every read where :func:`dma.model.packet_addresses` puts the
    tile's beats (its fields and tag), the payload the memory's beats in order."""
    import random

    from dma.config import header_layout
    from dma.model import packet_addresses
    from dma.reader import job_layout
    from amaranth.lib import data

    from hw.interfaces import ElemType, Op, Packer, Source, Stream, mem_request_layout, \
        mem_response_layout
    from sim.blocks.dma.traffic import address_beat, random_jobs
    from sim.harness.agents import StreamSink, StreamSource, random_pauses
    cfg = tb_config()
    params, dparams = _params(cfg)
    jobs = random_jobs(params, random.Random(cfg["seed"]), cfg["tiles"])
    hdr_packer = Packer(header_layout(params, dparams))
    bench = Bench(dut)
    src = bench.add(StreamSource(dut, "job", job_layout(params, dparams)))
    src.set_pause_generator(random_pauses(cfg["pause"], cfg["seed"]))
    for header, addr in jobs:
        src.send_nowait({"hdr": hdr_packer.pack(header), "src": addr})
    resp = StreamSource(dut, "resp", mem_response_layout(params))
    resp.set_pause_generator(random_pauses(cfg["resp_pause"], cfg["seed"] + 1))
    memory = bench.add(InOrderMemory(
        dut, mem_request_layout(params), resp,
        lambda r: {"data": address_beat(params, r["addr"]), "tag": r["tag"],
                   "op": Op.READ.value, "stream": Stream.COMM.value},
        cfg["latency"], cfg["seed"] + 2, stall=cfg["read_stall"]))
    bench.add(resp)
    hdrs = bench.add(StreamSink(dut, "tile_hdr", header_layout(params, dparams)))
    hdrs.set_pause_generator(random_pauses(cfg["hdr_stall"], cfg["seed"] + 3))
    beats = bench.add(StreamSink(dut, "tile_data", data.StructLayout({"data": params.beat_bits})))
    events = bench.add(PulseWatch(dut.events))
    beats.set_pause_generator(random_pauses(cfg["data_stall"], cfg["seed"] + 4))
    addrs = [a for h, s in jobs for a in packet_addresses(params, dict(h, addr=s))]
    await bench.start()
    await bench.until(lambda: len(beats.received) >= len(addrs), 60 * len(addrs) + 200)
    await bench.cycles(20)
    assert [h for _, h in hdrs.received] == [h for h, _ in jobs], "headers differ"
    assert len(memory.requests) == len(addrs), f"{len(memory.requests)} reads, {len(addrs)} beats"
    for k, (r, a) in enumerate(zip(memory.requests, addrs)):
        assert (r["addr"], r["op"], r["stream"], r["source"], r["mask"], r["etype"], r["tag"]) \
            == (a, Op.READ.value, Stream.COMM.value, Source.DMA.value,
                (1 << params.beat_bytes) - 1, ElemType.FP16.value,
                k % (1 << params.tag_bits)), f"read {k}: {r}"
    got = [b["data"] for _, b in beats.received]
    assert got == [address_beat(params, a) for a in addrs], "payload differs"
    # events: bit 0 a read issued, bits 1 and 2 a response out of order or with an error
    assert sum(v & 1 for v in events.values) == len(addrs) and \
        not any(v & 6 for v in events.values), "events other than the reads"
    dut._log.info(f"{len(jobs)} tiles, {len(addrs)} reads and beats, as the model")
