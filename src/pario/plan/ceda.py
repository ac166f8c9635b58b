"""CEDA: cost-effective distribution-aware data replication (He & Sun, seed 000 §4).

The four decision steps of CEDA's "decision phase" (seed 000 §4.1, Fig. 6), on a trace:

1. **Identifier** (§4.2) — :func:`identify_patterns`.  Builds on the spatial pattern
   identifier :func:`pario.trace.patterns.segment` (streams per rank, file and op, classified
   contiguous / strided / mixed / random by template matching).  Streams of one rank and
   file that touch exactly the same extents (e.g. IOR's write phase and its read-back, or a
   checkpoint written every step) are one *sequence* accessed repeatedly (``repeated``); a
   stream that revisits its own extents is repeated too.  Sequences of different ranks
   with the same template (file, op(s), kind, stride, request size, repetition) form one
   **access pattern**: the unit CEDA plans, analyses and replicates.  Every request belongs
   to exactly one pattern.
2. **Planner** (§4.3, Algorithm 1) — :func:`plan_layouts`.  For each pattern: the requested
   data of each process is concatenated, in request order, into one object (a byte already
   in the object is not appended again: line 5 "if r_j ∉ o_i"); ``n`` replica data files,
   one per server; object ``i`` (processes in ascending rank, i = 0, 1, …) goes to file
   ``i mod n``; objects in the same file follow in ascending rank.  The result is a replica
   :class:`~pario.layout.ExtentMap` (the RMT content: O_offset → server, R_offset, R_file =
   ``datafile`` ≥ 1) whose ``default`` is the original layout.  Bytes wanted by several
   processes of a pattern (or by several selected patterns of a file) are placed once: the
   earliest claimant wins (lower rank, then earlier request; for the final plan, the
   pattern selected first).
3. **Analyzer** (§4.4) — :func:`analyze`: for every pattern ``B = T_O − T_N`` (eq. 5), the
   pattern's requests priced by the distribution-aware model (seed 000 §3,
   :class:`pario.model.distribution.DistributionModel`) under the original layout and
   under its planned replica layout.  Each pattern is priced on its own (as the paper
   does), its requests keeping the trace's batches of concurrent requests.  All patterns
   are priced in two model calls: each pattern gets its own virtual file and its own
   batches, so nothing of one pattern interacts with another.  The result is the pattern
   benefit table PBT.
4. **Replicator's selection** (§4.5, Algorithm 2) — :mod:`pario.plan.ceda_select`: the
   paper's rule (B > 0, fits in the free replica space, top-n by benefit) and the optimal
   0/1 knapsack; both are reported, the plan uses ``selection``.

Baselines: **ORIG** (no replication) and **CIDA** (the paper's ref. [15], "always selects
non-contiguous file access patterns and replicates them contiguously in replica space with
a specific data distribution"): every pattern that is not contiguous is replicated, no
benefit test; its data (same objects, ascending rank) is concatenated into one replica
file per pattern striped round-robin over the servers with the original stripe size
(``cida_stripe``).  With a budget CIDA takes patterns in identifier order while they fit.

The plan (:class:`pario.plan.base.Plan`): ``layouts`` = the original layout(s);
``replicas[file] = [{"name": "ceda", "layout": ExtentMap, ...}]``; routing: reads and
writes of a replicated file go to the replica (the ExtentMap sends bytes it does not cover
to the original layout — CEDA's RMT lookup, §4.6); writes mark the replica dirty and are
flushed to the original when the program ends (§5: ``details["dirty_policy"]``), a copy the
benefit test prices by default (:func:`flush_costs`; ``flush=False``: the paper's B).

At scale (issue 18, 10^6–10^8 requests): the steps are compiled passes over a few request
orders computed in O(n) (:class:`TraceOrders`, :mod:`pario.trace.sorting`) —
:mod:`pario.plan.ceda_kernels` (identifier helpers, the claim sweep, objects and extents),
:mod:`pario.layout.extents_kernel` (extent lookups); the analyzer prices every pattern in
the engine's service order counted by pattern (:class:`PatternPricing`), extent maps a
chunk of batches at a time (:func:`pario.model.engine.price_extents_by_chunks`).  CEDA's
and CIDA's placements come from one claim, as records (:class:`PlacedExtents`); ExtentMaps
are made for the patterns a plan keeps.  The pre-issue-18 code, the tests' oracle, is
:mod:`pario.plan.ceda_reference`, taken inside
:func:`pario.model.distribution.reference_pricing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import ParioError
from ..layout import ExtentMap, Layout, Striped, describe, layout_for_files
from ..model.base import resolve_layout
from ..model.batches import batch_ids
from ..model.distribution import reference_mode
from ..trace import Trace
from ..trace.core import OP_NAMES, WRITE
from ..trace.patterns import segment
from ..trace.sorting import by_key_then_order, counting_order, offset_order
from . import ceda_kernels as K
from .base import Plan, Planner
from .ceda_select import select_knapsack, select_paper
from ..arrays import unique

KIND_RANK = {"contiguous": 0, "strided": 1, "repeated": 2, "mixed": 3, "random": 4}
SELECTIONS = ("paper", "knapsack")


# ====================================================================== helpers
def get_cost_model(model="distribution", params: dict | None = None):
    """A cost model instance from a name (``pario.model.MODELS``) or an instance."""
    from ..model.base import CostModel

    if isinstance(model, CostModel):
        return model
    from ..model import get_model

    return get_model(str(model), **(params or {}))


def original_layouts(original, trace: Trace, system) -> tuple[Any, list[Layout]]:
    """(resolved original layout or dict, one layout per trace file)."""
    lay = resolve_layout(original, system)
    return lay, layout_for_files(lay, trace.files)


def _dense(*keys) -> np.ndarray:
    """Dense group id (0..G-1, in lexicographic key order) of rows keyed by the arrays ``keys``."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.lexsort(tuple(reversed(keys)))
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        ks = np.asarray(k)[idx]
        change[1:] |= ks[1:] != ks[:-1]
    out = np.empty(n, dtype=np.int64)
    out[idx] = np.cumsum(change) - 1
    return out


@dataclass
class TraceOrders:
    """The request orders the identifier and the planner share, computed once per trace in
    O(n) (:mod:`pario.trace.sorting`): ``by_rank`` — rows by (rank, order, row), the order
    of Algorithm 1's objects; ``by_offset`` — rows by offset, the order of the claim sweep
    and of the identifier's repetition test."""

    by_rank: np.ndarray
    by_offset: np.ndarray

    @classmethod
    def of(cls, trace: Trace) -> "TraceOrders":
        return cls(by_key_then_order(trace.rank, trace.order), offset_order(trace.offset))


# ====================================================================== identifier
@dataclass(frozen=True)
class AccessPatterns:
    """The identifier's result (CEDA seed 000 §4.2).

    ``table``: one row per access pattern (index = pattern id): ``file`` (index),
    ``file_name``, ``kind`` (the least regular kind of its streams: contiguous < strided <
    mixed < random), ``stride`` (when every stream is strided with one stride), ``size``
    (request size if constant), ``ops`` (read / write / read+write), ``repeated`` (bool),
    ``ranks``, ``requests``, ``bytes`` (requested, counting repeats), ``template``.
    ``of_request``: pattern id of every trace row (int32).  ``streams``: the identifier's streams
    with their ``sequence`` and ``pattern``.
    """

    table: pd.DataFrame
    of_request: np.ndarray
    streams: pd.DataFrame

    def __len__(self) -> int:
        return len(self.table)


def identify_patterns(trace: Trace, *, orders: TraceOrders | None = None) -> AccessPatterns:
    """CEDA's identifier (seed 000 §4.2), see the module docstring.  The streams come from
    :func:`pario.trace.patterns.segment`; per request only compiled passes (a stream's
    signature, its repetition test on the requests in offset order, the pattern of every
    row); the grouping into sequences and patterns is per stream (rank × file × op)."""
    if reference_mode():
        from .ceda_reference import identify_patterns as reference

        return reference(trace)
    n = len(trace)
    seg = segment(trace, by_op=True, per_request=False)
    st = seg.streams.copy()
    ns = len(st)
    if n == 0:
        return _no_patterns(st)
    rows = seg.rows
    off, ln = trace.offset, trace.length
    s_count = st["requests"].to_numpy()
    s_first = np.zeros(ns, dtype=np.int64)
    np.cumsum(s_count[:-1], out=s_first[1:])
    # order-independent signature of a stream's multiset of extents
    sig = K.stream_signatures(rows, s_first, s_count, off, ln)
    # in-stream repetition: some (offset, length) twice
    by_offset = orders.by_offset if orders is not None else offset_order(off)
    stream_of_row = K.stream_of_rows(rows, s_first, s_count, n)
    st["self_repeat"] = K.stream_repeats(counting_order(by_offset, stream_of_row, ns), stream_of_row, ns, off, ln)
    del stream_of_row
    seq_key = _sequences(st, sig)
    # patterns numbered in order of first appearance in the trace (a stream's first row)
    pat_of_stream = st["pattern"].to_numpy()
    first_row = np.full(int(pat_of_stream.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first_row, pat_of_stream, np.minimum.reduceat(rows, s_first))
    renum = np.empty_like(first_row)
    renum[np.lexsort((first_row, np.zeros_like(first_row)))] = np.arange(len(first_row))
    st["pattern"] = renum[pat_of_stream]
    pat_row = K.pattern_of_rows(rows, s_first, s_count, st["pattern"].to_numpy(), n)
    npat = len(first_row)
    requests = np.zeros(npat, dtype=np.int64)
    nbytes = np.zeros(npat, dtype=np.int64)
    np.add.at(requests, st["pattern"].to_numpy(), s_count)
    np.add.at(nbytes, st["pattern"].to_numpy(), st["bytes"].to_numpy())
    table, st = _pattern_table(trace, st, seq_key, requests, nbytes)
    return AccessPatterns(table, pat_row, st)


def _no_patterns(streams: pd.DataFrame) -> AccessPatterns:
    empty = pd.DataFrame(columns=["file", "file_name", "kind", "stride", "size", "ops", "repeated",
                                  "ranks", "requests", "bytes", "template"])
    return AccessPatterns(empty, np.zeros(0, dtype=np.int64), streams)


def _sequences(st: pd.DataFrame, sig: np.ndarray) -> pd.Series:
    """Streams of one rank and file with the same extents (``sig``, requests, bytes) are one
    sequence; sequences of one file with the same template are one pattern.  Sets the
    streams' ``sequence``, ``repeated``, ``stream_template`` and ``pattern`` (numbered in
    (file, template) order); returns each sequence's template."""
    st["sequence"] = _dense(st["rank"].to_numpy(), st["file"].to_numpy(), sig,
                            st["requests"].to_numpy(), st["bytes"].to_numpy())
    nstream_per_seq = np.bincount(st["sequence"].to_numpy())
    st["repeated"] = (nstream_per_seq[st["sequence"].to_numpy()] > 1) | st["self_repeat"].to_numpy()
    kinds = st["kind"].astype(str).to_numpy()
    size = st["size"].fillna(-1).astype(np.int64).to_numpy()
    ops = st["op"].to_numpy()
    tmpl = [f"{OP_NAMES[o]}:{k}" + (f"@{z}" if z >= 0 else "@var")
            for o, k, z in zip(ops, kinds, size)]  # one per stream
    st["stream_template"] = tmpl
    seq_t = st.groupby("sequence", sort=True)["stream_template"].agg(lambda t: "+".join(sorted(t)))
    seq_rep = st.groupby("sequence", sort=True)["repeated"].any()
    seq_file = st.groupby("sequence", sort=True)["file"].first()
    seq_key = seq_t + np.where(seq_rep, " (repeated)", "")
    pat_of_seq = _dense(seq_file.to_numpy(), seq_key.to_numpy().astype(str))
    st["pattern"] = pat_of_seq[st["sequence"].to_numpy()]
    return seq_key


def _pattern_table(trace: Trace, st: pd.DataFrame, seq_key: pd.Series, requests: np.ndarray,
                   nbytes: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The patterns table (:class:`AccessPatterns`) from the streams with their final
    ``pattern``, and the streams with their ``template``."""
    npat = len(requests)
    st["template"] = seq_key.to_numpy()[st["sequence"].to_numpy()]
    g = st.groupby("pattern", sort=True)
    kinds = st["kind"].astype(str).to_numpy()
    kind_code = st["kind"].astype(str).map(KIND_RANK).to_numpy()
    worst = np.zeros(npat, dtype=np.int64)
    np.maximum.at(worst, st["pattern"].to_numpy(), kind_code)
    inv_kind = {v: k for k, v in KIND_RANK.items()}
    st["_strided"] = kinds == "strided"
    st["_sized"] = st["size"].notna()
    uni_stride = (g["_strided"].all() & (g["stride"].nunique() == 1)).to_numpy()
    uni_size = (g["_sized"].all() & (g["size"].nunique() == 1)).to_numpy()
    strides = np.where(uni_stride, g["stride"].first().fillna(0).astype(np.int64).to_numpy(), 0)
    sizes = np.where(uni_size, g["size"].first().fillna(0).astype(np.int64).to_numpy(), 0)
    opset = g["op"].agg(lambda o: "+".join(OP_NAMES[x] for x in sorted(set(o))))
    files = g["file"].first().to_numpy()
    table = pd.DataFrame({
        "file": files.astype(np.int64),
        "file_name": [trace.files[f] for f in files],
        "kind": [inv_kind[int(k)] for k in worst],
        "stride": pd.array(np.where(uni_stride, strides, 0), dtype="Int64"),
        "size": pd.array(np.where(uni_size, sizes, 0), dtype="Int64"),
        "ops": opset.to_numpy(),
        "repeated": g["repeated"].any().to_numpy(),
        "ranks": g["rank"].nunique().to_numpy().astype(np.int64),
        "requests": requests,
        "bytes": nbytes,
        "template": g["template"].first().to_numpy(),
    })
    table.loc[~uni_stride, "stride"] = pd.NA
    table.loc[~uni_size, "size"] = pd.NA
    table.index.name = "pattern"
    return table, st.drop(columns=["_strided", "_sized"])


# ====================================================================== planner (Algorithm 1)
@dataclass
class PlacedExtents:
    """Replica extents placed by Algorithm 1 for several claim groups, sorted by (group,
    offset): ``rec`` records (offset, end, local, server·2^32 + data file) — the table the extent
    lookups read (:class:`pario.layout.extents_kernel.ExtentSet`) —, ``bounds`` (group g:
    ``rec[bounds[g]:bounds[g+1]]``); ``space``: replica bytes per pattern (a pattern has
    extents in its group when it has space)."""

    rec: np.ndarray
    bounds: np.ndarray
    space: np.ndarray

    def extent_map(self, g: int, default: Layout) -> ExtentMap:
        return _records_map(self.rec[self.bounds[g]:self.bounds[g + 1]], default)


def place_objects(trace: Trace, of_request: np.ndarray, group_of_pattern: np.ndarray, slot_of_pattern: np.ndarray,
                  n_servers: int, servers=None, *, mode: str = "ceda", stripe: int = 65536,
                  orders: TraceOrders | None = None) -> PlacedExtents:
    """Algorithm 1 (CEDA seed 000 §4.3) for many patterns at once (compiled:
    :mod:`pario.plan.ceda_kernels`).

    The requests of pattern p (``of_request``) are placed in claim group
    ``group_of_pattern[p]`` (a dense id ≥ 0; -1: not placed) with priority
    ``slot_of_pattern[p]`` inside the group (lower claims first); zero-length requests are
    not placed.  ``mode="ceda"``: objects (pattern, rank) in ascending rank, object i →
    replica file i mod n on server ``servers[i mod n]``; ``mode="cida"``: the pattern's
    objects concatenated into one replica file striped round-robin over ``servers`` with
    ``stripe``.  The patterns of a group have replica data files of their own, in priority
    order: 1 + b·n … (CEDA), 1 + b (CIDA).
    """
    if mode not in ("ceda", "cida"):
        raise ParioError(f"unknown placement {mode!r}")
    ceda, cida = _place(trace, of_request, group_of_pattern, slot_of_pattern, n_servers, servers, stripe, orders,
                        (mode,))
    return ceda if mode == "ceda" else cida


def _place(trace, of_request, group_of_pattern, slot_of_pattern, n_servers, servers, stripe, orders, modes,
           release: bool = False):
    """:func:`place_objects` for the placements ``modes`` (both from one claim): (CEDA's
    PlacedExtents or None, CIDA's or None).  ``release``: the ``orders`` are emptied once
    used (their last use: memory for the claim)."""
    servers = np.arange(n_servers) if servers is None else np.asarray(servers, dtype=np.int64)
    orders = orders or TraceOrders.of(trace)
    group_of_pattern = np.asarray(group_of_pattern, dtype=np.int64)
    slot_of_pattern = np.asarray(slot_of_pattern, dtype=np.int64)
    npat = len(group_of_pattern)
    # object order: (group, slot) — a dense key over the placed patterns — then rank, order, row
    placed = np.flatnonzero(group_of_pattern >= 0)
    key = np.full(npat, -1, dtype=np.int64)
    if len(placed):
        gs, ss = group_of_pattern[placed], slot_of_pattern[placed]
        o = np.lexsort((ss, gs))
        new = np.r_[True, (gs[o][1:] != gs[o][:-1]) | (ss[o][1:] != ss[o][:-1])]
        key[placed[o]] = np.cumsum(new) - 1
    nkeys = int(key.max()) + 1 if len(placed) else 0
    ngroups = int(group_of_pattern.max()) + 1 if len(placed) else 0
    of_request = np.asarray(of_request)
    obj_rows = K.object_order(orders.by_rank, of_request, trace.length, key, max(nkeys, 1))
    table, bounds = K.sweep_order(orders.by_offset, of_request, trace.offset, trace.length, group_of_pattern, ngroups,
                                  obj_rows, len(trace))
    if release:
        orders.by_rank = orders.by_offset = None
    fragments = K.claim(table, bounds, obj_rows[:0])
    del table
    state = K.object_state(fragments, bounds, obj_rows, of_request, trace.rank, group_of_pattern, slot_of_pattern,
                           len(servers))
    del obj_rows
    space = state[-1]
    a, b = K.place(fragments, state, servers, "ceda" in modes, "cida" in modes, stripe)
    del fragments, state
    return tuple(None if res is None else PlacedExtents(res[0], res[1], space) for res in (a, b))


def plan_layouts(trace: Trace, patterns: AccessPatterns, system, original, *, mode: str = "ceda",
                 servers=None, stripe: int | None = None,
                 orders: TraceOrders | None = None) -> tuple[dict[int, ExtentMap], np.ndarray]:
    """The planning layout of every pattern on its own (Algorithm 1): pattern id →
    ExtentMap (default = the original layout of its file, replica data files 1 … n), and
    the replica size c_p of each pattern (bytes)."""
    if reference_mode():
        from .ceda_reference import plan_layouts as reference

        return reference(trace, patterns, system, original, mode=mode, servers=servers, stripe=stripe)
    if mode not in ("ceda", "cida"):
        raise ParioError(f"unknown placement {mode!r}")
    _, per_file = original_layouts(original, trace, system)
    ext = _planned(trace, patterns, system, per_file, servers, stripe, orders, (mode,))[mode]
    return dict(_maps(ext, patterns, per_file)), ext.space


def _planned(trace, patterns: AccessPatterns, system, per_file, servers, stripe, orders, modes,
             release: bool = False) -> dict:
    """Every pattern placed on its own (its own claim group), for the placements ``modes``:
    mode → PlacedExtents (group = pattern).  ``release``: see :func:`_place`."""
    npat = len(patterns)
    ceda, cida = _place(trace, patterns.of_request, np.arange(npat), np.zeros(npat, dtype=np.int64), system.n,
                        servers, stripe or _stripe_of(per_file), orders, modes, release)
    return {"ceda": ceda, "cida": cida}


class _PlannedMaps(Mapping):
    """Pattern id → the ExtentMap of its placed extents (default: the original layout of its
    file), made on first use: the analyzer prices the records as they are, and a plan needs
    the ExtentMaps of its chosen patterns only."""

    def __init__(self, placed: PlacedExtents, patterns: AccessPatterns, per_file):
        self.placed = placed
        self.files = patterns.table["file"].to_numpy() if len(patterns) else np.zeros(0, dtype=np.int64)
        self.per_file = per_file
        self.made: dict[int, ExtentMap] = {}

    def __getitem__(self, p) -> ExtentMap:
        if not isinstance(p, (int, np.integer)) or not 0 <= p < len(self.files):
            raise KeyError(p)
        p = int(p)
        if p not in self.made:
            self.made[p] = self.placed.extent_map(p, self.per_file[int(self.files[p])])
        return self.made[p]

    def __iter__(self):
        return iter(range(len(self.files)))

    def __len__(self) -> int:
        return len(self.files)


def _maps(ext: PlacedExtents, patterns: AccessPatterns, per_file) -> Mapping:
    """Pattern id → its ExtentMap (default: the original layout of its file), made on use."""
    return _PlannedMaps(ext, patterns, per_file)


def _stripe_of(layouts) -> int:
    for lay in layouts:
        if isinstance(lay, Striped) and lay.is_fixed:
            return int(lay.stripes[0])
    return 65536


# ====================================================================== analyzer
class _Requests:
    """Requests in service order, as the columns of :class:`pario.model.engine.Prepared`."""

    __slots__ = ("bid", "nb", "rank", "op", "file", "offset", "length", "nranks")

    def __init__(self, **cols):
        for k, v in cols.items():
            setattr(self, k, v)

    def replace(self, **cols) -> "_Requests":
        return _Requests(**{**{k: getattr(self, k) for k in self.__slots__}, **cols})


class PatternPricing:
    """The analyzer's pricing (CEDA seed 000 §4.4): every pattern's requests on their own,
    in the service order of the pattern's own batches — (pattern, trace batch, the rank's
    request order, row): the engine's service order of the trace, stably counted by
    pattern — priced by the compiled kernel (:func:`pario.model.engine.price_in_order`).
    Nothing of one pattern interacts with another: each is its own file and its own
    batches.  When the patterns already follow each other in the trace's service order,
    one to a file, and no batch holds two of them (one pattern: IOR), the engine's
    columns serve as they are; otherwise they are gathered once in pattern order."""

    def __init__(self, trace: Trace, pattern_of_row: np.ndarray, bid: np.ndarray, file_of_pattern, system, model):
        from ..model import engine
        from ..model.distribution import _seq_alpha_table

        self.npat = len(file_of_pattern)
        self.system = system
        self.alpha = _seq_alpha_table(system, model.params["contiguous_alpha"])
        self.network = bool(model.params["network"])
        prep = engine.prepared(trace, bid)
        already, vperm, vb, self.pattern_of_batch = K.by_pattern(prep.perm, pattern_of_row, bid, self.npat)
        files = np.asarray(file_of_pattern, dtype=np.int64)
        one_per_file = len(unique(files)) == len(files)
        if already and one_per_file and np.array_equal(vb, prep.bid):
            self.req = _Requests(bid=prep.bid, nb=prep.nb, rank=prep.rank, op=prep.op, file=prep.file,
                                 offset=prep.offset, length=prep.length, nranks=prep.nranks)
            self.slot = files  # layouts by trace file: each file's one pattern
            self.nfiles = len(trace.files)
            self.whole = True  # the trace's own requests, batches and files
        else:
            vperm = prep.perm if already else vperm
            self.req = _Requests(bid=vb, nb=len(self.pattern_of_batch), rank=trace.rank[vperm], op=trace.op[vperm],
                                 file=pattern_of_row[vperm].astype(np.int32), offset=trace.offset[vperm],
                                 length=trace.length[vperm], nranks=prep.nranks)
            self.slot = np.arange(self.npat)
            self.nfiles = self.npat
            self.whole = False
        del vperm, vb

    def _layouts(self, layouts_by_pattern: dict[int, Any]) -> list:
        out = [None] * self.nfiles
        for p in range(self.npat):
            out[int(self.slot[p])] = layouts_by_pattern[p]
        fill = next((x for x in out if x is not None), None)
        return [fill if x is None else x for x in out]  # files without requests: any layout

    def costs(self, layouts_by_pattern: dict[int, Any], req: "_Requests | None" = None,
              subrequests=None) -> np.ndarray:
        """Σ over each pattern's batches of T_sys (eq. 3–4) under its layout."""
        if self.npat == 0 or len(self.req.bid) == 0:
            return np.zeros(self.npat)
        layouts = [None] * self.nfiles if layouts_by_pattern is None else self._layouts(layouts_by_pattern)
        return np.bincount(self.pattern_of_batch, weights=self._per_batch(layouts, req, subrequests),
                           minlength=self.npat)

    def _per_batch(self, layouts: list, req=None, subrequests=None) -> np.ndarray:
        from ..model.engine import price_in_order

        per_batch, _, _, _ = price_in_order(req or self.req, layouts, self.system, contiguous_alpha_table=self.alpha,
                                            network=self.network, subrequests=subrequests)
        return per_batch

    def original(self, orig: dict[int, Any], per_file: list) -> tuple[np.ndarray, float | None]:
        """(T_O; and when these requests are the trace's own — one pattern a file, in the
        trace's batches — the whole trace's time under its original layouts ``per_file``,
        the plan's ORIG baseline, from the same pricing: else None)."""
        if not self.whole or self.npat == 0 or len(self.req.bid) == 0:
            return self.costs(orig), None
        per_batch = self._per_batch(list(per_file))
        return np.bincount(self.pattern_of_batch, weights=per_batch, minlength=self.npat), float(per_batch.sum())

    def _writes(self) -> np.ndarray | None:
        """The requests' lengths with the reads' set to 0 (None: no write): the writes
        priced alone — a read maps to nothing and its batches cost 0 — in their own order
        and batches."""
        w = self.req.op == WRITE
        return np.where(w, self.req.length, 0) if self.npat and w.any() else None

    def home(self, orig: dict[int, Any]) -> np.ndarray:
        """The patterns' writes under the original layout (the flush's second half)."""
        wlen = self._writes()
        return np.zeros(self.npat) if wlen is None else self.costs(orig, self.req.replace(length=wlen))

    def replica(self, placed: "PlacedExtents", defaults: list, back: bool) -> tuple[np.ndarray, np.ndarray]:
        """(T_N: each pattern under its replica layout — the extents ``placed`` by pattern,
        read as they are, ``defaults[p]`` for bytes they would not cover —; with ``back``,
        the flush's first half — its writes read back from the replica — from the same
        sub-requests, the reads' dropped, else zeros), mapped and priced a chunk of batches
        at a time (:func:`pario.model.engine.price_extents_by_chunks`)."""
        from ..layout.extents_kernel import ExtentSet
        from ..model.engine import price_extents_by_chunks

        zeros = np.zeros(self.npat)
        if self.npat == 0 or len(self.req.bid) == 0:
            return zeros, zeros
        nf = self.nfiles
        e0, e1 = np.zeros(nf, dtype=np.int64), np.zeros(nf, dtype=np.int64)
        is_ext, dft = np.zeros(nf, dtype=bool), [None] * nf
        for p in range(self.npat):  # leaf = the pattern's (virtual) file
            f = int(self.slot[p])
            e0[f], e1[f], is_ext[f], dft[f] = placed.bounds[p], placed.bounds[p + 1], True, defaults[p]
        w = self.req.op == WRITE if back else None
        variants = [(None, None)] + ([(w, np.zeros_like(self.req.op))] if back and w.any() else [])
        per_batch = price_extents_by_chunks(self.req, ExtentSet(placed.rec, e0, e1, is_ext, dft), self.system,
                                            contiguous_alpha_table=self.alpha, network=self.network,
                                            variants=variants)
        sums = [np.bincount(self.pattern_of_batch, weights=pb, minlength=self.npat) for pb in per_batch]
        return sums[0], (sums[1] if len(sums) > 1 else zeros)

    def back(self, layouts: dict[int, Any]) -> np.ndarray:
        """The patterns' writes read from their replica layouts (the flush's first half)."""
        wlen = self._writes()
        if wlen is None:
            return np.zeros(self.npat)
        return self.costs(layouts, self.req.replace(length=wlen, op=np.zeros_like(self.req.op)))

    def flush(self, layouts: dict[int, Any], orig: dict[int, Any]) -> np.ndarray:
        """:func:`flush_costs`: each pattern's writes read from its replica plus written to
        the original."""
        return self.back(layouts) + self.home(orig)


class _ModelPricing:
    """The analyzer's pricing by any cost model's ``trace_cost`` (the pre-issue-18 path of
    :mod:`pario.plan.ceda_reference`: a virtual trace per call)."""

    def __init__(self, trace, pattern_of_row, bid, file_of_pattern, system, model):
        from . import ceda_reference

        self.ref = ceda_reference
        self.args = (trace, pattern_of_row)
        self.sm = (system, model)
        self.kw = {"bid": bid, "file_of_pattern": file_of_pattern}

    def costs(self, layouts_by_pattern):
        return self.ref.pattern_costs(*self.args, layouts_by_pattern, *self.sm, **self.kw)

    def original(self, orig, per_file):
        return self.costs(orig), None

    def replica(self, layouts: dict, back: bool):
        """(T_N, the flush's read-back) under the replica ExtentMaps ``layouts``."""
        npat = len(self.kw["file_of_pattern"])
        F = self.ref.write_costs(*self.args, layouts, *self.sm, as_reads=True, **self.kw) if back else np.zeros(npat)
        return self.costs(layouts), F

    def home(self, orig):
        return self.ref.write_costs(*self.args, orig, *self.sm, as_reads=False, **self.kw)

    def flush(self, layouts, orig):
        return self.ref.flush_costs(*self.args, layouts, orig, *self.sm, **self.kw)


def _compiled(model) -> bool:
    """Whether CEDA prices by the compiled kernel directly: the distribution model itself
    (another model prices by its ``trace_cost``), outside
    :func:`~pario.model.distribution.reference_pricing`."""
    from ..model.distribution import DistributionModel

    return type(model) is DistributionModel and not reference_mode()


def _pricing(trace, pattern_of_row, bid, file_of_pattern, system, model):
    """The analyzer's pricing: compiled (:class:`PatternPricing`) or by the model's
    ``trace_cost`` (:func:`_compiled`)."""
    return (PatternPricing if _compiled(model) else _ModelPricing)(trace, pattern_of_row, bid, file_of_pattern,
                                                                   system, model)


def pattern_costs(trace: Trace, pattern_of_row: np.ndarray, layouts_by_pattern: dict[int, Any], system, model,
                  *, bid: np.ndarray, file_of_pattern) -> np.ndarray:
    """Cost of every pattern's requests on their own under its layout (one model call):
    each pattern gets a virtual file and its own batches (pattern, trace batch)."""
    return _pricing(trace, pattern_of_row, bid, file_of_pattern, system, model).costs(layouts_by_pattern)


def flush_costs(trace: Trace, pattern_of_row: np.ndarray, layouts: dict[int, Any], orig: dict[int, Any], system,
                model, *, bid: np.ndarray, file_of_pattern) -> np.ndarray:
    """What every pattern's writes cost once more when the program ends: CEDA redirects a
    write to replicated data to the replica and marks it dirty, and the dirty bytes are
    flushed to the original "when the application ends its execution" (seed 000 §5) — read
    from the replica, written to the original.  The paper's analyzer (§4.4, B = T_O − T_N)
    leaves that copy out; pario counts it (B = T_O − T_N − flush), so that a pattern whose
    writes gain less on the replica than their copy back costs is not replicated (IOR's
    write + read of the same bytes: measured on the testbed, docs/RESULTS.md).  Priced with
    the same model, request by request: the pattern's writes as reads of its replica layout
    plus the same writes under the original layout.  Zero for read-only patterns."""
    return _pricing(trace, pattern_of_row, bid, file_of_pattern, system, model).flush(layouts, orig)


@dataclass
class CEDAAnalysis:
    """Identifier + planner + analyzer output: the patterns, their planned layouts and the
    pattern benefit table ``pbt`` (columns T_O, T_N, flush, B = T_O − T_N − flush, space,
    cida_T, cida_space, non_contiguous).  For :func:`combined_replicas`: ``orders``, the
    trace's request orders (None: computed again if needed); ``servers``, the replica
    servers of ``layouts``; ``cida_placed``: every pattern's CIDA extents (from the same
    claim as ``layouts``), with ``cida_stripe``; ``orig_s``: the whole trace's time under
    its original layouts when the analyzer priced it (None: not)."""

    patterns: AccessPatterns
    layouts: Mapping[int, ExtentMap]
    cida_layouts: dict[int, ExtentMap]
    pbt: pd.DataFrame
    bid: np.ndarray
    original: Any
    per_file: list[Layout] = field(default_factory=list)
    orders: TraceOrders | None = None
    servers: Any = None
    cida_placed: "PlacedExtents | None" = None
    cida_stripe: int = 0
    orig_s: float | None = None


def analyze(trace: Trace, system, original="fixed:64K", model="distribution", *, by: str = "auto",
            servers=None, cida_stripe: int | None = None, model_params: dict | None = None,
            with_cida: bool = False, flush: bool = True) -> CEDAAnalysis:
    """CEDA's identifier, planner and analyzer (seed 000 §4.2–4.4): the PBT.

    ``with_cida=True`` also prices every pattern under CIDA's layout (PBT column
    ``cida_T``, NaN otherwise: one more model call).  ``flush``: B counts the copy of the
    pattern's dirty bytes back to the original when the program ends (:func:`flush_costs`);
    False is the paper's analyzer (B = T_O − T_N, §4.4: the PBT's flush column is 0)."""
    if reference_mode():
        from .ceda_reference import analyze as reference

        return reference(trace, system, original, model, by=by, servers=servers, cida_stripe=cida_stripe,
                         model_params=model_params, with_cida=with_cida, flush=flush)
    model = get_cost_model(model, model_params)
    lay, per_file = original_layouts(original, trace, system)
    orders = TraceOrders.of(trace)
    pats = identify_patterns(trace, orders=orders)
    bid = batch_ids(trace, by)
    # CEDA's and CIDA's placements from one claim (same objects: CIDA's replica size is c_p too)
    stripe = cida_stripe or _stripe_of(per_file)
    files = pats.table["file"].to_numpy() if len(pats) else np.zeros(0, dtype=np.int64)
    one_per_file = len(unique(files)) == len(files)  # (then a combined plan reuses the patterns' own placements)
    planned = _planned(trace, pats, system, per_file, servers, stripe, orders, ("ceda", "cida"), release=one_per_file)
    if one_per_file:
        orders = None
    space, cspace = planned["ceda"].space, planned["cida"].space
    orig = {p: per_file[int(f)] for p, f in enumerate(files)}
    defaults = [per_file[int(f)] for f in files]
    pricing = _pricing(trace, pats.of_request, bid, files, system, model)
    T_O, orig_s = pricing.original(orig, per_file)
    compiled = isinstance(pricing, PatternPricing)
    if compiled:  # the records as placed, before their ExtentMaps are made
        T_N, back = pricing.replica(planned["ceda"], defaults, flush)  # the flush's read-back: same sub-requests
        T_C = pricing.replica(planned["cida"], defaults, False)[0] if with_cida else np.full(len(files), np.nan)
    layouts = _maps(planned.pop("ceda"), pats, per_file)
    cida = dict(_maps(planned["cida"], pats, per_file)) if with_cida else {}
    if not compiled:
        T_N, back = pricing.replica(layouts, flush)
        T_C = pricing.costs(cida) if with_cida else np.full(len(files), np.nan)
    F = back + pricing.home(orig) if flush else np.zeros(len(files))
    del pricing
    pbt = pbt_frame(pats, T_O, T_N, F, space, T_C, cspace)
    return CEDAAnalysis(pats, layouts, cida, pbt, bid, lay, per_file, orders, servers, planned["cida"], stripe, orig_s)


def pbt_frame(pats: AccessPatterns, T_O, T_N, F, space, T_C, cspace) -> pd.DataFrame:
    """The pattern benefit table (§4.4): B = T_O − T_N − flush (eq. 5, with the flush)."""
    pbt = pd.DataFrame({
        "file_name": pats.table["file_name"].to_numpy() if len(pats) else [],
        "kind": pats.table["kind"].to_numpy() if len(pats) else [],
        "requests": pats.table["requests"].to_numpy() if len(pats) else [],
        "T_O": T_O, "T_N": T_N, "flush": F, "B": T_O - T_N - F, "space": space,
        "cida_T": T_C, "cida_space": cspace,
        "non_contiguous": (pats.table["kind"].to_numpy() != "contiguous") if len(pats) else [],
    })
    pbt.index.name = "pattern"
    return pbt


# ====================================================================== combined plan
def combined_replicas(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, *, mode: str = "ceda",
                      servers=None, stripe: int | None = None, name: str = "ceda") -> dict[str, dict]:
    """Replica extent maps per file for the chosen patterns (priority: descending benefit,
    as the replicator would copy them), one ExtentMap per file.  Returns file name →
    ``{"name", "layout", "patterns", "bytes", "datafiles"}``.

    A file with one chosen pattern is that pattern's own placement (same requests, same
    claim, same objects, replica files 1 …): the analysis's, not placed again."""
    if reference_mode():
        from .ceda_reference import combined_replicas as reference

        return reference(trace, an, chosen, system, mode=mode, servers=servers, stripe=stripe, name=name)
    return _combined(trace, an, chosen, system, mode, servers, stripe, name)[0]


def _combined(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, mode: str, servers, stripe,
              name: str) -> tuple[dict[str, dict], dict[int, np.ndarray]]:
    """(:func:`combined_replicas`, and its extents as records by file index)."""
    reps, recs = {}, {}
    for f, (rec, pats_f) in _combined_placed(trace, an, chosen, system, mode, servers, stripe).items():
        if mode == "ceda" and rec is None:  # a pattern's own placement
            emap = an.layouts[pats_f[0]]
            placed = getattr(an.layouts, "placed", None)
            rec = placed.rec[placed.bounds[pats_f[0]]:placed.bounds[pats_f[0] + 1]] if placed is not None else None
        else:
            emap = _records_map(rec, an.per_file[f])
        reps[trace.files[f]] = {"name": name, "layout": emap, "patterns": pats_f if len(emap) else [],
                                "bytes": int(emap.length.sum()), "datafiles": int(len(unique(emap.datafile)))}
        recs[f] = rec
    return reps, recs


def _records_map(rec: np.ndarray, default: Layout) -> ExtentMap:
    """The ExtentMap of extent records (offset, end, local, server·2^32 + data file)."""
    return ExtentMap(rec[:, 0], rec[:, 1] - rec[:, 0], rec[:, 3] >> 32, rec[:, 2], rec[:, 3] & 0xFFFFFFFF, default)


def _combined_placed(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, mode: str, servers,
                     stripe: int | None) -> dict[int, tuple]:
    """:func:`combined_replicas` as records: file index → (its extent records — None for a
    CEDA file whose one chosen pattern's planned ExtentMap serves —, its patterns with
    extents)."""
    chosen_ids = np.flatnonzero(chosen)
    if len(chosen_ids) == 0:
        return {}
    B = an.pbt["B"].to_numpy()
    npat = len(an.patterns)
    prio_of_pat = np.full(npat, -1, dtype=np.int64)
    ordered = chosen_ids[np.lexsort((chosen_ids, -B[chosen_ids]))]
    prio_of_pat[ordered] = np.arange(len(ordered))
    file_of_pat = an.patterns.table["file"].to_numpy().astype(np.int64)
    stripe = stripe or _stripe_of(an.per_file)
    files = unique(file_of_pat[chosen_ids])
    own = {}  # file → its one chosen pattern, placed by the analysis
    if _same_servers(an.servers, servers, system) and (mode == "ceda" or an.cida_placed is not None
                                                        and stripe == an.cida_stripe):
        for f in files.tolist():
            ps = chosen_ids[file_of_pat[chosen_ids] == f]
            if len(ps) == 1:
                own[f] = int(ps[0])
    group = np.where((prio_of_pat >= 0) & ~np.isin(file_of_pat, list(own)), file_of_pat, -1)
    ext = None
    if (group >= 0).any():
        ceda, cida = _place(trace, an.patterns.of_request, group, prio_of_pat, system.n, servers, stripe, an.orders,
                            (mode,))
        ext = ceda if mode == "ceda" else cida
    out = {}
    for f in files.tolist():  # one replica per file
        if f in own:
            p = own[f]
            cp = an.cida_placed
            rec = None if mode == "ceda" else cp.rec[cp.bounds[p]:cp.bounds[p + 1]]
            out[f] = (rec, [p])
        else:
            sl = slice(int(ext.bounds[f]), int(ext.bounds[f + 1]))
            out[f] = (ext.rec[sl], [int(p) for p in np.flatnonzero((group == f) & (ext.space > 0))])
    return out


def _records_cost(trace: Trace, an: CEDAAnalysis, recs: dict[int, np.ndarray], system, model) -> float:
    """The whole trace's time with replicas given as extent records by file index (the
    other files under their original layouts): :func:`_plan_cost` of those replicas, priced
    from the records as they are, a chunk of batches at a time
    (:func:`pario.model.engine.price_extents_by_chunks`)."""
    from ..layout.extents_kernel import ExtentSet
    from ..model import engine
    from ..model.distribution import _seq_alpha_table

    nf = len(trace.files)
    e0, e1, is_ext = np.zeros(nf, dtype=np.int64), np.zeros(nf, dtype=np.int64), np.zeros(nf, dtype=bool)
    parts, base = [], 0
    for f, rec in recs.items():
        e0[f], e1[f], is_ext[f] = base, base + len(rec), True
        parts.append(rec)
        base += len(rec)
    rec = parts[0] if len(parts) == 1 else np.concatenate(parts)
    del parts
    prep = engine.prepared(trace, an.bid)
    alpha = _seq_alpha_table(system, model.params["contiguous_alpha"])
    per_batch, = engine.price_extents_by_chunks(prep, ExtentSet(rec, e0, e1, is_ext, an.per_file), system,
                                                contiguous_alpha_table=alpha, network=model.params["network"])
    return float(per_batch.sum())


def _same_servers(a, b, system) -> bool:
    """Whether two ``servers`` parameters name the same replica servers."""
    fa = np.arange(system.n) if a is None else np.asarray(a, dtype=np.int64)
    fb = np.arange(system.n) if b is None else np.asarray(b, dtype=np.int64)
    return np.array_equal(fa, fb)


def _plan_cost(trace, an: CEDAAnalysis, reps: dict[str, dict], system, model) -> float:
    lay = {f: an.per_file[i] for i, f in enumerate(trace.files)}
    for f, r in reps.items():
        lay[f] = r["layout"]
    return float(model.trace_cost(trace, lay, system, batches=an.bid).predicted_s)


def select(an: CEDAAnalysis, budget: float | None, rule: str = "paper", top_n: int | None = None) -> np.ndarray:
    """Boolean mask of the patterns to replicate (``paper`` or ``knapsack``)."""
    B = an.pbt["B"].to_numpy()
    c = an.pbt["space"].to_numpy()
    if rule == "paper":
        return select_paper(B, c, budget, top_n)
    if rule == "knapsack":
        return select_knapsack(B, c, budget)
    raise ParioError(f"unknown CEDA selection {rule!r} (expected {', '.join(SELECTIONS)})")


def select_cida(an: CEDAAnalysis, budget: float | None) -> np.ndarray:
    """CIDA: every non-contiguous pattern, no benefit test; with a budget, in identifier
    order while they fit."""
    nc = an.pbt["non_contiguous"].to_numpy().astype(bool)
    c = an.pbt["cida_space"].to_numpy()
    out = np.zeros(len(nc), dtype=bool)
    free = np.inf if budget is None else float(budget)
    for p in np.flatnonzero(nc):  # per pattern
        if c[p] <= free:
            out[p] = True
            free -= c[p]
    return out


def _routing(files) -> list[dict]:
    rules = []
    for f in files:
        for op in ("read", "write"):
            rules.append({"file": f, "op": op, "rule": "replica", "replica": "ceda"})
    for op in ("read", "write"):
        rules.append({"file": "*", "op": op, "rule": "original"})
    return rules


class CEDAPlanner(Planner):
    """CEDA (seed 000 §4): pattern-based partial replication with a distribution-aware
    benefit test.  Parameters:

    - ``original``: the files' layout (spec, Layout or dict file → layout), default
      ``fixed:64K`` (§6.2: 64 KB stripes on all servers);
    - ``selection``: ``paper`` (Algorithm 2) or ``knapsack`` (optimal); both are reported;
    - ``top_n``: Algorithm 2's n (None = every pattern);
    - ``model`` / ``model_params``: the cost model (default the distribution model, §3);
    - ``by``: batching of the trace (:func:`pario.model.batches.batch_ids`);
    - ``servers``: server indices for the replica files (None = all servers: n = system.n);
    - ``cida_stripe``: stripe of CIDA's replica (None = the original fixed stripe, else 64 KiB);
    - ``flush``: the benefit test counts the copy of dirty replica bytes back to the original
      at the program's end (default, pario's; :func:`flush_costs`), or not (False: the
      paper's analyzer, as ``pario reproduce`` runs it).
    """

    name = "ceda"
    defaults = {"original": "fixed:64K", "selection": "paper", "top_n": None, "model": "distribution",
                "model_params": None, "by": "auto", "servers": None, "cida_stripe": None, "verify": True,
                "flush": True}

    def analyze(self, trace, system) -> CEDAAnalysis:
        p = self.params
        return analyze(trace, system, p["original"], p["model"], by=p["by"], servers=p["servers"],
                       cida_stripe=p["cida_stripe"], model_params=p["model_params"], flush=p["flush"])

    def plan(self, trace, system, budget: float | None = None) -> Plan:
        p = self.params
        if p["selection"] not in SELECTIONS:
            raise ParioError(f"unknown CEDA selection {p['selection']!r} (expected {', '.join(SELECTIONS)})")
        if budget is not None and budget < 0:
            raise ParioError("replica space budget must be >= 0")
        model = get_cost_model(p["model"], p["model_params"])
        an = self.analyze(trace, system)
        results = {}
        cache: dict[bytes, float] = {}
        if an.orig_s is not None:  # ORIG, priced by the analyzer (T_O of the trace's own requests)
            cache[np.packbits(np.zeros(len(an.patterns), dtype=bool)).tobytes()] = an.orig_s

        compiled = _compiled(model)

        def combined(mask, mode="ceda"):
            """(replicas, their records — None: priced by the model —) of the patterns ``mask``."""
            if not compiled:
                kw = {} if mode == "ceda" else {"stripe": p["cida_stripe"], "name": "cida"}
                return combined_replicas(trace, an, mask, system, mode=mode, servers=p["servers"], **kw), None
            return _combined(trace, an, mask, system, mode, p["servers"],
                             p["cida_stripe"] if mode == "cida" else None, mode)

        def cost_of(mask, reps, recs=None):
            key = np.packbits(mask).tobytes() + (b"cida" if any(r["name"] == "cida" for r in reps.values()) else b"")
            if key not in cache:  # (from the placed records when they are all there)
                whole = recs and all(r is not None for r in recs.values())
                cache[key] = (_records_cost(trace, an, recs, system, model) if whole
                              else _plan_cost(trace, an, reps, system, model))
            return cache[key]

        placed: dict[bytes, tuple] = {}
        for rule in SELECTIONS:
            mask = select(an, budget, rule, p["top_n"])
            mkey = np.packbits(mask).tobytes()
            if mkey not in placed:
                placed[mkey] = combined(mask)
            reps, recs = placed[mkey]
            results[rule] = {"mask": mask, "replicas": reps, "predicted_s": cost_of(mask, reps, recs)}
        cmask = select_cida(an, budget)
        if not cmask.any():
            t_cida = cost_of(cmask, {})
        elif compiled:  # priced from the placed records: CIDA's replicas are not part of the plan (no ExtentMap)
            recs = {f: rec for f, (rec, _) in _combined_placed(trace, an, cmask, system, "cida", p["servers"],
                                                                 p["cida_stripe"]).items()}
            t_cida = _records_cost(trace, an, recs, system, model)
        else:
            t_cida = cost_of(cmask, *combined(cmask, "cida"))
        t_orig = cost_of(np.zeros(len(an.patterns), dtype=bool), {})
        chosen = results[p["selection"]]
        dropped = []
        if p["verify"] and chosen["predicted_s"] > t_orig:
            # Beyond the paper: the per-pattern benefits B (priced on each pattern alone) can
            # add up to a plan that is slower than ORIG on the whole trace (patterns share
            # servers).  Drop selected patterns, least benefit first, until it is not.
            mask = chosen["mask"].copy()
            B = an.pbt["B"].to_numpy()
            for i in sorted(np.flatnonzero(mask), key=lambda k: B[k]):
                mask[i] = False
                dropped.append(int(i))
                mkey = np.packbits(mask).tobytes()
                if mkey not in placed:
                    placed[mkey] = combined(mask)
                reps, recs = placed[mkey]
                t = cost_of(mask, reps, recs)
                if t <= t_orig or not mask.any():
                    break
            chosen = {"mask": mask, "replicas": reps, "predicted_s": t}
        other = "knapsack" if p["selection"] == "paper" else "paper"
        pbt = an.pbt.assign(paper=results["paper"]["mask"], knapsack=results["knapsack"]["mask"], cida=cmask)
        table = an.patterns.table
        details = {
            "budget": None if budget is None else int(budget),
            "selection": p["selection"],
            "verify_dropped": dropped,
            "dirty_policy": "writes go to the replica and mark it dirty; dirty data is flushed to the original when "
                            "the program ends (priced in the PBT's flush column)",
            "patterns": [{"pattern": int(i), **{k: _jsonable(v) for k, v in row.items()}}
                         for i, row in table.iterrows()],
            "pbt": [{"pattern": int(i), **{k: _jsonable(v) for k, v in row.items()}} for i, row in pbt.iterrows()],
            "selections": {
                rule: {"patterns": [int(x) for x in np.flatnonzero(r["mask"])],
                       "benefit": float(an.pbt["B"].to_numpy()[r["mask"]].sum()),
                       "space": int(an.pbt["space"].to_numpy()[r["mask"]].sum()),
                       "predicted_s": r["predicted_s"]}
                for rule, r in results.items()},
            "cida": {"patterns": [int(x) for x in np.flatnonzero(cmask)],
                     "space": int(an.pbt["cida_space"].to_numpy()[cmask].sum()), "predicted_s": t_cida},
        }
        if isinstance(an.original, Layout):
            layouts = {"*": an.original}
        else:
            layouts = dict(an.original)
        return Plan(
            scheme="ceda",
            layouts=layouts,
            replicas={f: [r] for f, r in chosen["replicas"].items()},
            routing=_routing(sorted(chosen["replicas"])),
            predicted_s=chosen["predicted_s"],
            baselines={"ORIG": t_orig, "CIDA": t_cida, f"CEDA-{other}": results[other]["predicted_s"]},
            details=details,
            params={k: _param(v, system) for k, v in p.items()},
            system_name=system.name,
        )


def _param(v, system):
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, Layout):
        return describe(v, system)
    if isinstance(v, dict):
        return {str(k): _param(x, system) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_param(x, system) for x in v]
    return str(v)


def _jsonable(v):
    if v is pd.NA or v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v
