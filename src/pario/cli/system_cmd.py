"""``pario system show NAME|FILE [--json]`` and ``pario system list``."""

from __future__ import annotations

import math

from rich.table import Table

from ..system import builtin_names, load_system
from ..units import format_size
from .common import console, print_json


def register(sub) -> None:
    p = sub.add_parser("system", help="show system profiles (servers, network, clients)")
    s = p.add_subparsers(dest="system_cmd", metavar="ACTION")
    s.required = True
    show = s.add_parser("show", help="show a built-in profile or a TOML profile file")
    show.add_argument("profile", metavar="NAME|FILE", help="built-in profile name (pario system list) or TOML file")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_show)
    ls = s.add_parser("list", help="list the built-in profiles")
    ls.set_defaults(func=_list)


def _list(args) -> int:
    for name in builtin_names():
        console.print(f"{name:16s} {load_system(name).description}")
    return 0


def _show(args) -> int:
    system = load_system(args.profile)
    if args.json:
        print_json(system.to_dict())
        return 0
    console.print(f"[bold]{system.name}[/bold]  {system.description}")
    console.print(f"network: e = {system.network.e:g} s/connection, t = {system.network.t:g} s/B "
                  f"({1 / system.network.t / 2**20:.0f} MiB/s)" if system.network.t else
                  f"network: e = {system.network.e:g} s/connection, t = 0")
    console.print(f"clients: {system.procs_per_node} processes per node")
    tab = Table("server", "kind", "α read seq", "α read rand", "α write seq", "α write rand",
                "1/β read", "1/β write", "capacity", title="α in ms; 1/β in MiB/s")
    for s in system.servers:
        bw = lambda b: f"{1 / b / 2**20:.0f}" if b else "∞"  # noqa: E731
        tab.add_row(s.name, s.kind, *(f"{s.alpha_for(op, seq) * 1e3:.3f}" for op in (0, 1) for seq in (True, False)),
                    bw(s.beta_for(0)), bw(s.beta_for(1)),
                    "unlimited" if not math.isfinite(s.capacity) else format_size(s.capacity))
    console.print(tab)
    for k, v in system.source.items():
        console.print(f"[dim]source ({k}): {v}[/dim]")
    return 0
