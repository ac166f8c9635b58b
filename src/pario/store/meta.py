"""Crash-safe file metadata of the local backend: name → (id, layout JSON, size, dirty).

SQLite (standard library) in WAL mode with ``synchronous=FULL``: a committed create,
truncate or size update survives a crash (process kill or power loss).  ``dirty`` = 1
means the file was extended by writes whose final size is not committed yet; the next
open recovers the size from the data files (:meth:`LocalBackend._recover_size`).

Several processes (a store opened with ``shared=True``): every connection waits up to
``BUSY_TIMEOUT`` seconds for another process's write transaction (SQLite busy timeout),
then fails with a one-line :class:`pario.ParioError`; sizes are committed with
``MAX(size, ?)`` (:meth:`Meta.grow_size`) so that no process shrinks what another extended.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from pathlib import Path

from .. import ParioError

SCHEMA = """
CREATE TABLE IF NOT EXISTS files(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  layout TEXT NOT NULL,
  size INTEGER NOT NULL DEFAULT 0,
  dirty INTEGER NOT NULL DEFAULT 0
);
"""


BUSY_TIMEOUT = 30.0


def busy_timeout() -> float:
    """The SQLite busy timeout: $PARIO_STORE_TIMEOUT when set (as every other wait), else 30 s."""
    from .locks import store_timeout

    return store_timeout() if os.environ.get("PARIO_STORE_TIMEOUT") else BUSY_TIMEOUT


@contextlib.contextmanager
def db_errors(what: str, path: Path | None = None):
    """Turn SQLite errors into one-line ParioErrors: busy beyond the timeout, disk full or I/O
    errors (``what: message``), a database found damaged while in use (with the recovery
    command when ``path`` is known)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        msg = str(exc)
        if "locked" in msg or "busy" in msg:
            raise ParioError(f"{what}: still locked by another process after {busy_timeout():g} s ({msg})") from None
        raise ParioError(f"{what}: {msg}") from None
    except sqlite3.IntegrityError:
        raise
    except sqlite3.DatabaseError as exc:
        if path is None:
            raise ParioError(f"{what}: {exc}") from None
        raise damaged(path, what.rsplit(" ", 1)[0] if what.endswith(str(path)) else what, str(exc)) from None


def damaged(path: Path, what: str, why: str, details: str | None = None) -> ParioError:
    """The one-line error of a damaged store database: the file, the first line of why, and
    the recovery command (the integrity report only with --verbose / PARIO_DEBUG=1)."""
    lines = [ln.strip() for ln in why.strip().splitlines() if ln.strip() and not ln.strip().startswith("***")]
    first = lines[0] if lines else "unreadable"
    store = Path(path).parent
    return ParioError(f"{what} {path} is damaged ({first}); salvage what is left with "
                      f"'pario store fsck --store {store} --repair' (details: --verbose)", details=details or why)


def missing(path: Path) -> str:
    store = Path(path).parent
    return (f"metadata database {path} is missing or empty, but store {store} holds data: starting an empty "
            f"one would lose its files; rebuild it with 'pario store fsck --store {store} --repair'")


def connect(path: Path, what: str) -> sqlite3.Connection:
    """Open an SQLite database (WAL, synchronous=FULL, busy timeout); a damaged file is a one-line ParioError."""
    try:
        con = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout())
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        rows = con.execute("PRAGMA quick_check").fetchall()
        if not rows or rows[0][0] != "ok":
            report = "\n".join(str(r[0]) for r in rows) or "quick_check failed"
            raise sqlite3.DatabaseError(report)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise ParioError(f"{what} {path}: still locked by another process after {busy_timeout():g} s") from None
        raise damaged(path, what, str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise damaged(path, what, str(exc)) from None
    return con


def refuse_links(*paths: Path) -> None:
    """A one-line ParioError if any of ``paths`` is a symbolic link: the store's own files are
    never links, and pario never follows one it did not make (a store directory may come
    from someone else)."""
    for p in paths:
        if os.path.islink(p):
            raise ParioError(f"{p} is a symbolic link: pario never follows a link it did not make (remove it; "
                             f"'pario store fsck --store {Path(p).parent}' checks the rest)")


class Meta:
    """The files table (one per store).

    ``may_create``: whether a missing (or emptied) database may be created — a bool, or a
    callable asked only then (the store has no data files, no journal, no catalog: it is
    new).  Otherwise a missing database is a one-line error naming ``fsck --repair``, which
    rebuilds it (:mod:`pario.store.catalog`); silently starting an empty one would hand the
    next new file the id, and so the data files, of an old one."""

    def __init__(self, path: Path, *, may_create=False, catalog: bool = True):
        self.path = Path(path)
        self.catalog = catalog
        refuse_links(self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if fresh and not (may_create() if callable(may_create) else may_create):
            raise ParioError(missing(self.path))
        self.con = connect(self.path, "metadata database")
        self.lock = threading.RLock()
        try:
            with db_errors(f"metadata database {self.path}"):
                has = self.con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='files'").fetchone()
                if not has and not fresh and not (may_create() if callable(may_create) else may_create):
                    self.con.close()
                    raise ParioError(missing(self.path))
                self.con.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, "metadata database", str(exc)) from None

    def _log(self, rec: dict) -> None:
        if self.catalog:
            from .catalog import append

            append(self.path.parent, rec)

    def create(self, name: str, layout: dict, size: int = 0) -> int:
        with self.lock:
            try:
                cur = self.con.execute("INSERT INTO files(name, layout, size) VALUES (?, ?, ?)",
                                       (name, json.dumps(layout), int(size)))
            except sqlite3.IntegrityError:
                raise ParioError(f"file {name!r} already exists in the store") from None
            fid = int(cur.lastrowid)
            self._log({"op": "create", "id": fid, "name": name, "layout": layout})
            return fid

    def get(self, name: str):
        """(id, layout dict, size, dirty) or None."""
        with self.lock:
            row = self.con.execute("SELECT id, layout, size, dirty FROM files WHERE name=?", (name,)).fetchone()
        if row is None:
            return None
        return int(row[0]), json.loads(row[1]), int(row[2]), int(row[3])

    def set_size(self, name: str, size: int, dirty: int = 0) -> None:
        with self.lock:
            self.con.execute("UPDATE files SET size=?, dirty=? WHERE name=?", (int(size), int(dirty), name))

    def grow_size(self, name: str, size: int) -> None:
        """``size = MAX(size, ?)`` (shared stores: several processes extend one file)."""
        with self.lock:
            self.con.execute("UPDATE files SET size=MAX(size, ?) WHERE name=?", (int(size), name))

    def dirty_names(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.con.execute("SELECT name FROM files WHERE dirty != 0")]

    def set_dirty(self, name: str, dirty: int = 1) -> None:
        with self.lock:
            self.con.execute("UPDATE files SET dirty=? WHERE name=?", (int(dirty), name))

    def rename(self, old: str, new: str) -> None:
        with self.lock:
            row = self.con.execute("SELECT id FROM files WHERE name=?", (old,)).fetchone()
            try:
                cur = self.con.execute("UPDATE files SET name=? WHERE name=?", (new, old))
            except sqlite3.IntegrityError:
                raise ParioError(f"file {new!r} already exists in the store") from None
            if cur.rowcount != 1 or row is None:
                raise ParioError(f"no file {old!r} in the store")
            self._log({"op": "rename", "id": int(row[0]), "name": new})

    def delete(self, name: str) -> None:
        with self.lock:
            row = self.con.execute("SELECT id FROM files WHERE name=?", (name,)).fetchone()
            self.con.execute("DELETE FROM files WHERE name=?", (name,))
            if row is not None:
                self._log({"op": "delete", "id": int(row[0])})

    def top_id(self) -> int:
        """The highest id ever handed out (AUTOINCREMENT's sequence)."""
        with self.lock:
            if not self.con.execute("SELECT 1 FROM sqlite_master WHERE name='sqlite_sequence'").fetchone():
                return 0
            row = self.con.execute("SELECT seq FROM sqlite_sequence WHERE name='files'").fetchone()
            return int(row[0]) if row else 0

    def names(self) -> list[str]:
        with self.lock:
            return [r[0] for r in self.con.execute("SELECT name FROM files ORDER BY name")]

    def ids(self) -> dict[int, str]:
        with self.lock:
            return {int(i): n for i, n in self.con.execute("SELECT id, name FROM files")}

    def close(self) -> None:
        with self.lock:
            self.con.close()


def guard_db_methods(cls, names, what):
    """SQLite errors of the listed methods of ``cls`` (busy beyond the timeout, I/O) → one-line
    ParioError naming ``what`` and the database path."""
    import functools

    for n in names:
        fn = getattr(cls, n)

        @functools.wraps(fn)
        def wrapper(self, *a, __fn=fn, **kw):
            with db_errors(f"{what} {self.path}", self.path):
                return __fn(self, *a, **kw)
        setattr(cls, n, wrapper)


guard_db_methods(Meta, ("create", "get", "set_size", "grow_size", "dirty_names", "set_dirty", "rename", "delete", "names",
                       "ids", "top_id"),
                 "metadata database")
