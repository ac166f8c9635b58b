"""``pario advise``: every scheme through the Planner interface, JSON and plan files."""

from __future__ import annotations

import json

import pytest
from helpers import TRACES

from pario.cli import main
from pario.model import DistributionModel
from pario.plan import PLANNERS
from pario.plan.base import Plan
from pario.plan.schemes import SCHEMES, parse_schemes
from pario.system import load_system
from pario.trace import save
from pario.workload.ior import ior


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.parquet"
    save(ior(16, 65536, 16 * 65536, 2, pattern="random", op="both", seed=5), path)
    return path


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def wide():
    """The CLI's console 400 columns wide: table cells the tests parse are not wrapped
    (tmp paths are longer under pytest-xdist)."""
    from pario.cli.common import console

    old = console.width
    console.width = 400
    yield
    console.width = old


def test_json_for_ceda_and_hybrid(capsys, trace_file):
    rc, out, _ = run(capsys, "advise", trace_file, "--system", "ceda-hdd8", "--schemes", "ceda,hybrid",
                     "--space", "16m", "--json")
    assert rc == 0
    d = json.loads(out)
    assert set(d["schemes"]) == {"ceda", "hybrid"}
    for name, s in d["schemes"].items():
        assert s["plan"]["scheme"] == name
        assert s["predicted_s"] == s["plan"]["predicted_s"]
        assert s["baselines"] == s["plan"]["baselines"] and "ORIG" in s["baselines"]
    ceda = d["schemes"]["ceda"]
    assert set(ceda["baselines"]) >= {"ORIG", "CIDA"}
    assert ceda["plan"]["details"]["selections"]["paper"]["space"] <= 16 * 2 ** 20
    # best = least distribution-model time
    best = min(d["schemes"], key=lambda k: d["schemes"][k]["distribution_s"])
    assert d["best"] == best


def test_common_time_reprices_layout_plans(capsys, trace_file):
    # the ci-layout scheme's planner ships with pario: a missing registration is a failure, not a skip
    assert SCHEMES["ci-layout"]["planner"] == "layout-select" and "layout-select" in PLANNERS
    rc, out, _ = run(capsys, "advise", trace_file, "--system", "ceda-hdd8", "--schemes", "ci-layout", "--json")
    assert rc == 0
    s = json.loads(out)["schemes"]["ci-layout"]
    system = load_system("ceda-hdd8")
    plan = Plan.from_dict(s["plan"], system)
    from pario.trace import load

    trace = load(trace_file)
    lay = {f: plan.layout_for(f) for f in trace.files}
    assert s["distribution_s"] == pytest.approx(DistributionModel().trace_cost(trace, lay, system).predicted_s)


def test_output_files_per_scheme(capsys, trace_file, tmp_path):
    out = tmp_path / "plan.json"
    rc, text, _ = run(capsys, "advise", trace_file, "--system", "ceda-hdd8", "--schemes", "ceda,hybrid", "-o", out)
    assert rc == 0
    assert "ceda" in text and "hybrid" in text and "ORIG" in text and "%" in text
    system = load_system("ceda-hdd8")
    plans = {name: Plan.load(tmp_path / f"plan.{name}.json", system) for name in ("ceda", "hybrid")}
    best = Plan.load(out, system)
    assert best.scheme in plans
    assert best.predicted_s == min(p.predicted_s for p in plans.values())  # both priced by the distribution model


def test_single_scheme_writes_one_file(capsys, trace_file, tmp_path):
    out = tmp_path / "one.json"
    rc, _, _ = run(capsys, "advise", trace_file, "--system", "ceda-hdd8", "--schemes", "ceda", "-o", out)
    assert rc == 0
    assert Plan.load(out, load_system("ceda-hdd8")).scheme == "ceda"
    assert not list(tmp_path.glob("one.*.json"))


def test_all_schemes(capsys, trace_file):
    rc, out, _ = run(capsys, "advise", trace_file, "--system", "psa-4h4s", "--schemes", "all", "--json")
    assert rc == 0
    d = json.loads(out)
    # psa-4h4s has HServers and SServers, so every scheme applies and every planner is registered:
    # none may be skipped ("planner not available in this build" would hide a missing planner)
    assert d["skipped"] == {} and set(d["schemes"]) == set(SCHEMES)
    assert {v["planner"] for v in SCHEMES.values()} <= set(PLANNERS)
    for s in d["schemes"].values():
        assert s["predicted_s"] > 0
        assert all(v > 0 for v in s["baselines"].values())


def test_bad_scheme_is_one_line_error(capsys, trace_file):
    rc, _, err = run(capsys, "advise", trace_file, "--system", "ceda-hdd8", "--schemes", "ceda,nope")
    assert rc == 2 and "unknown scheme 'nope'" in err and len(err.strip().splitlines()) == 1
    assert parse_schemes("all") == list(SCHEMES)
    assert parse_schemes("hybrid, ceda,hybrid") == ["hybrid", "ceda"]


def test_darshan_trace(capsys, tmp_path):
    log = TRACES / "hpio-indep-c-nc-8r-c4096-s16k-sp8k.darshan"
    if not log.exists():
        pytest.skip("shared Darshan traces not present")
    from pario.trace import import_darshan

    path = tmp_path / "hpio.parquet"
    save(import_darshan(log), path)
    rc, out, _ = run(capsys, "advise", path, "--system", "ceda-hdd8", "--schemes", "ceda,hybrid", "--json")
    assert rc == 0
    d = json.loads(out)
    ceda = d["schemes"]["ceda"]
    pbt = ceda["plan"]["details"]["pbt"]
    assert pbt and all((r["B"] > 0) or not r["paper"] for r in pbt)


def test_advise_labels_each_predicted_time_with_its_model(capsys, trace_file, wide):
    """Own model vs distribution model, named with paper and equation, in the output and in
    --help; the own-model time of padp is the hybrid closed form's, re-computed here."""
    from pario.model import HybridModel

    rc, out, _ = run(capsys, "advise", trace_file, "--system", "psa-4h4s", "--schemes", "padp,ceda", "--json")
    assert rc == 0
    d = json.loads(out)
    rc, out, _ = run(capsys, "advise", trace_file, "--system", "psa-4h4s", "--schemes", "padp,ceda")
    assert rc == 0
    text = " ".join(out.split())
    assert "predicted, own model" in text and "predicted, distribution model" in text
    assert "own model: hybrid (PADP seed 003 §3.2 eq. 2–4)" in text
    assert "own model: distribution (CEDA seed 000 §3 eq. 1–4" in text
    assert "summary: every plan re-priced by the distribution model (CEDA seed 000 §3 eq. 1–4)" in text
    system = load_system("psa-4h4s")
    from pario.trace import load

    plan = Plan.from_dict(d["schemes"]["padp"]["plan"], system)
    own = HybridModel().trace_cost(load(trace_file), plan.layouts, system).predicted_s
    row = next(ln for ln in out.splitlines() if ln.startswith("│ padp ") and "hybrid (PADP eq. 2–4)" in ln)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[2] == f"{own:.6g} s"
    assert cells[3] == f"{d['schemes']['padp']['distribution_s']:.6g} s"
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    for words in ("OWN MODEL", "DISTRIBUTION MODEL", "CEDA seed 000 §3 eq. 1–4", "PADP seed 003 §3.2 eq. 2–4",
                  "PSA seed 001 §3.2 Tables 3–4"):
        assert words in helptext


def test_model_labels_its_terms(capsys, trace_file, wide):
    """pario model: every printed term named with its paper and equation; the stated sums hold
    (distribution: T_s + T_t = Σ busy; hybrid: T_e + T_x + T_st = predicted)."""
    import re

    rc, out, _ = run(capsys, "model", trace_file, "--system", "ceda-hdd8", "--layout", "fixed:64k")
    assert rc == 0
    rows = {c[0]: c for c in ([x.strip() for x in ln.strip("│ ").split("│")] for ln in out.splitlines()
                              if ln.startswith("│ ")) if c}
    assert rows["T_s"][2].startswith("startup") and rows["T_t"][2].startswith("transfer")
    assert "for p > 1 (CEDA eq. 3)" in " ".join(out.replace("│", " ").split())
    assert "(CEDA eq. 1, 3)" in rows["T_t"][2]
    busy = sum(float(rows[f"H{j}"][2]) for j in range(8))
    ts_tt = float(rows["T_s"][1].split()[0]) + float(rows["T_t"][1].split()[0])
    assert ts_tt == pytest.approx(busy, rel=1e-4)
    assert "model distribution (CEDA seed 000 §3 eq. 1–4" in out
    rc, out, _ = run(capsys, "model", trace_file, "--system", "psa-4h4s", "--layout", "var:hdd=16k,ssd=48k",
                     "--model", "hybrid")
    assert rc == 0
    rows = {c[0]: c for c in ([x.strip() for x in ln.strip("│ ").split("│")] for ln in out.splitlines()
                              if ln.startswith("│ ")) if c}
    assert "connection setup" in rows["T_e"][2] and "network transfer" in rows["T_x"][2]
    assert "PADP eq. 4" in rows["T_st"][2]
    predicted = float(re.search(r"predicted ([0-9.e+-]+) s", out).group(1))
    assert sum(float(rows[k][1].split()[0]) for k in ("T_e", "T_x", "T_st")) == pytest.approx(predicted, rel=1e-4)
    with pytest.raises(SystemExit):
        main(["model", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "T_s = startup" in helptext and "T_t = transfer" in helptext and "T_e = connection setup" in helptext


def _brute_break_even(r1, r2, setup):
    for n in range(1, 1_000_000):
        if n * r1 >= setup + n * r2:
            return n
    return None


def test_setup_and_break_even(capsys, trace_file, wide):
    """advise prints and writes every plan's setup (what pario replicate copies in a store holding
    the traced files, each as large as the trace's furthest request, on --original) and, for the
    best plan, one run without and with it and the break-even runs: a layout plan (padp on a
    hybrid system) relays the traced file out — read, written and read back, priced as the
    reference model prices that copy — and the break-even is counted from the printed figures."""
    from helpers import on_path

    on_path("plan")
    from test_setup_cost import _reference_copy

    from pario.layout import layout_from_dict, parse_layout
    from pario.trace import load

    rc, out, _ = run(capsys, "advise", trace_file, "--system", "padp-6h2s", "--schemes", "padp", "--json")
    assert rc == 0
    d = json.loads(out)
    w = d["whole_job"]
    tr = load(trace_file)
    size = int((tr.offset + tr.length).max())
    prof = load_system("padp-6h2s")
    new = layout_from_dict(d["schemes"]["padp"]["plan"]["layouts"][tr.files[0]], prof)
    want = _reference_copy(parse_layout("fixed:64K", prof), new, [0], [size], prof, 8 << 20, True)
    assert [(c["kind"], c["bytes"]) for c in w["setup"]["copies"]] == [("relayout", size)]
    assert w["setup"]["seconds"] == pytest.approx(want, rel=1e-9)
    assert d["schemes"]["padp"]["setup"]["seconds"] == w["setup"]["seconds"]
    # one run: the distribution model on the original layout and on the plan's (what pario run predicts)
    orig = DistributionModel().trace_cost(tr, parse_layout("fixed:64K", prof), prof).predicted_s
    assert w["run1_s"] == pytest.approx(orig, rel=1e-9) and w["model"] == "distribution"
    assert w["run2_s"] == pytest.approx(d["schemes"]["padp"]["distribution_s"], rel=1e-9)
    assert w["break_even_runs"] == _brute_break_even(w["run1_s"], w["run2_s"], w["setup"]["seconds"])
    assert w["ratio"] == pytest.approx(w["run1_s"] / (w["setup"]["seconds"] + w["run2_s"]))
    rc, out, _ = run(capsys, "advise", trace_file, "--system", "padp-6h2s", "--schemes", "padp")
    text = " ".join(out.split())
    n = w["break_even_runs"]
    assert "setup of the plan of padp: copies relayout" in text
    assert f"{w['setup']['seconds']:.3f} s predicted" in text
    assert (f"pays for its setup after {n} run" if n else "pays for its setup never") in text
