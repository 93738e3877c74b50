"""System-wide parameters shared by every T3 block.

One frozen, validated object, :class:`T3Params`, is the single source of truth for the widths
that appear on the interfaces between blocks (beat width, address width, ``wg_id`` and
``wf_id`` widths, read tags).  Every block takes it as its first constructor argument, the
golden models take the same object, and the cocotb testbenches receive it as JSON
(:meth:`T3Params.to_json` / :meth:`T3Params.from_json`) so that the RTL, the model and the
testbench cannot disagree on a width.
"""

import dataclasses
import json


__all__ = ["T3Params", "check_int", "check_pow2", "is_int", "param", "check_params",
           "param_help"]


def is_int(value):
    """``value`` is an integer and not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name, value, lo=None, hi=None, unit="", note=""):
    """Refuse anything but an integer in ``[lo, hi]`` (either bound may be ``None``) with a
    ``ValueError`` that names the field and quotes the value; returns ``value``.

    The message says "an integer from lo to hi[ unit]", "a positive integer" (``lo=1``),
    "a non-negative integer" (``lo=0``) or "an integer >= lo", then `` (note)`` if given.
    """
    if is_int(value) and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value
    if lo is not None and hi is not None:
        what = f"an integer from {lo} to {hi}{' ' + unit if unit else ''}"
    elif lo == 1:
        what = "a positive integer"
    elif lo == 0:
        what = "a non-negative integer"
    elif lo is not None:
        what = f"an integer >= {lo}"
    elif hi is not None:
        what = f"an integer <= {hi}"
    else:
        what = "an integer"
    if note:
        what = f"{what} ({note})"
    raise ValueError(f"{name} must be {what}, not {value!r}")


def check_pow2(name, value, lo, hi):
    """Refuse anything but a power of two in ``[lo, hi]`` (message as :func:`check_int`)."""
    if is_int(value) and lo <= value <= hi and value & (value - 1) == 0:
        return value
    raise ValueError(f"{name} must be a power of two from {lo} to {hi}, not {value!r}")


def param(default, doc, lo, hi, pow2=False):
    """A field of a params dataclass that declares its range and its help once: an integer
    from ``lo`` to ``hi`` (a power of two with ``pow2``), ``doc`` a few words of what it is.
    The dataclass refuses a value out of range (:func:`check_params`) and ``t3``'s options
    take their help from it (:func:`param_help`)."""
    return dataclasses.field(default=default,
                             metadata={"doc": doc, "lo": lo, "hi": hi, "pow2": pow2})


def check_params(obj):
    """Refuse, naming the field and quoting the value (:func:`check_int`,
    :func:`check_pow2`), the first field of params dataclass ``obj`` declared with
    :func:`param` that is out of its range, in the fields' order."""
    for f in dataclasses.fields(obj):
        m = f.metadata
        if "doc" in m:
            (check_pow2 if m["pow2"] else check_int)(f.name, getattr(obj, f.name), m["lo"],
                                                      m["hi"])


def param_help(cls, name):
    """The help of field ``name`` of params dataclass ``cls`` (declared with :func:`param`):
    what it is, its range and its default."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    m = f.metadata
    kind = "a power of two" if m["pow2"] else "an integer"
    return f"{m['doc']}: {kind} from {m['lo']} to {m['hi']} (default {f.default})"


@dataclasses.dataclass(frozen=True)
class T3Params:
    """Widths of the T3 node interfaces.

    Parameters
    ----------
    beat_bits : int
        Width of one memory data beat in bits (HBM2 bank access width, 256 in the paper).
        A power of two from 32 to 1024.  Addresses are byte addresses; a beat covers
        ``beat_bits // 8`` bytes and beat accesses are aligned to that size.
    addr_bits : int
        Width of a byte address, 12 to 64.
    wg_id_bits : int
        Width of the workgroup id carried by every compute access, 1 to 32.
    wf_id_bits : int
        Width of the wavefront id within a workgroup, 0 to 6 (3 in the paper: eight WFs per WG).
    tag_bits : int
        Width of the request tag that a requester with several reads in flight uses to match
        responses, 0 to 16.

    Raises
    ------
    ValueError
        With a message naming the field and the refused value.
    """

    beat_bits: int = param(256, "memory beat width in bits", 32, 1024, pow2=True)
    addr_bits: int = param(32, "byte address width", 12, 64)
    wg_id_bits: int = param(16, "wg_id width", 1, 32)
    wf_id_bits: int = param(3, "wf_id width", 0, 6)
    tag_bits: int = param(4, "read tag width", 0, 16)

    def __post_init__(self):
        check_params(self)
        if (1 << self.addr_bits) < self.beat_bytes:
            raise ValueError(f"addr_bits {self.addr_bits} cannot address one beat of "
                             f"{self.beat_bytes} bytes")

    @property
    def beat_bytes(self):
        """Bytes in one beat; also the number of bits of a lane (byte-enable) mask."""
        return self.beat_bits // 8

    @property
    def beat_offset_bits(self):
        """Address bits below the beat: an aligned beat address has these bits zero."""
        return self.beat_bytes.bit_length() - 1

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self):
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))
