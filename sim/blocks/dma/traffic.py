"""Random DMA scenarios: command tables laid out with guard words in one memory image, source
and destination contents, triggers in random order, CU stores to a remote window.

A scenario is a loopback: the engine's GPU number is every command's ``dst_gpu``, so the
packets it sends come back on its own ``rx`` (directly or through the test's link model) and
the destinations live in the same memory as the sources.
"""

import dataclasses
import random

import numpy as np

from dma.config import (HEADER_CHECK_BITS, Command, DMAParams, RemoteWindow, check_commands,
                        check_remotes, header_packer)
from hw.interfaces import ELEM_BYTES, ElemType, Op, Source
from nmc.model import lane_dtype


__all__ = ["Scenario", "random_scenario", "long_transfer_scenario", "random_values",
           "LINK_FAULTS", "random_link_beats", "random_packets", "random_windows",
           "random_remote_stores", "random_jobs", "address_beat"]


@dataclasses.dataclass
class Scenario:
    commands: list
    memory: bytearray           # initial image
    triggers: list              # trigger dicts in the order they are offered
    remote: RemoteWindow = None
    remote_stores: list = dataclasses.field(default_factory=list)
    gpu_id: int = 0
    rx_window: tuple = None     # (base, size) where received beats may land; None: anywhere


def random_values(rng, etype, count):
    """Finite random elements of ``etype`` (numpy array), spread over a few binades."""
    etype = ElemType(etype)
    if etype == ElemType.INT32:
        return rng.integers(-2**31, 2**31, size=count, dtype=np.int64).astype(np.int32)
    values = rng.standard_normal(count) * np.exp2(rng.integers(-4, 5, size=count))
    return values.astype(np.float32).astype(lane_dtype(etype))


def _align(value, to):
    return -(-value // to) * to


def random_command(params, dparams, rng: random.Random, src_base, dst_base, gpu_id):
    beat = params.beat_bytes
    etype = rng.choice(list(ElemType))
    eb = ELEM_BYTES[etype]
    per_beat = beat // eb
    tile_rows = per_beat * rng.randint(1, 2)
    tile_cols = rng.randint(1, 4)
    rows = tile_rows * rng.randint(1, 4)
    cols = tile_cols * rng.randint(1, 4)
    ld = rows + per_beat * rng.randint(0, 1)
    tiles = (rows // tile_rows) * (cols // tile_cols)
    grans = [g for g in range(1, min(tiles, dparams.max_granularity) + 1) if tiles % g == 0]
    return Command(src_base=src_base, rows=rows, cols=cols, ld=ld, tile_rows=tile_rows,
                   tile_cols=tile_cols, dst_gpu=gpu_id, dst_base=dst_base,
                   op=rng.choice([Op.STORE, Op.UPDATE]), etype=etype,
                   granularity=rng.choice(grans), tracked=bool(rng.getrandbits(1)))


def _fill(nprng, memory, base, size, etype):
    eb = ELEM_BYTES[ElemType(etype)]
    memory[base:base + size] = random_values(nprng, etype, size // eb).tobytes()


def random_scenario(params, dparams: DMAParams, seed, commands=None, remote_stores=0,
                    gpu_id=1, guard=64):
    """A random command table (``commands`` entries, default all of them), every tile of every
    command triggered once in a random order with random ``wg_id``/``wf_id``, and
    ``remote_stores`` random CU stores to a remote window."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    beat = params.beat_bytes
    guard = _align(guard, beat)
    n = dparams.commands if commands is None else commands
    cursor = guard
    table = []
    for _ in range(n):
        # the source at the cursor; its size depends on the command, so draw, then place
        probe = random_command(params, dparams, rng, 0, 0, gpu_id)
        src = cursor
        dst = _align(src + probe.size + guard, beat)
        cmd = dataclasses.replace(probe, src_base=src, dst_base=dst)
        table.append(cmd)
        cursor = _align(dst + cmd.size + guard, beat)
    window = None
    if remote_stores and dparams.remote_windows == 1:
        size = 16 * beat
        window = RemoteWindow(src_base=1 << (params.addr_bits - 2),
                              size=size, dst_gpu=gpu_id, dst_base=cursor)
        cursor = _align(cursor + size + guard, beat)
    elif remote_stores:
        # adjacent windows in the CUs' space, apart at the destination: a run of stores that
        # crosses from one into the next must leave as two packets
        window = []
        for k in range(dparams.remote_windows):
            size = 8 * beat
            window.append(RemoteWindow(src_base=(1 << (params.addr_bits - 2)) + k * size,
                                       size=size, dst_gpu=gpu_id, dst_base=cursor))
            cursor = _align(cursor + size + guard, beat)
    memory = bytearray(nprng.integers(0, 256, size=cursor, dtype=np.uint8).tobytes())
    for cmd in table:
        _fill(nprng, memory, cmd.src_base, cmd.size, cmd.etype)
        _fill(nprng, memory, cmd.dst_base, cmd.size, cmd.etype)
    check_commands(params, dparams, table, dst_capacity=len(memory))
    triggers = []
    for index, cmd in enumerate(table):
        for start in cmd.tile_starts():
            triggers.append({"wg_id": rng.getrandbits(params.wg_id_bits),
                             "wf_id": rng.getrandbits(params.wf_id_bits),
                             "addr": start, "region": index})
    rng.shuffle(triggers)
    stores = []
    if window is not None:
        windows = check_remotes(params, dparams, window, dst_capacity=len(memory))
        for w in windows:
            _fill(nprng, memory, w.dst_base, w.size, ElemType.FP16)
        lo = windows[0].src_base
        span = windows[-1].src_base + windows[-1].size - lo
        addr = lo
        for _ in range(remote_stores):
            lanes = rng.getrandbits(beat // 2)
            mask = sum(0b11 << (2 * k) for k in range(beat // 2) if lanes >> k & 1)
            store = {
                "data": int.from_bytes(random_values(nprng, ElemType.FP16, beat // 2)
                                       .tobytes(), "little"),
                "mask": mask, "op": rng.choice([Op.STORE.value, Op.UPDATE.value]),
                "etype": ElemType.FP16.value, "tracked": rng.getrandbits(1),
                "wg_id": rng.getrandbits(params.wg_id_bits),
                "wf_id": rng.getrandbits(params.wf_id_bits)}
            # several windows: runs of consecutive stores with equal attributes (one packet
            # while they come close together), across the windows' boundaries
            if len(windows) == 1 or not stores or not rng.random() < 0.7 or \
                    addr + beat >= lo + span:
                addr = lo + beat * rng.randrange(span // beat)
            else:
                addr += beat
                store.update({k: stores[-1][k] for k in ("op", "tracked", "wg_id", "wf_id")})
            stores.append(dict(store, addr=addr))
    return Scenario(table, memory, triggers, window, stores, gpu_id)


def long_transfer_scenario(params, dparams: DMAParams, tile_beats=256, tiles=8, gpu_id=1):
    """One fp16 command of ``tiles`` tall tiles of ``tile_beats`` beats each (one column
    segment of ``tile_beats`` beats per tile column, 4 columns), for link utilisation."""
    beat = params.beat_bytes
    seg = tile_beats // 4
    tile_rows = seg * beat // 2
    cmd = Command(src_base=beat, rows=tile_rows, cols=4 * tiles, ld=tile_rows,
                  tile_rows=tile_rows, tile_cols=4, dst_gpu=gpu_id,
                  dst_base=_align(beat + tile_rows * 2 * 4 * tiles + beat, beat),
                  op=Op.STORE, etype=ElemType.FP16)
    size = cmd.dst_base + cmd.size + beat
    memory = bytearray(np.random.default_rng(0).integers(0, 256, size=size, dtype=np.uint8)
                       .tobytes())
    check_commands(params, dparams, [cmd], dst_capacity=size)
    triggers = [{"wg_id": i, "wf_id": 0, "addr": a, "region": 0}
                for i, a in enumerate(cmd.tile_starts())]
    return Scenario([cmd], memory, triggers, None, [], gpu_id)


#: What :func:`random_link_beats` mixes into the good packets: each a way a link or a sender
#: can break the framing, and the receive side's answer to it (``docs/dma.md``).
LINK_FAULTS = ("wrong_gpu", "bad_check", "header_tlast", "zero_beats", "zero_seg", "short",
               "long", "cut", "no_header", "past_the_end", "outside_window")


def random_link_beats(params, dparams: DMAParams, rng: random.Random, gpu_id, packets,
                      rx_window, faults=0.4, kinds=LINK_FAULTS):
    """Link beats ``[(tdata, tkeep, tuser, tlast), ...]`` of ``packets`` packets for GPU
    ``gpu_id``, a fraction ``faults`` of them broken in one of the ways of
    :data:`LINK_FAULTS` (those of ``kinds``).  Good packets land inside ``rx_window`` (``(base, size)`` in bytes);
    ``outside_window`` ones straddle its edges, ``past_the_end`` ones run past the address
    space.  Header beats carry random bits above their check field (the receiver must ignore
    them); payload beats random data and byte enables."""
    packer = header_packer(params, dparams)
    width = packer.width
    bb, top = params.beat_bytes, 1 << params.addr_bits
    base, size = rx_window
    full = (1 << bb) - 1
    out = []
    for _ in range(packets):
        fault = rng.choice(kinds) if rng.random() < faults else None
        n = rng.randint(1, 6)
        seg = rng.choice([k for k in range(1, n + 1) if n % k == 0])
        stride = seg * bb + rng.choice([0, 0, bb, 3 * bb])
        span = (n // seg - 1) * stride + seg * bb
        if fault == "outside_window":
            addr = rng.choice([base - rng.randint(1, 2) * bb, base + size - span + bb])
        elif fault == "past_the_end":
            addr = top - rng.randint(1, max(1, span // bb - 1)) * bb
        else:
            addr = base + rng.randrange(0, max(1, (size - span) // bb + 1)) * bb
        h = {"dst_gpu": gpu_id, "src_gpu": rng.randrange(1 << dparams.gpu_bits),
             "addr": addr % top, "op": rng.choice([Op.STORE, Op.UPDATE]).value,
             "etype": rng.choice(list(ElemType)).value,
             "source": rng.choice([Source.DMA, Source.REMOTE]).value,
             "tracked": rng.randrange(2), "wg_id": rng.randrange(1 << params.wg_id_bits),
             "wf_id": rng.randrange(1 << params.wf_id_bits), "beats": n, "seg_beats": seg,
             "stride": stride}
        if fault == "wrong_gpu":
            h["dst_gpu"] = (gpu_id + rng.randrange(1, 1 << dparams.gpu_bits)) % \
                (1 << dparams.gpu_bits)
        elif fault == "zero_beats":
            h["beats"] = 0
        elif fault == "zero_seg":
            h["seg_beats"] = 0
        word = packer.pack(h)
        if fault == "bad_check":
            word ^= 1 << (width + rng.randrange(HEADER_CHECK_BITS))
        word |= rng.getrandbits(params.beat_bits - width - HEADER_CHECK_BITS) << \
            (width + HEADER_CHECK_BITS)
        payload = n + {"short": -1, "long": 2}.get(fault, 0)
        if fault == "short" and payload == 0:
            payload = 1
            h["beats"] = n = 2
            word = packer.pack(h)
        frame = [] if fault == "no_header" else [(word, full, 1, 0)]
        if fault == "header_tlast":
            frame = [(word, full, 1, 1)]
            payload = 0
        for _ in range(payload):
            keep = full if rng.random() < 0.7 else rng.getrandbits(bb) or 1
            frame.append((rng.getrandbits(params.beat_bits), keep, 0, 0))
        if fault != "cut" and fault != "header_tlast":
            frame[-1] = frame[-1][:3] + (1,)
        elif fault == "cut" and len(frame) > 1:
            frame.pop()                     # no tlast: the next packet's header cuts it
        out += frame
    return out


def random_packets(params, rng: random.Random, n, source, max_beats=6):
    """``n`` packets ``(header, [(data, keep), ...])`` for the send side: a tile's
    (``source`` DMA) beats keep every byte, a remote run's (REMOTE) random bytes and one
    segment.  Their ``wg_id``s are unique (even for tiles, odd for runs), so that a header
    names its packet."""
    full = (1 << params.beat_bytes) - 1
    out = []
    for _ in range(n):
        beats = rng.randint(1, max_beats)
        remote = source == Source.REMOTE
        header = {"dst_gpu": rng.randrange(16), "src_gpu": rng.randrange(16),
                  "addr": rng.getrandbits(params.addr_bits - params.beat_offset_bits) <<
                  params.beat_offset_bits, "op": rng.choice([Op.STORE, Op.UPDATE]).value,
                  "etype": rng.choice(list(ElemType)).value, "source": source.value,
                  "tracked": rng.randrange(2), "wg_id": len(out) * 2 + remote,
                  "wf_id": rng.randrange(1 << params.wf_id_bits), "beats": beats,
                  "seg_beats": beats if remote else rng.randint(1, beats),
                  "stride": rng.getrandbits(12) << params.beat_offset_bits}
        out.append((header, [(rng.getrandbits(params.beat_bits),
                              rng.getrandbits(params.beat_bytes) or 1 if remote else full)
                             for _ in range(beats)]))
    return out


def random_windows(params, dparams: DMAParams, rng: random.Random, count=None):
    """``count`` (``remote_windows`` by default) valid remote windows in ascending order, each
    of 2 to 6 times ``remote_burst`` beats; about half of them start where the one below ends
    (a run may reach the boundary), and one in four times the highest ends at the top of the
    address space."""
    beat, top = params.beat_bytes, 1 << params.addr_bits
    count = dparams.remote_windows if count is None else count
    sizes = [beat * dparams.remote_burst * rng.randint(2, 6) for _ in range(count)]
    gaps = [0 if rng.random() < 0.5 else beat * rng.randint(1, 64) for _ in range(count)]
    span = sum(sizes) + sum(gaps[1:])
    if rng.random() < 0.25:
        base = top - span
    else:
        base = beat * rng.randrange(1, (top - span) // beat)
    windows = []
    for size, gap in zip(sizes, gaps):
        base += gap if windows else 0
        windows.append(RemoteWindow(base, size, rng.randrange(dparams.max_gpus),
                                    beat * rng.randrange((top - size) // beat + 1)))
        base += size
    return check_remotes(params, dparams, windows)


def random_remote_stores(params, rng: random.Random, windows, n):
    """``n`` CU stores (dicts of :func:`hw.interfaces.mem_request_layout`) for the write
    combining: mostly streams (each store at the last one's next address with its
    attributes, across a window's boundary too), broken by a store that differs in one
    attribute only, a jump, a ``READ`` or an address in no window."""
    beat = params.beat_bytes
    top = 1 << params.addr_bits
    fields = {"op": lambda: rng.choice([Op.STORE, Op.UPDATE]).value,
              "etype": lambda: rng.choice(list(ElemType)).value,
              "tracked": lambda: rng.randrange(2),
              "wg_id": lambda: rng.randrange(1 << params.wg_id_bits),
              "wf_id": lambda: rng.randrange(1 << params.wf_id_bits)}

    def anywhere():
        w = rng.choice(windows)
        return w.src_base + beat * rng.randrange(w.size // beat)

    def outside():
        while True:
            addr = beat * rng.randrange(top // beat)
            if not inside(addr):
                return addr

    def inside(addr):
        return any(w.src_base <= addr < w.src_base + w.size for w in windows)

    stores, last = [], None
    for _ in range(n):
        store = {"data": rng.getrandbits(params.beat_bits),
                 "mask": rng.getrandbits(beat) or 1, "stream": 0, "source": 0, "tag": 0,
                 **{k: f() for k, f in fields.items()}}
        if last is not None and not inside(last["addr"] + beat) and rng.random() < 0.9:
            last = None             # a stream that leaves its windows mostly ends there
        go_on = last is not None and last["addr"] + beat < top
        roll = rng.random()
        if go_on and roll < 0.75:
            store.update({k: last[k] for k in fields}, addr=last["addr"] + beat)
        elif go_on and roll < 0.83:
            store.update({k: last[k] for k in fields}, addr=last["addr"] + beat)
            field = rng.choice(list(fields))
            while store[field] == last[field]:
                store[field] = fields[field]()
        elif roll < 0.05 or 0.83 <= roll < 0.88:
            store["addr"] = outside()
        elif 0.88 <= roll < 0.92:
            store.update(op=Op.READ.value, addr=anywhere())
        else:
            store["addr"] = anywhere()
        stores.append(store)
        if store["op"] != Op.READ.value:
            last = store
    return stores


def random_jobs(params, rng: random.Random, n, max_beats=12):
    """``n`` tiles for the tile reader (:class:`dma.reader.TileReader`): ``(header, src)``,
    a tile's header of :func:`random_packets` (any segments and strides) and a source address
    from which all its beats lie inside the address space."""
    jobs = []
    for header, _ in random_packets(params, rng, n, Source.DMA, max_beats=max_beats):
        span = header["beats"] * (header["stride"] + params.beat_bytes)
        src = params.beat_bytes * rng.randrange(((1 << params.addr_bits) - span) //
                                                params.beat_bytes)
        jobs.append((header, src))
    return jobs


def address_beat(params, addr):
    """A memory's beat at ``addr`` that names its address (for a reader's test memory)."""
    return (addr * 0x9E3779B97F4A7C15 + 1) % (1 << params.beat_bits)
