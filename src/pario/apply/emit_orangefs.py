"""OrangeFS: distributions ``simple_stripe`` and ``varstrip_dist`` as directory hints, files
created on a server list with ``pvfs2-touch -l``.

Grammar (OrangeFS "PVFS Tuning" guide §7 Distributions, ``src/io/description/dist-varstrip*.c``,
``src/apps/admin/pvfs2-touch.c`` of the OrangeFS sources; see docs/emit.md)::

    setfattr -n user.pvfs2.dist_name   -v simple_stripe|varstrip_dist -- DIR
    setfattr -n user.pvfs2.dist_params -v strip_size:BYTES -- DIR                (simple_stripe)
    setfattr -n user.pvfs2.dist_params -v "strips:D:SIZE;D:SIZE;..." -- DIR     (varstrip_dist)
    setfattr -n user.pvfs2.num_dfiles  -v N -- DIR
    pvfs2-touch -l ADDR,ADDR,... -- DIR/FILE          datafile i on the i-th listed server

(``setfattr``, ``pvfs2-touch``, ``mkdir``, ``mv``, ``rmdir`` parse options with getopt: ``--``
ends them.)

``varstrip_dist``'s ``strips`` is one round of ``datafile:size`` pairs (size > 0, optional
K/M/G suffix); byte x lies in the pair whose range holds ``x mod Σ sizes``; every datafile
number from 0 to the highest must appear; at most 1024 characters.  So PADP's ⟨h, s⟩
(seed 003 §3.3: HServers stripe h, SServers stripe s) is exact: datafile i = the layout's
i-th server with a stripe > 0, its strip = its stripe.  Hints are per directory: a file
with its own layout is created in a staging directory that carries its hints, then renamed
into place (a rename keeps the file's distribution and datafiles).  The plan's ``"*"``
layout sets the hints of the directory itself: OrangeFS then picks the servers of each new
file (round robin from a random first server), so byte → datafile is exact, datafile →
server is not.  Not expressible: regions (one distribution per file: the first region's
layout is used) and replicas (no per-file replicas with another distribution).
"""

from __future__ import annotations

from ..layout import ExtentMap
from . import (
    Emission,
    Emitter,
    Item,
    command,
    fmt_size,
    no_whole_replica,
    one_layout_per_file,
    replica_datafiles,
)

PORT = 3334
MAX_STRIPS = 1024         # PVFS_DIST_VARSTRIP_MAX_STRIPS_STRING_LENGTH - 1
STAGE = ".pario-orangefs"


class OrangeFSEmitter(Emitter):
    name = "orangefs"

    def address(self, system, server: int) -> str:
        return f"tcp://{system.servers[server].name}:{PORT}"

    def emit(self, plan, system) -> Emission:
        out = Emission(self.name, system.name, plan.scheme,
                       [f"# server {s.name} ({s.kind}) = {self.address(system, j)}" for j, s in enumerate(system.servers)])
        out.notes.append("pvfs2-touch resolves paths through pvfs2tab: run with --root set to a directory under "
                         "the OrangeFS mount")
        stage_no = 0
        for item, lay, rep in self.walk(plan, system, out):
            f, path = item.file, item.path
            if rep is not None:
                if isinstance(lay, ExtentMap):
                    stage_no = self._partial_replica(item, f, lay, rep, system, stage_no)
                else:
                    no_whole_replica(item, "OrangeFS keeps one distribution per file")
                continue
            st = self._striped(item, lay, system)
            if st is None:
                continue
            hints = self._hints(item, st)
            if f == "*":
                item.commands += [self._setfattr(k, v, path) for k, v in hints]
                if item.status == "exact":
                    item.status = "striping"
                item.not_exact("server placement", "directory hints carry no server list: OrangeFS picks the "
                               "servers of each new file", "the distribution and number of datafiles only")
                continue
            stage_no += 1
            item.commands += self._create(hints, [self.address(system, s) for s in st.servers], path, stage_no)
            if item.status == "exact":
                item.exact.append("strip sizes and server order (pvfs2-touch -l)")
        return out

    # ------------------------------------------------------------------
    def _striped(self, item: Item, lay, system):
        return one_layout_per_file(item, lay, system, "OrangeFS", "distribution")

    def _hints(self, item: Item, st) -> list[tuple[str, str]]:
        n = len(st.servers)
        if st.is_fixed:
            return [("dist_name", "simple_stripe"), ("dist_params", f"strip_size:{st.stripes[0]}"),
                    ("num_dfiles", str(n))]
        strips = ";".join(f"{i}:{fmt_size(w)}" for i, w in enumerate(st.stripes))
        if len(strips) > MAX_STRIPS:
            mean = max(1, st.width // n)
            item.status = "nearest"
            item.not_exact("stripe sizes", f"the strips parameter would be {len(strips)} characters (at most "
                           f"{MAX_STRIPS})", f"simple_stripe with strip_size {mean} (rule: the mean stripe W/n)")
            return [("dist_name", "simple_stripe"), ("dist_params", f"strip_size:{mean}"), ("num_dfiles", str(n))]
        item.exact.append("varied strip sizes (varstrip_dist strips, one datafile per server)")
        return [("dist_name", "varstrip_dist"), ("dist_params", f"strips:{strips}"), ("num_dfiles", str(n))]

    @staticmethod
    def _setfattr(key: str, value: str, path: str) -> str:
        return command("setfattr", "-n", f"user.pvfs2.{key}", "-v", value, "--", path)

    def _create(self, hints, addrs: list[str], path: str, k: int) -> list[str]:
        stage = self.path(f"{STAGE}/{k}")
        tmp = f"{stage}/{path.rsplit('/', 1)[-1]}"
        return [command("mkdir", "-p", "--", stage), *[self._setfattr(a, v, stage) for a, v in hints],
                command("pvfs2-touch", "-l", ",".join(addrs), "--", tmp), command("mv", "--", tmp, path),
                command("rmdir", "--", stage)]

    def _partial_replica(self, item: Item, f: str, emap: ExtentMap, rep, system, k: int) -> int:
        item.status = "nearest"
        item.not_exact("partial replica",
                       f"{len(emap)} extents ({int(emap.length.sum())} B): OrangeFS has no partial replicas and does "
                       "not redirect a read to another file (CEDA's RMT)",
                       "its replica data files, each created with one datafile on its server (pvfs2-touch -l ADDR), "
                       "for pario's redirection to fill; reads through OrangeFS use the original layout")
        for df, srv, b in replica_datafiles(emap):
            p = self.datafile_path(f, rep.get("name", "r"), df, system.servers[srv].name)
            k += 1
            item.commands += self._create([("dist_name", "simple_stripe"), ("num_dfiles", "1")],
                                          [self.address(system, srv)], p, k)
            item.datafiles.append({"datafile": df, "server": system.servers[srv].name, "path": p, "bytes": b})
        item.exact.append("replica data file placement (one datafile each)")
        return k
