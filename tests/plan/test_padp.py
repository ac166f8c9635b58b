"""PADP (seed 003 §3.3): LPs vs brute force, the h = 0 regime, rounding, the planner."""

from __future__ import annotations

import numpy as np
import pytest

from pario.layout import Striped
from pario.model import HybridModel
from pario.plan import PLANNERS, Plan
from pario.plan.padp import PADPPlanner, padp_F, padp_lps, solve_padp
from pario.system import Network, Server, System, load_system
from pario.trace import Trace

KiB, MiB = 1024, 1 << 20

CASES = [
    # p, c, m, n, r, e, t, alpha_h, beta_h, alpha_s, beta_s
    (8, 1, 6, 2, 512 * KiB, 0.0003, 7.947e-9, 0.0003, 7.947e-9, 0.0001, 1.907e-9),
    (16, 2, 4, 4, 512 * KiB, 0.0003, 1e-9, 0.0003, 1 / (60 * MiB), 0.0001, 1 / (400 * MiB)),
    (4, 4, 6, 2, 2 * MiB, 0.0002, 1e-10, 0.004, 1 / (80 * MiB), 0.00005, 1 / (500 * MiB)),
    (32, 1, 3, 1, 64 * KiB, 0.0001, 5e-9, 0.0002, 1 / (100 * MiB), 0.0003, 1 / (300 * MiB)),
]
KEYS = ("p", "c", "m", "n", "r", "e", "t", "alpha_h", "beta_h", "alpha_s", "beta_s")


def brute(kw, full=True, three_term=True, points=400001):
    H = np.linspace(0, kw["r"] / kw["m"], points)
    S = (kw["r"] - kw["m"] * H) / kw["n"]
    T = padp_F(H, S, **kw, full=full, three_term=three_term)
    return float(T.min()), float(H[T.argmin()])


@pytest.mark.parametrize("case", CASES)
def test_padp_optimum_equals_brute_force_grid_minimum(case):
    kw = dict(zip(KEYS, case))
    sol = solve_padp(**kw)
    grid_min, _ = brute(kw)
    # the LP optimum is never worse than any grid point, and the grid gets within its resolution
    assert sol["T"] <= grid_min * (1 + 1e-9)
    assert grid_min <= sol["T"] * (1 + 1e-5)
    assert kw["m"] * sol["h"] + kw["n"] * sol["s"] == pytest.approx(kw["r"])


@pytest.mark.parametrize("three_term", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_paper_lps_minimise_eq5_literally(case, three_term):
    """eq. 6–13: the best of the LPs equals the brute-force minimum of F (eq. 5 as printed,
    α_h kept at h = 0) over m·h + n·s = r."""
    kw = dict(zip(KEYS, case))
    lps = [lp for lp in padp_lps(**kw, three_term=three_term) if lp["status"] == 0]
    assert len(padp_lps(**kw, three_term=three_term)) == (6 if three_term else 4)
    best = min(lp["F"] for lp in lps)
    grid_min, _ = brute(kw, full=False, three_term=three_term)
    assert best <= grid_min * (1 + 1e-9)
    assert grid_min <= best * (1 + 1e-5)
    for lp in lps:  # each LP's F is F evaluated at its own optimum
        assert lp["F"] == pytest.approx(float(padp_F(lp["h"], lp["s"], **kw, full=False, three_term=three_term)),
                                        rel=1e-7)


def test_small_requests_with_large_hdd_startup_go_to_sservers_only():
    """PADP §4.2: 128 KB requests on 4 SServers give ⟨0 KB, 32 KB⟩ when α_h dominates."""
    sol = solve_padp(p=16, c=2, m=4, n=4, r=128 * KiB, e=0.0003, t=7.947e-9, alpha_h=0.004,
                     beta_h=1 / (60 * MiB), alpha_s=0.0001, beta_s=1 / (400 * MiB))
    assert (sol["h_round"], sol["s_round"]) == (0, 32 * KiB)
    assert sol["h"] == 0.0 and sol["s"] == pytest.approx(32 * KiB)


@pytest.mark.parametrize("case", CASES)
def test_rounding_to_granularity(case):
    kw = dict(zip(KEYS, case))
    sol = solve_padp(**kw, granularity=4096)
    assert sol["h_round"] % 4096 == 0 and sol["s_round"] % 4096 == 0
    assert sol["rounding_loss"] >= -1e-15
    assert sol["T_round"] == pytest.approx(float(padp_F(sol["h_round"], sol["s_round"], **kw)))
    # the chosen rounded pair is the best of the 4 grid neighbours of the exact optimum
    g = 4096
    neigh = [(a, b) for a in {np.floor(sol["h"] / g) * g, np.ceil(sol["h"] / g) * g}
             for b in {np.floor(sol["s"] / g) * g, np.ceil(sol["s"] / g) * g} if a + b > 0]
    assert sol["T_round"] == pytest.approx(min(float(padp_F(a, b, **kw)) for a, b in neigh))


def ior(p, size, segments, op=0):
    rank = np.tile(np.arange(p), segments)
    k = np.repeat(np.arange(segments), p)
    return Trace.from_arrays(rank, None, np.full(len(rank), op, dtype=np.int8), (k * p + rank) * size,
                             np.full(len(rank), size))


def test_planner_matches_solver_and_beats_baselines(tmp_path):
    sysx = load_system("padp-6h2s")
    t = ior(8, 512 * KiB, 10)
    plan = PLANNERS["padp"]().plan(t, sysx)
    lay = plan.layouts["file"]
    assert isinstance(lay, Striped)
    h = {lay.stripes[i] for i in sysx.of_kind("hdd")}
    s = {lay.stripes[i] for i in sysx.of_kind("ssd")}
    cl = plan.details["files"]["file"]["classes"][0]["solution"]
    assert (h, s) == ({cl["h_round"]}, {cl["s_round"]})
    # the prediction is the hybrid model's cost of the chosen layout, and no baseline is cheaper
    assert plan.predicted_s == pytest.approx(HybridModel().trace_cost(t, lay, sysx).predicted_s)
    assert set(plan.baselines) == {"DEF", "RANDOM1", "RANDOM2"}
    assert all(plan.predicted_s <= v * (1 + 1e-12) for v in plan.baselines.values())
    # plan file round trip
    path = tmp_path / "plan.json"
    plan.save(path, sysx)
    back = Plan.load(path, sysx)
    assert back.layouts == plan.layouts and back.scheme == "padp"
    assert back.predicted_s == pytest.approx(plan.predicted_s)


def test_planner_mixed_sizes_picks_cheapest_class_candidate():
    sysx = System("h", tuple([Server(f"H{i}", "hdd", alpha=0.004, beta=1 / (60 * MiB)) for i in range(4)]
                             + [Server(f"S{i}", "ssd", alpha=0.0001, beta=1 / (400 * MiB)) for i in range(4)]),
                  Network(0.0003, 1e-9), procs_per_node=2)
    t = Trace.concat([ior(16, 128 * KiB, 6), ior(16, 2 * MiB, 6)])
    plan = PADPPlanner().plan(t, sysx)
    cands = plan.details["files"]["file"]["candidates"]
    assert len(cands) == 2
    m = HybridModel()
    for c in cands:  # each candidate's cost is the model's cost of that layout on the whole file
        lay = Striped(tuple(range(8)), (c["h"],) * 4 + (c["s"],) * 4)
        assert c["cost_s"] == pytest.approx(m.trace_cost(t, lay, sysx).predicted_s)
    assert plan.details["files"]["file"]["cost_s"] == pytest.approx(min(c["cost_s"] for c in cands))
