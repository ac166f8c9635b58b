"""``pario testbed up|down|status|run``: an emulated hybrid HDD/SSD testbed on loop devices."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from .. import ParioError
from ..units import format_size
from .common import add_server_args, console, print_json, size_arg


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "testbed", help="emulated hybrid testbed: ext4 on loop devices throttled by the blkio cgroup (root)",
        description="Build, inspect and release an emulated hybrid testbed: each server is an ext4 file "
                    "system on its own loop device, throttled per device by the blkio cgroup so that "
                    "HDD-like and SSD-like servers really behave differently. Needs root.")
    sub = p.add_subparsers(dest="testbed_command", metavar="ACTION")
    sub.required = True

    u = sub.add_parser("up", help="create DIR/H0.., DIR/S0.. servers and the throttling cgroup")
    u.add_argument("dir", metavar="DIR", help="directory for the testbed (server images, mounts, state)")
    add_server_args(u)
    u.add_argument("--size", type=size_arg, default=None, metavar="SIZE", help="file system size per server (default 512m)")
    u.add_argument("--json", action="store_true", help="print the state as JSON")
    u.set_defaults(func=_up)

    d = sub.add_parser("down", help="release everything the testbed made (also after a crash)")
    d.add_argument("dir", metavar="DIR", help="the testbed's directory (as given to 'pario testbed up')")
    d.set_defaults(func=_down)

    s = sub.add_parser("status", help="servers, loop devices, mounts, throttle settings")
    s.add_argument("dir", metavar="DIR", help="the testbed's directory (as given to 'pario testbed up')")
    s.add_argument("--json", action="store_true", help="print the state as JSON")
    s.set_defaults(func=_status)

    r = sub.add_parser("run", help="run a command inside the testbed's cgroup: pario testbed run DIR -- CMD ...")
    r.add_argument("dir", metavar="DIR", help="the testbed's directory (as given to 'pario testbed up')")
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="CMD", help="the command and its arguments (after --)")
    r.set_defaults(func=_run_cmd)


def _up(args) -> int:
    from ..testbed import core

    kw = {k: v for k, v in dict(hdd_iops=args.hdd_iops, hdd_bps=args.hdd_bps, ssd_iops=args.ssd_iops,
                                  ssd_bps=args.ssd_bps, size=args.size).items() if v is not None}
    tb = core.up(args.dir, hdd=args.hdd, ssd=args.ssd, **kw,
                 progress=None if args.json else (lambda m: console.print(f"[dim]{m}[/]")))
    if args.json:
        print_json(core.status(tb.dir))
        return 0
    _print_status(core.status(tb.dir))
    console.print(f"nominal profile (α = 1/IOPS, β = 1/BPS): {os.path.join(tb.dir, core.NOMINAL_PROFILE)}")
    console.print(f"release with: pario testbed down {tb.dir}")
    return 0


def _down(args) -> int:
    from ..testbed import core

    done = core.down(args.dir)
    console.print(f"released {len(done)} resource(s)" + (": " + ", ".join(done) if done else ""))
    return 0


def _status(args) -> int:
    from ..testbed import core

    st = core.status(args.dir)
    if args.json:
        print_json(st)
    else:
        _print_status(st)
    return 0 if st["healthy"] else 1


def _print_status(st: dict) -> None:
    from rich.table import Table

    t = Table(title=f"testbed {st['dir']} (cgroup v{st['cgroup_version']}: {st['cgroup']})")
    for col in ("server", "kind", "loop", "mount", "IOPS r/w", "bandwidth r/w", "free / size", "pario stores",
                "ok"):
        t.add_column(col, justify="right" if col in ("IOPS r/w", "bandwidth r/w", "free / size", "pario stores")
                     else "left")
    gone_dirs, gone_bytes = 0, 0
    for r in st["servers"]:
        lim = r["throttle"] or {}
        iops = f"{lim.get('read_iops', '-')}/{lim.get('write_iops', '-')}"
        bw = "/".join(format_size(lim[k]) + "/s" if k in lim else "-" for k in ("read_bps", "write_bps"))
        space = f"{format_size(r['free'])} / {format_size(r['total'])}" if r["free"] is not None else "-"
        stores = r.get("stores") or []
        gone = [x for x in stores if not x["in_use"]]
        gone_dirs += len(gone)
        gone_bytes += sum(x["bytes"] for x in gone)
        held = (f"{len(stores)}: {format_size(sum(x['bytes'] for x in stores))}"
                + (f" ({len(gone)} gone)" if gone else "")) if stores else "-"
        ok = "yes" if r["attached"] and r["is_mounted"] and lim else "[red]NO[/]"
        t.add_row(r["name"], r["kind"], r["loop"] or "-", r["mount"] or "-", iops, bw, space, held, ok)
    console.print(t)
    if st.get("dir_free") is not None:
        console.print(f"images' file system ({st['dir']}): {format_size(st['dir_free'])} free of "
                      f"{format_size(st['dir_total'])}")
    if gone_dirs:
        console.print(f"{gone_dirs} server directory(ies) of stores that are gone hold {format_size(gone_bytes)}: "
                      f"'pario store gc {st['dir']}' removes them")
    if st["procs_in_cgroup"]:
        console.print(f"processes in the cgroup: {' '.join(map(str, st['procs_in_cgroup']))}")
    if not st["healthy"]:
        console.print("[red]testbed is not healthy[/]: run 'pario testbed down DIR' and 'up' again")


def _run_cmd(args) -> int:
    from ..testbed import core

    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not cmd:
        raise ParioError("nothing to run: pario testbed run DIR -- CMD ...")
    tb = core.load_state(args.dir)
    with core.enter(tb):
        try:
            return subprocess.call(cmd)
        except FileNotFoundError:
            raise ParioError(f"command not found: {cmd[0]}") from None
        finally:
            sys.stdout.flush()
