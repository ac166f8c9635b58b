"""CEDA's identifier (He & Sun, seed 000 §4.2): the access patterns of a trace.

Builds on the spatial pattern identifier :func:`pario.trace.patterns.segment` (streams per
rank, file and op, classified contiguous / strided / mixed / random by template matching).
Streams of one rank and file that touch exactly the same extents (e.g. IOR's write phase and
its read-back, or a checkpoint written every step) are one *sequence* accessed repeatedly
(``repeated``); a stream that revisits its own extents is repeated too.  Sequences of
different ranks with the same template (file, op(s), kind, stride, request size, repetition)
form one **access pattern**: the unit CEDA plans, analyses and replicates.  Every request
belongs to exactly one pattern.

At scale (issue 18): per request only compiled passes (:mod:`pario.plan.ceda_kernels`: a
stream's signature, its repetition test on the requests in offset order, the pattern of
every row) over orders computed in O(n) (:class:`TraceOrders`, :mod:`pario.trace.sorting`);
the grouping into sequences and patterns is per stream (rank × file × op).  The next stage
is the placement (:mod:`pario.plan.ceda_place`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace import Trace
from ..trace.core import OP_NAMES
from ..trace.patterns import segment
from ..trace.sorting import by_key_then_order, counting_order, offset_order
from . import ceda_kernels as K

KIND_RANK = {"contiguous": 0, "strided": 1, "repeated": 2, "mixed": 3, "random": 4}


def dense_ids(*keys) -> np.ndarray:
    """Dense group id (0..G-1, in lexicographic key order) of rows keyed by the arrays ``keys``."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.lexsort(tuple(reversed(keys)))
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        ks = np.asarray(k)[idx]
        change[1:] |= ks[1:] != ks[:-1]
    out = np.empty(n, dtype=np.int64)
    out[idx] = np.cumsum(change) - 1
    return out


@dataclass
class TraceOrders:
    """The request orders the identifier and the planner share, computed once per trace in
    O(n) (:mod:`pario.trace.sorting`): ``by_rank`` — rows by (rank, order, row), the order
    of Algorithm 1's objects; ``by_offset`` — rows by offset, the order of the claim sweep
    and of the identifier's repetition test."""

    by_rank: np.ndarray
    by_offset: np.ndarray

    @classmethod
    def of(cls, trace: Trace) -> "TraceOrders":
        return cls(by_key_then_order(trace.rank, trace.order), offset_order(trace.offset))


@dataclass(frozen=True)
class AccessPatterns:
    """The identifier's result (CEDA seed 000 §4.2).

    ``table``: one row per access pattern (index = pattern id): ``file`` (index),
    ``file_name``, ``kind`` (the least regular kind of its streams: contiguous < strided <
    mixed < random), ``stride`` (when every stream is strided with one stride), ``size``
    (request size if constant), ``ops`` (read / write / read+write), ``repeated`` (bool),
    ``ranks``, ``requests``, ``bytes`` (requested, counting repeats), ``template``.
    ``of_request``: pattern id of every trace row (int32).  ``streams``: the identifier's streams
    with their ``sequence`` and ``pattern``.
    """

    table: pd.DataFrame
    of_request: np.ndarray
    streams: pd.DataFrame

    def __len__(self) -> int:
        return len(self.table)


def identify_patterns(trace: Trace, *, orders: TraceOrders | None = None) -> AccessPatterns:
    """CEDA's identifier (seed 000 §4.2), see the module docstring.  The streams come from
    :func:`pario.trace.patterns.segment`; per request only compiled passes (a stream's
    signature, its repetition test on the requests in offset order, the pattern of every
    row); the grouping into sequences and patterns is per stream (rank × file × op)."""
    n = len(trace)
    seg = segment(trace, by_op=True, per_request=False)
    st = seg.streams.copy()
    ns = len(st)
    if n == 0:
        return _no_patterns(st)
    rows = seg.rows
    off, ln = trace.offset, trace.length
    s_count = st["requests"].to_numpy()
    s_first = np.zeros(ns, dtype=np.int64)
    np.cumsum(s_count[:-1], out=s_first[1:])
    # order-independent signature of a stream's multiset of extents
    sig = K.stream_signatures(rows, s_first, s_count, off, ln)
    # in-stream repetition: some (offset, length) twice
    by_offset = orders.by_offset if orders is not None else offset_order(off)
    stream_of_row = K.stream_of_rows(rows, s_first, s_count, n)
    st["self_repeat"] = K.stream_repeats(counting_order(by_offset, stream_of_row, ns), stream_of_row, ns, off, ln)
    del stream_of_row
    seq_key = _sequences(st, sig)
    # patterns numbered in order of first appearance in the trace (a stream's first row)
    pat_of_stream = st["pattern"].to_numpy()
    first_row = np.full(int(pat_of_stream.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first_row, pat_of_stream, np.minimum.reduceat(rows, s_first))
    renum = np.empty_like(first_row)
    renum[np.lexsort((first_row, np.zeros_like(first_row)))] = np.arange(len(first_row))
    st["pattern"] = renum[pat_of_stream]
    pat_row = K.pattern_of_rows(rows, s_first, s_count, st["pattern"].to_numpy(), n)
    npat = len(first_row)
    requests = np.zeros(npat, dtype=np.int64)
    nbytes = np.zeros(npat, dtype=np.int64)
    np.add.at(requests, st["pattern"].to_numpy(), s_count)
    np.add.at(nbytes, st["pattern"].to_numpy(), st["bytes"].to_numpy())
    table, st = _pattern_table(trace, st, seq_key, requests, nbytes)
    return AccessPatterns(table, pat_row, st)


def _no_patterns(streams: pd.DataFrame) -> AccessPatterns:
    empty = pd.DataFrame(columns=["file", "file_name", "kind", "stride", "size", "ops", "repeated",
                                  "ranks", "requests", "bytes", "template"])
    return AccessPatterns(empty, np.zeros(0, dtype=np.int64), streams)


def _sequences(st: pd.DataFrame, sig: np.ndarray) -> pd.Series:
    """Streams of one rank and file with the same extents (``sig``, requests, bytes) are one
    sequence; sequences of one file with the same template are one pattern.  Sets the
    streams' ``sequence``, ``repeated``, ``stream_template`` and ``pattern`` (numbered in
    (file, template) order); returns each sequence's template."""
    st["sequence"] = dense_ids(st["rank"].to_numpy(), st["file"].to_numpy(), sig,
                               st["requests"].to_numpy(), st["bytes"].to_numpy())
    nstream_per_seq = np.bincount(st["sequence"].to_numpy())
    st["repeated"] = (nstream_per_seq[st["sequence"].to_numpy()] > 1) | st["self_repeat"].to_numpy()
    kinds = st["kind"].astype(str).to_numpy()
    size = st["size"].fillna(-1).astype(np.int64).to_numpy()
    ops = st["op"].to_numpy()
    tmpl = [f"{OP_NAMES[o]}:{k}" + (f"@{z}" if z >= 0 else "@var")
            for o, k, z in zip(ops, kinds, size)]  # one per stream
    st["stream_template"] = tmpl
    seq_t = st.groupby("sequence", sort=True)["stream_template"].agg(lambda t: "+".join(sorted(t)))
    seq_rep = st.groupby("sequence", sort=True)["repeated"].any()
    seq_file = st.groupby("sequence", sort=True)["file"].first()
    seq_key = seq_t + np.where(seq_rep, " (repeated)", "")
    pat_of_seq = dense_ids(seq_file.to_numpy(), seq_key.to_numpy().astype(str))
    st["pattern"] = pat_of_seq[st["sequence"].to_numpy()]
    return seq_key


def _pattern_table(trace: Trace, st: pd.DataFrame, seq_key: pd.Series, requests: np.ndarray,
                   nbytes: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The patterns table (:class:`AccessPatterns`) from the streams with their final
    ``pattern``, and the streams with their ``template``."""
    npat = len(requests)
    st["template"] = seq_key.to_numpy()[st["sequence"].to_numpy()]
    g = st.groupby("pattern", sort=True)
    kinds = st["kind"].astype(str).to_numpy()
    kind_code = st["kind"].astype(str).map(KIND_RANK).to_numpy()
    worst = np.zeros(npat, dtype=np.int64)
    np.maximum.at(worst, st["pattern"].to_numpy(), kind_code)
    inv_kind = {v: k for k, v in KIND_RANK.items()}
    st["_strided"] = kinds == "strided"
    st["_sized"] = st["size"].notna()
    uni_stride = (g["_strided"].all() & (g["stride"].nunique() == 1)).to_numpy()
    uni_size = (g["_sized"].all() & (g["size"].nunique() == 1)).to_numpy()
    strides = np.where(uni_stride, g["stride"].first().fillna(0).astype(np.int64).to_numpy(), 0)
    sizes = np.where(uni_size, g["size"].first().fillna(0).astype(np.int64).to_numpy(), 0)
    opset = g["op"].agg(lambda o: "+".join(OP_NAMES[x] for x in sorted(set(o))))
    files = g["file"].first().to_numpy()
    table = pd.DataFrame({
        "file": files.astype(np.int64),
        "file_name": [trace.files[f] for f in files],
        "kind": [inv_kind[int(k)] for k in worst],
        "stride": pd.array(np.where(uni_stride, strides, 0), dtype="Int64"),
        "size": pd.array(np.where(uni_size, sizes, 0), dtype="Int64"),
        "ops": opset.to_numpy(),
        "repeated": g["repeated"].any().to_numpy(),
        "ranks": g["rank"].nunique().to_numpy().astype(np.int64),
        "requests": requests,
        "bytes": nbytes,
        "template": g["template"].first().to_numpy(),
    })
    table.loc[~uni_stride, "stride"] = pd.NA
    table.loc[~uni_size, "size"] = pd.NA
    table.index.name = "pattern"
    return table, st.drop(columns=["_strided", "_sized"])
