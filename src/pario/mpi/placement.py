"""Where a file's bytes live, for two-phase collective I/O.

Two-phase collective I/O orders an aggregator's file-domain pieces by server and server
kind (seed 004 §3.2: ``Server_type()`` / ``Server_number()``).  A :class:`Placement` holds
the file's layout (:mod:`pario.layout`) and the per-server kind of the system; the pieces
themselves are cut in C from the store engine's layout (:func:`pario.mpi.twophase.compile_layout`:
the maximal runs of a range on one server back to back, as :func:`pario.layout.map_requests`
places them).  The numpy splitting pario had before is the tests' oracle
(``tests/oracles/placement.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..layout import Layout

_I64 = np.int64


@dataclass
class Placement:
    """A file's layout on a system: server and server kind of every piece."""

    layout: Layout
    kinds: np.ndarray  # per system server index: 0 = HServer (hdd), 1 = SServer (ssd)

    @property
    def servers(self) -> np.ndarray:
        return np.asarray(self.layout.servers_used(), dtype=_I64)


def placement_from(system, layout: Layout | None) -> Placement | None:
    if layout is None or system is None:
        return None
    return Placement(layout, np.asarray(system.kinds, dtype=_I64))
