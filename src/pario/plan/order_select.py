"""Choosing the request order of two-phase collective I/O for a plan (HACIO, seed 004).

Seed 004 §3 applies HACIO (Algorithm 1) whenever the file servers are heterogeneous
(``rule="paper"``).  Its own cost model — a barrier per cycle, a cycle costing its busiest
server (§2.2, Tables 1–3) — says HACIO wins only where the other orders leave servers idle
inside a cycle: fewer aggregators than servers, cycles holding fewer stripes than servers,
the worked example.  Where ROMCIO's or CACIO's cycles are balanced (16 aggregators and
4 MB cycles on 64 KB stripes, the paper's IOR setting) HACIO is slower, by a bound that no
order can beat (docs/RESULTS.md, HACIO).  Beyond the paper, pario therefore prices the
three orders (:data:`pario.plan.collective.ORDERS`) on the plan's layouts by simulating
the two-phase run of the trace's collective requests (:func:`pario.simulate.simulate`,
the same cycle model) and keeps the cheapest (``rule="model"``, the default).  Ties — times
equal to within :data:`TIE` (relative), i.e. the same sum added up in another order — go to
the earlier order of ``romcio, cacio, hacio`` (the simplest).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ParioError
from .collective import ORDERS

ORDER_RULES = ("model", "paper")
TIE = 1e-9   # relative: orders whose simulated times differ by less are tied (floating-point sums)


@dataclass(frozen=True)
class OrderChoice:
    """The chosen order, how (``rule``: model | paper | given), the order seed 004's rule
    gives, and the simulated time of every order priced (``model`` rule)."""

    order: str
    rule: str
    paper_order: str
    times: dict[str, float]

    def describe(self) -> str:
        if self.rule == "given":
            return f"{self.order.upper()} (given)"
        if not self.times:
            return f"{self.order.upper()} (seed 004's rule: HACIO on HDD + SSD servers, else ROMCIO)"
        t = ", ".join(f"{o.upper()} {s:.3f} s" for o, s in self.times.items())
        tail = "" if self.order == self.paper_order else f"; seed 004's rule would take {self.paper_order.upper()}"
        return f"{self.order.upper()} (simulated two-phase I/O: {t}{tail})"


def paper_order(system) -> str:
    """Seed 004's rule: HACIO on a system with both HServers and SServers, else ROMCIO."""
    kinds = {s.kind for s in system.servers}
    return "hacio" if {"hdd", "ssd"} <= kinds else "romcio"


def collective_time(trace, system, order: str, layout=None, *, plan=None, cb_buffer: int | None = None,
                    aggregators: int | None = None, nodes: int | None = None) -> float:
    """The time of ``trace``'s collective requests run through two-phase I/O in ``order`` on
    ``layout`` (or ``plan``'s layouts, replicas and routing over ``layout``): the makespan of
    the simulated run (:func:`pario.simulate.simulate`, ``collective=True``).  It is seed
    004's cost model (§2.2, Tables 1–3): the span is cut into one file domain per aggregator,
    each aggregator fills its ``cb_buffer`` cycle by cycle in the order's sequence (ROMCIO:
    offsets; CACIO: rotated by server; HACIO: Algorithm 1, HServers before SServers), all
    aggregators synchronise at every cycle, so a cycle lasts as long as its busiest server.
    The one function that prices an order: ``pario advise`` chooses the order with it
    (:func:`choose_order`) and ``pario run`` predicts both runs with it
    (:mod:`pario.run.predict`), so the two cannot disagree on a plan.  ``cb_buffer``,
    ``aggregators`` and ``nodes``: :func:`pario.plan.collective.two_phase` (left None: the
    trace's hints, else ROMIO's defaults)."""
    from ..simulate import simulate

    coll = trace.take(trace.collective.astype(bool))
    if len(coll) == 0:
        raise ParioError("the trace has no collective requests: no collective order to price")
    res = simulate(coll, system, layout, plan=plan, collective=True, order=order, cb_buffer=cb_buffer,
                   aggregators=aggregators, nodes=nodes)
    return float(res.makespan_s)


def choose_order(trace, system, layout=None, *, plan=None, cb_buffer: int | None = None,
                 aggregators: int | None = None, rule: str = "model", nodes: int | None = None) -> OrderChoice:
    """The collective order for ``trace``'s collective requests on ``layout`` (or ``plan``'s
    layouts); see the module docstring.  ``cb_buffer`` and ``aggregators`` are the run's
    two-phase settings (ROMIO's ``cb_buffer_size`` and ``cb_nodes``); left None they come from
    the trace's metadata, else ROMIO's defaults (:func:`pario.plan.collective.two_phase`;
    ``nodes``: the client nodes the job ran on, when known).  Every order is priced by
    :func:`collective_time`."""
    if rule not in ORDER_RULES:
        raise ParioError(f"unknown order rule {rule!r} (expected {' or '.join(ORDER_RULES)})")
    if not trace.collective.any():
        raise ParioError("the trace has no collective requests: no collective order to choose")
    paper = paper_order(system)
    if rule == "paper":
        return OrderChoice(paper, rule, paper, {})
    if layout is None and plan is None:
        layout = "fixed:64K"
    times = {o: collective_time(trace, system, o, layout, plan=plan, cb_buffer=cb_buffer, aggregators=aggregators,
                                nodes=nodes) for o in ORDERS}
    # ties (within TIE, relative: the same time summed in another order) go to the simplest order
    fastest = min(times.values())
    best = next(o for o in ORDERS if times[o] <= fastest * (1 + TIE))
    return OrderChoice(best, rule, paper, times)
