"""The store lock of a store opened by several processes (``Store(..., shared=True)``), and
the timeout of every wait for another process.

:class:`StoreLock` is the store engine's (``pario.native._rmt.StoreLock``, the coordination
interface of ``src/pario/native/store/coord.h``; docs/store.md, "Coordination"): the member
store.json ``"coord"`` names (default ``host``: ``flock`` on ``DIR/.lock``) — an exclusive
opener holds it exclusive (no other process), shared openers hold it shared.  Its tries
never wait: callers poll with a timeout and end in a one-line :class:`pario.ParioError`.

The finer coordination lives with the engine too: the journal lock (changes are appended
one process at a time) and the byte-range locks (a write holds its range shared from its
RMT lookup to its last byte; a synchronisation batch or a replicator chunk holds its ranges
exclusive from the copy to the flag change), released by the kernel when a process dies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

DEFAULT_TIMEOUT = 60.0


def store_timeout() -> float:
    """Seconds any wait for another process may take: ``$PARIO_STORE_TIMEOUT`` (0 to 1e9),
    else 60 — the one setting every process honours (the C runtime: pxs_store_timeout)."""
    v = os.environ.get("PARIO_STORE_TIMEOUT", "")
    try:
        t = float(v)
    except ValueError:
        return DEFAULT_TIMEOUT
    return t if 0 <= t < 1e9 else DEFAULT_TIMEOUT


def coord_member(root) -> str:
    """The coordination member store.json names (``"coord"``, default ``host``); ``host``
    when the configuration cannot be read (the engine's open reports that)."""
    try:
        with open(Path(root) / "store.json", encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "host"
    member = cfg.get("coord", "host") if isinstance(cfg, dict) else "host"
    return member if isinstance(member, str) and member else "host"


def StoreLock(path, member: str | None = None):  # noqa: N802 - the engine's type, by its old name
    """The store lock of the store whose lock is ``path`` (``DIR/.lock``; the store
    directory works too): the engine's ``StoreLock`` of the store's coordination member,
    nothing held yet (``try_exclusive()``, ``try_shared()``, ``downgrade()``, ``close()``)."""
    from .rmt import _core_module

    p = Path(path)
    root = p.parent if p.name == ".lock" else p
    return _core_module().StoreLock(str(root), member or coord_member(root), store_timeout())


def coord_members() -> tuple[str, ...]:
    """The coordination members the engine has (store/coord.c's registry, in order)."""
    from .rmt import _core_module

    return tuple(_core_module().COORD_MEMBERS)


# Members designed but not built: asking for one is refused with the reason before anything
# is written, never a store that half works (none at present).
PLANNED_MEMBERS: dict[str, str] = {}


def shared_record(root, name: str) -> bytes | None:
    """The bytes of the store's shared record ``name`` (``rmt.log``, ``catalog.log``): the file
    ``root/name``, or for a store coordinated in RADOS (``"coord": "rados"``) the object the
    member keeps (the engine's ``StoreLock.read_shared``); None if there is none."""
    from .. import ParioError

    root = Path(root)
    if coord_member(root) == "rados":
        lock = StoreLock(root)
        try:
            return lock.read_shared(name)
        finally:
            lock.close()
    p = root / name
    if p.is_symlink():
        raise ParioError(f"{p} is a symbolic link: pario never follows a link it did not make")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ParioError(f"{p}: {exc.strerror}") from None


def check_coord(coord: str, backend: str = "local") -> None:
    """Refuse a coordination member a store on data plane ``backend`` cannot have, with one
    line (:class:`pario.ParioError`): an unknown name, ``rados`` without the rados plane (its
    metadata and journal would live in the cluster of the store's data), a planned member."""
    from .. import ParioError

    if coord == "rados" and backend != "rados":
        raise ParioError("--coord rados keeps the store's metadata, RMT journal and locks in the RADOS cluster "
                         "of its data: it needs a store on the rados data plane (pario store init --backend rados "
                         "--cluster DIR)")
    if coord in PLANNED_MEMBERS:
        raise ParioError(PLANNED_MEMBERS[coord])
    if coord not in coord_members():
        raise ParioError(f"--coord {coord!r}: unknown coordination {coord!r} (known: {', '.join(coord_members())})")


__all__ = ["StoreLock", "DEFAULT_TIMEOUT", "PLANNED_MEMBERS", "check_coord", "coord_member", "coord_members",
           "shared_record", "store_timeout"]
