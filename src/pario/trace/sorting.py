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
- :func:`offset_order`: rows by offset (ties in row order), an LSD radix sort on the
  offsets' significant bits (their common trailing zero bits and their minimum removed:
  IOR's offsets are multiples of the transfer size), at most 13 bits a pass.

Permutations are int32 when the trace has fewer than 2^31 rows (int64 otherwise): half the
memory of numpy's index arrays, and the kernels index with either.
"""

from __future__ import annotations

import numpy as np
from numba import njit

RADIX_BITS = 13  # at most a pass: 8192 counters and write streams


def index_dtype(n: int):
    """int32 for row indices of a trace of ``n`` rows when they fit, else int64."""
    return np.int32 if n < 2 ** 31 - 1 else np.int64


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _counting_all(key, order, nkeys, perm):
    """Every row stably sorted by ``key`` into ``perm``; and whether ``order`` is
    non-decreasing inside each key's rows (then ``perm`` is the (key, order, row) order)."""
    n = len(key)
    start = np.zeros(nkeys + 1, dtype=np.int64)
    for i in range(n):
        start[key[i] + 1] += 1
    for k in range(nkeys):
        start[k + 1] += start[k]
    fill = start[:nkeys].copy()
    for i in range(n):
        k = key[i]
        perm[fill[k]] = i
        fill[k] += 1
    for k in range(nkeys):
        for j in range(start[k] + 1, start[k + 1]):
            if order[perm[j]] < order[perm[j - 1]]:
                return perm, False
    return perm, True


def counting_order(rows: np.ndarray, key: np.ndarray, nkeys: int | None = None) -> np.ndarray:
    """``rows`` (indices into ``key``) stably sorted by ``key[row]``, a non-negative integer
    key with ``nkeys`` values (default ``key.max() + 1``)."""
    if nkeys is None:
        nkeys = int(key.max()) + 1 if len(key) else 0
    return _counting(rows, key, max(int(nkeys), 1))


@njit(cache=True, nogil=True)
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
    if rows is None:  # all rows: counted straight from the key, the order checked as it goes
        if nkeys is None:
            nkeys = int(key.max()) + 1 if n else 0
        perm, ok = _counting_all(key, order, max(int(nkeys), 1), np.empty(n, dtype=index_dtype(n)))
        return perm if ok else _sort_groups_by(perm, key, order)
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
def _key_range(values, rows):
    """(min, common trailing zero bits, significant bits) of ``values[rows] - min``."""
    lo = values[rows[0]]
    for i in range(len(rows)):
        lo = min(lo, values[rows[i]])
    acc = np.int64(0)
    for i in range(len(rows)):
        acc |= values[rows[i]] - lo
    if acc == 0:
        return lo, 0, 0
    shift = 0
    while (acc >> shift) & 1 == 0:
        shift += 1
    top = 0
    while (acc >> top) != 0:
        top += 1
    return lo, shift, top - shift


@njit(cache=True)
def _keys(values, rows, lo, shift, keys):
    for i in range(len(rows)):
        keys[i] = (values[rows[i]] - lo) >> shift


@njit(cache=True)
def _radix_pass(src_k, src_r, dst_k, dst_r, p, width):
    """One stable counting pass on key bits ``p … p + width`` (a loop that rebinds the
    arrays it writes is compiled far slower: the caller swaps them)."""
    mask = (1 << width) - 1
    cnt = np.zeros(1 << width, dtype=np.int64)
    for i in range(len(src_k)):
        cnt[(src_k[i] >> p) & mask] += 1
    s = 0
    for d in range(1 << width):
        c = cnt[d]
        cnt[d] = s
        s += c
    for i in range(len(src_k)):
        d = (src_k[i] >> p) & mask
        j = cnt[d]
        cnt[d] = j + 1
        dst_k[j] = src_k[i]
        dst_r[j] = src_r[i]


def offset_order(offset: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (all, or ``rows``) sorted by ``offset`` (ties in row order): an LSD radix sort
    on the significant bits of ``offset - min`` (common trailing zeros dropped), in as few
    passes of at most :data:`RADIX_BITS` bits as they need, the keys 32-bit when they fit."""
    n = len(offset)
    values = np.asarray(offset, dtype=np.int64)
    rows = np.arange(n, dtype=index_dtype(n)) if rows is None else np.asarray(rows)
    if len(rows) < 2:
        return rows.copy()
    lo, shift, bits = _key_range(values, rows)
    if bits == 0:
        return rows.copy()
    passes = -(-bits // RADIX_BITS)
    width = -(-bits // passes)
    keys = np.empty(len(rows), dtype=np.uint32 if bits <= 32 else np.int64)
    _keys(values, rows, lo, shift, keys)
    src, dst = (keys, rows.copy()), (np.empty_like(keys), np.empty_like(rows))
    for k in range(passes):
        _radix_pass(*src, *dst, k * width, width)
        src, dst = dst, src
    return src[1]
