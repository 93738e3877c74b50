"""The GPU-side traffic engine: parameters, program formats and register map.

The engine stands for a GPU's compute units in a node's simulation top (and on an FPGA
prototype of a node): it replays a kernel's memory traffic on the node's ``compute`` port from
a *program* that the Python workload generator writes into the engine's local memory before
the run, so that no software runs per cycle.  Two kinds of kernel:

GEMM (``mode.kernel = GEMM``)
    The CU throughput model of :mod:`sim.system.workload`: workgroups (WGs) run ``cus`` at a
    time in program order; a WG issues ``read_beats`` input ``READ``\\ s (``a_read`` beats of
    ``A`` from its descriptor's ``a_off``, then the rest of ``B`` from its ``b_off``: its
    panels), waits for their responses, computes for
    ``compute_cycles``, then stores its ``wfs`` output tiles (every beat, column by column) with
    the WG's flags; the store data are the partial tiles, read from the local memory, where the
    partial output was loaded with the layout of ``C`` (column-major, beat ``o`` of ``C`` at
    local beat ``partials + o``).  One :func:`wg_layout` descriptor per WG.

    With ``EngineParams.streaming`` a WG streams its panels in ``k_slices`` slices of ``K``, as
    a tiled library GEMM stages a slice of its inputs while it computes on the one before
    (two slices of staging: a double-buffered main loop).  Slice ``j`` reads ``read_beats``
    beats: ``a_read`` of ``A`` from ``a_off + j * a_read``, then the rest of ``B`` from
    ``b_off + j * (read_beats - a_read)``; it computes for ``compute_cycles`` once its reads
    are answered and slice ``j - 1``'s compute has ended; slice ``j + 1``'s reads are queued
    as slice ``j``'s compute starts.  The stores follow the last slice's compute.
    ``k_slices`` = 1 is the whole-panel WG above.

Steps (``mode.kernel = STEPS``)
    A sequence of :func:`step_layout` descriptors, each a vector operation over ``n`` beats:
    wait until ``wait_arrivals`` communication writes have arrived since the start and every
    earlier request is complete; read ``x`` (and ``y``) beat by beat as two streams; for beat
    ``i``, ``z[i] = x[i]`` or ``x[i] + y[i]`` (lane-wise in ``etype``, the near-bank ALU's
    adders), stored at node address ``z`` (a remote-window address goes to the neighbour) or
    captured into local beat ``z`` (to read results back).  The baseline's reduce-scatter on
    the CUs, the all-gather and the read-back are step programs
    (:func:`sim.system.programs.rs_steps` ...).

Descriptors wider than a beat (:func:`desc_beats`: the board's 128-bit beats) take
``desc_beats`` program beats each, low bits first; the program memory is that wide, each beat
written on its own through the bulk port, and a descriptor is read in one cycle.

A run ends (``done``) when the kernel is complete, ``arrivals`` communication writes have
completed in the node since the start, and (with ``mode.flush``) the node's L2 has been
flushed after the kernel's last response.
"""

import dataclasses
import enum

from amaranth.lib import data

from hw.csr import Field, Reg, RegisterMap
from hw.params import T3Params, check_params, param


__all__ = ["EngineParams", "Kernel", "wg_layout", "OFFSET_BITS", "step_layout", "desc_beats",
           "engine_registers", "MODE",
           "STATUS", "CTRL", "STAT_REGISTERS", "Z_STORE", "Z_CAPTURE"]


class Kernel(enum.IntEnum):
    """``mode.kernel``."""
    GEMM = 0
    STEPS = 1


#: ``step.z_kind``: store at node address ``z``; capture into local beat ``z``.
Z_STORE, Z_CAPTURE = 0, 1


@dataclasses.dataclass(frozen=True)
class EngineParams:
    """Geometry of the engine.

    Parameters
    ----------
    local_beats : int
        Beats of the local memory (partials, descriptors, captured results), 16 to 65536.
    slots : int
        WGs in flight at most (the GEMM's ``cus`` register may not exceed it), 1 to 16.
    buffer_beats : int
        Beats of a step's operand and store buffers: the largest step ``n``, 4 to 4096.
    pending : int
        Requests awaiting their response at most (the node answers every local request in
        order), 4 to 1024; the engine waits when it is full.
    streaming : bool
        GEMM WGs stream their panels in K slices (the ``k_slices`` register, see the module
        documentation); off: the engine has no ``k_slices`` register and a WG reads its whole
        panels before it computes.
    """
    local_beats: int = param(2048, "beats of the local memory", 16, 65536)
    slots: int = param(8, "WGs in flight", 1, 16)
    buffer_beats: int = param(512, "beats of a step's buffers", 4, 4096)
    pending: int = param(256, "requests awaiting their response", 4, 1024)
    streaming: bool = False

    def __post_init__(self):
        check_params(self)
        if not isinstance(self.streaming, bool):
            raise ValueError(f"streaming must be True or False, not {self.streaming!r}")

    @property
    def local_bits(self):
        return max(1, (self.local_beats - 1).bit_length())

    def to_dict(self):
        return dataclasses.asdict(self)


#: Tile starts a WG descriptor holds (``wfs`` of them are used).
MAX_WFS = 8


#: Bits of a WG descriptor's beat offsets (its tiles in ``C``, its panels in ``A`` and ``B``).
OFFSET_BITS = 20


def wg_layout(params: T3Params):
    """One GEMM workgroup, one local-memory beat: ``wg_id``; ``remote`` (its stores go to the
    address plus ``remote_space``: through the node's remote window), ``update`` (``UPDATE``
    instead of ``STORE``), ``tracked``; ``a_off``, ``b_off``: the beat of ``A`` and of ``B``
    its reads start at; ``tiles``: the ``C`` beat offset of each WF tile's first beat."""
    return data.StructLayout({
        "wg_id": params.wg_id_bits,
        "remote": 1, "update": 1, "tracked": 1,
        "a_off": OFFSET_BITS, "b_off": OFFSET_BITS,
        "tiles": data.ArrayLayout(OFFSET_BITS, MAX_WFS),
    })


def step_layout(params: T3Params):
    """One vector step, one local-memory beat (see the module documentation)."""
    return data.StructLayout({
        "wait_arrivals": 32,
        "n": 16,
        "x": params.addr_bits,
        "y": params.addr_bits,
        "has_y": 1,
        "z": params.addr_bits,
        "z_kind": 1,
    })


def desc_beats(params: T3Params):
    """Program-memory beats of one descriptor: the wider of :func:`wg_layout` and
    :func:`step_layout` in beats, rounded up to a power of two (1 with 256-bit beats, 2 with
    128).  Descriptor ``i`` of a program is at program beats ``(prog_base + i) * desc_beats``
    on, its low bits first."""
    bits = max(wg_layout(params).size, step_layout(params).size)
    return 1 << (-(-bits // params.beat_bits) - 1).bit_length()


#: The ``mode`` register.
MODE = Reg("mode", None, "rw", "", fields=(
    Field("kernel", doc="0 GEMM, 1 steps"),
    Field("etype", 2, "element type of the stores and adds (0 fp16, 1 bf16, 2 fp32, 3 int32)"),
    Field("mca", doc="drive the MC arbiter's calibration window (from the start to the end of "
                     "the first stage, `stage_wgs` WGs) and its drain (at the GEMM's end)"),
    Field("flush", doc="at the kernel's end (every request answered), flush the node's L2 "
                       "(write back and invalidate) and wait for it before `done`: the "
                       "kernel boundary's release")))

#: The ``ctrl`` register: write 1 to a field to act.
CTRL = Reg("ctrl", None, "wo", "write 1 to act", fields=(
    Field("start", doc="start the kernel (as the `start` input does)"),))

#: The ``status`` register.
STATUS = Reg("status", None, "w1c", "errors and state", fields=(
    Field("resp_error", doc="a response came back with its error flag"),
    Field("unexpected", doc="a response came that no request awaited (ignored)"),
    Field("bad_step", doc="a step with `n` of 0 or above `buffer_beats`, or an add (`y`) in an "
                          "element type the engine has no adders for (skipped)"),
    Field("busy", lsb=8, live=True, doc="a kernel runs"),
    Field("done", live=True, doc="the last kernel has finished (until the next start)")))

#: Registers read back after a run.
STAT_REGISTERS = ("status", "cycles", "first_stage", "requests", "reads", "stores",
                  "responses", "arrivals")


def engine_registers(params: T3Params, eparams: EngineParams):
    """The engine's register map (a :class:`hw.csr.RegisterMap`)."""
    a, lb = params.addr_bits, eparams.local_bits + 1
    return RegisterMap([
        MODE, CTRL, STATUS,
        Reg("arrivals_target", 32, "rw", "communication writes that must have completed in the "
                                         "node since the start before `done`"),
        Reg("prog_base", lb, "rw", "the first descriptor: program beat `prog_base` x "
                                   "`desc_beats` (`desc_beats` 1 with 256-bit beats)"),
        Reg("prog_count", 16, "rw", "descriptors (WGs or steps)"),
        Reg("cus", 5, "rw", "GEMM: WGs in flight (1 to `slots`)", reset=1),
        Reg("read_beats", 16, "rw", "GEMM: input reads per WG"),
        Reg("compute_cycles", 24, "rw", "GEMM: cycles from a WG's last input response to its "
                                        "first store"),
        Reg("a_read", 16, "rw", "GEMM: of a WG's `read_beats`, those of its A panel (read "
                                "first, from beat `a_off` of A); the rest read B from beat "
                                "`b_off`"),
        Reg("a_base", a, "rw", "GEMM: byte address of A"),
        Reg("b_base", a, "rw", "GEMM: byte address of B"),
        Reg("c_base", a, "rw", "GEMM: byte address of C"),
        Reg("remote_space", a, "rw", "stores at or above this byte address go to the node's "
                                     "remote window and get no response; a remote WG's store "
                                     "addresses are offset by it"),
        Reg("stage_wgs", 16, "rw", "GEMM: WGs of the first stage (the first ring step: the "
                                   "producer in isolation, paper section 4.5), the MC "
                                   "arbiter's calibration window; 0: the first `cus`"),
        Reg("partials", lb, "rw", "GEMM: local beat of the partials' first beat"),
        Reg("wfs", 4, "rw", "GEMM: WF tiles per WG (1 to 8)", reset=1),
        Reg("seg_beats", 8, "rw", "GEMM: beats of one column segment of a tile", reset=1),
        Reg("tile_cols", 8, "rw", "GEMM: columns of a tile", reset=1),
        Reg("col_beats", 24, "rw", "GEMM: beats between two columns of C (M x elem / beat)"),
        Reg("cycles", 32, "ro", "cycles from the start to `done`"),
        Reg("first_stage", 32, "ro", "GEMM: cycles from the start to the end of the first "
                                     "stage (its `stage_wgs` WGs finished)"),
        Reg("requests", 32, "ro", "requests issued on `compute`"),
        Reg("reads", 32, "ro", "READs issued"),
        Reg("stores", 32, "ro", "STOREs and UPDATEs issued"),
        Reg("responses", 32, "ro", "responses taken"),
        Reg("arrivals", 32, "ro", "communication writes completed since the start"),
    ] + ([Reg("k_slices", 16, "rw", "GEMM, an engine built streaming only: K slices a WG "
                                   "streams its panels in (0 acts as 1); `read_beats`, "
                                   "`a_read` and `compute_cycles` are a slice's", reset=1)] if eparams.streaming else []))
