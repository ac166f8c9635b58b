"""CEDA: cost-effective distribution-aware data replication (He & Sun, seed 000 §4).

The four decision steps of CEDA's "decision phase" (seed 000 §4.1, Fig. 6), one module each,
and the planner that runs them (:class:`CEDAPlanner`):

1. **Identifier** (§4.2) — :mod:`pario.plan.ceda_identify`: the access patterns (streams of a
   rank, sequences repeated, patterns of ranks with one template); every request belongs to
   exactly one pattern.
2. **Planner** (§4.3, Algorithm 1) — :mod:`pario.plan.ceda_place`: each pattern's objects
   (the bytes a rank wants, in request order) in ``n`` replica data files, object ``i`` in
   file ``i mod n``; a replica :class:`~pario.layout.ExtentMap` (the RMT content) whose
   default is the original layout; CIDA's placement from the same claim.
3. **Analyzer** (§4.4) — :mod:`pario.plan.ceda_analyze`: the pattern benefit table PBT,
   ``B = T_O − T_N`` (eq. 5) priced by the distribution-aware model (§3), each pattern on its
   own in the trace's batches (minus the flush of dirty bytes, beyond the paper).
4. **Replicator's selection** (§4.5, Algorithm 2) — :mod:`pario.plan.ceda_select`: the
   paper's rule (B > 0, fits in the free replica space, top-n by benefit) and the optimal
   0/1 knapsack; both are reported, the plan uses ``selection``.  The chosen patterns'
   replicas, one per file — :mod:`pario.plan.ceda_combine`.

Baselines: **ORIG** (no replication) and **CIDA** (the paper's ref. [15], "always selects
non-contiguous file access patterns and replicates them contiguously in replica space with
a specific data distribution"): every pattern that is not contiguous is replicated, no
benefit test; its data (same objects, ascending rank) is concatenated into one replica
file per pattern striped round-robin over the servers with the original stripe size
(``cida_stripe``).  With a budget CIDA takes patterns in identifier order while they fit.

The plan (:class:`pario.plan.base.Plan`): ``layouts`` = the original layout(s);
``replicas[file] = [{"name": "ceda", "layout": ExtentMap, ...}]``; routing: reads and
writes of a replicated file go to the replica (the ExtentMap sends bytes it does not cover
to the original layout — CEDA's RMT lookup, §4.6); writes mark the replica dirty and are
flushed to the original when the program ends (§5: ``details["dirty_policy"]``), a copy the
benefit test prices by default (:func:`pario.plan.ceda_analyze.flush_costs`; ``flush=False``:
the paper's B).

At scale (issue 18, 10^6–10^8 requests) every step is a compiled pass over a few request
orders computed in O(n) (:mod:`pario.plan.ceda_kernels`, :mod:`pario.layout.extents_kernel`),
and a model with the compiled capability (``CostModel.compiled``: the distribution model) is
priced by the engine directly; any other model through its ``trace_cost``.  The tests check
every stage against the pre-issue-18 code, kept as an independent oracle in
``tests/oracles/ceda.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import ParioError
from ..layout import Layout
from .base import Plan, Planner
from .ceda_analyze import CEDAAnalysis, analyze
from .ceda_combine import combined_placed, combined_replicas, combined_with_records, plan_cost, records_cost
from .ceda_select import SELECTIONS, select, select_cida


def _routing(files) -> list[dict]:
    rules = []
    for f in files:
        for op in ("read", "write"):
            rules.append({"file": f, "op": op, "rule": "replica", "replica": "ceda"})
    for op in ("read", "write"):
        rules.append({"file": "*", "op": op, "rule": "original"})
    return rules


class CEDAPlanner(Planner):
    """CEDA (seed 000 §4): pattern-based partial replication with a distribution-aware
    benefit test.  Parameters:

    - ``original``: the files' layout (spec, Layout or dict file → layout), default
      ``fixed:64K`` (§6.2: 64 KB stripes on all servers);
    - ``selection``: ``paper`` (Algorithm 2) or ``knapsack`` (optimal); both are reported;
    - ``top_n``: Algorithm 2's n (None = every pattern);
    - ``model`` / ``model_params``: the cost model (default the distribution model, §3);
    - ``by``: batching of the trace (:func:`pario.model.batches.batch_ids`);
    - ``servers``: server indices for the replica files (None = all servers: n = system.n);
    - ``cida_stripe``: stripe of CIDA's replica (None = the original fixed stripe, else 64 KiB);
    - ``flush``: the benefit test counts the copy of dirty replica bytes back to the original
      at the program's end (default, pario's; :func:`flush_costs`), or not (False: the
      paper's analyzer, as ``pario reproduce`` runs it).
    """

    name = "ceda"
    paper = "CEDA seed 000 §4 (cost-effective pattern replication)"
    defaults = {"original": "fixed:64K", "selection": "paper", "top_n": None, "model": "distribution",
                "model_params": None, "by": "auto", "servers": None, "cida_stripe": None, "verify": True,
                "flush": True}

    #: the stages the planner runs: identifier + planner + analyzer (§4.2–4.4) and the
    #: combined replicas (§4.5) — for a model without the compiled capability; with it the
    #: replicas come with their placed records (:func:`~pario.plan.ceda_combine.combined_with_records`)
    analyze_stage = staticmethod(analyze)
    combine_stage = staticmethod(combined_replicas)

    def analyze(self, trace, system) -> CEDAAnalysis:
        """The PBT of the trace (:attr:`analyze_stage`, with the planner's parameters)."""
        p = self.params
        return self.analyze_stage(trace, system, p["original"], self.cost_model(), by=p["by"], servers=p["servers"],
                                  cida_stripe=p["cida_stripe"], flush=p["flush"])

    def combine(self, trace, an: CEDAAnalysis, mask: np.ndarray, system, mode: str = "ceda") -> dict[str, dict]:
        """The replicas of the patterns ``mask``, one per file (CIDA's with ``mode="cida"``;
        :attr:`combine_stage`)."""
        p = self.params
        kw = {} if mode == "ceda" else {"stripe": p["cida_stripe"], "name": "cida"}
        return self.combine_stage(trace, an, mask, system, mode=mode, servers=p["servers"], **kw)

    def plan(self, trace, system, budget: float | None = None) -> Plan:
        p = self.params
        if p["selection"] not in SELECTIONS:
            raise ParioError(f"unknown CEDA selection {p['selection']!r} (expected {', '.join(SELECTIONS)})")
        self.check_budget(budget)
        model = self.cost_model()
        an = self.analyze(trace, system)
        results = {}
        cache: dict[bytes, float] = {}
        if an.orig_s is not None:  # ORIG, priced by the analyzer (T_O of the trace's own requests)
            cache[np.packbits(np.zeros(len(an.patterns), dtype=bool)).tobytes()] = an.orig_s

        compiled = model.compiled  # (then the replicas are priced from their placed records)

        def combined(mask, mode="ceda"):
            """(replicas, their records — None: priced by the model —) of the patterns ``mask``."""
            if not compiled:
                return self.combine(trace, an, mask, system, mode), None
            return combined_with_records(trace, an, mask, system, mode, p["servers"],
                                         p["cida_stripe"] if mode == "cida" else None, mode)

        def cost_of(mask, reps, recs=None):
            key = np.packbits(mask).tobytes() + (b"cida" if any(r["name"] == "cida" for r in reps.values()) else b"")
            if key not in cache:  # (from the placed records when they are all there)
                whole = recs and all(r is not None for r in recs.values())
                cache[key] = (records_cost(trace, an, recs, system, model) if whole
                              else plan_cost(trace, an, reps, system, model))
            return cache[key]

        placed: dict[bytes, tuple] = {}
        for rule in SELECTIONS:
            mask = select(an, budget, rule, p["top_n"])
            mkey = np.packbits(mask).tobytes()
            if mkey not in placed:
                placed[mkey] = combined(mask)
            reps, recs = placed[mkey]
            results[rule] = {"mask": mask, "replicas": reps, "predicted_s": cost_of(mask, reps, recs)}
        cmask = select_cida(an, budget)
        if not cmask.any():
            t_cida = cost_of(cmask, {})
        elif compiled:  # priced from the placed records: CIDA's replicas are not part of the plan (no ExtentMap)
            recs = {f: rec for f, (rec, _) in combined_placed(trace, an, cmask, system, "cida", p["servers"],
                                                                p["cida_stripe"]).items()}
            t_cida = records_cost(trace, an, recs, system, model)
        else:
            t_cida = cost_of(cmask, *combined(cmask, "cida"))
        t_orig = cost_of(np.zeros(len(an.patterns), dtype=bool), {})
        chosen = results[p["selection"]]
        dropped = []
        if p["verify"] and chosen["predicted_s"] > t_orig:
            # Beyond the paper: the per-pattern benefits B (priced on each pattern alone) can
            # add up to a plan that is slower than ORIG on the whole trace (patterns share
            # servers).  Drop selected patterns, least benefit first, until it is not.
            mask = chosen["mask"].copy()
            B = an.pbt["B"].to_numpy()
            for i in sorted(np.flatnonzero(mask), key=lambda k: B[k]):
                mask[i] = False
                dropped.append(int(i))
                mkey = np.packbits(mask).tobytes()
                if mkey not in placed:
                    placed[mkey] = combined(mask)
                reps, recs = placed[mkey]
                t = cost_of(mask, reps, recs)
                if t <= t_orig or not mask.any():
                    break
            chosen = {"mask": mask, "replicas": reps, "predicted_s": t}
        other = "knapsack" if p["selection"] == "paper" else "paper"
        pbt = an.pbt.assign(paper=results["paper"]["mask"], knapsack=results["knapsack"]["mask"], cida=cmask)
        table = an.patterns.table
        details = {
            "budget": None if budget is None else int(budget),
            "selection": p["selection"],
            "verify_dropped": dropped,
            "dirty_policy": "writes go to the replica and mark it dirty; dirty data is flushed to the original when "
                            "the program ends (priced in the PBT's flush column)",
            "patterns": [{"pattern": int(i), **{k: _jsonable(v) for k, v in row.items()}}
                         for i, row in table.iterrows()],
            "pbt": [{"pattern": int(i), **{k: _jsonable(v) for k, v in row.items()}} for i, row in pbt.iterrows()],
            "selections": {
                rule: {"patterns": [int(x) for x in np.flatnonzero(r["mask"])],
                       "benefit": float(an.pbt["B"].to_numpy()[r["mask"]].sum()),
                       "space": int(an.pbt["space"].to_numpy()[r["mask"]].sum()),
                       "predicted_s": r["predicted_s"]}
                for rule, r in results.items()},
            "cida": {"patterns": [int(x) for x in np.flatnonzero(cmask)],
                     "space": int(an.pbt["cida_space"].to_numpy()[cmask].sum()), "predicted_s": t_cida},
        }
        if isinstance(an.original, Layout):
            layouts = {"*": an.original}
        else:
            layouts = dict(an.original)
        return Plan(
            scheme="ceda",
            layouts=layouts,
            replicas={f: [r] for f, r in chosen["replicas"].items()},
            routing=_routing(sorted(chosen["replicas"])),
            predicted_s=chosen["predicted_s"],
            baselines={"ORIG": t_orig, "CIDA": t_cida, f"CEDA-{other}": results[other]["predicted_s"]},
            details=details,
            params=self.plan_params(system),
            system_name=system.name,
        )


def _jsonable(v):
    if v is pd.NA or v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v
