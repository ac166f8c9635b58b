"""Every registered member against its role's contract (``contracts.py``), as scikit-learn's
``check_estimator``: each cost model of :data:`pario.model.MODELS`, each planner of
:data:`pario.plan.PLANNERS`, each emitter of :data:`pario.apply.EMITTERS`, each data plane of
:data:`pario.store.PLANES` (those on Ceph in the ceph suite) — a member added to a
registry is checked here without a line of this file changing.  The contracts can fail: a
deliberately broken member, registered for one test, is refused by each of them."""

from __future__ import annotations

import numpy as np
import pytest
from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture, for the planes on Ceph)
from contracts import check_emitter, check_model, check_plane, check_planner, emitter_plans

from pario import ParioError
from pario.apply import EMITTERS, Emission, Emitter, Item, plan_entries
from pario.layout import ExtentMap, Striped
from pario.model import MODELS, DistributionModel
from pario.model.base import Cost
from pario.plan import PLANNERS
from pario.plan.base import Plan, Planner
from pario.registry import Registry
from pario.store import PLANES
from pario.store.local import LocalBackend


# ---------------------------------------------------------------------- every registered member
@pytest.mark.parametrize("name", list(MODELS))
def test_model_contract(name):
    check_model(name)


@pytest.mark.parametrize("name, params", [("distribution", {"contiguous_alpha": "seq", "network": True}),
                                          ("ci-layout", {"pattern": "sequential"}),
                                          ("hybrid", {"pattern": "random", "three_term": False})])
def test_model_contract_other_parameters(name, params):
    """Other parameter values (a closed form with a fixed α declares independent batches)."""
    check_model(name, params)


@pytest.mark.parametrize("name", list(PLANNERS))
def test_planner_contract(name):
    check_planner(name)


@pytest.fixture(scope="module")
def plans():
    return emitter_plans()


@pytest.mark.parametrize("name", list(EMITTERS))
def test_emitter_contract(name, plans):
    check_emitter(name, plans)


def test_the_plans_cover_every_registered_planner(plans):
    assert {p.scheme for p, _ in plans} >= set(PLANNERS)
    assert any(isinstance(r["layout"], ExtentMap) for p, _ in plans for reps in p.replicas.values() for r in reps)


# ---------------------------------------------------------------------- the registries
# a plane on a Ceph cluster runs its contract on one (tests/ceph_fixture.py: the ceph suite)
ON_CEPH = {"rados"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.ceph) if n in ON_CEPH else n for n in PLANES])
def test_plane_contract(name, tmp_path, request):
    options = {"cluster": request.getfixturevalue("ceph_cluster").dir} if name in ON_CEPH else {}
    check_plane(name, tmp_path, **options)


@pytest.mark.parametrize("registry", [MODELS, PLANNERS, EMITTERS, PLANES])
def test_a_registry_names_its_members_by_their_name(registry):
    for name, cls in registry.items():
        assert cls.name == name
    with pytest.raises(ParioError, match=f"unknown {registry.role} 'nope' \\(known: "):
        registry.get("nope")


def test_a_registry_imports_a_member_on_first_use():
    reg = Registry("thing", {"a": "pario.model.distribution:DistributionModel"})
    assert reg._members["a"] == "pario.model.distribution:DistributionModel"
    assert reg["a"] is DistributionModel and reg._members["a"] is DistributionModel
    with pytest.raises(ValueError):
        reg.register("b", DistributionModel)   # its name is "distribution"


# ---------------------------------------------------------------------- broken members are refused
@pytest.fixture
def registered(request):
    """Register ``(registry, class)`` for one test."""
    registry, cls = request.param
    registry.register(cls.name, cls)
    yield cls.name
    registry.unregister(cls.name)


def striped_plan(planner, trace, system, stripe: int, fib: float = 1.0) -> Plan:
    """A plan of ``stripe``-byte striping on every server, predicted ``fib`` × its model's price."""
    lay = Striped.fixed(stripe, range(system.n))
    t = planner.cost_model().trace_cost(trace, lay, system, by=planner.params["by"]).predicted_s
    return Plan(planner.name, layouts={"*": lay}, predicted_s=fib * t, system_name=system.name)


class FlatteringPlanner(Planner):
    """Fixed 64 KiB striping, but reports 10 % less than its model prices it."""

    name = "flattering"
    defaults = {"model": "distribution", "by": "auto"}

    def plan(self, trace, system, budget=None):
        self.check_budget(budget)
        return striped_plan(self, trace, system, 65536, fib=0.9)


class RestlessPlanner(FlatteringPlanner):
    """Honest about its cost, but its stripe changes from one call to the next."""

    name = "restless"
    calls = [0]

    def plan(self, trace, system, budget=None):
        self.check_budget(budget)
        self.calls[0] += 1
        return striped_plan(self, trace, system, 4096 << (self.calls[0] % 4))


class CarelessPlanner(FlatteringPlanner):
    """Honest and steady, but a negative budget ends in a traceback."""

    name = "careless"

    def plan(self, trace, system, budget=None):
        if budget is not None and budget < 0:
            raise ValueError("math domain error")   # not a one-line ParioError
        return striped_plan(self, trace, system, 65536)


class EagerModel(DistributionModel):
    """The distribution model that charges each batch as if every later batch were in it
    (its first batches cost more when requests are added after them)."""

    name = "eager"
    compiled = False

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto"):
        cost = super().trace_cost(trace, layout, system, batches=batches, by=by)
        if not len(trace):
            return cost
        per = cost.per_batch + 1e-3 * len(trace) / max(cost.batches, 1)
        return Cost(float(per.sum()), cost.servers, cost.batches, per, cost.details)


class NegativeModel(DistributionModel):
    """The distribution model with the sign of its batch times turned: every batch earns
    time back."""

    name = "negative"
    compiled = False

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto"):
        cost = super().trace_cost(trace, layout, system, batches=batches, by=by)
        per = -np.asarray(cost.per_batch, dtype=float)
        return Cost(float(per.sum()), cost.servers, cost.batches, per, cost.details)


class BoastfulEmitter(Emitter):
    """Claims a nearest layout for every entry and emits nothing for it."""

    name = "boastful"

    def emit(self, plan, system):
        out = Emission(self.name, system.name, plan.scheme, [])
        for f, what, _, _ in plan_entries(plan):
            out.items.append(Item(f, what, self.path(f), "nearest", inexact=[{"aspect": "all", "why": "-",
                                                                                "instead": "-"}]))
        return out


@pytest.mark.parametrize("registered, check, why", [
    ((PLANNERS, FlatteringPlanner), check_planner, "the plan priced by its model"),
    ((PLANNERS, RestlessPlanner), check_planner, "another plan for the same trace"),
    ((PLANNERS, CarelessPlanner), check_planner, "a negative budget: raised ValueError"),
    ((MODELS, EagerModel), check_model, "changed with the batches after it"),
    ((MODELS, NegativeModel), check_model, "predicted -"),
    ((EMITTERS, BoastfulEmitter), check_emitter, "'nearest' without commands"),
], indirect=["registered"])
def test_a_contract_refuses_a_broken_member(registered, check, why):
    """A member registered for this test only, broken in one way, fails its role's contract
    with the property it breaks."""
    with pytest.raises(AssertionError, match=why):
        check(registered)


class LeakyPlane(LocalBackend):
    """Forgets to remove a deleted file's data files."""

    def _unlink_data(self, fid: int) -> None:
        pass


class BlindPlane(LocalBackend):
    """Says it can tell whether a store holds data, and never sees any."""

    @classmethod
    def holds_data(cls, server_dirs) -> bool:
        return False


@pytest.mark.parametrize("broken, why", [
    (LeakyPlane, "delete left data files"),
    (BlindPlane, "holds_data is False with a file's data in it"),
])
def test_the_plane_contract_refuses_a_broken_plane(broken, why, tmp_path, monkeypatch):
    """A broken Python half of the local plane (the engine's C half stays: a plane is both),
    in the registry for this test only."""
    monkeypatch.setitem(PLANES._members, "local", broken)
    with pytest.raises(AssertionError, match=why):
        check_plane("local", tmp_path)
