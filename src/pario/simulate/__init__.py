"""Discrete-event simulator of a parallel file system: independent and two-phase collective I/O.

- :func:`simulate` – run a trace on a system under a layout / plan / :class:`Routing`.
- :class:`SimResult` – makespan, bandwidth, per-server busy time and bytes, per-client time,
  per-cycle server times of collective runs.
- :mod:`pario.simulate.engine` – the compiled (numba) event core.
- :mod:`pario.simulate.twophase` – file domains, pieces, cycles of two-phase I/O.

The model and its assumptions: ``docs/simulator.md``.
"""

from .core import SimResult, simulate
from .routing import Routing

__all__ = ["simulate", "SimResult", "Routing"]
