"""Two-phase collective I/O (seed 004 §2.1) turned into phases of the event core.

For one collective call (the collective requests of one file and op):

1. the *aggregate span* ``[lo, hi)`` of all requests is split evenly into one *file
   domain* per aggregator (ROMIO's ``ADIOI_Calc_file_domains``); with ``align`` the domain
   boundaries are rounded up to multiples of ``align`` (ROMIO's stripe-aligned domains);
2. the requested bytes of a domain (the union of the requests, each byte once) are cut
   into *pieces* – contiguous in the file and on one server (one stripe unit / extent);
3. the aggregator orders its pieces with :func:`pario.plan.collective.request_order`
   (``romcio`` | ``cacio`` | ``hacio``) and fills its collective buffer of ``cb_buffer``
   bytes in that order: cycle ``c`` holds bytes ``[c·B, (c+1)·B)`` of the ordered sequence
   (a piece that straddles a buffer boundary is split), so an aggregator with ``D`` bytes
   needs ``⌈D / B⌉`` cycles and the call needs the maximum over the aggregators;
4. every cycle is a *data exchange* phase (each rank sends, for a write, the bytes of its
   requests that fall in each aggregator's buffer: one message per (rank, aggregator) over
   the client-node links; free inside a node) and an *I/O* phase (each aggregator issues the
   buffer's pieces at once, merged per server where they are contiguous on the server);
   for a read the I/O phase comes first.  All aggregators synchronise at the end of every
   phase (seed 004 §2.2: "all aggregators need to be synchronized").

Deviation from ROMIO, stated: ROMIO walks a domain's *span* buffer by buffer, holes
included; here the buffer is filled with requested bytes only (dense access patterns –
the papers' – give the same cycles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ParioError
from ..layout import ExtentMap, Grouped, Layout, Regions, Striped, map_requests
from ..plan.collective import request_order


# ----------------------------------------------------------------------------- layout cuts
def _split_units(a: np.ndarray, b: np.ndarray, unit_of, unit_start) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split intervals [a, b) at unit boundaries; returns (interval index, start, end)."""
    if len(a) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    u0 = unit_of(a)
    u1 = unit_of(b - 1)
    cnt = (u1 - u0 + 1).astype(np.int64)
    idx = np.repeat(np.arange(len(a)), cnt)
    first = np.cumsum(cnt) - cnt
    u = np.repeat(u0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(first, cnt))
    s = np.maximum(unit_start(u), a[idx])
    e = np.minimum(unit_start(u + 1), b[idx])
    return idx, s, e


def layout_cuts(layout: Layout, a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut file intervals ``[a, b)`` into pieces that lie on one server, contiguous there.

    Returns ``(interval index, piece start, piece end)``, in interval then offset order.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if isinstance(layout, Striped):
        st = np.array([w for w in layout.stripes if w > 0], dtype=np.int64)
        W, k = int(st.sum()), len(st)
        prefix = np.concatenate(([0], np.cumsum(st)))  # k + 1 entries

        def unit_of(x):
            r, q = np.divmod(x, W)
            return r * k + np.searchsorted(prefix, q, side="right") - 1

        def unit_start(u):
            r, i = np.divmod(u, k)
            return r * W + prefix[i]

        return _split_units(a, b, unit_of, unit_start)
    if isinstance(layout, Grouped):
        s = layout.stripe
        return _split_units(a, b, lambda x: x // s, lambda u: u * s)
    if isinstance(layout, Regions):
        starts = np.array([r.start for r in layout.regions], dtype=np.int64)
        ends = np.array([np.iinfo(np.int64).max if r.end is None else r.end for r in layout.regions], dtype=np.int64)
        out_i, out_s, out_e = [], [], []
        for k, reg in enumerate(layout.regions):
            s = np.maximum(a, starts[k])
            e = np.minimum(b, ends[k])
            keep = np.flatnonzero(e > s)
            if len(keep) == 0:
                continue
            i, ps, pe = layout_cuts(reg.layout, s[keep] - starts[k], e[keep] - starts[k])
            out_i.append(keep[i])
            out_s.append(ps + starts[k])
            out_e.append(pe + starts[k])
        return _concat_sorted(out_i, out_s, out_e)
    if isinstance(layout, ExtentMap):
        lo, hi = layout.offset, layout.offset + layout.length
        big = np.iinfo(np.int64).max
        glo = np.concatenate(([0], hi))
        ghi = np.concatenate((lo, [big]))
        g = ghi > glo
        out_i, out_s, out_e = [], [], []
        for L, H, is_gap in ((lo, hi, False), (glo[g], ghi[g], True)):
            i0 = np.searchsorted(H, a, side="right")
            i1 = np.searchsorted(L, b, side="left")
            cnt = np.maximum(i1 - i0, 0)
            idx = np.repeat(np.arange(len(a)), cnt)
            iv = np.repeat(i0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
            s = np.maximum(a[idx], L[iv])
            e = np.minimum(b[idx], H[iv])
            keep = e > s
            idx, s, e = idx[keep], s[keep], e[keep]
            if is_gap and len(idx):
                if layout.default is None:
                    raise ParioError(f"extent map has no default layout and does not cover bytes [{s[0]}, {e[0]})")
                j, s, e = layout_cuts(layout.default, s, e)
                idx = idx[j]
            out_i.append(idx)
            out_s.append(s)
            out_e.append(e)
        return _concat_sorted(out_i, out_s, out_e)
    # unknown layout type: one piece per interval (mapping decides)
    return np.arange(len(a)), a, b


def _concat_sorted(i, s, e):
    if not i:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    i, s, e = np.concatenate(i), np.concatenate(s), np.concatenate(e)
    o = np.lexsort((s, i))
    return i[o], s[o], e[o]


# ----------------------------------------------------------------------------- one call
@dataclass
class CallPlan:
    """The phases of one collective call, ready for the event core."""

    op: int
    n_cycles: int
    # I/O sub-requests: cycle, aggregator, server, local, length, object
    io_cycle: np.ndarray
    io_agg: np.ndarray
    io_server: np.ndarray
    io_local: np.ndarray
    io_len: np.ndarray
    io_obj: np.ndarray
    # exchange messages: cycle, aggregator, source rank, bytes
    ex_cycle: np.ndarray
    ex_agg: np.ndarray
    ex_rank: np.ndarray
    ex_len: np.ndarray
    domains: np.ndarray  # aggregator boundaries (A + 1)


def union_intervals(off: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint union of intervals [off, end) (touching intervals are merged)."""
    if len(off) == 0:
        return off, end
    o = np.argsort(off, kind="stable")
    s, e = off[o], end[o]
    run_end = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > run_end[:-1]]
    starts = s[new]
    grp = np.cumsum(new) - 1
    ends = np.zeros(len(starts), dtype=np.int64)
    np.maximum.at(ends, grp, e)
    return starts, ends


def plan_call(off, length, rank, op: int, layout: Layout, system, *, aggregators: int, cb_buffer: int,
              order: str, align: int | None, obj_base: int) -> CallPlan:
    """Domains, pieces, order and cycles of one collective call (module docstring)."""
    off = np.asarray(off, dtype=np.int64)
    length = np.asarray(length, dtype=np.int64)
    rank = np.asarray(rank, dtype=np.int64)
    keep = length > 0
    off, length, rank = off[keep], length[keep], rank[keep]
    end = off + length
    A = int(aggregators)
    B = int(cb_buffer)
    if A < 1:
        raise ParioError("collective I/O needs at least one aggregator")
    if B < 1:
        raise ParioError("collective buffer size must be > 0")
    z = np.zeros(0, dtype=np.int64)
    if len(off) == 0:
        return CallPlan(op, 0, z, z, z, z, z, z, z, z, z, z, np.zeros(A + 1, dtype=np.int64))
    lo, hi = int(off.min()), int(end.max())
    D = -(-(hi - lo) // A)
    bounds = lo + D * np.arange(A + 1, dtype=np.int64)
    if align:
        bounds = -(-bounds // int(align)) * int(align)
    bounds = np.clip(bounds, lo, hi)
    bounds[0], bounds[-1] = lo, hi
    # union of requested bytes, cut at domain boundaries and layout boundaries
    us, ue = union_intervals(off, end)
    cuts = np.unique(bounds[1:-1])
    if len(cuts):
        k = np.clip(np.searchsorted(us, cuts, side="right") - 1, 0, len(us) - 1)
        inside = cuts[(cuts > us[k]) & (cuts < ue[k])]
        us = np.sort(np.concatenate((us, inside)))
        ue = np.sort(np.concatenate((ue, inside)))
    _, ps, pe = layout_cuts(layout, us, ue)
    sub = map_requests(layout, ps, pe - ps)
    if len(sub) != len(ps) or (len(sub) and (np.diff(sub.req) != 1).any()):
        raise ParioError("collective I/O: this layout type cannot be cut into single-server pieces")
    server = sub.server.astype(np.int64)
    local = sub.local.astype(np.int64)
    obj = obj_base + sub.datafile.astype(np.int64)
    plen = pe - ps
    agg = np.searchsorted(bounds, ps, side="right") - 1
    agg = np.clip(agg, 0, A - 1)
    # owner process of each piece (Algorithm 1 walks requests by process rank)
    ro = np.argsort(off, kind="stable")
    owner = rank[ro][np.clip(np.searchsorted(off[ro], ps, side="right") - 1, 0, len(ro) - 1)]
    kinds = system.kinds.astype(np.int64)
    used = np.asarray(layout.servers_used(), dtype=np.int64)
    pkind = kinds[server]
    # order every aggregator's pieces, then pack them into buffer-size cycles
    seq_parts = []
    for a in np.unique(agg):
        idx = np.flatnonzero(agg == a)
        o = request_order(order, ps[idx], server[idx], pkind[idx], int(a), proc=owner[idx],
                          servers=used, server_kinds=kinds[used])
        seq_parts.append(idx[o])
    seq = np.concatenate(seq_parts)
    sl = plen[seq]
    sa = agg[seq]
    # cumulative bytes within the aggregator
    first = np.r_[True, sa[1:] != sa[:-1]]
    gstart = np.flatnonzero(first)
    csum = np.cumsum(sl)
    base = np.repeat(csum[gstart] - sl[gstart], np.diff(np.r_[gstart, len(sl)]))
    ce = csum - base
    cs = ce - sl
    c0 = cs // B
    c1 = (ce - 1) // B
    cnt = c1 - c0 + 1
    rep = np.repeat(np.arange(len(seq)), cnt)
    cyc = np.repeat(c0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    s_b = np.maximum(cs[rep], cyc * B)
    e_b = np.minimum(ce[rep], (cyc + 1) * B)
    shift = s_b - cs[rep]
    part_len = e_b - s_b
    part_piece = seq[rep]
    part_off = ps[part_piece] + shift
    part_local = local[part_piece] + shift
    part_server = server[part_piece]
    part_obj = obj[part_piece]
    part_agg = agg[part_piece]
    n_cycles = int(cyc.max()) + 1 if len(cyc) else 0
    # I/O sub-requests: merge parts of one (cycle, aggregator, server, object) that are contiguous on the server
    o = np.lexsort((part_local, part_obj, part_server, part_agg, cyc))
    c_, a_, s_, ob_, l_, n_ = cyc[o], part_agg[o], part_server[o], part_obj[o], part_local[o], part_len[o]
    brk = np.r_[True, (c_[1:] != c_[:-1]) | (a_[1:] != a_[:-1]) | (s_[1:] != s_[:-1]) | (ob_[1:] != ob_[:-1])
                | (l_[1:] != l_[:-1] + n_[:-1])]
    head = np.flatnonzero(brk)
    io_len = np.add.reduceat(n_, head) if len(head) else n_
    # exchange: bytes of each rank's requests inside each (cycle, aggregator) buffer
    po = np.argsort(part_off, kind="stable")
    plo, phi = part_off[po], part_off[po] + part_len[po]
    i0 = np.searchsorted(phi, off, side="right")
    i1 = np.searchsorted(plo, end, side="left")
    cnt = np.maximum(i1 - i0, 0)
    rq = np.repeat(np.arange(len(off)), cnt)
    iv = np.repeat(i0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    nb = np.minimum(end[rq], phi[iv]) - np.maximum(off[rq], plo[iv])
    pk = po[iv]
    ex_key_c, ex_key_a, ex_key_r = cyc[pk], part_agg[pk], rank[rq]
    if len(nb):
        keys = np.stack((ex_key_c, ex_key_a, ex_key_r))
        uk, inv = np.unique(keys, axis=1, return_inverse=True)
        ex_len = np.bincount(inv.ravel(), weights=nb).astype(np.int64)
        ex_c, ex_a, ex_r = uk
    else:
        ex_c = ex_a = ex_r = ex_len = z
    return CallPlan(op, n_cycles, c_[head], a_[head], s_[head], l_[head], io_len.astype(np.int64), ob_[head],
                    ex_c.astype(np.int64), ex_a.astype(np.int64), ex_r.astype(np.int64), ex_len, bounds)
