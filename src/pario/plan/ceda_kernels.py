"""Compiled passes of CEDA's identifier and planner (He & Sun, seed 000 §4.2–4.3; numba).

**Identifier** (§4.2, :func:`pario.plan.ceda_identify.identify_patterns`): per stream, the
order-independent signature of its multiset of extents (:func:`stream_signatures`) and
whether it touches one extent twice (:func:`stream_repeats`, on the requests in offset
order); the pattern of every request (:func:`pattern_of_rows`).

**Planner** (§4.3, Algorithm 1, :func:`pario.plan.ceda_place.place_objects`).  Every request
("piece") belongs to a claim group (a pattern, or a file for the combined plan) and has a
priority: its position in *object order* (group, slot, rank, order, row) — the order in
which Algorithm 1 appends requested data to the objects.  A byte wanted by several pieces
of a group is placed once, in the piece that comes first ("if r_j ∉ o_i", line 5).

- :func:`claim`: a sweep over each group's pieces in offset order (:func:`sweep_order`)
  with a min-heap of the pieces covering the sweep position, keyed by priority: between
  two events the owner of the bytes is the heap's top.  It records the owned *fragments*
  in offset order (a piece's fragments in increasing offset: the order in which they sit
  in its object).
- :func:`owned_bytes`, :func:`objects`: each piece's owned bytes; from those, in object
  order, every piece's position G in the concatenation of all objects, and every object's
  replica file and offset.
- :func:`extents`: each fragment's replica extent — CEDA: object i of a pattern in replica
  file l = i mod n, objects of one file in ascending i; CIDA: the pattern's objects
  concatenated and striped round-robin — merged into the previous one when it continues
  it logically, physically and in object order (G).  That yields the extents of the
  reference's merge over object order (the pre-issue-18 code, ``tests/oracles/ceda.py``), sorted by offset.

Memory: a few arrays per piece and per fragment; nothing per elementary segment.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..trace.sorting import _counting

# ---------------------------------------------------------------------------- identifier


@njit(cache=True, inline="always")
def _splitmix(x):
    """SplitMix64 finaliser of a uint64 (as ``_splitmix`` of ``tests/oracles/ceda.py``)."""
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
    """Pattern id of every trace row (rows in stream order), int32."""
    out = np.empty(n, dtype=np.int32)
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
def sweep_order(offset_rows, of_request, off, length, group_of_pattern, ngroups, obj_rows, n):
    """The placed pieces by (group, offset) — ``offset_rows`` (rows by offset) stably
    counting-sorted by group — as a table of (priority = position in ``obj_rows``, start,
    end, pattern), read in order by the sweeps, and each group's first index in that order
    (``ngroups + 1`` bounds)."""
    rows = object_order(offset_rows, of_request, length, group_of_pattern, ngroups)
    prio_of_row = np.empty(n, dtype=obj_rows.dtype)
    for q in range(len(obj_rows)):
        prio_of_row[obj_rows[q]] = q
    bounds = np.zeros(ngroups + 1, dtype=np.int64)
    table = np.empty((len(rows), 4), dtype=np.int64)
    for i in range(len(rows)):
        r = rows[i]
        p = of_request[r]
        bounds[group_of_pattern[p] + 1] += 1
        table[i, 0] = prio_of_row[r]
        table[i, 1] = off[r]
        table[i, 2] = off[r] + length[r]
        table[i, 3] = p
    for g in range(ngroups):
        bounds[g + 1] += bounds[g]
    return table, bounds


# ---------------------------------------------------------------------------- planner: claim sweep
# Three passes: the claim sweep (branchy: heap logic) only records the owned fragments, in
# offset order, sequentially; the per-piece sums and the replica extents are then tight
# loops over the fragments, whose random accesses (the piece's state, in object order)
# overlap instead of waiting behind mispredicted branches.  Placed extents are written as
# records (offset, end, local, server·2^32 + data file): the layout the extent lookups read
# (:class:`pario.layout.extents_kernel.ExtentSet`).


@njit(cache=True)
def claim(table, bounds, qtype):
    """Owned fragments of every group, in offset order (module docstring): piece q (a
    priority) owns [s, e) when no piece of smaller q in its group covers it.

    A run of pieces with one extent that overlaps nothing else (no piece still open, the
    next one starting at or after its end — IOR's write and read-back of a block) is owned
    whole by its smallest q, without the heap.  Otherwise a min-heap (``hq`` priorities,
    ``he`` their ends, ``hp`` their patterns) holds the pieces covering the sweep position
    ``cur``, the owner of the bytes up to the next start is its top, and ended pieces leave
    it when they reach the top.  Returns (piece — of ``qtype``'s dtype —, start, end,
    pattern of each fragment, number of fragments).  A fragment ends where a piece ends or
    starts, so there are at most 2 a piece: the arrays are made that long (only the pages
    written take memory) and never grown — a loop that may rebind an array is compiled far
    slower."""
    cap = 2 * len(table) + len(bounds)
    fq = np.empty(cap, dtype=qtype.dtype)
    fs = np.empty(cap, dtype=np.int64)
    ft = np.empty(cap, dtype=np.int64)
    fp = np.empty(cap, dtype=np.int32)
    nf = 0
    hcap = 64
    hq = np.empty(hcap, dtype=np.int64)
    he = np.empty(hcap, dtype=np.int64)
    hp = np.empty(hcap, dtype=np.int64)
    for g in range(len(bounds) - 1):
        hs = 0
        cur = np.int64(0)
        idx = bounds[g]
        end = bounds[g + 1]
        while True:
            last = idx == end
            s = np.int64(0)
            if not last:
                s = table[idx, 1]
            # the owners of [cur, s) (of everything left when last)
            while hs > 0 and (last or cur < s):
                top = hq[0]
                te = he[0]
                if te > cur:
                    t = te if last else min(te, s)
                    fq[nf] = top
                    fs[nf] = cur
                    ft[nf] = t
                    fp[nf] = hp[0]
                    nf += 1
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
            e = table[idx, 2]
            j = idx + 1  # the run of pieces with this extent, and its smallest priority
            qmin = table[idx, 0]
            pmin = table[idx, 3]
            while j < end and table[j, 1] == s and table[j, 2] == e:
                if table[j, 0] < qmin:
                    qmin = table[j, 0]
                    pmin = table[j, 3]
                j += 1
            if hs == 0 and (j == end or table[j, 1] >= e):  # isolated: owned whole by qmin
                fq[nf] = qmin
                fs[nf] = s
                ft[nf] = e
                fp[nf] = pmin
                nf += 1
                cur = e
                idx = j
                continue
            for k in range(idx, j):  # push the run's pieces
                if hs == hcap:  # grow the heap
                    hcap *= 2
                    nq = np.empty(hcap, dtype=np.int64)
                    ne = np.empty(hcap, dtype=np.int64)
                    np_ = np.empty(hcap, dtype=np.int64)
                    nq[:hs] = hq[:hs]
                    ne[:hs] = he[:hs]
                    np_[:hs] = hp[:hs]
                    hq = nq
                    he = ne
                    hp = np_
                q = table[k, 0]
                i = hs  # sift up
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
                hp[i] = table[k, 3]
            idx = j
    return fq, fs, ft, fp, nf


@njit(cache=True)
def owned_bytes(fq, fs, ft, nf, m):
    """Bytes each piece owns (the sum of its fragments)."""
    owned = np.zeros(m, dtype=np.int64)
    for i in range(nf):
        owned[fq[i]] += ft[i] - fs[i]
    return owned


@njit(cache=True)
def extents(fq, fs, ft, fp, nf, bounds_f, cum, obj, shift_a, slot_a, shift_b, df_a, df_b, servers, stripe, rec_a,
            rec_b, bounds_a, bounds_b, i0, na, nb, a_G, b_G, a_pat, b_pat, g):
    """The replica extents of fragments ``i0`` … (in offset order) until the last or a
    full CIDA table: ``cum[q]``, the position G of piece q's next owned byte, ``obj[q]`` its
    object o; each fragment's CEDA extent into ``rec_a`` (when it has rows: object
    o in replica file l = ``slot_a[o]`` — data file ``df_a[pattern] + l``, server
    ``servers[l]`` — at local offset G + ``shift_a[o]``) and its CIDA extents into
    ``rec_b`` (when it has rows: data file ``df_b[pattern]``, offset G +
    ``shift_b[o]`` in it, split at the stripes), each merged with the previous extent of its
    table when they continue each other logically, physically and in object order (G),
    within a group (``bounds_f``: each group's first fragment; ``g`` the current one; each
    group's first extent into ``bounds_a`` / ``bounds_b``).  Returns (the first fragment not
    done, numbers of extents, G after the last extent of each table and its pattern, group)
    to resume with: the tables are never reallocated here (a loop that may rebind an array
    is compiled far slower)."""
    do_a = len(rec_a) > 0
    do_b = len(rec_b) > 0
    cap_b = len(rec_b)
    n_srv = len(servers)
    if i0 == 0:
        bounds_a[0] = 0
        bounds_b[0] = 0
    for i in range(i0, nf):
        while i == bounds_f[g + 1]:  # a new group: nothing merges across
            g += 1
            a_G = -1
            b_G = -1
            bounds_a[g] = na
            bounds_b[g] = nb
        q = fq[i]
        cur = fs[i]
        t = ft[i]
        pat = fp[i]
        G0 = cum[q]
        o = obj[q]
        if do_b and nb + (t - cur) // stripe + 2 > cap_b:
            return i, na, nb, a_G, b_G, a_pat, b_pat, g  # (room for this fragment's stripes: the caller grows the table)
        cum[q] = G0 + (t - cur)
        if do_a:  # CEDA: one extent
            slot = slot_a[o]
            srv = servers[slot]
            loc = G0 + shift_a[o]
            df = df_a[pat] + slot
            k = na - 1
            sd = (srv << 32) | df
            if (na > 0 and a_G == G0 and a_pat == pat and rec_a[k, 1] == cur and rec_a[k, 3] == sd
                    and rec_a[k, 2] + (rec_a[k, 1] - rec_a[k, 0]) == loc):
                rec_a[k, 1] = t
            else:
                rec_a[na, 0] = cur
                rec_a[na, 1] = t
                rec_a[na, 2] = loc
                rec_a[na, 3] = sd
                na += 1
            a_G = G0 + (t - cur)
            a_pat = pat
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
                sd = (srv << 32) | df_b[pat]
                if (nb > 0 and b_G == G and b_pat == pat and rec_b[k, 1] == x and rec_b[k, 3] == sd
                        and rec_b[k, 2] + (rec_b[k, 1] - rec_b[k, 0]) == loc):
                    rec_b[k, 1] = x + d
                else:
                    rec_b[nb, 0] = x
                    rec_b[nb, 1] = x + d
                    rec_b[nb, 2] = loc
                    rec_b[nb, 3] = sd
                    nb += 1
                x += d
                v += d
                G += d
                b_G = G
                b_pat = pat
    for gg in range(g + 1, len(bounds_a)):  # the groups after the last fragment's
        bounds_a[gg] = na
        bounds_b[gg] = nb
    return nf, na, nb, a_G, b_G, a_pat, b_pat, g


@njit(cache=True)
def objects(obj_rows, cum, of_request, rank, group_of_pattern, n_servers, npat):
    """Algorithm 1's objects from the owned bytes of every piece (``cum[q]``, in object
    order).

    An object is a maximal run of pieces with owned bytes of one (group, pattern, rank);
    object i of its (group, pattern) run goes to replica file l = i mod n (CEDA), objects
    of one file in ascending i; CIDA concatenates the run's objects.  Turns ``cum[q]`` into
    G, the bytes owned by the pieces before (in object order), and returns (each piece's
    object; per object: CEDA shift — local offset = G + shift — and file l, CIDA shift —
    offset in the pattern's replica file = G + shift; space per pattern)."""
    m = len(obj_rows)
    obj = np.empty(m, dtype=obj_rows.dtype)
    nobj = 0
    pg = -1
    pp = -1
    pr = -1
    for q in range(m):  # count the objects
        if cum[q] > 0:
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
        w = cum[q]
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
        cum[q] = G
        obj[q] = max(o, 0)
        G += w
    return obj, shift_a, slot_a, shift_b, space


def object_state(fragments, bounds, obj_rows, of_request, rank, group_of_pattern, slot_of_pattern, n: int):
    """From the claimed ``fragments`` (:func:`claim`): the objects and every piece's state —
    (each group's first fragment, cum, obj, per object CEDA shift and file, CIDA shift, per
    pattern CEDA and CIDA first data file, space per pattern); ``n`` replica servers.

    Data files: the patterns of a group with replica bytes, in ascending ``slot_of_pattern``
    (then id), have the replica files 1 + b·n … (CEDA: n each) or 1 + b (CIDA: one each)."""
    fq, fs, ft, fp, nf = fragments
    npat = len(group_of_pattern)
    # each group's first fragment (fragments are in group order)
    bounds_f = np.searchsorted(np.asarray(group_of_pattern)[fp[:nf]], np.arange(len(bounds)))
    cum = owned_bytes(fq, fs, ft, nf, len(obj_rows))
    obj, shift_a, slot_a, shift_b, space = objects(obj_rows, cum, of_request, rank, group_of_pattern, n, npat)
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
    return bounds_f, cum, obj, shift_a, slot_a, shift_b, df_a, df_b, space


def place(fragments, state, servers, ceda: bool, cida: bool, stripe: int):
    """The extents of the claimed ``fragments`` (:func:`claim`) with their ``state``
    (:func:`object_state`): (CEDA extents, CIDA extents — each ``(records, bounds)``: records
    (offset, end, local, server·2^32 + data file) sorted by (group, offset), group g's
    ``records[bounds[g]:bounds[g+1]]`` —, or None when not asked)."""
    fq, fs, ft, fp, nf = fragments
    bounds_f, cum, obj, shift_a, slot_a, shift_b, df_a, df_b, _ = state
    servers = np.asarray(servers, dtype=np.int64)
    stripe = max(int(stripe), 1)
    cap_a = nf if ceda else 0  # at most one extent a fragment
    cap_b = nf + 1024 if cida else 0  # grown when fragments split at the stripes
    rec_a, rec_b = np.empty((cap_a, 4), dtype=np.int64), np.empty((cap_b, 4), dtype=np.int64)
    bounds_a, bounds_b = np.zeros(len(bounds_f), dtype=np.int64), np.zeros(len(bounds_f), dtype=np.int64)
    resume = (0, 0, 0, -1, -1, -1, -1, 0)
    while True:
        resume = extents(fq, fs, ft, fp, nf, bounds_f, cum, obj, shift_a, slot_a, shift_b, df_a, df_b, servers, stripe,
                         rec_a, rec_b, bounds_a, bounds_b, *resume)
        if resume[0] == nf:
            break
        nb = resume[2]  # the CIDA table is full: grown
        grown = np.empty((nb + nb // 2 + 1024 + int(ft[resume[0]] - fs[resume[0]]) // stripe + 2, 4), dtype=np.int64)
        grown[:nb] = rec_b[:nb]
        rec_b = grown
    na, nb = resume[1], resume[2]
    trim = lambda a, k: a[:k].copy() if k < 0.9 * len(a) else a[:k]  # noqa: E731  (a copy if it frees much)
    return ((trim(rec_a, na), bounds_a) if ceda else None, (trim(rec_b, nb), bounds_b) if cida else None)


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
        vperm = _counting(perm, pattern_of_row, max(npat, 1))  # stable: by pattern, then perm's order
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
