"""Read a pario tracer directory (``libpario_trace.so``, docs/traces.md "Tracer: MPI-IO
interposition") into a :class:`~pario.trace.core.Trace`.

A directory holds one record file per rank, ``rank-<R>.pxt`` (the binary format of
``src/pario/native/interpose/records.h``), ``job.json`` written by rank 0 in MPI_Finalize
(process count, command line, every file's hints and two-phase aggregators) and
``shared.lock``.  Records are decoded with numpy structured dtypes, whole arrays at a
time; only chunks (one per spill of a rank's buffer) and files are looped over.

* One trace row per file extent of a data call: ``call`` is the tracer's call id (per
  rank, increasing; ids of non-data calls leave gaps), every extent of a call shares its
  ``start``/``end``, ``collective`` and ``op``; ``order`` numbers a rank's extents in call
  order.  The extents are the requested ones (count x datatype size through the view); a
  call whose status reports fewer bytes (a short read at end of file) keeps them and is
  counted in a note.
* Nonblocking and split calls start when issued and end when completed (MPI_Wait/Test*,
  ``*_end``); never completed: ``end`` is NaN; freed with MPI_Request_free: the free.
* ``partial``: a rank's file is missing, truncated, or lacks the MPI_Finalize record, or
  ``job.json`` is missing; what was recorded is still read.
* Garbage (not a tracer file, a damaged chunk, inconsistent records) is one
  :class:`~pario.ParioError` line naming the file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import ParioError
from .core import Trace, TraceMeta

SOURCE = "pario tracer"
FILE_MAGIC = b"PXTRACE\n"
CHUNK_MAGIC = b"PXCK"
VERSION = 1

FILE_HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("header_size", "<u4"), ("call_size", "<u4"),
                        ("unit_size", "<u4"), ("rank", "<i4"), ("nprocs", "<i4"), ("pid", "<i8"),
                        ("t0_unix", "<f8"), ("reserved", "V16")])
CHUNK_HEADER = np.dtype([("magic", "S4"), ("ncalls", "<u4"), ("nunits", "<u8"), ("seq", "<u8"),
                         ("reserved", "<u8")])
CALL = np.dtype([("id", "<u8"), ("type", "u1"), ("op", "u1"), ("kind", "u1"), ("flags", "u1"), ("file", "<i4"),
                 ("nunits", "<i8"), ("bytes", "<i8"), ("moved", "<i8"), ("pos", "<i8"), ("start", "<f8"),
                 ("end", "<f8")])
UNIT = np.dtype([("a", "<i8"), ("b", "<i8")])
assert FILE_HEADER.itemsize == 64 and CHUNK_HEADER.itemsize == 32 and CALL.itemsize == 64 and UNIT.itemsize == 16

# record types, flags and kinds (records.h)
DATA, DONE, OPEN, META, HINTS, CLOSE, FINAL = 1, 2, 3, 4, 5, 6, 7
F_COLLECTIVE, F_PENDING, F_ERROR, F_NOVIEW, F_FREED = 1, 2, 4, 8, 16
POS_NAMES = ("at", "individual", "shared", "ordered")
MODE_NAMES = ("blocking", "nonblocking", "split")

#: the data calls of a trace directory, one row each (see :func:`read_calls`)
CALLS = np.dtype([("rank", "<i4"), ("id", "<i8"), ("file", "<i4"), ("op", "i1"), ("kind", "u1"),
                  ("collective", "?"), ("bytes", "<i8"), ("moved", "<i8"), ("pos", "<i8"), ("start", "<f8"),
                  ("end", "<f8"), ("flags", "u1"), ("extents", "<i8")])

_RANK_FILE = re.compile(r"rank-(\d+)\.pxt")


def kind_name(kind: int) -> str:
    """``at``/``individual``/``shared``/``ordered`` and ``blocking``/``nonblocking``/``split``."""
    mode = (kind >> 2) & 3
    return f"{POS_NAMES[kind & 3]} {MODE_NAMES[mode] if mode < 3 else '?'}"


@dataclass
class RankRecords:
    """One rank's record file, decoded."""

    path: Path
    rank: int
    nprocs: int
    calls: np.ndarray           # CALL records in stream order
    units: np.ndarray           # (n, 2) int64
    first: np.ndarray           # index of each call's first unit
    complete: bool              # ends with the MPI_Finalize record
    truncated: bool             # a chunk was cut short
    names: dict[int, str] = field(default_factory=dict)       # file id -> name
    hints: dict[int, dict[str, str]] = field(default_factory=dict)
    posix: dict[int, np.ndarray] = field(default_factory=dict)  # file id -> bytes[3][2]

    def payload(self, i: int) -> bytes:
        c = self.calls[i]
        lo = int(self.first[i])
        return self.units[lo:lo + int(c["nunits"])].tobytes()


def _bad(path: Path, what: str) -> ParioError:
    return ParioError(f"{path}: {what}")


def read_rank(path: str | os.PathLike) -> RankRecords:
    """Decode one ``rank-<R>.pxt`` file (see records.h)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ParioError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) < FILE_HEADER.itemsize:
        if FILE_MAGIC.startswith(raw[:8]):
            # killed while writing its header: nothing recorded
            return RankRecords(path, -1, 0, np.empty(0, CALL), np.empty((0, 2), np.int64),
                               np.empty(0, np.int64), False, True)
        raise _bad(path, "not a pario tracer record file")
    h = np.frombuffer(raw, FILE_HEADER, 1)[0]
    if bytes(raw[:8]) != FILE_MAGIC:
        raise _bad(path, "not a pario tracer record file")
    if int(h["version"]) != VERSION:
        raise _bad(path, f"record format version {int(h['version'])} is not supported (this pario reads {VERSION})")
    if (int(h["header_size"]), int(h["call_size"]), int(h["unit_size"])) != (64, 64, 16):
        raise _bad(path, "corrupt record file header (record sizes)")
    rank, nprocs = int(h["rank"]), int(h["nprocs"])
    if not 0 <= rank < nprocs <= 1 << 24:
        raise _bad(path, f"corrupt record file header (rank {rank} of {nprocs})")
    calls, units = [], []
    pos, seq, truncated = FILE_HEADER.itemsize, 0, False
    buf = memoryview(raw)
    while pos < len(raw):          # one iteration per chunk (a spilled buffer)
        if len(raw) - pos < CHUNK_HEADER.itemsize:
            truncated = True
            break
        ch = np.frombuffer(buf, CHUNK_HEADER, 1, pos)[0]
        if bytes(ch["magic"]) != CHUNK_MAGIC or int(ch["seq"]) != seq:
            raise _bad(path, f"corrupt record file (bad chunk at byte {pos})")
        nc, nu = int(ch["ncalls"]), int(ch["nunits"])
        body = pos + CHUNK_HEADER.itemsize
        end = body + nc * CALL.itemsize + nu * UNIT.itemsize
        if end > len(raw):
            truncated = True
            break
        calls.append(np.frombuffer(buf, CALL, nc, body))
        units.append(np.frombuffer(buf, np.int64, 2 * nu, body + nc * CALL.itemsize))
        pos, seq = end, seq + 1
    calls = np.concatenate(calls) if calls else np.empty(0, CALL)
    units = (np.concatenate(units) if units else np.empty(0, np.int64)).reshape(-1, 2)
    _check_calls(path, calls, len(units))
    ends = np.cumsum(calls["nunits"])
    first = ends - calls["nunits"]
    complete = bool(len(calls)) and int(calls["type"][-1]) == FINAL and not truncated
    if complete and len(calls) and int(ends[-1]) != len(units):
        raise _bad(path, "corrupt record file (payload units left over)")
    rr = RankRecords(path, rank, nprocs, calls, units, first, complete, truncated)
    _decode_file_records(rr)
    return rr


def _check_calls(path: Path, calls: np.ndarray, nunits: int) -> None:
    if not len(calls):
        return
    t = calls["type"]
    if ((t < DATA) | (t > FINAL)).any():
        raise _bad(path, "corrupt record file (unknown record type)")
    n = calls["nunits"]
    if (n < 0).any() or int(n.sum(dtype=np.float64)) > nunits:
        raise _bad(path, "corrupt record file (records point past their payload)")
    data = t == DATA
    if (calls["op"][data] > 1).any() or ((calls["kind"][data] >> 2) > 2).any():
        raise _bad(path, "corrupt record file (bad data call)")
    if (calls["file"][data | (t == DONE) | (t == OPEN) | (t == CLOSE) | (t == HINTS)] < 0).any():
        raise _bad(path, "corrupt record file (bad file id)")


def _decode_file_records(rr: RankRecords) -> None:
    """Names (open), hints and POSIX counters (close): a few records per file."""
    t = rr.calls["type"]
    for i in np.flatnonzero((t == OPEN) | (t == HINTS) | (t == CLOSE)):
        c = rr.calls[i]
        fid, kind = int(c["file"]), int(c["type"])
        data = rr.payload(int(i))
        if kind == CLOSE:
            if len(data) != 96:
                raise _bad(rr.path, "corrupt record file (close record)")
            rr.posix[fid] = np.frombuffer(data, "<i8", 6).reshape(3, 2)
            continue
        n = int(c["bytes"])
        if not 0 <= n <= len(data):
            raise _bad(rr.path, "corrupt record file (text record)")
        text = os.fsdecode(data[:n])
        if kind == OPEN:
            if fid in rr.names and rr.names[fid] != text:
                raise _bad(rr.path, f"corrupt record file (file id {fid} opened twice)")
            rr.names[fid] = text
        else:
            rr.hints[fid] = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _complete_pending(rr: RankRecords) -> tuple[np.ndarray, dict[str, int]]:
    """The rank's data calls as CALLS rows (file ids still the rank's), completions merged."""
    c = rr.calls
    t = c["type"]
    di = np.flatnonzero(t == DATA)
    di = di[np.argsort(c["id"][di], kind="stable")]
    d = c[di]
    out = np.zeros(len(d), CALLS)
    out["rank"] = rr.rank
    for k in ("id", "file", "op", "kind", "bytes", "moved", "pos", "start", "end", "flags"):
        out[k] = d[k]
    out["collective"] = (d["flags"] & F_COLLECTIVE) != 0
    out["extents"] = d["nunits"]
    counts = {"unfinished": 0, "freed": 0, "completion errors": 0}
    done = c[t == DONE]
    pend = (d["flags"] & F_PENDING) != 0
    if len(done):
        j = np.searchsorted(out["id"], done["id"])
        ok = j < len(out)
        ok[ok] &= out["id"][j[ok]] == done["id"][ok]
        if not ok.all() or not pend[j[ok]].all():
            raise _bad(rr.path, "corrupt record file (a completion without its call)")
        j = j[ok]
        out["end"][j] = done["end"]
        out["moved"][j] = done["moved"]
        out["flags"][j] |= done["flags"] & F_FREED   # issued well: kept even when completion failed
        out["flags"][j] &= ~np.uint8(F_PENDING)
        pend[j] = False
        counts["freed"] = int(((done["flags"] & F_FREED) != 0).sum())
        counts["completion errors"] = int(((done["flags"] & F_ERROR) != 0).sum())
    counts["unfinished"] = int(pend.sum())
    out["end"][pend] = np.nan
    return out, counts


def _rank_rows(rr: RankRecords) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(data calls sorted by id, unit index of every extent of the calls kept, counts)."""
    calls, counts = _complete_pending(rr)
    di = np.flatnonzero(rr.calls["type"] == DATA)
    di = di[np.argsort(rr.calls["id"][di], kind="stable")]
    n = np.where((calls["flags"] & (F_ERROR | F_NOVIEW)) == 0, calls["extents"], 0)
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    return calls, np.repeat(rr.first[di], n) + within, counts


@dataclass
class TracerDir:
    """A decoded trace directory: every rank's records and the job file."""

    path: Path
    ranks: dict[int, RankRecords]
    job: dict | None
    nprocs: int
    files: list[str]
    file_maps: dict[int, np.ndarray]   # rank -> (its file id -> index into files)
    notes: list[str]
    partial: bool


def _read_job(path: Path) -> dict | None:
    p = path / "job.json"
    if not p.exists():
        return None
    try:
        job = json.loads(p.read_text(encoding="utf-8", errors="surrogateescape"))
    except (OSError, ValueError) as exc:
        raise ParioError(f"{p}: not a pario tracer job file ({exc})") from None
    if not isinstance(job, dict) or job.get("format") != "pario-tracer-job":
        raise ParioError(f"{p}: not a pario tracer job file")
    if not isinstance(job.get("files", []), list) or not isinstance(job.get("nprocs"), int):
        raise ParioError(f"{p}: corrupt pario tracer job file")
    return job


def open_dir(directory: str | os.PathLike) -> TracerDir:
    """Read every rank file and the job file of a trace directory."""
    path = Path(directory)
    if not path.is_dir():
        raise ParioError(f"{path}: not a trace directory")
    ranks: dict[int, RankRecords] = {}
    notes: list[str] = []
    partial = False
    empty_files = 0
    for p in sorted(path.iterdir()):
        m = _RANK_FILE.fullmatch(p.name)
        if not m:
            continue
        rr = read_rank(p)
        if rr.rank < 0:
            empty_files += 1
            partial = True
            continue
        if rr.rank != int(m.group(1)):
            raise _bad(p, f"holds the records of rank {rr.rank}")
        ranks[rr.rank] = rr
    job = _read_job(path)
    if not ranks and job is None:
        raise ParioError(f"{path}: no pario tracer records (rank-*.pxt) in this directory")
    nprocs = job["nprocs"] if job else max((r.nprocs for r in ranks.values()), default=0)
    if job is None:
        partial = True
        notes.append("no job file: the program did not reach MPI_Finalize")
    missing = [r for r in range(nprocs) if r not in ranks]
    if missing:
        partial = True
        notes.append(f"{len(missing)} rank(s) left no records (first: rank {missing[0]})")
    trunc = [r for r, rr in sorted(ranks.items()) if rr.truncated]
    stopped = [r for r, rr in sorted(ranks.items()) if not rr.complete and not rr.truncated]
    if trunc:
        partial = True
        notes.append(f"{len(trunc)} rank file(s) end in a cut-off chunk (first: rank {trunc[0]})")
    if stopped:
        partial = True
        notes.append(f"{len(stopped)} rank(s) stopped before MPI_Finalize; their records up to the last "
                     f"spilled buffer are kept (first: rank {stopped[0]})")
    if empty_files:
        notes.append(f"{empty_files} rank file(s) hold no header")
    files: list[str] = []
    index: dict[str, int] = {}
    maps: dict[int, np.ndarray] = {}
    for r, rr in sorted(ranks.items()):
        ids = np.flatnonzero(np.isin(rr.calls["type"], (DATA, DONE, CLOSE, HINTS)))
        top = max([*rr.names, *(int(i) for i in rr.calls["file"][ids])], default=-1)
        fmap = np.full(top + 1, -1, dtype=np.int32)
        for fid, name in rr.names.items():
            if name not in index:
                index[name] = len(files)
                files.append(name)
            fmap[fid] = index[name]
        maps[r] = fmap
    return TracerDir(path, ranks, job, nprocs, files, maps, notes, partial)


def _calls_and_rows(td: TracerDir):
    parts, rows = [], []
    counts = {"unfinished": 0, "freed": 0, "completion errors": 0}
    for r, rr in sorted(td.ranks.items()):
        calls, idx, c = _rank_rows(rr)
        for k in counts:
            counts[k] += c[k]
        fmap = td.file_maps[r]
        if len(calls) and (calls["file"].max() >= len(fmap) or (fmap[calls["file"]] < 0).any()):
            raise _bad(rr.path, "corrupt record file (a data call on a file never opened)")
        calls["file"] = fmap[calls["file"]] if len(calls) else calls["file"]
        parts.append(calls)
        rows.append((rr, calls, idx))
    calls = np.concatenate(parts) if parts else np.empty(0, CALLS)
    return calls, rows, counts


def read_calls(directory: str | os.PathLike) -> tuple[np.ndarray, list[str]]:
    """The data calls of a trace directory: a :data:`CALLS` array (``file`` indexes the
    returned names; ``moved`` = bytes the status reported, -1 unknown; ``extents`` = the
    call's extent count) and the file names."""
    td = open_dir(directory)
    calls, _, _ = _calls_and_rows(td)
    return calls, td.files


def read_native(directory: str | os.PathLike) -> Trace:
    """The :class:`Trace` of a pario tracer directory (see the module docstring)."""
    td = open_dir(directory)
    calls, rows, counts = _calls_and_rows(td)
    notes = list(td.notes)
    cols: dict[str, list] = {k: [] for k in ("rank", "file", "op", "offset", "length", "start", "end",
                                              "collective", "call", "order")}
    for rr, rc, idx in rows:
        keep = (rc["flags"] & (F_ERROR | F_NOVIEW)) == 0
        n = np.where(keep, rc["extents"], 0)
        ext = rr.units[idx]
        for k, v in (("rank", rc["rank"]), ("file", rc["file"]), ("op", rc["op"]), ("start", rc["start"]),
                     ("end", rc["end"]), ("collective", rc["collective"]), ("call", rc["id"])):
            cols[k].append(np.repeat(v, n))
        cols["offset"].append(ext[:, 0])
        cols["length"].append(ext[:, 1])
        cols["order"].append(np.arange(len(idx), dtype=np.int64))
        total = np.concatenate([[0], np.cumsum(ext[:, 1])])
        ends = np.cumsum(n)
        if not np.array_equal((total[ends] - total[ends - n])[n > 0], rc["bytes"][n > 0]):
            notes.append(f"rank {rr.rank}: the extents of some calls do not add up to their data bytes")
    cat = {k: np.concatenate(v) if v else np.empty(0) for k, v in cols.items()}
    _call_notes(calls, counts, notes)
    meta = _meta(td, calls, notes)
    if not len(cat["rank"]):
        cat = {k: np.empty(0) for k in cols}
    return Trace.checked(cat, tuple(td.files), meta)


def _call_notes(calls: np.ndarray, counts: dict[str, int], notes: list[str]) -> None:
    f = calls["flags"]
    if (n := int(((f & F_ERROR) != 0).sum())):
        notes.append(f"{n} call(s) returned an MPI error and are left out")
    if (n := int(((f & F_NOVIEW) != 0).sum())):
        notes.append(f"{n} call(s) through a file view the tracer could not map are left out")
    if counts["unfinished"]:
        notes.append(f"{counts['unfinished']} nonblocking or split call(s) never completed (end time unknown)")
    if counts["completion errors"]:
        notes.append(f"{counts['completion errors']} nonblocking or split call(s) completed with an error in "
                     "their status; their extents are kept")
    if counts["freed"]:
        notes.append(f"{counts['freed']} request(s) freed with MPI_Request_free: their end is the free")
    ok = (f & F_ERROR) == 0
    short = ok & (calls["moved"] >= 0) & (calls["moved"] < calls["bytes"])
    if short.any():
        lost = int((calls["bytes"][short] - calls["moved"][short]).sum())
        notes.append(f"{int(short.sum())} call(s) moved fewer bytes than requested (short reads at end of file: "
                     f"{lost} B in all); their requested extents are kept")


def _ranks(ranks) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


def _meta(td: TracerDir, calls: np.ndarray, notes: list[str]) -> TraceMeta:
    job = td.job or {}
    per_file: dict[str, dict] = {}     # name -> {"hints", "aggregators"}
    for entry in job.get("files", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ParioError(f"{td.path / 'job.json'}: corrupt pario tracer job file")
        d = per_file.setdefault(entry["name"], {"hints": {}, "aggregators": set(), "procs": -1})
        hints = entry.get("hints") or {}
        procs = entry.get("procs") if isinstance(entry.get("procs"), int) else 0
        # a file opened several times (IOR checks it exists with MPI_COMM_SELF first): the
        # hints of the open by the most processes, the later one on a tie
        if isinstance(hints, dict) and hints and procs >= d["procs"]:
            d["hints"] = {str(k): str(v) for k, v in hints.items()}
            d["procs"] = procs
        d["aggregators"].update(int(r) for r in entry.get("aggregators") or ())
    if not job:   # no MPI_Finalize: from the records (close counters, hint records)
        for r, rr in td.ranks.items():
            for fid, name in rr.names.items():
                d = per_file.setdefault(name, {"hints": {}, "aggregators": set()})
                if fid in rr.hints and not d["hints"]:
                    d["hints"] = rr.hints[fid]
                if fid in rr.posix and rr.posix[fid][0].sum() > 0:
                    d["aggregators"].add(r)
    # hints and aggregators: those of the file the calls moved the most bytes of
    moved = np.bincount(calls["file"], weights=calls["bytes"].clip(0).astype(np.float64),
                        minlength=len(td.files)) if len(calls) else np.zeros(len(td.files))
    weight = {name: float(moved[i]) for i, name in enumerate(td.files)}
    ranked = sorted(per_file, key=lambda n: -weight.get(n, 0.0))
    main = per_file[ranked[0]] if ranked else {"hints": {}, "aggregators": set()}
    others = [n for n in ranked[1:] if per_file[n]["aggregators"] and per_file[n]["aggregators"] != main["aggregators"]]
    for name in others[:5]:
        notes.append(f"aggregators of {name}: {_ranks(per_file[name]['aggregators'])}")
    if len(others) > 5:
        notes.append(f"{len(others) - 5} more files have other aggregators (see job.json)")
    if len({tuple(sorted(d["hints"].items())) for d in per_file.values() if d["hints"]}) > 1:
        notes.append(f"files have different hints; the trace keeps those of {ranked[0]}")
    hints, aggs = main["hints"], main["aggregators"]
    cmd = job.get("command")
    command = shlex.join(str(a) for a in cmd) if isinstance(cmd, list) else ""
    return TraceMeta(source=SOURCE, nprocs=td.nprocs or None,
                     aggregators=tuple(sorted(aggs)) if aggs else None,
                     hints=tuple(sorted(hints.items())), command=command, partial=td.partial,
                     notes=tuple(notes))
