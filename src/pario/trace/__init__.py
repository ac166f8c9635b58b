"""Traces: the request table (:class:`Trace`), its file formats, Darshan import and patterns.

Only :mod:`pario.trace.core` is imported eagerly; the rest (pandas, pyarrow, darshan) loads
on first use (PEP 562), so ``import pario.mpi`` on every MPI rank stays light.
"""

from importlib import import_module

from .core import COLUMNS, DTYPES, OP_NAMES, READ, WRITE, Trace

_LAZY = {"ParioWarning": "darshan", "import_darshan": "darshan", "read_darshan": "darshan",
         "load": "io", "save": "io", "identify": "patterns", "pattern_map": "patterns",
         "segment": "patterns", "summarize": "summary"}

__all__ = ["Trace", "READ", "WRITE", "OP_NAMES", "COLUMNS", "DTYPES", *_LAZY]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'pario.trace' has no attribute {name!r}")
    value = getattr(import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value
