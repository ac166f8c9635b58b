"""An independent mapping of requests to sub-requests (the oracle of the store engine's).

``pario.layout.map_requests`` is the engine's mapping (``src/pario/native/store/layout.c``)
for every model, the simulator and the store.  This is a second implementation in numpy,
written from SPEC §1 and the layouts' byte-count functions (:meth:`pario.layout.types.Layout.counts`):
the request ``[x, x+L)`` has on server ``j`` exactly ``C_j(x+L) − C_j(x)`` bytes at server-local
offset ``C_j(x)``; an extent map's covered parts come from its rows, its gaps from its default
layout.  The tests check the engine (and the store's bytes) against it.  (It was pario's
mapping before the store engine's became the one.)
"""

from __future__ import annotations

import numpy as np

from pario import ParioError
from pario.layout import ExtentMap, Layout, SubRequests

CHUNK = 1 << 18


def _map_monotone(layout: Layout, x: np.ndarray, L: np.ndarray) -> SubRequests:
    parts = []
    for a in range(0, len(x), CHUNK):
        xs, ls = x[a:a + CHUNK], L[a:a + CHUNK]
        servers, c0 = layout.counts(xs)
        _, c1 = layout.counts(xs + ls)
        d = (c1 - c0).T  # (request, server position): request-major order
        k, i = np.nonzero(d)
        parts.append(SubRequests(
            req=(k + a).astype(np.int64),
            server=servers[i].astype(np.int32),
            local=c0.T[k, i].astype(np.int64),
            length=d[k, i].astype(np.int64),
            datafile=np.zeros(len(k), dtype=np.int32),
        ))
    return SubRequests.concat(parts)


def _intersect(x: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Pieces of requests ``[x, e)`` inside sorted disjoint intervals ``[lo, hi)``.

    Returns (request index, interval index, piece start, piece end), request-major.
    """
    i0 = np.searchsorted(hi, x, side="right")
    i1 = np.searchsorted(lo, e, side="left")
    cnt = np.maximum(i1 - i0, 0)
    req = np.repeat(np.arange(len(x)), cnt)
    first = np.repeat(i0, cnt)
    within = np.arange(len(req)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    iv = first + within
    s = np.maximum(x[req], lo[iv])
    t = np.minimum(e[req], hi[iv])
    keep = t > s
    return req[keep], iv[keep], s[keep], t[keep]


def _map_extents(layout: ExtentMap, x: np.ndarray, L: np.ndarray) -> SubRequests:
    e = x + L
    off, ln = layout.offset, layout.length
    req, iv, s, t = _intersect(x, e, off, off + ln)
    covered = SubRequests(req.astype(np.int64), layout.server[iv].astype(np.int32),
                          (layout.local[iv] + (s - off[iv])).astype(np.int64), (t - s).astype(np.int64),
                          layout.datafile[iv].astype(np.int32))
    # uncovered parts: intersect with the complement of the extents
    big = np.iinfo(np.int64).max
    glo = np.concatenate(([0], off + ln))
    ghi = np.concatenate((off, [big]))
    keep = ghi > glo
    greq, _, gs, gt = _intersect(x, e, glo[keep], ghi[keep])
    if len(greq) == 0:
        return covered.sorted()
    if layout.default is None:
        k = int(greq[0])
        raise ParioError(f"extent map has no default layout and does not cover bytes [{gs[0]}, {gt[0]}) of request {k}")
    rest = map_requests(layout.default, gs, gt - gs)
    rest = SubRequests(greq[rest.req], rest.server, rest.local, rest.length, rest.datafile)
    return SubRequests.concat([covered, rest]).sorted()


def map_requests(layout: Layout, offset, length) -> SubRequests:
    """Map requests ``[offset, offset+length)`` to sub-requests under ``layout`` (exact), in
    numpy from the byte-count functions: the oracle of the engine's mapping."""
    x = np.asarray(offset, dtype=np.int64)
    L = np.asarray(length, dtype=np.int64)
    if x.shape != L.shape:
        raise ValueError("offset and length must have the same shape")
    if isinstance(layout, ExtentMap):
        return _map_extents(layout, x, L)
    return _map_monotone(layout, x, L)
