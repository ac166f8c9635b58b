"""Salvaging a store whose metadata database or RMT journal is damaged (``pario store fsck --repair``).

* **metadata** (``meta.db``, SQLite), damaged, missing or emptied: the rows that can still
  be read — all at once if the table is intact and only an index or a free page is damaged,
  else row by row for every file id the data files name — and, for every other file, its
  name and layout from the store's catalog (:mod:`pario.store.catalog`) are written to a new
  database (marked ``dirty`` so that the next open takes each size from the data files);
  the damaged file is kept beside it as ``meta.db.damaged-TIME``.  A store coordinated in
  RADOS keeps its database there (Ceph's SQLite VFS): its pages are copied out into the local
  file ``DIR/meta.db.damaged-TIME`` (SQLite's online backup, page by page: a damaged b-tree is
  copied as it is), the rows salvaged from that copy as above, the data files' ids taken from
  the data objects' names, and the rebuilt database replaces the one in RADOS (the coordination
  member's ``meta_transfer``: the damaged one deleted through the VFS, the new one copied in).  The new database hands out
  no id the catalog, the data files or the RMT journal have seen (ids are never reused).  A
  file neither source describes is lost (its data files stay, reported by fsck as orphan
  data: without its layout nobody can put its bytes in order).
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
from .locks import StoreLock, coord_member
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


def _rados_data_ids(cfg: dict) -> set[int]:
    """File ids the data objects of a store on the rados plane name (``ID.DATAFILE.K``)."""
    from .rados import connect, open_pools, parse_object_name

    ids = set()
    r = connect(cfg["cluster"])
    try:
        for io in open_pools(r, sorted(set(cfg["pools"].values())), cfg.get("id", "")):
            try:
                for o in io.list_objects():
                    name = parse_object_name(o.key)
                    if name is not None:
                        ids.add(name[0])
            finally:
                io.close()
    finally:
        r.shutdown()
    return ids


def _journal_ids(root: Path) -> set[int]:
    """File ids the RMT journal names (originals and replicas), as far as it parses."""
    from . import rmt_journal as J
    from .locks import shared_record

    try:
        recs = J.read(root / "rmt.log", 0, raw=shared_record(root, "rmt.log") or b"").records
    except (OSError, ValueError, ParioError):
        return set()
    ids = set()
    for r in recs:
        k = {J.ADD: 2, J.SETFLAG: 2, J.GROW: 2, J.REGISTER: 2}.get(r.type, 1)
        ids.update(int(v) for v in r.u[:k])
    return ids


def _repair_meta(root: Path, cfg: dict, lock) -> dict | None:
    import json

    from .catalog import replay

    path = root / "meta.db"
    try:
        Meta(path).close()
        return None
    except ParioError as exc:
        if "still locked" in str(exc):      # busy, not damaged: never replaced
            raise ParioError(f"{exc}; fsck --repair rebuilds a damaged or missing database only: try again when "
                             "the lock is gone (a dead process's lock in RADOS goes 30 s after its death)") from None
    in_rados = coord_member(root) == "rados"
    aside = None
    if in_rados:        # its pages copied out of RADOS: the damaged copy, salvaged from here
        aside = root / f"meta.db.damaged-{_stamp()}"
        try:
            if not lock.meta_transfer(str(aside), False):
                aside = None                            # there is none in RADOS
        except ParioError:
            aside.unlink(missing_ok=True)               # not even its pages read: nothing to salvage
            aside = None
        ids = _rados_data_ids(cfg)
        rows, _ = _salvage_rows(aside, ids) if aside is not None else ([], 0)
    else:
        ids = _data_ids(root, cfg)
        rows, _ = _salvage_rows(path, ids) if path.exists() else ([], 0)
    catalog, top, _ = replay(root)
    have_ids, have_names = {int(r[0]) for r in rows}, {str(r[1]) for r in rows}
    rebuilt = 0
    for fid, (name, layout) in sorted(catalog.items()):
        if fid not in have_ids and name not in have_names:
            rows.append((fid, name, json.dumps(layout), 0, 1))
            have_ids.add(fid)
            have_names.add(name)
            rebuilt += 1
    new = root / "meta.db.new"
    new.unlink(missing_ok=True)
    con = sqlite3.connect(str(new), isolation_level=None)
    if in_rados:
        con.execute("PRAGMA page_size=65536")    # libcephsqlite's advice, as a new store's (store/meta.c)
    con.executescript(SCHEMA)
    kept = 0
    for fid, name, layout, size, _dirty in rows:
        try:
            con.execute("INSERT INTO files(id, name, layout, size, dirty) VALUES (?,?,?,?,1)",
                        (int(fid), str(name), str(layout), int(size)))
            kept += 1
        except (sqlite3.Error, TypeError, ValueError):
            pass
    # ids are never reused: the next one comes after every id anyone has seen
    seen = max([0, top, *ids, *have_ids, *_journal_ids(root)])
    con.execute("DELETE FROM sqlite_sequence WHERE name='files'")
    con.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('files', ?)", (seen,))
    con.close()
    if in_rados:
        try:
            lock.meta_transfer(str(new), True)
        finally:
            new.unlink(missing_ok=True)
        lost = len(ids - {int(r[0]) for r in rows})
        return {"kept_files": kept - rebuilt, "rebuilt_files": rebuilt, "lost_files": lost,
                "damaged_copy": str(aside) if aside else None, "next_id": seen + 1}
    if path.exists():
        aside = root / f"meta.db.damaged-{_stamp()}"
        os.replace(path, aside)
    for suffix in ("-wal", "-shm"):
        side = root / f"meta.db{suffix}"
        if side.exists():
            if aside is not None:
                os.replace(side, root / f"{aside.name}{suffix}")
            else:
                side.unlink()
    os.replace(new, path)
    lost = len(ids - {int(r[0]) for r in rows})
    return {"kept_files": kept - rebuilt, "rebuilt_files": rebuilt, "lost_files": lost,
            "damaged_copy": str(aside) if aside else None, "next_id": seen + 1}


def _repair_rmt(root: Path) -> dict | None:
    from .rmt import _core_module

    path = root / "rmt.log"
    if coord_member(root) == "rados":
        return None         # the journal object: opened (and refused if damaged) by the store's open below
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
        meta = _repair_meta(root, cfg, lock)
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
