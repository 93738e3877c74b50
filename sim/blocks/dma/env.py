"""The DMA engine's surroundings, one cycle at a time, for both test layers.

:class:`DMAEnv` plays the Tracker (triggers), the CUs (remote stores), the memory controller
and DRAM (requests in, read responses out after a latency, stores and updates applied to a
byte image with the near-bank ALU's arithmetic) and the link (``tx`` frames back into ``rx``
after a latency: a loopback), each with its own seeded random stalls.  It knows nothing of the
simulator: every cycle the adapter calls :meth:`DMAEnv.drive` (the input port values for this
cycle, by exported port name) and then :meth:`DMAEnv.observe` with the output port values
sampled before the clock edge.  The Amaranth adapter (:mod:`sim.blocks.dma.amaranth_sim`) and the cocotb
agent (:mod:`sim.blocks.dma.cocotb_tests`) are a few lines each, so both layers check the same things.

Checked while running: a source (``mem``, ``tx``) that withdraws or changes a pending transfer
(AXI4-Stream / stream rules) fails at once, naming the port and cycle.
"""

import collections
import random

from dma.config import header_packer
from dma.model import frames_to_packets, read_beat
from hw.interfaces import (Op, Packer, Source, mem_request_layout, mem_response_layout,
                           trigger_layout)
from nmc.model import alu_reference


__all__ = ["DMAEnv", "INPUTS", "OUTPUTS", "run_model"]


INPUTS = ("trig__valid", "trig__payload", "remote__valid", "remote__payload", "mem__ready",
          "resp__valid", "resp__payload", "tx__tready", "rx__tvalid", "rx__tdata",
          "rx__tkeep", "rx__tlast", "rx__tuser")
OUTPUTS = ("trig__ready", "remote__ready", "mem__valid", "mem__payload", "resp__ready",
           "tx__tvalid", "tx__tdata", "tx__tkeep", "tx__tlast", "tx__tuser", "rx__tready")


class _Source:
    """Offers queued items; ``pause`` is the probability of not offering a new one."""

    def __init__(self, rng, pause):
        self.queue = collections.deque()
        self.offering = None
        self.rng, self.pause = rng, pause

    def next(self, now=None):
        if self.offering is None and self.queue:
            head = self.queue[0]
            due = head[0] if now is not None else None
            if (due is None or due <= now) and not (self.pause and self.rng.random() < self.pause):
                self.offering = self.queue.popleft()
        return self.offering

    def idle(self):
        return self.offering is None and not self.queue


class DMAEnv:
    """Cycle-stepped environment of one :class:`dma.rtl.DMAEngine` (see the module doc).

    Parameters
    ----------
    scenario : :class:`sim.blocks.dma.traffic.Scenario`
    trig_pause, remote_pause, resp_pause, rx_pause : float
        Probability that a source does not offer its next item in a cycle.
    mem_stall, tx_stall : float
        Probability that ``mem.ready`` / ``tx.tready`` is low in a cycle.
    mem_latency : int
        Cycles from a read's handshake to its response becoming available (>= 1).
    link : ``"loopback"``, ``"sink"`` or ``None``
        With ``"loopback"`` every frame sent on ``tx`` is offered on ``rx`` after
        ``link_latency`` cycles; with ``"sink"`` frames are collected and ``rx`` stays idle
        (the memory then serves reads only, as for a node whose neighbour sends nothing); with
        ``None`` the test drives ``rx``/``tx`` itself (e.g. with cocotbext-axi) and
        :meth:`drive` leaves them alone.
    error_reads : set of int
        Indices (in issue order) of reads answered with the error flag.
    bad_tags : set of int
        Indices of reads answered with a wrong tag.
    extra_resps, lost_resps : set of int
        Indices of reads answered twice (a duplicate follows the response), or never; a run
        with a lost response (or a bad tag) may end with a packet cut short on ``tx`` (the
        engine drops the responses after it and waits).
    link_fault : callable or None
        ``link_fault(frame) -> beats``: what the loopback delivers of each frame sent
        (:class:`sim.blocks.dma.faults.LinkFaults` drops, duplicates, truncates, corrupts).
    rx_frames : list of frames
        Extra frames (``[(tdata, tkeep, tuser, tlast), ...]``) offered on ``rx`` from the
        first cycle, e.g. malformed ones.
    """

    def __init__(self, params, dparams, scenario, *, seed=0, trig_pause=0.0, remote_pause=0.0,
                 resp_pause=0.0, rx_pause=0.0, mem_stall=0.0, tx_stall=0.0, mem_latency=8,
                 link="loopback", link_latency=4, error_reads=(), bad_tags=(), rx_frames=(),
                 extra_resps=(), lost_resps=(), link_fault=None):
        self.params, self.dparams = params, dparams
        rng = random.Random(seed)
        self.rng = rng
        self.memory = bytearray(scenario.memory)
        self.trig_pk = Packer(trigger_layout(params, dparams.commands))
        self.req_pk = Packer(mem_request_layout(params))
        self.resp_pk = Packer(mem_response_layout(params))
        self.hdr_pk = header_packer(params, dparams)
        self.trig = _Source(random.Random(rng.random()), trig_pause)
        self.trig.queue.extend(scenario.triggers)
        self.remote = _Source(random.Random(rng.random()), remote_pause)
        self.remote.queue.extend(scenario.remote_stores)
        self.resp = _Source(random.Random(rng.random()), resp_pause)
        self.rx = _Source(random.Random(rng.random()), rx_pause)
        self.rx.queue.extend((0, beat) for frame in rx_frames for beat in frame)
        self.mem_stall, self.tx_stall = mem_stall, tx_stall
        self.mem_latency, self.link, self.link_latency = mem_latency, link, link_latency
        self.error_reads, self.bad_tags = set(error_reads), set(bad_tags)
        self.extra_resps, self.lost_resps = set(extra_resps), set(lost_resps)
        self.link_fault = link_fault
        self._mem_rng = random.Random(rng.random())
        self._tx_rng = random.Random(rng.random())
        self.cycle = 0
        self.quiet = 0
        self.cut_frames = []        # frames a reset cut short
        self.remote_taken = []      # cycles the remote stores were taken
        self.reads = 0
        self.writes = []            # (cycle, request) applied to memory, in order
        self.read_log = []          # (cycle, request)
        self.frames, self._frame = [], []
        self.tx_beats = []          # cycle of every tx beat
        self.frame_starts = []      # cycle of every frame's first beat
        self.trig_taken = []        # cycle of every trigger handshake
        self._drv = {}
        self._pending = {}          # port -> (valid, payload) last cycle, for stability checks

    # --- per cycle ---------------------------------------------------------------------------

    def drive(self):
        now = self.cycle
        d = {}
        t = self.trig.next()
        d["trig__valid"] = int(t is not None)
        d["trig__payload"] = self.trig_pk.pack(t) if t is not None else 0
        r = self.remote.next()
        d["remote__valid"] = int(r is not None)
        d["remote__payload"] = self.req_pk.pack(r) if r is not None else 0
        d["mem__ready"] = int(not (self.mem_stall and self._mem_rng.random() < self.mem_stall))
        resp = self.resp.next(now)
        d["resp__valid"] = int(resp is not None)
        d["resp__payload"] = self.resp_pk.pack(resp[1]) if resp is not None else 0
        if self.link is not None:
            d["tx__tready"] = int(not (self.tx_stall and self._tx_rng.random() < self.tx_stall))
            beat = self.rx.next(now)
            d["rx__tvalid"] = int(beat is not None)
            tdata, tkeep, tuser, tlast = beat[1] if beat is not None else (0, 0, 0, 0)
            d.update({"rx__tdata": tdata, "rx__tkeep": tkeep, "rx__tuser": tuser,
                      "rx__tlast": tlast})
        self._drv = d
        return d

    def _stable(self, port, valid, payload, ready):
        """A transfer offered and not taken must be offered again, unchanged."""
        before = self._pending.get(port)
        if before is not None:
            assert valid and payload == before, \
                f"cycle {self.cycle}: {port} withdrew or changed a pending transfer"
        self._pending[port] = (payload if valid and not ready else None)

    def observe(self, out):
        """``out``: output values by port name; a data value may be ``None`` (X in a
        four-state simulator) only while its ``valid`` is low."""
        d, now = self._drv, self.cycle
        for valid, fields in (("mem__valid", ("mem__payload",)),
                              ("tx__tvalid", ("tx__tdata", "tx__tkeep", "tx__tlast",
                                              "tx__tuser"))):
            if out.get(valid):
                for name in fields:
                    assert out[name] is not None, f"cycle {now}: {name} is X while {valid}"
        busy = False
        if self.trig.offering is not None and out["trig__ready"]:
            self.trig.offering = None
            self.trig_taken.append(now)
            busy = True
        if self.remote.offering is not None and out["remote__ready"]:
            self.remote.offering = None
            self.remote_taken.append(now)
            busy = True
        self._stable("mem", out["mem__valid"], out["mem__payload"], d["mem__ready"])
        if out["mem__valid"] and d["mem__ready"]:
            busy = True
            req = self.req_pk.unpack(out["mem__payload"])
            if Op(req["op"]) == Op.READ:
                index = self.reads
                self.reads += 1
                self.read_log.append((now, req))
                tag = req["tag"]
                if index in self.bad_tags:
                    tag = (tag + 1) % (1 << self.params.tag_bits)
                resp = {"data": read_beat(self.memory, req["addr"], self.params), "tag": tag,
                        "op": Op.READ.value, "stream": req["stream"],
                        "error": int(index in self.error_reads)}
                copies = 0 if index in self.lost_resps else 2 if index in self.extra_resps else 1
                self.resp.queue.extend([(now + self.mem_latency, resp)] * copies)
            else:
                old = read_beat(self.memory, req["addr"], self.params)
                new, err = alu_reference(self.params, old, req["data"], req["mask"],
                                         req["op"], req["etype"])
                assert not err, f"cycle {now}: the engine wrote a refused update {req}"
                self.memory[req["addr"]:req["addr"] + self.params.beat_bytes] = \
                    new.to_bytes(self.params.beat_bytes, "little")
                self.writes.append((now, req))
        if self.resp.offering is not None and out["resp__ready"]:
            self.resp.offering = None
            busy = True
        if self.link is not None:
            beat = (out["tx__tdata"], out["tx__tkeep"], out["tx__tuser"], out["tx__tlast"])
            self._stable("tx", out["tx__tvalid"], beat, d["tx__tready"])
            if out["tx__tvalid"] and d["tx__tready"]:
                busy = True
                self.tx_beats.append(now)
                if not self._frame:
                    self.frame_starts.append(now)
                self._frame.append(beat)
                if beat[3]:
                    self.frames.append(self._frame)
                    if self.link == "loopback":
                        beats = self._frame if self.link_fault is None else \
                            self.link_fault(self._frame)
                        self.rx.queue.extend((now + self.link_latency, b) for b in beats)
                    self._frame = []
            if self.rx.offering is not None and out["rx__tready"]:
                self.rx.offering = None
                busy = True
        self.quiet = 0 if busy else self.quiet + 1
        self.cycle += 1

    def engine_reset(self):
        """The engine was reset: the frame it was sending ends cut short (delivered so in a
        loopback), the offers in progress are withdrawn (a reset engine took none of them), and
        the memory answers no read issued before the reset."""
        if self._frame:
            self.cut_frames.append(self._frame)
            if self.link == "loopback":
                self.rx.queue.extend((self.cycle + self.link_latency, b) for b in self._frame)
            self._frame = []
        if self.remote.offering is not None:
            self.remote.queue.appendleft(self.remote.offering)
        self.remote.offering = None
        self.trig.offering = None          # the caller offers the triggers again
        self.trig.queue.clear()
        self.resp.offering = None
        self.resp.queue.clear()
        self._pending.clear()               # a reset withdraws what the engine offered
        self.quiet = 0

    # --- results -----------------------------------------------------------------------------

    def done(self, quiet=40):
        return (self.trig.idle() and self.remote.idle() and self.resp.idle()
                and self.rx.idle() and (not self._frame or self.lost_resps or self.bad_tags)
                and self.quiet >= quiet)

    def packets(self):
        return frames_to_packets(self.frames, self.hdr_pk)

    def link_utilisation(self):
        """Beats per cycle on ``tx`` from its first beat to its last."""
        if len(self.tx_beats) < 2:
            return 0.0
        return len(self.tx_beats) / (self.tx_beats[-1] - self.tx_beats[0] + 1)


def run_model(params, dparams, scenario, env):
    """The model's view of a finished run: feed it the triggers and remote stores in the order
    the hardware took them, and the received packets; returns ``(model, expected image)``."""
    from dma.model import DMAModel, apply_requests, expected_image
    import numpy as np
    model = DMAModel(params, dparams, scenario.commands, scenario.gpu_id, scenario.remote)
    source = bytearray(scenario.memory)
    tiles = collections.defaultdict(list)
    for t in scenario.triggers:
        for pk in model.trigger(t, source):
            if pk.header["dst_gpu"] == scenario.gpu_id:
                cmd = scenario.commands[t["region"]]
                tiles[t["region"]].append(pk.header["addr"] - cmd.dst_base + cmd.src_base)
    for r in scenario.remote_stores:
        model.remote_store(r)
    expected = expected_image(params, scenario.memory, scenario.commands, tiles)
    if env.link == "sink":
        expected = np.frombuffer(bytes(scenario.memory), dtype=np.uint8)
    elif env.link is not None:
        image = bytearray(expected.tobytes())
        for pk in model.sent:
            if pk.header["source"] == Source.REMOTE.value:   # tiles: in the numpy image
                apply_requests(image, model.receive(pk, count=False), params)
        # what the receive side counts depends on how the stores were combined into packets:
        # count the packets actually sent (check_dma_run checks them against the model)
        for pk in env.packets():
            model.receive(pk)
        expected = np.frombuffer(bytes(image), dtype=np.uint8)
    return model, expected
