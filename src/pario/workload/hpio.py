r"""HPIO (Ching, Choudhary, Liao, Ward, Pundit, "Evaluating I/O characteristics and methods
for storing structured scientific data", 2006; HPIO 1.55) — the *c-nc* test: contiguous
memory, noncontiguous file.

Every rank issues one MPI-IO call per phase whose file view (a vector filetype) selects
``region_count`` regions of ``region_size`` bytes.  Regions of all ranks are interleaved
round-robin, each followed by ``region_spacing`` bytes of gap.  Region ``i`` of rank ``r``::

    offset(i, r) = (i·procs + r) · (region_size + region_spacing)
    length       = region_size                      (i = 0 … region_count-1)

One request per region, in ascending ``i``.  Regions of a rank that abut (only when
``procs == 1`` and ``region_spacing == 0``) are one contiguous extent of the same call and
become one request (see :mod:`pario.workload._common`).

Checked against the shared Darshan logs (``hpio-{indep,coll}-c-nc-*``, 8 and 16 ranks,
spacing 0 / 1 KiB / 8 KiB):

* DXT_MPIIO has one segment per rank per phase (one call); its offset is the byte offset
  of the view's first byte, ``r·(region_size + region_spacing)`` = our first region, and its
  length is ``region_count·region_size`` = the sum of our lengths for that rank.
* DXT_POSIX of the independent runs (ROMIO data sieving) spans per rank exactly
  ``[r·(size+spacing), ((count-1)·procs + r)·(size+spacing) + size)``, the first and last
  byte of our regions; the 16-rank 1024×16 KiB / 1 KiB case rules out the alternative
  ``i·procs·size + i·spacing`` layout.

``op="both"`` is HPIO's ``-O 11`` (write the file, then read it back); ``collective``
(HPIO ``-m 01``) only sets the flag.
"""

from __future__ import annotations

import numpy as np

from ..trace import Trace
from ._common import build_trace, check_int


def hpio(procs: int, region_count: int, region_size: int, region_spacing: int = 0,
         op: str = "write", collective: bool = False, file: str = "hpio.dat") -> Trace:
    """HPIO c-nc requests (see the module docstring for the offset formula)."""
    procs = check_int("procs", procs)
    region_count = check_int("region count", region_count)
    region_size = check_int("region size", region_size)
    region_spacing = check_int("region spacing", region_spacing, minimum=0)
    r = np.arange(procs, dtype=np.int64)[:, None]
    i = np.arange(region_count, dtype=np.int64)[None, :]
    offset = ((i * procs + r) * (region_size + region_spacing)).reshape(-1)
    rank = np.repeat(np.arange(procs, dtype=np.int64), region_count)
    length = np.full(len(rank), region_size, dtype=np.int64)
    call = np.zeros(len(rank), dtype=np.int64)  # one MPI-IO call per rank and phase
    return build_trace(rank, offset, length, op=op, files=(str(file),), call=call,
                       collective=collective)
