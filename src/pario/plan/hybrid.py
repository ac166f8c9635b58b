"""Hybrid data replication with per-request routing (CI-LAYOUT, Song et al., seed 002 §5).

"Each file has multiple copies with different data layout policies … For each data
access, we first calculate the costs under these replicas, and then select one replica
with the lowest access cost" (§5.1).  Writes also go to the cheapest replica; the other
replicas are synchronised lazily in the background, so "for write operations, only data
access cost on the optimal replica is counted" (§5.1).

:class:`HybridReplicationPlanner`:

1. Replica layouts (``replicas``):
   ``"stripes"`` — fixed striping over all servers with the ``stripes`` sizes (default
   16 KiB / 256 KiB / 4 MiB, §6.4: "1-DH, 2-D and 1-DV layout manners" of a shared file);
   ``"classic"`` — 1-DH / 2-D / 1-DV of :func:`pario.model.ci_layout.classic_layouts` for
   the trace's most common request size; or a list of layout spec strings.
2. Per-request cost of every request under every replica, in the context of its batch of
   concurrent requests: :meth:`pario.model.base.CostModel.request_costs` (one vectorised
   call per replica; the distribution model shares each batch's time among its requests
   by bytes, so with it the routing is in effect per batch; the closed-form models give
   T_i / p_b per request).
3. Routing: every request to the replica with the least cost (ties: the first replica).
4. Predicted time of the plan: the whole trace priced once with each request on its chosen
   replica (each replica of a file is a virtual file with that layout; batches unchanged),
   so interactions inside a batch are priced exactly.  Baselines: each single replica
   layout alone, and ``ORIG`` (the ``original`` layout).

With a space budget (bytes), only ``k`` replicas fit: the plan keeps the subset of replicas
(the primary copy is free, every extra copy costs the files' size) with the least
estimated time Σ_i min_{r ∈ subset} cost_i(r); the final subset is priced exactly.

Deviation: the paper routes by its closed-form model (CI-LAYOUT §3); pario uses any
:class:`~pario.model.base.CostModel` (default the exact distribution model).
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import ParioError
from ..layout import Layout, Striped, describe, parse_layout
from ..model.batches import batch_ids
from ..trace import Trace
from ..units import format_size, parse_size
from .base import Plan, Planner, original_layouts
from ..arrays import unique

DEFAULT_STRIPES = ("16K", "256K", "4M")


def replica_layouts(spec, trace: Trace, system, stripes=DEFAULT_STRIPES) -> dict[str, Layout]:
    """Name → layout of the replicas (see module docstring)."""
    if spec == "stripes":
        out = {}
        for s in stripes:
            size = parse_size(s)
            out[format_size(size)] = Striped.fixed(size, range(system.n))
        return out
    if spec == "classic":
        from ..model.ci_layout import classic_layouts

        if len(trace) == 0:
            raise ParioError("hybrid replication: 'classic' replicas need a non-empty trace (request size)")
        pos = trace.length[trace.length > 0]
        if len(pos):
            vals, inv = unique(pos, return_inverse=True)
            size = int(vals[np.argmax(np.bincount(inv))])
        else:
            size = 65536
        lays = classic_layouts(system, size)
        return {k: lays[k] for k in ("1-DH", "2-D", "1-DV")}
    if isinstance(spec, (list, tuple)):
        out = {}
        for s in spec:
            lay = parse_layout(s, system)
            out[s if isinstance(s, str) else describe(lay, system)] = lay
        if not out:
            raise ParioError("hybrid replication: needs at least one replica layout")
        return out
    raise ParioError(f"hybrid replication: replicas must be 'stripes', 'classic' or a list of layouts, not {spec!r}")


class RouteCosts:
    """Each request's cost under each replica layout (C[k, i], CI-LAYOUT seed 002 §5: the
    request's share of its batch time), delivered by chunks of requests.  With a model that
    prices by the compiled engine (``model.compiled``: the distribution model) C[k, i] =
    T_sys,k(batch of i) · share_i (its bytes over its batch's;
    :meth:`pario.model.DistributionModel.request_costs`), so only the batch times of each
    layout are kept and a chunk is rebuilt from them: memory O(K · batches + chunk), not
    O(K · requests).  Other models: the whole matrix (:meth:`HybridReplicationPlanner.route`)."""

    CHUNK = 1 << 22

    def __init__(self, planner, model, trace, system, layouts, bid):
        from ..model import engine
        from ..model.distribution import byte_shares

        self.n, self.k = len(trace), len(layouts)
        self.C = None
        if self.n and model.compiled:
            self.tsys = np.vstack(engine.map_threads(lambda lay: model.price(trace, lay, system, batches=bid)[0],
                                                     layouts))
            self.bid = bid
            self.share = byte_shares(trace, bid, self.tsys.shape[1])
        else:
            self.C = planner.route(trace, system, layouts, bid)[0]

    def chunks(self):
        for a in range(0, self.n, self.CHUNK):
            b = min(self.n, a + self.CHUNK)
            yield a, b, (self.C[:, a:b] if self.C is not None else self.tsys[:, self.bid[a:b]] * self.share[a:b])

    def sums(self) -> np.ndarray:
        """Σ_i C[k, i] per layout (its cost on the whole trace)."""
        out = np.zeros(self.k)
        for _, _, c in self.chunks():
            out += c.sum(axis=1)
        return out

    def least_sums(self, subsets) -> dict:
        """Σ_i min_{k ∈ subset} C[k, i] of each subset of layouts."""
        out = {sub: 0.0 for sub in subsets}
        for _, _, c in self.chunks():
            for sub in subsets:
                out[sub] += float(c[list(sub)].min(axis=0).sum())
        return out

    def choice(self, subset) -> tuple[np.ndarray, float]:
        """(the cheapest layout of ``subset`` for every request — the first on ties — and Σ_i of
        its cost)."""
        choice = np.zeros(self.n, dtype=np.int8 if self.k < 128 else np.int64)
        total = 0.0
        for a, b, c in self.chunks():
            idx, least = first_min(c, subset)
            choice[a:b] = idx
            total += float(least.sum())
        return choice, total


def first_min(C: np.ndarray, rows) -> tuple[np.ndarray, np.ndarray]:
    """(for every column of ``C`` the row of ``rows`` with the least value — the first such row
    on ties, as ``argmin`` — and that value), row by row: no temporary of ``C``'s size."""
    rows = list(rows)
    idx = np.full(C.shape[1], rows[0], dtype=np.int64)
    least = C[rows[0]].copy()
    for r in rows[1:]:
        better = C[r] < least
        idx[better] = r
        least[better] = C[r][better]
    return idx, least


def routed_cost(trace: Trace, choice: np.ndarray, layouts: list[Layout], system, model, bid: np.ndarray):
    """Cost of the trace with request i served by ``layouts[choice[i]]`` (exact: each
    (file, replica) pair is a virtual file with that replica's layout)."""
    k = len(layouts)
    vfile = trace.file.astype(np.int64) * k + choice
    names = tuple(f"{f}#replica{r}" for f in trace.files for r in range(k))
    vt = Trace.checked({**trace.cols, "file": vfile.astype(np.int32)}, names)
    lay = {names[fi * k + r]: layouts[r] for fi in range(len(trace.files)) for r in range(k)}
    return model.trace_cost(vt, lay, system, batches=bid)


class HybridReplicationPlanner(Planner):
    """CI-LAYOUT seed 002 §5 hybrid replication (see module docstring).  Parameters:
    ``replicas`` (``stripes`` | ``classic`` | list of specs), ``stripes`` (for
    ``stripes``), ``original`` (the ORIG baseline), ``model`` / ``model_params``, ``by``
    (batching)."""

    name = "hybrid"
    paper = "CI-LAYOUT seed 002 §5 (hybrid replication, cheapest replica)"
    defaults = {"replicas": "stripes", "stripes": list(DEFAULT_STRIPES), "original": "fixed:64K",
                "model": "distribution", "model_params": None, "by": "auto"}

    def route(self, trace, system, layouts: list[Layout], bid=None) -> tuple[np.ndarray, np.ndarray]:
        """(cost matrix [replica, request], cheapest replica per request)."""
        model = self.cost_model()
        bid = batch_ids(trace, self.params["by"]) if bid is None else bid
        if len(trace):
            from ..model import engine

            C = np.vstack(engine.map_threads(lambda lay: model.request_costs(trace, lay, system, batches=bid),
                                             layouts))
        else:
            C = np.zeros((len(layouts), 0))
        return C, (first_min(C, range(len(layouts)))[0] if len(trace) else np.zeros(0, dtype=np.int64))

    def plan(self, trace, system, budget: float | None = None) -> Plan:
        p = self.params
        self.check_budget(budget)
        model = self.cost_model()
        reps = replica_layouts(p["replicas"], trace, system, p["stripes"])
        names, layouts = list(reps), list(reps.values())
        bid = batch_ids(trace, p["by"])
        costs = RouteCosts(self, model, trace, system, layouts, bid)
        file_bytes = _file_bytes(trace)
        copy_bytes = int(sum(file_bytes.values()))
        # replica subset under the budget (primary copy free, each extra copy = the files' size)
        k_max = len(layouts)
        if budget is not None:
            k_max = max(1, min(len(layouts), 1 + (int(budget) // copy_bytes if copy_bytes else len(layouts))))
        subset = tuple(range(len(layouts)))
        if k_max < len(layouts):
            subsets = [sub for k in range(1, k_max + 1) for sub in itertools.combinations(range(len(layouts)), k)]
            est = costs.least_sums(subsets)  # ≤ 2^K subsets, K small
            best = None
            for sub in subsets:
                if best is None or est[sub] < best[0] - 1e-15:
                    best = (est[sub], sub)
            subset = best[1]
        choice, least_sum = costs.choice(subset)
        kept = [layouts[i] for i in subset]
        lut = np.full(len(layouts), -1, dtype=np.int64)
        lut[list(subset)] = np.arange(len(subset))
        predicted = float(routed_cost(trace, lut[choice], kept, system, model, bid).predicted_s) if len(trace) else 0.0
        # Σ_i request cost = the trace's cost under that layout (CostModel.request_costs):
        # the single-layout baselines come from the cost matrix, no extra model call
        baselines = {nm: float(v) for nm, v in zip(names, costs.sums())}
        orig, _ = original_layouts(p["original"], trace, system)
        same = [nm for nm, lay in zip(names, layouts) if isinstance(orig, Layout) and lay == orig]
        if same:
            baselines["ORIG"] = baselines[same[0]]
        else:
            baselines["ORIG"] = float(model.trace_cost(trace, orig, system, batches=bid).predicted_s) if len(trace) else 0.0
        ops = trace.op
        routed = {names[i]: {"requests": int((choice == i).sum()),
                             "reads": int(((choice == i) & (ops == 0)).sum()),
                             "writes": int(((choice == i) & (ops == 1)).sum()),
                             "bytes": int(trace.length[choice == i].sum())} for i in subset}
        primary = subset[0]
        details = {
            "replica_names": [names[i] for i in subset],
            "routed": routed,
            "estimated_s": float(least_sum),
            "best_single": min((baselines[names[i]], names[i]) for i in range(len(names)))[1],
            "extra_space": copy_bytes * (len(subset) - 1),
            "lazy_sync_bytes": int(trace.length[ops == 1].sum()) * (len(subset) - 1),
            "budget": None if budget is None else int(budget),
            "write_policy": "write to the cheapest replica; lazy background sync to the others; sync all at close",
        }
        return Plan(
            scheme="hybrid",
            layouts={"*": layouts[primary]},
            replicas={"*": [{"name": names[i], "layout": layouts[i], "sync": "lazy"} for i in subset[1:]]},
            routing=[{"file": "*", "op": "read", "rule": "cheapest"}, {"file": "*", "op": "write", "rule": "cheapest"}],
            predicted_s=predicted,
            baselines=baselines,
            details=details,
            params=self.plan_params(system),
            system_name=system.name,
        )


def _file_bytes(trace: Trace) -> dict[str, int]:
    """Size of each file as seen by the trace (largest end offset)."""
    if len(trace) == 0:
        return {}
    end = trace.offset + trace.length
    mx = np.zeros(len(trace.files), dtype=np.int64)
    np.maximum.at(mx, trace.file.astype(np.int64), end)
    return {f: int(v) for f, v in zip(trace.files, mx)}
