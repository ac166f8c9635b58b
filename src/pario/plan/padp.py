"""PADP: performance-aware data placement with varied stripe sizes (seed 003 §3.3).

For a request size r, p concurrent processes, c processes per client node, m HServers and
n SServers, PADP minimises (eq. 5)

    F = max{c·r·t, p·s·t} + p·max{α_h + h·β_h, α_s + s·β_s}   s.t.  m·h + n·s = r,  h, s ≥ 0

by splitting the two max terms into the four linear programs of eq. 6–13 (one per choice
of the active term of each max; the inactive terms become ≤ constraints), solved with
``scipy.optimize.linprog(method="highs")``; the best case wins.  With ``three_term=True``
(default) the network max is PSA's max{c·r·t, p·h·t, p·s·t} (SPEC §2.2), giving 6 LPs
(the extra ones only matter when h > s); ``three_term=False`` is eq. 6–13 as printed.

Beyond the LPs (documented deviations, docs/models.md):

- h = 0 (SServers only) and s = 0 (HServers only) are also evaluated with the server kind
  left out entirely (no α, no connection): F keeps α_h at h = 0, which would hide PADP's
  own ⟨0 KB, 32 KB⟩ result; the candidate with the least full cost T = T_E + F wins
  (T_E = max(c·(m'+n'), p)·e only changes when a kind is left out).
- Stripes are rounded to ``granularity`` (default 4 KiB): the four neighbours
  {⌊h⌋, ⌈h⌉} × {⌊s⌋, ⌈s⌉} are priced (a request of size r then puts h·r/W and s·r/W on each
  server, W = m·h + n·s) and the best kept; ``rounding_loss`` = T(rounded) − T(exact).
- A trace with several request sizes / ops: every distinct (op, size) class of a file gives
  one LP solution (with the class's most common concurrency p); every candidate is priced
  on *all* requests of the file with :class:`~pario.model.hybrid.HybridModel` and the
  cheapest becomes the file's layout (one layout per file, since a file has one layout).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from .. import ParioError
from ..layout import Striped
from ..model.common import batch_context, kind_params, pattern_mask
from ..model.hybrid import HybridModel, hybrid_request_cost
from .base import Plan, Planner, file_rows
from ..arrays import unique

NET_TERMS = ("crt", "pst", "pht")
STO_TERMS = ("H", "S")


def padp_F(h, s, *, p, c, m, n, r, e, t, alpha_h, beta_h, alpha_s, beta_s, three_term=True, full=True):
    """Cost of stripes ⟨h, s⟩ for a request of size r (vectorised over h, s).

    ``full=True``: T = T_E + T_X + T_S + T_T with unused kinds left out (what the planner
    minimises); ``full=False``: PADP's F of eq. 5 literally (α_h kept at h = 0, no T_E).
    Stripes need not sum to r: a request puts h·r/W on each HServer, W = m·h + n·s.
    """
    h = np.asarray(h, dtype=float)
    s = np.asarray(s, dtype=float)
    W = m * h + n * s
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(W > 0, r / np.where(W > 0, W, 1), 0.0)
    hh, ss = h * scale, s * scale
    if full:
        return hybrid_request_cost(p, c, m, n, hh, ss, r, e, t, alpha_h, beta_h, alpha_s, beta_s,
                                   three_term=three_term)["T"]
    net = [np.full(np.shape(hh), c * r * t), p * ss * t] + ([p * hh * t] if three_term else [])
    return np.maximum.reduce(net) + p * np.maximum(alpha_h + hh * beta_h, alpha_s + ss * beta_s)


def padp_lps(*, p, c, m, n, r, e, t, alpha_h, beta_h, alpha_s, beta_s, three_term=True) -> list[dict]:
    """The LPs of eq. 6–13 (6 with the three-term max).  Each entry: case name, status,
    h, s, F (PADP's F at the LP optimum, None if infeasible)."""
    if m <= 0 or n <= 0:
        return []
    # normalised variables u = h/r, w = s/r; objective in units of T0
    T0 = max(c * r * t + p * (alpha_h + alpha_s + r * (beta_h + beta_s)), 1e-300)
    net_coef = {"crt": (np.zeros(2), c * r * t), "pst": (np.array([0.0, p * r * t]), 0.0),
                "pht": (np.array([p * r * t, 0.0]), 0.0)}
    sto_coef = {"H": (np.array([p * r * beta_h, 0.0]), p * alpha_h), "S": (np.array([0.0, p * r * beta_s]), p * alpha_s)}
    nets = NET_TERMS if three_term else NET_TERMS[:2]
    out = []
    for a in nets:
        for b in STO_TERMS:
            A, rhs = [], []
            ca, ka = net_coef[a]
            for other in nets:
                if other != a:  # other ≤ a
                    co, ko = net_coef[other]
                    A.append((co - ca) / T0)
                    rhs.append((ka - ko) / T0)
            cb, kb = sto_coef[b]
            ob = "S" if b == "H" else "H"
            co, ko = sto_coef[ob]
            A.append((co - cb) / T0)
            rhs.append((kb - ko) / T0)
            res = linprog((ca + cb) / T0, A_ub=np.array(A), b_ub=np.array(rhs), A_eq=np.array([[m, n]]),
                          b_eq=np.array([1.0]), bounds=[(0, None), (0, None)], method="highs")
            case = f"{a}+{b}"
            if res.status != 0:
                out.append({"case": case, "status": int(res.status), "h": None, "s": None, "F": None})
                continue
            u, w = np.clip(res.x, 0, None)
            h, s = u * r, w * r
            F = float(res.fun * T0 + ka + kb)
            out.append({"case": case, "status": 0, "h": float(h), "s": float(s), "F": F})
    return out


def solve_padp(*, p, c, m, n, r, e, t, alpha_h, beta_h, alpha_s, beta_s, three_term=True,
               granularity: int = 4096) -> dict:
    """Optimal ⟨h, s⟩ for one request class (see module docstring).

    Returns h, s (exact optimum), T (its full cost), case, lps (all LP results),
    h_round, s_round, T_round, rounding_loss.
    """
    kw = dict(p=p, c=c, m=m, n=n, r=r, e=e, t=t, alpha_h=alpha_h, beta_h=beta_h, alpha_s=alpha_s,
              beta_s=beta_s, three_term=three_term)
    lps = padp_lps(**kw)
    cands = []
    for lp in lps:
        if lp["status"] == 0:
            cands.append((lp["h"], lp["s"], lp["case"]))
    if n > 0:
        cands.append((0.0, r / n, "h=0 (SServers only)"))
    if m > 0:
        cands.append((r / m, 0.0, "s=0 (HServers only)"))
    if not cands:
        raise ParioError("PADP needs at least one server")
    H = np.array([c_[0] for c_ in cands])
    S = np.array([c_[1] for c_ in cands])
    T = padp_F(H, S, **kw)
    best = int(np.argmin(T))
    h, s, case = cands[best]
    # rounding to the stripe granularity
    g = int(granularity)
    hs = sorted({int(np.floor(h / g)) * g, int(np.ceil(h / g)) * g}) if m > 0 else [0]
    ss = sorted({int(np.floor(s / g)) * g, int(np.ceil(s / g)) * g}) if n > 0 else [0]
    pairs = [(a, b) for a in hs for b in ss if a * m + b * n > 0]
    Tr = padp_F(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), **kw)
    k = int(np.argmin(Tr))
    return {"h": float(h), "s": float(s), "T": float(T[best]), "case": case, "lps": lps,
            "h_round": int(pairs[k][0]), "s_round": int(pairs[k][1]), "T_round": float(Tr[k]),
            "rounding_loss": float(Tr[k] - T[best])}


def kind_layout(system, h: int, s: int) -> Striped:
    """Striped layout over all servers of the system: stripe h on HServers, s on SServers."""
    stripes = tuple(h if srv.kind == "hdd" else s for srv in system.servers)
    if sum(stripes) == 0:
        raise ParioError("layout would have no data on any server")
    return Striped(tuple(range(system.n)), stripes)


def trace_classes(trace, system, rows, bid, p, c, seq) -> list[dict]:
    """Distinct (op, size) request classes of ``rows`` with their weight, p, c, pattern."""
    out = []
    op = trace.op[rows]
    L = trace.length[rows]
    for o in unique(op):
        for size in unique(L[op == o]):
            sel = rows[(op == o) & (L == size)]
            if size <= 0:
                continue
            pv, pc = unique(p[sel], return_counts=True)
            pk = int(pv[np.argmax(pc)])
            out.append({"op": int(o), "size": int(size), "count": int(len(sel)), "bytes": int(size) * len(sel),
                        "p": pk, "c": int(min(system.procs_per_node, pk)),
                        "sequential": bool(seq[sel].mean() > 0.5)})
    return out


def system_kinds(system):
    hs, ss = system.of_kind("hdd"), system.of_kind("ssd")
    return hs, ss, kind_params(system, hs), kind_params(system, ss)


def baseline_layouts(system) -> dict:
    """PADP §4.1 / PSA §4 baselines: DEF = fixed 64 KiB on all servers; RANDOM1 ⟨32K, 96K⟩,
    RANDOM2 ⟨96K, 32K⟩ (the paper's randomly chosen pairs)."""
    out = {"DEF": Striped.fixed(64 * 1024, range(system.n))}
    if system.of_kind("hdd") and system.of_kind("ssd"):
        out["RANDOM1"] = kind_layout(system, 32 * 1024, 96 * 1024)
        out["RANDOM2"] = kind_layout(system, 96 * 1024, 32 * 1024)
    return out


class PADPPlanner(Planner):
    """PADP seed 003 §3.3 (see module docstring).  Parameters: ``granularity`` (stripe
    rounding, bytes), ``three_term``, ``pattern`` (auto|random|sequential α), ``by``
    (batching: auto|time|order)."""

    name = "padp"
    paper = "PADP seed 003 §3.3 (varied stripes h, s by 4 LPs)"
    model_label = ("hybrid (PADP eq. 2–4)", "hybrid (PADP seed 003 §3.2 eq. 2–4)")
    defaults = {"granularity": 4096, "three_term": True, "pattern": "auto", "by": "auto"}

    def cost_model(self) -> HybridModel:
        """The hybrid closed form (PADP seed 003 eq. 2–4 / PSA seed 001 Tables 3–4) with the
        planner's ``pattern`` and ``three_term``."""
        return HybridModel(pattern=self.params["pattern"], three_term=self.params["three_term"])

    def plan(self, trace, system, budget=None) -> Plan:
        self.check_budget(budget)
        if len(trace) == 0:
            raise ParioError("PADP: the trace has no requests")
        prm = self.params
        model = self.cost_model()
        bid, p, c, _ = batch_context(trace, system, prm["by"])
        seq = pattern_mask(trace, prm["pattern"])
        hs, ss, (ah, bh), (as_, bs) = system_kinds(system)
        m, n = len(hs), len(ss)
        layouts, per_file = {}, {}
        for fi, fname in enumerate(trace.files):
            rows = np.flatnonzero(trace.file == fi)
            if len(rows) == 0:
                continue
            # dominant class first: among equal-cost candidates the first (most bytes) wins
            classes = sorted(trace_classes(trace, system, rows, bid, p, c, seq), key=lambda d: -d["bytes"])
            cands = {}
            for cl in classes:
                o, sq = cl["op"], int(cl["sequential"])
                sol = solve_padp(p=cl["p"], c=cl["c"], m=m, n=n, r=cl["size"], e=system.network.e,
                                 t=system.network.t, alpha_h=ah[o, sq], beta_h=bh[o], alpha_s=as_[o, sq],
                                 beta_s=bs[o], three_term=prm["three_term"], granularity=prm["granularity"])
                cl["solution"] = {k: v for k, v in sol.items()}
                cands[(sol["h_round"], sol["s_round"])] = kind_layout(system, sol["h_round"], sol["s_round"])
            _, sub, sb = file_rows(trace, fi, bid)
            costs = {hsv: model.trace_cost(sub, lay, system, batches=sb).predicted_s for hsv, lay in cands.items()}
            (h, s), cost = min(costs.items(), key=lambda kv: kv[1])
            layouts[fname] = cands[(h, s)]
            per_file[fname] = {"h": h, "s": s, "cost_s": cost, "classes": classes,
                               "candidates": [{"h": a, "s": b, "cost_s": v} for (a, b), v in costs.items()]}
        predicted = model.trace_cost(trace, layouts, system, batches=bid).predicted_s
        baselines = {name: model.trace_cost(trace, lay, system, batches=bid).predicted_s
                     for name, lay in baseline_layouts(system).items()}
        return Plan(scheme=self.name, layouts=layouts, predicted_s=predicted, baselines=baselines,
                    details={"model": model.name, "m": m, "n": n, "files": per_file},
                    params=self.plan_params(system), system_name=system.name)
