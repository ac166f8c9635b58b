"""Traces and simulation at scale: time and peak memory of ``pario trace show`` and
``pario simulate --layout fixed:64k`` on IOR random traces of 10^6 and 10^7 requests (10^8
with ``--huge``), each command in a child process, this tree against a reference revision.

    .venv/bin/python bench/bench_trace_scale.py [--reference REV] [--sizes 1e6,1e7] [--huge]
                                                [--repeat 3] [--dir /tmp/pario-scale]

Traces: ``pario workload ior --procs 16 --xfer 64k --block 4m --pattern random --op both
--seed 1`` (written chunk by chunk), segments chosen for the request count; kept in
``--dir`` and reused.  ``--reference REV`` extracts ``src/`` of that git revision into a
temporary directory and runs the same commands with it (the trace files are the same; a
reference that reads them needs to understand them: any pario reads Parquet).  Peak memory
is the child's own maximum resident set size (``os.wait4``); times are wall seconds of the
child, median of ``--repeat`` runs with the range.  The JSON outputs of both trees are
compared (``wall_s`` aside): "same" means byte-identical results.

At 10^8 requests (``--huge``, ~3.6 GB of Parquet) only ``trace show`` of this tree runs: the
reference and ``simulate`` hold the whole trace and its sub-requests in memory (more than the
16 GiB this machine allows).  No assertion: figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
RUN = "import sys; from pario.cli import main; sys.argv[0] = 'pario'; sys.exit(main())"


def child(src: Path, argv: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float, int]:
    """Run ``pario ARGV`` with ``src`` on PYTHONPATH: (wall s, peak RSS MiB, exit status)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    p = subprocess.Popen([PY, "-c", RUN, *argv], env=env, stdout=stdout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.returncode != 0:
        print(f"  ! {' '.join(argv)} exited {p.returncode}: {err.strip()[-300:]}", file=sys.stderr)
    return wall, ru.ru_maxrss / 1024.0, p.returncode


def json_of(src: Path, argv: list[str]) -> dict | None:
    with tempfile.TemporaryFile() as fh:
        _, _, rc = child(src, argv + ["--json"], stdout=fh)
        if rc:
            return None
        fh.seek(0)
        d = json.loads(fh.read())
    d.pop("wall_s", None)
    return d


def make_trace(src: Path, n: int, d: Path) -> Path:
    procs, per_seg = 16, 2 * 16 * 64  # write + read, 64 transfers of 64 KiB per 4 MiB block
    segments = max(1, round(n / per_seg))
    path = d / f"ior-random-{n:.0e}.parquet".replace("+", "")
    if not path.exists():
        t0 = time.perf_counter()
        wall, rss, rc = child(src, ["workload", "ior", "--procs", str(procs), "--xfer", "64k", "--block", "4m",
                                    "--segments", str(segments), "--pattern", "random", "--op", "both",
                                    "--seed", "1", "-o", str(path)])
        if rc:
            raise SystemExit(f"cannot generate {path}")
        print(f"generated {path} ({path.stat().st_size / 2**20:.0f} MiB) in {wall:.1f} s, peak {rss:.0f} MiB",
              file=sys.stderr)
    return path


def reference_tree(rev: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix="pario-ref-"))
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(d)], input=arch, check=True)
    return d


def fmt(xs: list[float], unit: str) -> str:
    if not xs:
        return "—"
    m = statistics.median(xs)
    return f"{m:.2f} {unit}" + (f" ({min(xs):.2f}-{max(xs):.2f})" if len(xs) > 1 else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default=None, metavar="REV", help="git revision to compare with (e.g. 842f2d8)")
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--huge", action="store_true", help="also 10^8 requests (trace show of this tree only)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/pario-scale")
    ap.add_argument("--system", default="ceda-hdd8")
    args = ap.parse_args(argv)
    here = ROOT / "src"
    ref = reference_tree(args.reference) / "src" if args.reference else None
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    rows = []
    try:
        for n in sizes + ([10 ** 8] if args.huge else []):
            path = make_trace(here, n, d)
            huge = n >= 10 ** 8
            cmds = {"trace show": ["trace", "show", str(path)],
                    "simulate fixed:64k": ["simulate", str(path), "--system", args.system, "--layout", "fixed:64k"]}
            for name, cmd in cmds.items():
                if huge and name != "trace show":
                    rows.append((n, name, "skipped: the whole trace and its sub-requests in memory (> 16 GiB)",
                                 "", "", "", ""))
                    continue
                trees = [("after", here)] + ([("before", ref)] if ref is not None and not huge else [])
                res = {}
                for label, src in trees:
                    child(src, cmd)  # warm-up: numba caches, page cache
                res = {label: [] for label, _ in trees}
                for _ in range(args.repeat):
                    for label, src in trees:  # interleaved: both see the same load
                        wall, rss, rc = child(src, cmd)
                        res[label].append((wall, rss))
                same = ""
                if ref is not None and not huge:
                    a, b = json_of(here, cmd), json_of(ref, cmd)
                    same = "same" if a is not None and a == b else "DIFFERENT"
                after = res["after"]
                before = res.get("before", [])
                ratio_t = (statistics.median(w for w, _ in before) / statistics.median(w for w, _ in after)
                           if before else None)
                ratio_m = (statistics.median(m for _, m in before) / statistics.median(m for _, m in after)
                           if before else None)
                rows.append((n, name, fmt([w for w, _ in before], "s"), fmt([w for w, _ in after], "s"),
                             fmt([m for _, m in before], "MiB"), fmt([m for _, m in after], "MiB"),
                             (f"{ratio_t:.2f}x time, {ratio_m:.2f}x memory " if ratio_t else "") + same))
                print(f"{n:>11,} {name}: " + " | ".join(str(x) for x in rows[-1][2:]), file=sys.stderr)
    finally:
        if ref is not None:
            shutil.rmtree(ref.parent, ignore_errors=True)
    from rich.console import Console
    from rich.table import Table

    tab = Table(title=f"pario at scale: IOR random traces, {args.repeat} runs each, median (range)"
                      + (f", before = {args.reference}" if args.reference else ""))
    for col in ("requests", "command", "before time", "after time", "before peak", "after peak", "gain, output"):
        tab.add_column(col, justify="left" if col in ("command", "gain, output") else "right")
    for r in rows:
        tab.add_row(f"{r[0]:,}", *r[1:])
    Console(width=200).print(tab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
