"""``pario advise``: every scheme through the Planner interface, JSON and plan files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pario.cli import main
from pario.model import DistributionModel
from pario.plan import PLANNERS
from pario.plan.base import Plan
from pario.plan.schemes import SCHEMES, parse_schemes
from pario.system import load_system
from pario.trace import save
from pario.workload.ior import ior

TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.parquet"
    save(ior(16, 65536, 16 * 65536, 2, pattern="random", op="both", seed=5), path)
    return path


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


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
    if "layout-select" not in PLANNERS:
        pytest.skip("layout-select planner not available")
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
    assert set(d["schemes"]) | set(d["skipped"]) == set(SCHEMES)
    for name in ("ceda", "hybrid"):
        assert name in d["schemes"]
    for name, s in d["schemes"].items():
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
