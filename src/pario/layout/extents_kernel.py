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
    """The extent maps among ``leaves`` (a list of layouts) concatenated, with a directory
    per map.  ``e0[l]:e1[l]``: leaf l's extents (empty for a leaf that is not an extent
    map: its requests are gaps, ``is_ext[l]`` False)."""

    def __init__(self, leaves):
        maps = [lay for lay in leaves if isinstance(lay, ExtentMap)]
        if len(maps) == 1:  # no copy
            m = maps[0]
            cols = [m.offset, m.length, m.server, m.local, m.datafile]
        else:
            cols = [np.concatenate([getattr(m, k) for m in maps]) if maps else np.zeros(0, np.int64)
                    for k in ("offset", "length", "server", "local", "datafile")]
        self.off, self.len, self.srv, self.loc, self.df = (np.ascontiguousarray(c, dtype=np.int64) for c in cols)
        nl = len(leaves)
        self.is_ext = np.zeros(nl, dtype=np.bool_)
        self.e0 = np.zeros(nl, dtype=np.int64)
        self.e1 = np.zeros(nl, dtype=np.int64)
        self.dlo = np.zeros(nl, dtype=np.int64)
        self.dhi = np.zeros(nl, dtype=np.int64)
        self.dsh = np.zeros(nl, dtype=np.int64)
        self.d0 = np.zeros(nl + 1, dtype=np.int64)
        base = 0
        for i, lay in enumerate(leaves):
            if isinstance(lay, ExtentMap):
                self.is_ext[i] = True
                self.e0[i], self.e1[i] = base, base + len(lay)
                base += len(lay)
            nb = _buckets(int(self.e1[i] - self.e0[i]))
            self.d0[i + 1] = self.d0[i] + (nb + 1 if self.is_ext[i] else 0)
        self.dirs = np.zeros(int(self.d0[-1]), dtype=np.int64)
        _directories(self.off, self.len, self.is_ext, self.e0, self.e1, self.d0, self.dlo, self.dhi, self.dsh,
                     self.dirs)

    def arrays(self):
        return (self.is_ext, self.e0, self.e1, self.off, self.len, self.srv, self.loc, self.df, self.d0, self.dlo,
                self.dhi, self.dsh, self.dirs)


def _buckets(E: int) -> int:
    """Buckets of a directory of E extents: the power of two ≥ E (at least 1)."""
    nb = 1
    while nb < E:
        nb *= 2
    return nb


@njit(cache=True)
def _directories(off, ln, is_ext, e0, e1, d0, dlo, dhi, dsh, dirs):
    for leaf in range(len(is_ext)):
        if not is_ext[leaf] or e1[leaf] == e0[leaf]:
            continue
        a, b = e0[leaf], e1[leaf]
        lo = off[a]
        hi = off[b - 1] + ln[b - 1]
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
                while k < b and off[k] + ln[k] <= start:
                    k += 1
                dirs[d0[leaf] + bkt] = k
            else:
                dirs[d0[leaf] + bkt] = b


@njit(cache=True, inline="always")
def _first_extent(x, leaf, e0, e1, off, ln, d0, dlo, dhi, dsh, dirs):
    """Index of the first extent of ``leaf`` that ends after ``x``."""
    if x < dlo[leaf]:
        return e0[leaf]
    if x >= dhi[leaf]:
        return e1[leaf]
    bkt = (x - dlo[leaf]) >> dsh[leaf]
    lo = dirs[d0[leaf] + bkt]
    hi = dirs[d0[leaf] + bkt + 1]
    while lo < hi:  # first k in [lo, hi) with end > x (hi qualifies)
        mid = (lo + hi) >> 1
        if off[mid] + ln[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _count(fil, x0, ln, lid, is_ext, e0, e1, off, eln, srv, loc, df, d0, dlo, dhi, dsh, dirs):
    """Per request: covered pieces and gaps."""
    n = len(fil)
    ncov = np.zeros(n, dtype=np.int64)
    ngap = np.zeros(n, dtype=np.int64)
    for i in range(n):
        L = ln[i]
        if L <= 0:
            continue
        leaf = lid[fil[i]]
        if not is_ext[leaf]:
            ngap[i] = 1
            continue
        x = x0[i]
        e = x + L
        k = _first_extent(x, leaf, e0, e1, off, eln, d0, dlo, dhi, dsh, dirs)
        pos = x
        c = 0
        g = 0
        while k < e1[leaf] and off[k] < e:
            if off[k] > pos:
                g += 1
            c += 1
            pos = off[k] + eln[k]
            k += 1
        if pos < e:
            g += 1
        ncov[i] = c
        ngap[i] = g
    return ncov, ngap


@njit(cache=True, inline="always")
def _gap(g_req, g_x, g_len, g_leaf, gi, i, x, L, leaf):
    g_req[gi] = i
    g_x[gi] = x
    g_len[gi] = L
    g_leaf[gi] = leaf


@njit(cache=True)
def _fill(pieces, fil, x0, ln, lid, is_ext, e0, e1, off, eln, srv, loc, df, d0, dlo, dhi, dsh, dirs, ptr, gap_first,
          o_srv, o_loc, o_len, o_df, g_req, g_x, g_len, g_leaf):
    """``pieces``: the covered pieces at ``ptr[i]`` on; else the gaps (request, start,
    length, leaf) from ``gap_first[i]`` on."""
    n = len(fil)
    for i in range(n):
        L = ln[i]
        if L <= 0:
            continue
        leaf = lid[fil[i]]
        x = x0[i]
        e = x + L
        u = ptr[i] if pieces else 0
        gi = gap_first[i]
        if not is_ext[leaf]:
            if not pieces:
                _gap(g_req, g_x, g_len, g_leaf, gi, i, x, L, leaf)
            continue
        k = _first_extent(x, leaf, e0, e1, off, eln, d0, dlo, dhi, dsh, dirs)
        pos = x
        while k < e1[leaf] and off[k] < e:
            a = max(x, off[k])
            if pieces:
                b = min(e, off[k] + eln[k])
                o_srv[u] = srv[k]
                o_loc[u] = loc[k] + (a - off[k])
                o_len[u] = b - a
                o_df[u] = df[k]
                u += 1
            elif a > pos:
                _gap(g_req, g_x, g_len, g_leaf, gi, i, pos, a - pos, leaf)
                gi += 1
            pos = off[k] + eln[k]
            k += 1
        if pos < e and not pieces:
            _gap(g_req, g_x, g_len, g_leaf, gi, i, pos, e - pos, leaf)


def map_in_order(leaves, lid, fil, offset, length):
    """Sub-requests of requests ``(fil, offset, length)`` (in the caller's order) under
    per-file layouts (``leaves``, leaf id ``lid[file]``, at least one an extent map).

    Returns (ptr, server, local, length, datafile), int64: request i's sub-requests are
    rows ``ptr[i]:ptr[i+1]``, covered parts first (offset order), then the gaps' (mapped
    by the default layout)."""
    from .mapping import map_requests

    n = len(fil)
    es = ExtentSet(leaves)
    lid = np.asarray(lid, dtype=np.int64)
    fil = np.ascontiguousarray(fil)
    offset = np.ascontiguousarray(offset, dtype=np.int64)
    length = np.ascontiguousarray(length, dtype=np.int64)
    ncov, ngap = _count(fil, offset, length, lid, *es.arrays())
    gap_first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ngap, out=gap_first[1:])
    G = int(gap_first[-1])
    del ngap
    g_req = np.empty(G, dtype=np.int64)
    g_x = np.empty(G, dtype=np.int64)
    g_len = np.empty(G, dtype=np.int64)
    g_leaf = np.empty(G, dtype=np.int64)
    # default sub-requests of the gaps, in gap order (gaps are in request order)
    dcount = np.zeros(n, dtype=np.int64)
    parts = []
    if G:
        z = np.zeros(0, np.int64)
        _fill(False, fil, offset, length, lid, *es.arrays(), z, gap_first, z, z, z, z, g_req, g_x, g_len, g_leaf)
        for leaf in np.unique(g_leaf).tolist():  # per leaf: its default layout (or itself)
            lay = leaves[leaf]
            sel = np.flatnonzero(g_leaf == leaf)
            default = lay.default if isinstance(lay, ExtentMap) else lay
            if default is None:
                j = int(sel[0])
                raise ParioError(f"extent map has no default layout and does not cover bytes [{g_x[j]}, "
                                 f"{g_x[j] + g_len[j]}) of request {int(g_req[j])}")
            sub = map_requests(default, g_x[sel], g_len[sel])
            parts.append((sel[sub.req], sub.server.astype(np.int64), sub.local, sub.length))
        gidx = np.concatenate([p[0] for p in parts])
        o = np.argsort(gidx, kind="stable") if len(parts) > 1 else np.arange(len(gidx))
        gidx = gidx[o]
        d_srv, d_loc, d_len = (np.concatenate([p[k] for p in parts])[o] for k in (1, 2, 3))
        d_req = g_req[gidx]
        dcount = np.bincount(d_req, minlength=n).astype(np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ncov + dcount, out=ptr[1:])
    total = int(ptr[-1])
    o_srv = np.empty(total, dtype=np.int64)
    o_loc = np.empty(total, dtype=np.int64)
    o_len = np.empty(total, dtype=np.int64)
    o_df = np.empty(total, dtype=np.int64)
    _fill(True, fil, offset, length, lid, *es.arrays(), ptr, gap_first, o_srv, o_loc, o_len, o_df,
          g_req, g_x, g_len, g_leaf)
    if G:
        first = np.flatnonzero(np.r_[True, d_req[1:] != d_req[:-1]])
        within = np.arange(len(d_req)) - np.repeat(first, np.diff(np.r_[first, len(d_req)]))
        dest = ptr[d_req] + ncov[d_req] + within
        o_srv[dest], o_loc[dest], o_len[dest] = d_srv, d_loc, d_len
        o_df[dest] = 0
    return ptr, o_srv, o_loc, o_len, o_df
