"""The one in-memory trace type: a columnar table of I/O requests.

Every request has ``rank``, ``file`` (an index into :attr:`Trace.files`, the file names),
``op`` (:data:`READ` = 0 or :data:`WRITE` = 1), ``offset`` and ``length`` in bytes,
``start`` / ``end`` time stamps in seconds (NaN when unknown), ``collective`` (bool) and
``order``, the position of the request within its rank's request stream (0, 1, 2, …), and
``call``, the number of the I/O call the request belongs to within its rank: a call through
an MPI file view touches several extents (one row each) that share a ``call``; without that
knowledge every request is its own call (``call = order``).

A trace also carries :class:`TraceMeta`: what is known of the job beyond its requests (the
process count, the collective-buffering aggregators and hints, the command line, whether
the trace is partial or approximate).  Every transform keeps it.

Columns are numpy arrays of fixed dtypes (see :data:`DTYPES`), so every model, planner and
the simulator work on whole columns at once.  A :class:`Trace` is immutable by convention:
methods return new traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from .. import ParioError
from ..arrays import unique
from ..units import MAX_BYTES

if TYPE_CHECKING:
    import pandas as pd
# pandas is imported where it is used: ``import pario.mpi`` (every MPI rank) must stay light

READ = 0
WRITE = 1
OP_NAMES = ("read", "write")

DTYPES: dict[str, np.dtype] = {
    "rank": np.dtype(np.int32),
    "file": np.dtype(np.int32),
    "op": np.dtype(np.int8),
    "offset": np.dtype(np.int64),
    "length": np.dtype(np.int64),
    "start": np.dtype(np.float64),
    "end": np.dtype(np.float64),
    "collective": np.dtype(np.bool_),
    "order": np.dtype(np.int64),
    "call": np.dtype(np.int64),
}
COLUMNS = tuple(DTYPES)

# ROMIO hints whose values are byte counts or counts (MPI-4 §14.2.8 reserved keys)
_INT_HINTS = ("cb_nodes", "cb_buffer_size", "ind_rd_buffer_size", "ind_wr_buffer_size", "striping_factor",
              "striping_unit")


@dataclass(frozen=True)
class TraceMeta:
    """What a trace knows about its job beyond the requests.

    ``source``: where the requests came from (``darshan DXT_MPIIO``, ``pario tracer``,
    ``darshan counters``, ``pario.mpi``, …; empty when unknown).  ``nprocs``: the job's
    process count (ranks that did no I/O count too).  ``aggregators``: the ranks that did the
    file-system I/O of collective calls (two-phase aggregators), when the source shows them.
    ``hints``: the MPI_Info hints the job's files were opened with (``cb_nodes``,
    ``cb_buffer_size``, ``romio_cb_write``, …; strings, as MPI keeps them).  ``command``: the
    program's command line.  ``partial``: the source lost requests (a full DXT buffer).
    ``approximate``: non-empty when the requests are synthesized rather than recorded, and
    says how.  ``notes``: what the import had to say (one line each).
    """

    source: str = ""
    nprocs: int | None = None
    aggregators: tuple[int, ...] | None = None
    hints: tuple[tuple[str, str], ...] = ()
    command: str = ""
    partial: bool = False
    approximate: str = ""
    notes: tuple[str, ...] = ()

    def hint(self, key: str) -> str | None:
        """The value of hint ``key``, or None."""
        for k, v in self.hints:
            if k == key:
                return v
        return None

    def int_hint(self, key: str) -> int | None:
        """Hint ``key`` as a positive integer, or None when absent or not a number."""
        v = self.hint(key)
        try:
            n = int(str(v).strip()) if v is not None else None
        except ValueError:
            return None
        return n if n is not None and n > 0 else None

    @property
    def cb_nodes(self) -> int | None:
        """The number of two-phase aggregators the job used: the aggregator ranks the source
        saw, else the ``cb_nodes`` hint."""
        if self.aggregators:
            return len(self.aggregators)
        return self.int_hint("cb_nodes")

    @property
    def cb_buffer_size(self) -> int | None:
        """The two-phase buffer size (``cb_buffer_size`` hint) in bytes, or None."""
        return self.int_hint("cb_buffer_size")

    def replace(self, **kw) -> "TraceMeta":
        from dataclasses import replace

        if "hints" in kw and isinstance(kw["hints"], dict):
            kw["hints"] = tuple(sorted((str(k), str(v)) for k, v in kw["hints"].items()))
        if "aggregators" in kw and kw["aggregators"] is not None:
            kw["aggregators"] = tuple(sorted(int(r) for r in kw["aggregators"]))
        return replace(self, **kw)

    def to_dict(self) -> dict:
        """JSON-ready (what Parquet and CSV trace files keep)."""
        d = {"source": self.source, "nprocs": self.nprocs,
             "aggregators": list(self.aggregators) if self.aggregators is not None else None,
             "hints": dict(self.hints), "command": self.command, "partial": self.partial,
             "approximate": self.approximate, "notes": list(self.notes)}
        return {k: v for k, v in d.items() if v not in (None, "", False, [], {})}

    @classmethod
    def from_dict(cls, d: dict) -> "TraceMeta":
        """Inverse of :meth:`to_dict`; unknown keys are ignored, bad values raise ParioError."""
        if not isinstance(d, dict):
            raise ParioError("trace metadata is not a JSON object")
        try:
            nprocs = d.get("nprocs")
            nprocs = None if nprocs is None else int(nprocs)
            if nprocs is not None and not 0 < nprocs <= 1 << 24:
                raise ValueError(f"nprocs {nprocs}")
            aggs = d.get("aggregators")
            aggs = None if aggs is None else tuple(sorted(int(r) for r in aggs))
            if aggs is not None and any(r < 0 for r in aggs):
                raise ValueError("negative aggregator rank")
            hints = d.get("hints") or {}
            if not isinstance(hints, dict):
                raise ValueError("hints is not an object")
            return cls(source=str(d.get("source", "")), nprocs=nprocs, aggregators=aggs,
                       hints=tuple(sorted((str(k), str(v)) for k, v in hints.items())),
                       command=str(d.get("command", "")), partial=bool(d.get("partial", False)),
                       approximate=str(d.get("approximate", "")),
                       notes=tuple(str(n) for n in d.get("notes") or ()))
        except (TypeError, ValueError) as exc:
            raise ParioError(f"bad trace metadata ({exc})") from None


def op_code(values) -> np.ndarray:
    """Map op names (``read``/``write``, ``r``/``w``, case-insensitive) or 0/1 to op codes."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        codes = arr.astype(np.int8)
        if codes.size and (codes.min() < 0 or codes.max() > 1):
            raise ParioError("bad op value: expected read|write (or 0|1)")
        return codes
    import pandas as pd

    low = pd.Series(arr, dtype="object").astype(str).str.strip().str.lower()
    codes = low.map({"read": READ, "r": READ, "write": WRITE, "w": WRITE})
    if codes.isna().any():
        bad = low[codes.isna()].iloc[0]
        raise ParioError(f"bad op value {bad!r}: expected read or write")
    return codes.to_numpy(dtype=np.int8)


def _rank_order(rank: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Position of each request within its rank: by start time when all are known, else by row."""
    n = len(rank)
    rows = np.arange(n)
    if n and not np.isnan(start).any():
        idx = np.lexsort((rows, start, rank))
    else:
        idx = np.lexsort((rows, rank))
    order = np.empty(n, dtype=np.int64)
    sorted_rank = rank[idx]
    first = np.r_[0, np.flatnonzero(np.diff(sorted_rank)) + 1] if n else np.array([], dtype=np.int64)
    group_start = np.repeat(first, np.diff(np.r_[first, n]))
    order[idx] = np.arange(n) - group_start
    return order


@dataclass(frozen=True)
class Trace:
    """A columnar request trace (see module docstring for the columns)."""

    cols: dict[str, np.ndarray]
    files: tuple[str, ...] = field(default=())
    meta: TraceMeta = field(default=TraceMeta())

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        rank: Iterable,
        file: Iterable | None = None,
        op: Iterable | None = None,
        offset: Iterable | None = None,
        length: Iterable | None = None,
        *,
        files: Sequence[str] | None = None,
        start: Iterable | None = None,
        end: Iterable | None = None,
        collective: Iterable | bool = False,
        order: Iterable | None = None,
        call: Iterable | None = None,
        meta: TraceMeta | None = None,
    ) -> "Trace":
        """Build a trace from columns.

        ``file`` may hold indices into ``files`` or file names (then ``files`` is derived,
        in order of first appearance).  ``op`` may hold names or codes.  Missing ``start``
        and ``end`` become NaN; a missing ``order`` is derived per rank (by start time when
        every start is known, else by row order); a missing ``call`` is ``order``.
        """
        rank = np.asarray(rank, dtype=np.int64)
        n = len(rank)
        if file is None:
            file = np.zeros(n, dtype=np.int32)
            files = tuple(files) if files else ("file",)
        file_arr = np.asarray(file)
        if file_arr.dtype.kind in "OUS":
            names, inverse = _unique_in_order(file_arr.astype(str))
            if files:
                lookup = {f: i for i, f in enumerate(files)}
                extra = [nm for nm in names if nm not in lookup]
                files = tuple(files) + tuple(extra)
                lookup.update({nm: len(lookup) + i for i, nm in enumerate(extra)})
                file_arr = np.array([lookup[nm] for nm in names], dtype=np.int32)[inverse]
            else:
                files = tuple(names)
                file_arr = inverse.astype(np.int32)
        elif files is None:
            nfiles = int(file_arr.max()) + 1 if n else 0
            files = tuple(f"file{i}" for i in range(nfiles))
        cols = {
            "rank": rank,
            "file": file_arr,
            "op": op_code(op if op is not None else np.zeros(n, dtype=np.int8)),
            "offset": np.asarray(offset, dtype=np.int64),
            "length": np.asarray(length, dtype=np.int64),
            "start": np.full(n, np.nan) if start is None else np.asarray(start, dtype=np.float64),
            "end": np.full(n, np.nan) if end is None else np.asarray(end, dtype=np.float64),
            "collective": np.broadcast_to(np.asarray(collective, dtype=bool), (n,)).copy(),
        }
        cols["order"] = (
            _rank_order(cols["rank"], cols["start"]) if order is None else np.asarray(order, dtype=np.int64)
        )
        if call is not None:
            cols["call"] = np.asarray(call, dtype=np.int64)
        return cls.checked(cols, tuple(files), meta)

    @classmethod
    def checked(cls, cols: dict[str, np.ndarray], files: tuple[str, ...], meta: TraceMeta | None = None) -> "Trace":
        """Validate shapes, dtypes and value ranges; raise :class:`ParioError` on bad data.
        A missing ``call`` column is ``order`` (every request its own call)."""
        n = len(cols["rank"])
        if "call" not in cols and "order" in cols:
            cols = {**cols, "call": cols["order"]}
        out = {}
        for name, dt in DTYPES.items():
            if name not in cols:
                raise ParioError(f"trace is missing column {name!r}")
            a = np.asarray(cols[name])
            if a.shape != (n,):
                raise ParioError(f"trace column {name!r} has {a.shape[0] if a.ndim else 0} rows, expected {n}")
            if a.dtype != dt:
                if dt.kind in "iu" and a.dtype.kind == "f" and np.isnan(a).any():
                    raise ParioError(f"trace column {name!r} has missing values")
                a = a.astype(dt)
            out[name] = a
        if n:
            if out["rank"].min() < 0:
                raise ParioError("trace has a negative rank")
            if out["offset"].min() < 0:
                raise ParioError("trace has a negative offset")
            if out["length"].min() < 0:
                raise ParioError("trace has a negative length")
            big = np.flatnonzero(out["offset"] > MAX_BYTES - out["length"])
            if len(big):
                i = int(big[0])
                raise ParioError(f"trace request {i} ends beyond 2^63-1 bytes (offset {int(out['offset'][i])} + "
                                 f"length {int(out['length'][i])}), the largest offset a file can have")
            if float(out["length"].sum(dtype=np.float64)) > MAX_BYTES:
                raise ParioError("trace moves more than 2^63-1 bytes in all")
            if out["file"].min() < 0 or out["file"].max() >= len(files):
                raise ParioError("trace file index out of range of its file list")
            if out["call"].min() < 0:
                raise ParioError("trace has a negative call number")
        return cls(out, tuple(files), meta if meta is not None else TraceMeta())

    def require_requests(self, where: str = "trace") -> "Trace":
        """This trace, or a one-line ParioError if it has no request that moves a byte (a
        header-only file, or zero-length requests only): nothing to model, plan or show."""
        if len(self) == 0:
            raise ParioError(f"{where}: empty trace (no requests)")
        if int(self.cols["length"].max()) == 0:
            raise ParioError(f"{where}: empty trace ({len(self)} requests, none of them moves a byte)")
        return self

    @classmethod
    def empty(cls) -> "Trace":
        return cls.from_arrays([], [], [], [], [], files=())

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.cols["rank"])

    def __getattr__(self, name: str) -> np.ndarray:
        cols = object.__getattribute__(self, "cols")
        if name in cols:
            return cols[name]
        raise AttributeError(name)

    @property
    def nranks(self) -> int:
        """Number of ranks: highest rank + 1 (ranks are 0-based)."""
        return int(self.cols["rank"].max()) + 1 if len(self) else 0

    @property
    def nprocs(self) -> int:
        """The job's process count: the metadata's, else :attr:`nranks` (never below it)."""
        return max(self.meta.nprocs or 0, self.nranks)

    def with_meta(self, meta: TraceMeta | None = None, **kw) -> "Trace":
        """This trace with ``meta`` (or its metadata with fields ``kw`` replaced)."""
        m = meta if meta is not None else self.meta
        return Trace(self.cols, self.files, m.replace(**kw) if kw else m)

    @property
    def end_offset(self) -> np.ndarray:
        return self.cols["offset"] + self.cols["length"]

    @property
    def bytes_read(self) -> int:
        return int(self.cols["length"][self.cols["op"] == READ].sum())

    @property
    def bytes_written(self) -> int:
        return int(self.cols["length"][self.cols["op"] == WRITE].sum())

    @property
    def has_times(self) -> bool:
        return len(self) > 0 and not np.isnan(self.cols["start"]).any()

    def file_name(self, i: int) -> str:
        return self.files[i]

    # ------------------------------------------------------------------ transforms
    def take(self, index) -> "Trace":
        """Rows selected by a boolean mask or an index array (file list kept).  Selecting
        every row in order returns this trace itself (traces are not modified in place), so
        that what is cached for it (batch ids, service order) serves the selection too."""
        if self._selects_all(index):
            return self
        return Trace({k: v[index] for k, v in self.cols.items()}, self.files, self.meta)

    def _selects_all(self, index) -> bool:
        n = len(self)
        if not isinstance(index, np.ndarray) or index.ndim != 1 or n == 0:
            return False
        if index.dtype == np.bool_:
            return len(index) == n and bool(index.all())
        if index.dtype.kind not in "iu" or len(index) != n:
            return False
        # n strictly increasing indices in [0, n) are 0, 1, …, n-1
        return int(index[0]) == 0 and int(index[-1]) == n - 1 and bool((index[1:] > index[:-1]).all())

    def where(self, *, rank=None, file=None, op=None) -> "Trace":
        """Rows matching the given rank / file (index or name) / op (code or name)."""
        mask = np.ones(len(self), dtype=bool)
        if rank is not None:
            mask &= self.cols["rank"] == rank
        if file is not None:
            fi = self.files.index(file) if isinstance(file, str) else file
            mask &= self.cols["file"] == fi
        if op is not None:
            mask &= self.cols["op"] == (op_code([op])[0] if isinstance(op, str) else op)
        return self.take(mask)

    def sorted(self) -> "Trace":
        """Rows in (rank, order) order."""
        return self.take(np.lexsort((self.cols["order"], self.cols["rank"])))

    def with_columns(self, **cols) -> "Trace":
        new = dict(self.cols)
        new.update(cols)
        if "order" in cols and "call" not in cols and np.array_equal(self.cols["call"], self.cols["order"]):
            new["call"] = new["order"]
        return Trace.checked(new, self.files, self.meta)

    def reorder(self) -> "Trace":
        """Recompute ``order`` from start times (or row order)."""
        return self.with_columns(order=_rank_order(self.cols["rank"], self.cols["start"]))

    @staticmethod
    def concat(traces: Sequence["Trace"]) -> "Trace":
        """Concatenate traces, merging their file lists by name; orders are recomputed per rank
        only if they would collide (each input's order is kept and shifted after the previous)."""
        traces = [t for t in traces]
        if not traces:
            return Trace.empty()
        files: list[str] = []
        lookup: dict[str, int] = {}
        parts = {k: [] for k in COLUMNS}
        base: dict[int, int] = {}
        cbase: dict[int, int] = {}
        for t in traces:
            remap = np.empty(len(t.files), dtype=np.int32)
            for i, f in enumerate(t.files):
                if f not in lookup:
                    lookup[f] = len(files)
                    files.append(f)
                remap[i] = lookup[f]
            order = t.cols["order"].copy()
            call = t.cols["call"].copy()
            if len(t):
                shift = np.array([base.get(int(r), 0) for r in range(t.nranks)], dtype=np.int64)
                cshift = np.array([cbase.get(int(r), 0) for r in range(t.nranks)], dtype=np.int64)
                order += shift[t.cols["rank"]]
                call += cshift[t.cols["rank"]]
                for r in unique(t.cols["rank"]):
                    m = t.cols["rank"] == r
                    base[int(r)] = int(order[m].max()) + 1
                    cbase[int(r)] = int(call[m].max()) + 1
            for k in COLUMNS:
                v = t.cols[k]
                if k == "file":
                    v = remap[v] if len(v) else v
                elif k == "order":
                    v = order
                elif k == "call":
                    v = call
                parts[k].append(v)
        nprocs = max((t.meta.nprocs or 0) for t in traces) or None
        meta = traces[0].meta.replace(nprocs=nprocs)
        return Trace.checked({k: np.concatenate(v) for k, v in parts.items()}, tuple(files), meta)

    # ------------------------------------------------------------------ pandas
    def to_frame(self) -> pd.DataFrame:
        """A pandas DataFrame with ``file`` as names and ``op`` as ``read``/``write``."""
        import pandas as pd

        df = pd.DataFrame({k: v for k, v in self.cols.items()})
        df["file"] = pd.Categorical.from_codes(self.cols["file"], categories=list(self.files)) if self.files else []
        df["op"] = np.array(OP_NAMES, dtype=object)[self.cols["op"]] if len(self) else []
        return df

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> "Trace":
        """Inverse of :meth:`to_frame`; required columns rank, file, op, offset, length."""
        import pandas as pd

        missing = [c for c in ("rank", "file", "op", "offset", "length") if c not in df.columns]
        if missing:
            raise ParioError(f"trace is missing column(s): {', '.join(missing)}")
        if isinstance(df["file"].dtype, pd.CategoricalDtype):
            files = tuple(str(c) for c in df["file"].cat.categories)
            file = df["file"].cat.codes.to_numpy()
        else:
            files = None
            file = df["file"].astype(str).to_numpy(dtype=object)
        kw = {}
        for c in ("start", "end", "order", "call"):
            if c in df.columns:
                kw[c] = df[c].to_numpy()
        if "collective" in df.columns:
            kw["collective"] = df["collective"].to_numpy(dtype=bool)
        return cls.from_arrays(
            df["rank"].to_numpy(), file, df["op"].to_numpy(), df["offset"].to_numpy(),
            df["length"].to_numpy(), files=files, **kw,
        )

    def __repr__(self) -> str:
        return (f"Trace({len(self)} requests, {self.nranks} ranks, {len(self.files)} files, "
                f"{self.bytes_read} B read, {self.bytes_written} B written)")


def _unique_in_order(values: np.ndarray) -> tuple[list[str], np.ndarray]:
    import pandas as pd

    codes, uniques = pd.factorize(values, sort=False)
    return [str(u) for u in uniques], codes.astype(np.int64)
