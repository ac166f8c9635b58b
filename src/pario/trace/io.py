"""Trace files: Parquet (the native format) and CSV.

CSV header: ``rank,file,op,offset,length`` and optionally ``start,end,collective,order,call``.
``op`` is ``read`` or ``write``; ``offset``/``length`` are byte counts and may use size
suffixes (``64k``).  Parquet files hold the same columns with ``file`` dictionary-encoded.
:func:`load` and :func:`save` pick the format from the file name (``.parquet``/``.pq`` or
``.csv``).

The trace's :class:`~pario.trace.core.TraceMeta` (process count, aggregators, hints, command
line, partial/approximate flags) travels with it: in Parquet as the schema's ``pario.meta``
key (JSON), in CSV as a first line ``#pario-meta {json}``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from .. import ParioError
from ..units import MAX_BYTES, check_bytes, parse_size
from .core import Trace, TraceMeta

META_KEY = b"pario.meta"
CSV_META = "#pario-meta "


def _fmt(path: Path, write: bool = False) -> str:
    """The format a file name says: ``.parquet``/``.pq`` or ``.csv`` (reading also ``.txt``
    as CSV; writing refuses it: an output name should say what the file is)."""
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv" or (suffix == ".txt" and not write):
        return "csv"
    raise ParioError(f"{path}: unknown trace format {suffix or '(no suffix)'!r} (use .parquet or .csv; "
                     "import Darshan logs with 'pario trace import')")


def save(trace: Trace, path: str | os.PathLike) -> Path:
    """Write ``trace`` to ``path`` atomically (temporary file + rename)."""
    path = Path(path)
    fmt = _fmt(path, write=True)
    meta = json.dumps(trace.meta.to_dict(), sort_keys=True, ensure_ascii=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if fmt == "parquet":
            _write_parquet(trace, tmp, meta.encode())
        else:
            # strings quoted so that file names keep leading blanks and names like "NA"
            df = trace.to_frame()
            with open(tmp, "w", newline="") as fh:
                if meta != "{}":
                    fh.write(CSV_META + meta + "\n")
                fh.write(",".join(df.columns) + "\n")
                df.to_csv(fh, index=False, header=False, quoting=csv.QUOTE_NONNUMERIC)
        os.replace(tmp, path)
    except OSError as exc:
        raise ParioError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _size_column(series, name: str) -> np.ndarray:
    if series.isna().any():
        raise ParioError(f"column {name!r} has empty values")
    if series.dtype.kind in "iu":
        return series.to_numpy(dtype=np.int64)
    if series.dtype.kind == "f":
        if (series != series.round()).any():
            raise ParioError(f"column {name!r} has non-integer byte counts")
        if len(series) and (series.min() < 0 or series.max() >= float(MAX_BYTES)):
            bad = series[(series < 0) | (series >= float(MAX_BYTES))].iloc[0]
            check_bytes(int(bad), name)
        return series.to_numpy(dtype=np.int64)
    return np.array([parse_size(str(v), name) for v in series], dtype=np.int64)


def load(path: str | os.PathLike, *, progress=None) -> Trace:
    """Read a trace from Parquet or CSV; raise :class:`ParioError` with one line on bad input.

    Parquet files of the usual schema (what :func:`save` writes: integer rank, offset,
    length, order, call; dictionary or string file and op; float start, end; bool collective;
    no missing values) are read row group by row group straight into the trace's numpy
    columns (no pandas, no per-request Python object); anything else goes through pandas,
    which also gives the one-line error for bad input.  ``progress(rows, total)`` is called after
    each batch of the fast path.
    """
    path = Path(path)
    fmt = _fmt(path)
    if not path.exists():
        raise ParioError(f"{path}: no such file")
    if fmt == "parquet":
        try:
            return _load_parquet_fast(path, progress)
        except _Unsupported:
            pass
    return _load_frame(path, fmt)


def _load_frame(path: Path, fmt: str) -> Trace:
    """The general reader (pandas): every schema, every error message."""
    import pandas as pd

    raw_meta = None
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            raw_meta = (table.schema.metadata or {}).get(META_KEY)
            df = table.to_pandas()
        else:
            skip = 0
            with open(path, "rb") as fh:
                first = fh.readline()
            if first.startswith(CSV_META.encode()):
                raw_meta, skip = first[len(CSV_META):], 1
            # file names are kept verbatim ("NA", leading blanks); only numeric columns may be empty
            df = pd.read_csv(path, dtype={"file": str, "op": str}, keep_default_na=False, skipinitialspace=True,
                             skiprows=skip,
                             na_values={c: [""] for c in ("rank", "offset", "length", "start", "end", "order",
                                                          "call")})
    except ParioError:
        raise
    except Exception as exc:  # pyarrow / pandas raise many types for corrupt input
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ParioError(f"{path}: not a readable {fmt} trace ({msg})") from None
    df.columns = [str(c).strip().lower() for c in df.columns]
    if len(df) == 0:
        df = df.astype({c: "int64" for c in ("rank", "offset", "length") if c in df.columns})
    missing = [c for c in ("rank", "file", "op", "offset", "length") if c not in df.columns]
    if missing:
        raise ParioError(f"{path}: missing column(s) {', '.join(missing)} (need rank,file,op,offset,length)")
    try:
        df["offset"] = _size_column(df["offset"], "offset")
        df["length"] = _size_column(df["length"], "length")
        if df["rank"].isna().any() or df["rank"].dtype.kind not in "iu":
            raise ParioError("column 'rank' must hold non-negative integers")
        if "collective" in df.columns and df["collective"].dtype != bool:
            words = df["collective"].astype(str).str.strip().str.lower()
            known = words.isin(["1", "true", "yes", "y", "t", "0", "false", "no", "n", "f", ""])
            if not known.all():
                raise ParioError(f"column 'collective' has value {words[~known].iloc[0]!r} (expected true/false)")
            df["collective"] = words.isin(["1", "true", "yes", "y", "t"])
        meta = TraceMeta()
        if raw_meta is not None:
            try:
                meta = TraceMeta.from_dict(json.loads(raw_meta))
            except ValueError:
                raise ParioError("its metadata line is not JSON") from None
        return Trace.from_frame(df).with_meta(meta)
    except ParioError as exc:
        raise ParioError(f"{path}: {exc}") from None


# --------------------------------------------------------------------------- Parquet, columnar
ROW_GROUP = 1 << 20  # rows per Parquet row group (and per streamed batch)
_INT_COLS = ("rank", "offset", "length", "order", "call")
_FLOAT_COLS = ("start", "end")


class _Unsupported(Exception):
    """A Parquet file the columnar reader does not take (odd types, missing values, bad
    values): the general reader handles it (and gives the error message)."""


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([
        ("rank", pa.int32()), ("file", pa.dictionary(pa.int32(), pa.string())),
        ("op", pa.dictionary(pa.int8(), pa.string())), ("offset", pa.int64()), ("length", pa.int64()),
        ("start", pa.float64()), ("end", pa.float64()), ("collective", pa.bool_()), ("order", pa.int64()),
        ("call", pa.int64()),
    ])


class ParquetTraceWriter:
    """Write a trace to Parquet in pieces: every :meth:`write` appends rows (a :class:`Trace`
    whose ``files`` is a prefix of the writer's file list, or equal to it) as row groups of
    at most :data:`ROW_GROUP` rows.  The file appears atomically at :meth:`close`.
    ``file`` is dictionary-encoded against the whole file list, ``op`` as ``read``/``write``.

    >>> with ParquetTraceWriter(path, files, meta) as w:
    ...     for chunk in chunks:
    ...         w.write(chunk)
    """

    def __init__(self, path: str | os.PathLike, files, meta: TraceMeta | None = None, *, tmp: Path | None = None):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = Path(path)
        if tmp is None and _fmt(self.path, write=True) != "parquet":
            raise ParioError(f"{self.path}: streaming output must be a .parquet file")
        self.files = tuple(files)
        self.rows = 0
        md = json.dumps((meta or TraceMeta()).to_dict(), sort_keys=True, ensure_ascii=True).encode()
        self._schema = _arrow_schema().with_metadata({META_KEY: md})
        self._fdict = pa.array(list(self.files), type=pa.string())
        self._odict = pa.array(["read", "write"], type=pa.string())
        self._tmp = tmp or self.path.with_name(f".{self.path.name}.tmp{os.getpid()}")
        self._own_tmp = tmp is None
        self._buf: list = []  # tables not written yet: row groups of ROW_GROUP rows, whatever the chunks
        self._nbuf = 0
        try:
            self._w = pq.ParquetWriter(self._tmp, self._schema, compression="snappy")
        except OSError as exc:
            raise ParioError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def write(self, trace: Trace) -> None:
        if tuple(trace.files) != self.files[:len(trace.files)]:
            raise ValueError("ParquetTraceWriter: the chunk's files are not the writer's")
        c = trace.cols
        n = len(trace)
        for a in range(0, n, ROW_GROUP):
            b = min(n, a + ROW_GROUP)
            self._buf.append(self._table(c, a, b))
            self._nbuf += b - a
            if self._nbuf >= ROW_GROUP:
                self._flush(ROW_GROUP)

    def _flush(self, keep_below: int = 1) -> None:
        """Write the buffered rows as full row groups (all of them when ``keep_below`` = 1)."""
        import pyarrow as pa

        if not self._buf:
            return
        table = pa.concat_tables(self._buf)
        self._buf = []
        full = (len(table) // keep_below) * keep_below if keep_below > 1 else len(table)
        if full:
            try:
                self._w.write_table(table.slice(0, full), row_group_size=ROW_GROUP)
            except OSError as exc:
                raise ParioError(f"cannot write {self.path}: {exc.strerror or exc}") from None
            self.rows += full
        rest = table.slice(full)
        self._buf = [rest] if len(rest) else []
        self._nbuf = len(rest)

    def _table(self, c, a, b):
        import pyarrow as pa

        arrays = [
            pa.array(c["rank"][a:b]),
            pa.DictionaryArray.from_arrays(pa.array(c["file"][a:b]), self._fdict),
            pa.DictionaryArray.from_arrays(pa.array(c["op"][a:b]), self._odict),
            pa.array(c["offset"][a:b]), pa.array(c["length"][a:b]),
            pa.array(c["start"][a:b], type=pa.float64(), from_pandas=False),
            pa.array(c["end"][a:b], type=pa.float64(), from_pandas=False),
            pa.array(c["collective"][a:b]), pa.array(c["order"][a:b]), pa.array(c["call"][a:b]),
        ]
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def close(self) -> Path:
        try:
            self._flush()
            self._w.close()
            if self._own_tmp:
                os.replace(self._tmp, self.path)
        except OSError as exc:
            raise ParioError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        finally:
            if self._own_tmp and self._tmp.exists():
                self._tmp.unlink()
        return self.path

    def abort(self) -> None:
        try:
            self._w.close()
        finally:
            if self._tmp.exists():
                self._tmp.unlink()

    def __enter__(self) -> "ParquetTraceWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _write_parquet(trace: Trace, tmp: Path, meta: bytes) -> None:
    w = ParquetTraceWriter(tmp, trace.files, trace.meta, tmp=tmp)
    try:
        w.write(trace)
        w._flush()
    except BaseException:
        w.abort()
        raise
    w._w.close()


def _to_numpy(col) -> np.ndarray:
    """A numeric or boolean arrow array without nulls (floats: nulls become NaN) as numpy,
    zero-copy where arrow allows (pyarrow's general conversion would import pandas)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_boolean(col.type):
        col = pc.cast(col, pa.uint8())
        dt = np.dtype(np.bool_)
    else:
        dt = np.dtype(_NP_TYPES.get(str(col.type), "O"))
        if dt.kind == "O":
            raise _Unsupported()
    nulls = None
    if col.null_count:
        if not pa.types.is_floating(col.type):
            raise _Unsupported()
        nulls = _to_numpy(pc.is_null(col))
    buf = col.buffers()[1]
    if buf is None:
        return np.zeros(0, dtype=dt)
    a = np.frombuffer(buf, dtype=dt, count=len(col), offset=col.offset * dt.itemsize)
    if nulls is not None:
        a = a.copy()
        a[nulls] = np.nan
    return a


_NP_TYPES = {"int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8", "uint8": "u1", "uint16": "u2",
             "uint32": "u4", "uint64": "u8", "halffloat": "f2", "float": "f4", "double": "f8"}


class ParquetBatches:
    """Batches of a Parquet trace as numpy columns of the trace's dtypes, without pandas.

    ``files`` grows as batches name new files (dictionary entries in order of first
    appearance, as the general reader's categories).  Raises :class:`_Unsupported` for
    anything the general reader should handle (a schema other than the usual one, missing
    values, an op name other than read/write/r/w, a bad value).
    """

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self.path = Path(path)
        try:
            self.pf = pq.ParquetFile(self.path)
            schema = self.pf.schema_arrow
        except Exception:
            raise _Unsupported() from None
        self.num_rows = int(self.pf.metadata.num_rows)
        self.raw_meta = (schema.metadata or {}).get(META_KEY)
        names = list(schema.names)
        if len(set(names)) != len(names) or any(nm != nm.strip().lower() for nm in names):
            raise _Unsupported()
        self.types = {nm: schema.field(nm).type for nm in names}
        for c in ("rank", "file", "op", "offset", "length"):
            if c not in self.types:
                raise _Unsupported()
        import pyarrow.types as pt

        def ok(name, check):
            return name not in self.types or check(self.types[name])

        def strish(t):
            return pt.is_string(t) or pt.is_large_string(t) or (pt.is_dictionary(t) and (
                pt.is_string(t.value_type) or pt.is_large_string(t.value_type)))

        def int64ok(t):  # uint64 may not fit int64: the general reader decides
            return pt.is_integer(t) and not pt.is_uint64(t)

        good = (all(ok(c, int64ok) for c in _INT_COLS) and all(ok(c, pt.is_floating) for c in _FLOAT_COLS)
                and ok("collective", pt.is_boolean) and strish(self.types["file"])
                and (strish(self.types["op"]) or pt.is_integer(self.types["op"])))
        if not good:
            raise _Unsupported()
        self.files: list[str] = []
        self._lookup: dict[str, int] = {}

    def meta(self) -> TraceMeta:
        if self.raw_meta is None:
            return TraceMeta()
        try:
            return TraceMeta.from_dict(json.loads(self.raw_meta))
        except (ValueError, ParioError):
            raise _Unsupported() from None

    def has(self, name: str) -> bool:
        return name in self.types

    def _file_codes(self, col) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        names = col.dictionary.to_pylist()  # the distinct file names: few, not one per request
        remap = np.empty(len(names), dtype=np.int32)
        for i, nm in enumerate(names):
            j = self._lookup.get(nm)
            if j is None:
                j = self._lookup[nm] = len(self.files)
                self.files.append(nm)
            remap[i] = j
        idx = _to_numpy(col.indices)
        return remap[idx] if len(idx) else np.zeros(0, dtype=np.int32)

    @staticmethod
    def _op_codes(col) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_integer(col.type):
            codes = _to_numpy(col)
            if codes.size and (codes.min() < 0 or codes.max() > 1):
                raise _Unsupported()
            return codes.astype(np.int8)
        if not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        words = [str(w).strip().lower() for w in col.dictionary.to_pylist()]
        table = {"read": 0, "r": 0, "write": 1, "w": 1}
        if any(w not in table for w in words):
            raise _Unsupported()
        remap = np.array([table[w] for w in words], dtype=np.int8)
        idx = _to_numpy(col.indices)
        return remap[idx] if len(idx) else np.zeros(0, dtype=np.int8)

    def convert(self, batch) -> dict[str, np.ndarray]:
        """One record batch (or table) → numpy columns of :data:`~pario.trace.core.DTYPES`."""
        from .core import DTYPES

        out: dict[str, np.ndarray] = {}
        for name in batch.schema.names:
            col = batch.column(name)
            if col.null_count and name not in _FLOAT_COLS:  # missing times are NaN (to_numpy)
                raise _Unsupported()
            if name == "file":
                out[name] = self._file_codes(col)
            elif name == "op":
                out[name] = self._op_codes(col)
            elif name in DTYPES:
                a = _to_numpy(col)
                if name == "rank":
                    a = a.astype(np.int64, copy=False)
                out[name] = a.astype(DTYPES[name], copy=False)
        return out

    def batches(self, columns, batch_rows: int | None = None):
        """Converted batches of the named columns (those the file has): a row group each, or
        slices of :data:`ROW_GROUP` rows of a file written in bigger row groups."""
        batch_rows = batch_rows or ROW_GROUP
        cols = [c for c in columns if c in self.types]
        md = self.pf.metadata
        try:
            if all(md.row_group(i).num_rows <= 2 * batch_rows for i in range(md.num_row_groups)):
                # row group by row group: less memory held by arrow than iter_batches' read-ahead
                it = (self.pf.read_row_group(i, columns=cols, use_threads=True) for i in range(md.num_row_groups))
            else:  # an old file with one big row group: batches of it
                it = self.pf.iter_batches(batch_size=batch_rows, columns=cols, use_threads=True)
            for batch in it:
                yield self.convert(batch)
        except _Unsupported:
            raise
        except Exception:  # a corrupt file: the general reader says what is wrong
            raise _Unsupported() from None


def _load_parquet_fast(path: Path, progress=None) -> Trace:
    from .core import DTYPES, _rank_order

    src = ParquetBatches(path)
    n = src.num_rows
    if n == 0:
        raise _Unsupported()  # the general reader keeps the empty file's categories
    meta = src.meta()
    names = [c for c in DTYPES if src.has(c)]
    # times and the collective flag are allocated only once a value other than NaN / False
    # appears: a trace without them holds one read-only broadcast value (0 bytes per request)
    lazy = {c: (np.nan if c in _FLOAT_COLS else False) for c in (*_FLOAT_COLS, "collective")}
    cols = {c: None if c in lazy else np.empty(n, dtype=DTYPES[c]) for c in names}
    a = 0
    for part in src.batches(names):
        b = a + len(part["rank"])
        if b > n:
            raise _Unsupported()
        for c in names:
            if cols[c] is None:
                v = part[c]
                if not (np.isnan(v).all() if c in _FLOAT_COLS else not v.any()):
                    cols[c] = np.full(n, lazy[c], dtype=DTYPES[c])
                else:
                    continue
            cols[c][a:b] = part[c]
        a = b
        if progress is not None:
            progress(b, n)
    if a != n:
        raise _Unsupported()
    for c, v in lazy.items():
        if cols.get(c) is None:
            cols[c] = np.broadcast_to(np.array(v, dtype=DTYPES[c]), (n,))
    if "order" not in cols:
        cols["order"] = _rank_order(cols["rank"], cols["start"])
    if "call" in cols and np.array_equal(cols["call"], cols["order"]):
        cols["call"] = cols["order"]  # every request its own call: one array for both (8 B/request)
    try:
        return Trace.checked(cols, tuple(src.files), meta)
    except ParioError as exc:
        raise ParioError(f"{path}: {exc}") from None


# --------------------------------------------------------------------------- progress
class progress_bar:
    """A transient rich progress bar on stderr for long commands: it appears only when
    stderr is a terminal and the work has already taken ``delay`` seconds, and vanishes
    when done.  ``update(done, total)`` moves it (``total`` None: a spinner).

    >>> with progress_bar("reading trace") as bar:
    ...     for k in ...: bar.update(k, n)
    """

    def __init__(self, description: str, total: float | None = None, *, delay: float = 2.0, force: bool = False):
        import sys
        import time

        self.description = description
        self.total = total
        self.delay = delay
        self._t0 = time.monotonic()
        self._clock = time.monotonic
        self._on = force or sys.stderr.isatty()
        self._prog = None
        self._task = None
        self._done = 0.0
        import threading

        self._lock = threading.Lock()

    def __enter__(self) -> "progress_bar":
        if self._on:  # appear after `delay` even when no update comes (one long step)
            import threading

            self._timer = threading.Timer(self.delay + 0.05, self.tick)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def stage(self, description: str, total: float | None = None) -> None:
        """Switch to a new stage (description and total), starting from 0."""
        self.description, self.total, self._done = description, total, 0.0
        if self._prog is not None:
            self._prog.update(self._task, description=description, total=total, completed=0)

    def update(self, done: float, total: float | None = None) -> None:
        if total is not None:
            self.total = total
        self._done = done
        if not self._on:
            return
        with self._lock:
            self._show(done)

    def _show(self, done: float) -> None:
        if not self._on:
            return
        if self._prog is None:
            if self._clock() - self._t0 < self.delay:
                return
            from rich.console import Console
            from rich.progress import (BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._prog = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                                  console=Console(stderr=True), transient=True)
            self._prog.start()
            self._task = self._prog.add_task(self.description, total=self.total)
        self._prog.update(self._task, completed=done, total=self.total, description=self.description)

    def tick(self) -> None:
        """Show the bar if it is due (a spinner when the total is unknown)."""
        self.update(self._done)

    def close(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.cancel()
        with self._lock:
            self._on = False
            if self._prog is not None:
                self._prog.stop()
                self._prog = None
