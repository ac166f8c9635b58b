"""CEDA's planner (He & Sun, seed 000 §4.3, Algorithm 1): where each pattern's replica bytes go.

For each access pattern (:mod:`pario.plan.ceda_identify`): the requested data of each process
is concatenated, in request order, into one object (a byte already in the object is not
appended again: line 5 "if r_j ∉ o_i"); ``n`` replica data files, one per server; object
``i`` (processes in ascending rank, i = 0, 1, …) goes to file ``i mod n``; objects in the same
file follow in ascending rank.  The result is a replica :class:`~pario.layout.ExtentMap` (the
RMT content: O_offset → server, R_offset, R_file = ``datafile`` ≥ 1) whose ``default`` is the
original layout.  Bytes wanted by several processes of a pattern (or by several selected
patterns of a file) are placed once: the earliest claimant wins (lower rank, then earlier
request; for the final plan, the pattern selected first).  CIDA's placement (the paper's ref.
[15]: the same objects concatenated into one replica file per pattern, striped round-robin
with the original stripe size) comes from the same claim.

At scale (issue 18): bytes are claimed by a sweep in offset order with a heap keyed by object
order (:mod:`pario.plan.ceda_kernels`), the owned fragments give the objects and both CEDA's
and CIDA's extents as lookup records (:class:`PlacedExtents`); ExtentMaps are made for the
patterns a plan keeps.  The next stage is the analyzer (:mod:`pario.plan.ceda_analyze`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .. import ParioError
from ..layout import ExtentMap, Layout, Striped
from ..trace import Trace
from . import ceda_kernels as K
from .base import original_layouts
from .ceda_identify import AccessPatterns, TraceOrders


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
        return records_map(self.rec[self.bounds[g]:self.bounds[g + 1]], default)


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
    ceda, cida = place_claims(trace, of_request, group_of_pattern, slot_of_pattern, n_servers, servers, stripe, orders,
                              (mode,))
    return ceda if mode == "ceda" else cida


def place_claims(trace, of_request, group_of_pattern, slot_of_pattern, n_servers, servers, stripe, orders, modes,
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
    if mode not in ("ceda", "cida"):
        raise ParioError(f"unknown placement {mode!r}")
    _, per_file = original_layouts(original, trace, system)
    ext = place_each(trace, patterns, system, per_file, servers, stripe, orders, (mode,))[mode]
    return dict(planned_maps(ext, patterns, per_file)), ext.space


def place_each(trace, patterns: AccessPatterns, system, per_file, servers, stripe, orders, modes,
               release: bool = False) -> dict:
    """Every pattern placed on its own (its own claim group), for the placements ``modes``:
    mode → PlacedExtents (group = pattern).  ``release``: see :func:`place_claims`."""
    npat = len(patterns)
    ceda, cida = place_claims(trace, patterns.of_request, np.arange(npat), np.zeros(npat, dtype=np.int64), system.n,
                              servers, stripe or default_stripe(per_file), orders, modes, release)
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


def planned_maps(ext: PlacedExtents, patterns: AccessPatterns, per_file) -> Mapping:
    """Pattern id → its ExtentMap (default: the original layout of its file), made on use."""
    return _PlannedMaps(ext, patterns, per_file)


def default_stripe(layouts) -> int:
    """CIDA's replica stripe: the first fixed stripe of the original layouts, else 64 KiB."""
    for lay in layouts:
        if isinstance(lay, Striped) and lay.is_fixed:
            return int(lay.stripes[0])
    return 65536


def records_map(rec: np.ndarray, default: Layout) -> ExtentMap:
    """The ExtentMap of extent records (offset, end, local, server·2^32 + data file)."""
    return ExtentMap(rec[:, 0], rec[:, 1] - rec[:, 0], rec[:, 3] >> 32, rec[:, 2], rec[:, 3] & 0xFFFFFFFF, default)
