"""The store's catalog, ``DIR/catalog.log``: an append-only record of its namespace.

``meta.db`` (:mod:`pario.store.meta`) is the store's index of files: name → id, layout,
size.  Without it the data files (named by id only) cannot be put back in order, so every
change of the namespace is also appended here, one JSON object a line, made durable before
the change is acknowledged::

    {"op": "create", "id": 7, "name": "ior.dat", "layout": {…}}
    {"op": "rename", "id": 7, "name": "ior.old"}
    {"op": "delete", "id": 7}

by the Python store (:class:`~pario.store.meta.Meta`) and by the C store's create
(``pxs_meta_create``, store/meta.c).  ``pario store fsck --repair`` rebuilds a lost or
emptied ``meta.db`` from it (:func:`replay`: the files it names, their sizes taken from the
data files) and never reuses an id it or the data files or the RMT journal have seen.

A line torn by a crash (the last one) does not parse and is skipped; lines are appended
with ``O_APPEND`` (one ``write``: they never interleave on a local file system).  The file is
opened with ``O_NOFOLLOW``: a planted link is refused, never written through.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import ParioError

CATALOG = "catalog.log"


def append(root, rec: dict) -> None:
    """Append one record (durable when this returns)."""
    path = Path(root) / CATALOG
    line = (json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ParioError(f"store catalog {path}: {exc.strerror}") from None
    try:
        os.write(fd, line)
        os.fdatasync(fd)
    except OSError as exc:
        raise ParioError(f"store catalog {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def replay(root) -> tuple[dict[int, tuple[str, dict]], int, int]:
    """The files the catalog describes: ``({id: (name, layout)}, highest id seen, lines
    that did not parse)``."""
    from .locks import shared_record

    files: dict[int, tuple[str, dict]] = {}
    top = bad = 0
    raw = shared_record(root, CATALOG)      # the file, or a rados-coordinated store's object
    if raw is None:
        return files, 0, 0
    for line in raw.split(b"\n"):
        if not line:
            continue
        try:
            rec = json.loads(line.decode("utf-8", "surrogateescape"))
            op, fid = rec["op"], int(rec["id"])
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        top = max(top, fid)
        if op == "create" and isinstance(rec.get("name"), str) and isinstance(rec.get("layout"), dict):
            files[fid] = (rec["name"], rec["layout"])
        elif op == "rename" and fid in files and isinstance(rec.get("name"), str):
            files[fid] = (rec["name"], files[fid][1])
        elif op == "delete":
            files.pop(fid, None)
        else:
            bad += 1
    return files, top, bad


__all__ = ["CATALOG", "append", "replay"]
