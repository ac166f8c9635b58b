"""What the store's copies copy, step by step: the replicator's groups of ``COPY_CHUNK`` bytes,
the extents a replica holds and the replica file's own layout.  One definition, used by the
replicator and relayout (:mod:`pario.store.replicator`, :mod:`pario.store.relayout`) and by
the setup ``pario advise`` and ``pario run`` price (:mod:`pario.plan.setup_cost`), so that
what is priced is what is copied."""

from __future__ import annotations

import numpy as np

COPY_CHUNK = 8 << 20     # bytes per copy step of the replicator and of relayout


def copy_groups(ranges, chunk: int = COPY_CHUNK):
    """The ranges ``[(offset, length), …]`` to copy in groups of at most ``chunk`` bytes, as
    lists of ``(offset, length)``: the ranges' bytes in order, cut every ``chunk`` bytes (a
    long range split, short ones together).  The replicator's steps
    (:meth:`pario.store.replicator.Replicator._copy`)."""
    cur, size = [], 0
    for x, n in ranges:
        pos = x
        while pos < x + n:
            c = min(chunk - size, x + n - pos)
            cur.append((pos, c))
            size += c
            pos += c
            if size >= chunk:
                yield cur
                cur, size = [], 0
    if cur:
        yield cur


def replica_extents(layout, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, lengths) a replica with ``layout`` holds of a file of ``size`` bytes: an
    extent map's extents clipped to the file (a CEDA partial replica), else the whole file (a
    full replica of hybrid replication)."""
    from ..layout import ExtentMap

    if isinstance(layout, ExtentMap):
        o = layout.offset
        e = np.minimum(o + layout.length, size)
        keep = e > o
        return o[keep], (e - o)[keep]
    if size > 0:
        return np.array([0], dtype=np.int64), np.array([size], dtype=np.int64)
    return np.zeros(0, np.int64), np.zeros(0, np.int64)


def replica_file_layout(layout):
    """The replica file's own layout: an extent map without its default (bytes it does not
    cover are not the replica's) in replica data files (≥ 1); any other layout as it is."""
    from ..layout import ExtentMap

    if isinstance(layout, ExtentMap):
        return ExtentMap(layout.offset, layout.length, layout.server, layout.local, np.maximum(layout.datafile, 1),
                         None)
    return layout
