"""CEDA's replica selection under a space budget (seed 000 §4.5, Algorithm 2) and the
optimal 0/1-knapsack variant.

Items are access patterns with a benefit ``B`` (the PBT, seed 000 eq. 5) and a replica size
``c_p`` (bytes).  Both rules only ever pick patterns with ``B > 0`` and never exceed the
budget (``None`` = unlimited replica space).

- :func:`select_paper` — Algorithm 2: patterns in descending order of benefit (ties: lower
  pattern id first), only the ``top_n`` first ones considered (``None`` = all); a pattern is
  replicated when its benefit is positive and it fits in the space still free.  The paper
  writes ``c_p < c_sys``; we accept ``c_p <= c_sys`` (a pattern that exactly fills the space
  fits) — a documented deviation.
- :func:`select_knapsack` — maximise Σ B subject to Σ c_p ≤ budget exactly: dynamic
  programming over capacity in units of gcd(c_p, budget) when that table is small, else a
  binary MILP (``scipy.optimize.milp``, HiGHS).  The MILP answer is re-checked in integers
  and repaired (never exceeds the budget even with solver tolerances).
- :func:`select` — the planner's choice on a PBT (:mod:`pario.plan.ceda_analyze`) by either
  rule; :func:`select_cida` — the CIDA baseline's (every non-contiguous pattern, no benefit
  test).

The tests check both rules against every subset of the patterns (``tests/oracles/selection.py``).
"""

from __future__ import annotations

import math
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np

from .. import ParioError

if TYPE_CHECKING:
    from .ceda_analyze import CEDAAnalysis

SELECTIONS = ("paper", "knapsack")

DP_CELLS = 20_000_000  # largest DP table (items × capacity units) before the MILP is used


def _arrays(benefit, space):
    b = np.asarray(benefit, dtype=float).ravel()
    c = np.asarray(space, dtype=np.int64).ravel()
    if b.shape != c.shape:
        raise ParioError("selection: benefit and space need one value per pattern")
    if len(c) and c.min() < 0:
        raise ParioError("selection: negative replica size")
    return b, c


def select_paper(benefit, space, budget: float | None = None, top_n: int | None = None) -> np.ndarray:
    """CEDA seed 000 Algorithm 2 (see module docstring).  Returns a boolean mask."""
    b, c = _arrays(benefit, space)
    chosen = np.zeros(len(b), dtype=bool)
    order = np.lexsort((np.arange(len(b)), -b))
    if top_n is not None:
        order = order[: max(int(top_n), 0)]
    free = math.inf if budget is None else float(budget)
    for i in order:  # one iteration per pattern, not per request
        if b[i] > 0 and c[i] <= free:
            chosen[i] = True
            free -= c[i]
    return chosen


def select_knapsack(benefit, space, budget: float | None = None, method: str = "auto") -> np.ndarray:
    """Optimal 0/1 knapsack: max Σ B·x  s.t.  Σ c_p·x ≤ budget, x ∈ {0,1}; only B > 0 items.

    ``method``: ``auto`` (DP when small, else MILP), ``dp``, ``milp``.  Boolean mask."""
    b, c = _arrays(benefit, space)
    chosen = np.zeros(len(b), dtype=bool)
    cand = np.flatnonzero(b > 0)
    if budget is None:
        chosen[cand] = True
        return chosen
    cap = int(math.floor(float(budget)))
    cand = cand[c[cand] <= cap]
    if len(cand) == 0:
        return chosen
    free = cand[c[cand] == 0]
    chosen[free] = True  # zero-size patterns with B > 0 always fit
    cand = cand[c[cand] > 0]
    if len(cand) == 0:
        return chosen
    if c[cand].sum() <= cap:
        chosen[cand] = True
        return chosen
    if method not in ("auto", "dp", "milp"):
        raise ParioError(f"knapsack method must be auto, dp or milp, not {method!r}")
    g = reduce(math.gcd, [int(x) for x in c[cand]], cap) or 1
    units = cap // g
    if method == "dp" or (method == "auto" and len(cand) * (units + 1) <= DP_CELLS):
        pick = _knapsack_dp(b[cand], c[cand] // g, units)
    else:
        pick = _knapsack_milp(b[cand], c[cand], cap)
    chosen[cand[pick]] = True
    return chosen


def _knapsack_dp(v: np.ndarray, w: np.ndarray, cap: int) -> np.ndarray:
    """Exact DP over integer capacity (vectorised over capacity, one pass per item)."""
    m = len(v)
    best = np.zeros(cap + 1)
    take = np.zeros((m, cap + 1), dtype=bool)
    for i in range(m):  # one pass per pattern
        wi = int(w[i])
        if wi > cap:
            continue
        cand = np.full(cap + 1, -np.inf)
        cand[wi:] = best[: cap + 1 - wi] + v[i]
        better = cand > best
        take[i] = better
        best = np.where(better, cand, best)
    pick = np.zeros(m, dtype=bool)
    k = int(np.argmax(best))
    for i in range(m - 1, -1, -1):
        if take[i, k]:
            pick[i] = True
            k -= int(w[i])
    return pick


def _knapsack_milp(v: np.ndarray, w: np.ndarray, cap: int) -> np.ndarray:
    from scipy.optimize import Bounds, LinearConstraint, milp

    scale = float(cap)
    res = milp(c=-v / max(v.max(), 1e-300), constraints=LinearConstraint((w / scale)[None, :], -np.inf, 1.0),
               integrality=np.ones(len(v)), bounds=Bounds(0, 1), options={"mip_rel_gap": 0.0})
    if res.x is None:
        raise ParioError(f"knapsack MILP failed: {res.message}")
    pick = res.x > 0.5
    # integer re-check: drop the worst value-per-byte items until the budget holds
    while int(w[pick].sum()) > cap:
        idx = np.flatnonzero(pick)
        pick[idx[np.argmin(v[idx] / w[idx])]] = False
    return pick


def select(an: CEDAAnalysis, budget: float | None, rule: str = "paper", top_n: int | None = None) -> np.ndarray:
    """Boolean mask of the patterns to replicate (``paper`` or ``knapsack``)."""
    B = an.pbt["B"].to_numpy()
    c = an.pbt["space"].to_numpy()
    if rule == "paper":
        return select_paper(B, c, budget, top_n)
    if rule == "knapsack":
        return select_knapsack(B, c, budget)
    raise ParioError(f"unknown CEDA selection {rule!r} (expected {', '.join(SELECTIONS)})")


def select_cida(an: CEDAAnalysis, budget: float | None) -> np.ndarray:
    """CIDA: every non-contiguous pattern, no benefit test; with a budget, in identifier
    order while they fit."""
    nc = an.pbt["non_contiguous"].to_numpy().astype(bool)
    c = an.pbt["cida_space"].to_numpy()
    out = np.zeros(len(nc), dtype=bool)
    free = np.inf if budget is None else float(budget)
    for p in np.flatnonzero(nc):  # per pattern
        if c[p] <= free:
            out[p] = True
            free -= c[p]
    return out
