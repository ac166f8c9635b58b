"""Cost models: predicted time of a trace (or of one batch of concurrent requests) under a
layout on a system.

- :class:`~pario.model.distribution.DistributionModel` (``"distribution"``): CEDA seed 000
  §3 on exact sub-requests — the general evaluator.
- :class:`~pario.model.ci_layout.CILayoutModel` (``"ci-layout"``): CI-LAYOUT seed 002 §3,
  1-DH/1-DV/2-D closed forms (Table 2 reconstructed, SPEC §2.1).
- :class:`~pario.model.hybrid.HybridModel` (``"hybrid"``): PADP seed 003 eq. 2–4 / PSA
  seed 001 Tables 3–4 for HDD+SSD systems.

All follow :class:`~pario.model.base.CostModel`; :data:`MODELS` maps name → class.
"""

from __future__ import annotations

from .. import ParioError
from .base import Cost, CostModel, resolve_layout
from .batches import BATCHINGS, batch_ids, split
from .ci_layout import CILayoutModel, ci_layout_cost, classic_layouts
from .distribution import DistributionModel
from .hybrid import HybridModel, heterogeneous_cost, homogeneous_cost, hybrid_request_cost

MODELS: dict[str, type[CostModel]] = {
    "distribution": DistributionModel,
    "ci-layout": CILayoutModel,
    "hybrid": HybridModel,
}


def get_model(name: str, **params) -> CostModel:
    if name not in MODELS:
        raise ParioError(f"unknown model {name!r} (expected one of {', '.join(MODELS)})")
    return MODELS[name](**params)


__all__ = [
    "Cost", "CostModel", "MODELS", "get_model", "resolve_layout", "BATCHINGS", "batch_ids", "split",
    "DistributionModel", "CILayoutModel", "HybridModel", "ci_layout_cost", "classic_layouts",
    "hybrid_request_cost", "heterogeneous_cost", "homogeneous_cost",
]
