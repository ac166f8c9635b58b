"""``pario simulate TRACE --system P (--layout SPEC | --plan PLAN.json) [...]``: the discrete-event simulator.

Independent I/O by default (every rank blocking, one request at a time, or paced by the
trace's time stamps with ``--timing trace``); ``--collective`` runs every request through
two-phase collective I/O (seed 004 §2.1) with ``--aggregators``, ``--cb-buffer`` (default:
what the traced job ran with when the trace recorded it, else ROMIO's: one aggregator per
node, 16 MiB ``cb_buffer_size``, as in ``pario advise``) and the
request order ``--order romcio|cacio|hacio``.  Reports makespan, bandwidth, per-server busy
time and bytes, per-client time and, for collective runs, per-cycle server times.
"""

from __future__ import annotations

import numpy as np
from rich.table import Table

from .. import ParioError
from ..layout import describe, parse_layout
from ..plan.collective import ORDERS
from ..system import load_system
from ..units import format_size
from .common import console, print_json, size_arg

MAX_CYCLE_ROWS = 24


def register(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a trace on a system (independent or collective I/O)",
                       description=__doc__.splitlines()[0])
    p.add_argument("trace", metavar="TRACE", help="trace file (.parquet or .csv)")
    p.add_argument("--system", required=True, metavar="P", help="built-in profile name or TOML file")
    p.add_argument("--layout", metavar="SPEC",
                   help="fixed:64K[@H0,..] | var:hdd=28K,ssd=100K | 2d:G:SIZE | FILE.json "
                        "(with --plan: the layout of files the plan leaves unchanged)")
    p.add_argument("--plan", metavar="PLAN.json", help="a pario plan: layouts, replicas, routing, collective order")
    p.add_argument("--collective", action="store_true", help="two-phase collective I/O for every request")
    p.add_argument("--aggregators", type=int, metavar="N",
                   help="aggregators (default: the traced job's when the trace recorded them, else one per client node)")
    p.add_argument("--cb-buffer", type=size_arg, default=None, metavar="SIZE",
                   help="collective buffer per aggregator (default: the traced job's cb_buffer_size when the trace "
                        "recorded it, else 16m, ROMIO's default, as in advise)")
    p.add_argument("--order", choices=ORDERS, help="request order in a file domain (default: the plan's, else romcio)")
    p.add_argument("--align", type=size_arg, metavar="SIZE", help="align file-domain boundaries to SIZE bytes")
    p.add_argument("--timing", choices=("blocking", "trace"), default="blocking",
                   help="blocking: each rank issues its next request when the previous completes; "
                        "trace: not before its trace time stamp")
    p.add_argument("--elevator", action="store_true", help="C-LOOK device queues instead of FIFO")
    p.add_argument("--jitter", type=float, default=0.0, metavar="S",
                   help="random client delay in [0, S) s before every request (default 0)")
    p.add_argument("--seed", type=int, default=0, help="seed for tie-breaking and jitter (default 0)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from ..simulate import simulate

    system = load_system(args.system)
    if args.layout is None and args.plan is None:
        raise ParioError("give --layout SPEC or --plan PLAN.json")
    layout = parse_layout(args.layout, system) if args.layout else None
    plan = None
    if args.plan:
        from ..plan.base import Plan

        plan = Plan.load(args.plan, system)
    if args.aggregators is not None and args.aggregators < 1:
        raise ParioError("--aggregators must be >= 1")
    if args.jitter < 0:
        raise ParioError("--jitter must be >= 0")
    from ..trace import load
    from ..trace.io import progress_bar

    with progress_bar("reading trace") as bar:
        trace = load(args.trace, progress=bar.update).require_requests(str(args.trace))
        bar.stage("mapping requests to sub-requests")
        res = simulate(trace, system, layout, plan=plan, collective=args.collective, aggregators=args.aggregators,
                       cb_buffer=args.cb_buffer, order=args.order, align=args.align, timing=args.timing,
                       elevator=args.elevator, jitter=args.jitter, seed=args.seed, progress=bar)
    if args.json:
        d = res.to_dict()
        d["system"] = system.name
        d["layout"] = describe(layout, system) if layout is not None else None
        d["plan"] = args.plan
        print_json(d)
        return 0
    what = f"plan {args.plan}" if plan is not None else f"layout {describe(layout, system)}"
    mode = f"collective ({res.order}, {res.details['two_phase']})" \
        if args.collective else f"independent ({args.timing})"
    console.print(f"{len(trace)} requests, {res.n_subrequests} sub-requests on {system.name} under {what}, {mode}")
    console.print(f"makespan {res.makespan_s:.6g} s   bandwidth {res.bandwidth_MBps:.2f} MiB/s   "
                  f"({res.n_events} events in {res.wall_s:.2f} s)")
    tab = Table("server", "kind", "busy (s)", "utilisation", "bytes", "sub-requests", "sequential")
    for j, s in enumerate(system.servers):
        n = int(res.server_subrequests[j])
        tab.add_row(s.name, s.kind, f"{res.server_busy_s[j]:.6g}",
                    f"{100 * res.server_busy_s[j] / res.makespan_s:.1f} %" if res.makespan_s > 0 else "-",
                    format_size(int(res.server_bytes[j])), str(n),
                    f"{100 * res.server_sequential[j] / n:.0f} %" if n else "-")
    console.print(tab)
    ct = res.client_time_s
    if len(ct):
        console.print(f"clients: {len(ct)} ranks, completion time min {ct.min():.6g} s, "
                      f"mean {ct.mean():.6g} s, max {ct.max():.6g} s")
    if args.collective and res.cycles is not None:
        ctab = Table("cycle", *system.names, "cycle (s)")
        n = len(res.cycles)
        rows = range(n) if n <= MAX_CYCLE_ROWS else list(range(MAX_CYCLE_ROWS // 2)) + list(range(n - MAX_CYCLE_ROWS // 2, n))
        prev = -1
        for c in rows:
            if c != prev + 1:
                ctab.add_row("…", *([""] * system.n), "")
            ctab.add_row(str(c), *(f"{v:.6g}" for v in res.cycles[c]), f"{res.cycle_s[c]:.6g}")
            prev = c
        ctab.add_row("sum", *(f"{v:.6g}" for v in np.sum(res.cycles, axis=0)), f"{res.cost_s:.6g}")
        console.print(ctab)
    return 0
