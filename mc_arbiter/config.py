"""MC arbiter geometry, policies, calibration table, register map and configuration checks."""

import dataclasses
import enum

from hw.csr import Reg, RegisterFile


__all__ = ["ArbiterParams", "Policy", "CalibRow", "DEFAULT_CALIBRATION", "Status",
           "arbiter_registers", "check_config", "register_values", "STAT_REGISTERS"]


#: Width of the starvation-limit register.
STARVE_BITS = 16
#: Width of a calibration bound (mean compute occupancy, whole entries).
BOUND_BITS = 8


class Policy(enum.IntEnum):
    """Arbitration policy (register ``ctrl[1:0]``)."""
    ROUND_ROBIN = 0     # the paper's T3 baseline
    COMPUTE_FIRST = 1   # strict priority to compute, no threshold
    MCA = 2             # communication-aware arbitration (paper 4.5)


class Status:
    """Bits of the ``status`` register."""
    BAD_POLICY  = 1 << 0    # sticky (write 1 to clear): ctrl.policy was 3; round-robin used
    CALIBRATING = 1 << 8    # live: inside a calibration window
    DRAINING    = 1 << 9    # live: draining the communication stream


@dataclasses.dataclass(frozen=True)
class ArbiterParams:
    """Geometry of the memory-controller front end.

    Parameters
    ----------
    depth : int
        Entries of the DRAM command queue (MCQ), 2 to 1024.  The paper's thresholds (5, 10, 30,
        no limit) suggest a queue deeper than 30: default 64.
    calib_rows : int
        Rows of the calibration table, 2 to 8.
    """
    depth: int = 64
    calib_rows: int = 4

    def __post_init__(self):
        for name, lo, hi in (("depth", 2, 1024), ("calib_rows", 2, 8)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {value!r}")

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
    in the MCQ (mean < 2 entries) leaves communication unlimited; < 8 entries: 30; < 16: 10;
    more memory-intensive kernels: 5.  Thresholds are capped at ``depth`` (= no limit)."""
    rows = [CalibRow(2, aparams.no_limit), CalibRow(8, 30), CalibRow(16, 10), CalibRow(0, 5)]
    if aparams.calib_rows != 4:
        rows = rows[:aparams.calib_rows - 1] + [rows[-1]]
    return [CalibRow(r.bound, min(r.threshold, aparams.no_limit)) for r in rows]


def _fits(name, value, bits):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < (1 << bits):
        raise ValueError(f"{name} must be an integer from 0 to {(1 << bits) - 1}, "
                         f"not {value!r}")


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
    if not isinstance(threshold, int) or not 0 <= threshold <= aparams.no_limit:
        raise ValueError(f"threshold must be from 0 to {aparams.no_limit} (the MCQ depth, "
                         f"meaning no limit), not {threshold!r}")
    _fits("starve_limit", starve_limit, STARVE_BITS)
    calibration = DEFAULT_CALIBRATION(aparams) if calibration is None else list(calibration)
    if len(calibration) != aparams.calib_rows:
        raise ValueError(f"calibration needs {aparams.calib_rows} rows, not "
                         f"{len(calibration)}")
    for index, row in enumerate(calibration):
        _fits(f"calibration row {index} bound", row.bound, BOUND_BITS)
        if not isinstance(row.threshold, int) or not 0 <= row.threshold <= aparams.no_limit:
            raise ValueError(f"calibration row {index} threshold must be from 0 to "
                             f"{aparams.no_limit}, not {row.threshold!r}")
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
    values.append(("ctrl", int(policy) | int(auto_threshold) << 2))
    return values


#: Statistics registers read back after a run.
STAT_REGISTERS = ("status", "compute_issues", "comm_issues", "compute_wait", "forced",
                  "comm_max_wait", "peak_occupancy", "occupancy_sum", "cycles", "threshold",
                  "calib_sum", "calib_cycles")


def arbiter_registers(aparams: ArbiterParams):
    """The arbiter's register map (a fresh :class:`hw.csr.RegisterFile`)."""
    occ_bits = aparams.depth.bit_length()
    regs = [
        Reg("info", 32, "ro", "[15:0] MCQ depth, [19:16] calibration rows"),
        Reg("ctrl", 3, "rw", "[1:0] policy (0 round-robin, 1 compute-first, 2 MCA), "
                             "[2] auto threshold: a calibration window sets `threshold`"),
        Reg("cmd", 1, "wo", "write 1: [0] clear the counters"),
        Reg("status", 10, "w1c", "sticky: [0] bad policy (3; round-robin used); "
                                 "live: [8] calibrating, [9] draining"),
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
        Reg("comm_max_wait", 32, "ro", "longest run of cycles a communication request waited"),
        Reg("peak_occupancy", 32, "ro", "most MCQ entries at once"),
        Reg("occupancy_sum", 48, "ro", "sum over cycles of the MCQ occupancy (mean = "
                                       "occupancy_sum / cycles)"),
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
    return RegisterFile(regs)
