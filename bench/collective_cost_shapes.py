"""Predicted ROMCIO / CACIO / HACIO times of the testbed's collective IOR replay under both cost shapes.

    python bench/collective_cost_shapes.py PROFILE.toml [--block 32m] [--aggregators 8]

The collective workload of ``bench/bench_testbed.py`` (IOR random 512 KiB, 8 ranks, write,
4 MiB collective buffer) simulated on ``PROFILE`` twice: every server ``cost = "additive"``
(α + s·β, the papers) and ``cost = "max"`` (max(α, s·β), a rate limiter such as the testbed's
blkio throttle), on fixed:64k and fixed:1m, with the order each shape predicts.  Compare with
the measured medians of ``bench/bench_testbed.py`` (docs/RESULTS.md, "Testbed").
"""

import argparse
import dataclasses

from pario.layout import parse_layout
from pario.plan.collective import ORDERS
from pario.simulate import simulate
from pario.system import load_system
from pario.units import parse_size
from pario.workload.ior import ior



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--block", default="32m")
    ap.add_argument("--aggregators", type=int, default=8)
    a = ap.parse_args()
    base = load_system(a.profile)
    shaped = {c: dataclasses.replace(base, servers=tuple(dataclasses.replace(s, cost=c) for s in base.servers))
              for c in ("additive", "max")}
    trace = ior(procs=8, xfer=512 << 10, block=parse_size(a.block), pattern="random", op="write", collective=True)
    for spec in ("fixed:64k", "fixed:1m"):
        lay = parse_layout(spec, base)
        for cost, system in shaped.items():
            t = {o: simulate(trace, system, lay, collective=True, order=o, aggregators=a.aggregators).makespan_s
                 for o in ORDERS}
            print(f"{spec:10} {cost:8} " + "  ".join(f"{o} {t[o]:.3f} s" for o in ORDERS)
                  + "   order: " + " < ".join(sorted(ORDERS, key=t.get)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
