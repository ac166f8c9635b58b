"""Lustre: ``lfs setstripe`` (plain and PFL layouts), ``lfs mirror create`` (FLR mirrors).

Grammar (Lustre lfs-setstripe(1), lfs-mirror-create(1), Lustre Operations Manual ch. 19
"Managing File Layout"; see docs/emit.md)::

    lfs setstripe -S SIZE -c COUNT -o OST,OST,... -- PATH            plain layout, exact OST order
    lfs setstripe -S SIZE -C COUNT -o OST,OST,OST,... -- PATH        overstriping (≥ 2.13): an OST may repeat
    lfs setstripe -E END1 OPTS -E END2 OPTS ... -E -1 OPTS -- PATH   PFL: one component per extent
    lfs mirror create -N [OPTS] -N [OPTS] ... -- PATH                FLR: whole-file mirrors

(``lfs`` parses its options with getopt_long: ``--`` ends them.)

A stripe size is a multiple of 64 KiB below 4 GiB; a component's stripe of byte x is
``(x div S) mod count`` of the *file* offset x (lov_stripe_number divides the file offset,
not the offset inside the component), so a region that does not start on a multiple of
S·count gets its OST list rotated to keep the plan's region-relative striping.

Varied per-server stripe sizes (PADP's ⟨h, s⟩) are exact through overstriping when every
stripe is a multiple of u = gcd(stripes) and u is a multiple of 64 KiB: server j appears
w_j / u times in a row in the OST list.  Otherwise they are not expressible; the nearest
(rule): u = the multiple of 64 KiB nearest to the smallest stripe, each server
max(1, round(w_j / u)) consecutive stripes of u.
"""

from __future__ import annotations

from functools import reduce
from math import gcd

from ..layout import ExtentMap, Regions, describe
from . import (
    Emission,
    Emitter,
    Item,
    as_striped,
    command,
    fmt_size,
    nearest_multiple,
    plan_entries,
    replica_datafiles,
)

UNIT = 64 * 1024                 # LOV_MIN_STRIPE_SIZE
MAX_STRIPE = (1 << 32) - UNIT    # stripe size below 4 GiB
MAX_COUNT = 2000                 # LOV_MAX_STRIPE_COUNT


class LustreEmitter(Emitter):
    name = "lustre"

    def emit(self, plan, system) -> Emission:
        out = Emission(self.name, system.name, plan.scheme,
                       [f"# server {s.name} ({s.kind}) = OST index {j}" for j, s in enumerate(system.servers)])
        entries = list(plan_entries(plan))
        whole = {}   # file → whole-file replicas (become FLR mirrors)
        for f, what, lay, rep in entries:
            if rep is not None and not isinstance(lay, ExtentMap):
                whole.setdefault(f, []).append((what, lay, rep))
        done_mirrors = set()
        for f, what, lay, rep in entries:
            path = self.path(f)
            item = Item(f, what, path, "exact", describe(lay, system))
            out.items.append(item)
            if isinstance(lay, ExtentMap) and rep is not None:
                self._partial_replica(item, f, lay, rep, plan, system)
                continue
            opts = self._layout_opts(item, lay, system)
            if opts is None:
                continue
            if rep is not None:   # a whole-file replica: an FLR mirror, emitted with the file's layout
                item.exact.append("mirror layout (FLR mirror of the whole file)")
                rule = [r.get("rule") for r in plan.routing if r.get("file") in (f, "*")]
                item.not_exact("routing", f"the plan routes requests by rule {rule[0] if rule else 'original'!r}; "
                               "Lustre reads a mirror of its own choosing and writes make the other mirrors stale "
                               "until 'lfs mirror resync'", "mirrors only (no per-request routing)")
                continue
            mirrors = whole.get(f, [])
            if mirrors and f not in done_mirrors:
                done_mirrors.add(f)
                args = ["lfs", "mirror", "create", "-N", *opts]
                for _, mlay, _ in mirrors:
                    mitem = Item(f, "", path, "exact")
                    mopts = self._layout_opts(mitem, mlay, system)
                    args += ["-N", *(mopts or [])]
                item.commands.append(command(*args, "--", path))
                item.exact.append(f"{len(mirrors)} whole-file replica(s) as FLR mirrors 2..{len(mirrors) + 1}")
            else:
                item.commands.append(command("lfs", "setstripe", *opts, "--", path))
        # whole-file replicas of files the plan gives no layout: mirrors over the inherited layout
        for f, mirrors in whole.items():
            if f in done_mirrors:
                continue
            args = ["lfs", "mirror", "create", "-N"]
            for _, mlay, _ in mirrors:
                args += ["-N", *(self._layout_opts(Item(f, "", "", "exact"), mlay, system) or [])]
            next(it for it in out.items if it.file == f and it.what.startswith("replica")).commands.append(
                command(*args, "--", self.path(f)))
        return out

    # ------------------------------------------------------------------ layouts
    def _layout_opts(self, item: Item, lay, system) -> list[str] | None:
        """Options of ``lfs setstripe`` for a layout (plain or PFL); updates the item's report."""
        if isinstance(lay, Regions):
            opts = []
            for k, r in enumerate(lay.regions):
                st, note = as_striped(r.layout)
                if note:
                    item.exact.append(note)
                comp = self._stripe_opts(item, st, r.start, system, f"region {k} ")
                end = r.end
                if end is not None and end % UNIT:
                    aligned = max(UNIT, (end // UNIT) * UNIT)
                    item.not_exact(f"region {k} end", f"{end} is not a multiple of 64 KiB (PFL extents are)",
                                   f"-E {aligned}")
                    item.status = "nearest"
                    end = aligned
                opts += ["-E", "-1" if end is None else str(end), *comp]
            item.exact.append(f"{len(lay.regions)} regions as PFL components (-E)")
            return opts
        if isinstance(lay, ExtentMap):   # an extent map as a file's own layout
            item.status = "not-expressible" if lay.default is None else "nearest"
            item.not_exact("extent map", "Lustre places a file by striping only; an explicit extent → server map "
                           "is not expressible", "the map's default layout" if lay.default is not None else "nothing")
            return None if lay.default is None else self._layout_opts(item, lay.default, system)
        st, note = as_striped(lay)
        if note:
            item.exact.append(note)
        return self._stripe_opts(item, st, 0, system, "")

    def _stripe_opts(self, item: Item, st, start: int, system, where: str) -> list[str]:
        stripes, servers = list(st.stripes), list(st.servers)
        u = reduce(gcd, stripes)
        if u % UNIT == 0 and u <= MAX_STRIPE:
            reps = [w // u for w in stripes]
        else:
            u = min(MAX_STRIPE, nearest_multiple(min(stripes), UNIT))
            reps = [max(1, round(w / u)) for w in stripes]
            item.status = "nearest"
            item.not_exact(f"{where}stripe sizes",
                           f"{describe(st, system)}: Lustre stripes are multiples of 64 KiB"
                           + ("" if len(set(stripes)) == 1 else ", one size per component"),
                           f"-S {fmt_size(u)} with {'/'.join(str(r) for r in reps)} stripe(s) per OST (rule: S = "
                           "the multiple of 64 KiB nearest the smallest stripe, each server max(1, round(w/S)) "
                           "stripes)")
        slots = [s for s, r in zip(servers, reps) for _ in range(r)]
        if len(slots) > MAX_COUNT:
            item.status = "nearest"
            item.not_exact(f"{where}stripe count", f"{len(slots)} stripes exceed Lustre's {MAX_COUNT}",
                           "one stripe per server")
            reps = [1] * len(servers)
            slots = list(servers)
        c = len(slots)
        if start % u:
            item.status = "nearest"
            item.not_exact(f"{where}start", f"the region starts at {start}, not a multiple of the stripe size "
                           f"{u}", "the OST list rotated by whole stripes (the region's first partial stripe "
                           "goes to the previous OST)")
        rot = (start // u) % c
        osts = [slots[(m - rot) % c] for m in range(c)]
        if item.status == "exact":
            item.exact.append(f"{where}stripe sizes and OST order" + (" (overstriping)" if c > len(servers) else ""))
        return ["-S", fmt_size(u), "-C" if c > len(set(slots)) else "-c", str(c), "-o", ",".join(str(s) for s in osts)]

    # ------------------------------------------------------------------ partial replicas
    def _partial_replica(self, item: Item, f: str, emap: ExtentMap, rep, plan, system) -> None:
        item.status = "nearest"
        n, nbytes = len(emap), int(emap.length.sum())
        item.not_exact("partial replica",
                       f"{n} extents ({nbytes} B) of the file: FLR mirrors are whole files, and Lustre does not "
                       "redirect a read to another file (CEDA's RMT)",
                       "its replica data files, each a single-stripe file on its server's OST "
                       "(lfs setstripe -c 1 -o OST), for pario's redirection to fill; reads through Lustre "
                       "use the original layout")
        for df, srv, b in replica_datafiles(emap):
            p = self.datafile_path(f, rep.get("name", "r"), df, system.servers[srv].name)
            item.commands.append(command("lfs", "setstripe", "-c", "1", "-o", srv, "--", p))
            item.datafiles.append({"datafile": df, "server": system.servers[srv].name, "path": p, "bytes": b})
        item.exact.append("replica data file placement (one OST each)")
