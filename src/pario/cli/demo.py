"""``pario demo``: the main job on built-in defaults (run by ``./run``), in well under 3 minutes.

1. one workload per scheme (IOR on the papers' systems), the advice of its planner and the
   simulated improvement over the paper's baselines (pario.simulate);
2. the CEDA plan applied to an embedded store in a temporary directory (pario.store): the
   file written through its original layout, the replicas built by the replicator, every
   read of the trace served back through the redirector and compared byte for byte;
3. the headline plots of a few reproduced experiments (pario.reproduce, quick size);
4. one summary table and the path of the plots.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.table import Table

from .common import console


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job: a short tour on built-in defaults")
    p.add_argument("--out", metavar="DIR", help="where to write the demo's files (default: a temporary directory)")
    p.add_argument("--system", default="ceda-hdd8", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


K, M = 1 << 10, 1 << 20


def _scenarios():
    """(scheme, title, system, variant, workload factory, sim kwargs, baselines fn)."""
    from ..workload import ior

    return [
        ("ceda", "IOR random, 16 procs × 64 KiB, 8 HDD servers (CEDA §6.2)", "ceda-hdd8", {},
         lambda: ior(16, 64 * K, 2 * M, pattern="random", op="read", seed=1)),
        ("padp", "IOR random, 8 procs × 512 KiB, 6 HDD + 2 SSD (PADP §4.2)", "padp-6h2s", {"t_div": 8},
         lambda: ior(8, 512 * K, 16 * M, pattern="random", op="read", seed=1)),
        ("psa", "IOR random, 16 procs × 512 KiB, 4 HDD + 4 SSD, SSDs hold 1/4 (PSA §4.2)", "psa-4h4s",
         {"t_div": 8, "ssd_capacity": 16 * 16 * M // 4 // 4},
         lambda: ior(16, 512 * K, 16 * M, pattern="random", op="read", seed=1)),
        ("ci-layout", "IOR sequential, 32 procs × 16 KiB shared file, 16 HDD (CI-LAYOUT §6)", "ci-layout-eth", {},
         lambda: ior(32, 16 * K, 1 * M, pattern="sequential", op="write", seed=1)),
        ("hacio", "IOR interleaved collective, 32 procs × 256 KiB, 1 MiB buffer, 6H+2S (HACIO §4.2)", "hacio-6h2s", {},
         lambda: ior(32, 256 * K, 256 * K, segments=16, pattern="strided", op="write", seed=1, collective=True)),
    ]


def _evaluate(scheme, system, trace):
    """(advice text, {series: simulated MiB/s}, plan or None)."""
    from ..layout import describe
    from ..simulate import simulate

    if scheme == "hacio":
        from ..plan.order_select import choose_order

        ch = choose_order(trace, system, "fixed:64K", cb_buffer=1 * M)  # simulates the three orders once
        nbytes = float(trace.length.sum())
        bw = {o.upper(): nbytes / M / ch.times[o] for o in ("hacio", "romcio", "cacio")}
        pick = ch.order.upper()
        return (f"order HACIO (seed 004 Alg. 1: HServer requests first); pario's pick by simulated "
                f"two-phase I/O: {pick}"), bw, None
    if scheme == "ceda":
        from ..reproduce.families import _ceda_plans

        plans = _ceda_plans(trace, system)
        bw = {k: simulate(trace, system, "fixed:64K", plan=plans[k]).bandwidth_MBps for k in ("CEDA", "ORIG", "CIDA")}
        plan = plans["CEDA"]
        npat = len(plan.details["selections"][plan.details["selection"]]["patterns"])
        size = plan.details["selections"][plan.details["selection"]]["space"]
        return f"replicate {npat} pattern(s), {size / M:.1f} MiB of replicas (benefit > 0)", bw, plan
    from ..plan.schemes import make_planner

    plan = make_planner(scheme).plan(trace, system)
    f0 = trace.files[0]
    lay = plan.layout_for(f0)
    bw = {scheme.upper(): simulate(trace, system, lay).bandwidth_MBps}
    if scheme == "padp":
        from ..plan.padp import baseline_layouts

        for k, l in baseline_layouts(system).items():
            bw[k] = simulate(trace, system, l).bandwidth_MBps
    elif scheme == "psa":
        import math

        from ..plan.psa import heterogeneous_bytes, psa_layout

        info = plan.details["files"][f0]
        cap = plan.details["capacity"] or math.inf
        m, n = len(system.of_kind("hdd")), len(system.of_kind("ssd"))
        for k in ("DEF", "PA"):
            h, s = info["baselines"][k]["h"], info["baselines"][k]["s"]
            B = float(heterogeneous_bytes(cap, np.array([float(s)]), np.array([float(m * h + n * s)]))[0])
            bw[k] = simulate(trace, system, psa_layout(system, h, s, B, info["S"])).bandwidth_MBps
    else:
        for k, spec in (("DEF 64K", "fixed:64K"), ("stripe 4K", "fixed:4K"),
                        ("stripe 16K", "fixed:16K")):
            bw[k] = simulate(trace, system, spec).bandwidth_MBps
    return describe(lay, system), bw, plan


def _store_roundtrip(root: Path, trace, plan, system_name: str) -> dict:
    """Write the file, build CEDA's replicas, read every request back redirected, verify bytes."""
    from ..store import Store, init_store
    from ..store.replicator import replicate

    init_store(root, system_name)
    f0 = trace.files[0]
    size = int((trace.offset + trace.length).max())
    data = np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes()
    out = {"bytes": size}
    with Store(root) as st:
        st.create(f0, "fixed:64k")
        with st.open(f0) as fh:
            fh.write(0, data)
        t0 = time.perf_counter()
        rep = replicate(st, plan)
        out["replicate_s"] = time.perf_counter() - t0
        out["replicas"] = len(getattr(rep, "specs", []) or [])
        redirected = checked = bad = 0
        with st.open(f0) as fh:
            for off, ln in zip(trace.offset.tolist(), trace.length.tolist()):
                got = fh.read(off, ln)
                checked += ln
                bad += int(got != data[off:off + ln])
                redirected += sum(e - s for s, e, r in fh.served_by(off, off + ln) if r is not None)
        out.update(checked=checked, mismatches=bad, redirected=redirected)
    return out


def run(args) -> int:
    from ..reproduce import EXPERIMENTS, run_experiment
    from ..reproduce.families import make_system

    t_start = time.perf_counter()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="pario-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    summary = []
    ceda_case = None
    for k, (scheme, title, sysname, variant, make) in enumerate(_scenarios(), 1):
        console.rule(f"[bold]{k}. {scheme}: {title}")
        system = make_system(sysname, variant)
        trace = make()
        if variant:
            console.print(f"system {sysname} with {variant} (see docs/RESULTS.md: profile variants)")
        advice, bw, plan = _evaluate(scheme, system, trace)
        console.print(f"advice: {advice}")
        names = list(bw)
        me = bw[names[0]]
        tab = Table(title_justify="left")
        tab.add_column("layout / order")
        tab.add_column("simulated MiB/s", justify="right")
        tab.add_column(f"{names[0]} improvement", justify="right")
        for nm in names:
            tab.add_row(nm, f"{bw[nm]:.1f}", "" if nm == names[0] else f"{(me / bw[nm] - 1) * 100:+.1f} %")
        console.print(tab)
        best_base = max(bw[n] for n in names[1:])
        summary.append((scheme, sysname, advice, me, best_base, (me / best_base - 1) * 100))
        if scheme == "ceda":
            ceda_case = (trace, plan, sysname)
    console.rule("[bold]6. apply the CEDA plan to an embedded store and read back redirected")
    trace, plan, sysname = ceda_case
    rt = _store_roundtrip(out / "store", trace, plan, sysname)
    ok = rt["mismatches"] == 0
    console.print(f"store {out / 'store'}: {rt['bytes'] / M:.1f} MiB written with fixed 64 KiB striping, replicas built in "
                  f"{rt['replicate_s']:.2f} s; {len(trace)} reads, {rt['checked'] / M:.1f} MiB read back, "
                  f"{rt['redirected'] / M:.1f} MiB served from replicas; "
                  + ("[green]all bytes verified[/green]" if ok else f"[red]{rt['mismatches']} mismatching reads[/red]"))
    console.rule("[bold]7. reproduced paper headlines (quick size)")
    plots = out / "plots"
    heads = []
    for eid in ("hacio-tables1-3", "padp-fig4", "ceda-fig9", "ci-table5"):
        r = run_experiment(EXPERIMENTS[eid], quick=True, out=plots)
        for c in r.checks[:2]:
            heads.append((eid, c.check.label(), c.check.paper, c.pario, c.passed))
    tab = Table(title="paper vs pario", title_justify="left")
    for col in ("experiment", "headline", "paper", "pario", "holds"):
        tab.add_column(col)
    for h in heads:
        tab.add_row(h[0], h[1], h[2], h[3], "yes" if h[4] else "no")
    console.print(tab)
    console.rule("[bold]summary")
    tab = Table(title_justify="left")
    for col in ("scheme", "system", "advice", "MiB/s", "best baseline", "improvement"):
        tab.add_column(col, justify="right" if col in ("MiB/s", "best baseline", "improvement") else "left")
    for s in summary:
        tab.add_row(s[0], s[1], s[2], f"{s[3]:.1f}", f"{s[4]:.1f}", f"{s[5]:+.1f} %")
    tab.add_row("store", sysname, "CEDA plan applied, reads redirected", "", "",
                "verified" if ok else "MISMATCH")
    console.print(tab)
    console.print(f"plots and tables: {plots} ({len(list(plots.glob('*.png')))} PNG); files in {out}; "
                  f"{time.perf_counter() - t_start:.0f} s")
    return 0 if ok else 1
