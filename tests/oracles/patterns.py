"""The pre-issue-18 vectorised :func:`segment` (the tests' oracle).

The spatial pattern identifier of :mod:`pario.trace.patterns` (CEDA seed 000 §4.2) as it was
before issue 18 ("Planning at scale"), kept unchanged: a five-key lexsort of the trace, then
``diff``/``cumsum``/``bincount`` over whole columns.  :func:`pario.trace.patterns.segment`
computes the same in one compiled pass over the streams; the tests compare both, and the
CEDA reference planner (``oracles/ceda.py``) builds on this one.
"""

from __future__ import annotations

import numpy as np

from pario.trace.core import Trace
from pario.trace.patterns import (MIN_RUN_TRANSITIONS, MIXED_MIN_REGULAR, RUN_KINDS, Segmentation, _CONTIG, _MIXED,
                                  _R_CONTIG, _R_RANDOM, _R_REPEATED, _R_STRIDED, _RANDOM, _REPEATED, _STRIDED,
                                  _streams_frame, int_bincount)


def _starts(key_change: np.ndarray) -> np.ndarray:
    return np.flatnonzero(key_change)


def segment(trace: Trace, *, by_op: bool = True) -> Segmentation:
    """Split ``trace`` into streams and runs and classify them (CEDA seed 000 §4.2).

    See the module docstring for the definitions.  Fully vectorised: one sort, then
    ``diff``/``cumsum``/``bincount`` over the whole trace.
    """
    import pandas as pd

    c = trace.cols
    n = len(trace)
    keys = [c["order"], c["op"], c["file"], c["rank"]] if by_op else [c["order"], c["file"], c["rank"]]
    rows = np.lexsort(keys) if n else np.zeros(0, dtype=np.int64)
    rank, file, op = c["rank"][rows], c["file"][rows], c["op"][rows]
    off, length = c["offset"][rows], c["length"][rows]

    # ---- streams
    new_stream = np.ones(n, dtype=bool)
    if n > 1:
        same = (rank[1:] == rank[:-1]) & (file[1:] == file[:-1])
        if by_op:
            same &= op[1:] == op[:-1]
        new_stream[1:] = ~same
    stream = np.cumsum(new_stream) - 1
    nstreams = int(stream[-1]) + 1 if n else 0
    s_first = _starts(new_stream)
    s_count = np.diff(np.r_[s_first, n]).astype(np.int64)

    # ---- transitions t = 0..n-2 between positions t and t+1 (valid inside a stream)
    nt = max(n - 1, 0)
    valid = ~new_stream[1:] if n else np.zeros(0, dtype=bool)
    dist = off[1:] - off[:-1]
    contig = (off[1:] - (off[:-1] + length[:-1])) == 0
    tdist = np.where(contig, 0, dist)
    # blocks of equal template
    new_block = valid.copy()
    if nt > 1:
        same_t = valid[1:] & valid[:-1] & (contig[1:] == contig[:-1]) & (tdist[1:] == tdist[:-1])
        new_block[1:] &= ~same_t
    block = np.cumsum(new_block) - 1  # meaningful only where valid
    nblocks = int(block[-1]) + 1 if nt and new_block.any() else 0
    b_first = _starts(new_block)
    b_len = np.bincount(block[valid], minlength=nblocks).astype(np.int64) if nblocks else np.zeros(0, np.int64)
    b_stream = stream[b_first] if nblocks else np.zeros(0, dtype=np.int64)
    whole = b_len == (s_count[b_stream] - 1)
    b_regular = (b_len >= MIN_RUN_TRANSITIONS) | whole
    b_contig = contig[b_first] if nblocks else np.zeros(0, dtype=bool)
    b_stride = tdist[b_first] if nblocks else np.zeros(0, dtype=np.int64)
    # block kind (RUN_KINDS code): contiguous, repeated (distance 0, not contiguous), strided
    b_kind = np.where(b_contig, _R_CONTIG, np.where(b_stride == 0, _R_REPEATED, _R_STRIDED)).astype(np.int8)

    # ---- assign each position to a regular block (incoming first, then outgoing) or -1
    label = np.full(n, -1, dtype=np.int64)
    if nblocks:
        inc = np.full(n, -1, dtype=np.int64)
        out = np.full(n, -1, dtype=np.int64)
        vb = np.where(valid, block, -1)
        inc[1:] = vb
        out[:-1] = vb
        inc_ok = (inc >= 0) & b_regular[np.maximum(inc, 0)]
        out_ok = (out >= 0) & b_regular[np.maximum(out, 0)]
        label = np.where(inc_ok, inc, np.where(out_ok, out, -1))

    # ---- runs: change of label or of stream
    new_run = new_stream.copy()
    if n > 1:
        new_run[1:] |= label[1:] != label[:-1]
    run = np.cumsum(new_run) - 1
    nruns = int(run[-1]) + 1 if n else 0
    r_first = _starts(new_run)
    r_label = label[r_first]
    r_kind = np.full(nruns, _R_RANDOM, dtype=np.int8)  # index into RUN_KINDS; random by default
    r_stride = np.zeros(nruns, dtype=np.int64)
    has = r_label >= 0
    r_kind[has] = b_kind[r_label[has]]
    r_stride[has] = np.where(b_kind[r_label[has]] == _R_STRIDED, b_stride[r_label[has]], 0)
    single = s_count[stream[r_first]] == 1  # a one-request stream is contiguous
    r_kind[single] = _R_CONTIG
    r_req = np.bincount(run, minlength=nruns).astype(np.int64)
    r_bytes = int_bincount(run, length, nruns)
    r_stream = stream[r_first]
    r_index = np.arange(nruns) - np.searchsorted(r_first, s_first)[r_stream] if nruns else np.zeros(0, np.int64)

    runs_df = pd.DataFrame({
        "stream": r_stream,
        "rank": rank[r_first].astype(np.int64),
        "file": file[r_first].astype(np.int64),
        "op": op[r_first].astype(np.int64) if by_op else np.full(nruns, -1, dtype=np.int64),
        "run": r_index.astype(np.int64),
        "kind": pd.Categorical.from_codes(r_kind, categories=list(RUN_KINDS)),
        "stride": pd.array(np.where(r_kind == _R_STRIDED, r_stride, 0), dtype="Int64"),
        "first": (r_first - s_first[r_stream]).astype(np.int64),
        "requests": r_req,
        "bytes": r_bytes,
        "offset": off[r_first].astype(np.int64),
    })
    runs_df.loc[r_kind != _R_STRIDED, "stride"] = pd.NA

    # ---- stream classification
    s_nblocks = np.bincount(b_stream, minlength=nstreams) if nblocks else np.zeros(nstreams, np.int64)
    s_block0 = np.full(nstreams, -1, dtype=np.int64)
    if nblocks:
        first_block_pos = _starts(np.r_[True, b_stream[1:] != b_stream[:-1]])
        s_block0[b_stream[first_block_pos]] = first_block_pos
    one_block = s_nblocks == 1
    regular_req = np.bincount(stream[label >= 0], minlength=nstreams).astype(np.int64)
    frac = np.where(s_count > 0, regular_req / np.maximum(s_count, 1), 0.0)
    s_kind = np.where(frac >= MIXED_MIN_REGULAR, _MIXED, _RANDOM).astype(np.int8)
    s_stride = np.zeros(nstreams, dtype=np.int64)
    if nblocks:  # (without blocks every stream has one request)
        b0 = np.maximum(s_block0, 0)
        to_stream = np.array([_CONTIG, _STRIDED, _REPEATED], dtype=np.int8)  # RUN_KINDS code → KINDS code
        s_kind[one_block] = to_stream[b_kind[b0][one_block]]
        s_stride = np.where(s_kind == _STRIDED, b_stride[b0], 0)
    s_kind[s_count == 1] = _CONTIG
    frac = np.where(s_count == 1, 1.0, frac)

    s_bytes = int_bincount(stream, length, nstreams)
    lmin = np.minimum.reduceat(length, s_first) if n else np.zeros(0, np.int64)
    lmax = np.maximum.reduceat(length, s_first) if n else np.zeros(0, np.int64)
    s_nruns = np.bincount(r_stream, minlength=nstreams).astype(np.int64)

    streams_df = _streams_frame(rank[s_first], file[s_first], op[s_first] if by_op else None, s_kind, s_stride,
                                s_count, s_bytes, lmin, lmax, s_nruns, frac, runs_df)
    return Segmentation(rows=rows, stream=stream, run=run, streams=streams_df, runs=runs_df)
