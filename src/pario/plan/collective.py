"""Request order inside an aggregator's file domain for two-phase collective I/O.

The orders compared by HACIO (seed 004) are one table in C: ``pario_orders[]`` of
``src/pario/native/collective/order.c``, a ``{name, fn}`` row per order.  The C two-phase
I/O and the served MPI-IO front end use it directly; this module takes :data:`ORDERS` (the
table's names, in row order) and every order it computes (:func:`request_order`: the
simulator, the order choice of a plan, :mod:`pario.mpi`'s two-phase I/O) from it through the
extension ``pario.native._rmt`` (``python/pyorder.c``).  A new order is one C function and
one row of the table; everything here follows.  The orders work on one aggregator's
*file-domain pieces*: a piece is a contiguous range of the file that lies on one server (in
one stripe unit / one extent), given by its file ``offset``, its ``server`` index (into
``system.servers``) and that server's ``kind`` (0 = HServer/HDD, 1 = SServer/SSD); the
result ``order`` (int64 indices into the input arrays) is the sequence in which the
aggregator issues the pieces and fills its collective buffer (cycle 0 gets the first
buffer-full).

- ``romcio`` – ROMIO's conventional order: logical file offset (seed 004 §2.2, Fig. 3).
- ``cacio`` – the concurrency-aware alternative of seed 004 §2.2 (Fig. 4–5): "each
  aggregator takes responsibility for the data that resides in a different server in each
  cycle".  The domain's pieces are grouped by server and the groups issued starting at
  server position ``a mod n`` (in the worked example aggregator A1 issues blocks 5, 6, 7, 4
  instead of 4, 5, 6, 7).  Generalisation (the paper shows only one block per server and
  domain): it is Algorithm 1's lines 15–25 without the type split, so with many stripes per
  cycle a cycle still holds one or a few servers' data, different ones for different
  aggregators.
- ``hacio`` – seed 004 §3.2 Algorithm 1: pieces are put into buckets ``T[type][number]``
  (type 0 = HServer first, then SServer; ``number`` = the server's number among the servers
  of its type), walking the requests in process-rank order (``proc``) and, inside one
  process, in offset order, dropping duplicates (line 7); the buckets are then appended
  type by type, and within a type starting at server number ``(a + i) mod count`` (lines
  15–25).

Note on seed 004 Table 3: Algorithm 1 puts all HServer pieces before all SServer pieces,
so in the worked example its cycles are H,H,S,S while Table 3 lists them H,S,H,S.  The
multiset of per-cycle rows, and so the total (12T), is the same; the per-cycle order of
Table 3 cannot come from Algorithm 1 as printed.  We implement the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import ParioError

try:   # the C table of the orders (collective/order.c, python/pyorder.c)
    from ..native import _rmt as _orders
except ImportError as exc:
    raise ParioError(f"pario's C extension is not built ({exc}); run scripts/setup.sh "
                     "(or python scripts/build_native.py)") from None

ORDERS: tuple[str, ...] = _orders.order_names()
_I32_MAX = np.iinfo(np.int32).max


def order_for(plan=None, order: str | None = None) -> str:
    """The order a run uses: ``order`` when given, else the plan's ``collective_order``, else
    ``romcio`` (ROMIO's)."""
    return order or (getattr(plan, "collective_order", None) if plan is not None else None) or "romcio"


def _int32(x, n: int | None, what: str) -> np.ndarray | None:
    """``x`` as C-contiguous int32 (the C orders' servers, kinds and ranks), None stays None."""
    if x is None:
        return None
    a = np.asarray(x, dtype=np.int64).ravel()
    if n is not None and len(a) != n:
        raise ValueError(f"{what} must have one entry per piece ({n}), not {len(a)}")
    if len(a) and (int(a.min()) < -_I32_MAX - 1 or int(a.max()) > _I32_MAX):
        raise ParioError(f"collective order: {what} out of the 32-bit range")
    return np.ascontiguousarray(a, dtype=np.int32)


def request_order(method: str, offset, server=None, kind=None, aggregator: int = 0, *, proc=None,
                  servers=None, server_kinds=None, twins: bool = False):
    """The order ``method`` (a name of :data:`ORDERS`, any case) of one aggregator's pieces.

    ``offset``, ``server``, ``kind`` (0/1) and ``proc`` (the rank each piece comes from;
    None: one process): one entry per piece; an order that needs ``server`` or ``kind``
    (CACIO, HACIO) fails without them.  ``aggregator``: the aggregator's index among the
    aggregators (``a``).  ``servers``: the layout's servers in its order
    (:attr:`pario.mpi.placement.Placement.servers`) and ``server_kinds`` the kind of each
    (HACIO numbers a server among the listed servers of its kind, CACIO among all of them);
    None or empty: the distinct servers of the pieces (of each kind), sorted.  Every
    aggregator must use the same list.

    Returns ``order`` (int64 indices of the pieces to issue, in order).  HACIO's line 7
    leaves out a piece whose offset and server repeat an issued one's, so ``order`` may be
    shorter than the pieces; with ``twins=True`` the result is ``(order, twin)``, ``twin[i]``
    the issued piece that piece ``i`` stands for (``i`` itself when it is issued).
    """
    row = _orders.order_find(str(method))
    if row < 0:
        raise ParioError(f"unknown collective order {method!r} (expected {', '.join(ORDERS)})")
    off = np.ascontiguousarray(np.asarray(offset, dtype=np.int64).ravel())
    n = len(off)
    if servers is None and server_kinds is not None:
        raise ValueError("server_kinds gives the kind of each of servers: servers is missing")
    lst = _int32(servers, None, "servers")
    kinds = _int32(server_kinds, None if lst is None else len(lst), "server_kinds")
    order = np.empty(n, dtype=np.int64)
    twin = np.empty(n, dtype=np.int64)
    rc, m = _orders.request_order(row, off, _int32(server, n, "server"), _int32(kind, n, "kind"),
                                  _int32(proc, n, "proc"), int(aggregator), lst, kinds, order, twin)
    if rc:
        raise ParioError(f"{_orders.order_strerror(rc)} ({ORDERS[row]}, aggregator {int(aggregator)})")
    return (order[:m], twin) if twins else order[:m]


DEFAULT_CB_BUFFER = 16 << 20   # ROMIO's cb_buffer_size default (and pario.mpi's)


@dataclass(frozen=True)
class TwoPhase:
    """The two-phase settings a collective trace is modelled with (ROMIO's ``cb_buffer_size``
    and ``cb_nodes``), and where each came from: ``given`` (the caller), ``trace`` (what the
    trace's metadata recorded: the aggregator ranks a tracer or a Darshan log saw, the hints
    the files were opened with) or ``default``.  ``nodes``: the client nodes the job ran on,
    when the caller knew them (the ``cb_nodes`` hint is then placed as ROMIO places it,
    :func:`romio_cb_nodes`)."""

    cb_buffer: int
    aggregators: int | None          # None: one per client node (ROMIO's default)
    ranks: tuple[int, ...] | None    # the aggregator ranks the trace recorded, when it did
    cb_source: str
    agg_source: str
    nodes: int | None = None

    def describe(self) -> str:
        from ..units import format_size

        a = "one per node" if self.aggregators is None else str(self.aggregators)
        return (f"{a} aggregator(s) ({self.agg_source}), cb_buffer {format_size(self.cb_buffer)} "
                f"({self.cb_source})")

    def to_dict(self) -> dict:
        """JSON-ready: ``cb_buffer``, ``aggregators`` (None: one per node), ``ranks``, the
        sources and ``nodes``."""
        return {"cb_buffer": int(self.cb_buffer), "aggregators": self.aggregators,
                "ranks": list(self.ranks) if self.ranks is not None else None,
                "cb_source": self.cb_source, "agg_source": self.agg_source, "nodes": self.nodes}


def cb_config_limit(cb_config_list: str | None) -> int | None | bool:
    """The most aggregators ROMIO puts on one node by ``cb_config_list``: ``"*:1"`` (ROMIO's
    default, also for None and ``"*"``) → 1, ``"*:k"`` → k, ``"*:*"`` → None (every process
    of the node may be one).  A list that names hosts (``"n1:2,*:1"``) cannot be placed
    without the host names, which a trace does not record: False."""
    text = "*:1" if cb_config_list is None or not str(cb_config_list).strip() else str(cb_config_list)
    limit: int | None | bool = False
    for entry in text.split(","):
        name, _, count = entry.strip().partition(":")
        if name.strip() != "*":
            return False
        count = count.strip() or "1"
        if count == "*":
            limit = None
            continue
        try:
            k = int(count)
        except ValueError:
            return False
        if k < 1:
            return False
        limit = k
    return limit


def romio_cb_nodes(requested: int | None, nodes: int, nprocs: int, cb_config_list: str | None = None) -> int:
    """How many aggregators ROMIO uses: the ``cb_nodes`` hint (default: the process count)
    capped by what ``cb_config_list`` allows on ``nodes`` nodes (``ADIOI_cb_config_list_parse``:
    at most the list's count per node; the default ``"*:1"`` gives one per node, so
    ``cb_nodes=2`` alone on one host is one aggregator).  The ``nprocs`` ranks are taken as
    spread evenly over the nodes (node counts differing by at most one).  A list naming
    hosts (:func:`cb_config_limit` False) is not capped: ``requested`` as it is."""
    nprocs = max(1, int(nprocs))
    nodes = max(1, min(int(nodes), nprocs))
    want = nprocs if requested is None else max(1, int(requested))
    limit = cb_config_limit(cb_config_list)
    if limit is None or limit is False:
        return min(want, nprocs)
    small, big = divmod(nprocs, nodes)          # `big` nodes hold small + 1 ranks, the others small
    cap = big * min(int(limit), small + 1) + (nodes - big) * min(int(limit), small)
    return max(1, min(want, cap))


def two_phase(trace, cb_buffer: int | None = None, aggregators: int | None = None,
              default_cb: int = DEFAULT_CB_BUFFER, nodes: int | None = None) -> TwoPhase:
    """Resolve the two-phase settings for ``trace``: explicit values win, then the trace's
    metadata (``TraceMeta.cb_buffer_size`` / ``cb_nodes`` / ``aggregators``: what the job
    really ran with), then ROMIO's defaults (``default_cb``; one aggregator per node).

    ``nodes``: the client nodes the job ran on, when known (``pario run`` without placement
    options: one).  The trace's aggregator ranks, when it recorded them, are what ran and stay
    as they are; a ``cb_nodes`` hint without them, and the default, are placed as ROMIO
    places aggregators on that many nodes (:func:`romio_cb_nodes`, with the trace's
    ``cb_config_list`` hint).  Without ``nodes`` the hint is taken as it is (ROMIO's
    ``MPI_File_get_info`` reports the count in effect) and the default is one aggregator per
    node of the profile."""
    meta = getattr(trace, "meta", None)
    if cb_buffer is not None:
        cb, cbs = int(cb_buffer), "given"
    elif meta is not None and meta.cb_buffer_size:
        cb, cbs = int(meta.cb_buffer_size), "trace"
    else:
        cb, cbs = int(default_cb), "default"
    if cb <= 0:
        raise ParioError("collective buffer size must be > 0")
    if nodes is not None and int(nodes) < 1:
        raise ParioError("the number of client nodes must be >= 1")
    ranks = None
    config = meta.hint("cb_config_list") if meta is not None else None
    nprocs = int(getattr(trace, "nprocs", 0) or 0) or 1
    if aggregators is not None:
        if int(aggregators) < 1:
            raise ParioError("the number of aggregators must be >= 1")
        a, srcs = int(aggregators), "given"
    elif meta is not None and meta.aggregators:
        a, srcs = len(meta.aggregators), "trace"
        ranks = tuple(int(r) for r in meta.aggregators)
    elif meta is not None and meta.cb_nodes:
        a, srcs = int(meta.cb_nodes), "trace"
        if nodes is not None:
            placed = romio_cb_nodes(a, int(nodes), nprocs, config)
            if placed != a:
                srcs = f"trace's cb_nodes {a}, as ROMIO places them on {int(nodes)} node(s)"
            a = placed
    elif nodes is not None:
        a, srcs = romio_cb_nodes(None, int(nodes), nprocs, config), "default"
    else:
        a, srcs = None, "default"
    return TwoPhase(cb, a, ranks, cbs, srcs, None if nodes is None else int(nodes))


def aggregator_ranks(nranks: int, procs_per_node: int, aggregators: int | None = None) -> np.ndarray:
    """ROMIO's default aggregators (``cb_nodes`` = one per node): the first rank of every
    node, then the second …, as :func:`pario.mpi.twophase.choose_aggregators` picks them
    (ranks are placed ``procs_per_node`` per node in rank order)."""
    ppn = max(1, int(procs_per_node))
    nodes = -(-int(nranks) // ppn)
    n = max(1, min(int(aggregators or nodes), int(nranks)))
    r = np.arange(int(nranks), dtype=np.int64)
    ranked = np.lexsort((r, r // ppn, r % ppn))
    return np.sort(ranked[:n]).astype(np.int64)


def aggregator_view(trace, procs_per_node: int, cb_buffer: int | None = None, aggregators: int | None = None,
                    nodes: int | None = None):
    """The requests the file servers see when the trace's collective requests run through
    two-phase I/O (seed 004 §2.1; what PSA's server-side trace collector records, seed 001
    §3.4), with the independent requests unchanged.

    As the simulator and the runtime do it: one call per (file, op); the call's span is cut
    into ``A`` equal file domains (``fd = ⌈span / A⌉``, aggregators as ROMIO places them);
    each aggregator issues the requested bytes of its domain (the union of the ranks'
    ranges, holes skipped) in offset order (ROMCIO), ``cb_buffer`` requested bytes per cycle.
    Every resulting run is one request of the aggregator's rank with ``order`` = its cycle
    (the runs of one cycle go out together), so order-based batching puts cycle ``c`` of all
    aggregators in one batch.  With time stamps, cycle ``c`` of a call that ran from ``t0`` to
    ``t1`` gets the interval ``t0 + [c, c+1)·(t1 − t0)/cycles``, so time-based batching
    groups the same way and independent requests keep their own times.

    ``cb_buffer`` / ``aggregators`` left None are taken from the trace's metadata when it
    recorded them (:func:`two_phase`, ``nodes``: the client nodes the job ran on, when
    known), else ROMIO's defaults; when the trace recorded the aggregator ranks themselves,
    those ranks issue the requests.
    """
    from ..trace.core import Trace

    coll = np.asarray(trace.collective, dtype=bool)
    if not coll.any():
        return trace
    tp = two_phase(trace, cb_buffer, aggregators, nodes=nodes)
    B = tp.cb_buffer
    if tp.ranks is not None:
        aggs = np.array(tp.ranks, dtype=np.int64)
    else:
        nranks = max(int(trace.rank.max()) + 1, trace.nprocs)
        # on the nodes the job ran on, when known (ranks spread evenly), else the profile's
        ppn = -(-nranks // tp.nodes) if tp.nodes else procs_per_node
        aggs = aggregator_ranks(nranks, ppn, tp.aggregators)
    A = len(aggs)
    has_t = bool(trace.has_times)
    cols = {k: [] for k in ("rank", "file", "op", "offset", "length", "order", "start", "end")}
    keys = trace.file.astype(np.int64) * 2 + trace.op.astype(np.int64)
    for key in np.unique(keys[coll]).tolist():
        sel = np.flatnonzero(coll & (keys == key))
        o = trace.offset[sel].astype(np.int64)
        e = o + trace.length[sel].astype(np.int64)
        keep = e > o
        o, e = o[keep], e[keep]
        if len(o) == 0:
            continue
        # union of the requested ranges → disjoint runs
        idx = np.argsort(o, kind="stable")
        o, e = o[idx], e[idx]
        reach = np.maximum.accumulate(e)
        new = np.r_[True, o[1:] > reach[:-1]]
        grp = np.cumsum(new) - 1
        ro = o[new]
        re_ = np.zeros(len(ro), np.int64)
        np.maximum.at(re_, grp, e)
        lo, hi = int(ro[0]), int(re_[-1])
        fd = max(1, -(-(hi - lo) // A))
        # cut the runs at domain boundaries
        ro, re_, dom, _ = _cut(ro, re_, lo, fd)
        # cycles: every cb_buffer requested bytes of a domain
        ln = re_ - ro
        first = np.r_[True, dom[1:] != dom[:-1]]
        cum = np.cumsum(ln) - ln
        base = np.maximum.accumulate(np.where(first, cum, 0))
        pos = cum - base                      # requested bytes of the domain before the run
        p0, p1, cyc, run = _cut(pos, pos + ln, 0, B)
        off = ro[run] + (p0 - pos[run])
        d = dom[run]
        fi, op = divmod(int(key), 2)
        cols["rank"].append(aggs[d])
        cols["file"].append(np.full(len(off), fi, np.int64))
        cols["op"].append(np.full(len(off), op, np.int8))
        cols["offset"].append(off)
        cols["length"].append(p1 - p0)
        cols["order"].append(cyc)
        if has_t:
            t0, t1 = float(np.min(trace.start[sel])), float(np.max(trace.end[sel]))
            step = (t1 - t0) / (int(cyc.max()) + 1)
            cols["start"].append(t0 + cyc * step)
            cols["end"].append(t0 + (cyc + 1) * step)
    ind = np.flatnonzero(~coll)
    order_base = int(np.concatenate(cols["order"]).max()) + 1 if cols["order"] else 0
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    rank = np.r_[trace.rank[ind], cat["rank"]].astype(np.int64)
    out = Trace.from_arrays(
        rank, np.r_[trace.file[ind], cat["file"]].astype(np.int64), np.r_[trace.op[ind], cat["op"]].astype(np.int8),
        np.r_[trace.offset[ind], cat["offset"]].astype(np.int64), np.r_[trace.length[ind], cat["length"]].astype(np.int64),
        files=trace.files,
        start=np.r_[trace.start[ind], cat["start"]] if has_t else None,
        end=np.r_[trace.end[ind], cat["end"]] if has_t else None,
        collective=np.r_[np.zeros(len(ind), bool), np.ones(len(rank) - len(ind), bool)],
        order=None if has_t else np.r_[trace.order[ind] + order_base, cat["order"]].astype(np.int64))
    return out


def _cut(a: np.ndarray, b: np.ndarray, lo: int, size: int):
    """Split intervals ``[a, b)`` at ``lo + k·size``: (starts, ends, slot ``k`` of each piece,
    index of its source interval)."""
    k0 = (a - lo) // size
    k1 = (b - 1 - lo) // size
    cnt = (k1 - k0 + 1).astype(np.int64)
    src = np.repeat(np.arange(len(a)), cnt)
    step = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    slot = k0[src] + step
    s = np.maximum(a[src], lo + slot * size)
    e = np.minimum(b[src], lo + (slot + 1) * size)
    return s, e, slot, src


__all__ = ["ORDERS", "request_order", "aggregator_ranks", "aggregator_view", "two_phase", "TwoPhase",
           "romio_cb_nodes", "cb_config_limit"]


def two_phase_mask(trace) -> np.ndarray:
    """The requests that go through two-phase I/O when the traced job runs: those of the
    collective calls ROMIO (and pario's runtimes, ``collective/twophase.c``) do not turn into
    independent I/O.  Seed 004 prices two-phase I/O; ROMIO runs a collective call through it
    only when its hint says so: ``romio_cb_write`` / ``romio_cb_read`` ``enable`` (every call),
    ``disable`` (none), ``automatic`` (the default: a call whose ranks' ranges interleave —
    ROMIO's test, in rank order a rank with data starts before the previous one's end).
    IOR's ``-c`` with contiguous blocks per rank does not interleave: its collective calls run
    as each rank's own requests, and no collective order changes them.

    A call is the ``k``-th collective call (by ``call`` number) of every rank on one file and
    op; when the ranks made different numbers of them (the calls cannot be matched), every
    one counts as two-phase."""
    from ..trace.core import READ

    coll = np.asarray(trace.collective, dtype=bool).copy()
    if not coll.any():
        return coll
    meta = getattr(trace, "meta", None)
    op = np.asarray(trace.op)
    for code, key in ((READ, "romio_cb_read"), (1 - READ, "romio_cb_write")):
        mode = ((meta.hint(key) if meta is not None else None) or "automatic").strip().lower()
        sel_op = coll & (op == code)
        if mode == "enable" or not sel_op.any():
            continue
        if mode == "disable":
            coll[sel_op] = False
            continue
        for f in np.unique(np.asarray(trace.file)[sel_op]).tolist():
            rows = np.flatnonzero(sel_op & (np.asarray(trace.file) == f))
            rank = np.asarray(trace.rank)[rows].astype(np.int64)
            call = np.asarray(trace.call)[rows].astype(np.int64)
            st = np.asarray(trace.offset)[rows].astype(np.int64)
            en = st + np.asarray(trace.length)[rows].astype(np.int64)
            # the k-th call of each rank: calls numbered densely within the rank
            o = np.lexsort((call, rank))
            rank, call, st, en, rows = rank[o], call[o], st[o], en[o], rows[o]
            first = np.r_[True, (rank[1:] != rank[:-1]) | (call[1:] != call[:-1])]
            newrank = np.r_[True, rank[1:] != rank[:-1]]
            ordinal = np.cumsum(first) - 1
            ordinal -= np.maximum.accumulate(np.where(newrank, ordinal, 0))
            # every rank made the same number of calls, else they cannot be matched
            per_rank = np.maximum.reduceat(ordinal, np.flatnonzero(newrank)) + 1
            if (per_rank != per_rank[0]).any():
                continue
            # per (call, rank): its first byte and its end (ranks without data: none)
            data = en > st
            lo = np.where(data, st, np.iinfo(np.int64).max)
            hi = np.where(data, en, -1)
            g = np.lexsort((rank, ordinal))                  # by call, then rank
            key = ordinal[g] * (int(rank.max()) + 1) + rank[g]
            start = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            g_call = ordinal[g][start]
            g_lo = np.minimum.reduceat(lo[g], start)
            g_hi = np.maximum.reduceat(hi[g], start)
            has = g_hi >= 0
            # ROMIO's test over the ranks with data, in rank order, within each call
            c, l, h = g_call[has], g_lo[has], g_hi[has]
            inter = np.zeros(int(ordinal.max()) + 1, dtype=bool)
            same = c[1:] == c[:-1]
            np.logical_or.at(inter, c[1:][same], l[1:][same] < h[:-1][same])
            coll[rows] = inter[ordinal]      # a call with no data, or no interleaving: independent
    return coll


def romio_view(trace):
    """``trace`` with only its two-phase requests collective (:func:`two_phase_mask`): the
    others are independent requests, as the job ran them."""
    mask = two_phase_mask(trace)
    if np.array_equal(mask, np.asarray(trace.collective, dtype=bool)):
        return trace
    return trace.with_columns(collective=mask)
