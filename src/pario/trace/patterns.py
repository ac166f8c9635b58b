"""Spatial access-pattern identifier (CEDA seed 000 §4.2, first form).

CEDA's *identifier* "separates the trace entries by MPI rank … scans the I/O traces
chronologically and attempts to derive the access patterns by utilizing a template matching
approach" (IOSIG, the paper's ref. [31]).  This module implements that step for the spatial
pattern, vectorised over the whole trace.

**Streams.**  A stream is the chronological sequence (trace column ``order``) of the
requests of one (rank, file, op) — IOSIG's I/O signature keeps the operation as one of its
dimensions, and IOR-style "write everything, then read it back" would otherwise look like a
pattern change.  ``by_op=False`` makes one stream per (rank, file).

**Transitions and templates.**  Between successive requests *i* and *i+1* of a stream,
with offsets ``o`` and lengths ``l``, the *gap* is ``o[i+1] − (o[i] + l[i])`` and the
*distance* is ``o[i+1] − o[i]``.  The transition's template is ``contiguous`` when the gap
is 0, else ``repeated`` when the distance is 0 (the request starts where the previous one
started: the same range read or written again), else ``strided(distance)``.

**Runs** (the segmentation a planner can build on, e.g. for repeated patterns).  A *block*
is a maximal sequence of consecutive transitions of one stream with the same template.  A
block is *regular* when it has at least :data:`MIN_RUN_TRANSITIONS` (= 2) transitions (the
template was seen to repeat, i.e. ≥ 3 requests) or when it covers the whole stream.  Each
request joins the regular block of its incoming transition, else that of its outgoing
transition (so a request at a boundary stays with the run it ends), else it is
*irregular*.  The requests of one regular block form a run of kind ``contiguous``,
``repeated`` or ``strided`` (``stride`` = the constant distance, never 0); each maximal
sequence of irregular requests forms a run of kind ``random``.  Runs partition every
stream.

**Stream kind.**

* ``contiguous`` — every request starts where the previous one ended (also: a stream of
  one request);
* ``strided`` — not contiguous, and the distance between successive offsets is one
  constant non-zero ``stride`` (it may be negative: a backward scan; two non-adjacent
  requests are strided);
* ``repeated`` — every request starts at the same offset as the previous one (distance
  0: a re-read or re-write of the same range; no stride);
* ``mixed`` — none of these, but at least :data:`MIXED_MIN_REGULAR` (= 50 %) of the requests
  lie in contiguous or strided runs (a stream that is mostly made of regular pieces, with
  changes between them); ``main_kind`` / ``main_stride`` name the template that covers
  the most requests;
* ``random`` — everything else.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

import numpy as np

from .core import OP_NAMES, Trace

if TYPE_CHECKING:
    import pandas as pd
# pandas is imported where data frames are built: the streaming summary does without it

KINDS = ("contiguous", "strided", "repeated", "mixed", "random")
RUN_KINDS = ("contiguous", "strided", "repeated", "random")
MIN_RUN_TRANSITIONS = 2
MIXED_MIN_REGULAR = 0.5

_CONTIG, _STRIDED, _REPEATED, _MIXED, _RANDOM = range(5)   # codes into KINDS
_R_CONTIG, _R_STRIDED, _R_REPEATED, _R_RANDOM = range(4)      # codes into RUN_KINDS


@dataclass(frozen=True)
class Segmentation:
    """The identifier's full result.

    ``rows``: trace row indices in stream order (stream by stream, each chronological);
    ``stream`` / ``run``: for each position of ``rows``, its stream id and (global) run id;
    ``streams``: one row per stream (see :func:`identify`); ``runs``: one row per run (see
    :func:`runs`).
    """

    rows: np.ndarray
    stream: np.ndarray
    run: np.ndarray
    streams: pd.DataFrame
    runs: pd.DataFrame

    def run_of_row(self, n: int) -> np.ndarray:
        """Run id of every trace row (index = trace row)."""
        out = np.empty(n, dtype=np.int64)
        out[self.rows] = self.run
        return out


def int_bincount(index: np.ndarray, weights: np.ndarray, minlength: int = 0) -> np.ndarray:
    """Exact int64 ``np.bincount(index, weights)`` (float weights lose bytes above 2**53)."""
    out = np.zeros(max(minlength, int(index.max()) + 1 if len(index) else 0), dtype=np.int64)
    np.add.at(out, index, np.asarray(weights, dtype=np.int64))
    return out


def stream_rows(trace: Trace, *, by_op: bool = True) -> np.ndarray:
    """Trace rows in stream order: by (rank, file, op, order, row) — ``np.lexsort`` of those
    keys, by counting sorts (:mod:`pario.trace.sorting`) when the key space is small."""
    from .sorting import by_key_then_order, stream_key

    c = trace.cols
    n = len(trace)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    sk = stream_key(c["rank"], c["file"], c["op"] if by_op else None)
    if sk is None:
        keys = [c["order"], c["op"], c["file"], c["rank"]] if by_op else [c["order"], c["file"], c["rank"]]
        return np.lexsort(keys)
    key, nkeys = sk
    return by_key_then_order(key, c["order"], nkeys)


def segment(trace: Trace, *, by_op: bool = True, per_request: bool = True) -> Segmentation:
    """Split ``trace`` into streams and runs and classify them (CEDA seed 000 §4.2).

    See the module docstring for the definitions.  The requests are put in stream order by
    counting sorts (:func:`stream_rows`), then one compiled pass
    (:func:`pario.trace.patterns_kernel.walk`) labels them block by block and fills the
    per-stream and per-run tables; nothing per transition or block is stored.
    ``per_request=False``: the Segmentation's ``stream`` and ``run`` (one entry a request)
    are None (not made: 16 bytes a request)."""
    import pandas as pd

    from .patterns_kernel import walk

    c = trace.cols
    n = len(trace)
    rows = stream_rows(trace, by_op=by_op)
    rank, file, op, off, length = c["rank"], c["file"], c["op"], c["offset"], c["length"]
    run = np.zeros(n if per_request else 0, dtype=np.int64)
    ns, nr, *tables = walk(rows, rank, file, op, off, length, by_op, MIN_RUN_TRANSITIONS, run)
    (s_first, s_count, s_bytes, lmin, lmax, s_nblocks, b0_kind, b0_stride, s_nruns, regular_req, r_stream, r_kind,
     r_stride, r_pos, r_req, r_bytes) = [t[:ns].copy() for t in tables[:10]] + [t[:nr].copy() for t in tables[10:]]
    del tables
    stream = np.repeat(np.arange(ns, dtype=np.int64), s_count) if per_request else None
    run = run if per_request else None
    first_rows = rows[s_first]
    r_first = s_first[r_stream] + r_pos
    r_index = np.arange(nr) - np.searchsorted(r_first, s_first)[r_stream] if nr else np.zeros(0, np.int64)

    runs_df = pd.DataFrame({
        "stream": r_stream,
        "rank": rank[rows[r_first]].astype(np.int64),
        "file": file[rows[r_first]].astype(np.int64),
        "op": op[rows[r_first]].astype(np.int64) if by_op else np.full(nr, -1, dtype=np.int64),
        "run": r_index.astype(np.int64),
        "kind": pd.Categorical.from_codes(r_kind, categories=list(RUN_KINDS)),
        "stride": pd.array(np.where(r_kind == _R_STRIDED, r_stride, 0), dtype="Int64"),
        "first": r_pos,
        "requests": r_req,
        "bytes": r_bytes,
        "offset": off[rows[r_first]].astype(np.int64),
    })
    runs_df.loc[r_kind != _R_STRIDED, "stride"] = pd.NA

    # ---- stream classification (module docstring)
    frac = np.where(s_count > 0, regular_req / np.maximum(s_count, 1), 0.0)
    s_kind = np.where(frac >= MIXED_MIN_REGULAR, _MIXED, _RANDOM).astype(np.int8)
    to_stream = np.array([_CONTIG, _STRIDED, _REPEATED], dtype=np.int8)  # RUN_KINDS code → KINDS code
    one_block = s_nblocks == 1
    s_kind[one_block] = to_stream[b0_kind[one_block]]
    s_stride = np.where(s_kind == _STRIDED, b0_stride, 0)
    s_kind[s_count == 1] = _CONTIG
    frac = np.where(s_count == 1, 1.0, frac)
    streams_df = _streams_frame(rank[first_rows], file[first_rows], op[first_rows] if by_op else None, s_kind,
                                s_stride, s_count, s_bytes, lmin, lmax, s_nruns, frac, runs_df)
    return Segmentation(rows=rows, stream=stream, run=run, streams=streams_df, runs=runs_df)


def _streams_frame(rank, file, op, s_kind, s_stride, s_count, s_bytes, lmin, lmax, s_nruns, frac, runs_df):
    """The streams table of :func:`segment` (``op`` None: streams by (rank, file))."""
    import pandas as pd

    nstreams = len(s_kind)
    r_stream = runs_df["stream"].to_numpy()
    # dominant template: the (kind, stride) of the regular runs covering most requests
    main_kind = np.array([KINDS[k] for k in s_kind], dtype=object)
    main_stride = np.where(s_kind == _STRIDED, s_stride, 0).astype(np.int64)
    main_has_stride = s_kind == _STRIDED
    mixed_ids = np.flatnonzero(s_kind == _MIXED)
    if len(mixed_ids):
        reg = runs_df[(runs_df["kind"] != "random") & np.isin(r_stream, mixed_ids)]
        tmpl = (reg.assign(stride0=reg["stride"].fillna(0).astype(np.int64))
                .groupby(["stream", "kind", "stride0"], observed=True)["requests"].sum().reset_index()
                .sort_values(["stream", "requests"], ascending=[True, False], kind="stable")
                .drop_duplicates("stream"))
        sid = tmpl["stream"].to_numpy()
        main_kind[sid] = tmpl["kind"].astype(str).to_numpy()
        main_stride[sid] = tmpl["stride0"].to_numpy()
        main_has_stride[sid] = tmpl["kind"].astype(str).to_numpy() == "strided"

    streams_df = pd.DataFrame({
        "rank": rank.astype(np.int64),
        "file": file.astype(np.int64),
        "op": op.astype(np.int64) if op is not None else np.full(nstreams, -1, dtype=np.int64),
        "kind": pd.Categorical.from_codes(s_kind, categories=list(KINDS)),
        "stride": pd.array(s_stride, dtype="Int64"),
        "requests": s_count,
        "bytes": s_bytes,
        "size": pd.array(lmin, dtype="Int64"),
        "runs": s_nruns,
        "regular": frac.astype(np.float64),
        "main_kind": main_kind,
        "main_stride": pd.array(main_stride, dtype="Int64"),
    })
    streams_df.loc[s_kind != _STRIDED, "stride"] = pd.NA
    streams_df.loc[lmin != lmax, "size"] = pd.NA
    streams_df.loc[~main_has_stride, "main_stride"] = pd.NA
    return streams_df


def identify(trace: Trace, *, by_op: bool = True) -> pd.DataFrame:
    """Classify every stream of ``trace`` (CEDA seed 000 §4.2).

    One row per stream (rank, file, op — ``op`` is -1 when ``by_op=False``) with ``kind``
    (contiguous / strided / repeated / mixed / random), ``stride`` (bytes; ``<NA>`` unless strided),
    ``requests``, ``bytes``, ``size`` (the request length if constant, else ``<NA>``),
    ``runs`` (number of runs), ``regular`` (fraction of requests in contiguous/strided
    runs), ``main_kind`` / ``main_stride`` (the dominant template of a mixed stream).
    """
    return segment(trace, by_op=by_op, per_request=False).streams


def runs(trace: Trace, *, by_op: bool = True) -> pd.DataFrame:
    """The runs of every stream (CEDA seed 000 §4.2 template matching, see module doc).

    One row per run: ``stream``, ``rank``, ``file``, ``op``, ``run`` (index within the
    stream), ``kind`` (contiguous / strided / repeated / random), ``stride``, ``first`` (position of
    its first request within the stream), ``requests``, ``bytes``, ``offset`` (of its first
    request).
    """
    return segment(trace, by_op=by_op, per_request=False).runs


def pattern_map(trace: Trace, *, by_op: bool = True) -> dict[int, dict[str, dict]]:
    """rank → file name → ``{kind, stride, requests, bytes}``.

    With ``by_op=True`` the read and write streams of a (rank, file) are classified
    separately and combined: the common kind (and stride) when they agree, else ``mixed``.
    """
    import pandas as pd

    st = identify(trace, by_op=by_op)
    out: dict[int, dict[str, dict]] = {}
    if st.empty:
        return out
    df = pd.DataFrame({"rank": st["rank"], "file": st["file"], "kind": st["kind"].astype(str),
                       "stride": st["stride"].fillna(0).astype(np.int64),
                       "requests": st["requests"], "bytes": st["bytes"]})
    g = df.groupby(["rank", "file"], sort=True)
    agg = g.agg(requests=("requests", "sum"), bytes=("bytes", "sum"), kind=("kind", "first"),
                stride=("stride", "first"), nkind=("kind", "nunique"), nstride=("stride", "nunique"))
    agree = (agg["nkind"] == 1) & (agg["nstride"] == 1)
    kind = np.where(agree, agg["kind"], "mixed")
    stride = np.where(agree & (agg["kind"] == "strided"), agg["stride"], 0)
    ranks = agg.index.get_level_values("rank").to_numpy()
    files = agg.index.get_level_values("file").to_numpy()
    for r, f, k, sd, nreq, nb in zip(ranks.tolist(), files.tolist(), kind.tolist(), stride.tolist(),
                                     agg["requests"].tolist(), agg["bytes"].tolist()):
        # one iteration per (rank, file), not per request
        out.setdefault(r, {})[trace.files[f]] = {
            "kind": k, "stride": int(sd) if k == "strided" else None, "requests": int(nreq), "bytes": int(nb),
        }
    return out


def op_name(op: int) -> str:
    """``read``/``write`` for an op code, ``any`` for -1 (streams with ``by_op=False``)."""
    return OP_NAMES[op] if op >= 0 else "any"


# --------------------------------------------------------------------------- streaming
# The stream classification of :func:`pattern_map` computed in one pass over the requests in
# file order, with O(1) state per stream, for traces too large to sort whole.  It needs
# every stream's requests in chronological order (``order`` non-decreasing within each
# stream, ties in row order, as :func:`segment`'s stable sort takes them); :meth:`add`
# reports a stream that goes back in time, and the caller then classifies rank by rank.
#
# State per stream (one row of an int64 table): count, last offset, last length, last order,
# bytes, number of blocks, first block's template (contiguous flag, distance), the current
# block's template and length (transitions), whether the previous block was regular, and
# the number of requests in regular blocks so far.  A regular block of L ≥ 2 transitions
# covers L + 1 requests, one of them shared with the previous block when that was regular
# too (the union is what :func:`segment` labels regular).
_S_CNT, _S_OFF, _S_LEN, _S_ORD, _S_BYTES, _S_NB, _S_B0C, _S_B0D, _S_CC, _S_CD, _S_CL, _S_PREG, _S_REG = range(13)
_S_FIELDS = 13


def _stream_kernel_py(sid, off, ln, order, S):
    for i in range(sid.shape[0]):
        s = sid[i]
        if S[s, _S_CNT] > 0:
            if order[i] < S[s, _S_ORD]:
                return i
            contig = 1 if off[i] - (S[s, _S_OFF] + S[s, _S_LEN]) == 0 else 0
            tdist = 0 if contig else off[i] - S[s, _S_OFF]
            if S[s, _S_CL] > 0 and S[s, _S_CC] == contig and S[s, _S_CD] == tdist:
                S[s, _S_CL] += 1
            else:
                L = S[s, _S_CL]
                if L > 0:
                    reg = 1 if L >= MIN_RUN_TRANSITIONS else 0
                    if reg:
                        S[s, _S_REG] += L + 1 - S[s, _S_PREG]
                    S[s, _S_PREG] = reg
                S[s, _S_NB] += 1
                if S[s, _S_NB] == 1:
                    S[s, _S_B0C] = contig
                    S[s, _S_B0D] = tdist
                S[s, _S_CC] = contig
                S[s, _S_CD] = tdist
                S[s, _S_CL] = 1
        S[s, _S_CNT] += 1
        S[s, _S_OFF] = off[i]
        S[s, _S_LEN] = ln[i]
        S[s, _S_ORD] = order[i]
        S[s, _S_BYTES] += ln[i]
    return -1


_stream_kernel = None


def _kernel():
    global _stream_kernel
    if _stream_kernel is None:
        from numba import njit

        _stream_kernel = njit(cache=True, nogil=True)(_stream_kernel_py)
    return _stream_kernel


class PatternStream:
    """:func:`pattern_map` (``by_op=True``) over batches of requests given in file order.

    >>> ps = PatternStream()
    >>> for b in batches: ok = ps.add(b["rank"], b["file"], b["op"], b["offset"], b["length"], b["order"])
    >>> ps.result(files)      # None if some stream went back in time (``ok`` was False)
    """

    def __init__(self):
        self.keys = np.zeros(0, dtype=np.int64)   # sorted stream keys
        self.ids = np.zeros(0, dtype=np.int64)    # their stream ids
        self.S = np.zeros((0, _S_FIELDS), dtype=np.int64)
        self.monotone = True

    def _stream_ids(self, rank, file, op) -> np.ndarray:
        n = len(rank)
        k = (rank.astype(np.int64) << 32) | (file.astype(np.int64) << 1) | op.astype(np.int64)
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if n else np.zeros(0, dtype=np.int64)
        u, inv = np.unique(k[starts], return_inverse=True)
        pos = np.searchsorted(self.keys, u)
        found = pos < len(self.keys)
        found[found] = self.keys[pos[found]] == u[found]
        gid = np.empty(len(u), dtype=np.int64)
        gid[found] = self.ids[pos[found]]
        new = np.flatnonzero(~found)
        if len(new):
            base = len(self.S)
            gid[new] = base + np.arange(len(new))
            keys = np.concatenate([self.keys, u[new]])
            ids = np.concatenate([self.ids, gid[new]])
            o = np.argsort(keys, kind="stable")
            self.keys, self.ids = keys[o], ids[o]
            grow = np.zeros((base + len(new), _S_FIELDS), dtype=np.int64)
            grow[:base] = self.S
            self.S = grow
        return np.repeat(gid[inv.reshape(-1)], np.diff(np.r_[starts, n]))

    def add(self, rank, file, op, offset, length, order) -> bool:
        """Feed the next requests (file order); False once a stream went back in time."""
        if not self.monotone or len(rank) == 0:
            return self.monotone
        sid = self._stream_ids(rank, file, op)
        bad = _kernel()(sid, np.ascontiguousarray(offset, dtype=np.int64),
                        np.ascontiguousarray(length, dtype=np.int64), np.ascontiguousarray(order, dtype=np.int64),
                        self.S)
        if bad >= 0:
            self.monotone = False
        return self.monotone

    def result(self, files) -> dict[int, dict[str, dict]] | None:
        """rank → file name → ``{kind, stride, requests, bytes}``, exactly as :func:`pattern_map`."""
        if not self.monotone:
            return None
        S = self.S[self.ids]  # streams in key order: rank, file, op (read before write)
        keys = self.keys
        cnt, nb = S[:, _S_CNT], S[:, _S_NB]
        L, reg_req = S[:, _S_CL], S[:, _S_REG].copy()
        last_reg = L >= MIN_RUN_TRANSITIONS
        reg_req[last_reg] += L[last_reg] + 1 - S[last_reg, _S_PREG]
        frac = reg_req / np.maximum(cnt, 1)
        kind = np.where(frac >= MIXED_MIN_REGULAR, _MIXED, _RANDOM)
        one = nb == 1
        b0c, b0d = S[:, _S_B0C], S[:, _S_B0D]
        bkind = np.where(b0c == 1, _CONTIG, np.where(b0d == 0, _REPEATED, _STRIDED))
        kind = np.where(one, bkind, kind)
        kind = np.where(cnt == 1, _CONTIG, kind)
        stride = np.where(kind == _STRIDED, b0d, 0)
        rank = (keys >> 32).tolist()
        file = ((keys >> 1) & 0x7FFFFFFF).tolist()
        kind, stride = kind.tolist(), stride.tolist()
        req, nbytes = cnt.tolist(), S[:, _S_BYTES].tolist()
        out: dict[int, dict[str, dict]] = {}
        i, n = 0, len(rank)
        while i < n:  # one iteration per (rank, file): its read stream, then its write stream
            j = i + 1
            if j < n and rank[j] == rank[i] and file[j] == file[i]:
                j += 1
            ks = {kind[x] for x in range(i, j)}
            ss = {stride[x] for x in range(i, j)}
            k = KINDS[kind[i]] if len(ks) == 1 and len(ss) == 1 else "mixed"
            sd = stride[i] if k == "strided" else None
            out.setdefault(rank[i], {})[files[file[i]]] = {
                "kind": k, "stride": int(sd) if k == "strided" else None,
                "requests": int(sum(req[i:j])), "bytes": int(sum(nbytes[i:j])),
            }
            i = j
        return out
