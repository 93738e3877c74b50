"""The driver API of T3's address-space configuration (paper section 4.4, Figure 12;
``docs/design.md`` section 8): ``malloc``, ``remote_map``, ``dma_map``, ``gemm``, ``remote_unmap``.

The driver keeps the configuration of every GPU of the ring and turns it into register writes
on each node's AXI4-Lite port (:meth:`Driver.register_writes`), the way T3's driver programs the
Tracker and the DMA engine ahead of a fused kernel.  Every call validates its arguments and the
resulting configuration *before* changing any state: a refused call raises ``ValueError`` naming
the field and the value, and leaves the driver (and so the hardware) as it was.
"""

import copy
import dataclasses

from dma.config import Command, RemoteWindow, check_commands, check_remotes
from hw.interfaces import ELEM_BYTES, ElemType, Op
from system.node import BLOCK_ORDER, NodeParams, register_address
from hw.params import T3Params, check_int
from mc_arbiter.config import Policy
from mc_arbiter.config import register_values as arbiter_values
from tracker.config import Region, check_regions, check_schedule
from tracker.config import register_values as tracker_values
from l2.config import L2Config, Window
from l2.config import config_values as l2_values
from system.ring import MAX_GPUS


__all__ = ["Buffer", "Range", "Driver", "ETYPES"]


#: Element type names of the driver API.
ETYPES = {"fp16": ElemType.FP16, "bf16": ElemType.BF16, "fp32": ElemType.FP32,
          "int32": ElemType.INT32}

#: Remote-window sources live above every node's memory: a CU store there is never local.
REMOTE_SPACE = 1 << 30


@dataclasses.dataclass(frozen=True)
class Buffer:
    """A column-major ``rows x cols`` matrix of ``dtype`` on GPU ``gpu`` at byte ``base``."""
    name: str
    gpu: int
    base: int
    rows: int
    cols: int
    dtype: str
    uncached: bool = True

    @property
    def elem_bytes(self):
        return ELEM_BYTES[ETYPES[self.dtype]]

    @property
    def size(self):
        return self.rows * self.cols * self.elem_bytes

    def cols_range(self, first, count):
        """The :class:`Range` of columns ``[first, first + count)``."""
        check_int("first", first, 0)
        check_int("count", count, 1)
        if first + count > self.cols:
            raise ValueError(f"columns [{first}, {first + count}) are outside buffer "
                             f"{self.name!r} of {self.cols} columns")
        return Range(self, first, count)

    def whole(self):
        return Range(self, 0, self.cols)


@dataclasses.dataclass(frozen=True)
class Range:
    """Columns ``[first, first + count)`` of a :class:`Buffer` (contiguous bytes)."""
    buffer: Buffer
    first: int
    count: int

    @property
    def base(self):
        return self.buffer.base + self.first * self.buffer.rows * self.buffer.elem_bytes

    @property
    def size(self):
        return self.count * self.buffer.rows * self.buffer.elem_bytes


@dataclasses.dataclass
class _GPUConfig:
    next_free: int
    buffers: dict = dataclasses.field(default_factory=dict)
    regions: list = dataclasses.field(default_factory=list)
    commands: list = dataclasses.field(default_factory=list)
    remote: tuple = ()              # RemoteWindows, in the order mapped
    policy: Policy = Policy.ROUND_ROBIN
    threshold: int = None
    auto_threshold: bool = False
    l2: L2Config = L2Config()

    def copy(self):
        """A copy with containers of its own: their elements (buffers, regions, commands,
        windows) are frozen, so this is as good as a deep copy, at a fraction of its time (the
        driver copies every GPU's configuration at each call)."""
        return dataclasses.replace(self, buffers=dict(self.buffers), regions=list(self.regions),
                                   commands=list(self.commands))


class _CopyOnRead:
    """The GPUs' configurations as :meth:`Driver._transaction`'s ``change`` sees them: each is
    copied (:meth:`_GPUConfig.copy`) the first time it is read, by index or by iteration;
    ``copies`` maps the GPU numbers read to their copies."""

    def __init__(self, configs):
        self._configs, self.copies = configs, {}

    def __len__(self):
        return len(self._configs)

    def __getitem__(self, gpu):
        gpu = range(len(self._configs))[gpu]        # a list's indices: -1 the last, no further
        if gpu not in self.copies:
            self.copies[gpu] = self._configs[gpu].copy()
        return self.copies[gpu]

    def __iter__(self):
        return (self[gpu] for gpu in range(len(self._configs)))


class Driver:
    """T3's driver for a ring of ``gpus`` nodes of geometry ``nparams``, or a full mesh of
    them (``topology="mesh"``: every GPU linked to every other, :class:`system.fabric.FullMesh`).

    The configuration is per GPU; :meth:`register_writes` returns, for one GPU, the AXI4-Lite
    ``(byte address, word)`` writes that program it (Tracker regions and enable, DMA commands,
    GPU number and remote window, MC arbiter policy).
    """

    def __init__(self, params: T3Params, nparams: NodeParams, gpus, topology="ring"):
        from system.ring import TOPOLOGIES
        self.params, self.nparams = params, nparams
        self.gpus = check_int("gpus", gpus, 2, MAX_GPUS)
        if topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, not "
                             f"{topology!r}")
        self.topology = topology
        if gpus > nparams.dma.max_gpus:     # as system.ring.check_ring: GPU numbers fit
            raise ValueError(f"gpus {gpus} needs more than gpu_bits {nparams.dma.gpu_bits}")
        self.capacity = nparams.memory_bytes(params)
        self._gpu = [_GPUConfig(next_free=0) for _ in range(gpus)]

    # --- helpers -------------------------------------------------------------------------------

    def _check_gpu(self, name, gpu):
        return check_int(name, gpu, 0, self.gpus - 1, note="a GPU of the ring")

    def _check_neighbour(self, src, dst_gpu):
        """On a ring the links run from GPU ``g`` to GPU ``g - 1`` only: a window or command
        to any other GPU (itself included) would be dropped by the receiver
        (``rx_wrong_gpu``).  On a mesh every other GPU has a link (the router drops a packet
        to the sender itself, ``unroutable``)."""
        gpu = src.buffer.gpu
        if self.topology == "mesh":
            if dst_gpu == gpu:
                raise ValueError(f"dst_gpu must be another GPU of the mesh than GPU {gpu} "
                                 f"itself")
            return
        want = (gpu - 1) % self.gpus
        if dst_gpu != want:
            raise ValueError(f"dst_gpu must be GPU {gpu}'s ring neighbour {want} (the link "
                             f"from GPU g goes to GPU g - 1), not {dst_gpu!r}")

    @staticmethod
    def _check_range(name, value):
        if not isinstance(value, Range):
            raise ValueError(f"{name} must be a Range (Buffer.cols_range or Buffer.whole), "
                             f"not {value!r}")
        return value

    def _transaction(self, change):
        """Apply ``change(state)`` to a copy, validate the copy, then keep it: a refused
        configuration leaves the driver untouched.  A GPU's configuration is copied when
        ``change`` first reads it, and only the copied ones are validated again (the others'
        were, and validation reads nothing else that changes): a call on one GPU of a 32-GPU
        ring copies and checks one."""
        state = _CopyOnRead(self._gpu)
        result = change(state)
        for gpu, cfg in state.copies.items():
            if cfg != self._gpu[gpu]:
                self._validate(gpu, cfg)
        self._gpu = [state.copies.get(gpu, cfg) for gpu, cfg in enumerate(self._gpu)]
        return result

    def _validate(self, gpu, cfg):
        p, n = self.params, self.nparams
        check_regions(p, n.tracker, cfg.regions)
        caps = {g: self.capacity for g in range(self.gpus)}
        check_commands(p, n.dma, cfg.commands, dst_capacity=caps, gpus=self.gpus)
        check_remotes(p, n.dma, cfg.remote, dst_capacity=caps)
        if n.linklayer is not None:
            # the link layer's sender stops (status.tx_too_long) at a longer packet
            for c, cmd in enumerate(cfg.commands):
                if cmd is not None and cmd.tile_beats(p) + 1 > n.linklayer.max_packet_beats:
                    raise ValueError(
                        f"command {c}: a tile of {cmd.tile_rows} x {cmd.tile_cols} is "
                        f"{cmd.tile_beats(p)} beats and its header, longer than the link "
                        f"layer's max_packet_beats {n.linklayer.max_packet_beats}")
        if n.l2 is not None:
            l2_values(p, n.l2, dataclasses.replace(cfg.l2, windows=self._windows(cfg)))

    @staticmethod
    def _windows(cfg):
        """The L2's cached windows of a GPU: its cached buffers, in address order."""
        return tuple(Window(b.base, b.size) for b in
                     sorted(cfg.buffers.values(), key=lambda b: b.base) if not b.uncached)

    def configuration(self):
        """A copy of every GPU's configuration (buffers, next free byte, regions, commands,
        remote window, arbitration): what a refused call must leave as it was."""
        return copy.deepcopy(self._gpu)

    def buffer(self, gpu, name):
        try:
            return self._gpu[gpu].buffers[name]
        except KeyError:
            raise KeyError(f"GPU {gpu} has no buffer {name!r}") from None

    def regions(self, gpu):
        return list(self._gpu[gpu].regions)

    def commands(self, gpu):
        return list(self._gpu[gpu].commands)

    def remote(self, gpu):
        """GPU ``gpu``'s remote windows (:class:`dma.config.RemoteWindow`), in the order
        mapped."""
        return self._gpu[gpu].remote

    # --- the API -------------------------------------------------------------------------------

    def malloc(self, name, gpu, rows, cols, dtype="fp16", uncached=True):
        """Allocate a ``rows x cols`` column-major matrix on ``gpu`` (beat aligned).  T3's
        output buffers are ``uncached`` so that every store reaches the memory controller;
        a cached buffer (``uncached=False``) is one of the L2's cached windows, at most
        ``L2Params.windows`` per GPU (nodes without an L2 refuse it)."""
        self._check_gpu("gpu", gpu)
        if not isinstance(uncached, bool):
            raise ValueError(f"uncached must be True or False, not {uncached!r}")
        if not uncached and self.nparams.l2 is None:
            raise ValueError(f"buffer {name!r}: uncached=False, but the nodes have no L2 "
                             f"(NodeParams.l2 is None)")
        if dtype not in ETYPES:
            raise ValueError(f"dtype must be one of {sorted(ETYPES)}, not {dtype!r}")
        check_int("rows", rows, 1)
        check_int("cols", cols, 1)
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, not {name!r}")

        def change(state):
            cfg = state[gpu]
            if name in cfg.buffers:
                raise ValueError(f"GPU {gpu} already has a buffer {name!r}")
            beat = self.params.beat_bytes
            base = -(-cfg.next_free // beat) * beat
            buf = Buffer(name, gpu, base, rows, cols, dtype, uncached)
            if buf.size % beat:
                raise ValueError(f"buffer {name!r}: {rows} x {cols} {dtype} = {buf.size} "
                                 f"bytes is not a whole number of {beat}-byte beats")
            if base + buf.size > self.capacity:
                raise ValueError(f"buffer {name!r}: {buf.size} bytes at 0x{base:x} exceed GPU "
                                 f"{gpu}'s memory of {self.capacity} bytes (capacity)")
            cfg.buffers[name] = buf
            cfg.next_free = base + buf.size
            return buf
        return self._transaction(change)

    def remote_map(self, src: Range, dst_gpu, dst: Range):
        """CU stores of ``src``'s GPU to ``src`` go to ``dst`` on ``dst_gpu`` instead
        (fine-grained remote stores).  The window's source side is placed in the remote address
        space (:data:`REMOTE_SPACE` + offset): the kernel stores there."""
        self._check_range("src", src)
        self._check_range("dst", dst)
        self._check_gpu("dst_gpu", dst_gpu)
        self._check_neighbour(src, dst_gpu)
        if dst.buffer.gpu != dst_gpu:
            raise ValueError(f"dst range is on GPU {dst.buffer.gpu}, not dst_gpu {dst_gpu}")
        if src.size != dst.size:
            raise ValueError(f"remote_map: src size {src.size} != dst size {dst.size}")
        gpu = src.buffer.gpu

        most = self.nparams.dma.remote_windows

        def change(state):
            if len(state[gpu].remote) == most:
                raise ValueError(f"GPU {gpu} already has {most} remote window"
                                 f"{'s' if most > 1 else ''}, all its DMA engine has "
                                 f"(remote_windows); remote_unmap first")
            window = RemoteWindow(REMOTE_SPACE + src.base, src.size, dst_gpu, dst.base)
            state[gpu].remote += (window,)
            return window
        return self._transaction(change)

    def remote_address(self, gpu, addr):
        """Where a kernel on ``gpu`` stores to reach the remote image of local ``addr``."""
        return REMOTE_SPACE + addr

    def dma_map(self, src: Range, dst_gpu, dst: Range, op="update", updates_per_element=2,
                granularity=1, tile=(16, 16), tracked_at_dst=True):
        """When a wavefront tile of ``src`` has ``updates_per_element`` updates per element,
        send it to ``dst`` on ``dst_gpu`` (``op`` ``"update"``: op-and-store, ``"store"``:
        copy).  Programs one Tracker region and one DMA command on ``src``'s GPU; ``tile`` is
        the GEMM's ``(tile_rows, tile_cols)``; ``granularity`` tiles per DMA block."""
        self._check_range("src", src)
        self._check_range("dst", dst)
        self._check_gpu("dst_gpu", dst_gpu)
        self._check_neighbour(src, dst_gpu)
        ops = {"update": Op.UPDATE, "store": Op.STORE}
        if op not in ops:
            raise ValueError(f"op must be 'update' or 'store', not {op!r}")
        adds = self.nparams.nmc.formats
        if op == "update" and src.buffer.dtype not in adds:
            raise ValueError(f"op 'update' on {src.buffer.dtype}: the nodes' near-bank ALUs "
                             f"add {', '.join(adds)} only (NMCParams.formats)")
        if not isinstance(tracked_at_dst, bool):
            raise ValueError(f"tracked_at_dst must be True or False, not {tracked_at_dst!r}")
        if not (isinstance(tile, tuple) and len(tile) == 2):
            raise ValueError(f"tile must be (tile_rows, tile_cols), not {tile!r}")
        if dst.buffer.gpu != dst_gpu:
            raise ValueError(f"dst range is on GPU {dst.buffer.gpu}, not dst_gpu {dst_gpu}")
        if (src.buffer.rows, src.count, src.buffer.dtype) != \
                (dst.buffer.rows, dst.count, dst.buffer.dtype):
            raise ValueError(f"dma_map: src is {src.buffer.rows} x {src.count} "
                             f"{src.buffer.dtype}, dst is {dst.buffer.rows} x {dst.count} "
                             f"{dst.buffer.dtype}: shapes must match")
        tile_rows, tile_cols = tile
        check_int("tile rows", tile_rows, 1)
        check_int("tile cols", tile_cols, 1)
        gpu = src.buffer.gpu
        etype = ETYPES[src.buffer.dtype]
        command = Command(src_base=src.base, rows=src.buffer.rows, cols=src.count,
                          ld=src.buffer.rows, tile_rows=tile_rows, tile_cols=tile_cols,
                          dst_gpu=dst_gpu, dst_base=dst.base, op=ops[op], etype=etype,
                          granularity=granularity, tracked=tracked_at_dst)
        region = Region(src.base, src.size, tile_rows * tile_cols, updates_per_element)

        def change(state):
            state[gpu].regions.append(region)
            state[gpu].commands.append(command)
            return len(state[gpu].regions) - 1
        return self._transaction(change)

    def remote_unmap(self, gpu=None):
        """Remove the remote windows of ``gpu`` (all GPUs by default)."""
        gpus = range(self.gpus) if gpu is None else [self._check_gpu("gpu", gpu)]

        def change(state):
            for g in gpus:
                state[g].remote = ()
        self._transaction(change)

    def dma_unmap(self, gpu=None):
        """Remove every Tracker region and DMA command of ``gpu`` (all by default)."""
        gpus = range(self.gpus) if gpu is None else [self._check_gpu("gpu", gpu)]

        def change(state):
            for g in gpus:
                state[g].regions, state[g].commands = [], []
        self._transaction(change)

    def set_arbitration(self, policy, threshold=None, auto_threshold=False):
        """The MC arbiter's policy on every GPU (``Policy`` or its name)."""
        if isinstance(policy, str):
            try:
                policy = Policy[policy.upper()]
            except KeyError:
                raise ValueError(f"policy must be one of {[p.name for p in Policy]}, "
                                 f"not {policy!r}") from None
        if not isinstance(auto_threshold, bool):
            raise ValueError(f"auto_threshold must be True or False, not {auto_threshold!r}")
        arbiter_values(self.nparams.arbiter, policy, threshold=threshold,
                       auto_threshold=auto_threshold)     # validates

        def change(state):
            for cfg in state:
                cfg.policy, cfg.threshold, cfg.auto_threshold = policy, threshold, auto_threshold
        self._transaction(change)

    def set_l2(self, config: L2Config):
        """The L2's sets and ways in use, hit latency and bank cycle time on every GPU (an
        :class:`l2.config.L2Config`; its ``windows`` come from the cached buffers)."""
        if self.nparams.l2 is None:
            raise ValueError("set_l2: the nodes have no L2 (NodeParams.l2 is None)")
        if not isinstance(config, L2Config):
            raise ValueError(f"config must be an L2Config, not {config!r}")
        if config.windows:
            raise ValueError("set_l2: config.windows must be empty: the cached windows are "
                             "the buffers allocated with uncached=False")

        def change(state):
            for cfg in state:
                cfg.l2 = config
        self._transaction(change)

    def l2_config(self, gpu):
        """GPU ``gpu``'s :class:`l2.config.L2Config`, its windows filled in."""
        cfg = self._gpu[self._check_gpu("gpu", gpu)]
        return dataclasses.replace(cfg.l2, windows=self._windows(cfg))

    def gemm(self, out: Buffer, stages, wfs_per_wg, update=True, tracked_gpu=None,
             forwarded=(), forwarded_after=False):
        """Check a fused GEMM launch against the configuration: with ``update`` the output
        stores are op-and-stores counted by the Tracker, so the tracked workgroups of the
        ``stages`` (lists of ``wg_id``) must never fill a Tracker set; returns the kernel's
        launch record.

        ``forwarded``: the ``wg_id`` of tiles the GPU's Tracker counts besides its GEMM's, each
        of ``wfs_per_wg`` WF tiles: the all-gather's tiles that arrive from one neighbour's DMA
        engine, one tile after another, to be sent on
        (:func:`sim.system.configure.configure_all_reduce`).  One of them can be open at a
        time, in any set, so every set keeps a way for it; each fires a trigger.  A
        forwarded ``wg_id`` must not be one of the GEMM's, whose tiles would share its Tracker
        entry, unless ``forwarded_after``: each forwarded tile arrives only after the GEMM's
        tile of its id has fired (the ring's all-reduce, :func:`sim.system.configure.
        configure_fused`: a chunk comes back reduced only after every GPU sent its part)."""
        if not isinstance(out, Buffer):
            raise ValueError(f"out must be a Buffer from malloc, not {out!r}")
        if update and not out.uncached:
            raise ValueError(f"gemm(update=True) needs an uncached output buffer; "
                             f"{out.name!r} is cached")
        gpu = out.gpu if tracked_gpu is None else self._check_gpu("tracked_gpu", tracked_gpu)
        if update:
            stages = [list(stage) for stage in stages]
            forwarded = list(forwarded)
            both = set(forwarded) & {wg for stage in stages for wg in stage}
            if both and not forwarded_after:
                raise ValueError(f"gemm: wg_id {min(both)} is both the GEMM's and forwarded "
                                 f"(their tiles would share a Tracker entry)")
            check_schedule(self.params, self.nparams.tracker, stages, wfs_per_wg,
                           passing=1 if forwarded else 0)
            # every tracked tile fires one trigger; a full trigger queue stalls the Tracker and
            # with it the memory controller, which the DMA needs to drain the queue
            triggers = (sum(len(stage) for stage in stages) + len(forwarded)) * wfs_per_wg
            depth = self.nparams.dma.trigger_depth
            if triggers > depth:
                raise ValueError(f"gemm: {triggers} tracked tiles exceed the DMA's trigger_depth "
                                 f"{depth}: a full trigger queue can deadlock the node "
                                 f"(docs/dma.md)")
        return {"gpu": gpu, "out": out, "update": update}

    # --- programming ---------------------------------------------------------------------------

    def named_writes(self, gpu):
        """``[(block, register, value), ...]`` that program ``gpu`` for the next kernel.

        They begin with the Tracker's flush and the DMA engine's forget: a tile the previous
        kernel left open, or tiles held for an incomplete block, must not complete under the
        next kernel's settings (the hardware refuses to reprogram a region or command that
        still has them, with ``status.region_busy`` / ``status.cmd_busy``)."""
        from dma.config import CMD as DMA_CMD
        from dma.config import register_values as dma_values
        from tracker.config import CMD as TRACKER_CMD
        cfg = self._gpu[self._check_gpu("gpu", gpu)]
        p, n = self.params, self.nparams
        writes = [("tracker", "cmd", TRACKER_CMD.encode(flush=1)),
                  ("dma", "cmd", DMA_CMD.encode(forget=1))]
        writes += [("tracker", name, value) for name, value in
                  tracker_values(n.tracker, cfg.regions, enable=True)]
        writes += [("dma", name, value) for name, value in
                   dma_values(p, n.dma, cfg.commands, gpu_id=gpu, remote=cfg.remote,
                              rx_window=self.rx_window(gpu))]
        writes += [("arbiter", name, value) for name, value in
                   arbiter_values(n.arbiter, cfg.policy, threshold=cfg.threshold,
                                  auto_threshold=cfg.auto_threshold)]
        if n.l2 is not None:
            # accepted only while the L2 is empty (status.config_busy otherwise): the previous
            # kernel ended with a flush
            writes += [("l2", name, value) for name, value in
                       l2_values(p, n.l2, self.l2_config(gpu)).items()]
        return writes

    def rx_window(self, gpu):
        """``(base, size)``: the bytes of ``gpu`` that the ring's DMA commands and remote
        windows aimed at it write, from the first to the last (its DMA engine drops a
        received beat outside them, ``status.rx_window``); ``(0, 0)``, nowhere, when none
        is."""
        ranges = []
        for cfg in self._gpu:
            for cmd in cfg.commands:
                if cmd is not None and cmd.dst_gpu == gpu:
                    ranges.append((cmd.dst_base, cmd.dst_base + cmd.size))
            for w in cfg.remote:
                if w.dst_gpu == gpu:
                    ranges.append((w.dst_base, w.dst_base + w.size))
        if not ranges:
            return 0, 0
        lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
        return lo, hi - lo

    def register_writes(self, gpu, regs):
        """AXI4-Lite ``[(byte address, word), ...]`` for :meth:`named_writes`; ``regs`` maps a
        block name to its :class:`hw.csr.RegisterMap`."""
        out = []
        for block, name, value in self.named_writes(gpu):
            assert block in BLOCK_ORDER
            for word, data in regs[block].word_writes(name, value):
                out.append((register_address(block, word), data))
        return out
