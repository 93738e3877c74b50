"""The programs of the GPU-side traffic engine, as the host writes them: :class:`WGDesc` (a
workgroup's descriptor), :class:`Step` (a vector step) and :class:`GemmProgram`;
:func:`pack_wg`, :func:`pack_step` and :func:`program_beats` give the beats the engine reads,
:func:`partial_beats` the beats of a GPU's partial output in its local memory.  The layouts are
:mod:`system.engine.config`'s; :mod:`sim.system.programs` builds a workload's programs,
:mod:`system.engine.model` runs them."""

import dataclasses
import functools

import numpy as np

from hw.interfaces import Packer
from .config import MAX_WFS, OFFSET_BITS, Z_STORE, desc_beats, step_layout, wg_layout


__all__ = ["WGDesc", "Step", "GemmProgram", "pack_wg", "pack_step", "program_beats",
           "partial_beats"]


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
    layout, packer = _wg_packer(params)
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
    return packer.pack(fields) | tiles << layout["tiles"].offset


@functools.lru_cache(maxsize=None)
def _wg_packer(params):
    """The WG layout of ``params`` and a :class:`~hw.interfaces.Packer` of its scalar fields,
    made once per parameter set (a 32-GPU paper run packs thousands of descriptors)."""
    layout = wg_layout(params)
    return layout, Packer(data_fields(layout, "tiles"))


@functools.lru_cache(maxsize=None)
def _step_packer(params):
    return Packer(step_layout(params))


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
    return _step_packer(params).pack({
        "wait_arrivals": step.wait_arrivals, "n": step.n, "x": step.x,
        "y": step.y or 0, "has_y": int(step.y is not None), "z": step.z,
        "z_kind": step.z_kind})


def partial_beats(partial, beat_bytes=32):
    """The beats of a column-major partial output (``M x N`` array) as integers."""
    raw = np.asfortranarray(partial).tobytes(order="F")
    return [int.from_bytes(raw[i:i + beat_bytes], "little") for i in range(0, len(raw),
                                                                           beat_bytes)]
