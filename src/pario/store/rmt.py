"""The replica mapping table (RMT, CEDA seed 000 §4.5 Fig. 8, §5.1).

Entries ``(O_file, O_offset, R_file, R_offset, Length, R_flag)``: bytes
``[O_offset, O_offset+Length)`` of original file ``O_file`` have a copy at
``[R_offset, …)`` of replica file ``R_file``.  ``R_flag``:

* ``CLEAN`` (0): the replica holds the same bytes as the original;
* ``DIRTY`` (1): the replica holds the newest bytes (written through the redirector), the
  original and every other copy of that range are stale until flushed;
* ``STALE`` (2): the replica is older than the up-to-date copy and must not be read
  (hybrid replication's pending lazy synchronisation, seed 002 §5).

Invariant: a byte has at most one DIRTY entry; if it has one, every other entry of that byte
is STALE.  The paper keeps the RMT in Berkeley DB and writes changes synchronously "to
survive power failures"; here it is SQLite (WAL, ``synchronous=FULL``), indexed on
``(o_file, o_offset)``, and every changing method commits before it returns.  The hot path
uses an in-memory interval cache per original file (:class:`Entries`: arrays sorted by
``o_offset`` with a prefix maximum of the ends, so "does ``[x, e)`` hit any entry" is one
``bisect`` and a compare; many requests at once use ``numpy.searchsorted``).

Several processes (``RMT(path, shared=True)``, a store opened with ``shared=True``): SQLite
serialises the writers (``BEGIN IMMEDIATE`` waits up to the busy timeout, then a one-line
error), and every committed change increments a shared generation counter
(:class:`pario.store.locks.Generation`, ``DIR/rmt.gen``) *after* the commit; before using
its cache a process compares the counter with the value it saw last and drops the cache if
it moved (one 8-byte load per lookup), so a lookup never uses entries older than the last
change committed before it started.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import ParioError
from .locks import Generation
from .meta import connect, db_errors, guard_db_methods

CLEAN, DIRTY, STALE = 0, 1, 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS rmt(
  id INTEGER PRIMARY KEY,
  o_file TEXT NOT NULL,
  o_offset INTEGER NOT NULL,
  r_file TEXT NOT NULL,
  r_offset INTEGER NOT NULL,
  length INTEGER NOT NULL CHECK (length > 0),
  r_flag INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS rmt_interval ON rmt(o_file, o_offset);
CREATE INDEX IF NOT EXISTS rmt_replica ON rmt(r_file, r_offset);
CREATE TABLE IF NOT EXISTS replicas(
  r_file TEXT PRIMARY KEY,
  o_file TEXT NOT NULL,
  name TEXT NOT NULL,
  mode TEXT NOT NULL,      -- 'partial' (CEDA extents) | 'full' (hybrid replica of the whole file)
  route TEXT NOT NULL      -- 'replica' (CEDA: covered reads go to the replica) | 'cheapest' (hybrid)
);
CREATE TABLE IF NOT EXISTS jobs(
  r_file TEXT PRIMARY KEY,
  spec TEXT NOT NULL,      -- JSON of the ReplicaSpec being copied
  done INTEGER NOT NULL DEFAULT 0
);
"""


@dataclass
class Entries:
    """In-memory interval cache of one original file's RMT entries, sorted by ``o_offset``."""

    id: np.ndarray
    o_off: np.ndarray
    length: np.ndarray
    r_file: list
    r_off: np.ndarray
    flag: np.ndarray

    def __post_init__(self):
        self.end = self.o_off + self.length
        self.pmax = np.maximum.accumulate(self.end) if len(self.end) else self.end
        self._starts = self.o_off.tolist()
        self._pmax = self.pmax.tolist()
        self._ends = self.end.tolist()
        self._flags = self.flag.tolist()
        self._roff = self.r_off.tolist()
        self.n = len(self.o_off)
        self.any_unclean = bool((self.flag != CLEAN).any()) if self.n else False
        self.top, self.shift, self.free = _free_runs(self.o_off, self.end)
        self.bsize = 1 << self.shift

    @classmethod
    def from_rows(cls, rows) -> "Entries":
        if not rows:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, z, z, [], z, z)
        a = list(zip(*rows))
        return cls(np.array(a[0], dtype=np.int64), np.array(a[1], dtype=np.int64), np.array(a[4], dtype=np.int64),
                   list(a[2]), np.array(a[3], dtype=np.int64), np.array(a[5], dtype=np.int64))

    def hits(self, x: int, e: int) -> bool:
        """Whether ``[x, e)`` overlaps any entry: the precomputed block test first
        (:func:`_free_runs`; the redirector inlines it), else ``bisect`` on the prefix-max of
        ends (exact)."""
        if 0 <= x < e:
            if x >= self.top:
                return False
            b = x // self.bsize
            if self.free[b] > (e - 1) // self.bsize - b:
                return False
        i = bisect.bisect_left(self._starts, e)
        return i > 0 and self._pmax[i - 1] > x

    def overlapping(self, x: int, e: int) -> np.ndarray:
        """Indices of the entries overlapping ``[x, e)``."""
        i0 = int(np.searchsorted(self.pmax, x, side="right"))
        i1 = int(np.searchsorted(self.o_off, e, side="left"))
        if i1 <= i0:
            return np.zeros(0, dtype=np.int64)
        idx = np.arange(i0, i1)
        return idx[self.end[i0:i1] > x]

    def overlap_list(self, x: int, e: int) -> list:
        """:meth:`overlapping` as a Python list, by ``bisect`` (cheap for few entries)."""
        i0 = bisect.bisect_right(self._pmax, x)
        i1 = bisect.bisect_left(self._starts, e)
        if i1 - i0 > 64:
            return self.overlapping(x, e).tolist()
        ends = self._ends
        return [j for j in range(i0, i1) if ends[j] > x]

    def hits_many(self, x: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`hits` for many requests."""
        if self.n == 0:
            return np.zeros(len(x), dtype=bool)
        i = np.searchsorted(self.o_off, e, side="left")
        return (i > 0) & (self.pmax[np.maximum(i - 1, 0)] > x)


FREE_MIN_SHIFT = 12          # blocks of at least 4 KiB ...
FREE_MAX_BLOCKS = 1 << 14    # ... and at most 2^14 of them: a 16 KiB table per file with entries
FREE_CAP = 255               # one byte per block


def _free_runs(o_off: np.ndarray, end: np.ndarray) -> tuple[int, int, bytes]:
    """The per-file precomputed no-hit test ``(top, shift, free)``.

    The offsets below ``top`` (the largest entry end) are cut into blocks of ``B = 1 << shift``
    bytes; ``free[b]`` is the number of consecutive blocks from ``b`` on that no entry
    overlaps (capped at 255).  A request ``[x, e)`` with ``x >= top``, or whose blocks
    ``b0 = x // B … b1 = (e − 1) // B`` are all free (``free[b0] > b1 − b0``), hits
    no entry: one byte index and two compares instead of a ``bisect`` over all entries, so
    the lookup of a request that hits no replica (CEDA seed 000 §6.4.1, Fig. 17) costs the
    same however many entries the file has.  Otherwise (an entry shares a block with the
    request, or the request spans more than 255 blocks) the exact ``bisect`` decides.

    Why a byte table: the check runs once per request between large ``memcpy``s that evict
    the caches, so much of what it costs is cache misses.  A 16 KiB table costs one line
    per lookup and yields small cached ints (no allocation, no pointer to follow); a table
    of the next entry's start per block (a list of Python ints: 8× larger, plus the int
    objects) measured slower in the benchmark's setting, and so did ``>>`` instead of
    ``//`` (by ~60 ns, within noise).  ``top = 0`` (no entries) makes every request a miss
    at the first compare.
    """
    if len(o_off) == 0:
        return 0, 0, b""
    top = int(end.max())
    shift = max(FREE_MIN_SHIFT, (top - 1).bit_length() - FREE_MAX_BLOCKS.bit_length() + 1)
    nb = ((top - 1) >> shift) + 1
    a = o_off >> shift
    z = ((end - 1) >> shift) + 1
    covered = np.cumsum(np.bincount(a, minlength=nb + 1) - np.bincount(z, minlength=nb + 1))[:nb] > 0
    occ = np.flatnonzero(covered)            # never empty: the block of ``top - 1`` is covered
    nxt = occ[np.minimum(np.searchsorted(occ, np.arange(nb)), len(occ) - 1)]
    blocks = np.arange(nb)
    run = np.where(nxt >= blocks, nxt - blocks, FREE_CAP)  # past the last covered block: no entry
    return top, shift, np.minimum(run, FREE_CAP).astype(np.uint8).tobytes()


class RMT:
    """The replica mapping table of one store (``DIR/rmt.db``)."""

    def __init__(self, path: Path, *, shared: bool = False):
        self.path = Path(path)
        self.con = connect(self.path, "replica mapping table (RMT)")
        try:
            with db_errors(f"replica mapping table (RMT) {self.path}"):
                self.con.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ParioError(f"replica mapping table (RMT) {self.path} is corrupt ({exc})") from None
        self.lock = threading.RLock()
        self._cache: dict[str, Entries] = {}
        self.shared = bool(shared)
        self.gen = Generation(self.path.with_suffix(".gen")) if self.shared else None
        self._seen = self.gen.value() if self.gen is not None else 0

    @property
    def gen(self) -> Generation | None:
        """The shared change counter (None: exclusive store, or the check switched off)."""
        return self._gen

    @gen.setter
    def gen(self, g: Generation | None) -> None:
        self._gen = g
        # the counter itself (a ctypes int64 over the shared mmap): ``.value`` is the same
        # aligned 8-byte load as ``Generation.value()`` without a Python call per lookup
        self._genv = g._v if g is not None else None

    # ------------------------------------------------------------------ reads
    def entries(self, o_file: str) -> Entries:
        genv = self._genv
        if genv is not None:
            g = genv.value
            if g != self._seen:   # another process changed the RMT: drop the cache
                with self.lock:
                    self._cache.clear()
                    self._seen = g
        e = self._cache.get(o_file)
        if e is None:
            e = self._load(o_file)
        return e

    def _changed(self, o_file: str | None = None, reload: bool = False) -> None:
        """After a committed change: bump the shared generation, refresh this process's cache."""
        if self.gen is not None:
            old = self.gen.bump()
            if old == self._seen:      # nobody else changed anything since we last looked
                self._seen = old + 1
        if o_file is None:
            self._cache.clear()
        elif reload:
            self._load(o_file)
        else:
            self._cache.pop(o_file, None)

    def _begin(self) -> None:
        self.con.execute("BEGIN IMMEDIATE")

    def _load(self, o_file: str) -> Entries:
        with self.lock:
            rows = self.con.execute(
                "SELECT id, o_offset, r_file, r_offset, length, r_flag FROM rmt WHERE o_file=? ORDER BY o_offset, id",
                (o_file,)).fetchall()
            e = Entries.from_rows(rows)
            self._cache[o_file] = e
            return e

    def all_rows(self) -> list[tuple]:
        with self.lock:
            return self.con.execute(
                "SELECT id, o_file, o_offset, r_file, r_offset, length, r_flag FROM rmt ORDER BY o_file, o_offset").fetchall()

    def files_with_unclean(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.con.execute("SELECT DISTINCT o_file FROM rmt WHERE r_flag != 0")]

    def covered(self, r_file: str) -> list[tuple[int, int]]:
        """Sorted ``(o_offset, length)`` of a replica's entries."""
        with self.lock:
            return [(int(a), int(b)) for a, b in self.con.execute(
                "SELECT o_offset, length FROM rmt WHERE r_file=? ORDER BY o_offset", (r_file,))]

    def replica_bytes(self) -> int:
        with self.lock:
            return int(self.con.execute("SELECT COALESCE(SUM(length), 0) FROM rmt").fetchone()[0])

    # ------------------------------------------------------------------ replicas and jobs
    def register(self, r_file: str, o_file: str, name: str, mode: str, route: str) -> None:
        with self.lock:
            self.con.execute("INSERT OR REPLACE INTO replicas(r_file, o_file, name, mode, route) VALUES (?,?,?,?,?)",
                             (r_file, o_file, name, mode, route))
            self._changed(o_file)

    def replicas(self, o_file: str | None = None) -> list[dict]:
        with self.lock:
            q = "SELECT r_file, o_file, name, mode, route FROM replicas"
            rows = self.con.execute(q + (" WHERE o_file=?" if o_file else "") + " ORDER BY r_file",
                                    (o_file,) if o_file else ()).fetchall()
        return [dict(zip(("r_file", "o_file", "name", "mode", "route"), r)) for r in rows]

    def unregister(self, r_file: str) -> None:
        with self.lock:
            self._begin()
            self.con.execute("DELETE FROM rmt WHERE r_file=?", (r_file,))
            self.con.execute("DELETE FROM replicas WHERE r_file=?", (r_file,))
            self.con.execute("DELETE FROM jobs WHERE r_file=?", (r_file,))
            self.con.execute("COMMIT")
            self._changed(None)

    def set_job(self, r_file: str, spec: dict, done: int = 0) -> None:
        with self.lock:
            self.con.execute("INSERT OR REPLACE INTO jobs(r_file, spec, done) VALUES (?,?,?)",
                             (r_file, json.dumps(spec), int(done)))

    def jobs(self, pending_only: bool = True) -> list[tuple[str, dict, int]]:
        with self.lock:
            rows = self.con.execute("SELECT r_file, spec, done FROM jobs" + (" WHERE done=0" if pending_only else "")
                                    + " ORDER BY rowid").fetchall()
        return [(r, json.loads(s), int(d)) for r, s, d in rows]

    # ------------------------------------------------------------------ changes (each commits)
    def add(self, o_file: str, r_file: str, o_offsets, r_offsets, lengths, flag: int = CLEAN) -> None:
        """Insert entries with ``flag`` (one replicator chunk: CLEAN), merging with a contiguous
        predecessor of the same replica and flag.  Commits before returning."""
        with self.lock:
            self._begin()
            try:
                for o, r, n in zip(o_offsets, r_offsets, lengths):
                    o, r, n = int(o), int(r), int(n)
                    if n <= 0:
                        continue
                    prev = self.con.execute(
                        "SELECT id FROM rmt WHERE o_file=? AND r_file=? AND o_offset + length = ? "
                        "AND r_offset + length = ? AND r_flag = ?", (o_file, r_file, o, r, flag)).fetchone()
                    if prev:
                        self.con.execute("UPDATE rmt SET length = length + ? WHERE id=?", (n, prev[0]))
                    else:
                        self.con.execute("INSERT INTO rmt(o_file, o_offset, r_file, r_offset, length, r_flag) "
                                         "VALUES (?,?,?,?,?,?)", (o_file, o, r_file, r, n, flag))
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self._changed(o_file)

    def grow_full(self, o_file: str, r_files, end: int) -> bool:
        """Hybrid full replicas grow with the file: for each replica of ``r_files`` whose
        entries end before ``end``, add a STALE entry from their end to ``end`` (one
        transaction: correct whichever process extended the file).  Returns whether any
        entry was added."""
        end = int(end)
        with self.lock:
            self._begin()
            added = False
            try:
                for rf in r_files:
                    row = self.con.execute("SELECT id, o_offset + length FROM rmt WHERE o_file=? AND r_file=? "
                                           "ORDER BY o_offset + length DESC LIMIT 1", (o_file, rf)).fetchone()
                    top = int(row[1]) if row else 0
                    if top >= end:
                        continue
                    added = True
                    prev = self.con.execute("SELECT id FROM rmt WHERE id=? AND r_offset = o_offset AND r_flag=?",
                                            (row[0], STALE)).fetchone() if row else None
                    if prev:
                        self.con.execute("UPDATE rmt SET length = ? - o_offset WHERE id=?", (end, prev[0]))
                    else:
                        self.con.execute("INSERT INTO rmt(o_file, o_offset, r_file, r_offset, length, r_flag) "
                                         "VALUES (?,?,?,?,?,?)", (o_file, top, rf, top, end - top, STALE))
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            if added:
                self._changed(o_file)
            return added

    def _split_set(self, rows, a: int, b: int, newflag_of) -> bool:
        """Within an open transaction: give the part of each row inside ``[a, b)`` the flag
        ``newflag_of(row)`` (None = leave), splitting rows at ``a`` and ``b``."""
        changed = False
        for rid, o_file, o, r_file, r, n, f in rows:
            nf = newflag_of(r_file, f)
            if nf is None or nf == f:
                continue
            s, t = max(a, o), min(b, o + n)
            if s >= t:
                continue
            changed = True
            self.con.execute("DELETE FROM rmt WHERE id=?", (rid,))
            ins = "INSERT INTO rmt(o_file, o_offset, r_file, r_offset, length, r_flag) VALUES (?,?,?,?,?,?)"
            if s > o:
                self.con.execute(ins, (o_file, o, r_file, r, s - o, f))
            self.con.execute(ins, (o_file, s, r_file, r + (s - o), t - s, nf))
            if o + n > t:
                self.con.execute(ins, (o_file, t, r_file, r + (t - o), o + n - t, f))
        return changed

    def _overlap_rows(self, o_file: str, a: int, b: int, r_file: str | None = None):
        q = ("SELECT id, o_file, o_offset, r_file, r_offset, length, r_flag FROM rmt "
             "WHERE o_file=? AND o_offset < ? AND o_offset + length > ?")
        args = [o_file, b, a]
        if r_file is not None:
            q += " AND r_file=?"
            args.append(r_file)
        return self.con.execute(q, args).fetchall()

    def mark_write(self, o_file: str, target: str | None, a: int, b: int) -> bool:
        """A write of ``[a, b)`` goes to copy ``target`` (a replica file, or None = the original):
        the target's entries become DIRTY, every other entry of the range STALE.  Commits
        (durable) before returning; returns whether anything changed."""
        def nf(r_file, f):
            return DIRTY if (target is not None and r_file == target) else STALE
        return self._update(o_file, a, b, nf)

    def set_flag(self, o_file: str, r_file: str, a: int, b: int, old: int, new: int) -> bool:
        """Entries of ``r_file`` in ``[a, b)`` with flag ``old`` get flag ``new`` (commits)."""
        def nf(rf, f):
            return new if (rf == r_file and f == old) else None
        return self._update(o_file, a, b, nf, r_file)

    def _update(self, o_file, a, b, nf, r_file=None) -> bool:
        if b <= a:
            return False
        with self.lock:
            e = self.entries(o_file)
            if e.n == 0 or not e.hits(a, b):
                return False
            # nothing to change (e.g. rewriting an already dirty extent): no commit at all
            fl = e._flags
            if all(nf(e.r_file[i], fl[i]) in (None, fl[i]) for i in e.overlap_list(a, b)):
                return False
            self._begin()
            try:
                changed = self._split_set(self._overlap_rows(o_file, a, b, r_file), a, b, nf)
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self._changed(o_file, reload=True)
            return changed

    def trim(self, o_file: str, size: int) -> None:
        """Drop entries (parts) at or beyond ``size`` (the original was truncated)."""
        with self.lock:
            self._begin()
            try:
                self.con.execute("DELETE FROM rmt WHERE o_file=? AND o_offset >= ?", (o_file, size))
                self.con.execute("UPDATE rmt SET length = ? - o_offset WHERE o_file=? AND o_offset + length > ?",
                                 (size, o_file, size))
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self._changed(o_file, reload=True)

    def compact(self, o_file: str) -> None:
        """Merge neighbouring entries of the same replica with equal flags and contiguous offsets."""
        with self.lock:
            rows = self.con.execute(
                "SELECT id, o_offset, r_file, r_offset, length, r_flag FROM rmt WHERE o_file=? "
                "ORDER BY r_file, o_offset", (o_file,)).fetchall()
            merges, dels = [], []
            cur = None
            for rid, o, rf, r, n, f in rows:
                if cur and cur[2] == rf and cur[1] + cur[4] == o and cur[3] + cur[4] == r and cur[5] == f:
                    cur[4] += n
                    dels.append(rid)
                    cur[6] = True
                else:
                    if cur and cur[6]:
                        merges.append((cur[4], cur[0]))
                    cur = [rid, o, rf, r, n, f, False]
            if cur and cur[6]:
                merges.append((cur[4], cur[0]))
            if not dels:
                return
            self._begin()
            try:
                self.con.executemany("UPDATE rmt SET length=? WHERE id=?", merges)
                self.con.executemany("DELETE FROM rmt WHERE id=?", [(d,) for d in dels])
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self._changed(o_file, reload=True)

    def close(self) -> None:
        with self.lock:
            self.con.close()
            if self.gen is not None:
                gen, self.gen = self.gen, None     # drop our view of the mmap before it closes
                gen.close()


guard_db_methods(RMT, ("_load", "all_rows", "files_with_unclean", "covered", "replica_bytes", "register", "replicas",
                     "unregister", "set_job", "jobs", "add", "grow_full", "_update", "trim", "compact"),
                 "replica mapping table (RMT)")
