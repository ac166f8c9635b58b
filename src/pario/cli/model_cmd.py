"""``pario model TRACE --system P --layout SPEC [--model distribution|ci-layout|hybrid] [--json]``:
predicted time of a trace under a layout, and per-server busy time."""

from __future__ import annotations

from rich.table import Table

from ..layout import describe, parse_layout
from ..model import BATCHINGS, MODELS, get_model
from ..system import load_system
from .common import console, load_trace_arg, print_json


def register(sub) -> None:
    p = sub.add_parser("model", help="predict the I/O time of a trace under a layout with a cost model")
    p.add_argument("trace", metavar="TRACE", help="trace file (.parquet or .csv)")
    p.add_argument("--system", "-s", required=True, metavar="P", help="system profile: built-in name or TOML file")
    p.add_argument("--layout", "-l", required=True, metavar="SPEC",
                   help="layout: fixed:64K[@S,..], var:hdd=28K,ssd=100K, 2d:G:SIZE, or a JSON layout/plan file")
    p.add_argument("--model", "-m", default="distribution", choices=sorted(MODELS),
                   help="cost model (default: distribution = CEDA seed 000 §3 on exact sub-requests)")
    p.add_argument("--batch", default="auto", choices=BATCHINGS,
                   help="how requests form concurrent batches (default: by time stamps if present, else by order)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_run)


def _layout_arg(spec: str, system):
    """A layout spec, or a plan file (its per-file layouts)."""
    import json
    from pathlib import Path

    path = Path(spec)
    if path.suffix.lower() == ".json" and path.exists():
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict) and "pario_plan" in data:
            from ..plan.base import Plan

            return Plan.from_dict(data, system).layouts
    return parse_layout(spec, system)


def _run(args) -> int:
    system = load_system(args.system)
    trace = load_trace_arg(args.trace)
    layout = _layout_arg(args.layout, system)
    model = get_model(args.model)
    cost = model.trace_cost(trace, layout, system, by=args.batch)
    if args.json:
        out = {"model": model.name, "system": system.name, **cost.to_json(system)}
        print_json(out)
        return 0
    desc = describe(layout, system) if not isinstance(layout, dict) else \
        "; ".join(f"{f}: {describe(l, system)}" for f, l in layout.items())
    console.print(f"model {model.name}, system {system.name}, layout {desc}")
    console.print(f"{len(trace)} requests in {cost.batches} batches: predicted [bold]{cost.predicted_s:.6g} s[/bold]")
    tab = Table("server", "kind", "busy s", "share")
    tot = float(cost.servers.sum()) or 1.0
    for s, v in zip(system.servers, cost.servers):
        tab.add_row(s.name, s.kind, f"{v:.6g}", f"{100 * v / tot:.1f} %")
    console.print(tab)
    for k, v in cost.details.items():
        console.print(f"[dim]{k} = {v:.6g}[/dim]" if isinstance(v, float) else f"[dim]{k} = {v}[/dim]")
    return 0
