"""``pario cluster up|status|down``: a real Ceph cluster on this host (root, Ceph installed)."""

from __future__ import annotations

import os

from ..units import format_size
from .common import add_server_args, console, print_json, size_arg


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster", help="a real Ceph cluster on this host: one OSD per server, CephFS mounted (root)",
        description="Bring up, inspect and release a single-host Ceph cluster on 127.0.0.1: one monitor, one "
                    "manager, one BlueStore OSD per server on its own throttled loop device (HDD-like H0.., "
                    "SSD-like S0..), one pool per server placed on that OSD only, an MDS and CephFS mounted "
                    "with ceph-fuse at DIR/mnt. Needs root and Ceph (scripts/setup.sh ceph). See docs/cluster.md.")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION")
    sub.required = True

    u = sub.add_parser("up", help="start the cluster in DIR and write DIR/cluster.json and DIR/nominal.toml")
    u.add_argument("dir", metavar="DIR", help="directory for the cluster (images, daemon data, logs, mount, state)")
    add_server_args(u)
    u.add_argument("--osd-size", type=size_arg, default=None, metavar="SIZE",
                   help="size of each OSD's sparse image (default 4g, at least 1g)")
    u.add_argument("--port-base", type=int, default=None, metavar="P",
                   help="monitor on P and P+1, daemons from P+2 (default: Ceph's 3300, 6789 and 6800-7300)")
    u.add_argument("--nominal", action="store_true",
                   help="do not calibrate: the profile is DIR/nominal.toml from the throttle settings (alpha = "
                        "1/IOPS, beta = 1/BPS). Default: 'pario calibrate --cluster DIR' on every server after "
                        "start-up (4k..4m requests through librados, about 20 s per server), DIR/calibrated.toml")
    u.add_argument("--json", action="store_true", help="print the status as JSON")
    u.set_defaults(func=_up)

    s = sub.add_parser("status", help="daemons, health, OSDs with class and pool, mount, throttles")
    s.add_argument("dir", metavar="DIR", help="the cluster's directory (as given to 'pario cluster up')")
    s.add_argument("--json", action="store_true", help="print the status as JSON")
    s.set_defaults(func=_status)

    d = sub.add_parser("down", help="stop every daemon, unmount, detach loop devices, remove cgroups and files")
    d.add_argument("dir", metavar="DIR", help="the cluster's directory (as given to 'pario cluster up')")
    d.add_argument("--keep-logs", action="store_true", help="keep DIR/log (the daemons' logs)")
    d.set_defaults(func=_down)


def _up(args) -> int:
    from ..cluster import core

    kw = {k: v for k, v in dict(hdd_iops=args.hdd_iops, hdd_bps=args.hdd_bps, ssd_iops=args.ssd_iops,
                                  ssd_bps=args.ssd_bps, osd_size=args.osd_size).items() if v is not None}
    cl = core.up(args.dir, hdd=args.hdd, ssd=args.ssd, port_base=args.port_base, **kw,
                 progress=None if args.json else (lambda m: console.print(f"[dim]{m}[/]")))
    st = core.status(cl.dir)
    if args.json:
        print_json(st)
        return 0
    _print_status(st)
    console.print(f"up in {cl.up_seconds:.1f} s; nominal profile (α = 1/IOPS, β = 1/BPS): "
                  f"{os.path.join(cl.dir, core.NOMINAL_PROFILE)}")
    if not args.nominal:
        _calibrate(cl)
    console.print(f"clients: ceph -c {cl.conf} …; release with: pario cluster down {cl.dir}")
    return 0


def _calibrate(cl) -> None:
    """``pario calibrate --cluster DIR`` with the cluster's sizes; DIR/calibrated.toml."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ..calibrate.core import cluster_targets, progress_steps
    from ..cluster import core

    targets = cluster_targets(cl.dir)
    with Progress(TextColumn("{task.description:<28}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as prog:
        task = prog.add_task("calibrating", total=progress_steps(targets, core.CALIBRATION_SIZES,
                                                                  core.CALIBRATION_REPS))
        cal = core.calibrate_profile(cl.dir, progress=lambda what: prog.update(task, advance=1, description=what))
    for w in cal.warnings:
        console.print(f"[yellow]note:[/] {w}")
    worst = max(cal.fits.items(), key=lambda kv: kv[1].rel_rms)
    console.print(f"calibrated in {cal.seconds:.0f} s (largest fit residual {100 * worst[1].rel_rms:.0f} %, "
                  f"{worst[0][0]}): {os.path.join(cl.dir, core.CALIBRATED_PROFILE)}, the profile of stores "
                  f"made with 'pario store init DIR --backend rados --cluster {cl.dir}'")


def _status(args) -> int:
    from ..cluster import core

    st = core.status(args.dir)
    if args.json:
        print_json(st)
    else:
        _print_status(st)
    return 0 if st["healthy"] else 1


def _down(args) -> int:
    from ..cluster import core

    done = core.down(args.dir, keep_logs=args.keep_logs, progress=lambda m: console.print(f"[dim]{m}[/]"))
    if not done:
        console.print(f"no pario cluster at {args.dir}: nothing to release")
    else:
        console.print(f"released {len(done)} resource(s): " + ", ".join(done))
    return 0


def _print_status(st: dict) -> None:
    from rich.table import Table

    h = st["health"] or {}
    color = {"HEALTH_OK": "green", "HEALTH_WARN": "yellow"}.get(h.get("status"), "red")
    console.print(f"cluster {st['dir']}: [{color}]{h.get('status')}[/]")
    console.print(f"[dim]fsid {st['fsid']}, mon {' '.join(st['mon'])}, conf {st['conf']}[/]")
    for k, v in (h.get("checks") or {}).items():
        console.print(f"  {k}: {v}")
    d = Table(title="daemons")
    for col in ("daemon", "pid", "running"):
        d.add_column(col)
    for x in st["daemons"]:
        d.add_row(x["name"], str(x["pid"]), "yes" if x["alive"] else "[red]NO[/]")
    console.print(d)
    t = Table(title=f"servers (one OSD each, throttled in its own blkio cgroup v{st['cgroup_version']})")
    for col in ("server", "OSD", "class", "pool", "state", "loop", "IOPS", "bandwidth", "used", "size", "ok"):
        t.add_column(col, overflow="fold", justify="right" if col in ("IOPS", "bandwidth", "used", "size") else "left")
    for r in st["servers"]:
        lim = r["throttle"] or {}
        iops = "/".join(dict.fromkeys(str(lim.get(k, "-")) for k in ("read_iops", "write_iops")))
        bw = "/".join(dict.fromkeys(format_size(lim[k]) + "/s" if k in lim else "-" for k in ("read_bps", "write_bps")))
        state = f"{'up' if r.get('up') else 'down'},{'in' if r.get('in') else 'out'}" if "up" in r else "-"
        ok = r["attached"] and lim and r["osd_in_cgroup"] and r.get("up")
        t.add_row(r["name"], f"osd.{r['osd']}", r.get("device_class") or "-", r["pool"] or "-", state,
                  (r["loop"] or "-").removeprefix("/dev/"), iops, bw,
                  format_size(r["used"]) if r.get("size") else "-", format_size(r["size"]) if r.get("size") else "-",
                  "yes" if ok else "[red]NO[/]")
    console.print(t)
    m = st["mount"]
    console.print(f"CephFS {st['fs']!r}: MDS {', '.join(st['mds']) or 'none'}; "
                  f"{m['path']} {'mounted' if m['mounted'] else '[red]NOT mounted[/]'}")
    console.print(f"[dim]CephFS pools: {', '.join(f'{k}={v}' for k, v in st['fs_pools'].items())}[/]")
    if not st["healthy"]:
        console.print(f"[red]cluster is not healthy[/]: see {st['dir']}/log; 'pario cluster down DIR' and 'up' again")
