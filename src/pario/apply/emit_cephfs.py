"""CephFS: ``ceph.file.layout.*`` / ``ceph.dir.layout.*`` virtual xattrs, pools by device class.

Grammar (Ceph documentation "File layouts" (cephfs/file-layouts), "CRUSH Maps: device
classes" and "Pools"; ``file_layout_t::is_valid`` in the Ceph sources; see docs/emit.md)::

    setfattr -n ceph.file.layout.pool         -v POOL   -- FILE     (ceph.dir.layout.* for a directory)
    setfattr -n ceph.file.layout.stripe_count -v N      -- FILE
    setfattr -n ceph.file.layout.stripe_unit  -v BYTES  -- FILE
    setfattr -n ceph.file.layout.object_size  -v BYTES  -- FILE
    ceph osd crush rule create-replicated RULE default osd [CLASS]
    ceph osd pool create POOL ; ceph osd pool set POOL crush_rule RULE ; ceph fs add_data_pool FS POOL

A layout is valid when stripe_unit and object_size are non-zero multiples of 64 KiB and
object_size is a multiple of stripe_unit (each setfattr must leave a valid layout, so the
fields are set in an order that keeps every intermediate layout valid: stripe_unit 64 KiB,
then object_size, then stripe_unit).  A file's layout can be set only while it is empty.
Byte x lies in block b = x div su, stripe column b mod sc, object
(b div sc) div (os/su) · sc + b mod sc; CRUSH puts each object on an OSD of the pool, so
byte → stripe column is exact and the column's OSD is Ceph's choice inside the pool (the
device class of the plan's servers: pool ``pario-hdd``, ``pario-ssd``, or ``pario-mixed``
for a layout over both).  Not expressible: which OSD holds which column, varied per-server
stripe sizes (nearest rule: su = the multiple of 64 KiB nearest the mean stripe W/n),
regions (one layout per file: the first region's layout is used), replicas (RADOS
replicates a pool's objects with one layout).
"""

from __future__ import annotations

from ..layout import ExtentMap, describe
from . import (
    Emission,
    Emitter,
    Item,
    MiB,
    command,
    kinds_of,
    nearest_multiple,
    no_whole_replica,
    one_layout_per_file,
    replica_datafiles,
)

UNIT = 64 * 1024          # CEPH_MIN_STRIPE_UNIT
OBJECT = 4 * MiB          # Ceph's default object size
FS_NAME = "cephfs"


def pool_for(kinds: set[str], pools: dict[str, str] | None = None) -> str:
    """The data pool of a layout over servers of ``kinds``: ``pario-hdd`` / ``pario-ssd`` /
    ``pario-mixed`` (the pools the script's setup makes), or the device-class pools of a live
    file system (``pools``: kind → pool; a layout over both kinds then gets the hdd one)."""
    if pools is not None:
        return pools[next(iter(kinds))] if len(kinds) == 1 else pools["hdd"]
    return f"pario-{next(iter(kinds))}" if len(kinds) == 1 else "pario-mixed"


class CephFSEmitter(Emitter):
    name = "cephfs"

    def __init__(self, root: str = ".", absolute_names: bool = False, fs_name: str = FS_NAME,
                 pools: dict[str, str] | None = None):
        """``pools``: kind → data pool of a live CephFS (``pario apply --cephfs``: the pools
        exist, no setup is emitted); None: the script creates pario-hdd / -ssd / -mixed."""
        super().__init__(root, absolute_names)
        self.fs_name = fs_name
        self.pools = pools

    def emit(self, plan, system) -> Emission:
        out = Emission(self.name, system.name, plan.scheme,
                       [f"# server {s.name} ({s.kind}) = an OSD of device class {s.kind} (pool pario-{s.kind})"
                        for s in system.servers])
        pools: list[str] = []
        for item, lay, rep in self.walk(plan, system, out, "striping"):
            f, path = item.file, item.path
            if rep is not None:
                if isinstance(lay, ExtentMap):
                    self._partial_replica(item, f, lay, rep, system, pools)
                else:
                    no_whole_replica(item, "CephFS keeps one layout per file (RADOS replicates a pool's objects "
                                     "with the same layout)")
                continue
            st = self._striped(item, lay, system)
            if st is None:
                continue
            su = self._unit(item, st, system)
            sc = len(st.servers)
            kinds = kinds_of(st.servers, system)
            pool = pool_for(kinds, self.pools)
            if len(kinds) > 1 and self.pools is not None:
                item.not_exact("device class", "the layout spans hdd and ssd servers; this file system has one pool "
                               "per device class", f"pool {pool}")
            if pool not in pools:
                pools.append(pool)
            item.commands += self._layout_cmds(path, f == "*", pool, sc, su, su * max(1, OBJECT // su))
            item.not_exact("server placement", "CRUSH places each object on an OSD of the pool; a layout cannot name "
                           "OSDs", f"pool {pool} (device class of the layout's servers), stripe_count = their number")
            if item.status == "striping":
                item.exact.append("stripe unit and count (byte → stripe column)")
        for pool in (pools if self.pools is None else []):     # a live file system has its pools
            cls = pool.split("-", 1)[1]
            out.setup += [
                command("ceph", "osd", "crush", "rule", "create-replicated", pool, "default", "osd",
                        *([] if cls == "mixed" else [cls])),
                command("ceph", "osd", "pool", "create", pool),
                command("ceph", "osd", "pool", "set", pool, "crush_rule", pool),
                command("ceph", "fs", "add_data_pool", self.fs_name, pool)]
        return out

    # ------------------------------------------------------------------
    @staticmethod
    def _layout_cmds(path: str, directory: bool, pool: str, sc: int, su: int, os_: int) -> list[str]:
        key = "ceph.dir.layout" if directory else "ceph.file.layout"
        # every intermediate layout stays valid: su = 64 KiB divides any valid object size; the
        # new object size is a multiple of the new su (hence of 64 KiB); then the new su divides it
        steps = [("pool", pool), ("stripe_count", sc), ("stripe_unit", UNIT), ("object_size", os_),
                 ("stripe_unit", su)]
        cmds = [] if directory else [command("touch", "--", path)]
        return cmds + [command("setfattr", "-n", f"{key}.{k}", "-v", v, "--", path) for k, v in steps]

    def _striped(self, item: Item, lay, system):
        return one_layout_per_file(item, lay, system, "CephFS", "layout")

    def _unit(self, item: Item, st, system) -> int:
        stripes = st.stripes
        if len(set(stripes)) == 1 and stripes[0] % UNIT == 0 and stripes[0] < 1 << 32:
            return stripes[0]
        su = min((1 << 32) - UNIT, nearest_multiple(st.width / len(stripes), UNIT))
        item.status = "nearest"
        item.not_exact("stripe sizes", f"{describe(st, system)}: CephFS has one stripe_unit per file, a multiple of "
                       "64 KiB", f"stripe_unit {su} (rule: the multiple of 64 KiB nearest the mean stripe W/n)")
        return su

    def _partial_replica(self, item: Item, f: str, emap: ExtentMap, rep, system, pools: list[str]) -> None:
        item.status = "nearest"
        item.not_exact("partial replica",
                       f"{len(emap)} extents ({int(emap.length.sum())} B): CephFS has no partial replicas and does not "
                       "redirect a read to another file (CEDA's RMT)",
                       "its replica data files, each in the pool of its server's device class (CRUSH picks the "
                       "OSD), for pario's redirection to fill; reads through CephFS use the original layout")
        for df, srv, b in replica_datafiles(emap):
            name = system.servers[srv].name
            pool = pool_for({system.servers[srv].kind}, self.pools)
            if pool not in pools:
                pools.append(pool)
            p = self.datafile_path(f, rep.get("name", "r"), df, name)
            item.commands += self._layout_cmds(p, False, pool, 1, OBJECT, OBJECT)
            item.datafiles.append({"datafile": df, "server": name, "path": p, "bytes": b, "pool": pool})
