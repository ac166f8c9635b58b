"""Hybrid replication (CI-LAYOUT seed 002 §5): per-request routing to the cheapest replica."""

from __future__ import annotations

import numpy as np
import pytest

from pario.layout import Striped
from pario.model import DistributionModel, HybridModel
from pario.model.batches import batch_ids
from pario.plan.base import Plan
from pario.plan.hybrid import HybridReplicationPlanner, replica_layouts
from pario.system import load_system
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
    system = load_system("psa-4h4s")
    trace = two_phase()
    planner = HybridReplicationPlanner(model="hybrid")
    lays = list(replica_layouts("stripes", trace, system).values())
    C, choice = planner.route(trace, system, lays)
    m = HybridModel()
    for k, lay in enumerate(lays):  # independent per-replica evaluation
        assert np.allclose(C[k], m.request_costs(trace, lay, system))
    assert (C[choice, np.arange(len(trace))] <= C.min(axis=0) + 1e-15).all()
    plan = planner.plan(trace, system)
    assert plan.predicted_s <= min(v for k, v in plan.baselines.items() if k != "ORIG") + 1e-12


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
