"""``pario apply PLAN --cephfs CLUSTER_DIR``: a plan's layouts set on a live CephFS and read back.

The CephFS emitter's commands (:mod:`pario.apply.emit_cephfs`: ``touch`` then ``setfattr -n
ceph.file.layout.* -v …`` in an order that keeps every intermediate layout valid), with the
cluster's own device-class data pools (``pario cluster up``: ``pario-fs-hdd``,
``pario-fs-ssd``) and its ``ceph-fuse`` mount as the root, are run one by one; then every
file's layout is read back (``getxattr ceph.file.layout.*``) and compared with the last value
each field was set to.  A layout is set only on an empty file (Ceph refuses it otherwise):
a plan's file that exists with bytes is refused with one line before anything is changed.
What the plan needs and CephFS cannot express is the emitter's report (docs/emit.md).

The plan's names are checked by the emitter (:mod:`pario.names`: one line, nothing changed,
for a bad one), and every path is resolved (symbolic links followed) before anything is
created and again before each command: a path outside the mount is refused.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .. import ParioError
from .emit_cephfs import CephFSEmitter

FIELDS = ("pool", "stripe_count", "stripe_unit", "object_size")


@dataclass
class Applied:
    """The emission and, per file set, the layout asked for and the one read back."""

    emission: object
    files: dict[str, dict] = field(default_factory=dict)     # path → {"set": {...}, "read": {...}}

    @property
    def ok(self) -> bool:
        return all(v["set"] == v["read"] for v in self.files.values())

    def to_dict(self) -> dict:
        return {**self.emission.to_dict(), "applied": self.files, "verified": self.ok}


def _wanted(argvs: list[list[str]]) -> dict[str, dict]:
    """path → the last value of every ceph.file.layout field the commands set."""
    out: dict[str, dict] = {}
    for a in argvs:
        if a[:2] == ["setfattr", "-n"] and a[2].startswith("ceph.file.layout."):
            out.setdefault(a[-1], {})[a[2].rsplit(".", 1)[1]] = a[4]
    return out


def _inside(path: str, mount: Path) -> None:
    """A ParioError unless ``path``, symbolic links followed, lies under ``mount`` (resolved)."""
    real = Path(os.path.realpath(path))
    if mount not in (real, *real.parents):
        raise ParioError(f"{path!r} resolves to {str(real)!r}, outside the CephFS mount {str(mount)!r}")


def read_layout(path: str | Path) -> dict:
    """The file's CephFS layout fields, read back through the mount (virtual xattrs)."""
    out = {}
    for k in FIELDS:
        try:
            out[k] = os.getxattr(str(path), f"ceph.file.layout.{k}").decode().strip()
        except OSError as exc:
            raise ParioError(f"{path}: cannot read its CephFS layout ({k}): {exc.strerror}") from None
    return out


def apply_cephfs(plan, system, cluster_dir: str | Path, *, subdir: str = ".", absolute_names: bool = False,
                 timeout: float = 60.0) -> Applied:
    """Set the plan's layouts on the CephFS of the ``pario cluster`` at ``cluster_dir``, its
    file names relative to ``subdir`` of the mount (the plan's ``*`` layout: that
    directory's default layout); ``absolute_names``: absolute file names are allowed (they
    must still lie under the mount)."""
    from ..cluster.state import load_state

    cl = load_state(cluster_dir)
    mount = cl.mount
    if not mount or not os.path.ismount(mount):
        raise ParioError(f"cluster {cluster_dir}: its CephFS is not mounted (pario cluster status {cluster_dir})")
    pools = {k: cl.fs_pools[k] for k in ("hdd", "ssd") if k in cl.fs_pools}
    if not pools:
        raise ParioError(f"cluster {cluster_dir}: no device-class data pools (pario-fs-hdd / pario-fs-ssd)")
    pools.setdefault("hdd", next(iter(pools.values())))
    pools.setdefault("ssd", pools["hdd"])
    top = Path(mount).resolve()
    root = (Path(mount) / subdir).resolve()
    if top not in (root, *root.parents):
        raise ParioError(f"--root {subdir}: outside the CephFS mount {mount}")
    em = CephFSEmitter(root=str(root), absolute_names=absolute_names, fs_name=cl.fs_name,
                       pools=pools).emit(plan, system)              # every name checked: nothing changed yet
    cmds = em.commands()
    argvs = [shlex.split(c) for c in cmds]          # each acts on one path, its last word
    for a in argvs:
        _inside(a[-1], top)
    want = _wanted(argvs)
    for path in want:                                # a layout only goes on an empty file
        if os.path.exists(path) and os.path.getsize(path) > 0:
            raise ParioError(f"{path}: exists with {os.path.getsize(path)} bytes; CephFS sets a layout only on an "
                             "empty file (remove it first)")
    root.mkdir(parents=True, exist_ok=True)
    for c, a in zip(cmds, argvs):
        _inside(a[-1], top)                          # again: a link may have appeared since
        if a[0] == "touch":
            Path(a[-1]).parent.mkdir(parents=True, exist_ok=True)
        elif a[0] == "setfattr" and not os.path.exists(a[-1]):
            Path(a[-1]).mkdir(parents=True, exist_ok=True)          # a directory default ('*')
        try:
            r = subprocess.run(a, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            raise ParioError(f"{a[0]}: not installed (scripts/setup.sh ceph installs attr)") from None
        except subprocess.TimeoutExpired:
            raise ParioError(f"{c}: no answer in {timeout:g} s (is the cluster healthy?)") from None
        if r.returncode != 0:
            raise ParioError(f"{c}: {(r.stderr or r.stdout).strip().splitlines()[-1] if (r.stderr or r.stdout) else 'failed'}")
    out = Applied(em)
    for path, fields in want.items():
        got = read_layout(path)
        out.files[path] = {"set": {k: fields[k] for k in FIELDS if k in fields},
                           "read": {k: got[k] for k in FIELDS if k in fields}}
    return out
