"""Shared plumbing for the workload generators: parameter checks, phases and coalescing.

Every generator builds *one phase* of requests (the accesses of one pass over the data),
as flat numpy arrays sorted by rank and, within a rank, in the order the benchmark issues
them.  :func:`build_trace` then

1. optionally *coalesces* rows: two consecutive rows of the same rank, file and MPI-IO call
   whose byte ranges abut become one request (a request of a trace is one contiguous file
   extent accessed by one call; a noncontiguous file view is split into its contiguous
   pieces, and pieces that touch are one request);
2. repeats the phase for every op of ``op`` (``"write"``, ``"read"`` or ``"both"`` = a write
   phase followed by a read phase of the same requests, as ``IOR -w -r``, HPIO ``-O 11``
   and BTIO's read-back do), with ``order`` continuing across phases within each rank.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import ParioError
from ..trace import READ, WRITE, Trace

OPS: dict[str, tuple[int, ...]] = {"write": (WRITE,), "read": (READ,), "both": (WRITE, READ)}


def op_phases(op: str) -> tuple[int, ...]:
    """Op codes of the phases for ``op`` = ``write`` | ``read`` | ``both``."""
    key = str(op).strip().lower()
    if key not in OPS:
        raise ParioError(f"bad op {op!r}: expected write, read or both")
    return OPS[key]


def check_int(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``; :class:`ParioError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ParioError(f"bad {name}: {value!r} (expected a whole number)")
    value = int(value)
    if value < minimum:
        raise ParioError(f"bad {name}: {value} (must be >= {minimum})")
    return value


def coalesce(rank: np.ndarray, file: np.ndarray, call: np.ndarray, offset: np.ndarray,
             length: np.ndarray) -> tuple[np.ndarray, ...]:
    """Merge consecutive rows of one (rank, file, call) whose extents abut.

    Rows must already be in issue order.  Returns the merged ``rank, file, call, offset,
    length`` arrays (vectorised: one pass of comparisons plus ``np.add.reduceat``).
    """
    n = len(rank)
    if n == 0:
        return rank, file, call, offset, length
    brk = np.ones(n, dtype=bool)
    brk[1:] = ((rank[1:] != rank[:-1]) | (file[1:] != file[:-1]) | (call[1:] != call[:-1])
               | (offset[1:] != offset[:-1] + length[:-1]))
    starts = np.flatnonzero(brk)
    return (rank[starts], file[starts], call[starts], offset[starts],
            np.add.reduceat(length, starts))


def build_trace(rank, offset, length, *, op: str, files: tuple[str, ...], file=None,
                call=None, collective: bool = False) -> Trace:
    """Assemble a :class:`Trace` from one phase of requests (see module docstring).

    ``rank``/``offset``/``length`` (and optional ``file`` indices into ``files`` and
    ``call`` ids) must be sorted by rank, then issue order.  With ``call`` given,
    abutting rows of the same call are coalesced.
    """
    phases = op_phases(op)
    rank = np.asarray(rank, dtype=np.int64)
    offset = np.asarray(offset, dtype=np.int64)
    length = np.asarray(length, dtype=np.int64)
    file = np.zeros(len(rank), dtype=np.int64) if file is None else np.asarray(file, dtype=np.int64)
    if call is not None:
        rank, file, _, offset, length = coalesce(rank, file, np.asarray(call, dtype=np.int64),
                                                 offset, length)
    n = len(rank)
    if n and np.any(np.diff(rank) < 0):
        raise AssertionError("build_trace: rows must be sorted by rank")  # generator bug
    if n:
        first = np.r_[0, np.flatnonzero(np.diff(rank)) + 1]
        counts = np.diff(np.r_[first, n])
        pos = np.arange(n) - np.repeat(first, counts)
        per_rank = np.zeros(int(rank.max()) + 1, dtype=np.int64)
        per_rank[rank[first]] = counts
        shift = per_rank[rank]
    else:
        pos = shift = np.zeros(0, dtype=np.int64)
    k = len(phases)
    return Trace.from_arrays(
        np.tile(rank, k),
        np.tile(file, k).astype(np.int32),
        np.repeat(np.asarray(phases, dtype=np.int8), n),
        np.tile(offset, k),
        np.tile(length, k),
        files=files,
        collective=bool(collective),
        order=np.concatenate([pos + i * shift for i in range(k)]) if n else np.zeros(0, dtype=np.int64),
    )
