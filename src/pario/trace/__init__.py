"""Traces: the request table (:class:`Trace`), its file formats, Darshan import and patterns."""

from .core import COLUMNS, DTYPES, OP_NAMES, READ, WRITE, Trace
from .io import load, save

__all__ = ["Trace", "READ", "WRITE", "OP_NAMES", "COLUMNS", "DTYPES", "load", "save"]
