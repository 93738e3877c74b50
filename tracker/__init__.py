"""The T3 Tracker: RTL (:mod:`tracker.rtl`), golden model (:mod:`tracker.model`), geometry,
register map and driver-side checks (:mod:`tracker.config`)."""

from .config import TrackerParams, Region, Status, check_regions, check_schedule
from .rtl import Tracker
from .model import TrackerModel

__all__ = ["Tracker", "TrackerParams", "TrackerModel", "Region", "Status", 
           "check_regions", "check_schedule"]
