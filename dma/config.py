"""DMA engine geometry, command table, link packet format, register map and driver checks.

Plain Python shared by the RTL (:mod:`dma.rtl`), the golden model (:mod:`dma.model`), the
testbenches and the driver, so that a command's meaning, the header's bit layout and the
register map exist once.

Command (one per Tracker region: a trigger's ``region`` index selects the command)
----------------------------------------------------------------------------------
The source region is a column-major ``rows x cols`` array of ``etype`` elements with leading
dimension ``ld`` (elements between the starts of two columns) at ``src_base``; it spans
``ld * cols * elem_bytes`` bytes.  A wavefront tile is ``tile_rows x tile_cols`` elements,
i.e. ``tile_cols`` contiguous column segments of ``tile_rows`` elements, ``ld`` elements
apart.  A trigger gives the tile's start address (its smallest address); the engine reads the
tile and sends it to GPU ``dst_gpu`` at ``dst_base + (start - src_base)``: the destination
array has the source's layout.  ``op`` is ``STORE`` (copy) or ``UPDATE`` (op-and-store, the
reduce-scatter's add).  ``granularity`` tiles make one DMA block: with more than one, the
command's completion counter holds the triggered tiles until the block's last one arrives, then
the block's tiles leave back to back.
"""

import dataclasses

from amaranth.lib import data

from hw.csr import Field, Reg, RegisterMap
from hw.interfaces import ELEM_BYTES, ElemType, Op, Packer, Source, region_bits
from hw.params import T3Params, check_int, check_params, is_int, param


__all__ = [
    "DMAParams", "Command", "RemoteWindow", "Status", "header_layout", "header_packer",
    "header_check", "header_check_of",
    "MAX_REMOTE_WINDOWS", "check_commands", "check_remote", "check_remotes", "remote_windows",
    "remote_register",
    "dma_registers", "register_values", "STAT_REGISTERS",
    "MODE", "INFO", "CTRL", "CMD", "STATUS", "window_layout",
]


#: Statistics and status registers that the test layers read back after a run.
STAT_REGISTERS = ("status", "errors", "triggers", "blocks", "tiles_sent", "remote_sent",
                  "remote_packets", "beats_sent", "beats_received", "packets_received", "reads", "link_busy",
                  "trigger_stall")

#: A command's ``mode`` register (``cmd<c>_mode``).
MODE = Reg("mode", None, "rw", "", fields=(
    Field("valid", doc="the command is programmed"),
    Field("op", 2, "1 store, 2 update (op-and-store)"),
    Field("etype", 2, "element type (0 fp16, 1 bf16, 2 fp32, 3 int32)"),
    Field("tracked", doc="the destination's Tracker counts the tile's beats"),
    Field("dst_gpu", 8, "destination GPU", lsb=8),
    Field("granularity", 8, "tiles per DMA block")))

#: The ``info`` register: the geometry, read-only.
INFO = Reg("info", 32, "ro", "geometry", fields=(
    Field("commands", 8, "command table entries"),
    Field("max_granularity", 8, "largest DMA block in tiles"),
    Field("buffer_beats", 16, "payload buffer")))

#: The ``ctrl`` register.
CTRL = Reg("ctrl", None, "rw", "", fields=(
    Field("enable", doc="dispatch triggers (0: they wait in the queue)"),))

#: The ``cmd`` register: write 1 to a field to act.
CMD = Reg("cmd", None, "wo", "write 1 to act", fields=(
    Field("clear", doc="clear the counters"),
    Field("forget", doc="forget the tiles held for incomplete blocks")))

#: The ``status`` register: sticky error bits, write 1 to clear.
STATUS = Reg("status", None, "w1c", "errors", fields=(
    Field("no_command", doc="a trigger named a command that is not valid, or whose tile has "
                              "more beats than the header can count; dropped"),
    Field("out_of_region", doc="a trigger's tile is unaligned or runs outside its region; "
                               "dropped"),
    Field("remote_range", doc="a remote store outside the remote window (or a read); dropped"),
    Field("mem_error", doc="a tile read came back with the error flag (data sent as read)"),
    Field("resp_order", doc="a read response's tag was not the next one expected (an extra "
                            "or a lost response); dropped; after a lost one every later "
                            "response is dropped and the tiles wait until reset"),
    Field("rx_framing", doc="a received packet was malformed (see docs/dma.md)"),
    Field("rx_wrong_gpu", doc="a received packet was addressed to another GPU; dropped"),
    Field("rx_check", doc="a received header failed its check field; the packet was dropped"),
    Field("cmd_busy", doc="a write to a command's registers while it holds tiles of an "
                          "incomplete block (or dispatches one); ignored: `forget` first"),
    Field("rx_window", doc="a received payload beat addressed outside the rx window; dropped "
                           "(the packet's other beats are written where they belong)"),
    Field("rx_open", lsb=16, live=True,
          doc="a received packet is incomplete, payload beats still due (once the link is "
              "quiet: a packet cut short at the end, its beats written as far as they came)")))


#: The most remote windows an engine can have (``DMAParams.remote_windows``): a full mesh
#: of up to one more GPUs.
MAX_REMOTE_WINDOWS = 16


@dataclasses.dataclass(frozen=True)
class DMAParams:
    """Geometry of the DMA engine.

    Parameters
    ----------
    commands : int
        Entries of the command table, 1 to 16; must equal the Tracker's ``regions`` (the
        trigger's ``region`` field selects the command).
    trigger_depth : int
        Depth of the trigger queue, 2 to 4096.  When full, the Tracker's trigger output waits
        — and with it every access at the memory controller, the DMA's own tile reads among
        them: a node must hold every trigger a kernel can fire (``docs/dma.md``).
    buffer_beats : int
        Payload buffer, 4 to 1024 beats; it bounds the tile reads in flight.  To keep the link
        busy it must cover the memory's read round trip (in cycles) plus a few beats.
    max_granularity : int
        Largest DMA block in wavefront tiles, 1 to 64 (size of each command's pending store).
    gpu_bits : int
        Width of a GPU number on the link, 1 to 8.
    remote_burst : int
        Most remote stores combined into one link packet, 1 to 64.
    remote_flush : int
        Cycles without a new remote store after which an open packet leaves, 1 to 255.
    remote_windows : int
        ``remote_map`` windows, 1 to 16: each sends the CU stores in its source range to its
        own GPU (a fully connected topology's direct reduce-scatter maps each slice of a GEMM
        stage's output to its owner, paper section 7.1; the ring needs one).
    dim_bits : int
        Width of the dimension registers (``rows``, ``cols``, ``ld``, ``tile_rows``,
        ``tile_cols``), 4 to 24.
    len_bits : int
        Width of the link header's beat counts (``beats``, ``seg_beats``), 7 to 16: a tile
        packet carries at most ``2**len_bits - 1`` beats (a command with a longer tile is
        refused by :func:`check_commands`, and by the engine as ``no_command``).  With
        ``gpu_bits`` it sets the header's size, which must fit one beat: 146 bits with the
        defaults, 128 with ``gpu_bits=1, len_bits=10`` (the board's 128-bit beats).
    """

    commands: int = param(4, "command table entries = Tracker regions", 1, 16)
    trigger_depth: int = param(8, "trigger queue entries", 2, 4096)
    buffer_beats: int = param(32, "payload buffer = reads in flight", 4, 1024)
    max_granularity: int = param(8, "largest DMA block in tiles", 1, 64)
    gpu_bits: int = param(4, "GPU number width", 1, 8)
    dim_bits: int = param(16, "width of the dimension registers", 4, 24)
    remote_burst: int = param(8, "remote stores combined into one packet", 1, 64)
    remote_flush: int = param(4, "idle cycles before an open remote packet leaves", 1, 255)
    len_bits: int = param(16, "width of the link header's beat counts", 7, 16)
    remote_windows: int = param(1, "remote_map windows", 1, MAX_REMOTE_WINDOWS)

    def __post_init__(self):
        check_params(self)

    @property
    def command_bits(self):
        return region_bits(self.commands)

    @property
    def max_gpus(self):
        return 1 << self.gpu_bits

    def check_against(self, params: T3Params):
        """Refuse a geometry whose link header does not fit one beat of ``params``, and tags
        too narrow to check the read responses (the engine drops a response whose tag is not
        the next one expected and tells a duplicate, the last tag again, from a lost response,
        any other: with one bit the two are the same tag, and without tags an extra or lost
        response would go unnoticed and shift every later beat)."""
        if params.tag_bits < 2:
            raise ValueError(f"the DMA engine checks its read responses by tag: tag_bits must "
                             f"be at least 2, not {params.tag_bits}")
        size = header_layout(params, self).size + HEADER_CHECK_BITS
        if size > params.beat_bits:
            raise ValueError(f"the link header needs {size} bits, more than one beat of "
                             f"beat_bits {params.beat_bits}")

    def to_dict(self):
        return dataclasses.asdict(self)


#: The ``status`` bits as flags (from :data:`STATUS`), with ``ERRORS`` (the sticky ones).
Status = STATUS.flags("Status", {"ERRORS": [f.name for f in STATUS.fields if not f.live]})


@dataclasses.dataclass(frozen=True)
class Command:
    """One pre-programmed DMA command (see the module documentation)."""
    src_base: int
    rows: int
    cols: int
    ld: int
    tile_rows: int
    tile_cols: int
    dst_gpu: int
    dst_base: int
    op: Op = Op.UPDATE
    etype: ElemType = ElemType.FP16
    granularity: int = 1
    tracked: bool = True

    @property
    def elem_bytes(self):
        return ELEM_BYTES[ElemType(self.etype)]

    @property
    def stride(self):
        """Bytes between the starts of two columns."""
        return self.ld * self.elem_bytes

    @property
    def size(self):
        """Bytes spanned by the region (``ld * cols`` elements)."""
        return self.stride * self.cols

    @property
    def seg_bytes(self):
        return self.tile_rows * self.elem_bytes

    @property
    def tile_elems(self):
        return self.tile_rows * self.tile_cols

    @property
    def tiles(self):
        return (self.rows // self.tile_rows) * (self.cols // self.tile_cols)

    def seg_beats(self, params):
        return self.seg_bytes // params.beat_bytes

    def tile_beats(self, params):
        return self.seg_beats(params) * self.tile_cols

    def tile_starts(self):
        """Start byte address of every tile, column of tiles by column of tiles."""
        return [self.src_base + (tc * self.tile_cols * self.ld + tr * self.tile_rows)
                * self.elem_bytes
                for tc in range(self.cols // self.tile_cols)
                for tr in range(self.rows // self.tile_rows)]

    def mode(self):
        """Value of the command's ``mode`` register."""
        return MODE.encode(valid=1, op=Op(self.op).value, etype=ElemType(self.etype).value,
                           tracked=int(bool(self.tracked)), dst_gpu=self.dst_gpu,
                           granularity=self.granularity)


@dataclasses.dataclass(frozen=True)
class RemoteWindow:
    """``remote_map``: CU stores to ``[src_base, src_base + size)`` go to GPU ``dst_gpu`` at
    ``dst_base + (addr - src_base)`` (write-combined into packets of up to
    ``DMAParams.remote_burst`` beats)."""
    src_base: int
    size: int
    dst_gpu: int
    dst_base: int


def window_layout(params: T3Params):
    """The ``remote_map`` window as the DMA engine exports it to the node (port ``window``):
    ``base`` and ``size`` in bytes (size 0: no window)."""
    return data.StructLayout({"base": params.addr_bits, "size": params.addr_bits})


def header_layout(params: T3Params, dparams: DMAParams):
    """The header beat of a link packet (``tdata`` of the beat with ``tuser = 1``).

    Payload beat ``i`` goes to ``addr + (i // seg_beats) * stride + (i % seg_beats) *
    beat_bytes`` with byte enables ``tkeep``.
    """
    return data.StructLayout({
        "dst_gpu":   dparams.gpu_bits,
        "src_gpu":   dparams.gpu_bits,
        "addr":      params.addr_bits,
        "op":        Op,
        "etype":     ElemType,
        "source":    Source,
        "tracked":   1,
        "wg_id":     params.wg_id_bits,
        "wf_id":     params.wf_id_bits,
        "beats":     dparams.len_bits,
        "seg_beats": dparams.len_bits,
        "stride":    params.addr_bits,
    })


#: Bits of the header beat's check field, right above the header's fields: the XOR of the
#: fields' 16-bit words and :data:`HEADER_CHECK_SEED`.  It detects every error of one to 16
#: consecutive bits in the header (a flipped address, GPU or length) and all but 1 in 65,536
#: payload beats taken for a header (an all-zero beat fails it); the receiver drops a header
#: that fails it (``status.rx_check``).  Payload beats carry no check: that is the link
#: layer's CRC, below this interface.
HEADER_CHECK_BITS = 16
HEADER_CHECK_SEED = 0xA5C3


def header_check(value, width):
    """The check byte of a header of ``width`` bits and integer value ``value``."""
    check = HEADER_CHECK_SEED
    for k in range(0, width, HEADER_CHECK_BITS):
        check ^= (value >> k) & ((1 << HEADER_CHECK_BITS) - 1)
    return check


def header_check_of(value, width):
    """:func:`header_check` in hardware: the check field of the first ``width`` bits of the
    Amaranth value ``value``, the seed XOR every ``HEADER_CHECK_BITS`` slice."""
    out = HEADER_CHECK_SEED
    for k in range(0, width, HEADER_CHECK_BITS):
        out = out ^ value[k:min(k + HEADER_CHECK_BITS, width)]
    return out


class HeaderPacker(Packer):
    """:class:`hw.interfaces.Packer` of the header beat: :meth:`pack` appends the check byte,
    :meth:`unpack` takes a whole ``tdata`` and raises ``ValueError`` if the check fails."""

    def __init__(self, layout):
        super().__init__(layout)
        self.width = layout.size

    def pack(self, values):
        word = super().pack(values)
        return word | header_check(word, self.width) << self.width

    def unpack(self, word):
        word = int(word)
        fields = word & ((1 << self.width) - 1)
        check = (word >> self.width) & ((1 << HEADER_CHECK_BITS) - 1)
        if check != header_check(fields, self.width):
            raise ValueError(f"header check 0x{check:02x} does not match its fields "
                             f"(0x{header_check(fields, self.width):02x})")
        return super().unpack(fields)


def header_packer(params: T3Params, dparams: DMAParams):
    """A :class:`HeaderPacker` of :func:`header_layout`."""
    return HeaderPacker(header_layout(params, dparams))


def _where(index):
    return f"command {index}"


def check_commands(params: T3Params, dparams: DMAParams, commands, dst_capacity=None,
                   gpus=None):
    """Refuse a command table the hardware would misinterpret; returns it as a list.

    ``dst_capacity`` is the destination GPUs' memory size in bytes (an ``int`` for all, or a
    mapping GPU -> bytes); ``gpus`` the number of GPUs in the system.  Checks, each naming the
    command, the field and the value: field types and register widths; ``op`` is STORE or
    UPDATE; ``src_base``, ``dst_base``, the column stride and the column segment are beat
    aligned (so every tile is whole beats); ``rows``/``cols`` are whole tiles and ``ld >=
    rows``; ``granularity`` from 1 to ``max_granularity`` and divides the tile count; a tile
    fits the header's beat count; source regions do not overlap each other; each destination
    lies inside its GPU's memory and destinations on one GPU do not overlap.
    """
    commands = list(commands)
    if len(commands) > dparams.commands:
        raise ValueError(f"{len(commands)} commands given but the DMA engine has "
                         f"{dparams.commands} command registers")
    beat = params.beat_bytes
    dim_max = (1 << dparams.dim_bits) - 1
    for index, c in enumerate(commands):
        where = _where(index)
        for field in ("src_base", "rows", "cols", "ld", "tile_rows", "tile_cols", "dst_gpu",
                      "dst_base", "granularity"):
            value = getattr(c, field)
            if not is_int(value) or value < 0:
                raise ValueError(f"{where}: {field} must be a non-negative integer, "
                                 f"not {value!r}")
        for field in ("rows", "cols", "ld", "tile_rows", "tile_cols"):
            value = getattr(c, field)
            if not 1 <= value <= dim_max:
                raise ValueError(f"{where}: {field} must be from 1 to {dim_max} "
                                 f"(dim_bits {dparams.dim_bits}), not {value}")
        try:
            op = Op(c.op)
        except ValueError:
            raise ValueError(f"{where}: op must be Op.STORE or Op.UPDATE, not {c.op!r}") from None
        if op not in (Op.STORE, Op.UPDATE):
            raise ValueError(f"{where}: op must be Op.STORE or Op.UPDATE, not {op.name}")
        try:
            ElemType(c.etype)
        except ValueError:
            raise ValueError(f"{where}: etype must be an ElemType, not {c.etype!r}") from None
        if c.dst_gpu >= dparams.max_gpus or (gpus is not None and c.dst_gpu >= gpus):
            limit = dparams.max_gpus if gpus is None else min(gpus, dparams.max_gpus)
            raise ValueError(f"{where}: dst_gpu must be below {limit}, not {c.dst_gpu}")
        if not 1 <= c.granularity <= dparams.max_granularity:
            raise ValueError(f"{where}: granularity must be from 1 to "
                             f"{dparams.max_granularity}, not {c.granularity}")
        if c.ld < c.rows:
            raise ValueError(f"{where}: ld {c.ld} is smaller than rows {c.rows}")
        if c.rows % c.tile_rows:
            raise ValueError(f"{where}: rows {c.rows} is not a multiple of tile_rows "
                             f"{c.tile_rows}")
        if c.cols % c.tile_cols:
            raise ValueError(f"{where}: cols {c.cols} is not a multiple of tile_cols "
                             f"{c.tile_cols}")
        for field, value in (("src_base", c.src_base), ("dst_base", c.dst_base)):
            if value % beat:
                raise ValueError(f"{where}: {field} 0x{value:x} is not aligned to the "
                                 f"{beat}-byte beat")
        if c.seg_bytes % beat:
            raise ValueError(f"{where}: tile_rows {c.tile_rows} x {c.elem_bytes} bytes = "
                             f"{c.seg_bytes} is not a whole number of {beat}-byte beats "
                             f"(unaligned tile)")
        if c.stride % beat:
            raise ValueError(f"{where}: ld {c.ld} x {c.elem_bytes} bytes = {c.stride} is not "
                             f"a whole number of {beat}-byte beats (unaligned tile)")
        if c.tile_beats(params) >= 1 << dparams.len_bits:
            raise ValueError(f"{where}: a tile of {c.tile_beats(params)} beats does not fit "
                             f"the header's {dparams.len_bits}-bit beat count (len_bits)")
        if c.tiles % c.granularity:
            raise ValueError(f"{where}: granularity {c.granularity} does not divide the "
                             f"region's {c.tiles} tiles")
        for field, base in (("src_base", c.src_base), ("dst_base", c.dst_base)):
            if base + c.size > 1 << params.addr_bits:
                raise ValueError(f"{where}: {field} 0x{base:x} + size 0x{c.size:x} passes the "
                                 f"{params.addr_bits}-bit address space")
        if dst_capacity is not None:
            cap = dst_capacity if is_int(dst_capacity) else dst_capacity.get(c.dst_gpu)
            if cap is None:
                raise ValueError(f"{where}: dst_gpu {c.dst_gpu} has no memory")
            if c.dst_base + c.size > cap:
                raise ValueError(f"{where}: destination [0x{c.dst_base:x}, "
                                 f"0x{c.dst_base + c.size:x}) is outside GPU {c.dst_gpu}'s "
                                 f"0x{cap:x} bytes of memory")
    for i, a in enumerate(commands):
        for j in range(i + 1, len(commands)):
            b = commands[j]
            if a.src_base < b.src_base + b.size and b.src_base < a.src_base + a.size:
                raise ValueError(f"command {i} source [0x{a.src_base:x}, "
                                 f"0x{a.src_base + a.size:x}) overlaps command {j} source "
                                 f"[0x{b.src_base:x}, 0x{b.src_base + b.size:x})")
            if a.dst_gpu == b.dst_gpu and a.dst_base < b.dst_base + b.size \
                    and b.dst_base < a.dst_base + a.size:
                raise ValueError(f"command {i} destination [0x{a.dst_base:x}, "
                                 f"0x{a.dst_base + a.size:x}) overlaps command {j} destination "
                                 f"on GPU {a.dst_gpu}")
    return commands


def remote_windows(remote):
    """``remote`` (None, a :class:`RemoteWindow` or a sequence of them) as a tuple."""
    if remote is None:
        return ()
    if isinstance(remote, RemoteWindow):
        return (remote,)
    return tuple(remote)


def check_remotes(params: T3Params, dparams: DMAParams, remote, dst_capacity=None):
    """Refuse remote windows (:func:`remote_windows` of ``remote``) that are more than the
    engine has or whose source ranges overlap (a store must have one destination), and each
    as :func:`check_remote` does."""
    windows = remote_windows(remote)
    if len(windows) > dparams.remote_windows:
        raise ValueError(f"{len(windows)} remote windows, more than the DMA engine's "
                         f"remote_windows {dparams.remote_windows}")
    for w in windows:
        check_remote(params, dparams, w, dst_capacity)
    spans = sorted((w.src_base, w.src_base + w.size) for w in windows)
    for (lo0, hi0), (lo1, hi1) in zip(spans, spans[1:]):
        if lo1 < hi0:
            raise ValueError(f"remote windows [0x{lo0:x}, 0x{hi0:x}) and [0x{lo1:x}, "
                             f"0x{hi1:x}) overlap")
    return windows


def check_remote(params: T3Params, dparams: DMAParams, window, dst_capacity=None):
    """Refuse a remote window that is unaligned, empty, outside the address space or outside
    the destination's memory (naming the field)."""
    if window is None:
        return None
    for field in ("src_base", "size", "dst_gpu", "dst_base"):
        value = getattr(window, field)
        if not is_int(value) or value < 0:
            raise ValueError(f"remote window: {field} must be a non-negative integer, "
                             f"not {value!r}")
        if field != "dst_gpu" and value % params.beat_bytes:
            raise ValueError(f"remote window: {field} 0x{value:x} is not aligned to the "
                             f"{params.beat_bytes}-byte beat")
    if window.size == 0:
        raise ValueError("remote window: size must be positive, not 0")
    if window.dst_gpu >= dparams.max_gpus:
        raise ValueError(f"remote window: dst_gpu must be below {dparams.max_gpus}, "
                         f"not {window.dst_gpu}")
    for field in ("src_base", "dst_base"):
        if getattr(window, field) + window.size > 1 << params.addr_bits:
            raise ValueError(f"remote window: {field} + size passes the {params.addr_bits}-bit "
                             f"address space")
    if dst_capacity is not None:
        cap = dst_capacity if is_int(dst_capacity) else dst_capacity.get(window.dst_gpu)
        if cap is None or window.dst_base + window.size > cap:
            raise ValueError(f"remote window: destination [0x{window.dst_base:x}, "
                             f"0x{window.dst_base + window.size:x}) is outside GPU "
                             f"{window.dst_gpu}'s memory")
    return window


def remote_register(window, field):
    """The name of ``field`` (``base``, ``size``, ``dst_gpu``, ``dst_base``) of remote window
    ``window``: ``remote_<field>`` for window 0 (a ring's one), ``remote<k>_<field>`` for the
    others."""
    return f"remote_{field}" if window == 0 else f"remote{window}_{field}"


def _nth(k):
    return "" if k == 0 else f" {k}"


def dma_registers(params: T3Params, dparams: DMAParams):
    """The DMA engine's register map (a :class:`hw.csr.RegisterMap`)."""
    a, d = params.addr_bits, dparams.dim_bits
    regs = [
        INFO, CTRL, CMD, STATUS,
        Reg("gpu_id", dparams.gpu_bits, "rw", "this GPU's number on the link (received "
                                              "packets must name it)"),
        *(reg for k in range(dparams.remote_windows) for reg in (
            Reg(remote_register(k, "base"), a, "rw",
                f"remote_map window{_nth(k)}: first source byte address"),
            Reg(remote_register(k, "size"), a, "rw",
                f"remote_map window{_nth(k)}: bytes (0: no window)"),
            Reg(remote_register(k, "dst_gpu"), dparams.gpu_bits, "rw",
                f"remote_map window{_nth(k)}: destination GPU"),
            Reg(remote_register(k, "dst_base"), a, "rw",
                f"remote_map window{_nth(k)}: destination byte address"))),
        Reg("rx_base", a, "rw", "rx window: first byte address received packets may write"),
        Reg("rx_size", a, "rw", "rx window: bytes (a beat is written only if its address is "
                               "in [rx_base, rx_base + rx_size); 0: nowhere)",
            reset=(1 << a) - 1),
        Reg("errors", 32, "ro",
            "error events (each also sets a status bit; counted two cycles after it)"),
        Reg("triggers", 32, "ro", "triggers taken from the queue"),
        Reg("blocks", 32, "ro", "DMA blocks released (granularity tiles each)"),
        Reg("tiles_sent", 32, "ro", "tile packets sent"),
        Reg("remote_sent", 32, "ro", "remote stores sent (payload beats)"),
        Reg("remote_packets", 32, "ro", "remote-store packets sent (write combining)"),
        Reg("beats_sent", 32, "ro", "payload beats sent on tx"),
        Reg("beats_received", 32, "ro", "payload beats received on rx and written to memory"),
        Reg("packets_received", 32, "ro", "packet headers accepted on rx"),
        Reg("reads", 32, "ro", "tile reads issued"),
        Reg("link_busy", 32, "ro", "cycles with a beat (header or payload) accepted on tx"),
        Reg("trigger_stall", 32, "ro", "cycles a trigger waited at a full trigger queue"),
    ]
    for c in range(dparams.commands):
        regs += [
            dataclasses.replace(MODE, name=f"cmd{c}_mode", doc=f"command {c}"),
            Reg(f"cmd{c}_src_base", a, "rw", f"command {c}: source region start (bytes)"),
            Reg(f"cmd{c}_dst_base", a, "rw", f"command {c}: destination start (bytes)"),
            Reg(f"cmd{c}_rows", d, "rw", f"command {c}: rows M (elements)"),
            Reg(f"cmd{c}_cols", d, "rw", f"command {c}: columns N"),
            Reg(f"cmd{c}_ld", d, "rw", f"command {c}: leading dimension (elements)"),
            Reg(f"cmd{c}_tile_rows", d, "rw", f"command {c}: tile rows"),
            Reg(f"cmd{c}_tile_cols", d, "rw", f"command {c}: tile columns"),
        ]
    # two cycles of read latency: 55 words spread over the DMA (hw.csr.RegisterMap)
    return RegisterMap(regs, read_latency=2)


def register_values(params, dparams, commands, gpu_id=0, remote=None, enable=True,
                    rx_window=None):
    """``[(register name, value), ...]`` that program a checked command table (unused
    commands are switched off), the GPU number, the remote window, the rx window
    (``(base, size)`` in bytes; ``None``: the whole address space, the reset value), then
    ``ctrl.enable``."""
    values = [("gpu_id", gpu_id)]
    base, size = rx_window if rx_window is not None else (0, (1 << params.addr_bits) - 1)
    if not (0 <= base and 0 <= size and base + size <= 1 << params.addr_bits):
        raise ValueError(f"rx window [{base}, {base + size}) is outside the "
                         f"{params.addr_bits}-bit address space")
    values += [("rx_base", base), ("rx_size", min(size, (1 << params.addr_bits) - 1))]
    for index in range(dparams.commands):
        c = commands[index] if index < len(commands) else None
        if c is None:
            values.append((f"cmd{index}_mode", 0))
            continue
        values += [
            (f"cmd{index}_src_base", c.src_base),
            (f"cmd{index}_dst_base", c.dst_base),
            (f"cmd{index}_rows", c.rows),
            (f"cmd{index}_cols", c.cols),
            (f"cmd{index}_ld", c.ld),
            (f"cmd{index}_tile_rows", c.tile_rows),
            (f"cmd{index}_tile_cols", c.tile_cols),
            (f"cmd{index}_mode", c.mode()),
        ]
    windows = remote_windows(remote)
    if len(windows) > dparams.remote_windows:
        raise ValueError(f"{len(windows)} remote windows, more than remote_windows "
                         f"{dparams.remote_windows}")
    for k in range(dparams.remote_windows):
        w = windows[k] if k < len(windows) else None
        if w is None:
            values.append((remote_register(k, "size"), 0))
        else:
            values += [(remote_register(k, "base"), w.src_base),
                       (remote_register(k, "size"), w.size),
                       (remote_register(k, "dst_gpu"), w.dst_gpu),
                       (remote_register(k, "dst_base"), w.dst_base)]
    values.append(("ctrl", CTRL.encode(enable=int(enable))))
    return values
