"""Compiled pricing of a whole trace under a layout (numba): the hot loop of every planner.

:class:`~pario.model.distribution.DistributionModel` (CEDA seed 000 §3 eq. 1–4) and the
per-server busy time of the closed-form models price a trace under many candidate layouts.
The reference code maps every request to its sub-requests (:func:`pario.layout.map_trace`),
sorts the sub-requests by five keys into service order and reduces them with bincounts — a
fresh mapping and a fresh sort for every candidate.  Here instead:

- the *service order of requests* — batch, the rank's request order, row — is computed once
  per (trace, batching) and shared by every candidate (:func:`prepared`, a small cache);
- a layout whose byte-count functions are known (striped, 2-D, regions of those: every
  layout of the planners' search spaces) is flattened into a few small tables
  (:func:`layout_tables`) and mapped *inside* the kernel, one request at a time: request
  ``[x, x+L)`` has on server ``j`` the one sub-request ``local = C_j(x)``,
  ``length = C_j(x+L) − C_j(x)`` (:mod:`pario.layout.types`); nothing per sub-request is
  stored;
- other layouts (replica extent maps) are mapped by :func:`pario.layout.map_trace` and fed to
  the same kernel as per-request runs of sub-requests;
- the kernel walks the requests in service order, so the sub-requests reach every server in
  the reference's service order (server, batch, rank order, row, local): contiguity is a
  comparison with the server's previous sub-request, q, p (distinct ranks, a per-server
  marker), k and the α/β sums are running sums per server, and a batch is closed — T_ser^j
  per server (eq. 3), T_sys = max_j (eq. 4) — when the next batch starts.  Memory is O(n
  servers + batches), not O(sub-requests);
- ``limit``: the running Σ_b T_sys(b) only grows, so pricing stops as soon as it exceeds
  ``limit`` — exact pruning (branch and bound) of candidates that cannot beat the best one
  found so far (:mod:`pario.plan.layout_select`).

Results equal the reference (:meth:`DistributionModel.server_batch_times`) up to floating-point
summation order (relative 1e-12; the tests compare both on random traces).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..layout import Grouped, Regions, Striped, layout_for_files
from ..memo import IdentityCache
from .base import check_server_index
from .batches import service_order

BIG = np.iinfo(np.int64).max

# ---------------------------------------------------------------------------- layout tables


class Tables:
    """Flattened monotone layouts (one per leaf id).  Index chains: layout → regions
    [lay_r0, lay_r1) → groups [reg_g0, reg_g1) → slots [grp_s0, grp_s1); ``lay_srv``
    [lay_v0, lay_v1): the distinct servers of the layout."""

    __slots__ = ("lay_r0", "lay_r1", "reg_start", "reg_end", "reg_width", "reg_shift", "reg_g0", "reg_g1",
                 "grp_block", "grp_prefix", "grp_s0", "grp_s1", "grp_fixed", "grp_shift", "slot_server", "slot_w",
                 "slot_prefix", "lay_v0", "lay_v1", "lay_srv", "max_server")

    def arrays(self):
        return tuple(getattr(self, k) for k in self.__slots__[:-1])


def _leaf_groups(leaf):
    """[(block width, [(server, stripe)...])...] of a striped or 2-D leaf (stripes > 0 only)."""
    if isinstance(leaf, Striped):
        slots = [(s, w) for s, w in zip(leaf.servers, leaf.stripes) if w > 0]
        return [(sum(w for _, w in slots), slots)]
    if isinstance(leaf, Grouped):
        return [(leaf.stripe * len(g), [(s, leaf.stripe) for s in g]) for g in leaf.groups]
    return None


def layout_tables(leaves) -> Tables | None:
    """Tables of ``leaves`` (a list of layouts), or None when one has no byte-count function
    (an extent map) and must be mapped by :func:`pario.layout.map_trace`."""
    lay_r0, lay_r1, reg_start, reg_end, reg_width, reg_g0, reg_g1 = [], [], [], [], [], [], []
    grp_block, grp_prefix, grp_s0, grp_s1, slot_server, slot_w, slot_prefix = [], [], [], [], [], [], []
    grp_fixed = []
    lay_v0, lay_v1, lay_srv = [], [], []
    for lay in leaves:
        if isinstance(lay, Regions):
            regs = [(r.start, BIG if r.end is None else r.end, r.layout) for r in lay.regions]
        elif isinstance(lay, (Striped, Grouped)):
            regs = [(0, BIG, lay)]
        else:
            return None
        lay_r0.append(len(reg_start))
        seen = []
        for a, b, leaf in regs:
            groups = _leaf_groups(leaf)
            if groups is None:
                return None
            reg_start.append(a)
            reg_end.append(b)
            reg_width.append(sum(g for g, _ in groups))
            reg_g0.append(len(grp_block))
            pre = 0
            for block, slots in groups:
                grp_block.append(block)
                grp_prefix.append(pre)
                pre += block
                grp_s0.append(len(slot_server))
                ws = {w for _, w in slots}
                grp_fixed.append(ws.pop() if len(ws) == 1 else 0)
                sp = 0
                for s, w in slots:
                    slot_server.append(s)
                    slot_w.append(w)
                    slot_prefix.append(sp)
                    sp += w
                    if s not in seen:
                        seen.append(s)
                grp_s1.append(len(slot_server))
            reg_g1.append(len(grp_block))
        lay_r1.append(len(reg_start))
        lay_v0.append(len(lay_srv))
        lay_srv.extend(seen)
        lay_v1.append(len(lay_srv))
    t = Tables()
    i64 = lambda v: np.asarray(v, dtype=np.int64)
    for k, v in (("lay_r0", lay_r0), ("lay_r1", lay_r1), ("reg_start", reg_start), ("reg_end", reg_end),
                 ("reg_width", reg_width), ("reg_g0", reg_g0), ("reg_g1", reg_g1), ("grp_block", grp_block),
                 ("grp_prefix", grp_prefix), ("grp_s0", grp_s0), ("grp_s1", grp_s1), ("grp_fixed", grp_fixed),
                 ("slot_server", slot_server), ("slot_w", slot_w), ("slot_prefix", slot_prefix),
                 ("lay_v0", lay_v0), ("lay_v1", lay_v1), ("lay_srv", lay_srv)):
        setattr(t, k, i64(v))
    t.max_server = int(max(lay_srv)) if lay_srv else -1
    t.reg_shift = _shifts(t.reg_width)
    t.grp_shift = _shifts(t.grp_fixed)
    return t


def _shifts(widths: np.ndarray) -> np.ndarray:
    """log2 of each width that is a power of two (x // w = x >> shift), else -1."""
    out = np.full(len(widths), -1, dtype=np.int64)
    for i, w in enumerate(widths.tolist()):
        if w > 0 and w & (w - 1) == 0:
            out[i] = w.bit_length() - 1
    return out


def file_leaves(trace, layout):
    """(distinct layouts, leaf id per file) of a layout or dict file → layout."""
    return leaves_of(layout_for_files(layout, trace.files))


# ---------------------------------------------------------------------------- prepared trace


class Prepared:
    """Per (trace, batches): the requests' columns gathered once into service order (batch,
    the rank's request order, row — the leading keys of the reference's five-key sort), in
    compact dtypes, so that every candidate layout streams through them."""

    __slots__ = ("bid", "nb", "rank", "op", "file", "offset", "length", "nranks", "perm", "sources")

    def __init__(self, trace, bid, others=()):
        n = len(trace)
        bid = np.asarray(bid, dtype=np.int64)
        self.nb = int(bid.max()) + 1 if n else 0
        perm = service_order(trace.order, bid) if n else np.zeros(0, np.int64)  # (batch, order, row)
        self.perm = perm
        # a column gathered by another Prepared with the same service order from the same source
        # array is shared (a trace derived with other file names, e.g. replicas as virtual files)
        self.sources = {"bid": bid, "rank": trace.rank, "op": trace.op, "file": trace.file,
                        "offset": trace.offset, "length": trace.length}

        def gather(name, dtype=None):
            src = self.sources[name]
            for o in others:
                if o.perm is perm and o.sources[name] is src:
                    return getattr(o, name)
            out = src[perm]
            return out if dtype is None else out.astype(dtype, copy=False)

        self.bid = gather("bid")
        self.rank = gather("rank")
        self.nranks = int(self.rank.max()) + 1 if n else 1
        self.op = gather("op")
        self.file = gather("file")
        self.offset = gather("offset", np.int64)
        self.length = gather("length", np.int64)


_CACHE = IdentityCache(4)


def prepared(trace, bid) -> Prepared:
    """The :class:`Prepared` of (trace, bid), cached by identity (:mod:`pario.memo`)."""
    return _CACHE.get_or_compute((trace, bid), lambda: Prepared(trace, bid, _CACHE.values()))


def clear_cache() -> None:
    _CACHE.clear()


# ---------------------------------------------------------------------------- kernels
# One kernel, written out by hand: numba passes every array argument of a helper function as
# a struct, and the per-sub-request helper calls cost 3-6x the work they do (measured), so
# the loop body is not split into helpers.


@njit(cache=True, inline="always")
def _divmod(x, W):
    """(x div W, x mod W) for x >= 0, W > 0."""
    r = x // W
    return r, x - r * W


@njit(cache=True, nogil=True)
def price_kernel(mode, bid, nb, rank, op, fil, offset, length, seq, nranks, lid_of_file,
                 lay_r0, lay_r1, reg_start, reg_end, reg_width, reg_shift, reg_g0, reg_g1, grp_block, grp_prefix,
                 grp_s0, grp_s1, grp_fixed, grp_shift, slot_server, slot_w, slot_prefix, lay_v0, lay_v1, lay_srv,
                 ptr, s_server, s_local, s_length, s_df,
                 nserv, a_rand, a_seq, beta, alpha3, shape, network, e_net, t_net, limit, suffix=None):
    """CEDA seed 000 §3 eq. 1–4 of the whole trace, requests in service order (module
    docstring).  ``mode`` 0: monotone layouts mapped here (tables); 1: sub-requests given
    per request (request i: rows ``ptr[i]:ptr[i+1]`` of ``s_*``, a request's sub-requests on
    one server served by ascending local offset, stable); 2: as 0 but only the closed-form
    models' per-server busy time Σ α_j(op, seq) + length·β_j(op) (``alpha3``, ``seq``).

    ``shape[j]`` (the profile's ``cost``, :meth:`pario.system.System.cost_table`): 0 = the
    papers' additive T_ser^j = T_s + T_t (eq. 3); 1 = a rate limiter (a token bucket of
    requests and one of bytes, the testbed's blk-throttle) that serves the batch's q
    sub-requests and B bytes in max(T_s, T_t) — the per-interval max(n·α, B·β) of
    :mod:`pario.testbed.throttle`; a sub-request of mode 2 then costs max(α, length·β).

    ``limit``: stop once Σ_b T_sys of the batches priced so far, plus ``suffix[b]`` (a lower
    bound of Σ T_sys over batches b … nb−1, given by the caller; None = 0) for the next
    batch b, exceeds it.

    Returns (per_batch, servers, [T_s, T_t, T_n, sub-requests, batches priced], stopped)."""
    per_batch = np.zeros(nb)
    servers = np.zeros(nserv)
    tot = np.zeros(5)
    q = np.zeros(nserv)
    pc = np.zeros(nserv)
    Ar = np.zeros(nserv)
    As = np.zeros(nserv)
    S1r = np.zeros(nserv)
    S1s = np.zeros(nserv)
    Tt = np.zeros(nserv)
    nbytes = np.zeros(nserv)
    inb = np.zeros(nserv, dtype=np.bool_)
    touched = np.zeros(nserv, dtype=np.int64)
    last_file = np.full(nserv, -1, dtype=np.int64)
    last_df = np.full(nserv, -1, dtype=np.int64)
    last_end = np.full(nserv, -1, dtype=np.int64)
    mark = np.full(nserv * nranks, -1, dtype=np.int64)
    c0 = np.zeros(nserv, dtype=np.int64)
    c1 = np.zeros(nserv, dtype=np.int64)
    maxk = nserv
    if mode == 1:
        for i in range(len(ptr) - 1):
            maxk = max(maxk, ptr[i + 1] - ptr[i])
    pj = np.zeros(maxk, dtype=np.int64)
    pa = np.zeros(maxk, dtype=np.int64)
    pd = np.zeros(maxk, dtype=np.int64)
    pf = np.zeros(maxk, dtype=np.int64)
    idx = np.zeros(maxk, dtype=np.int64)
    ntouch = 0
    cur = -1
    running = 0.0
    nsub = 0
    n = len(bid)
    for i in range(n + 1):
        if i == n or bid[i] != cur:
            if cur >= 0 and mode != 2:
                # close batch cur: T_ser^j (eq. 3) of the servers it touched, T_sys = max_j (eq. 4)
                mx = 0.0
                for ti in range(ntouch):
                    j = touched[ti]
                    if pc[j] > 1:
                        fr = (pc[j] + q[j]) / (2.0 * q[j])
                        Ts = fr * Ar[j] + (1.0 - fr) * As[j]
                    else:
                        Ts = S1r[j] + S1s[j]
                    Tn = 0.0
                    if network:
                        Tn = pc[j] * e_net + nbytes[j] * t_net
                    T = (max(Ts, Tt[j]) if shape[j] == 1 else Ts + Tt[j]) + Tn
                    if T > mx:
                        mx = T
                    servers[j] += T
                    tot[0] += Ts
                    tot[1] += Tt[j]
                    tot[2] += Tn
                    q[j] = 0.0
                    pc[j] = 0.0
                    Ar[j] = 0.0
                    As[j] = 0.0
                    S1r[j] = 0.0
                    S1s[j] = 0.0
                    Tt[j] = 0.0
                    nbytes[j] = 0.0
                    inb[j] = False
                per_batch[cur] = mx
                ntouch = 0
                running += mx
                rest = 0.0
                if suffix is not None:
                    rest = suffix[cur + 1]
                if running + rest > limit:
                    tot[3] = nsub
                    tot[4] = cur + 1
                    return per_batch, servers, tot, True
            if i == n:
                break
            cur = bid[i]
        # ---- the request's sub-requests into (pj, pa, pd, pf)
        k = 0
        f = fil[i]
        if mode == 1:
            a0 = ptr[i]
            z0 = ptr[i + 1]
            k = z0 - a0
            for u in range(k):
                idx[u] = a0 + u
            if k > 1:  # stable insertion sort by (server, local)
                for u in range(1, k):
                    t = idx[u]
                    w = u - 1
                    while w >= 0 and (s_server[idx[w]] > s_server[t] or
                                      (s_server[idx[w]] == s_server[t] and s_local[idx[w]] > s_local[t])):
                        idx[w + 1] = idx[w]
                        w -= 1
                    idx[w + 1] = t
            for u in range(k):
                sx = idx[u]
                pj[u] = s_server[sx]
                pa[u] = s_local[sx]
                pd[u] = s_length[sx]
                pf[u] = s_df[sx]
        else:
            L = length[i]
            if L <= 0:
                continue
            x = offset[i]
            lid = lid_of_file[f]
            r0 = lay_r0[lid]
            r1 = lay_r1[lid]
            if r1 - r0 == 1 and reg_g1[r0] - reg_g0[r0] == 1 and L <= reg_width[r0]:
                # striped, request of at most a round: walk the stripe units it covers (at most
                # one per server plus a wrap back to the first server, which continues its piece)
                g = reg_g0[r0]
                s0 = grp_s0[g]
                K = grp_s1[g] - s0
                W = reg_width[r0]
                sh = reg_shift[r0]
                if sh >= 0:  # power-of-two round: no division
                    rnd = x >> sh
                    qq = x & (W - 1)
                else:
                    rnd, qq = _divmod(x, W)
                wf = grp_fixed[g]
                if grp_shift[g] >= 0:
                    sl = qq >> grp_shift[g]
                elif wf > 0:
                    sl = qq // wf
                else:
                    sl = 0
                    while slot_prefix[s0 + sl] + slot_w[s0 + sl] <= qq:
                        sl += 1
                rem = L
                while rem > 0:
                    w = slot_w[s0 + sl]
                    inside = qq - slot_prefix[s0 + sl]
                    d = min(w - inside, rem)
                    if d > 0:
                        if k > 0 and pj[0] == slot_server[s0 + sl]:
                            pd[0] += d  # wrapped to the first server: same local run
                        else:
                            pj[k] = slot_server[s0 + sl]
                            pa[k] = rnd * w + inside
                            pd[k] = d
                            pf[k] = 0
                            k += 1
                        rem -= d
                    qq += d if d > 0 else 0
                    sl += 1
                    if sl == K:
                        sl = 0
                        rnd += 1
                        qq = 0
                    else:
                        qq = slot_prefix[s0 + sl]
            elif r1 - r0 == 1:
                # one region from offset 0 (striped or 2-D): C_j(x) = inner(outer(x)), pario.layout.types
                rx, qx = _divmod(x, reg_width[r0])
                re, qe = _divmod(x + L, reg_width[r0])
                for g in range(reg_g0[r0], reg_g1[r0]):
                    B = grp_block[g]
                    P = grp_prefix[g]
                    u0 = min(max(qx - P, 0), B)
                    u1 = min(max(qe - P, 0), B)
                    rv0, qv0 = (rx, u0) if u0 < B else (rx + 1, 0)
                    rv1, qv1 = (re, u1) if u1 < B else (re + 1, 0)
                    for sl in range(grp_s0[g], grp_s1[g]):
                        w = slot_w[sl]
                        p0 = slot_prefix[sl]
                        lo = rv0 * w + min(max(qv0 - p0, 0), w)
                        d = rv1 * w + min(max(qv1 - p0, 0), w) - lo
                        if d > 0:
                            pj[k] = slot_server[sl]
                            pa[k] = lo
                            pd[k] = d
                            pf[k] = 0
                            k += 1
            else:
                # regions: C_j(x) = Σ_regions C_region,j(clip(x, start, end) − start)
                for side in range(2):
                    acc = c0 if side == 0 else c1
                    xs = x if side == 0 else x + L
                    for r in range(r0, r1):
                        xr = min(max(xs, reg_start[r]), reg_end[r]) - reg_start[r]
                        rnd, qq = _divmod(xr, reg_width[r])
                        for g in range(reg_g0[r], reg_g1[r]):
                            B = grp_block[g]
                            u = min(max(qq - grp_prefix[g], 0), B)
                            rv, qv = (rnd, u) if u < B else (rnd + 1, 0)
                            for sl in range(grp_s0[g], grp_s1[g]):
                                w = slot_w[sl]
                                acc[slot_server[sl]] += rv * w + min(max(qv - slot_prefix[sl], 0), w)
                for v in range(lay_v0[lid], lay_v1[lid]):
                    j = lay_srv[v]
                    d = c1[j] - c0[j]
                    if d > 0:
                        pj[k] = j
                        pa[k] = c0[j]
                        pd[k] = d
                        pf[k] = 0
                        k += 1
                    c0[j] = 0
                    c1[j] = 0
        # ---- serve them
        rk = rank[i]
        o = op[i]
        if mode == 2:
            sq = seq[i]
            for u in range(k):
                j = pj[u]
                if shape[j] == 1:
                    servers[j] += max(alpha3[j, o, sq], pd[u] * beta[j, o])
                else:
                    servers[j] += alpha3[j, o, sq] + pd[u] * beta[j, o]
            continue
        for u in range(k):
            j = pj[u]
            loc = pa[u]
            ln = pd[u]
            df = pf[u]
            nsub += 1
            # contiguous: continues the server's previous sub-request (file, data file, local end)
            contig = (last_file[j] == f) & (last_df[j] == df) & (last_end[j] == loc)
            last_file[j] = f
            last_df[j] = df
            last_end[j] = loc + ln
            if not inb[j]:
                inb[j] = True
                touched[ntouch] = j
                ntouch += 1
            q[j] += 1.0
            mk = j * nranks + rk
            if mark[mk] != cur:  # p: distinct ranks of the batch on server j
                mark[mk] = cur
                pc[j] += 1.0
            ar = a_rand[j, o]
            asq = a_seq[j, o]
            Ar[j] += ar
            As[j] += asq
            if contig:
                S1s[j] += asq
            else:
                S1r[j] += ar
            Tt[j] += ln * beta[j, o]
            nbytes[j] += ln
    tot[3] = nsub
    tot[4] = nb
    return per_batch, servers, tot, False


# ---------------------------------------------------------------------------- threads


def workers() -> int:
    """Threads for concurrent pricing: the CPUs this process may run on (``PARIO_THREADS``
    overrides; 1 = no threads)."""
    import os

    env = os.environ.get("PARIO_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_POOL: list = []


def map_threads(fn, items) -> list:
    """``[fn(x) for x in items]``, the calls spread over :func:`workers` threads (the kernel
    releases the GIL), results in the order of ``items``.  Deterministic: each call's result
    depends only on its arguments."""
    items = list(items)
    n = workers()
    if n <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    if not _POOL or _POOL[0][0] != n:
        from concurrent.futures import ThreadPoolExecutor

        if _POOL:
            _POOL.pop()[1].shutdown(wait=False)
        _POOL.append((n, ThreadPoolExecutor(max_workers=n, thread_name_prefix="pario-price")))
    return list(_POOL[0][1].map(fn, items))


# ---------------------------------------------------------------------------- front ends


_Z8 = np.zeros(0, dtype=np.int8)
_Z64 = np.zeros(0, dtype=np.int64)
_Z64P = np.zeros(1, dtype=np.int64)
_A3 = np.zeros((1, 2, 2))
_EMPTY_TABLES = layout_tables([])


def _model_params(system, contiguous_alpha_table, network: bool) -> tuple:
    """The kernel's cost parameters (CEDA seed 000 §3 eq. 1–4): (nserv, α_rand [n, 2],
    contiguous α [n, 2], β [n, 2], alpha3 (unused), cost shape [n], network, e, t)."""
    e_net, t_net = (float(system.network.e), float(system.network.t)) if network else (0.0, 0.0)
    return (system.n, np.ascontiguousarray(system.alpha_table()[:, :, 0]),
            np.ascontiguousarray(contiguous_alpha_table, dtype=np.float64),
            np.ascontiguousarray(system.beta_table(), dtype=np.float64), _A3, system.cost_table(), bool(network),
            e_net, t_net)


def price(trace, layout, system, bid, *, contiguous_alpha_table, network: bool = False, limit: float = np.inf,
          suffix=None):
    """Distribution-model pricing (CEDA seed 000 §3 eq. 1–4) of ``trace`` under ``layout``
    (a Layout or dict file → layout) with batch ids ``bid``.

    Returns (per_batch [nb], servers [n], {"T_s", "T_t", "T_n", "subrequests", "priced"},
    stopped): ``stopped`` = the running Σ_b T_sys (plus ``suffix``, a lower bound of the
    batches not priced yet: :func:`suffix_bound`) exceeded ``limit`` before the end;
    per_batch then holds the ``priced`` batches priced so far."""
    return _price_leaves(prepared(trace, bid), *file_leaves(trace, layout), system,
                         _model_params(system, contiguous_alpha_table, network), float(limit), suffix, None)


def _price_leaves(req, leaves, lid, system, params, limit, suffix, subrequests):
    """:func:`price` of requests ``req`` in service order (the columns of a :class:`Prepared`)
    under the distinct layouts ``leaves`` (leaf ``lid[f]`` for file index f): monotone layouts
    mapped by the kernel's tables, extent maps (CEDA's replicas) by the compiled directory
    lookup of :mod:`pario.layout.extents_kernel` (or the given ``subrequests``)."""
    tabs = layout_tables(leaves) if subrequests is None else None
    if tabs is not None:
        check_server_index(tabs.max_server, system)
        per_batch, servers, tot, stopped = price_kernel(
            0, req.bid, req.nb, req.rank, req.op, req.file, req.offset, req.length, _Z8, req.nranks, lid,
            *tabs.arrays(), _Z64P, _Z64, _Z64, _Z64, _Z64, *params, limit, suffix)
    else:
        per_batch, servers, tot, stopped = _price_mapped(req, leaves, lid, system, params, limit, subrequests, suffix)
    terms = {"T_s": float(tot[0]), "T_t": float(tot[1]), "T_n": float(tot[2]), "subrequests": int(tot[3]),
             "priced": int(tot[4])}
    return per_batch, servers, terms, bool(stopped)


def suffix_bound(trace, bid, system, servers, *, contiguous_alpha_table) -> np.ndarray:
    """A lower bound of Σ_{b' ≥ b} T_sys(b') for every batch b (index nb: 0), valid for every
    layout that puts the data on ``servers`` only (CEDA seed 000 §3 eq. 1–4): a batch takes at
    least the mean of its servers' T_ser^j, and Σ_j T_ser^j ≥ Σ over its requests of
    length·min β(op) + min α(op) — every request that moves bytes is at least one sub-request,
    which pays α_rand or the contiguous α (eq. 1–2: T_s mixes the two sums, f ∈ [½, 1]) and
    its bytes' β on some server; the network term is ≥ 0.  When one of ``servers`` is a rate
    limiter (``cost = "max"``: T_ser^j = max(T_s, T_t)), Σ_j T_ser^j ≥ max(Σ_j T_s, Σ_j T_t)
    bounds the batch instead, by the larger of the two sums over its requests.  Rounded down
    by 1e-9 relative, so that summation order cannot lift it above the true cost."""
    servers = np.asarray(list(servers), dtype=np.int64)
    k = len(servers)
    nb = int(bid.max()) + 1 if len(bid) else 0
    if k == 0 or nb == 0:
        return np.zeros(nb + 1)
    at = system.alpha_table()[servers]
    a_min = np.minimum(at[:, :, 0], np.asarray(contiguous_alpha_table, dtype=np.float64)[servers]).min(axis=0)
    b_min = np.asarray(system.beta_table(), dtype=np.float64)[servers].min(axis=0)
    op = np.asarray(trace.op, dtype=np.int64)
    L = np.asarray(trace.length)
    wa = np.bincount(bid, weights=np.where(L > 0, a_min[op], 0.0), minlength=nb)
    wb = np.bincount(bid, weights=np.where(L > 0, L * b_min[op], 0.0), minlength=nb)
    per = (np.maximum(wa, wb) if (system.cost_table()[servers] == 1).any() else wa + wb) / k
    out = np.zeros(nb + 1)
    out[:nb] = np.cumsum(per[::-1])[::-1] * (1.0 - 1e-9)
    return np.maximum(out, 0.0)


def busy(trace, layout, system, seq) -> np.ndarray | None:
    """Per-server Σ α_j(op, seq) + length·β_j(op) of the sub-requests, or None when the
    layout is not monotone (the caller maps it)."""
    leaves, lid = file_leaves(trace, layout)
    tabs = layout_tables(leaves)
    if tabs is None:
        return None
    n = system.n
    check_server_index(tabs.max_server, system)
    _, out, _, _ = price_kernel(
        2, np.zeros(len(trace), dtype=np.int64), 1, np.ascontiguousarray(trace.rank), np.ascontiguousarray(trace.op),
        np.ascontiguousarray(trace.file), np.ascontiguousarray(trace.offset, dtype=np.int64),
        np.ascontiguousarray(trace.length, dtype=np.int64), np.ascontiguousarray(seq, dtype=np.int8), 1, lid,
        *tabs.arrays(), _Z64P, _Z64, _Z64, _Z64, _Z64, n, np.zeros((n, 2)), np.zeros((n, 2)),
        np.ascontiguousarray(system.beta_table()), np.ascontiguousarray(system.alpha_table()), system.cost_table(),
        False, 0.0, 0.0, np.inf)
    return out


# ---------------------------------------------------------------------------- mapped layouts, given orders


def _price_mapped(req, leaves, lid, system, params, limit, sub=None, suffix=None):
    """Mode 1 of :func:`price_kernel` for requests ``req`` in service order (the columns of a
    :class:`Prepared`): layouts without byte-count functions (extent maps) mapped request by
    request in that order (:func:`pario.layout.extents_kernel.map_in_order`), or the
    sub-requests ``sub`` = (ptr, server, local, length, datafile) given."""
    from ..layout.extents_kernel import map_in_order

    ptr, srv, loc, sln, sdf = sub if sub is not None else map_in_order(leaves, lid, req.file, req.offset, req.length)
    if len(srv):
        check_server_index(int(srv.max()), system)
    return price_kernel(
        1, req.bid, req.nb, req.rank, req.op, req.file, req.offset, req.length, _Z8, req.nranks, lid,
        *_EMPTY_TABLES.arrays(), ptr, srv, loc, sln, sdf, *params, limit, suffix)


def leaves_of(layouts) -> tuple[list, np.ndarray]:
    """(distinct layouts, leaf id of each) of a list of layouts (one per file index)."""
    leaves, ids = [], {}
    lid = np.zeros(max(1, len(layouts)), dtype=np.int64)
    for fi, lay in enumerate(layouts):
        lid[fi] = ids.setdefault(id(lay), len(leaves))
        if lid[fi] == len(leaves):
            leaves.append(lay)
    return leaves, lid


def price_in_order(req, layouts, system, *, contiguous_alpha_table, network: bool = False, limit: float = np.inf,
                   subrequests=None):
    """:func:`price` of requests already in service order: ``req`` has the columns of a
    :class:`Prepared` (``bid``, ``nb``, ``rank``, ``op``, ``file``, ``offset``, ``length``,
    ``nranks``), ``layouts`` one layout per file index.  For callers that build their own
    order (CEDA's analyzer prices every access pattern on its own: the requests by
    pattern, then batch — :mod:`pario.plan.ceda`) without a trace and its sort.
    ``subrequests``: the requests' sub-requests under ``layouts`` when the caller has them
    (:func:`pario.layout.extents_kernel.map_in_order`; ``layouts`` then unused)."""
    return _price_leaves(req, *leaves_of(layouts), system, _model_params(system, contiguous_alpha_table, network),
                         float(limit), None, subrequests)


# ---------------------------------------------------------------------------- extent maps, chunk by chunk

MAP_CHUNK = 1 << 20  # requests mapped at a time by price_extents_by_chunks (arrays of ≤ 8 MB: reused by malloc)


@njit(cache=True)
def _last_served(ptr, srv, loc, ln, df, fil, has, lf, ldf, lend):
    """Per server, the last sub-request served (requests in order, each request's on one
    server by ascending local offset, ties in their order): ``has``, its file ``lf``, data
    file ``ldf`` and end ``lend`` — the state eq. 3's contiguity test reads (updated)."""
    last_i = np.full(len(has), -1, dtype=np.int64)
    best = np.zeros(len(has), dtype=np.int64)
    for i in range(len(ptr) - 1):
        for u in range(ptr[i], ptr[i + 1]):
            j = srv[u]
            if last_i[j] != i or loc[u] >= best[j]:
                last_i[j] = i
                best[j] = loc[u]
                has[j] = True
                lf[j] = fil[i]
                ldf[j] = df[u]
                lend[j] = loc[u] + ln[u]


def price_extents_by_chunks(req, es, system, *, contiguous_alpha_table, network: bool = False,
                            variants=((None, None),), chunk: int | None = None) -> list[np.ndarray]:
    """Per-batch T_sys (CEDA seed 000 eq. 3–4) of requests ``req`` in service order (the
    columns of a :class:`Prepared`, ``bid`` dense and non-decreasing) under extent maps
    ``es`` (:class:`pario.layout.extents_kernel.ExtentSet`, leaf = file index), once for
    each variant ``(keep, op)``: the requests whose ``keep`` is False (a mask; None: keep
    all) priced without their sub-requests, under the op column ``op`` (None: ``req.op``).

    The requests are mapped and priced about ``chunk`` (:data:`MAP_CHUNK`) at a time, whole
    batches, so that their sub-requests never exist all at once (at 10^8 requests they would
    take 3 GB).  The only thing a batch inherits from the batches before it is, per server,
    where the previous sub-request it served ended (its file, data file and end: the
    contiguity of eq. 3, :mod:`pario.model.distribution`).  So each chunk is priced after a
    *primer* batch that recreates it — one sub-request per server ending where the previous
    chunk's last one ended — whose own cost is left out: the per-batch times equal those of
    one pricing of all the requests (the tests compare both).  The chunks' tables are reused
    (no fresh memory to fault in), the mapping writes its rows after room for the primer."""
    from ..layout.extents_kernel import Buffers, keep_requests, map_extent_set

    n = system.n
    params = _model_params(system, contiguous_alpha_table, network)
    total = len(req.bid)
    chunk = int(chunk or MAP_CHUNK)
    lid = np.arange(len(es.e0), dtype=np.int64)
    out = [np.zeros(req.nb) for _ in variants]
    states = [(np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32),
               np.zeros(n, dtype=np.int64)) for _ in variants]
    buf = Buffers()
    F = n  # room for the primer: at most a request per server
    a = 0
    while a < total:
        b = min(total, a + chunk)
        if b < total:  # to the end of the batch
            b = int(np.searchsorted(req.bid, req.bid[b - 1], side="right"))
        m = b - a
        ptr, srv, loc, ln, df = map_extent_set(es, lid, req.file[a:b], req.offset[a:b], req.length[a:b],
                                               buffers=buf, front=F)
        if len(srv) > F:
            check_server_index(int(srv[F:].max()), system)
        cols = {}  # the chunk's columns after room for the primer
        for name, col in (("bid", req.bid), ("rank", req.rank), ("file", req.file), ("offset", req.offset),
                          ("length", req.length)):
            cols[name] = buf.get("c_" + name, 0, F + m, col.dtype)[:F + m]
            cols[name][F:] = col[a:b]
        cols["bid"][F:] -= req.bid[a] - 1  # chunk batch ids from 1 (0: the primer)
        b0 = int(req.bid[a])
        for vi, ((keep, op), res, st) in enumerate(zip(variants, out, states)):
            ops = buf.get("c_op", 0, F + m, req.op.dtype)[:F + m]
            ops[F:] = (req.op if op is None else op)[a:b]
            s = (ptr, srv, loc, ln, df)
            if keep is not None:  # the kept requests' sub-requests (in place for the last variant)
                s = s if vi == len(variants) - 1 else tuple(x.copy() for x in s)
                u = keep_requests(s[0][F:], *s[1:], keep[a:b])
                s = (s[0], *(x[:u] for x in s[1:]))
            P = _primer(st, cols, ops, s, F)
            per_batch, _, _, _ = price_kernel(
                1, cols["bid"][F - P:], int(cols["bid"][-1]) + 1, cols["rank"][F - P:], ops[F - P:],
                cols["file"][F - P:], cols["offset"][F - P:], cols["length"][F - P:], _Z8, req.nranks,
                np.zeros(1, dtype=np.int64), *_EMPTY_TABLES.arrays(), s[0][F - P:], *s[1:], *params, np.inf)
            res[b0:b0 + len(per_batch) - 1] = per_batch[1:]
            _last_served(s[0][F:], *s[1:], req.file[a:b], *st)
        a = b
    return out


def _primer(state, cols, ops, sub, F) -> int:
    """Writes the primer batch (id 0) into the ``F`` rows before the chunk's: a request and
    a sub-request per server that has served one — its file and data file, ending where it
    ended — so that the chunk's first sub-request on that server is contiguous or not as in
    one pricing of all the requests (:func:`price_extents_by_chunks`).  Returns its size."""
    has, lf, ldf, lend = state
    j = np.flatnonzero(has)
    P = len(j)
    r = slice(F - P, F)
    ptr, srv, loc, ln, df = sub
    cols["bid"][r] = 0
    cols["rank"][r] = 0
    cols["file"][r] = lf[j]
    cols["offset"][r] = 0
    cols["length"][r] = 1
    ops[r] = 0
    ptr[r] = np.arange(F - P, F)
    srv[r], loc[r], ln[r], df[r] = j, lend[j] - 1, 1, ldf[j]
    return P
