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


__all__ = ["T3Params"]


def _is_pow2(value):
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


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

    beat_bits: int = 256
    addr_bits: int = 32
    wg_id_bits: int = 16
    wf_id_bits: int = 3
    tag_bits: int = 4

    def __post_init__(self):
        if not _is_pow2(self.beat_bits) or not 32 <= self.beat_bits <= 1024:
            raise ValueError(f"beat_bits must be a power of two from 32 to 1024, "
                             f"not {self.beat_bits!r}")
        self._check_range("addr_bits", 12, 64)
        if (1 << self.addr_bits) < self.beat_bytes:
            raise ValueError(f"addr_bits {self.addr_bits} cannot address one beat of "
                             f"{self.beat_bytes} bytes")
        self._check_range("wg_id_bits", 1, 32)
        self._check_range("wf_id_bits", 0, 6)
        self._check_range("tag_bits", 0, 16)

    def _check_range(self, name, lo, hi):
        value = getattr(self, name)
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {value!r}")

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
