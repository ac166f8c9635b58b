"""CEDA alone at scale (issue 18): ``CEDAPlanner().plan`` in process on IOR traces of 10^6–10^8 requests.

    .venv/bin/python bench/bench_ceda_scale.py TRACE.parquet [TRACE …] [--src DIR …] [--repeat N]
                                               [--system ceda-hdd8] [--profile]

Every measurement is a child process (``PYTHONPATH`` = one source tree: ``--src`` several to
compare trees in the same run, e.g. an extracted copy of the code before a change): it loads
the trace, plans a 20 k-request IOR trace first (loads the numba kernels from their cache),
then times ``plan`` on the trace.  Printed per run: plan seconds, the child's RSS after
loading and warming (MiB), its peak RSS (``os.wait4``: loaded trace included) and the peak
above the loaded state.  ``--profile``: the child prints cProfile's top functions by
tottime.  No assertion: figures only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import sys, time, resource
sys.path.insert(0, {bench!r})
from bench_advise import make_trace
from pario.trace.io import load
from pario.system import load_system
from pario.plan.ceda import CEDAPlanner
system = load_system({system!r})
CEDAPlanner().plan(make_trace(20000, "random"), system)
tr = load({path!r})
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if {profile!r}:
    import cProfile, pstats
    pr = cProfile.Profile(); pr.enable()
t0 = time.perf_counter()
plan = CEDAPlanner().plan(tr, system)
dt = time.perf_counter() - t0
if {profile!r}:
    pr.disable(); pstats.Stats(pr, stream=sys.stderr).sort_stats("tottime").print_stats(25)
print(f"{{len(tr)}} {{dt:.3f}} {{base:.0f}} {{plan.predicted_s!r}}")
"""


def run(src: str, path: str, system: str, profile: bool) -> tuple[int, float, float, float, str]:
    code = CHILD.format(bench=str(HERE), path=path, system=system, profile=profile)
    env = {**os.environ, "PYTHONPATH": src}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=None, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode().split()
    if os.waitstatus_to_exitcode(status) or len(out) != 4:
        raise SystemExit(f"child failed ({src}, {path})")
    n, dt, base, pred = int(out[0]), float(out[1]), float(out[2]), out[3]
    return n, dt, base, ru.ru_maxrss / 1024.0, pred


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--src", action="append", default=None, help="source tree(s) to measure (default: ../src)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--system", default="ceda-hdd8")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    srcs = args.src or [str(HERE.parent / "src")]
    print(f"{'requests':>11}  {'source':<28} {'plan s':>8} {'loaded MiB':>11} {'peak MiB':>9} {'above':>7}  predicted_s")
    for path in args.traces:
        for r in range(args.repeat):
            for src in srcs:  # interleaved, so that load on the machine hits every tree alike
                n, dt, base, peak, pred = run(src, path, args.system, args.profile)
                print(f"{n:>11,}  {src[-28:]:<28} {dt:8.2f} {base:11.0f} {peak:9.0f} {peak - base:7.0f}  {pred}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
