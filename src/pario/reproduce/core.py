"""The reproduction framework: declarative experiments, checks, and the runner.

An :class:`Experiment` is one figure or table of a paper: the paper's parameters
(workload, system, schemes and baselines), where and by how much pario scales it down,
the numbers the paper reports, and the direction checks of its headline.  ``family``
names the function of :mod:`pario.reproduce.families` that evaluates it in the simulator.
:func:`run_experiment` runs one and writes ``ID.csv``, ``ID.png`` (matplotlib, Agg) and
``ID.md`` (the paper's numbers beside pario's).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import ParioError


@dataclass(frozen=True)
class Check:
    """A headline direction: ``scheme`` vs ``baseline`` (improvement = bw_s / bw_b − 1 per case).

    ``rel``: ``">"`` scheme faster in every selected case, ``"<"`` slower in every one,
    ``"≈"`` within ±``tol`` in every one; ``"metric>="`` / ``"metric=="``: a named metric of
    the run (``scheme``) against ``value``.  ``expected``: True when pario reproduces it
    (the test asserts those); False = a known, documented non-reproduction (docs/RESULTS.md);
    ``"quick"``: holds at the quick size only (the full size shows what ``proof`` proves).
    ``proof``: for such a check, the test (``tests/FILE.py::NAME``) that proves the paper's *own*
    cost model does not give the paper's direction; empty when the difference needs effects
    the model lacks (real disks' allocation order, readahead …).
    """

    scheme: str
    baseline: str = ""
    rel: str = ">"
    op: str | None = None
    xs: tuple | None = None
    paper: str = ""
    expected: bool | str = True
    tol: float = 0.10
    value: float | None = None
    note: str = ""
    proof: str = ""     # expected=False: the test proving the paper's own model gives this direction not

    def expected_at(self, quick: bool) -> bool:
        """Whether the direction is expected to hold at this size."""
        return self.expected is True or (self.expected == "quick" and quick)

    def label(self) -> str:
        where = []
        if self.op:
            where.append(self.op)
        if self.xs:
            where.append("x ∈ {" + ", ".join(map(str, self.xs)) + "}")
        w = f" ({'; '.join(where)})" if where else ""
        if self.rel.startswith("metric"):
            return f"{self.scheme} {self.rel[6:]} {self.value:g}"
        return f"{self.scheme} {self.rel} {self.baseline}{w}"


@dataclass(frozen=True)
class Experiment:
    """One figure / table of a paper, evaluated in the simulator."""

    id: str
    paper: str  # CEDA | PSA | PADP | HACIO | CI-LAYOUT
    figure: str  # "Fig. 9", "Table 5"
    title: str
    family: str  # evaluator in pario.reproduce.families
    system: str  # built-in profile
    variant: dict = field(default_factory=dict)  # experiment-specific profile changes (documented)
    variant_note: str = ""
    cases: tuple = ()  # one dict per x value: {"x": label, **workload parameters}
    workload: dict = field(default_factory=dict)  # parameters shared by all cases
    quick: dict = field(default_factory=dict)  # overrides in --quick
    scale: str = ""  # where and by how much pario scales the paper's workload down
    series: tuple = ()  # scheme first, then baselines
    ops: tuple = ("read", "write")
    x_label: str = ""
    y_label: str = "bandwidth (MiB/s)"
    paper_numbers: dict = field(default_factory=dict)
    checks: tuple = ()
    options: dict = field(default_factory=dict)

    def params(self, quick: bool) -> tuple[dict, list[dict]]:
        wl = dict(self.workload)
        cases = [dict(c) for c in self.cases]
        if quick:
            q = dict(self.quick)
            qc = q.pop("cases", None)
            wl.update(q)
            if qc is not None:
                cases = [dict(c) for c in qc]
        return wl, cases


@dataclass
class CheckResult:
    check: Check
    passed: bool
    pario: str
    values: list[float]
    expected: bool = True      # check.expected_at(the run's size)


@dataclass
class Result:
    experiment: Experiment
    rows: list[dict]
    metrics: dict[str, Any]
    checks: list[CheckResult]
    seconds: float
    quick: bool
    files: dict[str, Path] = field(default_factory=dict)
    engine: str = "simulate"

    @property
    def ok(self) -> bool:
        """Every expected direction holds."""
        return all(c.passed for c in self.checks if c.expected)


# ------------------------------------------------------------------ checks
def improvements(rows: list[dict], scheme: str, baseline: str, op=None, xs=None) -> list[float]:
    """bw(scheme)/bw(baseline) − 1 for every (x, op) case that has both."""
    val = {}
    for r in rows:
        if op is not None and r.get("op") != op:
            continue
        if xs is not None and r["x"] not in xs and str(r["x"]) not in map(str, xs):
            continue
        val[(str(r["x"]), r.get("op"), r["series"])] = float(r["value"])
    out = []
    for (x, o, s), v in val.items():
        if s != scheme:
            continue
        b = val.get((x, o, baseline))
        if b is not None and b > 0:
            out.append(v / b - 1.0)
    return out


def evaluate_check(c: Check, rows: list[dict], metrics: dict) -> CheckResult:
    if c.rel.startswith("metric"):
        v = metrics.get(c.scheme)
        if v is None:
            return CheckResult(c, False, "n/a", [])
        ok = v >= c.value - 1e-12 if c.rel == "metric>=" else math.isclose(v, c.value, rel_tol=1e-9, abs_tol=1e-9)
        return CheckResult(c, bool(ok), f"{v:.4g}" if isinstance(v, float) else str(v), [float(v)])
    imp = improvements(rows, c.scheme, c.baseline, c.op, c.xs)
    if not imp:
        return CheckResult(c, False, "n/a", [])
    if c.rel == ">":
        ok = all(v > 0 for v in imp)
    elif c.rel == "<":
        ok = all(v < 0 for v in imp)
    elif c.rel == "≈":
        ok = all(abs(v) <= c.tol for v in imp)
    else:
        raise ParioError(f"unknown check relation {c.rel!r}")
    lo, hi = min(imp) * 100, max(imp) * 100
    txt = f"{lo:+.1f} %" if math.isclose(lo, hi, abs_tol=0.05) else f"{lo:+.1f} … {hi:+.1f} %"
    return CheckResult(c, bool(ok), txt, imp)


# ------------------------------------------------------------------ runner
def run_experiment(exp: Experiment, *, quick: bool = False, out: Path | str | None = None,
                   engine: str = "simulate", plot: bool = True, testbed=None) -> Result:
    """Evaluate one experiment; with ``out`` write ``ID.csv``, ``ID.png``, ``ID.md`` there.

    ``engine="testbed"``: every run of the family is replayed on an emulated testbed
    (:class:`pario.reproduce.engines.TestbedEngine`; ``testbed`` = one to share between
    experiments, else one is made and torn down here).  An experiment the testbed cannot
    measure raises :class:`pario.reproduce.engines.Unsupported` (one line, before any I/O
    where that is known up front).
    """
    from . import engines, families

    if engine not in engines.ENGINES:
        raise ParioError(f"unknown engine {engine!r} (simulate | testbed)")
    fn = getattr(families, exp.family.replace("-", "_"), None)
    if fn is None:
        raise ParioError(f"experiment {exp.id}: unknown family {exp.family!r}")
    own = None
    if engine == "testbed":
        why = engines.unsupported_reason(exp)
        if why:
            raise engines.Unsupported(f"experiment {exp.id}: not available on the testbed: {why}")
        if testbed is None:
            testbed = own = engines.TestbedEngine()
        testbed.experiment = exp.id
    try:
        t0 = time.perf_counter()
        with engines.using(testbed if engine == "testbed" else None):
            rows, metrics = fn(exp, quick)
        seconds = time.perf_counter() - t0
    finally:
        if own is not None:
            own.close()
    if engine == "testbed":  # say which engine produced the numbers (the simulator's CSV stays as it was)
        rows = [{**r, "engine": "testbed"} for r in rows]
    checks = [evaluate_check(c, rows, metrics) for c in exp.checks]
    for r in checks:
        r.expected = r.check.expected_at(quick)
    res = Result(exp, rows, metrics, checks, seconds, quick, engine=engine)
    if out is not None:
        write_outputs(res, Path(out), plot=plot)
    return res


def write_outputs(res: Result, out: Path, plot: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exp = res.experiment
    keys: list[str] = []
    for r in res.rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    p = out / f"{exp.id}.csv"
    with p.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in res.rows:
            w.writerow(r)
    res.files["csv"] = p
    p = out / f"{exp.id}.md"
    p.write_text(markdown(res))
    res.files["md"] = p
    if plot:
        from .plots import plot_result

        p = out / f"{exp.id}.png"
        plot_result(res, p)
        res.files["png"] = p


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def pivot(rows: list[dict]) -> tuple[list[str], list[tuple], dict]:
    """(series, [(x, op)], {(x, op, series): value}) in first-seen order."""
    series, cases, val = [], [], {}
    for r in rows:
        key = (str(r["x"]), r.get("op", ""))
        if key not in cases:
            cases.append(key)
        if r["series"] not in series:
            series.append(r["series"])
        val[(key[0], key[1], r["series"])] = r["value"]
    return series, cases, val


def markdown(res: Result) -> str:
    exp = res.experiment
    lines = [f"# {exp.paper} {exp.figure}: {exp.title}", ""]
    lines.append(f"- experiment `{exp.id}`, system `{exp.system}`"
                 + (f" with variant {exp.variant}" if exp.variant else "") + ("  (quick run)" if res.quick else ""))
    if exp.variant_note:
        lines.append(f"- profile variant: {exp.variant_note}")
    if exp.scale:
        lines.append(f"- scale: {exp.scale}")
    if res.engine == "testbed":
        lines.append(f"- measured on the emulated testbed (engine `testbed`: real elapsed times of O_DIRECT "
                     f"replays under blkio throttles, see docs/reproduce.md) in {res.seconds:.1f} s")
    else:
        lines.append(f"- evaluated in the simulator in {res.seconds:.1f} s")
    lines.append("")
    series, cases, val = pivot(res.rows)
    has_op = any(op for _, op in cases)
    head = [exp.x_label or "x"] + (["op"] if has_op else []) + series
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for x, op in cases:
        cells = [x] + ([op] if has_op else []) + [_fmt(val.get((x, op, s), "")) for s in series]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"\nvalues: {exp.y_label}\n")
    if res.metrics:
        lines.append("metrics: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in res.metrics.items()) + "\n")
    lines.append("| headline | paper | pario | holds | expected |")
    lines.append("|---|---|---|---|---|")
    for c in res.checks:
        lines.append(f"| {c.check.label()} | {c.check.paper} | {c.pario} | {'yes' if c.passed else 'no'} | "
                     f"{'yes' if c.expected else 'no (see RESULTS.md)'} |")
    if exp.paper_numbers:
        lines.append("\npaper reports: " + "; ".join(f"{k}: {v}" for k, v in exp.paper_numbers.items()))
    notes = [c.check.note for c in res.checks if c.check.note]
    if notes:
        lines.append("\nnotes: " + " ".join(notes))
    return "\n".join(lines) + "\n"


def replace(exp: Experiment, **kw) -> Experiment:
    return dataclasses.replace(exp, **kw)
