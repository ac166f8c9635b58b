"""``pario demo``: the main job on built-in defaults (run by ``./run``), in well under 3 minutes.

1. one workload per paper (IOR on the paper's system): pario's pick for it, the paper's own
   scheme and the paper's baselines, each simulated (pario.simulate);
2. the CEDA plan applied to an embedded store in a temporary directory (pario.store): the
   file written through its original layout, the replicas built by the replicator, every
   read of the trace served back through the redirector and compared byte for byte;
3. every headline direction of the five papers checked (``pario reproduce all --quick``,
   or at full size with ``--full``), with plots, CSV and tables for each experiment;
4. the summary: what pario recommends per workload with its gain over the best baseline,
   the paper's scheme beside it, and the reproduction score (how many headlines hold, how
   many are marked "expected to differ": docs/RESULTS.md gives each one's reason).

*pario's pick* is what ``pario advise --schemes <the paper's scheme>`` writes: the
planner's layout or replicas; for collective I/O, the request order of ``--order auto``
(the fastest of ROMCIO / CACIO / HACIO in a simulated two-phase run), which need not be
the paper's.  *Gain* = simulated bandwidth / that of the best of the paper's baselines − 1
(the papers' "improvement"); the default configuration (ORIG / DEF / ROMCIO) is one of
the baselines.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.table import Table

from .common import console

RESULTS_DOC = "docs/RESULTS.md"
TIE = 0.01  # |gain| below this is printed as a tie (display only; every number is printed too)


def register(sub) -> None:
    import argparse

    p = sub.add_parser("demo", help="the main job: a short tour on built-in defaults",
                       description="Five workloads (one per paper): pario's pick beside the paper's scheme and "
                                   "baselines, simulated; a CEDA plan applied to an embedded store and read back; "
                                   "every headline direction of the five papers checked (pario reproduce all "
                                   "--quick); a summary with the reproduction score (docs/RESULTS.md).")
    p.add_argument("--out", metavar="DIR", help="where to write the demo's files (default: a temporary directory)")
    p.add_argument("--full", action="store_true",
                   help="check the headlines at the experiments' full size (as 'pario reproduce all', about "
                        "4 times longer) instead of --quick's reduced sizes")
    p.add_argument("--system", default="ceda-hdd8", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


K, M = 1 << 10, 1 << 20


def _scenarios():
    """(scheme, title, system, variant, workload factory).  PADP and PSA use the network variant
    of their reproduce experiments (docs/RESULTS.md: the papers give no t)."""
    from ..reproduce.experiments import FAST_NET
    from ..workload import ior

    return [
        ("ceda", "IOR random, 16 procs × 64 KiB, 8 HDD servers (CEDA §6.2)", "ceda-hdd8", {},
         lambda: ior(16, 64 * K, 2 * M, pattern="random", op="read", seed=1)),
        ("padp", "IOR random, 8 procs × 512 KiB, 6 HDD + 2 SSD (PADP §4.2)", "padp-6h2s", dict(FAST_NET),
         lambda: ior(8, 512 * K, 16 * M, pattern="random", op="read", seed=1)),
        ("psa", "IOR random, 16 procs × 512 KiB, 4 HDD + 4 SSD, SSDs hold 1/4 (PSA §4.2)", "psa-4h4s",
         {**FAST_NET, "ssd_capacity": 16 * 16 * M // 4 // 4},
         lambda: ior(16, 512 * K, 16 * M, pattern="random", op="read", seed=1)),
        ("ci-layout", "IOR sequential, 32 procs × 16 KiB shared file, 16 HDD (CI-LAYOUT §6)", "ci-layout-eth", {},
         lambda: ior(32, 16 * K, 1 * M, pattern="sequential", op="write", seed=1)),
        ("hacio", "IOR interleaved collective, 32 procs × 256 KiB, 1 MiB buffer, 6H+2S (HACIO §4.2)", "hacio-6h2s", {},
         lambda: ior(32, 256 * K, 256 * K, segments=16, pattern="strided", op="write", seed=1, collective=True)),
    ]


@dataclass
class Workload:
    """One workload evaluated: simulated MiB/s of every option, and which option is what.

    ``paper``: the paper's own scheme; ``pick``: pario's pick (``how``: by what rule);
    ``default``: the configuration without pario; ``baselines``: the paper's baselines
    (the default among them).  ``pick`` may be one of the baselines."""

    scheme: str
    title: str
    system: str
    bw: dict[str, float]
    paper: str
    pick: str
    how: str
    default: str
    baselines: tuple[str, ...]
    notes: dict[str, str] = field(default_factory=dict)  # option → what it is (layout, replicas, order)
    short: str = ""  # the pick in a few words (summary table)
    plan: object = None
    variant: dict = field(default_factory=dict)

    @property
    def best_baseline(self) -> str:
        return max(self.baselines, key=lambda b: self.bw[b])

    def gain(self, name: str) -> float:
        """Simulated bandwidth of ``name`` over the best baseline's, − 1."""
        return self.bw[name] / self.bw[self.best_baseline] - 1.0


def _verdict(g: float) -> str:
    return "tie" if abs(g) < TIE else ("faster" if g > 0 else "slower")


def _pct(g: float) -> str:
    return f"{g * 100:+.1f} %"


def evaluate(scheme, title, sysname, variant, trace) -> Workload:
    """Plan, simulate and label the options of one workload (see the module docstring)."""
    from ..layout import describe
    from ..reproduce.families import make_system
    from ..simulate import simulate

    system = make_system(sysname, variant)
    f0 = trace.files[0]
    if scheme == "hacio":
        from ..plan.order_select import choose_order

        ch = choose_order(trace, system, "fixed:64K", cb_buffer=1 * M)  # simulates the three orders once
        nbytes = float(trace.length.sum())
        bw = {o.upper(): nbytes / M / ch.times[o] for o in ("hacio", "romcio", "cacio")}
        notes = {"HACIO": "seed 004 Alg. 1: HServer pieces first", "ROMCIO": "offset order (ROMIO's)",
                 "CACIO": "grouped by server, a different server per aggregator"}
        return Workload(scheme, title, sysname, bw, paper="HACIO", pick=ch.order.upper(),
                        how="pario advise --order auto: the fastest order in a simulated two-phase run",
                        default="ROMCIO", baselines=("ROMCIO", "CACIO"), notes=notes, variant=variant,
                        short=f"{ch.order.upper()} order")
    if scheme == "ceda":
        from ..reproduce.families import _ceda_plans

        plans = _ceda_plans(trace, system)
        bw = {k: simulate(trace, system, "fixed:64K", plan=plans[k]).bandwidth_MBps for k in ("CEDA", "ORIG", "CIDA")}
        plan = plans["CEDA"]
        sel = plan.details["selections"][plan.details["selection"]]
        notes = {"CEDA": f"replicate {len(sel['patterns'])} pattern(s), {sel['space'] / M:.1f} MiB of replicas "
                         f"(benefit > 0)",
                 "ORIG": "fixed 64K, no replica", "CIDA": "every non-contiguous pattern replicated"}
        return Workload(scheme, title, sysname, bw, paper="CEDA", pick="CEDA",
                        how="pario advise --schemes ceda: CEDA's planner", default="ORIG",
                        baselines=("ORIG", "CIDA"), notes=notes, plan=plan, variant=variant,
                        short=f"CEDA, {sel['space'] / M:.1f} MiB of replicas")
    from ..plan.schemes import make_planner

    plan = make_planner(scheme).plan(trace, system)
    lay = plan.layout_for(f0)
    name = scheme.upper()
    lays = {name: lay}
    if scheme == "padp":
        from ..plan.padp import baseline_layouts

        lays.update(baseline_layouts(system))
        default = "DEF"
    elif scheme == "psa":
        import math

        from ..plan.psa import heterogeneous_bytes, psa_layout

        info = plan.details["files"][f0]
        cap = plan.details["capacity"] or math.inf
        m, n = len(system.of_kind("hdd")), len(system.of_kind("ssd"))
        for k in ("DEF", "PA"):
            h, s = info["baselines"][k]["h"], info["baselines"][k]["s"]
            B = float(heterogeneous_bytes(cap, np.array([float(s)]), np.array([float(m * h + n * s)]))[0])
            lays[k] = psa_layout(system, h, s, B, info["S"])
        default = "DEF"
    else:  # ci-layout: the paper's three layouts for the file's request size, and the default 64 KiB stripe
        from ..layout import parse_layout
        from ..model.ci_layout import classic_layouts

        size = int(plan.details["files"][f0]["request_size"])
        lays["DEF 64K"] = parse_layout("fixed:64K", system)
        lays.update(classic_layouts(system, size))
        default = "DEF 64K"
    bw = {k: simulate(trace, system, v).bandwidth_MBps for k, v in lays.items()}
    notes = {k: describe(v, system) for k, v in lays.items()}
    info = plan.details["files"][f0] if scheme in ("padp", "psa") else None
    short = f"{name} ⟨{info['h'] >> 10}K, {info['s'] >> 10}K⟩" if info else f"{name}, {notes[name]}"
    return Workload(scheme, title, sysname, bw, paper=name, pick=name,
                    how=f"pario advise --schemes {scheme}: {name}'s planner", default=default,
                    baselines=tuple(k for k in lays if k != name), notes=notes, plan=plan, variant=variant,
                    short=short)


def workload_table(w: Workload) -> Table:
    tab = Table(title_justify="left")
    tab.add_column("option")
    tab.add_column("what", overflow="fold")
    tab.add_column("simulated MiB/s", justify="right")
    tab.add_column(f"vs best baseline ({w.best_baseline})", justify="right")
    for nm, v in w.bw.items():
        role = []
        if nm == w.pick:
            role.append("pario's pick")
        if nm == w.paper:
            role.append("paper's scheme")
        if nm == w.default:
            role.append("default")
        if nm in w.baselines and nm != w.default:
            role.append("paper's baseline")
        label = f"[bold]{nm}[/bold]" if nm == w.pick else nm
        tab.add_row(label + f" ({', '.join(role)})", w.notes.get(nm, ""), f"{v:.1f}",
                    "" if nm == w.best_baseline else _pct(w.gain(nm)))
    return tab


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


@dataclass
class Score:
    """Headline directions of a set of reproduce results, by paper (insertion order) and in all."""

    by_paper: dict[str, dict[str, int]]
    experiments: int
    seconds: float
    quick: bool

    KEYS = ("headlines", "hold", "differ", "proven", "unexpected", "hold_marked")

    @property
    def total(self) -> dict[str, int]:
        return {k: sum(p[k] for p in self.by_paper.values()) for k in self.KEYS}


def headline_score(results, *, quick: bool) -> Score:
    """Count the checks of :func:`pario.reproduce.run_experiment` results: ``hold`` (the
    direction holds), ``differ`` (does not hold, marked expected to differ:
    ``Check.expected`` is False, the reason in docs/RESULTS.md), ``unexpected`` (does not
    hold although expected to, or could not be evaluated: no values, "n/a"),
    ``hold_marked`` (holds although marked expected to differ)."""
    by: dict[str, dict[str, int]] = {}
    for r in results:
        p = by.setdefault(r.experiment.paper, {k: 0 for k in Score.KEYS})
        for c in r.checks:
            p["headlines"] += 1
            if c.passed:
                p["hold"] += 1
                p["hold_marked"] += int(not c.expected)
            elif c.expected or not c.values:  # a broken run is not a documented difference
                p["unexpected"] += 1
            else:
                p["differ"] += 1
                p["proven"] += int(bool(c.check.proof))
    return Score(by, len(results), sum(r.seconds for r in results), quick)


def score_lines(s: Score) -> tuple[str, str]:
    """(the line above the per-paper table: what was run; the lines below it: the score)."""
    t = s.total
    how = "pario reproduce all --quick" if s.quick else "pario reproduce all, full size"
    head = (f"Paper headlines ({how}, run just now: {s.experiments} experiments, {s.seconds:.0f} s"
            + ("; full size: pario demo --full):" if s.quick else "):"))
    tail = (f"{t['hold']} of {t['headlines']} hold; {t['differ']} do not and are marked \"expected to differ\" "
            f"({t['proven']} of them proven not to follow from the paper's own model, each by a test; the rest need "
            f"effects the model lacks); {t['unexpected']} unexpected (expected to hold, or not evaluated)"
            + (f"; {t['hold_marked']} marked expected to differ hold at this size" if t["hold_marked"] else "")
            + f".\nWhy each differs, and the proof test where the paper's own cost model rules the direction out: "
              f"{RESULTS_DOC}.")
    return head, tail


def score_table(s: Score) -> Table:
    tab = Table(title_justify="left")
    for col in ("paper", "headlines", "hold", "expected to differ", "proven by the paper's model", "unexpected"):
        tab.add_column(col, justify="left" if col == "paper" else "right")
    rows = list(s.by_paper.items()) + [("all", s.total)]
    for name, p in rows:
        tab.add_row(name, *(str(p[k]) for k in ("headlines", "hold", "differ", "proven", "unexpected")),
                    end_section=name == rows[-2][0])
    return tab


def recommendation_table(ws: list[Workload]) -> Table:
    """Per workload: pario's pick, its gain over the best baseline and over the default, and the
    paper's scheme with its gain when it is not the pick."""
    tab = Table(title_justify="left")
    tab.add_column("workload")
    tab.add_column("pario's pick")
    tab.add_column("MiB/s", justify="right")
    tab.add_column("vs best baseline")
    tab.add_column("vs default")
    tab.add_column("paper's scheme")
    for w in ws:
        g = w.gain(w.pick)
        d = w.bw[w.pick] / w.bw[w.default] - 1.0
        pg = w.gain(w.paper)
        tie = " (tie)" if _verdict(g) == "tie" else ""
        tab.add_row(f"{w.scheme.upper()}, {w.system}", w.short or w.pick, f"{w.bw[w.pick]:.1f}",
                    f"{_pct(g)}{tie} vs {w.best_baseline}",
                    "—" if w.pick == w.default else f"{_pct(d)} vs {w.default}",
                    "the same" if w.paper == w.pick else
                    f"{w.paper}: {_pct(pg)}{' (tie)' if _verdict(pg) == 'tie' else ''}")
    return tab


def run(args) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from ..reproduce import EXPERIMENTS, run_experiment

    t_start = time.perf_counter()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="pario-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    ws: list[Workload] = []
    traces = {}
    for k, (scheme, title, sysname, variant, make) in enumerate(_scenarios(), 1):
        console.rule(f"[bold]{k}. {scheme}: {title}")
        trace = make()
        traces[scheme] = trace
        if variant:
            console.print(f"system {sysname} with {variant} (see {RESULTS_DOC}: profile variants)")
        w = evaluate(scheme, title, sysname, variant, trace)
        ws.append(w)
        g = w.gain(w.pick)
        console.print(f"pario's pick: [bold]{w.pick}[/bold] ({w.how}): {_pct(g)} vs the best baseline "
                      f"{w.best_baseline}" + ("" if w.pick == w.paper else
                                              f"; the paper's {w.paper}: {_pct(w.gain(w.paper))}"))
        console.print(workload_table(w))
    console.rule("[bold]6. apply the CEDA plan to an embedded store and read back redirected")
    wc = next(w for w in ws if w.scheme == "ceda")
    trace = traces["ceda"]
    rt = _store_roundtrip(out / "store", trace, wc.plan, wc.system)
    ok = rt["mismatches"] == 0
    console.print(f"store {out / 'store'}: {rt['bytes'] / M:.1f} MiB written with fixed 64 KiB striping, replicas built in "
                  f"{rt['replicate_s']:.2f} s; {len(trace)} reads, {rt['checked'] / M:.1f} MiB read back, "
                  f"{rt['redirected'] / M:.1f} MiB served from replicas; "
                  + ("[green]all bytes verified[/green]" if ok else f"[red]{rt['mismatches']} mismatching reads[/red]"))
    quick = not args.full
    console.rule(f"[bold]7. every headline of the five papers ({'quick' if quick else 'full'} size)")
    plots = out / "plots"
    results = []
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as prog:
        task = prog.add_task("reproduce", total=len(EXPERIMENTS))
        for eid, exp in EXPERIMENTS.items():
            prog.update(task, description=f"{eid:18s}")
            results.append(run_experiment(exp, quick=quick, out=plots))
            prog.advance(task)
    score = headline_score(results, quick=quick)
    console.print(f"{score.experiments} experiments in {score.seconds:.0f} s; every headline with the paper's number "
                  f"beside pario's: {plots}/<experiment>.md, the plots: {plots}/<experiment>.png (as written by "
                  f"pario reproduce); the score is in the summary")
    console.rule("[bold]summary")
    console.print(f"What pario recommends (simulated bandwidth; vs X = bandwidth / X's − 1; tie = within ±{TIE:.0%}):")
    console.print(recommendation_table(ws))
    console.print(f"store: CEDA plan of {wc.system} applied, reads redirected: "
                  + ("[green]all bytes verified[/green]" if ok else "[red]MISMATCH[/red]"))
    head, tail = score_lines(score)
    console.print(head)
    console.print(score_table(score))
    console.print(tail, style="red" if score.total["unexpected"] else None)
    console.print(f"plots, CSV and tables: {plots} ({len(list(plots.glob('*.png')))} PNG); files in {out}; "
                  f"{time.perf_counter() - t_start:.0f} s")
    return 0 if ok else 1
