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

Priced by the compiled engine of :mod:`pario.model.engine` (service order of the *requests*
computed once per trace and batching, layouts mapped inside a numba kernel, no
per-sub-request arrays); the model declares it (``compiled``), so planners may price
candidates by the engine directly.  The tests check it against an independent reference that
maps every request and sorts the sub-requests into service order
(``tests/oracles/models.py``).
"""

from __future__ import annotations

import numpy as np

from .. import ParioError
from .base import Cost, CostModel, resolve_layout
from ..memo import by_identity
from .batches import batch_ids

CONTIGUOUS_ALPHA = ("profile", "zero", "seq")


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
def byte_shares(trace, bid, nb):
    """Each request's share of its batch: its bytes over the batch's bytes (1 / requests
    when the batch moves none) — the same for every layout, so computed once per batching."""
    L = trace.length.astype(float)
    tot = np.bincount(bid, weights=L, minlength=nb)
    cnt = np.bincount(bid, minlength=nb)
    return np.where(tot[bid] > 0, L / np.where(tot[bid] > 0, tot[bid], 1), 1.0 / cnt[bid])


class DistributionModel(CostModel):
    """CEDA seed 000 §3 eq. 1–4 on exact sub-requests (see module docstring)."""

    name = "distribution"
    paper = "CEDA seed 000 §3 eq. 1–4, on the exact sub-requests"
    paper_short = "CEDA eq. 1–4"
    predicted_doc = "Σ over batches of concurrent requests of the busiest server's T_s + T_t (eq. 4)"
    busy_doc = "Σ over batches of the server's T_s + T_t (CEDA eq. 3)"
    term_docs = {
        "T_s": "startup (seeks), summed over servers and batches: k·α_rand + (q − k)·α_seq' for one process, "
               "½(p + q)·α_rand + ½(q − p)·α_seq' for p > 1 (CEDA eq. 3)",
        "T_t": "transfer, summed over servers and batches: Σ s_ij·β_j (CEDA eq. 1, 3)",
        "T_n": "network, summed over servers and batches: ranks·e + bytes·t (a pario extension, not in CEDA §3)",
        "subrequests": "sub-requests: the pieces of the requests, one per server touched (count)",
    }
    busy_terms = ("T_s", "T_t", "T_n")
    compiled = True

    def __init__(self, contiguous_alpha: str = "profile", network: bool = False):
        if contiguous_alpha not in CONTIGUOUS_ALPHA:
            raise ParioError(f"contiguous_alpha must be one of {', '.join(CONTIGUOUS_ALPHA)}")
        super().__init__(contiguous_alpha=contiguous_alpha, network=network)

    def engine_terms(self, system) -> dict:
        """The engine's pricing terms of this model on ``system`` (keyword arguments of
        :func:`pario.model.engine.price` and its relatives): the α charged to a contiguous
        sub-request per [server, op], and whether the network term is added."""
        return {"contiguous_alpha_table": _seq_alpha_table(system, self.params["contiguous_alpha"]),
                "network": bool(self.params["network"])}

    def price(self, trace, layout, system, *, batches=None, by="auto", limit: float = np.inf, suffix=None):
        """(per_batch T_sys, per-server Σ_b T_ser, terms, stopped) by the compiled engine
        (:func:`pario.model.engine.price`); ``limit``: stop once Σ_b T_sys (plus ``suffix``,
        :meth:`suffix_bound`) exceeds it."""
        from . import engine

        layout = resolve_layout(layout, system)
        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        return engine.price(trace, layout, system, bid, **self.engine_terms(system), limit=limit, suffix=suffix)

    def suffix_bound(self, trace, system, servers, *, batches=None, by="auto") -> np.ndarray:
        """:func:`pario.model.engine.suffix_bound` for layouts on ``servers``."""
        from . import engine

        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        return engine.suffix_bound(trace, bid, system, servers,
                                   contiguous_alpha_table=_seq_alpha_table(system, self.params["contiguous_alpha"]))

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto") -> Cost:
        if len(trace) == 0:
            return Cost.zero(system.n)
        per_batch, servers, terms, _ = self.price(trace, layout, system, batches=batches, by=by)
        details = {"T_s": terms["T_s"], "T_t": terms["T_t"], "subrequests": terms["subrequests"]}
        if self.params["network"]:
            details["T_n"] = terms["T_n"]
        return Cost(float(per_batch.sum()), servers, len(per_batch), per_batch, details)

    def trace_costs(self, trace, layouts: dict, system, *, batches=None, by="auto") -> dict:
        """Several candidate layouts at once: the trace's service order is prepared once, then
        the candidates are priced on :func:`pario.model.engine.workers` threads."""
        if len(trace) == 0 or len(layouts) <= 1:
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
        bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
        tsys, _, _, _ = self.price(trace, layout, system, batches=bid)
        return tsys[bid] * byte_shares(trace, bid, len(tsys))
