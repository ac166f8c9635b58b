"""How a trace becomes *batches* of concurrent requests.

Every cost model of the papers prices a set of requests that are served *concurrently*
(p processes each issuing one request: CI-LAYOUT seed 002 §3, PADP seed 003 §3.2, PSA
seed 001 §3.2; all requests of a phase: CEDA seed 000 §3).  A trace is therefore cut into
batches that run one after another; a model prices each batch and sums.

Batching rules (``by``):

``"time"``  (needs a start time on every request)
    Requests are sorted by ``start`` (ties by row).  Each request occupies the half-open
    interval ``[start, end)`` (``end`` missing or < ``start`` is taken as ``start``).
    A request opens a new batch iff its ``start`` is ``>=`` the largest ``end`` of all
    requests before it in that order **and** its ``start`` differs from the previous
    request's ``start`` (requests that start at the same instant are always concurrent).
    So a batch is a maximal run of requests whose intervals overlap transitively
    (a connected component of the interval-overlap graph); back-to-back requests
    (``end == next start``) are not concurrent.

``"order"``
    The k-th request of every rank (k = its position within the rank, the trace's
    ``order`` column made dense 0, 1, 2, … per rank) forms batch k: ranks proceed in
    lock-step, as in IOR / the papers' benchmarks.

``"auto"`` (default)
    ``"time"`` when every request has a start time, else ``"order"``.

``"all"``  one batch holding every request;  ``"request"``  one batch per request.

Batch ids are dense (0 … B−1) and increase with time (``"time"``) or with k (``"order"``).
"""

from __future__ import annotations

import numpy as np

from ..arrays import unique
from .. import ParioError
from ..memo import IdentityCache, by_identity

BATCHINGS = ("auto", "time", "order", "all", "request")


_CACHE = IdentityCache(4)  # the same trace is priced many times


def batch_ids(trace, by: str = "auto") -> np.ndarray:
    """One batch id (int64, dense from 0) per trace row; see the module docstring.

    The array is read-only and cached by the trace's identity (:mod:`pario.memo`): a
    planner prices one trace under many layouts, and the compiled pricing shares its
    service order between calls that pass the same ids (:func:`pario.model.engine.prepared`)."""
    if by not in BATCHINGS:
        raise ParioError(f"unknown batching {by!r} (expected one of {', '.join(BATCHINGS)})")
    if by == "auto":  # the rule it stands for: "auto" and that rule share one array
        return _CACHE.get_or_compute((trace, by), lambda: batch_ids(trace, "time" if trace.has_times else "order"))
    return _CACHE.get_or_compute((trace, by), lambda: _batch_ids(trace, by))


CACHE_FACTOR = 10.0   # requests this many times faster than the profile's cheapest: served by a cache


def timing_caution(trace, system, by: str | None = "auto") -> str | None:
    """A sentence when batching by time (``by`` auto or time, a trace with times) rests on
    timings that cannot be the profile's servers': the trace's median request took at least
    :data:`CACHE_FACTOR` times less than the cheapest request of its median size the profile
    prices (:meth:`pario.system.profile.System.cheapest_request_s`) — a cache served it, and
    which of its requests overlapped says little of the concurrency of the servers the plan is
    for (README tour 7b: the same IOR requests priced 0.053 s by their microsecond overlaps,
    0.441 s in lock-step).  None otherwise."""
    if (by or "auto") not in ("auto", "time") or len(trace) == 0 or not trace.has_times:
        return None
    start, end = np.asarray(trace.start, dtype=np.float64), np.asarray(trace.end, dtype=np.float64)
    lat = end - start
    ok = np.isfinite(lat) & (lat > 0)
    if not ok.any():
        return None
    med = float(np.median(lat[ok]))
    size = int(np.median(np.asarray(trace.length)[ok]))
    model = system.cheapest_request_s(size)
    if model / med < CACHE_FACTOR:
        return None
    return (f"the trace's requests took {med * 1e6:.1f} µs (median, {size} bytes), {model / med:.0f}× less than "
            f"the cheapest request of that size {system.name} prices ({model * 1e3:.2f} ms): a cache served them, "
            "so which of them overlapped in time says little of the concurrency of the servers planned for; "
            "--by order batches every rank's k-th request together (the papers' lock-step)")


def _batch_ids(trace, by: str) -> np.ndarray:
    n = len(trace)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if by == "auto":
        by = "time" if trace.has_times else "order"
    if by == "all":
        return np.zeros(n, dtype=np.int64)
    if by == "request":
        return np.arange(n, dtype=np.int64)
    if by == "time":
        return _by_time(trace.start, trace.end)
    return _by_order(trace.rank, trace.order)


def _by_time(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    start = np.asarray(start, dtype=np.float64)
    if np.isnan(start).any():
        raise ParioError("batching by time needs a start time on every request (use by='order')")
    end = np.asarray(end, dtype=np.float64)
    end = np.where(np.isnan(end) | (end < start), start, end)
    idx = np.lexsort((np.arange(len(start)), start))
    s, e = start[idx], end[idx]
    prev_max = np.maximum.accumulate(e)[:-1]
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = (s[1:] >= prev_max) & (s[1:] != s[:-1])
    out = np.empty(len(s), dtype=np.int64)
    out[idx] = np.cumsum(new) - 1
    return out


def _by_order(rank: np.ndarray, order: np.ndarray) -> np.ndarray:
    from ..grouping import rank_positions

    fast = rank_positions(rank, order)  # one pass when every rank's rows are in order
    if fast is not None:
        return fast
    n = len(rank)
    idx = np.lexsort((np.arange(n), order, rank))
    r = rank[idx]
    first = np.r_[0, np.flatnonzero(np.diff(r)) + 1]
    pos = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    out = np.empty(n, dtype=np.int64)
    out[idx] = pos
    return out


def ranks_per_batch(rank: np.ndarray, bid: np.ndarray, n_batches: int | None = None, perm=None) -> np.ndarray:
    """p_b: number of distinct ranks in each batch.  ``perm``: a permutation that visits the
    rows batch by batch (:func:`service_order`), for the one-pass count."""
    nb = int(bid.max()) + 1 if n_batches is None and len(bid) else (n_batches or 0)
    if len(bid) == 0:
        return np.zeros(nb, dtype=np.int64)
    if perm is not None:
        from ..grouping import ranks_per_batch as one_pass

        out = one_pass(rank, bid, perm, nb)
        if out is not None:
            return out
    key = unique(bid.astype(np.int64) * (int(rank.max()) + 1) + rank)
    return np.bincount(key // (int(rank.max()) + 1), minlength=nb).astype(np.int64)


@by_identity()
def service_order(order: np.ndarray, bid: np.ndarray) -> np.ndarray:
    """The rows sorted by (batch, order, row): the order in which the distribution model
    serves them (CEDA seed 000 §3; :mod:`pario.model.engine`).  Read-only, cached by the
    identity of the two arrays (traces derived from one share its ``order`` column)."""
    from ..grouping import service_order as counting

    return counting(bid, order)


def split(trace, by: str = "auto") -> list:
    """The batches of a trace as a list of traces (for inspection and tests; models use ids)."""
    bid = batch_ids(trace, by)
    if len(bid) == 0:
        return []
    order = np.argsort(bid, kind="stable")
    cuts = np.flatnonzero(np.diff(bid[order])) + 1
    return [trace.take(rows) for rows in np.split(order, cuts)]
