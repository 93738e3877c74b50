"""The engines' programs the host writes for a workload (their format:
:mod:`system.engine.program`):

* :func:`gemm_program`: one WG descriptor per workgroup of a GPU's schedule, with T3's flags
  for each collective, and the GEMM registers of the CU throughput model;
* the CU kernels' vector steps: :func:`rs_steps` (the baseline's ring reduce-scatter),
  :func:`direct_rs_steps` and :func:`direct_copy_steps` (the Sequential direct
  reduce-scatter and all-to-all on a full mesh), :func:`ag_steps` (the all-gather), slice by
  slice (:data:`SLICE_BEATS`), and :func:`read_steps` (reading results back into the
  engine's local memory).
"""

from system.engine.config import Z_CAPTURE
from system.engine.program import GemmProgram, Step, WGDesc


__all__ = ["gemm_program", "SLICE_BEATS", "slices", "rs_steps", "direct_slot",
           "direct_copy_steps", "direct_rs_steps", "ag_steps", "read_steps"]


def gemm_program(wl, g, layout, mode, remote_space, free=False, steps=None):
    """GPU ``g``'s GEMM, its WG descriptors in launch order: ``mode`` ``"t3"``
    (step-1 tiles as remote updates, steps 2..G-1 tracked updates, its own chunk an untracked
    update), ``"ring-all-reduce"`` (the same, every update tracked: the all-gather by track
    and trigger follows, :func:`sim.system.configure.configure_fused`), ``"direct"`` (a fully connected topology's direct reduce-scatter, paper section
    7.1: every other GPU's chunk as remote updates to its owner, its own chunk an untracked
    update), ``"all-to-all"`` (every other GPU's chunk as remote stores to its owner, none of
    them written locally, its own chunk a local store), ``"rs-nmc"`` (local tracked updates:
    the isolated reduce-scatter's first step, :func:`sim.system.configure.
    configure_isolated_rs`) or ``"sequential"`` (plain stores); ``layout`` the buffers
    (:func:`sim.system.configure.allocate`); ``free``: no reads, no compute time; ``steps``:
    only the WGs of those ring steps (default all)."""
    s, p = wl.spec, wl.params
    e, beat = s.elem_bytes, p.beat_bytes
    gpus = wl.gpus
    wgs = []
    for wg in wl.schedule[g]:
        if steps is not None and wg.step not in steps:
            continue
        if mode == "t3":
            remote = wg.step == 1
            tracked = (2 <= gpus - 1) if remote else (2 <= wg.step <= gpus - 1)
            update = True
        elif mode == "ring-all-reduce":
            # as "t3", and its own chunk tracked too (step G); the step-1 stores always are,
            # at GPU g - 1 the reduce-scatter's step 2 or (of 2 GPUs) its own chunk
            remote = wg.step == 1
            tracked = update = True
        elif mode == "direct":
            remote, tracked, update = wg.chunk != g, False, True
        elif mode == "all-reduce":
            remote, tracked, update = wg.chunk != g, True, True
        elif mode == "all-to-all":
            remote, tracked, update = wg.chunk != g, False, False
        elif mode == "rs-nmc":
            remote, tracked, update = False, True, True
        else:
            remote = tracked = update = False
        tiles = tuple((c0 * s.m + r0) * e // beat for r0, c0 in wg.tiles)
        a_off, b_off = wl.read_offsets(wg)
        wgs.append(WGDesc(wg.wg_id, tiles, remote, update, tracked, a_off, b_off))
    a, b = layout["A"], layout["B"]
    registers = {
        "cus": s.cus, "read_beats": 0 if free else wl.slice_read_beats(),
        "a_read": wl.slice_read_split()[0],
        "stage_wgs": sum(1 for wg in wl.schedule[g] if wg.step == 1 and
                         (steps is None or 1 in steps)),
        "compute_cycles": 0 if free else wl.slice_compute_cycles(),
        "a_base": a.base, "b_base": b.base,
        "c_base": layout["C"].base, "remote_space": remote_space, "wfs": s.wfs_per_wg,
        "seg_beats": s.tile_rows * e // beat, "tile_cols": s.tile_cols,
        "col_beats": s.m * e // beat,
    }
    if s.k_slice is not None:
        # a streaming engine's (EngineParams.streaming): the registers above are a slice's;
        # a free GEMM has nothing to stream (one slice: no cycle a slice)
        registers["k_slices"] = 1 if free else wl.wg_slices()
    return GemmProgram(wgs, registers)


#: Beats of one slice of a baseline ring step.  Like NCCL's ring, which pipelines every step
#: through slices of its ring buffers, the engines' step programs forward a step slice by slice: slice
#: ``i`` of step ``j`` waits only for slice ``i`` of what the neighbour sent in step ``j - 1``,
#: not for its whole chunk.  A slice ends with a drain (its last access's round trip, tens of
#: cycles); 32 beats (1 KiB) take about 850 cycles on the scaled link.
SLICE_BEATS = 32


def slices(chunk_beats, slice_beats=SLICE_BEATS):
    """``[(first beat, end beat)]`` of a chunk's slices."""
    return [(i, min(i + slice_beats, chunk_beats)) for i in range(0, chunk_beats, slice_beats)]


def rs_steps(wl, g, layout, remote_space, slice_beats=SLICE_BEATS):
    """The baseline's reduce-scatter on GPU ``g``'s CUs (the engine's step program):
    step ``j`` = 1..G reads its partial of chunk ``g + j`` (and from ``j = 2`` the sum received
    in slot ``j - 1``), and stores the sum into GPU ``g - 1``'s slot ``j`` through the remote
    window, the last one into its own chunk; slice by slice (:data:`SLICE_BEATS`), a slice of
    step ``j`` waiting for the same slice of slot ``j - 1``."""
    beat = wl.params.beat_bytes
    cb = layout["chunk_beats"]
    chunk_bytes = cb * beat
    c, recv = layout["C"], layout["R"]
    gpus = wl.gpus
    steps = []
    for j in range(1, gpus + 1):
        chunk = (g + j) % gpus
        x = c.base + chunk * chunk_bytes
        y = recv.base + (j - 2) * chunk_bytes if j >= 2 else None
        z = remote_space + recv.base + (j - 1) * chunk_bytes if j < gpus else x
        for first, end in slices(cb, slice_beats):
            off = first * beat
            steps.append(Step(end - first, x + off, z + off, None if y is None else y + off,
                              wait_arrivals=(j - 2) * cb + end if j >= 2 else 0))
    return steps


def direct_slot(sender, owner, gpus):
    """The receive slot (0..G-2, of ``R``) into which the Sequential direct reduce-scatter
    puts ``sender``'s partial of ``owner``'s chunk on ``owner``."""
    if sender == owner:
        raise ValueError(f"GPU {owner} sends itself nothing")
    return (sender - owner - 1) % gpus


def direct_copy_steps(wl, g, layout, remote_space, slice_beats=SLICE_BEATS):
    """GPU ``g``'s CUs copy each other GPU ``c``'s chunk of ``C`` into ``g``'s slot
    :func:`direct_slot` ``(g, c)`` of ``R`` on GPU ``c`` (GPU ``g + t`` at step ``t``, so each
    GPU receives from one sender a step), through ``g``'s remote window at its own slot
    ``direct_slot(c, g)`` (:func:`sim.system.configure.map_direct_windows`), slice by slice:
    the Sequential all-to-all (paper section 7.1), and the first half of
    :func:`direct_rs_steps`."""
    beat = wl.params.beat_bytes
    chunk_bytes = layout["chunk_beats"] * beat
    c_buf, recv = layout["C"], layout["R"]
    steps = []
    for t in range(1, wl.gpus):
        c = (g + t) % wl.gpus
        x = c_buf.base + c * chunk_bytes
        z = remote_space + recv.base + direct_slot(c, g, wl.gpus) * chunk_bytes
        for first, end in slices(layout["chunk_beats"], slice_beats):
            off = first * beat
            steps.append(Step(end - first, x + off, z + off))
    return steps


def direct_rs_steps(wl, g, layout, remote_space, slice_beats=SLICE_BEATS):
    """The Sequential baseline of the direct reduce-scatter on a full mesh (paper section 7.1)
    on GPU ``g``'s CUs: first :func:`direct_copy_steps` (each other GPU's chunk of ``g``'s
    partial into ``g``'s slot at that GPU); then, once all ``G - 1`` chunks have arrived (the
    arrival counter counts every sender's beats together, so no slot can be waited for
    alone), ``G - 1`` passes that add slot ``k`` to its own chunk in place.  Slice by slice
    (:data:`SLICE_BEATS`); a slice ends with a drain, so a pass reads the sum the pass before
    stored."""
    beat = wl.params.beat_bytes
    cb = layout["chunk_beats"]
    chunk_bytes = cb * beat
    c_buf, recv = layout["C"], layout["R"]
    gpus = wl.gpus
    own = c_buf.base + g * chunk_bytes
    steps = direct_copy_steps(wl, g, layout, remote_space, slice_beats)
    for k in range(gpus - 1):
        y = recv.base + k * chunk_bytes
        for first, end in slices(cb, slice_beats):
            off = first * beat
            steps.append(Step(end - first, own + off, own + off, y + off,
                              wait_arrivals=(gpus - 1) * cb if k == 0 else 0))
    return steps


def ag_steps(wl, g, layout, remote_space, slice_beats=SLICE_BEATS):
    """The all-gather on GPU ``g``'s CUs (the engine's step program): step ``j`` =
    1..G-1 copies chunk ``g + j - 1`` into GPU ``g - 1``'s output through the remote window,
    slice by slice, a slice of step ``j >= 2`` once the same slice has arrived."""
    beat = wl.params.beat_bytes
    cb = layout["chunk_beats"]
    c = layout["C"]
    steps = []
    for j in range(1, wl.gpus):
        x = c.base + ((g + j - 1) % wl.gpus) * cb * beat
        for first, end in slices(cb, slice_beats):
            off = first * beat
            steps.append(Step(end - first, x + off, remote_space + x + off,
                              wait_arrivals=(j - 2) * cb + end if j >= 2 else 0))
    return steps


def read_steps(base, beats, local, max_n, beat_bytes=32):
    """Read ``beats`` beats from byte ``base`` into local beats ``local`` onwards, in steps of
    at most ``max_n``."""
    steps, done = [], 0
    while done < beats:
        n = min(max_n, beats - done)
        steps.append(Step(n, base + done * beat_bytes, local + done, z_kind=Z_CAPTURE))
        done += n
    return steps
