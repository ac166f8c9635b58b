"""Issue 18, planning at scale: the fast paths against the pre-issue-18 exhaustive code.

The oracle is the reference implementation kept in the tests (``oracles/``): the reference
distribution model prices by mapping every request and sorting the sub-requests
(``ReferenceDistributionModel.server_batch_times``), the reference hybrid model prices
request by request and maps for its per-server times (as :func:`mapped_busy`), and the
ci-layout planner given a reference model with ``screen=0`` prices every grid candidate on
the whole trace (a model without the compiled capability: no branch and bound).  Each
scheme's plan from the fast path must equal the reference planner's (layouts, replicas,
routing) and be priced the same; where two candidates tie within floating-point noise, the
fast plan must be priced no worse than the reference optimum.
"""

from __future__ import annotations

import numpy as np
import pytest
from contracts import every_layout as layouts
from oracles.models import ReferenceDistributionModel, ReferenceHybridModel, reference_model
from oracles.planners import reference_planner

from pario import ParioError
from pario.layout import ExtentMap, Grouped, Striped, describe
from pario.model import DistributionModel, HybridModel
from pario.model.batches import batch_ids
from pario.model.common import mapped_busy, per_server_busy
from pario.plan.layout_select import LayoutSelectPlanner
from pario.plan.schemes import make_planner
from pario.system import load_system
from pario.trace import Trace
from pario.workload.ior import ior

KiB = 1024
REL = 1e-9


def random_trace(seed: int, n: int, nfiles: int = 2, ranks: int = 5, times: bool = False) -> Trace:
    rng = np.random.default_rng(seed)
    rank = rng.integers(0, ranks, n)
    f = rng.integers(0, nfiles, n)
    op = rng.integers(0, 2, n)
    if seed % 2:
        off = rng.integers(0, 1 << 22, n)
    else:
        off = (np.arange(n) * 65536) % (1 << 24)
    ln = rng.choice([0, 1, 4096, 65536, 100000, 1 << 20], n)
    st = np.sort(rng.random(n) * 10) if times else None
    en = st + rng.random(n) * 0.05 if times else None
    return Trace.from_arrays(rank, f, op, off, ln, files=[f"f{i}" for i in range(nfiles)], start=st, end=en)


def traces():
    out = {
        "ior-random": ior(8, 64 * KiB, 16 * 64 * KiB, 3, pattern="random", op="both", seed=3),
        "ior-strided": ior(8, 64 * KiB, 64 * KiB, 40, pattern="strided", op="both"),
        "ior-sequential": ior(4, 32 * KiB, 64 * 32 * KiB, 2, pattern="sequential", op="both"),
        "ior-small": ior(6, 48 * KiB, 8 * 48 * KiB, 5, pattern="random", op="write", seed=7),
    }
    for seed in range(3):
        out[f"random-{seed}"] = random_trace(seed, 1200, times=seed == 2)
    return out


TRACES = traces()
SYSTEMS = ("ceda-hdd8", "padp-6h2s", "psa-4h4s")


def shaped_system(name):
    """A built-in profile, or with ``+max`` every other server a rate limiter (``cost = "max"``:
    a batch's T_ser^j = max(T_s, T_t), a sub-request's busy time max(α, s·β)) next to additive
    ones."""
    from dataclasses import replace

    base, _, shape = name.partition("+")
    system = load_system(base)
    if shape != "max":
        return system
    return replace(system, servers=tuple(replace(s, cost="max") if i % 2 else s for i, s in enumerate(system.servers)))


# --------------------------------------------------------------------------- the pricing kernel


@pytest.mark.parametrize("name", sorted(TRACES))
@pytest.mark.parametrize("sysname", ["ceda-hdd8", "padp-6h2s", "padp-6h2s+max"])
def test_engine_prices_as_the_reference(name, sysname):
    system = shaped_system(sysname)
    tr = TRACES[name]
    for by in ("auto", "order", "all", "request"):
        bid = batch_ids(tr, by)
        for lay in layouts(system.n):
            for spec in (lay, {tr.files[0]: lay, "*": Striped.fixed(65536, range(system.n))}):
                for m in (DistributionModel(), DistributionModel(contiguous_alpha="seq", network=True)):
                    fast = m.trace_cost(tr, spec, system, batches=bid)
                    rc = m.request_costs(tr, spec, system, batches=bid)
                    ref = reference_model(m).trace_cost(tr, spec, system, batches=bid)
                    rr = reference_model(m).request_costs(tr, spec, system, batches=bid)
                    assert fast.predicted_s == pytest.approx(ref.predicted_s, rel=1e-12, abs=0)
                    np.testing.assert_allclose(fast.per_batch, ref.per_batch, rtol=1e-12, atol=0)
                    np.testing.assert_allclose(fast.servers, ref.servers, rtol=1e-10, atol=0)
                    assert fast.batches == ref.batches
                    assert fast.details.keys() == ref.details.keys()
                    for k in fast.details:
                        assert fast.details[k] == pytest.approx(ref.details[k], rel=1e-10)
                    np.testing.assert_allclose(rc, rr, rtol=1e-12, atol=0)
    seq = (np.arange(len(tr)) % 3 == 0)
    for lay in layouts(system.n)[:5]:
        fast = per_server_busy(tr, lay, system, seq)
        ref = mapped_busy(tr, lay, system, seq)
        np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=0)


def test_early_stop_is_a_lower_bound():
    """``limit``: the partial sum at the stop exceeds the limit and never exceeds the total."""
    system = load_system("ceda-hdd8")
    tr = TRACES["ior-random"]
    m = DistributionModel()
    bid = batch_ids(tr)
    lay = Striped.fixed(4096, range(8))
    total = m.trace_cost(tr, lay, system, batches=bid).predicted_s
    for frac in (0.0, 0.1, 0.5, 0.99):
        pb, _, _, stopped = m.price(tr, lay, system, batches=bid, limit=frac * total)
        assert stopped and frac * total < pb.sum() <= total * (1 + 1e-12)
    pb, _, _, stopped = m.price(tr, lay, system, batches=bid, limit=total * 1.001)
    assert not stopped and pb.sum() == pytest.approx(total, rel=1e-12)


# --------------------------------------------------------------------------- plans


def _plan_key(plan, system):
    lay = {f: describe(v, system) for f, v in plan.layouts.items()}
    reps = {f: [(r["name"], describe(r["layout"], system) if not isinstance(r["layout"], ExtentMap) else
                 (tuple(r["layout"].offset), tuple(r["layout"].length), tuple(r["layout"].server),
                  tuple(r["layout"].local), tuple(r["layout"].datafile))) for r in rs]
            for f, rs in plan.replicas.items()}
    return lay, reps, plan.routing


def _reference_cost(plan, trace, system):
    """The plan priced by the reference distribution model (for tie checks)."""
    from pario.plan.advise import common_time

    return common_time(plan, trace, system, model=ReferenceDistributionModel())


@pytest.mark.parametrize("name", sorted(TRACES))
@pytest.mark.parametrize("sysname", SYSTEMS)
@pytest.mark.parametrize("scheme", ["padp", "psa", "ceda", "hybrid"])
def test_scheme_plan_equals_the_reference(scheme, sysname, name):
    system = load_system(sysname)
    tr = TRACES[name]
    budgets = (None, 3 << 20) if scheme in ("ceda", "hybrid") else (None,)
    for budget in budgets:
        try:
            fast = make_planner(scheme).plan(tr, system, budget=budget)
        except ParioError:
            with pytest.raises(ParioError):
                reference_planner(scheme).plan(tr, system, budget=budget)
            continue
        ref = reference_planner(scheme).plan(tr, system, budget=budget)
        if _plan_key(fast, system) != _plan_key(ref, system):
            # only a floating-point tie may differ: priced no worse than the reference's plan
            a, b = _reference_cost(fast, tr, system), _reference_cost(ref, tr, system)
            assert a is not None and b is not None and a <= b * (1 + REL), (scheme, name, a, b)
        else:
            assert fast.predicted_s == pytest.approx(ref.predicted_s, rel=1e-9)
            assert fast.baselines.keys() == ref.baselines.keys()
            for k in fast.baselines:
                assert fast.baselines[k] == pytest.approx(ref.baselines[k], rel=1e-9)


@pytest.mark.parametrize("name", sorted(TRACES))
@pytest.mark.parametrize("sysname", SYSTEMS)
@pytest.mark.parametrize("screen", [0, 300])
def test_ci_layout_exact_search_equals_exhaustive(sysname, name, screen):
    """Branch and bound (with or without the sample ordering) = every candidate priced on
    the whole trace by the reference model (pre-issue-18 ``screen=0``)."""
    system = load_system(sysname)
    tr = TRACES[name]
    fast = LayoutSelectPlanner(screen=screen).plan(tr, system)
    ref = LayoutSelectPlanner(screen=0, model=ReferenceDistributionModel()).plan(tr, system)
    assert _plan_key(fast, system) == _plan_key(ref, system) or \
        _reference_cost(fast, tr, system) <= _reference_cost(ref, tr, system) * (1 + REL)
    assert fast.predicted_s == pytest.approx(ref.predicted_s, rel=1e-9)
    for f, info in fast.details["files"].items():
        rinfo = ref.details["files"][f]
        assert info["search_best"]["cost_s"] == pytest.approx(rinfo["search_best"]["cost_s"], rel=1e-9)
        ref_all = {(e["stripe"], e["count"]): e["cost_s"] for e in rinfo["search"]}
        for e in info["search"]:  # candidates priced to the end: their exact cost
            assert e["cost_s"] == pytest.approx(ref_all[(e["stripe"], e["count"])], rel=1e-9)
        for e in info["pruned"]:  # pruned: a lower bound above the optimum
            assert e["lower_bound_s"] <= ref_all[(e["stripe"], e["count"])] * (1 + 1e-9)
            assert e["lower_bound_s"] > info["search_best"]["cost_s"]
        assert len(info["search"]) + len(info["pruned"]) == len(ref_all)
    for k in fast.baselines:
        assert fast.baselines[k] == pytest.approx(ref.baselines[k], rel=1e-9)


def test_hybrid_model_costs_equal_reference():
    system = load_system("padp-6h2s")
    tr = TRACES["ior-random"]
    m = HybridModel()
    lay = Striped(tuple(range(system.n)), tuple(32768 if s.kind == "hdd" else 65536 for s in system.servers))
    fast = m.trace_cost(tr, lay, system)
    ref = ReferenceHybridModel(**m.get_params()).trace_cost(tr, lay, system)
    assert fast.predicted_s == pytest.approx(ref.predicted_s, rel=1e-12)
    np.testing.assert_allclose(fast.servers, ref.servers, rtol=1e-12)


@pytest.mark.parametrize("sysname", ["ceda-hdd8", "padp-6h2s", "padp-6h2s+max", "ceda-hdd8+max"])
@pytest.mark.parametrize("alpha", ["profile", "zero", "seq"])
@pytest.mark.parametrize("network", [False, True])
def test_suffix_bound_is_below_the_remaining_cost(sysname, alpha, network):
    """engine.suffix_bound: for every batch b, the bound ≤ Σ_{b' ≥ b} T_sys(b') of the reference
    model, for layouts on the bound's servers (several stripe sizes, varied stripes, 2-D)."""
    system = shaped_system(sysname)
    m = DistributionModel(contiguous_alpha=alpha, network=network)
    for name in ("ior-random", "random-1", "random-2"):
        tr = TRACES[name]
        bid = batch_ids(tr)
        for servers in ((0,), (1, 2), tuple(range(4)), tuple(range(system.n))):
            bound = m.suffix_bound(tr, system, servers, batches=bid)
            lays = [Striped.fixed(4096, servers), Striped.fixed(1 << 20, servers),
                    Striped(servers, tuple(8192 * (i + 1) for i in range(len(servers))))]
            if len(servers) == 4:
                lays.append(Grouped(((0, 1), (2, 3)), 16384))
            for lay in lays:
                T, rb, _, _ = reference_model(m).server_batch_times(tr, lay, system, batches=bid)
                per = T.max(axis=1)
                rest = np.r_[np.cumsum(per[::-1])[::-1], 0.0]
                assert (bound <= rest * (1 + 1e-12) + 1e-18).all(), (name, servers, lay)
                assert bound[0] > 0
