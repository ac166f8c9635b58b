"""Which copy of the data each request goes to: layouts, replicas and a plan's routing rules.

A :class:`Routing` holds, per file, the original layout and any replica layouts, and a
per-request choice among them.  It covers every case the planners produce:

- one layout for all files, or a dict file name → layout (``"*"`` = the rest);
- CEDA redirection (seed 000 §4.5): a replica :class:`~pario.layout.ExtentMap` whose
  ``default`` is the original layout – covered bytes go to the replica data files, the rest
  to the original (an extent map without default gets the file's original layout as
  default when it is used as a redirection replica);
- CI-LAYOUT hybrid replication (seed 002 §5): every request goes to the replica with the
  least modelled cost (``choice="cheapest"``), or to any per-request choice given as an
  array (trace row → replica index, 0 = original) or a callable
  ``choice(trace, per_replica_subrequests) -> array``.

Replica ``k`` of file ``f`` is a different data object on its servers from the original
(for the head-position model): object id = ``(f·(R+1) + k)·65536 + datafile``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from .. import ParioError
from ..layout import ExtentMap, Layout, SubRequests, map_requests
from ..arrays import unique

OBJ_DATAFILES = 1 << 16


@dataclass
class Routing:
    """Per-file original layouts, per-file replica layouts, and the per-request choice.

    ``rules`` are a plan's routing rules (``{"file", "op", "rule", "replica"}``, first match
    wins; rule ``original`` | ``replica`` | ``cheapest``); ``choice`` (array or callable)
    overrides them when given.
    """

    layouts: Any  # Layout or dict file → Layout
    replicas: dict[str, list[tuple[str, Layout]]] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)
    choice: Any = None  # None | "cheapest" | array | callable

    @classmethod
    def from_plan(cls, plan, base_layout: Layout | dict | None = None) -> "Routing":
        """A plan's layouts (falling back to ``base_layout`` for files it leaves unchanged),
        replicas and routing rules."""
        layouts: dict[str, Layout] = {}
        if isinstance(base_layout, dict):
            layouts.update(base_layout)
        elif base_layout is not None:
            layouts["*"] = base_layout
        layouts.update(plan.layouts)
        reps = {f: [(str(r.get("name", f"r{k + 1}")), r["layout"]) for k, r in enumerate(lst)]
                for f, lst in plan.replicas.items()}
        return cls(layouts=layouts, replicas=reps, rules=list(plan.routing))


def _rule_matches(rule: dict, fname: str, op: int) -> bool:
    f = rule.get("file", "*")
    o = str(rule.get("op", "*")).lower()
    return (f in ("*", fname)) and (o in ("*", "any", "both", ("read", "write")[op]))


def _request_cost(sub: SubRequests, n_req: int, op: np.ndarray, alpha, beta, e: float, t: float) -> np.ndarray:
    """Modelled time of each request alone: max over its sub-requests of e + s·t + α_rand + s·β."""
    if len(sub) == 0:
        return np.zeros(n_req)
    o = op[sub.req]
    c = e + sub.length * t + alpha[sub.server, o, 0] + sub.length * beta[sub.server, o]
    out = np.zeros(n_req)
    np.maximum.at(out, sub.req, c)
    return out


def route(trace, system, routing: "Routing | Layout | dict") -> tuple[SubRequests, np.ndarray]:
    """Sub-requests of every trace row under ``routing`` and their data-object ids.

    Returns ``(sub, obj)`` with ``sub.req`` = trace row, sorted by row.
    """
    if not isinstance(routing, Routing):
        routing = Routing(layouts=routing)
    files = trace.files
    used = set(unique(trace.file).tolist()) if len(trace) else set()
    if isinstance(routing.layouts, Layout):
        originals = [routing.layouts] * len(files)
    elif isinstance(routing.layouts, dict):
        originals = [routing.layouts.get(f, routing.layouts.get("*")) for f in files]
    else:
        raise ParioError(f"not a layout: {type(routing.layouts).__name__}")
    for fi, f in enumerate(files):
        if originals[fi] is None and fi in used:
            raise ParioError(f"no layout for file {f!r} (give --layout for files the plan leaves unchanged)")
    n_rep = 1 + max((len(routing.replicas.get(f, routing.replicas.get("*", []))) for f in files), default=0)
    alpha, beta = system.alpha_table(), system.beta_table()
    e, t = system.network.e, system.network.t
    parts, objs = [], []
    for fi, fname in enumerate(files):
        rows = np.flatnonzero(trace.file == fi)
        if len(rows) == 0:
            continue
        orig = originals[fi]
        reps = routing.replicas.get(fname, routing.replicas.get("*", []))
        cands: list[Layout] = [orig]
        for _, lay in reps:
            if isinstance(lay, ExtentMap) and lay.default is None:
                lay = replace(lay, default=orig)
            cands.append(lay)
        for lay in cands:
            bad = [s for s in lay.servers_used() if s >= system.n]
            if bad:
                raise ParioError(f"layout uses server index {bad[0]} but system {system.name!r} has {system.n} servers")
        off, ln, op = trace.offset[rows], trace.length[rows], trace.op[rows].astype(np.int64)
        if len(cands) == 1 and routing.choice is None:
            choice = np.zeros(len(rows), dtype=np.int64)
            subs = [map_requests(orig, off, ln)]
        else:
            subs = [map_requests(lay, off, ln) for lay in cands]
            choice = _choose(routing, trace, rows, fname, op, subs, [n for n, _ in reps], alpha, beta, e, t)
        for k, sub in enumerate(subs):
            keep = choice[sub.req] == k
            if not keep.any():
                continue
            s = sub.take(keep)
            parts.append(SubRequests(rows[s.req], s.server, s.local, s.length, s.datafile))
            objs.append((fi * n_rep + k) * OBJ_DATAFILES + s.datafile.astype(np.int64))
    if not parts:
        return SubRequests.empty(), np.zeros(0, dtype=np.int64)
    sub = SubRequests.concat(parts)
    obj = np.concatenate(objs)
    order = np.argsort(sub.req, kind="stable")
    return sub.take(order), obj[order]


def replica_choice(trace, system, routing: "Routing") -> tuple[np.ndarray, dict[int, list[Layout]]]:
    """Replica chosen for every trace row (0 = original) and each file's candidate layouts
    (original first, then its replicas), by the same rules as :func:`route`.  Used by the
    collective path, where each (file, replica) is a collective call of its own."""
    files = trace.files
    if isinstance(routing.layouts, Layout):
        originals = [routing.layouts] * len(files)
    else:
        originals = [routing.layouts.get(f, routing.layouts.get("*")) for f in files]
    alpha, beta = system.alpha_table(), system.beta_table()
    e, t = system.network.e, system.network.t
    choice = np.zeros(len(trace), dtype=np.int64)
    cands_of: dict[int, list[Layout]] = {}
    for fi, fname in enumerate(files):
        rows = np.flatnonzero(trace.file == fi)
        if len(rows) == 0:
            continue
        orig = originals[fi]
        if orig is None:
            raise ParioError(f"no layout for file {fname!r} (give --layout for files the plan leaves unchanged)")
        reps = routing.replicas.get(fname, routing.replicas.get("*", []))
        cands = [orig] + [replace(lay, default=orig) if isinstance(lay, ExtentMap) and lay.default is None else lay
                          for _, lay in reps]
        cands_of[fi] = cands
        if len(cands) == 1 and routing.choice is None:
            continue
        off, ln, op = trace.offset[rows], trace.length[rows], trace.op[rows].astype(np.int64)
        subs = [map_requests(lay, off, ln) for lay in cands]
        choice[rows] = _choose(routing, trace, rows, fname, op, subs, [n for n, _ in reps], alpha, beta, e, t)
    return choice, cands_of


def _choose(routing: Routing, trace, rows, fname, op, subs, rep_names, alpha, beta, e, t) -> np.ndarray:
    n = len(rows)
    c = routing.choice
    if callable(c):
        out = np.asarray(c(trace.take(rows), subs), dtype=np.int64)
    elif isinstance(c, str):
        if c != "cheapest":
            raise ParioError(f"unknown replica choice {c!r} (expected 'cheapest', an array or a callable)")
        out = _cheapest(subs, n, op, alpha, beta, e, t)
    elif c is not None:
        out = np.asarray(c, dtype=np.int64)[rows]
    else:
        out = np.zeros(n, dtype=np.int64)
        cheapest = None
        decided = np.zeros(n, dtype=bool)
        for rule in routing.rules:
            for o in (0, 1):
                if not _rule_matches(rule, fname, o):
                    continue
                sel = (op == o) & ~decided
                if not sel.any():
                    continue
                kind = rule.get("rule")
                if kind == "original":
                    out[sel] = 0
                elif kind == "replica":
                    name = rule.get("replica")
                    if name not in rep_names:
                        if len(rep_names) == 1 and name is None:
                            name = rep_names[0]
                        else:
                            raise ParioError(f"routing rule names replica {name!r} which file {fname!r} does not have")
                    out[sel] = 1 + rep_names.index(name)
                elif kind == "cheapest":
                    if cheapest is None:
                        cheapest = _cheapest(subs, n, op, alpha, beta, e, t)
                    out[sel] = cheapest[sel]
                else:
                    raise ParioError(f"unknown routing rule {kind!r}")
                decided |= sel
    if out.shape != (n,) or (n and (out.min() < 0 or out.max() >= len(subs))):
        raise ParioError(f"replica choice for file {fname!r} must give, per request, an index in 0..{len(subs) - 1}")
    return out


def _cheapest(subs, n, op, alpha, beta, e, t) -> np.ndarray:
    costs = np.vstack([_request_cost(s, n, op, alpha, beta, e, t) for s in subs])
    return np.argmin(costs, axis=0).astype(np.int64)


ChoiceFn = Callable[..., np.ndarray]
