"""HBM2 timing settings, pseudo-channel geometry and address mapping of the near-bank unit."""

import dataclasses

from hw.csr import Field, Reg, RegisterMap
from hw.params import T3Params, check_int, check_params, param


from .alu import LATENCY as _ALU_LATENCY


__all__ = ["WRITE_DELAY", "HBMTiming", "NMCParams", "decode", "beat_index", "nmc_registers",
           "COUNTERS", "STATUS", "STATUS_AHEAD", "CMD", "Status", "SCHEDULERS", "BYPASS_CAP"]


#: Cycles from a column command to its write landing in the storage (and its response entering
#: the response FIFO): the read, then the ALU's seven stages (``nmc.alu.LATENCY``; the first
#: registers the read data).  A command reading that beat earlier waits (the atomicity stall).
WRITE_DELAY = _ALU_LATENCY + 1

#: The storage's banks hold at most this many beats, each read into a register of its own and
#: the bank chosen after the registers: 2,048 is an ECP5 block RAM's depth at 9 bits wide (the
#: widest that fills it), so that each register is a block RAM's own output register.
READ_BANK_BEATS = 2048


@dataclasses.dataclass(frozen=True)
class HBMTiming:
    """DRAM timing in clock cycles (tCK = 1 ns; public HBM2 presets).

    ``CCDWL`` is the column-to-column delay in one bank group after an op-and-store: the paper's
    Table 1 has CCDWL = 4 with CCDL = 2; the ratio is kept (8 with CCD_L 4).  ``CL`` is also the
    delay from a column command to its response, for every command; it must cover the unit's
    read-add-write pipeline (8 cycles: read, the ALU's seven stages (the first registers the
    read data), write and queue the response).
    """
    CL: int = 14
    RCD: int = 14
    RP: int = 14
    RAS: int = 34
    CCD_S: int = 2
    CCD_L: int = 4
    WTR_S: int = 6
    WTR_L: int = 8
    CCDWL: int = 8
    #: ACT to ACT in different banks, and a write's column command to its bank's PRE: the
    #: bank-parallel scheduler's row commands keep them (Accel-Sim's 1 GHz HBM timing: RRD 4;
    #: its write-to-precharge is WL + BL/2 + WR = 2 + 1 + 12); the in-order scheduler's never
    #: come as close as RRD, and it does not model write recovery
    RRD: int = 4
    WTP: int = 15

    def __post_init__(self):
        for field in dataclasses.fields(self):
            check_int(field.name, getattr(self, field.name), 1, 255, unit="cycles")
        if self.CCDWL < self.CCD_L:
            raise ValueError(f"CCDWL {self.CCDWL} is less than CCD_L {self.CCD_L}: an "
                             f"op-and-store cannot free its bank group sooner than a column "
                             f"command")
        if self.CCD_L < self.CCD_S:
            raise ValueError(f"CCD_L {self.CCD_L} is less than CCD_S {self.CCD_S}")
        if self.CL <= WRITE_DELAY:
            raise ValueError(f"CL {self.CL} is shorter than the {WRITE_DELAY + 1}-cycle "
                             f"read-add-write pipeline")

    def to_dict(self):
        return dataclasses.asdict(self)


#: The schedulers (``NMCParams.scheduler``): ``in-order`` and ``bank-parallel`` execute the
#: commands in order (:class:`nmc.rtl.NMCUnit`), ``fr-fcfs`` takes them into a queue and
#: serves each bank's row hits first (:class:`nmc.frfcfs.FRFCFSUnit`).
SCHEDULERS = ("in-order", "bank-parallel", "fr-fcfs")

#: An FR-FCFS unit's bound on how many column commands may pass its oldest waiting command;
#: then it serves that command alone (Accel-Sim's FR-FCFS has no bound: it keeps serving an open
#: row while requests to it wait).  One queue's depth (:class:`system.node.NodeParams`'s MCQ).
BYPASS_CAP = 64


@dataclasses.dataclass(frozen=True)
class NMCParams:
    """One HBM2 pseudo-channel: ``bank_groups`` x ``banks`` banks of ``rows`` rows of
    ``columns`` beats.  Beat index ``i`` maps to bank group ``i % bank_groups``, then column,
    then bank, then row (:func:`decode`): consecutive beats take turns among the bank groups,
    as HBM controllers map the address bits just above the burst, so that a stream is spaced
    by CCD_S rather than CCD_L (Accel-Sim's HBM configuration, which the paper's simulator
    used, selects the bank group from the lowest bits for the same reason)."""
    bank_groups: int = param(4, "bank groups", 1, 4096, pow2=True)
    banks: int = param(4, "banks per group", 1, 4096, pow2=True)
    columns: int = param(32, "beats per row", 1, 4096, pow2=True)
    rows: int = param(8, "rows per bank", 1, 4096, pow2=True)
    #: in order: responses outstanding; FR-FCFS: commands held from their arrival to their
    #: response (waiting, then in flight)
    resp_depth: int = param(16, "response queue entries", 4, 256)
    timing: HBMTiming = HBMTiming()
    #: how commands are scheduled: ``"in-order"``, row commands only for the head command;
    #: ``"bank-parallel"``, row commands for the oldest command waiting on every bank, known
    #: from the ``ahead`` port, on a row-command bus of its own beside the column commands
    #: (both :class:`nmc.rtl.NMCUnit`); ``"fr-fcfs"``, a queue of ``resp_depth`` commands
    #: whose row hits go first, oldest first, and the oldest waiting command's bank's row
    #: command beside them (:class:`nmc.frfcfs.FRFCFSUnit`)
    scheduler: str = "in-order"
    ahead_depth: int = param(128, "commands announced and not yet executed (bank-parallel)",
                             2, 4096, pow2=True)
    #: element types the ALUs can add (an ``UPDATE`` of another type is refused with
    #: ``error``); a prototype that only reduces fp16 and fp32 builds less logic
    formats: tuple = ("fp16", "bf16", "fp32", "int32")

    def __post_init__(self):
        check_params(self)
        known = ("fp16", "bf16", "fp32", "int32")
        if not self.formats or any(f not in known for f in self.formats) or \
                len(set(self.formats)) != len(self.formats):
            raise ValueError(f"formats must be distinct names from {known}, "
                             f"not {self.formats!r}")
        object.__setattr__(self, "formats", tuple(self.formats))
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {SCHEDULERS}, not {self.scheduler!r}")
        if not isinstance(self.timing, HBMTiming):
            raise ValueError(f"timing must be an HBMTiming, not {self.timing!r}")

    @property
    def capacity_beats(self):
        return self.bank_groups * self.banks * self.columns * self.rows

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["timing"] = self.timing.to_dict()
        return d

    @property
    def elem_types(self):
        """The :class:`hw.interfaces.ElemType`\\ s of ``formats``."""
        from hw.interfaces import ElemType
        return tuple(ElemType[f.upper()] for f in self.formats)

    @classmethod
    def from_dict(cls, d):
        d = dict(d)
        d["timing"] = HBMTiming(**d["timing"])
        if "formats" in d:
            d["formats"] = tuple(d["formats"])
        return cls(**d)


def decode(nparams: NMCParams, beat):
    """``(bank_group, bank, row)`` of beat index ``beat``; the flat bank number is
    ``bank * bank_groups + bank_group``."""
    group = beat % nparams.bank_groups
    rest = beat // nparams.bank_groups // nparams.columns
    return group, rest % nparams.banks, rest // nparams.banks


def beat_index(nparams: NMCParams, group, bank, row, column=0):
    """The beat index of ``column`` of ``row`` in bank ``bank`` of bank group ``group``
    (the inverse of :func:`decode`)."""
    return ((row * nparams.banks + bank) * nparams.columns + column) * nparams.bank_groups + \
        group


#: Traffic counters, each split by stream (``<name>_compute``, ``<name>_comm``).
COUNTERS = ("reads", "stores", "updates", "row_hits", "row_misses", "row_conflicts")


#: The ``status`` register.
STATUS = Reg("status", None, "w1c", "errors", fields=(
    Field("refused", doc="a command was refused (address beyond the capacity or not beat "
                         "aligned, or an UPDATE the ALUs cannot do)"),))

#: The ``status`` register of a bank-parallel unit: one more bit.
STATUS_AHEAD = Reg("status", None, "w1c", "errors", fields=(
    STATUS.fields[0],
    Field("unannounced", doc="a command executed that had not been announced on ``ahead`` "
                             "(its bank's row was opened for it at the head)"),))

#: The ``status`` bits as flags (from :data:`STATUS_AHEAD`; ``UNANNOUNCED`` only in a
#: bank-parallel unit).
Status = STATUS_AHEAD.flags("Status")

#: The ``cmd`` register: write 1 to a field to act.
CMD = Reg("cmd", None, "wo", "write 1 to act", fields=(
    Field("clear", doc="clear the counters"),))


def nmc_registers(params: T3Params, nparams: NMCParams):
    """The unit's register map (a :class:`hw.csr.RegisterMap`)."""
    regs = [
        STATUS_AHEAD if nparams.scheduler == "bank-parallel" else STATUS, CMD,
        Reg("errors", 32, "ro", "commands refused"),
        Reg("busy", 32, "ro", "cycles with a command waiting at the head"),
    ]
    if nparams.scheduler == "fr-fcfs":
        regs.append(Reg("capped", 32, "ro", "times the oldest waiting command was passed by "
                                            "the bypass cap's column commands"))
    for name in COUNTERS:
        for stream in ("compute", "comm"):
            regs.append(Reg(f"{name}_{stream}", 32, "ro", f"{name.replace('_', ' ')} of the "
                                                          f"{stream} stream"))
    return RegisterMap(regs)
