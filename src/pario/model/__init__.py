"""Cost models: predicted time of a trace (or of one batch of concurrent requests) under a
layout on a system.

- :class:`~pario.model.distribution.DistributionModel` (``"distribution"``): CEDA seed 000
  §3 on exact sub-requests — the general evaluator.
- :class:`~pario.model.ci_layout.CILayoutModel` (``"ci-layout"``): CI-LAYOUT seed 002 §3,
  1-DH/1-DV/2-D closed forms (Table 2 reconstructed, SPEC §2.1).
- :class:`~pario.model.hybrid.HybridModel` (``"hybrid"``): PADP seed 003 eq. 2–4 / PSA
  seed 001 Tables 3–4 for HDD+SSD systems.

All follow :class:`~pario.model.base.CostModel`; :data:`MODELS` is the registry
(:class:`pario.registry.Registry`): name → class, the one place a model is added.
"""

from __future__ import annotations

from ..registry import Registry
from .base import Cost, CostModel, resolve_layout
from .batches import BATCHINGS, batch_ids, split
from .ci_layout import CILayoutModel, ci_layout_cost, classic_layouts
from .distribution import DistributionModel
from .hybrid import HybridModel, heterogeneous_cost, homogeneous_cost, hybrid_request_cost

MODELS = Registry("model", {
    "distribution": "pario.model.distribution:DistributionModel",
    "ci-layout": "pario.model.ci_layout:CILayoutModel",
    "hybrid": "pario.model.hybrid:HybridModel",
})


def get_model(model, **params) -> CostModel:
    """A cost model: ``model`` is a registered name (with its constructor ``params``) or a
    :class:`CostModel` instance, returned as it is (scikit-learn style: a model as a planner's
    parameter)."""
    if isinstance(model, CostModel):
        if params:
            from .. import ParioError

            raise ParioError(f"model {model.name!r} is given as an instance: its parameters are its own")
        return model
    return MODELS.create(model, **params)


__all__ = [
    "Cost", "CostModel", "MODELS", "get_model", "resolve_layout", "BATCHINGS", "batch_ids", "split",
    "DistributionModel", "CILayoutModel", "HybridModel", "ci_layout_cost", "classic_layouts",
    "hybrid_request_cost", "heterogeneous_cost", "homogeneous_cost",
]
