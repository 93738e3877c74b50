"""Access streams for exercising the Tracker.

:func:`random_regions` and :func:`tile_traffic` build seeded random traffic that looks like the
memory-controller enqueue stream of a T3 node: interleaved wavefront tiles, each receiving
exactly its threshold of element updates through beats with random element masks, mixed with
reads, untracked stores and accesses outside every region.  The generator never opens more tiles
in a set than the Tracker has ways (so a correct Tracker never stalls on a full set), unless
asked to.  :func:`ring_step_traffic` is the deterministic stream one GPU sees in one step of the
ring reduce-scatter (``docs/design.md`` section 3).
"""

from hw.interfaces import ELEM_BYTES, ElemType, Op, Source, Stream
from tracker.config import Region


__all__ = ["random_regions", "tile_traffic", "ring_step_traffic", "error_traffic", "request"]


def random_regions(params, tparams, rng, count=None, max_tile_elems=48):
    """Non-overlapping beat-aligned regions with small random thresholds."""
    count = tparams.regions if count is None else count
    regions = []
    stride = 1 << (params.addr_bits - 4)
    for index in range(count):
        tile_elems = rng.randint(1, min(max_tile_elems, tparams.max_count))
        updates = rng.randint(1, max(1, min(3, tparams.max_count // tile_elems)))
        base = (index + 1) * stride // 2 + rng.randrange(0, stride // 4, params.beat_bytes)
        size = stride // 8 - (stride // 8) % params.beat_bytes
        regions.append(Region(base, size, tile_elems, updates))
    return regions


def request(params, addr, mask, etype, wg_id=0, wf_id=0, op=Op.UPDATE, tracked=1,
            source=Source.LOCAL):
    """A memory request dict (fields of :func:`hw.interfaces.mem_request_layout`)."""
    return {
        "addr": addr, "mask": mask, "op": op.value, "tracked": tracked,
        "etype": etype.value, "wg_id": wg_id, "wf_id": wf_id, "source": source.value,
        "stream": (Stream.COMPUTE if source == Source.LOCAL else Stream.COMM).value,
        "data": 0, "tag": 0,
    }


def _element_mask(params, etype, k, rng):
    """Byte mask enabling ``k`` random whole elements of ``etype``."""
    ebytes = ELEM_BYTES[etype]
    lanes = rng.sample(range(params.beat_bytes // ebytes), k)
    mask = 0
    for lane in lanes:
        mask |= ((1 << ebytes) - 1) << (lane * ebytes)
    return mask


def tile_traffic(params, tparams, regions, n_accesses, rng, noise=0.15, max_open=None,
                 wg_ids=None, burst_same=0.3):
    """``n_accesses`` requests: tile updates (plus ``noise`` fraction of untracked traffic).

    ``max_open`` caps the open tiles per set (default ``tparams.ways``; larger values make the
    Tracker meet full sets); ``wg_ids`` restricts the workgroup ids drawn; ``burst_same`` is the
    probability that the next update goes to the same tile as the last (back-to-back hits).
    Tiles still open at the end are left open.
    """
    max_open = tparams.ways if max_open is None else max_open
    wg_ids = list(wg_ids) if wg_ids is not None else list(range(min(1 << params.wg_id_bits,
                                                                    tparams.sets * 4)))
    wf_ids = range(1 << params.wf_id_bits)
    etypes = list(ElemType)
    open_tiles = {}          # (wg, wf) -> [remaining, region, etype, base]
    open_keys = []           # the keys of open_tiles, for O(1) random choice
    per_set = {}
    requests = []
    last = None
    while len(requests) < n_accesses:
        if rng.random() < noise:
            requests.append(_noise(params, regions, rng, etypes))
            continue
        key = None
        if last in open_tiles and rng.random() < burst_same:
            key = last
        elif open_tiles and (rng.random() < 0.7 or len(open_tiles) > 4 * tparams.sets):
            key = rng.choice(open_keys)
        else:
            wg, wf = rng.choice(wg_ids), rng.choice(wf_ids)
            if (wg, wf) in open_tiles:
                key = (wg, wf)
            elif per_set.get(wg % tparams.sets, 0) < max_open:
                index = rng.randrange(len(regions))
                region = regions[index]
                etype = rng.choice(etypes)
                base = region.base + rng.randrange(0, region.size // 2, params.beat_bytes)
                open_tiles[(wg, wf)] = [region.threshold, index, etype, base]
                open_keys.append((wg, wf))
                per_set[wg % tparams.sets] = per_set.get(wg % tparams.sets, 0) + 1
                key = (wg, wf)
            else:
                continue
        remaining, index, etype, base = open_tiles[key]
        lanes = params.beat_bytes // ELEM_BYTES[etype]
        k = rng.randint(1, min(remaining, lanes))
        addr = base + rng.randrange(0, 8) * params.beat_bytes
        source = rng.choice(list(Source))
        requests.append(request(params, addr, _element_mask(params, etype, k, rng), etype,
                                 key[0], key[1], rng.choice([Op.STORE, Op.UPDATE]),
                                 source=source))
        open_tiles[key][0] -= k
        last = key
        if open_tiles[key][0] == 0:
            del open_tiles[key]
            where = open_keys.index(key)
            open_keys[where] = open_keys[-1]
            open_keys.pop()
            per_set[key[0] % tparams.sets] -= 1
    return requests


def _noise(params, regions, rng, etypes):
    etype = rng.choice(etypes)
    region = rng.choice(regions)
    kind = rng.randrange(3)
    wg = rng.randrange(1 << params.wg_id_bits)
    mask = _element_mask(params, etype, 1, rng)
    if kind == 0:        # a read inside a region, marked tracked: reads are never counted
        return request(params, region.base, mask, etype, wg, 0, Op.READ)
    if kind == 1:        # an untracked store inside a region
        return request(params, region.base, mask, etype, wg, 0, Op.STORE, tracked=0)
    # a tracked update outside every region
    addr = rng.randrange(0, regions[0].base, params.beat_bytes) if regions[0].base else 0
    if any(r.contains(addr) for r in regions):
        return request(params, region.base, mask, etype, wg, 0, Op.READ)
    return request(params, addr, mask, etype, wg, 0, Op.UPDATE)


def error_traffic(params, tparams, regions, rng, wg_id=1):
    """Requests that must each raise one error in a Tracker programmed with ``regions``
    (at least two): ``[(request, Status bit or None), ...]``, errors interleaved with the
    good accesses that complete the same tiles, all with ``wg_id``.

    Over threshold, region mismatch and bad accesses (empty mask, partial element, unaligned
    address); the RTL and the model must agree on every outcome.
    """
    from tracker.config import Status
    etype = ElemType.FP32
    lanes = params.beat_bytes // ELEM_BYTES[etype]
    r0, r1 = regions[0], regions[1]
    out = []

    def fill(region, wf, elements):
        while elements:
            k = min(elements, lanes)
            out.append((request(params, region.base, _element_mask(params, etype, k, rng),
                                etype, wg_id, wf), None))
            elements -= k

    # 1. over threshold: one element short of the threshold, then a beat of two
    fill(r0, 0, r0.threshold - 1)
    out.append((request(params, r0.base, _element_mask(params, etype, 2, rng), etype, wg_id, 0),
                Status.OVER_THRESHOLD))
    fill(r0, 0, 1)
    # 2. region mismatch: a tile open in r0 updated through r1, then completed in r0
    if r0.threshold > 1:
        fill(r0, 1, 1)
        out.append((request(params, r1.base, _element_mask(params, etype, 1, rng), etype,
                            wg_id, 1), Status.REGION_MISMATCH))
        fill(r0, 1, r0.threshold - 1)
    # 3. bad accesses: empty mask, half an fp32 element, unaligned address
    out.append((request(params, r0.base, 0, etype, wg_id, 2), Status.BAD_ACCESS))
    out.append((request(params, r0.base, 0b11, etype, wg_id, 2), Status.BAD_ACCESS))
    out.append((request(params, r0.base + 4, 0xF, etype, wg_id, 2), Status.BAD_ACCESS))
    return out


def ring_step_traffic(params, n_wg, wfs_per_wg, region, etype=ElemType.FP16, rng=None,
                      first_wg=0):
    """One GPU's tracked traffic for one ring reduce-scatter step (steps 2..N).

    Every element of every WF tile of ``region`` gets two updates: the GPU's own local
    update and the one arriving from its neighbour (remote at step 2, DMA later), each as
    full beats; with ``rng`` the two streams are interleaved randomly, else the neighbour's
    update of a beat follows the local one.  ``region.tile_elems`` must be a multiple of the
    elements per beat.
    """
    ebytes = ELEM_BYTES[etype]
    per_beat = params.beat_bytes // ebytes
    if region.tile_elems % per_beat:
        raise ValueError(f"tile_elems {region.tile_elems} is not a multiple of the "
                         f"{per_beat} elements in a beat")
    beats = region.tile_elems // per_beat
    full = (1 << params.beat_bytes) - 1
    local, remote = [], []
    for wg in range(first_wg, first_wg + n_wg):
        for wf in range(wfs_per_wg):
            tile = (wg - first_wg) * wfs_per_wg + wf
            base = region.base + tile * beats * params.beat_bytes
            for b in range(beats):
                addr = base + b * params.beat_bytes
                local.append(request(params, addr, full, etype, wg, wf, Op.UPDATE))
                remote.append(request(params, addr, full, etype, wg, wf, Op.UPDATE,
                                       source=Source.DMA))
    if rng is None:
        return [r for pair in zip(local, remote) for r in pair]
    out, li, ri = [], 0, 0
    while li < len(local) or ri < len(remote):
        if li < len(local) and (ri == len(remote) or rng.random() < 0.5):
            out.append(local[li])
            li += 1
        else:
            out.append(remote[ri])
            ri += 1
    return out
