"""Independent oracles of the store engine's mapping and routing cost, built on
:func:`pario.layout.map_requests` (pario's one mapping, used by the models and the simulator):
the engine (``src/pario/native/store``) must place every byte and price every request as
these do (tests/native/test_serve_store.py, tests/store/test_store.py).

Cut logical ranges into single-server pieces, placed by :func:`pario.layout.map_requests`.

``map_requests`` gives one sub-request per (request, server): the server-local range is
contiguous, but its bytes are scattered over the request (one stripe per round).  To move
real bytes the store needs each stripe's logical position too, so it first cuts every range
at the layout's *cut points* (the offsets where the serving server may change: stripe
boundaries for striped and 2-D layouts, region starts, extent ends) and then maps all
pieces at once with ``map_requests``.  Each piece must map to exactly one sub-request:
that is checked, so the placement of every byte is the foundation mapping's (SPEC §1).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from pario import ParioError
from pario.layout import ExtentMap, Grouped, Layout, Regions, Striped, map_requests


def cut_points(layout: Layout, x: int, e: int) -> np.ndarray:
    """Sorted offsets in ``(x, e)`` where the server of a byte may change (may include extras)."""
    if e - x <= 1:
        return np.zeros(0, dtype=np.int64)
    if isinstance(layout, Striped):
        stripes = np.array(layout.stripes, dtype=np.int64)
        W = int(stripes.sum())
        pref = np.concatenate(([0], np.cumsum(stripes)[:-1]))[stripes > 0]
        r = np.arange(x // W, (e - 1) // W + 1, dtype=np.int64)
        pts = (r[:, None] * W + pref[None, :]).ravel()
    elif isinstance(layout, Grouped):
        s = layout.stripe
        pts = np.arange((x // s + 1) * s, e, s, dtype=np.int64)
    elif isinstance(layout, Regions):
        parts = []
        for r in layout.regions:
            end = e if r.end is None else r.end
            a, b = max(x, r.start), min(e, end)
            if a >= b:
                continue
            parts.append(np.array([r.start], dtype=np.int64))
            parts.append(cut_points(r.layout, a - r.start, b - r.start) + r.start)
        pts = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    elif isinstance(layout, ExtentMap):
        ends = np.concatenate((layout.offset, layout.offset + layout.length))
        parts = [ends]
        if layout.default is not None:
            parts.append(cut_points(layout.default, x, e))
        pts = np.concatenate(parts)
    else:  # unknown layout: every byte (correct, slow); only for tiny ranges
        pts = np.arange(x + 1, e, dtype=np.int64)
    pts = pts[(pts > x) & (pts < e)]
    if isinstance(layout, (Regions, ExtentMap)):
        pts = np.unique(pts)
    return pts


FAST_MAX = 32


def fast_pieces(layout: Layout, x: int, L: int, b: int):
    """Scalar fast path of :func:`pieces` for one range of a striped, 2-D or extent-map layout.

    Pure integer arithmetic of the same byte-count functions (SPEC §1: round ``r = x div W``,
    position ``q = x mod W``, local ``r·w_i + (q − prefix_i)``); returns lists
    ``(server, datafile, local, length, buf_offset)`` or None when the range has more than
    ``FAST_MAX`` pieces or the layout has no fast path.  Tested equal to :func:`pieces`
    (which uses ``map_requests``) in tests/store/test_store.py.
    """
    e = x + L
    srv, loc, ln, bo = [], [], [], []
    if type(layout) is Striped:
        fp = getattr(layout, "_pario_fast", None)
        if fp is None:
            kept = [(s, w) for s, w in zip(layout.servers, layout.stripes) if w > 0]
            pref, acc = [], 0
            for _, w in kept:
                pref.append(acc)
                acc += w
            fp = ([s for s, _ in kept], [w for _, w in kept], pref, acc)
            object.__setattr__(layout, "_pario_fast", fp)
        servers, widths, pref, W = fp
        r, q = divmod(x, W)
        i = bisect_right(pref, q) - 1
        if e <= r * W + pref[i] + widths[i]:          # inside one stripe: one piece
            return [servers[i]], [0], [r * widths[i] + q - pref[i]], [L], [b]
        p = x
        while p < e:
            if len(srv) >= FAST_MAX:
                return None
            r, q = divmod(p, W)
            i = bisect_right(pref, q) - 1
            end = min(e, r * W + pref[i] + widths[i])
            srv.append(servers[i]); loc.append(r * widths[i] + q - pref[i]); ln.append(end - p); bo.append(b + p - x)
            p = end
    elif type(layout) is Grouped:
        s = layout.stripe
        fp = getattr(layout, "_pario_fast", None)
        if fp is None:
            gpref, acc = [], 0
            for g in layout.groups:
                gpref.append(acc)
                acc += s * len(g)
            fp = (gpref, acc)
            object.__setattr__(layout, "_pario_fast", fp)
        gpref, G = fp
        p = x
        while p < e:
            if len(srv) >= FAST_MAX:
                return None
            R, q = divmod(p, G)
            k = bisect_right(gpref, q) - 1
            g = layout.groups[k]
            m = len(g)
            v = R * s * m + q - gpref[k]          # offset in group k's virtual file
            r2, q2 = divmod(v, s * m)
            j, within = divmod(q2, s)
            end = min(e, p + s - within)
            srv.append(g[j]); loc.append(r2 * s + within); ln.append(end - p); bo.append(b + p - x)
            p = end
    elif type(layout) is ExtentMap:
        return _fast_extents(layout, x, L, b)
    else:
        return None
    return srv, [0] * len(srv), loc, ln, bo


def _extent_lists(layout: ExtentMap):
    fp = getattr(layout, "_pario_fast", None)
    if fp is None:
        off = layout.offset.tolist()
        fp = (off, [o + n for o, n in zip(off, layout.length.tolist())], layout.server.tolist(),
              layout.local.tolist(), layout.datafile.tolist())
        object.__setattr__(layout, "_pario_fast", fp)
    return fp


def _fast_extents(layout: ExtentMap, x: int, L: int, b: int):
    """Scalar fast path for one range of an extent map (CEDA replica layouts).

    ``bisect`` over the sorted extent starts, then plain integer arithmetic: a covered part
    ``[s, t)`` of extent ``i`` goes to ``server[i]`` at ``local[i] + (s − offset[i])`` in data
    file ``datafile[i]`` (exactly ``pario.layout.mapping._map_extents``); gaps go through the
    default layout's fast path.  Pieces come in logical order; None when more than
    ``FAST_MAX`` pieces or a gap's default layout has no fast path.
    """
    off, end, srv_a, loc_a, df_a = _extent_lists(layout)
    e = x + L
    srv, df, loc, ln, bo = [], [], [], [], []
    i = bisect_right(off, x) - 1
    if i < 0 or end[i] <= x:
        i += 1          # x is in a gap before extent i
    p = x
    n_ext = len(off)
    while p < e:
        if len(srv) >= FAST_MAX:
            return None
        if i < n_ext and off[i] <= p:                     # inside extent i
            t = min(e, end[i])
            srv.append(srv_a[i]); df.append(df_a[i]); loc.append(loc_a[i] + p - off[i])
            ln.append(t - p); bo.append(b + p - x)
            p = t
            i += 1
            continue
        t = min(e, off[i]) if i < n_ext else e         # a gap: the default layout
        if layout.default is None:
            raise ParioError(f"extent map has no default layout and does not cover bytes [{p}, {t}) of request 0")
        sub = fast_pieces(layout.default, p, t - p, b + p - x)
        if sub is None:
            return None
        srv += sub[0]; df += sub[1]; loc += sub[2]; ln += sub[3]; bo += sub[4]
        p = t
    if len(srv) > FAST_MAX:
        return None
    return srv, df, loc, ln, bo


def pieces(layout: Layout, offsets, lengths, buf_offsets):
    """Single-server pieces of ranges ``[offsets[k], +lengths[k])`` whose bytes go to
    ``buf_offsets[k]`` of a buffer.

    Returns ``(server, datafile, local, length, buf_offset)`` numpy arrays, one row per piece.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    buf_offsets = np.asarray(buf_offsets, dtype=np.int64)
    keep = lengths > 0
    offsets, lengths, buf_offsets = offsets[keep], lengths[keep], buf_offsets[keep]
    if len(offsets) == 1:
        x = int(offsets[0])
        pts = cut_points(layout, x, x + int(lengths[0]))
        starts = np.concatenate(([x], pts))
        ends = np.concatenate((pts, [x + int(lengths[0])]))
        bo = starts - x + buf_offsets[0]
    else:
        cs, ce, cb = [], [], []
        for x, L, b in zip(offsets.tolist(), lengths.tolist(), buf_offsets.tolist()):
            pts = cut_points(layout, x, x + L)
            s = np.concatenate(([x], pts))
            cs.append(s)
            ce.append(np.concatenate((pts, [x + L])))
            cb.append(s - x + b)
        if not cs:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, z, z
        starts, ends, bo = np.concatenate(cs), np.concatenate(ce), np.concatenate(cb)
    sub = map_requests(layout, starts, ends - starts)
    if len(sub) != len(starts) or (len(sub) and (np.diff(sub.req) != 1).any()):
        raise RuntimeError("store: a piece of a request maps to more than one server (cut points incomplete)")
    return (sub.server.astype(np.int64), sub.datafile.astype(np.int64), sub.local, sub.length, bo)


def one_piece(layout: Layout):
    """A function ``f(x, L) -> (key, local) | None`` for the redirector's common case: the
    range ``[x, x+L)`` lies on one server, in data file ``key = (server, datafile)`` at
    server-local offset ``local``; None when it spans several pieces (or ``L`` is 0).

    Striped layouts get a closure over precomputed lists (SPEC §1: round ``r = x div W``,
    position ``q = x mod W``, local ``r·w_i + (q − prefix_i)``; fixed striping needs only two
    ``divmod``), so the per-request cost is a few integer operations and no list building;
    the keys are prebuilt tuples (no allocation for the data-file lookup).  Other layouts go
    through :func:`fast_pieces`.  Tested equal to :func:`pieces` in tests/store/test_store_parallel.py.
    """
    if type(layout) is Striped:
        kept = [(s, w) for s, w in zip(layout.servers, layout.stripes) if w > 0]
        keys = [(s, 0) for s, _ in kept]
        widths = [w for _, w in kept]
        W = sum(widths)
        if len(set(widths)) == 1:
            w = widths[0]

            def one(x: int, L: int):
                r, q = divmod(x, W)
                i, within = divmod(q, w)
                if 0 < L <= w - within:
                    return keys[i], r * w + within
                return None
            return one
        pref, acc = [], 0
        for w_ in widths:
            pref.append(acc)
            acc += w_

        def one_varied(x: int, L: int):
            r, q = divmod(x, W)
            i = bisect_right(pref, q) - 1
            within = q - pref[i]
            wi = widths[i]
            if 0 < L <= wi - within:
                return keys[i], r * wi + within
            return None
        return one_varied

    def one_generic(x: int, L: int):
        if L <= 0:
            return None
        fp = fast_pieces(layout, x, L, 0)
        if fp is None or len(fp[0]) != 1:
            return None
        return (fp[0][0], fp[1][0]), fp[2][0]

    if type(layout) is ExtentMap:
        # a CEDA replica's extent map: one bisect over the extent starts, then the extent's
        # data file and local offset (a range inside one extent); gaps and ranges over
        # several extents take the general path
        # (CEDA builds replica extents from the requests it saw, so a later request usually
        # starts exactly at an extent: a dict finds that one without the bisect, with one
        # probe and one tuple, i.e. few cache lines touched between two requests' copies)
        off, end, srv_a, loc_a, df_a = _extent_lists(layout)
        ekeys = list(zip(srv_a, df_a))
        at = {x: (e, k, lo) for x, e, k, lo in zip(off, end, ekeys, loc_a)}

        def one_extent(x: int, L: int):
            t = at.get(x)
            if t is not None:
                if 0 < L and x + L <= t[0]:
                    return t[1], t[2]
                return one_generic(x, L)
            i = bisect_right(off, x) - 1
            if i >= 0 and 0 < L and x + L <= end[i]:
                return ekeys[i], loc_a[i] + x - off[i]
            return one_generic(x, L)
        return one_extent
    return one_generic


def profile_cost(system, op: int = 0, sequential: bool = False):
    """The hybrid routing cost of the system profile, restated independently of the engine:
    ``cost(layout, offset, length) = max_j (alpha_j + bytes_j · beta_j)`` over the servers the
    request touches (CI-LAYOUT seed 002 §5; SPEC §1 with α, β of the profile)."""
    alpha = system.alpha_table()[:, int(op), int(bool(sequential))]
    beta = system.beta_table()[:, int(op)]

    def cost(layout, offset: int, length: int) -> float:
        sub = map_requests(layout, np.array([offset], dtype=np.int64), np.array([length], dtype=np.int64))
        if len(sub) == 0:
            return 0.0
        per = np.bincount(sub.server, weights=sub.length, minlength=len(alpha))
        touched = np.bincount(sub.server, minlength=len(alpha)) > 0
        return float(np.max(np.where(touched, alpha + per * beta, 0.0)))

    return cost
