"""The schemes of ``pario advise``: scheme name → planner registry name and the paper.

``pario advise --schemes`` takes these names; each is planned through the
:class:`~pario.plan.base.Planner` interface from :data:`pario.plan.PLANNERS`.  A scheme whose
planner is not registered (module missing) is reported as unavailable.
"""

from __future__ import annotations

from .. import ParioError

SCHEMES: dict[str, dict[str, str]] = {
    "ci-layout": {"planner": "layout-select", "paper": "CI-LAYOUT seed 002 §4 (layout selection by overall cost)"},
    "padp": {"planner": "padp", "paper": "PADP seed 003 §3.3 (varied stripes h, s by 4 LPs)"},
    "psa": {"planner": "psa", "paper": "PSA seed 001 §3.3 (capacity-aware stripe search)"},
    "ceda": {"planner": "ceda", "paper": "CEDA seed 000 §4 (cost-effective pattern replication)"},
    "hybrid": {"planner": "hybrid", "paper": "CI-LAYOUT seed 002 §5 (hybrid replication, cheapest replica)"},
}


def parse_schemes(text: str | None) -> list[str]:
    """``"all"`` / comma list → scheme names (validated, order kept, duplicates dropped)."""
    if text is None or text.strip().lower() == "all":
        return list(SCHEMES)
    out: list[str] = []
    for item in text.split(","):
        name = item.strip().lower()
        if not name:
            continue
        if name == "layout-select":
            name = "ci-layout"
        if name not in SCHEMES:
            raise ParioError(f"unknown scheme {name!r} (known: {', '.join(SCHEMES)}, all)")
        if name not in out:
            out.append(name)
    if not out:
        raise ParioError("no scheme given (known: " + ", ".join(SCHEMES) + ", all)")
    return out


def planner_class(scheme: str):
    """The planner class of a scheme, or None when its planner is not available (only that
    planner's module is imported)."""
    from . import _MODULES, _planner_class

    name = SCHEMES[scheme]["planner"]
    return _planner_class(name) if name in _MODULES else None


def make_planner(scheme: str, **params):
    """Instance of a scheme's planner; parameters the planner does not know are dropped
    (e.g. ``original`` for layout planners that have their own baselines)."""
    cls = planner_class(scheme)
    if cls is None:
        raise ParioError(f"scheme {scheme!r}: planner {SCHEMES[scheme]['planner']!r} is not available")
    known = getattr(cls, "defaults", {}) or {}
    return cls(**{k: v for k, v in params.items() if k in known and v is not None})
