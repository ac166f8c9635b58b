"""The profiler: CEDA's profiling phase (seed 000 §4.1) inside pario's MPI-IO layer.

With the hint ``pario_trace=PATH`` every rank records each request it makes through a
:class:`pario.mpi.File` — one row per contiguous file piece after the file view is applied:
(rank, file, op, offset, length, start, end, collective), the pieces of one call sharing a
``call`` number.  The trace's metadata says what the job ran with: the process count, the
file's hints (``cb_nodes``, ``cb_buffer_size``, …), the two-phase aggregator ranks and the
command line.  Times are seconds since the
collective open (rank 0's clock, shared through a broadcast; on one node all ranks share
the clock).  At the collective close the rows are gathered to rank 0 and written with
:func:`pario.trace.save`; several files traced to the same PATH in one run are merged.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from ..trace.core import Trace, TraceMeta
from ..trace.core import READ, WRITE

_WRITTEN_THIS_RUN: set[str] = set()


class Recorder:
    """Per-rank request recorder (columns appended per call, numpy at the end)."""

    def __init__(self, comm, path: str, file_name: str, hints: dict | None = None, aggregators=None):
        self.comm = comm
        self.hints = {str(k): str(v) for k, v in (hints or {}).items()}
        self.aggregators = None if aggregators is None else tuple(int(r) for r in aggregators)
        self.path = str(path)
        self.file_name = str(file_name)
        t = time.time() if comm.rank == 0 else None
        t_root = comm.bcast(t, root=0)
        # shift so that times are relative to rank 0's open time
        self.t0 = time.perf_counter() - (time.time() - t_root)
        self.off: list[np.ndarray] = []
        self.len: list[np.ndarray] = []
        self.meta: list[tuple[int, float, float, bool, int]] = []

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def record(self, op: int, foff: np.ndarray, flen: np.ndarray, start: float, end: float, collective: bool) -> None:
        if len(foff) == 0:
            return
        self.off.append(np.asarray(foff, dtype=np.int64).copy())
        self.len.append(np.asarray(flen, dtype=np.int64).copy())
        self.meta.append((op, start, end, collective, len(foff)))

    def local_arrays(self) -> dict[str, np.ndarray]:
        if not self.meta:
            z = np.zeros(0, dtype=np.int64)
            return {"op": z.astype(np.int8), "offset": z, "length": z, "start": z.astype(float),
                    "end": z.astype(float), "collective": z.astype(bool), "call": z}
        cnt = np.array([m[4] for m in self.meta])
        return {
            "call": np.repeat(np.arange(len(self.meta), dtype=np.int64), cnt),
            "op": np.repeat(np.array([m[0] for m in self.meta], dtype=np.int8), cnt),
            "offset": np.concatenate(self.off),
            "length": np.concatenate(self.len),
            "start": np.repeat(np.array([m[1] for m in self.meta], dtype=float), cnt),
            "end": np.repeat(np.array([m[2] for m in self.meta], dtype=float), cnt),
            "collective": np.repeat(np.array([m[3] for m in self.meta], dtype=bool), cnt),
        }

    def finish(self) -> Path | None:
        """Collective: gather all ranks' rows to rank 0 and save (merging with earlier files of this run)."""
        parts = self.comm.gather(self.local_arrays(), root=0)
        if self.comm.rank != 0:
            return None
        from ..trace.io import load, save   # pandas/pyarrow: rank 0 only, at close

        rank = np.concatenate([np.full(len(p["offset"]), r, dtype=np.int64) for r, p in enumerate(parts)])
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        tr = Trace.from_arrays(rank, np.full(len(rank), self.file_name, dtype=object).astype(str) if len(rank) else np.zeros(0, np.int32),
                               cols["op"], cols["offset"], cols["length"], files=(self.file_name,),
                               start=cols["start"], end=cols["end"], collective=cols["collective"],
                               call=cols["call"],
                               meta=TraceMeta(source="pario.mpi", nprocs=self.comm.size,
                                              aggregators=self.aggregators if cols["collective"].any() else None,
                                              hints=tuple(sorted(self.hints.items())),
                                              command=" ".join([sys.executable, *sys.argv])))
        key = os.path.abspath(self.path)
        if key in _WRITTEN_THIS_RUN and os.path.exists(self.path):
            tr = Trace.concat([load(self.path), tr])
        save(tr, self.path)
        _WRITTEN_THIS_RUN.add(key)
        return Path(self.path)


__all__ = ["Recorder", "READ", "WRITE"]
