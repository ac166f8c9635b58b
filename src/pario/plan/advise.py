"""Advice from several schemes on one trace (the work behind ``pario advise``).

:func:`run_advise` runs the planners of the chosen schemes (:mod:`pario.plan.schemes`);
:func:`common_time` re-prices each plan by the distribution model (CEDA seed 000 §3
eq. 1–4, SPEC §2.3: the general evaluator), the one yardstick for every scheme, and
:func:`compare` picks the best plan by it; :func:`collective_view` is the trace the planners
see when its collective requests are planned as their aggregators' requests.

The planners are independent, so on a machine with more than one CPU two of them run at a
time (each in its own thread; the compiled pricing and numpy's sorts release the GIL), when
the trace is small enough — at most :data:`CONCURRENT_REQUESTS` requests — that two planners'
working sets fit the memory a trace of that size is allowed (issue 18: 1 GiB at 10⁶); larger
traces are planned one scheme at a time.  The plans do not depend on it: each is the same as
planned alone (``PARIO_THREADS=1`` plans one scheme at a time).  When what the planners
derived from the trace (:mod:`pario.memo`) outgrows the cache budget, it is dropped between
planners, so that the process holds one planner's working set at a time.
"""

from __future__ import annotations

import time

from .. import ParioError

CONCURRENT_REQUESTS = 2_000_000


def run_advise(trace, system, schemes, *, space=None, original=None, model=None, by=None, paper_benefit=False,
               progress=None):
    """Plan every scheme: (name → (Plan, seconds), name → skip reason).  ``paper_benefit``:
    CEDA's benefit test without the copy back of dirty replica bytes (seed 000 §4.4).
    ``progress(done, total, running)``: called as planners start and finish (``running``: the
    names being planned)."""
    from ..model import engine
    from .schemes import make_planner

    import threading

    results, skipped = {}, {}
    running: list[str] = []
    lock = threading.Lock()

    def report():
        if progress is not None:
            with lock:
                progress(len(results) + len(skipped), len(schemes), list(running))

    def one(name):
        with lock:
            running.append(name)
        report()
        try:
            planner = make_planner(name, original=original, model=model, by=by,
                                   flush=False if paper_benefit else None)
            t0 = time.perf_counter()
            plan = planner.plan(trace, system, budget=space)
            results[name] = (plan, time.perf_counter() - t0)
        except ParioError as exc:
            skipped[name] = str(exc)
        finally:
            with lock:
                running.remove(name)
            report()

    todo = list(schemes)
    width = min(2, engine.workers(), len(todo)) if len(trace) <= CONCURRENT_REQUESTS else 1
    if width > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="pario-plan") as ex:
            list(ex.map(one, todo))
    else:
        from .. import memo

        for name in todo:
            one(name)
            if memo.total_bytes() > memo.budget():  # a huge trace: one planner's derived arrays at a time
                memo.clear_all()
    plans = {name: results[name] for name in schemes if name in results}
    return plans, {name: skipped[name] for name in schemes if name in skipped}


def common_time(plan, trace, system, by=None, seen: list | None = None, model=None) -> float | None:
    """The plan's time under the distribution model (CEDA seed 000 §3, SPEC §2.3: the general
    evaluator), so that schemes priced by different models can be compared.  None for a
    plan routed per request by another model.  ``seen``: a list shared between calls; a plan
    whose layouts equal an earlier plan's gets that plan's time without pricing again.
    ``model``: the evaluator instance (default ``DistributionModel()``; a plan the planner
    priced by the default one is not priced again)."""
    from ..layout import ExtentMap, Layout
    from ..model import DistributionModel
    from ..model.batches import batch_ids

    own = (model is None and plan.params.get("model") == "distribution" and not plan.params.get("model_params")
           and plan.params.get("by", "auto") == (by or "auto") and plan.predicted_s is not None)
    if own:  # already priced by the distribution model with the same batches
        return float(plan.predicted_s)
    if any(r.get("rule") == "cheapest" for r in plan.routing):
        return None
    lay: dict[str, Layout] = {}
    default = plan.layouts.get("*")
    for f in trace.files:
        lf = plan.layouts.get(f, default)
        reps = [r for r in plan.replicas.get(f, []) if r.get("layout") is not None]
        routed = any(r.get("rule") == "replica" and r.get("file") in (f, "*") for r in plan.routing)
        if reps and routed:
            lf = reps[0]["layout"]
        if lf is None:
            return None
        lay[f] = lf
    if not lay:
        return 0.0

    def same(a, b) -> bool:
        return a.keys() == b.keys() and all(
            a[f] is b[f] or (not isinstance(a[f], ExtentMap) and not isinstance(b[f], ExtentMap) and a[f] == b[f])
            for f in a)

    for other, t in seen or []:
        if same(lay, other):
            return t
    model = DistributionModel() if model is None else model
    t = float(model.trace_cost(trace, lay, system, batches=batch_ids(trace, by or "auto")).predicted_s)
    if seen is not None:
        seen.append((lay, t))
    return t


def compare(plans, trace, system, by=None) -> tuple[dict, str]:
    """(name → :func:`common_time`, the best scheme): least time under the distribution model,
    then least time under the scheme's own model (a plan the distribution model cannot price
    comes last).  Plans with equal layouts are priced once."""
    seen: list = []
    common = {name: common_time(plan, trace, system, by, seen) for name, (plan, _) in plans.items()}
    inf = float("inf")
    best = min(plans, key=lambda k: (common[k] if common[k] is not None else inf,
                                     plans[k][0].predicted_s if plans[k][0].predicted_s is not None else inf))
    return common, best


def collective_view(trace, system, cb_buffer=None, cb_nodes=None, nodes=None):
    """``(view, two_phase, collective requests, aggregators)``: the trace the planners see when
    its collective requests are planned as the requests of their two-phase aggregators
    (:func:`pario.plan.collective.aggregator_view`; ``nodes``: the client nodes the traced job
    ran on, when known, :func:`pario.plan.collective.two_phase`)."""
    import numpy as np

    from .collective import aggregator_view, two_phase

    if cb_nodes is not None and cb_nodes < 1:
        raise ParioError("--cb-nodes must be >= 1")  # the CLI's option: the aggregators
    if nodes is not None and nodes < 1:
        raise ParioError("--nodes must be >= 1")
    tp = two_phase(trace, cb_buffer, cb_nodes, nodes=nodes)
    view = aggregator_view(trace, system.procs_per_node, cb_buffer, cb_nodes, nodes=nodes)
    return view, tp, int(trace.collective.sum()), len(np.unique(view.rank[view.collective]))
