"""Hybrid replication (CI-LAYOUT seed 002 §5): per-request routing to the cheapest replica."""

from __future__ import annotations

import numpy as np
import pytest

from pario.layout import Striped
from pario.model import DistributionModel
from pario.model.batches import batch_ids
from pario.plan.base import Plan
from pario.plan.hybrid import HybridReplicationPlanner, replica_layouts
from pario.system import Network, Server, System, load_system
from pario.trace import Trace
from pario.workload.ior import ior

MiB = 1 << 20


def two_phase() -> Trace:
    """Phase A: 16 ranks read 4 MiB blocks (file a.dat, one server per request is best:
    1-DV / 4 MiB stripes); phase B: rank 0 alone reads 4 MiB requests (b.dat, best spread
    over all servers: 1-DH / 16 KiB stripes)."""
    a = ior(16, 4 * MiB, 4 * MiB, 4, pattern="strided", op="read", file="a.dat")
    b = ior(1, 4 * MiB, 8 * 4 * MiB, 1, pattern="sequential", op="read", file="b.dat")
    return Trace.concat([a, b])


def test_routing_beats_every_single_layout():
    system = load_system("ceda-hdd8")
    trace = two_phase()
    plan = HybridReplicationPlanner().plan(trace, system)
    singles = {k: v for k, v in plan.baselines.items() if k != "ORIG"}
    assert set(singles) == {"16 KiB", "256 KiB", "4 MiB"}
    assert plan.predicted_s < min(singles.values())
    routed = plan.details["routed"]
    assert routed["4 MiB"]["requests"] == 64  # phase A
    assert routed["16 KiB"]["requests"] == 8  # phase B
    # oracle: the distribution model shares a batch's time by bytes, so routing is per batch and
    # the plan costs Σ_b min_k T_k(b) (phases use different files: no cross-replica contiguity)
    model, bid = DistributionModel(), batch_ids(trace)
    per = np.vstack([model.trace_cost(trace, lay, system, batches=bid).per_batch
                     for lay in replica_layouts("stripes", trace, system).values()])
    assert plan.predicted_s == pytest.approx(per.min(axis=0).sum())
    # the single-layout baselines (taken from the request-cost matrix) are the layouts' costs
    assert [plan.baselines[k] for k in ("16 KiB", "256 KiB", "4 MiB")] == pytest.approx(per.sum(axis=1).tolist())


def test_routing_is_argmin_of_request_costs_with_closed_form_model():
    """PADP/PSA closed form (HybridModel), every cost derived by hand.

    System: 4 HServers (α_h = 5 ms, β_h = 1e-7 s/B) + 4 SServers (α_s = 0.5 ms, β_s = 6e-8 s/B),
    e = 1 ms, t = 1e-8 s/B, c = 2 processes per node.  Trace: batch A = ranks 0–7 read 1e6 B
    each from a.dat (p = 8, c = 2); batch B = rank 0 alone reads 1e6 B from b.dat (p = 1, c = 1);
    no request continues its rank's previous one (random α).  Replicas:
    R0 = fixed 125000 B on all 8; R1 = ⟨h = 50000, s = 200000⟩; R2 = 250000 B on the 4 SServers.
    T = max(c·(servers used), p)·e + max(c·r·t, p·h·t, p·s·t) + p·max(α_h + hβ_h, α_s + sβ_s);
    per-request cost T/p.
      A, R0: 16e=0.016 + max(0.02, 0.01, 0.01)=0.02 + 8·max(0.0175, 0.008)=0.14   → T 0.176,  /8 = 0.022
      A, R1: 0.016 + max(0.02, 0.004, 0.016)=0.02 + 8·max(0.010, 0.0125)=0.1    → T 0.136,  /8 = 0.017
      A, R2: max(2·4, 8)e=0.008 + max(0.02, 0.02)=0.02 + 8·0.0155=0.124          → T 0.152,  /8 = 0.019
      B, R0: max(8, 1)e=0.008 + max(0.01, 0.00125)=0.01 + 0.0175                  → 0.0355
      B, R1: 0.008 + 0.01 + max(0.010, 0.0125)=0.0125                              → 0.0305
      B, R2: max(4, 1)e=0.004 + max(0.01, 0.0025)=0.01 + 0.0155                    → 0.0295
    So A routes to R1, B to R2; plan = 8·0.017 + 0.0295 = 0.1655 < best single R1 = 0.136 + 0.0305."""
    hs = tuple(Server(f"H{i}", "hdd", alpha=0.005, beta=1e-7) for i in range(4))
    ss = tuple(Server(f"S{i}", "ssd", alpha=0.0005, beta=6e-8) for i in range(4))
    system = System("h4s4-round", hs + ss, Network(e=0.001, t=1e-8), procs_per_node=2)
    r = 1_000_000
    trace = Trace.from_arrays(list(range(8)) + [0], [0] * 8 + [1], [0] * 9, [k * r for k in range(8)] + [0], [r] * 9,
                              files=("a.dat", "b.dat"))
    lays = [Striped.fixed(125_000, range(8)), Striped(tuple(range(8)), (50_000,) * 4 + (200_000,) * 4),
            Striped((4, 5, 6, 7), (250_000,) * 4)]
    planner = HybridReplicationPlanner(model="hybrid", replicas=lays)
    C, choice = planner.route(trace, system, lays)
    hand = np.array([[0.022] * 8 + [0.0355], [0.017] * 8 + [0.0305], [0.019] * 8 + [0.0295]])
    assert C == pytest.approx(hand, rel=1e-12)
    assert choice.tolist() == [1] * 8 + [2]
    plan = planner.plan(trace, system)
    assert plan.predicted_s == pytest.approx(8 * 0.017 + 0.0295, rel=1e-12)
    singles = [v for k, v in plan.baselines.items() if k != "ORIG"]
    assert singles == pytest.approx([0.176 + 0.0355, 0.136 + 0.0305, 0.152 + 0.0295], rel=1e-12)
    assert [v["requests"] for v in plan.details["routed"].values()] == [0, 8, 1]


def test_budget_limits_replicas():
    system = load_system("ceda-hdd8")
    trace = two_phase()
    full = HybridReplicationPlanner().plan(trace, system)
    one = HybridReplicationPlanner().plan(trace, system, budget=0)  # no extra copy: one layout
    assert len(one.details["replica_names"]) == 1 and one.replicas["*"] == []
    assert one.predicted_s == pytest.approx(min(v for k, v in full.baselines.items() if k != "ORIG"))
    size = full.details["extra_space"] // 2  # one extra copy
    two = HybridReplicationPlanner().plan(trace, system, budget=size)
    assert len(two.details["replica_names"]) == 2 and two.details["extra_space"] <= size
    assert full.predicted_s <= two.predicted_s + 1e-12 <= one.predicted_s + 2e-12


def test_classic_replicas_and_plan_file(tmp_path):
    system = load_system("ceda-hdd8")
    trace = two_phase()
    plan = HybridReplicationPlanner(replicas="classic").plan(trace, system)
    assert set(plan.details["replica_names"]) == {"1-DH", "2-D", "1-DV"}
    assert plan.routing == [{"file": "*", "op": "read", "rule": "cheapest"},
                            {"file": "*", "op": "write", "rule": "cheapest"}]
    path = tmp_path / "p.json"
    plan.save(path, system)
    back = Plan.load(path, system)
    assert back.scheme == "hybrid" and len(back.replicas["*"]) == 2
    assert back.predicted_s == pytest.approx(plan.predicted_s)
    spec = HybridReplicationPlanner(replicas=["fixed:64K", "fixed:1M"]).plan(trace, system)
    assert set(spec.details["replica_names"]) == {"fixed:64K", "fixed:1M"}
    assert isinstance(spec.layouts["*"], Striped)


def test_writes_only_pay_the_cheapest_replica():
    system = load_system("ceda-hdd8")
    w = ior(16, 4 * MiB, 4 * MiB, 2, pattern="strided", op="write", file="w.dat")
    plan = HybridReplicationPlanner().plan(w, system)
    assert plan.predicted_s == pytest.approx(min(v for k, v in plan.baselines.items() if k != "ORIG"))
    assert plan.details["lazy_sync_bytes"] == 2 * int(w.length.sum())


@pytest.mark.parametrize("budget", [None, 0, 40 * MiB])
def test_chunked_route_costs_equal_the_whole_matrix(monkeypatch, budget):
    """RouteCosts rebuilds C[k, i] = T_sys,k(batch) · share_i by chunks of requests: the plan
    (choice, subset, baselines) equals the one from the whole cost matrix (the reference
    distribution model: no compiled capability, so its request costs as a matrix)."""
    from oracles.models import ReferenceDistributionModel

    from pario.plan.hybrid import RouteCosts

    system = load_system("ceda-hdd8")
    tr = Trace.concat([two_phase(), ior(8, 65536, 16 * 65536, 3, pattern="random", op="both", seed=4, file="c.dat")])
    ref = HybridReplicationPlanner(model=ReferenceDistributionModel()).plan(tr, system, budget=budget)
    monkeypatch.setattr(RouteCosts, "CHUNK", 7)
    got = HybridReplicationPlanner().plan(tr, system, budget=budget)
    assert got.details["routed"] == ref.details["routed"]
    assert got.details["replica_names"] == ref.details["replica_names"]
    assert got.predicted_s == pytest.approx(ref.predicted_s, rel=1e-9)
    for k in ref.baselines:
        assert got.baselines[k] == pytest.approx(ref.baselines[k], rel=1e-9)
    assert got.details["estimated_s"] == pytest.approx(ref.details["estimated_s"], rel=1e-9)
