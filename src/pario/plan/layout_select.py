"""CI-LAYOUT §4 layout selection, and a stripe size × stripe count search beyond it.

Paper (seed 002 §4): price the whole trace under 1-DH, 1-DV and 2-D and keep the layout
with the least overall cost TC = Σ_i T_i (``TC_optimal = MIN{TC_1-DH, TC_1-DV, TC_2-D}``).
For a shared file the three become a small / large / medium stripe (§4): here, with s the
file's dominant request size (most bytes) and n servers, 1-DH = fixed stripe s/n over all
servers, 1-DV = fixed stripe s, 2-D = :class:`~pario.layout.Grouped` with g groups
(default: the divisor of n nearest √n) and stripe s·g/n
(:func:`pario.model.ci_layout.classic_layouts`).

Beyond the paper (``search=True``, default): a grid over stripe size (powers of two from
``min_stripe`` to ``max_stripe``) × stripe count (1, 2, 4, … n servers, the first k in
system order), priced by the same model, per file; and with ``regions > 1`` per file
region (the file's extent cut into ``regions`` equal byte ranges, each picking its own
best candidate; a :class:`~pario.layout.Regions` layout results).  The report gives the
gain of the best searched layout over the best classic one.

Speed (beyond the paper, issue 18 "planning at scale"): with a model that prices by the
compiled engine (the distribution model: ``CostModel.compiled``) and ``prune=True``
(default) the search is *exact* — the chosen candidate is the least-cost one
of the whole grid priced on the whole trace, as ``screen=0`` finds it — but cheap:

- every candidate is priced by the compiled engine (:mod:`pario.model.engine`): the trace's
  service order is computed once and shared by all candidates, layouts are mapped in the
  kernel;
- branch and bound: candidates are priced in the order of their cost on a sample (8 evenly
  spaced windows of consecutive batches, ``screen`` requests in all, whole batches), and
  pricing a candidate stops as soon as its running Σ_b T_sys exceeds the best total found so
  far (times 1 + 1e-7, a margin over the floating-point summation order): a pruned
  candidate is provably not better (``details.files[f].pruned`` lists them with the partial
  sum, a lower bound of their cost);
- ties are broken as the exhaustive search breaks them (grid order).

``prune=False`` (or a model without the compiled capability) is the pre-issue-18 path: with
more than ``screen`` requests the grid is priced on the sample and only the ``keep`` best
candidates on the whole trace; ``screen=0`` prices every candidate on the whole trace (with
the tests' reference model: their oracle).

The pricing model is a parameter (``model`` = ``ci-layout`` | ``distribution`` |
``hybrid``, or a :class:`~pario.model.base.CostModel` instance); the default
``distribution`` uses the exact sub-requests and so handles any alignment; ``ci-layout`` is
the paper's.
"""

from __future__ import annotations

import numpy as np

from .. import ParioError
from ..layout import Region, Regions, Striped, describe
from ..model import engine
from ..model.batches import batch_ids
from ..model.ci_layout import classic_layouts
from .base import Plan, Planner, file_rows
from ..arrays import unique


def dominant_size(lengths: np.ndarray) -> int:
    sizes, inv = unique(lengths, return_inverse=True)
    return int(sizes[np.argmax(np.bincount(inv.ravel(), weights=lengths.astype(float)))])


def screening_sample(bid: np.ndarray, screen: int, windows: int = 8) -> np.ndarray | None:
    """Rows of ``windows`` evenly spaced runs of consecutive batches, about ``screen`` requests
    in all (whole batches); None when the trace is small enough to price whole."""
    if not screen or len(bid) <= screen:
        return None
    ub, counts = unique(bid, return_counts=True)
    cum = np.cumsum(counts)
    per = max(1, screen // windows)
    starts = np.linspace(0, len(ub) - 1, windows).astype(np.int64)
    keep = np.zeros(len(ub), dtype=bool)
    for a in starts:
        before = cum[a] - counts[a]
        b = int(np.searchsorted(cum, before + per, side="left"))
        keep[a:b + 1] = True
    return np.flatnonzero(keep[np.searchsorted(ub, bid)])


def stripe_grid(min_stripe: int, max_stripe: int) -> list[int]:
    out, s = [], int(min_stripe)
    while s <= max_stripe:
        out.append(s)
        s *= 2
    return out


def count_grid(n: int) -> list[int]:
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


class LayoutSelectPlanner(Planner):
    """CI-LAYOUT §4 (see module docstring).  Parameters: ``model``, ``groups`` (2-D group
    count, None = automatic), ``search`` (stripe size × count grid), ``min_stripe``,
    ``max_stripe``, ``regions`` (per-region search when > 1), ``by`` (batching)."""

    name = "layout-select"
    paper = "CI-LAYOUT seed 002 §4 (layout selection by overall cost)"
    defaults = {"model": "distribution", "groups": None, "search": True, "min_stripe": 4096,
                "max_stripe": 16 << 20, "regions": 1, "by": "auto", "screen": 20000, "keep": 3, "prune": True}

    def plan(self, trace, system, budget=None) -> Plan:
        self.check_budget(budget)
        if len(trace) == 0:
            raise ParioError("layout selection: the trace has no requests")
        prm = self.params
        model = self.cost_model()
        bid = batch_ids(trace, prm["by"])
        layouts, classic_pick, per_file = {}, {}, {}
        for fi, fname in enumerate(trace.files):
            rows, sub, sb = file_rows(trace, fi, bid)
            if len(rows) == 0:
                continue
            s = dominant_size(sub.length)
            classic = classic_layouts(system, s, prm["groups"])
            ccost = {k: c.predicted_s for k, c in model.trace_costs(sub, classic, system, batches=sb).items()}
            best_c = min(ccost, key=ccost.get)
            classic_pick[fname] = classic[best_c]
            info = {"request_size": s, "classic": ccost, "classic_choice": best_c}
            chosen, chosen_cost = classic[best_c], ccost[best_c]
            if prm["search"]:
                cands = {(w, k): Striped.fixed(w, range(k)) for w in stripe_grid(prm["min_stripe"], prm["max_stripe"])
                         for k in count_grid(system.n)}
                rows_s = screening_sample(sb, prm["screen"])
                exact = prm["prune"] and model.compiled
                if exact:
                    scost, pruned = self._exact_search(sub, sb, system, model, cands, rows_s)
                    if rows_s is not None:
                        info["screened_on"] = int(len(rows_s))
                    info["pruned"] = [{"stripe": a, "count": b, "lower_bound_s": v} for (a, b), v in pruned.items()]
                    short = list(scost)
                elif rows_s is not None:
                    part, pb = sub.take(rows_s), sb[rows_s]
                    pre = {key: model.trace_cost(part, lay, system, batches=pb).predicted_s for key, lay in cands.items()}
                    short = sorted(pre, key=pre.get)[: max(1, prm["keep"])]
                    info["screened_on"] = int(len(rows_s))
                else:
                    short = list(cands)
                if not exact:
                    scost = {key: model.trace_cost(sub, cands[key], system, batches=sb).predicted_s for key in short}
                (w, k) = min(scost, key=scost.get)
                info["search_best"] = {"stripe": w, "count": k, "cost_s": scost[(w, k)]}
                info["search"] = [{"stripe": a, "count": b, "cost_s": v} for (a, b), v in scost.items()]
                if scost[(w, k)] < chosen_cost:
                    chosen, chosen_cost = cands[(w, k)], scost[(w, k)]
                if prm["regions"] > 1:
                    reg = self._regions(sub, sb, system, model, {**{("classic", k): v for k, v in classic.items()},
                                                                 **cands}, prm["regions"])
                    if reg is not None:
                        rl, rc, rinfo = reg
                        info["regions"] = rinfo
                        if rc < chosen_cost - 1e-15:
                            chosen, chosen_cost = rl, rc
            info["chosen"] = describe(chosen, system)
            info["cost_s"] = chosen_cost
            info["gain_over_classic"] = ccost[best_c] / chosen_cost - 1 if chosen_cost > 0 else 0.0
            layouts[fname] = chosen
            per_file[fname] = info
        if len(per_file) == 1 and len(trace.files) == 1:
            # one file: the whole trace is that file's requests, priced above with the same batches
            info = next(iter(per_file.values()))
            predicted = info["cost_s"]
            baselines = {name: info["classic"][name] for name in ("1-DH", "1-DV", "2-D")}
            baselines["classic-best"] = info["classic"][info["classic_choice"]]
            return Plan(scheme=self.name, layouts=layouts, predicted_s=predicted, baselines=baselines,
                        details={"model": model.name, "files": per_file}, params=self.plan_params(system),
                        system_name=system.name)
        predicted = model.trace_cost(trace, layouts, system, batches=bid).predicted_s
        baselines = {}
        for name in ("1-DH", "1-DV", "2-D"):
            per = {}
            for fi, fname in enumerate(trace.files):
                rows = np.flatnonzero(trace.file == fi)
                if len(rows):
                    per[fname] = classic_layouts(system, dominant_size(trace.length[rows]), prm["groups"])[name]
            baselines[name] = model.trace_cost(trace, per, system, batches=bid).predicted_s
        baselines["classic-best"] = model.trace_cost(trace, classic_pick, system, batches=bid).predicted_s
        return Plan(scheme=self.name, layouts=layouts, predicted_s=predicted, baselines=baselines,
                    details={"model": model.name, "files": per_file}, params=self.plan_params(system),
                    system_name=system.name)

    @staticmethod
    def _exact_search(sub, sb, system, model, cands, rows_s, margin: float = 1e-7):
        """Exact least-cost candidate by branch and bound (module docstring): (costs of the
        candidates priced to the end, in grid order; pruned candidate → partial sum)."""
        keys = list(cands)
        pos = {key: i for i, key in enumerate(keys)}
        order = keys
        if rows_s is not None:
            part, pb = sub.take(rows_s), sb[rows_s]
            pre = {key: c.predicted_s for key, c in model.trace_costs(part, cands, system, batches=pb).items()}
            order = sorted(keys, key=lambda key: (pre[key], pos[key]))
        best, exact, pruned = np.inf, {}, {}
        # rounds: the sample's best alone (the first incumbent), then as many candidates at a
        # time as there are threads, each stopped at the best total of the rounds before it —
        # the rounds, and so every result, do not depend on the threads' timing
        width = engine.workers()
        rounds = [order[:1]] + [order[i:i + width] for i in range(1, len(order), width)]
        # a lower bound of the batches still to price, per server set (engine.suffix_bound):
        # a candidate on few servers is stopped as soon as it provably cannot win
        srv_of = {key: cands[key].servers_used() for key in keys}
        bounds = {srv: model.suffix_bound(sub, system, srv, batches=sb) for srv in set(srv_of.values())}
        suffix = {key: bounds[srv_of[key]] for key in keys}
        for rnd in rounds:
            limit = best * (1 + margin) if np.isfinite(best) else np.inf
            got = engine.map_threads(lambda key: model.price(sub, cands[key], system, batches=sb, limit=limit,
                                                             suffix=suffix[key]), rnd)
            for key, (per_batch, _, terms, stopped) in zip(rnd, got):
                if stopped:
                    # priced batches + the bound of the rest: still a lower bound of its cost
                    pruned[key] = float(per_batch.sum()) + float(suffix[key][terms["priced"]])
                    continue
                cost = float(per_batch.sum())
                exact[key] = cost
                best = min(best, cost)
        return {key: exact[key] for key in keys if key in exact}, pruned

    @staticmethod
    def _regions(sub, sb, system, model, cands, nreg):
        """Per-region choice: cut [0, extent) into nreg equal ranges (rounded to 1 MiB) and
        pick, per range, the candidate with the least cost on the requests starting there."""
        extent = int((sub.offset + sub.length).max())
        step = max(1 << 20, -(-(-(-extent // nreg)) // (1 << 20)) * (1 << 20))  # ⌈extent/nreg⌉ up to MiB
        bounds = list(range(0, extent, step))
        if len(bounds) < 2:
            return None
        regions, picks = [], []
        for a_i, a in enumerate(bounds):
            b = bounds[a_i + 1] if a_i + 1 < len(bounds) else None
            mask = (sub.offset >= a) & ((sub.offset < b) if b is not None else True)
            if not mask.any():
                key = next(iter(cands))
            else:
                part = sub.take(mask)
                costs = {key: model.trace_cost(part, lay, system, batches=sb[mask]).predicted_s
                         for key, lay in cands.items()}
                key = min(costs, key=costs.get)
            picks.append(str(key))
            regions.append(Region(a, b, cands[key]))
        layout = Regions(tuple(regions))
        cost = model.trace_cost(sub, layout, system, batches=sb).predicted_s
        return layout, cost, {"bounds": bounds, "picks": picks, "cost_s": cost}
