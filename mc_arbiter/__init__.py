"""The memory-controller queue and arbiter: RTL (:mod:`mc_arbiter.rtl`), cycle-level golden model
(:mod:`mc_arbiter.model`), geometry, policies, calibration table and register map
(:mod:`mc_arbiter.config`)."""

from .config import ArbiterParams, CalibRow, Policy, check_config
from .model import ArbiterModel, CycleInputs
from .rtl import ArbiterPolicy, MCArbiter

__all__ = ["MCArbiter", "ArbiterPolicy", "ArbiterParams", "ArbiterModel", "CycleInputs",
           "CalibRow", "Policy", "check_config"]
