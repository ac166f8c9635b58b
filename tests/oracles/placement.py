"""Splitting file ranges into single-server pieces, in numpy (a test oracle).

pario.mpi's collective I/O cuts an aggregator's pieces in C from the store engine's layout
(``pario.mpi.twophase.compile_layout``).  This is how pario split them in Python before
(``pario.mpi.placement`` before issue 25): ranges cut at stripe-unit, region and extent
boundaries (:func:`split_periodic`, :func:`split_points`), each piece's server from the
mapping.  The reference planning of two-phase I/O (``oracles/twophase.py``) uses it.
"""

from __future__ import annotations

import numpy as np

from oracles.layout import map_requests

from pario.layout import ExtentMap, Grouped, Layout, Regions, Striped

_I64 = np.int64


def split_periodic(off: np.ndarray, ln: np.ndarray, period: int, marks: np.ndarray, base: int = 0):
    """Split ranges ``[off, off+ln)`` at the points ``base + r·period + marks[i]`` (r ∈ ℤ).

    Returns ``(idx, seg_off, seg_len)``: ``idx`` the index of the range each segment comes from.
    """
    off = np.asarray(off, dtype=_I64)
    ln = np.asarray(ln, dtype=_I64)
    marks = np.unique(np.asarray(marks, dtype=_I64) % period)
    m = len(marks)

    def below(y):  # number of cut points < y (relative to base)
        r, q = np.divmod(y - base, period)
        return r * m + np.searchsorted(marks, q, side="left")

    first = below(off + 1)          # cut points in (off, off+ln)
    last = below(off + ln)
    cnt = np.maximum(last - first, 0)
    nseg = cnt + 1
    idx = np.repeat(np.arange(len(off), dtype=_I64), nseg)
    within = np.arange(int(nseg.sum()), dtype=_I64) - np.repeat(np.cumsum(nseg) - nseg, nseg)
    # segment k of range i starts at off (k = 0) or at cut point first+k-1
    kcut = np.repeat(first, nseg) + within - 1
    r, j = np.divmod(kcut, m)
    cut = base + r * period + marks[j]
    start = np.where(within == 0, off[idx], cut)
    end_all = off + ln
    nxt = np.r_[start[1:], 0]
    is_last = np.r_[idx[1:] != idx[:-1], True]
    end = np.where(is_last, end_all[idx], nxt)
    keep = end > start
    return idx[keep], start[keep], (end - start)[keep]


def split_points(off: np.ndarray, ln: np.ndarray, points: np.ndarray):
    """Split ranges at explicit sorted cut ``points``; same return as :func:`split_periodic`."""
    off = np.asarray(off, dtype=_I64)
    ln = np.asarray(ln, dtype=_I64)
    points = np.unique(np.asarray(points, dtype=_I64))
    first = np.searchsorted(points, off, side="right")
    last = np.searchsorted(points, off + ln, side="left")
    cnt = np.maximum(last - first, 0)
    nseg = cnt + 1
    idx = np.repeat(np.arange(len(off), dtype=_I64), nseg)
    within = np.arange(int(nseg.sum()), dtype=_I64) - np.repeat(np.cumsum(nseg) - nseg, nseg)
    kcut = np.clip(np.repeat(first, nseg) + within - 1, 0, max(len(points) - 1, 0))
    cut = points[kcut] if len(points) else np.zeros(len(idx), _I64)
    start = np.where(within == 0, off[idx], cut)
    is_last = np.r_[idx[1:] != idx[:-1], True]
    end = np.where(is_last, (off + ln)[idx], np.r_[start[1:], 0])
    keep = end > start
    return idx[keep], start[keep], (end - start)[keep]


def unit_split(layout: Layout, off, ln):
    if isinstance(layout, Striped):
        st = np.array([w for w in layout.stripes if w > 0], dtype=_I64)
        marks = np.concatenate(([0], np.cumsum(st)[:-1]))
        return split_periodic(off, ln, int(st.sum()), marks)
    if isinstance(layout, Grouped):
        return split_periodic(off, ln, layout.stripe, np.array([0]))
    if isinstance(layout, Regions):
        pts = [r.start for r in layout.regions] + [r.end for r in layout.regions if r.end is not None]
        idx, so, sl = split_points(off, ln, np.array(pts))
        out_idx, out_o, out_l = [], [], []
        for r in layout.regions:
            end = np.iinfo(_I64).max if r.end is None else r.end
            sel = (so >= r.start) & (so < end)
            if not sel.any():
                continue
            i2, o2, l2 = unit_split(r.layout, so[sel] - r.start, sl[sel])
            out_idx.append(idx[sel][i2])
            out_o.append(o2 + r.start)
            out_l.append(l2)
        i, o, l = (np.concatenate(a) for a in (out_idx, out_o, out_l))
        order = np.lexsort((o, i))
        return i[order], o[order], l[order]
    if isinstance(layout, ExtentMap):
        pts = np.concatenate((layout.offset, layout.offset + layout.length))
        idx, so, sl = split_points(off, ln, pts)
        if layout.default is None:
            return idx, so, sl
        i2, o2, l2 = unit_split(layout.default, so, sl)
        return idx[i2], o2, l2
    return np.arange(len(off), dtype=_I64), np.asarray(off, _I64), np.asarray(ln, _I64)


def pieces(placement, off, ln):
    """Split ranges into single-server pieces: ``(idx, offset, length, server, kind)``."""
    idx, o, l = unit_split(placement.layout, off, ln)
    if len(o) == 0:
        z = np.zeros(0, _I64)
        return idx, o, l, z, z
    sub = map_requests(placement.layout, o, l)
    server = np.full(len(o), -1, dtype=_I64)
    # every piece maps to one server; keep the first sub-request of each piece
    first = np.r_[True, sub.req[1:] != sub.req[:-1]]
    server[sub.req[first]] = sub.server[first]
    kind = placement.kinds[np.maximum(server, 0)].astype(_I64)
    return idx, o, l, server, kind
