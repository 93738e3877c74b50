"""The serial bridge's golden model and the host's codec (:mod:`hw.uart` is the hardware).

:class:`BridgeModel` takes what arrives on the line — bytes, bytes with a low stop bit
(:data:`FRAMING`) and pauses (:class:`Gap`) — and gives the bus transactions the bridge makes
and the bytes it answers, with its counters.  :func:`encode_write`, :func:`encode_read` and
:func:`decode_answers` are what a host sends and reads (``t3 board``); the tests check the
hardware against the model byte for byte.
"""

import dataclasses
import struct

from .uart import NAK, READ, WRITE


__all__ = ["FRAMING", "Gap", "BridgeModel", "encode_write", "encode_read", "decode_answers",
           "answer_length", "OKAY", "SLVERR"]


OKAY, SLVERR = 0, 2


class _Framing:
    def __repr__(self):
        return "FRAMING"


#: A byte whose stop bit was low: dropped, counted, and it abandons the command it falls in.
FRAMING = _Framing()


@dataclasses.dataclass(frozen=True)
class Gap:
    """A pause on the line of ``byte_times`` byte times (idle line between a stop bit and the
    next start bit).  A pause of ``timeout`` byte times or more inside a command abandons it;
    one of ``timeout - 2`` or less does not.  Between the two the hardware may go either way
    (it counts whole byte times from when it took the previous byte, a byte time before the
    pause began); the model abandons from ``timeout - 1`` on, and a test keeps its pauses out
    of that window."""
    byte_times: float


def encode_write(addr, data):
    """The bytes of a write of the 32-bit word ``data`` at byte address ``addr``."""
    return bytes([WRITE]) + struct.pack("<II", addr, data)


def encode_read(addr):
    """The bytes of a read of the word at byte address ``addr``."""
    return bytes([READ]) + struct.pack("<I", addr)


def answer_length(op):
    """Bytes of the answer to a command starting with byte ``op``."""
    return {WRITE: 1, READ: 5}.get(op, 1)


def decode_answers(commands, answers):
    """``[(resp, data or None), ...]`` of the answers to ``commands`` (each the bytes of one
    command, as sent); refuses a short or long answer stream."""
    out, at = [], 0
    for command in commands:
        n = answer_length(command[0])
        chunk = answers[at:at + n]
        if len(chunk) < n:
            raise ValueError(f"answers: {len(answers)} bytes, fewer than the commands' "
                             f"{sum(answer_length(c[0]) for c in commands)}")
        at += n
        if command[0] == READ:
            out.append((chunk[0], struct.unpack("<I", chunk[1:])[0]))
        else:                                       # a write's bresp, or NAK
            out.append((chunk[0], None))
    if at != len(answers):
        raise ValueError(f"answers: {len(answers)} bytes, more than the commands' {at}")
    return out


class BridgeModel:
    """The bridge at the transaction level.

    ``read(addr) -> (resp, data)`` and ``write(addr, data) -> resp`` stand for the bus; a
    command whose address does not fit ``addr_bits`` is answered ``SLVERR`` (and zero data)
    without calling them.  :meth:`feed` takes the line's items and returns the answer bytes;
    ``transactions`` lists ``("W", addr, data)`` and ``("R", addr)`` in order, ``counters`` the
    bridge's status counters (saturating at 255).  Overruns depend on timing and are not
    modelled: a test that makes them counts them itself.
    """

    def __init__(self, addr_bits, read, write, timeout=16):
        self.addr_bits, self.read, self.write, self.timeout = addr_bits, read, write, timeout
        self.transactions = []
        self.counters = {"overruns": 0, "framing": 0, "bad_commands": 0, "timeouts": 0}
        self._pending = []          # the bytes of the command under way

    def _count(self, name):
        self.counters[name] = min(self.counters[name] + 1, 255)

    def feed(self, items):
        answers = bytearray()
        for item in items:
            pending = self._pending
            if isinstance(item, Gap):
                if pending and item.byte_times >= self.timeout - 1:
                    self._count("timeouts")
                    self._pending = []
                continue
            if item is FRAMING:
                self._count("framing")
                self._pending = []
                continue
            if not 0 <= item <= 255:
                raise ValueError(f"a line item must be a byte, FRAMING or a Gap, not {item!r}")
            if not pending:
                if item not in (WRITE, READ):
                    self._count("bad_commands")
                    answers.append(NAK)
                    continue
            pending.append(item)
            if len(pending) == 1 + {WRITE: 8, READ: 4}[pending[0]]:
                answers += self._execute(bytes(pending))
                self._pending = []
        return bytes(answers)

    def _execute(self, command):
        addr, = struct.unpack("<I", command[1:5])
        fits = addr >> self.addr_bits == 0
        if command[0] == WRITE:
            data, = struct.unpack("<I", command[5:9])
            if not fits:
                return bytes([SLVERR])
            self.transactions.append(("W", addr, data))
            return bytes([self.write(addr, data)])
        if not fits:
            return bytes([SLVERR, 0, 0, 0, 0])
        self.transactions.append(("R", addr))
        resp, data = self.read(addr)
        return bytes([resp]) + struct.pack("<I", data)
