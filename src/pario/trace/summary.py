"""One-dictionary summary of a trace (what ``pario trace show`` prints).

:func:`summarize` returns plain Python types only (JSON-ready; dictionary keys are strings).
"""

from __future__ import annotations

import numpy as np

from ..units import format_size
from .core import READ, WRITE, Trace
from .patterns import int_bincount, pattern_map
from ..arrays import unique


def rank_ranges(ranks) -> str:
    """Distinct ranks as ranges: ``[0, 1, 2, 5, 7, 8]`` → ``"0-2,5,7-8"``."""
    ranks = sorted({int(r) for r in ranks})
    parts, i = [], 0
    while i < len(ranks):  # over distinct ranks, not requests
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


def size_histogram(length: np.ndarray, op: np.ndarray) -> list[dict]:
    """Power-of-two request-size bins ``[2^k, 2^(k+1))`` (zero-length requests get their own
    bin ``[0, 1)``); only non-empty bins, in increasing size."""
    length = np.asarray(length, dtype=np.int64)
    op = np.asarray(op)
    if length.size == 0:
        return []
    k = np.zeros(length.size, dtype=np.int64)
    pos = length > 0
    # exact floor(log2) for int64 (float log2 can round up just below a power of two)
    k[pos] = np.frexp(length[pos].astype(np.float64))[1] - 1
    fix = pos & (np.left_shift(np.int64(1), k) > length)
    k[fix] -= 1
    code = np.where(pos, k + 1, 0)  # 0: zero-length bin, k+1: [2^k, 2^(k+1))
    nb = int(code.max()) + 1
    count = np.bincount(code, minlength=nb)
    reads = np.bincount(code[op == READ], minlength=nb)
    writes = np.bincount(code[op == WRITE], minlength=nb)
    nbytes = int_bincount(code, length, nb)
    out = []
    for c in np.flatnonzero(count):
        lo = 0 if c == 0 else 1 << int(c - 1)
        hi = 1 if c == 0 else 1 << int(c)
        out.append({
            "bin": "0 B" if c == 0 else f"{format_size(lo)}-{format_size(hi)}",
            "lo": lo, "hi": hi, "count": int(count[c]), "reads": int(reads[c]),
            "writes": int(writes[c]), "bytes": int(nbytes[c]),
        })
    return out


def summarize(trace: Trace) -> dict:
    """Totals, per-file table, request-size histogram and the spatial pattern of every
    (rank, file) (CEDA seed 000 §4.2, see :mod:`pario.trace.patterns`).

    Keys: ``ranks`` (number of ranks = highest rank + 1), ``ranks_with_io``, ``nprocs`` (the
    job's process count: the metadata's, else ``ranks``), ``requests``,
    ``reads``, ``writes``, ``bytes_read``, ``bytes_written``, ``collective`` (number of
    collective requests), ``time`` (``{"start", "end"}`` or ``None``), ``files`` (list of
    ``{name, requests, bytes_read, bytes_written, ranks}``), ``size_histogram`` (see
    :func:`size_histogram`), ``patterns`` (``{rank: {file: {kind, stride, requests, bytes}}}``
    with string rank keys), and what the trace's :class:`~pario.trace.core.TraceMeta` says:
    ``source``, ``aggregators`` (list or None), ``hints`` (dict), ``command``, ``partial``,
    ``approximate`` (empty unless the requests are synthesized: then how), ``notes``.
    """
    c = trace.cols
    n = len(trace)
    op, length, file, rank = c["op"], c["length"], c["file"], c["rank"]
    nf = len(trace.files)
    req_f = np.bincount(file, minlength=nf)
    br_f = int_bincount(file[op == READ], length[op == READ], nf)
    bw_f = int_bincount(file[op == WRITE], length[op == WRITE], nf)
    ranks_f = np.zeros(nf, dtype=np.int64)
    if n:
        nr = trace.nranks
        pairs = unique(file.astype(np.int64) * nr + rank)  # distinct (file, rank)
        ranks_f = np.bincount(pairs // nr, minlength=nf)
    files = [
        {"name": trace.files[i], "requests": int(req_f[i]), "bytes_read": int(br_f[i]),
         "bytes_written": int(bw_f[i]), "ranks": int(ranks_f[i])}
        for i in range(nf) if req_f[i]
    ]
    start, end = c["start"], c["end"]
    known = ~np.isnan(start)
    time = None
    if known.any():
        ends = end[~np.isnan(end)]
        time = {"start": float(start[known].min()),
                "end": float(ends.max()) if ends.size else float(start[known].max())}
    patterns = {str(r): files_ for r, files_ in pattern_map(trace).items()}
    m = trace.meta
    return {
        "ranks": trace.nranks,
        "ranks_with_io": int(unique(rank).size),
        "nprocs": trace.nprocs,
        "source": m.source,
        "aggregators": list(m.aggregators) if m.aggregators is not None else None,
        "hints": dict(m.hints),
        "command": m.command,
        "partial": bool(m.partial),
        "approximate": m.approximate,
        "notes": list(m.notes),
        "requests": n,
        "reads": int((op == READ).sum()),
        "writes": int((op == WRITE).sum()),
        "bytes_read": trace.bytes_read,
        "bytes_written": trace.bytes_written,
        "collective": int(c["collective"].sum()),
        "time": time,
        "files": files,
        "size_histogram": size_histogram(length, op),
        "patterns": patterns,
    }
