"""Planners: turn a trace and a system into a :class:`~pario.plan.base.Plan`.

:data:`PLANNERS` is the registry (:class:`pario.registry.Registry`): planner name → class,
the one place a planner is added; every class follows :class:`~pario.plan.base.Planner`
(``Cls(**params).plan(trace, system, budget=None)``).  A planner's module (scipy/HiGHS and the
models) is imported on its first use, so loading a plan — what every MPI rank does with
``pario_plan`` — imports only :mod:`pario.plan.base`.  ``pario advise`` names the planners by
their ``scheme`` (:mod:`pario.plan.schemes`).
"""

from __future__ import annotations

from ..registry import Registry
from .base import Plan, Planner

PLANNERS = Registry("planner", {
    "layout-select": "pario.plan.layout_select:LayoutSelectPlanner",
    "padp": "pario.plan.padp:PADPPlanner",
    "psa": "pario.plan.psa:PSAPlanner",
    "ceda": "pario.plan.ceda:CEDAPlanner",
    "hybrid": "pario.plan.hybrid:HybridReplicationPlanner",
})


def get_planner(name: str, **params) -> Planner:
    """An instance of the planner registered as ``name`` (an unknown name or parameter is a
    one-line :class:`pario.ParioError`)."""
    return PLANNERS.create(name, **params)


__all__ = ["PLANNERS", "Plan", "Planner", "get_planner"]
