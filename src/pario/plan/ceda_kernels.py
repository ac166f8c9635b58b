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
# The sweep is written out once for both passes (``emit``: False = count the owned bytes of
# every piece, True = place the fragments): one predictable branch a fragment.  Its pieces
# come in offset order, their data (row, offset, end, pattern, per-piece state) from arrays
# in object order: random accesses, loaded a block of pieces at a time before the block is
# swept, so that the cache misses of different pieces overlap.  Placed extents are written
# as records (offset, end, server, local, slot): the layout the extent lookups read
# (:class:`pario.layout.extents_kernel.ExtentSet`).

SWEEP_BLOCK = 64


@njit(cache=True)
def _sweep(emit, by_offset, bounds, obj_rows, off, ln, of_request, owned, cum, obj_of_piece, shift_a, slot_a, shift_b,
           df_a, df_b, servers, stripe, rec_a, pat_a, rec_b, pat_b):
    """Owned fragments of every group in offset order (module docstring): piece q (a
    priority) owns [s, e) when no piece of smaller q in its group covers it.  A min-heap
    (``hq`` priorities, ``he`` their ends, ``hp`` their patterns) holds the pieces covering
    the sweep position ``cur``; ended pieces leave it when they reach the top.

    ``emit=False``: adds each fragment's length to ``owned[q]``; returns the number of
    fragments.  ``emit=True``: ``cum[q]`` is the position G of piece q's next owned byte;
    appends each fragment's CEDA extent to ``rec_a``/``pat_a`` (when ``rec_a`` has rows:
    object o in replica file l = ``slot_a[o]`` — data file ``df_a[pattern] + l``, server
    ``servers[l]`` — at local offset G + ``shift_a[o]``) and its CIDA extents to
    ``rec_b``/``pat_b`` (when ``rec_b`` has rows: data file ``df_b[pattern]``, offset G +
    ``shift_b[o]`` in it, split at the stripes), each merged with the previous extent of its
    table when they continue each other logically, physically and in object order (G);
    returns the numbers of extents.  (And a sum of the loaded state, so that the compiler
    keeps those loads.)"""
    cap = 64
    hq = np.empty(cap, dtype=np.int64)
    he = np.empty(cap, dtype=np.int64)
    hp = np.empty(cap, dtype=np.int64)
    bq = np.empty(SWEEP_BLOCK, dtype=np.int64)
    br = np.empty(SWEEP_BLOCK, dtype=np.int64)
    bs = np.empty(SWEEP_BLOCK, dtype=np.int64)
    be = np.empty(SWEEP_BLOCK, dtype=np.int64)
    bp = np.empty(SWEEP_BLOCK, dtype=np.int64)
    touch = np.int64(0)
    do_a = len(rec_a) > 0
    do_b = len(rec_b) > 0
    na = 0
    nb = 0
    nfrag = 0
    n_srv = len(servers)
    a_G = np.int64(-1)  # G after the last extent of each table, and its group
    a_g = -1
    b_G = np.int64(-1)
    b_g = -1
    for g in range(len(bounds) - 1):
        hs = 0
        cur = np.int64(0)
        for b0 in range(bounds[g], bounds[g + 1] + 1, SWEEP_BLOCK):
            b1 = min(bounds[g + 1], b0 + SWEEP_BLOCK)
            for idx in range(b0, b1):  # stage 1: the pieces' rows
                q = by_offset[idx]
                bq[idx - b0] = q
                br[idx - b0] = obj_rows[q]
            for j in range(b1 - b0):  # stage 2: their extents, patterns and state
                r = br[j]
                bs[j] = off[r]
                be[j] = off[r] + ln[r]
                bp[j] = of_request[r]
                if emit:
                    touch += cum[bq[j]] + obj_of_piece[bq[j]]
                else:
                    touch += owned[bq[j]]
            for idx in range(b0, b1 + 1):  # stage 3: sweep (idx == end of the group: drain)
                last = idx == bounds[g + 1]
                if idx == b1 and not last:
                    break
                q = np.int64(0)
                s = np.int64(0)
                e = np.int64(0)
                pq = np.int64(0)
                if not last:
                    j = idx - b0
                    q = bq[j]
                    s = bs[j]
                    e = be[j]
                    pq = bp[j]
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
                            G0 = cum[top]
                            cum[top] = G0 + (t - cur)
                            o = obj_of_piece[top]
                            pat = hp[0]
                            if do_a:  # CEDA: one extent
                                slot = slot_a[o]
                                srv = servers[slot]
                                loc = G0 + shift_a[o]
                                df = df_a[pat] + slot
                                k = na - 1
                                if (na > 0 and a_g == g and a_G == G0 and pat_a[k] == pat and rec_a[k, 1] == cur
                                        and rec_a[k, 2] == srv and rec_a[k, 4] == df
                                        and rec_a[k, 3] + (rec_a[k, 1] - rec_a[k, 0]) == loc):
                                    rec_a[k, 1] = t
                                else:
                                    rec_a[na, 0] = cur
                                    rec_a[na, 1] = t
                                    rec_a[na, 2] = srv
                                    rec_a[na, 3] = loc
                                    rec_a[na, 4] = df
                                    pat_a[na] = pat
                                    na += 1
                                a_G = G0 + (t - cur)
                                a_g = g
                            if do_b:  # CIDA: split at the stripes of the pattern's replica file
                                v = G0 + shift_b[o]
                                x = cur
                                G = G0
                                while x < t:
                                    chunk = v // stripe
                                    d = min(t - x, (chunk + 1) * stripe - v)
                                    srv = servers[chunk % n_srv]
                                    loc = (chunk // n_srv) * stripe + v % stripe
                                    k = nb - 1
                                    if (nb > 0 and b_g == g and b_G == G and pat_b[k] == pat and rec_b[k, 1] == x
                                            and rec_b[k, 2] == srv and rec_b[k, 3] + (rec_b[k, 1] - rec_b[k, 0]) == loc):
                                        rec_b[k, 1] = x + d
                                    else:
                                        rec_b[nb, 0] = x
                                        rec_b[nb, 1] = x + d
                                        rec_b[nb, 2] = srv
                                        rec_b[nb, 3] = loc
                                        rec_b[nb, 4] = df_b[pat]
                                        pat_b[nb] = pat
                                        nb += 1
                                    x += d
                                    v += d
                                    G += d
                                    b_G = G
                                    b_g = g
                        cur = t
                    if te <= cur:  # pop the top: the last leaf sifts down from the root
                        hs -= 1
                        xq = hq[hs]
                        xe = he[hs]
                        xp = hp[hs]
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
                            hp[i] = hp[c]
                            i = c
                        if hs > 0:
                            hq[i] = xq
                            he[i] = xe
                            hp[i] = xp
                if last:
                    break
                cur = s
                if hs == cap:  # grow the heap
                    cap *= 2
                    nq = np.empty(cap, dtype=np.int64)
                    ne = np.empty(cap, dtype=np.int64)
                    np_ = np.empty(cap, dtype=np.int64)
                    nq[:hs] = hq[:hs]
                    ne[:hs] = he[:hs]
                    np_[:hs] = hp[:hs]
                    hq = nq
                    he = ne
                    hp = np_
                i = hs  # push q: sift up
                hs += 1
                while i > 0:
                    pa = (i - 1) // 2
                    if hq[pa] <= q:
                        break
                    hq[i] = hq[pa]
                    he[i] = he[pa]
                    hp[i] = hp[pa]
                    i = pa
                hq[i] = q
                he[i] = e
                hp[i] = pq
    return nfrag, na, nb, touch


@njit(cache=True)
def objects(obj_rows, owned, of_request, rank, group_of_pattern, n_servers, npat):
    """Algorithm 1's objects from the owned bytes of every piece (in object order).

    An object is a maximal run of pieces with owned bytes of one (group, pattern, rank);
    object i of its (group, pattern) run goes to replica file l = i mod n (CEDA), objects
    of one file in ascending i; CIDA concatenates the run's objects.  Turns ``owned`` into
    ``cum`` in place (G: bytes owned by the pieces before, in object order) and returns
    (object of each piece; per object: CEDA shift — local offset = G + shift — and file l,
    CIDA shift — offset in the pattern's replica file = G + shift; space per pattern)."""
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
    shift_a = np.zeros(nobj, dtype=np.int64)
    slot_a = np.zeros(nobj, dtype=np.int64)
    shift_b = np.zeros(nobj, dtype=np.int64)
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
                l = i % n_servers
                slot_a[o] = l
                shift_a[o] = file_bytes[l] - G
                shift_b[o] = -run_G0
                pg, pp, pr = grp, p, rank[r]
            file_bytes[slot_a[o]] += w
            space[p] += w
        obj_of_piece[q] = max(o, 0)
        owned[q] = G
        G += w
    return obj_of_piece, shift_a, slot_a, shift_b, space


def place(by_offset, bounds, obj_rows, off, ln, of_request, rank, group_of_pattern, slot_of_pattern, servers,
          ceda: bool, cida: bool, stripe: int):
    """Both sweeps and the objects: (CEDA extents, CIDA extents — each ``(records, pattern)``
    sorted by (group, offset), records (offset, end, server, local, data file), or None when
    not asked —, space per pattern).

    Data files: the patterns of a group with replica bytes, in ascending ``slot_of_pattern``
    (then id), have the replica files 1 + b·n … (CEDA: n each) or 1 + b (CIDA: one each)."""
    m = len(obj_rows)
    npat = len(group_of_pattern)
    n = len(servers)
    owned = np.zeros(m, dtype=np.int64)
    z64 = np.zeros(0, dtype=np.int64)
    zi = np.zeros(0, dtype=obj_rows.dtype)
    z2 = np.zeros((0, 5), dtype=np.int64)
    z32 = np.zeros(0, dtype=np.int32)
    servers = np.asarray(servers, dtype=np.int64)
    stripe = max(int(stripe), 1)
    nfrag, _, _, _ = _sweep(False, by_offset, bounds, obj_rows, off, ln, of_request, owned, z64, zi, z64, z64, z64,
                            z64, z64, servers, stripe, z2, z32, z2, z32)
    obj_of_piece, shift_a, slot_a, shift_b, space = objects(obj_rows, owned, of_request, rank, group_of_pattern, n,
                                                            npat)
    used = np.flatnonzero((group_of_pattern >= 0) & (space > 0))
    o = np.lexsort((used, np.asarray(slot_of_pattern)[used], group_of_pattern[used]))
    ps = used[o]
    gs = group_of_pattern[ps]
    first = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]]) if len(ps) else np.zeros(0, dtype=np.int64)
    base = np.arange(len(ps)) - np.repeat(first, np.diff(np.r_[first, len(ps)]))
    df_a = np.ones(npat, dtype=np.int64)
    df_b = np.ones(npat, dtype=np.int64)
    df_a[ps] = 1 + base * n
    df_b[ps] = 1 + base
    cap_a = nfrag if ceda else 0
    cap_b = 2 * nfrag + int(space.sum()) // stripe if cida else 0  # fragments split at the stripes
    rec_a, pat_a = np.empty((cap_a, 5), dtype=np.int64), np.empty(cap_a, dtype=np.int32)
    rec_b, pat_b = np.empty((cap_b, 5), dtype=np.int64), np.empty(cap_b, dtype=np.int32)
    _, na, nb, _ = _sweep(True, by_offset, bounds, obj_rows, off, ln, of_request, z64, owned, obj_of_piece, shift_a,
                          slot_a, shift_b, df_a, df_b, servers, stripe, rec_a, pat_a, rec_b, pat_b)
    del owned, obj_of_piece
    trim = lambda a, k: a[:k].copy() if k < len(a) else a  # noqa: E731
    return ((trim(rec_a, na), trim(pat_a, na)) if ceda else None,
            (trim(rec_b, nb), trim(pat_b, nb)) if cida else None, space)


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
