"""``pario reproduce``: the five papers' experiments, re-run in the simulator.

- :mod:`pario.reproduce.core` – :class:`Experiment`, :class:`Check`, :func:`run_experiment`
- :mod:`pario.reproduce.experiments` – one declarative definition per figure / table
- :mod:`pario.reproduce.families` – the evaluators (layout, ceda, collective, CI-LAYOUT …)
- :mod:`pario.reproduce.plots` – matplotlib plots on the papers' axes

See docs/reproduce.md and docs/RESULTS.md.
"""

from .core import Check, Experiment, Result, run_experiment
from .experiments import EXPERIMENTS

__all__ = ["Check", "Experiment", "Result", "run_experiment", "EXPERIMENTS", "select"]


def select(ids) -> list[Experiment]:
    """Experiments by id, paper name (``ceda``, ``psa`` …) or ``all``."""
    from .. import ParioError

    ids = list(ids) or ["all"]
    out: list[Experiment] = []
    for i in ids:
        key = i.strip().lower()
        if key == "all":
            hits = list(EXPERIMENTS.values())
        elif key in EXPERIMENTS:
            hits = [EXPERIMENTS[key]]
        else:
            hits = [e for e in EXPERIMENTS.values() if e.paper.lower() == key or e.id.startswith(key + "-")]
        if not hits:
            raise ParioError(f"unknown experiment {i!r} (try 'pario reproduce list')")
        for e in hits:
            if e not in out:
                out.append(e)
    return out
