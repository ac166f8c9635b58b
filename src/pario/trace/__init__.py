"""Traces: the request table (:class:`Trace`), its file formats, Darshan import and patterns."""

from .core import COLUMNS, DTYPES, OP_NAMES, READ, WRITE, Trace
from .darshan import ParioWarning, import_darshan, read_darshan
from .io import load, save
from .patterns import identify, pattern_map, segment
from .summary import summarize

__all__ = ["Trace", "READ", "WRITE", "OP_NAMES", "COLUMNS", "DTYPES", "load", "save",
           "import_darshan", "read_darshan", "ParioWarning", "identify", "pattern_map", "segment", "summarize"]
