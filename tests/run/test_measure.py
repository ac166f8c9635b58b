"""pario.run.measure's I/O times against independent counts: the busy time (a request in
flight) and the span (first request → last request) of traces with gaps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from pario.run.measure import io_busy, io_span
from pario.trace import Trace


def _trace(iv):
    s = np.array([a for a, _ in iv], dtype=float)
    e = np.array([b for _, b in iv], dtype=float)
    n = len(iv)
    return Trace.from_arrays(np.arange(n) % 3, np.zeros(n, np.int32), ["read"] * n, np.arange(n) * 4096,
                             np.full(n, 4096), start=s, end=e)


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(0, 400), hs.integers(0, 60)), min_size=1, max_size=40))
def test_busy_time_is_the_time_covered_by_some_request(iv):
    """Integer intervals: the busy time equals the number of unit cells some request covers
    (counted on a grid), the span the distance from the first start to the last end."""
    iv = [(a, a + d) for a, d in iv]
    grid = np.zeros(500, bool)
    for a, b in iv:
        grid[a:b] = True
    t = _trace(iv)
    assert io_busy(t) == pytest.approx(float(grid.sum()))
    assert io_span(t) == pytest.approx(max(b for _, b in iv) - min(a for a, _ in iv))
    assert io_busy(t) <= io_span(t) + 1e-9


def test_gaps_between_phases_are_not_io_time():
    """Two phases of 1 s with 0.5 s of the program's close and open between them (IOR -i 2)."""
    t = _trace([(0.0, 0.6), (0.2, 1.0), (1.5, 2.1), (1.7, 2.5)])
    assert io_busy(t) == pytest.approx(2.0)
    assert io_span(t) == pytest.approx(2.5)
