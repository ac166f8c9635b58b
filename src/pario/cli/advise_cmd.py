"""``pario advise TRACE --system P [--schemes LIST|all] [--space SIZE] [--json] [-o PLAN.json]``.

Runs the planners of the chosen schemes (:mod:`pario.plan.schemes`) on one trace and shows,
per scheme, the chosen layout or replicas, the predicted time, every baseline's time and
the improvement over it (T_baseline / T_plan − 1, in %, the papers' "improvement").

Two predicted times per scheme, labelled in the output:

- *own model*: the model the scheme plans with and prices its baselines with — distribution
  (CEDA seed 000 §3 eq. 1–4) for ceda, hybrid and ci-layout by default (``--model``), the
  hybrid closed form for padp (PADP seed 003 §3.2 eq. 2–4) and psa (PSA seed 001 §3.2
  Tables 3–4).  It compares a scheme with its own baselines, not schemes with each other.
- *distribution model*: every plan re-priced by CEDA seed 000 §3 eq. 1–4 on its exact
  sub-requests (the general evaluator: ``distribution_s``), the one yardstick for all
  schemes; the best scheme is the least of those ("—": a plan routed per request by
  another model, not re-priced).

``-o PLAN.json`` writes the plan of the best scheme to ``PLAN.json``;
with more than one scheme every scheme's plan is also written to ``PLAN.<scheme>.json``
(e.g. ``plan.json`` → ``plan.ceda.json``).  JSON (``--json``)::

    {"schemes": {NAME: {"plan": PLAN, "predicted_s": float, "baselines": {NAME: float},
                        "distribution_s": float | null, "plan_seconds": float,
                        "setup": {"seconds", "bytes", "copies"}}},
     "skipped": {NAME: "reason"}, "best": NAME | null,
     "collective_order": {"order", "rule", "paper_order", "simulated_s": {ORDER: float},
                          "original": {"order", "simulated_s"}} | null,
     "collective_view": {"cb_buffer": int, "requests": int, "aggregators": int,
                         "two_phase": {"cb_buffer", "aggregators", "ranks", "cb_source",
                                       "agg_source", "nodes"}} | null,
     "whole_job": {"setup": {"seconds", "bytes", "copies", "relaid", "left", "model"},
                   "run1_s", "run2_s", "model", "ratio", "break_even_runs"}}

Every plan's **setup** is what ``pario replicate`` copies for it in a store holding the traced
files (each as large as its furthest traced request) on ``--original``: relayout of the files
the plan names a layout for, the replicas' bytes — priced by the distribution model as one
process's 8 MiB steps (:func:`pario.plan.setup_cost.plan_setup`).  For the best plan, one run
without and with it (:func:`pario.run.predict.predict_plan`: what ``pario run`` predicts run 1
and run 2 with), run 1 / (setup + run 2) and the **break-even runs**: the smallest n with
n·run 1 ≥ setup + n·run 2 ("never": run 2 is not faster; :mod:`pario.run.whole_job`).

Collective requests (the trace's ``collective`` column, from Darshan DXT or ``pario_trace``)
are planned as the file servers see them: the aggregators' requests of two-phase I/O
(:func:`pario.plan.collective.aggregator_view`: file domains, ``--cb-buffer`` cycles,
``--cb-nodes`` aggregators), since those are the requests a layout or a replica serves
(``"collective_view"`` in the JSON); ``--no-collective-view`` plans the ranks' requests.
Left out, both come from the trace's hints (ROMIO's ``cb_buffer_size``, the aggregator
ranks or ``cb_nodes``); ``--nodes N`` says on how many client nodes the job ran, and a
``cb_nodes`` hint is then placed as ROMIO places it (``cb_config_list``, default ``*:1``:
one aggregator per node; :func:`pario.plan.collective.romio_cb_nodes`).  The collective
order of the best plan is priced for every order by the simulated two-phase run
(:func:`pario.plan.order_select.collective_time`, seed 004 §2.2's cycle model:
``"collective_order"``), and so are the collective requests as the traced job ran them (the
original layout, its order: ``"original"``): the figures ``pario run`` predicts run 2 and
run 1 with.

A scheme that does not apply (e.g. PADP on a system without SSDs) is listed under
``skipped`` with the reason; when every requested scheme is skipped the command fails.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from .. import ParioError
from ..layout import describe
from ..plan.advise import collective_view, compare, run_advise
from ..plan.collective import romio_view
from ..plan.collective import ORDERS
from ..system import load_system
from ..units import format_size
from .common import console, load_trace_arg, print_json, size_arg


HELP_DESCRIPTION = (
    "Plan layouts / replicas of TRACE with every scheme and compare their predicted times. Per scheme: its plan, "
    "the predicted time of the plan and of each of its baselines under the scheme's OWN MODEL (the model it plans "
    "with: distribution = CEDA seed 000 §3 eq. 1–4 for ceda, hybrid and ci-layout by default; hybrid closed form "
    "= PADP seed 003 §3.2 eq. 2–4 for padp, PSA seed 001 §3.2 Tables 3–4 for psa) and the improvement over each "
    "baseline (T_baseline / T_plan − 1). Own-model times compare a scheme with its baselines only. The summary "
    "re-prices every plan with the DISTRIBUTION MODEL (CEDA seed 000 §3 eq. 1–4 on exact sub-requests), the one "
    "model for all schemes: the best scheme is the least of those; 'vs best' = its time / the best's − 1.")


def own_model(name: str, plan, short: bool = False) -> str:
    """The model a scheme's plan was priced with, with its paper and equations (``short``:
    for a table cell): the planner's own label for it, else the model's."""
    from ..model import MODELS
    from ..plan.schemes import planner_class

    label = planner_class(name).model_label
    if label is not None:
        return label[0] if short else label[1]
    model = plan.params.get("model") or plan.details.get("model")
    if not isinstance(model, str):
        return "the scheme's own"
    return MODELS[model].label(short) if model in MODELS else model


def register(sub) -> None:
    p = sub.add_parser("advise", help="plan layouts / replicas with every scheme and compare predicted times",
                       description=HELP_DESCRIPTION)
    p.add_argument("trace", metavar="TRACE",
                   help="trace file (.parquet or .csv; 'pario trace import' converts a Darshan log)")
    p.add_argument("--system", required=True, metavar="P", help="built-in profile name or TOML file")
    p.add_argument("--schemes", default="all", metavar="LIST",
                   help="comma list of ci-layout,padp,psa,ceda,hybrid or 'all' (default)")
    p.add_argument("--space", type=size_arg, default=None, metavar="SIZE",
                   help="replica space budget (ceda, hybrid), e.g. 512m; default unlimited")
    p.add_argument("--original", default=None, metavar="SPEC",
                   help="the files' current layout, the ORIG baseline of ceda/hybrid (default fixed:64K)")
    p.add_argument("--model", default=None, metavar="NAME",
                   help="cost model for planners that take one (distribution, ci-layout, hybrid)")
    p.add_argument("--by", default=None, choices=("auto", "time", "order", "all", "request"),
                   help="how the trace becomes batches of concurrent requests (default auto)")
    p.add_argument("--cb-buffer", type=size_arg, default=None, metavar="SIZE",
                   help="collective requests: two-phase buffer per aggregator (default: the traced job's "
                        "cb_buffer_size when the trace recorded it, else 16m, ROMIO's default)")
    p.add_argument("--cb-nodes", type=int, default=None, metavar="N",
                   help="collective requests: number of aggregators (default: the traced job's aggregators when "
                        "the trace recorded them, else one per client node of the profile)")
    p.add_argument("--nodes", type=int, default=None, metavar="N",
                   help="collective requests: the client nodes the traced job ran on; a cb_nodes hint without "
                        "recorded aggregator ranks is then placed as ROMIO places it (cb_config_list, default *:1: "
                        "one aggregator per node), and without the hint there is one per node (default: the hint "
                        "as recorded, one aggregator per client node of the profile)")
    p.add_argument("--no-collective-view", action="store_true",
                   help="plan collective requests as the ranks issued them, not as the aggregators' requests")
    p.add_argument("--order", default="auto", choices=("auto", "paper", *ORDERS),
                   help="collective requests: request order in the file domains written into the best plan; "
                        "auto = the fastest of romcio/cacio/hacio in a simulated two-phase run (default), "
                        "paper = seed 004's rule (HACIO on HDD + SSD servers)")
    p.add_argument("--paper-benefit", action="store_true",
                   help="CEDA: the paper's benefit test B = T_O - T_N (default: minus the copy of written "
                        "replica bytes back to the original when the program ends)")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output: per scheme predicted_s (own model) and distribution_s")
    p.add_argument("-o", "--output", default=None, metavar="PLAN.json", help="write the best plan (and one per scheme)")
    p.set_defaults(func=_advise)


def summary(plan, system) -> str:
    """One-line description of a plan's layouts and replicas."""
    parts = []
    for f, lay in plan.layouts.items():
        parts.append(f"{'' if f == '*' else f + ': '}{describe(lay, system)}")
    for f, reps in plan.replicas.items():
        for r in reps:
            lay = r["layout"]
            head = "" if f == "*" else f"{f}: "
            if getattr(lay, "kind", "") == "extents":
                npat = len(r.get("patterns", []))
                parts.append(f"{head}{r['name']} replica of {npat} pattern(s), {format_size(int(lay.length.sum()))}, "
                             f"{len(lay)} extents")
            else:
                parts.append(f"{head}replica {r['name']}: {describe(lay, system)}")
    if plan.routing and any(r.get("rule") == "cheapest" for r in plan.routing):
        parts.append("route: cheapest replica")
    return "; ".join(parts) if parts else "(unchanged)"


def _original_collective(raw, system, args) -> tuple[str, float]:
    """(order, seconds): the trace's collective requests as the traced job ran them — on the
    original layout (``--original``, default fixed:64K) in the order it ran (its ``pario_order``
    hint, else ROMCIO) — priced like the plan's orders (the run-1 figure of ``pario run``)."""
    from ..layout import parse_layout
    from ..plan.collective import order_for
    from ..plan.order_select import collective_time

    hint = (raw.meta.hint("pario_order") or "").strip().lower()
    order = order_for(None, hint if hint in ORDERS else None)
    lay = parse_layout(args.original or "fixed:64K", system)
    return order, collective_time(raw, system, order, lay, cb_buffer=args.cb_buffer, aggregators=args.cb_nodes,
                                  nodes=args.nodes)


def _collective_order(raw, system, plan, args):
    """The best plan's collective order (``--order``; :mod:`pario.plan.order_select`)."""
    from ..plan.order_select import OrderChoice, choose_order, paper_order

    if args.order in ORDERS:
        return OrderChoice(args.order, "given", paper_order(system), {})
    return choose_order(raw, system, plan=plan, cb_buffer=args.cb_buffer, aggregators=args.cb_nodes,
                        rule="model" if args.order == "auto" else "paper", nodes=args.nodes)


def _setups(raw, system, plans, best, args) -> tuple[dict, dict]:
    """:func:`pario.run.whole_job.advise_payoffs` for the planned schemes."""
    from ..run.predict import order_hint
    from ..run.whole_job import advise_payoffs

    return advise_payoffs(raw, {name: plan for name, (plan, _) in plans.items()}, best, system,
                          args.original or "fixed:64K", nodes=args.nodes, hint=order_hint(raw))


def _copies(setup: dict) -> str:
    """A plan's setup in one line: what is copied and the predicted seconds."""
    left = "".join(f"; {c['file']!r} left: {c['why']}" for c in setup["left"])
    if not setup["copies"]:
        return "nothing to copy, 0 s" + left
    kinds = []
    for kind, label in (("relayout", "relayout"), ("replica", "replicas")):
        rows = [c for c in setup["copies"] if c["kind"] == kind]
        if rows:
            kinds.append(f"{label} {format_size(sum(c['bytes'] for c in rows))} "
                         f"({len(rows)} {'file' if kind == 'relayout' else 'replica'}{'s' if len(rows) > 1 else ''})")
    return f"copies {', '.join(kinds)}: {setup['seconds']:.3f} s predicted" + left


def _print_payoff(best: str, p: dict) -> None:
    """The best plan's setup against its gain per run (the whole job ``pario run`` predicts)."""
    from ..run.whole_job import pays

    head = (f"setup of the plan of {best}: {_copies(p['setup'])} ({p['setup']['model']}); one run "
            f"{p['run1_s']:.3f} s without the plan, {p['run2_s']:.3f} s with it"
            if p["run1_s"] is not None and p["run2_s"] is not None else
            f"setup of the plan of {best}: {_copies(p['setup'])}; one run without the plan is not priced")
    tail = "" if p["ratio"] is None else (f"; whole job run 1 / (setup + run 2) = {p['ratio']:.2f}×; the plan pays "
                                          f"for its setup {pays(p['break_even_runs'])}")
    console.print(head + tail, soft_wrap=True)


def _advise(args) -> int:
    from ..plan.schemes import parse_schemes

    if args.nodes is not None and args.nodes < 1:
        raise ParioError("--nodes must be >= 1")
    system = load_system(args.system)
    schemes = parse_schemes(args.schemes)
    trace = load_trace_arg(args.trace)
    declared = int(trace.collective.sum())
    # collective calls ROMIO runs as independent I/O (romio_cb_* automatic, ranges that do not
    # interleave, or disable) are planned as the independent requests they are
    trace = romio_view(trace)
    independent = declared - int(trace.collective.sum())
    if independent:
        console.print(f"{independent} of {declared} collective requests are in calls ROMIO runs as independent "
                      "I/O (romio_cb_read/write automatic and the ranks' ranges not interleaved, or disable): "
                      "planned as independent requests, no collective order applies to them", soft_wrap=True)
    raw = trace
    view = ""
    tp = n_agg = None
    if trace.collective.any() and not args.no_collective_view:
        trace, tp, n_coll, n_agg = collective_view(trace, system, args.cb_buffer, args.cb_nodes, args.nodes)
        view = (f"; its {n_coll} collective requests planned as the {int(trace.collective.sum())} requests of "
                f"{n_agg} aggregator(s), cb_buffer {format_size(tp.cb_buffer)}"
                + (" (as the traced job ran)" if "trace" in (tp.cb_source, tp.agg_source) else ""))
    from ..trace.io import progress_bar

    with progress_bar("planning") as bar:
        def progress(done, total, running):
            bar.stage(f"planning {', '.join(running)}" if running else "planning", total)
            bar.update(done, total)

        plans, skipped = run_advise(trace, system, schemes, space=args.space, original=args.original,
                                    model=args.model, by=args.by, paper_benefit=args.paper_benefit,
                                    progress=progress)
    if not plans:
        raise ParioError("no scheme could plan this trace: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    common, best = compare(plans, trace, system, args.by)
    from ..model.batches import timing_caution

    caution = timing_caution(raw, system, args.by)      # batches by overlaps a cache made
    order = None
    if raw.collective.any():
        order = _collective_order(raw, system, plans[best][0], args)
        run1_order, run1_s = _original_collective(raw, system, args)
        plans[best][0].collective_order = order.order
    setups, payoff = _setups(raw, system, plans, best, args)
    if args.output:
        out = Path(args.output)
        plans[best][0].save(out, system)
        if len(plans) > 1:
            for name, (plan, _) in plans.items():
                plan.save(out.with_name(f"{out.stem}.{name}{out.suffix or '.json'}"), system)
    if args.json:
        print_json({
            "schemes": {name: {"plan": plan.to_dict(system, lazy=True), "predicted_s": float(plan.predicted_s),
                               "baselines": {k: float(v) for k, v in plan.baselines.items()},
                               "distribution_s": common[name], "plan_seconds": secs,
                               "setup": {k: setups[name][k] for k in ("seconds", "bytes", "copies")}}
                        for name, (plan, secs) in plans.items()},
            "skipped": skipped,
            "best": best,
            "collective_order": None if order is None else {"order": order.order, "rule": order.rule,
                                                            "original": {"order": run1_order, "simulated_s": run1_s},
                                                            "paper_order": order.paper_order,
                                                            "simulated_s": order.times},
            "collective_view": {"cb_buffer": int(tp.cb_buffer), "requests": int(len(trace)),
                                "aggregators": int(n_agg), "two_phase": tp.to_dict()} if view else None,
            "whole_job": payoff,
            "batching_note": caution,
        })
        return 0
    console.print(f"[bold]pario advise[/bold] {args.trace}: {len(trace)} requests, {len(trace.files)} file(s), "
                  f"system {system.name} ({system.n} servers)"
                  + (f", replica space {format_size(args.space)}" if args.space is not None else "") + view)
    if caution:
        console.print(f"[yellow]note[/yellow]: {escape(caution)}", soft_wrap=True)
    for name, (plan, secs) in plans.items():
        own = own_model(name, plan)
        tab = Table(title=f"{name}: {summary(plan, system)}", title_justify="left", show_lines=False)
        tab.add_column("layout / baseline")
        tab.add_column("predicted, own model", justify="right")
        tab.add_column(f"improvement of {name}", justify="right")
        tab.add_row(f"[bold]{name}[/bold]", f"{plan.predicted_s:.6g} s", "")
        for b, tb in plan.baselines.items():
            imp = (tb / plan.predicted_s - 1.0) * 100 if plan.predicted_s and plan.predicted_s > 0 else float("inf")
            tab.add_row(b, f"{tb:.6g} s", f"{imp:+.1f} %")
        console.print(tab)
        note = ""
        if common[name] is not None and not own.startswith("distribution"):
            note = f"; the plan under the distribution model (CEDA seed 000 §3 eq. 1–4): {common[name]:.6g} s"
        console.print(f"  own model: {own}; planned in {secs:.2f} s{note}")
        console.print(f"  setup (pario replicate): {_copies(setups[name])}", soft_wrap=True)
    for name, why in skipped.items():
        console.print(f"[yellow]{name}: skipped[/yellow] ({why})")
    if len(plans) > 1:
        tab = Table(title="summary: every plan re-priced by the distribution model (CEDA seed 000 §3 eq. 1–4)",
                    title_justify="left")
        tab.add_column("scheme")
        tab.add_column("own model")
        tab.add_column("predicted, own model", justify="right")
        tab.add_column("predicted, distribution model", justify="right")
        tab.add_column("vs best", justify="right")
        tb = common[best]
        for name, (plan, _) in sorted(plans.items(), key=lambda kv: (common[kv[0]] is None, common[kv[0]] or 0.0)):
            c = common[name]
            rel = "" if c is None or not tb else f"{(c / tb - 1) * 100:+.1f} %"
            tab.add_row(name + (" (best)" if name == best else ""), own_model(name, plan, short=True),
                        f"{plan.predicted_s:.6g} s", "—" if c is None else f"{c:.6g} s", rel)
        console.print(tab)
        console.print("  own model: the model the scheme plans with; its times compare the scheme with its own "
                      "baselines only.\n  distribution model: the one model for all schemes; best = least, vs best = "
                      "time / best's − 1" + ("; — = routed per request by another model, not re-priced"
                                             if any(c is None for c in common.values()) else "") + ".")
    if order is not None:
        console.print(f"collective order for the plan of {best}: {order.describe()}; the original layout in "
                      f"{run1_order.upper()}, as the traced job ran: {run1_s:.3f} s")
    _print_payoff(best, payoff)
    if args.output:
        console.print(f"plan of {best} written to {args.output}"
                      + (f" (and one file per scheme: {Path(args.output).stem}.<scheme>.json)" if len(plans) > 1 else ""))
    return 0
