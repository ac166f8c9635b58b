"""What ``pario run`` measures after each run: traced I/O time, per-request latencies, RMT
hits, checksums of the files, and the program's own phase times.

- :func:`io_busy` — the traced I/O time of a run: the time with a request in flight (the
  quantity the cost model prices; open, close and the program's other gaps are outside it);
- :func:`io_span` — first request's start → last request's end (gaps included).
- :func:`rmt_hit_mask` / :func:`rmt_hits` — the requests of a trace that overlap an RMT
  entry of their file: the ones the redirector serves through replicas (seed 000 §4.6).
- :func:`request_latencies` — run 2's requests matched with the same requests of run 1
  (rank, file, op, offset, length, and the k-th occurrence of that key) and split into
  redirected (RMT hit) and other reads and writes: each class's latency (end − start) in
  both runs.
- :func:`time_in_requests` — how the slowest rank's traced span splits into time inside its
  requests and time between them.
- :func:`program_phases` — the ``open / write / read / close`` seconds a program prints
  (``examples/ior_like.py``'s last line), when it prints them.
- :func:`file_digests` — SHA-256 of every file as a reader sees it through the store.
- :func:`flush_stats` — the flush of dirty replica bytes at the program's end, as the ranks
  reported it (``PARIO_SERVE_STATS``).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

CLASSES = ("hit_read", "hit_write", "miss_read", "miss_write")


def io_span(trace) -> float | None:
    """Seconds from the first request's start to the last request's end: the I/O time with the
    program's gaps in it (its close and open between phases, its computation)."""
    if trace is None or len(trace) == 0 or not trace.has_times:
        return None
    end = np.where(np.isnan(trace.end), trace.start, trace.end)
    return float(np.nanmax(end) - np.nanmin(trace.start))


def io_busy(trace) -> float | None:
    """Seconds during which at least one request of any rank was in flight: the union of the
    requests' ``[start, end]`` intervals (the traced I/O time).  What the models price —
    every request's time, the phases back to back — and what the span adds are the program's
    gaps (:func:`io_span` − this): the close and open between IOR's iterations, computation."""
    if trace is None or len(trace) == 0 or not trace.has_times:
        return None
    s = np.asarray(trace.start, dtype=float)
    e = np.where(np.isnan(trace.end), s, np.asarray(trace.end, dtype=float))
    keep = ~np.isnan(s)
    s, e = s[keep], np.maximum(e[keep], s[keep])
    if s.size == 0:
        return None
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)                 # the furthest end so far
    new = np.r_[True, s[1:] > reach[:-1]]            # a request that starts after every earlier one ended
    first = np.flatnonzero(new)
    seg_end = np.maximum.reduceat(e, first)
    return float(np.sum(seg_end - s[first]))


def plain_digest(path: str) -> str | None:
    """SHA-256 of a file outside the store (the reference run's), None when it does not exist."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(8 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def file_digests(store_dir: str, names) -> dict[str, str]:
    """SHA-256 of each file as a reader sees it through the store (redirector included)."""
    from ..store import Store

    out = {}
    with Store(store_dir) as st:
        for name in names:
            if not st.exists(name):
                continue
            h = hashlib.sha256()
            with st.open(name) as f:
                size, pos = int(f.size), 0
                while pos < size:
                    chunk = f.read(pos, min(8 << 20, size - pos))
                    if not chunk:
                        break
                    h.update(chunk)
                    pos += len(chunk)
            out[name] = h.hexdigest()
    return out


def rmt_hit_mask(store_dir: str, trace) -> np.ndarray:
    """One bool per request of ``trace``: it overlaps an RMT entry of its file."""
    from ..store import Store

    hit = np.zeros(len(trace), dtype=bool)
    with Store(store_dir) as st:
        for fi, name in enumerate(trace.files):
            sel = np.flatnonzero(trace.file == fi)
            if len(sel) == 0:
                continue
            ent = st.rmt.entries(name)
            x = trace.offset[sel]
            hit[sel] = ent.hits_many(x, x + trace.length[sel])
    return hit


def hit_counts(trace, hit: np.ndarray) -> dict:
    """Requests, bytes and writes of ``trace`` among the ``hit`` ones (``pario run``'s ``redirected``)."""
    wr = trace.op == 1
    return {"requests": int(len(trace)), "hit_requests": int(hit.sum()),
            "hit_bytes": int(trace.length[hit].sum()), "bytes": int(trace.length.sum()),
            "hit_write_requests": int((hit & wr).sum())}


NO_HITS = {"requests": 0, "hit_requests": 0, "hit_bytes": 0, "bytes": 0, "hit_write_requests": 0}


def rmt_hits(store_dir: str, trace) -> dict:
    """Requests (and bytes) of ``trace`` that overlap an RMT entry of their file: the ones the
    redirector serves through replicas (seed 000 §4.6)."""
    return hit_counts(trace, rmt_hit_mask(store_dir, trace))


def match_requests(t1, t2) -> np.ndarray:
    """For each request of ``t2`` the row of the same request in ``t1`` (-1 if none): same
    rank, file name, op, offset and length, and the k-th such request of ``t2`` (by start
    time) matched with the k-th of ``t1``."""
    import pandas as pd

    def frame(t):
        df = pd.DataFrame({"rank": t.rank, "file": np.array(t.files, dtype=object)[t.file] if len(t) else [],
                           "op": t.op, "offset": t.offset, "length": t.length,
                           "start": t.start, "row": np.arange(len(t))})
        df = df.sort_values(["start", "row"], kind="stable")
        df["k"] = df.groupby(["rank", "file", "op", "offset", "length"], sort=False).cumcount()
        return df

    out = np.full(len(t2), -1, dtype=np.int64)
    if len(t1) == 0 or len(t2) == 0:
        return out
    m = frame(t2).merge(frame(t1), on=["rank", "file", "op", "offset", "length", "k"], suffixes=("2", "1"))
    out[m["row2"].to_numpy()] = m["row1"].to_numpy()
    return out


def _latency(t) -> np.ndarray:
    return np.where(np.isnan(t.end), np.nan, t.end - t.start)


def request_latencies(t1, t2, hit2: np.ndarray) -> dict | None:
    """Run 2's requests in four classes (redirected = RMT hit, read / write), each compared
    with the same requests in run 1 (:func:`match_requests`): ``n``, ``matched``, median and
    mean latency in µs in each run, and ``extra_s_max`` / ``extra_s_min`` — the largest and
    the smallest, over ranks, sum of (run-2 latency − run-1 latency) of the class's matched
    requests of one rank (a rank's requests run one after another, so that is how much
    longer, or shorter, the class kept that rank in I/O).  None when either trace has no times."""
    if t1 is None or t2 is None or not (t1.has_times and t2.has_times):
        return None
    match = match_requests(t1, t2)
    lat1, lat2 = _latency(t1), _latency(t2)
    out: dict = {"matched": int((match >= 0).sum()), "requests": int(len(t2)), "classes": {}}
    for cls in CLASSES:
        want_hit = cls.startswith("hit")
        op = 1 if cls.endswith("write") else 0
        sel = np.flatnonzero((hit2 == want_hit) & (t2.op == op))
        ok = sel[match[sel] >= 0]
        ok = ok[~np.isnan(lat2[ok]) & ~np.isnan(lat1[match[ok]])]
        row = {"n": int(len(sel)), "matched": int(len(ok)), "run1_median_us": None, "run2_median_us": None,
               "run1_mean_us": None, "run2_mean_us": None, "extra_s_max": None, "extra_s_min": None}
        if len(ok):
            a, b = lat1[match[ok]], lat2[ok]
            diff = b - a
            ranks = t2.rank[ok]
            per_rank = np.bincount(ranks, weights=diff)[np.unique(ranks)]
            row.update({"run1_median_us": float(np.median(a) * 1e6), "run2_median_us": float(np.median(b) * 1e6),
                        "run1_mean_us": float(np.mean(a) * 1e6), "run2_mean_us": float(np.mean(b) * 1e6),
                        "extra_s_max": float(per_rank.max()), "extra_s_min": float(per_rank.min())})
        out["classes"][cls] = row
    return out


def time_in_requests(trace) -> dict | None:
    """Where the rank with the longest traced span spent it: ``{"rank", "span_s", "in_requests_s",
    "between_s"}`` — its first request's start → last request's end, the sum of its requests'
    latencies (a rank's requests run one after another) and the rest, time between its
    requests (the program itself, or waiting for a CPU).  None without times."""
    if trace is None or len(trace) == 0 or not trace.has_times:
        return None
    end = np.where(np.isnan(trace.end), trace.start, trace.end)
    ranks = np.unique(trace.rank)
    first = np.array([trace.start[trace.rank == r].min() for r in ranks])   # one pass per rank
    last = np.array([end[trace.rank == r].max() for r in ranks])
    busy = np.array([(end - trace.start)[trace.rank == r].sum() for r in ranks])
    k = int(np.argmax(last - first))
    return {"rank": int(ranks[k]), "span_s": float(last[k] - first[k]), "in_requests_s": float(busy[k]),
            "between_s": float(last[k] - first[k] - busy[k])}


_PHASE = re.compile(r"\b(open|write|read|close) (\d+(?:\.\d+)?(?:[eE][-+]?\d+)?) s\b")


def program_phases(output: str) -> dict[str, float] | None:
    """The phase times a program printed in its last line that names ``close <seconds> s``
    (``examples/ior_like.py``: ``open 0.110 s  write 0.007 s (…)  read 0.004 s (…)  close 0.479 s``),
    as ``{"open": s, "write": s, "read": s, "close": s}`` (the phases it printed); None if none."""
    for line in reversed(output.splitlines()):
        found = dict((k, float(v)) for k, v in _PHASE.findall(line))
        if "close" in found:
            return found
    return None


def flush_stats(path) -> dict | None:
    """The flush at the program's end from the JSON lines the ranks appended to ``path``
    (``PARIO_SERVE_STATS``: the served runtime at ``MPI_Finalize``, interpose/serve.c, and
    :func:`pario.mpi.storeio.report_flush` at a ``pario.mpi.File`` close): ``{"flush_s",
    "last_out_s", "close_s", "flushed_bytes", "ranks", "lines", "at"}`` — the longest any rank
    spent flushing (its lines summed), in the last process's work and in closing the store, the
    bytes all flushes copied, the ranks that reported and where (``finalize``, ``close``).
    None when no rank reported (the file is missing or empty)."""
    import json
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text()
    except OSError:
        return None
    per: dict[int, dict] = {}
    at, n = set(), 0
    for line in text.splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue        # a rank killed mid-line: its line is lost, the others count
        n += 1
        at.add(str(d.get("at")))
        r = per.setdefault(int(d.get("rank", -1)), {"flush_s": 0.0, "last_out_s": 0.0, "close_s": 0.0, "bytes": 0})
        r["flush_s"] += float(d.get("flush_s", 0.0))
        r["last_out_s"] += float(d.get("last_out_s", 0.0))
        r["close_s"] += float(d.get("close_s", 0.0))
        r["bytes"] += int(d.get("flushed_bytes", 0))
    if not per:
        return None
    return {"flush_s": max(r["flush_s"] for r in per.values()),
            "last_out_s": max(r["last_out_s"] for r in per.values()),
            "close_s": max(r["close_s"] for r in per.values()),
            "flushed_bytes": sum(r["bytes"] for r in per.values()), "ranks": len(per), "lines": n,
            "at": sorted(at)}
