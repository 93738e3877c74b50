"""Golden model of the DMA engine: what goes out on the link for a sequence of triggers and
remote stores, what a received packet writes, and the counters and status the hardware must
show.  Transaction level (the cycle timing is the RTL's business and is bounded in the tests);
the cocotb and Amaranth testbenches both check against it with :func:`check_dma_run`.
"""

import collections
import dataclasses

import numpy as np

from hw.interfaces import ElemType, Op, Packer, Source, Stream
from nmc.model import alu_reference, lane_dtype
from .config import (HEADER_CHECK_BITS, STATUS, Command, DMAParams, RemoteWindow, Status,
                     header_check, header_layout, header_packer, remote_windows)


__all__ = ["Packet", "DMAModel", "tile_beat_addresses", "packet_addresses", "apply_requests",
           "expected_image", "check_dma_run", "frames_to_packets", "packet_to_frame",
           "depacketize", "check_packetized", "combine", "check_combined"]


@dataclasses.dataclass
class Packet:
    """One link packet: ``header`` (a dict of :func:`dma.config.header_layout` fields) and
    ``beats`` (``[(data, keep), ...]``)."""
    header: dict
    beats: list

    def key(self):
        h = {k: int(v) for k, v in self.header.items()}
        return (tuple(sorted(h.items())), tuple(self.beats))


def tile_beat_addresses(params, cmd: Command, start):
    """Source beat addresses of the tile starting at ``start``, in the order they are sent."""
    seg = cmd.seg_beats(params)
    return [start + col * cmd.stride + k * params.beat_bytes
            for col in range(cmd.tile_cols) for k in range(seg)]


def packet_addresses(params, header):
    """Destination beat address of every payload beat of a packet with ``header``."""
    seg = header["seg_beats"]
    return [header["addr"] + (i // seg) * header["stride"] + (i % seg) * params.beat_bytes
            for i in range(header["beats"])]


def read_beat(memory, addr, params):
    return int.from_bytes(memory[addr:addr + params.beat_bytes], "little")


def write_beat(memory, addr, value, params):
    memory[addr:addr + params.beat_bytes] = value.to_bytes(params.beat_bytes, "little")


def apply_requests(memory, requests, params):
    """Apply ``STORE``/``UPDATE`` requests (dicts) to the bytearray ``memory`` in order, with
    the near-bank ALU's arithmetic (:func:`nmc.model.alu_reference`)."""
    for r in requests:
        if Op(r["op"]) == Op.READ:
            continue
        old = read_beat(memory, r["addr"], params)
        new, err = alu_reference(params, old, r["data"], r["mask"], r["op"], r["etype"])
        assert not err, f"refused update at 0x{r['addr']:x}"
        write_beat(memory, r["addr"], new, params)


class DMAModel:
    """The engine's behaviour, transaction by transaction.

    ``trigger(t, memory)`` takes one trigger (dict with ``wg_id``, ``wf_id``, ``addr``,
    ``region``) and returns the packets it releases (reading tile data from ``memory``);
    ``remote_store(req)`` the packet of one CU store to the remote window (or ``None``);
    ``receive(packet)`` the memory requests a received packet becomes.
    """

    def __init__(self, params, dparams: DMAParams, commands, gpu_id=0,
                 remote: RemoteWindow = None, rx_window=None):
        self.params, self.dparams = params, dparams
        self.commands = list(commands)
        self.gpu_id = gpu_id
        #: the remote_map windows (:func:`dma.config.remote_windows`: none, one or several)
        self.remote = remote_windows(remote)
        # (base, size) in bytes: where received beats may be written (the reset value's)
        self.rx_window = rx_window or (0, (1 << params.addr_bits) - 1)
        self.held = {c: [] for c in range(dparams.commands)}
        self.status = 0
        self.sent = []
        self.counters = dict.fromkeys(
            ("errors", "triggers", "blocks", "tiles_sent", "remote_sent", "beats_sent",
             "beats_received", "packets_received", "reads"), 0)

    def _error(self, bit):
        self.status |= bit
        self.counters["errors"] += 1

    def _command(self, region):
        if region < len(self.commands):
            return self.commands[region]
        return None

    def trigger(self, t, memory):
        p = self.params
        self.counters["triggers"] += 1
        cmd = self._command(t["region"])
        if cmd is None or cmd.tile_beats(p) >= 1 << self.dparams.len_bits:
            self._error(Status.NO_COMMAND)
            return []
        start = t["addr"]
        span = (cmd.tile_cols - 1) * cmd.stride + cmd.seg_bytes
        if start % p.beat_bytes or start < cmd.src_base or \
                start - cmd.src_base + span > cmd.size:
            self._error(Status.OUT_OF_REGION)
            return []
        if cmd.granularity > 1:
            held = self.held[t["region"]]
            held.append(t)
            if len(held) < cmd.granularity:
                return []
            release, held[:] = list(held), []
        else:
            release = [t]
        self.counters["blocks"] += 1
        packets = [self._tile_packet(cmd, tile, memory) for tile in release]
        self.sent += packets
        return packets

    def program(self, index, command, writes=8):
        """Write command ``index`` (a :class:`dma.config.Command`, or ``None`` to switch it
        off) with ``writes`` register writes (``register_values`` makes 8); refused, with
        ``status.cmd_busy`` and one error per write, while the command holds tiles of an
        incomplete block.  Returns whether the writes were taken."""
        if self.held[index]:
            for _ in range(writes):
                self._error(Status.CMD_BUSY)
            return False
        self.commands += [None] * (index + 1 - len(self.commands))
        self.commands[index] = command
        return True

    def forget(self):
        """``cmd.forget``: the held tiles are forgotten."""
        for held in self.held.values():
            held.clear()

    def _tile_packet(self, cmd, t, memory):
        p = self.params
        addrs = tile_beat_addresses(p, cmd, t["addr"])
        header = {
            "dst_gpu": cmd.dst_gpu, "src_gpu": self.gpu_id,
            "addr": cmd.dst_base + t["addr"] - cmd.src_base,
            "op": Op(cmd.op).value, "etype": ElemType(cmd.etype).value,
            "source": Source.DMA.value, "tracked": int(bool(cmd.tracked)),
            "wg_id": t["wg_id"], "wf_id": t["wf_id"], "beats": len(addrs),
            "seg_beats": cmd.seg_beats(p), "stride": cmd.stride,
        }
        full = (1 << p.beat_bytes) - 1
        beats = [(read_beat(memory, a, p), full) for a in addrs]
        self.counters["reads"] += len(addrs)
        self.counters["tiles_sent"] += 1
        self.counters["beats_sent"] += len(addrs)
        return Packet(header, beats)

    def remote_store(self, req):
        w = next((w for w in self.remote if w.src_base <= req["addr"] < w.src_base + w.size),
                 None)
        if w is None or Op(req["op"]) == Op.READ:
            self._error(Status.REMOTE_RANGE)
            return None
        header = {
            "dst_gpu": w.dst_gpu, "src_gpu": self.gpu_id,
            "addr": w.dst_base + req["addr"] - w.src_base, "op": int(req["op"]),
            "etype": int(req["etype"]), "source": Source.REMOTE.value,
            "tracked": int(req["tracked"]), "wg_id": req["wg_id"], "wf_id": req["wf_id"],
            "beats": 1, "seg_beats": 1, "stride": 0,
        }
        self.counters["remote_sent"] += 1
        self.counters["beats_sent"] += 1
        packet = Packet(header, [(req["data"], req["mask"])])
        self.sent.append(packet)
        return packet

    def receive(self, packet, count=True):
        """Memory requests of a well-formed received packet (wrong GPU: none, status; a beat
        outside the rx window: none, status); ``count=False`` leaves the counters and status
        alone."""
        h = packet.header
        if h["dst_gpu"] != self.gpu_id:
            if count:
                self._error(Status.RX_WRONG_GPU)
            return []
        base, size = self.rx_window
        out = []
        for a, (d, k) in zip(packet_addresses(self.params, h), packet.beats):
            if not base <= a < base + size:         # outside the rx window: not written
                if count:
                    self._error(Status.RX_WINDOW)
                continue
            out.append({"addr": a, "data": d, "mask": k, "op": h["op"],
                        "stream": Stream.COMM.value, "source": h["source"],
                        "wg_id": h["wg_id"], "wf_id": h["wf_id"], "tracked": h["tracked"],
                        "etype": h["etype"], "tag": 0})
        if count:
            self.counters["packets_received"] += 1
            self.counters["beats_received"] += len(out)
        return out


def depacketize(params, dparams: DMAParams, beats, gpu_id, rx_window=None):
    """The receive side beat by beat (:class:`dma.depacketizer.Depacketizer`): what the link
    beats ``[(tdata, tkeep, tuser, tlast), ...]`` become, whatever their framing.

    Returns ``(requests, events, open)``: the memory requests written (dicts of
    :func:`hw.interfaces.mem_request_layout`), for each beat the set of event names it raises
    (``rx_framing``, ``rx_check``, ``rx_wrong_gpu``, ``rx_window``, ``packet``), and whether
    a packet is still incomplete after the last beat.  ``rx_window`` is ``(base, size)`` in
    bytes (every address by default).  Independent of timing: backpressure only delays.
    """
    width = header_layout(params, dparams).size
    fields = Packer(header_layout(params, dparams))
    base, size = rx_window or (0, (1 << params.addr_bits) - 1)
    top = 1 << params.addr_bits
    state, header, addrs, i = "HEADER", None, [], 0
    requests, events = [], []
    for tdata, tkeep, tuser, tlast in beats:
        ev = set()
        if state == "HEADER" or tuser:
            if state == "PAYLOAD":
                ev.add("rx_framing")                # the packet this header cut short
            word = tdata & ((1 << width) - 1)
            h = fields.unpack(word)
            check = (tdata >> width) & ((1 << HEADER_CHECK_BITS) - 1)
            if not tuser or tlast or h["beats"] == 0 or h["seg_beats"] == 0:
                ev.add("rx_framing")
                state = "HEADER" if tlast else "DROP"
            elif check != header_check(word, width):
                ev.add("rx_check")
                state = "HEADER" if tlast else "DROP"
            elif h["dst_gpu"] != gpu_id:
                ev.add("rx_wrong_gpu")
                state = "DROP"
            else:
                ev.add("packet")
                header, i, state = h, 0, "PAYLOAD"
                # every address the header names, whole: past the space they are refused
                addrs = [header["addr"] + (k // header["seg_beats"]) * header["stride"] +
                         (k % header["seg_beats"]) * params.beat_bytes
                         for k in range(header["beats"])]
        elif state == "DROP":
            if tlast:
                state = "HEADER"
        elif addrs[i] >= top:           # past the address space: never wrapped to 0
            ev.add("rx_framing")
            state = "HEADER" if tlast else "DROP"
        else:
            if base <= addrs[i] < base + size:
                requests.append({
                    "addr": addrs[i], "data": tdata, "mask": tkeep, "op": header["op"],
                    "stream": Stream.COMM.value, "source": header["source"],
                    "wg_id": header["wg_id"], "wf_id": header["wf_id"],
                    "tracked": header["tracked"], "etype": header["etype"], "tag": 0})
            else:
                ev.add("rx_window")
            last = i == header["beats"] - 1
            i += 1
            if tlast:
                if not last:
                    ev.add("rx_framing")            # shorter than its header says
                state = "HEADER"
            elif last:
                ev.add("rx_framing")                # longer than its header says
                state = "DROP"
        events.append(ev)
    return requests, events, state == "PAYLOAD"


def check_packetized(params, dparams: DMAParams, tiles, runs, beats):
    """Scoreboard of the send side (:class:`dma.packetizer.Packetizer`): ``beats`` (the link
    beats ``(tdata, tkeep, tuser, tlast)`` it sent) must be the packets of ``tiles`` and
    ``runs`` (each ``(header dict, [(data, keep), ...])``), each kind in its order, each packet
    whole: a header beat (``tuser``, every byte kept, the header and its check field, nothing
    above them) then its payload beats, ``tlast`` on the last and nowhere else.  Which kind
    goes next depends on timing; returns the kinds in the order sent (``"tile"``/``"run"``).
    Raises ``AssertionError`` naming the first disagreement."""
    packer = header_packer(params, dparams)
    full = (1 << params.beat_bytes) - 1
    queues = {"tile": collections.deque(tiles), "run": collections.deque(runs)}
    order, k = [], 0
    while k < len(beats):
        tdata, tkeep, tuser, tlast = beats[k]
        assert tuser == 1 and tkeep == full and tlast == 0, \
            f"beat {k}: a packet starts with (tuser {tuser}, tkeep {tkeep:#x}, tlast {tlast})"
        assert tdata >> (packer.width + HEADER_CHECK_BITS) == 0, \
            f"beat {k}: bits above the header's check field"
        header = packer.unpack(tdata)       # raises on a wrong check field
        kind = next((q for q in ("tile", "run") if queues[q] and
                     queues[q][0][0] == header), None)
        assert kind is not None, f"beat {k}: header {header} is neither the next tile's " \
            f"nor the next run's"
        _, payload = queues[kind].popleft()
        sent = beats[k + 1:k + 1 + len(payload)]
        assert len(sent) == len(payload), f"beat {k}: the {kind} packet is cut short"
        for j, ((d, keep), (td, tk, tu, tl)) in enumerate(zip(payload, sent)):
            assert (td, tk) == (d, keep), f"{kind} packet at beat {k}, payload beat {j} differs"
            assert tu == 0 and tl == (j == len(payload) - 1), \
                f"{kind} packet at beat {k}, payload beat {j}: tuser {tu}, tlast {tl}"
        order.append(kind)
        k += 1 + len(payload)
    left = {q: len(v) for q, v in queues.items() if v}
    assert not left, f"packets never sent: {left}"
    return order


_RUN_FIELDS = ("op", "etype", "tracked", "wg_id", "wf_id")


def _run_header(params, window, gpu_id, store):
    """The header of a run that opens with ``store`` in ``window``."""
    return {"dst_gpu": window.dst_gpu, "src_gpu": gpu_id,
            "addr": (window.dst_base + store["addr"] - window.src_base)
            % (1 << params.addr_bits),
            "op": int(store["op"]), "etype": int(store["etype"]),
            "source": Source.REMOTE.value, "tracked": int(store["tracked"]),
            "wg_id": int(store["wg_id"]), "wf_id": int(store["wf_id"]),
            "beats": 1, "seg_beats": 1, "stride": 0}


def _window_of(windows, store):
    """The index of the lowest window that holds ``store``, or None (also for a READ)."""
    if Op(store["op"]) == Op.READ:
        return None
    return next((k for k, w in enumerate(windows)
                 if w.src_base <= store["addr"] < w.src_base + w.size), None)


def _continues(params, dparams, run, store, k):
    """Whether ``store`` (in window ``k``) may join ``run`` (``[window, header, stores]``)."""
    last = run[2][-1]
    return (k == run[0] and len(run[2]) < dparams.remote_burst
            and store["addr"] == last["addr"] + params.beat_bytes
            and all(int(store[f]) == int(last[f]) for f in _RUN_FIELDS))


def combine(params, dparams: DMAParams, windows, gpu_id, stores, taken_at=None):
    """The remote-store write combining (:class:`dma.combiner.Combiner`): the runs that the CU
    stores ``stores`` (dicts of :func:`hw.interfaces.mem_request_layout`) become.

    A store in a window (the lowest that holds it; :class:`dma.config.RemoteWindow`) joins the
    open run when it continues it (the next address, the same ``op``, ``etype``, ``tracked``,
    ``wg_id``, ``wf_id`` and window, fewer than ``remote_burst`` stores so far) and, when
    ``taken_at`` gives the cycle each store was taken in, came at most ``remote_flush`` cycles
    after the last (the hardware's exact rule while its run queue has room; later the run has
    left).  A ``READ`` or a store in no window is dropped.  Returns ``(runs, dropped)``: the
    runs as ``(header, [(data, mask), ...])`` and the indices of the dropped stores.
    """
    windows = remote_windows(windows)
    runs, dropped, run, last_at = [], [], None, None
    for i, store in enumerate(stores):
        k = _window_of(windows, store)
        if k is None:
            dropped.append(i)
            continue
        at = None if taken_at is None else taken_at[i]
        late = at is not None and last_at is not None and at - last_at > dparams.remote_flush
        if run is not None and not late and _continues(params, dparams, run, store, k):
            run[2].append(store)
            run[1]["beats"] = run[1]["seg_beats"] = len(run[2])
        else:
            run = [k, _run_header(params, windows[k], gpu_id, store), [store]]
            runs.append(run)
        last_at = at
    return ([(h, [(int(s["data"]), int(s["mask"])) for s in st]) for _, h, st in runs],
            dropped)


def check_combined(params, dparams: DMAParams, windows, gpu_id, stores, taken_at, runs):
    """Scoreboard of the write combining when its run queue may have been full (a run then
    closes late and may take stores that came later than ``remote_flush``): ``runs`` (the
    ``(header, beats)`` the combiner sent) must hold the stores in windows, in order, each
    whole; each run one that :func:`combine` could have made (its stores consecutive, of the
    same attributes and window, at most ``remote_burst``, its header from its first store);
    and a run may end only where :func:`combine` with ``taken_at`` ends one (a different store,
    a full run, or a gap of more than ``remote_flush`` cycles).  Raises ``AssertionError``
    naming the first disagreement."""
    windows = remote_windows(windows)
    kept = [i for i, s in enumerate(stores) if _window_of(windows, s) is not None]
    j = 0
    for r, (header, beats) in enumerate(runs):
        first = stores[kept[j]] if j < len(kept) else None
        assert first is not None, f"run {r}: no store left for it"
        want = _run_header(params, windows[_window_of(windows, first)], gpu_id, first)
        want["beats"] = want["seg_beats"] = len(beats)
        assert header == want, f"run {r}: header {header}, its first store gives {want}"
        assert 1 <= len(beats) <= dparams.remote_burst, f"run {r}: {len(beats)} stores"
        members = [stores[i] for i in kept[j:j + len(beats)]]
        assert beats == [(int(s["data"]), int(s["mask"])) for s in members], \
            f"run {r}: its beats are not stores {kept[j:j + len(beats)]}"
        run = [_window_of(windows, first), header, [first]]
        for i in kept[j + 1:j + len(beats)]:
            assert _continues(params, dparams, run, stores[i], _window_of(windows, stores[i])), \
                f"run {r}: store {i} does not continue it"
            run[2].append(stores[i])
        j += len(beats)
        if j < len(kept):
            nxt = stores[kept[j]]
            late = taken_at[kept[j]] - taken_at[kept[j - 1]] > dparams.remote_flush
            assert late or not _continues(params, dparams, run, nxt, _window_of(windows, nxt)), \
                f"run {r} ended before store {kept[j]}, which continues it " \
                f"{taken_at[kept[j]] - taken_at[kept[j - 1]]} cycles after the last"
    assert j == len(kept), f"stores {kept[j:]} in no run"


def packet_to_frame(params, packet, header_packer):
    """``[(tdata, tkeep, tuser, tlast), ...]`` beats of ``packet`` on the link."""
    beats = [(header_packer.pack(packet.header), (1 << params.beat_bytes) - 1, 1, 0)]
    beats += [(d, k, 0, 0) for d, k in packet.beats]
    beats[-1] = beats[-1][:3] + (1,)
    return beats


def frames_to_packets(frames, header_packer):
    """Packets from link frames ``[[(tdata, tkeep, tuser, tlast), ...], ...]`` (one list per
    ``tlast``-terminated frame; ``header_packer`` a :class:`dma.config.HeaderPacker`); a frame
    that does not start with a header beat, whose header fails its check, or whose length
    disagrees with its header, raises ``AssertionError``."""
    packets = []
    for frame in frames:
        tdata, _, tuser, _ = frame[0]
        assert tuser == 1, f"frame {len(packets)} does not start with a header beat"
        try:
            header = header_packer.unpack(tdata)
        except ValueError as e:
            raise AssertionError(f"frame {len(packets)}: {e}") from None
        beats = [(d, k) for d, k, u, _ in frame[1:]]
        assert all(u == 0 for _, _, u, _ in frame[1:]), f"frame {len(packets)}: tuser on payload"
        assert len(beats) == header["beats"], \
            f"frame {len(packets)}: {len(beats)} payload beats, header says {header['beats']}"
        assert frame[-1][3] == 1 and all(b[3] == 0 for b in frame[:-1]), \
            f"frame {len(packets)}: tlast misplaced"
        packets.append(Packet(header, beats))
    return packets


def expected_image(params, memory0, commands, tiles_sent, gpu_is_dst=True):
    """The destination image numpy expects: for every command, each tile whose start is in
    ``tiles_sent[command index]`` is copied (``STORE``) or added (``UPDATE``, in the element
    type) from the source array into the destination array; everything else is unchanged.

    ``memory0`` is the image before the run (the source and, for a loopback, the destination
    in the same memory).  Independent of the model above: whole arrays through numpy.
    """
    image = np.frombuffer(bytes(memory0), dtype=np.uint8).copy()
    for index, cmd in enumerate(commands):
        eb = cmd.elem_bytes
        dt = lane_dtype(ElemType(cmd.etype))
        count = cmd.ld * cmd.cols
        src = np.frombuffer(bytes(memory0), dtype=dt, count=count,
                            offset=cmd.src_base).reshape(cmd.cols, cmd.ld)
        dst = image[cmd.dst_base:cmd.dst_base + count * eb].view(dt).reshape(cmd.cols, cmd.ld)
        for start in tiles_sent.get(index, ()):
            e = (start - cmd.src_base) // eb
            col, row = divmod(e, cmd.ld)
            rs, cs = slice(row, row + cmd.tile_rows), slice(col, col + cmd.tile_cols)
            if Op(cmd.op) == Op.STORE:
                dst[cs, rs] = src[cs, rs]
            else:
                with np.errstate(all="ignore"):
                    dst[cs, rs] = (dst[cs, rs] + src[cs, rs]).astype(dt)
    return image


def remote_beats(packets, params):
    """Per-store records ``(header fields without beats/seg_beats/stride/addr, addr, data,
    keep)`` of remote packets, in order."""
    out = []
    for pk in packets:
        h = {k: int(v) for k, v in pk.header.items()}
        base = {k: v for k, v in h.items() if k not in ("beats", "seg_beats", "stride", "addr")}
        for addr, (d, k) in zip(packet_addresses(params, h), pk.beats):
            out.append((tuple(sorted(base.items())), addr, d, k))
    return out


def _set(status):
    """The names of the ``status`` bits set in ``status``."""
    return [name for name, bit in STATUS.decode(status).items() if bit]


def check_dma_run(model: DMAModel, sent_packets, memory, expected, regs=None):
    """Scoreboard.  ``sent_packets``: what the hardware sent on ``tx`` (in order);
    ``memory``/``expected``: the final image and numpy's; ``regs``: the statistics registers
    read back.  Tile packets must equal the model's one for one; remote packets (write
    combining groups stores by timing) must carry the model's stores in order, each packet at
    most ``remote_burst`` beats of consecutive addresses.  Raises ``AssertionError`` naming the
    first disagreement."""
    p = model.params
    want_tiles = [pk for pk in model.sent if pk.header["source"] == Source.DMA.value]
    want_remote = [pk for pk in model.sent if pk.header["source"] == Source.REMOTE.value]
    got_tiles = [pk for pk in sent_packets if pk.header["source"] == Source.DMA.value]
    got_remote = [pk for pk in sent_packets if pk.header["source"] == Source.REMOTE.value]
    assert len(got_tiles) == len(want_tiles), \
        f"{len(got_tiles)} tile packets sent, model says {len(want_tiles)}"
    for i, (g, w) in enumerate(zip(got_tiles, want_tiles)):
        gh = {k: int(v) for k, v in g.header.items()}
        assert gh == w.header, f"tile packet {i}: header {gh} != model {w.header}"
        assert g.beats == w.beats, f"tile packet {i} (header {w.header}): payload differs"
    for i, pk in enumerate(got_remote):
        h = pk.header
        assert 1 <= h["beats"] <= model.dparams.remote_burst and h["seg_beats"] == h["beats"], \
            f"remote packet {i}: {h['beats']} beats, segment {h['seg_beats']}"
    got_r, want_r = remote_beats(got_remote, p), remote_beats(want_remote, p)
    assert len(got_r) == len(want_r), f"{len(got_r)} remote stores sent, model says {len(want_r)}"
    for i, (g, w) in enumerate(zip(got_r, want_r)):
        assert g == w, f"remote store {i}: sent {g}, model says {w}"
    got = np.frombuffer(bytes(memory), dtype=np.uint8)
    diff = np.flatnonzero(got != expected)
    assert diff.size == 0, (f"memory differs from numpy at {diff.size} bytes, first at "
                            f"0x{diff[0]:x}: 0x{got[diff[0]]:02x} != 0x{expected[diff[0]]:02x}")
    if regs is not None:
        assert regs["status"] == model.status, \
            f"status {_set(regs['status'])} != model {_set(model.status)}"
        for name, value in model.counters.items():
            assert regs[name] == value, f"counter {name} = {regs[name]}, model says {value}"
        assert regs["remote_packets"] == len(got_remote), \
            f"remote_packets = {regs['remote_packets']}, {len(got_remote)} were sent"
