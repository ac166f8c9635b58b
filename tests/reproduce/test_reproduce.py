"""`pario reproduce`: the framework, and the direction of every headline in --quick mode."""

from __future__ import annotations

import math

import pytest
from helpers import ROOT

from pario import ParioError
from pario.reproduce import EXPERIMENTS, run_experiment, select
from pario.reproduce.core import Check, evaluate_check, improvements
from pario.reproduce.families import make_system

PAPER_FIGURES = {
    "CEDA": {"Fig. 3", "Fig. 9", "Fig. 10", "Fig. 11", "Fig. 12", "Fig. 13", "Fig. 14", "Fig. 16"},
    "PSA": {f"Fig. {k}" for k in range(7, 14)},
    "PADP": {f"Fig. {k}" for k in range(4, 9)},
    "HACIO": {"Tables 1–3"} | {f"Fig. {k}" for k in range(8, 15)},
    "CI-LAYOUT": {"Table 5"} | {f"Fig. {k}" for k in range(5, 9)},
}


def test_every_figure_is_defined():
    got = {}
    for e in EXPERIMENTS.values():
        got.setdefault(e.paper, set()).add(e.figure)
        assert e.scale or e.family == "hacio_example", e.id
    assert got == PAPER_FIGURES


def test_check_arithmetic():
    rows = [{"x": 1, "op": "read", "series": "A", "value": 150.0}, {"x": 1, "op": "read", "series": "B", "value": 100.0},
            {"x": 2, "op": "read", "series": "A", "value": 90.0}, {"x": 2, "op": "read", "series": "B", "value": 100.0}]
    assert improvements(rows, "A", "B") == pytest.approx([0.5, -0.1])
    assert not evaluate_check(Check("A", "B", ">"), rows, {}).passed
    assert evaluate_check(Check("A", "B", ">", xs=(1,)), rows, {}).passed
    assert evaluate_check(Check("A", "B", "≈", xs=(2,), tol=0.1), rows, {}).passed
    assert evaluate_check(Check("m", rel="metric>=", value=0.8), rows, {"m": 0.8}).passed
    assert not evaluate_check(Check("m", rel="metric>=", value=0.8), rows, {"m": 0.79}).passed
    # a broken run leaves a check without values and passed=False, which an "expected to differ"
    # check (expected=False) would accept: test_quick_headline_directions requires values
    zero = [dict(r, value=0.0) if r["series"] == "B" else r for r in rows]
    for broken in (evaluate_check(Check("A", "C", ">", expected=False), rows, {}),  # missing series
                   evaluate_check(Check("A", "B", ">", expected=False), zero, {}),  # zero baseline
                   evaluate_check(Check("A", "B", ">", xs=("1K",), expected=False), rows, {}),  # x label
                   evaluate_check(Check("m", rel="metric>=", value=0.8, expected=False), rows, {})):  # metric
        assert broken.values == [] and broken.pario == "n/a" and broken.passed == broken.check.expected_at(True)


def test_system_variants():
    s = make_system("hacio-6h2s", {"ratio": (7, 1), "t_div": 8})
    assert [x.kind for x in s.servers] == ["hdd"] * 7 + ["ssd"]
    assert s.network.t == pytest.approx(make_system("hacio-6h2s").network.t / 8)
    assert make_system("ceda-hdd8", {"servers": 2}).n == 2


def test_select_and_testbed_engine():
    assert [e.id for e in select(["padp"])][:2] == ["padp-fig4", "padp-fig5"]
    with pytest.raises(ParioError):
        select(["nope"])
    from pario.reproduce.engines import Unsupported

    # the worked example is in abstract time units (β = 0): nothing for a throttle to emulate
    with pytest.raises(Unsupported, match="hacio-tables1-3: not available on the testbed"):
        run_experiment(EXPERIMENTS["hacio-tables1-3"], engine="testbed")
    with pytest.raises(ParioError, match="unknown engine"):
        run_experiment(EXPERIMENTS["padp-fig4"], engine="disksim")


def test_hacio_worked_example_outputs(tmp_path):
    r = run_experiment(EXPERIMENTS["hacio-tables1-3"], quick=True, out=tmp_path)
    assert {row["series"]: row["value"] for row in r.rows} == {"ROMCIO": 24.0, "CACIO": 20.0, "HACIO": 12.0}
    assert r.ok
    for kind in ("csv", "md", "png"):
        assert r.files[kind].exists() and r.files[kind].stat().st_size > 0
    assert "24T" in r.files["md"].read_text()


# Regression pins of every check's quick-mode magnitude: (number of values, min, max) of the
# check's values (improvement bw_scheme/bw_baseline − 1 per case, or the metric itself), measured
# by `run_experiment(EXPERIMENTS[id], quick=True)` on this tree (simulator, 2-core machine; two runs
# gave identical values).  These are NOT the papers' numbers (those are in experiments.py
# `paper_numbers` and docs/RESULTS.md): they only make a change of the model, the simulator or an
# experiment that shifts a magnitude visible.  Tolerance: ±15 % relative, at least ±0.01 absolute
# (one percentage point of improvement) for values near zero; the number of values is exact (a case
# that loses its series or its baseline changes it).  When a deliberate change moves a value,
# re-measure, update the pin and docs/RESULTS.md together.
PIN_REL, PIN_ABS = 0.15, 0.01
QUICK_PINS = {
    ("ceda-fig10", 0): (1, 0.709, 0.709),  # max-time ratio >= 1  [expected to differ]
    ("ceda-fig11", 0): (6, -0.116, 0.2042),  # CEDA > ORIG  [expected to differ]
    ("ceda-fig11", 1): (6, -0.1591, 0.1375),  # CEDA > CIDA  [expected to differ]
    ("ceda-fig12", 0): (6, 0.006876, 0.2846),  # CEDA > ORIG
    ("ceda-fig12", 1): (6, -0.0001837, 0.1153),  # CEDA > CIDA  [expected to differ]
    ("ceda-fig13", 0): (8, 0.0945, 0.1981),  # CEDA > ORIG
    ("ceda-fig13", 1): (8, 0.5311, 0.5362),  # CEDA > CIDA
    ("ceda-fig14", 0): (6, 0.7918, 1.013),  # CEDA > ORIG
    ("ceda-fig16", 0): (6, -0.002093, 0.02192),  # CEDA > ORIG  [expected to differ]
    ("ceda-fig3", 0): (1, 0.1295, 0.1295),  # strided > sequential (x ∈ {64K})
    ("ceda-fig3", 1): (3, 0.2379, 0.4822),  # sequential > strided (x ∈ {4K, 8K, 16K})
    ("ceda-fig3", 2): (1, -0.1024, -0.1024),  # strided > sequential (x ∈ {32K})  [expected to differ]
    ("ceda-fig9", 0): (3, 0.2701, 0.4483),  # CEDA > ORIG (read)
    ("ceda-fig9", 1): (3, 0.1957, 0.4189),  # CEDA > ORIG (write)
    ("ceda-fig9", 2): (6, 0.1126, 0.2965),  # CEDA > CIDA
    ("ceda-fig9", 3): (4, -0.03896, 0.01572),  # CIDA (model) < ORIG (model) (x ∈ {64K, 256K})  [expected to differ]
    ("ceda-fig9", 4): (4, 0.01247, 0.1415),  # CIDA < ORIG (x ∈ {64K, 256K})  [expected to differ]
    ("ci-fig5", 0): (1, 0.8606, 0.8606),  # accuracy >= 0.8
    ("ci-fig6", 0): (1, 160.9, 160.9),  # max gain over 1-DH % >= 0
    ("ci-fig6", 1): (1, 0.875, 0.875),  # Cost best fraction >= 1  [expected to differ]
    ("ci-fig7", 0): (1, 0.875, 0.875),  # Cost best fraction >= 1  [expected to differ]
    ("ci-fig7", 1): (1, 287.5, 287.5),  # max gain over 1-DH % >= 0
    ("ci-fig8", 0): (1, 0.75, 0.75),  # Cost best fraction >= 1  [expected to differ]
    ("ci-table5", 0): (1, 0.8295, 0.8295),  # min accuracy >= 0.8
    ("hacio-fig10", 0): (6, -0.09613, 0.0),  # HACIO > ROMCIO  [expected to differ]
    ("hacio-fig11", 0): (4, 0.07416, 0.5732),  # HACIO > ROMCIO (x ∈ {1M, 2M})
    ("hacio-fig11", 1): (4, -0.06447, 0.0),  # HACIO > ROMCIO (x ∈ {4M, 8M})  [expected to differ]
    ("hacio-fig11", 2): (8, -0.3053, 0.0),  # HACIO > CACIO  [expected to differ]
    ("hacio-fig12", 0): (2, -0.1763, -0.1086),  # HACIO ≈ CACIO (x ∈ {7:1})  [expected to differ]
    ("hacio-fig12", 1): (2, -0.2679, -0.2666),  # HACIO > CACIO (x ∈ {4:4})  [expected to differ]
    ("hacio-fig13", 0): (8, -0.1768, -0.03401),  # HACIO > ROMCIO  [expected to differ]
    ("hacio-fig14", 0): (4, 0.0, 0.0),  # HACIO > ROMCIO  [expected to differ]
    ("hacio-fig8", 0): (4, -0.1926, -0.02689),  # HACIO > ROMCIO  [expected to differ]
    ("hacio-fig8", 1): (4, -0.2081, -0.1529),  # HACIO > CACIO  [expected to differ]
    ("hacio-fig8", 2): (2, 0.1814, 0.1833),  # CACIO > ROMCIO (x ∈ {interleaved})
    ("hacio-fig8", 3): (2, -0.01108, 0.004576),  # CACIO > ROMCIO (x ∈ {random})  [expected to differ]
    ("hacio-fig9", 0): (6, 0.0, 0.0),  # HACIO > ROMCIO  [expected to differ]
    ("hacio-tables1-3", 0): (1, 24, 24),  # ROMCIO total (T) == 24
    ("hacio-tables1-3", 1): (1, 20, 20),  # CACIO total (T) == 20
    ("hacio-tables1-3", 2): (1, 12, 12),  # HACIO total (T) == 12
    ("padp-fig4", 0): (4, 0.4928, 0.6265),  # PADP > DEF
    ("padp-fig4", 1): (4, 0.05207, 0.1538),  # PADP > RANDOM1
    ("padp-fig4", 2): (4, 0.9097, 1.137),  # PADP > RANDOM2
    ("padp-fig5", 0): (1, 2.394, 2.394),  # imbalance ratio >= 1.5
    ("padp-fig6", 0): (6, 0.1739, 0.6504),  # PADP > DEF
    ("padp-fig6", 1): (6, 0.1973, 0.3837),  # PADP > RANDOM1
    ("padp-fig7", 0): (2, 0.8298, 1.197),  # PADP > DEF (x ∈ {2048K})
    ("padp-fig7", 1): (2, -0.3716, -0.3497),  # PADP > DEF (x ∈ {128K})  [expected to differ]
    ("padp-fig8", 0): (4, 0.4407, 0.8332),  # PADP > DEF
    ("psa-fig10", 0): (4, 0.001089, 0.05609),  # PSA > DEF
    ("psa-fig10", 1): (4, -0.0466, 0.00743),  # PSA > PA  [expected to differ]
    ("psa-fig11", 0): (6, -0.4289, 0.005771),  # PSA > DEF  [expected to differ]
    ("psa-fig11", 1): (6, -0.004648, 0.007845),  # PSA > PA  [expected to differ]
    ("psa-fig12", 0): (4, 0.0, 0.0),  # PSA > DEF  [expected to differ]
    ("psa-fig12", 1): (4, 0.001745, 0.01501),  # PSA > PA
    ("psa-fig13", 0): (4, -0.02655, 0.07435),  # PSA > DEF  [expected to differ]
    ("psa-fig13", 1): (4, -0.01459, 0.14),  # PSA > PA  [expected to differ]
    ("psa-fig7", 0): (4, 0.0, 0.0904),  # PSA > DEF  [expected to differ]
    ("psa-fig7", 1): (4, -0.007572, 0.07935),  # PSA > PA  [expected to differ]
    ("psa-fig8", 0): (6, 0.0, 0.03707),  # PSA > DEF  [expected to differ]
    ("psa-fig8", 1): (6, -0.002105, 0.001177),  # PSA > PA  [expected to differ]
    ("psa-fig9", 0): (4, -0.08815, -0.0001346),  # PSA > DEF  [expected to differ]
    ("psa-fig9", 1): (4, 0.0, 0.006993),  # PSA > PA  [expected to differ]
}


def _within_pin(got: float, pinned: float) -> bool:
    return abs(got - pinned) <= max(PIN_REL * abs(pinned), PIN_ABS)


def test_every_check_has_a_pin():
    assert set(QUICK_PINS) == {(k, i) for k, e in EXPERIMENTS.items() for i in range(len(e.checks))}


@pytest.mark.parametrize("exp_id", sorted(EXPERIMENTS))
def test_quick_headline_directions(exp_id, tmp_path):
    """Every headline direction pario reproduces holds; every known non-reproduction is still
    one (so a change either way is noticed and docs/RESULTS.md updated).  A check can only be
    judged when it has values: a missing series, a zero baseline or a mismatched x label leave
    it empty (``evaluate_check`` then reports passed=False, which an "expected to differ" check
    would otherwise accept), so every check must have values, and as many as pinned, within
    its pinned quick-mode range."""
    exp = EXPERIMENTS[exp_id]
    r = run_experiment(exp, quick=True, out=tmp_path, plot=False)
    # every declared series was produced (a misspelt series name drops rows or leaves a plot empty)
    assert set(exp.series) <= {row["series"] for row in r.rows}, exp_id
    assert len(r.checks) == len(exp.checks)
    for i, c in enumerate(r.checks):
        where = f"{exp_id}[{i}]: {c.check.label()} -> {c.pario} {c.values}"
        assert c.values and c.pario != "n/a", f"{where}: no values (missing series, zero baseline or x label?)"
        assert all(math.isfinite(v) for v in c.values), where
        assert c.passed == c.expected == c.check.expected_at(True), where
        n, lo, hi = QUICK_PINS[(exp_id, i)]
        assert len(c.values) == n, f"{where}: {len(c.values)} values, pinned {n}"
        assert _within_pin(min(c.values), lo) and _within_pin(max(c.values), hi), \
            f"{where}: range {min(c.values):.4g} … {max(c.values):.4g}, pinned {lo:g} … {hi:g} (±15 %, ≥ ±0.01)"


def test_ci_layout_model_accuracy_at_least_papers_80_percent():
    r = run_experiment(EXPERIMENTS["ci-table5"], quick=True)
    assert r.metrics["min accuracy"] >= 0.80
    assert 0.8 <= r.metrics["accuracy"] <= 1.0


def test_every_proof_names_a_test_that_exists_and_only_on_expected_differences():
    """A check's ``proof`` names a test function that exists in the tree, and only checks
    marked expected to differ (at the full size) carry one: PSA 13, HACIO 10, as docs/RESULTS.md
    says (psa-fig10 "PSA > DEF" holds at the quick size and ties at full size)."""
    import ast
    from pathlib import Path

    from pario.reproduce.experiments import EXPERIMENTS

    root = ROOT
    proofs = [(e.id, c) for e in EXPERIMENTS.values() for c in e.checks if c.proof]
    assert all(c.expected is not True for _, c in proofs)
    by_paper = {}
    for eid, c in proofs:
        by_paper[EXPERIMENTS[eid].paper] = by_paper.get(EXPERIMENTS[eid].paper, 0) + 1
        path, _, name = c.proof.partition("::")
        tree = ast.parse((root / path).read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body), c.proof
    assert by_paper == {"PSA": 13, "HACIO": 10}
