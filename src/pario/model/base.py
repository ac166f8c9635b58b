"""The one interface every cost model implements, and the :class:`Cost` it returns.

A *cost model* predicts how long a set of requests takes on a system under a layout.
Every model answers two questions:

- :meth:`CostModel.batch_cost` — the time of one *batch* of concurrent requests
  (:mod:`pario.model.batches` says how a trace becomes batches);
- :meth:`CostModel.trace_cost` — the time of a whole trace: the sum of its batch costs
  (batches run one after another; requests inside a batch run concurrently).

``layout`` is a :class:`pario.layout.Layout` for every file, or a dict file name →
layout (key ``"*"`` for the files not named), as accepted by :func:`pario.layout.map_trace`.

Per-server times are reported too: ``Cost.servers[j]`` is the modelled busy time of server
``j`` summed over batches.  ``predicted_s`` is Σ_batches max_j (for the distribution model,
CEDA seed 000 §3 eq. 4 applied per batch), so ``predicted_s >= servers.max()`` need not
hold with equality: a different server may be the slowest in each batch.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..jsonutil import plain
from ..layout import Layout, parse_layout
from .batches import batch_ids


class Cost:
    """Result of a cost model.

    - ``predicted_s``: predicted time in seconds (sum over batches of the batch time);
    - ``servers``: per-server busy seconds summed over batches (array of ``system.n``); a
      model may pass a function that computes them, called on first access (a planner
      comparing candidates reads only ``predicted_s``);
    - ``batches``: number of batches evaluated;
    - ``per_batch``: predicted seconds of each batch (optional, array of ``batches``);
    - ``details``: model-specific terms (e.g. ``{"T_e": …, "T_x": …}``), JSON-serialisable.
    """

    __slots__ = ("predicted_s", "_servers", "batches", "per_batch", "details")

    def __init__(self, predicted_s: float, servers, batches: int = 1, per_batch: np.ndarray | None = None,
                 details: dict[str, Any] | None = None):
        self.predicted_s = predicted_s
        self._servers = servers
        self.batches = batches
        self.per_batch = per_batch
        self.details = {} if details is None else details

    @property
    def servers(self) -> np.ndarray:
        if callable(self._servers):
            self._servers = np.asarray(self._servers())
        return self._servers

    @servers.setter
    def servers(self, value) -> None:
        self._servers = value

    def __repr__(self) -> str:
        return f"Cost(predicted_s={self.predicted_s!r}, batches={self.batches!r})"

    def to_json(self, system) -> dict[str, Any]:
        """``{"predicted_s": …, "servers": {name: seconds}, "batches": …, "details": …}``."""
        d: dict[str, Any] = {
            "predicted_s": float(self.predicted_s),
            "servers": {name: float(v) for name, v in zip(system.names, self.servers)},
            "batches": int(self.batches),
        }
        if self.details:
            d["details"] = plain(self.details)
        return d

    def __add__(self, other: "Cost") -> "Cost":
        pb = None
        if self.per_batch is not None and other.per_batch is not None:
            pb = np.concatenate([self.per_batch, other.per_batch])
        return Cost(self.predicted_s + other.predicted_s, self.servers + other.servers,
                    self.batches + other.batches, pb, {})

    @staticmethod
    def zero(n_servers: int) -> "Cost":
        return Cost(0.0, np.zeros(n_servers), 0, np.zeros(0), {})



def check_server_index(top: int, system) -> None:
    """A layout's largest server index ``top`` must name one of ``system``'s servers."""
    if top >= system.n:
        from .. import ParioError

        raise ParioError(f"layout uses server index {top} but system {system.name!r} has {system.n} servers")


def resolve_layout(layout, system):
    """A Layout, a spec string, or a dict file name → (Layout | spec) into Layout / dict of Layouts."""
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, Mapping) and "type" not in layout:
        return {k: parse_layout(v, system) for k, v in layout.items()}
    return parse_layout(layout, system)


class CostModel:
    """Base class of the cost models.

    Subclasses set ``name`` and implement :meth:`batch_cost`; models that can evaluate all
    batches of a trace at once (vectorised) override :meth:`trace_cost` as well.
    Constructor keyword arguments are the model's parameters (scikit-learn style:
    :meth:`get_params` returns them).
    """

    name = "base"
    #: the paper and equations the model implements, in full and short (``pario model``,
    #: ``pario advise``); how its predicted time is formed; what a server's busy time is;
    #: term of :attr:`Cost.details` → what it is (paper, equation)
    paper = ""
    paper_short = ""
    predicted_doc = "the model's total"
    busy_doc = ""
    term_docs: dict[str, str] = {}
    #: the terms of :attr:`Cost.details` that add up to the servers' total busy time (empty:
    #: the model's terms are not per-server busy time)
    busy_terms: tuple[str, ...] = ()
    #: Capability (scikit-learn "tags" style; the planners choose their path by it, never by
    #: the model's type): the model's prices are those of the compiled engine
    #: (:mod:`pario.model.engine`) with the terms of ``engine_terms(system)`` — it has
    #: ``price`` (per-batch times, with an early stop at a limit) and ``suffix_bound``, and
    #: ``trace_cost`` is Σ of ``price``'s per-batch times — so a planner may price candidates by
    #: the engine directly (branch and bound, CEDA's per-pattern pricing, batch-time routing).
    #: False: the model is priced only through ``trace_cost`` / ``trace_costs`` /
    #: ``request_costs`` (a subclass that changes the pricing must say False).
    compiled = False

    def __init__(self, **params):
        self.params = dict(params)

    @classmethod
    def label(cls, short: bool = False) -> str:
        """``name (paper, equations)`` (``short``: for a table cell)."""
        paper = cls.paper_short if short else cls.paper
        return f"{cls.name} ({paper})" if paper else cls.name

    def independent_batches(self) -> bool:
        """Capability: a batch's cost depends on its own requests only, so
        :meth:`trace_cost` = Σ over the batches of :meth:`batch_cost` of each batch alone.
        False (default): a batch's cost may also depend on the batches before it (never on
        those after it)."""
        return False

    def get_params(self) -> dict[str, Any]:
        return dict(self.params)

    def batch_cost(self, batch, layout, system) -> Cost:
        """Cost of one batch of concurrent requests (a :class:`pario.trace.Trace`)."""
        raise NotImplementedError

    def trace_cost(self, trace, layout, system, *, batches: np.ndarray | None = None,
                   by: str = "auto") -> Cost:
        """Cost of a trace = Σ over its batches.  ``batches`` (one batch id per row) overrides
        the batching of :func:`pario.model.batches.batch_ids` (``by`` = auto|time|order)."""
        layout = resolve_layout(layout, system)
        bid = batch_ids(trace, by=by) if batches is None else np.asarray(batches, dtype=np.int64)
        if len(trace) == 0:
            return Cost.zero(system.n)
        order = np.argsort(bid, kind="stable")
        sb = bid[order]
        cuts = np.flatnonzero(np.diff(sb)) + 1
        total = Cost.zero(system.n)
        per = []
        for rows in np.split(order, cuts):
            c = self.batch_cost(trace.take(rows), layout, system)
            per.append(c.predicted_s)
            total = total + Cost(c.predicted_s, c.servers, 1, None, {})
        total.per_batch = np.array(per)
        return total

    def trace_costs(self, trace, layouts: dict, system, *, batches: np.ndarray | None = None,
                    by: str = "auto") -> dict:
        """:meth:`trace_cost` of one trace under each of several candidate layouts (key →
        layout): key → Cost.  Models with a compiled pricing spread the candidates over
        threads; the results are the same as one call per candidate."""
        return {k: self.trace_cost(trace, lay, system, batches=batches, by=by) for k, lay in layouts.items()}

    def request_costs(self, trace, layout, system, *, batches: np.ndarray | None = None,
                      by: str = "auto") -> np.ndarray:
        """Per-request cost (seconds, one per trace row), in the context of its batch.

        Used to route each request to its cheapest replica (CI-LAYOUT seed 002 §5).  The
        closed-form models give every request ``T_i / p_b`` (its share of the round time of
        its batch); the distribution model gives its share of the batch time of the servers
        it touches (see its docstring).
        """
        raise NotImplementedError(f"model {self.name!r} has no per-request costs")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
