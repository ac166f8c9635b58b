"""Sort-free grouping of trace rows (numba): the per-request keys every model derives.

The models need, for every request, its position among its rank's requests (batches "by
order"), whether it continues its rank's previous request on the same file (the sequential
α), the service order of a batching (batch, the rank's order, row), the distinct ranks of
each batch (p_b) and the request classes of the closed-form models.  Written with sorts,
each is a lexsort of the whole trace — 0.05 s at 10⁶ requests, 0.5–1 s at 10⁷.  But traces
are written in time order: within a rank (or a rank's file) the ``order`` column almost
always increases with the row, and batch ids are dense small integers.  The kernels here
take that path in one pass (dense tables indexed by rank, stream or batch), check the
assumption as they go, and return None when it does not hold; the caller then takes the
sort.  Results are identical to the sorted versions (the tests compare both on shuffled and
ordered traces).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# a dense table is used when it is at most this many times the number of rows (and fits)
_TABLE_FACTOR = 4


def _table_ok(size: int, n: int) -> bool:
    return 0 < size <= max(_TABLE_FACTOR * n, 1 << 16)


def _np(a: np.ndarray) -> np.ndarray:
    """A kernel's array with numpy's own dtype object: numba's is an equal but distinct one,
    so ``np.asarray(a, dtype=np.int64)`` would make a new view each time — and callers key
    caches by the identity of these arrays."""
    return a.view(np.dtype(a.dtype.str))


@njit(cache=True, nogil=True)
def _rank_positions(rank, order, nranks):
    """Position of each row among its rank's rows ordered by (order, row); ok = False when a
    rank's orders decrease along the rows."""
    n = len(rank)
    count = np.zeros(nranks, dtype=np.int64)
    last = np.full(nranks, np.iinfo(np.int64).min, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = rank[i]
        o = order[i]
        if o < last[r]:
            return out, False
        last[r] = o
        out[i] = count[r]
        count[r] += 1
    return out, True


def rank_positions(rank: np.ndarray, order: np.ndarray) -> np.ndarray | None:
    """Per row its position within its rank by (order, row), or None when the rows are not
    in order within every rank (the caller sorts)."""
    n = len(rank)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    nr = int(rank.max()) + 1
    if int(rank.min()) < 0 or not _table_ok(nr, n):
        return None
    out, ok = _rank_positions(rank, np.ascontiguousarray(order, dtype=np.int64), nr)
    return _np(out) if ok else None


@njit(cache=True, nogil=True)
def _sequential(rank, file, order, offset, length, nfiles, nstreams):
    n = len(rank)
    last_order = np.full(nstreams, np.iinfo(np.int64).min, dtype=np.int64)
    last_end = np.full(nstreams, -1, dtype=np.int64)
    seen = np.zeros(nstreams, dtype=np.bool_)
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        s = rank[i] * nfiles + file[i]
        o = order[i]
        if o < last_order[s]:
            return out, False
        last_order[s] = o
        if seen[s] and offset[i] == last_end[s]:
            out[i] = True
        seen[s] = True
        last_end[s] = offset[i] + length[i]
    return out, True


def sequential(rank, file, order, offset, length, nfiles: int) -> np.ndarray | None:
    """True where a request starts where its rank's previous request (by order, then row) on
    the same file ended; None when a (rank, file) stream's orders decrease along the rows."""
    n = len(rank)
    if n == 0:
        return np.zeros(0, dtype=bool)
    ns = (int(rank.max()) + 1) * max(1, nfiles)
    if int(rank.min()) < 0 or not _table_ok(ns, n):
        return None
    out, ok = _sequential(rank, file, np.ascontiguousarray(order, dtype=np.int64),
                          np.ascontiguousarray(offset, dtype=np.int64), np.ascontiguousarray(length, dtype=np.int64),
                          max(1, nfiles), ns)
    return _np(out) if ok else None


def service_order(bid: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The permutation that sorts rows by (batch id, order, row) — what
    ``np.lexsort((order, bid))`` gives (lexsort is stable) — by a counting sort when batch
    ids are dense, else by the lexsort.  The counting
    sort's permutation is int32 when the rows can be numbered so (4 bytes per request);
    batches whose rows are out of order are sorted on their own
    (:func:`pario.trace.sorting.by_key_then_order`)."""
    from .trace.sorting import by_key_then_order

    n = len(bid)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    nb = int(bid.max()) + 1
    if int(bid.min()) >= 0 and _table_ok(nb, n):
        return _np(by_key_then_order(np.ascontiguousarray(bid, dtype=np.int64),
                                     np.ascontiguousarray(order, dtype=np.int64), nb))
    return np.lexsort((order, bid))


@njit(cache=True, nogil=True)
def _ranks_per_batch(bid, rank, perm, nb, nranks):
    """Distinct ranks of each batch, the rows visited batch by batch (``perm``)."""
    out = np.zeros(nb, dtype=np.int64)
    mark = np.full(nranks, -1, dtype=np.int64)
    for k in range(len(perm)):
        i = perm[k]
        b = bid[i]
        r = rank[i]
        if mark[r] != b:
            mark[r] = b
            out[b] += 1
    return out


def ranks_per_batch(rank: np.ndarray, bid: np.ndarray, perm: np.ndarray, nb: int) -> np.ndarray | None:
    """p_b, given ``perm`` that visits the rows batch by batch (e.g. :func:`service_order`);
    None when the ranks are too sparse for a table."""
    if len(rank) == 0:
        return np.zeros(nb, dtype=np.int64)
    nr = int(rank.max()) + 1
    if int(rank.min()) < 0 or not _table_ok(nr, len(rank)):
        return None
    return _np(_ranks_per_batch(np.ascontiguousarray(bid, dtype=np.int64), rank, perm, nb, nr))


@njit(cache=True, nogil=True)
def _hash_groups(key, cap, max_groups):
    """Open addressing on int64 keys: per row its group (in order of first appearance),
    each group's key and first row; ok = False beyond ``max_groups`` groups."""
    n = len(key)
    mask = cap - 1
    slot_key = np.empty(cap, dtype=np.int64)
    slot_gid = np.full(cap, -1, dtype=np.int64)
    gid = np.empty(n, dtype=np.int64)
    gkey = np.empty(max_groups, dtype=np.int64)
    gfirst = np.empty(max_groups, dtype=np.int64)
    ng = 0
    for i in range(n):
        k = key[i]
        h = (k * np.int64(-7046029254386353131)) & mask  # multiplicative hash (golden ratio)
        while True:
            g = slot_gid[h]
            if g < 0:
                if ng == max_groups:
                    return gid, gkey, gfirst, ng, False
                slot_gid[h] = ng
                slot_key[h] = k
                gkey[ng] = k
                gfirst[ng] = i
                gid[i] = ng
                ng += 1
                break
            if slot_key[h] == k:
                gid[i] = g
                break
            h = (h + 1) & mask
    return gid, gkey, gfirst, ng, True


@njit(cache=True, nogil=True)
def _relabel(gid, new_id):
    for i in range(len(gid)):
        gid[i] = new_id[gid[i]]


def dense_groups(key: np.ndarray, max_groups: int = 1 << 16, sort_fallback: bool = True):
    """Group rows by an int64 key: (group id per row, numbered in ascending key order; the
    sorted distinct keys; the first row of each group) — what a stable sort and ``unique``
    give — in one pass when there are at most ``max_groups`` groups, else by the sort (or
    None with ``sort_fallback=False``)."""
    key = np.ascontiguousarray(key, dtype=np.int64)
    n = len(key)
    if n == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    cap = 1
    while cap < 2 * min(max_groups, n):
        cap *= 2
    gid, gkey, gfirst, ng, ok = _hash_groups(key, cap, min(max_groups, n))
    if ok:
        rank_of = np.empty(ng, dtype=np.int64)
        by_key = np.argsort(gkey[:ng], kind="stable")
        rank_of[by_key] = np.arange(ng)
        if not np.array_equal(rank_of, np.arange(ng)):  # first appearances not in key order
            _relabel(gid, rank_of)
        return _np(gid), _np(gkey)[:ng][by_key], _np(gfirst)[:ng][by_key]
    if not sort_fallback:
        return None
    from .arrays import unique

    u, inv = unique(key, return_inverse=True)
    first = np.full(len(u), n, dtype=np.int64)
    np.minimum.at(first, inv, np.arange(n))
    return inv, u, first
