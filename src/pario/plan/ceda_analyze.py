"""CEDA's analyzer (He & Sun, seed 000 §4.4): the pattern benefit table (PBT).

For every access pattern (:mod:`pario.plan.ceda_identify`) ``B = T_O − T_N`` (eq. 5): the
pattern's requests priced by the distribution-aware model (seed 000 §3,
:class:`pario.model.distribution.DistributionModel`) under the original layout and under its
planned replica layout (:mod:`pario.plan.ceda_place`).  Each pattern is priced on its own (as
the paper does), its requests keeping the trace's batches of concurrent requests: each
pattern is its own (virtual) file with its own batches, so nothing of one pattern interacts
with another.  Beyond the paper, B also counts the copy of a pattern's dirty replica bytes
back to the original when the program ends (:func:`flush_costs`; ``flush=False``: the
paper's B).

Two pricings of the same definition, chosen by the model's declared capability
(``CostModel.compiled``): :class:`PatternPricing` — the engine's service order counted by
pattern, priced by the compiled kernel, extent maps a chunk of batches at a time
(:func:`pario.model.engine.price_extents_by_chunks`; issue 18) — and :class:`ModelPricing` —
virtual traces priced by any model's ``trace_cost``.  The next stages are the combination
(:mod:`pario.plan.ceda_combine`) and the selection (:mod:`pario.plan.ceda_select`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..arrays import unique
from ..layout import ExtentMap, Layout
from ..model import get_model
from ..model.batches import batch_ids
from ..trace import Trace
from ..trace.core import READ, WRITE
from . import ceda_kernels as K
from .base import original_layouts
from .ceda_identify import AccessPatterns, TraceOrders, identify_patterns
from .ceda_place import PlacedExtents, default_stripe, place_each, planned_maps


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

        self.npat = len(file_of_pattern)
        self.system = system
        terms = model.engine_terms(system)
        self.alpha, self.network = terms["contiguous_alpha_table"], terms["network"]
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


class ModelPricing:
    """The analyzer's pricing by any cost model's ``trace_cost`` (a model without the
    compiled capability, e.g. the closed forms): every pattern's requests on their own as a
    virtual trace — each pattern its own virtual file and its own batches (pattern, trace
    batch) — priced in one model call (the pre-issue-18 analyzer's way)."""

    def __init__(self, trace, pattern_of_row, bid, file_of_pattern, system, model):
        self.trace, self.pattern_of_row, self.bid = trace, pattern_of_row, bid
        self.file_of_pattern = file_of_pattern
        self.system, self.model = system, model
        self.npat = len(file_of_pattern)

    def costs(self, layouts_by_pattern, trace=None, pattern_of_row=None, bid=None) -> np.ndarray:
        """Σ over each pattern's batches of its cost under its layout (of the trace's requests,
        or of ``trace`` with its ``pattern_of_row`` and ``bid``)."""
        if trace is None:
            trace, pattern_of_row, bid = self.trace, self.pattern_of_row, self.bid
        npat = self.npat
        if len(trace) == 0 or npat == 0:
            return np.zeros(npat)
        names = tuple(f"{self.trace.files[int(f)]}#pattern{p}" for p, f in enumerate(self.file_of_pattern))
        vt = Trace.checked({**trace.cols, "file": pattern_of_row.astype(np.int32)}, names)
        nb = int(bid.max()) + 1
        key = pattern_of_row.astype(np.int64) * nb + bid
        ukey, vb = unique(key, return_inverse=True)
        cost = self.model.trace_cost(vt, {names[p]: layouts_by_pattern[p] for p in range(npat)}, self.system,
                                     batches=vb)
        per_batch = np.asarray(cost.per_batch, dtype=float)
        return np.bincount(ukey // nb, weights=per_batch, minlength=npat)

    def writes(self, layouts, as_reads: bool) -> np.ndarray:
        """Every pattern's writes on their own (a virtual trace of the writes; ``as_reads``:
        read instead) under ``layouts``: one half of the flush."""
        w = np.flatnonzero(self.trace.cols["op"] == WRITE)
        if self.npat == 0 or len(w) == 0:
            return np.zeros(self.npat)
        tw = self.trace.take(w)
        if as_reads:
            tw = Trace.checked({**tw.cols, "op": np.full(len(w), READ, dtype=tw.cols["op"].dtype)}, tw.files)
        return self.costs(layouts, tw, self.pattern_of_row[w], self.bid[w])

    def original(self, orig, per_file):
        return self.costs(orig), None

    def replica(self, layouts: dict, back: bool):
        """(T_N, the flush's read-back) under the replica ExtentMaps ``layouts``."""
        return self.costs(layouts), (self.writes(layouts, as_reads=True) if back else np.zeros(self.npat))

    def home(self, orig):
        """The patterns' writes under the original layout (the flush's second half)."""
        return self.writes(orig, as_reads=False)

    def flush(self, layouts, orig):
        """:func:`flush_costs`: each pattern's writes read from its replica plus written to
        the original."""
        return self.writes(layouts, as_reads=True) + self.home(orig)


def pattern_pricing(trace, pattern_of_row, bid, file_of_pattern, system, model):
    """The analyzer's pricing: by the compiled kernel (:class:`PatternPricing`) when the model
    declares the compiled capability (``model.compiled``), else by the model's ``trace_cost``
    (:class:`ModelPricing`)."""
    return (PatternPricing if model.compiled else ModelPricing)(trace, pattern_of_row, bid, file_of_pattern,
                                                                system, model)


def pattern_costs(trace: Trace, pattern_of_row: np.ndarray, layouts_by_pattern: dict[int, Any], system, model,
                  *, bid: np.ndarray, file_of_pattern) -> np.ndarray:
    """Cost of every pattern's requests on their own under its layout (one model call):
    each pattern gets a virtual file and its own batches (pattern, trace batch)."""
    return pattern_pricing(trace, pattern_of_row, bid, file_of_pattern, system, model).costs(layouts_by_pattern)


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
    return pattern_pricing(trace, pattern_of_row, bid, file_of_pattern, system, model).flush(layouts, orig)


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
    model = get_model(model, **(model_params or {}))
    lay, per_file = original_layouts(original, trace, system)
    orders = TraceOrders.of(trace)
    pats = identify_patterns(trace, orders=orders)
    bid = batch_ids(trace, by)
    # CEDA's and CIDA's placements from one claim (same objects: CIDA's replica size is c_p too)
    stripe = cida_stripe or default_stripe(per_file)
    files = pats.table["file"].to_numpy() if len(pats) else np.zeros(0, dtype=np.int64)
    one_per_file = len(unique(files)) == len(files)  # (then a combined plan reuses the patterns' own placements)
    planned = place_each(trace, pats, system, per_file, servers, stripe, orders, ("ceda", "cida"), release=one_per_file)
    if one_per_file:
        orders = None
    space, cspace = planned["ceda"].space, planned["cida"].space
    orig = {p: per_file[int(f)] for p, f in enumerate(files)}
    defaults = [per_file[int(f)] for f in files]
    pricing = pattern_pricing(trace, pats.of_request, bid, files, system, model)
    T_O, orig_s = pricing.original(orig, per_file)
    compiled = isinstance(pricing, PatternPricing)
    if compiled:  # the records as placed, before their ExtentMaps are made
        T_N, back = pricing.replica(planned["ceda"], defaults, flush)  # the flush's read-back: same sub-requests
        T_C = pricing.replica(planned["cida"], defaults, False)[0] if with_cida else np.full(len(files), np.nan)
    layouts = planned_maps(planned.pop("ceda"), pats, per_file)
    cida = dict(planned_maps(planned["cida"], pats, per_file)) if with_cida else {}
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
