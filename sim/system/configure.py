"""The configurations the system runs and the driver calls that set each one up: buffers on
every GPU, T3's fused set-up (paper section 4.4, Figure 12), the full mesh's direct
reduce-scatter and all-to-all (section 7.1), and the remote windows of the baselines'
collectives and of the all-gather."""


__all__ = ["CONFIGS", "ISOLATED_RS", "allocate", "configure_fused", "configure_isolated_rs",
           "configure_direct",
           "configure_all_to_all", "configure_all_reduce", "map_ring_windows",
           "map_direct_windows"]


#: The configurations of paper section 5.3 that run on the hardware.
CONFIGS = ("sequential", "t3", "t3-mca")

#: Also accepted by the testbench: ``rs-nmc``, the reduce-scatter with NMC in isolation, for
#: Ideal-RS+NMC (paper section 5.3).  Of the ring reduce-scatter (:func:`configure_isolated_rs`):
#: the GEMM's output is in memory before the phase starts, as Sequential's RS finds it, and
#: every step is a DMA transfer whose data the receiver's near-bank ALUs add into memory.  Of
#: the other collectives (a full mesh's, the all-reduce): the fused configuration with a GEMM
#: of no input reads and no compute time (its output stores only).
ISOLATED_RS = "rs-nmc"


def allocate(driver, wl, config="t3"):
    """The same buffers on every GPU: ``C`` (output), ``A``/``B`` (input windows), ``R``
    (the baseline's receive slots).  Returns ``{name: Buffer}`` of GPU 0 (all are alike).

    With an L2 in the nodes (``NodeParams.l2``) the GEMM's inputs ``A`` and ``B`` are cached,
    and so is ``C`` under the ``sequential`` baseline, whose GEMM stores it as ordinary
    stores (written back from the L2) and whose reduce-scatter and all-gather read it as
    ordinary loads; T3's ``C`` is uncached (paper section 4.4: its tracked updates must reach
    the memory controller).  ``R``, which the neighbour writes over the link, is read once
    after it arrives: uncached.  Every kernel ends with a flush of the L2 (write back and
    invalidate), so data arriving over the link into a cached buffer is never read stale."""
    cached = driver.nparams.l2 is not None
    c_cached = cached and config == "sequential"
    s, gpus = wl.spec, wl.gpus
    e = s.elem_bytes
    beat = wl.params.beat_bytes
    # the inputs as the WGs read them: their panels, one beat-wide column per beat
    # (Workload.input_beats); their values are irrelevant (the partials come from numpy)
    a_beats, b_beats = wl.input_beats()
    layout = None
    for g in range(gpus):
        bufs = {"C": driver.malloc("C", g, s.m, s.n, s.dtype, uncached=not c_cached),
                "A": driver.malloc("A", g, beat // e, max(1, a_beats), s.dtype,
                                   uncached=not cached),
                "B": driver.malloc("B", g, beat // e, max(1, b_beats), s.dtype,
                                   uncached=not cached),
                "R": driver.malloc("R", g, s.m, wl.chunk_cols * (gpus - 1), s.dtype)}
        layout = layout or bufs
    layout = dict(layout)
    layout["chunk_beats"] = s.m * wl.chunk_cols * e // beat
    return layout


def _map_ring_steps(driver, wl, g, steps, updates_per_element, track_final=False):
    """``dma_map`` GPU ``g``'s chunks of ring ``steps`` to the same place in ``C`` on GPU
    ``g-1`` as op-and-stores tracked at ``updates_per_element``, in contiguous ranges of one
    destination kind: the chunk that is GPU ``g-1``'s own final one is untracked there unless
    ``track_final`` (the all-gather by track and trigger follows)."""
    gpus, s, nc = wl.gpus, wl.spec, wl.chunk_cols
    dst = (g - 1) % gpus
    c_here, c_there = driver.buffer(g, "C"), driver.buffer(dst, "C")
    runs = []
    for step in steps:
        chunk = (g + step) % gpus
        final_there = chunk == dst
        if runs and runs[-1][1] + runs[-1][2] == chunk and runs[-1][0] == final_there:
            runs[-1][2] += 1
        else:
            runs.append([final_there, chunk, 1])
    for final_there, first, count in runs:
        driver.dma_map(c_here.cols_range(first * nc, count * nc), dst,
                       c_there.cols_range(first * nc, count * nc), op="update",
                       updates_per_element=updates_per_element,
                       tile=(s.tile_rows, s.tile_cols),
                       tracked_at_dst=track_final or not final_there)


def configure_fused(driver, wl, layout, policy, all_reduce=False):
    """T3's set-up (paper Figure 12) for the fused GEMM -> ring-RS on every GPU ``g``:
    ``remote_map`` of the step-1 chunk ``g+1`` into GPU ``g-1``; ``dma_map`` of the chunks of
    steps 2..G-1 (updates per element 2) to the same place on GPU ``g-1``, the one that is GPU
    ``g-1``'s own final chunk without tracking there; the arbiter's policy.

    ``all_reduce``: the all-gather follows by track and trigger in the same kernel, no CU
    (:func:`_ring_all_gather`): each GPU's own chunk is tracked too (its GEMM's update and
    the one from GPU ``g+1``), and its DMA sends it on once reduced."""
    gpus, s = wl.gpus, wl.spec
    nc = wl.chunk_cols
    for g in range(gpus):
        dst = (g - 1) % gpus
        c_here, c_there = driver.buffer(g, "C"), driver.buffer(dst, "C")
        step1 = (g + 1) % gpus
        driver.remote_map(c_here.cols_range(step1 * nc, nc), dst,
                          c_there.cols_range(step1 * nc, nc))
        _map_ring_steps(driver, wl, g, range(2, gpus), updates_per_element=2,
                        track_final=all_reduce)
        # the GEMM's tracked steps: 2..G-1, and with the all-gather its own chunk's (G)
        tracked_steps = range(2, gpus + 1 if all_reduce else gpus)
        forwarded = _ring_all_gather(driver, wl, g) if all_reduce else ()
        driver.gemm(c_here, wl.stages(g, tracked_steps), s.wfs_per_wg, update=True,
                    forwarded=forwarded, forwarded_after=all_reduce)
    driver.set_arbitration(policy, auto_threshold=policy == "MCA")


def configure_isolated_rs(driver, wl, layout):
    """The ring reduce-scatter with NMC in isolation (the paper's Ideal-RS+NMC, section 5.3)
    on every GPU ``g``: the chunks of steps 1..G-1 are ``dma_map``-ed to the same place on
    GPU ``g-1`` as op-and-stores, tracked at one update per element, untracked there for the
    one that is ``g-1``'s own final chunk.  The output is stored before the timed phase with
    plain stores, which the Tracker does not count, except the step-1 chunk; the phase starts
    with the engine storing that chunk as tracked updates into the zeroed memory (its tiles
    fire at once, with no reads and no compute: a GPU's first send needs its data in memory,
    and this puts it there), and from then on each arriving update completes a tile that the
    DMA sends on (:meth:`sim.system.host.RingHost.run`).  Round-robin arbitration."""
    gpus, s = wl.gpus, wl.spec
    for g in range(gpus):
        c_here = driver.buffer(g, "C")
        _map_ring_steps(driver, wl, g, range(1, gpus), updates_per_element=1)
        # the engine's tracked stores: step 1's chunk; the tiles of steps 2..G-1 arrive from
        # GPU g+1's DMA, one after another, each completed by its one update
        driver.gemm(c_here, wl.stages(g, [1]), s.wfs_per_wg, update=True,
                    forwarded=[wg for stage in wl.stages(g, range(2, gpus)) for wg in stage])
    driver.set_arbitration("ROUND_ROBIN")


def _ring_all_gather(driver, wl, g):
    """GPU ``g``'s part of the all-gather by track and trigger after the ring reduce-scatter:
    its reduced chunk ``g`` (tracked at two updates per element, its GEMM's and GPU
    ``g+1``'s) is stored into slot 0 of ``R`` on GPU ``g-1``; slot ``s`` of ``g``'s ``R``
    holds chunk ``g+1+s`` (each GPU's slots rotated by one against its neighbour's, so one
    range of slots maps onto the next), tracked at one update per element, and slots
    ``0..G-3`` go on to slot ``s+1`` of GPU ``g-1``, untracked there for the last (GPU
    ``g-1`` is that chunk's last stop).  Out of place: a chunk's tiles pass through GPUs that
    tracked them in the reduce-scatter, at two updates per element.  Returns the ``wg_id`` of
    the tiles ``g`` passes on (:meth:`sim.system.driver.Driver.gemm`'s ``forwarded``)."""
    s = wl.spec
    gpus, nc = wl.gpus, wl.chunk_cols
    tile = (s.tile_rows, s.tile_cols)
    dst = (g - 1) % gpus
    r_here, r_there = driver.buffer(g, "R"), driver.buffer(dst, "R")
    driver.dma_map(driver.buffer(g, "C").cols_range(g * nc, nc), dst, r_there.cols_range(0, nc),
                   op="store", updates_per_element=2, tile=tile, tracked_at_dst=gpus > 2)
    for first, count, tracked in ((0, gpus - 3, True), (gpus - 3, 1, False)):
        if first >= 0 and count > 0:
            driver.dma_map(r_here.cols_range(first * nc, count * nc), dst,
                           r_there.cols_range((first + 1) * nc, count * nc), op="store",
                           updates_per_element=1, tile=tile, tracked_at_dst=tracked)
    # slot s's chunk is g's step s + 1 (a tile's wg_id is its chunk's on every GPU)
    return [wg for step in range(1, gpus - 1) for wg in wl.stages(g, [step])[0]]


def _need_mesh(driver, what):
    if driver.topology != "mesh":
        raise ValueError(f"{what} needs a link to every GPU: topology must be mesh, not "
                         f"{driver.topology!r}")


def _map_peers(driver, wl, src, src_chunk, dst, dst_chunk):
    """A remote window on every GPU ``g`` for each other GPU ``c``: chunk ``src_chunk(g, c)``
    of ``g``'s buffer ``src`` onto chunk ``dst_chunk(g, c)`` of ``c``'s buffer ``dst``
    (chunks of ``wl.chunk_cols`` columns)."""
    nc = wl.chunk_cols
    for g in range(wl.gpus):
        here = driver.buffer(g, src)
        for c in range(wl.gpus):
            if c != g:
                driver.remote_map(here.cols_range(src_chunk(g, c) * nc, nc), c,
                                  driver.buffer(c, dst).cols_range(dst_chunk(g, c) * nc, nc))


def configure_direct(driver, wl, layout, policy):
    """The direct reduce-scatter on a full mesh (paper section 7.1): every GPU ``g``
    ``remote_map``s each other GPU ``c``'s chunk of its output to the same chunk on GPU ``c``
    (a remote window each: ``DMAParams.remote_windows`` of at least ``G - 1``), where the
    near-memory ALUs add the arriving updates to the owner's own; no Tracker region, no DMA
    command: the collective is the GEMM's stores.  And the arbiter's policy."""
    _need_mesh(driver, "the direct reduce-scatter")
    _map_peers(driver, wl, "C", lambda g, c: c, "C", lambda g, c: c)
    driver.set_arbitration(policy, auto_threshold=policy == "MCA")


def configure_all_to_all(driver, wl, layout, policy):
    """The all-to-all on a full mesh (paper sections 7.1 and 7.2, expert parallelism): every
    GPU ``g`` ``remote_map``s each other GPU ``c``'s chunk of its output to ``g``'s slot
    :func:`sim.system.programs.direct_slot` ``(g, c)`` of ``R`` on GPU ``c`` (a remote window
    each), so the GEMM's stores of that chunk go to its owner and are not written locally;
    ``g``'s own chunk stays in its ``C``.  No Tracker region, no DMA command.  And the
    arbiter's policy."""
    from sim.system.programs import direct_slot
    _need_mesh(driver, "the all-to-all")
    _map_peers(driver, wl, "C", lambda g, c: c,
               "R", lambda g, c: direct_slot(g, c, wl.gpus))
    driver.set_arbitration(policy, auto_threshold=policy == "MCA")


def configure_all_reduce(driver, wl, layout, policy):
    """A whole all-reduce on a full mesh without the CUs: the direct reduce-scatter
    (:func:`configure_direct`, its updates tracked), then an all-gather by track and trigger
    along the ring: the owner ``g``'s Tracker counts its chunk's tiles complete at ``G``
    updates per element (its own GEMM's and its ``G - 1`` peers'), and its DMA sends each
    reduced tile as a plain store to GPU ``g - 1``, tracked there at one update per element;
    every GPU forwards each other chunk's tiles so to its ``g - 1`` in turn, but the owner's
    ``g + 1``, where the chunk's journey ends (untracked).  And the arbiter's policy."""
    s = wl.spec
    gpus, nc = wl.gpus, wl.chunk_cols
    configure_direct(driver, wl, layout, policy)
    tile = (s.tile_rows, s.tile_cols)
    for g in range(gpus):
        dst = (g - 1) % gpus
        here, there = driver.buffer(g, "C"), driver.buffer(dst, "C")
        # chunk c arrives at g from g + 1 and goes on to g - 1 unless g - 1 is c + 1, its
        # journey's end; g's own chunk starts its journey with G updates counted
        runs = []
        for c in range(gpus):
            if (c + 1) % gpus == g and c != g:      # g is the chunk's last stop
                continue
            updates = gpus if c == g else 1
            tracked = (c + 1) % gpus != dst
            if runs and runs[-1][1] + runs[-1][2] == c and runs[-1][0] == (updates, tracked):
                runs[-1][2] += 1
            else:
                runs.append([(updates, tracked), c, 1])
        for (updates, tracked), first, count in runs:
            driver.dma_map(here.cols_range(first * nc, count * nc), dst,
                           there.cols_range(first * nc, count * nc), op="store",
                           updates_per_element=updates, tile=tile, tracked_at_dst=tracked)
        # the tiles g forwards, one after another from g + 1's DMA (a wg_id is its chunk's on
        # every GPU): each holds a Tracker way while it arrives and fires a trigger
        forwarded = [wg for c in range(gpus) if c not in (g, (g - 1) % gpus)
                     for wg in wl.stages(g, [(c - g) % gpus])[0]]
        driver.gemm(here, wl.stages(g, [gpus]), s.wfs_per_wg, update=True,
                    forwarded=forwarded)


def map_ring_windows(driver, wl, buffer):
    """Every GPU's remote window: its whole ``buffer`` onto the same buffer of GPU ``g-1``
    (the baseline's RS into the receive slots ``R``, and the all-gather into ``C``)."""
    driver.remote_unmap()
    driver.dma_unmap()
    for g in range(wl.gpus):
        dst = (g - 1) % wl.gpus
        driver.remote_map(driver.buffer(g, buffer).whole(), dst,
                          driver.buffer(dst, buffer).whole())


def map_direct_windows(driver, wl):
    """The Sequential direct reduce-scatter's remote windows (a full mesh): on every GPU ``g``,
    for each other GPU ``c``, its receive slot ``direct_slot(c, g)`` of ``R`` onto GPU ``c``'s
    slot ``direct_slot(g, c)`` (:func:`sim.system.programs.direct_rs_steps`), a window each."""
    from sim.system.programs import direct_slot
    driver.remote_unmap()
    driver.dma_unmap()
    _map_peers(driver, wl, "R", lambda g, c: direct_slot(c, g, wl.gpus),
               "R", lambda g, c: direct_slot(g, c, wl.gpus))
