"""What pario leaves behind, removed: server directories of stores that are gone
(``pario store gc``) and the files of a store to be reused from scratch (``pario run --fresh``).

A store of the ``local`` plane may keep a server's data outside its root (``pario store init
--server NAME=DIR``; ``pario run --testbed`` puts every server's on the testbed's mount,
``TB/NAME/pario-run-<hash>``, :mod:`pario.run.devices`).  Removing the store's root leaves those
directories and their data files behind: the testbed fills up, and a new store made with the
same directories would inherit another store's data files (fsck: orphan data).  So:

- :func:`mark_server_dirs` — at ``init``, every server directory outside the root gets the
  marker :data:`MARKER` (JSON: the store's root and id, the server, whether the init made the
  directory).  The data plane ignores it (:mod:`pario.store.local`).
- :func:`check_server_dirs_unused` — ``init`` refuses a server directory that holds data
  files (another store's: one line naming it and ``pario store gc``).
- :func:`collect` (``pario store gc DIR``) — below ``DIR`` (at most :data:`DEPTH` levels, no
  symbolic link followed), every directory with a marker whose store no longer references it:
  no ``store.json`` at the marker's root, another store id there, or a store whose server
  directory is elsewhere.  Such a directory is removed only when it holds nothing but data
  files (``<id>.<n>``, regular files) and the marker: its data files, the marker, and the
  directory itself when the init made it.  Anything else in it (a file pario does not make, a
  link, a subdirectory) keeps the whole directory, reported.  A directory without a marker
  (made by hand, or by pario before markers) is never touched; ``DIR`` itself must be a real
  directory, not a symbolic link, and nothing outside it is looked at.
- :func:`survey` — the same directories, read only, with their bytes and whether they are in
  use (``pario testbed status``).
- :func:`empty_store` (``pario run --fresh``) — every file of a store deleted through the
  store (its data files, replicas, RMT entries; the old copies of relaid files purged): the
  next run starts from an empty store, with no layout a previous plan gave a file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from .. import ParioError

from .local import MARKER   # in a server directory outside the store's root
DEPTH = 3                     # DIR/TB/NAME/pario-run-<hash>: deep enough for a testbed's layout


def mark_server_dirs(root: Path, cfg: dict, made: set[str]) -> None:
    """Write :data:`MARKER` into every server directory of ``cfg`` outside ``root`` (``made``:
    the ones the init created)."""
    root = Path(root).resolve()
    for name, d in (cfg.get("servers") or {}).items():
        p = Path(d)
        if not p.is_absolute():
            continue
        body = {"pario_server_dir": 1, "store": str(root), "store_id": cfg["id"], "server": name,
                "made_dir": str(p) in made}
        tmp = p / f"{MARKER}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(body) + "\n")
        os.replace(tmp, p / MARKER)


def check_server_dirs_unused(servers: dict[str, str]) -> None:
    """An init's server directories must hold no data file (another store's would become
    orphans of the new one, and share its file ids): one line naming the first."""
    from .local import DATAFILE

    for name, d in servers.items():
        p = Path(d)
        if not p.is_absolute() or not p.is_dir():
            continue
        found = next((e.name for e in os.scandir(p) if DATAFILE.match(e.name)), None)
        if found is not None:
            owner = _marker(p)
            whose = f" of the store at {owner['store']}" if owner else ""
            raise ParioError(f"server {name} directory {p} holds data files{whose} (e.g. {found}): give another "
                             f"directory, or remove a gone store's with 'pario store gc {p.parent}'")


def _marker(d: Path) -> dict | None:
    """The marker of directory ``d`` (None: none, a link, or not pario's)."""
    m = d / MARKER
    try:
        if not stat.S_ISREG(os.lstat(m).st_mode):
            return None
        body = json.loads(m.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(body, dict) or body.get("pario_server_dir") != 1 or not isinstance(body.get("store"), str):
        return None
    return body


def _referenced(d: Path, marker: dict) -> str | None:
    """Why the marker's store still uses ``d`` (None: it does not)."""
    from .root import CONFIG

    cfg_path = Path(marker["store"]) / CONFIG
    try:
        if cfg_path.is_symlink():
            return f"{cfg_path} is a symbolic link (not followed: kept)"
        cfg = json.loads(cfg_path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{cfg_path} cannot be read ({exc}): kept"
    if not isinstance(cfg, dict) or cfg.get("id") != marker.get("store_id"):
        return None
    mine = (cfg.get("servers") or {}).get(marker.get("server"))
    if isinstance(mine, str) and Path(mine).is_absolute() and _same(Path(mine), d):
        return f"server {marker.get('server')} of the store at {marker['store']}"
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _candidates(top: Path, depth_max: int = DEPTH):
    """Directories below ``top`` (``top`` included, at most ``depth_max`` levels down) that
    hold a marker; symbolic links are not followed."""
    todo = [(top, 0)]
    while todo:
        d, depth = todo.pop()
        if _marker(d) is not None:
            yield d
            continue
        if depth >= depth_max:
            continue
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                todo.append((d / e.name, depth + 1))


def _contents(d: Path) -> tuple[list[Path], list[str]]:
    """(data files, what else is there) of a server directory."""
    from .local import DATAFILE

    data, other = [], []
    for e in os.scandir(d):
        if e.name == MARKER:
            continue
        if DATAFILE.match(e.name) and e.is_file(follow_symlinks=False):
            data.append(d / e.name)
        else:
            other.append(e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
                         + (" (symbolic link)" if e.is_symlink() else ""))
    return data, other


def survey(top, depth: int = DEPTH) -> list[dict]:
    """Read only: every pario server directory below ``top`` (at most ``depth`` levels, no link
    followed): ``{"dir", "store", "server", "data_files", "bytes", "in_use", "why"}`` —
    ``in_use`` whether its store still references it (``why``: which), the bytes its data files
    hold (``pario testbed status``: what ``pario store gc`` would free)."""
    out = []
    for d in _candidates(Path(top), depth):
        marker = _marker(d)
        why = _referenced(d, marker)
        try:
            data, _ = _contents(d)
            nbytes = sum(p.lstat().st_blocks * 512 for p in data)
        except OSError:
            data, nbytes = [], 0
        out.append({"dir": str(d), "store": marker["store"], "server": marker.get("server"),
                    "data_files": len(data), "bytes": int(nbytes), "in_use": why is not None, "why": why})
    return out


def collect(top, *, dry_run: bool = False) -> dict:
    """``pario store gc DIR`` (module docstring): ``{"root", "dry_run", "removed": [{"dir",
    "store", "server", "data_files", "bytes", "dir_removed"}], "kept": [{"dir", "why"}]}``."""
    top_arg = str(top)
    top = Path(top)
    if top.is_symlink():
        raise ParioError(f"{top_arg} is a symbolic link: pario store gc looks only under a real directory")
    if not top.is_dir():
        raise ParioError(f"{top_arg}: no such directory")
    top = top.resolve()
    removed, kept = [], []
    for d in _candidates(top):
        marker = _marker(d)
        why = _referenced(d, marker)
        if why is not None:
            kept.append({"dir": str(d), "why": f"in use: {why}"})
            continue
        if not d.resolve().is_relative_to(top):
            kept.append({"dir": str(d), "why": f"outside {top}"})
            continue
        data, other = _contents(d)
        if other:
            kept.append({"dir": str(d), "why": f"the store at {marker['store']} is gone, but the directory holds "
                                               f"what pario does not make: {', '.join(sorted(other)[:3])}"
                                               + (" …" if len(other) > 3 else "")})
            continue
        nbytes = sum(p.lstat().st_blocks * 512 for p in data)
        row = {"dir": str(d), "store": marker["store"], "server": marker.get("server"), "data_files": len(data),
               "bytes": int(nbytes), "dir_removed": bool(marker.get("made_dir"))}
        if not dry_run:
            for p in data:
                p.unlink(missing_ok=True)
            (d / MARKER).unlink(missing_ok=True)
            if marker.get("made_dir"):
                try:
                    d.rmdir()
                except OSError as exc:     # something appeared meanwhile: left, said
                    row["dir_removed"] = False
                    row["note"] = f"directory kept: {exc.strerror}"
        removed.append(row)
    return {"root": str(top), "dry_run": bool(dry_run), "removed": removed, "kept": kept}


def empty_store(root) -> list[str]:
    """Delete every file of the store at ``root`` (with its replicas) and purge the old copies
    of relaid files; the store must not be in use (opened exclusively).  Returns the names
    deleted."""
    from . import Store
    from .relayout import purge_retired

    with Store(str(root)) as st:
        names = sorted(st.files())
        for name in names:
            st.delete(name)
        purge_retired(st)
    return names


__all__ = ["MARKER", "mark_server_dirs", "check_server_dirs_unused", "survey", "collect", "empty_store"]
