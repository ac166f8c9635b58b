"""The compile of pario's kernels as a cost of its own (pario.jit) and how the whole job counts it."""

from __future__ import annotations

import numpy as np
import pytest

from pario.jit import CompileClock, warm
from pario.run.whole_job import judge, whole_job


def test_the_clock_counts_compiles_not_calls():
    """A kernel compiled inside the clock counts once per signature (numba's own list of the
    dispatcher's signatures is the oracle); a callee compiled inside its caller is part of the
    caller's compile, not a second kernel; calls of compiled code count nothing."""
    from numba import njit

    @njit
    def inner(x):
        return x * 2

    @njit
    def outer(x):
        return inner(x) + 1

    with CompileClock() as c:
        assert outer(1) == 3
        assert c.kernels == 1 and c.seconds > 0
        first = c.seconds
        for _ in range(100):
            outer(2)
        assert c.kernels == 1 and c.seconds == first
        assert outer(np.float64(1.5)) == 4.0
    assert c.kernels == 2 == len(outer.signatures) and c.seconds > first
    # the clock is gone after the block: a new compile is not counted
    assert outer(np.int8(1)) == 3
    assert c.kernels == 2


def test_warm_then_nothing_left_to_compile():
    """After warm(), a second warm() compiles nothing: every kernel it touched is in numba's
    on-disk cache (a kernel that cannot be cached would compile again here, in a new clock)."""
    warm()
    again = warm()
    assert (again.kernels, again.seconds) == (0, 0.0)


def _steps(advise, advise_compile, replicate):
    return [{"name": "setup", "start": 0.0, "seconds": 0.1, "compile_s": 0.0},
            {"name": "advise", "start": 0.1, "seconds": advise, "compile_s": advise_compile},
            {"name": "replicate", "start": 0.1 + advise, "seconds": replicate, "compile_s": 0.0}]


def _break_even(r1, r2, s):
    for n in range(1, 10_000):
        if n * r1 >= s + n * r2:
            return n
    return None


def test_whole_job_leaves_the_compile_out_and_reports_it():
    """An advise step of 5 s of which numba compiled 4 s: the setup judged (measured and
    predicted) holds advise's 1 s, the compile is reported apart with the whole job as this run
    paid it (ratio and break-even recounted by hand)."""
    w = whole_job(predicted={"ORIG": 2.0, "plan": 1.0}, setup={"seconds": 0.2}, steps=_steps(5.0, 4.0, 0.5),
                  run1_s=3.0, run2_s=2.0, run1_io_s=2.0)
    assert w["costs"]["advise_s"] == pytest.approx(1.0) and w["costs"]["compile_s"] == pytest.approx(4.0)
    assert w["setup_s"]["measured"] == pytest.approx(1.5)
    assert w["setup_s"]["predicted"] == pytest.approx(0.2 + 1.0)       # copies + advise as it ran, uncompiled
    assert w["ratio"]["measured"] == pytest.approx(3.0 / (1.5 + 2.0))
    assert w["break_even_runs"]["measured"] == _break_even(3.0, 2.0, 1.5) == 2
    # predicted runs: the model's I/O + run 1's 1 s outside its I/O
    assert w["ratio"]["predicted"] == pytest.approx(3.0 / (1.2 + 2.0))
    fu = w["first_use"]
    assert fu["setup_s"] == pytest.approx(5.5) and fu["ratio"] == pytest.approx(3.0 / 7.5)
    assert fu["break_even_runs"] == _break_even(3.0, 2.0, 5.5) == 6
    v = judge(w)
    assert v["verdict"] == "as predicted"      # 0.857 / 0.9375 = 0.91
    assert "compiled pario's kernels (4.000 s" in v["sentence"] and "0.40×, break-even after 6 runs" in v["sentence"]


def test_whole_job_without_a_compile_is_unchanged():
    """Nothing compiled: the steps' seconds are the costs, no first_use, no sentence about it."""
    w = whole_job(predicted={"ORIG": 2.0, "plan": 1.0}, setup={"seconds": 0.2}, steps=_steps(1.0, 0.0, 0.5),
                  run1_s=3.0, run2_s=2.0, run1_io_s=2.0)
    assert w["costs"]["advise_s"] == 1.0 and w["costs"]["compile_s"] == 0 and w["first_use"] is None
    assert w["setup_s"]["measured"] == pytest.approx(1.5)
    assert "compiled" not in judge(w)["sentence"]
