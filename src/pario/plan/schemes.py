"""The schemes of ``pario advise``: every planner of :data:`pario.plan.PLANNERS`, by scheme name.

A scheme is a registered planner; its name is the planner's ``scheme`` — its registry name,
except CI-LAYOUT's layout selection, named after its paper (``ci-layout``; ``layout-select``
is accepted too).  ``pario advise --schemes`` takes these names; each is planned through the
:class:`~pario.plan.base.Planner` interface.
"""

from __future__ import annotations

from .. import ParioError
from . import PLANNERS

#: scheme names that are not their planner's registry name (kept here so that parsing
#: ``--schemes`` imports no planner)
_RENAMED = {"layout-select": "ci-layout"}

SCHEMES: dict[str, dict[str, str]] = {_RENAMED.get(name, name): {"planner": name} for name in PLANNERS}


def parse_schemes(text: str | None) -> list[str]:
    """``"all"`` / comma list → scheme names (validated, order kept, duplicates dropped)."""
    if text is None or text.strip().lower() == "all":
        return list(SCHEMES)
    out: list[str] = []
    for item in text.split(","):
        name = item.strip().lower()
        if not name:
            continue
        name = _RENAMED.get(name, name)
        if name not in SCHEMES:
            raise ParioError(f"unknown scheme {name!r} (known: {', '.join(SCHEMES)}, all)")
        if name not in out:
            out.append(name)
    if not out:
        raise ParioError("no scheme given (known: " + ", ".join(SCHEMES) + ", all)")
    return out


def planner_class(scheme: str):
    """The planner class of a scheme (only that planner's module is imported)."""
    return PLANNERS[SCHEMES[scheme]["planner"]]


def make_planner(scheme: str, **params):
    """Instance of a scheme's planner; parameters the planner does not know are dropped
    (e.g. ``original`` for layout planners that have their own baselines)."""
    cls = planner_class(scheme)
    return cls(**{k: v for k, v in params.items() if k in cls.defaults and v is not None})
