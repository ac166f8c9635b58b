"""DEF vs PADP vs PSA vs CEDA on a real Ceph cluster: predicted vs measured (issue 17).

Needs root and Ceph (``scripts/setup.sh ceph``).

    .venv/bin/python bench/bench_ceph.py [--cluster DIR] [--dir /tmp/pario-bc] [--hdd 2 --ssd 2]
                                         [--procs 4] [--block 8m] [--cap 8m] [--reps 3]
                                         [--profile PROFILE.toml] [--only layouts,ceda]

1. ``pario cluster up`` (N HDD-like + M SSD-like OSDs, one pool per server) unless ``--cluster``
   names a running one, and its calibrated profile (``pario calibrate --cluster``: the rados
   store's requests through librados), unless ``--profile`` names one.
2. A ``rados`` store on the cluster (``pario store init --backend rados``), profile = the
   calibrated one.
3. **Layouts** (PADP seed 003 §4, PSA seed 001 §4, reduced): IOR random 512 KiB, ``--procs``
   ranks × ``--block`` each, a write phase and a read phase (two traces).  DEF = 64 KiB
   stripes over every server; PADP = ``pario advise --schemes padp`` on the trace; PSA =
   ``--schemes psa`` with every SServer's capacity set to ``--cap`` (so PSA must place the
   bytes beyond it on the HServers, seed 001 §3.3).
4. **CEDA** (seed 000 §5, reduced): IOR random 16 KiB reads of a file striped 64 KiB over
   the HServers only (the papers' original: data on the HServers, the SServers free for
   replicas); DEF = that file, CEDA = ``--schemes ceda`` (its RMT replicas copied into the
   store by the replicator, reads redirected by the store's RMT).
5. Every (workload, scheme): ``pario simulate`` with the calibrated profile (and the nominal
   one, for reference) against ``pario bench run``'s replay on the rados store (N rank
   streams, queue depth 1, files prefilled and replicas copied before the timed part),
   ``--reps`` times; medians, [min–max], error, and whether the measured ranking is the
   predicted one.  Markdown tables on stdout (docs/RESULTS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def ranking(vals: dict[str, float], tie: float = 0.02) -> str:
    """Names from fastest to slowest; '≈' between values within ``tie`` (relative)."""
    items = sorted(vals.items(), key=lambda kv: kv[1])
    out = items[0][0]
    for (_, a), (n, b) in zip(items, items[1:]):
        out += (" ≈ " if b <= a * (1 + tie) else " < ") + n
    return out


def verdict(rows: dict[str, dict], tie: float = 0.02) -> str:
    """'holds': every pair the prediction orders is ordered the same way by the measurement;
    'partly': none inverted, but some predicted difference measured as a tie (within ``tie``);
    '**differs**': some pair inverted."""
    names = list(rows)
    tied = inverted = False
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pa, pb = rows[a]["pred"], rows[b]["pred"]
            ma, mb = rows[a]["meas"], rows[b]["meas"]
            if abs(pa - pb) <= tie * min(pa, pb):
                continue
            if abs(ma - mb) <= tie * min(ma, mb):
                tied = True
            elif (pa < pb) != (ma < mb):
                inverted = True
    return "**differs**" if inverted else "partly (a predicted difference measured as a tie)" if tied else "holds"


def with_ssd_capacity(system, cap):
    servers = tuple(dataclasses.replace(s, capacity=float(cap)) if s.kind == "ssd" else s for s in system.servers)
    return dataclasses.replace(system, servers=servers)


def plans_for(trace, system, cap):
    """DEF, PADP and PSA layouts of the trace's file (the same planners as 'pario advise')."""
    from pario.layout import parse_layout
    from pario.plan.padp import PADPPlanner
    from pario.plan.psa import PSAPlanner

    f = trace.files[0]
    padp = PADPPlanner().plan(trace, system)
    psa = PSAPlanner(capacity=float(cap)).plan(trace, with_ssd_capacity(system, cap))
    return {"DEF": parse_layout("fixed:64K", system), "PADP": padp.layout_for(f), "PSA": psa.layout_for(f)}


def measure(trace, store, system, nominal, reps, procs, *, layout=None, plan=None, say=print):
    from pario.simulate import simulate
    from pario.testbed.bench import replay

    walls = []
    rb = 0
    for r in range(reps):
        res = replay(trace, store, procs=procs, layout=layout, plan=plan, prefill=True, direct=False)
        walls.append(res.wall_s)
        rb = res.replica_bytes
        say(f"    rep {r + 1}: {res.wall_s:.3f} s ({res.bandwidth_MiBps:.1f} MiB/s)")
    pred = simulate(trace, system, layout, plan=plan).makespan_s
    nom = simulate(trace, nominal, layout, plan=plan).makespan_s if nominal is not None else float("nan")
    return {"pred": pred, "nominal": nom, "meas": statistics.median(walls), "min": min(walls), "max": max(walls),
            "replica_bytes": rb}


def table(title: str, rows: dict[str, dict], describe) -> str:
    out = [f"**{title}**", "",
           "| scheme | layout | predicted (s), calibrated | nominal | measured (s), median [min–max] | error |",
           "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        err = (r["pred"] - r["meas"]) / r["meas"]
        out.append(f"| {name} | {describe(name)} | {_fmt(r['pred'])} | {_fmt(r['nominal'])} | {_fmt(r['meas'])} "
                   f"[{_fmt(r['min'])}–{_fmt(r['max'])}] | {100 * err:+.1f} % |")
    pred = ranking({k: v["pred"] for k, v in rows.items()})
    meas = ranking({k: v["meas"] for k, v in rows.items()})
    out += ["", f"predicted: {pred}; measured: {meas} — ranking {verdict(rows)}", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default=None, help="a running 'pario cluster' directory (else one is made)")
    ap.add_argument("--dir", default="/tmp/pario-bc", help="where to make the cluster (default /tmp/pario-bc)")
    ap.add_argument("--hdd", type=int, default=2)
    ap.add_argument("--ssd", type=int, default=2)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--block", default="8m", help="bytes per rank of the layout workloads (default 8m)")
    ap.add_argument("--cap", default="8m", help="PSA: capacity of each SServer (default 8m)")
    ap.add_argument("--ceda-block", default="4m", help="CEDA workload: bytes per rank (default 4m)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", default=None, help="profile for the predictions (default: the cluster's calibrated)")
    ap.add_argument("--only", default="layouts,ceda")
    args = ap.parse_args(argv)

    from pario import ParioError
    from pario.cluster import core
    from pario.layout import describe, parse_layout
    from pario.plan.ceda import CEDAPlanner
    from pario.store.root import init_store
    from pario.system import load_system
    from pario.units import parse_size
    from pario.workload.ior import ior

    only = set(args.only.split(","))
    block, cap, cblock = parse_size(args.block), parse_size(args.cap), parse_size(args.ceda_block)

    def say(m):
        print(m, file=sys.stderr, flush=True)

    made = None
    t_start = time.time()
    try:
        cdir = args.cluster
        if cdir is None:
            say(f"cluster up {args.dir} ({args.hdd} hdd + {args.ssd} ssd)")
            made = core.up(args.dir, hdd=args.hdd, ssd=args.ssd)
            cdir = made.dir
        prof = args.profile or str(Path(cdir) / core.CALIBRATED_PROFILE)
        if not Path(prof).is_file():
            say("calibrating the cluster's servers (pario calibrate --cluster)")
            core.calibrate_profile(cdir)
        system = load_system(prof)
        nominal = load_system(str(Path(cdir) / core.NOMINAL_PROFILE))
        work = Path(tempfile.mkdtemp(prefix="pario-bc-store-"))
        store = init_store(work / "store", prof, backend="rados", cluster=cdir)
        load0 = os.getloadavg()[0]
        print(f"Cluster {cdir}: {', '.join(f'{s.name} ({s.kind})' for s in system.servers)}; profile "
              f"{system.name}; {args.procs} rank streams, {args.reps} repetitions; rados store, 4 MiB objects.\n")
        if "layouts" in only:
            for op in ("write", "read"):
                tr = ior(args.procs, 512 << 10, block, 1, pattern="random", op=op, seed=1)
                lays = plans_for(ior(args.procs, 512 << 10, block, 1, pattern="random", op="write", seed=1),
                                 system, cap)
                rows = {}
                for name, lay in lays.items():
                    say(f"  {op} {name}: {describe(lay, system)}")
                    rows[name] = measure(tr, store, system, nominal, args.reps, args.procs, layout=lay, say=say)
                print(table(f"IOR random 512 KiB {op}, {args.procs} × {args.block} (PSA: SServer capacity "
                            f"{args.cap})", rows, lambda n: describe(lays[n], system)))
        if "ceda" in only:
            hdds = [s.name for s in system.servers if s.kind == "hdd"]
            orig = f"fixed:64K@{','.join(hdds)}"
            tr = ior(args.procs, 16 << 10, cblock, 1, pattern="random", op="read", seed=2)
            plan = CEDAPlanner(original=orig).plan(tr, system)
            lay = parse_layout(orig, system)
            if not plan.replicas:
                print(f"CEDA: the planner replicates nothing for this workload ({plan.details.get('decision', '')})")
            rows = {}
            say(f"  CEDA DEF: {orig}")
            rows["DEF"] = measure(tr, store, system, nominal, args.reps, args.procs, layout=lay, say=say)
            say("  CEDA: plan with replicas")
            rows["CEDA"] = measure(tr, store, system, nominal, args.reps, args.procs, layout=lay, plan=plan, say=say)
            print(table(f"IOR random 16 KiB read, {args.procs} × {args.ceda_block}, original {orig} (CEDA: "
                        f"{rows['CEDA']['replica_bytes'] / 2**20:.1f} MiB replicated)", rows,
                        lambda n: orig if n == "DEF" else f"{orig} + RMT replicas"))
        print(f"load average {load0:.1f} → {os.getloadavg()[0]:.1f}; {time.time() - t_start:.0f} s")
        shutil.rmtree(work, ignore_errors=True)
    except ParioError as exc:
        print(f"pario: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if made is not None:
            core.down(made.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
