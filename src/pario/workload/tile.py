r"""MPI-Tile-IO (Ross, Argonne PVFS test suite): a dense 2-D dataset of
``tiles_x × tiles_y`` tiles stored row-major in one file, one tile per rank.

Rank ``r`` owns tile ``(tx, ty) = (r mod tiles_x, r div tiles_x)``.  A tile is
``elements_x × elements_y`` elements of ``element_size`` bytes; neighbouring tiles share
``overlap_x`` columns / ``overlap_y`` rows, so the file is ``W × H`` elements with::

    W = tiles_x·elements_x − (tiles_x − 1)·overlap_x
    H = tiles_y·elements_y − (tiles_y − 1)·overlap_y

Each rank accesses its tile through a subarray file view in one MPI-IO call
(``MPI_File_write_all`` / ``read_all`` with ``--collective``, else
``MPI_File_write``/``read``).  A request of the trace is one contiguous piece of that view,
i.e. one row of the tile: for tile row ``k = 0 … elements_y − 1``::

    offset = ((ty·(elements_y − overlap_y) + k)·W + tx·(elements_x − overlap_x)) · element_size
    length = elements_x · element_size

When ``tiles_x == 1`` the rows of a tile abut and the whole tile is one request.  With
overlap > 0 the tiles of neighbouring ranks share bytes (writes then overlap, as in the
benchmark).  The overlap formula follows the benchmark's documented meaning (elements
shared by adjacent tiles); the shared logs all use overlap 0, so that part is not checked
against a log.

Checked against ``tile-*.darshan`` (16 ranks, 4×4 tiles, 8×8 × 32 KiB and 32×32 × 4 KiB):
DXT_MPIIO holds one segment per rank (one call per view) at the tile's first byte
(``ty·elements_y·W·e + tx·elements_x·e``) with length ``elements_x·elements_y·e`` — our first
row offset and per-rank byte sum.  DXT_POSIX of the independent read (data sieving) spans
per rank exactly from our first row's first byte to our last row's last byte.  Collective
runs' POSIX records are the aggregator's two-phase buffers, not per-rank requests.
"""

from __future__ import annotations

import numpy as np

from .. import ParioError
from ..trace import Trace
from ._common import build_trace, check_int


def tile(tiles_x: int, tiles_y: int, elements_x: int, elements_y: int, element_size: int,
         overlap_x: int = 0, overlap_y: int = 0, op: str = "write", collective: bool = True,
         file: str = "tile.dat") -> Trace:
    """MPI-Tile-IO requests: one request per tile row (see module docstring)."""
    tiles_x = check_int("tiles x", tiles_x)
    tiles_y = check_int("tiles y", tiles_y)
    ex = check_int("elements x", elements_x)
    ey = check_int("elements y", elements_y)
    esize = check_int("element size", element_size)
    ox = check_int("overlap x", overlap_x, minimum=0)
    oy = check_int("overlap y", overlap_y, minimum=0)
    if ox >= ex or oy >= ey:
        raise ParioError(f"tile overlap ({ox} x {oy}) must be smaller than the tile ({ex} x {ey} elements)")
    width = tiles_x * ex - (tiles_x - 1) * ox
    procs = tiles_x * tiles_y
    r = np.arange(procs, dtype=np.int64)
    tx, ty = r % tiles_x, r // tiles_x
    k = np.arange(ey, dtype=np.int64)[None, :]
    rows = ty[:, None] * (ey - oy) + k
    offset = ((rows * width + (tx * (ex - ox))[:, None]) * esize).reshape(-1)
    rank = np.repeat(r, ey)
    length = np.full(len(rank), ex * esize, dtype=np.int64)
    call = np.zeros(len(rank), dtype=np.int64)  # one MPI-IO call per rank and phase
    return build_trace(rank, offset, length, op=op, files=(str(file),), call=call,
                       collective=collective)
