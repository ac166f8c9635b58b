"""``pario demo``: the main job on built-in defaults (run by ``./run``).

For now: generate an IOR strided workload, show its trace summary and the per-server load
of the default layout on a built-in system.  Later stages add advice, simulation, the store
and verified read-back as they land.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .common import console


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job: a short tour on built-in defaults")
    p.add_argument("--out", metavar="DIR", help="where to write the demo's files (default: a temporary directory)")
    p.add_argument("--system", default="ceda-hdd8", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..layout import parse_layout
    from ..system import load_system
    from ..trace import save
    from ..workload import ior
    from . import layout_cmd, trace_cmd

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="pario-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    system = load_system(args.system)
    console.rule("[bold]1. workload: IOR strided, 16 processes, 64 KiB transfers, 64 segments")
    trace = ior(procs=16, xfer=64 << 10, block=64 << 10, segments=64, pattern="strided", op="both")
    path = save(trace, out / "ior-strided.parquet")
    console.print(f"wrote {path}")
    console.rule("[bold]2. trace summary")
    trace_cmd.show_summary(trace)
    console.rule(f"[bold]3. per-server load, default layout (fixed 64 KiB) on {system.name}")
    layout_cmd._map(argparse.Namespace(trace=str(path), system=args.system, layout="fixed:64K", json=False))
    console.print(f"\nfiles are in {out}")
    return 0
