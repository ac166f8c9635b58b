"""PSA (seed 001 §3.3, Algorithm 1 corrected in SPEC §2.2)."""

from __future__ import annotations

import numpy as np
import pytest

from pario.layout import Regions, Striped
from pario.model import HybridModel
from pario.plan import PLANNERS
from pario.plan.psa import PSAPlanner, candidate_pairs, heterogeneous_bytes, psa_layout, totals
from pario.system import Network, Server, System
from pario.trace import Trace

KiB, MiB = 1024, 1 << 20


def test_worked_example_section_3_1():
    """§3.1: 20 requests; PA: each SServer has room for 6 sub-requests, heterogeneous 2T,
    homogeneous 8T → 124T; PSA: room for all 20 at 4T → 80T."""
    S = 3 * 64 * KiB  # request = three stripes (Fig. 2–5: two HServers and one SServer)
    offsets = [np.arange(20) * S]
    s_pa, s_psa = 96 * KiB, 32 * KiB
    cap = 6 * s_pa  # SServer room for six PA sub-requests
    s = np.array([s_pa, s_psa], dtype=float)
    B = heterogeneous_bytes(cap, s, np.array([S, S], dtype=float))
    assert list(B / S) == [6, 18]  # ⌊C_s / s⌋ heterogeneous requests
    cap = 20 * s_psa
    B = heterogeneous_bytes(np.array([6 * s_pa, cap]), s, np.array([S, S], dtype=float))
    got = totals(offsets, t_het=np.array([[2.0], [4.0]]), t_hom=np.array([8.0]), B=B)
    assert list(got) == [124.0, 80.0]
    assert int(np.argmin(got)) == 1  # PSA's pair wins


def test_candidate_pairs_paper_loop_and_exact_grid():
    S, m, n = 512 * KiB, 4, 4
    H, Sx = candidate_pairs(S, m, n, 4096, "paper")
    assert H[0] == 64 * KiB and H[-1] == 128 * KiB and len(H) == 17  # S/(m+n) .. S/m step 4 KB
    assert np.all(m * H + n * Sx == S)
    He, Se = candidate_pairs(S, m, n, 4096, "exact")
    assert He[0] == 0 and len(He) == 33  # 0 .. S/m: PA's side too
    assert np.all(m * He + n * Se == S)
    assert set(zip(H, Sx)) <= set(zip(He, Se))


def hybrid_system(cap, t=1 / (100 * MiB), alpha_h=0.0003):
    servers = tuple([Server(f"H{i}", "hdd", alpha=alpha_h, beta=1 / (60 * MiB)) for i in range(4)]
                    + [Server(f"S{i}", "ssd", alpha=0.0001, beta=1 / (400 * MiB), capacity=cap) for i in range(4)])
    return System("h4s4", servers, Network(e=1e-5, t=t), procs_per_node=2)


def ior(p, size, segments):
    rank = np.tile(np.arange(p), segments)
    k = np.repeat(np.arange(segments), p)
    return Trace.from_arrays(rank, None, np.zeros(len(rank), dtype=np.int8), (k * p + rank) * size,
                             np.full(len(rank), size))


def test_paper_loop_and_exact_search_agree_at_4k():
    sysx = hybrid_system(64 * MiB)  # SServers fill up: PSA regime
    t = ior(16, 512 * KiB, 100)
    a = PSAPlanner(search="paper").plan(t, sysx)
    b = PSAPlanner(search="exact").plan(t, sysx)
    fa, fb = a.details["files"]["file"], b.details["files"]["file"]
    assert (fa["h"], fa["s"]) == (fb["h"], fb["s"])
    assert a.predicted_s == pytest.approx(b.predicted_s)
    # ... and PSA beats PA and DEF here (space-limited SServers)
    assert a.predicted_s < a.baselines["PA"] and a.predicted_s <= a.baselines["DEF"]


def test_search_equals_brute_force_through_the_model():
    """Every candidate's vectorised total equals the hybrid model's cost of the corresponding
    Regions layout (an independent path: layout → per-request Table 3/4 → batches)."""
    sysx = hybrid_system(8 * MiB, t=1 / (300 * MiB))
    t = ior(8, 256 * KiB, 40)
    plan = PSAPlanner(search="exact", granularity=16 * KiB).plan(t, sysx)
    f = plan.details["files"]["file"]
    m = HybridModel()
    for row in f["search"]:
        h, s = int(row["h"]), int(row["s"])
        W = 4 * h + 4 * s
        B = heterogeneous_bytes(8 * MiB, np.array([s], dtype=float), np.array([W], dtype=float))[0]
        lay = psa_layout(sysx, h, s, B, 256 * KiB)
        assert row["cost_s"] == pytest.approx(m.trace_cost(t, lay, sysx).predicted_s, rel=1e-9)
    assert f["cost_s"] == pytest.approx(min(r["cost_s"] for r in f["search"]))
    assert plan.predicted_s == pytest.approx(f["cost_s"])


def test_output_layout_regions_boundary():
    sysx = hybrid_system(64 * MiB)
    t = ior(16, 512 * KiB, 100)
    plan = PLANNERS["psa"]().plan(t, sysx)
    lay = plan.layouts["file"]
    f = plan.details["files"]["file"]
    h, s = f["h"], f["s"]
    assert isinstance(lay, Regions)
    head, tail = lay.regions
    assert head.end == f["heterogeneous_bytes"] == (64 * MiB // s) * (4 * h + 4 * s)
    assert isinstance(head.layout, Striped) and head.layout.stripes == (h,) * 4 + (s,) * 4
    assert tail.layout == Striped.fixed(128 * KiB, (0, 1, 2, 3))  # HServers only, S/m
    assert f["heterogeneous_requests"] == int(np.sum(t.offset < head.end))
    assert set(plan.baselines) == {"DEF", "PA", "RANDOM1", "RANDOM2"}


def test_capacity_shared_by_files_in_order():
    sysx = hybrid_system(4 * MiB)
    a, b = ior(4, 256 * KiB, 20), ior(4, 256 * KiB, 20)
    t = Trace.from_arrays(np.r_[a.rank, b.rank], np.r_[np.zeros(len(a)), np.ones(len(b))].astype(int),
                          np.zeros(len(a) + len(b), dtype=np.int8), np.r_[a.offset, b.offset],
                          np.r_[a.length, b.length], files=("f0", "f1"))
    plan = PSAPlanner().plan(t, sysx)
    f0, f1 = plan.details["files"]["f0"], plan.details["files"]["f1"]
    extent = 20 * 4 * 256 * KiB
    used0 = min(f0["heterogeneous_bytes"], extent) / (4 * f0["h"] + 4 * f0["s"]) * f0["s"]
    assert used0 <= 4 * MiB
    # the second file only gets what the first left on each SServer
    assert f1["heterogeneous_bytes"] // (4 * f1["h"] + 4 * f1["s"]) * f1["s"] <= 4 * MiB - used0 + 1


def test_exact_search_has_heterogeneous_pairs_for_unaligned_request_sizes():
    """A request size that is not a multiple of n·granularity (20 KiB on 4+4 servers with a
    4 KiB grid; 1000 B BTIO-like pieces) must still get candidates that use the SServers.
    (The grid-only search left just h = S/m, s = 0: PSA put such files on HServers only.)"""
    for S in (20 * KiB, 1000):
        H, Sx = candidate_pairs(S, 4, 4, 4096, "exact")
        assert np.any(Sx > 0)
        W = 4 * H + 4 * Sx
        assert np.all(W <= S) and np.all(W > S - 4)  # s = ⌊(S − m·h)/n⌋ loses < n bytes
    # through the planner: SServers with room and a smaller α than the HServers must be used,
    # so the plan is cheaper than the HServer-only layout (independent path: the hybrid model)
    sysx = hybrid_system(1 << 30)
    t = ior(16, 20 * KiB, 10)
    plan = PSAPlanner().plan(t, sysx)
    f = plan.details["files"]["file"]
    assert f["s"] > 0
    hdd_only = HybridModel().trace_cost(t, Striped.fixed(5 * KiB, (0, 1, 2, 3)), sysx).predicted_s
    assert plan.predicted_s < hdd_only


def test_search_is_flat_once_sservers_are_filled():
    """Conservation (PSA §3.1 regime, independent closed form): with free SServers, e = t = 0
    and HServer-bound requests, every pair that fills the SServers exactly leaves the same
    bytes and the same number of sub-requests on the HServers, so Σ_i T_i / p =
    N·α_h + β_h·(N·S − n·C_s)/m for all of them — PSA cannot beat DEF or PA there (the
    paper's worked example with PA's capacity: ⌊4.5 S / (S/2)⌋ = 9 → 9·4T + 11·8T = 124T)."""
    a_h, b_h = 0.0003, 1 / (60 * MiB)
    servers = tuple([Server(f"H{i}", "hdd", alpha=a_h, beta=b_h) for i in range(4)]
                    + [Server(f"S{i}", "ssd", alpha=0.0, beta=0.0, capacity=50 * MiB) for i in range(4)])
    sysx = System("flat", servers, Network(e=0.0, t=0.0), procs_per_node=2)
    S, N, C = 512 * KiB, 1600, 50 * MiB  # fill point s* = C·… = 32 KiB (N rounds of 4 × 32 KiB)
    t = ior(16, S, N // 16)
    plan = PSAPlanner(search="exact", granularity=32 * KiB).plan(t, sysx)
    rows = [r for r in plan.details["files"]["file"]["search"] if r["s"] >= 32 * KiB and r["h"] > 0
            and C % int(r["s"]) == 0]
    assert len(rows) >= 2
    want = N * a_h + b_h * (N * S - 4 * C) / 4
    for r in rows:
        assert r["cost_s"] == pytest.approx(want, rel=1e-9)
    # the worked example with PA's SServer room (6 × 3S/4 = 4.5 S) for PSA's S/2 sub-requests
    B = heterogeneous_bytes(4.5 * 3, np.array([1.5]), np.array([3.0]))  # S = 3 units, s = S/2
    assert float(B[0]) / 3 == 9
    assert float(totals([np.arange(20) * 3.0], np.array([[4.0]]), np.array([8.0]), B)[0]) == 124.0


def test_counts_below_equal_sorted_searchsorted():
    """The planner's sort-free counts against the sorted offsets of each class (the reference
    :func:`totals` takes), on random classes, offsets and candidate boundaries (with ties, inf)."""
    from pario.plan.psa import counts_below, totals_from_counts

    rng = np.random.default_rng(5)
    for trial in range(20):
        n, ncls = int(rng.integers(1, 500)), int(rng.integers(1, 5))
        cls = rng.integers(0, ncls, n)
        off = rng.integers(0, 50, n) * 4096
        B = np.concatenate([rng.integers(0, 60, 7) * 4096.0, [np.inf, 0.0]])
        got = counts_below(cls, off, ncls, B)
        sorted_offs = [np.sort(off[cls == u]) for u in range(ncls)]
        want = np.array([[np.searchsorted(o, b) for b in B] for o in sorted_offs])
        assert np.array_equal(got, want)
        t_het, t_hom = rng.random((len(B), ncls)), rng.random(ncls)
        assert np.array_equal(totals_from_counts(got, np.bincount(cls, minlength=ncls), t_het, t_hom),
                              totals(sorted_offs, t_het, t_hom, B))
