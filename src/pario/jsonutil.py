"""Plain JSON values from numpy-laden structures (one helper for models, plans and the CLI)."""

from __future__ import annotations

import math

import numpy as np


def plain(obj):
    """Recursively turn numpy arrays/scalars into lists/Python scalars, dict keys into strings,
    and non-finite floats into ``None`` (JSON has no NaN/inf)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
