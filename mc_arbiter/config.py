"""MC arbiter geometry, policies, calibration table, register map and configuration checks."""

import dataclasses
import enum

from hw.csr import Field, Reg, RegisterMap
from hw.params import check_int, check_params, param


__all__ = ["ArbiterParams", "Policy", "CalibRow", "DEFAULT_CALIBRATION", "Status", "INFO", "CTRL",
           "CMD", "STATUS",
           "arbiter_registers", "check_config", "register_values", "STAT_REGISTERS"]


#: Width of the starvation-limit register.
STARVE_BITS = 16
#: Width of a calibration bound (mean compute occupancy, whole entries).
BOUND_BITS = 8


class Policy(enum.IntEnum):
    """Arbitration policy (field ``policy`` of register ``ctrl``)."""
    ROUND_ROBIN = 0     # the paper's T3 baseline
    COMPUTE_FIRST = 1   # strict priority to compute, no threshold
    MCA = 2             # communication-aware arbitration (paper 4.5)


#: The ``ctrl`` register.
CTRL = Reg("ctrl", None, "rw", "", fields=(
    Field("policy", 2, "0 round-robin, 1 compute-first, 2 MCA (3: round-robin, and "
                       "`status.bad_policy`)"),
    Field("auto_threshold", doc="a calibration window sets `threshold`")))

#: The ``cmd`` register: write 1 to a field to act.
CMD = Reg("cmd", None, "wo", "write 1 to act", fields=(
    Field("clear", doc="clear the counters"),))

#: The ``status`` register.
STATUS = Reg("status", None, "w1c", "errors and state", fields=(
    Field("bad_policy", doc="`ctrl.policy` was 3; round-robin was used"),
    Field("calib_lost", doc="a calibration window ended as the host wrote `threshold`: the "
                            "host's value was kept, the window's result dropped"),
    Field("calibrating", lsb=8, live=True, doc="inside a calibration window"),
    Field("draining", live=True, doc="draining the communication stream")))

#: The ``status`` bits as flags (from :data:`STATUS`).
Status = STATUS.flags("Status")


@dataclasses.dataclass(frozen=True)
class ArbiterParams:
    """Geometry of the memory-controller front end.

    Parameters
    ----------
    depth : int
        Entries of the DRAM command queue (MCQ), 4 to 1024 (block RAM of ``depth - 1``
        entries and an output register).  The paper's thresholds (5, 10, 30, no limit) suggest
        a queue deeper than 30: default 64.
    calib_rows : int
        Rows of the calibration table, 2 to 8.
    """
    depth: int = param(64, "MCQ entries", 4, 1024)
    calib_rows: int = param(4, "calibration table rows", 2, 8)

    def __post_init__(self):
        check_params(self)

    @property
    def no_limit(self):
        """The threshold value meaning "no limit": communication may fill the whole MCQ."""
        return self.depth

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CalibRow:
    """``mean compute occupancy < bound`` selects ``threshold`` (first matching row wins; the
    last row's bound is ignored: it catches everything else)."""
    bound: int
    threshold: int


def DEFAULT_CALIBRATION(aparams: ArbiterParams):
    """The default table, following the paper's thresholds: a kernel that keeps almost nothing
    in the MCQ (mean < 2 entries: a request that never waits is counted in it for 2 cycles,
    from the cycle after the pick to the handshake on ``o``) leaves communication unlimited;
    < 8 entries: 30; < 16: 10; more memory-intensive kernels: 5.  Thresholds are capped at
    ``depth`` (= no limit)."""
    rows = [CalibRow(2, aparams.no_limit), CalibRow(8, 30), CalibRow(16, 10), CalibRow(0, 5)]
    if aparams.calib_rows != 4:
        rows = rows[:aparams.calib_rows - 1] + [rows[-1]]
    return [CalibRow(r.bound, min(r.threshold, aparams.no_limit)) for r in rows]


def _fits(name, value, bits):
    check_int(name, value, 0, (1 << bits) - 1)


def check_config(aparams: ArbiterParams, policy=Policy.MCA, threshold=None, starve_limit=64,
                 calibration=None):
    """Refuse a configuration the hardware cannot represent, naming the value."""
    if not isinstance(policy, Policy):
        try:
            policy = Policy(policy)
        except ValueError:
            raise ValueError(f"policy must be one of {[p.name for p in Policy]}, "
                             f"not {policy!r}") from None
    threshold = aparams.no_limit if threshold is None else threshold
    check_int("threshold", threshold, 0, aparams.no_limit,
              note="the MCQ depth, meaning no limit")
    _fits("starve_limit", starve_limit, STARVE_BITS)
    calibration = DEFAULT_CALIBRATION(aparams) if calibration is None else list(calibration)
    if len(calibration) != aparams.calib_rows:
        raise ValueError(f"calibration needs {aparams.calib_rows} rows, not "
                         f"{len(calibration)}")
    for index, row in enumerate(calibration):
        _fits(f"calibration row {index} bound", row.bound, BOUND_BITS)
        check_int(f"calibration row {index} threshold", row.threshold, 0, aparams.no_limit)
    bounds = [row.bound for row in calibration[:-1]]
    if bounds != sorted(bounds):
        raise ValueError(f"calibration bounds must be ascending, not {bounds}")
    return policy, threshold, starve_limit, calibration


def register_values(aparams, policy=Policy.MCA, threshold=None, starve_limit=64,
                    calibration=None, auto_threshold=False):
    """``[(register, value), ...]`` for a checked configuration."""
    policy, threshold, starve_limit, calibration = check_config(
        aparams, policy, threshold, starve_limit, calibration)
    values = [("threshold", threshold), ("starve_limit", starve_limit)]
    for index, row in enumerate(calibration):
        values += [(f"calib{index}_bound", row.bound), (f"calib{index}_threshold",
                                                        row.threshold)]
    values.append(("ctrl", CTRL.encode(policy=int(policy), auto_threshold=int(auto_threshold))))
    return values


#: The ``info`` register: the geometry, read-only.
INFO = Reg("info", 32, "ro", "geometry", fields=(
    Field("depth", 16, "MCQ entries"), Field("calib_rows", 4, "calibration table rows")))

#: Statistics registers read back after a run.
STAT_REGISTERS = ("status", "compute_issues", "comm_issues", "compute_wait", "forced",
                  "comm_max_wait", "peak_occupancy", "occupancy_sum", "compute_occupancy_sum",
                  "cycles", "threshold",
                  "calib_sum", "calib_cycles")


def arbiter_registers(aparams: ArbiterParams):
    """The arbiter's register map (a :class:`hw.csr.RegisterMap`)."""
    occ_bits = aparams.depth.bit_length()
    regs = [
        INFO, CTRL, CMD, STATUS,
        Reg("threshold", occ_bits, "rw", "MCA: communication enqueues only while the MCQ "
                                         f"holds fewer entries ({aparams.depth} = no limit)",
            reset=aparams.no_limit),
        Reg("starve_limit", STARVE_BITS, "rw", "MCA: cycles communication may wait with room "
                                               "in the MCQ before one forced issue (0: off)",
            reset=64),
        Reg("occupancy", 32, "ro", "MCQ entries now"),
        Reg("compute_occupancy", 32, "ro", "MCQ entries from the compute stream now"),
        Reg("compute_issues", 32, "ro", "requests enqueued from the compute stream"),
        Reg("comm_issues", 32, "ro", "requests enqueued from the communication stream"),
        Reg("compute_wait", 32, "ro", "cycles a compute request waited (valid, not taken)"),
        Reg("forced", 32, "ro", "communication issues forced by the starvation limit"),
        Reg("comm_max_wait", 32, "ro", "longest run of cycles a communication request waited (a cycle behind the run)"),
        Reg("peak_occupancy", 32, "ro", "most MCQ entries at once"),
        Reg("occupancy_sum", 48, "ro", "sum over cycles of the MCQ occupancy (mean = "
                                       "occupancy_sum / cycles)"),
        Reg("compute_occupancy_sum", 48, "ro", "sum over cycles of the compute stream's MCQ "
                                               "entries (the communication stream's: "
                                               "occupancy_sum minus this)"),
        Reg("cycles", 32, "ro", "cycles since the counters were cleared"),
        Reg("calib_sum", 48, "ro", "last calibration window: sum over its cycles of the "
                                   "compute stream's MCQ occupancy"),
        Reg("calib_cycles", 32, "ro", "last calibration window: its length in cycles"),
    ]
    for index in range(aparams.calib_rows):
        default = DEFAULT_CALIBRATION(aparams)[index]
        regs += [
            Reg(f"calib{index}_bound", BOUND_BITS, "rw",
                f"calibration row {index}: mean compute occupancy bound" +
                (" (ignored: last row)" if index == aparams.calib_rows - 1 else ""),
                reset=default.bound),
            Reg(f"calib{index}_threshold", occ_bits, "rw",
                f"calibration row {index}: threshold chosen", reset=default.threshold),
        ]
    return RegisterMap(regs)
