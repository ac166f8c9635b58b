"""Salvaging a store whose metadata database or RMT journal is damaged (``pario store fsck --repair``).

* **metadata** (``meta.db``, SQLite): the rows that can still be read — all at once if the
  table is intact and only an index or a free page is damaged, else row by row for every
  file id the data files name — are written to a new database (marked ``dirty`` so that the
  next open takes each size from the data files); the damaged file is kept beside it as
  ``meta.db.damaged-TIME``.  A file whose row cannot be read is lost (its data files stay,
  reported by fsck as orphan data: without its layout nobody can put its bytes in order).
* **RMT journal** (``rmt.log``): if its header is unreadable it is kept aside as
  ``rmt.log.damaged-TIME`` and a new, empty journal is started.  The replicas are then
  registered nowhere, so the next open removes their files: every byte that was flushed is
  in the originals; writes that were only in a DIRTY replica are lost (and reported).
  A journal with a damaged *tail* needs no repair: every open replays it up to its last
  valid record.

Then the store is opened (recovery runs) and checked (:func:`pario.store.fsck.fsck`).
Needs the store to itself.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from .. import ParioError
from .locks import StoreLock
from .meta import SCHEMA, Meta
from .root import read_config


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def _data_ids(root: Path, cfg: dict) -> set[int]:
    ids = set()
    for d in (cfg.get("servers") or {}).values():
        p = Path(d) if Path(d).is_absolute() else root / d
        if p.is_dir():
            for f in p.iterdir():
                stem, _, _ = f.name.partition(".")
                if stem.isdigit():
                    ids.add(int(stem))
    return ids


def _salvage_rows(path: Path, ids: set[int]) -> tuple[list[tuple], int]:
    """Readable ``files`` rows of a damaged database, and how many were tried and lost."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return [], len(ids)
    try:
        try:
            return con.execute("SELECT id, name, layout, size, dirty FROM files").fetchall(), 0
        except sqlite3.Error:
            pass
        rows, lost = [], 0
        for i in sorted(ids):
            try:
                r = con.execute("SELECT id, name, layout, size, dirty FROM files WHERE id=?", (i,)).fetchone()
            except sqlite3.Error:
                r = None
            if r is None:
                lost += 1
            else:
                rows.append(r)
        return rows, lost
    finally:
        con.close()


def _repair_meta(root: Path, cfg: dict) -> dict | None:
    path = root / "meta.db"
    try:
        Meta(path).close()
        return None
    except ParioError:
        pass
    ids = _data_ids(root, cfg)
    rows, lost = _salvage_rows(path, ids)
    new = root / "meta.db.new"
    new.unlink(missing_ok=True)
    con = sqlite3.connect(str(new), isolation_level=None)
    con.executescript(SCHEMA)
    kept = 0
    for fid, name, layout, size, _dirty in rows:
        try:
            con.execute("INSERT INTO files(id, name, layout, size, dirty) VALUES (?,?,?,?,1)",
                        (int(fid), str(name), str(layout), int(size)))
            kept += 1
        except (sqlite3.Error, TypeError, ValueError):
            lost += 1
    con.close()
    aside = root / f"meta.db.damaged-{_stamp()}"
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):
        side = root / f"meta.db{suffix}"
        if side.exists():
            os.replace(side, root / f"{aside.name}{suffix}")
    os.replace(new, path)
    return {"kept_files": kept, "lost_files": lost, "damaged_copy": str(aside)}


def _repair_rmt(root: Path) -> dict | None:
    from .rmt import _core_module

    path = root / "rmt.log"
    if not path.exists():
        return None
    _rmt = _core_module()
    try:
        _rmt.Core(str(path), None, False, True, 1.0).close()
        return None
    except ParioError:
        pass
    aside = root / f"rmt.log.damaged-{_stamp()}"
    os.replace(path, aside)
    return {"damaged_copy": str(aside)}


def repair(root) -> dict:
    """Salvage the store at ``root`` (module docstring); returns what was done and the fsck
    report of the store afterwards."""
    from .fsck import fsck
    from .root import REPLICA_PREFIX, Store

    root = Path(root)
    cfg = read_config(root)
    lock = StoreLock(root / ".lock")
    if not lock.try_exclusive():
        lock.close()
        raise ParioError(f"store {root} is in use by another process: repair needs it to itself")
    try:
        meta = _repair_meta(root, cfg)
        rmt = _repair_rmt(root)
    finally:
        lock.close()
    out = {"store": str(root), "meta": meta, "rmt": rmt}
    if rmt is not None:
        with Store(root, recover=False) as st:          # count the replica files the recovery will drop
            out["rmt"]["dropped_replica_files"] = len([n for n in st.backend.list() if n.startswith(REPLICA_PREFIX)])
    with Store(root) as st:
        out["fsck"] = fsck(st)
    return out


__all__ = ["repair"]
