"""Emitters: a pario plan as the commands of a parallel file system (like IOR's ``aiori-*``).

``pario apply PLAN --emit TARGET`` prints the commands that put a plan's layouts (and, where
the target has them, its replicas) in place on Lustre, BeeGFS, OrangeFS or CephFS.  One
module per target (``emit_lustre``, ``emit_beegfs``, ``emit_orangefs``, ``emit_cephfs``),
each an :class:`Emitter` registered in :data:`EMITTERS` (:class:`pario.registry.Registry`:
target name → class, the one place a target is added)::

    em = get_emitter("lustre")
    out = em.emit(plan, system)          # -> Emission
    print(out.script())                  # the commands
    out.items[0].status                  # "exact" | "striping" | "nearest" | "not-expressible"

Every layout and replica of the plan becomes one :class:`Item` that says honestly how far
the target can express it:

``exact``            every byte of the file lands on the server the plan gives it;
``striping``         every byte lands in the same stripe column (position in the layout's
                     server order) and the columns go to the plan's servers (or their
                     device class), but which server holds which column is the file
                     system's choice (BeeGFS directory patterns, Ceph's CRUSH);
``nearest``          the target cannot express it: the nearest it can is emitted and
                     :attr:`Item.inexact` says what, why and by which rule;
``not-expressible``  nothing is emitted for it (:attr:`Item.inexact` says why).

Servers map to the target's storage units by their index in the profile (server ``j`` =
Lustre OST index ``j``, BeeGFS target ID ``j+1``, OrangeFS ``tcp://NAME:3334``, CephFS pool
of the server's device class); every script starts with that table as comments.
See docs/emit.md for the grammar of each target and its sources.

A plan is a file users receive from others: every file and replica name (and every server
name that goes into a path) is checked by :mod:`pario.names` before an emission is returned
(a bad one refuses the whole plan with one line); every word of a command is shell-quoted
(:func:`command`); file operands start with ``./`` or ``/`` and follow ``--`` where the
tool takes it; comment lines show file names shell-quoted, control characters escaped
(:func:`pario.names.printable`).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import Any

from .. import ParioError
from ..layout import ExtentMap, Grouped, Layout, Regions, Striped, describe
from ..names import check_name, printable, root_path, target_path
from ..registry import Registry

EMITTERS = Registry("emit target", {
    "lustre": "pario.apply.emit_lustre:LustreEmitter",
    "beegfs": "pario.apply.emit_beegfs:BeeGFSEmitter",
    "orangefs": "pario.apply.emit_orangefs:OrangeFSEmitter",
    "cephfs": "pario.apply.emit_cephfs:CephFSEmitter",
})
TARGETS = tuple(EMITTERS)
STATUSES = ("exact", "striping", "nearest", "not-expressible")
KiB = 1024
MiB = 1 << 20


@dataclass
class Item:
    """What was emitted for one layout or replica of the plan."""

    file: str                     # the plan's file key ("*" = every file the plan does not name)
    what: str                     # "layout" or "replica NAME"
    path: str                     # the path the commands act on
    status: str                   # one of STATUSES
    plan: str = ""                # the plan's layout, described
    commands: list[str] = field(default_factory=list)
    exact: list[str] = field(default_factory=list)        # aspects expressed exactly
    inexact: list[dict[str, str]] = field(default_factory=list)   # {"aspect", "why", "instead"}
    datafiles: list[dict[str, Any]] = field(default_factory=list)  # replica data files placed

    def not_exact(self, aspect: str, why: str, instead: str) -> None:
        self.inexact.append({"aspect": aspect, "why": why, "instead": instead})

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "what": self.what, "path": self.path, "status": self.status,
                "plan": self.plan, "commands": list(self.commands), "exact": list(self.exact),
                "inexact": [dict(d) for d in self.inexact], "datafiles": [dict(d) for d in self.datafiles]}


@dataclass
class Emission:
    """The commands for a plan on one target: setup (pools, rules) then one item per layout
    or replica, and the per-item report of what was exact and what was not."""

    target: str
    system: str
    scheme: str
    servers: list[str]            # "# ..." lines: the server → storage unit table
    setup: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"# pario apply --emit {self.target}: plan '{self.scheme}' for system '{self.system}'",
               "# run in the directory that holds the plan's files (files must not exist yet:",
               "# a layout is given when a file is created)"]
        out += self.servers
        out += [f"# note: {n}" for n in self.notes]
        if self.setup:
            out.append("# --- setup (administrator, once)")
            out += self.setup
        for it in self.items:
            out.append(f"# --- {it.file if it.file == '*' else q(it.file)}: {it.what} = {it.plan}: {it.status}")
            for d in it.inexact:
                out.append(f"#   not expressible: {d['aspect']}: {d['why']}; instead: {d['instead']}")
            out += it.commands
        # a comment is one line whatever its text holds (scheme, system, server and replica names)
        return [printable(line) if line.startswith("#") else line for line in out]

    def script(self) -> str:
        return "\n".join(["#!/bin/sh", "set -e", *self.lines()]) + "\n"

    def commands(self) -> list[str]:
        """The command lines only (no comments), in order."""
        return [line for line in self.setup + [c for it in self.items for c in it.commands]]

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "system": self.system, "scheme": self.scheme,
                "setup": list(self.setup), "notes": list(self.notes),
                "items": [it.to_dict() for it in self.items],
                "summary": {s: sum(1 for it in self.items if it.status == s) for s in STATUSES}}


class Emitter:
    """Base class: ``name`` and ``emit(plan, system) -> Emission``.  ``root`` is the directory
    the plan's relative file names live in (and the directory of the ``"*"`` layout);
    ``absolute_names``: a plan's absolute file names are allowed (else refused)."""

    name = "base"

    def __init__(self, root: str = ".", absolute_names: bool = False):
        self.root = root or "."
        self.absolute_names = absolute_names
        root_path(self.root)             # a bad --root fails before the plan is read

    def emit(self, plan, system) -> Emission:
        raise NotImplementedError

    # ------------------------------------------------------------------ shared helpers
    def path(self, file: str) -> str:
        """The operand of a plan's file (``"*"``: the root): :func:`pario.names.target_path`."""
        if file == "*":
            return self.operand(root_path(self.root))
        return self.operand(target_path(self.root, file, allow_absolute=self.absolute_names))

    def operand(self, path: str) -> str:
        """``path`` if the target's tools take it as one file operand (a target whose tool
        parses its arguments its own way refuses here what it would misread)."""
        return path

    def walk(self, plan, system, out: Emission, status: str = "exact"):
        """(item, layout, replica dict or None) per layout and replica of the plan; the item
        (status ``status`` until the emitter says otherwise) is already in ``out``."""
        for f, what, lay, rep in plan_entries(plan):
            item = Item(f, what, self.path(f), status, describe(lay, system))
            out.items.append(item)
            yield item, lay, rep

    def datafile_path(self, file: str, replica: str, datafile: int, server_name: str) -> str:
        """Where a replica data file (``datafile`` ≥ 1 of ``replica``, on one server) goes:
        ``FILE.pario-REPLICA.dD.SERVER`` beside the file (``"*"``: in the root)."""
        name = (f"{'' if file == '*' else file}.pario-{check_name(replica, 'replica name', component=True)}"
                f".d{datafile}.{check_name(server_name, 'server name', component=True)}")
        return self.operand(target_path(self.root, name, allow_absolute=self.absolute_names))


def no_whole_replica(item: Item, why: str) -> None:
    """A whole-file replica on a target with one layout per file: nothing is emitted."""
    item.status = "not-expressible"
    item.not_exact("replica", f"{why}; a whole-file replica with another layout and per-request routing is not "
                   "expressible", "nothing (the file keeps its layout)")


def q(text: str) -> str:
    """A shell word."""
    return shlex.quote(str(text))


def command(*words) -> str:
    """A command line: every word shell-quoted."""
    return " ".join(q(w) for w in words)


def get_emitter(name: str, **kw) -> Emitter:
    """The emitter of a target (:data:`EMITTERS`: lustre, beegfs, orangefs, cephfs)."""
    return EMITTERS.create(name, **kw)


# ---------------------------------------------------------------------- layout helpers
def as_striped(layout: Layout) -> tuple[Striped | None, str | None]:
    """A striped or 2-D layout as round-robin striping over its used servers (0-stripes
    dropped).  A CI-LAYOUT 2-D layout (seed 002 §3) of groups g_0, g_1, … with stripe S puts
    byte x on the same server as fixed S-striping over the concatenated groups: one round
    of W = S·Σ|g_k| bytes gives group k the bytes [S·Σ_{i<k}|g_i|, S·Σ_{i≤k}|g_i|), striped
    by S over g_k — i.e. the k-th run of |g_k| stripes of the concatenation.  Returns
    (striped, note) or (None, None) for regions and extent maps."""
    if isinstance(layout, Striped):
        keep = [(s, w) for s, w in zip(layout.servers, layout.stripes) if w > 0]
        return Striped(tuple(s for s, _ in keep), tuple(w for _, w in keep)), None
    if isinstance(layout, Grouped):
        servers = tuple(s for g in layout.groups for s in g)
        note = (f"2-D layout ({len(layout.groups)} groups × {layout.stripe} B) = fixed {layout.stripe} B "
                "striping over its groups' servers in group order (the same byte → server map)")
        return Striped.fixed(layout.stripe, servers), note
    return None, None


def first_region(layout: Regions) -> Layout:
    return layout.regions[0].layout


def one_layout_per_file(item: Item, lay: Layout, system, fs: str, what: str = "layout") -> Striped | None:
    """For targets with one striping per file (BeeGFS, OrangeFS, CephFS): a region layout
    becomes its first region's layout (nearest), an extent map its default layout (or
    nothing); the rest as :func:`as_striped`.  ``fs`` names the target, ``what`` its kind of
    per-file layout; the item's report says what was not expressible."""
    if isinstance(lay, Regions):
        item.status = "nearest"
        item.not_exact("regions", f"{len(lay.regions)} regions: {fs} has one {what} per file",
                       f"the first region's layout ({describe(first_region(lay), system)}) for the whole file")
        lay = first_region(lay)
    if isinstance(lay, ExtentMap):
        item.status = "nearest" if lay.default is not None else "not-expressible"
        item.not_exact("extent map", f"{fs} places a file by its {what} only",
                       "the map's default layout" if lay.default is not None else "nothing")
        if lay.default is None:
            return None
        lay = lay.default
    st, note = as_striped(lay)
    if note:
        item.exact.append(note)
    return st


def nearest_multiple(x: float, unit: int) -> int:
    """The multiple of ``unit`` nearest to x, at least ``unit``."""
    return max(unit, round(x / unit) * unit)


def nearest_pow2(x: float, lo: int) -> int:
    """The power of two nearest to x in log2 (ties up), at least ``lo``."""
    if x <= lo:
        return lo
    k = math.log2(x)
    return max(lo, 1 << math.floor(k + 0.5))


def fmt_size(n: int) -> str:
    """A size in the suffix form most tools take (``64K``, ``4M``, ``1G``) when exact, else bytes."""
    for suf, mult in (("G", 1 << 30), ("M", MiB), ("K", KiB)):
        if n % mult == 0 and n >= mult:
            return f"{n // mult}{suf}"
    return str(n)


def kinds_of(servers, system) -> set[str]:
    return {system.servers[s].kind for s in servers}


def plan_entries(plan):
    """(file, what, layout, replica dict or None) for every layout then every replica."""
    for f, lay in plan.layouts.items():
        yield f, "layout", lay, None
    for f, reps in plan.replicas.items():
        for r in reps:
            name = r.get("name")
            if name is not None:
                check_name(name, "replica name", component=True)
            yield f, f"replica {'?' if name is None else name}", r["layout"], r


def replica_datafiles(emap: ExtentMap) -> list[tuple[int, int, int]]:
    """(datafile, server, bytes) of every replica data file an extent map uses, in order of
    first use: CEDA keeps replica data files per server (seed 000 §4.5)."""
    seen: dict[tuple[int, int], int] = {}
    for df, srv, ln in zip(emap.datafile.tolist(), emap.server.tolist(), emap.length.tolist()):
        key = (int(df), int(srv))
        seen[key] = seen.get(key, 0) + int(ln)
    return [(d, s, n) for (d, s), n in seen.items()]


def load_plan(path, system_spec=None):
    """(plan, system) for ``pario apply``: the plan's own system profile unless ``system_spec``
    is given; a plan made for another system is refused."""
    from ..plan.base import Plan, read_plan_json
    from ..system import load_system

    d = read_plan_json(path)
    if not isinstance(d, dict):
        raise ParioError(f"{path}: not a pario plan (a JSON object is expected)")
    planned_for = d.get("system")
    if system_spec is None:
        if not planned_for:
            raise ParioError(f"{path}: the plan names no system; give --system")
        try:
            system = load_system(planned_for)
        except ParioError:
            raise ParioError(f"{path}: the plan is for system {planned_for!r}, which is not a built-in "
                             "profile; give its profile with --system") from None
    else:
        system = load_system(system_spec)
        if planned_for and planned_for != system.name:
            raise ParioError(f"{path}: the plan is for system {planned_for!r} but --system is {system.name!r}")
    return Plan.from_dict(d, system), system


__all__ = [
    "EMITTERS",
    "STATUSES",
    "TARGETS",
    "Emission",
    "Emitter",
    "Item",
    "as_striped",
    "command",
    "describe",
    "get_emitter",
    "load_plan",
    "plan_entries",
]
