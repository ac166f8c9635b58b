"""Speed of ``pario advise --schemes all`` on generated IOR traces of 10^4, 10^5, 10^6 requests.

    .venv/bin/python bench/bench_advise.py [--sizes 1e4,1e5,1e6] [--pattern random]
                                           [--system ceda-hdd8] [--schemes all] [--space SIZE]

Traces: IOR (``pario.workload.ior``), 16 processes, 64 KiB transfers, 4 MiB blocks, write
then read back (``-w -r``), as many segments as needed for the request count.  For each
size the script runs every scheme's planner through the same code as the CLI
(:func:`pario.plan.advise.run_advise`) plus the common distribution-model pricing, and
prints the wall time and requests/s per scheme and in total.  No assertion: figures only.
"""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console
from rich.table import Table

from pario.plan.advise import compare, run_advise
from pario.plan.schemes import parse_schemes
from pario.system import load_system
from pario.units import parse_size
from pario.workload.ior import ior


def make_trace(n: int, pattern: str):
    procs, xfer, block = 16, 65536, 64 * 65536
    per_seg = 2 * procs * (block // xfer)  # write + read
    if pattern == "strided":
        block = xfer
        per_seg = 2 * procs
    segments = max(1, round(n / per_seg))
    return ior(procs, xfer, block, segments, pattern=pattern, op="both", seed=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e4,1e5,1e6")
    ap.add_argument("--pattern", default="random", choices=("random", "strided", "sequential"))
    ap.add_argument("--system", default="ceda-hdd8")
    ap.add_argument("--schemes", default="all")
    ap.add_argument("--space", default=None)
    args = ap.parse_args(argv)
    system = load_system(args.system)
    schemes = parse_schemes(args.schemes)
    space = parse_size(args.space) if args.space else None
    console = Console(width=120)
    tab = Table(title=f"advise on IOR {args.pattern} traces, system {system.name}")
    for col in ("requests", "scheme", "plan s", "req/s", "predicted s", "distribution s"):
        tab.add_column(col, justify="right" if col != "scheme" else "left")
    for text in args.sizes.split(","):
        n = int(float(text))
        t0 = time.perf_counter()
        trace = make_trace(n, args.pattern)
        gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        plans, skipped = run_advise(trace, system, schemes, space=space)
        plan_total = time.perf_counter() - t0
        t1 = time.perf_counter()
        common, _ = compare(plans, trace, system)
        price = time.perf_counter() - t1
        for name, (plan, secs) in plans.items():
            c = common[name]
            tab.add_row(f"{len(trace):,}", name, f"{secs:.2f}", f"{len(trace) / secs:,.0f}",
                        f"{plan.predicted_s:.4g}", "—" if c is None else f"{c:.4g}")
        for name, why in skipped.items():
            tab.add_row(f"{len(trace):,}", name, "skipped", "", why[:40], "")
        total = plan_total + price
        tab.add_row(f"{len(trace):,}", "[bold]all[/bold]", f"{total:.2f}", f"{len(trace) / total:,.0f}",
                    f"(trace generated in {gen:.2f} s)", f"(pricing {price:.2f} s)", end_section=True)
        print(f"{len(trace):>9,} requests: advise {total:.2f} s = {len(trace) / total:,.0f} requests/s", file=sys.stderr)
    console.print(tab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
