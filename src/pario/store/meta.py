"""The store's metadata, ``DIR/meta.db``: name → (id, layout JSON, size, dirty), through the engine.

One implementation serves the Python store and the C runtime of MPI programs: the store
engine's metadata access (``src/pario/native/store/meta.c``, bound as
``pario.native._rmt.Meta``): SQLite in WAL mode with ``synchronous=FULL`` (a committed
create, truncate or size update survives a crash), a busy timeout of
``$PARIO_STORE_TIMEOUT`` (else 30 s) for another process's write transaction, sizes committed
with ``MAX(size, ?)`` by processes that share a store, every change of the namespace also
appended to the store's catalog (:mod:`pario.store.catalog`), never through a planted link,
and a missing or emptied database next to a store's data refused (one line naming
``fsck --repair``), never silently re-created.  ``dirty`` = 1 means the file was extended by
writes whose final size is not committed yet; the next open recovers the size from the data
files (:meth:`LocalBackend._recover_size`).

This module keeps the Python face of it (layouts as dicts, one-line errors with the
integrity report on request) and the schema for ``fsck --repair``'s salvage.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from .. import ParioError
from .locks import coord_member

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


def missing(path: Path) -> str:
    store = Path(path).parent
    return (f"metadata database {path} is missing or empty, but store {store} holds data: starting an empty "
            f"one would lose its files; rebuild it with 'pario store fsck --store {store} --repair'")


def _report(path: Path) -> str:
    """SQLite's own integrity report of a damaged database (for --verbose), read-only."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = con.execute("PRAGMA quick_check").fetchall()
        finally:
            con.close()
        return "\n".join(str(r[0]) for r in rows) or "quick_check failed"
    except sqlite3.Error as exc:
        return str(exc)


def with_report(exc: ParioError, path: Path) -> ParioError:
    """A damaged database's one-line error with SQLite's integrity report as its details
    (shown with --verbose)."""
    msg = str(exc)
    if "is damaged" not in msg or "metadata database" not in msg:
        return exc
    return ParioError(f"{msg} (details: --verbose)", details=_report(Path(path)))


def _engine():
    from .rmt import _core_module

    return _core_module()


class Meta:
    """The files table of one store (one engine connection).

    ``may_create``: whether a missing (or emptied) database may be created — a bool, or a
    callable asked only then (the store has no data files, no journal, no catalog: it is
    new).  Otherwise a missing database is a one-line error naming ``fsck --repair``, which
    rebuilds it (:mod:`pario.store.catalog`); silently starting an empty one would hand the
    next new file the id, and so the data files, of an old one."""

    @classmethod
    def ensure(cls, path: Path, may_create) -> None:
        """A missing (or emptied) database is created if ``may_create()`` (the store holds
        nothing yet), else a one-line error naming ``fsck --repair`` (:func:`missing`)."""
        path = Path(path)
        if coord_member(path.parent) == "rados":
            cls(path, may_create=may_create).close()     # the database is in RADOS: asked there
            return
        if not os.path.lexists(path) or (not path.is_symlink() and path.stat().st_size == 0):
            if not may_create():
                raise ParioError(missing(path))
            _engine().meta_init(str(path), coord_member(path.parent))

    @classmethod
    def over(cls, m, path: Path) -> "Meta":
        """The Python face of an open engine's metadata connection (``Engine.meta()``)."""
        self = cls.__new__(cls)
        self.path = Path(path)
        self._m = m
        return self

    def __init__(self, path: Path, *, may_create=False, coord: str | None = None):
        self.path = Path(path)
        eng = _engine()
        coord = coord or coord_member(self.path.parent)      # the store's (SQLite's journal mode)

        def allowed() -> bool:
            return bool(may_create() if callable(may_create) else may_create)

        if coord == "rados":        # in RADOS (Ceph's SQLite VFS): missing is the engine's answer
            fresh = False
        else:
            fresh = not os.path.lexists(self.path) or (not self.path.is_symlink() and self.path.stat().st_size == 0)
        if fresh:
            if not allowed():
                raise ParioError(missing(self.path))
            eng.meta_init(str(self.path), coord)      # (the engine refuses links; so does its open)
        try:
            self._m = eng.Meta(str(self.path), busy_timeout(), coord)
        except ParioError as exc:
            msg = str(exc)
            if coord == "rados" and " is missing" in msg and allowed():      # a new store's
                eng.meta_init(str(self.path), coord)
                self._m = eng.Meta(str(self.path), busy_timeout(), coord)
            elif "no files table" in msg and allowed():      # an emptied database of a store that holds nothing
                eng.meta_init(str(self.path), coord)
                self._m = eng.Meta(str(self.path), busy_timeout(), coord)
            elif "no files table" in msg or "missing or empty" in msg:
                raise ParioError(missing(self.path)) from None
            else:
                raise with_report(exc, self.path) from None

    @staticmethod
    def _rec(row):
        return None if row is None else (int(row[0]), json.loads(row[2]), int(row[3]), int(row[4]))

    def create(self, name: str, layout: dict) -> int:
        return self._m.create(name, json.dumps(layout))

    def get(self, name: str):
        """(id, layout dict, size, dirty) or None."""
        return self._rec(self._m.get(name))

    def get_id(self, fid: int):
        """(name, layout dict, size, dirty) or None."""
        row = self._m.get_id(int(fid))
        return None if row is None else (row[1], json.loads(row[2]), int(row[3]), int(row[4]))

    def set_size(self, name: str, size: int, dirty: int = 0) -> None:
        self._m.set_size(name, int(size), int(dirty))

    def grow_size(self, name: str, size: int) -> None:
        """``size = MAX(size, ?)`` (shared stores: several processes extend one file)."""
        self._m.grow_size(name, int(size))

    def dirty_names(self) -> list[str]:
        return self._m.dirty_names()

    def set_dirty(self, name: str, dirty: int = 1) -> None:
        self._m.set_dirty(name, int(dirty))

    def rename(self, old: str, new: str) -> None:
        self._m.rename(old, new)

    def delete(self, name: str) -> None:
        self._m.delete(name)

    def names(self) -> list[str]:
        return [n for _, n in self._m.list()]

    def ids(self) -> dict[int, str]:
        return dict(self._m.list())

    def top_id(self) -> int:
        """The highest id ever handed out (AUTOINCREMENT's sequence)."""
        return self._m.top_id()

    def switch(self, name: str, old_id: int, new_id: int, size: int, retire: list[tuple[int, str]]) -> None:
        """A relayout's switch, one transaction (store/meta.c ``pxs_meta_switch``)."""
        self._m.switch(name, int(old_id), int(new_id), int(size), [(int(i), n) for i, n in retire])

    def close(self) -> None:
        self._m.close()
