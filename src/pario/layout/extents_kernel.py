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
    """Buckets of a directory of E extents: the power of two ≥ 2·E (at least 1)."""
    nb = 1
    while nb < 2 * E:
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
SPARE = 1024  # room for sub-requests beyond one a request, and for gaps, before the tables grow


@njit(cache=True)
def _map(fil, x0, ln, lid, is_ext, e0, e1, rec, d0, dlo, dhi, dsh, dirs, i0, u0, G0, ptr, sub64, sub32, g):
    """The covered pieces of requests ``i0`` … in request order, and the gaps, from ``u0`` /
    ``G0`` on in the output tables, until the last request or a full table.

    A block of requests at a time, stage by stage — every request's bucket bounds, then
    every request's candidate record (and the next record's start), then the checks and
    the output — so that the cache misses of different requests are independent and
    overlap (a lookup whose branch depends on a missed load stalls the next one
    otherwise).  Writes ``ptr`` (``ptr[i]:ptr[i+1]`` the covered pieces of request i),
    ``sub64`` (rows local, length), ``sub32`` (rows server, data file: a sub-request takes
    24 bytes), ``g`` (gaps: rows request, start, length, leaf).  Returns (the first request
    not done — n when all are —, pieces and gaps before it, pieces and gaps when a table
    was found full).  The tables are never reallocated here:
    a loop that may rebind an array is compiled far slower (measured 1.6×)."""
    n = len(fil)
    E = len(rec)
    cap = sub64.shape[1]
    gcap = g.shape[1]
    lo = np.empty(BLOCK, dtype=np.int64)
    hi = np.empty(BLOCK, dtype=np.int64)
    R = np.zeros((BLOCK, 5), dtype=np.int64)  # candidate record, then the next record's start
    u = u0
    G = G0
    for b0 in range(i0, n, BLOCK):
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
        for i in range(b0, b1):  # stage 3: the first record ending after x; the pieces
            j = i - b0
            k = lo[j]
            x = x0[i]
            e = x + ln[i]
            ui = u
            Gi = G
            if k < 0:
                if ln[i] > 0:  # a file whose layout is not an extent map: one gap
                    if G == gcap:
                        return i, ui, Gi, u, G
                    g[0, G] = i
                    g[1, G] = x
                    g[2, G] = ln[i]
                    g[3, G] = lid[fil[i]]
                    G += 1
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
                if rs >= e:
                    break
                if u == cap or G + 1 >= gcap:  # a table is full: the caller grows it, request i again
                    return i, ui, Gi, u, G
                a = max(x, rs)
                if a > pos:
                    g[0, G] = i
                    g[1, G] = pos
                    g[2, G] = a - pos
                    g[3, G] = leaf
                    G += 1
                sub32[0, u] = sd >> 32
                sub64[0, u] = loc + (a - rs)
                sub64[1, u] = min(e, re_) - a
                sub32[1, u] = sd & 0xFFFFFFFF
                u += 1
                pos = re_
                k += 1
            if pos < e:
                if G == gcap:
                    return i, ui, Gi, u, G
                g[0, G] = i
                g[1, G] = pos
                g[2, G] = e - pos
                g[3, G] = leaf
                G += 1
            ptr[i + 1] = u
    return n, u, G, u, G


@njit(cache=True)
def _merge(ptr, sub64, sub32, d_req, d_sub):
    """Every request's covered pieces followed by its gaps' default sub-requests (``d_sub``
    rows server, local, length; ``d_req``: their requests, in request order)."""
    n = len(ptr) - 1
    r64 = np.empty((2, ptr[n] + len(d_req)), dtype=np.int64)
    r32 = np.empty((2, ptr[n] + len(d_req)), dtype=np.int32)
    nptr = np.zeros(n + 1, dtype=np.int64)
    u = ptr[0]  # (the rows before it: the caller's)
    nptr[0] = u
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


class Buffers:
    """Arrays reused from one call to the next (chunks of one pricing): fresh large arrays
    cost their page faults again every time (≈ 40 ns a request here)."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, rows: int, size: int, dtype) -> np.ndarray:
        """An array ``(rows, ≥ size)`` (``rows`` 0: 1-D) of ``dtype``, reused when big enough."""
        a = self.arrays.get(name)
        cols = a.shape[-1] if a is not None else -1
        if cols < size:
            grown = max(size, cols + cols // 2)
            a = np.empty((rows, grown) if rows else grown, dtype=dtype)
            self.arrays[name] = a
        return a


def map_extent_set(es: ExtentSet, lid, fil, offset, length, *, buffers: Buffers | None = None, front: int = 0):
    """:func:`map_in_order` with the extent maps given as an :class:`ExtentSet`.

    ``front``: requests and sub-requests left free before the mapped ones, for the
    caller's own (``ptr`` then has ``front + n + 1`` entries, request i's sub-requests are
    rows ``ptr[front + i]:ptr[front + i + 1]``, and ``ptr[front] = front``); ``buffers``:
    where the tables are taken from (reused)."""
    from .mapping import map_requests

    n = len(fil)
    buffers = buffers or Buffers()
    lid = np.asarray(lid, dtype=np.int64)
    fil = np.ascontiguousarray(fil)
    offset = np.ascontiguousarray(offset, dtype=np.int64)
    length = np.ascontiguousarray(length, dtype=np.int64)
    ptr_all = buffers.get("ptr", 0, front + n + 1, np.int64)[:front + n + 1]
    ptr = ptr_all[front:]
    ptr[0] = front
    cap = front + n + SPARE  # (one sub-request a request, and spare)
    sub64, sub32 = buffers.get("sub64", 2, cap, np.int64), buffers.get("sub32", 2, cap, np.int32)
    g = buffers.get("gaps", 4, SPARE, np.int64)
    i, u, G = 0, front, 0
    while True:
        i, u, G, full_u, full_G = _map(fil, offset, length, lid, *es.arrays(), i, u, G, ptr, sub64, sub32, g)
        if i == n:
            break
        if full_u + 2 >= sub64.shape[1]:  # grown (the rows so far kept)
            old64, old32 = sub64, sub32
            sub64 = buffers.get("sub64", 2, full_u + 2 + SPARE, np.int64)
            sub32 = buffers.get("sub32", 2, full_u + 2 + SPARE, np.int32)
            sub64[:, :u], sub32[:, :u] = old64[:, :u], old32[:, :u]
        if full_G + 4 >= g.shape[1]:
            old = g
            g = buffers.get("gaps", 4, full_G + 4 + SPARE, np.int64)
            g[:, :G] = old[:, :G]
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
        merged, sub64, sub32 = _merge(ptr, sub64, sub32, g_req[gidx[o]],
                                      np.concatenate([p[1] for p in parts], axis=1)[:, o])
        ptr[:] = merged
    u = int(ptr[-1])
    return ptr_all, sub32[0, :u], sub64[0, :u], sub64[1, :u], sub32[1, :u]


@njit(cache=True)
def keep_requests(ptr, srv, loc, ln, df, keep):
    """Drops, in place, the sub-requests of the requests with ``keep`` False (their runs
    become empty); returns the end of the sub-requests left (the arrays' valid prefix)."""
    u = ptr[0]
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
