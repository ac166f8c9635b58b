"""``pario replicate PLAN.json --store DIR [--space SIZE] [--chunk SIZE] [--no-layouts | --layouts-only]``,
or ``--resume``: apply a plan's layouts to the files already in a store (relayout), then copy
its replicas (CEDA replicator, online and resumable; see docs/store.md).  ``--layouts-only``
applies the layouts and copies no replica (``pario run`` times the two apart).

The store is opened shared: MPI programs, ``pario store get`` and other readers and writers
keep using it while the replicas are copied (a writer waits at most for the one chunk of
its range being copied)."""

from __future__ import annotations

from .. import ParioError
from ..units import format_size
from .common import console, print_json, size_arg


def binary_columns():
    """Progress columns for bytes in binary units (KiB, MiB: pario's unit everywhere): rich's
    DownloadColumn with ``binary_units`` and a transfer speed in MiB/s (rich's
    TransferSpeedColumn has only decimal MB/s)."""
    from rich.progress import DownloadColumn, ProgressColumn
    from rich.text import Text

    class BinarySpeedColumn(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed
            if speed is None:
                return Text("?", style="progress.data.speed")
            return Text(f"{format_size(int(speed))}/s", style="progress.data.speed")

    return DownloadColumn(binary_units=True), BinarySpeedColumn()


def register(sub) -> None:
    p = sub.add_parser("replicate", help="copy a plan's replicas into a store (resumable)")
    p.add_argument("plan", nargs="?", metavar="PLAN.json", help="plan with a 'replicas' section")
    p.add_argument("--store", required=True, metavar="DIR", help="the store to copy the replicas into")
    p.add_argument("--space", type=size_arg, default=None, metavar="SIZE",
                   help="replica space budget (total replica bytes in the store); default: server free space")
    p.add_argument("--chunk", type=size_arg, default=None, metavar="SIZE",
                   help="copy chunk: the range a writer of the original may wait for (default 8m)")
    p.add_argument("--resume", action="store_true", help="finish unfinished replicator jobs (no plan needed)")
    p.add_argument("--no-layouts", action="store_true",
                   help="do not apply the plan's 'layouts' to files already in the store (default: relay them "
                        "out first, see docs/store.md 'Applying a plan's layouts')")
    p.add_argument("--layouts-only", action="store_true",
                   help="apply the plan's 'layouts' to files already in the store and copy no replica")
    p.add_argument("--direct", action="store_true",
                   help="copy with O_DIRECT on the data files (no page cache between the copy and the devices: "
                        "pario run does so on a testbed, inside its throttles)")
    p.add_argument("--json", action="store_true", help="print the files relaid and the replicas copied and skipped as JSON")
    p.set_defaults(func=_replicate)


def _replicate(args) -> int:
    from rich.progress import BarColumn, Progress, TimeRemainingColumn

    from ..store import Store
    from ..store.replicator import CHUNK, Replicator, resume_specs, specs_from_plan

    if not args.plan and not args.resume:
        raise ParioError("give PLAN.json or --resume")
    if args.layouts_only and (args.no_layouts or args.resume or not args.plan):
        raise ParioError("--layouts-only applies a plan's layouts: give PLAN.json, without --no-layouts or --resume")
    with Store(args.store, shared=True, direct=args.direct) as st:
        layouts = []
        if args.plan and not args.no_layouts:
            layouts = _apply_layouts(st, args.plan, quiet=args.json)
        if args.layouts_only:
            if args.json:
                print_json({"replicas": [], "skipped": [], "copied_bytes": 0, "layouts": layouts})
            return 0
        specs = resume_specs(st) if args.resume and not args.plan else specs_from_plan(args.plan, st)
        rep = Replicator(st, specs, space=args.space, chunk=args.chunk or CHUNK)
        with Progress("[progress.description]{task.description}", BarColumn(), *binary_columns(),
                      TimeRemainingColumn(), console=console,
                      disable=args.json or not console.is_terminal) as prog:
            task = prog.add_task("replicating", total=max(rep.total, 1))
            rep.progress = lambda done, total: prog.update(task, completed=done)
            rep.run()
        out = {"replicas": [{"file": s.original, "name": s.name, "mode": s.mode, "copied": sum(n for _, n in t)}
                            for s, t, _ in rep.work],
               "skipped": [{"file": s.original, "name": s.name, "why": why} for s, why in rep.skipped],
               "copied_bytes": rep.done}
        if args.plan:
            out["layouts"] = layouts
        if args.json:
            print_json(out)
        else:
            for r in out["replicas"]:
                console.print(f"{r['file']} → {r['name']} ({r['mode']}): {format_size(r['copied'])} copied")
            for r in out["skipped"]:
                console.print(f"skipped {r['file']} → {r['name']}: {r['why']}")
    return 0


def _apply_layouts(st, plan_path, *, quiet: bool) -> list[dict]:
    """The plan's ``"layouts"`` applied to the files already in the store (pario.store.relayout),
    before any replica is copied: one line per file, and the JSON entries."""
    from ..layout import describe
    from ..plan.base import Plan, read_plan_json
    from ..store.root import RESERVED

    d = read_plan_json(plan_path)
    sysname = d.get("system") if isinstance(d, dict) else None
    if sysname and sysname != st.system.name:
        raise ParioError(f"plan is for system {sysname!r} but store {st.root} is on {st.system.name!r}")
    plan = Plan.from_dict(d, st.system)
    out = []
    for name, lay in plan.layouts.items():
        if name == "*":
            out.append({"file": "*", "status": "not-applied", "to": describe(lay, st.system),
                        "why": "the layout of files the plan does not name: given when such a file is created"})
            line = (f"layout for '*' ({describe(lay, st.system)}): applies to files created later; "
                    "existing files the plan does not name are left as they are")
        elif name.startswith(RESERVED) or not st.exists(name):
            out.append({"file": name, "status": "missing", "to": describe(lay, st.system),
                        "why": "not in the store: it gets the layout when it is created"})
            line = f"{name}: not in the store, skipped (it gets {describe(lay, st.system)} when it is created)"
        else:
            res = st.relayout(name, lay)
            out.append(res.to_dict(st.system))
            line = res.describe(st.system)
        if not quiet:
            console.print(line, markup=False)
    return out
