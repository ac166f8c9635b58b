"""Synthesize a request trace from a Darshan log without DXT: the module counters only.

Most sites run Darshan with DXT off, so a log holds per-file counters but no request list.
:func:`synthesize` turns the counters of one module (``MPI-IO`` or ``POSIX``) into a
:class:`~pario.trace.Trace` that reproduces what the counters say exactly and models what
they do not say.  The trace is marked ``meta.approximate``.  The rules and the measured
error against the DXT traces of the same runs are in ``docs/traces.md`` ("Counters-only
logs").

Counter meanings are those of the darshan-util documentation ("Guide to darshan-parser
output", Table 1 POSIX module, Table 2 MPI-IO module), with the update rules of
darshan-runtime's ``POSIX_RECORD_READ``/``POSIX_RECORD_WRITE`` (``darshan-posix.c``) and
``MPIIO_RECORD_READ``/``_WRITE`` (``darshan-mpiio.c``), Darshan 3.x:

* ``*_SIZE_<OP>_<bucket>`` counts accesses per size bucket 0–100, 101–1K, …, 1G+ (bounds
  inclusive, ``DARSHAN_BUCKET_INC``); MPI-IO counts the call's whole size (``count ×
  type size``) even when a file view makes it noncontiguous.
* ``*_ACCESS1..4_ACCESS/_COUNT``: the four most frequent sizes and their counts, over reads
  and writes together; size 0 is never tracked, and a count can only be too low (at most
  32 distinct values are tracked per file, and the shared-record reduction keeps four).
* A POSIX access is *sequential* when its offset is above the last byte the previous
  access of the same op left off at (the first access counts when its offset is > 0),
  *consecutive* when it starts right after that byte; its *stride* is the gap
  ``offset − (last byte + 1)`` (not tracked when 0).  ``*_MAX_BYTE_<OP>`` is the highest
  byte accessed.  The MPI-IO module has none of these.
* A record with ``rank = -1`` is shared: the file was opened by every rank and the counters
  are sums (max for ``MAX_BYTE``, earliest/latest time stamps) over the ranks;
  ``*_FASTEST/SLOWEST_RANK(_BYTES)`` name the ranks with the least/most I/O time and their
  bytes, ``*_F_VARIANCE_RANK_BYTES`` is the population variance of bytes per rank.

The generator is deterministic (its one pseudo-random permutation has a fixed seed):

1. **Sizes** (per record and op).  ``N`` requests (reads: ``POSIX_READS``, or the four
   MPI-IO call kinds) with exactly the histogram's count per bucket and exactly
   ``*_BYTES_<OP>`` bytes.  The four common sizes are placed first (their counts split
   between reads and writes: the split that leaves the fewest sizes unknown, ties to the
   split proportional to the bucket counts).  A record has other sizes only when it had
   more than four distinct ones, so the remaining requests of a bucket are spread
   log-uniformly across it, skewed by one exponent (the same for all buckets) so that the
   bytes add up; the last bytes go one by one.
2. **Ranks.**  A rank's own record keeps its rank.  A shared record is spread over
   ``nprocs`` ranks with per-rank byte targets: the fastest and slowest ranks get their
   recorded bytes; the others equal shares, two levels ``mean ± d``, or as many as fit at
   the higher recorded level and the rest at the lower (whichever gives the variance
   closest to ``*_F_VARIANCE_RANK_BYTES``).  Each rank takes a contiguous run of the
   request list (sizes interleaved evenly), cut where the bytes reach its target.
3. **Offsets** (all records of one file and op together).  Each rank's stream is cut into
   *segments* (runs of consecutive requests) and *passes* (a backward jump starts a pass)
   so that its transitions match the counters: ``CONSEC`` consecutive, ``SEQ − CONSEC``
   forward gaps (less the streams whose first access is above offset 0), the rest
   backward; breaks are spread evenly and each pass lies below the previous one.  Segments
   are placed in rounds — the k-th segment of every rank in turn (IOR's strided pattern; one
   segment per rank gives a block per rank) — by groups of ``round(stride / segment) + 1``
   ranks with holes so that the most common stride (gap) comes out, and in rounds of runs
   of segments per group when that also produces the second most common stride (BTIO's
   two-level interleave).  When the strides explain under half of the gaps and a quarter of
   the transitions go backward (random access) the segments go in a fixed pseudo-random
   order instead.  The layout ends at ``MAX_BYTE + 1``: spare room becomes holes (in
   multiples of the requests' common power-of-two alignment), too little room shrinks them,
   and more bytes than the file holds wrap around the file (re-reads), the highest segment
   ending at ``MAX_BYTE + 1``.  MPI-IO records take their sequentiality, strides and extent
   from the POSIX record of the same file and rank when that has the same number of
   requests and bytes (ROMIO passed the calls through one for one) — unless the calls are
   collective and through a file view, which two-phase I/O rewrites; otherwise each call is
   its own segment, in rounds, within the POSIX extent of the file.
4. **Times.**  The requests of a rank are spread evenly over the op's window
   ``*_F_<OP>_START_TIMESTAMP`` … ``_END_TIMESTAMP``, each lasting ``*_F_<OP>_TIME / N``
   (NaN when the log has no window).
5. **Collective.**  MPI-IO: ``COLL + SPLIT`` of the op's calls are collective, spread
   evenly over each rank's stream; POSIX requests never are.

What counters cannot give back: the order of requests, per-request offsets (only the
counts of consecutive/sequential transitions, four strides and the highest byte), which
rank did which access in a shared record beyond the fastest/slowest ranks, and the
layout of noncontiguous MPI-IO calls.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import ParioError
from .core import READ, WRITE, Trace, TraceMeta
from .darshan import _captured_fd2, _check_header, _first_error, _open_report

MODULES = ("MPI-IO", "POSIX")
_PREFIX = {"POSIX": "POSIX", "MPI-IO": "MPIIO"}
_OPS = ((READ, "READ"), (WRITE, "WRITE"))
_BUCKETS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G",
            "1G_PLUS")
# inclusive bounds of Darshan's size buckets (DARSHAN_BUCKET_INC); the last is open-ended
_LO = np.array([0, 101, 1025, 10241, 102401, 1048577, 4194305, 10485761, 104857601, 1073741825], dtype=np.int64)
_HI = np.array([100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824, -1], dtype=np.int64)
_MAX_ALIGN = 1 << 20
VIEWS_NOTE = "accessed through MPI file views (MPIIO_VIEWS > 0)"
_SEED = 20240
APPROXIMATE = ("synthesized from Darshan counters: request counts, sizes per bucket and bytes exact; "
               "offsets, order, rank split of shared files and times modelled (docs/traces.md)")


@dataclass
class _Op:
    """The counters of one op (read or write) of one record."""

    n: int
    nbytes: int
    hist: np.ndarray
    seq: int | None = None
    consec: int | None = None
    max_byte: int | None = None
    t0: float = float("nan")
    t1: float = float("nan")
    busy: float = 0.0
    coll: int = 0


@dataclass
class _Record:
    """One module record: a file, a rank (-1: shared by all ranks) and its counters."""

    id: int
    rank: int
    ops: dict[int, _Op]
    access: list[tuple[int, int]]
    strides: list[tuple[int, int]] | None = None
    fastest: tuple[int, int] | None = None
    slowest: tuple[int, int] | None = None
    var_bytes: float | None = None
    borrowed: set[int] = field(default_factory=set)
    views: int = 0


# ---------------------------------------------------------------------------- reading
def _frame(report, mod: str, errs: list[str]) -> pd.DataFrame | None:
    """Counters and fcounters of every record of ``mod`` as one DataFrame (or None)."""
    if mod not in report.modules:
        return None
    recs = report.records.get(mod) if hasattr(report, "records") else None
    if not recs:
        with _captured_fd2(errs):
            report.mod_read_all_records(mod, dtype="pandas", warnings=False)
        recs = report.records.get(mod)
    if not recs:
        return None
    if hasattr(recs, "to_df"):  # a DarshanRecordCollection read with another dtype
        d = recs.to_df()
        parts = [(d["counters"], d["fcounters"])]
    else:
        parts = [(r["counters"], r["fcounters"]) for r in recs]
    cnt = pd.concat([c for c, _ in parts if c is not None], ignore_index=True)
    fc = pd.concat([f for _, f in parts if f is not None], ignore_index=True)
    if cnt.empty:
        return None
    fc = fc.drop(columns=[c for c in ("id", "rank") if c in fc.columns])
    return pd.concat([cnt, fc], axis=1)


def _int(row, key: str) -> int:
    """A counter as an int; missing or negative (Darshan's 'not collected', -1) is 0."""
    v = row.get(key)
    if v is None or pd.isna(v):
        return 0
    return max(round(float(v)), 0)


def _opt(row, key: str) -> int | None:
    v = row.get(key)
    if v is None or pd.isna(v) or float(v) < 0:
        return None
    return round(float(v))


def _flt(row, key: str) -> float:
    v = row.get(key)
    return float(v) if v is not None and not pd.isna(v) else float("nan")


def _records(df: pd.DataFrame, mod: str) -> list[_Record]:
    p = _PREFIX[mod]
    out = []
    ids = df["id"].to_numpy(dtype=np.uint64)
    for i, row in enumerate(df.to_dict("records")):
        ops = {}
        for code, name in _OPS:
            hist_keys = [f"{p}_SIZE_{name}_AGG_{b}" if p == "MPIIO" else f"{p}_SIZE_{name}_{b}" for b in _BUCKETS]
            hist = np.array([_int(row, k) for k in hist_keys], dtype=np.int64)
            if p == "POSIX":
                n = _int(row, f"POSIX_{name}S")
                coll = 0
            else:
                n = sum(_int(row, f"MPIIO_{k}_{name}S") for k in ("INDEP", "COLL", "SPLIT", "NB"))
                coll = _int(row, f"MPIIO_COLL_{name}S") + _int(row, f"MPIIO_SPLIT_{name}S")
            nbytes = _int(row, f"{p}_BYTES_{'READ' if code == READ else 'WRITTEN'}")
            if n == 0:
                continue
            t0, t1 = _flt(row, f"{p}_F_{name}_START_TIMESTAMP"), _flt(row, f"{p}_F_{name}_END_TIMESTAMP")
            op = _Op(n=n, nbytes=nbytes, hist=hist, t0=t0, t1=t1, busy=_flt(row, f"{p}_F_{name}_TIME"), coll=coll)
            if p == "POSIX":
                op.seq = _opt(row, f"POSIX_SEQ_{name}S")
                op.consec = _opt(row, f"POSIX_CONSEC_{name}S")
                mb = _opt(row, f"POSIX_MAX_BYTE_{'READ' if code == READ else 'WRITTEN'}")
                op.max_byte = mb
            ops[code] = op
        if not ops:
            continue
        access = [(_int(row, f"{p}_ACCESS{k}_ACCESS"), _int(row, f"{p}_ACCESS{k}_COUNT")) for k in range(1, 5)]
        rec = _Record(id=int(ids[i]), rank=round(float(row["rank"])), ops=ops,
                      access=[(s, c) for s, c in access if s > 0 and c > 0])
        rec.views = _int(row, "MPIIO_VIEWS") if p == "MPIIO" else 0
        if p == "POSIX":
            st = [(_int(row, f"POSIX_STRIDE{k}_STRIDE"), _int(row, f"POSIX_STRIDE{k}_COUNT")) for k in range(1, 5)]
            rec.strides = [(g, c) for g, c in st if g > 0 and c > 0]
        if rec.rank < 0:
            fr, fb = _opt(row, f"{p}_FASTEST_RANK"), _opt(row, f"{p}_FASTEST_RANK_BYTES")
            sr, sb = _opt(row, f"{p}_SLOWEST_RANK"), _opt(row, f"{p}_SLOWEST_RANK_BYTES")
            rec.fastest = (fr, fb) if fr is not None and fb is not None else None
            rec.slowest = (sr, sb) if sr is not None and sb is not None else None
            v = _flt(row, f"{p}_F_VARIANCE_RANK_BYTES")
            rec.var_bytes = v if v >= 0 else None
        out.append(rec)
    return out


def _borrow_posix(mpi: list[_Record], posix: list[_Record]) -> int:
    """Give MPI-IO records what only the POSIX module records (module doc, step 3): the file
    extent always, sequentiality and strides when the POSIX record has one request per
    MPI-IO call.  Returns the number of (record, op) pairs that got the full set."""
    by_key = {(r.id, r.rank): r for r in posix}
    extent: dict[tuple[int, int], int] = {}
    for r in posix:
        for code, op in r.ops.items():
            if op.max_byte is not None:
                k = (r.id, code)
                extent[k] = max(extent.get(k, -1), op.max_byte)
    full = 0
    for r in mpi:
        twin = by_key.get((r.id, r.rank))
        for code, op in r.ops.items():
            po = twin.ops.get(code) if twin is not None else None
            # equal counts of collective calls through a file view are a coincidence: two-phase
            # I/O rewrote them (e.g. 16 calls of 4 MiB by 4 aggregators × 4 cycles of 4 MiB)
            rewritten = r.views > 0 and op.coll > 0
            if po is not None and po.n == op.n and po.nbytes == op.nbytes and not rewritten:
                op.seq, op.consec, op.max_byte = po.seq, po.consec, po.max_byte
                r.strides = twin.strides
                r.borrowed.add(code)
                full += 1
            else:
                mb = extent.get((r.id, code))
                if mb is None:
                    mb = max((extent.get((r.id, c), -1) for c in (READ, WRITE)), default=-1)
                op.max_byte = mb if mb is not None and mb >= 0 else None
    return full


# ---------------------------------------------------------------------------- step 1: sizes
def _bucket(size: int) -> int:
    return int(np.searchsorted(_LO, size, side="right") - 1)


def _apportion(total: int, weights) -> np.ndarray:
    """Split the integer ``total`` by non-negative ``weights`` (largest remainder; exact sum;
    no part above ``total × weight / sum`` rounded up).  Zero weights everywhere: equal."""
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros(len(w), dtype=np.int64)
    if total <= 0 or len(w) == 0:
        return out
    s = w.sum()
    if s <= 0:
        w, s = np.ones(len(w)), float(len(w))
    exact = total * (w / s)
    base = np.floor(exact).astype(np.int64)
    rem = int(total - base.sum())
    if rem > 0:
        idx = np.argsort(-(exact - base), kind="stable")[:rem]
        base[idx] += 1
    return base


def _bucket_tops(total: int, top: int | None) -> np.ndarray:
    """Each bucket's largest size for requests of ``total`` bytes in all, none above ``top``
    (the op's extent, ``MAX_BYTE + 1``: no request reads or writes past the highest byte)."""
    hi = np.where(_HI < 0, max(total, int(_LO[-1])), _HI)
    return hi if top is None else np.minimum(hi, max(int(top), 0))


def _fill(free: np.ndarray, total: int, top: int | None = None) -> np.ndarray | None:
    """Sizes for ``free[b]`` requests of unknown size in bucket b adding up to ``total``,
    none above ``top`` (module doc, step 1); None if impossible.  Slot k of a bucket's m sits
    at position ((k + ½)/m)^θ of the bucket's range on a log scale, one exponent θ for all
    buckets, chosen (bisection) so that the bytes add up; the last bytes are spread one by one."""
    n = int(free.sum())
    if n == 0:
        return np.zeros(0, dtype=np.int64) if total == 0 else None
    lo = _LO.copy()
    hi = _bucket_tops(total, top)
    if (hi < lo)[free > 0].any():
        return None
    low, high = int((free * lo).sum()), int((free * hi).sum())
    if not low <= total <= high:
        return None
    b = np.repeat(np.arange(len(free)), free)
    u = (np.arange(n) - np.repeat(np.r_[0, np.cumsum(free)[:-1]], free) + 0.5) / free[b]
    lo1 = np.maximum(lo[b], 1).astype(np.float64)
    ratio = np.log(hi[b] / lo1)

    def sizes_at(t: float) -> np.ndarray:
        return lo1 * np.exp(ratio * u ** np.exp(t))

    a, z = -30.0, 30.0  # log θ: total falls from Σ hi (θ → 0) to Σ max(lo, 1) (θ → ∞)
    for _ in range(80):
        mid = (a + z) / 2
        if sizes_at(mid).sum() > total:
            a = mid
        else:
            z = mid
    x = sizes_at(z)
    sizes = np.clip(np.floor(x).astype(np.int64), lo[b], hi[b])
    rem = total - int(sizes.sum())
    pref = np.argsort(-(x - sizes), kind="stable")  # largest fractional part first
    for _ in range(2):  # one byte each to the first slots, then whatever room is left
        if rem == 0:
            break
        room = (hi[b] - sizes) if rem > 0 else (sizes - lo[b])
        if _ == 0:
            room = np.minimum(room, 1)
        r = room[pref]
        take = np.clip(abs(rem) - (np.cumsum(r) - r), 0, r)
        sizes[pref] += take if rem > 0 else -take
        rem -= int(take.sum()) if rem > 0 else -int(take.sum())
    return sizes if rem == 0 else None


def _sizes(ops: dict[int, _Op], access: list[tuple[int, int]], notes: set[str]) -> dict[int, np.ndarray]:
    """Request sizes per op: histogram counts and bytes exact (module doc, step 1)."""
    hist = {c: (op.hist.copy() if int(op.hist.sum()) == op.n else None) for c, op in ops.items()}
    for c, h in hist.items():
        if h is None:
            notes.add("a size histogram disagrees with its request count: those sizes are spread evenly")
    commons = [(s, k, _bucket(s)) for s, k in access]
    top = {c: None if op.max_byte is None else op.max_byte + 1 for c, op in ops.items()}   # the op's extent
    choices = []
    for s, k, b in commons:
        can = [c for c in ops if hist[c] is not None and hist[c][b] > 0 and (top[c] is None or s <= top[c])]
        opts = (["prop"] if len(can) > 1 else []) + [f"op{c}" for c in can] + ["skip"]
        choices.append(opts)
    best, best_score = None, None
    for combo in itertools.product(*choices) if commons else [()]:
        cap = {c: (h.copy() if h is not None else None) for c, h in hist.items()}
        fixed = {c: [] for c in ops}
        for (s, k, b), how in zip(commons, combo):
            if how == "skip":
                continue
            if how == "prop":
                cr, cw = cap[READ][b], cap[WRITE][b]   # (both in `can`: neither extent is below s)
                kr = int(min(cr, round(k * cr / (cr + cw)))) if cr + cw else 0
                kw = int(min(cw, k - kr))
                kr = int(min(cr, k - kw))
                parts = {READ: kr, WRITE: kw}
            else:
                c = int(how[2:])
                parts = {c: int(min(cap[c][b], k))}
            for c, m in parts.items():
                if m > 0:
                    cap[c][b] -= m
                    fixed[c].append((s, m))
        ok, free_n = True, 0
        for c, op in ops.items():
            if cap[c] is None:
                continue
            fb = sum(s * m for s, m in fixed[c])
            lo = int((cap[c] * _LO).sum())
            hi_top = _bucket_tops(op.nbytes, top[c])
            if (hi_top < _LO)[cap[c] > 0].any() or not lo <= op.nbytes - fb <= int((cap[c] * hi_top).sum()):
                ok = False
                break
            free_n += int(cap[c].sum())
        if not ok:
            continue
        score = (free_n, sum(h == "skip" for h in combo))
        if best_score is None or score < best_score:
            best, best_score = (cap, fixed), score
            if score == (0, 0):  # every size known: no better split exists
                break
    out = {}
    for c, op in ops.items():
        sizes = None
        if best is not None and hist[c] is not None:
            cap, fixed = best
            fb = sum(s * m for s, m in fixed[c])
            free = _fill(cap[c], op.nbytes - fb, top[c])
            if free is not None:
                sizes = np.concatenate([np.repeat(np.array([s for s, _ in fixed[c]], dtype=np.int64),
                                                  [m for _, m in fixed[c]]), free]) if fixed[c] else free
        if sizes is None:
            if hist[c] is not None:
                notes.add("a size histogram disagrees with its byte count: those sizes are spread evenly")
            q, r = divmod(op.nbytes, op.n)
            sizes = np.full(op.n, q, dtype=np.int64)
            sizes[:r] += 1
        out[c] = _interleave(sizes)
    return out


def _interleave(sizes: np.ndarray) -> np.ndarray:
    """The sizes reordered so that every size recurs evenly along the list (size k of a value
    that occurs m times sits at fraction (k + ½)/m), so any run of the list has every size in
    proportion."""
    if len(sizes) == 0:
        return sizes
    _, inv, counts = np.unique(sizes, return_inverse=True, return_counts=True)
    order = np.argsort(inv, kind="stable")
    k = np.empty(len(sizes), dtype=np.int64)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    k[order] = np.arange(len(sizes)) - np.repeat(starts, counts)
    key = (k + 0.5) / counts[inv]
    return sizes[np.lexsort((-counts[inv], key))]


# ---------------------------------------------------------------------------- step 2: ranks
def _rank_weights(rec: _Record, nprocs: int) -> np.ndarray:
    """Per-rank share of a shared record's bytes (module doc, step 2)."""
    total = sum(op.nbytes for op in rec.ops.values())
    p = nprocs
    w = np.full(p, total / p if p else 0.0)
    known = {}
    for who in (rec.fastest, rec.slowest):
        if who is not None and 0 <= who[0] < p and who[1] <= total:
            known[who[0]] = who[1]
    rest = [r for r in range(p) if r not in known]
    left = total - sum(known.values())
    if not known or left < 0 or total == 0:
        return w / w.sum() if w.sum() > 0 else np.full(p, 1.0 / max(p, 1))
    for r, b in known.items():
        w[r] = b
    m = len(rest)
    if m == 0:
        return w / w.sum() if w.sum() > 0 else np.full(p, 1.0 / p)
    mu = total / p
    nu = left / m
    cands = [np.full(m, nu)]  # equal shares
    if rec.var_bytes:
        # two levels nu ± d on the two halves of the other ranks, d from the variance
        extra = p * rec.var_bytes - sum((b - mu) ** 2 for b in known.values()) - m * (nu - mu) ** 2
        half = m // 2
        if extra > 0 and half:
            d = min(float(np.sqrt(extra / (2 * half))), nu)
            two = np.full(m, nu)
            two[:half] += d
            two[m - half:] -= d
            cands.append(two)
        # the two recorded levels: as many ranks as fit at the higher, the rest at the lower
        lo, hi = min(known.values()), max(known.values())
        if hi > lo:
            k = int(np.clip(np.floor((left - m * lo) / (hi - lo)), 0, m))
            lev = np.full(m, float(lo))
            lev[:k] = hi
            lev[min(k, m - 1)] += left - lev.sum()
            if lev.min() >= 0:
                cands.append(lev)

        def var(v):
            full = w.copy()
            full[rest] = v
            return float(((full - mu) ** 2).mean())

        best = min(cands, key=lambda v: abs(var(v) - rec.var_bytes))
    else:
        best = cands[0]
    w[rest] = best
    s = w.sum()
    return w / s if s > 0 else np.full(p, 1.0 / p)


def _split_ranks(sizes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Requests per rank: contiguous runs of ``sizes`` cut where the bytes reach each rank's
    cumulative share (by count when nothing moves a byte)."""
    n = len(sizes)
    total = int(sizes.sum())
    if total == 0:
        return _apportion(n, weights)
    c0 = np.r_[0, np.cumsum(sizes, dtype=np.float64)]
    target = total * np.cumsum(weights)
    k = np.searchsorted(c0, target, side="left").clip(0, n)
    lower = (k > 0) & (target - c0[np.maximum(k - 1, 0)] < c0[k] - target)
    k = np.where(lower, k - 1, k)
    k[-1] = n
    k = np.maximum.accumulate(k)
    return np.diff(np.r_[0, k]).astype(np.int64)


# ---------------------------------------------------------------------------- step 3: offsets
@dataclass
class _Piece:
    """The requests of one (record, op): sizes grouped by rank (ascending), each rank's in
    stream order, with their times and collective flags."""

    rec: _Record
    code: int
    ranks: np.ndarray  # active ranks, ascending
    n_r: np.ndarray  # requests of each active rank
    sizes: np.ndarray
    start: np.ndarray
    end: np.ndarray
    collective: np.ndarray


def _align(sizes: np.ndarray) -> int:
    """The largest power of two (≤ 1 MiB) dividing every non-zero size."""
    nz = sizes[sizes > 0]
    if len(nz) == 0:
        return 1
    g = int(np.gcd.reduce(nz))
    return int(min(g & -g, _MAX_ALIGN))


def _transitions(pieces: list[_Piece]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Consecutive, forward-gap and backward transitions of every stream (active rank of a
    piece, in piece order) from the pieces' SEQ/CONSEC counters (module doc, step 3), and
    whether those counters were known.  Darshan counts a stream's first access as
    sequential when it is above offset 0: true of every stream but the first, and of the
    first too when it makes a backward jump (its first pass lies above its last)."""
    cs, fs, ks = [], [], []
    known = True
    for i, pc in enumerate(pieces):
        op = pc.rec.ops[pc.code]
        room = pc.n_r - 1
        trans = int(room.sum())
        if op.seq is None or op.consec is None:  # not known: every request its own segment
            known = False
            c, f = np.zeros_like(room), room.copy()
        else:
            for starts in range(len(pc.n_r) - (1 if i == 0 else 0), len(pc.n_r) + 1):
                consec = min(op.consec, trans)
                seq = int(np.clip(op.seq - starts, consec, trans))
                c = _apportion(consec, room)
                f = _apportion(seq - consec, room - c)
                if i or room[0] - c[0] - f[0] == 0:
                    break
        cs.append(c)
        fs.append(f)
        ks.append(room - c - f)
    return np.concatenate(cs), np.concatenate(fs), np.concatenate(ks), known


def _offsets(pieces: list[_Piece], extent: int | None, notes: set[str]) -> np.ndarray:
    """Offsets of the requests of all pieces of one (file, op), laid out together (module
    doc, step 3); returned in piece order."""
    sizes = np.concatenate([pc.sizes for pc in pieces])
    na = np.concatenate([pc.n_r for pc in pieces])
    n, a = len(sizes), len(na)
    _, f_r, k_r, known = _transitions(pieces)
    room = na - 1
    nb = f_r + k_r
    first = np.r_[0, np.cumsum(na)[:-1]]
    # breaks spread evenly over each stream's transitions; every k/nb-th of them goes backward
    rb = np.repeat(np.arange(a), nb)
    j = np.arange(int(nb.sum())) - np.repeat(np.r_[0, np.cumsum(nb)[:-1]], nb)
    pos = (2 * j + 1) * room[rb] // (2 * nb[rb]) + 1
    bk = (j + 1) * k_r[rb] // nb[rb] > j * k_r[rb] // nb[rb]
    seg_start = np.zeros(n, dtype=bool)
    seg_start[first] = True
    seg_start[first[rb] + pos] = True
    back_at = np.zeros(n, dtype=np.int64)
    back_at[first[rb] + pos] = bk
    seg_id = np.cumsum(seg_start) - 1
    starts = np.flatnonzero(seg_start)
    nseg = len(starts)
    seg_len = np.add.reduceat(sizes, starts)
    seg_stream = np.repeat(np.arange(a), na)[starts]
    cb = np.cumsum(back_at)
    seg_pass = (cb - np.repeat(cb[first], na))[starts]
    # spatial index of a segment in its stream: passes one below the other, the last lowest
    s_seg0 = np.searchsorted(seg_stream, np.arange(a))
    nseg_s = np.diff(np.r_[s_seg0, nseg])
    grp_new = np.r_[True, (seg_stream[1:] != seg_stream[:-1]) | (seg_pass[1:] != seg_pass[:-1])]
    grp = np.cumsum(grp_new) - 1
    g_first = np.flatnonzero(grp_new)
    g_count = np.diff(np.r_[g_first, nseg])
    local = np.arange(nseg) - s_seg0[seg_stream]
    g_local = g_first[grp] - s_seg0[seg_stream]
    q = nseg_s[seg_stream] - (g_local + g_count[grp]) + (local - g_local)

    unit = _align(sizes)
    total = int(seg_len.sum())
    mean_seg = total / nseg
    fwd, back, trans = int(f_r.sum()), int(k_r.sum()), int(room.sum())
    strides: dict[int, int] = {}
    for pc in pieces:
        for g, c in pc.rec.strides or ():
            strides[g] = strides.get(g, 0) + c
    gaps_seen = sum(max(o.seq - o.consec, 0) for pc in pieces for o in [pc.rec.ops[pc.code]]
                    if o.seq is not None and o.consec is not None)
    cover = sum(strides.values()) / gaps_seen if gaps_seen else 1.0
    ranked = sorted(strides.items(), key=lambda t: (-t[1], -t[0]))
    gap = ranked[0][0] if ranked else None
    gap2 = next((g for g, _ in ranked[1:] if g > gap), None) if ranked else None
    hole, by_stride, group, run = 0, False, a, 0
    if known and back >= trans / 4 and cover < 0.5 and nseg > 1:
        # irregular (random) access: the recorded strides explain few of the gaps
        order = np.random.default_rng(_SEED).permutation(nseg)
    else:
        if fwd > 0 and gap is not None:
            # interleave groups of `group` streams so that a stream's gap is the stride
            group = min(a, round(gap / max(mean_seg, 1)) + 1)
            hole = max(round((gap - (group - 1) * mean_seg) / group), 0)
            by_stride = True
            # runs of `run` segments per stream, the groups' runs in turn: the second stride
            # is the jump over the other groups' runs
            ngroups = -(-a // group)
            if gap2 is not None and ngroups > 1:
                length = (gap2 - gap) / ((ngroups - 1) * group * (mean_seg + hole))
                if length >= 1 and abs(length - round(length)) <= 0.25:
                    run = round(length)
        elif fwd > 0 and a == 1 and known:  # a lone stream's gaps: one mean request (aligned)
            hole = int(-(-max(int(sizes.mean()), 1) // unit) * unit)
        if run:
            order = np.lexsort((seg_stream, q % run, seg_stream // group, q // run))
        else:
            order = np.lexsort((seg_stream, q, seg_stream // group))
    gaps = np.full(nseg, max(hole, 0), dtype=np.int64)  # hole after the k-th segment of the layout
    gaps[-1] = 0
    base, wrap = 0, False
    need = total + int(gaps.sum())
    if extent is not None and extent > 0:
        if total > extent:
            wrap = True
        elif need > extent:  # smaller holes: aligned if there is room for that, else any > 0
            h = (extent - total) // max(nseg - 1, 1)
            gaps[:-1] = h // unit * unit if h >= unit else h
            gaps[-2 if nseg > 1 else -1] += extent - total - int(gaps.sum())
        elif need < extent:
            slack = extent - need
            if nseg == 1:
                base = slack
            elif by_stride:
                gaps[-2] += slack
            else:
                gaps[:-1] += slack // (nseg - 1) // unit * unit
                gaps[-2] += extent - total - int(gaps.sum())
    seg_off = np.empty(nseg, dtype=np.int64)
    ls = seg_len[order]
    seg_off[order] = base + np.r_[0, np.cumsum(ls + gaps)[:-1]]
    if wrap:  # more bytes than the file: fold the layout around the file, segment by segment
        notes.add("more bytes than the file holds: the layout wraps around the file (re-reads)")
        seg_off %= extent
        over = seg_off + seg_len > extent
        seg_off[over] = np.maximum(extent - seg_len[over], 0)
        top = int(np.argmax(seg_off + seg_len))  # the highest segment ends at MAX_BYTE + 1
        if seg_len[top] <= extent:
            seg_off[top] = extent - seg_len[top]
    within = np.cumsum(sizes) - sizes - np.repeat(np.r_[0, np.cumsum(seg_len)][:-1], np.diff(np.r_[starts, n]))
    off = seg_off[seg_id] + within
    if wrap:  # a segment longer than the file (possible only for modelled segments): fold its requests
        long = (seg_len > extent)[seg_id]
        off[long] %= extent
        big = long & (off + sizes > extent)
        off[big] = np.maximum(extent - sizes[big], 0)
    return off


# ---------------------------------------------------------------------------- steps 4, 5
def _times(n_r: np.ndarray, op: _Op) -> tuple[np.ndarray, np.ndarray]:
    n = int(n_r.sum())
    t0, t1 = op.t0, op.t1
    if not (np.isfinite(t0) and np.isfinite(t1) and t0 > 0 and t1 >= t0):
        return np.full(n, np.nan), np.full(n, np.nan)
    width = t1 - t0
    busy = op.busy if np.isfinite(op.busy) and op.busy > 0 else 0.0
    i = np.arange(n) - np.repeat(np.r_[0, np.cumsum(n_r)[:-1]], n_r)
    per = np.repeat(n_r, n_r).astype(np.float64)
    d = np.minimum(busy / n, width / per)
    step = np.where(per > 1, (width - d) / np.maximum(per - 1, 1), 0.0)
    start = t0 + i * step
    return start, np.minimum(start + d, t1)


def _collective(n_r: np.ndarray, op: _Op) -> np.ndarray:
    n = int(n_r.sum())
    if op.coll <= 0:
        return np.zeros(n, dtype=bool)
    c_r = _apportion(min(op.coll, n), n_r)
    i = np.arange(n) - np.repeat(np.r_[0, np.cumsum(n_r)[:-1]], n_r)
    c, m = np.repeat(c_r, n_r), np.repeat(n_r, n_r)
    return (i + 1) * c // m > i * c // m


# ---------------------------------------------------------------------------- public API
def synthesize(report_or_path, *, module: str | None = None) -> Trace:
    """A trace synthesized from the module counters of a Darshan log (no DXT needed).

    ``report_or_path``: a log path or an open ``darshan.DarshanReport``.  ``module``:
    ``"MPI-IO"`` or ``"POSIX"``; default MPI-IO when the log has MPI-IO records that move
    bytes, else POSIX.  The generator and its limits are in the module docstring; bad input
    raises :class:`~pario.ParioError`.
    """
    if module is not None:
        m = str(module).strip().upper().replace("_", "-")
        m = {"MPIIO": "MPI-IO"}.get(m, m)
        if m not in MODULES:
            raise ParioError(f"bad Darshan counter module {module!r}: expected MPI-IO or POSIX")
        module = m
    errs: list[str] = []
    own = not hasattr(report_or_path, "modules")
    if own:
        path = Path(os.fspath(report_or_path))
        if not path.exists():
            raise ParioError(f"{path}: no such file")
        _check_header(path)
        report = _open_report(path, errs)
        where = str(path)
    else:
        report = report_or_path
        where = str(getattr(report, "filename", "") or "Darshan log")
    try:
        frames = {m: _frame(report, m, errs) for m in MODULES}
        why = _first_error(errs)
        if why:
            raise ParioError(f"{where}: corrupt Darshan log ({why})")
        meta = report.metadata if isinstance(report.metadata, dict) else {}
        job = meta.get("job", {}) or {}
        names = dict(report.name_records)
    finally:
        if own:
            report._cleanup()
    recs = {m: (_records(f, m) if f is not None else []) for m, f in frames.items()}
    if module is None:
        module = "MPI-IO" if any(op.nbytes > 0 for r in recs["MPI-IO"] for op in r.ops.values()) else "POSIX"
    if frames[module] is None:
        have = ", ".join(m for m in MODULES if frames[m] is not None) or "neither MPI-IO nor POSIX"
        raise ParioError(f"{where}: the log has no {module} counters (it has {have})")
    chosen = recs[module]
    if not chosen:
        raise ParioError(f"{where}: the log's {module} counters record no reads or writes")
    nprocs = int(job.get("nprocs") or 0) or None
    notes: set[str] = set()
    lead = []
    if module == "MPI-IO":
        full = _borrow_posix(chosen, recs["POSIX"])
        total = sum(len(r.ops) for r in chosen)
        others = "; the others laid out call by call, in rounds" if full < total else ""
        lead.append(f"sequentiality and strides of {full} of {total} MPI-IO (file, op) streams taken from POSIX "
                    f"records with one request per call{others}")
    return _build(chosen, names, nprocs, module, str(meta.get("exe", "")), notes, lead)


def _pieces(rec: _Record, nprocs: int, mpiio: bool, notes: set[str]) -> list[_Piece]:
    """Steps 1, 2, 4 and 5 for one record: sizes, ranks, times and collective flags."""
    sizes = _sizes(rec.ops, rec.access, notes)
    weights = _rank_weights(rec, nprocs) if rec.rank < 0 else None
    out = []
    for code, op in sorted(rec.ops.items()):
        sz = sizes[code]
        if rec.rank >= 0:
            ranks, n_r = np.array([rec.rank]), np.array([len(sz)])
        else:
            n_all = _split_ranks(sz, weights)
            ranks = np.flatnonzero(n_all)
            n_r = n_all[ranks]
        start, end = _times(n_r, op)
        coll = _collective(n_r, op) if mpiio else np.zeros(len(sz), dtype=bool)
        out.append(_Piece(rec, code, ranks, n_r, sz, start, end, coll))
    return out


def _build(recs: list[_Record], names: dict, nprocs: int | None, module: str, exe: str, notes: set[str],
           lead: list[str]) -> Trace:
    p = max([nprocs or 0, 1] + [r.rank + 1 for r in recs])
    files: list[str] = []
    index: dict[int, int] = {}
    groups: dict[tuple[int, int], list[_Piece]] = {}
    for rec in recs:
        if rec.id not in index:
            index[rec.id] = len(files)
            files.append(str(names.get(rec.id, f"<record {rec.id:x}>")))
        for pc in _pieces(rec, p, module == "MPI-IO", notes):
            groups.setdefault((rec.id, pc.code), []).append(pc)
    cols = {k: [] for k in ("rank", "file", "op", "offset", "length", "start", "end", "collective")}
    for (fid, code), pcs in groups.items():
        pcs.sort(key=lambda pc: int(pc.ranks[0]))
        mbs = [pc.rec.ops[code].max_byte for pc in pcs if pc.rec.ops[code].max_byte is not None]
        cols["offset"].append(_offsets(pcs, max(mbs) + 1 if mbs else None, notes))
        for pc in pcs:
            cols["rank"].append(np.repeat(pc.ranks, pc.n_r))
            cols["file"].append(np.full(len(pc.sizes), index[fid]))
            cols["op"].append(np.full(len(pc.sizes), code, dtype=np.int8))
            cols["length"].append(pc.sizes)
            cols["start"].append(pc.start)
            cols["end"].append(pc.end)
            cols["collective"].append(pc.collective)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    n = len(cat["rank"])
    # order per rank: by start time (unknown times last), then as generated
    st = np.where(np.isnan(cat["start"]), np.inf, cat["start"])
    idx = np.lexsort((np.arange(n), st, cat["rank"]))
    rk = cat["rank"][idx]
    first = np.r_[0, np.flatnonzero(np.diff(rk)) + 1]
    order = np.empty(n, dtype=np.int64)
    order[idx] = np.arange(n) - np.repeat(first, np.diff(np.r_[first, n]))
    views = len({r.id for r in recs if r.views and set(r.ops) - r.borrowed})
    if views:
        notes.add(f"{VIEWS_NOTE}: {views} file(s); a call is one request of its total size, laid out contiguously, "
                  "where the real call touched noncontiguous pieces")
    shared = sum(r.rank < 0 for r in recs)
    if shared:
        notes.add(f"{shared} shared record(s) (rank -1) spread over {p} ranks")
    first = f"{n} requests synthesized from {len(recs)} {module} counter record(s); offsets and order are modelled"
    meta = TraceMeta(source=f"darshan counters {module}", nprocs=nprocs, command=exe, approximate=APPROXIMATE,
                     notes=(first, *lead, *sorted(notes)))
    return Trace.from_arrays(cat["rank"], cat["file"], cat["op"], cat["offset"], cat["length"],
                             files=tuple(files), start=cat["start"], end=cat["end"], collective=cat["collective"],
                             order=order, meta=meta)
