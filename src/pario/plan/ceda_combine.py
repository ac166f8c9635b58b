"""CEDA's combined plan (He & Sun, seed 000 §4.5): the replicas of the chosen patterns.

The replicator copies the chosen patterns (:mod:`pario.plan.ceda_select`) in descending
benefit; the patterns of one file share one replica (one ExtentMap per file: the RMT content
of §4.6), a byte wanted by several of them placed once, for the pattern selected first
(Algorithm 1's claim, :mod:`pario.plan.ceda_place`).  A file with one chosen pattern is that
pattern's own placement from the analysis (:mod:`pario.plan.ceda_analyze`), not placed again.
A plan's time is the whole trace priced under its replicas (the other files under their
original layouts): by the model's ``trace_cost``, or — for a model with the compiled
capability — from the placed records as they are (:func:`records_cost`).
"""

from __future__ import annotations

import numpy as np

from ..arrays import unique
from ..trace import Trace
from .ceda_analyze import CEDAAnalysis
from .ceda_place import default_stripe, place_claims, records_map


def combined_replicas(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, *, mode: str = "ceda",
                      servers=None, stripe: int | None = None, name: str = "ceda") -> dict[str, dict]:
    """Replica extent maps per file for the chosen patterns (priority: descending benefit,
    as the replicator would copy them), one ExtentMap per file.  Returns file name →
    ``{"name", "layout", "patterns", "bytes", "datafiles"}``.

    A file with one chosen pattern is that pattern's own placement (same requests, same
    claim, same objects, replica files 1 …): the analysis's, not placed again."""
    return combined_with_records(trace, an, chosen, system, mode, servers, stripe, name)[0]


def combined_with_records(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, mode: str, servers, stripe,
                          name: str) -> tuple[dict[str, dict], dict[int, np.ndarray]]:
    """(:func:`combined_replicas`, and its extents as records by file index)."""
    reps, recs = {}, {}
    for f, (rec, pats_f) in combined_placed(trace, an, chosen, system, mode, servers, stripe).items():
        if mode == "ceda" and rec is None:  # a pattern's own placement
            emap = an.layouts[pats_f[0]]
            placed = getattr(an.layouts, "placed", None)
            rec = placed.rec[placed.bounds[pats_f[0]]:placed.bounds[pats_f[0] + 1]] if placed is not None else None
        else:
            emap = records_map(rec, an.per_file[f])
        reps[trace.files[f]] = {"name": name, "layout": emap, "patterns": pats_f if len(emap) else [],
                                "bytes": int(emap.length.sum()), "datafiles": int(len(unique(emap.datafile)))}
        recs[f] = rec
    return reps, recs


def combined_placed(trace: Trace, an: CEDAAnalysis, chosen: np.ndarray, system, mode: str, servers,
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
    stripe = stripe or default_stripe(an.per_file)
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
        ceda, cida = place_claims(trace, an.patterns.of_request, group, prio_of_pat, system.n, servers, stripe,
                                  an.orders, (mode,))
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


def records_cost(trace: Trace, an: CEDAAnalysis, recs: dict[int, np.ndarray], system, model) -> float:
    """The whole trace's time with replicas given as extent records by file index (the
    other files under their original layouts): :func:`plan_cost` of those replicas, priced
    from the records as they are, a chunk of batches at a time
    (:func:`pario.model.engine.price_extents_by_chunks`)."""
    from ..layout.extents_kernel import ExtentSet
    from ..model import engine

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
    per_batch, = engine.price_extents_by_chunks(prep, ExtentSet(rec, e0, e1, is_ext, an.per_file), system,
                                                **model.engine_terms(system))
    return float(per_batch.sum())


def _same_servers(a, b, system) -> bool:
    """Whether two ``servers`` parameters name the same replica servers."""
    fa = np.arange(system.n) if a is None else np.asarray(a, dtype=np.int64)
    fb = np.arange(system.n) if b is None else np.asarray(b, dtype=np.int64)
    return np.array_equal(fa, fb)


def plan_cost(trace, an: CEDAAnalysis, reps: dict[str, dict], system, model) -> float:
    """The whole trace's time under the replicas ``reps`` (file name → replica; the other
    files under their original layouts), priced by the model's ``trace_cost`` in the
    analysis's batches."""
    lay = {f: an.per_file[i] for i, f in enumerate(trace.files)}
    for f, r in reps.items():
        lay[f] = r["layout"]
    return float(model.trace_cost(trace, lay, system, batches=an.bid).predicted_s)
