r"""IOR access patterns (IOR 4.1, ``hpc/ior`` ``src/ior.c``: ``WriteOrRead`` and
``GetOffsetArrayRandom``), one request per transfer.

Parameters as IOR names them: ``procs`` tasks (``-N``/``mpiexec -n``), transfer size
``xfer`` (``-t``), block size ``block`` (``-b``), ``segments`` (``-s``), ``-z``
(``pattern="random"``), ``-F`` (``file_per_proc``), ``-c`` (``collective``), ``-w``/``-r``
(``op``).  ``n = block / xfer`` transfers per block, rank ``r``, segment ``i``, transfer
``j``:

``pattern="strided"`` — IOR's own (segmented) layout, exactly what
``ior -b block -t xfer -s segments`` does::

    offset = i·procs·block + r·block + j·xfer

With ``block == xfer`` this is the classic interleaved strided pattern
(``-b 64k -t 64k -s 64``: segment i holds one transfer of every rank, in rank order); with
``block > xfer`` each rank writes a contiguous block per segment, blocks of the ranks
interleaved segment by segment.

``pattern="sequential"`` — every rank owns one contiguous region of ``segments·block``
bytes and walks it from the start::

    offset = r·segments·block + i·block + j·xfer

For ``segments == 1`` this is identical to IOR (``-b 4m -t 64k -s 1``); for more segments
it is what IOR gives with ``-s 1 -b segments·block``.

``pattern="random"`` — IOR's ``-z`` for a *shared* file, reproduced bit for bit
(``GetOffsetArrayRandom``).  IOR seeds glibc ``srandom(seed)`` (the same seed on every
rank; by default ``time(NULL)`` of rank 0), then for each of the
``N = procs·block/xfer`` transfer slots of one segment ``q = 0 … N-1`` draws
``rand() % procs`` and gives slot ``q`` to that rank: *the slots of the whole segment
(procs·block bytes, the whole file when segments = 1) are dealt out at random, so ranks get
different numbers of transfers* (e.g. 50 … 78 of 64 in ``ior-mpiio-random-16r-64k``).  It
re-seeds, repeats the N draws to fill each rank's ascending slot list
``a = [q·xfer …]``, then shuffles it with the next draws:
``for k in 0…len(a)-1: swap(a[k], a[rand() % len(a)])``.  Each segment reuses the same
list::

    offset = a_r[j] + i·procs·block          (j = 0 … len(a_r)-1)

With ``file_per_proc`` IOR seeds ``srandom(seed + r)``, ``a = [0, xfer, …, (n-1)·xfer]``
is shuffled the same way and ``offset = a_r[j] + i·block``.  The read phase of ``-w -r``
regenerates the same list from the same seed, so reads repeat the write order (checked in
the logs).  IOR rejects ``-z`` with ``block == xfer``; so does this generator.

``file_per_proc`` — file ``f"{file}.{r:08d}"`` per rank (IOR's ``-F`` naming); offsets
start at 0 in every file: sequential/strided give ``offset = i·block + j·xfer``.

``op="both"`` is ``-w -r``: the write phase, then the read phase of the same transfers in
the same order, ``order`` continuing.  ``collective`` only sets the flag (``-c`` issues
``MPI_File_write_at_all`` per transfer; offsets do not change).

``seed`` is the value IOR hands to ``srandom()``: to reproduce a run with the default
seed, pass the run's ``time(NULL)`` (the tests recover 1795239449 for
``ior-mpiio-random-16r-64k.darshan`` from the job start time).  The glibc ``random()``
emulation and the swap loop are sequential Python (about 1.5 µs per transfer of one
segment); everything else is vectorised.
"""

from __future__ import annotations

import numpy as np

from .. import ParioError
from ..trace import Trace
from ._common import build_trace, check_int, op_phases

PATTERNS = ("sequential", "strided", "random")


def glibc_random(seed: int, n: int) -> np.ndarray:
    """The first ``n`` values of glibc ``random()`` (= ``rand()``) after ``srandom(seed)``.

    glibc's default TYPE_3 generator: state r[0] = seed (0 → 1), r[i] = 16807·r[i-1] mod
    (2³¹-1) for i < 31 (Schrage's method on a signed 32-bit seed), r[i] = r[i-31] for
    31 ≤ i < 34, then r[i] = (r[i-3] + r[i-31]) mod 2³² and output r[i] >> 1 for i ≥ 344
    (the first 310 are discarded).
    """
    seed = int(np.array(int(seed) & 0xFFFFFFFF, dtype=np.uint32).astype(np.int32))
    if seed == 0:
        seed = 1
    r = [seed & 0xFFFFFFFF]
    word = seed
    for _ in range(1, 31):
        hi = int(word / 127773)          # C division truncates toward zero
        lo = word - hi * 127773
        word = 16807 * lo - 2836 * hi
        if word < 0:
            word += 2147483647
        r.append(word & 0xFFFFFFFF)
    r.extend(r[0:3])
    mask = 0xFFFFFFFF
    for i in range(34, 344 + n):
        r.append((r[i - 31] + r[i - 3]) & mask)
    return np.asarray(r[344:], dtype=np.int64) >> 1


def _ior_shuffle(slots: list, draws: np.ndarray) -> list:
    """IOR's reorder loop: ``swap(a[k], a[draws[k] % len(a)])`` for k = 0 … len(a)-1."""
    n = len(slots)
    if n == 0:
        return slots
    for k, v in enumerate((draws[:n] % n).tolist()):
        slots[k], slots[v] = slots[v], slots[k]
    return slots


def random_offsets(procs: int, block: int, xfer: int, seed: int = 0,
                   file_per_proc: bool = False) -> list[np.ndarray]:
    """Per rank, IOR's ``GetOffsetArrayRandom`` list (offsets within one segment, issue order)."""
    n_slots = block // xfer
    if file_per_proc:
        out = []
        for r in range(procs):
            draws = glibc_random(seed + r, n_slots)
            out.append(np.asarray(_ior_shuffle(list(range(n_slots)), draws), dtype=np.int64) * xfer)
        return out
    total = procs * n_slots
    # Pass 1 and pass 2 draw the same `total` numbers (srandom(seed) again); every rank then
    # continues the same stream for its shuffle, so draws[total:] is shared by all ranks.
    owners_needed = glibc_random(seed, 2 * total)  # upper bound: a rank has <= total slots
    owner = owners_needed[:total] % procs
    rest = owners_needed[total:]
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=procs)
    bounds = np.r_[0, np.cumsum(counts)]
    out = []
    for r in range(procs):
        slots = order[bounds[r]:bounds[r + 1]].tolist()
        out.append(np.asarray(_ior_shuffle(slots, rest), dtype=np.int64) * xfer)
    return out


def _check(procs, xfer, block, segments, pattern, op):
    procs = check_int("procs", procs)
    xfer = check_int("xfer (transfer size)", xfer)
    block = check_int("block size", block)
    segments = check_int("segments", segments)
    op_phases(op)
    pattern = str(pattern).strip().lower()
    if pattern not in PATTERNS:
        raise ParioError(f"bad IOR pattern {pattern!r}: expected one of {', '.join(PATTERNS)}")
    if block < xfer:
        raise ParioError(f"IOR block size {block} must not be smaller than the transfer size {xfer}")
    if block % xfer:
        raise ParioError(f"IOR transfer size {xfer} must divide the block size {block}")
    if pattern == "random" and block == xfer:
        raise ParioError("IOR random (-z) shuffles transfers within a block: choose block > xfer")
    return procs, xfer, block, segments, pattern


def ior_chunks(procs: int, xfer: int, block: int, segments: int = 1, pattern: str = "sequential",
               op: str = "write", file_per_proc: bool = False, seed: int = 0, collective: bool = False,
               file: str = "ior.dat", chunk: int = 1 << 22):
    """The rows of :func:`ior`, in the same order, as traces of at most ``chunk`` requests
    (every one with the whole file list): a trace of any size in bounded memory, for
    :class:`pario.trace.io.ParquetTraceWriter`.  The first value yielded is the total
    number of requests; then the chunks."""
    procs, xfer, block, segments, pattern = _check(procs, xfer, block, segments, pattern, op)
    phases = op_phases(op)
    n = block // xfer
    files = tuple(f"{file}.{r:08d}" for r in range(procs)) if file_per_proc else (str(file),)
    if pattern == "random":
        lists = random_offsets(procs, block, xfer, seed=int(seed), file_per_proc=file_per_proc)
        per_seg = np.array([len(a) for a in lists], dtype=np.int64)
        seg_stride = block if file_per_proc else procs * block
    else:
        lists = None
        per_seg = np.full(procs, n, dtype=np.int64)
    count = per_seg * segments  # requests of each rank in one phase
    yield int(count.sum()) * len(phases)
    chunk = max(1, int(chunk))
    for k, code in enumerate(phases):
        for r in range(procs):
            m = int(per_seg[r])
            for p0 in range(0, int(count[r]), chunk):
                p = np.arange(p0, min(int(count[r]), p0 + chunk), dtype=np.int64)
                seg, j = p // max(m, 1), p % max(m, 1)
                if lists is not None:
                    offset = lists[r][j] + seg * seg_stride
                elif file_per_proc:
                    offset = seg * block + j * xfer
                elif pattern == "strided":
                    offset = seg * procs * block + r * block + j * xfer
                else:  # sequential
                    offset = r * segments * block + seg * block + j * xfer
                rows = len(p)
                yield Trace.from_arrays(
                    np.full(rows, r, dtype=np.int64),
                    np.full(rows, r if file_per_proc else 0, dtype=np.int32),
                    np.full(rows, code, dtype=np.int8), offset, np.full(rows, xfer, dtype=np.int64),
                    files=files, collective=bool(collective), order=p + k * count[r],
                )


def ior(procs: int, xfer: int, block: int, segments: int = 1, pattern: str = "sequential",
        op: str = "write", file_per_proc: bool = False, seed: int = 0, collective: bool = False,
        file: str = "ior.dat") -> Trace:
    """IOR requests (see the module docstring for the offset formulas)."""
    procs, xfer, block, segments, pattern = _check(procs, xfer, block, segments, pattern, op)
    n = block // xfer

    if file_per_proc:
        files = tuple(f"{file}.{r:08d}" for r in range(procs))
    else:
        files = (str(file),)

    if pattern == "random":
        lists = random_offsets(procs, block, xfer, seed=int(seed), file_per_proc=file_per_proc)
        seg_stride = block if file_per_proc else procs * block
        counts = np.array([len(a) for a in lists], dtype=np.int64)
        per_seg = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
        # rank-major, then segment, then the list order
        rank = np.repeat(np.arange(procs), counts * segments)
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        within = np.arange(len(rank)) - np.repeat(starts * segments, counts * segments)
        cnt = counts[rank]
        seg = within // np.maximum(cnt, 1)
        idx = starts[rank] + within % np.maximum(cnt, 1)
        offset = per_seg[idx] + seg * seg_stride
    else:
        r = np.arange(procs, dtype=np.int64)[:, None, None]
        i = np.arange(segments, dtype=np.int64)[None, :, None]
        j = np.arange(n, dtype=np.int64)[None, None, :]
        if file_per_proc:
            off3 = i * block + j * xfer + 0 * r
        elif pattern == "strided":
            off3 = i * procs * block + r * block + j * xfer
        else:  # sequential
            off3 = r * segments * block + i * block + j * xfer
        offset = off3.reshape(-1)
        rank = np.repeat(np.arange(procs), segments * n)
    file_idx = rank if file_per_proc else None
    length = np.full(len(rank), xfer, dtype=np.int64)
    return build_trace(rank, offset, length, op=op, files=files, file=file_idx, collective=collective)
