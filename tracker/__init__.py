"""The T3 Tracker: RTL (:mod:`tracker.rtl`), golden model (:mod:`tracker.model`), geometry,
register map and driver-side checks (:mod:`tracker.config`)."""

from .config import TrackerParams, Region, Status, check_regions, check_schedule
from .rtl import Tracker, trigger_layout
from .model import TrackerModel

__all__ = ["Tracker", "TrackerParams", "TrackerModel", "Region", "Status", "trigger_layout",
           "check_regions", "check_schedule"]
