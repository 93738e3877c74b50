"""A small register file shared by the T3 blocks, in the spirit of amaranth-soc's ``csr``.

Each block describes its registers once, as a list of :class:`Reg`; :class:`RegisterFile` lays
them out on 32-bit words (a register wider than 32 bits takes consecutive words, least
significant word first), decodes the block's :func:`csr_signature` port, and renders the map as a
Markdown table for the documentation.  The driver reads addresses from the same object, so the
map exists in exactly one place.

Bus timing (``csr`` port, seen from the block)
----------------------------------------------
``addr`` : In
    Word address.
``w_stb`` : In
    Write strobe: the word at ``addr`` takes ``w_data`` at the next clock edge.
``w_data`` : In(32)
``r_data`` : Out(32)
    The word at the ``addr`` presented in the previous cycle (one cycle of read latency);
    unmapped addresses read as zero and ignore writes.

Access kinds
------------
``rw``
    Storage lives in the register file; the block reads :meth:`RegisterFile.rw`.
``ro``
    Read-only view of a value the block supplies; writes are ignored.
``w1c``
    The block supplies the value (sticky status bits); writing a 1 to a bit asks the block to
    clear it (:meth:`RegisterFile.write_strobe` / :meth:`RegisterFile.write_data`).
``wo``
    Reads as zero; a write pulses the strobe for one cycle (commands such as "flush").
"""

import dataclasses

from amaranth import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["Reg", "RegisterFile", "csr_signature", "count", "CSR_DATA_BITS"]


CSR_DATA_BITS = 32
_ACCESS = ("rw", "ro", "w1c", "wo")


def csr_signature(addr_bits):
    """The register bus, seen from the host (the host drives ``addr``, ``w_stb``, ``w_data``)."""
    return wiring.Signature({
        "addr":   Out(addr_bits),
        "w_stb":  Out(1),
        "w_data": Out(CSR_DATA_BITS),
        "r_data": In(CSR_DATA_BITS),
    })


@dataclasses.dataclass(frozen=True)
class Reg:
    """One register: ``name``, ``width`` in bits, ``access`` kind, ``reset`` value, ``doc``."""
    name: str
    width: int
    access: str
    doc: str
    reset: int = 0

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"register name must be an identifier, not {self.name!r}")
        if self.access not in _ACCESS:
            raise ValueError(f"register {self.name!r}: access must be one of {_ACCESS}, "
                             f"not {self.access!r}")
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"register {self.name!r}: width must be a positive integer, "
                             f"not {self.width!r}")
        if self.access in ("w1c", "wo") and self.width > CSR_DATA_BITS:
            raise ValueError(f"register {self.name!r}: a {self.access} register is at most "
                             f"{CSR_DATA_BITS} bits, not {self.width}")
        if not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"register {self.name!r}: reset value {self.reset} does not fit "
                             f"{self.width} bits")

    @property
    def words(self):
        return -(-self.width // CSR_DATA_BITS)


class RegisterFile:
    """Layout and decoder of a block's registers.

    Parameters
    ----------
    regs : list of :class:`Reg`
        In address order; names must be unique.

    Attributes
    ----------
    addr_bits : int
        Width of the word address that reaches every register.
    """

    def __init__(self, regs):
        self.regs = list(regs)
        self._addr = {}
        self._storage = {}
        self._w_stb = {}
        word = 0
        for reg in self.regs:
            if reg.name in self._addr:
                raise ValueError(f"register {reg.name!r} is defined twice")
            self._addr[reg.name] = word
            word += reg.words
            if reg.access == "rw":
                self._storage[reg.name] = Signal(reg.width, name=f"reg_{reg.name}",
                                                 init=reg.reset)
            if reg.access in ("w1c", "wo"):
                self._w_stb[reg.name] = Signal(name=f"reg_{reg.name}_w_stb")
        self.words = word
        self.addr_bits = max(1, (word - 1).bit_length())
        self._w_data = None

    def __getitem__(self, name):
        for reg in self.regs:
            if reg.name == name:
                return reg
        raise KeyError(f"no register named {name!r}")

    def address(self, name):
        """Word address of register ``name`` (its least significant word)."""
        try:
            return self._addr[name]
        except KeyError:
            raise KeyError(f"no register named {name!r}") from None

    def word_writes(self, name, value):
        """``[(word address, word), ...]`` that write ``value`` to register ``name``.

        Refuses a value that does not fit the register (nothing is silently truncated) and a
        register that cannot be written.
        """
        reg = self[name]
        if reg.access == "ro":
            raise ValueError(f"register {name!r} is read-only")
        if not isinstance(value, int) or not 0 <= value < (1 << reg.width):
            raise ValueError(f"register {name!r} is {reg.width} bits; {value!r} does not fit")
        base = self._addr[name]
        mask = (1 << CSR_DATA_BITS) - 1
        return [(base + k, (value >> (k * CSR_DATA_BITS)) & mask) for k in range(reg.words)]

    def from_words(self, name, words):
        """Value of register ``name`` from its words as read, least significant first."""
        return sum(w << (k * CSR_DATA_BITS) for k, w in enumerate(words)) & \
            ((1 << self[name].width) - 1)

    def rw(self, name):
        """The storage signal of ``rw`` register ``name``."""
        return self._storage[name]

    def write_strobe(self, name):
        """One-cycle strobe: the host writes ``w1c``/``wo`` register ``name`` this cycle."""
        return self._w_stb[name]

    def write_data(self, name):
        """The value being written to ``w1c``/``wo`` register ``name`` (valid with its strobe)."""
        return self._w_data[:self[name].width]

    def elaborate(self, m: Module, bus, values):
        """Add the decoder to ``m``.

        ``bus`` is the block's ``csr`` port (``In(csr_signature(...))``); ``values`` maps each
        ``ro`` and ``w1c`` register name to the Amaranth value it reads as.
        """
        missing = {r.name for r in self.regs if r.access in ("ro", "w1c")} - set(values)
        if missing:
            raise ValueError(f"no value given for register(s) {sorted(missing)}")
        self._w_data = bus.w_data
        r_data = Signal(CSR_DATA_BITS)
        with m.Switch(bus.addr):
            for reg in self.regs:
                if reg.access == "wo":
                    continue
                value = self._storage[reg.name] if reg.access == "rw" else \
                    Value.cast(values[reg.name])
                for k in range(reg.words):
                    with m.Case(self._addr[reg.name] + k):
                        m.d.comb += r_data.eq(value[k * CSR_DATA_BITS:(k + 1) * CSR_DATA_BITS])
        m.d.sync += bus.r_data.eq(r_data)

        for reg in self.regs:
            base = self._addr[reg.name]
            if reg.access == "rw":
                storage = self._storage[reg.name]
                for k in range(reg.words):
                    lo, hi = k * CSR_DATA_BITS, min((k + 1) * CSR_DATA_BITS, reg.width)
                    with m.If(bus.w_stb & (bus.addr == base + k)):
                        m.d.sync += storage[lo:hi].eq(bus.w_data[:hi - lo])
            elif reg.access in ("w1c", "wo"):
                m.d.comb += self._w_stb[reg.name].eq(bus.w_stb & (bus.addr == base))

    def markdown(self):
        """The register map as a Markdown table (word address, name, width, access, doc)."""
        lines = ["| word | name | bits | access | description |", "|---|---|---|---|---|"]
        for reg in self.regs:
            addr = self._addr[reg.name]
            where = f"0x{addr:02x}" if reg.words == 1 else f"0x{addr:02x}-0x{addr + reg.words - 1:02x}"
            lines.append(f"| {where} | `{reg.name}` | {reg.width} | {reg.access} | {reg.doc} |")
        return "\n".join(lines)


def count(m: Module, counter, event, clear):
    """Statistics counter: ``counter`` clears on ``clear`` (which wins), else adds one on
    ``event``, saturating at its maximum (a counter never wraps to a small, wrong value)."""
    with m.If(clear):
        m.d.sync += counter.eq(0)
    with m.Elif(event & (counter != (1 << len(counter)) - 1)):
        m.d.sync += counter.eq(counter + 1)
