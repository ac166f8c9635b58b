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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import ParioError
from ..layout import ExtentMap, Layout, Striped, describe, layout_for_files
from ..model.base import resolve_layout
from ..model.batches import batch_ids
from ..trace import Trace
from ..trace.core import OP_NAMES, READ, WRITE
from ..trace.patterns import segment
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


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))



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


# ====================================================================== identifier
@dataclass(frozen=True)
class AccessPatterns:
    """The identifier's result (CEDA seed 000 §4.2).

    ``table``: one row per access pattern (index = pattern id): ``file`` (index),
    ``file_name``, ``kind`` (the least regular kind of its streams: contiguous < strided <
    mixed < random), ``stride`` (when every stream is strided with one stride), ``size``
    (request size if constant), ``ops`` (read / write / read+write), ``repeated`` (bool),
    ``ranks``, ``requests``, ``bytes`` (requested, counting repeats), ``template``.
    ``of_request``: pattern id of every trace row.  ``streams``: the identifier's streams
    with their ``sequence`` and ``pattern``.
    """

    table: pd.DataFrame
    of_request: np.ndarray
    streams: pd.DataFrame

    def __len__(self) -> int:
        return len(self.table)


def identify_patterns(trace: Trace) -> AccessPatterns:
    """CEDA's identifier (seed 000 §4.2), see the module docstring.  Vectorised over
    requests; Python work is per stream (rank × file × op), not per request."""
    n = len(trace)
    seg = segment(trace, by_op=True)
    st = seg.streams.copy()
    ns = len(st)
    if n == 0:
        empty = pd.DataFrame(columns=["file", "file_name", "kind", "stride", "size", "ops", "repeated",
                                      "ranks", "requests", "bytes", "template"])
        return AccessPatterns(empty, np.zeros(0, dtype=np.int64), st)
    rows, stream = seg.rows, seg.stream
    s_first = np.flatnonzero(np.r_[True, stream[1:] != stream[:-1]])
    off, ln = trace.offset[rows], trace.length[rows]
    # order-independent signature of a stream's multiset of extents
    h = _splitmix(off.astype(np.uint64)) ^ _splitmix(ln.astype(np.uint64) + np.uint64(0x632BE59BD9B4E019))
    sig = np.add.reduceat(h, s_first)
    # in-stream repetition: distinct (offset, length) < requests
    d = _dense(stream, off, ln)
    first_of = np.r_[True, np.diff(np.sort(d)) != 0]
    distinct = np.bincount(stream[np.argsort(d, kind="stable")][first_of], minlength=ns)
    st["self_repeat"] = distinct < st["requests"].to_numpy()
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
    # patterns numbered in order of first appearance in the trace
    st["pattern"] = pat_of_seq[st["sequence"].to_numpy()]
    of_stream_row = np.empty(n, dtype=np.int64)
    of_stream_row[rows] = stream
    pat_row = st["pattern"].to_numpy()[of_stream_row]
    first_row = np.full(pat_row.max() + 1, n, dtype=np.int64)
    np.minimum.at(first_row, pat_row, np.arange(n))
    renum = np.empty_like(first_row)
    renum[np.lexsort((first_row, np.zeros_like(first_row)))] = np.arange(len(first_row))
    pat_row = renum[pat_row]
    st["pattern"] = renum[st["pattern"].to_numpy()]

    npat = int(pat_row.max()) + 1
    st["template"] = seq_key.to_numpy()[st["sequence"].to_numpy()]
    g = st.groupby("pattern", sort=True)
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
        "requests": np.bincount(pat_row, minlength=npat).astype(np.int64),
        "bytes": np.bincount(pat_row, weights=trace.length, minlength=npat).astype(np.int64),
        "template": g["template"].first().to_numpy(),
    })
    table.loc[~uni_stride, "stride"] = pd.NA
    table.loc[~uni_size, "size"] = pd.NA
    table.index.name = "pattern"
    st = st.drop(columns=["_strided", "_sized"])
    return AccessPatterns(table, pat_row, st)


# ====================================================================== planner (Algorithm 1)
@dataclass
class ReplicaExtents:
    """Placed replica extents (columns), for several groups at once.

    ``group`` (the claim group: a pattern, or a file for a combined plan), ``pattern``,
    ``offset``, ``length`` (logical extent of the original file), ``server``, ``local``
    (offset in the replica data file), ``slot`` (replica data file index inside the
    pattern: l = i mod n for CEDA, 0 for CIDA).  ``space``: replica bytes per pattern.
    """

    group: np.ndarray
    pattern: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    server: np.ndarray
    local: np.ndarray
    slot: np.ndarray
    space: np.ndarray

    def take(self, mask) -> "ReplicaExtents":
        return ReplicaExtents(self.group[mask], self.pattern[mask], self.offset[mask], self.length[mask],
                              self.server[mask], self.local[mask], self.slot[mask], self.space)


def _claim(group, start, end, prio):
    """Elementary pieces of ``[start, end)`` owned by their highest-priority claimant.

    Returns (piece index, seg_start, seg_end) of every owned elementary segment: within a
    group, each byte covered by several pieces goes to the piece with the smallest ``prio``.
    """
    m = len(start)
    if m == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    bg = np.concatenate([group, group])
    bp = np.concatenate([start, end])
    o = np.lexsort((bp, bg))
    sg, sp = bg[o], bp[o]
    new = np.r_[True, (sg[1:] != sg[:-1]) | (sp[1:] != sp[:-1])]
    up = sp[new]
    uid = np.empty(2 * m, dtype=np.int64)
    uid[o] = np.cumsum(new) - 1
    a, b = uid[:m], uid[m:]
    cnt = b - a
    rep = np.repeat(np.arange(m), cnt)
    within = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    segid = a[rep] + within
    o2 = np.lexsort((prio[rep], segid))
    first = np.r_[True, segid[o2][1:] != segid[o2][:-1]]
    win = o2[first]
    piece = rep[win]
    s = segid[win]
    return piece, up[s], up[s + 1]


def place_objects(trace: Trace, rows: np.ndarray, group: np.ndarray, slot_key: np.ndarray, pattern: np.ndarray,
                  n_servers: int, servers=None, *, mode: str = "ceda", stripe: int = 65536) -> ReplicaExtents:
    """Algorithm 1 (CEDA seed 000 §4.3) for many patterns at once (vectorised).

    ``rows``: trace rows to place; per row its claim ``group``, ``slot_key`` (priority of
    its pattern inside the group: lower claims first) and ``pattern``.  ``mode="ceda"``:
    objects (pattern, rank) in ascending rank, object i → replica file i mod n on server
    ``servers[i mod n]``; ``mode="cida"``: the pattern's objects concatenated into one
    replica file striped round-robin over ``servers`` with ``stripe``.
    """
    servers = np.arange(n_servers) if servers is None else np.asarray(servers, dtype=np.int64)
    n = len(servers)
    rows = np.asarray(rows, dtype=np.int64)
    keep = trace.length[rows] > 0
    rows, group, slot_key, pattern = rows[keep], group[keep], slot_key[keep], pattern[keep]
    npat = int(pattern.max()) + 1 if len(pattern) else 0
    rank = trace.rank[rows].astype(np.int64)
    order = trace.order[rows]
    start = trace.offset[rows]
    end = start + trace.length[rows]
    prio = np.empty(len(rows), dtype=np.int64)
    prio[np.lexsort((rows, order, rank, slot_key, group))] = np.arange(len(rows))
    piece, s, e = _claim(group, start, end, prio)
    # object order: (group, slot, rank, order, row) = prio, then logical offset inside a request
    o = np.lexsort((s, prio[piece]))
    piece, s, e = piece[o], s[o], e[o]
    L = e - s
    pat = pattern[piece]
    rk = rank[piece]
    space = np.bincount(pat, weights=L, minlength=npat).astype(np.int64)
    if len(piece) == 0:
        z = np.zeros(0, dtype=np.int64)
        return ReplicaExtents(z, z, z, z, z, z, z, space)
    obj_change = np.r_[True, (group[piece][1:] != group[piece][:-1]) | (pat[1:] != pat[:-1]) | (rk[1:] != rk[:-1])]
    obj = np.cumsum(obj_change) - 1
    obj_first = np.flatnonzero(obj_change)
    obj_pat = pat[obj_first]
    obj_size = np.bincount(obj, weights=L).astype(np.int64)
    within_obj = (np.cumsum(L) - L) - (np.cumsum(obj_size) - obj_size)[obj]
    obj_grp = group[piece][obj_first]
    pat_change = np.r_[True, (obj_pat[1:] != obj_pat[:-1]) | (obj_grp[1:] != obj_grp[:-1])]
    pat_start = np.maximum.accumulate(np.where(pat_change, np.arange(len(obj_pat)), 0))
    i = np.arange(len(obj_pat)) - pat_start  # object index within its pattern (ascending rank)
    if mode == "ceda":
        l = i % n
        # objects of one (pattern, file l) follow each other in ascending i
        ok = np.lexsort((i, l, pat_start))
        sz = obj_size[ok]
        grp_change = np.r_[True, (pat_start[ok][1:] != pat_start[ok][:-1]) | (l[ok][1:] != l[ok][:-1])]
        csum = np.cumsum(sz) - sz
        gstart = np.maximum.accumulate(np.where(grp_change, csum, 0))
        base = np.empty(len(ok), dtype=np.int64)
        base[ok] = csum - gstart
        local = base[obj] + within_obj
        server = servers[l[obj]]
        slot = l[obj]
    elif mode == "cida":
        pat_bytes_before = np.cumsum(obj_size) - obj_size
        v0 = pat_bytes_before - pat_bytes_before[pat_start]  # virtual offset of each object in its pattern file
        v = v0[obj] + within_obj
        # split at stripe boundaries of the virtual replica file
        first_chunk = v // stripe
        last_chunk = (v + L - 1) // stripe
        cnt = last_chunk - first_chunk + 1
        rep = np.repeat(np.arange(len(v)), cnt)
        k = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        cs = np.maximum((first_chunk[rep] + k) * stripe, v[rep])
        ce = np.minimum((first_chunk[rep] + k + 1) * stripe, v[rep] + L[rep])
        s = s[rep] + (cs - v[rep])
        L = ce - cs
        chunk = cs // stripe
        server = servers[chunk % n]
        local = (chunk // n) * stripe + cs % stripe
        slot = np.zeros(len(rep), dtype=np.int64)
        piece = piece[rep]
        pat = pat[rep]
    else:
        raise ParioError(f"unknown placement {mode!r}")
    grp = group[piece]
    # merge extents that continue both logically and physically
    e = s + L
    le = local + L
    cont = np.r_[False, (grp[1:] == grp[:-1]) & (pat[1:] == pat[:-1]) & (s[1:] == e[:-1])
                 & (server[1:] == server[:-1]) & (slot[1:] == slot[:-1]) & (local[1:] == le[:-1])]
    heads = np.flatnonzero(~cont)
    merged_len = np.add.reduceat(L, heads) if len(heads) else L
    return ReplicaExtents(grp[heads], pat[heads], s[heads], merged_len, server[heads].astype(np.int64),
                          local[heads], slot[heads].astype(np.int64), space)


def _extent_map(ext: ReplicaExtents, mask, default: Layout, datafile: np.ndarray) -> ExtentMap:
    return ExtentMap(ext.offset[mask], ext.length[mask], ext.server[mask], ext.local[mask], datafile, default)


def plan_layouts(trace: Trace, patterns: AccessPatterns, system, original, *, mode: str = "ceda",
                 servers=None, stripe: int | None = None) -> tuple[dict[int, ExtentMap], np.ndarray]:
    """The planning layout of every pattern on its own (Algorithm 1): pattern id →
    ExtentMap (default = the original layout of its file, replica data files 1 … n), and
    the replica size c_p of each pattern (bytes)."""
    _, per_file = original_layouts(original, trace, system)
    rows = np.arange(len(trace))
    pid = patterns.of_request
    servers = np.arange(system.n) if servers is None else np.asarray(servers, dtype=np.int64)
    ext = place_objects(trace, rows, pid, np.zeros(len(rows), dtype=np.int64), pid, system.n, servers,
                        mode=mode, stripe=stripe or _stripe_of(per_file))
    out = {}
    grp_sorted = np.argsort(ext.group, kind="stable")
    bounds = np.searchsorted(ext.group[grp_sorted], np.arange(len(patterns) + 1))
    for p in range(len(patterns)):  # one ExtentMap per pattern
        idx = grp_sorted[bounds[p]:bounds[p + 1]]
        f = int(patterns.table["file"].iat[p])
        out[p] = _extent_map(ext, idx, per_file[f], 1 + ext.slot[idx])
    space = np.zeros(len(patterns), dtype=np.int64)
    space[: len(ext.space)] = ext.space
    return out, space


def _stripe_of(layouts) -> int:
    for lay in layouts:
        if isinstance(lay, Striped) and lay.is_fixed:
            return int(lay.stripes[0])
    return 65536


# ====================================================================== analyzer
def pattern_costs(trace: Trace, pattern_of_row: np.ndarray, layouts_by_pattern: dict[int, Any], system, model,
                  *, bid: np.ndarray, file_of_pattern) -> np.ndarray:
    """Cost of every pattern's requests on their own under its layout (one model call):
    each pattern gets a virtual file and its own batches (pattern, trace batch)."""
    npat = len(file_of_pattern)
    if len(trace) == 0 or npat == 0:
        return np.zeros(npat)
    names = tuple(f"{trace.files[int(f)]}#pattern{p}" for p, f in enumerate(file_of_pattern))
    vt = Trace.checked({**trace.cols, "file": pattern_of_row.astype(np.int32)}, names)
    nb = int(bid.max()) + 1
    key = pattern_of_row.astype(np.int64) * nb + bid
    ukey, vb = unique(key, return_inverse=True)
    cost = model.trace_cost(vt, {names[p]: layouts_by_pattern[p] for p in range(npat)}, system, batches=vb)
    per_batch = np.asarray(cost.per_batch, dtype=float)
    return np.bincount(ukey // nb, weights=per_batch, minlength=npat)


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
    npat = len(file_of_pattern)
    w = np.flatnonzero(trace.cols["op"] == WRITE)
    if npat == 0 or len(w) == 0:
        return np.zeros(npat)
    tw = trace.take(w)
    back = pattern_costs(Trace.checked({**tw.cols, "op": np.full(len(w), READ, dtype=tw.cols["op"].dtype)},
                                       tw.files), pattern_of_row[w], layouts, system, model, bid=bid[w],
                         file_of_pattern=file_of_pattern)
    home = pattern_costs(tw, pattern_of_row[w], orig, system, model, bid=bid[w], file_of_pattern=file_of_pattern)
    return back + home


@dataclass
class CEDAAnalysis:
    """Identifier + planner + analyzer output: the patterns, their planned layouts and the
    pattern benefit table ``pbt`` (columns T_O, T_N, flush, B = T_O − T_N − flush, space,
    cida_T, cida_space, non_contiguous)."""

    patterns: AccessPatterns
    layouts: dict[int, ExtentMap]
    cida_layouts: dict[int, ExtentMap]
    pbt: pd.DataFrame
    bid: np.ndarray
    original: Any
    per_file: list[Layout] = field(default_factory=list)


def analyze(trace: Trace, system, original="fixed:64K", model="distribution", *, by: str = "auto",
            servers=None, cida_stripe: int | None = None, model_params: dict | None = None,
            with_cida: bool = False, flush: bool = True) -> CEDAAnalysis:
    """CEDA's identifier, planner and analyzer (seed 000 §4.2–4.4): the PBT.

    ``with_cida=True`` also prices every pattern under CIDA's layout (PBT column
    ``cida_T``, NaN otherwise: one more model call).  ``flush``: B counts the copy of the
    pattern's dirty bytes back to the original when the program ends (:func:`flush_costs`);
    False is the paper's analyzer (B = T_O − T_N, §4.4: the PBT's flush column is 0)."""
    model = get_cost_model(model, model_params)
    lay, per_file = original_layouts(original, trace, system)
    pats = identify_patterns(trace)
    bid = batch_ids(trace, by)
    layouts, space = plan_layouts(trace, pats, system, lay, mode="ceda", servers=servers)
    # CIDA claims the same bytes (same objects), so its replica size is the same c_p
    cida, cspace = (plan_layouts(trace, pats, system, lay, mode="cida", servers=servers, stripe=cida_stripe)
                    if with_cida else ({}, space))
    files = pats.table["file"].to_numpy() if len(pats) else np.zeros(0, dtype=np.int64)
    orig = {p: per_file[int(f)] for p, f in enumerate(files)}
    T_O = pattern_costs(trace, pats.of_request, orig, system, model, bid=bid, file_of_pattern=files)
    T_N = pattern_costs(trace, pats.of_request, layouts, system, model, bid=bid, file_of_pattern=files)
    T_C = (pattern_costs(trace, pats.of_request, cida, system, model, bid=bid, file_of_pattern=files)
           if with_cida else np.full(len(files), np.nan))
    F = (flush_costs(trace, pats.of_request, layouts, orig, system, model, bid=bid, file_of_pattern=files)
         if flush else np.zeros(len(files)))
    pbt = pd.DataFrame({
        "file_name": pats.table["file_name"].to_numpy() if len(pats) else [],
        "kind": pats.table["kind"].to_numpy() if len(pats) else [],
        "requests": pats.table["requests"].to_numpy() if len(pats) else [],
        "T_O": T_O, "T_N": T_N, "flush": F, "B": T_O - T_N - F, "space": space,
        "cida_T": T_C, "cida_space": cspace,
        "non_contiguous": (pats.table["kind"].to_numpy() != "contiguous") if len(pats) else [],
    })
    pbt.index.name = "pattern"
    return CEDAAnalysis(pats, layouts, cida, pbt, bid, lay, per_file)


# ====================================================================== combined plan
def combined_replicas(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, *, mode: str = "ceda",
                      servers=None, stripe: int | None = None, name: str = "ceda") -> dict[str, dict]:
    """Replica extent maps per file for the chosen patterns (priority: descending benefit,
    as the replicator would copy them), one ExtentMap per file.  Returns file name →
    ``{"name", "layout", "patterns", "bytes", "datafiles"}``."""
    chosen_ids = np.flatnonzero(chosen)
    if len(chosen_ids) == 0:
        return {}
    B = an.pbt["B"].to_numpy()
    prio_of_pat = np.full(len(an.patterns), -1, dtype=np.int64)
    ordered = chosen_ids[np.lexsort((chosen_ids, -B[chosen_ids]))]
    prio_of_pat[ordered] = np.arange(len(ordered))
    pid = an.patterns.of_request
    rows = np.flatnonzero(prio_of_pat[pid] >= 0)
    fil = trace.file[rows].astype(np.int64)
    servers_arr = np.arange(system.n) if servers is None else np.asarray(servers, dtype=np.int64)
    ext = place_objects(trace, rows, fil, prio_of_pat[pid[rows]], pid[rows], system.n, servers_arr,
                        mode=mode, stripe=stripe or _stripe_of(an.per_file))
    n = len(servers_arr)
    out = {}
    for f in unique(fil):  # one ExtentMap per replicated file
        m = ext.group == f
        pats_f = unique(ext.pattern[m])
        slot_arr = np.full(len(an.patterns), -1, dtype=np.int64)
        slot_arr[pats_f[np.argsort(prio_of_pat[pats_f], kind="stable")]] = np.arange(len(pats_f))
        base = slot_arr[ext.pattern[m]]
        datafile = 1 + base * (n if mode == "ceda" else 1) + ext.slot[m]
        emap = _extent_map(ext, m, an.per_file[int(f)], datafile)
        out[trace.files[int(f)]] = {
            "name": name, "layout": emap, "patterns": [int(p) for p in pats_f],
            "bytes": int(ext.length[m].sum()), "datafiles": int(len(unique(datafile))),
        }
    return out


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

        def cost_of(mask, reps):
            key = np.packbits(mask).tobytes() + (b"cida" if any(r["name"] == "cida" for r in reps.values()) else b"")
            if key not in cache:
                cache[key] = _plan_cost(trace, an, reps, system, model)
            return cache[key]

        placed: dict[bytes, dict] = {}
        for rule in SELECTIONS:
            mask = select(an, budget, rule, p["top_n"])
            mkey = np.packbits(mask).tobytes()
            if mkey not in placed:
                placed[mkey] = combined_replicas(trace, an, mask, system, servers=p["servers"])
            reps = placed[mkey]
            results[rule] = {"mask": mask, "replicas": reps, "predicted_s": cost_of(mask, reps)}
        cmask = select_cida(an, budget)
        creps = combined_replicas(trace, an, cmask, system, mode="cida", servers=p["servers"],
                                  stripe=p["cida_stripe"], name="cida")
        t_cida = cost_of(cmask, creps)
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
                    placed[mkey] = combined_replicas(trace, an, mask, system, servers=p["servers"])
                reps = placed[mkey]
                t = cost_of(mask, reps)
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
