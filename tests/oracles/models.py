"""Reference cost models: the tests' oracles for the compiled pricing.

Independent implementations of the same equations as :mod:`pario.model`, kept from before
issue 18 ("Planning at scale") and used only by the tests:

- :class:`ReferenceDistributionModel` — CEDA seed 000 §3 eq. 1–4 by mapping every request
  (:func:`pario.layout.map_trace`), sorting the sub-requests into service order (server,
  batch, rank order, row, local) and ``bincount`` per (batch, server); the production model
  prices by the numba kernel of :mod:`pario.model.engine`.
- :class:`ReferenceHybridModel` — PADP seed 003 eq. 2–4 / PSA seed 001 Tables 3–4 request by
  request (no request classes), per-server busy time from ``map_trace``.

Both declare ``compiled = False``: a planner given one prices through ``trace_cost`` /
``request_costs`` only (its exhaustive paths), never by the engine.  :func:`reference_model`
turns a production model into its reference twin (same parameters).
"""

from __future__ import annotations

import numpy as np

from pario import ParioError
from pario.arrays import unique
from pario.layout import map_trace
from pario.model import CILayoutModel, CostModel, DistributionModel, HybridModel
from pario.model.base import Cost, resolve_layout
from pario.model.batches import batch_ids
from pario.model.common import (ClosedFormModel, batch_context, kind_params, mapped_busy, pattern_mask,
                                per_request_layouts)
from pario.model.distribution import _seq_alpha_table, byte_shares
from pario.model.hybrid import hybrid_request_cost, layout_kinds


class ReferenceDistributionModel(DistributionModel):
    """CEDA seed 000 §3 eq. 1–4 on sub-requests mapped and sorted in numpy (module docstring)."""

    compiled = False

    def server_batch_times(self, trace, layout, system, *, batches=None, by="auto"):
        """(T_ser[b, j], batch ids, sub-requests, per-(b,j) terms) for the whole trace."""
        layout = resolve_layout(layout, system)
        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        nb = int(bid.max()) + 1 if len(bid) else 0
        n = system.n
        sub = map_trace(trace, layout)
        if len(sub) and int(sub.server.max()) >= n:
            raise ParioError(f"layout uses server index {int(sub.server.max())} but system {system.name!r} has {n} servers")
        T = np.zeros((nb, n))
        if len(sub) == 0:
            return T, bid, sub, {}
        req = sub.req
        b = bid[req]
        j = sub.server.astype(np.int64)
        op = trace.op[req].astype(np.int64)
        rank = trace.rank[req].astype(np.int64)
        fil = trace.file[req].astype(np.int64)
        key = b * n + j
        size = nb * n

        # service order on each server: (server, batch, rank order, row, local)
        idx = np.lexsort((sub.local, req, trace.order[req], b, j))
        js, fs, ds = j[idx], fil[idx], sub.datafile[idx]
        ls, es = sub.local[idx], sub.local[idx] + sub.length[idx]
        contig_sorted = np.zeros(len(idx), dtype=bool)
        contig_sorted[1:] = (js[1:] == js[:-1]) & (fs[1:] == fs[:-1]) & (ds[1:] == ds[:-1]) & (ls[1:] == es[:-1])
        contig = np.empty(len(idx), dtype=bool)
        contig[idx] = contig_sorted

        q = np.bincount(key, minlength=size).astype(float)
        pair = unique(key * (int(rank.max()) + 1) + rank)
        p = np.bincount(pair // (int(rank.max()) + 1), minlength=size).astype(float)
        k = np.bincount(key, weights=(~contig).astype(float), minlength=size)

        at = system.alpha_table()
        a_rand = at[j, op, 0]
        a_seq = _seq_alpha_table(system, self.params["contiguous_alpha"])[j, op]
        A_rand = np.bincount(key, weights=a_rand, minlength=size)  # Σ α_rand over sub-requests
        A_seq = np.bincount(key, weights=a_seq, minlength=size)
        # p = 1: non-contiguous ones pay α_rand, contiguous ones α_seq'
        S1_rand = np.bincount(key, weights=np.where(contig, 0.0, a_rand), minlength=size)
        S1_seq = np.bincount(key, weights=np.where(contig, a_seq, 0.0), minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.where(q > 0, (p + q) / (2 * q), 0.0)  # fraction of sub-requests that seek
        Ts = np.where(p > 1, f * A_rand + (1 - f) * A_seq, S1_rand + S1_seq)
        bt = system.beta_table()
        Tt = np.bincount(key, weights=sub.length * bt[j, op], minlength=size)
        Tn = np.zeros(size)
        if self.params["network"]:
            nbytes = np.bincount(key, weights=sub.length.astype(float), minlength=size)
            Tn = p * system.network.e + nbytes * system.network.t
        # a rate-limited server (profile cost = "max") passes the batch in max(T_s, T_t)
        lim = np.tile(system.cost_table() == 1, nb)
        T = (np.where(lim, np.maximum(Ts, Tt), Ts + Tt) + Tn).reshape(nb, n)
        terms = {"q": q.reshape(nb, n), "p": p.reshape(nb, n), "k": k.reshape(nb, n),
                 "T_s": Ts.reshape(nb, n), "T_t": Tt.reshape(nb, n), "T_n": Tn.reshape(nb, n)}
        return T, bid, sub, terms

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto") -> Cost:
        if len(trace) == 0:
            return Cost.zero(system.n)
        T, bid, sub, terms = self.server_batch_times(trace, layout, system, batches=batches, by=by)
        per_batch = T.max(axis=1) if T.size else np.zeros(T.shape[0])
        details = {"T_s": float(terms["T_s"].sum()) if terms else 0.0,
                   "T_t": float(terms["T_t"].sum()) if terms else 0.0,
                   "subrequests": int(len(sub))}
        if self.params["network"] and terms:
            details["T_n"] = float(terms["T_n"].sum())
        return Cost(float(per_batch.sum()), T.sum(axis=0), T.shape[0], per_batch, details)

    trace_costs = CostModel.trace_costs  # one candidate after another

    def request_costs(self, trace, layout, system, *, batches=None, by="auto") -> np.ndarray:
        if len(trace) == 0:
            return np.zeros(0)
        T, bid, _, _ = self.server_batch_times(trace, layout, system, batches=batches, by=by)
        tsys = T.max(axis=1)
        return tsys[bid] * byte_shares(trace, bid, len(tsys))


class ReferenceHybridModel(HybridModel):
    """PADP eq. 2–4 / PSA Tables 3–4 request by request (module docstring)."""

    def request_terms(self, trace, layout, system, *, batches=None, by="auto"):
        layout = resolve_layout(layout, system)
        bid, p, c, nb = batch_context(trace, system, by, batches)
        seq = pattern_mask(trace, self.params["pattern"]).astype(np.int64)
        leaves, which = per_request_layouts(trace, layout, system)
        n_req = len(trace)
        T = {k: np.zeros(n_req) for k in ("T_e", "T_x", "T_st", "T")}
        op = trace.op.astype(np.int64)
        r = trace.length.astype(float)
        for k, leaf in enumerate(leaves):
            rows = np.flatnonzero(which == k)
            kk = layout_kinds(leaf, system)
            if kk["W"] == 0:
                raise ParioError("layout has no server with a stripe > 0")
            ah, bh = kind_params(system, kk["hservers"])
            as_, bs = kind_params(system, kk["sservers"])
            o, sq = op[rows], seq[rows]
            scale = r[rows] / kk["W"]
            out = hybrid_request_cost(p[rows], c[rows], kk["m"], kk["n"], kk["h"] * scale, kk["s"] * scale, r[rows],
                                      system.network.e, system.network.t, ah[o, sq], bh[o], as_[o, sq], bs[o],
                                      three_term=self.params["three_term"])
            for key in T:
                T[key][rows] = out[key]
        return bid, p, nb, T, seq

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto") -> Cost:
        cost = ClosedFormModel.trace_cost(self, trace, layout, system, batches=batches, by=by)
        if len(trace):
            cost.servers = mapped_busy(trace, resolve_layout(layout, system), system,
                                       pattern_mask(trace, self.params["pattern"]))
        return cost


_REFERENCE = {DistributionModel: ReferenceDistributionModel, HybridModel: ReferenceHybridModel,
              CILayoutModel: CILayoutModel}


def reference_model(model: CostModel) -> CostModel:
    """The reference twin of a production model (same parameters)."""
    return _REFERENCE[type(model)](**model.get_params())
