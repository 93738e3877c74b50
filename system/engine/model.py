"""Golden model of the GPU-side traffic engine, and the format of its programs.

* Programs: :class:`WGDesc` (a workgroup's descriptor), :class:`Step` (a vector step) and
  :class:`GemmProgram`; :func:`pack_wg`, :func:`pack_step` and :func:`program_beats` give the
  beats the engine reads.  The host writes them: :mod:`sim.system.programs`.
* The model: :func:`gemm_requests` gives, for every workgroup, the requests the engine must
  issue for it, in order (reads, then the stores of its tiles with the partials as data);
  :func:`run_steps` executes a step program on a memory image and gives the requests in
  order.  Tests compare the engine with them request by request, per stream (the interleaving
  of several WGs' bursts depends on the memory's timing; the order within a WG does not).
"""

import dataclasses

import numpy as np

from hw.interfaces import ElemType, Op, Packer
from nmc.model import alu_reference
from .config import MAX_WFS, OFFSET_BITS, Z_CAPTURE, Z_STORE, desc_beats, step_layout, \
    wg_layout


__all__ = ["WGDesc", "Step", "GemmProgram", "pack_wg", "pack_step", "program_beats",
           "gemm_requests", "run_steps", "partial_beats"]


@dataclasses.dataclass(frozen=True)
class WGDesc:
    """One workgroup: ``wg_id``, flags, the ``C`` beat offsets of its WF tiles and the first
    beats of its ``A`` and ``B`` panels."""
    wg_id: int
    tiles: tuple
    remote: bool = False
    update: bool = False
    tracked: bool = False
    a_off: int = 0
    b_off: int = 0


@dataclasses.dataclass(frozen=True)
class Step:
    """One vector step (see :mod:`system.engine.config`)."""
    n: int
    x: int
    z: int
    y: int = None
    wait_arrivals: int = 0
    z_kind: int = Z_STORE


@dataclasses.dataclass(frozen=True)
class GemmProgram:
    """A GPU's GEMM: the WG descriptors in launch order and the engine's GEMM registers."""
    wgs: list
    registers: dict


def pack_wg(params, desc: WGDesc):
    layout = wg_layout(params)
    if not 1 <= len(desc.tiles) <= MAX_WFS:
        raise ValueError(f"a WG has 1 to {MAX_WFS} tiles, not {len(desc.tiles)}")
    for name, value in [("a_off", desc.a_off), ("b_off", desc.b_off)] + \
            [(f"tile {i}", t) for i, t in enumerate(desc.tiles)]:
        if not 0 <= value < 1 << OFFSET_BITS:
            raise ValueError(f"WG {desc.wg_id}: {name} offset {value} does not fit the "
                             f"descriptor's {OFFSET_BITS} bits (beats)")
    tiles = sum(t << (OFFSET_BITS * i) for i, t in enumerate(desc.tiles))
    fields = {"wg_id": desc.wg_id, "remote": int(desc.remote), "update": int(desc.update),
              "tracked": int(desc.tracked), "a_off": desc.a_off, "b_off": desc.b_off}
    word = Packer(data_fields(layout, "tiles")).pack(fields)
    return word | tiles << layout["tiles"].offset


def data_fields(layout, skip):
    """A copy of ``layout`` without field ``skip`` (for packing the scalar fields)."""
    from amaranth.lib import data
    return data.FlexibleLayout(layout.size, {name: data.Field(field.shape, field.offset)
                                             for name, field in layout if name != skip})


def program_beats(params, words):
    """The program-memory beats of descriptors ``words`` (from :func:`pack_wg` or
    :func:`pack_step`): :func:`system.engine.config.desc_beats` beats each, low bits first."""
    d, mask = desc_beats(params), (1 << params.beat_bits) - 1
    return [(w >> (k * params.beat_bits)) & mask for w in words for k in range(d)]


def pack_step(params, step: Step):
    return Packer(step_layout(params)).pack({
        "wait_arrivals": step.wait_arrivals, "n": step.n, "x": step.x,
        "y": step.y or 0, "has_y": int(step.y is not None), "z": step.z,
        "z_kind": step.z_kind})


def _request(**fields):
    out = {"addr": 0, "data": 0, "mask": 0, "op": 0, "stream": 0, "source": 0, "wg_id": 0,
           "wf_id": 0, "tracked": 0, "etype": 0, "tag": 0}
    out.update(fields)
    return out


def gemm_requests(params, program: GemmProgram, partials, etype):
    """``{wg_id: [request, ...]}``: each WG's reads (``a_read`` beats of its ``A`` panel from
    ``a_off``, then the rest of its ``B`` panel from ``b_off``) and then its stores (every beat
    of every tile, column by column; data = ``partials[offset]``, the partial output's
    beats)."""
    reg = program.registers
    beat_bytes = params.beat_bytes
    full = (1 << beat_bytes) - 1
    out = {}
    for desc in program.wgs:
        reqs = []
        for k in range(reg["read_beats"]):
            addr = reg["a_base"] + (desc.a_off + k) * beat_bytes if k < reg["a_read"] else \
                reg["b_base"] + (desc.b_off + k - reg["a_read"]) * beat_bytes
            reqs.append(_request(addr=addr, op=Op.READ.value, mask=full, wg_id=desc.wg_id,
                                 etype=etype))
        op = Op.UPDATE if desc.update else Op.STORE
        for wf, start in enumerate(desc.tiles):
            for col in range(reg["tile_cols"]):
                for k in range(reg["seg_beats"]):
                    o = start + col * reg["col_beats"] + k
                    addr = reg["c_base"] + o * beat_bytes + \
                        (reg["remote_space"] if desc.remote else 0)
                    reqs.append(_request(addr=addr, data=partials[o], mask=full, op=op.value,
                                         wg_id=desc.wg_id, wf_id=wf,
                                         tracked=int(desc.tracked), etype=etype))
        out[desc.wg_id] = reqs
    return out


def run_steps(params, steps, memory, etype, remote_space):
    """Execute ``steps`` on ``memory`` (``{byte address: beat value}``; a store below
    ``remote_space`` writes it) and return ``(requests, captures)``: the requests in order and
    ``{local beat: value}`` captured."""
    beat_bytes = params.beat_bytes
    full = (1 << beat_bytes) - 1
    requests, captures = [], {}
    for step in steps:
        xs = [memory.get(step.x + i * beat_bytes, 0) for i in range(step.n)]
        requests += [_request(addr=step.x + i * beat_bytes, op=Op.READ.value, mask=full,
                              etype=etype) for i in range(step.n)]
        if step.y is not None:
            ys = [memory.get(step.y + i * beat_bytes, 0) for i in range(step.n)]
            requests += [_request(addr=step.y + i * beat_bytes, op=Op.READ.value, mask=full,
                                  etype=etype) for i in range(step.n)]
            results = [alu_reference(params, x, y, full, Op.UPDATE, ElemType(etype))[0]
                       for x, y in zip(xs, ys)]
        else:
            results = xs
        for i, value in enumerate(results):
            if step.z_kind == Z_CAPTURE:
                captures[step.z + i] = value
                continue
            addr = step.z + i * beat_bytes
            requests.append(_request(addr=addr, data=value, mask=full, op=Op.STORE.value,
                                     etype=etype))
            if addr < remote_space:
                memory[addr] = value
    return requests, captures



def partial_beats(partial, beat_bytes=32):
    """The beats of a column-major partial output (``M x N`` array) as integers."""
    raw = np.asfortranarray(partial).tobytes(order="F")
    return [int.from_bytes(raw[i:i + beat_bytes], "little") for i in range(0, len(raw),
                                                                           beat_bytes)]
