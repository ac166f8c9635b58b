"""``pario layout map TRACE --system P --layout SPEC [--json]``: per-server bytes and sub-requests."""

from __future__ import annotations

from rich.table import Table

from ..layout import describe, parse_layout, server_load
from ..system import load_system
from ..units import format_size
from .common import console, load_trace_arg, print_json


def register(sub) -> None:
    p = sub.add_parser("layout", help="map a trace onto servers under a layout")
    s = p.add_subparsers(dest="layout_cmd", metavar="ACTION")
    s.required = True
    m = s.add_parser("map", help="per-server bytes and sub-request counts of a trace under a layout")
    m.add_argument("trace", metavar="TRACE", help="trace file (.parquet or .csv)")
    m.add_argument("--system", required=True, metavar="P", help="built-in profile name or TOML file")
    m.add_argument("--layout", required=True, metavar="SPEC",
                   help="fixed:64K[@H0,..] | var:hdd=28K,ssd=100K | var:H0=..,.. | 2d:G:SIZE | FILE.json")
    m.add_argument("--json", action="store_true", help="machine-readable output")
    m.set_defaults(func=_map)


def _map(args) -> int:
    system = load_system(args.system)
    layout = parse_layout(args.layout, system)
    trace = load_trace_arg(args.trace)
    nbytes, count = server_load(trace, layout, system.n)
    if args.json:
        print_json({"layout": describe(layout, system),
                    "servers": {s.name: {"bytes": int(b), "subrequests": int(c)}
                                for s, b, c in zip(system.servers, nbytes, count)}})
        return 0
    console.print(f"layout {describe(layout, system)} on {system.name}: {len(trace)} requests")
    tab = Table("server", "kind", "bytes", "sub-requests", "share")
    total = max(int(nbytes.sum()), 1)
    for s, b, c in zip(system.servers, nbytes, count):
        tab.add_row(s.name, s.kind, format_size(int(b)), str(int(c)), f"{100 * b / total:.1f} %")
    console.print(tab)
    return 0
