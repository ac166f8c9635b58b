"""The planner interface and the plan file.

A *planner* turns a trace and a system into a :class:`Plan` (scikit-learn style: the
constructor takes the planner's parameters, :meth:`Planner.plan` does the work)::

    plan = PADPPlanner(granularity=4096).plan(trace, system)
    plan.save("plan.json")
    plan = Plan.load("plan.json", system)

Plan file (JSON, ``"pario_plan": 1``)::

    {
      "pario_plan": 1,
      "scheme": "padp",                      # planner name (PLANNERS key)
      "system": "padp-6h2s",                 # system profile name (informational)
      "params": {...},                       # the planner's parameters
      "layouts": {"FILE": LAYOUT, "*": LAYOUT},  # per file (key "*" = every other file);
                                             # per-region layouts are a "regions" LAYOUT
      "replicas": {"FILE": [{"name": "r1", "layout": LAYOUT, ...}, ...]},
                                             # replica layouts (an "extents" LAYOUT is a
                                             # replica extent map: CEDA's RMT content)
      "routing": [{"file": "*", "op": "read", "rule": "cheapest"}, ...],
                                             # routing rules, first match wins; rule is
                                             # "original" | "cheapest" | "replica" (+ "replica": name)
      "collective_order": null | "romcio" | "cacio" | "hacio",
      "predicted_s": 1.23,                   # modelled time of the trace under the plan
      "baselines": {"DEF": 2.5, ...},        # modelled time under the baselines
      "details": {...}                       # scheme-specific (e.g. LP cases, search table)
    }

``LAYOUT`` is the JSON layout format of :mod:`pario.layout.spec` (server names).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import ParioError
from ..jsonutil import dump, plain
from ..registry import check_params
from ..layout import Layout, describe, layout_for_files, layout_from_dict, layout_to_dict

PLAN_VERSION = 1
ROUTING_RULES = ("original", "cheapest", "replica")
from .collective import ORDERS as COLLECTIVE_ORDERS  # noqa: E402


@dataclass
class Plan:
    """A plan: layouts per file (and region), replicas, routing, collective order, costs."""

    scheme: str
    layouts: dict[str, Layout] = field(default_factory=dict)
    replicas: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    routing: list[dict[str, Any]] = field(default_factory=list)
    collective_order: str | None = None
    predicted_s: float | None = None
    baselines: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    system_name: str = ""

    # ------------------------------------------------------------------ queries
    def layout_for(self, file: str) -> Layout | None:
        """The layout of ``file`` (or of ``"*"``), None when the plan leaves it unchanged."""
        return self.layouts.get(file, self.layouts.get("*"))

    def gain_over(self, baseline: str) -> float:
        """Relative speed-up over a baseline: T_baseline / T_plan − 1."""
        if self.predicted_s is None or baseline not in self.baselines:
            raise ParioError(f"plan has no cost for baseline {baseline!r}")
        if self.predicted_s <= 0:
            return math.inf
        return self.baselines[baseline] / self.predicted_s - 1.0

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self, system, lazy: bool = False) -> dict[str, Any]:
        """The plan's JSON form; ``lazy``: replica extents as
        :class:`pario.layout.spec.ExtentRows` (for :func:`pario.jsonutil.dump`)."""
        replicas = {}
        for f, reps in self.replicas.items():
            out = []
            for r in reps:
                d = {k: _plain(v) for k, v in r.items() if k != "layout"}
                d["layout"] = layout_to_dict(r["layout"], system, lazy)
                out.append(d)
            replicas[f] = out
        return {
            "pario_plan": PLAN_VERSION,
            "scheme": self.scheme,
            "system": self.system_name or system.name,
            "params": _plain(self.params),
            "layouts": {f: layout_to_dict(l, system, lazy) for f, l in self.layouts.items()},
            "replicas": replicas,
            "routing": _plain(self.routing),
            "collective_order": self.collective_order,
            "predicted_s": None if self.predicted_s is None else float(self.predicted_s),
            "baselines": {k: float(v) for k, v in self.baselines.items()},
            "details": _plain(self.details),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], system) -> "Plan":
        if not isinstance(d, dict) or d.get("pario_plan") != PLAN_VERSION:
            raise ParioError(f"not a pario plan (expected key 'pario_plan': {PLAN_VERSION})")
        try:
            replicas = {}
            for f, reps in (d.get("replicas") or {}).items():
                replicas[f] = [{**{k: v for k, v in r.items() if k != "layout"},
                                "layout": layout_from_dict(r["layout"], system)} for r in reps]
            routing = list(d.get("routing") or [])
            for rule in routing:
                if rule.get("rule") not in ROUTING_RULES:
                    raise ParioError(f"plan: unknown routing rule {rule.get('rule')!r} ({', '.join(ROUTING_RULES)})")
            order = d.get("collective_order")
            if order is not None and order not in COLLECTIVE_ORDERS:
                raise ParioError(f"plan: unknown collective order {order!r} ({', '.join(COLLECTIVE_ORDERS)})")
            return cls(
                scheme=str(d["scheme"]),
                layouts={f: layout_from_dict(l, system) for f, l in (d.get("layouts") or {}).items()},
                replicas=replicas,
                routing=routing,
                collective_order=order,
                predicted_s=d.get("predicted_s"),
                baselines={k: float(v) for k, v in (d.get("baselines") or {}).items()},
                details=dict(d.get("details") or {}),
                params=dict(d.get("params") or {}),
                system_name=str(d.get("system", "")),
            )
        except KeyError as exc:
            raise ParioError(f"plan is missing key {exc.args[0]!r}") from None
        except (TypeError, AttributeError, ValueError) as exc:
            raise ParioError(f"plan is malformed ({exc})") from None

    def save(self, path, system) -> None:
        """Write the plan's JSON to ``path``: streamed (replica extents a chunk at a time) into a
        temporary file beside it, then renamed over it — a failed write leaves the old file (a
        symbolic link or a path that is not a regular file, e.g. /dev/stdout, is written in
        place)."""
        path = Path(path)
        d = self.to_dict(system, lazy=True)
        if path.is_symlink() or (path.exists() and not path.is_file()):  # /dev/stdout, a FIFO: in place
            with open(path, "w", encoding="utf-8") as fp:
                dump(d, fp)
                fp.write("\n")
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            try:
                fp = open(tmp, "w", encoding="utf-8")
            except OSError as exc:  # name the file asked for, not the temporary one
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            with fp:
                dump(d, fp)
                fp.write("\n")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path, system) -> "Plan":
        return cls.from_dict(read_plan_json(path), system)


def read_plan_json(path) -> dict:
    """The JSON object of a plan file; a missing or unreadable file is a one-line ParioError."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise ParioError(f"plan file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParioError(f"{p}: not a JSON plan ({exc})") from None


def _plain(obj):
    """:func:`pario.jsonutil.plain`, refusing layouts (they belong in layouts / replicas)."""
    if isinstance(obj, Layout):
        raise TypeError("put layouts in Plan.layouts / Plan.replicas, not in details")
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return plain(obj)


def _param(v, system):
    """A planner parameter as plan JSON: plain values as they are, layouts described."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Layout):
        return describe(v, system)
    if isinstance(v, dict):
        return {str(k): _param(x, system) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_param(x, system) for x in v]
    return str(v)


def original_layouts(original, trace, system) -> tuple[Any, list[Layout]]:
    """(resolved original layout or dict, one layout per trace file): the files' layout before
    a plan (CEDA's and hybrid replication's ORIG)."""
    from ..model.base import resolve_layout

    lay = resolve_layout(original, system)
    return lay, layout_for_files(lay, trace.files)


def file_rows(trace, fi: int, *per_row):
    """(rows of file ``fi``, its sub-trace, each per-row array restricted to those rows).
    When the file holds every row the trace and the arrays themselves are returned (no
    copy; what is cached for them — batch ids, service order, request classes — serves)."""
    rows = np.flatnonzero(trace.file == fi)
    if len(rows) == len(trace):
        return (rows, trace, *per_row)
    return (rows, trace.take(rows), *(a[rows] for a in per_row))


class Planner:
    """Base class of the planners (scikit-learn style).

    ``Planner(**params)`` stores the parameters; :meth:`plan` computes a :class:`Plan`
    for a trace on a system.  ``budget`` is a space budget in bytes for schemes that add
    data (replicas); layout planners ignore it.  Subclasses set ``name`` (their key in
    :data:`pario.plan.PLANNERS`), ``paper`` and ``defaults`` (parameter → default value) and
    implement :meth:`plan`.  A plan's ``predicted_s`` is the time of the trace under the plan priced by
    :meth:`cost_model` with the batching ``params["by"]`` (``tests/test_contracts.py``
    checks it for every registered planner).
    """

    name = "base"
    paper = ""
    #: how ``pario advise`` labels the planner's own model when it is not the model's own
    #: label (PADP / PSA price by the hybrid closed form of their own paper): (short, long)
    model_label: tuple[str, str] | None = None
    defaults: dict[str, Any] = {}

    def __init__(self, **params):
        check_params(type(self), params, f"planner {self.name!r}")
        self.params = {**self.defaults, **params}

    def get_params(self) -> dict[str, Any]:
        return dict(self.params)

    def set_params(self, **params) -> "Planner":
        check_params(type(self), params, f"planner {self.name!r}")
        self.params.update(params)
        return self

    @staticmethod
    def check_budget(budget) -> None:
        """A space budget is bytes ≥ 0 (None: unlimited); every planner refuses another one,
        whether it adds data or not."""
        if budget is not None and not budget >= 0:
            raise ParioError("replica space budget must be >= 0")

    def cost_model(self):
        """The cost model the planner prices its plan and baselines with: from its parameters
        ``model`` (a registered name or a :class:`~pario.model.base.CostModel` instance) and
        ``model_params``."""
        from ..model import get_model

        return get_model(self.params["model"], **(self.params.get("model_params") or {}))

    def plan_params(self, system) -> dict[str, Any]:
        """The parameters as a plan file keeps them (layouts described, a model instance by its
        repr)."""
        return {k: _param(v, system) for k, v in self.params.items()}

    def plan(self, trace, system, budget: float | None = None) -> Plan:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
