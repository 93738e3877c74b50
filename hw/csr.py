r"""A small register file shared by the T3 blocks, in the spirit of amaranth-soc's ``csr``.

Each block describes its registers once, as a :class:`RegisterMap` (plain data: a list of
:class:`Reg`, a register made of named bit ranges listing them once as :class:`Field`\ s),
which lays them out on 32-bit words (a register wider than 32 bits takes consecutive words,
least significant word first).  From that one description come:

* the hardware: :class:`RegisterFile`, built from the map in the block's ``elaborate``, keeps
  the registers and decodes the block's :func:`csr_signature` port; a register with fields is
  a ``data.View`` in the RTL (``regs.rw("ctrl").enable``, ``regs.command("cmd", "flush")``),
  and the sticky bits of a ``w1c`` status register are kept by :meth:`RegisterFile.status`;
* the Python side: :meth:`RegisterMap.word_writes` and :meth:`RegisterMap.from_words` (the
  driver and the testbenches address registers by name), :meth:`Reg.encode` /
  :meth:`Reg.decode` (fields by name) and :meth:`Reg.flags` (an ``enum.IntFlag`` of the bits,
  for the golden models);
* the documentation: :meth:`RegisterMap.markdown`, the register table and the field table
  that ``t3 export`` writes and the pages of ``docs/`` include (``t3 docs`` refreshes them).

Bus timing (``csr`` port, seen from the block)
----------------------------------------------
``addr`` : In
    Word address.
``w_stb`` : In
    Write strobe: the word at ``addr`` takes ``w_data`` at the next clock edge.
``w_data`` : In(32)
``r_data`` : Out(32)
    The word at the ``addr`` presented ``read_latency`` cycles earlier (the map's
    :attr:`RegisterMap.read_latency`: 1, or 2 for a block whose many words lie far apart on
    an FPGA), as it was in the cycle of that address; unmapped addresses read as zero and
    ignore writes.  Writes act at the next clock edge whatever the read latency.

Access kinds
------------
``rw``
    Storage lives in the register file; the block reads :meth:`RegisterFile.rw`, may see a
    write coming (:meth:`RegisterFile.write_strobe`) and may refuse writes while it depends on
    the value (:meth:`RegisterFile.lock`: the write is ignored and the refusal is a strobe the
    block latches in its ``status``).
``ro``
    Read-only view of a value the block supplies; writes are ignored.
``w1c``
    The block supplies the value (sticky status bits); writing a 1 to a bit asks the block to
    clear it (:meth:`RegisterFile.write_strobe` / :meth:`RegisterFile.write_data`).
``wo``
    Reads as zero; a write pulses the strobe for one cycle (commands such as "flush").
"""

import dataclasses
import enum

from amaranth import Cat, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


__all__ = ["Field", "Reg", "RegisterMap", "RegisterFile", "csr_signature", "count", "accumulate",
           "CSR_DATA_BITS"]


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
class Field:
    """A named bit range of a register.

    ``name`` (an identifier), ``width`` in bits, ``doc``; ``lsb``, the position of its least
    significant bit (``None``: right above the previous field).  In a ``w1c`` register a field
    is *sticky* (set by an event, cleared by writing 1) unless ``live``: then it reads the
    block's current state and writes leave it alone.
    """
    name: str
    width: int = 1
    doc: str = ""
    lsb: int = None
    live: bool = False

    @property
    def bits(self):
        """``[msb:lsb]`` (or ``[lsb]`` for one bit), as the documentation writes it."""
        msb = self.lsb + self.width - 1
        return f"[{self.lsb}]" if self.width == 1 else f"[{msb}:{self.lsb}]"


@dataclasses.dataclass(frozen=True)
class Reg:
    """One register: ``name``, ``width`` in bits, ``access`` kind, ``doc``, ``reset`` value
    and, for a register of named bit ranges, its ``fields`` (:class:`Field`; then ``width``
    may be ``None``: the fields decide it)."""
    name: str
    width: int
    access: str
    doc: str
    reset: int = 0
    fields: tuple = ()

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"register name must be an identifier, not {self.name!r}")
        if self.access not in _ACCESS:
            raise ValueError(f"register {self.name!r}: access must be one of {_ACCESS}, "
                             f"not {self.access!r}")
        placed, lsb, names = [], 0, set()
        for f in self.fields:
            if not isinstance(f, Field) or not f.name.isidentifier() or f.name in names:
                raise ValueError(f"register {self.name!r}: fields must be Fields with distinct "
                                 f"identifier names, not {f!r}")
            if not isinstance(f.width, int) or f.width < 1:
                raise ValueError(f"register {self.name!r}: field {f.name!r} width must be a "
                                 f"positive integer, not {f.width!r}")
            if f.lsb is not None and f.lsb < lsb:
                raise ValueError(f"register {self.name!r}: field {f.name!r} at bit {f.lsb} "
                                 f"overlaps the field below it")
            if f.live and self.access != "w1c":
                raise ValueError(f"register {self.name!r}: only a w1c register has live "
                                 f"fields")
            f = dataclasses.replace(f, lsb=lsb if f.lsb is None else f.lsb)
            placed.append(f)
            names.add(f.name)
            lsb = f.lsb + f.width
        object.__setattr__(self, "fields", tuple(placed))
        if self.width is None and placed:
            object.__setattr__(self, "width", lsb)
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"register {self.name!r}: width must be a positive integer, "
                             f"not {self.width!r}")
        if lsb > self.width:
            raise ValueError(f"register {self.name!r}: fields need {lsb} bits, more than its "
                             f"width {self.width}")
        if self.access in ("w1c", "wo") and self.width > CSR_DATA_BITS:
            raise ValueError(f"register {self.name!r}: a {self.access} register is at most "
                             f"{CSR_DATA_BITS} bits, not {self.width}")
        if not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"register {self.name!r}: reset value {self.reset} does not fit "
                             f"{self.width} bits")

    @property
    def words(self):
        return -(-self.width // CSR_DATA_BITS)

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name!r} has no field {name!r}")

    @property
    def layout(self):
        """The ``data.FlexibleLayout`` of the fields (``None`` for a register without)."""
        if not self.fields:
            return None
        return data.FlexibleLayout(self.width, {f.name: data.Field(unsigned(f.width), f.lsb)
                                                for f in self.fields})

    def encode(self, **values):
        """The register's value with each named field set (the others zero); refuses an
        unknown field and a value that does not fit (nothing is silently truncated)."""
        word = 0
        for name, value in values.items():
            f = self.field(name)
            value = int(value)
            if not 0 <= value < (1 << f.width):
                raise ValueError(f"register {self.name!r} field {name!r} is {f.width} bits; "
                                 f"{value!r} does not fit")
            word |= value << f.lsb
        return word

    def decode(self, value):
        """``{field: value}`` of a register value as read."""
        return {f.name: (value >> f.lsb) & ((1 << f.width) - 1) for f in self.fields}

    def mask(self, *names):
        """The bits of the named fields."""
        return sum(((1 << self.field(n).width) - 1) << self.field(n).lsb for n in names)

    def flags(self, cls_name, groups=None):
        """An ``enum.IntFlag`` with one member per one-bit field (upper-case name) and one per
        ``groups`` entry (``{NAME: [field, ...]}``): the golden models' view of the bits."""
        members = {f.name.upper(): 1 << f.lsb for f in self.fields if f.width == 1}
        for name, fields in (groups or {}).items():
            members[name] = self.mask(*fields)
        return enum.IntFlag(cls_name, members)

    @property
    def description(self):
        """``doc``, followed for a register with fields by each field's bits and name."""
        if not self.fields:
            return self.doc
        names = ", ".join(f"{f.bits} `{f.name}`" for f in self.fields)
        return f"{self.doc}: {names}" if self.doc else names


class RegisterMap:
    """A block's registers as plain data: their layout on 32-bit words and what the host needs
    to address them (the driver, the testbenches, the docs); no hardware.
    :class:`RegisterFile` is its hardware, built inside the block's ``elaborate``.

    Parameters
    ----------
    regs : list of :class:`Reg`
        In address order; names must be unique.
    read_latency : 1 or 2
        Cycles from an address on the block's port to its word on ``r_data``.  With 2 the
        read multiplexer is two registered stages (each group of 8 words, then the group):
        for a block with many words spread over its logic (the DMA's, where the address
        register through one multiplexer of 55 words took 11.5 ns, 9.1 of them wires).

    Attributes
    ----------
    regs : list of :class:`Reg`
    words : int
        Words the registers take.
    addr_bits : int
        Width of the word address that reaches every register.
    """

    def __init__(self, regs, read_latency=1):
        if read_latency not in (1, 2):
            raise ValueError(f"read_latency must be 1 or 2, not {read_latency!r}")
        self.read_latency = read_latency
        self.regs = list(regs)
        self._addr = {}
        word = 0
        for reg in self.regs:
            if reg.name in self._addr:
                raise ValueError(f"register {reg.name!r} is defined twice")
            self._addr[reg.name] = word
            word += reg.words
        self.words = word
        self.addr_bits = max(1, (word - 1).bit_length())

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

    def markdown(self):
        """The register map as Markdown: a table of the registers (word address, name, width,
        access, description) and, if any register has fields, a table of the fields."""
        lines = ["| word | name | bits | access | description |", "|---|---|---|---|---|"]
        for reg in self.regs:
            addr = self._addr[reg.name]
            where = f"0x{addr:02x}" if reg.words == 1 else \
                f"0x{addr:02x}-0x{addr + reg.words - 1:02x}"
            lines.append(f"| {where} | `{reg.name}` | {reg.width} | {reg.access} | "
                         f"{reg.description} |")
        groups = {}         # registers with the same fields share their rows
        for reg in self.regs:
            if reg.fields:
                groups.setdefault((reg.access, reg.fields), []).append(reg.name)
        if groups:
            lines += ["", "| register | bits | field | description |", "|---|---|---|---|"]
            for (access, fields), names in groups.items():
                where = ", ".join(f"`{n}`" for n in names)
                for f in fields:
                    kind = ("live: " if f.live else "sticky: ") if access == "w1c" else ""
                    lines.append(f"| {where} | {f.bits} | `{f.name}` | {kind}{f.doc} |")
        return "\n".join(lines)



class RegisterFile:
    """The hardware of a :class:`RegisterMap` in a block: the storage of its ``rw`` registers,
    the write strobes, the sticky bits of its ``w1c`` registers and the decoder of the
    block's :func:`csr_signature` port.  Build it in the block's ``elaborate`` (each
    elaboration gets its own signals).

    Parameters
    ----------
    regmap : :class:`RegisterMap`
    """

    def __init__(self, regmap):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"a RegisterFile is built from a RegisterMap, not {regmap!r}")
        self.map = regmap
        self._storage = {}
        self._w_stb = {}
        self._status = {}
        self._locked = {}
        for reg in regmap.regs:
            if reg.access == "rw":
                self._storage[reg.name] = Signal(reg.layout or reg.width,
                                                 name=f"reg_{reg.name}",
                                                 init=reg.decode(reg.reset) if reg.fields
                                                 else reg.reset)
                self._locked[reg.name] = Signal(name=f"reg_{reg.name}_locked")
            if reg.access in ("rw", "w1c", "wo"):
                self._w_stb[reg.name] = Signal(name=f"reg_{reg.name}_w_stb")
            if reg.access == "w1c" and reg.fields:
                self._status[reg.name] = Signal(reg.layout, name=f"reg_{reg.name}")
        self._w_data = Signal(CSR_DATA_BITS, name="reg_w_data")

    def rw(self, name):
        """The storage signal of ``rw`` register ``name`` (a ``data.View`` of its fields, if
        it has fields)."""
        return self._storage[name]

    def rw_next(self, m: Module, name):
        """What ``rw`` register ``name`` holds next cycle after the host's writes (a word
        written and not locked takes the bus's data).  Call it after :meth:`elaborate`.  A
        block that writes the register itself must fold its own write in: it is not here.
        For a flag computed a cycle ahead from a register, so that a host write acts in the
        same cycle as it would on the register itself."""
        if not hasattr(self, "_bus"):
            raise RuntimeError("rw_next needs the register file elaborated first")
        bus = self._bus
        reg = self.map[name]
        if reg.access != "rw":
            raise ValueError(f"register {name!r} is not a rw register")
        storage = Value.cast(self._storage[name])
        nxt = Signal(len(storage), name=f"{name}_next")
        m.d.comb += nxt.eq(storage)
        base = self.map.address(name)
        for k in range(reg.words):
            lo, hi = k * CSR_DATA_BITS, min((k + 1) * CSR_DATA_BITS, reg.width)
            with m.If(bus.w_stb & (bus.addr == base + k) & ~self._locked[name]):
                m.d.comb += nxt[lo:hi].eq(bus.w_data[:hi - lo])
        return nxt

    def next_sum(self, m: Module, a, b):
        """``rw_next(a) + rw_next(b)`` of two one-word ``rw`` registers, the sum made from
        registers alone: the registers' own sum and each with the bus's data in its place,
        chosen by whether the bus writes ``a``, ``b`` or neither (one word a cycle).  For a
        register computed a cycle ahead (a window's end): the host's write acts on it in the
        same cycle as on its registers, and the bus's address decode reaches only the choice
        after the adders, not their inputs (the decode into the next values and through the
        sum was the DMA's longest path in a node, 10.8 ns).  Call it after :meth:`elaborate`."""
        regs = [self.map[name] for name in (a, b)]
        if any(reg.access != "rw" or reg.words != 1 for reg in regs):
            raise ValueError(f"next_sum needs two one-word rw registers, not {a!r} and {b!r}")
        bus = self._bus
        cur = [Value.cast(self._storage[name]) for name in (a, b)]
        data = [bus.w_data[:len(v)] for v in cur]
        hit = [bus.w_stb & (bus.addr == self.map.address(name)) & ~self._locked[name]
               for name in (a, b)]
        width = max(len(v) for v in cur) + 1
        total = Signal(width, name=f"{a}_{b}_next_sum")
        m.d.comb += total.eq(Mux(hit[0], data[0] + cur[1],
                                 Mux(hit[1], cur[0] + data[1], cur[0] + cur[1])))
        return total

    def write_taken(self, name):
        """One-cycle strobe: the host writes one-word ``rw`` register ``name`` this cycle and
        the register takes it (not refused by :meth:`lock`): its value next cycle is
        :meth:`write_data`'s."""
        reg = self.map[name]
        if reg.access != "rw" or reg.words != 1:
            raise ValueError(f"register {name!r} is not a one-word rw register")
        return self._w_stb[name] & ~self._locked[name]

    def write_strobe(self, name):
        """One-cycle strobe: the host writes register ``name`` (any of its words) this cycle
        (for a locked ``rw`` register, whether or not the write is taken)."""
        return self._w_stb[name]

    def lock(self, m: Module, names, locked):
        """Refuse host writes to the ``rw`` registers ``names`` while ``locked`` is high: such a
        write leaves the register unchanged.  Returns a one-cycle strobe, high when a write is
        refused, for the block to latch in its ``status`` (and count).  Each register can be
        locked once."""
        refused = []
        for name in names:
            if self.map[name].access != "rw":
                raise ValueError(f"register {name!r} is not a rw register")
            m.d.comb += self._locked[name].eq(locked)
            refused.append(self._w_stb[name])
        strobe = Signal(name=f"reg_refused_{names[0]}")
        m.d.comb += strobe.eq(locked & Cat(*refused).any())
        return strobe

    def write_data(self, name):
        """The value being written to register ``name`` (valid with its strobe; a
        ``data.View`` of its fields, if it has fields): a one-word ``rw`` register's next value
        when :meth:`write_taken`, a ``w1c``/``wo`` register's bits to act on."""
        reg = self.map[name]
        value = self._w_data[:reg.width]
        return data.View(reg.layout, value) if reg.fields else value

    def command(self, name, field):
        """One-cycle strobe: the host writes 1 to ``field`` of ``wo`` register ``name``."""
        return self.write_strobe(name) & self.write_data(name)[field]

    def status(self, m: Module, name, **inputs):
        """Keep ``w1c`` register ``name``: each sticky field is set in the cycle after its
        input (an event) is high and cleared by the host writing 1 to it (an event in the same
        cycle wins); each live field reads its input.  Every field needs an input.  Returns
        the register's value (a ``data.View``)."""
        reg = self.map[name]
        if reg.access != "w1c" or not reg.fields:
            raise ValueError(f"register {name!r} is not a w1c register with fields")
        missing = {f.name for f in reg.fields} ^ set(inputs)
        if missing:
            raise ValueError(f"register {name!r}: inputs must name exactly its fields; "
                             f"these differ: {sorted(missing)}")
        value = self._status[name]
        sticky = Signal(reg.layout, name=f"reg_{name}_sticky")
        clear = Mux(self.write_strobe(name), self._w_data[:reg.width], 0)
        for f in reg.fields:
            if f.live:
                m.d.comb += value[f.name].eq(inputs[f.name])
            else:
                cleared = sticky[f.name] & ~clear[f.lsb:f.lsb + f.width]
                m.d.sync += sticky[f.name].eq(cleared | inputs[f.name])
                m.d.comb += value[f.name].eq(sticky[f.name])
        return value

    #: Address bits of a group of words in the first stage of a two-cycle read.
    GROUP_BITS = 3

    @staticmethod
    def _select(m, addr, words, name):
        """The word of ``words`` (``{address: value}``) at ``addr``, zero at any other."""
        out = Signal(CSR_DATA_BITS, name=name)
        with m.Switch(addr):
            for a, value in words.items():
                with m.Case(a):
                    m.d.comb += out.eq(value)
        return out

    def _read_value(self, m, reg, values):
        if reg.access == "rw":
            return Value.cast(self._storage[reg.name])
        if reg.name in self._status:
            return Value.cast(self._status[reg.name])
        value = values[reg.name]
        if isinstance(value, dict):         # {field: value} of a register with fields
            view = Signal(reg.layout, name=f"reg_{reg.name}")
            for field, v in value.items():
                m.d.comb += view[field].eq(v)
            return Value.cast(view)
        return Value.cast(value)

    def elaborate(self, m: Module, bus, values):
        """Add the decoder to ``m``.

        ``bus`` is the block's ``csr`` port (``In(csr_signature(...))``); ``values`` maps each
        ``ro`` register, and each ``w1c`` register without fields, to the Amaranth value it
        reads as (for a register with fields, optionally a ``{field: value}`` dict).  A ``w1c``
        register with fields is kept by :meth:`status`.
        """
        missing = {r.name for r in self.map.regs if r.access in ("ro", "w1c")} - set(values) - \
            set(self._status)
        if missing:
            raise ValueError(f"no value given for register(s) {sorted(missing)}")
        self._bus = bus
        m.d.comb += self._w_data.eq(bus.w_data)
        words = {}                      # word address -> the value it reads
        for reg in self.map.regs:
            if reg.access == "wo":
                continue
            value = self._read_value(m, reg, values)
            for k in range(reg.words):
                words[self.map.address(reg.name) + k] = \
                    value[k * CSR_DATA_BITS:(k + 1) * CSR_DATA_BITS]
        if self.map.read_latency == 1:
            m.d.sync += bus.r_data.eq(self._select(m, bus.addr, words, "r_next"))
        else:
            # two stages: each group of 2 ** GROUP_BITS words chosen by the address's low
            # bits into a register of its own (placed by its words), then the group by the
            # address's high bits, registered with the group registers
            low, high = bus.addr[:self.GROUP_BITS], bus.addr[self.GROUP_BITS:]
            high_q = Signal.like(high, name="r_group")
            groups = {}
            for addr, value in words.items():
                groups.setdefault(addr >> self.GROUP_BITS, {})[
                    addr & ((1 << self.GROUP_BITS) - 1)] = value
            group_q = {}
            for g, members in groups.items():
                group_q[g] = Signal(CSR_DATA_BITS, name=f"r_group{g}")
                m.d.sync += group_q[g].eq(self._select(m, low, members, f"r_next{g}"))
            m.d.sync += [high_q.eq(high),
                         bus.r_data.eq(self._select(m, high_q, group_q, "r_next"))]

        for reg in self.map.regs:
            base = self.map.address(reg.name)
            if reg.access == "rw":
                storage = self._storage[reg.name]
                hit = [bus.addr == base + k for k in range(reg.words)]
                m.d.comb += self._w_stb[reg.name].eq(bus.w_stb & Cat(*hit).any())
                for k in range(reg.words):
                    lo, hi = k * CSR_DATA_BITS, min((k + 1) * CSR_DATA_BITS, reg.width)
                    with m.If(bus.w_stb & hit[k] & ~self._locked[reg.name]):
                        m.d.sync += Value.cast(storage)[lo:hi].eq(bus.w_data[:hi - lo])
            elif reg.access in ("w1c", "wo"):
                m.d.comb += self._w_stb[reg.name].eq(bus.w_stb & (bus.addr == base))


def accumulate(m: Module, counter, amount, clear=None):
    """Statistics sum: ``counter`` clears on ``clear`` (which wins; none when ``None``), else
    adds ``amount``, saturating at its maximum like :func:`count` (a sum never wraps to a
    small, wrong value)."""
    top = (1 << len(counter)) - 1
    total = counter + amount
    saturated = Mux(total > top, top, total)
    if clear is None:
        m.d.sync += counter.eq(saturated)
        return
    with m.If(clear):
        m.d.sync += counter.eq(0)
    with m.Else():
        m.d.sync += counter.eq(saturated)


def count(m: Module, counter, event, clear):
    """Statistics counter: ``counter`` clears on ``clear`` (which wins), else adds one on
    ``event``, saturating at its maximum (a counter never wraps to a small, wrong value)."""
    with m.If(clear):
        m.d.sync += counter.eq(0)
    with m.Elif(event & (counter != (1 << len(counter)) - 1)):
        m.d.sync += counter.eq(counter + 1)
