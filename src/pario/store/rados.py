"""The ``rados`` data plane: the store's data files on a Ceph cluster's RADOS.

Everything about names, layouts, sizes, the ``dirty`` flag, the RMT and its journal is the
store engine's, as for a local store (``meta.db``, ``rmt.log`` stay files of the store
directory); the engine's rados plane (``src/pario/native/store/planes/rados.c``, librados
loaded with dlopen) moves the bytes of the data files:

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
  the highest index present), which the engine reads after a crash, as it reads a local
  data file's ``st_size``;
- a request's single-server pieces are cut at object boundaries and every object range is
  one librados operation, all of a request's in flight at once.

This module is what only the plane knows beyond that, through the Python binding of
librados: listing, measuring and removing a store's objects, and the cluster's set-up.

Every operation has the timeouts of the cluster's ``ceph.conf`` (``rados osd op timeout``…):
a down OSD or monitor is a :class:`pario.ParioError`, never a hang.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import ParioError
from .base import Backend

OBJECT_SIZE = 4 << 20       # default object size (store.json "object_size")
CONNECT_TIMEOUT = 10        # seconds to reach the monitor at open (ceph.conf bounds every op)


def _rados():
    from ..cluster.client import rados_module

    return rados_module()


def parse_object_name(key: str) -> tuple[int, int, int] | None:
    """``(file id, data file, k)`` of a data object's name (``RadosBackend.object_name``:
    ``ID.DATAFILE.K``, K in hex), None for any other object."""
    parts = key.split(".")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0]), int(parts[1]), int(parts[2], 16)
    except ValueError:
        return None


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

    _rados()        # a missing module is its own one line, not "is the cluster down?"
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


class RadosBackend(Backend):
    """The files of a store on RADOS (``pools[j]`` = pool of server j, the store's namespace)."""

    name = "rados"
    page_cache = False      # librados has no client page cache: every request reaches the OSDs

    def __init__(self, root: Path, system, engine, meta, cluster_dir, pools: dict[str, str], *, namespace: str,
                 object_size: int = OBJECT_SIZE):
        super().__init__(Path(root), system, engine, meta)
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

    @classmethod
    def configure(cls, system, *, servers=None, cluster=None, object_size=None):
        """``cluster``: a 'pario cluster up' directory (its calibrated profile by default);
        ``object_size`` bytes per object (default :data:`OBJECT_SIZE`)."""
        from ..cluster.core import profile_path
        from ..cluster.state import load_state
        from ..system import load_system

        if cluster is None:
            raise ParioError("the rados backend needs --cluster CLUSTER_DIR (a 'pario cluster up' directory)")
        if servers:
            raise ParioError("--server does not apply to the rados backend (every server is a pool)")
        cdir = Path(load_state(cluster).dir)       # a one-line error if it is not a cluster
        system = load_system(profile_path(cdir) if system is None else system)
        return system, rados_config(cluster, system, OBJECT_SIZE if object_size is None else object_size)

    @classmethod
    def options(cls, root, system, cfg: dict) -> dict:
        if "cluster" not in cfg or "pools" not in cfg:
            raise ParioError(f"{Path(root) / 'store.json'}: a rados store needs \"cluster\" and \"pools\"")
        if not isinstance(cfg["pools"], dict):
            raise ParioError(f"{Path(root) / 'store.json'}: \"pools\" is not a table of server → pool")
        return {"cluster_dir": cfg["cluster"], "pools": cfg["pools"], "namespace": cfg.get("id", ""),
                "object_size": cfg.get("object_size", OBJECT_SIZE)}

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
                name = parse_object_name(o.key)
                if name is None:
                    out.setdefault((-1, -1), []).append(o.key)
                    continue
                fid, df, k = name
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

    def _has_data(self, fid: int) -> str | None:
        for j in range(self.system.n):
            for (f, df), ks in self._scan(j).items():
                if f == fid and ks:
                    return f"{self.pools[j]}/{self.object_name(fid, df, min(ks))}"
        return None

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

