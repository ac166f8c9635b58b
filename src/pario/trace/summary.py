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
    return _histogram_rows(count, reads, writes, nbytes)


def _histogram_rows(count, reads, writes, nbytes) -> list[dict]:
    """The size histogram's rows: bin code c = 0 for zero-length requests, c = k + 1 for
    [2^k, 2^(k+1)); only the bins that hold requests."""
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


# --------------------------------------------------------------------------- streaming
PATTERN_GROUP_ROWS = 4 << 20  # rows per rank group when streams must be sorted (see summarize_file)
_SUMMARY_COLS = ("rank", "file", "op", "offset", "length", "start", "end", "collective", "order", "call")


class _Acc:
    """Running totals of :func:`summarize` over batches of requests."""

    def __init__(self):
        self.n = self.reads = self.writes = self.br = self.bw = self.coll = 0
        self.len_max = 0
        self.total = 0.0  # float sum of lengths: the 2^63-1 check of Trace.checked
        self.rank_max = -1
        self.ranks = np.zeros(0, dtype=np.int64)       # distinct ranks
        self.pairs = np.zeros(0, dtype=np.int64)       # distinct file << 32 | rank
        self.req_f = np.zeros(0, dtype=np.int64)
        self.br_f = np.zeros(0, dtype=np.int64)
        self.bw_f = np.zeros(0, dtype=np.int64)
        self.hist = np.zeros((3, 65), dtype=np.int64)  # count, reads, writes per size code
        self.hbytes = np.zeros(65, dtype=np.int64)
        self.t_start = np.inf
        self.t_start_max = -np.inf
        self.t_end = -np.inf
        self.any_start = self.any_end = False

    @staticmethod
    def _grow(a, n):
        if len(a) >= n:
            return a
        b = np.zeros(n, dtype=a.dtype)
        b[:len(a)] = a
        return b

    def add(self, b: dict, nfiles: int) -> None:
        rank, file, op, length = b["rank"], b["file"], b["op"], b["length"]
        n = len(rank)
        if n == 0:
            return
        self.n += n
        rd = op == READ
        wr = op == WRITE
        self.reads += int(rd.sum())
        self.writes += int(wr.sum())
        lr, lw = length[rd], length[wr]
        self.br += int(lr.sum())
        self.bw += int(lw.sum())
        self.total += float(length.sum(dtype=np.float64))
        self.len_max = max(self.len_max, int(length.max()))
        self.coll += int(b["collective"].sum()) if "collective" in b else 0
        self.rank_max = max(self.rank_max, int(rank.max()))
        r64 = rank.astype(np.int64)
        key = (file.astype(np.int64) << 32) | r64
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        self.pairs = np.union1d(self.pairs, key[starts])
        self.ranks = np.union1d(self.ranks, r64[starts])
        for name in ("req_f", "br_f", "bw_f"):
            setattr(self, name, self._grow(getattr(self, name), nfiles))
        self.req_f[:nfiles] += np.bincount(file, minlength=nfiles)
        self.br_f[:nfiles] += int_bincount(file[rd], lr, nfiles)
        self.bw_f[:nfiles] += int_bincount(file[wr], lw, nfiles)
        # size codes as size_histogram: 0 for zero length, floor(log2)+1 else
        k = np.zeros(n, dtype=np.int64)
        pos = length > 0
        k[pos] = np.frexp(length[pos].astype(np.float64))[1] - 1
        fix = pos & (np.left_shift(np.int64(1), k) > length)
        k[fix] -= 1
        code = np.where(pos, k + 1, 0)
        self.hist[0] += np.bincount(code, minlength=65)
        self.hist[1] += np.bincount(code[rd], minlength=65)
        self.hist[2] += np.bincount(code[wr], minlength=65)
        self.hbytes += int_bincount(code, length, 65)
        if "start" in b:
            st = b["start"]
            known = st[~np.isnan(st)]
            if known.size:
                self.any_start = True
                self.t_start = min(self.t_start, float(known.min()))
                self.t_start_max = max(self.t_start_max, float(known.max()))
            en = b["end"] if "end" in b else st[:0]
            en = en[~np.isnan(en)]
            if en.size:
                self.any_end = True
                self.t_end = max(self.t_end, float(en.max()))

    def histogram(self) -> list[dict]:
        count, reads, writes = self.hist
        return _histogram_rows(count, reads, writes, self.hbytes)


def _check_batch(b: dict, nfiles: int) -> bool:
    """The value checks of :meth:`Trace.checked` on one batch (False: a bad value)."""
    if not len(b["rank"]):
        return True
    from ..units import MAX_BYTES

    off, ln = b["offset"], b["length"]
    if b["rank"].min() < 0 or off.min() < 0 or ln.min() < 0:
        return False
    if (off > MAX_BYTES - ln).any():
        return False
    if b["file"].min() < 0 or b["file"].max() >= nfiles:
        return False
    if "call" in b and b["call"].min() < 0:
        return False
    return True


def summarize_file(path, *, where: str | None = None, progress=None) -> tuple[dict, int] | None:
    """:func:`summarize` of the Parquet trace at ``path``, streaming its row groups.

    Memory is bounded by a batch of :data:`~pario.trace.io.ROW_GROUP` rows plus per-stream
    and per-file state, whatever the trace's size; the result is exactly the summary of
    the whole loaded trace.  The access patterns are classified in the same pass when every
    stream's requests come in chronological order in the file (what pario writes); otherwise
    a second pass classifies them group of ranks by group of ranks (at most
    :data:`PATTERN_GROUP_ROWS` rows at a time, or one rank's requests if more).

    Returns ``(summary, meta_nprocs)``, or None when the file is not the usual schema or
    holds a bad value (the caller loads it whole, for the usual error message), and raises
    :class:`ParioError` (one line, naming ``where``) for a trace whose requests move no
    byte, as ``require_requests`` does.
    ``progress(rows_done, rows_total)`` is called after every batch.
    """
    from pathlib import Path

    from .. import ParioError
    from .io import ParquetBatches, _Unsupported
    from .patterns import PatternStream

    path = Path(path)
    try:
        src = ParquetBatches(path)
        if src.num_rows == 0:
            return None
        if not src.has("order"):
            return None  # orders derived from start times: the whole trace is needed (load)
        meta = src.meta()
        acc = _Acc()
        ps = PatternStream()
        total = src.num_rows
        done = 0
        for b in src.batches(_SUMMARY_COLS):
            nf = len(src.files)
            if not _check_batch(b, nf):
                return None
            acc.add(b, nf)
            if "order" in b and ps.monotone:
                ps.add(b["rank"], b["file"], b["op"], b["offset"], b["length"], b["order"])
            done += len(b["rank"])
            if progress is not None:
                progress(done, total)
        if acc.n != src.num_rows:
            return None
        from ..units import MAX_BYTES

        if acc.total > MAX_BYTES:
            return None
        files = tuple(src.files)
        patterns = ps.result(files)
        if patterns is None:
            patterns = _patterns_by_rank_groups(path, acc, files, progress, done, total)
    except _Unsupported:
        return None
    if acc.len_max == 0:
        raise ParioError(f"{where or path}: empty trace ({acc.n} requests, none of them moves a byte)")
    nranks = acc.rank_max + 1
    nf = len(files)
    req_f = _Acc._grow(acc.req_f, nf)
    br_f, bw_f = _Acc._grow(acc.br_f, nf), _Acc._grow(acc.bw_f, nf)
    ranks_f = np.bincount(acc.pairs >> 32, minlength=nf)
    time = None
    if acc.any_start:
        time = {"start": acc.t_start, "end": acc.t_end if acc.any_end else acc.t_start_max}
    return {
        "ranks": nranks,
        "ranks_with_io": int(acc.ranks.size),
        "nprocs": max(meta.nprocs or 0, nranks),
        "source": meta.source,
        "aggregators": list(meta.aggregators) if meta.aggregators is not None else None,
        "hints": dict(meta.hints),
        "command": meta.command,
        "partial": bool(meta.partial),
        "approximate": meta.approximate,
        "notes": list(meta.notes),
        "requests": acc.n,
        "reads": acc.reads,
        "writes": acc.writes,
        "bytes_read": acc.br,
        "bytes_written": acc.bw,
        "collective": acc.coll,
        "time": time,
        "files": [{"name": files[i], "requests": int(req_f[i]), "bytes_read": int(br_f[i]),
                   "bytes_written": int(bw_f[i]), "ranks": int(ranks_f[i])} for i in range(nf) if req_f[i]],
        "size_histogram": acc.histogram(),
        "patterns": {str(r): f for r, f in patterns.items()},
    }, meta.nprocs


def _patterns_by_rank_groups(path, acc: _Acc, files, progress, done, total) -> dict:
    """pattern_map rank group by rank group (streams never cross ranks): a pass over the
    file per group, keeping only that group's requests."""
    from .io import ParquetBatches
    from .patterns import pattern_map

    # requests per rank: one more pass over the rank column
    src = ParquetBatches(path)
    counts = np.zeros(acc.rank_max + 1, dtype=np.int64)
    for b in src.batches(("rank",)):
        counts += np.bincount(b["rank"], minlength=len(counts))
    bounds, run = [0], 0
    for r, c in enumerate(counts.tolist()):
        if run and run + c > PATTERN_GROUP_ROWS:
            bounds.append(r)
            run = 0
        run += c
    bounds.append(len(counts))
    out: dict[int, dict[str, dict]] = {}
    cols = ("rank", "file", "op", "offset", "length", "order")
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        src = ParquetBatches(path)  # the same batches in the same order: the same file numbering
        parts = {c: [] for c in cols}
        for b in src.batches(cols):
            keep = (b["rank"] >= lo) & (b["rank"] < hi)
            for c in cols:
                parts[c].append(b[c][keep])
        sub = Trace({c: np.concatenate(v) for c, v in parts.items()}, files)
        out.update(pattern_map(sub))
        if progress is not None:
            progress(done + (total - done) * hi // len(counts), total)
    return out
