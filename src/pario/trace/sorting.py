"""Orderings of a trace's requests without comparison sorts (numba).

The planners walk a trace in a few fixed orders: by stream (rank, file, op, order — the
identifier of CEDA seed 000 §4.2), by rank and order (the objects of Algorithm 1, §4.3),
by offset (the claim of replica bytes).  ``np.lexsort`` over several keys costs
~300 ns a request at 10^7 requests; here:

- :func:`counting_order`: a stable counting sort of rows by a small integer key (ranks,
  files, patterns: a few thousand values at most), two passes over the rows;
- :func:`by_key_then_order`: rows by a small key, then by the trace's ``order``, then by
  row — the counting sort, and only the groups whose ``order`` is not already
  non-decreasing in row order (rare: traces list a rank's requests in order) sorted again;
- :func:`offset_order`: rows by offset (ties in any order), an LSD radix sort on the
  offsets' significant bits (their common trailing zero bits and their minimum removed:
  IOR's offsets are multiples of the transfer size), 11 bits a pass.

Permutations are int32 when the trace has fewer than 2^31 rows (int64 otherwise): half the
memory of numpy's index arrays, and the kernels index with either.
"""

from __future__ import annotations

import numpy as np
from numba import njit

RADIX_BITS = 11


def index_dtype(n: int):
    """int32 for row indices of a trace of ``n`` rows when they fit, else int64."""
    return np.int32 if n < 2 ** 31 - 1 else np.int64


@njit(cache=True)
def _counting(rows, key, nkeys):
    """``rows`` stably sorted by ``key[row]`` (0 ≤ key < nkeys)."""
    cnt = np.zeros(nkeys + 1, dtype=np.int64)
    for i in range(len(rows)):
        cnt[key[rows[i]] + 1] += 1
    for k in range(nkeys):
        cnt[k + 1] += cnt[k]
    out = np.empty_like(rows)
    for i in range(len(rows)):
        r = rows[i]
        k = key[r]
        out[cnt[k]] = r
        cnt[k] += 1
    return out


def counting_order(rows: np.ndarray, key: np.ndarray, nkeys: int | None = None) -> np.ndarray:
    """``rows`` (indices into ``key``) stably sorted by ``key[row]``, a non-negative integer
    key with ``nkeys`` values (default ``key.max() + 1``)."""
    if nkeys is None:
        nkeys = int(key.max()) + 1 if len(key) else 0
    return _counting(rows, key, max(int(nkeys), 1))


@njit(cache=True)
def _sort_groups_by(perm, key, order):
    """Within each run of equal ``key[perm[i]]``, stably sort ``perm`` by ``order[row]``
    (only runs that are not already non-decreasing)."""
    n = len(perm)
    a = 0
    while a < n:
        k = key[perm[a]]
        b = a + 1
        ok = True
        while b < n and key[perm[b]] == k:
            if order[perm[b]] < order[perm[b - 1]]:
                ok = False
            b += 1
        if not ok:
            seg = perm[a:b].copy()
            vals = np.empty(b - a, dtype=np.int64)
            for i in range(b - a):
                vals[i] = order[seg[i]]
            o = np.argsort(vals, kind="mergesort")
            for i in range(b - a):
                perm[a + i] = seg[o[i]]
        a = b
    return perm


def by_key_then_order(key: np.ndarray, order: np.ndarray, nkeys: int | None = None,
                      rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (all, or ``rows`` in ascending row order) sorted by (``key``, ``order``, row) —
    ``np.lexsort((rows, order[rows], key[rows]))`` in O(n) when the groups of ``key`` list
    their ``order`` non-decreasing (else those groups are sorted)."""
    n = len(key)
    if rows is None:
        rows = np.arange(n, dtype=index_dtype(n))
    perm = counting_order(rows, key, nkeys)
    return _sort_groups_by(perm, key, order)


def stream_key(rank: np.ndarray, file: np.ndarray, op: np.ndarray | None) -> tuple[np.ndarray, int] | None:
    """Dense key of (rank, file[, op]) — ``(rank·F + file)·2 + op`` — and its number of
    values, or None when that product is too large for a counting sort."""
    n = len(rank)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 1
    R = int(rank.max()) + 1
    F = int(file.max()) + 1
    O = 2 if op is not None else 1
    nkeys = R * F * O
    if nkeys > max(4 * n, 1 << 20):
        return None
    key = _stream_key(rank, file, op if op is not None else np.zeros(0, dtype=np.int8), F, O)
    return key, nkeys


@njit(cache=True)
def _stream_key(rank, file, op, F, O):
    key = np.empty(len(rank), dtype=np.int64)
    for i in range(len(rank)):
        k = np.int64(rank[i]) * F + file[i]
        key[i] = k * O + (op[i] if O == 2 else 0)
    return key


# ---------------------------------------------------------------------------- by offset


@njit(cache=True)
def _radix_offsets(values, rows):
    """``rows`` sorted by ``values[row]`` (LSD radix, RADIX_BITS a pass, stable)."""
    n = len(rows)
    out = rows.copy()
    if n < 2:
        return out
    lo = values[rows[0]]
    acc = np.int64(0)
    for i in range(n):
        v = values[rows[i]]
        if v < lo:
            lo = v
    for i in range(n):
        acc |= values[rows[i]] - lo
    if acc == 0:
        return out
    shift = 0
    while (acc >> shift) & 1 == 0:
        shift += 1
    top = 0
    while (acc >> top) != 0:
        top += 1
    bits = top - shift
    nb = 1 << RADIX_BITS
    mask = nb - 1
    keys = np.empty(n, dtype=np.int64)
    for i in range(n):
        keys[i] = (values[out[i]] - lo) >> shift
    tmp_k = np.empty(n, dtype=np.int64)
    tmp_r = np.empty_like(out)
    cnt = np.zeros(nb, dtype=np.int64)
    p = 0
    while p < bits:
        cnt[:] = 0
        for i in range(n):
            cnt[(keys[i] >> p) & mask] += 1
        s = 0
        for d in range(nb):
            c = cnt[d]
            cnt[d] = s
            s += c
        for i in range(n):
            d = (keys[i] >> p) & mask
            j = cnt[d]
            cnt[d] = j + 1
            tmp_k[j] = keys[i]
            tmp_r[j] = out[i]
        keys, tmp_k = tmp_k, keys
        out, tmp_r = tmp_r, out
        p += RADIX_BITS
    return out


def offset_order(offset: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (all, or ``rows``) sorted by ``offset`` (ties in row order)."""
    n = len(offset)
    if rows is None:
        rows = np.arange(n, dtype=index_dtype(n))
    return _radix_offsets(np.asarray(offset, dtype=np.int64), rows)
