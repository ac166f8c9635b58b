"""CI-LAYOUT §4 layout selection and the stripe size × count search."""

from __future__ import annotations

import numpy as np
import pytest

from pario.layout import Regions, Striped
from pario.model import CILayoutModel, DistributionModel, classic_layouts
from pario.plan import PLANNERS, Plan
from pario.plan.layout_select import LayoutSelectPlanner, count_grid, stripe_grid
from pario.system import load_system
from pario.trace import Trace

KiB, MiB = 1024, 1 << 20


def ior(p, size, segments):
    rank = np.tile(np.arange(p), segments)
    k = np.repeat(np.arange(segments), p)
    return Trace.from_arrays(rank, None, np.zeros(len(rank), dtype=np.int8), (k * p + rank) * size,
                             np.full(len(rank), size))


@pytest.mark.parametrize("p,size,expect", [(96, 256 * KiB, "1-DV"), (1, 4 * MiB, "1-DH")])
def test_classic_choice_is_the_cheapest_of_three(p, size, expect):
    sysx = load_system("ci-layout-eth")
    t = ior(p, size, 4)
    plan = LayoutSelectPlanner(model="ci-layout", search=False).plan(t, sysx)
    m = CILayoutModel()
    costs = {k: m.trace_cost(t, lay, sysx).predicted_s for k, lay in classic_layouts(sysx, size).items()}
    info = plan.details["files"]["file"]
    assert info["classic"] == pytest.approx(costs)
    assert info["classic_choice"] == min(costs, key=costs.get) == expect
    assert plan.layouts["file"] == classic_layouts(sysx, size)[expect]
    assert plan.predicted_s == pytest.approx(min(costs.values()))


def test_search_is_brute_force_minimum_and_never_worse_than_classic(tmp_path):
    sysx = load_system("ceda-hdd8")
    rng = np.random.default_rng(1)
    t = Trace.from_arrays(np.tile(np.arange(8), 6), None, np.zeros(48, dtype=np.int8),
                          rng.integers(0, 64, 48) * 96 * KiB, np.full(48, 96 * KiB))
    plan = PLANNERS["layout-select"](min_stripe=16 * KiB, max_stripe=1 * MiB).plan(t, sysx)
    info = plan.details["files"]["file"]
    m = DistributionModel()
    brute = {(w, k): m.trace_cost(t, Striped.fixed(w, range(k)), sysx).predicted_s
             for w in stripe_grid(16 * KiB, 1 * MiB) for k in count_grid(8)}
    best = min(brute, key=brute.get)
    assert info["search_best"]["cost_s"] == pytest.approx(brute[best])
    assert info["cost_s"] <= min(info["classic"].values()) * (1 + 1e-12)
    assert info["gain_over_classic"] == pytest.approx(min(info["classic"].values()) / info["cost_s"] - 1)
    assert plan.baselines["classic-best"] == pytest.approx(min(info["classic"].values()))
    path = tmp_path / "p.json"
    plan.save(path, sysx)
    assert Plan.load(path, sysx).layouts == plan.layouts


def test_grids():
    assert stripe_grid(4096, 65536) == [4096, 8192, 16384, 32768, 65536]
    assert count_grid(8) == [1, 2, 4, 8] and count_grid(6) == [1, 2, 4, 6]


def test_per_region_search_prices_its_layout():
    sysx = load_system("ceda-hdd8")
    # first 8 MiB: one process, 1 MiB requests (wants all servers: 1-DH);
    # next 8 MiB, later in time: 8 processes, 1 MiB requests each (wants one server each: 1-DV)
    a = Trace.from_arrays(np.zeros(8), None, np.zeros(8, dtype=np.int8), np.arange(8) * MiB, np.full(8, MiB),
                          start=np.arange(8.0), end=np.arange(8.0) + 0.5)
    b = Trace.from_arrays(np.arange(8), None, np.zeros(8, dtype=np.int8), 8 * MiB + np.arange(8) * MiB,
                          np.full(8, MiB), start=np.full(8, 100.0), end=np.full(8, 101.0))
    t = Trace.concat([a, b])
    plan = LayoutSelectPlanner(regions=2, min_stripe=16 * KiB, max_stripe=1 * MiB).plan(t, sysx)
    info = plan.details["files"]["file"]
    lay = plan.layouts["file"]
    assert isinstance(lay, Regions) and [r.start for r in lay.regions] == [0, 8 * MiB]
    assert info["regions"]["cost_s"] < info["search_best"]["cost_s"]
    m = DistributionModel()
    assert plan.predicted_s == pytest.approx(m.trace_cost(t, lay, sysx).predicted_s)
    # each region's pick is the best candidate for the requests in it (brute force)
    for part, reg in ((a, lay.regions[0]), (b, lay.regions[1])):
        cands = list(classic_layouts(sysx, MiB).values()) + [
            Striped.fixed(w, range(k)) for w in stripe_grid(16 * KiB, MiB) for k in count_grid(8)]
        best = min(m.trace_cost(part, c, sysx).predicted_s for c in cands)
        assert m.trace_cost(part, reg.layout, sysx).predicted_s == pytest.approx(best)


def test_screening_keeps_the_full_search_choice():
    """Pricing the grid on a sample first (screen) must end on the same layout and cost as
    pricing every candidate on the whole trace, for a stationary workload."""
    from pario.plan.layout_select import LayoutSelectPlanner, screening_sample
    from pario.system import load_system
    from pario.workload import ior

    trace = ior(procs=8, xfer=16 << 10, block=1 << 20, segments=8, pattern="random", op="read", seed=3)
    system = load_system("ceda-hdd8")
    full = LayoutSelectPlanner(screen=0).plan(trace, system)
    fast = LayoutSelectPlanner(screen=800, keep=3).plan(trace, system)
    assert fast.details["files"]["ior.dat"]["screened_on"] < len(trace)
    assert fast.layouts == full.layouts and fast.predicted_s == full.predicted_s
    # the sample is made of whole batches
    from pario.model.batches import batch_ids
    bid = batch_ids(trace, "auto")
    rows = screening_sample(bid, 800)
    kept = set(bid[rows].tolist())
    assert all((bid == b).sum() == (bid[rows] == b).sum() for b in kept)
