"""PADP / PSA closed-form cost of a request on a hybrid HDD/SSD system.

PADP seed 003 §3.2 eq. 1–4 (and Fig. 2), PSA seed 001 §3.2 Tables 3–4.  m HServers with
stripe h, n SServers with stripe s, request size r (PSA: S) spread over all of them
(m·h + n·s = r), p concurrent processes, c processes per client node:

- T_E = c(m+n)·e  if p ≤ c(m+n)  else  p·e        (= max(c(m+n), p)·e)
- T_X = max{c·r·t, p·h·t, p·s·t}                   (PSA Table 3's three-term max; PADP
  eq. 3 writes max{crt, pst}, assuming s ≥ h: ``three_term=False`` reproduces it)
- T_S + T_T = p · max{α_h + h·β_h, α_s + s·β_s}    (eq. 4)
- T = T_E + T_X + T_S + T_T                       (eq. 2)

A *homogeneous* request (PSA Table 4: served by the m HServers only, stripe S/m) is the
same formula with no SServers: T_E = max(c·m, p)·e, T_X = max{cSt, pSt/m},
T_S + T_T = p·α_h + p·h·β_h.  Generally (a deviation from PADP's F, which keeps α_h even
for h = 0): a server kind with stripe 0 (or count 0) takes no part — no connection, no
startup, no transfer — which is what makes PADP's ⟨0 KB, 32 KB⟩ regime optimal.

:class:`HybridModel` applies these formulas to a trace: every request i of a batch with
p_b ranks costs T_i(p_b) and the batch costs Σ_i T_i / p_b (a closed form prices one round
of p concurrent requests; a batch of one request per rank costs exactly T).  The layout
gives m, n, h, s: servers of kind hdd / ssd with stripe > 0; h and s are the largest stripe
of each kind; a request of size r_i under stripes with round width W = m·h + n·s puts
h·r_i/W on every HServer and s·r_i/W on every SServer (assumption 3 of PADP §3.2: every
request involves all servers of the layout).
"""

from __future__ import annotations

import numpy as np

from .. import ParioError
from ..layout import Grouped
from .base import Cost, resolve_layout
from ..arrays import unique
from .common import ClosedFormModel, kind_params, leaf_check, per_request_layouts, per_server_busy, request_classes


def hybrid_request_cost(p, c, m, n, h, s, r, e, t, alpha_h, beta_h, alpha_s, beta_s, *, three_term=True):
    """Terms of PADP eq. 2–4 / PSA Tables 3–4 (vectorised): dict T_e, T_x, T_st, T.

    A kind with count 0 or stripe 0 is left out (no T_E, T_X or storage term).
    """
    p, c, m, n, h, s, r = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (p, c, m, n, h, s, r)))
    useh = (m > 0) & (h > 0)
    uses = (n > 0) & (s > 0)
    nserv = np.where(useh, m, 0) + np.where(uses, n, 0)
    T_e = np.maximum(c * nserv, p) * e
    terms = [c * r * t, np.where(uses, p * s * t, 0.0)]
    if three_term:
        terms.append(np.where(useh, p * h * t, 0.0))
    T_x = np.maximum.reduce(terms)
    st_h = np.where(useh, alpha_h + h * beta_h, 0.0)
    st_s = np.where(uses, alpha_s + s * beta_s, 0.0)
    T_st = p * np.maximum(st_h, st_s)
    return {"T_e": T_e, "T_x": T_x, "T_st": T_st, "T": T_e + T_x + T_st}


def heterogeneous_cost(p, c, m, n, h, s, S, e, t, alpha_h, beta_h, alpha_s, beta_s, *, three_term=True):
    """PSA Table 3 (PADP eq. 3–4): cost of one request on all m HServers and n SServers."""
    return hybrid_request_cost(p, c, m, n, h, s, S, e, t, alpha_h, beta_h, alpha_s, beta_s, three_term=three_term)


def homogeneous_cost(p, c, m, S, e, t, alpha_h, beta_h):
    """PSA Table 4: cost of one request served by the m HServers only, stripe h = S/m."""
    S = np.asarray(S, dtype=float)
    return hybrid_request_cost(p, c, m, 0, S / m, 0, S, e, t, alpha_h, beta_h, 0.0, 0.0)


def layout_kinds(leaf, system) -> dict:
    """m, n, h, s (and the server lists) of a striped layout on a hybrid system."""
    leaf_check(leaf)
    if isinstance(leaf, Grouped):
        servers = leaf.servers_used()
        stripes = [leaf.stripe] * len(servers)
    else:
        servers, stripes = leaf.servers, leaf.stripes
    hs = [(j, w) for j, w in zip(servers, stripes) if w > 0 and system.servers[j].kind == "hdd"]
    ss = [(j, w) for j, w in zip(servers, stripes) if w > 0 and system.servers[j].kind == "ssd"]
    h = max((w for _, w in hs), default=0)
    s = max((w for _, w in ss), default=0)
    return {"m": len(hs), "n": len(ss), "h": h, "s": s,
            "hservers": [j for j, _ in hs], "sservers": [j for j, _ in ss],
            "W": sum(w for _, w in hs) + sum(w for _, w in ss)}


class HybridModel(ClosedFormModel):
    """PADP/PSA closed-form model applied to a trace (see module docstring).

    Parameters: ``pattern`` = auto|random|sequential (which α: ``auto`` uses the sequential
    α for a request that continues its rank's previous request), ``three_term`` (PSA's
    max{cSt, pht, pst}, default True; False = PADP eq. 3 as printed).
    """

    name = "hybrid"
    paper = "PADP seed 003 §3.2 eq. 2–4 / PSA seed 001 §3.2 Tables 3–4"
    predicted_doc = "T_e + T_x + T_st (PADP eq. 2; a batch of p concurrent requests costs Σ_i T_i / p)"
    term_docs = {
        "T_e": "connection setup T_E = max(c(m + n), p)·e (PADP eq. 3 / PSA Table 3)",
        "T_x": "network transfer T_X = max{c·r·t, p·h·t, p·s·t} (PSA Table 3; PADP eq. 3 has two terms)",
        "T_st": "storage T_S + T_T = p·max{α_h + h·β_h, α_s + s·β_s} (PADP eq. 4)",
    }

    def __init__(self, pattern: str = "auto", three_term: bool = True):
        super().__init__(pattern=pattern, three_term=three_term)

    def request_terms(self, trace, layout, system, *, batches=None, by="auto"):
        """PADP eq. 2–4 / PSA Tables 3–4 per request: T_i computed once per request class (op,
        size, p, c, sequential) and leaf layout, then gathered per request (same formula, same
        inputs: same values)."""
        layout = resolve_layout(layout, system)
        rc = request_classes(trace, system, by, batches, self.params["pattern"])
        leaves, which = per_request_layouts(trace, layout, system)
        n_req = len(trace)
        T = {k: np.zeros(n_req) for k in ("T_e", "T_x", "T_st", "T")}
        for k, leaf in enumerate(leaves):
            if len(leaves) == 1:
                rows, cls = None, rc.cls
                used = np.arange(len(rc.first))
            else:
                rows = np.flatnonzero(which == k)
                used, cls = unique(rc.cls[rows], return_inverse=True)
            out = self._leaf_terms(leaf, rc, used, system)
            for key in T:
                if rows is None:
                    T[key] = out[key][cls]
                else:
                    T[key][rows] = out[key][cls]
        return rc.bid, rc.p, rc.nb, T, rc.seq.astype(np.int64)

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto"):
        """As :meth:`ClosedFormModel.trace_cost`, from the request classes: a batch costs
        Σ_i T_i / p (PADP seed 003 §3.2), T_i / p computed once per class and added per batch
        (the same values in the same order: the same sums)."""
        layout = resolve_layout(layout, system)
        if len(trace) == 0:
            return super().trace_cost(trace, layout, system, batches=batches, by=by)
        leaves, _ = per_request_layouts(trace, layout, system)
        if len(leaves) != 1:
            return super().trace_cost(trace, layout, system, batches=batches, by=by)
        rc = request_classes(trace, system, by, batches, self.params["pattern"])
        out = self._leaf_terms(leaves[0], rc, np.arange(len(rc.first)), system)
        per_batch = np.bincount(rc.bid, weights=(out["T"] / rc.cp)[rc.cls], minlength=rc.nb)
        count = rc.counts()
        details = {k: float(np.dot(count, v / rc.cp)) for k, v in out.items() if k != "T"}
        seq = rc.seq
        return Cost(float(per_batch.sum()), lambda: per_server_busy(trace, layout, system, seq.astype(bool)), rc.nb,
                    per_batch, details)

    def _leaf_terms(self, leaf, rc, used, system):
        """PADP eq. 2–4 / PSA Tables 3–4 for the request classes ``used`` under one leaf layout."""
        kk = layout_kinds(leaf, system)
        if kk["W"] == 0:
            raise ParioError("layout has no server with a stripe > 0")
        ah, bh = kind_params(system, kk["hservers"])
        as_, bs = kind_params(system, kk["sservers"])
        o, sq, r = rc.op[used], rc.cseq[used], rc.r[used].astype(float)
        scale = r / kk["W"]
        return hybrid_request_cost(rc.cp[used], rc.cc[used], kk["m"], kk["n"], kk["h"] * scale, kk["s"] * scale, r,
                                   system.network.e, system.network.t, ah[o, sq], bh[o], as_[o, sq], bs[o],
                                   three_term=self.params["three_term"])
