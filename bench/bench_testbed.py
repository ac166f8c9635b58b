"""Testbed must-show experiments (issue 7): model vs measurement on a 4 + 4 emulated hybrid testbed.

Needs root, loop devices and a blkio/io cgroup; mpi4py + mpiexec for the collective part.

    .venv/bin/python bench/bench_testbed.py [--dir /tmp/pario-bt] [--reuse TB] [--profile CAL.toml]
                                            [--cap 16m] [--block 32m] [--reps 3] [--skip-collective]

1. ``pario testbed up DIR --hdd 4 --ssd 4`` (HDD-like 250 IOPS / 120 MiB/s, SSD-like
   2000 IOPS / 400 MiB/s), unless ``--reuse`` names a running testbed.
2. ``pario calibrate`` on the 8 servers (unless ``--profile`` gives a calibrated profile).
3. IOR random 512 KiB from 8 ranks (``--block`` per rank, write).  PSA (seed 001) with the
   SServer capacity set to ``--cap`` per SSD (small relative to the file), and its
   baselines DEF (64 KiB everywhere) and PA (PADP's stripes) priced with the same capacity
   rule: the bytes beyond what fits on the SSDs go to the HServers only.  Each layout is
   predicted by ``pario simulate`` (calibrated and nominal profile) and replayed with
   ``pario bench run`` (independent, 8 rank streams, O_DIRECT) ``--reps`` times.
4. IOR random 512 KiB with ``-c`` (collective), fixed 64 KiB striping over the 8 servers:
   ``pario bench run --collective --order romcio|hacio`` (8 MPI ranks, one aggregator per
   rank, 4 MiB collective buffer) vs ``pario simulate --collective --order …``.
5. Prints the tables (markdown) and releases the testbed it made.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def _median_runs(fn, reps):
    vals = [fn() for _ in range(reps)]
    return statistics.median(v[0] for v in vals), vals[-1][1], [v[0] for v in vals]


def with_ssd_capacity(system, cap):
    servers = tuple(dataclasses.replace(s, capacity=float(cap)) if s.kind == "ssd" else s for s in system.servers)
    return dataclasses.replace(system, servers=servers)


def capped_layouts(trace, system, cap):
    """DEF, PA and PSA layouts under PSA's capacity rule (pario.plan.psa)."""
    from pario.plan.psa import PSAPlanner, heterogeneous_bytes, psa_layout

    plan = PSAPlanner(capacity=float(cap)).plan(trace, system)
    fname = trace.files[0]
    det = plan.details["files"][fname]
    S = det["S"]
    m, n = plan.details["m"], plan.details["n"]
    out = {}
    for name, (h, s) in {"DEF": (det["baselines"]["DEF"]["h"], det["baselines"]["DEF"]["s"]),
                         "PA": (det["baselines"]["PA"]["h"], det["baselines"]["PA"]["s"]),
                         "PSA": (det["h"], det["s"])}.items():
        W = m * h + n * s
        B = float(heterogeneous_bytes(float(cap), np.array([s]), np.array([W]))[0])
        out[name] = {"layout": psa_layout(system, h, s, B, S), "h": h, "s": s, "B": B,
                     "model_s": det["cost_s"] if name == "PSA" else det["baselines"][name]["cost_s"]}
    # PADP as 'pario advise --schemes padp' gives it: PA's stripes over the whole file, no capacity
    # limit (the testbed's SSD file systems are large enough to hold it; shown for reference)
    h, s = out["PA"]["h"], out["PA"]["s"]
    out["PADP (no cap)"] = {"layout": psa_layout(system, h, s, math.inf, S), "h": h, "s": s, "B": math.inf,
                            "model_s": float("nan")}
    return out, plan


def order(vals: dict, tie: float = 1e-6) -> str:
    """'A < B = C': names by value; values within ``tie`` (relative) are printed as ties."""
    items = sorted(vals.items(), key=lambda kv: kv[1])
    out = items[0][0]
    for (_, v0), (k, v) in zip(items, items[1:]):
        out += (" = " if abs(v - v0) <= tie * max(abs(v0), 1e-12) else " < ") + k
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/pario-bt")
    ap.add_argument("--reuse", default=None, metavar="TB", help="use this running testbed (not torn down)")
    ap.add_argument("--profile", default=None, help="calibrated profile (skip calibration)")
    ap.add_argument("--cap", default="16m", help="SServer capacity for PSA (default 16m)")
    ap.add_argument("--block", default="32m", help="IOR block per rank (default 32m)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-collective", action="store_true")
    ap.add_argument("--skip-independent", action="store_true")
    ap.add_argument("--coll-layouts", default="fixed:64k,fixed:1m", help="layouts of the collective runs")
    a = ap.parse_args()

    from pario.calibrate.core import calibrate, parse_target
    from pario.layout import describe, parse_layout
    from pario.simulate import simulate
    from pario.store import init_store
    from pario.system import load_system
    from pario.testbed import core
    from pario.testbed.bench import replay, replay_collective
    from pario.units import parse_size
    from pario.workload.ior import ior

    cap, block = parse_size(a.cap), parse_size(a.block)
    made = a.reuse is None
    tbdir = Path(a.reuse or (Path(a.dir) / "tb")).resolve()
    work = Path(a.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        if made:
            print(f"testbed up {tbdir} (4 HDD-like + 4 SSD-like)", flush=True)
            core.up(tbdir, hdd=4, ssd=4, size=384 << 20)
        names = [s.name for s in core.load_state(tbdir).servers]
        nominal = core.nominal_system(tbdir)
        if a.profile:
            cal = load_system(a.profile)
        else:
            print("calibrating (about 5 minutes)", flush=True)
            t0 = time.time()
            res = calibrate([parse_target(f"{n}={tbdir}/{n}") for n in names], reps=4, network="tcp")
            cal = res.system
            (work / "calibrated.toml").write_text(cal.to_toml())
            print(f"calibrated in {time.time() - t0:.0f} s -> {work / 'calibrated.toml'}", flush=True)
        store = work / "store"
        if not (store / "pario-store.toml").exists() and not store.exists():
            init_store(store, cal, {n: str(tbdir / n) for n in names})
        rows = []
        if not a.skip_independent:
            trace = ior(procs=8, xfer=512 << 10, block=block, pattern="random", op="write")
            lays, plan = capped_layouts(trace, with_ssd_capacity(cal, cap), cap)
            lays_nom, _ = capped_layouts(trace, with_ssd_capacity(nominal, cap), cap)
            print(f"\nIOR random 512 KiB, 8 ranks x {a.block} write ({len(trace)} requests); SServer capacity {a.cap}")
            for name, d in lays.items():
                print(f"  {name}: h={d['h']} s={d['s']} heterogeneous bytes={d['B']:.0f}  "
                      f"(nominal profile: h={lays_nom[name]['h']} s={lays_nom[name]['s']})  {describe(d['layout'], cal)}")
            for name, d in lays.items():
                lay = d["layout"]
                p_cal = simulate(trace, cal, lay).makespan_s
                p_nom = simulate(trace, nominal, lay).makespan_s
                med, last, allv = _median_runs(lambda: (lambda r: (r.wall_s, r))(
                    replay(trace, store, procs=8, layout=lay)), a.reps)
                ok = bool(np.array_equal(last.device_bytes >= last.mapped_bytes, np.ones(len(names), bool)))
                rows.append((name, d["model_s"], p_cal, p_nom, med, allv, last.mapped_bytes, ok))
                print(f"  {name}: measured {med:.3f} s (runs {', '.join(f'{v:.3f}' for v in allv)})  "
                      f"simulate(cal) {p_cal:.3f} s  simulate(nominal) {p_nom:.3f} s  model {d['model_s']:.3f} s",
                      flush=True)
            print("\n| layout | h / s (KiB) | model (s) | predicted, calibrated (s) | predicted, nominal (s) | "
                  "measured median (s) | error (cal) | bytes H0..H3 / S0..S3 (MiB) |")
            print("|---|---|---|---|---|---|---|---|")
            for name, model_s, pc, pn, med, allv, mb, ok in rows:
                hb = "/".join(f"{x / 2**20:.0f}" for x in mb)
                d = lays[name]
                print(f"| {name} | {d['h'] // 1024} / {d['s'] // 1024} | {model_s:.3f} | {pc:.3f} | {pn:.3f} | "
                      f"{med:.3f} | {100 * (pc - med) / med:+.1f} % | {hb} |")

            capped = [r for r in rows if r[0] in ("DEF", "PA", "PSA")]
            print(f"predicted order (model, calibrated):    {order({r[0]: r[1] for r in capped})}")
            print(f"predicted order (simulate, calibrated): {order({r[0]: r[2] for r in capped})}")
            print(f"measured order:                         {order({r[0]: r[4] for r in capped}, tie=0.0)}")
        if not a.skip_collective:
            trace = ior(procs=8, xfer=512 << 10, block=block, pattern="random", op="write", collective=True)
            crow = {}
            for spec in a.coll_layouts.split(","):
                lay = parse_layout(spec, cal)
                print(f"\ncollective IOR random 512 KiB -c, 8 ranks x {a.block} write, {spec} over 8 servers, cb 4 MiB")
                for order_name in ("romcio", "hacio"):
                    def one():
                        r = replay_collective(trace, store, procs=8, layout=lay, order=order_name, cb_nodes=8)
                        return r.wall_s, r
                    med, last, allv = _median_runs(one, a.reps)
                    naggr = last.calls[0]["aggregators"]
                    sim_c = simulate(trace, cal, lay, collective=True, order=order_name, aggregators=naggr)
                    p_nom = simulate(trace, nominal, lay, collective=True, order=order_name, aggregators=naggr).makespan_s
                    ios = None if last.device_ios is None else int(last.device_ios.sum())
                    crow[(spec, order_name)] = (sim_c.makespan_s, p_nom, med, allv, naggr, last.calls[0]["cycles"],
                                                int(sim_c.server_subrequests.sum()), ios)
                    print(f"  {order_name}: measured {med:.3f} s (runs {', '.join(f'{v:.3f}' for v in allv)}) "
                          f"simulate(cal) {sim_c.makespan_s:.3f} s simulate(nominal) {p_nom:.3f} s aggregators {naggr} "
                          f"device requests {ios} (simulated {int(sim_c.server_subrequests.sum())})", flush=True)
            print("\n| layout | order | aggregators | cycles | predicted, calibrated (s) | predicted, nominal (s) | "
                  "measured median (s) | error (cal) | device requests: simulated / measured |")
            print("|---|---|---|---|---|---|---|---|---|")
            for (spec, k), (pc, pn, med, allv, naggr, ncyc, nsub, ios) in crow.items():
                print(f"| {spec} | {k} | {naggr} | {ncyc} | {pc:.3f} | {pn:.3f} | {med:.3f} | "
                      f"{100 * (pc - med) / med:+.1f} % | {nsub} / {ios} |")
            for spec in a.coll_layouts.split(","):
                sub = {k: v for (sp, k), v in crow.items() if sp == spec}
                print(f"{spec}: predicted order (simulate, calibrated): {order({k: v[0] for k, v in sub.items()})}; "
                      f"measured: {order({k: v[2] for k, v in sub.items()}, tie=0.0)}")
    finally:
        if made and (tbdir / core.STATE_FILE).exists():
            print(f"testbed down {tbdir}", flush=True)
            core.down(tbdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
