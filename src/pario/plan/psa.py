"""PSA: performance- and space-aware stripe sizes for hybrid systems with small SSDs
(seed 001 §3.3, Algorithm 1 as corrected in SPEC §2.2).

Each SServer holds C_s bytes.  For a stripe pair ⟨h, s⟩ (m·h + n·s = S, the request size)
the first j = ⌊C_s / s⌋ rounds of the file — the requests whose offset is below
B = j·(m·h + n·s) — are *heterogeneous* (all m + n servers, Table 3), the rest are
*homogeneous* (HServers only, stripe S/m, Table 4).  Algorithm 1 (corrected: line 2 is
h ← S/m, line 6 is j ← C_s/s_s):

    for h from S/(m+n) to S/m step 4 KB:  s = (S − m·h)/n;  j = ⌊C_s/s⌋;
        total = Σ_i T_i (Table 3 for the first j requests in file order, Table 4 after);
    keep the pair with the least total

``search="paper"`` runs exactly that loop (plus the end point h = S/m the paper says it
considers); ``search="exact"`` prices *every* feasible pair on the ``granularity`` grid
(h and s both multiples of it, m·h + n·s = S, h from 0 to S/m — including PA's side s > h;
``granularity=1`` is every byte-exact pair) plus the end point h = S/m, plus the paper
loop's points, plus every grid h for which no grid s sums to S with s = ⌊(S − m·h)/n⌋
(and a 17-point h grid when S/m < 8·granularity), so that request sizes that are not
multiples of n·granularity still get heterogeneous candidates.  ``exact`` is the
planner's default: a superset of the paper's loop, so never worse under the model.  Both
are vectorised over candidates.

The output layout is a :class:`~pario.layout.Regions`: ``[0, B)`` striped over all servers
with ⟨h, s⟩, ``[B, ∞)`` over the HServers only with stripe S/m.  With several files, the
SServer capacity is used by the files in trace order (each takes what it needs from what
is left).  The request size S of a file is its dominant size (most bytes); requests of
other sizes are priced with the scaled per-server sizes (h·r/W, s·r/W), like
:class:`~pario.model.hybrid.HybridModel`.  Totals are Σ_i T_i / p_b (the same batch
accounting as the models; the paper's Σ T_i differs by the constant factor p and has the
same minimiser).

Baselines (PSA §4): DEF (fixed 64 KiB on all servers), PA (PADP's performance-only
stripes, :mod:`pario.plan.padp`), RANDOM1/2 (⟨32K, 96K⟩, ⟨96K, 32K⟩), each priced with the
same SServer capacity rule.
"""

from __future__ import annotations

import math

import numpy as np

from .. import ParioError
from ..layout import Region, Regions, Striped
from ..model.common import batch_context, pattern_mask, request_classes
from ..model.hybrid import HybridModel, hybrid_request_cost
from .base import Plan, Planner
from .padp import solve_padp, system_kinds, trace_classes
from ..arrays import unique

SEARCHES = ("paper", "exact")


def candidate_pairs(S: int, m: int, n: int, granularity: int = 4096, search: str = "exact") -> tuple[np.ndarray, np.ndarray]:
    """Candidate stripe pairs (h, s) for request size S (see module docstring)."""
    g = int(granularity)
    if search not in SEARCHES:
        raise ParioError(f"unknown PSA search {search!r} (paper | exact)")
    if m <= 0:
        raise ParioError("PSA needs at least one HServer")
    if n <= 0:
        return np.array([S / m]), np.array([0.0])
    if search == "paper":
        start = S / (m + n)
        H = np.arange(start, S / m + 1e-9, g, dtype=float)
        if len(H) == 0 or not math.isclose(H[-1], S / m):
            H = np.append(H, S / m)
        Sx = np.floor((S - m * H) / n)
        return H, np.maximum(Sx, 0.0)
    H = np.arange(0, S // m + 1, g, dtype=np.int64)
    rest = S - m * H
    ok = (rest >= 0) & (rest % (n * g) == 0)
    He, Se = H[ok].astype(float), (rest[ok] // n).astype(float)
    # h on the grid (and the paper's own points S/(m+n) + k·step) where no s on the grid
    # sums to S: s = ⌊(S − m·h)/n⌋ as in the paper's loop.  Without these, a request size
    # that is not a multiple of n·granularity (or smaller than it: BTIO, Tile-IO pieces)
    # had only the HServer-only end point h = S/m, i.e. PSA never used the SServers.
    Hx = np.concatenate([H[~ok], np.arange(S / (m + n), S / m, g)])
    if S // m < 8 * g:  # small requests: a finer h grid (17 points from 0 to S/m)
        Hx = np.concatenate([Hx, np.floor(np.linspace(0, S // m, 17))])
    Hx = np.floor(Hx)
    Sxx = np.floor((S - m * Hx) / n)
    keep = (Sxx > 0) & (Hx >= 0)
    H, Sx = np.concatenate([He, Hx[keep]]), np.concatenate([Se, Sxx[keep]])
    if not np.any(Sx == 0):  # the all-HServer end point (h = S/m), on the grid or not
        H, Sx = np.append(H, S / m), np.append(Sx, 0.0)
    pairs = np.unique(np.stack([H, Sx], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def heterogeneous_bytes(capacity: float, s: np.ndarray, W: np.ndarray) -> np.ndarray:
    """B = ⌊C_s / s⌋ · W: file bytes that fit while every SServer has room (∞ if s = 0)."""
    s = np.asarray(s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        j = np.where(s > 0, np.floor(capacity / np.where(s > 0, s, 1)), np.inf)
    return np.where(np.isinf(j), np.inf, j * W)


def totals(offsets_by_class: list[np.ndarray], t_het: np.ndarray, t_hom: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Total cost per candidate: Σ over classes u of (#requests of u with offset < B)·t_het[:, u]
    + (the rest)·t_hom[u].  ``offsets_by_class[u]`` sorted; t_het (candidates × classes)."""
    tot = np.zeros(len(B))
    for u, offs in enumerate(offsets_by_class):
        nhet = np.searchsorted(offs, B, side="left").astype(float) if len(offs) else np.zeros(len(B))
        nhet = np.where(np.isinf(B), len(offs), nhet)
        tot += nhet * t_het[:, u] + (len(offs) - nhet) * t_hom[u]
    return tot


def counts_below(cls: np.ndarray, offset: np.ndarray, ncls: int, B: np.ndarray) -> np.ndarray:
    """``out[u, k]`` = number of requests of class u with offset < B[k] (what
    ``np.searchsorted(sorted offsets of u, B[k])`` counts), without sorting the requests: each
    offset falls into one interval between the sorted distinct B values (one binary search
    among the few candidates), counted per (class, interval) and accumulated."""
    B = np.asarray(B, dtype=float)
    bs = np.unique(B)
    j = np.searchsorted(bs, offset, side="right")  # the number of B values <= the offset
    cnt = np.bincount(cls * (len(bs) + 1) + j, minlength=ncls * (len(bs) + 1)).reshape(ncls, len(bs) + 1)
    below = np.cumsum(cnt, axis=1)  # below[:, k] = #offsets with j <= k = #offsets < bs[k]
    return below[:, np.searchsorted(bs, B)]


def totals_from_counts(nhet: np.ndarray, sizes: np.ndarray, t_het: np.ndarray, t_hom: np.ndarray) -> np.ndarray:
    """:func:`totals` from ``nhet[u, k]`` (:func:`counts_below`) and the class sizes."""
    tot = np.zeros(t_het.shape[0])
    for u in range(len(sizes)):
        n_u = nhet[u].astype(float)
        tot += n_u * t_het[:, u] + (int(sizes[u]) - n_u) * t_hom[u]
    return tot


def psa_layout(system, h: int, s: int, B: float, S: int) -> Striped | Regions:
    """[0, B) on all servers with ⟨h, s⟩, then HServers only with stripe S/m."""
    hs = system.of_kind("hdd")
    tail = Striped.fixed(max(1, int(round(S / len(hs)))), hs)
    stripes = tuple(h if srv.kind == "hdd" else s for srv in system.servers)
    if sum(stripes) == 0 or B == 0:
        return tail
    head = Striped(tuple(range(system.n)), stripes)
    if math.isinf(B) or s == 0:
        return head
    return Regions((Region(0, int(B), head), Region(int(B), None, tail)))


class PSAPlanner(Planner):
    """PSA seed 001 §3.3 (see module docstring).  Parameters: ``granularity`` (step, bytes;
    the paper's 4 KiB), ``search`` (paper | exact), ``three_term``, ``pattern``, ``by``,
    ``capacity`` (bytes per SServer; default: the profile's smallest SServer capacity)."""

    name = "psa"
    paper = "PSA seed 001 §3.3 (capacity-aware stripe search)"
    model_label = ("hybrid (PSA Tables 3–4)", "hybrid (PSA seed 001 §3.2 Tables 3–4)")
    defaults = {"granularity": 4096, "search": "exact", "three_term": True, "pattern": "auto", "by": "auto",
                "capacity": None}

    def _file_costs(self, trace, rows, system, bid, H, Sx):
        """(t_het[cand, class], t_hom[class], (class of each of the file's requests, their
        offsets, number of classes))."""
        hs, ss, (ah, bh), (as_, bs) = system_kinds(system)
        m, n = len(hs), len(ss)
        e, t = system.network.e, system.network.t
        three = self.params["three_term"]
        # distinct (op, size, p, c, seq) classes of the file's requests in lexicographic order:
        # the trace's request classes (pario.model.common.RequestClasses, numbered in that
        # order) restricted to the file
        rc = request_classes(trace, system, self.params["by"], bid, self.params["pattern"])
        if len(rows) == len(trace):
            used, inv = np.arange(len(rc.first)), rc.cls
        else:
            used, inv = unique(rc.cls[rows], return_inverse=True)
        uniq = np.stack([rc.op[used], rc.r[used], rc.cp[used], rc.cc[used], rc.cseq[used]], axis=1)
        W = m * H + n * Sx
        t_het = np.zeros((len(H), len(uniq)))
        t_hom = np.zeros(len(uniq))
        for u, (o, r, pp, cc, sq) in enumerate(uniq):
            scale = r / W
            t_het[:, u] = hybrid_request_cost(pp, cc, m, n, H * scale, Sx * scale, r, e, t, ah[o, sq], bh[o],
                                              as_[o, sq], bs[o], three_term=three)["T"] / pp
            t_hom[u] = hybrid_request_cost(pp, cc, m, 0, r / m, 0, r, e, t, ah[o, sq], bh[o], 0.0, 0.0,
                                           three_term=three)["T"] / pp
        off = trace.offset if len(rows) == len(trace) else trace.offset[rows]
        return t_het, t_hom, (inv, off, len(uniq))

    def cost_model(self) -> HybridModel:
        """The hybrid closed form (PADP seed 003 eq. 2–4 / PSA seed 001 Tables 3–4) with the
        planner's ``pattern`` and ``three_term``."""
        return HybridModel(pattern=self.params["pattern"], three_term=self.params["three_term"])

    def plan(self, trace, system, budget=None) -> Plan:
        self.check_budget(budget)
        if len(trace) == 0:
            raise ParioError("PSA: the trace has no requests")
        prm = self.params
        hs, ss, (ah, bh), (as_, bs) = system_kinds(system)
        m, n = len(hs), len(ss)
        if m == 0:
            raise ParioError(f"PSA needs HServers; system {system.name!r} has none")
        cap = prm["capacity"]
        if cap is None:
            cap = float(min((system.servers[j].capacity for j in ss), default=math.inf))
        bid, p, c, _ = batch_context(trace, system, prm["by"])
        seq = pattern_mask(trace, prm["pattern"])
        model = self.cost_model()
        remaining = {"PSA": cap, "DEF": cap, "PA": cap, "RANDOM1": cap, "RANDOM2": cap}
        layouts: dict[str, dict] = {k: {} for k in remaining}
        per_file = {}
        g = prm["granularity"]
        for fi, fname in enumerate(trace.files):
            rows = np.flatnonzero(trace.file == fi)
            if len(rows) == 0:
                continue
            L = trace.length[rows]
            sizes, inv = unique(L, return_inverse=True)
            S = int(sizes[np.argmax(np.bincount(inv.ravel(), weights=L))])
            if S <= 0:
                continue
            extent = int((trace.offset[rows] + L).max())
            H, Sx = candidate_pairs(S, m, n, g, prm["search"])
            # baselines as extra candidates (priced by the same rule)
            extra = {"DEF": (64 * 1024, 64 * 1024 if n else 0)}
            if n:
                extra["RANDOM1"] = (32 * 1024, 96 * 1024)
                extra["RANDOM2"] = (96 * 1024, 32 * 1024)
                cls = max(trace_classes(trace, system, rows, bid, p, c, seq), key=lambda d: d["bytes"])
                o, sq = cls["op"], int(cls["sequential"])
                pa = solve_padp(p=cls["p"], c=cls["c"], m=m, n=n, r=cls["size"], e=system.network.e,
                                t=system.network.t, alpha_h=ah[o, sq], beta_h=bh[o], alpha_s=as_[o, sq], beta_s=bs[o],
                                three_term=prm["three_term"], granularity=g)
                extra["PA"] = (pa["h_round"], pa["s_round"])
            names = list(extra)
            Hall = np.concatenate([H, [extra[k][0] for k in names]])
            Sall = np.concatenate([Sx, [extra[k][1] for k in names]])
            t_het, t_hom, offsets = self._file_costs(trace, rows, system, bid, Hall, Sall)
            W = m * Hall + n * Sall
            rem = np.array([remaining["PSA"]] * len(H) + [remaining[k] for k in names])
            B = heterogeneous_bytes(rem, Sall, W)
            cls_of, off, ncls = offsets
            nhet_all = counts_below(cls_of, off, ncls, B)
            tot = totals_from_counts(nhet_all, np.bincount(cls_of, minlength=ncls), t_het, t_hom)
            k = int(np.argmin(tot[:len(H)]))
            h, s = int(round(Hall[k])), int(round(Sall[k]))
            chosen = {"PSA": (k, h, s)}
            for i, nm in enumerate(names):
                chosen[nm] = (len(H) + i, int(extra[nm][0]), int(extra[nm][1]))
            for nm, (idx, hh, sv) in chosen.items():
                layouts[nm][fname] = psa_layout(system, hh, sv, B[idx], S)
                used = 0.0 if sv == 0 else min(B[idx], extent) / W[idx] * sv
                remaining[nm] = max(0.0, remaining[nm] - math.ceil(used))
            per_file[fname] = {
                "S": S, "h": h, "s": s,
                "heterogeneous_bytes": None if math.isinf(B[k]) else int(B[k]),
                "heterogeneous_requests": int(nhet_all[:, k].sum()),
                "requests": int(len(rows)), "cost_s": float(tot[k]),
                "baselines": {nm: {"h": chosen[nm][1], "s": chosen[nm][2], "cost_s": float(tot[chosen[nm][0]])}
                              for nm in names},
                "search": [{"h": float(a), "s": float(b), "cost_s": float(v)} for a, b, v in zip(H, Sx, tot[:len(H)])],
            }
        predicted = model.trace_cost(trace, layouts["PSA"], system, batches=bid).predicted_s
        baselines = {nm: model.trace_cost(trace, layouts[nm], system, batches=bid).predicted_s
                     for nm in layouts if nm != "PSA" and layouts[nm]}
        return Plan(scheme=self.name, layouts=layouts["PSA"], predicted_s=predicted, baselines=baselines,
                    details={"model": model.name, "m": m, "n": n, "capacity": None if math.isinf(cap) else cap,
                             "files": per_file},
                    params=self.plan_params(system), system_name=system.name)
