"""Compiled passes of CEDA's identifier and planner (He & Sun, seed 000 §4.2–4.3; numba).

**Identifier** (§4.2, :func:`pario.plan.ceda.identify_patterns`): per stream, the
order-independent signature of its multiset of extents (:func:`stream_signatures`) and
whether it touches one extent twice (:func:`stream_repeats`, on the requests in offset
order); the pattern of every request (:func:`pattern_of_rows`).

**Planner** (§4.3, Algorithm 1, :func:`pario.plan.ceda.place_objects`).  Every request
("piece") belongs to a claim group (a pattern, or a file for the combined plan) and has a
priority: its position in *object order* (group, slot, rank, order, row) — the order in
which Algorithm 1 appends requested data to the objects.  A byte wanted by several pieces
of a group is placed once, in the piece that comes first ("if r_j ∉ o_i", line 5).  The
claim is a sweep over each group's pieces in offset order with a min-heap of the pieces
covering the sweep position, keyed by priority (:func:`_sweep`): between two events the
owner of the bytes is the heap's top.  It yields the owned *fragments* in offset order, a
piece's fragments in increasing offset — the order in which they sit in its object.

Two sweeps: the first counts each piece's owned bytes (:func:`claim_bytes`); from those,
in object order, every piece's position G in the concatenation of all objects and every
object's replica file and offset (:func:`objects`); the second sweep (:func:`emit_extents`)
computes each fragment's replica extent — CEDA: object i of a pattern in replica file
l = i mod n, objects of one file in ascending i; CIDA: the pattern's objects concatenated
and striped round-robin — and merges an extent into the previous one when it continues it
logically, physically and in object order (G), which yields the extents of the
reference's merge over object order (:mod:`pario.plan.ceda_reference`), sorted by offset.
Memory: a few arrays per piece and per object; nothing per elementary segment.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ---------------------------------------------------------------------------- identifier


@njit(cache=True, inline="always")
def _splitmix(x):
    """SplitMix64 finaliser of a uint64 (as :func:`pario.plan.ceda_reference._splitmix`)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def stream_signatures(rows, s_first, s_count, off, ln):
    """Σ (mod 2^64) over each stream's requests of splitmix(offset) ^ splitmix(length + c):
    equal for streams with the same multiset of (offset, length)."""
    ns = len(s_first)
    sig = np.zeros(ns, dtype=np.uint64)
    c = np.uint64(0x632BE59BD9B4E019)
    for s in range(ns):
        acc = np.uint64(0)
        for p in range(s_first[s], s_first[s] + s_count[s]):
            r = rows[p]
            acc += _splitmix(np.uint64(off[r])) ^ _splitmix(np.uint64(ln[r]) + c)
        sig[s] = acc
    return sig


@njit(cache=True)
def stream_of_rows(rows, s_first, s_count, n):
    """Stream id of every trace row (rows in stream order)."""
    out = np.empty(n, dtype=np.int32)
    for s in range(len(s_first)):
        for p in range(s_first[s], s_first[s] + s_count[s]):
            out[rows[p]] = s
    return out


@njit(cache=True)
def stream_repeats(by_stream, stream_of_row, ns, off, ln):
    """Whether each stream has two requests with the same (offset, length).  ``by_stream``:
    the rows ordered by stream, each stream's rows by offset."""
    rep = np.zeros(ns, dtype=np.bool_)
    n = len(by_stream)
    i = 0
    while i < n:
        r = by_stream[i]
        s = stream_of_row[r]
        j = i + 1
        while j < n and stream_of_row[by_stream[j]] == s and off[by_stream[j]] == off[r]:
            j += 1
        if j - i > 1 and not rep[s]:  # same offset: look for equal lengths
            lens = np.empty(j - i, dtype=np.int64)
            for k in range(i, j):
                lens[k - i] = ln[by_stream[k]]
            lens.sort()
            for k in range(1, j - i):
                if lens[k] == lens[k - 1]:
                    rep[s] = True
                    break
        i = j
    return rep


@njit(cache=True)
def pattern_of_rows(rows, s_first, s_count, pat_of_stream, n):
    """Pattern id of every trace row (rows in stream order)."""
    out = np.empty(n, dtype=np.int64)
    for s in range(len(s_first)):
        p = pat_of_stream[s]
        for i in range(s_first[s], s_first[s] + s_count[s]):
            out[rows[i]] = p
    return out


# ---------------------------------------------------------------------------- planner: orders


@njit(cache=True)
def object_order(rank_rows, of_request, length, key_of_pattern, nkeys):
    """The placed pieces in object order: ``rank_rows`` (rows by rank, order, row), those
    with length > 0 and a key ≥ 0 (``key_of_pattern``: dense rank of (group, slot), -1 =
    not placed), stably counting-sorted by that key (a key < ``nkeys``)."""
    cnt = np.zeros(nkeys + 1, dtype=np.int64)
    for i in range(len(rank_rows)):
        r = rank_rows[i]
        k = key_of_pattern[of_request[r]]
        if k >= 0 and length[r] > 0:
            cnt[k + 1] += 1
    for k in range(nkeys):
        cnt[k + 1] += cnt[k]
    out = np.empty(cnt[nkeys], dtype=rank_rows.dtype)
    for i in range(len(rank_rows)):
        r = rank_rows[i]
        k = key_of_pattern[of_request[r]]
        if k >= 0 and length[r] > 0:
            out[cnt[k]] = r
            cnt[k] += 1
    return out


@njit(cache=True)
def sweep_order(offset_rows, of_request, length, group_of_pattern, ngroups, obj_rows, n):
    """The placed pieces by (group, offset) — ``offset_rows`` (rows by offset) stably
    counting-sorted by group — as priorities (positions in ``obj_rows``), and each group's
    first index in that order (``ngroups + 1`` bounds)."""
    rows = object_order(offset_rows, of_request, length, group_of_pattern, ngroups)
    prio_of_row = np.empty(n, dtype=obj_rows.dtype)
    for q in range(len(obj_rows)):
        prio_of_row[obj_rows[q]] = q
    bounds = np.zeros(ngroups + 1, dtype=np.int64)
    for i in range(len(rows)):
        r = rows[i]
        bounds[group_of_pattern[of_request[r]] + 1] += 1
        rows[i] = prio_of_row[r]
    for g in range(ngroups):
        bounds[g + 1] += bounds[g]
    return rows, bounds


# ---------------------------------------------------------------------------- planner: claim sweep
# The sweep below is written out once for both passes (``emit``: False = count the owned
# bytes of every piece, True = place the fragments); numba compiles the branch away per call
# only in spirit, the test is one predictable branch a fragment.


@njit(cache=True)
def _sweep(emit, by_offset, bounds, obj_rows, off, ln, of_request, owned, cum, obj_of_piece, obj_shift, obj_slot,
           servers, cida, stripe, o_pat, o_off, o_len, o_srv, o_loc, o_slot):
    """Owned fragments of every group in offset order (module docstring): piece q (a
    priority) owns [s, e) when no piece of smaller q in its group covers it.  A min-heap
    (``hq`` priorities, ``he`` their ends) holds the pieces covering the sweep position
    ``cur``; ended pieces leave it when they reach the top.

    ``emit=False``: adds each fragment's length to ``owned[q]``; returns the number of
    fragments.  ``emit=True``: appends each fragment's replica extents to the ``o_*``
    columns (pattern, offset, length, server, local, slot), merged with the previous
    extent when they continue each other; ``cum[q]``: the position G of piece q's next
    owned byte; returns the number of extents."""
    cap = 64
    hq = np.empty(cap, dtype=np.int64)
    he = np.empty(cap, dtype=np.int64)
    nout = 0
    nfrag = 0
    n_srv = len(servers)
    last_G = np.int64(-1)  # G after the last extent, and its group
    last_g = -1
    for g in range(len(bounds) - 1):
        hs = 0
        cur = np.int64(0)
        s = np.int64(0)
        for idx in range(bounds[g], bounds[g + 1] + 1):
            last = idx == bounds[g + 1]
            q = np.int64(0)
            e = np.int64(0)
            if not last:
                q = np.int64(by_offset[idx])
                r = obj_rows[q]
                s = off[r]
                e = s + ln[r]
            # the owners of [cur, s) (of everything left when last)
            while hs > 0 and (last or cur < s):
                top = hq[0]
                te = he[0]
                if te > cur:
                    t = te if last else min(te, s)
                    # ---- fragment (top, cur, t)
                    nfrag += 1
                    if not emit:
                        owned[top] += t - cur
                    else:
                        G = cum[top]
                        cum[top] = G + (t - cur)
                        o = obj_of_piece[top]
                        pat = of_request[obj_rows[top]]
                        v = G + obj_shift[o]  # CEDA: local offset; CIDA: offset in the pattern's file
                        x = cur
                        while x < t:
                            if cida:
                                chunk = v // stripe
                                d = min(t - x, (chunk + 1) * stripe - v)
                                srv = servers[chunk % n_srv]
                                loc = (chunk // n_srv) * stripe + v % stripe
                                slot = 0
                            else:
                                d = t - x
                                slot = obj_slot[o]
                                srv = servers[slot]
                                loc = v
                            k = nout - 1
                            if (nout > 0 and last_g == g and last_G == G and o_pat[k] == pat
                                    and o_off[k] + o_len[k] == x and o_srv[k] == srv and o_slot[k] == slot
                                    and o_loc[k] + o_len[k] == loc):
                                o_len[k] += d
                            else:
                                o_pat[nout] = pat
                                o_off[nout] = x
                                o_len[nout] = d
                                o_srv[nout] = srv
                                o_loc[nout] = loc
                                o_slot[nout] = slot
                                nout += 1
                            x += d
                            v += d
                            G += d
                            last_G = G
                            last_g = g
                    cur = t
                if te <= cur:  # pop the top: the last leaf sifts down from the root
                    hs -= 1
                    xq = hq[hs]
                    xe = he[hs]
                    i = 0
                    while True:
                        c = 2 * i + 1
                        if c >= hs:
                            break
                        if c + 1 < hs and hq[c + 1] < hq[c]:
                            c += 1
                        if hq[c] >= xq:
                            break
                        hq[i] = hq[c]
                        he[i] = he[c]
                        i = c
                    if hs > 0:
                        hq[i] = xq
                        he[i] = xe
            if last:
                break
            cur = s
            if hs == cap:  # grow the heap
                cap *= 2
                nq = np.empty(cap, dtype=np.int64)
                ne = np.empty(cap, dtype=np.int64)
                nq[:hs] = hq[:hs]
                ne[:hs] = he[:hs]
                hq = nq
                he = ne
            i = hs  # push q: sift up
            hs += 1
            while i > 0:
                pa = (i - 1) // 2
                if hq[pa] <= q:
                    break
                hq[i] = hq[pa]
                he[i] = he[pa]
                i = pa
            hq[i] = q
            he[i] = e
    return nout if emit else nfrag


@njit(cache=True)
def objects(obj_rows, owned, of_request, rank, group_of_pattern, n_servers, cida, npat):
    """Algorithm 1's objects from the owned bytes of every piece (in object order).

    An object is a maximal run of pieces with owned bytes of one (group, pattern, rank);
    object i of its (group, pattern) run goes to replica file l = i mod n (CEDA), objects
    of one file in ascending i; CIDA concatenates the run's objects.  Turns ``owned`` into
    ``cum`` in place (G: bytes owned by the pieces before, in object order) and returns
    (object of each piece, per object: shift — local offset (CEDA) or offset in the
    pattern's replica file (CIDA) = G + shift — and file l, space per pattern)."""
    m = len(obj_rows)
    obj_of_piece = np.empty(m, dtype=obj_rows.dtype)
    nobj = 0
    pg = -1
    pp = -1
    pr = -1
    for q in range(m):  # count the objects
        if owned[q] > 0:
            r = obj_rows[q]
            p = of_request[r]
            if group_of_pattern[p] != pg or p != pp or rank[r] != pr:
                nobj += 1
                pg, pp, pr = group_of_pattern[p], p, rank[r]
    shift = np.zeros(nobj, dtype=np.int64)
    slot = np.zeros(nobj, dtype=np.int64)
    space = np.zeros(npat, dtype=np.int64)
    file_bytes = np.zeros(max(n_servers, 1), dtype=np.int64)
    G = np.int64(0)
    o = -1
    i = 0
    run_G0 = np.int64(0)
    pg = -1
    pp = -1
    pr = -1
    for q in range(m):
        w = owned[q]
        r = obj_rows[q]
        p = of_request[r]
        if w > 0:
            grp = group_of_pattern[p]
            if grp != pg or p != pp or rank[r] != pr:  # a new object
                if grp != pg or p != pp:  # first object of a (group, pattern) run
                    i = 0
                    run_G0 = G
                    file_bytes[:] = 0
                else:
                    i += 1
                o += 1
                if cida:
                    shift[o] = -run_G0
                else:
                    l = i % n_servers
                    slot[o] = l
                    shift[o] = file_bytes[l] - G
                pg, pp, pr = grp, p, rank[r]
            if not cida:
                file_bytes[slot[o]] += w
            space[p] += w
        obj_of_piece[q] = max(o, 0)
        owned[q] = G
        G += w
    return obj_of_piece, shift, slot, space


def place(by_offset, bounds, obj_rows, off, ln, of_request, rank, group_of_pattern, npat, servers, cida: bool,
          stripe: int):
    """Both sweeps and the objects: (extent columns pattern, offset, length, server, local,
    slot sorted by (group, offset); space per pattern)."""
    m = len(obj_rows)
    owned = np.zeros(m, dtype=np.int64)
    z64 = np.zeros(0, dtype=np.int64)
    zi = np.zeros(0, dtype=obj_rows.dtype)
    servers = np.asarray(servers, dtype=np.int64)
    stripe = max(int(stripe), 1)
    cols = (np.zeros(0, np.int32), z64, z64, np.zeros(0, np.int32), z64, np.zeros(0, np.int32))
    nfrag = _sweep(False, by_offset, bounds, obj_rows, off, ln, of_request, owned, z64, zi, z64, z64, servers, cida,
                   stripe, *cols)
    obj_of_piece, shift, slot, space = objects(obj_rows, owned, of_request, rank, group_of_pattern, len(servers),
                                               cida, npat)
    cap = nfrag
    if cida:  # fragments split at the stripe boundaries of the pattern files
        cap = 2 * nfrag + int(space.sum()) // stripe
    cols = (np.empty(cap, np.int32), np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int32),
            np.empty(cap, np.int64), np.empty(cap, np.int32))
    nout = _sweep(True, by_offset, bounds, obj_rows, off, ln, of_request, z64, owned, obj_of_piece, shift, slot,
                  servers, cida, stripe, *cols)
    del owned, obj_of_piece
    return tuple(c[:nout].copy() if nout < cap else c for c in cols), space


# ---------------------------------------------------------------------------- analyzer


@njit(cache=True)
def by_pattern(perm, pattern_of_row, bid, npat):
    """The analyzer's service order (§4.4): ``perm`` (the trace's service order: batch,
    order, row) stably counted by pattern, and along it the dense id of (pattern, batch) —
    every pattern's own batches — and the pattern of each such batch.

    Returns (already: ``perm`` is in pattern order as it is, order (empty when already),
    batch id of each position, pattern of each batch)."""
    n = len(perm)
    already = True
    for i in range(1, n):
        if pattern_of_row[perm[i]] < pattern_of_row[perm[i - 1]]:
            already = False
            break
    if already:
        vperm = perm[:0].copy()
        src = perm
    else:
        cnt = np.zeros(npat + 1, dtype=np.int64)
        for i in range(n):
            cnt[pattern_of_row[perm[i]] + 1] += 1
        for k in range(npat):
            cnt[k + 1] += cnt[k]
        vperm = np.empty_like(perm)
        for i in range(n):
            r = perm[i]
            k = pattern_of_row[r]
            vperm[cnt[k]] = r
            cnt[k] += 1
        src = vperm
    vb = np.empty(n, dtype=np.int64)
    nbv = 0
    for i in range(n):
        r = src[i]
        if i == 0 or pattern_of_row[r] != pattern_of_row[src[i - 1]] or bid[r] != bid[src[i - 1]]:
            nbv += 1
        vb[i] = nbv - 1
    pattern_of_batch = np.empty(nbv, dtype=np.int64)
    for i in range(n):
        pattern_of_batch[vb[i]] = pattern_of_row[src[i]]
    return already, vperm, vb, pattern_of_batch
