"""Planners with every compiled path replaced by its oracle (the tests' reference plans).

:func:`reference_planner` gives a scheme's planner priced by the reference twin of its own
model (``oracles/models.py``: no compiled capability, so the planner takes its exhaustive
paths), and CEDA's planner on the pre-issue-18 stages (``oracles/ceda.py``).
"""

from __future__ import annotations

from oracles.ceda import ReferenceCEDAPlanner
from oracles.models import reference_model
from pario.plan.ceda import CEDAPlanner
from pario.plan.schemes import planner_class


def reference_planner(scheme: str, **params):
    """An instance of the scheme's reference planner with ``params``."""
    cls = planner_class(scheme)
    if cls is CEDAPlanner:
        return ReferenceCEDAPlanner(**params)
    ref = type(f"Reference{cls.__name__}", (cls,), {"cost_model": lambda self: reference_model(cls.cost_model(self))})
    return ref(**params)
