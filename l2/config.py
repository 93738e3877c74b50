"""The GPU's L2 cache: geometry, the cached windows, the register map and the driver-side checks.

The L2 sits between a GPU's compute units and its memory controller (``docs/l2.md``; paper
Table 1: 16 MB, 64 banks).  What it caches is decided by the address, as a GPU decides it from
the memory type of an allocation: an access inside one of the **cached windows** (the buffers
the driver allocated cached, ``malloc(..., uncached=False)``) is cached; everything else, and
every ``UPDATE`` (T3's op-and-stores must reach the memory controller, where the Tracker counts
them), bypasses it.
"""

import dataclasses

from hw.csr import Field, Reg, RegisterMap
from hw.params import T3Params, check_int, check_params, check_pow2, param


__all__ = ["L2Params", "Window", "L2Config", "l2_registers", "STATUS", "CMD", "Status",
           "COUNTERS", "check_windows", "config_values", "PIPELINE_HIT_LATENCY"]


#: Cycles from a hit's handshake on ``i`` to its response on ``o`` with nothing ahead of it,
#: the least ``hit_latency`` can be: the lookup, the data read, the response queue's entry
#: and the output register.
PIPELINE_HIT_LATENCY = 4


@dataclasses.dataclass(frozen=True)
class L2Params:
    """Geometry of the L2 (one line is one beat: a 32-byte sector, the unit a GPU's L2 fills
    from DRAM and writes back).

    Parameters
    ----------
    sets : int
        Sets, a power of two from 1 to 4096; ``sets_used`` (a register) may use fewer.
    ways : int
        Ways per set, 1 to 32; ``ways_used`` may use fewer.  Capacity: ``sets x ways`` beats.
    banks : int
        Banks, a power of two from 1 to ``sets``: set ``s`` lies in bank ``s mod banks``, and
        a bank takes one cached access every ``bank_cycles`` cycles (a register).
    mshrs : int
        Misses in flight (miss status holding registers), 1 to 256; later misses to a line
        being filled wait on its entry (merged, as a GPU's L2 merges them).
    depth : int
        Requests accepted and not yet answered, 4 to 1024 (the response queue).
    windows : int
        Cached address windows, 1 to 8.
    max_hit_latency : int
        The largest ``hit_latency`` the register may hold, :data:`PIPELINE_HIT_LATENCY` to 255.
    """
    sets: int = param(128, "sets", 1, 4096, pow2=True)
    ways: int = param(16, "ways per set", 1, 32)
    banks: int = param(4, "banks (at most sets)", 1, 4096, pow2=True)
    mshrs: int = param(16, "misses in flight", 1, 256)
    depth: int = param(64, "requests in flight", 4, 1024)
    windows: int = param(4, "cached address windows", 1, 8)
    max_hit_latency: int = param(64, "the largest hit_latency", PIPELINE_HIT_LATENCY, 255)

    def __post_init__(self):
        check_params(self)
        check_pow2("banks", self.banks, 1, self.sets)

    @property
    def capacity_beats(self):
        return self.sets * self.ways

    @property
    def set_bits(self):
        return (self.sets - 1).bit_length()

    @property
    def way_bits(self):
        return max(1, (self.ways - 1).bit_length())

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Window:
    """A cached address window, bytes ``[base, base + size)``; ``size`` 0 disables it."""
    base: int = 0
    size: int = 0

    @property
    def end(self):
        return self.base + self.size

    def __contains__(self, addr):
        return self.base <= addr < self.end


@dataclasses.dataclass(frozen=True)
class L2Config:
    """What the driver programs: the sets and ways in use, the hit latency, the banks' cycle
    time and the cached windows."""
    sets_used: int = None           # default: all
    ways_used: int = None           # default: all
    hit_latency: int = 16
    bank_cycles: int = 2
    windows: tuple = ()

    def resolve(self, lparams: L2Params):
        """This configuration with its defaults filled in."""
        return dataclasses.replace(
            self, sets_used=lparams.sets if self.sets_used is None else self.sets_used,
            ways_used=lparams.ways if self.ways_used is None else self.ways_used,
            windows=tuple(self.windows))



#: The ``cmd`` register: write 1 to a field to act.
CMD = Reg("cmd", None, "wo", "write 1 to act", fields=(
    Field("flush", doc="write back every dirty line and invalidate every line, once every "
                       "request in flight is answered (as the `flush` input does)"),
    Field("clear", doc="clear the counters")))

#: The ``status`` register.
STATUS = Reg("status", None, "w1c", "errors and state", fields=(
    Field("update_cached", doc="an UPDATE inside a cached window was refused (answered with "
                               "`error`, nothing written): op-and-stores must not be cached"),
    Field("config_busy", doc="a configuration register was written while the L2 held lines or "
                             "requests, or in the cycle it took one: the write was ignored"),
    Field("bad_config", doc="`sets_used`, `ways_used`, `hit_latency` or `bank_cycles` held a "
                            "value the geometry cannot have: the nearest legal one was used"),
    Field("wb_error", doc="memory answered a write-back with `error`: that line's data did not "
                          "reach memory"),
    Field("flushing", lsb=8, live=True, doc="a flush is asked for or running"),
    Field("empty", live=True, doc="no valid line and no request in flight"),
    Field("init", live=True, doc="invalidating every line after reset (`i` waits)")))

#: The ``status`` bits as flags (from :data:`STATUS`).
Status = STATUS.flags("Status")

#: Statistics counters (32 bits, saturating, cleared by ``cmd.clear``).
COUNTERS = (
    ("requests", "requests accepted on `i`"),
    ("read_hits", "cached READs that found their line"),
    ("read_misses", "cached READs that allocated a line and read it from memory"),
    ("read_merged", "cached READs of a line being filled (no memory access of their own)"),
    ("store_hits", "cached STOREs that found their line"),
    ("store_allocs", "cached STOREs of a whole beat that allocated a line (no fill)"),
    ("write_backs", "dirty lines written back on eviction"),
    ("flush_write_backs", "dirty lines written back by a flush"),
    ("bypass_reads", "READs outside the cached windows, passed to memory"),
    ("bypass_writes", "STOREs and UPDATEs passed to memory (outside the windows, or a partial "
                      "STORE that missed)"),
    ("refused", "UPDATEs inside a cached window, refused"),
    ("bank_stalls", "cycles a cached access waited for its bank"),
    ("miss_stalls", "cycles a miss waited for an MSHR, for a victim being filled, or a STORE "
                    "for its line being filled"),
)


def l2_registers(params: T3Params, lparams: L2Params):
    """The L2's register map (a :class:`hw.csr.RegisterMap`)."""
    a = params.addr_bits
    regs = [
        Reg("info", 32, "ro", "geometry", fields=(
            Field("sets_log2", 4, "log2 of the sets"),
            Field("ways", 6, "ways per set"),
            Field("banks_log2", 4, "log2 of the banks"),
            Field("mshrs", max(7, lparams.mshrs.bit_length()),
                  "MSHRs (7 bits; 8 or 9 for an L2 of 128 or more)"))),
        CMD, STATUS,
        Reg("sets_used", 4, "rw", "log2 of the sets in use (at most `info.sets_log2`); written "
                                  "only while the L2 is empty", reset=lparams.set_bits),
        Reg("ways_used", 6, "rw", "ways in use, 1 to `info.ways`; written only while the L2 is "
                                  "empty", reset=lparams.ways),
        Reg("hit_latency", 8, "rw", f"cycles from a hit's handshake on `i` to its response, "
                                    f"{PIPELINE_HIT_LATENCY} to {lparams.max_hit_latency}; "
                                    f"written only while the L2 is empty",
            reset=PIPELINE_HIT_LATENCY),
        Reg("bank_cycles", 4, "rw", "cycles a bank is busy per cached access, 1 to 15; written "
                                    "only while the L2 is empty", reset=1),
    ]
    for w in range(lparams.windows):
        regs += [Reg(f"win{w}_base", a, "rw", f"cached window {w}: first byte (beat aligned); "
                                              f"written only while the L2 is empty"),
                 Reg(f"win{w}_size", a, "rw", f"cached window {w}: bytes (0: off); written "
                                              f"only while the L2 is empty")]
    regs += [Reg("lines", 32, "ro", "valid lines now"),
             Reg("dirty_lines", 32, "ro", "dirty lines now")]
    regs += [Reg(name, 32, "ro", doc) for name, doc in COUNTERS]
    return RegisterMap(regs)


def check_windows(params: T3Params, lparams: L2Params, windows):
    """Refuse cached windows the hardware cannot hold, naming the window and the value: at most
    ``lparams.windows`` of them, each beat aligned, inside the address space, none
    overlapping another."""
    windows = tuple(windows)
    if len(windows) > lparams.windows:
        raise ValueError(f"windows: {len(windows)} cached windows, the L2 has "
                         f"{lparams.windows}")
    top = 1 << params.addr_bits
    for k, w in enumerate(windows):
        if not isinstance(w, Window):
            raise ValueError(f"window {k} must be a Window, not {w!r}")
        for field in ("base", "size"):
            value = getattr(w, field)
            check_int(f"window {k} {field}", value, 0, top - 1)
            if value % params.beat_bytes:
                raise ValueError(f"window {k} {field} {value:#x} is not beat aligned "
                                 f"({params.beat_bytes} bytes)")
        if w.end > top:
            raise ValueError(f"window {k} [{w.base:#x}, {w.end:#x}) passes the "
                             f"{params.addr_bits}-bit address space")
    live = sorted((w.base, w.end, k) for k, w in enumerate(windows) if w.size)
    for (b0, e0, k0), (b1, e1, k1) in zip(live, live[1:]):
        if b1 < e0:
            raise ValueError(f"windows {k0} and {k1} overlap at {b1:#x}")
    return windows


def config_values(params: T3Params, lparams: L2Params, config: L2Config):
    """``{register: value}`` of ``config`` after checking it (``ValueError`` naming the field
    and the value)."""
    c = config.resolve(lparams)
    check_pow2("sets_used", c.sets_used, 1, lparams.sets)
    check_int("ways_used", c.ways_used, 1, lparams.ways)
    check_int("hit_latency", c.hit_latency, PIPELINE_HIT_LATENCY, lparams.max_hit_latency,
              unit="cycles")
    check_int("bank_cycles", c.bank_cycles, 1, 15, unit="cycles")
    windows = check_windows(params, lparams, c.windows)
    values = {"sets_used": c.sets_used.bit_length() - 1, "ways_used": c.ways_used,
              "hit_latency": c.hit_latency, "bank_cycles": c.bank_cycles}
    for k in range(lparams.windows):
        w = windows[k] if k < len(windows) else Window()
        values[f"win{k}_base"], values[f"win{k}_size"] = w.base, w.size
    return values
