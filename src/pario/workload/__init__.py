"""Workload generators: synthetic traces of the benchmarks the papers use.

Each generator returns a :class:`pario.trace.Trace` (one request per contiguous file extent
of one MPI-IO call, in issue order per rank) built with vectorised numpy; the offset
formulas are in each module's docstring and in ``docs/workloads.md``:

- :func:`ior`  – IOR sequential / strided (segmented) / random (``-z``, bit-exact)
- :func:`hpio` – HPIO c-nc (contiguous memory, noncontiguous file)
- :func:`tile` – MPI-Tile-IO (2-D tiles, one per rank)
- :func:`btio` – NAS BTIO full (collective) and simple (independent)

:data:`GENERATORS` maps the CLI names to the functions; :func:`generate` calls one by name.
"""

from __future__ import annotations

from typing import Callable

from .. import ParioError
from ..trace import Trace
from .btio import btio
from .hpio import hpio
from .ior import ior
from .tile import tile

GENERATORS: dict[str, Callable[..., Trace]] = {"ior": ior, "hpio": hpio, "tile": tile, "btio": btio}


def generate(name: str, **params) -> Trace:
    """Run the generator called ``name`` with keyword ``params``."""
    try:
        fn = GENERATORS[str(name).strip().lower()]
    except KeyError:
        raise ParioError(f"unknown workload {name!r}: expected one of {', '.join(GENERATORS)}") from None
    return fn(**params)


__all__ = ["GENERATORS", "generate", "ior", "hpio", "tile", "btio"]
