"""BeeGFS: ``beegfs-ctl --createfile`` (per file, explicit targets) and ``--setpattern``
(per directory, storage pool).

Grammar (BeeGFS 7 ``beegfs-ctl`` modes, their ``--help`` text in ctl/source/modes of the
BeeGFS sources, and doc.beegfs.io "Striping" / "Storage Pools"; see docs/emit.md)::

    beegfs-ctl --createfile --chunksize=SIZE --numtargets=N --targets=ID,ID,... [--force] PATH
    beegfs-ctl --setpattern --chunksize=SIZE --numtargets=N --storagepoolid=ID DIR
    beegfs-ctl --addstoragepool --id=ID --desc=NAME --targets=ID,ID,...

``beegfs-ctl`` does not parse options with getopt: it splits every argument at its first
``=`` into key and value, trims both of spaces, tabs and line ends, and takes the first
remaining key (in byte order) as the path (``MapTk::addLineToStringMap``, ``ModeCreateFile``,
``ModeSetPattern``).  So a path operand takes no ``--`` before it (``--`` would become the
path), starts with ``./`` or ``/`` (never an option), and a path holding ``=`` or ending in a
space is refused: beegfs-ctl would act on another path.

A chunk size is a power of two of at least 64 KiB; chunk k of a file goes to the k mod N-th
target of its pattern, and ``--targets`` gives that list in order (each target once), so a
file created with ``--createfile`` is placed exactly.  A directory pattern (``--setpattern``,
the plan's ``"*"`` layout) gives only the chunk size, the number of targets and a storage
pool: the metadata server picks the targets, so byte → stripe column is exact but not which
target holds a column.  A target belongs to one storage pool at a time.

Not expressible: varied per-server chunk sizes (one chunk size per file; nearest rule: the
power of two nearest, in log2, to the mean stripe W/n, at least 64 KiB), regions (one
pattern per file: the first region's layout is used), replicas with another layout (buddy
mirroring copies a file's chunks with the same pattern).
"""

from __future__ import annotations

from .. import ParioError
from ..layout import ExtentMap, describe
from . import (
    Emission,
    Emitter,
    Item,
    command,
    fmt_size,
    nearest_pow2,
    no_whole_replica,
    one_layout_per_file,
    replica_datafiles,
)

MIN_CHUNK = 64 * 1024     # STRIPEPATTERN_MIN_CHUNKSIZE
DEFAULT_POOL = 1
POOL_ID = 100             # the pool pario creates for a "*" layout on part of the targets


def target_id(server: int) -> int:
    return server + 1


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class BeeGFSEmitter(Emitter):
    name = "beegfs"

    def emit(self, plan, system) -> Emission:
        out = Emission(self.name, system.name, plan.scheme,
                       [f"# server {s.name} ({s.kind}) = storage target ID {target_id(j)} (all in pool "
                        f"{DEFAULT_POOL} before the setup)" for j, s in enumerate(system.servers)])
        pool_of = {j: DEFAULT_POOL for j in range(system.n)}
        star = plan.layouts.get("*")
        star_pool = DEFAULT_POOL
        if star is not None:
            st = self._striped(Item("*", "", "", "exact"), star, system)
            if st is not None and set(st.servers) != set(range(system.n)):
                star_pool = POOL_ID
                ids = ",".join(str(target_id(s)) for s in sorted(st.servers))
                out.setup.append(command("beegfs-ctl", "--addstoragepool", f"--id={POOL_ID}", "--desc=pario-star",
                                         f"--targets={ids}"))
                for s in st.servers:
                    pool_of[s] = POOL_ID
        for item, lay, rep in self.walk(plan, system, out):
            f, path = item.file, item.path
            if rep is not None:
                if isinstance(lay, ExtentMap):
                    self._partial_replica(item, f, lay, rep, system, pool_of)
                else:
                    no_whole_replica(item, "BeeGFS keeps one stripe pattern per file (buddy mirroring copies "
                                     "chunks with the same pattern)")
                continue
            st = self._striped(item, lay, system)
            if st is None:
                continue
            chunk = self._chunk(item, st, system)
            n = len(st.servers)
            if f == "*":
                item.commands.append(command(
                    "beegfs-ctl", "--setpattern", f"--chunksize={fmt_size(chunk).lower()}", f"--numtargets={n}",
                    f"--storagepoolid={star_pool}", path))
                if item.status == "exact":
                    item.status = "striping"
                item.not_exact("server placement", "a directory pattern has no target list: the metadata server "
                               "picks the targets of each new file", f"storage pool {star_pool} holding exactly "
                               "the layout's targets, --numtargets = their number")
                continue
            ids = [target_id(s) for s in st.servers]
            force = len({pool_of[s] for s in st.servers}) > 1
            item.commands.append(command(
                "beegfs-ctl", "--createfile", f"--chunksize={fmt_size(chunk).lower()}", f"--numtargets={n}",
                "--targets=" + ",".join(map(str, ids)), *(["--force"] if force else []), path))
            if item.status == "exact":
                item.exact.append("chunk size and target order (--createfile --targets)")
        return out

    def operand(self, path: str) -> str:
        if "=" in path or path != path.rstrip(" "):
            raise ParioError(f"path {path!r}: beegfs-ctl cannot take a path holding '=' or ending in a space "
                             "(it splits each argument at its first '=' and trims its ends)")
        return path

    def _striped(self, item: Item, lay, system):
        return one_layout_per_file(item, lay, system, "BeeGFS", "stripe pattern")

    def _chunk(self, item: Item, st, system) -> int:
        stripes = st.stripes
        if len(set(stripes)) == 1 and _pow2(stripes[0]) and stripes[0] >= MIN_CHUNK:
            return stripes[0]
        chunk = nearest_pow2(st.width / len(stripes), MIN_CHUNK)
        item.status = "nearest"
        item.not_exact("stripe sizes", f"{describe(st, system)}: BeeGFS has one chunk size per file, a power of "
                       "two of at least 64 KiB", f"--chunksize={fmt_size(chunk).lower()} on every target (rule: the "
                       "power of two nearest, in log2, to the mean stripe W/n, at least 64 KiB)")
        return chunk

    def _partial_replica(self, item: Item, f: str, emap: ExtentMap, rep, system, pool_of) -> None:
        item.status = "nearest"
        item.not_exact("partial replica",
                       f"{len(emap)} extents ({int(emap.length.sum())} B): BeeGFS has no partial replicas and does "
                       "not redirect a read to another file (CEDA's RMT)",
                       "its replica data files, each created on its server's target (--createfile --numtargets=1 "
                       "--targets=ID), for pario's redirection to fill; reads through BeeGFS use the original layout")
        for df, srv, b in replica_datafiles(emap):
            p = self.datafile_path(f, rep.get("name", "r"), df, system.servers[srv].name)
            item.commands.append(command("beegfs-ctl", "--createfile", "--numtargets=1", f"--targets={target_id(srv)}",
                                         p))
            item.datafiles.append({"datafile": df, "server": system.servers[srv].name, "path": p, "bytes": b})
        item.exact.append("replica data file placement (one target each)")
