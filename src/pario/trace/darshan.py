"""Import Darshan DXT logs (``*.darshan``) into a :class:`~pario.trace.Trace`.

Rules (see ``docs/traces.md``):

* **Module.** ``DXT_MPIIO`` is preferred when the log holds at least one MPI-IO segment
  (the application's own requests, before ROMIO's two-phase / data-sieving rewrite);
  otherwise ``DXT_POSIX``.  ``module="DXT_MPIIO"`` / ``"DXT_POSIX"`` forces one; if the
  forced module has no data the import fails with :class:`~pario.ParioError`.
* **Columns.** One request per DXT segment: ``rank`` (the DXT record's rank), ``file`` (the
  name from the log's name records, kept as is), ``op``, ``offset``, ``length``, ``start``
  and ``end`` (DXT time stamps, seconds since the job started); rows are sorted by rank and
  start time and ``order`` numbers each rank's requests chronologically.
* **Collective.** DXT does not mark collective calls, so it is inferred per (file, rank,
  op) from the MPI-IO module counters of the same file (the rank's own record, or the
  shared ``rank = -1`` record Darshan keeps for files opened by every rank): segments are
  collective iff ``MPIIO_COLL_<OP>S + MPIIO_SPLIT_<OP>S > 0`` and
  ``MPIIO_INDEP_<OP>S + MPIIO_NB_<OP>S == 0``.  A file with both kinds of calls cannot be
  split per segment and is marked independent; ``DXT_POSIX`` segments are never collective.
* **Old logs.** Darshan before 3.2 wrote ``offset = -1`` into every ``DXT_MPIIO``
  segment; such a module is skipped (with a :class:`ParioWarning`) in favour of
  ``DXT_POSIX``, and forcing it is an error.
* **Partial logs.** When DXT ran out of its per-rank buffer Darshan sets the module's
  ``partial_flag``; the import keeps the surviving segments and warns with a
  :class:`ParioWarning` saying how many survived.
* **Errors.** A file that is not a Darshan log, a truncated or corrupt log, and a log
  without DXT data (rerun with ``DXT_ENABLE_IO_TRACE=1``) fail with one
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
from .core import READ, WRITE, Trace, TraceMeta

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


def _segments_frame(records, mod: str) -> pd.DataFrame:
    """Concatenate the per-record segment DataFrames of one DXT module (no per-segment loop)."""
    parts = []
    for i, rec in enumerate(records):
        for key, op in (("write_segments", WRITE), ("read_segments", READ)):
            seg = rec[key]
            if len(seg) == 0:
                continue
            parts.append(seg.assign(rank=rec["rank"], rec_id=np.uint64(rec["id"]), op=op, rec_index=i))
    if not parts:
        return pd.DataFrame(columns=["offset", "length", "start_time", "end_time", "rank", "rec_id", "op", "rec_index"])
    df = pd.concat(parts, ignore_index=True)
    df["seg_index"] = np.arange(len(df))
    return df


def _collective_flags(report, seg: pd.DataFrame, errs: list[str]) -> np.ndarray:
    """Collective flag per DXT_MPIIO segment from the MPI-IO counters (rule in module doc)."""
    if "MPI-IO" not in report.modules or seg.empty:
        return np.zeros(len(seg), dtype=bool)
    with _captured_fd2(errs):
        report.mod_read_all_records("MPI-IO", dtype="pandas", warnings=False)
    recs = report.records.get("MPI-IO")
    if not recs:
        return np.zeros(len(seg), dtype=bool)
    frames = [r["counters"] for r in recs]
    cnt = pd.concat(frames, ignore_index=True)
    need = [f"MPIIO_{k}_{op}S" for k in ("COLL", "SPLIT", "INDEP", "NB") for op in ("READ", "WRITE")]
    if any(c not in cnt.columns for c in need):
        return np.zeros(len(seg), dtype=bool)
    cnt = cnt.assign(id=cnt["id"].astype(np.uint64), rank=cnt["rank"].astype(np.int64))
    cols = {}
    for opname, code in (("READ", READ), ("WRITE", WRITE)):
        coll = cnt[f"MPIIO_COLL_{opname}S"] + cnt[f"MPIIO_SPLIT_{opname}S"]
        indep = cnt[f"MPIIO_INDEP_{opname}S"] + cnt[f"MPIIO_NB_{opname}S"]
        cols[code] = ((coll > 0) & (indep == 0)).to_numpy()
    table = pd.DataFrame({"id": cnt["id"].to_numpy(), "rank": cnt["rank"].to_numpy(),
                          "c_read": cols[READ], "c_write": cols[WRITE]}).drop_duplicates(["id", "rank"])
    keys = pd.DataFrame({"id": seg["rec_id"].to_numpy(dtype=np.uint64), "rank": seg["rank"].to_numpy(dtype=np.int64)})
    own = keys.merge(table, on=["id", "rank"], how="left")
    shared = keys.assign(rank=-1).merge(table, on=["id", "rank"], how="left")
    op = seg["op"].to_numpy()
    out = np.zeros(len(seg), dtype=bool)
    for col, code in (("c_read", READ), ("c_write", WRITE)):
        flag = own[col].where(own[col].notna(), shared[col]).fillna(False).to_numpy(dtype=bool)
        out |= flag & (op == code)
    return out


def read_darshan(path: str | os.PathLike, module: str | None = None) -> DarshanImport:
    """Read a Darshan DXT log; see the module docstring for the rules.

    Returns a :class:`DarshanImport` (the trace, the DXT module used, the partial flag and
    the number of segments).  Raises :class:`~pario.ParioError` on unusable input and warns
    with :class:`ParioWarning` for a partial DXT trace.
    """
    path = Path(path)
    if module is not None:
        module = module.strip().upper().replace("-", "_")
        if module not in MODULES:
            raise ParioError(f"bad DXT module {module!r}: expected DXT_MPIIO or DXT_POSIX")
    if not path.exists():
        raise ParioError(f"{path}: no such file")
    _check_header(path)
    errs: list[str] = []
    report = _open_report(path, errs)
    try:
        mods = dict(report.modules)
        present = [m for m in MODULES if m in mods]
        if not present:
            listed = ", ".join(mods) or "none"
            raise ParioError(f"{path}: the log has no DXT trace (modules: {listed}); "
                             "rerun the application with DXT_ENABLE_IO_TRACE=1")
        if module is not None and module not in present:
            raise ParioError(f"{path}: the log has no {module} data (it has {', '.join(present)})")
        candidates = [module] if module else present
        chosen, seg = None, None
        skipped: list[str] = []
        for mod in candidates:
            with _captured_fd2(errs):
                report.mod_read_all_dxt_records(mod, dtype="pandas", warnings=False)
            why = _first_error(errs)
            if why:
                raise ParioError(f"{path}: corrupt Darshan log ({why})")
            frame = _segments_frame(report.records.get(mod, []), mod)
            if len(frame) and (frame["offset"] < 0).any():
                # Darshan < 3.2 DXT_MPIIO (module version 1) stored offset -1: unusable
                if module:
                    raise ParioError(f"{path}: its {mod} segments carry no file offsets (old Darshan log "
                                     "format); import DXT_POSIX instead")
                skipped.append(mod)
                continue
            if len(frame) or module:
                chosen, seg = mod, frame
                break
        if chosen is None:
            raise ParioError(f"{path}: the log's DXT modules ({', '.join(present)}) hold no I/O segments")
        if seg.empty:
            raise ParioError(f"{path}: the log's {chosen} module holds no I/O segments")
        if chosen == "DXT_MPIIO":
            collective = _collective_flags(report, seg, errs)
            why = _first_error(errs)
            if why:
                raise ParioError(f"{path}: corrupt Darshan log ({why})")
        else:
            collective = np.zeros(len(seg), dtype=bool)
        names = report.name_records
        partial = bool(mods[chosen].get("partial_flag", False))
        job = report.metadata.get("job", {}) if isinstance(report.metadata, dict) else {}
        exe = str(report.metadata.get("exe", "")) if isinstance(report.metadata, dict) else ""
    finally:
        report._cleanup()

    rank = seg["rank"].to_numpy(dtype=np.int64)
    start = seg["start_time"].to_numpy(dtype=np.float64)
    # rows by rank, then start time, then (record, segment) position: deterministic ties
    idx = np.lexsort((seg["seg_index"].to_numpy(), start, rank))
    rec_ids = seg["rec_id"].to_numpy(dtype=np.uint64)[idx]
    uniq, first_pos, inverse = np.unique(rec_ids, return_index=True, return_inverse=True)
    by_first = np.argsort(first_pos, kind="stable")  # file list in order of first request
    remap = np.empty(len(uniq), dtype=np.int32)
    remap[by_first] = np.arange(len(uniq), dtype=np.int32)
    files = tuple(str(names.get(int(uniq[i]), f"<record {int(uniq[i]):x}>")) for i in by_first)
    rank_sorted = rank[idx]
    first = np.r_[0, np.flatnonzero(np.diff(rank_sorted)) + 1]
    order = np.arange(len(idx)) - np.repeat(first, np.diff(np.r_[first, len(idx)]))
    trace = Trace.from_arrays(
        rank_sorted, remap[inverse.reshape(-1)], seg["op"].to_numpy(dtype=np.int8)[idx],
        seg["offset"].to_numpy(dtype=np.int64)[idx], seg["length"].to_numpy(dtype=np.int64)[idx],
        files=files, start=start[idx], end=seg["end_time"].to_numpy(dtype=np.float64)[idx],
        collective=collective[idx], order=order,
        meta=TraceMeta(source=f"darshan {chosen}", nprocs=int(job["nprocs"]) if job.get("nprocs") else None,
                       command=exe, partial=partial),
    )
    if skipped:
        warnings.warn(
            f"{path.name}: {skipped[0]} segments carry no file offsets (old Darshan log format); "
            f"imported {chosen} instead", ParioWarning, stacklevel=3,
        )
    if partial:
        warnings.warn(
            f"{path.name}: the {chosen} trace is partial (DXT ran out of its per-process buffer); "
            f"imported the {len(trace)} segments that survived",
            ParioWarning, stacklevel=3,
        )
    return DarshanImport(trace=trace, module=chosen, partial=partial, segments=len(trace),
                         nprocs=job.get("nprocs"), exe=exe, modules=tuple(mods))


def import_darshan(path: str | os.PathLike, module: str | None = None) -> Trace:
    """Import a Darshan DXT log as a :class:`Trace` (``module``: force DXT_MPIIO or DXT_POSIX)."""
    return read_darshan(path, module).trace
