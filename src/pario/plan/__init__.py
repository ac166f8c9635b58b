"""Planners: turn a trace and a system into a :class:`~pario.plan.base.Plan`.

:data:`PLANNERS` maps a scheme name to its planner class; every class follows
:class:`~pario.plan.base.Planner` (``Cls(**params).plan(trace, system, budget=None)``).
The planner modules (scipy/HiGHS and the models) are imported on first use of
:data:`PLANNERS` or :func:`get_planner` (PEP 562), so loading a plan — what every MPI rank
does with ``pario_plan`` — imports only :mod:`pario.plan.base`.
"""

from __future__ import annotations

import importlib

from .base import Plan, Planner

_MODULES = {
    "layout-select": ("layout_select", "LayoutSelectPlanner"),
    "padp": ("padp", "PADPPlanner"),
    "psa": ("psa", "PSAPlanner"),
    "ceda": ("ceda", "CEDAPlanner"),
    "hybrid": ("hybrid", "HybridReplicationPlanner"),
}


def _planner_class(name: str) -> type[Planner]:
    mod, cls = _MODULES[name]
    return getattr(importlib.import_module(f"{__name__}.{mod}"), cls)


def __getattr__(name: str):
    if name == "PLANNERS":
        planners = {n: _planner_class(n) for n in _MODULES}
        globals()["PLANNERS"] = planners
        return planners
    raise AttributeError(f"module 'pario.plan' has no attribute {name!r}")


def get_planner(name: str, **params) -> Planner:
    """An instance of the planner registered as ``name``."""
    from .. import ParioError

    if name not in _MODULES:
        raise ParioError(f"unknown planner {name!r} (known: {', '.join(sorted(_MODULES))})")
    return _planner_class(name)(**params)


__all__ = ["PLANNERS", "Plan", "Planner", "get_planner"]
