"""Issue 18 "planning at scale": ``pario advise --schemes all`` against ``pario trace show`` on
10^6, 10^7 and 10^8 requests, with the issue's targets.

    .venv/bin/python bench/bench_scale.py [--sizes 1e6] [--big] [--huge] [--repeat 3]
                                          [--system ceda-hdd8] [--pattern random]
                                          [--dir /tmp/pario-scale] [--per-scheme] [--simulate]

Traces: IOR random (16 processes, 64 KiB transfers, 4 MiB blocks, write then read back; as
many segments as the size needs), written to Parquet once by ``pario workload ior … -o``
(streamed: a 10^8-request trace is generated to disk in bounded memory).  Every measurement
is a separate child process of the CLI (``python -c 'from pario.cli import main; main()' …``),
timed by wall clock, its peak RSS taken from its own rusage (``os.wait4``), so measurements
don't pollute each other.  ``--repeat N``: medians and min–max over N runs, the commands
interleaved (trace show, advise, trace show, …) so that load from other work on the machine
hits both alike.  ``--big`` adds 10^7 requests, ``--huge`` 10^8 (advise once: ~minutes).
``--simulate`` adds ``simulate --layout fixed:64k`` and CEDA's plan written with ``-o`` (its
replica extents) beside the same advise without ``-o``.
A first unmeasured run of advise on a small trace loads / compiles the numba kernels into
their on-disk cache (``cache=True``), as any installed pario has after its first run.

Printed per size: each command's time and peak, the ratio to trace show, and the targets of
the issue's must-show with the measured value: at 10^6 advise ≤ 3× trace show and ≤ 1 GiB;
at 10^7 ≤ 40 s and ≤ 4 GiB; at 10^8 it completes within 16 GiB.  No assertion: figures only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


TARGETS = {  # issue 18: requests → (max ratio to trace show, max seconds, max peak MiB)
    1_000_000: (3.0, None, 1024),
    10_000_000: (None, 40.0, 4096),
    100_000_000: (None, None, 16384),
}


def workload_args(n: int, pattern: str, path: Path) -> list[str]:
    """``pario workload ior`` arguments of the bench's trace of about ``n`` requests."""
    procs, xfer, block = 16, 65536, 64 * 65536
    per_seg = 2 * procs * (block // xfer)  # write + read
    if pattern == "strided":
        block, per_seg = xfer, 2 * procs
    segments = max(1, round(n / per_seg))
    return ["workload", "ior", "--procs", str(procs), "--xfer", str(xfer), "--block", str(block),
            "--segments", str(segments), "--pattern", pattern, "--op", "both", "--seed", "1", "-o", str(path)]


def target_for(n: int):
    for size, t in TARGETS.items():
        if 0.9 * size <= n <= 1.1 * size:
            return t
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6")
    ap.add_argument("--big", action="store_true", help="add 10^7 requests")
    ap.add_argument("--huge", action="store_true", help="add 10^8 requests (advise once)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--system", default="ceda-hdd8")
    ap.add_argument("--pattern", default="random", choices=("random", "strided", "sequential"))
    ap.add_argument("--dir", default="/tmp/pario-scale")
    ap.add_argument("--per-scheme", action="store_true", help="also time each scheme alone")
    ap.add_argument("--simulate", action="store_true",
                    help="also time `simulate --layout fixed:64k` and `advise --schemes ceda -o PLAN` "
                         "(the plan file of millions of replica extents) beside `advise --schemes ceda`")
    args = ap.parse_args(argv)

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s] + ([10_000_000] if args.big else []) \
        + ([100_000_000] if args.huge else [])
    warm = out / f"ior-{args.pattern}-warm.parquet"
    if not warm.exists():
        run(workload_args(20_000, args.pattern, warm))
    run(["advise", str(warm), "--system", args.system, "--schemes", "all"])  # numba cache
    schemes = ["ci-layout", "padp", "psa", "ceda", "hybrid"] if args.per_scheme else []
    rows, verdicts = [], []
    for n in sizes:
        path = out / f"ior-{args.pattern}-{n}.parquet"
        if not path.exists():
            wall, peak, rc = run(workload_args(n, args.pattern, path))
            print(f"wrote {path} in {wall:.1f} s, peak {peak:.0f} MiB", file=sys.stderr)
            if rc:
                return rc
        reps = 1 if n >= 50_000_000 else args.repeat
        cmds = {"trace show": ["trace", "show", str(path)],
                "advise all": ["advise", str(path), "--system", args.system, "--schemes", "all"]}
        for s in schemes if n < 50_000_000 else []:
            cmds[f"advise {s}"] = ["advise", str(path), "--system", args.system, "--schemes", s]
        if args.simulate:
            cmds["simulate 64k"] = ["simulate", str(path), "--system", args.system, "--layout", "fixed:64k"]
            ceda = ["advise", str(path), "--system", args.system, "--schemes", "ceda", "--paper-benefit"]
            cmds["advise ceda"] = ceda
            cmds["advise ceda -o"] = ceda + ["-o", str(out / f"plan-{n}.json")]
        res: dict[str, list[tuple[float, float, int]]] = {k: [] for k in cmds}
        for r in range(reps):
            for k, c in cmds.items():
                wall, peak, rc = run(c)
                res[k].append((wall, peak, rc))
                print(f"  {n:>11,} {k:<16} run {r + 1}: {wall:7.2f} s {peak:7.0f} MiB", file=sys.stderr)
        show = [w for w, _, _ in res["trace show"]]
        for k, v in res.items():
            walls, peaks = [w for w, _, _ in v], [p for _, p, _ in v]
            ratios = [w / s for w, s in zip(walls, show)]
            rows.append((n, k, fmt(walls, " s"), fmt(peaks, " MiB"), fmt(ratios, "×")))
        tgt = target_for(n)
        if tgt:
            adv = res["advise all"]
            ok_rc = all(rc == 0 for _, _, rc in adv)
            ratio = statistics.median([w / s for (w, _, _), s in zip(adv, show)])
            wall = statistics.median([w for w, _, _ in adv])
            peak = max(p for _, p, _ in adv)
            parts, ok = [], ok_rc
            if tgt[0] is not None:
                parts.append(f"advise / trace show {ratio:.2f}× (≤ {tgt[0]:g}×)")
                ok &= ratio <= tgt[0]
            if tgt[1] is not None:
                parts.append(f"advise {wall:.1f} s (≤ {tgt[1]:g} s)")
                ok &= wall <= tgt[1]
            parts.append(f"peak {peak:.0f} MiB (≤ {tgt[2]} MiB)")
            ok &= peak <= tgt[2]
            verdicts.append(f"{n:>11,}: {'; '.join(parts)}{'' if ok_rc else '; advise FAILED'} -> "
                            f"{'meets' if ok else 'MISSES'} the target")
    print(f"\nIOR {args.pattern} traces, system {args.system}: median [min–max]; "
          f"ratio = time / trace show of the same run")
    print(f"{'requests':>11}  {'command':<16} {'time':<24} {'peak RSS':<30} {'ratio to trace show'}")
    for n, k, t, p, r in rows:
        print(f"{n:>11,}  {k:<16} {t:<24} {p:<30} {r}")
    if verdicts:
        print("\nissue 18 targets (median time, largest peak):")
        for v in verdicts:
            print("  " + v)
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
