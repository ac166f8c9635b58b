r"""NAS BTIO (NPB 3.3-MPI BT with ``mpi_io_full`` / ``mpi_io_simple`` I/O; Wong and Van der
Wijngaart, "NAS Parallel Benchmarks I/O Version 3.0", NAS-03-002).

Grid and steps by class (``PS`` = problem size, ``niter`` time steps)::

    S 12³ / 60   W 24³ / 200   A 64³ / 200   B 102³ / 200   C 162³ / 200   D 408³ / 250   E 1020³ / 250

Every ``wr_interval`` = 5 steps (and at the last step) the solution ``u`` — 5 doubles
(40 bytes) per grid point — is appended to one shared file as dump ``d``; S writes 12
dumps, W…C 40.  The file holds the dumps back to back, each a Fortran-order
``PS × PS × PS`` array of 40-byte points: point ``(x, y, z)`` of dump ``d`` is at byte
``40·(x + PS·(y + PS·(z + PS·d)))``.

**Multi-partition decomposition** (``make_set.f``): ``procs`` must be a square ``p²``;
rank ``n`` owns ``p`` cells ``c = 0 … p−1`` with cell coordinates
``((n mod p + c) mod p, (n div p − c) mod p, c)``.  Along each axis cell coordinate ``q``
has size ``PS div p + 1`` if ``q < PS mod p`` else ``PS div p`` and starts at
``q·(PS div p) + min(q, PS mod p)``; NPB aborts when a cell is smaller than 3 points.

**simple** (``simple_mpiio.f``): per dump, for each cell, ``k`` over the cell's z-range,
``j`` over its y-range, one independent ``MPI_File_write_at`` of one x-row::

    offset = 40·(xlow_c + PS·((ylow_c + j) + PS·((zlow_c + k) + PS·d)))
    length = 40·xsize_c

**full** (``full_mpiio.f``): per dump one ``MPI_File_write_at_all`` through a file view that
is the struct of the rank's cell subarrays — the same bytes in the same order, so the
requests are the same x-rows, flagged collective, with rows that abut inside one call
(only when ``procs == 1``: one cell spans the grid) merged into one request.

**read-back** (``accumulate_norms``, after the last time step): the same requests, dump
by dump, as ``read_at`` (simple) or ``read_at_all`` (full): ``op="both"``.

Checked against ``btio-*.darshan``: simple S/4, S/16 and W/4 match DXT_MPIIO exactly
(every rank's sequence of (offset, length), writes and reads).  For full, DXT_MPIIO has
one segment per rank per dump (one call), at the byte offset of the view's first byte
with the call's byte count: these equal our first request of the (rank, dump) and the sum
of its lengths (S/4, S/16, W/4, A/4).
"""

from __future__ import annotations

import math

import numpy as np

from .. import ParioError
from ..trace import Trace
from ._common import build_trace, check_int

#: class → (problem size, time steps), NPB 3.3 ``setparams``/BT defaults.
CLASSES: dict[str, tuple[int, int]] = {
    "S": (12, 60), "W": (24, 200), "A": (64, 200), "B": (102, 200),
    "C": (162, 200), "D": (408, 250), "E": (1020, 250),
}
SUBTYPES = ("full", "simple")
POINT_BYTES = 5 * 8


def dump_count(niter: int, wr_interval: int = 5) -> int:
    """Steps ``1 … niter`` with ``step mod wr_interval == 0`` or ``step == niter``."""
    return niter // wr_interval + (1 if niter % wr_interval else 0)


def cells(procs: int, problem_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, size) arrays of shape ``(procs, p, 3)``: cell ``c`` of rank ``n``, axes x, y, z."""
    p = math.isqrt(procs)
    n = np.arange(procs, dtype=np.int64)[:, None]
    c = np.arange(p, dtype=np.int64)[None, :]
    coord = np.stack([(n % p + c) % p, (n // p - c) % p, np.broadcast_to(c, (procs, p))], axis=-1)
    size, excess = divmod(problem_size, p)
    csize = np.where(coord < excess, size + 1, size)
    clow = coord * size + np.minimum(coord, excess)
    return clow, csize


def btio(cls: str = "S", subtype: str = "full", procs: int = 4, op: str = "write",
         niter: int | None = None, wr_interval: int = 5, file: str | None = None) -> Trace:
    """BTIO requests (see the module docstring).  ``niter`` overrides the class's steps."""
    key = str(cls).strip().upper()
    if key not in CLASSES:
        raise ParioError(f"bad BTIO class {cls!r}: expected one of {', '.join(CLASSES)}")
    subtype = str(subtype).strip().lower()
    if subtype not in SUBTYPES:
        raise ParioError(f"bad BTIO subtype {subtype!r}: expected full or simple")
    procs = check_int("procs", procs)
    p = math.isqrt(procs)
    if p * p != procs:
        raise ParioError(f"BTIO needs a square number of processes, got {procs}")
    ps, steps = CLASSES[key]
    steps = check_int("niter", steps if niter is None else niter)
    wr_interval = check_int("write interval", wr_interval)
    if ps // p < 3:
        raise ParioError(f"BTIO class {key} ({ps}^3) on {procs} processes: cells smaller than 3 points")
    dumps = dump_count(steps, wr_interval)

    clow, csize = cells(procs, ps)                            # (procs, p, 3)
    rows = (csize[..., 1] * csize[..., 2]).reshape(-1)        # rows per (rank, cell)
    per_rank = rows.reshape(procs, p).sum(axis=1)             # rows per rank per dump
    # one dump, rank-major, cell, k, j
    total1 = int(rows.sum())
    pair = np.repeat(np.arange(procs * p), rows)
    within = np.arange(total1) - np.repeat(np.cumsum(rows) - rows, rows)
    low = clow.reshape(-1, 3)[pair]
    size = csize.reshape(-1, 3)[pair]
    j = within % size[:, 1]
    k = within // size[:, 1]
    off1 = POINT_BYTES * (low[:, 0] + ps * ((low[:, 1] + j) + ps * (low[:, 2] + k)))
    len1 = POINT_BYTES * size[:, 0]
    # all dumps: per rank, dump-major then the one-dump order
    start1 = np.r_[0, np.cumsum(per_rank)[:-1]]
    rank = np.repeat(np.arange(procs, dtype=np.int64), per_rank * dumps)
    w = np.arange(len(rank)) - np.repeat(start1 * dumps, per_rank * dumps)
    cnt = per_rank[rank]
    dump = w // cnt
    base = start1[rank] + w % cnt
    offset = off1[base] + dump * (ps ** 3) * POINT_BYTES
    length = len1[base]
    name = file if file is not None else f"btio.{subtype}.out"
    if subtype == "full":
        return build_trace(rank, offset, length, op=op, files=(name,), call=dump, collective=True)
    return build_trace(rank, offset, length, op=op, files=(name,), collective=False)
