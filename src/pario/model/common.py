"""Helpers shared by the cost models: per-request context (p, c, op, sequential), kind
parameters, per-server attribution of sub-requests."""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import ParioError
from ..layout import ExtentMap, Grouped, Layout, Regions, Striped, layout_for_files, map_trace
from .base import Cost, CostModel, check_server_index, resolve_layout
from ..memo import by_identity
from .batches import batch_ids, ranks_per_batch

PATTERNS = ("auto", "random", "sequential")


@by_identity()
def sequential_mask(trace) -> np.ndarray:
    """True where a request starts exactly where the same rank's previous request on the
    same file ended (rank-level sequential access).  Read-only, cached per trace."""
    from ..grouping import sequential

    n = len(trace)
    if n == 0:
        return np.zeros(0, dtype=bool)
    fast = sequential(trace.rank, trace.file, trace.order, trace.offset, trace.length, len(trace.files))
    if fast is not None:  # one pass: every (rank, file) stream's rows are in order
        return fast
    idx = np.lexsort((np.arange(n), trace.order, trace.file, trace.rank))
    r, f = trace.rank[idx], trace.file[idx]
    off, end = trace.offset[idx], trace.offset[idx] + trace.length[idx]
    seq = np.zeros(n, dtype=bool)
    seq[1:] = (r[1:] == r[:-1]) & (f[1:] == f[:-1]) & (off[1:] == end[:-1])
    out = np.empty(n, dtype=bool)
    out[idx] = seq
    return out


def pattern_mask(trace, pattern: str) -> np.ndarray:
    """Per request: use the sequential α? (``auto`` = :func:`sequential_mask`)."""
    if pattern not in PATTERNS:
        raise ParioError(f"unknown access pattern {pattern!r} (expected {', '.join(PATTERNS)})")
    if pattern == "random":
        return np.zeros(len(trace), dtype=bool)
    if pattern == "sequential":
        return np.ones(len(trace), dtype=bool)
    return sequential_mask(trace)


def batch_context(trace, system, by: str = "auto", batches=None):
    """(batch id, p_b per request, c per request = min(procs_per_node, p_b), number of batches);
    read-only arrays, cached by the identity of the trace, the system and the batch ids
    (:func:`batch_ids` returns the same array for the same trace and rule)."""
    bid = batch_ids(trace, by) if batches is None else np.asarray(batches, dtype=np.int64)
    return _batch_context(trace, system, bid)


@by_identity()
def _batch_context(trace, system, bid):
    from .batches import service_order

    nb = int(bid.max()) + 1 if len(bid) else 0
    p_b = ranks_per_batch(trace.rank, bid, nb, service_order(trace.order, bid) if len(bid) else None)
    # p and c per request as int32 (at most the number of ranks; 4 bytes per request each)
    p = p_b.astype(np.int32)[bid] if len(bid) else np.zeros(0, dtype=np.int32)
    c = np.minimum(np.int32(min(system.procs_per_node, 2**31 - 1)), p)
    return bid, p, c, nb


class RequestClasses:
    """Per (trace, batching, pattern): batch ids, p_b and c per request, the sequential mask,
    and the distinct request classes (op, size, p, c, sequential) with each request's class
    id ``cls`` — a closed-form model's T_i depends on nothing else but the layout, so it is
    computed per class and gathered (issue 18: no per-request temporaries per candidate)."""

    def __init__(self, trace, system, by, batches, pattern):
        self.bid, self.p, self.c, self.nb = batch_context(trace, system, by, batches)
        self.seq = pattern_mask(trace, pattern)
        src = [trace.op, trace.length, self.p, self.c, self.seq]  # the class key, most significant first
        n = len(trace)
        key = _packed_key(src) if n else None
        if n and key is not None:  # one int64 key in the same lexicographic order: grouped in one pass
            from ..grouping import dense_groups

            self.cls, _, first = dense_groups(key)
            del key
        elif n:
            cols = [np.asarray(col).astype(np.int64) for col in src]
            o = np.lexsort(cols[::-1])
            new = np.zeros(n, dtype=bool)
            new[0] = True
            for col in cols:
                cs = col[o]
                new[1:] |= cs[1:] != cs[:-1]
            self.cls = np.empty(n, dtype=np.int64)
            self.cls[o] = np.cumsum(new) - 1
            first = o[new]
        else:
            first = np.zeros(0, dtype=np.int64)
            self.cls = first
        self.first = first  # a representative row of every class
        self.op, self.r, self.cp, self.cc, self.cseq = (np.asarray(col)[first].astype(np.int64) for col in src)
        self._counts = None

    def counts(self) -> np.ndarray:
        """Requests of each class."""
        if self._counts is None:
            self._counts = np.bincount(self.cls, minlength=len(self.first))
        return self._counts


def _packed_key(cols) -> np.ndarray | None:
    """The columns (integer or boolean, most significant first) as one int64 key with the same
    lexicographic order (mixed radix over each column's range), or None when it does not fit.
    Built in one pass (no per-column temporaries)."""
    lows, spans, total = [], [], 1
    for col in cols:
        lo, hi = int(col.min()), int(col.max())
        span = hi - lo + 1
        total *= span
        if total >= 1 << 62:
            return None
        lows.append(lo)
        spans.append(span)
    key = np.zeros(len(cols[0]), dtype=np.int64)
    for col, lo, span in zip(cols, lows, spans):
        _pack_into(key, col.view(np.int8) if col.dtype == np.bool_ else col, lo, span)
    return key


@njit(cache=True, nogil=True)
def _pack_into(key, col, lo, span):
    for i in range(len(key)):
        key[i] = key[i] * span + (col[i] - lo)


def request_classes(trace, system, by="auto", batches=None, pattern="auto") -> RequestClasses:
    """:class:`RequestClasses`, cached by identity of (trace, system, batches) and pattern."""
    if batches is None:
        batches = batch_ids(trace, by)  # cached: the same array for the same trace and rule
    return _request_classes(trace, system, np.asarray(batches, dtype=np.int64), pattern)


@by_identity()
def _request_classes(trace, system, batches, pattern) -> RequestClasses:
    return RequestClasses(trace, system, "auto", batches, pattern)


def kind_params(system, servers) -> tuple[np.ndarray, np.ndarray]:
    """α[op, seq] and β[op] of the slowest of ``servers`` (max over them, per entry)."""
    if len(servers) == 0:
        return np.zeros((2, 2)), np.zeros(2)
    servers = list(servers)
    return system.alpha_table()[servers].max(axis=0), system.beta_table()[servers].max(axis=0)


def per_server_busy(trace, layout, system, seq: np.ndarray) -> np.ndarray:
    """Per-server storage busy time: every sub-request costs α_j(op, seq) + length·β_j(op).
    (How the closed-form models attribute time to servers; exact mapping: in the compiled
    kernel of :mod:`pario.model.engine` for striped / 2-D / region layouts, by
    :func:`pario.layout.map_trace` for the others.)"""
    if len(trace):
        from . import engine

        out = engine.busy(trace, layout, system, seq)
        if out is not None:
            return out
    return mapped_busy(trace, layout, system, seq)


def mapped_busy(trace, layout, system, seq: np.ndarray) -> np.ndarray:
    """:func:`per_server_busy` from the sub-requests of :func:`pario.layout.map_trace` (any
    layout; the compiled kernel's fallback)."""
    sub = map_trace(trace, layout)
    if len(sub) == 0:
        return np.zeros(system.n)
    at, bt = system.alpha_table(), system.beta_table()
    op = trace.op[sub.req].astype(np.int64)
    sq = seq[sub.req].astype(np.int64)
    w = system.device_time(at[sub.server, op, sq], sub.length * bt[sub.server, op], sub.server)
    return np.bincount(sub.server, weights=w, minlength=system.n)


def region_of(layout: Layout, offset: np.ndarray) -> tuple[list[Layout], np.ndarray]:
    """For region layouts: (region layouts, index of the region holding each offset);
    other layouts are one region."""
    if isinstance(layout, Regions):
        starts = np.array([r.start for r in layout.regions], dtype=np.int64)
        return [r.layout for r in layout.regions], np.searchsorted(starts, offset, side="right") - 1
    if isinstance(layout, ExtentMap):
        raise ParioError("closed-form models cannot price an extent map (replica) layout: use --model distribution")
    return [layout], np.zeros(len(offset), dtype=np.int64)


def per_request_layouts(trace, layout, system):
    """Resolve per-file layouts and regions: (list of distinct leaf layouts, index per request);
    a leaf on a server ``system`` does not have is refused."""
    leaves, which = _leaves(trace, layout)
    if leaves:
        check_server_index(max(max(leaf.servers_used(), default=0) for leaf in leaves), system)
    return leaves, which


def _leaves(trace, layout):
    per_file = layout_for_files(layout, trace.files)
    if per_file and not isinstance(per_file[0], (Regions, ExtentMap)) and all(lay is per_file[0] for lay in per_file):
        return [per_file[0]], np.zeros(len(trace), dtype=np.int64)  # one layout for every request
    leaves: list[Layout] = []
    ids: dict[int, int] = {}
    out = np.zeros(len(trace), dtype=np.int64)
    for fi, lay in enumerate(per_file):
        rows = np.flatnonzero(trace.file == fi)
        if len(rows) == 0:
            continue
        regs, which = region_of(lay, trace.offset[rows])
        for k, leaf in enumerate(regs):
            if id(leaf) not in ids:
                ids[id(leaf)] = len(leaves)
                leaves.append(leaf)
            out[rows[which == k]] = ids[id(leaf)]
    return leaves, out


def leaf_check(leaf: Layout) -> None:
    if not isinstance(leaf, (Striped, Grouped)):
        raise ParioError(f"closed-form models cannot price a {type(leaf).__name__} layout")


class ClosedFormModel(CostModel):
    """Shared trace/batch/request costs of the closed-form models (CI-LAYOUT, PADP/PSA).

    Subclasses implement ``request_terms(trace, layout, system, *, batches, by)`` returning
    ``(batch ids, p per request, number of batches, terms dict with "T", sequential mask)``;
    a batch costs Σ_i T_i / p (the round time of its p concurrent requests).
    """

    busy_doc = "Σ α + s·β over the server's sub-requests (the closed form does not split time by server)"

    def independent_batches(self) -> bool:
        """A batch costs Σ_i T_i(p_b) / p_b over its own requests; only ``pattern="auto"``
        looks outside it (a request's α is sequential when it continues its rank's previous
        request, which may be in an earlier batch)."""
        return self.params["pattern"] != "auto"

    def request_terms(self, trace, layout, system, *, batches=None, by="auto"):
        raise NotImplementedError

    def request_costs(self, trace, layout, system, *, batches=None, by="auto") -> np.ndarray:
        _, p, _, T, _ = self.request_terms(trace, layout, system, batches=batches, by=by)
        return T["T"] / np.maximum(p, 1)

    def trace_cost(self, trace, layout, system, *, batches=None, by="auto") -> Cost:
        layout = resolve_layout(layout, system)
        if len(trace) == 0:
            return Cost.zero(system.n)
        bid, p, nb, T, seq = self.request_terms(trace, layout, system, batches=batches, by=by)
        per_batch = np.bincount(bid, weights=T["T"] / p, minlength=nb)
        details = {k: float(np.sum(v / p)) for k, v in T.items() if k != "T"}
        return Cost(float(per_batch.sum()), lambda: per_server_busy(trace, layout, system, seq.astype(bool)), nb,
                    per_batch, details)

    def batch_cost(self, batch, layout, system) -> Cost:
        return self.trace_cost(batch, layout, system, batches=np.zeros(len(batch), dtype=np.int64))
