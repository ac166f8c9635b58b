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
from ..system import System, load_system
from .hybrid import LazySync, profile_cost
from .local import LocalBackend
from .locks import StoreLock, _poll, store_timeout
from .meta import Meta
from .redirect import File
from .rmt import CLEAN, FRESH, RMT, STALE

CONFIG = "store.json"
REPLICA_PREFIX = ".replica/"
INCOMING_PREFIX = ".incoming/"    # a `put` in progress: renamed to its name when complete
RESERVED = (REPLICA_PREFIX, INCOMING_PREFIX)
JOURNAL_COMPACT_MIN = 4 << 20     # compact the RMT journal at close beyond this size (and 4x its state)


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
               backend: str = "local", cluster=None, object_size: int | None = None) -> Path:
    """Create a store at ``root`` for ``system`` (profile name, file or System).

    ``servers`` maps server names to directories (other mounts); the rest default to
    ``root/servers/NAME``.  ``backend="rados"``: the data on the Ceph cluster of the
    directory ``cluster`` (one pool per server; ``system`` defaults to the cluster's
    profile (calibrated.toml, else nominal.toml); ``object_size`` of :mod:`pario.store.rados`).  Returns the root path.
    """
    root = Path(root)
    if backend not in ("local", "rados"):
        raise ParioError(f"unknown store backend {backend!r} (local, rados)")
    if backend == "rados":
        from ..cluster.core import profile_path
        from .rados import OBJECT_SIZE, rados_config

        if cluster is None:
            raise ParioError("the rados backend needs --cluster CLUSTER_DIR (a 'pario cluster up' directory)")
        if servers:
            raise ParioError("--server does not apply to the rados backend (every server is a pool)")
        from ..cluster.state import load_state

        cdir = Path(load_state(cluster).dir)       # a one-line error if it is not a cluster
        if system is None:
            system = profile_path(cdir)
    system = load_system(system)
    if backend == "rados":
        extra = rados_config(cluster, system, OBJECT_SIZE if object_size is None else object_size)
    servers = dict(servers or {})
    unknown = [n for n in servers if n not in system.names]
    if unknown:
        raise ParioError(f"--server {unknown[0]}: no such server in system {system.name!r} ({', '.join(system.names)})")
    if (root / CONFIG).exists():
        if exist_ok:
            return root
        raise ParioError(f"{root} is already a store ({CONFIG} exists)")
    if root.exists() and not root.is_dir():
        raise ParioError(f"{root} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()):
        raise ParioError(f"{root} is not empty: a store needs a new or empty directory")
    root.mkdir(parents=True, exist_ok=True)
    if backend == "rados":
        cfg = {"pario_store": 1, "id": uuid.uuid4().hex, "backend": "rados", "system": system.name,
               "profile": system.to_dict(), **extra}
        _atomic_write(root / CONFIG, json.dumps(cfg, indent=2) + "\n")
        Meta(root / "meta.db", may_create=True).close()
        return root
    mapping = {}
    for name in system.names:
        if name in servers:
            p = Path(servers[name]).expanduser()
            p = p if p.is_absolute() else Path.cwd() / p
            mapping[name] = str(p)
        else:
            p = root / "servers" / name
            mapping[name] = f"servers/{name}"
        p.mkdir(parents=True, exist_ok=True)
    cfg = {"pario_store": 1, "id": uuid.uuid4().hex, "backend": "local", "system": system.name,
           "profile": system.to_dict(), "servers": mapping}
    _atomic_write(root / CONFIG, json.dumps(cfg, indent=2) + "\n")
    Meta(root / "meta.db", may_create=True).close()     # from now on its absence is a loss (Meta)
    return root


SHADOW_DIR = ".pario-shadow"      # the C runtime's per-open shadow files (store/redirect.h: PXS_SHADOW_DIR)


def clear_shadows(root) -> int:
    """Remove what killed served runs left in ``DIR/.pario-shadow`` (the store's first opener
    is alone: no open uses them): regular files and links directly inside a real directory,
    never what a link points to.  Returns how many."""
    d = Path(root) / SHADOW_DIR
    if d.is_symlink() or not d.is_dir():
        return 0
    n = 0
    for e in os.scandir(d):
        if not e.is_dir(follow_symlinks=False):
            try:
                os.unlink(d / e.name)
                n += 1
            except OSError:
                pass
    return n


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


class Store:
    """An open store: backend + RMT + open files, with crash recovery at open.

    ``direct=True`` uses O_DIRECT for data files; ``cost`` overrides the hybrid routing
    cost ``cost(layout, offset, length) -> s`` (default: :func:`profile_cost`).
    ``shared=True``: several processes may open the store at once (module docstring);
    ``lock_timeout`` bounds every wait for another process (seconds).
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
        kind = cfg.get("backend", "local")
        if kind not in ("local", "rados"):
            raise ParioError(f"store backend {kind!r} is not available")
        dirs = []
        for name in self.system.names if kind == "local" else ():
            d = cfg["servers"].get(name)
            if d is None:
                raise ParioError(f"{CONFIG} has no directory for server {name}")
            d = Path(d)
            dirs.append(d if d.is_absolute() else self.root / d)
        self.shared = bool(shared)
        self.lock_timeout = store_timeout() if lock_timeout is None else float(lock_timeout)
        self._slock = StoreLock(self.root / ".lock")
        self._lockfd = self._slock.fd
        first = True
        if not self.shared:
            if not self._slock.try_exclusive():
                self._slock.close()
                raise ParioError(f"store {self.root} is in use by another process")
        else:
            state = {}

            def attempt() -> bool:
                if self._slock.try_exclusive():      # alone: recover first, then share
                    state["first"] = True
                    return True
                if self._slock.try_shared():
                    state["first"] = False
                    return True
                return False
            try:
                _poll(attempt, self.lock_timeout,
                      f"store {self.root}: another process has it open exclusively (or is recovering it)")
            except BaseException:
                self._slock.close()
                raise
            first = state["first"]
        self.backend = self.rmt = None
        try:
            if kind == "rados":
                from .rados import OBJECT_SIZE, RadosBackend

                if "cluster" not in cfg or "pools" not in cfg:
                    raise ParioError(f"{self.root / CONFIG}: a rados store needs \"cluster\" and \"pools\"")
                self.backend = RadosBackend(self.root, self.system, cfg["cluster"], cfg["pools"], namespace=self.id,
                                            object_size=cfg.get("object_size", OBJECT_SIZE), shared=self.shared)
            else:
                self.backend = LocalBackend(self.root, self.system, dirs, direct=direct, shared=self.shared)
            self.rmt = RMT(self.root, self.backend.meta, shared=self.shared, first=first, timeout=self.lock_timeout)
        except BaseException:
            if self.backend is not None:
                self.backend.shutdown()
            self._slock.close()
            raise
        self.cost = cost or profile_cost(self.system, op=0)
        self.fg_last = 0.0
        self.recovering = False
        self.verified_ranges: list | None = None     # recovery verified the replicas: the ranges that differed
        self._files: dict[str, File] = {}
        self._lock = threading.RLock()
        self._lazy: LazySync | None = None
        self.closed = False
        try:
            if self.rmt.stats()["verify"] and not (recover and first) and not unverified_ok:
                raise ParioError(self.unverified_message())
            if recover and first:
                self.recover()
            if self.shared and first:
                self.backend.finalize_sizes()
                if not self._slock.downgrade():
                    raise ParioError(f"store {self.root}: could not share the lock after recovery")
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
           registering), and so are unfinished uploads (``.incoming/…``: a killed ``put``)
           and the shadow files of MPI opens that never closed (:func:`clear_shadows`);
        2. entries past an original's end are dropped (a hybrid full replica grown for an
           extending write whose size never committed);
        3. after a crash in another boot (the journal was not closed cleanly, and the machine
           rebooted since: a power failure may have lost journal records that were not yet
           durable, while data pages reached the disk), FRESH entries become STALE and every
           CLEAN entry is compared byte for byte with the original; where they differ, a
           write was not acknowledged as durable, and the copy reads were served from wins
           (CEDA route: the replica; hybrid: the original) — :meth:`verify_clean`.  The
           decision is the journal header's ``verify`` flag, set by the C core before it
           stamps this boot's id (``rmt_open``), so a recovery killed midway is redone by
           the next opener, and every other opener refuses the store until it is done;
        4. every file with unclean entries is flushed (COPYING entries of a replicator that
           is gone count as STALE);
        5. the journal is synced, and then the ``verify`` flag cleared (durable).

        Returns the names of the files flushed."""
        rmt = self.rmt
        self.recovering = True
        try:
            clear_shadows(self.root)
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
            for o in rmt.files():
                name = rmt.name(o)
                if name is None or not self.backend.exists(name):
                    continue
                size = self.backend.stat(name).size
                ent = rmt.entries(name)
                if ent.n and int(ent.end.max()) > size:
                    rmt.trim(name, size)
            verify = bool(rmt.stats()["verify"])
            if verify:
                self.distrust_fresh()
                self.verified_ranges = self.verify_clean()
            done = []
            for name in rmt.files_with_unclean():
                if not self.backend.exists(name):
                    continue
                f = self.open(name)
                try:
                    f.flush()
                finally:
                    f.close()
                done.append(name)
            rmt.sync()
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

    def settle_fresh(self) -> int:
        """fsync the data files of every replica with FRESH entries, then make those entries
        CLEAN (trusted after a power failure).  Returns the replicas settled."""
        core, be = self.rmt.core, self.backend
        done = 0
        for r, o, *_ in core.replicas():
            if not any(e[0] == r and e[4] == FRESH for e in core.entries(o)):
                continue
            name = self.rmt.name(r)
            if name is None or not be.exists(name):
                continue
            h = be.open(name)
            try:
                be.fsync(h, everything=True)
            finally:
                be.close(h)
            core.set_flag(o, r, 0, 1 << 62, FRESH, CLEAN)
            done += 1
        return done

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
                    if f != CLEAN:
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
            if self._lazy is not None:
                self._lazy.forget(f)
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

    # ------------------------------------------------------------------ lazy sync, flush
    def lazy_sync(self, f: File) -> None:
        with self._lock:
            if self._lazy is None:
                self._lazy = LazySync()
                self._lazy.start()
        self._lazy.enqueue(f)

    def drain(self) -> None:
        """Wait for pending lazy synchronisation."""
        if self._lazy is not None:
            self._lazy.drain()

    def flush(self) -> list[str]:
        """Flush every file with DIRTY/STALE entries; returns their names."""
        names = self.rmt.files_with_unclean()
        for name in names:
            f = self.open(name)
            try:
                f.flush()
            finally:
                f.close()
        return names

    def close(self) -> None:
        if self.closed:
            return
        try:
            for f in list(self._files.values()):
                f.refs = 1
                f.close()
            if self._lazy is not None:
                self._lazy.stop()
                self._lazy = None
            alone = not self.shared or (self._slock.fd >= 0 and self._slock.try_exclusive())
            # a store still to be verified after an unclean end in another boot (refused, or its
            # recovery failed) is left exactly as it is: no flush, no FRESH -> CLEAN, no clean mark
            if alone and self.rmt is not None and not self.unverified:
                if self.shared:
                    # the last process out: finish what others left (dirty flags, uncommitted sizes)
                    self.flush()
                    self.backend.finalize_sizes()
                from .relayout import purge_retired
                purge_retired(self)          # old copies of relaid files: nobody can read them now
                self._close_rmt_alone()
        finally:
            self.closed = True
            try:
                if self.backend is not None:
                    self.backend.shutdown()
                if self.rmt is not None:
                    self.rmt.close()
            finally:
                self._slock.close()

    def _close_rmt_alone(self) -> None:
        """Nobody else has the store open: compact the journal when it has grown well beyond
        its state, and mark it closed cleanly when nothing is left to synchronise."""
        self.settle_fresh()
        st = self.rmt.stats()
        live = 64 * (st["entries"] + st["replicas"] + st["jobs"]) + 4096
        if st["end"] > max(JOURNAL_COMPACT_MIN, 4 * live):
            self.rmt.checkpoint()
        self.rmt.core.set_clean(not self.rmt.core.files(True))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_store(root, **kw) -> Store:
    return Store(root, **kw)
