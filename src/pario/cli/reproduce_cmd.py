"""``pario reproduce list | ID… | all [--quick] [--out DIR] [--engine simulate|testbed]``.

Re-runs the papers' experiments (:mod:`pario.reproduce`) in the simulator and writes, per
experiment, ``ID.csv``, ``ID.png`` and ``ID.md`` (the paper's numbers beside pario's) to
``--out`` (default ``reproduce-out``), plus ``SUMMARY.md``.  Exit status 1 when an expected
headline direction does not hold.
"""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .common import console


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="re-run the papers' experiments in the simulator (CSV, plots, tables)")
    p.add_argument("ids", nargs="*", metavar="ID", help="'list', 'all', experiment ids or paper names (ceda, psa, ...)")
    p.add_argument("--quick", action="store_true", help="reduced sizes: every experiment in a few minutes in total")
    p.add_argument("--out", default="reproduce-out", metavar="DIR", help="output directory (default reproduce-out)")
    p.add_argument("--engine", default="simulate", choices=("simulate", "testbed"))
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
    if args.engine == "testbed":
        from .. import ParioError

        raise ParioError("reproduce --engine testbed is not available yet (use --engine simulate)")
    out = Path(args.out)
    results = []
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=False) as prog:
        task = prog.add_task("reproduce", total=len(exps))
        for e in exps:
            prog.update(task, description=f"{e.id:18s}")
            results.append(run_experiment(e, quick=args.quick, out=out, engine=args.engine,
                                          plot=not args.no_plots))
            prog.advance(task)
    tab = Table(title=f"headlines ({'quick' if args.quick else 'full'} run; paper vs pario)", title_justify="left")
    for col in ("experiment", "headline", "paper", "pario", "holds"):
        tab.add_column(col)
    lines = ["# pario reproduce: summary", "", "| experiment | headline | paper | pario | holds | expected |",
             "|---|---|---|---|---|---|"]
    bad = 0
    for r in results:
        for c in r.checks:
            mark = "[green]yes[/green]" if c.passed else ("[red]NO[/red]" if c.check.expected else "[yellow]no (known)[/yellow]")
            bad += int(c.check.expected and not c.passed)
            tab.add_row(r.experiment.id, c.check.label(), c.check.paper, c.pario, mark)
            lines.append(f"| {r.experiment.id} | {c.check.label()} | {c.check.paper} | {c.pario} | "
                         f"{'yes' if c.passed else 'no'} | {'yes' if c.check.expected else 'no'} |")
    console.print(tab)
    (out / "SUMMARY.md").write_text("\n".join(lines) + "\n")
    total = sum(r.seconds for r in results)
    console.print(f"{len(results)} experiment(s) in {total:.1f} s; CSV, PNG and markdown in {out}/ "
                  f"(summary {out / 'SUMMARY.md'})")
    if bad:
        console.print(f"[red]{bad} expected headline direction(s) did not hold[/red]")
        return 1
    return 0
