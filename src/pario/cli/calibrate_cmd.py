"""``pario calibrate``: measure α, β per op/pattern and e, t; write a system profile."""

from __future__ import annotations

import json
from pathlib import Path

from .. import ParioError
from ..units import format_size
from .common import console, dumps, size_arg


def _sizes(text: str) -> list[int]:
    out = [size_arg(x) for x in text.split(",") if x.strip()]
    if not out:
        import argparse

        raise argparse.ArgumentTypeError("expected a comma-separated list of sizes, e.g. 4k,64k,1m")
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="measure α, β (per op, pattern) and e, t on real storage; write a profile",
        description="Pre-estimation (CI-LAYOUT §4, PADP §3.5, PSA §3.4): timed O_DIRECT reads and writes, "
                    "sequential and random, over several request sizes and repetitions on every target; "
                    "least-squares fit of alpha and beta with confidence intervals; network e and t by an "
                    "MPI ping-pong or a loopback TCP client/server. Targets on a 'pario testbed' are "
                    "measured from inside its throttling cgroup.")
    p.add_argument("--target", action="append", default=[], metavar="NAME=PATH[:hdd|ssd]",
                   help="a server: a directory on its storage (repeat; order = server order in the profile)")
    p.add_argument("--cluster", metavar="CLUSTER_DIR", default=None,
                   help="instead of --target: every server of a 'pario cluster' (Ceph), measured through "
                        "its pool with librados as pario's rados store does its I/O")
    p.add_argument("--server", action="append", default=[], metavar="NAME",
                   help="[--cluster] only these servers (repeat; default all)")
    p.add_argument("--network", choices=("auto", "mpi", "tcp", "none"), default="auto",
                   help="how to measure e and t (auto: mpi if mpi4py and mpiexec exist, else tcp)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per op, pattern and size (default 5)")
    p.add_argument("--sizes", type=_sizes, default=None, metavar="S1,S2,..",
                   help="request sizes (multiples of 4 KiB; default 4k,16k,64k,256k,1m,4m,8m)")
    p.add_argument("--min-time", type=float, default=0.2, metavar="SEC",
                   help="minimum duration of one repetition (a batch of requests; default 0.2 s)")
    p.add_argument("--file-size", type=size_arg, default=None, metavar="SIZE",
                   help="size of the scratch file per target (default 64m, capped by free space)")
    p.add_argument("--model", choices=("auto", "additive", "max"), default="auto",
                   help="cost shape: additive α+β·s (disks), max(α, β·s) (rate-limited devices), auto = better fit")
    p.add_argument("--max-residual", type=float, default=None, metavar="FRAC",
                   help="refuse a fit whose relative RMS residual exceeds this (default 0.25; 0.5 with --cluster: "
                        "BlueStore writes a random write of up to 64 KiB twice, deferred through its WAL, so its "
                        "cost is not linear in its size)")
    p.add_argument("--name", default=None, help="profile name (default: the output file's stem)")
    p.add_argument("--procs-per-node", type=int, default=1, metavar="C", help="[clients] procs_per_node")
    p.add_argument("--no-capacity", action="store_true", help="leave capacities unlimited")
    p.add_argument("--compare", metavar="PROFILE", default=None,
                   help="print measured vs this profile (default for testbed targets: the testbed's nominal profile)")
    p.add_argument("--samples", metavar="FILE.csv", default=None, help="also write the raw samples")
    p.add_argument("--json", metavar="FILE.json", default=None, help="also write fits, spreads and warnings as JSON")
    p.add_argument("-o", "--output", metavar="PROFILE.toml", default=None,
                   help="write the profile here (default: print it)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..calibrate import core
    from ..calibrate.storage import DEFAULT_SIZES

    if bool(args.target) == bool(args.cluster):
        raise ParioError("give --target NAME=PATH (repeat) or --cluster CLUSTER_DIR")
    if args.server and not args.cluster:
        raise ParioError("--server needs --cluster")
    if args.cluster:
        targets = core.cluster_targets(args.cluster, args.server or None)
    else:
        targets = [core.parse_target(t) for t in args.target]
    sizes = args.sizes or list(DEFAULT_SIZES)
    if args.reps < 1:
        raise ParioError("--reps must be >= 1")
    if args.min_time <= 0:
        raise ParioError("--min-time must be > 0")
    name = args.name or (Path(args.output).stem if args.output else "calibrated")
    max_residual = args.max_residual if args.max_residual is not None else (0.5 if args.cluster else 0.25)
    total = core.progress_steps(targets, sizes, args.reps)
    with Progress(TextColumn("{task.description:<28}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True) as prog:
        task = prog.add_task("calibrating", total=total)

        def step(what: str) -> None:
            prog.update(task, advance=1, description=what)

        cal = core.calibrate(targets, sizes=sizes, reps=args.reps, min_time=args.min_time, file_size=args.file_size,
                             network=args.network, model=args.model, max_residual=max_residual, name=name,
                             procs_per_node=args.procs_per_node, capacity=not args.no_capacity, progress=step)
    _print_summary(cal)
    ref = _reference(args.compare, targets)
    if ref is not None:
        _print_compare(cal, ref)
    for w in cal.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    text = cal.system.to_toml()
    if args.samples:
        cal.samples.to_frame().to_csv(args.samples, index=False)
    if args.json:
        Path(args.json).write_text(dumps(cal.to_dict()))
    if args.output:
        Path(args.output).write_text(text)
        console.print(f"profile written to {args.output} ({cal.seconds:.0f} s of measurement)")
    else:
        print(text)
    return 0


def _us(x: float) -> str:
    return f"{x * 1e6:.1f}"


def _bw(beta: float) -> str:
    return f"{1 / beta / 2**20:.1f}" if beta > 0 else "inf"


def _g(x: float) -> str:
    """Four significant digits: a table cell narrow enough for 80 columns."""
    return f"{x:.4g}"


def _print_summary(cal) -> None:
    """The fits as a table that fits 80 columns: every cell holds the value and, below it,
    its confidence interval."""
    from rich.table import Table

    from ..calibrate.core import OP_NAMES, PATTERN_NAMES

    conf = int(100 * next(iter(cal.fits.values())).conf)
    t = Table(title=f"calibration: fits, each over its {conf} % confidence interval", title_justify="left")
    for col in ("server", "op", "model", "α (µs)", "1/β (MiB/s)", "resid", "spread"):
        t.add_column(col, justify="left" if col in ("server", "op", "model") else "right", no_wrap=True)
    kinds = {s.name: s.kind for s in cal.system.servers}
    for (name, op, seq), f in cal.fits.items():
        sp, at = cal.spreads[(name, op, seq)]
        lo_b, hi_b = f.beta_ci
        t.add_row(f"{name}\n{kinds[name]}", f"{OP_NAMES[op]}\n{PATTERN_NAMES[seq]}", f.model,
                  f"{_g(f.alpha * 1e6)}\n{_g(f.alpha_ci[0] * 1e6)}–{_g(f.alpha_ci[1] * 1e6)}",
                  f"{_bw(f.beta)}\n" + (f"{_bw(hi_b)}–{_bw(lo_b)}" if lo_b > 0 else f"≥ {_bw(hi_b)}"),
                  f"{100 * f.rel_rms:.1f} %", f"{100 * sp:.0f} %\n@ {format_size(at)}")
    console.print(t)
    caps = ", ".join(f"{n}: {format_size(c)}" for n, c in cal.capacities.items())
    console.print(f"capacity (free space): {caps}")
    if cal.network:
        n = cal.network
        console.print(f"network ({n.method}): e = {_us(n.e)} µs (spread {100 * n.e_spread:.0f} %), "
                      f"t = {n.t:.3g} s/B ({_bw(n.t) if n.t > 0 else 'inf'} MiB/s), residual {100 * n.rel_rms:.1f} %")
    console.print("α = startup per request, 1/β = transfer rate; model: additive α + β·s (disks) or max(α, β·s) "
                  "(rate-limited devices); resid = relative RMS residual of the per-size medians; spread = "
                  "largest coefficient of variation over repetitions (at that size)")


def _reference(spec: str | None, targets):
    from ..system import load_system

    if spec:
        return load_system(spec)
    pools = {t.path for t in targets if t.pool}
    if pools:
        from ..cluster.state import NOMINAL_PROFILE

        p = Path(pools.pop()) / NOMINAL_PROFILE
        return load_system(str(p)) if p.is_file() else None
    from ..testbed import find_testbed, nominal_system

    tbs = {find_testbed(t.path).dir if find_testbed(t.path) else None for t in targets}
    if len(tbs) == 1 and None not in tbs:
        return nominal_system(tbs.pop())
    return None


def _print_compare(cal, ref) -> None:
    from rich.table import Table

    t = Table(title=f"measured vs {ref.name}", title_justify="left")
    for col in ("server", "parameter", "measured", "reference", "error"):
        t.add_column(col, justify="left" if col in ("server", "parameter") else "right", no_wrap=True)
    keys = ("alpha_read_seq", "alpha_read_rand", "alpha_write_seq", "alpha_write_rand", "beta_read", "beta_write")
    worst = 0.0
    for s in cal.system.servers:
        try:
            r = ref.servers[ref.index(s.name)]
        except ParioError:
            continue
        for k in keys:
            op = 0 if "read" in k else 1
            m = getattr(s, k)
            v = r.alpha_for(op, k.endswith("seq")) if k.startswith("alpha") else r.beta_for(op)
            err = (m - v) / v if v else float("nan")
            worst = max(worst, abs(err)) if v else worst
            if k.startswith("alpha"):
                label, fmt = "α " + " ".join(k.split("_")[1:]), (lambda x: f"{x * 1e6:.1f} µs")
            else:
                label, fmt = f"β {k.split('_')[1]}", (lambda x: f"{x * 1e9:.4g} ns/B")
            t.add_row(s.name, label, fmt(m), fmt(v), f"{100 * err:+.1f} %")
    console.print(t)
    console.print(f"largest relative error: {100 * worst:.1f} % (β = time per byte = 1 / transfer rate; "
                  f"1 ns/B = {1e9 / 2**20:.0f} MiB/s)")


def compare_rows(cal_system, ref) -> list[dict]:
    """Measured vs reference α/β per server (for tests and docs)."""
    rows = []
    for s in cal_system.servers:
        r = ref.servers[ref.index(s.name)]
        for op in (0, 1):
            for seq in (True, False):
                rows.append({"server": s.name, "param": f"alpha_{'read' if op == 0 else 'write'}_{'seq' if seq else 'rand'}",
                             "measured": s.alpha_for(op, seq), "reference": r.alpha_for(op, seq)})
            rows.append({"server": s.name, "param": f"beta_{'read' if op == 0 else 'write'}",
                         "measured": s.beta_for(op), "reference": r.beta_for(op)})
    return rows


__all__ = ["register", "compare_rows", "json"]
