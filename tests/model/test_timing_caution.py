"""When advise's batching by time rests on timings a cache made (pario.model.batches.timing_caution)."""

from __future__ import annotations

import numpy as np

from pario.model.batches import CACHE_FACTOR, timing_caution
from pario.system import load_system
from pario.trace.core import Trace


def _trace(latency: float, size: int = 16384, n: int = 64, times: bool = True) -> Trace:
    rank = np.arange(n) % 4
    start = np.arange(n) * 1e-3
    return Trace.from_arrays(rank, np.zeros(n, int), np.zeros(n, int), np.arange(n) * size, np.full(n, size),
                             files=["f"], start=start if times else None, end=start + latency if times else None)


def _cheapest(system, size: int) -> float:
    """By hand from the servers: the least α of any op and pattern + size · the least β."""
    best = np.inf
    for s in system.servers:
        a = min(s.alpha_for(op, seq) for op in (0, 1) for seq in (False, True))
        b = min(s.beta_for(op) for op in (0, 1))
        best = min(best, max(a, size * b) if s.cost == "max" else a + size * b)
    return best


def test_a_cache_fast_trace_is_named_and_a_device_trace_is_not():
    system = load_system("ceda-hdd8")
    model = _cheapest(system, 16384)
    fast = model / (4 * CACHE_FACTOR)                   # 40× faster than any request the profile prices
    note = timing_caution(_trace(fast), system)
    assert note is not None and f"{round(model / fast)}×" in note and "--by order" in note
    assert f"{model * 1e3:.2f} ms" in note
    assert timing_caution(_trace(fast), system, "time") == note
    # at the profile's speed, slower, or just under the factor: no note
    assert timing_caution(_trace(model), system) is None
    assert timing_caution(_trace(model * 3), system) is None
    assert timing_caution(_trace(model / (CACHE_FACTOR * 0.9)), system) is None
    # batched otherwise, or no times to batch by: nothing to say
    assert timing_caution(_trace(fast), system, "order") is None
    assert timing_caution(_trace(fast, times=False), system) is None
