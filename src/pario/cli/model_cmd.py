"""``pario model TRACE --system P --layout SPEC [--model distribution|ci-layout|hybrid] [--json]``:
predicted time of a trace under a layout, per-server busy time, and the model's terms, each
labelled with what it is and which equation of which paper it comes from."""

from __future__ import annotations

from rich.table import Table

from ..layout import describe, parse_layout
from ..model import BATCHINGS, MODELS, get_model
from ..system import load_system
from .common import console, load_trace_arg, print_json

HELP_DESCRIPTION = (
    "Predict the I/O time of TRACE under a layout with one cost model and print: the predicted time; per "
    "server its busy time (distribution model: Σ over batches of T_s + T_t, CEDA seed 000 eq. 3; closed-form "
    "models: Σ α + s·β over its sub-requests) and share of all servers' busy time; and the model's terms. "
    "distribution (CEDA seed 000 §3 eq. 1–4): T_s = startup (seeks, eq. 3), T_t = transfer Σ s·β (eq. 1, 3), "
    "both summed over servers and batches, so T_s + T_t is the servers' total busy time, not the predicted "
    "time (= Σ over batches of the busiest server, eq. 4). hybrid (PADP seed 003 eq. 2–4 / PSA seed 001 "
    "Tables 3–4) and ci-layout (CI-LAYOUT seed 002 eq. 1, Table 2 reconstructed): T_e = connection setup, "
    "T_x = network transfer, T_st = storage startup + transfer; predicted = T_e + T_x + T_st.")


def register(sub) -> None:
    p = sub.add_parser("model", help="predict the I/O time of a trace under a layout with a cost model",
                       description=HELP_DESCRIPTION)
    p.add_argument("trace", metavar="TRACE", help="trace file (.parquet or .csv)")
    p.add_argument("--system", "-s", required=True, metavar="P", help="system profile: built-in name or TOML file")
    p.add_argument("--layout", "-l", required=True, metavar="SPEC",
                   help="layout: fixed:64K[@S,..], var:hdd=28K,ssd=100K, 2d:G:SIZE, or a JSON layout/plan file")
    p.add_argument("--model", "-m", default="distribution", choices=sorted(MODELS),
                   help="cost model (default: distribution = CEDA seed 000 §3 eq. 1–4 on exact sub-requests; "
                        "ci-layout = CI-LAYOUT seed 002 eq. 1; hybrid = PADP seed 003 eq. 2–4 / PSA seed 001 "
                        "Tables 3–4)")
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
    console.print(f"model {model.label()}, system {system.name}, layout {desc}")
    console.print(f"{len(trace)} requests in {cost.batches} batches: predicted [bold]{cost.predicted_s:.6g} s[/bold] "
                  f"= {model.predicted_doc}")
    tab = Table("server", "kind", "busy (s)", "share")
    tot = float(cost.servers.sum()) or 1.0
    for s, v in zip(system.servers, cost.servers):
        tab.add_row(s.name, s.kind, f"{v:.6g}", f"{100 * v / tot:.1f} %")
    console.print(tab)
    console.print(f"busy (s) = {model.busy_doc}; share = of all servers' busy time")
    if cost.details:
        terms = Table("term", "value", "what it is (paper, equation)", title=f"terms of the {model.name} model",
                      title_justify="left")
        for k, v in cost.details.items():
            terms.add_row(k, f"{v:.6g} s" if isinstance(v, float) else str(v), model.term_docs.get(k, ""))
        console.print(terms)
        busy = [k for k in model.busy_terms if k in cost.details]
        if busy:
            total = sum(cost.details[k] for k in busy)
            console.print(f"{' + '.join(busy)} = {total:.6g} s is the servers' total busy time; the predicted time "
                          f"counts only the busiest server of each batch")
    return 0
