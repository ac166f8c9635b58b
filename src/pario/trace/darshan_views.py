"""What a Darshan log's two DXT layers say together: MPI-IO calls through file views, the
data footprint rebuilt from DXT_POSIX, the collective-buffering aggregators and ROMIO's
hints file.  The rules (documented in ``docs/traces.md``, "Importing Darshan DXT logs"):

* **Why.**  Darshan records a ``DXT_MPIIO`` segment per MPI-IO call as (offset, length):
  the offset is the byte the call's view position maps to (``MPI_File_get_byte_offset``)
  and the length is the call's byte count.  Under the default view (displacement 0,
  etype = filetype = ``MPI_BYTE``, MPI-4.1 §14.3) the call's bytes are exactly
  ``[offset, offset + length)``; through a noncontiguous file view (MPI-4.1 §14.3, a
  vector or subarray filetype) they are spread over a larger range with holes, and
  ``[offset, offset + length)`` is not where they go.
* **View rule.**  Segments of one (file, op) are cut into *epochs*: time-overlap groups
  (sorted by start, a segment opens a new epoch when it starts after every earlier one
  ended), so the calls of one collective operation share an epoch.  The *overlap* of an
  epoch is ``Σ_r U(epoch, r) − U(epoch)`` with ``U`` the union of the byte ranges (of one
  rank, of all ranks): the bytes two ranks' ranges share.  Writes of a file go through
  views when their overlap is > 0 and the file's ``MPIIO_VIEWS`` counter is not 0: two
  ranks' concurrent writes of the same bytes are conflicting accesses (MPI-4.1 §14.6.1)
  no correct program issues, and a file never given a view uses the default one, under
  which the ranges are exact.  Overlapping reads are legal (every rank reading one
  header), so reads need one more fact: the file's writes go through views, or its
  DXT_POSIX reads reach bytes outside the union of its MPI-IO read ranges.  A file is
  *view-based* when its writes or its reads are.
* **Enclosing call.**  A DXT_POSIX segment of rank r on file f lies in the DXT_MPIIO call
  of rank r on f that was running when it started (ROMIO issues the file-system requests
  of a call inside it).  POSIX segments of the other direction than their enclosing call
  are ROMIO's own: the read of a read-modify-write (two-phase writes over holes, data
  sieving writes).
* **Rebuild.**  A view-based file's rows come from DXT_POSIX: every segment except those
  read-modify-write reads, ``collective`` when its enclosing call is collective, ``call``
  = its enclosing call.  Refused (``reason``) when DXT_POSIX has no segments of the file,
  is partial, or lacks the file-system requests of an epoch of MPI-IO calls.  When the
  rebuilt footprint of an op exceeds the MPI-IO bytes of that op, the surplus (at least)
  is holes ROMIO rewrote: the file view that would locate them is not in the log.
* **Aggregators.**  The ranks with DXT_POSIX segments inside collective MPI-IO calls of a
  file, when collective buffering shows: the file is view-based, or some such segment is
  not its enclosing call passed through unchanged, or some rank that moved bytes in
  collective calls has none.  (ROMIO's ``romio_cb_write=automatic`` lets every rank write
  its own non-interleaved piece: no aggregators then.)
* **ROMIO hints file.**  A file with DXT_POSIX reads only, read by one rank, never seen
  by the MPI-IO module, whose base name contains ``hint``, in a log whose other data
  files are MPI-IO files: ROMIO's rank 0 reads ``ROMIO_HINTS`` with ``read()`` at the
  first ``MPI_File_open`` and broadcasts it.  It is left out of the trace and named in a
  note.

Frames hold one row per DXT segment: ``rank, rec_id, op, offset, length, start, end``
(and ``collective`` for DXT_MPIIO).  Everything is vectorised over segments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..units import format_size
from .core import OP_NAMES, READ, WRITE
from .summary import rank_ranges

HINT_WORD = "hint"


# ---------------------------------------------------------------------------- helpers
def union_bytes(group: np.ndarray, off: np.ndarray, end: np.ndarray, ngroups: int) -> np.ndarray:
    """Bytes covered by the union of the ranges ``[off, end)`` of each group (int64, exact)."""
    group = np.asarray(group, dtype=np.int64)
    off = np.asarray(off, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    out = np.zeros(ngroups, dtype=np.int64)
    keep = end > off
    group, off, end = group[keep], off[keep], end[keep]
    if len(off) == 0:
        return out
    idx = np.lexsort((off, group))
    g, o, e = group[idx], off[idx], end[idx]
    first = np.r_[True, g[1:] != g[:-1]]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.r_[0, reach[:-1]]
    new = first | (o > prev)
    run = np.cumsum(new) - 1
    run_start = o[new]
    run_end = np.zeros(len(run_start), dtype=np.int64)
    np.maximum.at(run_end, run, e)
    np.add.at(out, g[new], run_end - run_start)
    return out


def _dense(*keys) -> tuple[np.ndarray, int]:
    """Dense group id of rows keyed by ``keys`` and the number of groups."""
    if len(keys[0]) == 0:
        return np.zeros(0, dtype=np.int64), 0
    frame = pd.DataFrame({f"k{i}": np.asarray(k) for i, k in enumerate(keys)})
    gid = frame.groupby(list(frame.columns), sort=True).ngroup().to_numpy().astype(np.int64)
    return gid, int(gid.max()) + 1


def epochs(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Epoch id of every row: within a key, rows sorted by start time; a row opens a new
    epoch when it starts after every earlier row of its key ended (ids are global)."""
    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.lexsort((start, key))
    k, s, e = np.asarray(key)[idx], np.asarray(start)[idx], np.asarray(end)[idx]
    first = np.r_[True, k[1:] != k[:-1]]
    reach = pd.Series(e).groupby(k).cummax().to_numpy()
    prev = np.r_[-np.inf, reach[:-1]]
    new = first | (s > prev)
    out = np.empty(n, dtype=np.int64)
    out[idx] = np.cumsum(new) - 1
    return out


def enclosing(posix: pd.DataFrame, mpi: pd.DataFrame) -> np.ndarray:
    """For each DXT_POSIX row, the position (row number) in ``mpi`` of the MPI-IO call of the
    same rank and file running when it started, or -1."""
    n = len(posix)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0 or len(mpi) == 0:
        return out
    p = pd.DataFrame({"rank": posix["rank"].to_numpy(np.int64), "rec_id": posix["rec_id"].to_numpy(np.uint64),
                      "t": posix["start"].to_numpy(np.float64), "pi": np.arange(n)}).sort_values("t", kind="stable")
    m = pd.DataFrame({"rank": mpi["rank"].to_numpy(np.int64), "rec_id": mpi["rec_id"].to_numpy(np.uint64),
                      "t": mpi["start"].to_numpy(np.float64), "t1": mpi["end"].to_numpy(np.float64),
                      "mi": np.arange(len(mpi))}).sort_values("t", kind="stable")
    j = pd.merge_asof(p, m, on="t", by=["rank", "rec_id"], direction="backward")
    ok = j["mi"].notna().to_numpy() & (j["t"].to_numpy() <= j["t1"].to_numpy())
    out[j["pi"].to_numpy()[ok]] = j["mi"].to_numpy()[ok].astype(np.int64)
    return out


# ---------------------------------------------------------------------------- hints file
def hints_files(posix: pd.DataFrame, mpi_ids: set[int], names: dict) -> list[int]:
    """Record ids of ROMIO hints files among the DXT_POSIX records (rule in module doc)."""
    if posix.empty or not mpi_ids:
        return []
    out = []
    for rid, g in posix.groupby("rec_id", sort=True):  # one iteration per file
        rid = int(rid)
        name = str(names.get(rid, ""))
        base = name.rsplit("/", 1)[-1].lower()
        if (rid not in mpi_ids and HINT_WORD in base and (g["op"] == READ).all()
                and g["rank"].nunique() == 1):
            out.append(rid)
    return out


# ---------------------------------------------------------------------------- detection
@dataclass
class FileViews:
    """What the view rule found for one file (``rec_id``); per op (READ, WRITE) dicts."""

    rec_id: int
    name: str
    mpi_bytes: dict[int, int]
    mpi_footprint: dict[int, int]
    overlap: dict[int, int]
    views: int | None
    view_ops: tuple[int, ...]
    ambiguous_reads: bool = False


def detect_views(mpi: pd.DataFrame, posix: pd.DataFrame, views: dict[int, int], names: dict) -> dict[int, FileViews]:
    """Apply the view rule to every file of the DXT_MPIIO frame ``mpi``.  ``views``: file id →
    ``MPIIO_VIEWS`` (files without a counter record are absent: unknown)."""
    out: dict[int, FileViews] = {}
    if mpi.empty:
        return out
    rid = mpi["rec_id"].to_numpy(np.uint64)
    op = mpi["op"].to_numpy(np.int64)
    rank = mpi["rank"].to_numpy(np.int64)
    off = mpi["offset"].to_numpy(np.int64)
    end = off + mpi["length"].to_numpy(np.int64)
    key, nkey = _dense(rid, op)
    ep = epochs(key, mpi["start"].to_numpy(np.float64), mpi["end"].to_numpy(np.float64))
    nep = int(ep.max()) + 1
    er, ner = _dense(ep, rank)
    per_rank = union_bytes(er, off, end, ner)
    er_epoch = np.zeros(ner, dtype=np.int64)
    er_epoch[er] = ep
    overlap_ep = np.bincount(er_epoch, weights=per_rank, minlength=nep).astype(np.int64) - union_bytes(ep, off, end, nep)
    ep_key = np.zeros(nep, dtype=np.int64)
    ep_key[ep] = key
    overlap_key = np.zeros(nkey, dtype=np.int64)
    np.add.at(overlap_key, ep_key, overlap_ep)
    foot_key = union_bytes(key, off, end, nkey)
    bytes_key = np.zeros(nkey, dtype=np.int64)
    np.add.at(bytes_key, key, end - off)
    key_rid = np.zeros(nkey, dtype=np.uint64)
    key_op = np.zeros(nkey, dtype=np.int64)
    key_rid[key], key_op[key] = rid, op

    # reads: POSIX bytes outside the union of the MPI-IO read ranges, per file
    outside: dict[int, int] = {}
    if not posix.empty:
        pr = posix[posix["op"] == READ]
        mr = op == READ
        if len(pr) and mr.any():
            ids = np.r_[rid[mr], pr["rec_id"].to_numpy(np.uint64)]
            both_g, nb = _dense(ids)
            po = pr["offset"].to_numpy(np.int64)
            pe = po + pr["length"].to_numpy(np.int64)
            all_u = union_bytes(both_g, np.r_[off[mr], po], np.r_[end[mr], pe], nb)
            mpi_u = union_bytes(both_g[: int(mr.sum())], off[mr], end[mr], nb)
            gid_rid = np.zeros(nb, dtype=np.uint64)
            gid_rid[both_g] = ids
            outside = {int(gid_rid[g]): int(all_u[g] - mpi_u[g]) for g in range(nb)}  # per file

    for f in np.unique(key_rid).tolist():  # one iteration per file
        ks = np.flatnonzero(key_rid == f)
        d_bytes = {int(key_op[k]): int(bytes_key[k]) for k in ks}
        d_foot = {int(key_op[k]): int(foot_key[k]) for k in ks}
        d_over = {int(key_op[k]): int(overlap_key[k]) for k in ks}
        v = views.get(int(f))
        may_view = v is None or v > 0
        w_view = may_view and d_over.get(WRITE, 0) > 0
        r_over = may_view and d_over.get(READ, 0) > 0
        r_view = r_over and (w_view or outside.get(int(f), 0) > 0)
        ops = tuple(o for o, flag in ((READ, r_view), (WRITE, w_view)) if flag)
        ambiguous = r_over and not r_view and WRITE not in d_bytes and int(f) not in outside
        out[int(f)] = FileViews(int(f), str(names.get(int(f), f"<record {int(f):x}>")), d_bytes, d_foot, d_over,
                                v, ops, ambiguous)
    return out


# ---------------------------------------------------------------------------- aggregators
def aggregators(mpi: pd.DataFrame, posix: pd.DataFrame, encl: np.ndarray, view_ids: set[int]) -> dict[int, tuple[int, ...]]:
    """File id → aggregator ranks, for the files where collective buffering shows (rule in
    module doc)."""
    out: dict[int, tuple[int, ...]] = {}
    if mpi.empty or posix.empty:
        return out
    coll = mpi["collective"].to_numpy(bool)
    inside = encl >= 0
    under = np.zeros(len(posix), dtype=bool)
    under[inside] = coll[encl[inside]]
    if not under.any():
        return out
    p_rid = posix["rec_id"].to_numpy(np.uint64)
    p_rank = posix["rank"].to_numpy(np.int64)
    m_rid = mpi["rec_id"].to_numpy(np.uint64)
    m_rank = mpi["rank"].to_numpy(np.int64)
    e = np.where(inside, encl, 0)
    same = ((posix["op"].to_numpy(np.int64) == mpi["op"].to_numpy(np.int64)[e])
            & (posix["offset"].to_numpy(np.int64) == mpi["offset"].to_numpy(np.int64)[e])
            & (posix["length"].to_numpy(np.int64) == mpi["length"].to_numpy(np.int64)[e]))
    movers = coll & (mpi["length"].to_numpy(np.int64) > 0)
    for f in np.unique(p_rid[under]).tolist():  # one iteration per file
        sel = under & (p_rid == f)
        ranks = set(np.unique(p_rank[sel]).tolist())
        callers = set(np.unique(m_rank[movers & (m_rid == f)]).tolist())
        if int(f) in view_ids or not same[sel].all() or ranks != callers:
            out[int(f)] = tuple(sorted(ranks))
    return out


# ---------------------------------------------------------------------------- rebuild
@dataclass
class Rebuilt:
    """The rows of a DXT_MPIIO import with view-based files rebuilt from DXT_POSIX."""

    frame: pd.DataFrame                       # rank, rec_id, op, offset, length, start, end, collective, call
    files: dict[int, FileViews]               # the view-based files
    refused: dict[int, str] = field(default_factory=dict)  # file id → why DXT_POSIX cannot give it
    notes: list[str] = field(default_factory=list)
    surplus: dict[int, dict[int, int]] = field(default_factory=dict)  # file → op → hole bytes rewritten


def _calls(mpi: pd.DataFrame, extra_rank: np.ndarray, extra_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Call numbers per rank: every DXT_MPIIO segment is one call, and so is every extra row
    (a POSIX request outside any MPI-IO call); numbered per rank by start time."""
    m_rank = mpi["rank"].to_numpy(np.int64)
    m_start = mpi["start"].to_numpy(np.float64)
    rank = np.r_[m_rank, extra_rank]
    start = np.r_[m_start, extra_start]
    n = len(rank)
    idx = np.lexsort((np.arange(n), start, rank))
    r = rank[idx]
    first = np.r_[0, np.flatnonzero(np.diff(r)) + 1] if n else np.zeros(0, np.int64)
    num = np.empty(n, dtype=np.int64)
    num[idx] = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    return num[: len(m_rank)], num[len(m_rank):]


def rebuild(mpi: pd.DataFrame, posix: pd.DataFrame | None, posix_partial: bool,
            found: dict[int, FileViews]) -> Rebuilt:
    """DXT_MPIIO rows of the files that do not go through views, DXT_POSIX rows of the ones
    that do (rule in module doc).  ``mpi`` needs a ``collective`` column."""
    view_ids = {f for f, v in found.items() if v.view_ops}
    files = {f: found[f] for f in view_ids}
    posix = posix if posix is not None else pd.DataFrame(columns=list(mpi.columns))
    m_rid = mpi["rec_id"].to_numpy(np.uint64)
    keep_m = ~np.isin(m_rid, np.array(sorted(view_ids), dtype=np.uint64))
    p_rid = posix["rec_id"].to_numpy(np.uint64)
    p_sel = np.isin(p_rid, np.array(sorted(view_ids), dtype=np.uint64))
    pv = posix[p_sel].reset_index(drop=True)
    encl = enclosing(pv, mpi)
    inside = encl >= 0
    e = np.where(inside, encl, 0)
    m_op = mpi["op"].to_numpy(np.int64)
    rmw = inside & (pv["op"].to_numpy(np.int64) != m_op[e])
    keep_p = ~rmw
    refused: dict[int, str] = {}
    notes: list[str] = []
    surplus: dict[int, dict[int, int]] = {}

    m_ep = epochs(_dense(m_rid, m_op)[0], mpi["start"].to_numpy(np.float64), mpi["end"].to_numpy(np.float64))
    pv_rid = pv["rec_id"].to_numpy(np.uint64)
    pv_op = pv["op"].to_numpy(np.int64)
    pv_off = pv["offset"].to_numpy(np.int64)
    pv_end = pv_off + pv["length"].to_numpy(np.int64)
    m_len = mpi["length"].to_numpy(np.int64)
    m_rank = mpi["rank"].to_numpy(np.int64)
    coll = mpi["collective"].to_numpy(bool)
    for f in sorted(view_ids):  # one iteration per view-based file
        fv = files[f]
        mine = pv_rid == f
        if not mine.any():
            refused[f] = "DXT_POSIX has no segments of it"
            continue
        if posix_partial:
            refused[f] = "its DXT_POSIX trace is partial"
            continue
        for op in (READ, WRITE):
            mf = (m_rid == f) & (m_op == op) & (m_len > 0)
            if not mf.any():
                continue
            eps = np.unique(m_ep[mf])
            kept = mine & keep_p & (pv_op == op) & inside
            covered = np.unique(m_ep[encl[kept]]) if kept.any() else np.zeros(0, np.int64)
            lost = np.setdiff1d(eps, covered)
            if len(lost):
                refused[f] = (f"DXT_POSIX lacks the file-system {OP_NAMES[op]}s of {len(lost)} of the "
                              f"{len(eps)} epochs of MPI-IO {OP_NAMES[op]} calls")
                break
        if f in refused:
            continue
        # MPI-level facts the POSIX rows lack, and the rebuilt footprint
        mf = m_rid == f
        parts = []
        for op in (WRITE, READ):
            sel = mf & (m_op == op)
            if sel.any():
                nc = int((sel & coll).sum())
                parts.append(f"{int(sel.sum())} {OP_NAMES[op]} calls ({nc} collective, "
                             f"{format_size(fv.mpi_bytes.get(op, 0))})")
        kept_f = mine & keep_p
        rw = int((mine & rmw).sum())
        callers = rank_ranges(m_rank[mf])
        doers = rank_ranges(pv["rank"].to_numpy(np.int64)[kept_f])
        notes.append(f"{fv.name}: MPI-IO calls through a file view (ranks' ranges overlap by "
                     + ", ".join(f"{format_size(fv.overlap.get(o, 0))} in {OP_NAMES[o]}s" for o in fv.view_ops)
                     + f"); ranks {callers} made " + " and ".join(parts)
                     + f"; imported its {int(kept_f.sum())} DXT_POSIX requests of ranks {doers}"
                     + (f", not its {rw} read-modify-write reads inside write calls" if rw else ""))
        for op in (WRITE, READ):
            so = kept_f & (pv_op == op)
            if not so.any() or op not in fv.mpi_bytes:
                continue
            fp = int(union_bytes(np.zeros(int(so.sum()), np.int64), pv_off[so], pv_end[so], 1)[0])
            extra = fp - fv.mpi_bytes[op]
            if extra > 0:
                surplus.setdefault(f, {})[op] = extra
                done = "written" if op == WRITE else "read"
                notes.append(f"{fv.name}: the {OP_NAMES[op]} footprint ({format_size(fp)}) exceeds the MPI-IO "
                             f"bytes {done} ({format_size(fv.mpi_bytes[op])}): at least "
                             f"{format_size(extra)} are holes ROMIO {'rewrote' if op == WRITE else 'read'} "
                             "(two-phase or data-sieving windows); Darshan does not record the file view "
                             "that would locate them")

    ok_view = np.array(sorted(set(view_ids) - set(refused)), dtype=np.uint64)
    keep_m = keep_m | np.isin(m_rid, np.array(sorted(refused), dtype=np.uint64))
    p_take = np.isin(pv_rid, ok_view) & keep_p
    extra_rows = p_take & ~inside
    m_call, x_call = _calls(mpi, pv["rank"].to_numpy(np.int64)[extra_rows],
                            pv["start"].to_numpy(np.float64)[extra_rows])
    p_call = np.zeros(len(pv), dtype=np.int64)
    p_call[inside] = m_call[encl[inside]]
    p_call[extra_rows] = x_call
    p_coll = np.zeros(len(pv), dtype=bool)
    p_coll[inside] = coll[encl[inside]]
    cols = ["rank", "rec_id", "op", "offset", "length", "start", "end"]
    a = mpi.loc[keep_m, cols].assign(collective=coll[keep_m], call=m_call[keep_m])
    b = pv.loc[p_take, cols].assign(collective=p_coll[p_take], call=p_call[p_take])
    frame = pd.concat([a, b], ignore_index=True) if len(b) else a.reset_index(drop=True)
    return Rebuilt(frame, files, refused, notes, surplus)
