"""``pario bench run``: replay a trace through the store, measure, and compare with ``pario simulate``."""

from __future__ import annotations

from .. import ParioError
from ..plan.collective import ORDERS
from ..units import format_size
from .common import console, load_trace_arg, print_json, size_arg
from ..arrays import unique


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="replay a trace on real storage (a store, e.g. on a testbed) and "
                                            "compare with the simulator's prediction")
    sub = p.add_subparsers(dest="bench_command", metavar="ACTION")
    sub.required = True
    r = sub.add_parser("run", help="replay TRACE through the store with N workers; wall time, per-server bytes",
                       description="Replay TRACE through the store at --store (O_DIRECT, N concurrent rank "
                                   "streams, queue depth 1 each), measure the wall time and the bytes per "
                                   "server, and print them beside 'pario simulate' for the same profile.")
    r.add_argument("trace", metavar="TRACE", help="trace file (.parquet or .csv)")
    r.add_argument("--store", required=True, metavar="DIR", help="a pario store (pario store init)")
    r.add_argument("--procs", type=int, default=None, metavar="N",
                   help="workers; trace rank r runs on worker r mod N (default: number of trace ranks)")
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--layout", metavar="SPEC", help="layout for every file (fixed:64K, var:hdd=28K,ssd=100K, ...)")
    g.add_argument("--plan", metavar="PLAN.json", help="a pario plan (its layout per file)")
    r.add_argument("--collective", action="store_true",
                   help="collective (two-phase) replay through the MPI runtime: N MPI ranks under mpiexec, "
                        "one write_at_all/read_at_all per file and op (needs mpi4py + mpiexec)")
    r.add_argument("--order", choices=ORDERS, default=None,
                   help="[--collective] request order in a file domain (default: the plan's, else romcio)")
    r.add_argument("--cb-buffer", type=size_arg, default=16 << 20, metavar="SIZE",
                   help="[--collective] collective buffer per aggregator (cb_buffer_size; default 16m, ROMIO's "
                        "and pario.mpi's, as in advise and simulate)")
    r.add_argument("--aggregators", type=int, default=None, metavar="A",
                   help="[--collective] aggregators (cb_nodes; default: the runtime's, one per node)")
    r.add_argument("--system", metavar="P", default=None,
                   help="profile for the prediction (default: the store's profile), e.g. a calibrated one")
    r.add_argument("--no-prefill", action="store_true", help="do not write the files before the timed replay")
    r.add_argument("--buffered", action="store_true", help="buffered I/O instead of O_DIRECT (not throttled!)")
    r.add_argument("--keep", action="store_true", help="keep the bench/ files in the store")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.set_defaults(func=_run)


def _run(args) -> int:
    from rich.table import Table

    from ..layout import parse_layout
    from ..store.root import read_config
    from ..system import System, load_system
    from ..testbed.bench import replay

    cfg = read_config(args.store)
    store_system = System.from_dict(cfg["profile"], origin=args.store)
    pred_system = load_system(args.system) if args.system else store_system
    if pred_system.names != store_system.names:
        raise ParioError(f"--system {args.system}: servers {pred_system.names} differ from the store's "
                         f"{store_system.names}")
    trace = load_trace_arg(args.trace)
    layout = parse_layout(args.layout, store_system) if args.layout else None
    plan = None
    if args.plan:
        from ..plan.base import Plan

        plan = Plan.load(args.plan, store_system)
    procs = args.procs or int(len(unique(trace.rank)))
    if args.collective:
        return _run_collective(args, trace, store_system, pred_system, layout, plan, procs)
    res = replay(trace, args.store, procs=procs, layout=layout, plan=plan, prefill=not args.no_prefill,
                 direct=not args.buffered, keep=args.keep,
                 progress=None if args.json else (lambda m: console.print(f"[dim]{m}[/]")))
    from ..simulate import simulate

    sim = simulate(trace, pred_system, layout, plan=plan)
    if args.json:
        _print_json(res, sim, pred_system)
        return 0
    console.print(f"{res.requests} requests, {format_size(res.bytes)} with {res.procs} workers "
                  f"({'O_DIRECT' if res.direct else 'buffered'})")
    console.print(_measured_vs_predicted(res, sim, pred_system))
    tab = Table("server", "kind", "device bytes (measured)", "mapped bytes", "predicted bytes", "predicted busy (s)")
    for j, s in enumerate(store_system.servers):
        tab.add_row(s.name, s.kind,
                    format_size(int(res.device_bytes[j])) if res.device_bytes is not None else "-",
                    format_size(int(res.mapped_bytes[j])),
                    format_size(int(sim.server_bytes[j])),
                    f"{sim.server_busy_s[j]:.4g}")
    console.print(tab)
    if res.device_bytes is None:
        console.print("[dim]device bytes are measured only on a pario testbed (blkio statistics)[/]")
    return 0


def _run_collective(args, trace, store_system, pred_system, layout, plan, procs) -> int:
    from rich.table import Table

    from ..plan.collective import order_for
    from ..testbed.bench import replay_collective

    order = order_for(plan, args.order)
    res = replay_collective(trace, args.store, procs=procs, layout=layout, plan=plan, order=order,
                            cb_buffer=args.cb_buffer, cb_nodes=args.aggregators, prefill=not args.no_prefill,
                            keep=args.keep, progress=None if args.json else (lambda m: console.print(f"[dim]{m}[/]")))
    naggr = max((c["aggregators"] for c in res.calls), default=None)
    from ..simulate import simulate

    sim = simulate(trace, pred_system, layout, plan=plan, collective=True, order=order,
                   cb_buffer=args.cb_buffer, aggregators=naggr)
    if args.json:
        _print_json(res, sim, pred_system)
        return 0
    console.print(f"collective ({order}): {len(trace)} requests, {format_size(res.bytes)} with {res.procs} MPI "
                  f"ranks, {naggr} aggregator(s), cb_buffer {format_size(args.cb_buffer)}")
    for c in res.calls:
        console.print(f"  {c['op']} {c['file']}: {c['wall_s']:.4g} s, {c['cycles']} cycles")
    console.print(_measured_vs_predicted(res, sim, pred_system))
    tab = Table("server", "kind", "device bytes (measured)", "mapped bytes", "device requests (measured)",
                "predicted requests", "predicted busy (s)")
    for j, s in enumerate(store_system.servers):
        tab.add_row(s.name, s.kind,
                    format_size(int(res.device_bytes[j])) if res.device_bytes is not None else "-",
                    format_size(int(res.mapped_bytes[j])),
                    str(int(res.device_ios[j])) if res.device_ios is not None else "-",
                    str(int(sim.server_subrequests[j])),
                    f"{sim.server_busy_s[j]:.4g}")
    console.print(tab)
    return 0


def _measured_vs_predicted(res, sim, pred_system) -> str:
    err = (sim.makespan_s - res.wall_s) / res.wall_s
    return (f"measured wall time {res.wall_s:.4g} s ({res.bandwidth_MiBps:.1f} MiB/s)   predicted "
            f"({pred_system.name}) {sim.makespan_s:.4g} s   model error {100 * err:+.1f} %")


def _print_json(res, sim, pred_system) -> None:
    """The measured result with the simulator's prediction beside it."""
    d = res.to_dict()
    d["predicted_s"] = sim.makespan_s
    d["predicted_server_bytes"] = sim.server_bytes.tolist()
    d["system"] = pred_system.name
    print_json(d)
