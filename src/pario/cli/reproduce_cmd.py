"""``pario reproduce list | ID… | all [--quick] [--out DIR] [--engine simulate|testbed [--testbed-dir DIR]
[--testbed-size SIZE]]``.

Re-runs the papers' experiments (:mod:`pario.reproduce`) in the simulator (or, with
``--engine testbed``, measured on emulated testbeds: :mod:`pario.reproduce.engines`;
experiments the testbed cannot measure are skipped with one line) and writes, per
experiment, ``ID.csv``, ``ID.png`` and ``ID.md`` (the paper's numbers beside pario's) to
``--out`` (default ``reproduce-out``), plus ``SUMMARY.md``.  Exit status 1 when an expected
headline direction does not hold.
"""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .common import console, size_arg


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="re-run the papers' experiments in the simulator (CSV, plots, tables)")
    p.add_argument("ids", nargs="*", metavar="ID", help="'list', 'all', experiment ids or paper names (ceda, psa, ...)")
    p.add_argument("--quick", action="store_true", help="reduced sizes: every experiment in a few minutes in total")
    p.add_argument("--out", default="reproduce-out", metavar="DIR", help="output directory (default reproduce-out)")
    p.add_argument("--engine", default="simulate", choices=("simulate", "testbed"),
                   help="simulate (default) or testbed: replay every run on emulated loop-device servers "
                        "throttled from the profile (root; slow: use --quick with a few ids)")
    p.add_argument("--testbed-dir", default=None, metavar="DIR",
                   help="[--engine testbed] where the testbeds go (default: a temporary /tmp/pario-reproduce-tb-*, "
                        "removed afterwards); every testbed made is torn down at the end")
    p.add_argument("--testbed-size", type=size_arg, default=None, metavar="SIZE",
                   help="[--engine testbed] image size per server (sparse; default 512m)")
    p.add_argument("--testbed-slowdown", type=float, default=None, metavar="K",
                   help="[--engine testbed] divide every throttle rate (1/α, 1/β) by K: devices K times slower, "
                        "so the throttle rather than this machine's CPU bounds the replay (default 1)")
    p.add_argument("--no-plots", action="store_true", help=argparse_suppress())
    p.set_defaults(func=run)


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def run(args) -> int:
    from ..reproduce import EXPERIMENTS, run_experiment, select

    ids = list(args.ids)
    if ids[:1] == ["list"]:
        tab = Table(title="experiments (pario reproduce ID)", title_justify="left")
        for col in ("id", "paper", "figure", "title", "system", "scale"):
            tab.add_column(col)
        for e in EXPERIMENTS.values():
            tab.add_row(e.id, e.paper, e.figure, e.title, e.system, e.scale)
        console.print(tab)
        return 0
    exps = select(ids)
    if args.engine != "testbed" and (args.testbed_dir or args.testbed_size or args.testbed_slowdown):
        from .. import ParioError

        raise ParioError("--testbed-dir / --testbed-size / --testbed-slowdown need --engine testbed")
    out = Path(args.out)
    results = []
    skipped = []
    tbe = None
    if args.engine == "testbed":
        from ..reproduce.engines import TestbedEngine, unsupported_reason

        runnable = [e for e in exps if not unsupported_reason(e)]
        for e in exps:
            if unsupported_reason(e):
                skipped.append(f"experiment {e.id}: not available on the testbed: {unsupported_reason(e)}")
        if not runnable:
            from .. import ParioError

            raise ParioError(skipped[0] if len(skipped) == 1 else
                             f"none of the {len(exps)} selected experiments can run on the testbed ({skipped[0]}; …)")
        console.print("[yellow]engine testbed: every run is a real O_DIRECT replay on throttled loop devices and "
                      "takes real time; intended use: --quick with a few experiment ids "
                      "(e.g. pario reproduce padp-fig4 hacio-fig9 --quick --engine testbed)[/yellow]")
        for line in skipped:
            console.print(f"[yellow]skip {line}[/yellow]", soft_wrap=True)
        exps = runnable
        tbe = TestbedEngine(args.testbed_dir, size=args.testbed_size, slowdown=args.testbed_slowdown or 1.0,
                            progress=lambda m: console.print(f"[dim]{m}[/]", soft_wrap=True))
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=False) as prog:
            task = prog.add_task("reproduce", total=len(exps))
            for e in exps:
                prog.update(task, description=f"{e.id:18s}")
                if tbe is not None:
                    from ..reproduce.engines import Unsupported

                    try:
                        results.append(run_experiment(e, quick=args.quick, out=out, engine=args.engine,
                                                      plot=not args.no_plots, testbed=tbe))
                    except Unsupported as exc:  # found only while running (e.g. a plan with replicas)
                        skipped.append(str(exc))
                        console.print(f"[yellow]skip {exc}[/yellow]", soft_wrap=True)
                else:
                    results.append(run_experiment(e, quick=args.quick, out=out, engine=args.engine,
                                                  plot=not args.no_plots))
                prog.advance(task)
    finally:
        if tbe is not None:
            tbe.close()
    where = "testbed" if args.engine == "testbed" else "simulator"
    tab = Table(title=f"headlines ({'quick' if args.quick else 'full'} run, {where}; paper vs pario)",
                title_justify="left")
    for col in ("experiment", "headline", "paper", "pario", "holds"):
        tab.add_column(col)
    lines = ["# pario reproduce: summary", ""]
    if args.engine == "testbed":
        lines += ["engine: testbed (measured wall times on emulated servers, see docs/reproduce.md)", ""]
        lines += [f"- skipped: {s}" for s in skipped] + ([""] if skipped else [])
    lines += ["| experiment | headline | paper | pario | holds | expected |",
              "|---|---|---|---|---|---|"]
    bad = 0
    for r in results:
        for c in r.checks:
            mark = "[green]yes[/green]" if c.passed else ("[red]NO[/red]" if c.expected else "[yellow]no (known)[/yellow]")
            bad += int(c.expected and not c.passed)
            tab.add_row(r.experiment.id, c.check.label(), c.check.paper, c.pario, mark)
            lines.append(f"| {r.experiment.id} | {c.check.label()} | {c.check.paper} | {c.pario} | "
                         f"{'yes' if c.passed else 'no'} | {'yes' if c.expected else 'no'} |")
    console.print(tab)
    out.mkdir(parents=True, exist_ok=True)
    (out / "SUMMARY.md").write_text("\n".join(lines) + "\n")
    total = sum(r.seconds for r in results)
    console.print(f"{len(results)} experiment(s) in {total:.1f} s; CSV, PNG and markdown in {out}/ "
                  f"(summary {out / 'SUMMARY.md'})")
    if bad:
        console.print(f"[red]{bad} expected headline direction(s) did not hold[/red]")
        return 1
    return 0
