"""The exact, vectorised mapping of requests to sub-requests.

A *sub-request* is the part of a request that lands on one server (SPEC §1): its request
index, server, server-local offset, length and data file (0 = the file's own data file,
≥ 1 = a replica data file of an :class:`~pario.layout.types.ExtentMap`).  Every model, the
simulator and the store use this one primitive.

For striped, 2-D and region layouts the mapping uses the byte-count functions
(:mod:`pario.layout.types`): with ``C_j`` the number of bytes of ``[0, x)`` on server ``j``,
the request ``[x, x+L)`` has on server ``j`` exactly ``C_j(x+L) − C_j(x)`` bytes starting at
server-local offset ``C_j(x)``.  This is exact for any stripe sizes and request alignment
(unlike CEDA seed 000 eq. 2, whose beginning-fragment term is mistyped: SPEC §2.3).

The mapping is the store engine's (``src/pario/native/store/layout.c``): one
implementation places the bytes the models price and the bytes the store moves.  The
compiled pricing kernels (:mod:`pario.model.engine`, :mod:`pario.layout.extents_kernel`)
map inside their loops for speed and are checked against this one by the tests; an
independent numpy mapping from the byte-count functions is the tests' oracle
(``tests/oracles/layout.py``).
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import ParioError
from .types import ExtentMap, Grouped, Layout, Regions, Striped


@dataclass(frozen=True)
class SubRequests:
    """Columns of sub-requests (numpy arrays of equal length)."""

    req: np.ndarray
    server: np.ndarray
    local: np.ndarray
    length: np.ndarray
    datafile: np.ndarray

    def __len__(self) -> int:
        return len(self.req)

    @staticmethod
    def empty() -> "SubRequests":
        z = np.zeros(0, dtype=np.int64)
        return SubRequests(z, z.astype(np.int32), z, z, z.astype(np.int32))

    @staticmethod
    def concat(parts: list["SubRequests"]) -> "SubRequests":
        parts = [p for p in parts if len(p)]
        if not parts:
            return SubRequests.empty()
        if len(parts) == 1:
            return parts[0]
        return SubRequests(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("req", "server", "local", "length", "datafile")))

    def take(self, index) -> "SubRequests":
        return SubRequests(self.req[index], self.server[index], self.local[index], self.length[index], self.datafile[index])

    def sorted(self) -> "SubRequests":
        """Sorted by request, then by file position (stable)."""
        return self.take(np.argsort(self.req, kind="stable"))


class _Names:
    """A stand-in profile for :func:`~pario.layout.spec.layout_to_dict`: server ``j`` is named ``"j"``."""

    def __init__(self, n: int):
        self.names = [str(j) for j in range(n)]


def _top_server(layout: Layout) -> int:
    """The largest server index a layout names (zero-stripe servers included)."""
    if isinstance(layout, Striped):
        return max(layout.servers, default=0)
    if isinstance(layout, Grouped):
        return max((s for g in layout.groups for s in g), default=0)
    if isinstance(layout, Regions):
        return max((_top_server(r.layout) for r in layout.regions), default=0)
    if isinstance(layout, ExtentMap):
        top = int(layout.server.max()) if len(layout) else 0
        return max(top, _top_server(layout.default)) if layout.default is not None else top
    raise TypeError(f"not a layout: {type(layout).__name__}")


_EXTENT_MAPS: "weakref.WeakKeyDictionary[ExtentMap, object]" = weakref.WeakKeyDictionary()


def _engine_layout(layout: Layout):
    """The store engine's parse of ``layout`` (``pario.native._rmt.Layout``): an extent map's
    kept while the map lives, other layouts' (small, hashed by value) for the last ones used."""
    if not isinstance(layout, ExtentMap):
        return _engine_value(layout)
    got = _EXTENT_MAPS.get(layout)
    if got is None:
        got = _EXTENT_MAPS[layout] = _parse(layout)
    return got


@lru_cache(maxsize=64)
def _engine_value(layout: Layout):
    return _parse(layout)


def engine_json(layout: Layout, nservers: int = 0) -> tuple[str, int]:
    """``(text, n)``: the layout's JSON with its servers named by index (``"0"`` .. ``"n-1"``,
    ``n`` at least ``nservers``), the form the engine parses (``pxs_layout_parse_indexed``)."""
    from .spec import layout_to_dict

    n = max(_top_server(layout) + 1, nservers)
    return json.dumps(layout_to_dict(layout, _Names(n))), n


def _parse(layout: Layout):
    from ..native import extension
    from .spec import layout_to_dict

    n = _top_server(layout) + 1
    eng = extension()
    if isinstance(layout, ExtentMap):      # its rows as arrays (no JSON of 10^5 rows)
        default = None if layout.default is None else json.dumps(layout_to_dict(layout.default, _Names(n)))
        return eng.extent_map(layout.offset, layout.length, layout.server, layout.local, layout.datafile, default, n)
    return eng.Layout(*engine_json(layout))


def map_requests(layout: Layout, offset, length) -> SubRequests:
    """Map requests ``[offset, offset+length)`` to sub-requests under ``layout`` (exact).

    The store engine's mapping (``store/layout.c``, bound as ``pario.native._rmt.Layout``):
    the bytes a model prices are the bytes the store and the served runtime place.
    Request-major; a request's sub-requests in the layout's server order (an extent map's:
    its covered parts in offset order, then the gaps under its default layout)."""
    x = np.ascontiguousarray(offset, dtype=np.int64)
    L = np.ascontiguousarray(length, dtype=np.int64)
    if x.shape != L.shape:
        raise ValueError("offset and length must have the same shape")
    cols = _engine_layout(layout).map(x.reshape(-1), L.reshape(-1))
    return SubRequests(*(np.frombuffer(c, dtype=t) for c, t in zip(cols, _COLUMNS)))


_COLUMNS = (np.int64, np.int32, np.int64, np.int64, np.int32)


def layout_for_files(layout, files: tuple[str, ...]) -> list[Layout]:
    """Resolve a layout or a dict (file name → layout, optional key ``"*"`` for the rest) per file."""
    if isinstance(layout, Layout):
        return [layout] * len(files)
    if isinstance(layout, dict):
        out = []
        for f in files:
            lay = layout.get(f, layout.get("*"))
            if lay is None:
                raise ParioError(f"no layout given for file {f!r}")
            out.append(lay)
        return out
    raise TypeError(f"not a layout: {type(layout).__name__}")


def map_trace(trace, layout) -> SubRequests:
    """Sub-requests of every request of ``trace`` (``req`` = trace row), for one layout for
    all files or a dict file name → layout."""
    per_file = layout_for_files(layout, trace.files)
    if len(set(map(id, per_file))) <= 1 and per_file:
        return map_requests(per_file[0], trace.offset, trace.length)
    parts = []
    for fi, lay in enumerate(per_file):
        rows = np.flatnonzero(trace.file == fi)
        if len(rows) == 0:
            continue
        sub = map_requests(lay, trace.offset[rows], trace.length[rows])
        parts.append(SubRequests(rows[sub.req], sub.server, sub.local, sub.length, sub.datafile))
    return SubRequests.concat(parts).sorted()


def server_load(trace, layout, n_servers: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-server (bytes, number of sub-requests) of a trace under a layout."""
    sub = map_trace(trace, layout)
    if len(sub) and sub.server.max() >= n_servers:
        raise ParioError(f"layout uses server index {int(sub.server.max())} but the system has {n_servers} servers")
    nbytes = np.bincount(sub.server, weights=sub.length, minlength=n_servers).astype(np.int64)
    count = np.bincount(sub.server, minlength=n_servers).astype(np.int64)
    return nbytes, count
