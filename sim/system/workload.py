"""Workload generator: a tensor-parallel GEMM whose output feeds a ring reduce-scatter.

Each GPU ``g`` of ``G`` multiplies its slices ``A[g]`` (``M x K``) and ``B[g]`` (``K x N``) into
a partial output ``p[g] = A[g] @ B[g]`` (``M x N``, column-major, rounded to the element type):
real numbers from seeded random inputs (numpy).  The output is split into ``G`` chunks of
``N / G`` columns; GPU ``g`` computes them in the staggered order of ``docs/design.md``
section 3 (ring step ``s = 1..G``: chunk ``(g + s) mod G``).  Each wavefront (WF) writes one ``tile_rows x
tile_cols`` output tile; ``wfs_per_wg`` WFs of one chunk form a workgroup (WG).

CU throughput model
-------------------
``cus`` compute units run one WG each.  A WG first reads its inputs: the WG's flops times the
input bytes per flop of the paper's 256 x 128 macro tiles, (256 + 128) x elem_bytes / (2 x 256
x 128) (what a tiled GEMM's workgroup reads, each input once, after its LDS reuse), as its
``A`` panel (its output rows over all of ``K``: 256 / 384 of the beats) then its ``B`` panel
(its output columns: 128 / 384).  The WGs of a chunk lie on a grid (:meth:`Workload.grid`):
those of one grid row read the same ``A`` panel, those of one grid column the same ``B``
panel, so an L2 (``NodeParams.l2``) serves the repeats, as the paper's 16 MB L2 does; without
one every read reaches DRAM.  Then it computes for ``flops / (flops_per_cycle / cus)``
cycles; then it stores its tiles (every beat of every tile).  The stores are op-and-stores
with T3's ``update`` flag, or plain stores for the Sequential baseline.

Scaling (presets)
-----------------
The paper's system (Table 1): HBM2 1 TB/s at 1 GHz = 1000 B/cycle; ring links 150 GB/s
bi-directional, 75 B/cycle each way; 80 CUs at 1.4 GHz.  Its GEMMs are library GEMMs on the
Volta-class GPU Accel-Sim models, whose fp16 GEMMs run on the tensor cores: 8 a CU, 64 FMA a
clock each, 114.7 TFLOP/s = 114,688 flop/cycle; fp32 GEMMs on the CUDA cores, 64 FMA lanes a
CU, 14,336 flop/cycle (``docs/paper.md``, the machine's table).  The model's HBM streams at
most 0.5 beat (16 B) per cycle (CCD_S = 2).  CU throughput, link and HBM bandwidth are scaled
**together** by ``c = 1000 / 16 = 62.5``: link 1.2 B/cycle (3/80 beat), fp16 1,835 flop/cycle,
fp32 229.  Then the GEMM : RS time ratio, ``2 M N K / F`` over ``(G-1)/G
x M N e / L``, equals the paper's for the same ``K``, whatever ``M`` and ``N``: the presets keep
the sub-layer's ``K`` and shrink ``M x N`` (tokens x hidden) so that a run takes seconds.
"""

import dataclasses
import functools
import math

import numpy as np

from hw.interfaces import ELEM_BYTES
from hw.params import check_int
from nmc.model import lane_dtype
from system.spec import LINK_BANDWIDTH
from sim.system.driver import ETYPES


__all__ = ["GemmSpec", "WorkGroup", "Workload", "PRESETS", "preset", "PAPER", "SCALE",
           "ring_reference", "balanced_k", "workload_spec", "DEFAULT_M", "DEFAULT_N_PER_GPU",
           "scaled_cus", "link_latency_for", "SCALED_CUS", "LIBRARY_K_SLICE", "product_fp32"]


#: The paper's system (Table 1), per 1 GHz memory cycle.
PAPER = {"hbm_bytes_per_cycle": 1000.0, "link_bytes_per_cycle": 75.0,
         "fp16_flops_per_cycle": 80 * 8 * 64 * 2 * 1.4, "fp32_flops_per_cycle": 80 * 64 * 2 * 1.4,
         "link_latency_ns": 500,
         "macro_tile": (256, 128), "cus": 80}

#: The model's HBM: one beat every CCD_S = 2 cycles.
MODEL_HBM_BYTES_PER_CYCLE = 16.0

#: Bandwidth and CU throughput scale factor (paper / model).
SCALE = PAPER["hbm_bytes_per_cycle"] / MODEL_HBM_BYTES_PER_CYCLE



#: Elements of ``K`` a WG of the paper's GPU's library GEMMs stages at a time: CUTLASS's
#: Volta tensor-core GEMM (``DefaultGemmConfiguration<OpClassTensorOp, Sm70>``) tiles a
#: threadblock's output 128 x 256 and its main loop stages 32-element slices of ``K`` in
#: shared memory, two stages (``kStages = 2``): one slice is loaded while the one before is
#: computed on.  The presets' :attr:`GemmSpec.k_slice` (``docs/paper.md``, the machine's
#: table).
LIBRARY_K_SLICE = 32

#: The most elements a GPU's two operands (A and B) may have together.
MAX_OPERAND_ELEMS = 1 << 26


@dataclasses.dataclass(frozen=True)
class GemmSpec:
    """One GEMM ``M x N x K`` per GPU and its execution model (see the module doc)."""
    m: int = 64
    n: int = 128
    k: int = 64
    dtype: str = "fp16"
    tile_rows: int = 16
    tile_cols: int = 16
    wfs_per_wg: int = 2
    cus: int = 4
    flops_per_cycle: float = None     # per GPU; default: the paper's, scaled
    name: str = "custom"
    #: columns of WGs in a chunk's grid of WGs (:meth:`Workload.grid`); default: the chunk's
    #: tile columns (its own geometry)
    grid_cols: int = None
    #: ``"normal"``: inputs from a scaled normal distribution; ``"integers"``: from {-1, 0, 1},
    #: so that every partial is an integer and a sum of partials is exact whenever it stays
    #: below the type's integer range (:meth:`Workload.order_free`): the direct
    #: reduce-scatter's owners add their peers' updates in arrival order, which a reference
    #: cannot know, and exact sums are the same in every order
    inputs: str = "normal"
    #: a preset's tokens (``SL x B``) when fewer than its sub-layer's: a small-token step, as
    #: in the generation phase of inference (paper section 7.3), whose GEMM's macro tile has
    #: only :meth:`macro_tile` rows, so that it reads more input per flop, and whose ring
    #: step's data are small next to the link's latency (:func:`link_latency_for`); ``None``:
    #: the paper's tokens
    tokens: int = None
    #: elements of ``K`` a WG streams at a time (:meth:`Workload.wg_slices`), as a tiled
    #: library GEMM's main loop stages a slice of its inputs while it computes on the one
    #: before; ``None``: a WG reads its whole panels, then computes
    k_slice: int = None

    def __post_init__(self):
        for field in ("m", "n", "k", "tile_rows", "tile_cols", "wfs_per_wg", "cus"):
            check_int(field, getattr(self, field), 1)
        if self.grid_cols is not None:
            check_int("grid_cols", self.grid_cols, 1)
        if self.tokens is not None:
            check_int("tokens", self.tokens, 1)
        if self.k_slice is not None:
            check_int("k_slice", self.k_slice, 1, self.k)
        # each GPU's A (m x k) and B (k x n) are made in numpy: keep them to 2**26 elements
        check_int("k", self.k, 1, MAX_OPERAND_ELEMS // (self.m + self.n),
                  note="a GPU's A and B, (m + n) x k elements, at most 2**26")
        if self.dtype not in ("fp16", "fp32"):
            raise ValueError(f"dtype must be 'fp16' or 'fp32', not {self.dtype!r}")
        if self.inputs not in ("normal", "integers"):
            raise ValueError(f"inputs must be 'normal' or 'integers', not {self.inputs!r}")
        if self.flops_per_cycle is not None and not self.flops_per_cycle > 0:
            raise ValueError(f"flops_per_cycle must be positive, not {self.flops_per_cycle!r}")

    def macro_tile(self):
        """``(rows, cols)`` of the paper's GEMM macro tile whose input bytes per flop the WGs
        read (:meth:`Workload.wg_read_beats`): 256 x 128, or with fewer :attr:`tokens` than
        256 as many rows as the tokens, rounded up to 16."""
        tm, tn = PAPER["macro_tile"]
        if self.tokens is not None:
            tm = min(tm, -(-self.tokens // 16) * 16)
        return tm, tn

    @property
    def elem_bytes(self):
        return ELEM_BYTES[ETYPES[self.dtype]]

    @property
    def flops(self):
        return self.flops_per_cycle or PAPER[f"{self.dtype}_flops_per_cycle"] / SCALE

    def check(self, params, gpus):
        """Refuse a spec the ring and the hardware cannot run, naming the field."""
        beat = params.beat_bytes
        if (self.tile_rows * self.elem_bytes) % beat:
            raise ValueError(f"tile_rows {self.tile_rows} x {self.elem_bytes} bytes is not a "
                             f"whole number of {beat}-byte beats")
        if self.m % self.tile_rows:
            raise ValueError(f"m {self.m} is not a multiple of tile_rows {self.tile_rows}")
        if self.n % (gpus * self.tile_cols):
            raise ValueError(f"n {self.n} is not a multiple of gpus x tile_cols = "
                             f"{gpus} x {self.tile_cols}: chunks must be whole tiles")
        tiles = (self.m // self.tile_rows) * (self.n // gpus // self.tile_cols)
        if tiles % self.wfs_per_wg:
            raise ValueError(f"a chunk's {tiles} tiles are not a whole number of workgroups "
                             f"of wfs_per_wg {self.wfs_per_wg}")
        if self.wfs_per_wg > (1 << params.wf_id_bits):
            raise ValueError(f"wfs_per_wg {self.wfs_per_wg} does not fit wf_id_bits "
                             f"{params.wf_id_bits}")
        return self


@dataclasses.dataclass
class WorkGroup:
    wg_id: int
    chunk: int
    step: int
    tiles: list        # [(row0, col0)] element coordinates in C, one per WF


#: Sub-layers of Table 2 that need an all-reduce: name -> K as a multiple of H / TP.
SUBLAYERS = {"OP": 1, "FC-2": 4, "FC-1": 4, "IP": 3}
#: Models of Table 2: name -> (hidden H, tokens SL x B, TP degrees).
MODELS = {"Mega-GPT-2": (3072, 16 * 1024, (8, 16)), "T-NLG": (4256, 8 * 1024, (8, 16)),
          "GPT-3": (12 * 1024, 2 * 1024, (32,)), "PALM": (18 * 1024, 2 * 1024, (32,)),
          "MT-NLG": (20 * 1024, 2 * 1024, (32,))}

#: CUs of the scaled GPU at ``scale`` 1: the engine's WG slots (``EngineParams.slots``).
SCALED_CUS = 8
#: WFs per WG of the scaled workloads: a WG computes a 32 x 16 output (two 16 x 16 WF tiles).
SCALED_WFS_PER_WG = 2


def _presets():
    out = {}
    for model, (hidden, tokens, tps) in MODELS.items():
        for tp in tps:
            for sub, mult in SUBLAYERS.items():
                tm, tn = PAPER["macro_tile"]
                wgs = math.ceil(tokens / tm) * math.ceil(hidden / tn)
                out[f"{model}-{sub}-TP{tp}"] = {
                    "model": model, "sublayer": sub, "tp": tp,
                    "paper_mnk": (tokens, hidden, mult * hidden // tp),
                    "k": mult * hidden // tp,
                    "waves_per_step": wgs / tp / PAPER["cus"]}
    return out


#: ``name -> description``: the paper's ``M x N x K`` per GPU (tokens x H x K), the WG waves
#: per ring step on its 80 CUs; :func:`preset` turns one into a :class:`GemmSpec`.
PRESETS = _presets()


#: Output rows and columns per GPU of the default workload (``t3 run``).
DEFAULT_M, DEFAULT_N_PER_GPU = 64, 32


def scaled_cus(scale):
    """CUs of the scaled GPU at ``scale`` (0 < scale <= 1): ``SCALED_CUS x scale``, rounded,
    at least 1."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
        raise ValueError(f"scale must be a number in (0, 1], not {scale!r}")
    return max(1, round(SCALED_CUS * scale))


def preset(name, gpus=None, scale=1.0, dtype="fp16", tokens=None):
    """The scaled :class:`GemmSpec` of a Table 2 sub-layer (``docs/paper.md``).

    What decides the overlap is kept, each from the paper's Table 1 and 2:

    * ``K`` is the sub-layer's own (H/TP, 4H/TP or 3H/TP): with CU throughput and bandwidths
      scaled together (:data:`SCALE`) the GEMM : RS time ratio ``2 K L G / (F (G-1) e)`` is
      the paper's;
    * the WG waves per ring step: the paper's GEMM has ``ceil(tokens/256) x ceil(H/128)``
      macro tiles, ``1/TP`` of them per step, on 80 CUs; the scaled GPU has
      :func:`scaled_cus` CUs and as many WGs per step as keep that number of waves (at
      least one WG), each WG a 32 x 16 output;
    * the input bytes per flop of the 256 x 128 macro tile (:meth:`Workload.wg_read_beats`);
    * the columns of macro tiles in a ring step's chunk, ``H / TP / 128`` rounded
      (``grid_cols``): which WGs share an ``A`` panel and which a ``B`` panel
      (:meth:`Workload.grid`), and so what an L2 can reuse;
    * the library GEMM's main loop: a WG streams its panels in slices of
      :data:`LIBRARY_K_SLICE` elements of ``K`` (``k_slice``), two staged.

    ``gpus`` defaults to the sub-layer's TP degree.  On another ring, ``K`` is multiplied by
    ``(TP/(TP-1)) / (G/(G-1))`` (rounded to 16) to keep the ratio, and the WGs per step stay
    the TP degree's.

    ``tokens`` (fewer than the sub-layer's ``SL x B``): a small-token step of the same
    sub-layer (paper section 7.3, the generation phase): the macro tile has that many rows
    (:meth:`GemmSpec.macro_tile`), the waves per step follow from its ``ceil(tokens / rows) x
    ceil(H / 128)`` macro tiles (at least one WG: fewer WGs than CUs), and the link's latency
    is the paper's 500 ns in proportion to the step's data (:func:`link_latency_for`)."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, not {name!r}")
    case = PRESETS[name]
    tp = case["tp"]
    gpus = tp if gpus is None else gpus
    cus = scaled_cus(scale)
    paper_tokens = case["paper_mnk"][0]
    if tokens is not None:
        check_int("tokens", tokens, 1, paper_tokens, note=f"{name}'s SL x B")
        tokens = None if tokens == paper_tokens else tokens
    k = case["k"]
    if gpus != tp:
        k = k * (tp / (tp - 1)) / (gpus / (gpus - 1))
        k = max(16, int(round(k / 16)) * 16)
    wgs_per_step = _wgs_per_step(case, cus, tokens)
    tile = 16
    hidden = case["paper_mnk"][1]
    grid_cols = max(1, round(hidden / tp / PAPER["macro_tile"][1]))
    return GemmSpec(m=tile * SCALED_WFS_PER_WG, n=tile * wgs_per_step * gpus, k=k,
                    dtype=dtype, tile_rows=tile, tile_cols=tile,
                    wfs_per_wg=SCALED_WFS_PER_WG, cus=cus, name=name, grid_cols=grid_cols,
                    tokens=tokens, k_slice=min(LIBRARY_K_SLICE, k))


def _wgs_per_step(case, cus, tokens=None):
    """The scaled WGs of a preset's ring step on ``cus`` CUs (at least one): its waves per
    step, on the paper's 80 CUs, times ``cus``; with ``tokens``, of that small-token step."""
    waves = case["waves_per_step"]
    if tokens is not None:
        tm, tn = GemmSpec(tokens=tokens).macro_tile()
        waves = math.ceil(tokens / tm) * math.ceil(case["paper_mnk"][1] / tn) / case["tp"] / \
            PAPER["cus"]
    return max(1, round(waves * cus))


def link_latency_for(spec, latency_ns=None):
    """The scaled link latency (cycles) of the paper's 500 ns: the same fraction of the time
    one WG's output takes on a link as the 500 ns are of a 256 x 128 macro tile's on the
    paper's 75 B/ns link, times the scaled GPU's share of WGs per step (``cus / 80``): so
    the latency is the paper's fraction of a ring step.  At least 2 (the link model's
    least).

    A small-token preset (``spec.tokens``), whose step may hold a fraction of a scaled WG
    rounded up to one: the paper's latency times the scaled step's link time over the
    paper's (``tokens x H / TP`` elements at 75 B/ns)."""
    latency_ns = PAPER["link_latency_ns"] if latency_ns is None else latency_ns
    link = PAPER["link_bytes_per_cycle"] / SCALE            # 1.2 B/cycle
    if spec.tokens is not None:
        case = PRESETS[spec.name]
        paper_step_ns = spec.tokens * case["paper_mnk"][1] / case["tp"] * spec.elem_bytes / \
            PAPER["link_bytes_per_cycle"]
        model_step = _wgs_per_step(case, spec.cus, spec.tokens) * spec.tile_rows * \
            spec.tile_cols * spec.wfs_per_wg * spec.elem_bytes / link
        return max(2, round(latency_ns * model_step / paper_step_ns))
    tm, tn = PAPER["macro_tile"]
    paper_wg_ns = tm * tn * spec.elem_bytes / PAPER["link_bytes_per_cycle"]
    model_wg = spec.tile_rows * spec.tile_cols * spec.wfs_per_wg * spec.elem_bytes / link
    step_ratio = model_wg / paper_wg_ns * spec.cus / PAPER["cus"]
    return max(2, round(latency_ns * step_ratio))


def ring_reference(partials, dtype, zero_start=True):
    """Final chunk values of the ring reduce-scatter (``docs/design.md`` section 3): chunk ``o`` is
    ``(((0 + p[o-1]) + p[o-2]) + ... + p[o-N+1]) + p[o]``, each ``+`` rounded in ``dtype``
    (``zero_start``: T3's buffers start at zero; the CU baseline starts from ``p[o-1]``).
    Returns the full ``M x N`` array of final values (each chunk where its owner holds it)."""
    g_count = len(partials)
    out = np.empty_like(partials[0])
    n = partials[0].shape[1] // g_count
    for o in range(g_count):
        cols = slice(o * n, (o + 1) * n)
        acc = np.zeros_like(partials[0][:, cols])
        first = True
        for d in list(range(1, g_count)) + [0]:
            part = partials[(o - d) % g_count][:, cols]
            with np.errstate(all="ignore"):
                acc = (acc + part).astype(dtype) if (zero_start or not first) else part.copy()
            first = False
        out[:, cols] = acc
    return out


def product_fp32(a, b):
    """``a[g] @ b[g]`` for every ``g`` in fp32, each element's products summed in the order of
    ``K``: the same bits on every machine (the product of two fp16 or bf16 elements is exact in
    fp32; every sum is rounded as IEEE 754 rounds it).  A BLAS orders its sums by its threads
    and by the kernel it picks for the CPU it finds (OpenBLAS's Haswell and SkylakeX kernels
    differ), which would make the data a ring computes on, and so its records' key, a
    property of the machine."""
    out = []
    for x, y in zip(a, b):
        xt = np.ascontiguousarray(x.T, np.float32)   # K x M
        y = np.asarray(y, np.float32)                # K x N
        acc = np.zeros((x.shape[0], y.shape[1]), np.float32)
        term = np.empty_like(acc)
        for k in range(y.shape[0]):
            np.multiply(xt[k][:, None], y[k], out=term)
            acc += term
        out.append(acc)
    return out


class Workload:
    """Inputs, partial outputs and per-GPU WG schedules of one fused GEMM + RS."""

    def __init__(self, spec: GemmSpec, gpus, params, seed=1):
        self.spec = spec.check(params, gpus)
        self.gpus, self.params, self.seed = gpus, params, seed
        self.dtype = lane_dtype(ETYPES[spec.dtype])
        self.chunk_cols = spec.n // gpus
        self.schedule = [self._schedule(g) for g in range(gpus)]

    def _make_inputs(self):
        """The random inputs and the partial outputs, made on first use (checking a
        configuration needs only the schedule)."""
        spec, dt = self.spec, self.dtype
        rng = np.random.default_rng(self.seed)
        if spec.inputs == "integers":
            a = [rng.integers(-1, 2, (spec.m, spec.k)).astype(dt) for _ in range(self.gpus)]
            b = [rng.integers(-1, 2, (spec.k, spec.n)).astype(dt) for _ in range(self.gpus)]
        else:
            scale = 1.0 / math.sqrt(spec.k)
            a = [(rng.standard_normal((spec.m, spec.k)) * scale).astype(dt)
                 for _ in range(self.gpus)]
            b = [rng.standard_normal((spec.k, spec.n)).astype(dt) for _ in range(self.gpus)]
        partials = [p.astype(dt) for p in product_fp32(a, b)]
        return a, b, partials

    def order_free(self):
        """Whether every sum of the GPUs' partials, in any order, is exact: the partials are
        integers and the sum of their magnitudes stays within the element type's exact
        integers (2**11 for fp16, 2**24 for fp32), element by element."""
        if self.spec.inputs != "integers":
            return False
        limit = {"fp16": 1 << 11, "fp32": 1 << 24}[self.spec.dtype]
        total = sum(np.abs(p.astype(np.float64)) for p in self.partials)
        return bool((total <= limit).all())

    @functools.cached_property
    def _inputs(self):
        return self._make_inputs()

    @property
    def a(self):
        """GPU ``g``'s ``A[g]`` (``M x K``) at index ``g``."""
        return self._inputs[0]

    @property
    def b(self):
        """GPU ``g``'s ``B[g]`` (``K x N``) at index ``g``."""
        return self._inputs[1]

    @property
    def partials(self):
        """GPU ``g``'s partial output ``A[g] @ B[g]``, rounded to the element type."""
        return self._inputs[2]

    def _schedule(self, g):
        """GPU ``g``'s workgroups in execution order.  ``wg_id`` is the WG's index in the
        kernel's output grid (chunk by chunk), the same on every GPU: the two updates of one
        tile (local and arriving) must name the same Tracker entry."""
        s = self.spec
        wgs = []
        for step in range(1, self.gpus + 1):
            chunk = (g + step) % self.gpus
            tiles = [(r, chunk * self.chunk_cols + c)
                     for c in range(0, self.chunk_cols, s.tile_cols)
                     for r in range(0, s.m, s.tile_rows)]
            per_chunk = len(tiles) // s.wfs_per_wg
            for k in range(per_chunk):
                wgs.append(WorkGroup(chunk * per_chunk + k, chunk, step,
                                     tiles[k * s.wfs_per_wg:(k + 1) * s.wfs_per_wg]))
        return wgs

    def stages(self, g, steps):
        """``wg_id`` lists of GPU ``g``'s ring steps ``steps`` (the Tracker's stages)."""
        return [[wg.wg_id for wg in self.schedule[g] if wg.step == s] for s in steps]

    # --- the CU throughput model ---------------------------------------------------------------

    def wg_flops(self):
        s = self.spec
        return 2 * s.tile_rows * s.tile_cols * s.k * s.wfs_per_wg

    def panel_beats(self):
        """A WG's input: its flops times the macro tile's input bytes per flop, in whole
        beats (at least 1)."""
        s = self.spec
        tm, tn = s.macro_tile()
        bytes_per_flop = (tm + tn) * s.elem_bytes / (2 * tm * tn)
        return max(1, math.ceil(self.wg_flops() * bytes_per_flop / self.params.beat_bytes))

    def wg_slices(self):
        """The slices of ``K`` a WG streams its panels in: 1 (its whole panels at once)
        without :attr:`GemmSpec.k_slice`, else ``k / k_slice`` rounded down or up, whichever
        shares :meth:`panel_beats` out in equal whole beats nearer to them (up on a tie; the
        engine's slices are all alike, so with ``k`` not a multiple of ``k_slice`` a WG reads
        a few beats more or less than its panels: at most half a beat a slice)."""
        s = self.spec
        if s.k_slice is None:
            return 1
        panels = self.panel_beats()
        fewer, more = max(1, s.k // s.k_slice), -(-s.k // s.k_slice)
        return min((more, fewer), key=lambda n: abs(n * _shared(panels, n) - panels))

    def wg_read_beats(self):
        """A WG's input reads, all its slices' (:meth:`slice_read_beats`)."""
        return self.wg_slices() * self.slice_read_beats()

    def slice_read_beats(self):
        """The input reads of one of a WG's :meth:`wg_slices`: its share of
        :meth:`panel_beats`, rounded to whole beats (half up; at least 1)."""
        return _shared(self.panel_beats(), self.wg_slices())

    def slice_read_split(self):
        """``(a, b)``: of one slice's :meth:`slice_read_beats`, the beats of ``A`` and of ``B``,
        in the macro tile's proportion ``256 : 128`` (a WG reads its output rows of ``A`` and
        its output columns of ``B``)."""
        total = self.slice_read_beats()         # at least 1
        tm, tn = self.spec.macro_tile()
        a = round(total * tm / (tm + tn)) if total > 1 else total
        return a, total - a

    def wg_read_split(self):
        """``(a, b)``: of a WG's :meth:`wg_read_beats`, the beats of its ``A`` panel and of
        its ``B`` panel, each over all of ``K`` (every slice's :meth:`slice_read_split`)."""
        a, b = self.slice_read_split()
        return self.wg_slices() * a, self.wg_slices() * b

    def grid(self):
        """``(rows, cols)`` of each chunk's grid of WGs: the chunk's WGs in dispatch order
        fill it column by column (rows fastest: Tensile's workgroup ``x`` runs over ``M``),
        WG ``k`` at row ``k mod rows`` and column ``k div rows``.  WGs of one row share their
        ``A`` panel, WGs of one column (of one chunk) their ``B`` panel.  ``cols`` is
        ``spec.grid_cols`` (at most the chunk's WGs), ``rows`` as many as the WGs need."""
        cols = self.spec.grid_cols or max(1, self.chunk_cols // self.spec.tile_cols)
        cols = min(cols, self.wgs_per_chunk)
        return -(-self.wgs_per_chunk // cols), cols

    @property
    def wgs_per_chunk(self):
        return len(self.schedule[0]) // self.gpus

    def input_beats(self):
        """``(a, b)``: beats of the ``A`` and ``B`` buffers the WGs read: ``rows`` panels of
        ``A`` (shared by every chunk) and ``G x cols`` panels of ``B``."""
        rows, cols = self.grid()
        a, b = self.wg_read_split()
        return rows * a, self.gpus * cols * b

    def read_offsets(self, wg):
        """``(a, b)``: the first beat of ``wg``'s ``A`` panel in ``A`` and of its ``B`` panel
        in ``B``."""
        rows, cols = self.grid()
        a, b = self.wg_read_split()
        k = wg.wg_id - wg.chunk * self.wgs_per_chunk     # its place in the chunk
        return (k % rows) * a, (wg.chunk * cols + k // rows) * b

    def wg_compute_cycles(self):
        """Cycles a WG computes, all its slices' (:meth:`slice_compute_cycles`)."""
        return self.wg_slices() * self.slice_compute_cycles()

    def slice_compute_cycles(self):
        """Cycles one of a WG's :meth:`wg_slices` computes: its share of the WG's flops at a
        CU's share of the GPU's rate, rounded up (at least 1)."""
        s = self.spec
        return max(1, math.ceil(self.wg_flops() / self.wg_slices() / (s.flops / s.cus)))

    def tile_beats(self, g, row0, col0):
        """``[(byte offset in C, beat value)]`` of GPU ``g``'s partial tile at ``(row0,
        col0)``, column by column."""
        s, p = self.spec, self.params
        e = s.elem_bytes
        per_beat = p.beat_bytes // e
        part = self.partials[g]
        out = []
        for c in range(col0, col0 + s.tile_cols):
            column = part[row0:row0 + s.tile_rows, c]
            raw = column.tobytes()
            for k in range(0, s.tile_rows, per_beat):
                offset = (c * s.m + row0 + k) * e
                out.append((offset, int.from_bytes(raw[k * e:(k + per_beat) * e], "little")))
        return out

    def summary(self):
        return self.estimate(self.spec, self.gpus, self.params)

    @staticmethod
    def estimate(spec, gpus, params):
        """First-order cycle estimates: the GEMM at the CU throughput, the RS at the link
        bandwidth (``(G-1)/G`` of the output per GPU); and their ratio."""
        gemm = 2 * spec.m * spec.n * spec.k / spec.flops
        rs = (gpus - 1) / gpus * spec.m * spec.n * spec.elem_bytes / \
            (LINK_BANDWIDTH[0] / LINK_BANDWIDTH[1] * params.beat_bytes)
        return {"gemm_cycles_estimate": gemm, "rs_cycles_estimate": rs, "ratio": gemm / rs}


def _shared(total, n):
    """``total`` shared out ``n`` ways, rounded half up to a whole number (at least 1)."""
    return max(1, math.floor(total / n + 0.5))


def balanced_k(gpus, dtype="fp16", params=None):
    """The ``K`` (a multiple of 16) whose GEMM takes about as long as its RS."""
    from hw.params import T3Params
    params = params or T3Params()
    spec = GemmSpec(dtype=dtype)
    link = LINK_BANDWIDTH[0] / LINK_BANDWIDTH[1] * params.beat_bytes
    k = spec.flops * (gpus - 1) * spec.elem_bytes / (2 * link * gpus)
    return max(16, int(round(k / 16)) * 16)


def workload_spec(gpus, preset_name=None, m=None, n=None, k=None, dtype=None, tokens=None):
    """The :class:`GemmSpec` of ``t3 run`` and ``t3 compare``: a Table 2 preset, or an ``m x n
    x k`` GEMM whose unset dimensions default to :data:`DEFAULT_M` rows,
    :data:`DEFAULT_N_PER_GPU` columns per GPU and the ``K`` that balances GEMM and
    reduce-scatter (:func:`balanced_k`)."""
    from system.ring import MAX_GPUS
    check_int("gpus", gpus, 2, MAX_GPUS)
    dtype = dtype or "fp16"
    if preset_name:
        if any(v is not None for v in (m, n, k)):
            raise ValueError("--preset and --m/--n/--k exclude each other")
        return preset(preset_name, gpus, dtype=dtype, tokens=tokens)
    if tokens is not None:
        raise ValueError("--tokens makes a preset's small-token step; it needs --preset")
    name = "default (GEMM : RS = 1)" if (m, n, k) == (None, None, None) else "custom"
    return GemmSpec(m=DEFAULT_M if m is None else m,
                    n=DEFAULT_N_PER_GPU * gpus if n is None else n,
                    k=balanced_k(gpus, dtype) if k is None else k, dtype=dtype, name=name)
