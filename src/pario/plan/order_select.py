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
the same cycle model) and keeps the cheapest (``rule="model"``, the default).  Ties go to
the earlier order of ``romcio, cacio, hacio`` (the simplest).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ParioError
from .collective import ORDERS

ORDER_RULES = ("model", "paper")


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


def choose_order(trace, system, layout=None, *, plan=None, cb_buffer: int | None = None,
                 aggregators: int | None = None, rule: str = "model") -> OrderChoice:
    """The collective order for ``trace``'s collective requests on ``layout`` (or ``plan``'s
    layouts); see the module docstring.  ``cb_buffer`` and ``aggregators`` are the run's
    two-phase settings (ROMIO's ``cb_buffer_size`` and ``cb_nodes``); left None they come from
    the trace's metadata, else ROMIO's defaults (:func:`pario.plan.collective.two_phase`)."""
    from ..simulate import simulate

    if rule not in ORDER_RULES:
        raise ParioError(f"unknown order rule {rule!r} (expected {' or '.join(ORDER_RULES)})")
    coll = trace.take(trace.collective.astype(bool))
    if len(coll) == 0:
        raise ParioError("the trace has no collective requests: no collective order to choose")
    paper = paper_order(system)
    if rule == "paper":
        return OrderChoice(paper, rule, paper, {})
    if layout is None and plan is None:
        layout = "fixed:64K"
    times = {}
    for o in ORDERS:
        res = simulate(coll, system, layout, plan=plan, collective=True, order=o, cb_buffer=cb_buffer,
                       aggregators=aggregators)
        times[o] = float(res.makespan_s)
    best = min(ORDERS, key=lambda o: (times[o], ORDERS.index(o)))
    return OrderChoice(best, rule, paper, times)
