"""CI-LAYOUT closed-form cost model for 1-DH / 1-DV / 2-D layouts (seed 002 §3).

T = T_network + T_storage = (T_e + T_x) + (T_s + T_rw)          (seed 002 eq. 1)

**Reconstruction.**  The seed's Table 2 (the formulas) is missing from the text.  This module
uses the reconstruction of SPEC §2.1, consistent with PADP's eq. 3–4 (the heterogeneous
extension of the same model by the same group): with g groups of n/g servers (g = 1 is
1-DH, g = n is 1-DV), request size s, m processes per client node, p concurrent processes,
each server group serving ⌈p/g⌉ processes:

- T_e        = max(m·n/g, ⌈p/g⌉) · e
- T_x        = max(m·s, ⌈p/g⌉ · s·g/n) · v
- T_s + T_rw = ⌈p/g⌉ · (α + (s·g/n) · β)

Choices made here (documented in docs/models.md):

- m is ``min(procs_per_node, p)``: a client node cannot run more of the p processes than exist.
- For a layout of the tree, g follows from how many servers one request touches:
  k = clip(⌈s / stripe⌉, 1, n) and g = n / k (may be fractional; ⌈p/g⌉ = ⌈p·k/n⌉).  So a
  small stripe (k = n) is 1-DH, a stripe ≥ s is 1-DV and CI-LAYOUT's 2-D
  (:class:`~pario.layout.Grouped` with stripe s·g/n) gives its g.  A varied striped layout
  uses its mean stripe.
- α is the random α unless the request continues its rank's previous request
  (``pattern="auto"``) or ``pattern`` says otherwise; α and β of heterogeneous servers
  are those of the slowest server of the layout.
- Overall cost TC = Σ_i T_i (§3): a batch of q requests from p ranks costs Σ_i T_i / p
  (the closed form is the time of one round of p concurrent requests).
"""

from __future__ import annotations

import numpy as np

from ..layout import Grouped, Striped
from .base import resolve_layout
from .common import ClosedFormModel, batch_context, kind_params, leaf_check, pattern_mask, per_request_layouts


def ci_layout_cost(p, s, n, g, m, e, v, alpha, beta):
    """SPEC §2.1 reconstruction of CI-LAYOUT Table 2 (vectorised): dict T_e, T_x, T_st, T."""
    p, s, n, g, m = (np.asarray(x, dtype=float) for x in (p, s, n, g, m))
    per_group = np.ceil(p / g - 1e-9)  # ⌈p/g⌉ (tolerant of g = n/k rounding)
    T_e = np.maximum(m * n / g, per_group) * e
    T_x = np.maximum(m * s, per_group * s * g / n) * v
    T_st = per_group * (alpha + (s * g / n) * beta)
    return {"T_e": T_e, "T_x": T_x, "T_st": T_st, "T": T_e + T_x + T_st}


def classic_layouts(system, request_size: int, groups: int | None = None, servers=None) -> dict:
    """The three layouts of CI-LAYOUT for a shared file and request size s (seed 002 §4):
    1-DH = fixed stripe s/n over all n servers, 1-DV = fixed stripe s, 2-D = g groups
    (default: the divisor of n nearest √n, > 1 and < n when possible) with stripe s·g/n."""
    servers = tuple(range(system.n)) if servers is None else tuple(servers)
    n = len(servers)
    s = int(request_size)
    out = {"1-DH": Striped.fixed(max(1, s // n), servers), "1-DV": Striped.fixed(max(1, s), servers)}
    if groups is None:
        divs = [d for d in range(2, n) if n % d == 0] or [1]
        groups = min(divs, key=lambda d: abs(d - np.sqrt(n)))
    size = n // groups
    out["2-D"] = Grouped(tuple(servers[k * size:(k + 1) * size] for k in range(groups)), max(1, s // size))
    return out


def servers_per_request(leaf, r: np.ndarray) -> tuple[np.ndarray, int]:
    """k (servers one request of size r touches) and n (servers of the layout)."""
    leaf_check(leaf)
    if isinstance(leaf, Grouped):
        stripe, n = leaf.stripe, len(leaf.servers_used())
    else:
        used = [w for w in leaf.stripes if w > 0]
        stripe, n = float(np.mean(used)), len(used)
    k = np.clip(np.ceil(np.asarray(r, dtype=float) / stripe), 1, n)
    return k, n


class CILayoutModel(ClosedFormModel):
    """CI-LAYOUT (seed 002 §3) with the SPEC §2.1 reconstruction of Table 2 (see module doc)."""

    name = "ci-layout"
    paper = "CI-LAYOUT seed 002 §3 eq. 1, Table 2 as reconstructed in SPEC §2.1"
    paper_short = "CI-LAYOUT eq. 1"
    predicted_doc = "T_e + T_x + T_st (eq. 1; a batch of p concurrent requests costs Σ_i T_i / p)"
    term_docs = {
        "T_e": "connection setup max(m·n/g, ⌈p/g⌉)·e (Table 2, reconstructed)",
        "T_x": "network transfer max(m·s, ⌈p/g⌉·s·g/n)·v (Table 2, reconstructed)",
        "T_st": "storage T_s + T_rw = ⌈p/g⌉·(α + (s·g/n)·β) (Table 2, reconstructed)",
    }

    def __init__(self, pattern: str = "auto"):
        super().__init__(pattern=pattern)

    def request_terms(self, trace, layout, system, *, batches=None, by="auto"):
        layout = resolve_layout(layout, system)
        bid, p, c, nb = batch_context(trace, system, by, batches)
        seq = pattern_mask(trace, self.params["pattern"]).astype(np.int64)
        leaves, which = per_request_layouts(trace, layout, system)
        T = {k: np.zeros(len(trace)) for k in ("T_e", "T_x", "T_st", "T")}
        op = trace.op.astype(np.int64)
        r = trace.length.astype(float)
        for k, leaf in enumerate(leaves):
            rows = np.flatnonzero(which == k)
            kk, n = servers_per_request(leaf, r[rows])
            a, b = kind_params(system, leaf.servers_used())
            out = ci_layout_cost(p[rows], r[rows], n, n / kk, c[rows], system.network.e, system.network.t,
                                 a[op[rows], seq[rows]], b[op[rows]])
            for key in T:
                T[key][rows] = out[key]
        return bid, p, nb, T, seq

