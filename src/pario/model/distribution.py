"""CEDA's distribution-aware cost model (seed 000 §3 eq. 1–4), on the exact sub-requests.

For every batch b of concurrent requests (:mod:`pario.model.batches`) and server j, with the
sub-requests of the batch on j computed exactly from the layout
(:func:`pario.layout.map_trace`, any layout incl. replica extent maps — not eq. 2, whose
beginning fragment is mistyped, SPEC §2.3):

- q = number of sub-requests on j, p = number of processes (ranks) they come from,
  s_ij = their sizes;
- T_s (startup):  p = 1:  k·α_rand + (q − k)·α_seq', k = number of *non-contiguous*
  sub-requests (eq. 3 first case);  p > 1:  ½(p+q)·α_rand + ½(q − p)·α_seq' (eq. 3
  second case: ½(p+q) seeks);
- T_t (transfer): Σ_i s_ij·β_j(op)  (eq. 1, eq. 3);
- T_ser^j = T_s + T_t  (eq. 3),  T_sys(b) = max_j T_ser^j  (eq. 4);
- predicted time = Σ_b T_sys(b);  per-server time = Σ_b T_ser^j(b).

α and β are per server and per op (read/write) from the system profile; with mixed ops on a
server the α terms are weighted by the ops of its sub-requests.

*Contiguous* (sequential) sub-request: it starts in server-local space exactly where the
previous sub-request served by the same server ended, in the same file and data file.
"Previous" is in service order: batches in order, and inside a batch by the issuing rank's
request order, then request row, then local offset — so it can be the last sub-request of
the previous batch on that server (a rank streaming through its own region stays
sequential across batches).  The paper's T_s = 0 for a contiguous sub-request; α_seq' is
the sequential α when the profile gives one explicitly (the papers measure a non-zero
sequential startup, CI-LAYOUT Table 4), else 0 — ``contiguous_alpha`` = ``profile``
(default) | ``zero`` (paper) | ``seq`` (always the profile's sequential α).

``network=True`` adds (an extension, not in CEDA §3) per server and batch
(number of ranks)·e + bytes·t.  Fully vectorised over sub-requests (bincount / lexsort
over batch × server).

Two implementations of the same equations: :meth:`DistributionModel.server_batch_times`
(the reference: map every request, sort the sub-requests into service order, bincount) and
the compiled one of :mod:`pario.model.engine` (service order of the *requests* computed once
per trace and batching, layouts mapped inside a numba kernel, no per-sub-request arrays),
which :meth:`~DistributionModel.trace_cost` and :meth:`~DistributionModel.request_costs`
use.  ``with reference_pricing():`` makes them use the reference (the tests compare both).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from ..arrays import unique
from .. import ParioError
from ..layout import map_trace
from .base import Cost, CostModel, resolve_layout
from ..memo import by_identity
from .batches import batch_ids

CONTIGUOUS_ALPHA = ("profile", "zero", "seq")

_REFERENCE = [False]


@contextmanager
def reference_pricing(on: bool = True):
    """Inside the block, the distribution model prices by the reference implementation
    (:meth:`DistributionModel.server_batch_times`) instead of :mod:`pario.model.engine`, and
    the planners take their pre-issue-18 exhaustive paths (the tests' oracle)."""
    old = _REFERENCE[0]
    _REFERENCE[0] = bool(on)
    try:
        yield
    finally:
        _REFERENCE[0] = old


def reference_mode() -> bool:
    return _REFERENCE[0]


def _seq_alpha_table(system, mode: str) -> np.ndarray:
    """[server, op] α charged to a contiguous sub-request."""
    at = system.alpha_table()
    if mode == "zero":
        return np.zeros((system.n, 2))
    if mode == "seq":
        return at[:, :, 1].copy()
    out = np.zeros((system.n, 2))
    for j, s in enumerate(system.servers):
        for op, key in ((0, "alpha_read_seq"), (1, "alpha_write_seq")):
            if getattr(s, key) is not None:
                out[j, op] = getattr(s, key)
    return out


@by_identity()
def _byte_shares(trace, bid, nb):
    """Each request's share of its batch: its bytes over the batch's bytes (1 / requests
    when the batch moves none) — the same for every layout, so computed once per batching."""
    L = trace.length.astype(float)
    tot = np.bincount(bid, weights=L, minlength=nb)
    cnt = np.bincount(bid, minlength=nb)
    return np.where(tot[bid] > 0, L / np.where(tot[bid] > 0, tot[bid], 1), 1.0 / cnt[bid])


class DistributionModel(CostModel):
    """CEDA seed 000 §3 eq. 1–4 on exact sub-requests (see module docstring)."""

    name = "distribution"

    def __init__(self, contiguous_alpha: str = "profile", network: bool = False):
        if contiguous_alpha not in CONTIGUOUS_ALPHA:
            raise ParioError(f"contiguous_alpha must be one of {', '.join(CONTIGUOUS_ALPHA)}")
        super().__init__(contiguous_alpha=contiguous_alpha, network=network)

    # ------------------------------------------------------------------ core
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
        T = (Ts + Tt + Tn).reshape(nb, n)
        terms = {"q": q.reshape(nb, n), "p": p.reshape(nb, n), "k": k.reshape(nb, n),
                 "T_s": Ts.reshape(nb, n), "T_t": Tt.reshape(nb, n), "T_n": Tn.reshape(nb, n)}
        return T, bid, sub, terms

    def price(self, trace, layout, system, *, batches=None, by="auto", limit: float = np.inf, suffix=None):
        """(per_batch T_sys, per-server Σ_b T_ser, terms, stopped) by the compiled engine
        (:func:`pario.model.engine.price`); ``limit``: stop once Σ_b T_sys (plus ``suffix``,
        :meth:`suffix_bound`) exceeds it."""
        from . import engine

        layout = resolve_layout(layout, system)
        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        return engine.price(trace, layout, system, bid,
                            contiguous_alpha_table=_seq_alpha_table(system, self.params["contiguous_alpha"]),
                            network=self.params["network"], limit=limit, suffix=suffix)

    def suffix_bound(self, trace, system, servers, *, batches=None, by="auto") -> np.ndarray:
        """:func:`pario.model.engine.suffix_bound` for layouts on ``servers``."""
        from . import engine

        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        return engine.suffix_bound(trace, bid, system, servers,
                                   contiguous_alpha_table=_seq_alpha_table(system, self.params["contiguous_alpha"]))

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto") -> Cost:
        if len(trace) == 0:
            return Cost.zero(system.n)
        if not _REFERENCE[0]:
            per_batch, servers, terms, _ = self.price(trace, layout, system, batches=batches, by=by)
            details = {"T_s": terms["T_s"], "T_t": terms["T_t"], "subrequests": terms["subrequests"]}
            if self.params["network"]:
                details["T_n"] = terms["T_n"]
            return Cost(float(per_batch.sum()), servers, len(per_batch), per_batch, details)
        T, bid, sub, terms = self.server_batch_times(trace, layout, system, batches=batches, by=by)
        per_batch = T.max(axis=1) if T.size else np.zeros(T.shape[0])
        details = {"T_s": float(terms["T_s"].sum()) if terms else 0.0,
                   "T_t": float(terms["T_t"].sum()) if terms else 0.0,
                   "subrequests": int(len(sub))}
        if self.params["network"] and terms:
            details["T_n"] = float(terms["T_n"].sum())
        return Cost(float(per_batch.sum()), T.sum(axis=0), T.shape[0], per_batch, details)

    def trace_costs(self, trace, layouts: dict, system, *, batches=None, by="auto") -> dict:
        """Several candidate layouts at once: the trace's service order is prepared once, then
        the candidates are priced on :func:`pario.model.engine.workers` threads."""
        if _REFERENCE[0] or len(trace) == 0 or len(layouts) <= 1:
            return super().trace_costs(trace, layouts, system, batches=batches, by=by)
        from . import engine

        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        keys = list(layouts)
        got = engine.map_threads(lambda k: self.trace_cost(trace, layouts[k], system, batches=bid), keys)
        return dict(zip(keys, got))

    def batch_cost(self, batch, layout, system) -> Cost:
        return self.trace_cost(batch, layout, system, batches=np.zeros(len(batch), dtype=np.int64))

    def request_costs(self, trace, layout, system, *, batches=None, by="auto") -> np.ndarray:
        """Each batch's T_sys shared among its requests in proportion to their bytes
        (Σ request costs = predicted time)."""
        if len(trace) == 0:
            return np.zeros(0)
        if not _REFERENCE[0]:
            bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
            tsys, _, _, _ = self.price(trace, layout, system, batches=bid)
        else:
            T, bid, _, _ = self.server_batch_times(trace, layout, system, batches=batches, by=by)
            tsys = T.max(axis=1)
        return tsys[bid] * _byte_shares(trace, bid, len(tsys))
