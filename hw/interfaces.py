"""Payloads and channels shared by every T3 block.

The memory request is what travels from a requester (the CUs' compute port, the DMA engine, the
link receiver) through the memory-controller arbiter into the DRAM command queue; the Tracker
observes requests as they are enqueued.  The memory response returns read data (and the error
flag of any command) to the requester that asked.

Codes are shaped enums so that the exported Verilog and the Python models use the same numbers.
Layouts depend on :class:`hw.params.T3Params` and are built by functions; :func:`pack` and
:func:`unpack` convert between a payload's integer value (as seen on an exported port such as
``i__payload``) and a ``dict`` of field values, for the cocotb agents and the golden models.
"""

from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import T3Params


__all__ = [
    "Op", "Stream", "Source", "ElemType", "ELEM_BYTES",
    "mem_request_layout", "mem_response_layout", "request_signature", "response_signature",
    "Packer", "pack", "unpack", "mask_is_whole", "popcount", "link_signature", "trigger_layout",
    "region_bits",
]


class Op(enum.Enum, shape=2):
    """Memory command.  ``UPDATE`` is op-and-store: ``mem[a] = mem[a] + data`` lane-wise."""
    READ   = 0
    STORE  = 1
    UPDATE = 2


class Stream(enum.Enum, shape=1):
    """Which memory-controller stream a request belongs to."""
    COMPUTE = 0   # the GEMM's reads and writes
    COMM    = 1   # DMA reads, incoming remote and DMA updates


class Source(enum.Enum, shape=2):
    """Who produced a tracked update (the Tracker counts all three the same way)."""
    LOCAL  = 0    # this GPU's CUs
    REMOTE = 1    # a neighbour GPU's CUs, through remote_map
    DMA    = 2    # a neighbour GPU's DMA engine


class ElemType(enum.Enum, shape=2):
    """Element type of the lanes of a beat."""
    FP16  = 0
    BF16  = 1
    FP32  = 2
    INT32 = 3


#: Bytes per element of each :class:`ElemType`.
ELEM_BYTES = {ElemType.FP16: 2, ElemType.BF16: 2, ElemType.FP32: 4, ElemType.INT32: 4}


def mem_request_layout(params: T3Params):
    """Layout of one memory request.

    Fields
    ------
    addr : ``params.addr_bits``
        Byte address of the beat (aligned to ``params.beat_bytes``).
    data : ``params.beat_bits``
        Write data for ``STORE`` and ``UPDATE``; ignored for ``READ``.
    mask : ``params.beat_bytes``
        Byte enables: bit ``i`` enables byte ``i`` of ``data``.  For ``UPDATE`` and for tracked
        accesses it must cover whole elements of ``etype``.
    op : :class:`Op`
    stream : :class:`Stream`
    source : :class:`Source`
    wg_id : ``params.wg_id_bits``
        Workgroup that produced the access (the GEMM's global WG index within the kernel).
    wf_id : ``params.wf_id_bits``
        Wavefront within the workgroup.
    tracked : 1
        The access counts towards its wavefront tile at the Tracker (GEMM stores with the
        ``update`` flag, remote and DMA updates).
    etype : :class:`ElemType`
        Element type of the lanes.
    tag : ``params.tag_bits``
        Returned unchanged in the response.
    """
    return data.StructLayout({
        "addr":    params.addr_bits,
        "data":    params.beat_bits,
        "mask":    params.beat_bytes,
        "op":      Op,
        "stream":  Stream,
        "source":  Source,
        "wg_id":   params.wg_id_bits,
        "wf_id":   params.wf_id_bits,
        "tracked": 1,
        "etype":   ElemType,
        "tag":     params.tag_bits,
    })


def mem_response_layout(params: T3Params):
    """Layout of one memory response: ``data`` (read data), ``tag``, ``op``, ``stream`` and
    ``error`` (the command was refused: bad type, address or alignment; memory untouched)."""
    return data.StructLayout({
        "data":   params.beat_bits,
        "tag":    params.tag_bits,
        "op":     Op,
        "stream": Stream,
        "error":  1,
    })


def request_signature(params: T3Params):
    """A valid/ready channel of memory requests."""
    return stream.Signature(mem_request_layout(params))


def region_bits(regions):
    """Width of a region (= DMA command) index for a table of ``regions`` entries."""
    return max(1, (regions - 1).bit_length())


def trigger_layout(params: T3Params, regions):
    """Payload of a trigger, from the Tracker to the DMA engine: the completed tile's
    ``wg_id``, ``wf_id``, start byte address (``addr``, the smallest address counted into the
    tile) and ``region`` index (which selects the DMA command) for a table of ``regions``
    entries (the Tracker's region registers = the DMA engine's commands)."""
    return data.StructLayout({
        "wg_id":  params.wg_id_bits,
        "wf_id":  params.wf_id_bits,
        "addr":   params.addr_bits,
        "region": region_bits(regions),
    })


def response_signature(params: T3Params):
    """A valid/ready channel of memory responses."""
    return stream.Signature(mem_response_layout(params))


def link_signature(params: T3Params):
    """An AXI4-Stream link channel, seen from the sender (``Out`` = driven by the sender).

    ``tdata`` is one beat (``params.beat_bits``), ``tkeep`` its byte enables, ``tlast`` ends a
    packet, ``tuser`` (1 bit) marks a packet's header beat; ``tvalid``/``tready`` as AXI4-Stream
    (``tdata``, ``tkeep``, ``tlast`` and ``tuser`` hold while ``tvalid`` waits for ``tready``).
    Exported, a port ``tx`` of this signature is ``tx__tdata``, ``tx__tvalid``...: cocotbext-axi
    binds it with ``AxiStreamBus.from_prefix(dut, "tx_")``.
    """
    return wiring.Signature({
        "tdata":  Out(params.beat_bits),
        "tkeep":  Out(params.beat_bytes),
        "tlast":  Out(1),
        "tuser":  Out(1),
        "tvalid": Out(1),
        "tready": In(1),
    })


class Packer:
    """Converts payloads of one layout between ``dict`` and integer, fast enough to run every
    cycle of a cocotb testbench (the field list is read from the layout once)."""

    def __init__(self, layout):
        self.layout = layout
        self.fields = [(name, field.offset, field.width) for name, field in layout]
        self.names = {name for name, _, _ in self.fields}

    def pack(self, values):
        """Integer value of a payload from a mapping of field values.

        Missing fields are zero; enum members are converted to their value.  A value that does
        not fit its field raises :class:`ValueError` (nothing is silently truncated).
        """
        if not self.names.issuperset(values):
            unknown = sorted(set(values) - self.names)
            raise ValueError(f"unknown field(s) {unknown} for layout {self.layout!r}")
        word = 0
        for name, offset, width in self.fields:
            value = values.get(name, 0)
            if isinstance(value, enum.Enum):
                value = value.value
            value = int(value)
            if value < 0 or value >> width:
                raise ValueError(f"field {name!r} value {value} does not fit {width} bits")
            word |= value << offset
        return word

    def unpack(self, word):
        """Mapping of field name to integer value from the integer value of a payload."""
        word = int(word)
        return {name: (word >> offset) & ((1 << width) - 1)
                for name, offset, width in self.fields}


def pack(layout, values):
    """:meth:`Packer.pack` for a single payload."""
    return Packer(layout).pack(values)


def unpack(layout, word):
    """:meth:`Packer.unpack` for a single payload."""
    return Packer(layout).unpack(word)


def popcount(bits):
    """Amaranth expression: how many of ``bits`` (a value, or an iterable of 1-bit values) are
    set, summed as a balanced tree of adders (``log2(n)`` deep).  Python's ``sum`` over bits
    builds a chain of ``n - 1`` adders, one after another."""
    from amaranth import Const, Value
    terms = [Value.cast(b) for b in (bits if not isinstance(bits, Value) else
                                     [bits[k] for k in range(len(bits))])]
    if not terms:
        return Const(0, 1)
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


def mask_is_whole(mask, etype):
    """Amaranth expression: the byte ``mask`` enables only whole elements of ``etype`` (every
    2-byte pair, and for 4-byte types every 4-byte group, all enabled or all disabled)."""
    from amaranth import Cat
    n = len(mask)
    pairs = Cat(mask[k] == mask[k + 1] for k in range(0, n, 2)).all()
    quads = Cat(mask[k] == mask[k + 2] for k in range(0, n, 4)).all()
    wide = (etype == ElemType.FP32) | (etype == ElemType.INT32)
    return pairs & (~wide | quads)
