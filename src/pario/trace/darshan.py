"""Import Darshan DXT logs (``*.darshan``) into a :class:`~pario.trace.Trace`.

Rules (see ``docs/traces.md``; the rules that read the two DXT layers together are in
:mod:`pario.trace.darshan_views`):

* **Module.** ``DXT_MPIIO`` is preferred when the log holds at least one MPI-IO segment
  (the application's own requests, before ROMIO's two-phase / data-sieving rewrite);
  otherwise ``DXT_POSIX``.  ``module="DXT_MPIIO"`` / ``"DXT_POSIX"`` forces one; if the
  forced module has no data the import fails with :class:`~pario.ParioError`.
* **File views.** DXT_MPIIO files whose calls go through MPI file views (the ranges of
  different ranks overlap) are rebuilt from DXT_POSIX, with one :class:`ParioWarning`
  line; when DXT_POSIX cannot give such a file's footprint the import fails, unless
  ``module="DXT_MPIIO"`` is forced (then it warns that the footprint is wrong).
* **Columns.** One request per DXT segment: ``rank`` (the DXT record's rank), ``file`` (the
  name from the log's name records, kept as is), ``op``, ``offset``, ``length``, ``start``
  and ``end`` (DXT time stamps, seconds since the job started); rows are sorted by rank and
  start time and ``order`` numbers each rank's requests chronologically.  ``call``: every
  DXT_MPIIO segment is one call; rebuilt POSIX requests share their enclosing call's.
* **Collective.** DXT does not mark collective calls, so it is inferred per (file, rank,
  op) from the MPI-IO module counters of the same file (the rank's own record, or the
  shared ``rank = -1`` record Darshan keeps for files opened by every rank): segments are
  collective iff ``MPIIO_COLL_<OP>S + MPIIO_SPLIT_<OP>S > 0`` and
  ``MPIIO_INDEP_<OP>S + MPIIO_NB_<OP>S == 0``.  A file with both kinds of calls cannot be
  split per segment and is marked independent.  Imported ``DXT_POSIX`` segments are never
  collective, except rebuilt ones inside a collective call.
* **Metadata.** :class:`TraceMeta`: ``source``, ``nprocs`` (the job's), ``aggregators``
  and the ``cb_nodes`` hint (the aggregator count seen in DXT_POSIX: Darshan records no
  MPI-IO hints; the job metadata's ``h`` is the hints Darshan writes its own log with),
  ``command`` (the ``exe`` line), ``partial``, ``notes``.
* **ROMIO hints file.** Left out of the trace and named in a note (rule in
  :mod:`pario.trace.darshan_views`).
* **Counters only.** A log without DXT data (or ``counters=True``) is handed to
  :func:`pario.trace.darshan_counters.synthesize`, whose trace is marked approximate.
* **Old logs.** Darshan before 3.2 wrote ``offset = -1`` into every ``DXT_MPIIO``
  segment; such a module is skipped (with a :class:`ParioWarning`) in favour of
  ``DXT_POSIX``, and forcing it is an error.
* **Partial logs.** When DXT ran out of its per-rank buffer Darshan sets the module's
  ``partial_flag``; the import keeps the surviving segments and warns with a
  :class:`ParioWarning` saying how many survived.
* **Errors.** A file that is not a Darshan log, a truncated or corrupt log fail with one
  :class:`~pario.ParioError` line.  libdarshan's own C-level messages on file descriptor 2
  are captured (never shown) and the first one is quoted in the error.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import ParioError
from ..units import format_size
from . import darshan_views as dv
from .core import OP_NAMES, READ, WRITE, Trace, TraceMeta
from .summary import rank_ranges

MODULES = ("DXT_MPIIO", "DXT_POSIX")
_DARSHAN_MAGIC = 6567223
# Log format version -> (offset of the name-region map in the header, number of module maps).
# Verified on 3.10, 3.21 and 3.41 logs; other versions skip the size check (libdarshan still
# reports read errors, which are caught below).
_HEADER_MAPS = {"3.10": (24, 16), "3.21": (24, 16), "3.41": (32, 64)}


class ParioWarning(UserWarning):
    """A recoverable problem with input data (e.g. a partial DXT trace)."""


@dataclass(frozen=True)
class DarshanImport:
    """Result of :func:`read_darshan`: the trace plus what was imported."""

    trace: Trace
    module: str
    partial: bool
    segments: int
    nprocs: int | None = None
    exe: str = ""
    modules: tuple[str, ...] = field(default=())
    views: tuple[str, ...] = field(default=())   # files whose MPI-IO calls went through views


# ---------------------------------------------------------------------------- stderr capture
@contextmanager
def _captured_fd2(sink: list[str]):
    """Redirect file descriptor 2 to a temporary file (libdarshan prints there); append the
    captured text to ``sink`` and restore fd 2 afterwards."""
    try:
        sys.stderr.flush()
    except Exception:  # pragma: no cover - closed/odd stderr
        pass
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 at all: nothing to silence
        yield
        return
    tmp = tempfile.TemporaryFile()
    try:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf-8", errors="replace"))
    finally:
        os.close(saved)
        tmp.close()


def _first_error(texts: list[str]) -> str | None:
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if line:
                return line.removeprefix("Error: ").rstrip(".")
    return None


# ---------------------------------------------------------------------------- header check
_MAX_LOG = 1 << 44   # no Darshan log is 16 TiB: a region map reaching further is garbage


def _check_header(path: Path) -> None:
    """Reject files that are not Darshan logs, and logs shorter than their header says."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(32 + 16 * 65)
        size = path.stat().st_size
    except IsADirectoryError:
        raise ParioError(f"{path}: is a directory, not a Darshan log") from None
    except OSError as exc:
        raise ParioError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(head) < 16:
        raise ParioError(f"{path}: not a Darshan log (file too short)")
    version = head[:8].split(b"\0", 1)[0].decode("ascii", errors="replace")
    endian = next((e for e in "<>" if struct.unpack_from(e + "q", head, 8)[0] == _DARSHAN_MAGIC), None)
    if endian is None:
        raise ParioError(f"{path}: not a Darshan log (no Darshan magic number)")
    layout = _HEADER_MAPS.get(version)
    if layout is None:
        return
    base, nmods = layout
    need = base + 16 * (nmods + 1)
    if len(head) < need:
        raise ParioError(f"{path}: truncated Darshan log (header cut short)")
    maps = np.frombuffer(head, dtype=np.dtype(f"{endian}u8"), count=2 * (nmods + 1), offset=base).reshape(-1, 2)
    used = maps[maps[:, 1] > 0]
    if used.size:
        # a real map: regions after the header, in file order, not overlapping, of plausible size;
        # anything else is a damaged header (not a short file)
        starts, lens = used[:, 0].astype(object), used[:, 1].astype(object)
        order = sorted(range(len(starts)), key=lambda k: starts[k])
        sane = all(starts[k] >= need and starts[k] + lens[k] <= _MAX_LOG for k in order) and all(
            starts[a] + lens[a] <= starts[b] for a, b in zip(order, order[1:]))
        if not sane:
            raise ParioError(f"{path}: corrupt Darshan log (its header's map of module regions is garbage)")
        expect = int(max(starts[k] + lens[k] for k in order))
        if expect > size:
            raise ParioError(f"{path}: truncated Darshan log ({size} bytes, its header describes {expect})")


# ---------------------------------------------------------------------------- reading
def _open_report(path: Path, errs: list[str]):
    try:
        import darshan  # noqa: F401
        from darshan.report import DarshanReport
    except ImportError:  # pragma: no cover - darshan is a declared dependency
        raise ParioError("PyDarshan is not installed (pip install darshan)") from None
    try:
        with _captured_fd2(errs):
            return DarshanReport(str(path), read_all=False)
    except Exception:
        why = _first_error(errs) or "libdarshan could not open it"
        raise ParioError(f"{path}: not a readable Darshan log ({why})") from None



def _segments_frame(records) -> pd.DataFrame:
    """Concatenate the per-record segment DataFrames of one DXT module (no per-segment loop):
    columns rank, rec_id, op, offset, length, start, end, seg_index."""
    parts = []
    for rec in records:
        for key, op in (("write_segments", WRITE), ("read_segments", READ)):
            seg = rec[key]
            if len(seg) == 0:
                continue
            parts.append(pd.DataFrame({
                "rank": np.full(len(seg), int(rec["rank"]), dtype=np.int64),
                "rec_id": np.full(len(seg), np.uint64(rec["id"]), dtype=np.uint64),
                "op": np.full(len(seg), op, dtype=np.int8),
                "offset": seg["offset"].to_numpy(np.int64), "length": seg["length"].to_numpy(np.int64),
                "start": seg["start_time"].to_numpy(np.float64), "end": seg["end_time"].to_numpy(np.float64)}))
    if not parts:
        df = pd.DataFrame({"rank": np.zeros(0, np.int64), "rec_id": np.zeros(0, np.uint64),
                           "op": np.zeros(0, np.int8), "offset": np.zeros(0, np.int64),
                           "length": np.zeros(0, np.int64), "start": np.zeros(0), "end": np.zeros(0)})
    else:
        df = pd.concat(parts, ignore_index=True)
    df["seg_index"] = np.arange(len(df))
    return df


def _mpiio_counters(report, errs: list[str]) -> pd.DataFrame | None:
    """One row per MPI-IO counter record: ``id``, ``rank`` (-1: shared), ``c_read`` /
    ``c_write`` (collective rule in the module doc), ``views`` (``MPIIO_VIEWS``)."""
    if "MPI-IO" not in report.modules:
        return None
    with _captured_fd2(errs):
        report.mod_read_all_records("MPI-IO", dtype="pandas", warnings=False)
    recs = report.records.get("MPI-IO")
    if not recs:
        return None
    cnt = pd.concat([r["counters"] for r in recs], ignore_index=True)
    need = [f"MPIIO_{k}_{op}S" for k in ("COLL", "SPLIT", "INDEP", "NB") for op in ("READ", "WRITE")]
    if any(c not in cnt.columns for c in need):
        return None
    cols = {}
    for opname, name in (("READ", "c_read"), ("WRITE", "c_write")):
        coll = cnt[f"MPIIO_COLL_{opname}S"] + cnt[f"MPIIO_SPLIT_{opname}S"]
        indep = cnt[f"MPIIO_INDEP_{opname}S"] + cnt[f"MPIIO_NB_{opname}S"]
        cols[name] = ((coll > 0) & (indep == 0)).to_numpy()
    views = cnt["MPIIO_VIEWS"].to_numpy(np.int64) if "MPIIO_VIEWS" in cnt.columns else np.full(len(cnt), -1)
    return pd.DataFrame({"id": cnt["id"].to_numpy(np.uint64), "rank": cnt["rank"].to_numpy(np.int64),
                         "views": views, **cols})


def _collective_flags(table: pd.DataFrame | None, seg: pd.DataFrame) -> np.ndarray:
    """Collective flag per DXT_MPIIO segment from the MPI-IO counters (rule in module doc)."""
    if table is None or seg.empty:
        return np.zeros(len(seg), dtype=bool)
    t = table.drop_duplicates(["id", "rank"])[["id", "rank", "c_read", "c_write"]]
    keys = pd.DataFrame({"id": seg["rec_id"].to_numpy(np.uint64), "rank": seg["rank"].to_numpy(np.int64)})
    own = keys.merge(t, on=["id", "rank"], how="left")
    shared = keys.assign(rank=-1).merge(t, on=["id", "rank"], how="left")
    op = seg["op"].to_numpy()
    out = np.zeros(len(seg), dtype=bool)
    for col, code in (("c_read", READ), ("c_write", WRITE)):
        flag = own[col].where(own[col].notna(), shared[col]).fillna(False).to_numpy(dtype=bool)
        out |= flag & (op == code)
    return out


def _views_per_file(table: pd.DataFrame | None) -> dict[int, int]:
    """File id → ``MPIIO_VIEWS`` summed over its records (files with the counter only)."""
    if table is None:
        return {}
    t = table[table["views"] >= 0]
    return {int(k): int(v) for k, v in t.groupby("id")["views"].sum().items()}


def _counters_import(path: Path, mods: dict, why: str) -> DarshanImport:
    """The trace :func:`pario.trace.darshan_counters.synthesize` makes from the log's counters."""
    import importlib

    name = f"{__package__}.darshan_counters"
    try:
        synth = importlib.import_module(name).synthesize
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        listed = ", ".join(mods) or "none"
        raise ParioError(f"counters-only log: {path} {why} (modules: {listed}) and this pario cannot synthesize "
                         "a trace from counters; rerun the application with DXT_ENABLE_IO_TRACE=1") from None
    got = synth(path)
    trace = getattr(got, "trace", got)
    if not isinstance(trace, Trace):
        raise ParioError(f"{path}: the counters synthesizer returned no trace")
    if not trace.meta.approximate:
        trace = trace.with_meta(approximate="synthesized from Darshan counters (no DXT trace)")
    return DarshanImport(trace=trace, module="counters", partial=trace.meta.partial, segments=0,
                         nprocs=trace.meta.nprocs, exe=trace.meta.command, modules=tuple(mods))


def _mpiio_rows(path: Path, module: str | None, mpi: pd.DataFrame, posix: pd.DataFrame | None,
                partial: dict[str, bool], found: dict, aggs: dict, notes: list[str], warn: list[str]):
    """The rows of a DXT_MPIIO import: the calls, with the files accessed through views
    rebuilt from DXT_POSIX unless DXT_MPIIO is forced (rules in
    :mod:`pario.trace.darshan_views`).  Appends to ``notes`` and ``warn``; returns (rows,
    source, names of the files accessed through views)."""
    rows = mpi
    source = "darshan DXT_MPIIO"
    views_used: tuple[str, ...] = ()
    view_ids = {f for f, v in found.items() if v.view_ops}
    for f, v in found.items():
        if v.ambiguous_reads:
            notes.append(f"{v.name}: the ranks' MPI-IO read ranges overlap ({format_size(v.overlap[READ])}) "
                         "and the log cannot tell shared reads from reads through a file view "
                         "(no writes, no DXT_POSIX reads of it)")
            warn.append(f"{path.name}: {v.name}: overlapping MPI-IO reads, perhaps through a file view "
                        "(no DXT_POSIX data to tell); imported as recorded")
    if view_ids and module == "DXT_MPIIO":
        w = sum(found[f].mpi_bytes.get(WRITE, 0) for f in view_ids)
        fw = sum(found[f].mpi_footprint.get(WRITE, 0) for f in view_ids)
        r = sum(found[f].mpi_bytes.get(READ, 0) for f in view_ids)
        fr = sum(found[f].mpi_footprint.get(READ, 0) for f in view_ids)
        views_used = tuple(found[f].name for f in sorted(view_ids))
        notes.append(f"{len(view_ids)} file(s) accessed through MPI file views imported as DXT_MPIIO ranges "
                     "(forced): the footprint is wrong")
        warn.append(f"{path.name}: MPI-IO calls on {len(view_ids)} file(s) went through file views; imported "
                    f"as forced: their ranges are not where the bytes went (footprint {format_size(fw)} "
                    f"for {format_size(w)} written, {format_size(fr)} for {format_size(r)} read)")
    elif view_ids:
        posix_partial = partial.get("DXT_POSIX", False)
        rb = dv.rebuild(mpi, posix, posix_partial, found)
        if rb.refused:
            f, why = next(iter(rb.refused.items()))
            more = f" (and {len(rb.refused) - 1} more file(s))" if len(rb.refused) > 1 else ""
            raise ParioError(f"{path}: {found[f].name}: its MPI-IO calls go through a file view (the ranks' "
                             f"ranges overlap) and DXT_POSIX cannot give its data footprint: {why}{more}; "
                             "--module DXT_MPIIO imports the calls anyway (wrong footprint)")
        rows = rb.frame
        notes.extend(rb.notes)
        views_used = tuple(found[f].name for f in sorted(view_ids))
        source = "darshan DXT_MPIIO; files accessed through views: DXT_POSIX"
        holes = {op: sum(d.get(op, 0) for d in rb.surplus.values()) for op in (WRITE, READ)}
        holes_txt = " and ".join(f"{format_size(b)} ({OP_NAMES[op]}s)" for op, b in holes.items() if b)
        agg_txt = sorted({r for f in view_ids for r in aggs.get(f, ())})
        warn.append(f"{path.name}: MPI-IO calls on {len(view_ids)} file(s) went through file views (the ranks' "
                    "ranges overlap, they are not where the bytes went); imported those files' requests "
                    "from DXT_POSIX" + (f" (aggregators {rank_ranges(agg_txt)})" if agg_txt else "")
                    + (f"; their footprint includes at least {holes_txt} of holes ROMIO's read-modify-write "
                       "and sieving windows covered (not locatable: Darshan does not record the view)"
                       if holes_txt else ""))
    only_posix = (set(np.unique(posix["rec_id"]).tolist()) - set(np.unique(rows["rec_id"]).tolist())
                  if posix is not None and len(posix) else set())
    if only_posix:
        notes.append(f"{len(only_posix)} file(s) with POSIX I/O only not imported (--module DXT_POSIX "
                     "imports the file-system requests of every file)")
    return rows, source, views_used


def read_darshan(path: str | os.PathLike, module: str | None = None, counters: bool = False) -> DarshanImport:
    """Read a Darshan log; see the module docstring for the rules.

    Returns a :class:`DarshanImport` (the trace, the DXT module used, the partial flag and
    the number of requests).  Raises :class:`~pario.ParioError` on unusable input and warns
    with :class:`ParioWarning` (one line each) for partial traces, file views and old logs.
    ``counters=True`` synthesizes the trace from the counters even when DXT data exist.
    """
    path = Path(path)
    if module is not None:
        module = module.strip().upper().replace("-", "_")
        if module not in MODULES:
            raise ParioError(f"bad DXT module {module!r}: expected DXT_MPIIO or DXT_POSIX")
        if counters:
            raise ParioError("--counters and --module exclude each other")
    if not path.exists():
        raise ParioError(f"{path}: no such file")
    _check_header(path)
    errs: list[str] = []
    report = _open_report(path, errs)
    try:
        mods = dict(report.modules)
        present = [m for m in MODULES if m in mods]
        if counters or not present:
            if module is not None:
                raise ParioError(f"{path}: the log has no {module} data (it has no DXT trace)")
            report._cleanup()
            report = None
            return _counters_import(path, mods, "has no DXT trace" if not present else "(--counters)")
        if module is not None and module not in present:
            raise ParioError(f"{path}: the log has no {module} data (it has {', '.join(present)})")
        frames: dict[str, pd.DataFrame] = {}
        for mod in present:
            with _captured_fd2(errs):
                report.mod_read_all_dxt_records(mod, dtype="pandas", warnings=False)
            why = _first_error(errs)
            if why:
                raise ParioError(f"{path}: corrupt Darshan log ({why})")
            frames[mod] = _segments_frame(report.records.get(mod, []))
        table = _mpiio_counters(report, errs)
        why = _first_error(errs)
        if why:
            raise ParioError(f"{path}: corrupt Darshan log ({why})")
        names = {int(k): v for k, v in report.name_records.items()}
        partial = {m: bool(mods[m].get("partial_flag", False)) for m in present}
        meta = report.metadata if isinstance(report.metadata, dict) else {}
        job = meta.get("job", {}) or {}
        exe = str(meta.get("exe", ""))
    finally:
        if report is not None:
            report._cleanup()

    mpi = frames.get("DXT_MPIIO")
    posix = frames.get("DXT_POSIX")
    # Darshan < 3.2 DXT_MPIIO (module version 1) stored offset -1: unusable
    old_mpi = mpi is not None and len(mpi) > 0 and bool((mpi["offset"] < 0).any())
    if old_mpi and module == "DXT_MPIIO":
        raise ParioError(f"{path}: its DXT_MPIIO segments carry no file offsets (old Darshan log "
                         "format); import DXT_POSIX instead")
    notes: list[str] = []
    mpi_ids = set(table["id"].astype(np.uint64).tolist()) if table is not None else set()
    if mpi is not None:
        mpi_ids |= set(np.unique(mpi["rec_id"]).tolist())
    hints = dv.hints_files(posix, {int(i) for i in mpi_ids}, names) if posix is not None else []
    if hints:
        posix = posix[~posix["rec_id"].isin(np.array(hints, dtype=np.uint64))].reset_index(drop=True)
        for h in hints:
            notes.append(f"ROMIO hints file {names.get(h, h)} (read with POSIX only, never opened with MPI-IO) "
                         "not imported as data; its contents are not in the log")
    usable_mpi = mpi if (mpi is not None and not old_mpi) else None
    if module:
        chosen = module
    elif usable_mpi is not None and len(usable_mpi):
        chosen = "DXT_MPIIO"
    elif posix is not None and len(posix):
        chosen = "DXT_POSIX"
    else:
        raise ParioError(f"{path}: the log's DXT modules ({', '.join(present)}) hold no I/O segments")
    seg = usable_mpi if chosen == "DXT_MPIIO" else posix
    if seg is None or seg.empty:
        raise ParioError(f"{path}: the log's {chosen} module holds no I/O segments")

    nprocs = int(job["nprocs"]) if job.get("nprocs") else None
    found: dict[int, dv.FileViews] = {}
    aggs: dict[int, tuple[int, ...]] = {}
    views_used: tuple[str, ...] = ()
    source = f"darshan {chosen}"
    used_partial = partial[chosen]
    if usable_mpi is not None and len(usable_mpi):
        usable_mpi = usable_mpi.assign(collective=_collective_flags(table, usable_mpi)).reset_index(drop=True)
        found = dv.detect_views(usable_mpi, posix if posix is not None else usable_mpi.iloc[:0],
                                _views_per_file(table), names)
        view_ids = {f for f, v in found.items() if v.view_ops}
        if posix is not None and len(posix):
            aggs = dv.aggregators(usable_mpi, posix, dv.enclosing(posix, usable_mpi), view_ids)
    else:
        view_ids = set()

    warn: list[str] = []
    if chosen == "DXT_MPIIO":
        rows, source, views_used = _mpiio_rows(path, module, usable_mpi, posix, partial, found, aggs, notes, warn)
        call = rows["call"].to_numpy(np.int64) if "call" in rows.columns else None
        collective = rows["collective"].to_numpy(bool)
    else:
        rows = posix
        call = None
        collective = np.zeros(len(rows), dtype=bool)
    if old_mpi and module is None:
        warn.insert(0, f"{path.name}: DXT_MPIIO segments carry no file offsets (old Darshan log format); "
                       f"imported {chosen} instead")

    agg_ranks = tuple(sorted({r for t in aggs.values() for r in t})) or None
    hints_meta = {"cb_nodes": str(len(agg_ranks))} if agg_ranks else {}
    if agg_ranks:
        notes.append(f"aggregators: ranks {rank_ranges(agg_ranks)} did the file-system I/O of collective calls "
                     f"(DXT_POSIX); hint cb_nodes = {len(agg_ranks)} is that count: the log records no MPI-IO hints")
    if partial.get("DXT_POSIX") and chosen == "DXT_MPIIO" and not views_used:
        notes.append("the DXT_POSIX trace is partial: the aggregator ranks may be incomplete")

    rank = rows["rank"].to_numpy(np.int64)
    start = rows["start"].to_numpy(np.float64)
    # rows by rank, then start time, then row position: deterministic ties
    idx = np.lexsort((np.arange(len(rows)), start, rank))
    rec_ids = rows["rec_id"].to_numpy(np.uint64)[idx]
    uniq, first_pos, inverse = np.unique(rec_ids, return_index=True, return_inverse=True)
    by_first = np.argsort(first_pos, kind="stable")  # file list in order of first request
    remap = np.empty(len(uniq), dtype=np.int32)
    remap[by_first] = np.arange(len(uniq), dtype=np.int32)
    files = tuple(str(names.get(int(uniq[i]), f"<record {int(uniq[i]):x}>")) for i in by_first)
    rank_sorted = rank[idx]
    first = np.r_[0, np.flatnonzero(np.diff(rank_sorted)) + 1]
    order = np.arange(len(idx)) - np.repeat(first, np.diff(np.r_[first, len(idx)]))
    meta_obj = TraceMeta(source=source, nprocs=nprocs, command=exe, partial=used_partial,
                         notes=tuple(notes)).replace(aggregators=agg_ranks, hints=hints_meta)
    trace = Trace.from_arrays(
        rank_sorted, remap[inverse.reshape(-1)], rows["op"].to_numpy(dtype=np.int8)[idx],
        rows["offset"].to_numpy(dtype=np.int64)[idx], rows["length"].to_numpy(dtype=np.int64)[idx],
        files=files, start=start[idx], end=rows["end"].to_numpy(dtype=np.float64)[idx],
        collective=collective[idx], order=order, call=None if call is None else call[idx], meta=meta_obj,
    )
    for w in warn:
        warnings.warn(w, ParioWarning, stacklevel=2)
    if used_partial:
        warnings.warn(
            f"{path.name}: the {chosen} trace is partial (DXT ran out of its per-process buffer); "
            f"imported the {len(trace)} segments that survived",
            ParioWarning, stacklevel=2,
        )
    modname = "DXT_MPIIO+DXT_POSIX" if source.endswith("DXT_POSIX") and chosen == "DXT_MPIIO" else chosen
    return DarshanImport(trace=trace, module=modname, partial=used_partial, segments=len(trace),
                         nprocs=nprocs, exe=exe, modules=tuple(mods), views=views_used)


def import_darshan(path: str | os.PathLike, module: str | None = None, counters: bool = False) -> Trace:
    """Import a Darshan log as a :class:`Trace` (``module``: force DXT_MPIIO or DXT_POSIX;
    ``counters``: synthesize from the counters even when DXT data exist)."""
    return read_darshan(path, module, counters).trace
