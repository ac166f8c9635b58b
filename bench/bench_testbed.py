"""Testbed must-show experiments (issue 7): model vs measurement on a 4 + 4 emulated hybrid testbed.

Needs root, loop devices and a blkio/io cgroup; mpi4py + mpiexec for the collective part.

    .venv/bin/python bench/bench_testbed.py [--dir /tmp/pario-bt] [--reuse TB] [--profile CAL.toml]
                                            [--cap 16m] [--block 32m] [--reps 3] [--skip-collective]
                                            [--orders romcio,cacio,hacio] [--coll-layouts fixed:64k,fixed:1m]
                                            [--unthrottled-reps 1] [--skip-independent] [--skip-burst]
                                            [--skip-carry] [--carry-xfer 1m] [--carry-mib 48] [--carry-threads 4]

1. ``pario testbed up DIR --hdd 4 --ssd 4`` (HDD-like 250 IOPS / 120 MiB/s, SSD-like
   2000 IOPS / 400 MiB/s), unless ``--reuse`` names a running testbed.
2. ``pario calibrate`` on the 8 servers (unless ``--profile`` gives a calibrated profile).
3. IOR random 512 KiB from 8 ranks (``--block`` per rank, write).  PSA (seed 001) with the
   SServer capacity set to ``--cap`` per SSD (small relative to the file), and its
   baselines DEF (64 KiB everywhere) and PA (PADP's stripes) priced with the same capacity
   rule: the bytes beyond what fits on the SSDs go to the HServers only.  Each layout is
   predicted by ``pario simulate`` (calibrated and nominal profile) and replayed with
   ``pario bench run`` (independent, 8 rank streams, O_DIRECT) ``--reps`` times.
4. IOR random 512 KiB with ``-c`` (collective), fixed 64 KiB and 1 MiB striping over the 8
   servers: ``pario bench run --collective --order romcio|cacio|hacio`` (8 MPI ranks, 8
   aggregators, 4 MiB collective buffer, hint ``pario_direct``) ``--reps`` times,
   interleaved, vs ``pario simulate --collective --order …`` (seed 004: ROMCIO, CACIO,
   HACIO Algorithm 1).  Per run: wall time of the call, requests per server inside the
   call (throttle and device counters), the same program outside the cgroup
   (``--unthrottled-reps``: the runtime's own time), and the I/O phases priced by
   :mod:`pario.testbed.throttle` with α + β·s and with the throttle's max(n·α, B·β).
5. The throttle's credit after idle (1 MiB writes after 0.5 s idle on H0 and S0).
6. Credit carried into the next window: a 1 MiB read, a gap of 0–0.3 s, then 48 MiB read
   on H0, without and with ``restart_throttle`` before the window (``--skip-carry``).
7. Prints the tables (markdown) and releases the testbed it made.
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


def _spread(vals) -> str:
    return f"{min(vals):.3f}–{max(vals):.3f}"


def collective_section(a, cal, nominal, store, block) -> dict:
    """Step 4: collective IOR replay, ROMCIO vs CACIO vs HACIO, predicted vs measured.

    Repetitions are interleaved (rep → layout → order) so that drifting load from other
    sessions hits every order alike; every run's 1-minute load average is recorded."""
    import os

    from pario.layout import parse_layout
    from pario.simulate import simulate
    from pario.testbed.bench import replay_collective
    from pario.testbed.throttle import collective_io_estimate
    from pario.workload.ior import ior

    orders = [o for o in a.orders.split(",") if o]
    specs = [s for s in a.coll_layouts.split(",") if s]
    trace = ior(procs=8, xfer=512 << 10, block=block, pattern="random", op="write", collective=True)
    lays = {spec: parse_layout(spec, cal) for spec in specs}
    runs: dict = {(spec, o): [] for spec in specs for o in orders}
    free: dict = {(spec, o): [] for spec in specs for o in orders}
    loads = []
    print(f"\ncollective IOR random 512 KiB -c, 8 ranks x {a.block} write, layouts {', '.join(specs)} over "
          f"{cal.n} servers, {a.aggregators} aggregators, cb 4 MiB; {a.reps} interleaved repetitions", flush=True)
    for rep in range(a.reps):
        for spec in specs:
            for o in orders:
                r = replay_collective(trace, store, procs=8, layout=lays[spec], order=o, cb_nodes=a.aggregators)
                loads.append(os.getloadavg()[0])
                runs[(spec, o)].append(r)
                print(f"  rep {rep + 1} {spec} {o}: {r.wall_s:.3f} s, throttle requests "
                      f"{None if r.device_ios is None else int(r.device_ios.sum())}, device requests "
                      f"{None if r.block_ios is None else int(r.block_ios.sum())}, load {loads[-1]:.1f}", flush=True)
                if rep < a.unthrottled_reps:   # same program outside the cgroup: the runtime's own time
                    u = replay_collective(trace, store, procs=8, layout=lays[spec], order=o, cb_nodes=a.aggregators,
                                          throttled=False)
                    free[(spec, o)].append(u.wall_s)
    names = cal.names
    rows = {}
    for (spec, o), rs in runs.items():
        walls = [r.wall_s for r in rs]
        naggr = rs[0].calls[0]["aggregators"]
        ncyc = rs[0].calls[0]["cycles"]
        sim_c = simulate(trace, cal, lays[spec], collective=True, order=o, aggregators=naggr)
        sim_n = simulate(trace, nominal, lays[spec], collective=True, order=o, aggregators=naggr)
        est_max = collective_io_estimate(trace, cal, lays[spec], order=o, aggregators=naggr, shape="max")
        est_add = collective_io_estimate(trace, cal, lays[spec], order=o, aggregators=naggr, shape="additive")
        # requests per server inside the timed call: [throttle (cgroup io_serviced), device (/sys/block)]
        have = all(r.call_ios is not None for r in rs)
        thr = np.median(np.array([r.call_ios[0] for r in rs]), axis=0) if have else None
        blk = np.median(np.array([r.call_ios[1] for r in rs]), axis=0) if have else None
        whole = int(np.median([r.device_ios.sum() for r in rs])) if rs[0].device_ios is not None else None
        rows[(spec, o)] = dict(walls=walls, med=statistics.median(walls), naggr=naggr, ncyc=ncyc,
                               sim=sim_c.makespan_s, sim_nom=sim_n.makespan_s, sim_req=sim_c.server_subrequests,
                               est_max=est_max.total_s, est_add=est_add.total_s, thr=thr, blk=blk, whole=whole,
                               free_runs=free[(spec, o)],
                               free=statistics.median(free[(spec, o)]) if free[(spec, o)] else float("nan"),
                               direct=all(c["direct_fds"] == c["data_fds"] > 0 for r in rs for c in r.calls))
    print(f"\nload average (1 min) during the collective runs: median {statistics.median(loads):.1f}, "
          f"range {min(loads):.1f}–{max(loads):.1f}")
    print("\n| layout | order | cycles | simulate, calibrated (s) | simulate, nominal (s) | measured median (s) "
          "[range] | error | I/O only: α+βs / max(nα, Bβ) (s) | unthrottled median (s) [range] | requests per "
          "server in the call: simulated / throttle / device (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (spec, o), d in rows.items():
        req = "–" if d["thr"] is None else f"{int(np.median(d['sim_req']))} / {int(np.median(d['thr']))} / " \
                                              f"{int(np.median(d['blk']))}"
        print(f"| {spec} | {o} | {d['ncyc']} | {d['sim']:.3f} | {d['sim_nom']:.3f} | {d['med']:.3f} "
              f"[{_spread(d['walls'])}] | {100 * (d['sim'] - d['med']) / d['med']:+.1f} % | "
              f"{d['est_add']:.3f} / {d['est_max']:.3f} | {d['free']:.3f} "
              f"[{_spread(d['free_runs']) if d['free_runs'] else '–'}] | {req} |")
    print("\nrequests per server inside the timed call (median over the runs), throttle (cgroup io_serviced) / "
          "device (/sys/block stat); last column: all servers over the whole MPI program (open and close included):")
    print("| layout | order | " + " | ".join(names) + " | whole program |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for (spec, o), d in rows.items():
        if d["thr"] is not None:
            print(f"| {spec} | {o} | " + " | ".join(f"{int(t)} / {int(b)}" for t, b in zip(d["thr"], d["blk"]))
                  + f" | {d['whole']} |")
    for spec in specs:
        sub = {o: rows[(spec, o)] for o in orders}
        print(f"{spec}: predicted order (simulate, calibrated): {order({o: d['sim'] for o, d in sub.items()}, tie=0.01)}; "
              f"I/O with max(nα, Bβ): {order({o: d['est_max'] for o, d in sub.items()}, tie=0.01)}; "
              f"measured (medians): {order({o: d['med'] for o, d in sub.items()}, tie=0.0)}")
    print(f"O_DIRECT on every data file in every run: {all(d['direct'] for d in rows.values())}")
    return rows


def burst_section(tbdir, servers=("H0", "S0"), sizes_mib=(4, 8, 12, 16, 24, 32, 48, 64), reps=3) -> dict:
    """Step 5: the throttle's credit after idle.  blk-throttle admits ``rate × slice`` per
    time slice (``throtl_slice`` = HZ/10 = 100 ms on a rotational queue, which loop devices
    are here), so a device idle for a slice passes the next ``BPS × 0.1 s`` bytes (and
    ``IOPS × 0.1 s`` requests) at once.  Time to write k MiB as 1 MiB O_DIRECT writes
    (queue depth 1) after 0.5 s idle, median of ``reps``, vs k / BPS."""
    import mmap
    import os

    from pario.testbed import core

    tb = core.load_state(tbdir)
    out = {}
    print("\n| server | MiB after 0.5 s idle | measured median (ms) [range] | k / BPS (ms) |")
    print("|---|---|---|---|")
    for name in servers:
        srv = tb.server(name)
        path = Path(tbdir) / name / "pario-burst-probe.dat"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        buf = mmap.mmap(-1, 1 << 20)
        buf.write(os.urandom(1 << 20))
        mv = memoryview(buf)
        try:
            for off in range(0, max(sizes_mib) << 20, 1 << 20):   # allocate first (untimed, unthrottled)
                os.pwrite(fd, mv, off)
            os.fsync(fd)
            with core.enter(tb):
                for k in sizes_mib:
                    ts = []
                    for _ in range(reps):
                        time.sleep(0.5)
                        t0 = time.perf_counter()
                        for j in range(k):
                            os.pwrite(fd, mv, j << 20)
                        ts.append(1e3 * (time.perf_counter() - t0))
                    out[(name, k)] = ts
                    print(f"| {name} | {k} | {statistics.median(ts):.1f} [{min(ts):.1f}–{max(ts):.1f}] | "
                          f"{1e3 * (k << 20) / srv.limits()['write_bps']:.1f} |", flush=True)
        finally:
            mv.release()
            buf.close()
            os.close(fd)
            path.unlink(missing_ok=True)
    return out


def carry_section(tbdir, server="H0", mib=48, gaps=(0.0, 0.05, 0.1, 0.15, 0.2, 0.3), reps=3, xfer=1 << 20,
                  threads=4) -> dict:
    """Step 6: throttle credit carried into the next window.  A 1 MiB read, a gap of ``g``
    seconds, then ``mib`` MiB read as ``xfer``-byte O_DIRECT reads (1 MiB: the byte bucket
    decides; 64 KiB on an HDD: the request bucket) from ``threads`` threads — all in the
    testbed's cgroup, once as two back-to-back runs did before the fix (no restart: the
    window inherits the idle part of the slice the 1 MiB read opened) and once with
    :func:`pario.testbed.core.restart_throttle` before the window (what ``enter`` and the
    collective replay do).  The bound a run may not beat is k / BPS − one slice."""
    import mmap
    import os
    import threading

    from pario.testbed import core

    tb = core.load_state(tbdir)
    srv = tb.server(server)
    bps = srv.limits()["read_bps"]
    path = Path(tbdir) / server / "pario-carry-probe.dat"
    out = {}

    def read(offsets, threads):
        todo = list(offsets)
        lock = threading.Lock()
        bar = threading.Barrier(threads + 1)

        def work():
            b = mmap.mmap(-1, xfer)
            bar.wait()
            while True:
                with lock:
                    if not todo:
                        break
                    off = todo.pop(0)
                os.preadv(rfd, [b], off)
            b.close()

        ths = [threading.Thread(target=work) for _ in range(threads)]
        for th in ths:
            th.start()
        bar.wait()
        t0 = time.perf_counter()
        for th in ths:
            th.join()
        return time.perf_counter() - t0

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, 1 << 20)
    buf.write(os.urandom(1 << 20))
    rfd = -1
    try:
        for off in range(0, (mib + 1) << 20, 1 << 20):   # write first (untimed, outside the cgroup)
            os.pwrite(fd, buf, off)
        os.fsync(fd)
        rfd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        lim = srv.limits()
        n_req = (mib << 20) // xfer
        bound = 1e3 * (max((mib << 20) / bps, n_req / lim["read_iops"]) - core.THROTTLE_SLICE_S)
        print(f"\n{server}: {mib} MiB read ({threads} threads, {xfer >> 10} KiB O_DIRECT) g seconds after a 1 MiB "
              f"read, median of {reps}; without credit max(k / BPS, n / IOPS) = {bound + 1e3 * core.THROTTLE_SLICE_S:.1f} "
              f"ms; bound (one slice less) {bound:.1f} ms")
        print("| gap (s) | no restart (ms) [range] | restart_throttle (ms) [range] |")
        print("|---|---|---|")
        with core.enter(tb, fresh=False):
            for g in gaps:
                row = {}
                for mode in ("none", "restart"):
                    ts = []
                    for _ in range(reps):
                        time.sleep(0.5)
                        read([mib << 20], 1)
                        time.sleep(g)
                        if mode == "restart":
                            core.restart_throttle(tb)
                        ts.append(1e3 * read([j * xfer for j in range(n_req)], threads))
                    row[mode] = ts
                out[g] = row
                print(f"| {g:.2f} | " + " | ".join(
                    f"{statistics.median(row[m]):.1f} [{min(row[m]):.1f}–{max(row[m]):.1f}]"
                    + (" **< bound**" if min(row[m]) < bound else "") for m in ("none", "restart")) + " |",
                    flush=True)
    finally:
        buf.close()
        os.close(fd)
        if rfd >= 0:
            os.close(rfd)
        path.unlink(missing_ok=True)
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
    ap.add_argument("--orders", default="romcio,cacio,hacio", help="collective orders (default all three)")
    ap.add_argument("--aggregators", type=int, default=8, help="cb_nodes of the collective runs (default 8)")
    ap.add_argument("--skip-burst", action="store_true", help="skip the throttle-credit probe (step 5)")
    ap.add_argument("--carry-xfer", default="1m",
                    help="request size of step 6's window (default 1m; 64k on an HDD: the request bucket decides)")
    ap.add_argument("--carry-mib", type=int, default=48, help="MiB read in step 6's window (default 48)")
    ap.add_argument("--carry-threads", type=int, default=4, help="threads reading step 6's window (default 4)")
    ap.add_argument("--skip-carry", action="store_true",
                    help="skip the probe of credit carried into the next window (step 6)")
    ap.add_argument("--unthrottled-reps", type=int, default=1,
                    help="collective runs per layout and order outside the cgroup (default 1; 0 = none)")
    a = ap.parse_args()

    from pario.calibrate.core import calibrate, parse_target
    from pario.layout import describe
    from pario.simulate import simulate
    from pario.store import init_store
    from pario.system import load_system
    from pario.testbed import core
    from pario.testbed.bench import replay
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
            collective_section(a, cal, nominal, store, block)
        if not a.skip_burst:
            burst_section(tbdir)
        if not a.skip_carry:
            carry_section(tbdir, mib=a.carry_mib, xfer=parse_size(a.carry_xfer, "--carry-xfer"),
                          threads=a.carry_threads)
    finally:
        if made and (tbdir / core.STATE_FILE).exists():
            print(f"testbed down {tbdir}", flush=True)
            core.down(tbdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
