"""The replica mapping table (RMT, CEDA seed 000 §4.5 Fig. 8, §5.1) of a store.

Entries ``(O_file, O_offset, R_file, R_offset, Length, R_flag)``: bytes
``[O_offset, O_offset+Length)`` of original file ``O_file`` have a copy at
``[R_offset, …)`` of replica file ``R_file``.  ``R_flag``:

* ``CLEAN`` (0): the replica holds the same bytes as the original;
* ``DIRTY`` (1): the replica holds the newest bytes (written through the redirector), the
  original and every other copy of that range are stale until flushed;
* ``STALE`` (2): the replica is older than the up-to-date copy and must not be read
  (hybrid replication's pending lazy synchronisation, seed 002 §5);
* ``COPYING`` (3): the replicator is filling it (never read; a write there makes it STALE,
  so the replicator's publication COPYING → FRESH then does nothing);
* ``FRESH`` (4): as CLEAN (read like CLEAN), but the replica's bytes may not be on disk yet
  (the replicator does not wait for the disk); it becomes CLEAN when the replica's data
  files are fsync'ed, and after a power failure it is refreshed from the original.

Invariant: a byte has at most one DIRTY entry; if it has one, every other entry of that byte
is STALE.

Storage (docs/store.md, "The RMT journal"): an append-only journal ``DIR/rmt.log`` that
every process maps and follows, and an in-memory index per process, both in C
(``src/pario/native``, the extension ``pario.native._rmt``: the C runtime library of MPI
programs uses the same code and file).  A change is one record, appended to the shared
mapping before the bytes it describes are written and durable at every sync point; a
lookup is one binary search per replica of the file; another process's change reaches
this one's index as the records it appended (a generation check per lookup, no reload).
The paper keeps the RMT in Berkeley DB with synchronous writes; the journal keeps its
promise — after a crash no acknowledged write is lost and no stale replica is served — at
the cost of a copy into the page cache per state change instead of a synchronous write.

This module is the Python face of it: file names ↔ store file ids (the metadata's), a
transaction context, and the queries the replicator, flush and fsck need.  The data path
(:mod:`pario.store.redirect`) calls the C core directly (``rmt.core``).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import ParioError

CLEAN, DIRTY, STALE, COPYING, FRESH = 0, 1, 2, 3, 4
READABLE_CLEAN = (CLEAN, FRESH)
PARTIAL, FULL = 0, 1
ROUTES = {"replica": 0, "cheapest": 1}
MODES = {"partial": PARTIAL, "full": FULL}
JOURNAL = "rmt.log"


def _core_module():
    from ..native import extension

    return extension()


@dataclass
class Entries:
    """A snapshot of one original file's entries, sorted by offset (then replica)."""

    o_off: np.ndarray
    length: np.ndarray
    r_file: list
    r_off: np.ndarray
    flag: np.ndarray

    @property
    def n(self) -> int:
        return len(self.o_off)

    @property
    def end(self) -> np.ndarray:
        return self.o_off + self.length

    @property
    def any_unclean(self) -> bool:
        return bool(((self.flag != CLEAN) & (self.flag != FRESH)).any())

    def overlapping(self, x: int, e: int) -> np.ndarray:
        """Indices of the entries overlapping ``[x, e)``."""
        return np.flatnonzero((self.o_off < e) & (self.end > x))

    def hits(self, x: int, e: int) -> bool:
        return bool(len(self.overlapping(x, e)))

    def hits_many(self, x, e) -> np.ndarray:
        """Vectorised :meth:`hits`: ``searchsorted`` on the starts, prefix maximum of the ends."""
        x = np.asarray(x, dtype=np.int64)
        e = np.asarray(e, dtype=np.int64)
        if self.n == 0:
            return np.zeros(len(x), dtype=bool)
        pmax = np.maximum.accumulate(self.end)
        i = np.searchsorted(self.o_off, e, side="left")
        return (i > 0) & (pmax[np.maximum(i - 1, 0)] > x)


class RMT:
    """The RMT of the store at ``root`` (``DIR/rmt.log``); ``meta`` maps names to file ids.

    ``shared``: other processes use the store too (journal lock for changes, range locks in
    ``DIR/.sync.lock``); ``first``: this process is alone and recovers (the journal is
    scanned to its last valid record and its header repaired)."""

    def __init__(self, root: Path, meta, core, *, shared: bool = False):
        """``core``: the RMT core the store engine opened (``Engine.core()``)."""
        self.root = Path(root)
        self.path = self.root / JOURNAL
        self.meta = meta
        self.shared = bool(shared)
        self.core = core
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._ver = None

    # ------------------------------------------------------------------ names <-> ids
    def _current(self) -> None:
        """A name names another id after a relayout (pario.store.relayout), which changes the
        registration version: the caches hold for one version."""
        v = self.core.regver
        if v != self._ver:
            self._ids.clear()
            self._names.clear()
            self._ver = v

    def fid(self, name: str) -> int:
        self._current()
        i = self._ids.get(name)
        if i is None:
            rec = self.meta.get(name)
            if rec is None:
                raise ParioError(f"no file {name!r} in the store")
            i = self._ids[name] = int(rec[0])
            self._names[i] = name
        return i

    def name(self, fid: int) -> str | None:
        self._current()
        n = self._names.get(fid)
        if n is None:
            for i, nm in self.meta.ids().items():
                self._names[i] = nm
                self._ids[nm] = i
            n = self._names.get(fid)
        return n

    def forget(self, name: str) -> None:
        """The file was deleted (its id is never reused)."""
        i = self._ids.pop(name, None)
        if i is not None:
            self._names.pop(i, None)

    def _fid_or_none(self, name: str) -> int | None:
        try:
            return self.fid(name)
        except ParioError:
            return None

    # ------------------------------------------------------------------ transactions
    @contextlib.contextmanager
    def transaction(self):
        """Several changes published at once (one journal lock, one publication)."""
        self.core.begin()
        try:
            yield self
        finally:
            self.core.commit()

    # ------------------------------------------------------------------ queries
    def entries(self, o_file: str) -> Entries:
        o = self._fid_or_none(o_file)
        rows = self.core.entries(o) if o is not None else []
        if not rows:
            z = np.zeros(0, dtype=np.int64)
            return Entries(z, z.copy(), [], z.copy(), z.copy())
        a = list(zip(*rows))
        return Entries(np.array(a[1], dtype=np.int64), np.array(a[2], dtype=np.int64),
                       [self.name(r) for r in a[0]], np.array(a[3], dtype=np.int64), np.array(a[4], dtype=np.int64))

    def all_rows(self) -> list[tuple]:
        """``(i, o_file, o_offset, r_file, r_offset, length, flag)`` of every entry (names
        of deleted files as ``#id``), sorted by original and offset."""
        out = []
        for o in self.core.files():
            on = self.name(o) or f"#{o}"
            for r, off, n, ro, f in self.core.entries(o):
                out.append((on, off, self.name(r) or f"#{r}", ro, n, f))
        out.sort(key=lambda t: (t[0], t[1], t[2]))
        return [(i, *t) for i, t in enumerate(out)]

    def files_with_unclean(self) -> list[str]:
        return sorted(n for n in (self.name(o) for o in self.core.files(True)) if n is not None)

    def files(self) -> list[int]:
        """Ids of the originals that have replicas (or entries)."""
        return self.core.files()

    def covered(self, r_file: str) -> list[tuple[int, int]]:
        """Sorted ``(o_offset, length)`` runs a replica covers."""
        r = self._fid_or_none(r_file)
        return [] if r is None else [(int(a), int(b)) for a, b in self.core.coverage(r)]

    def replica_bytes(self) -> int:
        return int(sum(t[6] for t in self.core.replicas()))

    def replicas(self, o_file: str | None = None) -> list[dict]:
        o = self._fid_or_none(o_file) if o_file else None
        if o_file and o is None:
            return []
        out = []
        for r, oo, registered, mode, route, name, _, _ in self.core.replicas():
            if not registered or (o is not None and oo != o):
                continue
            out.append({"r_file": self.name(r) or f"#{r}", "o_file": self.name(oo) or f"#{oo}", "name": name,
                        "mode": "full" if mode == FULL else "partial",
                        "route": "cheapest" if route == ROUTES["cheapest"] else "replica", "r": r, "o": oo})
        out.sort(key=lambda d: d["r_file"])
        return out

    def jobs(self, pending_only: bool = True) -> list[tuple[str, dict, int]]:
        out = []
        for r, done, spec in self.core.jobs():
            if pending_only and done:
                continue
            out.append((self.name(r) or f"#{r}", json.loads(spec), int(done)))
        return out

    def hits_many(self, o_file: str, x, e) -> np.ndarray:
        """Whether each ``[x[i], e[i])`` overlaps an entry of ``o_file``."""
        o = self._fid_or_none(o_file)
        x = np.ascontiguousarray(x, dtype=np.int64)
        e = np.ascontiguousarray(e, dtype=np.int64)
        if o is None or len(x) == 0:
            return np.zeros(len(x), dtype=bool)
        return np.frombuffer(self.core.hit_mask(o, x, e), dtype=np.uint8).astype(bool)

    def stats(self) -> dict:
        return self.core.stats()

    # ------------------------------------------------------------------ changes
    def register(self, r_file: str, o_file: str, name: str, mode: str, route: str) -> None:
        if mode not in MODES or route not in ROUTES:
            raise ParioError(f"replica {name!r}: bad mode {mode!r} or route {route!r}")
        self.core.register(self.fid(r_file), self.fid(o_file), MODES[mode], ROUTES[route], str(name))

    def unregister(self, r_file: str) -> None:
        r = self._fid_or_none(r_file)
        if r is not None:
            self.core.drop(r)

    def set_job(self, r_file: str, spec: dict, done: int = 0) -> None:
        self.core.job(self.fid(r_file), int(bool(done)), json.dumps(spec))

    def add(self, o_file: str, r_file: str, o_offsets, r_offsets, lengths, flag: int = CLEAN) -> None:
        """Entries with ``flag`` for the parts of each range the replica does not cover yet
        (one transaction)."""
        o, r = self.fid(o_file), self.fid(r_file)
        with self.transaction():
            for x, ro, n in zip(o_offsets, r_offsets, lengths):
                if int(n) > 0:
                    self.core.add(o, r, int(x), int(ro), int(n), int(flag))

    def grow_full(self, o_file: str, r_files, end: int) -> None:
        """Hybrid full replicas grow with the file: STALE from their end to ``end``."""
        o = self.fid(o_file)
        with self.transaction():
            for rf in r_files:
                self.core.grow(o, self.fid(rf) if isinstance(rf, str) else int(rf), int(end))

    def mark_write(self, o_file: str, target: str | None, a: int, b: int) -> None:
        """A write of ``[a, b)`` went to copy ``target`` (a replica, or None = the original)."""
        self.core.mark(self.fid(o_file), 0 if target is None else self.fid(target), int(a), int(b))

    def set_flag(self, o_file: str, r_file: str, a: int, b: int, old: int, new: int) -> None:
        """Entries of ``r_file`` in ``[a, b)`` with flag ``old`` get flag ``new``."""
        self.core.set_flag(self.fid(o_file), self.fid(r_file), int(a), int(b), int(old), int(new))

    def settle(self, r_file: str) -> None:
        """The replica's data files were fsync'ed: its FRESH entries are CLEAN."""
        r = self._fid_or_none(r_file)
        for rr, o, *_ in self.core.replicas():
            if rr == r:
                self.core.set_flag(o, r, 0, 1 << 62, FRESH, CLEAN)

    def trim(self, o_file: str, size: int) -> None:
        """Drop entries (parts) at or beyond ``size`` (the original was truncated)."""
        self.core.trim(self.fid(o_file), int(size))

    # ------------------------------------------------------------------ durability
    def sync(self) -> None:
        """Make every published record durable (fdatasync of the journal)."""
        self.core.sync()

    def checkpoint(self) -> None:
        """Rewrite the journal as the state it describes (only when alone in the store)."""
        self.core.checkpoint()

    def close(self) -> None:
        self.core.close()


def _migrate(root: Path, meta, _rmt) -> None:
    """A store made by pario before the journal (``rmt.db``, SQLite): its table becomes the
    journal's first records, then the old files go."""
    import sqlite3

    db = root / "rmt.db"
    try:
        con = sqlite3.connect(str(db))
        reps = con.execute("SELECT r_file, o_file, name, mode, route FROM replicas").fetchall()
        rows = con.execute("SELECT o_file, o_offset, r_file, r_offset, length, r_flag FROM rmt "
                           "ORDER BY o_file, r_file, o_offset").fetchall()
        jobs = con.execute("SELECT r_file, spec, done FROM jobs").fetchall()
        con.close()
    except sqlite3.DatabaseError as exc:
        raise ParioError(f"replica mapping table (RMT) {db} is corrupt ({exc}); cannot migrate it") from None
    ids = {n: i for i, n in meta.ids().items()}
    tmp = root / (JOURNAL + ".migrating")
    tmp.unlink(missing_ok=True)
    c = _rmt.Core(str(tmp), None, False, True, 1.0)
    try:
        c.begin()
        for r_file, o_file, name, mode, route in reps:
            if r_file in ids and o_file in ids:
                c.register(ids[r_file], ids[o_file], MODES.get(mode, PARTIAL), ROUTES.get(route, 0), name)
        for o_file, o, r_file, ro, n, f in rows:
            if o_file in ids and r_file in ids and n > 0:
                c.add(ids[o_file], ids[r_file], o, ro, n, f)
        for r_file, spec, done in jobs:
            if r_file in ids:
                c.job(ids[r_file], int(done), spec)
        c.commit()
        c.sync()
    finally:
        c.close()
    os.replace(tmp, root / JOURNAL)
    for suffix in ("", "-wal", "-shm"):
        (root / f"rmt.db{suffix}").unlink(missing_ok=True)
    (root / "rmt.gen").unlink(missing_ok=True)
