"""Planners: turn a trace and a system into a :class:`~pario.plan.base.Plan`.

:data:`PLANNERS` maps a scheme name to its planner class; every class follows
:class:`~pario.plan.base.Planner` (``Cls(**params).plan(trace, system, budget=None)``).
Planners whose module is not present yet are skipped.
"""

from __future__ import annotations

import importlib

from .base import Plan, Planner

PLANNERS: dict[str, type[Planner]] = {}

_MODULES = {
    "layout-select": ("layout_select", "LayoutSelectPlanner"),
    "padp": ("padp", "PADPPlanner"),
    "psa": ("psa", "PSAPlanner"),
    "ceda": ("ceda", "CEDAPlanner"),
    "hybrid": ("hybrid", "HybridReplicationPlanner"),
}

for _name, (_mod, _cls) in _MODULES.items():
    try:
        _m = importlib.import_module(f"{__name__}.{_mod}")
    except ModuleNotFoundError as _exc:  # planner not written yet
        if _exc.name != f"{__name__}.{_mod}":
            raise
        continue
    if hasattr(_m, _cls):
        PLANNERS[_name] = getattr(_m, _cls)


def get_planner(name: str, **params) -> Planner:
    """An instance of the planner registered as ``name``."""
    from .. import ParioError

    if name not in PLANNERS:
        raise ParioError(f"unknown planner {name!r} (known: {', '.join(sorted(PLANNERS))})")
    return PLANNERS[name](**params)


__all__ = ["PLANNERS", "Plan", "Planner", "get_planner"]
