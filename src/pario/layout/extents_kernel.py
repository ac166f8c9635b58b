"""Compiled mapping of requests under extent maps (CEDA's replica layouts; numba).

:func:`pario.layout.mapping.map_trace` maps every request with ``searchsorted`` over the
extents — a binary search whose every step misses the cache once the extent map is larger
than the cache (≈ 1 µs a request at 10^7 requests) — and sorts the sub-requests back into
request order.  Here the requests are mapped in the order the caller gives them (the
pricing kernel's service order), into the per-request runs that kernel reads
(:func:`pario.model.engine.price_kernel`, mode 1):

- each extent map gets a *directory*: the span of its extents cut into a power of two of
  equal buckets (about one per extent), and per bucket the first extent that ends inside
  or after it; a request's first extent is then found in its bucket (a binary search over
  the few extents of that bucket), with independent memory accesses from one request to
  the next;
- a request's sub-requests: the parts covered by extents, in offset order (server, local =
  the extent's local offset + the distance into it, data file ≥ 1), then the uncovered
  parts ("gaps") mapped by the map's default layout, as :func:`map_trace` orders them;
  files whose layout is not an extent map are one gap per request, mapped by that layout;
- two passes (count, then fill) so that the arrays are allocated once at their size; the
  gaps are mapped by :func:`pario.layout.mapping.map_requests` (vectorised, exact).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import ParioError
from .types import ExtentMap


class ExtentSet:
    """Extent maps as one table of records ``rec[k] = (offset, end, local, server·2^32 +
    datafile)`` — the fields a lookup reads sit in one cache line (32 bytes), not five
    arrays —
    with a directory per map.  Leaf l (a file's layout) has the records ``e0[l]:e1[l]``
    (sorted by offset, disjoint) and maps its uncovered bytes by ``defaults[l]``; a leaf
    that is not an extent map (``is_ext[l]`` False) maps all its requests by
    ``defaults[l]``."""

    def __init__(self, rec: np.ndarray, e0, e1, is_ext, defaults: list):
        self.rec = rec
        self.e0 = np.asarray(e0, dtype=np.int64)
        self.e1 = np.asarray(e1, dtype=np.int64)
        self.is_ext = np.asarray(is_ext, dtype=np.bool_)
        self.defaults = list(defaults)
        nl = len(self.e0)
        self.dlo = np.zeros(nl, dtype=np.int64)
        self.dhi = np.zeros(nl, dtype=np.int64)
        self.dsh = np.zeros(nl, dtype=np.int64)
        self.d0 = np.zeros(nl + 1, dtype=np.int64)
        for i in range(nl):
            nb = _buckets(int(self.e1[i] - self.e0[i]))
            self.d0[i + 1] = self.d0[i] + (nb + 1 if self.is_ext[i] else 0)
        self.dirs = np.zeros(int(self.d0[-1]), dtype=np.int32 if len(rec) < 2 ** 31 - 1 else np.int64)
        _directories(self.rec, self.is_ext, self.e0, self.e1, self.d0, self.dlo, self.dhi, self.dsh, self.dirs)

    @classmethod
    def of_layouts(cls, leaves) -> "ExtentSet":
        """The extent maps among ``leaves`` (copied into records); other layouts map their
        requests whole."""
        E = sum(len(lay) for lay in leaves if isinstance(lay, ExtentMap))
        rec = np.empty((E, 4), dtype=np.int64)
        nl = len(leaves)
        e0, e1 = np.zeros(nl, dtype=np.int64), np.zeros(nl, dtype=np.int64)
        base = 0
        for i, lay in enumerate(leaves):
            if isinstance(lay, ExtentMap):
                if len(lay) and max(int(lay.server.max()), int(lay.datafile.max())) >= 2 ** 31 or (
                        len(lay) and int(lay.datafile.min()) < 0):
                    raise ParioError("extent map: server and data file indices must lie in [0, 2^31)")
                e0[i], e1[i] = base, base + len(lay)
                _records(rec, base, lay.offset, lay.length, lay.server, lay.local, lay.datafile)
                base += len(lay)
        is_ext = [isinstance(lay, ExtentMap) for lay in leaves]
        return cls(rec, e0, e1, is_ext, [lay.default if isinstance(lay, ExtentMap) else lay for lay in leaves])

    def arrays(self):
        return self.is_ext, self.e0, self.e1, self.rec, self.d0, self.dlo, self.dhi, self.dsh, self.dirs


def _buckets(E: int) -> int:
    """Buckets of a directory of E extents: the power of two ≥ E / 2 (at least 1)."""
    nb = 1
    while 2 * nb < E:
        nb *= 2
    return nb


@njit(cache=True)
def _records(rec, base, off, ln, srv, loc, df):
    for k in range(len(off)):
        rec[base + k, 0] = off[k]
        rec[base + k, 1] = off[k] + ln[k]
        rec[base + k, 2] = loc[k]
        rec[base + k, 3] = (srv[k] << 32) | df[k]


@njit(cache=True)
def _directories(rec, is_ext, e0, e1, d0, dlo, dhi, dsh, dirs):
    """Per extent map: its span [lo, hi) cut into nb = 2^m buckets of 2^sh bytes, and per
    bucket the first record that ends after the bucket's start (``dirs``, nb + 1 entries)."""
    for leaf in range(len(is_ext)):
        if not is_ext[leaf] or e1[leaf] == e0[leaf]:
            continue
        a, b = e0[leaf], e1[leaf]
        lo = rec[a, 0]
        hi = rec[b - 1, 1]
        nb = d0[leaf + 1] - d0[leaf] - 1
        span = hi - lo
        sh = 0
        while ((span - 1) >> sh) >= nb:
            sh += 1
        dlo[leaf], dhi[leaf], dsh[leaf] = lo, hi, sh
        k = a
        for bkt in range(nb + 1):
            if bkt < ((span - 1) >> sh) + 1:
                start = lo + (bkt << sh)
                while k < b and rec[k, 1] <= start:
                    k += 1
                dirs[d0[leaf] + bkt] = k
            else:
                dirs[d0[leaf] + bkt] = b


BLOCK = 64  # requests whose first extents are looked up together


@njit(cache=True)
def _grow(a, size):
    """``a`` (rows × capacity) with at least ``size`` columns."""
    out = np.empty((a.shape[0], max(size, 2 * a.shape[1])), dtype=a.dtype)
    out[:, :a.shape[1]] = a
    return out


@njit(cache=True)
def _gap(g, G, i, x, L, leaf):
    """Gap G (request, start, length, leaf) into ``g``, grown if needed; returns (g, G + 1)."""
    if G >= g.shape[1]:
        g = _grow(g, G + 1)
    g[0, G] = i
    g[1, G] = x
    g[2, G] = L
    g[3, G] = leaf
    return g, G + 1


@njit(cache=True)
def _map(fil, x0, ln, lid, is_ext, e0, e1, rec, d0, dlo, dhi, dsh, dirs, cap):
    """The covered pieces of every request, in request order, and the gaps.

    A block of requests at a time, stage by stage — every request's bucket bounds, then
    every request's candidate record (and the next record's start), then the checks and
    the output — so that the cache misses of different requests are independent and
    overlap (a lookup whose branch depends on a missed load stalls the next one
    otherwise).  Returns (ptr, sub-requests — ``sub64`` rows local, length, ``sub32`` rows
    server, datafile (int32: a sub-request takes 24 bytes); ``ptr[i]:ptr[i+1]`` the covered
    pieces of request i, capacity ≥ ptr[n] —, gaps — rows request, start, length, leaf —,
    number of gaps)."""
    n = len(fil)
    E = len(rec)
    ptr = np.zeros(n + 1, dtype=np.int64)
    sub64 = np.empty((2, cap), dtype=np.int64)
    sub32 = np.empty((2, cap), dtype=np.int32)
    g = np.empty((4, 16), dtype=np.int64)
    lo = np.empty(BLOCK, dtype=np.int64)
    hi = np.empty(BLOCK, dtype=np.int64)
    R = np.zeros((BLOCK, 5), dtype=np.int64)  # candidate record, then the next record's start
    u = 0
    G = 0
    for b0 in range(0, n, BLOCK):
        b1 = min(n, b0 + BLOCK)
        for i in range(b0, b1):  # stage 1: the request's bucket in its map's directory
            j = i - b0
            leaf = lid[fil[i]]
            x = x0[i]
            lo[j] = -1
            if ln[i] > 0 and is_ext[leaf]:
                if x < dlo[leaf]:
                    lo[j] = e0[leaf]
                    hi[j] = e0[leaf]
                elif x >= dhi[leaf]:
                    lo[j] = e1[leaf]
                    hi[j] = e1[leaf]
                else:
                    bkt = d0[leaf] + ((x - dlo[leaf]) >> dsh[leaf])
                    lo[j] = dirs[bkt]
                    hi[j] = dirs[bkt + 1]
        for j in range(b1 - b0):  # stage 2: the candidate record and the next one's start
            k = lo[j]
            if 0 <= k < E:
                for c in range(4):
                    R[j, c] = rec[k, c]
                R[j, 4] = rec[k + 1, 0] if k + 1 < E else 0
        if u + 2 * BLOCK > sub64.shape[1]:
            sub64 = _grow(sub64, u + 2 * BLOCK)
            sub32 = _grow(sub32, u + 2 * BLOCK)
        for i in range(b0, b1):  # stage 3: the first record ending after x; the pieces
            j = i - b0
            k = lo[j]
            x = x0[i]
            e = x + ln[i]
            if k < 0:
                if ln[i] > 0:  # a file whose layout is not an extent map: one gap
                    g, G = _gap(g, G, i, x, ln[i], lid[fil[i]])
                ptr[i + 1] = u
                continue
            leaf = lid[fil[i]]
            last = e1[leaf]
            h = hi[j]
            if k < h and R[j, 1] <= x:  # not the candidate: search the bucket
                if h - k > 8:
                    while k < h:
                        mid = (k + h) >> 1
                        if rec[mid, 1] > x:
                            h = mid
                        else:
                            k = mid + 1
                else:
                    while k < h and rec[k, 1] <= x:
                        k += 1
                if k < E:
                    for c in range(4):
                        R[j, c] = rec[k, c]
                    R[j, 4] = rec[k + 1, 0] if k + 1 < E else 0
            pos = x  # every record from k that starts before e (the first one and the next's start in R)
            k0 = k
            while k < last:
                if k == k0:
                    rs, re_, loc, sd = R[j, 0], R[j, 1], R[j, 2], R[j, 3]
                elif k == k0 + 1 and R[j, 4] >= e:
                    break
                else:
                    rs, re_, loc, sd = rec[k, 0], rec[k, 1], rec[k, 2], rec[k, 3]
                srv = sd >> 32
                df = sd & 0xFFFFFFFF
                if rs >= e:
                    break
                a = max(x, rs)
                if a > pos:
                    g, G = _gap(g, G, i, pos, a - pos, leaf)
                if u >= sub64.shape[1]:
                    sub64 = _grow(sub64, u + 1)
                    sub32 = _grow(sub32, u + 1)
                sub32[0, u] = srv
                sub64[0, u] = loc + (a - rs)
                sub64[1, u] = min(e, re_) - a
                sub32[1, u] = df
                u += 1
                pos = re_
                k += 1
            if pos < e:
                g, G = _gap(g, G, i, pos, e - pos, leaf)
            ptr[i + 1] = u
    return ptr, sub64, sub32, g, G


@njit(cache=True)
def _merge(ptr, sub64, sub32, d_req, d_sub):
    """Every request's covered pieces followed by its gaps' default sub-requests (``d_sub``
    rows server, local, length; ``d_req``: their requests, in request order)."""
    n = len(ptr) - 1
    r64 = np.empty((2, ptr[n] + len(d_req)), dtype=np.int64)
    r32 = np.empty((2, ptr[n] + len(d_req)), dtype=np.int32)
    nptr = np.zeros(n + 1, dtype=np.int64)
    u = 0
    d = 0
    for i in range(n):
        for v in range(ptr[i], ptr[i + 1]):
            r64[0, u], r64[1, u], r32[0, u], r32[1, u] = sub64[0, v], sub64[1, v], sub32[0, v], sub32[1, v]
            u += 1
        while d < len(d_req) and d_req[d] == i:
            r32[0, u], r64[0, u], r64[1, u], r32[1, u] = d_sub[0, d], d_sub[1, d], d_sub[2, d], 0
            u += 1
            d += 1
        nptr[i + 1] = u
    return nptr, r64, r32


def map_in_order(leaves, lid, fil, offset, length):
    """Sub-requests of requests ``(fil, offset, length)`` (in the caller's order) under
    per-file layouts (``leaves``, leaf id ``lid[file]``, at least one an extent map).

    Returns (ptr, server, local, length, datafile) — server and datafile int32, the rest
    int64: request i's sub-requests are rows ``ptr[i]:ptr[i+1]``, covered parts first (offset order), then the gaps' (mapped
    by the default layout)."""
    return map_extent_set(ExtentSet.of_layouts(leaves), lid, fil, offset, length)


def map_extent_set(es: ExtentSet, lid, fil, offset, length):
    """:func:`map_in_order` with the extent maps given as an :class:`ExtentSet`."""
    from .mapping import map_requests

    n = len(fil)
    lid = np.asarray(lid, dtype=np.int64)
    fil = np.ascontiguousarray(fil)
    offset = np.ascontiguousarray(offset, dtype=np.int64)
    length = np.ascontiguousarray(length, dtype=np.int64)
    ptr, sub64, sub32, g, G = _map(fil, offset, length, lid, *es.arrays(), n + 1024)
    if G:
        g_req, g_x, g_len, g_leaf = g[:, :G]
        parts = []
        for leaf in np.unique(g_leaf).tolist():  # per leaf: its default layout
            sel = np.flatnonzero(g_leaf == leaf)
            default = es.defaults[leaf]
            if default is None:
                j = int(sel[0])
                raise ParioError(f"extent map has no default layout and does not cover bytes [{g_x[j]}, "
                                 f"{g_x[j] + g_len[j]}) of request {int(g_req[j])}")
            sub = map_requests(default, g_x[sel], g_len[sel])
            parts.append((sel[sub.req], np.stack([sub.server.astype(np.int64), sub.local, sub.length])))
        gidx = np.concatenate([p[0] for p in parts])
        o = np.argsort(gidx, kind="stable") if len(parts) > 1 else np.arange(len(gidx))
        ptr, sub64, sub32 = _merge(ptr, sub64, sub32, g_req[gidx[o]],
                                   np.concatenate([p[1] for p in parts], axis=1)[:, o])
    u = int(ptr[-1])
    return ptr, sub32[0, :u], sub64[0, :u], sub64[1, :u], sub32[1, :u]


@njit(cache=True)
def keep_requests(ptr, srv, loc, ln, df, keep):
    """Drops, in place, the sub-requests of the requests with ``keep`` False (their runs
    become empty); returns the number of sub-requests left (the arrays' valid prefix)."""
    u = 0
    a = ptr[0]
    for i in range(len(ptr) - 1):
        b = ptr[i + 1]
        if keep[i]:
            for v in range(a, b):
                srv[u] = srv[v]
                loc[u] = loc[v]
                ln[u] = ln[v]
                df[u] = df[v]
                u += 1
        ptr[i + 1] = u
        a = b
    return u
