"""The ``local`` data plane: every server is a directory, every logical file one data file per server.

As OrangeFS keeps a *datafile* per server, logical file ``F`` (metadata id ``i``) stores
the bytes that its layout puts on server ``j`` in ``<server j dir>/<i:08d>.<d>`` at the
server-local offsets of :func:`pario.layout.map_requests` (``d`` = data file number: 0 for
the file's own data, ≥ 1 for the replica data files of an extent map).  Server directories
may live on different mounts (HDD vs SSD).  Holes stay holes: nothing is preallocated, and
bytes a data file does not have read as 0.

The bytes are moved by the store engine's local plane (``src/pario/native/store/planes/
local.c``: pieces contiguous on a data file one ``preadv``/``pwritev``, ``O_DIRECT`` with
page-aligned buffers in direct mode, data files opened if they exist and else created with
``O_EXCL``, never through a symbolic link).  This module is what only the plane knows
beyond that: where a file's data files are, listing and measuring the server directories,
removing a file's data files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from .. import ParioError
from ..system import load_system
from .base import Backend

DATAFILE = re.compile(r"^(\d{8,})\.(\d+)$")    # <id:08d>.<data file>: the only names in a server directory
MARKER = ".pario-server"    # besides them, in a directory outside the store's root (pario.store.gc.MARKER)


class LocalBackend(Backend):
    """The files of a store whose servers are directories (``server_dirs[j]``)."""

    name = "local"

    def __init__(self, root: Path, system, engine, meta, server_dirs: list[Path]):
        super().__init__(Path(root), system, engine, meta)
        self.server_dirs = [Path(p) for p in server_dirs]

    @classmethod
    def configure(cls, system, *, servers=None, cluster=None, object_size=None):
        """``servers`` maps server names to directories (other mounts, relative to the current
        directory); the others get ``servers/NAME`` in the store."""
        if cluster is not None:
            raise ParioError("--cluster applies to the rados backend only")
        if object_size is not None:
            raise ParioError("--object-size applies to the rados backend only")
        system = load_system(system)
        servers = dict(servers or {})
        unknown = [n for n in servers if n not in system.names]
        if unknown:
            raise ParioError(f"--server {unknown[0]}: no such server in system {system.name!r} "
                             f"({', '.join(system.names)})")
        mapping = {}
        for name in system.names:
            if name in servers:
                p = Path(servers[name]).expanduser()
                mapping[name] = str(p if p.is_absolute() else Path.cwd() / p)
            else:
                mapping[name] = f"servers/{name}"
        return system, {"servers": mapping}

    @classmethod
    def prepare(cls, root, entries: dict) -> None:
        for d in entries["servers"].values():
            (Path(root) / d).mkdir(parents=True, exist_ok=True)     # an absolute d replaces root

    @classmethod
    def options(cls, root, system, cfg: dict) -> dict:
        dirs = []
        servers = cfg.get("servers")
        for name in system.names:
            d = servers.get(name) if isinstance(servers, dict) else None
            if not isinstance(d, str):
                raise ParioError(f"store.json has no directory for server {name}")
            d = Path(d)
            dirs.append(d if d.is_absolute() else Path(root) / d)
        check_server_dirs(system, dirs)
        return {"server_dirs": dirs}

    @classmethod
    def holds_data(cls, server_dirs) -> bool:
        return holds_data(server_dirs)

    def datafile_path(self, fid: int, server: int, datafile: int) -> Path:
        return self.server_dirs[server] / f"{fid:08d}.{datafile}"

    def _datafiles_of(self, fid: int) -> list[Path]:
        return [p for d in self.server_dirs for p in d.glob(f"{fid:08d}.*")]

    def _has_data(self, fid: int) -> str | None:
        found = self._datafiles_of(fid)
        return str(found[0]) if found else None

    def _unlink_data(self, fid: int) -> None:
        for p in self._datafiles_of(fid):
            p.unlink(missing_ok=True)

    def usage(self) -> np.ndarray:
        out = np.zeros(self.system.n, dtype=np.int64)
        for j, d in enumerate(self.server_dirs):
            for p in d.iterdir():
                if p.is_file() and not p.is_symlink() and p.name != MARKER:
                    out[j] += p.stat().st_blocks * 512
        return out

    def free_space(self) -> np.ndarray:
        out = np.zeros(self.system.n, dtype=np.int64)
        for j, d in enumerate(self.server_dirs):
            st = os.statvfs(d)
            out[j] = st.f_bavail * st.f_frsize
        return out

    def datafiles(self) -> list[tuple[int, Path, int, int]]:
        """All entries of the server directories: (server, path, file id, datafile number);
        names that are not data files' get id -1, symbolic links and anything but a regular
        file id -2 (pario makes neither)."""
        out = []
        for j, d in enumerate(self.server_dirs):
            for e in os.scandir(d):
                if e.name == MARKER:     # pario store gc's marker of a directory outside the root
                    continue
                p = d / e.name
                if e.is_symlink() or not e.is_file(follow_symlinks=False):
                    out.append((j, p, -2, -2))
                    continue
                m = DATAFILE.match(e.name)
                out.append((j, p, int(m.group(1)), int(m.group(2))) if m else (j, p, -1, -1))
        return out


def check_server_dirs(system, server_dirs: list[Path]) -> None:
    """Every server's directory is there (a missing mount is one line)."""
    for s, d in zip(system.servers, server_dirs):
        if not Path(d).is_dir():
            raise ParioError(f"server {s.name} directory {d} is missing (is its mount there?)")


def holds_data(server_dirs: list[Path]) -> bool:
    """Any data file in the server directories."""
    return any(DATAFILE.match(e.name) for d in server_dirs if Path(d).is_dir() for e in os.scandir(d))
