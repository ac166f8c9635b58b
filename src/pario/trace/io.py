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
import pandas as pd

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
    df = trace.to_frame()
    meta = json.dumps(trace.meta.to_dict(), sort_keys=True, ensure_ascii=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(df, preserve_index=False)
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: meta.encode()})
            pq.write_table(table, tmp)
        else:
            # strings quoted so that file names keep leading blanks and names like "NA"
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


def _size_column(series: pd.Series, name: str) -> np.ndarray:
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


def load(path: str | os.PathLike) -> Trace:
    """Read a trace from Parquet or CSV; raise :class:`ParioError` with one line on bad input."""
    path = Path(path)
    fmt = _fmt(path)
    if not path.exists():
        raise ParioError(f"{path}: no such file")
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
