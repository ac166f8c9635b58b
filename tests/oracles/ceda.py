"""The pre-issue-18 vectorised CEDA identifier, planner and analyzer (the tests' oracle).

These are the implementations of CEDA's stages (:mod:`pario.plan.ceda_identify`,
:mod:`pario.plan.ceda_place`, :mod:`pario.plan.ceda_analyze`, :mod:`pario.plan.ceda_combine`)
as they were before issue 18 ("Planning at scale"), kept unchanged as an independent check:
numpy over the whole trace, one lexsort after another, the claim of :func:`_claim` over
elementary segments, every pattern priced on a virtual trace through the model's
``trace_cost`` (:class:`pario.plan.ceda_analyze.ModelPricing`).  They implement the same steps
of the paper (CEDA seed 000 §4.2 identifier, §4.3 Algorithm 1, §4.4 analyzer eq. 5, §4.5
combined replicas).  :class:`ReferenceCEDAPlanner` is the CEDA planner running them, priced by
the reference distribution model (``oracles/models.py``), so the tests compare whole plans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oracles.models import reference_model
from oracles.patterns import segment
from pario import ParioError
from pario.arrays import unique
from pario.layout import ExtentMap, Layout
from pario.model import get_model
from pario.model.batches import batch_ids
from pario.plan.base import original_layouts
from pario.plan.ceda import CEDAPlanner
from pario.plan.ceda_analyze import CEDAAnalysis, ModelPricing, pbt_frame
from pario.plan.ceda_identify import AccessPatterns, _no_patterns, _pattern_table, _sequences
from pario.plan.ceda_identify import dense_ids as _dense
from pario.plan.ceda_place import default_stripe as _stripe_of
from pario.trace import Trace


@dataclass
class ReplicaExtents:
    """Placed replica extents (columns), for several groups at once, sorted by (group,
    offset).

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


def _extent_map(ext: ReplicaExtents, mask, default: Layout, datafile: np.ndarray) -> ExtentMap:
    return ExtentMap(ext.offset[mask], ext.length[mask], ext.server[mask], ext.local[mask], datafile, default)


def _file_replica(ext: ReplicaExtents, m, prio_of_pat: np.ndarray, n: int, mode: str, name: str,
                  default: Layout) -> dict:
    """One file's replica of a combined plan from its placed extents ``ext[m]``: the
    file's patterns in replica data files of their own, in priority order (CEDA: n files
    each, 1 + slot·n + l; CIDA: one each)."""
    pats_f = unique(ext.pattern[m])
    slot_arr = np.full(len(prio_of_pat), -1, dtype=np.int64)
    slot_arr[pats_f[np.argsort(prio_of_pat[pats_f], kind="stable")]] = np.arange(len(pats_f))
    base = slot_arr[ext.pattern[m]]
    datafile = 1 + base * (n if mode == "ceda" else 1) + ext.slot[m]
    emap = _extent_map(ext, m, default, datafile)
    return {"name": name, "layout": emap, "patterns": [int(p) for p in pats_f],
            "bytes": int(ext.length[m].sum()), "datafiles": int(len(unique(datafile)))}


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))



def identify_patterns(trace: Trace) -> AccessPatterns:
    """CEDA's identifier (seed 000 §4.2), see the module docstring.  Vectorised over
    requests; Python work is per stream (rank × file × op), not per request."""
    n = len(trace)
    seg = segment(trace, by_op=True)
    st = seg.streams.copy()
    ns = len(st)
    if n == 0:
        return _no_patterns(st)
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
    seq_key = _sequences(st, sig)
    # patterns numbered in order of first appearance in the trace
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
    table, st = _pattern_table(trace, st, seq_key, np.bincount(pat_row, minlength=npat).astype(np.int64),
                               np.bincount(pat_row, weights=trace.length, minlength=npat).astype(np.int64))
    return AccessPatterns(table, pat_row, st)


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


# ====================================================================== analyzer
def analyze(trace: Trace, system, original="fixed:64K", model="distribution", *, by: str = "auto",
            servers=None, cida_stripe: int | None = None, model_params: dict | None = None,
            with_cida: bool = False, flush: bool = True) -> CEDAAnalysis:
    """:func:`pario.plan.ceda_analyze.analyze` before issue 18: every pattern priced on a
    virtual trace by the model's ``trace_cost``."""
    model = get_model(model, **(model_params or {}))
    lay, per_file = original_layouts(original, trace, system)
    pats = identify_patterns(trace)
    bid = batch_ids(trace, by)
    layouts, space = plan_layouts(trace, pats, system, lay, mode="ceda", servers=servers)
    # CIDA claims the same bytes (same objects), so its replica size is the same c_p
    cida, cspace = (plan_layouts(trace, pats, system, lay, mode="cida", servers=servers, stripe=cida_stripe)
                    if with_cida else ({}, space))
    files = pats.table["file"].to_numpy() if len(pats) else np.zeros(0, dtype=np.int64)
    orig = {p: per_file[int(f)] for p, f in enumerate(files)}
    pricing = ModelPricing(trace, pats.of_request, bid, files, system, model)
    T_O = pricing.costs(orig)
    T_N = pricing.costs(layouts)
    T_C = pricing.costs(cida) if with_cida else np.full(len(files), np.nan)
    F = pricing.flush(layouts, orig) if flush else np.zeros(len(files))
    pbt = pbt_frame(pats, T_O, T_N, F, space, T_C, cspace)
    return CEDAAnalysis(pats, layouts, cida, pbt, bid, lay, per_file)


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
        out[trace.files[int(f)]] = _file_replica(ext, ext.group == f, prio_of_pat, n, mode, name, an.per_file[int(f)])
    return out


class ReferenceCEDAPlanner(CEDAPlanner):
    """:class:`pario.plan.ceda.CEDAPlanner` on the stages above, priced by the reference
    distribution model: no compiled path anywhere (the pre-issue-18 planner)."""

    analyze_stage = staticmethod(analyze)
    combine_stage = staticmethod(combined_replicas)

    def cost_model(self):
        return reference_model(super().cost_model())
