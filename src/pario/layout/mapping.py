"""The exact, vectorised mapping of requests to sub-requests.

A *sub-request* is the part of a request that lands on one server (SPEC §1): its request
index, server, server-local offset, length and data file (0 = the file's own data file,
≥ 1 = a replica data file of an :class:`~pario.layout.types.ExtentMap`).  Every model, the
simulator and the store use this one primitive.

For striped, 2-D and region layouts the mapping uses the byte-count functions
(:mod:`pario.layout.types`): with ``C_j`` the number of bytes of ``[0, x)`` on server ``j``,
the request ``[x, x+L)`` has on server ``j`` exactly ``C_j(x+L) − C_j(x)`` bytes starting at
server-local offset ``C_j(x)``.  This is exact for any stripe sizes and request alignment
(unlike CEDA seed 000 eq. 2, whose beginning-fragment term is mistyped: SPEC §2.3).
Work is done in chunks of requests so that memory stays bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ParioError
from .types import ExtentMap, Layout

CHUNK = 1 << 18


@dataclass(frozen=True)
class SubRequests:
    """Columns of sub-requests (numpy arrays of equal length)."""

    req: np.ndarray
    server: np.ndarray
    local: np.ndarray
    length: np.ndarray
    datafile: np.ndarray

    def __len__(self) -> int:
        return len(self.req)

    @staticmethod
    def empty() -> "SubRequests":
        z = np.zeros(0, dtype=np.int64)
        return SubRequests(z, z.astype(np.int32), z, z, z.astype(np.int32))

    @staticmethod
    def concat(parts: list["SubRequests"]) -> "SubRequests":
        parts = [p for p in parts if len(p)]
        if not parts:
            return SubRequests.empty()
        if len(parts) == 1:
            return parts[0]
        return SubRequests(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("req", "server", "local", "length", "datafile")))

    def take(self, index) -> "SubRequests":
        return SubRequests(self.req[index], self.server[index], self.local[index], self.length[index], self.datafile[index])

    def sorted(self) -> "SubRequests":
        """Sorted by request, then by file position (stable)."""
        return self.take(np.argsort(self.req, kind="stable"))


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
    """Map requests ``[offset, offset+length)`` to sub-requests under ``layout`` (exact)."""
    x = np.asarray(offset, dtype=np.int64)
    L = np.asarray(length, dtype=np.int64)
    if x.shape != L.shape:
        raise ValueError("offset and length must have the same shape")
    if isinstance(layout, ExtentMap):
        return _map_extents(layout, x, L)
    return _map_monotone(layout, x, L)


def layout_for_files(layout, files: tuple[str, ...]) -> list[Layout]:
    """Resolve a layout or a dict (file name → layout, optional key ``"*"`` for the rest) per file."""
    if isinstance(layout, Layout):
        return [layout] * len(files)
    if isinstance(layout, dict):
        out = []
        for f in files:
            lay = layout.get(f, layout.get("*"))
            if lay is None:
                raise ParioError(f"no layout given for file {f!r}")
            out.append(lay)
        return out
    raise TypeError(f"not a layout: {type(layout).__name__}")


def map_trace(trace, layout) -> SubRequests:
    """Sub-requests of every request of ``trace`` (``req`` = trace row), for one layout for
    all files or a dict file name → layout."""
    per_file = layout_for_files(layout, trace.files)
    if len(set(map(id, per_file))) <= 1 and per_file:
        return map_requests(per_file[0], trace.offset, trace.length)
    parts = []
    for fi, lay in enumerate(per_file):
        rows = np.flatnonzero(trace.file == fi)
        if len(rows) == 0:
            continue
        sub = map_requests(lay, trace.offset[rows], trace.length[rows])
        parts.append(SubRequests(rows[sub.req], sub.server, sub.local, sub.length, sub.datafile))
    return SubRequests.concat(parts).sorted()


def server_load(trace, layout, n_servers: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-server (bytes, number of sub-requests) of a trace under a layout."""
    sub = map_trace(trace, layout)
    if len(sub) and sub.server.max() >= n_servers:
        raise ParioError(f"layout uses server index {int(sub.server.max())} but the system has {n_servers} servers")
    nbytes = np.bincount(sub.server, weights=sub.length, minlength=n_servers).astype(np.int64)
    count = np.bincount(sub.server, minlength=n_servers).astype(np.int64)
    return nbytes, count
