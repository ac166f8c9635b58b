"""The tests' oracle for CEDA's replica selection (seed 000 §4.5): every subset of the
patterns with a positive benefit, the best Σ B that fits the budget."""

from __future__ import annotations

import math

import numpy as np


def brute_force(benefit, space, budget: float | None) -> tuple[float, np.ndarray]:
    """(best Σ B, mask) over all subsets of the B > 0 patterns (≤ 20 of them)."""
    b = np.asarray(benefit, dtype=float).ravel()
    c = np.asarray(space, dtype=np.int64).ravel()
    cand = np.flatnonzero(b > 0)
    assert len(cand) <= 20, "brute force: too many patterns"
    cap = math.inf if budget is None else float(budget)
    best, best_mask = 0.0, np.zeros(len(b), dtype=bool)
    for bits in range(1 << len(cand)):
        sel = cand[[(bits >> k) & 1 == 1 for k in range(len(cand))]]
        if c[sel].sum() <= cap and b[sel].sum() > best:
            best = float(b[sel].sum())
            best_mask = np.zeros(len(b), dtype=bool)
            best_mask[sel] = True
    return best, best_mask
