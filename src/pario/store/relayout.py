"""Giving a file that already exists another layout (a plan's ``"layouts"``; issue 16).

A plan (:mod:`pario.plan.base`) may give a file a new data layout — PADP's ⟨h, s⟩
stripes, PSA's regions, CI-LAYOUT's fixed stripe.  A file created through the store gets
it at creation; a file written before the plan needs its bytes moved: :func:`relayout`
(``Store.relayout(name, layout)``) rewrites a file of the ``local`` backend with a new
layout, crash-safe and online.

Steps (the file's bytes ``[0, size)``, size taken when the copy starts):

1. shared store: the whole file's range lock, exclusive (``[0, 2^52)`` of the file id):
   writes of this file in other processes wait (at most ``lock_timeout``), readers do not;
2. DIRTY replica bytes are written back to the original (the original is then up to date
   everywhere);
3. a new file id, named ``.incoming/relayout-<hex>`` (hidden; the next opener that has the
   store to itself discards an unfinished one), is filled chunk by chunk (``chunk`` bytes:
   read from the original's data files, written with the new layout, read back and compared
   byte for byte; all-zero chunks stay holes), then made durable (fsync, size committed);
4. replicas: dropped (below), with a REGISTER + DROP pair of a placeholder that changes the
   RMT's registration version (how other processes learn that something changed), the
   journal fsync'ed;
5. **the switch, one metadata transaction**: the old row is renamed
   ``.incoming/retired-<hex>`` (and the replicas' rows with it), the new row gets the name,
   the size, ``dirty`` = 0.  Another placeholder pair announces it;
6. the old data files are removed: at once when the store is open exclusively, else by the
   last process to close the store (a reader in another process may still read the old
   copy: its handle keeps the old id, and a data file it has not opened yet must still be
   there), or by the next opener that has the store to itself (recovery).

A crash at any point leaves the name on the old file or on the new one, each complete: the
switch is one SQLite transaction (WAL, ``synchronous=FULL``), and the new copy is durable
before it.  What a crash leaves behind is hidden under ``.incoming/`` and removed by the
recovery of the next lone opener (data files first, then the row: no orphan data), so
``pario store fsck`` is clean after the next open.

**Replicas are dropped, not carried over.**  Their RMT entries name the original's file id;
carrying them over would mean re-registering every replica and re-adding every entry in
the journal, which cannot be one transaction with the metadata switch.  Dropping is one
journal transaction before the switch, and right: after the write-back every byte is in
the original, and a plan that gives the file a new layout gives the replicas that suit it
(``pario replicate`` applies the layouts first and then copies the plan's replicas, against
the new file id).  A replica file another process may still read is retired with the old
copy; a file with an unfinished replicator job is refused (a replicator may be copying it:
``pario replicate --resume`` first).

Other processes (shared store): a process that opened the file before the switch keeps the
old copy for reading — as a descriptor of a file replaced by ``rename`` keeps the old inode —
until it reopens the file; its writes are refused with one line (the write path compares
the RMT's registration version and, when it changed, checks the name still names its file
id: :meth:`pario.store.redirect.File.revalidate`), never lost.  Processes that open the file
after the switch get the new copy.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from .. import ParioError
from ..layout import (
    ExtentMap,
    Layout,
    describe,
    layout_from_dict,
    layout_to_dict,
    map_requests,
    parse_layout,
)
from .copies import COPY_CHUNK
from ..units import format_size
from .rmt import PARTIAL, ROUTES
from .root import INCOMING_PREFIX, RESERVED, Store

CHUNK = COPY_CHUNK                      # bytes per copy step (one read, one write, one read-back: 8 MiB)
RELAYOUT_PREFIX = INCOMING_PREFIX + "relayout-"    # the new copy while it is filled
RETIRED_PREFIX = INCOMING_PREFIX + "retired-"      # the old copy (and its replicas) after the switch
WHOLE = 1 << 52                        # the range lock's bound: offsets below 2^52 (docs/store.md)
PLACEHOLDER = "relayout"               # name of the placeholder replica that announces a relayout


@dataclass
class RelayoutResult:
    """What :func:`relayout` did: ``changed`` False when the file had the layout already."""

    name: str
    old: Layout
    new: Layout
    size: int = 0
    moved: int = 0                     # bytes written to the new copy (holes excluded)
    seconds: float = 0.0
    changed: bool = False
    replicas_dropped: list[str] = field(default_factory=list)
    old_removed: bool = False          # False: retired, removed when the last process closes the store
                                       # (JSON "old_copy": "removed" | "retired")

    def describe(self, system) -> str:
        """One line: name, old → new layout, bytes moved, time."""
        old, new = describe(self.old, system), describe(self.new, system)
        if not self.changed:
            return f"{self.name}: layout {new} already"
        line = (f"{self.name}: {old} → {new}: {format_size(self.moved)} moved "
                f"({format_size(self.size)} file) in {self.seconds:.2f} s")
        if self.replicas_dropped:
            line += f"; replicas dropped: {', '.join(self.replicas_dropped)}"
        return line

    def to_dict(self, system) -> dict:
        return {"file": self.name, "status": "relaid" if self.changed else "unchanged",
                "from": describe(self.old, system), "to": describe(self.new, system),
                "from_layout": layout_to_dict(self.old, system), "to_layout": layout_to_dict(self.new, system),
                "size": self.size, "moved_bytes": self.moved, "seconds": round(self.seconds, 6),
                "replicas_dropped": list(self.replicas_dropped),
                "old_copy": "removed" if self.old_removed or not self.changed else "retired"}


def target_layout(store: Store, layout) -> Layout:
    """The layout to relay a file to (spec string, JSON dict or Layout), checked against the
    store's profile (one-line ParioError)."""
    if isinstance(layout, dict):
        lay = layout_from_dict(layout, store.system)
    else:
        lay = parse_layout(layout, store.system)
    bad = [s for s in lay.servers_used() if s >= store.system.n]
    if bad:
        raise ParioError(f"layout uses server index {bad[0]} but store {store.root} (system "
                         f"{store.system.name!r}) has {store.system.n} servers")
    if isinstance(lay, ExtentMap):
        raise ParioError("an 'extents' layout is a replica's extent map, not a file layout: "
                         "relayout takes striped, fixed, grouped or regions layouts")
    return lay


def _pending_jobs(store: Store, name: str) -> list[str]:
    return [r for r, spec, _ in store.rmt.jobs(pending_only=True) if spec.get("original") == name]


def _refuse_pending(store: Store, name: str) -> None:
    jobs = _pending_jobs(store, name)
    if jobs:
        raise ParioError(f"relayout {name!r}: replica {jobs[0]!r} has an unfinished replicator job (a replicator "
                         f"may be copying it); finish it first with 'pario replicate --resume --store {store.root}'")


def _check_space(store: Store, layout: Layout, size: int) -> None:
    """The new copy must fit beside the old one: per file system of the server directories."""
    if size <= 0:
        return
    sub = map_requests(layout, np.array([0]), np.array([size]))
    need = np.bincount(sub.server, weights=sub.length, minlength=store.system.n).astype(np.int64)
    free = store.backend.free_space()
    by_dev: dict[int, list[int]] = {}
    for j, d in enumerate(store.backend.server_dirs):
        by_dev.setdefault(os.stat(d).st_dev, []).append(j)
    for servers in by_dev.values():
        n = int(need[servers].sum())
        f = int(free[servers[0]])
        if n > f:
            names = ",".join(store.system.names[j] for j in servers)
            raise ParioError(f"relayout needs {format_size(n)} on the file system of server(s) {names}, "
                             f"{format_size(f)} free (the old copy stays until the new one is complete)")


def _announce(core, o: int, r: int) -> None:
    """A REGISTER + DROP pair of placeholder replica ``r`` of ``o``: no entry, no lasting
    state, but the registration version changes in every process that follows the journal
    (inside the caller's transaction).  The journal's records survive a kill one by one
    (the next first opener replays every valid record, published or not), so a kill between
    the two leaves the registration: a *partial* replica without entries, which no read,
    write or growth ever touches, dropped by :func:`drop_dead_registrations`."""
    core.register(r, o, PARTIAL, ROUTES["replica"], PLACEHOLDER)
    core.drop(r)


def drop_dead_registrations(store: Store) -> int:
    """Drop replica registrations that hold nothing (no entry) and whose replica or original
    file is gone — what a relayout killed inside its announcement leaves.  Only when alone
    (recovery, the last process closing).  Returns how many."""
    ids = store.backend.meta.ids()
    core = store.rmt.core
    dead = [t[0] for t in core.replicas() if t[7] == 0 and (t[0] not in ids or t[1] not in ids)]
    if dead:
        with store.rmt.transaction():
            for r in dead:
                core.drop(r)
    return len(dead)


def _switch(store: Store, name: str, old_id: int, new_id: int, size: int, retire: list[tuple[int, str]]) -> None:
    """One metadata transaction: the old row (and ``retire``: (id, new name) of its replicas'
    rows) out of the way, the new row named ``name`` with its final size; the renames go to
    the store's catalog (the engine's ``pxs_meta_switch``)."""
    be = store.backend
    with be._lock:
        be.meta.switch(name, old_id, new_id, size, retire)


def _sync_dirs(store: Store, layout: Layout) -> None:
    """fsync the directories of the servers ``layout`` uses (new data files' entries)."""
    for j in layout.servers_used():
        fd = os.open(store.backend.server_dirs[j], os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _retire_late(store: Store, ids: list[int], stamp: str) -> None:
    """Rows of replicas registered during the relayout (dropped after the switch): hidden
    with the old copy (best effort: else the next lone opener removes them as unowned)."""
    meta = store.backend.meta
    names = meta.ids()
    for k, r in enumerate(ids):
        n = names.get(r)
        if n is None or n.startswith(INCOMING_PREFIX) or n in store._files:
            continue
        try:
            meta.rename(n, f"{RETIRED_PREFIX}{stamp}-late{k}")
        except ParioError:
            pass


def _copy(store: Store, src, dst, size: int, chunk: int, progress) -> int:
    """``[0, size)`` of handle ``src`` into handle ``dst`` chunk by chunk, each read back and
    compared; returns the bytes written (all-zero chunks are left as holes)."""
    be = store.backend
    buf = bytearray(min(chunk, max(size, 1)))
    chk = bytearray(len(buf))
    moved = 0
    pos = 0
    while pos < size:
        c = min(len(buf), size - pos)
        b, k = memoryview(buf)[:c], memoryview(chk)[:c]
        be.readv(src, (pos,), (c,), b, (0,))
        if np.frombuffer(b, dtype=np.uint8).any():
            be.writev(dst, (pos,), (c,), b, (0,))
            be.readv(dst, (pos,), (c,), k, (0,))
            if k != b:
                bad = int(np.flatnonzero(np.frombuffer(b, np.uint8) != np.frombuffer(k, np.uint8))[0])
                raise ParioError(f"the new copy reads back differently at offset {pos + bad}")
            moved += c
        pos += c
        if progress:
            progress("copy", pos, size)
    return moved


def relayout(store: Store, name: str, layout, *, chunk: int = CHUNK, progress=None) -> RelayoutResult:
    """Rewrite file ``name`` of ``store`` with ``layout`` (module docstring).

    ``progress(stage, done, total)`` is called after each copied chunk (stage ``"copy"``)
    and at ``"copied"``, ``"dropped"``, ``"switched"`` and ``"removed"``.  Returns a
    :class:`RelayoutResult`; a file that has the layout already is left alone."""
    st = store
    be, rmt = st.backend, st.rmt
    core = rmt.core
    if not isinstance(name, str) or name.startswith(RESERVED):
        raise ParioError(f"relayout: {name!r} is not a user file")
    rec = be.meta.get(name)
    if rec is None:
        raise ParioError(f"relayout: no file {name!r} in store {st.root}")
    new = target_layout(st, layout)
    old = layout_from_dict(rec[1], st.system)
    res = RelayoutResult(name, old, new)
    if layout_to_dict(old, st.system) == layout_to_dict(new, st.system):
        res.size = st.stat(name).size
        return res
    chunk = int(chunk)
    if chunk <= 0:
        raise ParioError("relayout: the chunk size must be > 0")
    if name in st._files:
        raise ParioError(f"relayout: file {name!r} is open in this process; close it first")
    _refuse_pending(st, name)
    t0 = time.monotonic()
    tmp = f"{RELAYOUT_PREFIX}{uuid.uuid4().hex}"
    f = st.open(name)
    old_id = f.fid
    locked = switched = dropped = False
    nh = None
    reps: list[tuple[int, str]] = []
    stamp = uuid.uuid4().hex
    try:
        if st.shared:
            core.lock(old_id, 0, WHOLE, True)
            locked = True
            _refuse_pending(st, name)            # again, under the lock: no replicator mid-chunk now
        f.ef.writeback()                         # the newest bytes (DIRTY replicas) to the original first
        size = f.current_size()
        res.size = size
        _check_space(st, new, size)
        be.create(tmp, new)
        nh = be.open(tmp)
        new_id = nh.id
        oh = be.open(name)
        try:
            res.moved = _copy(st, oh, nh, size, chunk, progress)
        finally:
            be.close(oh)
        if nh.size < size:
            be.truncate(nh, size)                # trailing holes
        be.fsync(nh)                             # the new copy durable before anything points at it
        be.close(nh)
        nh = None
        _sync_dirs(st, new)                      # ... its data files' directory entries too
        if progress:
            progress("copied", size, size)
        with rmt.transaction():                  # listed and dropped under the journal lock: all of them
            reps = [(t[0], t[5]) for t in core.replicas() if t[1] == old_id]
            for r, _ in reps:
                core.drop(r)
            _announce(core, old_id, new_id)
        rmt.sync()                               # the drops durable before the metadata forgets the old id
        dropped = True
        res.replicas_dropped = [n for _, n in reps]
        if progress:
            progress("dropped", size, size)
        f.close()                                # nothing left to flush: the file has no entries now
        f = None
        retire = [(old_id, f"{RETIRED_PREFIX}{stamp}")]
        retire += [(r, f"{RETIRED_PREFIX}{stamp}-{k}") for k, (r, _) in enumerate(reps)]
        _switch(st, name, old_id, new_id, size, retire)
        switched = True
        with rmt.transaction():
            # a replicator of another process that registered a replica meanwhile (against the
            # old id): dropped too — it stops at its next chunk (Replicator._still_wanted)
            late = [t[0] for t in core.replicas() if t[1] == old_id]
            for r in late:
                core.drop(r)
            _announce(core, old_id, new_id)
        _retire_late(st, late, stamp)
        if progress:
            progress("switched", size, size)
    except BaseException as exc:
        if not switched:
            if nh is not None:
                be.close(nh)
            try:
                be.discard(tmp)                  # data files first: frees the space even on a full disk
                rmt.forget(tmp)
                if dropped:                      # no row of a dropped replica left under its name
                    _retire_late(st, [r for r, _ in reps], stamp)
            except Exception:  # noqa: BLE001, S110 - the original error is the one to report; recovery removes it
                pass
            after = "; its replicas were dropped" if dropped else ""
            why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
            prefix = f"relayout {name!r}: "
            why = why.removeprefix(prefix)
            if isinstance(exc, (OSError, ParioError)):
                raise ParioError(f"{prefix}{why} (the file is unchanged{after})") from None
        raise
    finally:
        if f is not None:
            f.close()
        if locked:
            core.unlock(old_id, 0, WHOLE)
    if not st.shared:
        purge_retired(st)
        res.old_removed = True
        if progress:
            progress("removed", res.size, res.size)
    res.changed = True
    res.seconds = time.monotonic() - t0
    return res


def purge_retired(store: Store) -> int:
    """Remove the old copies of relaid files (``.incoming/retired-…``: data files first,
    then the row).  Only when nobody else can read them: the store open exclusively, or the
    last process closing it.  Best effort (the next lone opener's recovery removes what is
    left); returns the files removed."""
    done = 0
    for n in store.backend.list():
        if not n.startswith(RETIRED_PREFIX):
            continue
        try:
            store.backend.discard(n)
            store.rmt.forget(n)
            done += 1
        except (OSError, ParioError):
            pass
    drop_dead_registrations(store)
    return done


__all__ = [
    "CHUNK",
    "RELAYOUT_PREFIX",
    "RETIRED_PREFIX",
    "RelayoutResult",
    "drop_dead_registrations",
    "purge_retired",
    "relayout",
    "target_layout",
]
