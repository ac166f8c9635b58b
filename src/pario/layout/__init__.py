"""Data layouts and the exact request → sub-request mapping (SPEC §1)."""

from .mapping import SubRequests, layout_for_files, map_requests, map_trace, server_load
from .spec import describe, layout_from_dict, layout_to_dict, parse_layout
from .types import LAYOUT_MAX, ExtentMap, Grouped, Layout, Region, Regions, Striped

__all__ = [
    "LAYOUT_MAX", "Layout", "Striped", "Grouped", "Region", "Regions", "ExtentMap",
    "SubRequests", "map_requests", "map_trace", "server_load", "layout_for_files",
    "parse_layout", "layout_from_dict", "layout_to_dict", "describe",
]
