"""``pario run``'s prediction of run 1 and run 2 from run 1's trace and the plan as it will run.

:func:`predict` gives the predicted I/O time of each run (``ORIG``: run 1, on the layouts the
files had; ``plan``: run 2, with the plan applied) with the model ``pario advise`` used for
the same plan, so that advise and run cannot disagree on a plan:

- **Collective requests** (two-phase I/O): both runs are priced by
  :func:`pario.plan.order_select.collective_time`, the simulated two-phase run that advise
  prices every collective order with — HACIO seed 004 §2.2's cost model (one file domain per
  aggregator, ``cb_buffer`` bytes per cycle in the order's sequence, all aggregators
  synchronised at every cycle, a cycle as long as its busiest server).  Run 1 runs the order
  the trace ran with, run 2 the plan's ``collective_order`` (:func:`orders`: as
  :mod:`pario.mpi` and the served runtime choose it, a ``pario_order`` hint or
  ``PARIO_ORDER`` winning over the plan, ROMCIO by default); run 1 on the original layouts,
  run 2 on the plan's layouts, replicas and routing.  The aggregators and the buffer are the
  trace's own hints (:func:`pario.plan.collective.two_phase`: the aggregator ranks it
  recorded, else its ``cb_nodes`` placed as ROMIO places it on the ``nodes`` the ranks ran
  on — ``cb_config_list`` ``*:1`` by default, one aggregator per node —, and its
  ``cb_buffer_size``, else ROMIO's 16 MiB), the settings ``pario advise --nodes`` resolves.
  So a plan that only changes the order predicts a change, and a plan's layout is priced
  with the aggregators and buffer the job runs with.
- **Independent requests** of the same trace: the distribution model (CEDA seed 000 §3
  eq. 1–4) on the original and the plan's layouts, added to the collective time (the
  phases are taken as one after the other).
- A trace without collective requests keeps the plan's own figures (its ``ORIG`` baseline
  and ``predicted_s``, as advise printed them), or — when the plan relaid files in the
  store or has no ``ORIG`` baseline — both runs priced by the distribution model.
"""

from __future__ import annotations

import os

import numpy as np

from .. import ParioError

MODEL_TWO_PHASE = "two-phase simulation (seed 004 §2.2)"


def order_hint(trace, environ=None) -> str | None:
    """The collective order the runs are told outside the plan: the trace's ``pario_order``
    hint (what :mod:`pario.mpi` recorded the file was opened with), else ``PARIO_ORDER`` of
    ``environ`` (the loop passes it to every run alike); None when neither names an order
    (the runtimes then take the plan's, else ROMCIO)."""
    from ..plan.collective import ORDERS

    env = os.environ if environ is None else environ
    meta = getattr(trace, "meta", None)
    for v in ((meta.hint("pario_order") if meta is not None else None), env.get("PARIO_ORDER")):
        if v and str(v).strip().lower() in ORDERS:
            return str(v).strip().lower()
    return None


def orders(plan, hint: str | None = None) -> dict:
    """``{"run1", "run2"}``: the collective order of each run, chosen as the runtimes choose it
    (:func:`pario.plan.collective.order_for`: the hint, else the plan's, else ROMCIO); run 1
    has no plan."""
    from ..plan.collective import order_for

    return {"run1": order_for(None, hint), "run2": order_for(plan, hint)}


def _independent_s(trace, layouts: dict, system, by: str = "auto") -> float:
    """The distribution model's time of ``trace`` (CEDA seed 000 §3 eq. 1–4), batched ``by``
    (:mod:`pario.model.batches`; the plan's own batching: :func:`pario.run.compare.plan_batching`)."""
    from ..model import DistributionModel
    from ..model.batches import batch_ids

    if len(trace) == 0:
        return 0.0
    return float(DistributionModel().trace_cost(trace, layouts, system, batches=batch_ids(trace, by)).predicted_s)


def collective_prediction(trace, plan, system, orig_layouts: dict | None = None, *, nodes: int | None = None,
                          hint: str | None = None) -> dict | None:
    """Both runs of a trace with collective requests (module docstring): ``{"ORIG", "plan",
    "model", "order": {"run1", "run2"}, "two_phase", "parts": {"collective": {"ORIG",
    "plan"}, "independent": {"ORIG", "plan"} | None}}``.  None when the trace has no
    collective request or a file has no original layout."""
    from ..plan.collective import two_phase
    from ..plan.order_select import collective_time
    from .compare import plan_batching, plan_layouts

    coll = np.asarray(trace.collective, dtype=bool)
    if not coll.any():
        return None
    orig, new = plan_layouts(plan, trace.files, orig_layouts)
    if any(v is None for v in orig.values()):
        return None
    tp = two_phase(trace.take(coll), nodes=nodes)     # as collective_time resolves them
    ords = orders(plan, hint)
    # run 2: the plan over the original layouts of the files it leaves unchanged (as advise's
    # order choice: the plan alone when it has a layout for every file)
    base = {f: orig[f] for f in trace.files if plan.layout_for(f) is None} or None
    t1 = collective_time(trace, system, ords["run1"], orig, nodes=nodes)
    t2 = collective_time(trace, system, ords["run2"], base, plan=plan, nodes=nodes)
    ind = None
    if not coll.all():
        rest = trace.take(~coll)
        by = plan_batching(plan)
        ind = {"ORIG": _independent_s(rest, orig, system, by), "plan": _independent_s(rest, new, system, by)}
    return {"ORIG": t1 + (ind["ORIG"] if ind else 0.0), "plan": t2 + (ind["plan"] if ind else 0.0),
            "model": MODEL_TWO_PHASE + (" + distribution (independent requests)" if ind else ""),
            "order": ords, "two_phase": tp.to_dict(),
            "parts": {"collective": {"ORIG": t1, "plan": t2}, "independent": ind}}


def predict(trace, plan_path, system, orig_layouts: dict | None = None, *, relaid=(), nodes: int | None = None,
            hint: str | None = None) -> tuple[dict, dict | None]:
    """``(predicted, model_servers)`` for ``pario run``'s summary: ``predicted`` =
    :func:`predict_plan`'s, ``model_servers`` the per-server prediction of
    :func:`pario.run.compare.predicted_servers` (None when it cannot be made)."""
    from ..plan.base import Plan
    from .compare import predicted_servers

    from ..plan.collective import romio_view

    plan = Plan.load(plan_path, system)
    trace = romio_view(trace)
    try:
        model_servers = predicted_servers(trace, plan, system, orig_layouts, nodes=nodes)
    except ParioError:
        model_servers = None
    return predict_plan(trace, plan, system, orig_layouts, relaid=relaid, nodes=nodes, hint=hint,
                        model_servers=model_servers), model_servers


def predict_plan(trace, plan, system, orig_layouts: dict | None = None, *, relaid=(), nodes: int | None = None,
                 hint: str | None = None, model_servers=False) -> dict:
    """The predicted I/O time of run 1 and run 2 for a :class:`pario.plan.base.Plan` — what
    ``pario run`` predicts and ``pario advise`` sets against the plan's setup (module
    docstring): ``{"scheme", "system", "ORIG", "plan", "ratio", "model", "order",
    "two_phase", "parts"}`` (``model`` None: the plan's own figures).  ``relaid``: the files
    ``pario replicate`` gives a new layout; ``nodes``: the client nodes the ranks ran on, when
    known; ``hint``: :func:`order_hint`; ``model_servers``: :func:`pario.run.compare.predicted_servers`'s
    answer when already made (False: made here if needed)."""
    from ..plan.collective import romio_view
    from .compare import predicted_servers

    trace = romio_view(trace)       # the collective calls ROMIO runs as independent I/O are independent
    base_s = plan.baselines or {}
    pred = {"scheme": plan.scheme, "system": system.name, "ORIG": base_s.get("ORIG"), "plan": plan.predicted_s,
            "model": None, "order": None, "two_phase": None, "parts": None}
    coll = collective_prediction(trace, plan, system, orig_layouts, nodes=nodes, hint=hint) \
        if trace.collective.any() else None
    if coll is not None:
        pred.update(coll)
    elif pred["ORIG"] is None or relaid:
        if model_servers is False:
            try:
                model_servers = predicted_servers(trace, plan, system, orig_layouts, nodes=nodes)
            except ParioError:
                model_servers = None
        if model_servers is not None:
            # the plan's own baselines do not price the layouts run 1 had (a layout plan made with
            # its own model): both runs priced by the distribution model (CEDA seed 000 eq. 1–4)
            pred.update(ORIG=model_servers["ORIG"]["predicted_s"], plan=model_servers["plan"]["predicted_s"],
                        model="distribution")
    pred["ratio"] = (pred["ORIG"] / pred["plan"]) if pred["ORIG"] and pred["plan"] else None
    return pred


__all__ = ["predict", "predict_plan", "collective_prediction", "orders", "order_hint", "MODEL_TWO_PHASE"]
