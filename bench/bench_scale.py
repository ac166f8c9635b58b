"""Issue 18 "planning at scale": ``pario advise`` vs ``pario trace show`` on 10^6 (and 10^7) requests.

    .venv/bin/python bench/bench_scale.py [--sizes 1e6] [--big] [--repeat 3] [--system ceda-hdd8]
                                          [--pattern random] [--dir /tmp/pario-scale] [--per-scheme]

For each size an IOR trace (``bench_advise.make_trace``: 16 processes, 64 KiB transfers, write
then read back) is written to Parquet once; then every measurement is a separate child
process of the CLI (``python -c 'from pario.cli import main; main()' …``), timed by wall
clock, its peak RSS taken from its own rusage (``os.wait4``), so measurements don't pollute
each other.  Printed per size: ``trace show`` time and peak, ``advise --schemes all`` time
and peak, the ratio advise / trace show (the issue's must-show: ≤ 3 at 10^6, peak ≤ 1 GiB;
at 10^7 ≤ 40 s and ≤ 4 GiB) and with ``--per-scheme`` each scheme alone.  ``--repeat N``:
medians and min–max over N runs, the commands interleaved (trace show, advise, trace show, …)
so that load from other work on the machine hits both alike.  ``--big`` adds 10^7.  A first
unmeasured run of advise on a small trace loads / compiles the numba kernels into their
on-disk cache (``cache=True``), as any installed pario has after its first run.
No assertion: figures only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CLI = "import sys; from pario.cli import main; sys.exit(main())"


def run(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one CLI child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "COLUMNS": "120"})
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        print(f"  ! {' '.join(args)} failed ({proc.returncode}): {err.strip()[-300:]}", file=sys.stderr)
    return wall, ru.ru_maxrss / 1024.0, proc.returncode


def fmt(vals: list[float], unit: str) -> str:
    med = statistics.median(vals)
    if len(vals) == 1:
        return f"{med:.2f}{unit}"
    return f"{med:.2f}{unit} [{min(vals):.2f}–{max(vals):.2f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6")
    ap.add_argument("--big", action="store_true", help="add 10^7 requests")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--system", default="ceda-hdd8")
    ap.add_argument("--pattern", default="random", choices=("random", "strided", "sequential"))
    ap.add_argument("--dir", default="/tmp/pario-scale")
    ap.add_argument("--per-scheme", action="store_true", help="also time each scheme alone")
    args = ap.parse_args(argv)
    from bench_advise import make_trace

    from pario.trace.io import save

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    sizes = [int(float(s)) for s in args.sizes.split(",")] + ([10_000_000] if args.big else [])
    warm = out / f"ior-{args.pattern}-warm.parquet"
    if not warm.exists():
        save(make_trace(20_000, args.pattern), warm)
    run(["advise", str(warm), "--system", args.system, "--schemes", "all"])  # numba cache
    schemes = ["ci-layout", "padp", "psa", "ceda", "hybrid"] if args.per_scheme else []
    rows = []
    for n in sizes:
        path = out / f"ior-{args.pattern}-{n}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            tr = make_trace(n, args.pattern)
            save(tr, path)
            print(f"wrote {path} ({len(tr):,} requests) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            del tr
        cmds = {"trace show": ["trace", "show", str(path)],
                "advise all": ["advise", str(path), "--system", args.system, "--schemes", "all"]}
        for s in schemes:
            cmds[f"advise {s}"] = ["advise", str(path), "--system", args.system, "--schemes", s]
        res: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
        for r in range(args.repeat):
            for k, c in cmds.items():
                wall, peak, _ = run(c)
                res[k].append((wall, peak))
                print(f"  {n:>10,} {k:<16} run {r + 1}: {wall:6.2f} s {peak:7.0f} MiB", file=sys.stderr)
        show = [w for w, _ in res["trace show"]]
        for k, v in res.items():
            walls, peaks = [w for w, _ in v], [p for _, p in v]
            ratios = [w / s for w, s in zip(walls, show)]
            rows.append((n, k, fmt(walls, " s"), fmt(peaks, " MiB"), fmt(ratios, "×")))
    print(f"\nIOR {args.pattern} traces, system {args.system}, {args.repeat} run(s) each: median [min–max]; "
          f"ratio = time / trace show of the same run")
    print(f"{'requests':>11}  {'command':<16} {'time':<24} {'peak RSS':<30} {'ratio to trace show'}")
    for n, k, t, p, r in rows:
        print(f"{n:>11,}  {k:<16} {t:<24} {p:<30} {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
