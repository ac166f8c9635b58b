"""The ``rados`` backend: the local backend's metadata, a data plane on a Ceph cluster's RADOS.

Everything about names, layouts, sizes, the ``dirty`` flag, the RMT and its journal is the
:class:`~pario.store.local.LocalBackend`'s (``meta.db``, ``rmt.log`` stay files of the store
directory); this class replaces only the data files:

- server ``j`` of the profile is the pool of that server in the cluster (``pario-<name>``,
  :mod:`pario.cluster.pools`: a CRUSH rule over the one host bucket that holds the server's
  OSD only, size 1 — so an object of it lives on that OSD and nowhere else);
- the server-local data file ``(id, d)`` of a logical file is the sequence of objects
  ``<id:08d>.<d>.<k:08x>`` (``k`` = 0, 1, …) of ``object_size`` bytes each (store.json,
  default 4 MiB), in the store's own RADOS namespace (its id: two stores on one cluster never
  meet); the byte at server-local offset ``L`` is byte ``L % object_size`` of object
  ``L // object_size`` — the stripe units of the layout land on the server's OSD as ranges
  of these objects, and objects a write never touched do not exist (holes read as 0);
- the data file's *size* is ``k_last * object_size + size(object k_last)`` (``k_last`` =
  the highest index present), which is what :meth:`LocalBackend._recover_size` reads after a
  crash, as it reads a local data file's ``st_size``;
- a request's single-server pieces are cut at object boundaries, pieces contiguous in one
  object merged, and every object range is one ``aio_write`` / ``aio_read`` of librados; all
  of a request's operations are in flight at once (the OSDs of different servers work in
  parallel, as a parallel file system client's sub-requests do) and the request returns when
  all completed.  A write is durable on the OSD when it completes, so ``fsync`` has only the
  size to commit.

Every operation has the timeouts of the cluster's ``ceph.conf`` (``rados osd op timeout``…):
a down OSD or monitor is a :class:`pario.ParioError`, never a hang.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from .. import ParioError
from .local import LocalBackend, LocalHandle
from .meta import Meta

OBJECT_SIZE = 4 << 20       # default object size (store.json "object_size")
CONNECT_TIMEOUT = 10        # seconds to reach the monitor at open (ceph.conf bounds every op)


def _rados():
    from ..cluster.client import rados_module

    return rados_module()


def cluster_pools(cluster_dir, server_names) -> dict[str, str]:
    """Server name → its pool in the cluster of ``cluster_dir`` (ParioError if the cluster
    has no such server or the server has no pool)."""
    from ..cluster.state import load_state

    cl = load_state(cluster_dir)
    out = {}
    for name in server_names:
        s = cl.server(name)
        if not s.pool:
            raise ParioError(f"cluster {cluster_dir}: server {name} has no pool (was 'pario cluster up' complete?)")
        out[name] = s.pool
    return out


def connect(cluster_dir):
    """A connected ``rados.Rados`` for the cluster of ``cluster_dir`` (its ``ceph.conf``), or
    a one-line ParioError (no cluster, cluster down)."""
    from ..cluster.client import connect as cconnect
    from ..cluster.state import CONF_FILE, load_state

    cl = load_state(cluster_dir)
    conf = Path(cl.dir) / CONF_FILE
    if not conf.is_file():
        raise ParioError(f"cluster {cluster_dir}: no {CONF_FILE} (is it down? 'pario cluster up {cluster_dir}')")
    try:
        return cconnect(str(conf), timeout=CONNECT_TIMEOUT)
    except ParioError as exc:
        raise ParioError(f"{exc} (is the cluster down? 'pario cluster status {cluster_dir}')") from None


def open_pools(r, pools: list[str], namespace: str) -> list:
    """One ``Ioctx`` per pool in ``namespace`` (ParioError naming a missing pool)."""
    rados = _rados()
    out = []
    try:
        for p in pools:
            try:
                io = r.open_ioctx(p)
            except rados.ObjectNotFound:
                raise ParioError(f"pool {p} does not exist in the cluster") from None
            except rados.Error as exc:
                raise ParioError(f"cannot open pool {p}: {exc}") from None
            io.set_namespace(namespace)
            out.append(io)
    except BaseException:
        for io in out:
            io.close()
        raise
    return out


class RadosBackend(LocalBackend):
    """Logical files over RADOS pools (``pools[j]`` = pool of server j); metadata as local."""

    kind = "rados"
    copy_in_kernel = False        # copies go through a buffer (readv + writev)

    def __init__(self, root: Path, system, cluster_dir, pools: dict[str, str], *, namespace: str,
                 object_size: int = OBJECT_SIZE, shared: bool = False):
        # the metadata state of LocalBackend (its __init__ checks server directories, which
        # this backend has none of)
        self.root = Path(root)
        self.shared = bool(shared)
        self.system = system
        self.server_dirs = []
        self.direct = False
        self.cluster_dir = str(cluster_dir)
        self.object_size = int(object_size)
        if self.object_size <= 0:
            raise ParioError(f"object size must be > 0 (store.json has {object_size})")
        self.namespace = str(namespace)
        missing = [n for n in system.names if n not in pools]
        if missing:
            raise ParioError(f"store.json names no pool for server {missing[0]}")
        self.pools = [pools[n] for n in system.names]
        self.rados = connect(cluster_dir)
        try:
            self.ioctx = open_pools(self.rados, self.pools, self.namespace)
        except BaseException:
            self.rados.shutdown()
            raise
        self.meta = Meta(self.root / "meta.db", may_create=self.holds_nothing)   # (the objects are not listed)
        self._lock = threading.RLock()
        self._handles: dict[str, LocalHandle] = {}
        self._vlock = threading.Lock()       # stat + get_last_version of one ioctx together

    # ------------------------------------------------------------------ objects
    def object_name(self, fid: int, datafile: int, k: int) -> str:
        return f"{fid:08d}.{datafile}.{k:08x}"

    def _err(self, what: str, server: int, obj: str, exc) -> ParioError:
        return ParioError(f"rados {what} {self.pools[server]}/{obj}: {exc}")

    def _scan(self, server: int) -> dict[tuple[int, int], list[int]]:
        """Objects of this store on ``server``: ``(id, datafile) → [k …]``; names that are not
        data objects under ``(-1, -1)`` as the names themselves."""
        rados = _rados()
        out: dict[tuple[int, int], list] = {}
        try:
            for o in self.ioctx[server].list_objects():
                parts = o.key.split(".")
                try:
                    fid, df, k = int(parts[0]), int(parts[1]), int(parts[2], 16)
                    if len(parts) != 3:
                        raise ValueError
                except (ValueError, IndexError):
                    out.setdefault((-1, -1), []).append(o.key)
                    continue
                out.setdefault((fid, df), []).append(k)
        except rados.Error as exc:
            raise ParioError(f"rados list {self.pools[server]} (namespace {self.namespace}): {exc}") from None
        return out

    def _size_of(self, server: int, fid: int, datafile: int, ks) -> int:
        """Size of a data file whose objects are ``ks``: the last object's index and size."""
        if not ks:
            return 0
        rados = _rados()
        k = max(ks)
        obj = self.object_name(fid, datafile, k)
        try:
            n, _ = self.ioctx[server].stat(obj)
        except rados.ObjectNotFound:        # removed meanwhile: the one before
            return self._size_of(server, fid, datafile, [x for x in ks if x != k])
        except rados.Error as exc:
            raise self._err("stat", server, obj, exc) from None
        return k * self.object_size + int(n)

    def datafile_size(self, fid: int, server: int, datafile: int) -> int:
        return self._size_of(server, fid, datafile, self._scan(server).get((fid, datafile), []))

    def _local_sizes(self, h: LocalHandle) -> dict[int, int]:
        """Data file 0's size on every server of the layout (used by ``_recover_size``)."""
        return {j: self.datafile_size(h.id, j, 0) for j in h.layout.servers_used()}

    def _truncate_datafile(self, h: LocalHandle, server: int, datafile: int, n: int, sync: bool) -> None:
        """Objects past byte ``n`` removed, the last one cut (or grown, created) to end at ``n``."""
        rados = _rados()
        io = self.ioctx[server]
        ks = self._scan(server).get((h.id, datafile), [])
        last = (n - 1) // self.object_size if n > 0 else -1
        for k in sorted(ks, reverse=True):
            if k > last:
                obj = self.object_name(h.id, datafile, k)
                try:
                    io.remove_object(obj)
                except rados.ObjectNotFound:
                    pass
                except rados.Error as exc:
                    raise self._err("remove", server, obj, exc) from None
        if last >= 0:
            obj = self.object_name(h.id, datafile, last)
            try:
                with rados.WriteOpCtx() as op:
                    op.new(rados.LIBRADOS_CREATE_IDEMPOTENT)
                    op.truncate(n - last * self.object_size)
                    io.operate_write_op(op, obj)
            except rados.Error as exc:
                raise self._err("truncate", server, obj, exc) from None

    def _reserve_datafile(self, h: LocalHandle, key: tuple[int, int], end: int) -> None:
        """The data file reaches at least ``end`` bytes: its object of byte ``end - 1`` is
        grown (created) to hold it, never cut and no byte overwritten — the size change is
        guarded by the object's version (another writer in between: try again)."""
        rados = _rados()
        server, datafile = key
        k = (end - 1) // self.object_size
        need = end - k * self.object_size
        obj = self.object_name(h.id, datafile, k)
        io = self.ioctx[server]
        for _ in range(100):
            try:
                with self._vlock:
                    try:
                        n, _ = io.stat(obj)
                        ver = io.get_last_version()
                    except rados.ObjectNotFound:
                        n, ver = -1, None
                if n >= need:
                    return
                with rados.WriteOpCtx() as op:
                    if ver is None:
                        op.new(rados.LIBRADOS_CREATE_EXCLUSIVE)
                    else:
                        op.assert_version(ver)
                    op.truncate(need)
                    io.operate_write_op(op, obj)
                return
            except (rados.ObjectExists, rados.OSError) as exc:  # raced with a writer: again
                last = exc
                continue
            except rados.Error as exc:
                raise self._err("reserve", server, obj, exc) from None
        raise self._err("reserve", server, obj, last)

    def _unlink_data(self, fid: int) -> None:
        for j, io in enumerate(self.ioctx):
            comps = []
            for (f, df), ks in self._scan(j).items():
                if f != fid:
                    continue
                for k in ks:
                    comps.append((self.object_name(fid, df, k), io.aio_remove(self.object_name(fid, df, k))))
            for obj, c in comps:
                c.wait_for_complete()
                rv = c.get_return_value()
                if rv < 0 and rv != -2:        # -ENOENT: removed already
                    raise self._err("remove", j, obj, f"error {rv}")

    # ------------------------------------------------------------------ I/O
    def _io(self, h: LocalHandle, srv, df, loc, ln, bo, mv: memoryview, write: bool) -> None:
        """Move the pieces ``(server, datafile, local, length, buf_offset)``: cut at object
        boundaries, merged within an object, all in flight at once (librados aio)."""
        if len(srv) == 0:
            return
        if not isinstance(srv, list):
            srv, df, loc, ln, bo = srv.tolist(), df.tolist(), loc.tolist(), ln.tolist(), bo.tolist()
        osz = self.object_size
        segs = []
        for s, d, L, n, b in zip(srv, df, loc, ln, bo):
            while n > 0:
                k, off = divmod(L, osz)
                m = min(n, osz - off)
                segs.append((s, d, k, off, m, b))
                L, n, b = L + m, n - m, b + m
        segs.sort()
        runs = []        # [server, datafile, k, off, length, [(buf_offset, length) …]]
        for s, d, k, off, m, b in segs:
            if runs:
                r = runs[-1]
                if r[0] == s and r[1] == d and r[2] == k and r[3] + r[4] == off:
                    r[4] += m
                    r[5].append((b, m))
                    continue
            runs.append([s, d, k, off, m, [(b, m)]])
        if write:
            self._write_runs(h, runs, mv)
        else:
            self._read_runs(h, runs, mv)

    def _write_runs(self, h, runs, mv) -> None:
        rados = _rados()
        comps = []
        try:
            for s, d, k, off, m, parts in runs:
                obj = self.object_name(h.id, d, k)
                if len(parts) == 1:
                    b, n = parts[0]
                    data = bytes(mv[b:b + n])
                else:
                    data = b"".join(mv[b:b + n] for b, n in parts)
                if len(runs) == 1:
                    try:
                        self.ioctx[s].write(obj, data, off)
                    except rados.Error as exc:
                        raise self._err("write", s, obj, exc) from None
                    return
                comps.append((s, obj, self.ioctx[s].aio_write(obj, data, off)))
        finally:
            err = None
            for s, obj, c in comps:            # every operation finished before returning
                c.wait_for_complete()
                rv = c.get_return_value()
                if rv < 0 and err is None:
                    err = self._err("write", s, obj, f"error {rv}")
            if err is not None:
                raise err

    def _read_runs(self, h, runs, mv) -> None:
        rados = _rados()

        def scatter(data, m, parts):
            pos = 0
            got = len(data)
            for b, n in parts:
                if pos + n <= got:
                    mv[b:b + n] = data[pos:pos + n]
                else:
                    have = max(0, got - pos)
                    if have:
                        mv[b:b + have] = data[pos:pos + have]
                    mv[b + have:b + n] = bytes(n - have)
                pos += n

        if len(runs) == 1:
            s, d, k, off, m, parts = runs[0]
            obj = self.object_name(h.id, d, k)
            try:
                data = self.ioctx[s].read(obj, m, off)
            except rados.ObjectNotFound:
                data = b""
            except rados.Error as exc:
                raise self._err("read", s, obj, exc) from None
            scatter(data, m, parts)
            return
        results: dict[int, bytes | None] = {}

        def done(i):
            def cb(c, data):
                # the binding hands over its whole buffer, uninitialised, when a read returns
                # 0 bytes (an offset at or past the object's end): keep only what was read
                rv = c.get_return_value()
                results[i] = data[:rv] if data is not None and rv > 0 else b""
            return cb

        comps = []
        try:
            for i, (s, d, k, off, m, parts) in enumerate(runs):
                obj = self.object_name(h.id, d, k)
                comps.append((i, s, obj, self.ioctx[s].aio_read(obj, m, off, done(i))))
        finally:
            err = None
            for i, s, obj, c in comps:
                c.wait_for_complete_and_cb()
                rv = c.get_return_value()
                if rv < 0 and rv != -2 and err is None:      # -ENOENT: no object, a hole
                    err = self._err("read", s, obj, f"error {rv}")
            if err is not None:
                raise err
        for i, (s, d, k, off, m, parts) in enumerate(runs):
            scatter(results.get(i) or b"", m, parts)

    def read1(self, h: LocalHandle, offset: int, length: int, mv) -> None:
        self.readv(h, (offset,), (length,), mv, (0,))

    def write1(self, h: LocalHandle, offset: int, mv) -> None:
        self.writev(h, (offset,), (len(mv),), mv, (0,))

    # ------------------------------------------------------------------ usage
    def usage(self) -> np.ndarray:
        """Per-server bytes of the server's pool (``rados df``: the whole pool, every store
        of the cluster on it)."""
        rados = _rados()
        out = np.zeros(self.system.n, dtype=np.int64)
        for j, io in enumerate(self.ioctx):
            try:
                out[j] = int(io.get_stats()["num_bytes"])
            except rados.Error as exc:
                raise ParioError(f"rados df {self.pools[j]}: {exc}") from None
        return out

    def free_space(self) -> np.ndarray:
        """Per-server bytes the server's pool can still take (``ceph df``: MAX AVAIL)."""
        from ..cluster.client import mon

        df = mon(self.rados, "df")
        avail = {p["name"]: int(p["stats"]["max_avail"]) for p in df.get("pools", [])}
        return np.array([avail.get(p, 0) for p in self.pools], dtype=np.int64)

    def datafiles(self) -> list[tuple[int, str, int, int]]:
        """All data files: (server, ``pool/<id>.<d>.*``, file id, datafile number); objects
        with other names get id -1."""
        out = []
        for j in range(self.system.n):
            for (fid, df), ks in sorted(self._scan(j).items()):
                if fid < 0:
                    out += [(j, f"{self.pools[j]}/{k}", -1, -1) for k in ks]
                else:
                    out.append((j, f"{self.pools[j]}/{fid:08d}.{df}.* ({len(ks)} objects)", fid, df))
        return out

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            for io in self.ioctx:
                io.close()
            self.ioctx = []
            self.rados.shutdown()


def rados_config(cluster_dir, system, object_size: int = OBJECT_SIZE) -> dict:
    """The ``store.json`` entries of a rados store (the cluster checked: up, every pool there)."""
    cdir = str(Path(cluster_dir).expanduser().resolve())
    pools = cluster_pools(cdir, system.names)
    if int(object_size) <= 0:
        raise ParioError(f"--object-size must be > 0 (got {object_size})")
    r = connect(cdir)
    try:
        for io in open_pools(r, list(pools.values()), ""):
            io.close()
    finally:
        r.shutdown()
    return {"cluster": cdir, "object_size": int(object_size), "pools": pools}

