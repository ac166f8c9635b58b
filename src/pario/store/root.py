"""A store root: configuration, opening, recovery and the file namespace.

Directory layout::

    DIR/store.json        {"pario_store": 1, "id": …, "backend": "local", "system": NAME,
                           "profile": {…system profile…}, "servers": {"H0": "servers/H0", …}}
    DIR/meta.db           file metadata (SQLite): name → id, layout JSON, size
    DIR/rmt.log           the replica mapping table: a journal (see pario.store.rmt)
    DIR/servers/NAME/     one directory per server (default; ``--server NAME=PATH`` elsewhere)
    DIR/.lock             flock: exclusive (one process) or shared (``shared=True``)
    DIR/.sync.lock        shared mode: byte-range locks of writes and synchronisation

:func:`init_store` creates a store for a system profile; :class:`Store` opens one: it checks
every server directory, opens the metadata and the RMT (a corrupt database is a one-line
error) and *recovers* (:meth:`Store.recover`): files with unclean RMT entries left by a crash
are flushed, entries past a file's end dropped, unregistered replica files removed, and
after a crash of another boot (a power failure: the journal was not closed cleanly and the
machine rebooted since) every CLEAN entry is verified byte for byte first.
Replica files live in the same namespace under ``.replica/<original>/<name>``.

``Store(root, shared=True)`` lets several processes (MPI ranks) use one store at once:
``LOCK_SH`` on ``.lock`` (an exclusive opener is refused, and refuses them); the first
shared opener holds ``LOCK_EX`` while it recovers, the others wait for it (every wait has a
timeout, ``lock_timeout``).  Data-path I/O, ``create``, ``flush``, lazy synchronisation and
the replicator work from any process (range locks, :mod:`pario.store.redirect`);
``delete`` and ``delete_replica``, which other processes could trip over, need the store
opened exclusively.  The last process to close (it can take ``LOCK_EX``) flushes what is
left, commits final sizes, compacts the RMT journal and marks it closed cleanly.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

from .. import ParioError
from ..layout import Layout, parse_layout
from ..system import System
from .locks import StoreLock, check_coord, store_timeout
from .meta import Meta, with_report
from .planes import PLANES
from .redirect import File
from .rmt import CLEAN, FRESH, RMT, STALE, _core_module

CONFIG = "store.json"
REPLICA_PREFIX = ".replica/"
INCOMING_PREFIX = ".incoming/"    # a `put` in progress: renamed to its name when complete
RESERVED = (REPLICA_PREFIX, INCOMING_PREFIX)


def replica_name(original: str, name: str) -> str:
    return f"{REPLICA_PREFIX}{original}/{name}"


def _oserror(exc: OSError) -> str:
    """One line for an operating-system error on a path (ENOSPC, EACCES, ENOENT, EROFS …)."""
    where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
    return f"{where}{exc.strerror or exc}"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def init_store(root, system, servers: dict[str, str] | None = None, *, exist_ok: bool = False,
               backend: str = "local", cluster=None, object_size: int | None = None, coord: str = "host") -> Path:
    """Create a store at ``root`` for ``system`` (profile name, file or System) on the data
    plane ``backend`` (a name of :data:`pario.store.planes.PLANES`).

    The plane's options (:meth:`~pario.store.base.Backend.configure`): ``local``: ``servers``
    maps server names to directories (other mounts); the rest default to
    ``root/servers/NAME``; ``rados``: the data on the Ceph cluster of the directory
    ``cluster`` (one pool per server; ``system`` defaults to the cluster's profile
    (calibrated.toml, else nominal.toml); ``object_size`` of :mod:`pario.store.rados`).
    ``coord``: how processes share it (store.json ``"coord"``, docs/store.md "Coordination"):
    ``host`` the processes of one machine, ``pfs`` processes on the nodes of a parallel file
    system holding ``root`` (docs/multinode.md); ``rados`` (only with the rados plane) is
    designed but refused (:data:`pario.store.locks.PLANNED_MEMBERS`).  Returns the root path.
    """
    root = Path(root)
    plane = PLANES.get(backend)
    check_coord(coord, backend)
    system, entries = plane.configure(system, servers=servers, cluster=cluster, object_size=object_size)
    if (root / CONFIG).exists():
        if exist_ok:
            return root
        raise ParioError(f"{root} is already a store ({CONFIG} exists)")
    if root.exists() and not root.is_dir():
        raise ParioError(f"{root} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()):
        raise ParioError(f"{root} is not empty: a store needs a new or empty directory")
    from .gc import check_server_dirs_unused, mark_server_dirs

    outside = {n: d for n, d in (entries.get("servers") or {}).items() if Path(d).is_absolute()}
    check_server_dirs_unused(outside)          # another store's data files would be this one's orphans
    made = {d for d in outside.values() if not Path(d).exists()}
    root.mkdir(parents=True, exist_ok=True)
    plane.prepare(root, entries)
    cfg = {"pario_store": 1, "id": uuid.uuid4().hex, "backend": plane.name, "system": system.name,
           "profile": system.to_dict(), **entries}
    if outside:
        mark_server_dirs(root, cfg, made)      # what 'pario store gc' finds once the store is gone
    if coord != "host":
        cfg["coord"] = coord
    if coord == "rados" and "pools" in entries:
        # the journal, locks and metadata are small random writes: on the pool of the server
        # whose random write costs least (α of the profile), not on an HDD's by position
        fast = min(system.servers, key=lambda s: (s.alpha_for(1, False), s.name))
        cfg["coord_pool"] = entries["pools"][fast.name]
    _atomic_write(root / CONFIG, json.dumps(cfg, indent=2) + "\n")
    Meta(root / "meta.db", may_create=True, coord=coord).close()     # from now on its absence is a loss (Meta)
    return root


def _migrate_old_rmt(root: Path) -> None:
    """A store made by pario before the RMT journal (``rmt.db``): its table becomes the
    journal's first records, with the store to itself."""
    from .rmt import _migrate

    lock = StoreLock(root / ".lock")
    try:
        if not lock.try_exclusive():
            raise ParioError(f"store {root} was made before the RMT journal and is in use: migrate it with "
                             f"'pario store ls --store {root}' while nothing else uses it")
        meta = Meta(root / "meta.db")
        try:
            _migrate(root, meta, _core_module())
        finally:
            meta.close()
    finally:
        lock.close()


def read_config(root) -> dict:
    root = Path(root)
    p = root / CONFIG
    if p.is_symlink():
        raise ParioError(f"{p} is a symbolic link: pario never follows a link it did not make")
    if not p.exists():
        raise ParioError(f"{root} is not a pario store (no {CONFIG}; create one with 'pario store init')")
    try:
        cfg = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParioError(f"{p}: unreadable store configuration ({exc})") from None
    if not isinstance(cfg, dict) or cfg.get("pario_store") != 1:
        raise ParioError(f"{p}: not a pario store configuration")
    return cfg


def _holds_anything(root: Path, plane, options: dict) -> bool:
    """The store holds something a missing metadata database would lose: a catalog, a
    journal record, a data file (a new store may create its database)."""
    from .catalog import CATALOG
    from .locks import shared_record
    from .rmt_journal import HDR_SIZE, HEADER

    if shared_record(root, CATALOG) is not None:
        return True
    raw = shared_record(root, "rmt.log") or b""
    try:
        if HEADER.unpack(raw[:HEADER.size])[4] > HDR_SIZE:      # end: records were published
            return True
    except Exception:  # noqa: BLE001 - struct.error: a short header is no record
        pass
    return plane.holds_data(**options)


class Store:
    """An open store: the store engine (locks, metadata, RMT, data planes, redirection, in C)
    + the open files, with crash recovery at open.

    ``direct=True`` uses O_DIRECT for data files; ``cost`` overrides the hybrid routing
    cost ``cost(layout, offset, length) -> s`` (default: the profile's per-request cost, in
    the engine).  ``shared=True``: several processes may open the store at once (module
    docstring); ``lock_timeout`` bounds every wait for another process (seconds).
    """

    #: this implementation supports ``shared=True`` (pario.mpi.storeio checks it)
    supports_shared = True

    def __init__(self, root, *, direct: bool = False, cost=None, recover: bool = True, shared: bool = False,
                 lock_timeout: float | None = None, unverified_ok: bool = False):
        self.root = Path(root)
        cfg = read_config(self.root)
        self.config = cfg
        self.id = cfg.get("id", "")
        self.system = System.from_dict(cfg["profile"], origin=str(self.root / CONFIG))
        try:
            plane = PLANES.get(cfg.get("backend", "local"))
        except ParioError:
            raise ParioError(f"store backend {cfg.get('backend')!r} is not available "
                             f"(known: {PLANES.known()})") from None
        options = plane.options(self.root, self.system, cfg)
        self.shared = bool(shared)
        self.lock_timeout = store_timeout() if lock_timeout is None else float(lock_timeout)
        # a missing or emptied meta.db: created only for a store that holds nothing yet
        Meta.ensure(self.root / "meta.db", lambda: not _holds_anything(self.root, plane, options))
        if not (self.root / "rmt.log").exists() and (self.root / "rmt.db").exists():
            _migrate_old_rmt(self.root)
        eng = _core_module()
        try:
            self.engine = eng.Engine(str(self.root), self.shared, bool(direct), self.lock_timeout, bool(unverified_ok))
        except ParioError as exc:
            raise with_report(exc, self.root / "meta.db") from None
        first = bool(self.engine.first)
        # every wait's bound as the engine keeps it: a coordination member may raise the one
        # asked for (coord/rados.c: at least libcephsqlite's lease + the member's + a margin)
        self.lock_timeout = float(self.engine.timeout)
        self.backend = self.rmt = None
        try:
            meta = Meta.over(self.engine.meta(), self.root / "meta.db")
            self.backend = plane(self.root, self.system, self.engine, meta, **options)
            self.rmt = RMT(self.root, meta, self.engine.core(), shared=self.shared)
        except BaseException:
            if self.backend is not None:
                self.backend.shutdown()
            self.engine.close()
            raise
        self.cost = cost
        if cost is not None:
            be = self.backend
            self.engine.set_cost(lambda fid, off, n: float(cost(be.layout_of(fid), off, n)))
        self.fg_last = 0.0
        self.recovering = False
        self.verified_ranges: list | None = None     # recovery verified the replicas: the ranges that differed
        self._files: dict[str, File] = {}
        self._lock = threading.RLock()
        self.closed = False
        try:
            if self.rmt.stats()["verify"] and not (recover and first) and not unverified_ok:
                raise ParioError(self.unverified_message())
            if recover and first:
                self.recover()
            if first:
                self.engine.share()      # final sizes, then the lock shared (a shared store)
        except BaseException:
            self.close()
            raise

    @property
    def unverified(self) -> bool:
        """The store ended uncleanly in another boot and its replicas were not verified yet
        (the journal header's ``verify`` flag): nothing may be served from it."""
        return bool(self.rmt.stats()["verify"])

    def unverified_message(self) -> str:
        return (f"store {self.root} was not closed cleanly before the machine rebooted: its replicas must be "
                "verified byte for byte before it serves, and another process has it open; run "
                f"'pario store fsck --store {self.root}' while no program uses it")

    def _need_exclusive(self, what: str) -> None:
        if self.shared:
            raise ParioError(f"{what} needs the store opened exclusively (it is open in shared mode: "
                             "other processes may be using it)")

    # ------------------------------------------------------------------ recovery
    def recover(self) -> list[str]:
        """Bring the store to a consistent state after a crash (this process is alone):

        1. replica files (``.replica/…``) that no replica registration or pending
           replicator job owns are deleted (a replicator killed between creating and
           registering), and so are unfinished uploads (``.incoming/…``: a killed ``put``),
           and registrations a relayout killed inside its announcement left;
        2. after a crash in another boot (the journal was not closed cleanly, and the machine
           rebooted since: a power failure may have lost journal records that were not yet
           durable, while data pages reached the disk), FRESH entries become STALE and every
           CLEAN entry is compared byte for byte with the original; where they differ, a
           write was not acknowledged as durable, and the copy reads were served from wins
           (CEDA route: the replica; hybrid: the original) — :meth:`verify_clean`.  The
           decision is the journal header's ``verify`` flag, set by the C core before it
           stamps this boot's id (``rmt_open``), so a recovery killed midway is redone by
           the next opener, and every other opener refuses the store until it is done;
        3. the engine's recovery (``pxs_store_recover``, as a C first opener's): the shadow
           files of MPI opens that never closed removed, entries past an original's end
           dropped (a hybrid full replica grown for an extending write whose size never
           committed), every file with unclean entries flushed (COPYING entries of a
           replicator that is gone count as STALE), the journal synced;
        4. then the ``verify`` flag cleared (durable).

        Returns the names of the files that had unclean entries."""
        rmt = self.rmt
        self.recovering = True
        try:
            pending = {r for r, _, _ in rmt.jobs(pending_only=True)}
            owned = {r["r_file"] for r in rmt.replicas()} | pending
            for name in self.backend.list():
                if name.startswith(INCOMING_PREFIX):          # a `put` that did not finish
                    self.backend.discard(name)
                elif name.startswith(REPLICA_PREFIX) and name not in owned and name not in self._files:
                    self.backend.delete(name)
                    rmt.forget(name)
            from .relayout import drop_dead_registrations
            drop_dead_registrations(self)     # a relayout killed inside its announcement
            verify = bool(rmt.stats()["verify"])
            if verify:
                self.distrust_fresh()
                self.verified_ranges = self.verify_clean()
            done = [n for n in rmt.files_with_unclean() if self.backend.exists(n)]
            self.engine.recover()
            if verify:
                rmt.core.verified()
            return done
        finally:
            self.recovering = False

    def distrust_fresh(self) -> None:
        """After a power failure: FRESH entries (copied, not known to be on disk) become
        STALE, to be refreshed from the original."""
        core = self.rmt.core
        with self.rmt.transaction():
            for r, o, *_ in core.replicas():
                core.set_flag(o, r, 0, 1 << 62, FRESH, STALE)

    def settle_fresh(self) -> None:
        """fsync the data files of every replica with FRESH entries, then make those entries
        CLEAN (trusted after a power failure): the engine's ``pxs_store_settle_fresh``."""
        self.engine.settle_fresh()

    def verify_clean(self, chunk: int = 8 << 20) -> list[tuple[str, int, int]]:
        """Compare every CLEAN entry with the original; where they differ, record the copy
        reads were served from as the newest (CEDA: the replica DIRTY; hybrid: the original,
        replicas STALE), for the flush to propagate.  Returns the ranges that differed."""

        rmt, be = self.rmt, self.backend
        differ = []
        routes = {r["r"]: r["route"] for r in rmt.replicas()}
        for o in rmt.files():
            name = rmt.name(o)
            if name is None or not be.exists(name):
                continue
            oh = be.open(name)
            try:
                for r, off, n, ro, f in rmt.core.entries(o):
                    n = min(n, oh.size - off)           # entries past the end: dropped by the recovery
                    if f != CLEAN or n <= 0:
                        continue
                    rname = rmt.name(r)
                    if rname is None or not be.exists(rname):
                        continue
                    rh = be.open(rname)
                    try:
                        pos = 0
                        while pos < n:
                            c = min(chunk, n - pos)
                            a, b = bytearray(c), bytearray(c)
                            be.readv(oh, (off + pos,), (c,), a, (0,))
                            be.readv(rh, (ro + pos,), (c,), b, (0,))
                            if a != b:
                                target = 0 if routes.get(r) == "cheapest" else r
                                rmt.core.mark(o, target, off + pos, off + pos + c)
                                differ.append((name, off + pos, c))
                            pos += c
                    finally:
                        be.close(rh)
            finally:
                be.close(oh)
        return differ

    # ------------------------------------------------------------------ namespace
    def _check_name(self, name: str) -> str:
        """A user file's name: a name (:func:`pario.names.check_name`: no control character,
        at most 4096 bytes) outside the reserved namespaces."""
        from ..names import check_name

        check_name(name)
        if name.startswith(RESERVED):
            raise ParioError(f"bad file name {name!r} (in a reserved namespace: {', '.join(RESERVED)})")
        return name

    def layout(self, spec) -> Layout:
        return parse_layout(spec, self.system)

    def create(self, name: str, layout, *, exist_ok: bool = False) -> None:
        self.backend.create(self._check_name(name), self.layout(layout), exist_ok=exist_ok)

    def exists(self, name: str) -> bool:
        return self.backend.exists(name)

    def files(self) -> list[str]:
        """User files (replica files excluded)."""
        return [n for n in self.backend.list() if not n.startswith(RESERVED)]

    def open(self, name: str, *, create_layout=None) -> File:
        """Open a file (``create_layout``: create it with that layout if absent)."""
        with self._lock:
            f = self._files.get(name)
            if f is not None:
                f.refs += 1
                return f
            if create_layout is not None and not self.backend.exists(name):
                self.create(name, create_layout, exist_ok=True)   # another process may win the race
            f = File(self, name)
            self._files[name] = f
            return f

    def _release(self, f: File) -> None:
        with self._lock:
            f.refs -= 1
            if f.refs > 0:
                return
            f._close_now()
            self._files.pop(f.name, None)

    def stat(self, name: str):
        return self.backend.stat(name)

    def relayout(self, name: str, layout, **kw):
        """Rewrite file ``name`` with another layout, crash-safe and online
        (:func:`pario.store.relayout.relayout`); returns its RelayoutResult."""
        from .relayout import relayout
        return relayout(self, name, layout, **kw)

    def delete(self, name: str) -> None:
        """Delete a file and its replicas."""
        self._need_exclusive(f"deleting {name!r}")
        if name in self._files:
            raise ParioError(f"file {name!r} is open")
        for r in self.rmt.replicas(name):
            self.rmt.unregister(r["r_file"])
            if self.backend.exists(r["r_file"]):
                self.backend.delete(r["r_file"])
            self.rmt.forget(r["r_file"])
        self.backend.delete(name)
        self.rmt.forget(name)

    def delete_replica(self, r_file: str) -> None:
        """Drop one replica (its data and RMT entries); dirty data is flushed first."""
        self._need_exclusive(f"dropping replica {r_file!r}")
        rows = [r for r in self.rmt.replicas() if r["r_file"] == r_file]
        if rows:
            f = self.open(rows[0]["o_file"])
            f.flush()
            f.close()
        self.rmt.unregister(r_file)
        if self.backend.exists(r_file):
            self.backend.delete(r_file)
        self.rmt.forget(r_file)

    # ------------------------------------------------------------------ whole-file helpers
    def put(self, src, name: str, layout, *, chunk: int = 16 << 20) -> int:
        """Copy a local file into the store with ``layout``; returns bytes copied.

        All or nothing: the bytes go to a hidden file (``.incoming/…``), made durable, then
        renamed to ``name`` in one metadata update.  Any failure (a full disk, an unreadable
        source, an interrupt) removes the hidden file at once; a killed ``put`` leaves one
        that the next store command to open the store alone removes (:meth:`recover`)."""
        import uuid

        src = Path(src)
        self._check_name(name)
        lay = self.layout(layout)
        if not src.is_file():
            raise ParioError(f"{src}: no such file" if not src.exists() else f"{src}: not a regular file")
        if self.exists(name):
            raise ParioError(f"file {name!r} already exists in the store")
        tmp = f"{INCOMING_PREFIX}{uuid.uuid4().hex}"
        self.backend.create(tmp, lay)
        total = 0
        try:
            f = self.open(tmp)
            try:
                buf = bytearray(chunk)
                with open(src, "rb", buffering=0) as fh:
                    while True:
                        n = fh.readinto(buf)
                        if not n:
                            break
                        f.write(total, memoryview(buf)[:n])
                        total += n
                f.fsync()
            finally:
                f.close()
            self.backend.rename(tmp, name)
        except BaseException as exc:
            try:
                self.backend.discard(tmp)
            except Exception:  # noqa: BLE001 - the original error is the one to report; recovery removes it later
                pass
            if isinstance(exc, OSError):
                raise ParioError(f"store put {src} → {name!r}: {_oserror(exc)} (nothing was stored)") from None
            if isinstance(exc, ParioError):
                raise ParioError(f"store put {src} → {name!r}: {exc} (nothing was stored)") from None
            raise
        return total

    def check_size(self, name: str) -> None:
        """ParioError if the data files of ``name`` hold bytes past its recorded size while
        the metadata says the size is final (``dirty`` = 0): a committed size was lost (e.g.
        the metadata's write-ahead log deleted after a crash) and reading the file would
        silently return it short."""
        problem = self.backend.size_problem(name)
        if problem:
            raise ParioError(f"{problem}; the file is incomplete as recorded: run 'pario store fsck --store {self.root}'")

    def get(self, name: str, dst, *, chunk: int = 16 << 20) -> int:
        """Copy a store file out to a local file; returns bytes copied."""
        if not self.backend.exists(name):
            raise ParioError(f"no file {name!r} in the store")
        self.check_size(name)
        f = self.open(name)
        try:
            buf = bytearray(chunk)
            try:
                out = open(dst, "wb")
            except OSError as exc:
                raise ParioError(f"store get {name!r} → {dst}: {exc.strerror or exc}") from None
            try:
                pos = 0
                while pos < f.size:
                    n = f.readinto(pos, buf)
                    out.write(memoryview(buf)[:n])
                    pos += n
                out.close()
            except OSError as exc:
                out.close()
                Path(dst).unlink(missing_ok=True)       # no partial copy left behind
                raise ParioError(f"store get {name!r} → {dst}: {exc.strerror or exc} (no partial copy kept)") from None
            return pos
        finally:
            f.close()

    # ------------------------------------------------------------------ synchronisation
    def drain(self) -> None:
        """Hybrid replicas of the open files synchronised now (what the engine's lazy-sync
        thread would do in the background)."""
        for f in list(self._files.values()):
            while f.sync_step():
                pass

    def flush(self) -> list[str]:
        """Flush every file with DIRTY/STALE entries; returns their names."""
        names = self.rmt.files_with_unclean()
        self.engine.flush_all()
        return names

    def close(self) -> None:
        """Close every file; the last process out (alone) removes relaid files' old copies
        and does the engine's last-closer work (flush, final sizes, FRESH → CLEAN, compaction,
        the clean mark; nothing while a power-loss verification is pending)."""
        if self.closed:
            return
        try:
            for f in list(self._files.values()):
                f.refs = 1
                f.close()
            if self.rmt is not None and self.engine.alone():
                if not self.unverified:
                    from .relayout import purge_retired
                    purge_retired(self)          # old copies of relaid files: nobody can read them now
                self.engine.close_alone()
        finally:
            self.closed = True
            try:
                if self.backend is not None:
                    self.backend.shutdown()
                if self.rmt is not None:
                    self.rmt.close()
            finally:
                self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_store(root, **kw) -> Store:
    return Store(root, **kw)
