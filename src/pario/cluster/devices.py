"""An OSD's device: a sparse image → a loop device (direct I/O) → its own blkio cgroup.

The throttle is the testbed's (:mod:`pario.testbed`): per-device limits in a blkio cgroup
(v1 ``blkio.throttle.*`` or v2 ``io.max``), written and read back with the testbed's own
functions.  The difference is one cgroup *per OSD*: the OSD process is started inside it
(:func:`pario.cluster.daemons.spawn`), so every bio it submits to its loop device — BlueStore
data, BlueFS/RocksDB metadata, deferred writes — is charged against that device's limits.
``losetup --direct-io=on`` keeps the host's page cache out of the way below the loop device.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from .. import ParioError
from ..testbed import core as tb
from .state import Cluster, ClusterServer


def attach(image: str, size: int) -> tuple[str, str]:
    """Create the sparse ``image`` of ``size`` bytes and a direct-I/O loop device over it:
    (loop device, "major:minor")."""
    with open(image, "wb") as f:
        f.truncate(int(size))
    loop = tb._run(["losetup", "--find", "--show", "--direct-io=on", image], f"loop device for {image}").strip()
    st = os.stat(loop)
    return loop, f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def loops_of(image: str) -> list[str]:
    """Loop devices backed by ``image`` now (``losetup -j``)."""
    return tb._loops_backed_by(image)


def detach(image: str) -> tuple[list[str], list[str]]:
    """Detach every loop device backed by ``image``: (detached, still attached)."""
    done, left = [], []
    for loop in loops_of(image):
        subprocess.run(["losetup", "-d", loop], capture_output=True, text=True, timeout=30)
        for _ in range(50):  # a device still open is only marked autoclear: wait until it is gone
            if loop not in loops_of(image):
                break
            time.sleep(0.1)
        (done if loop not in loops_of(image) else left).append(loop)
    return done, left


def cgroup_prefix(d: str | Path) -> str:
    """Name prefix of the cluster's cgroups (the testbed's naming, plus ``-ceph``)."""
    return tb._cgroup_name(Path(d)) + "-ceph"


def make_cgroup(cl: Cluster, s: ClusterServer) -> str:
    """Create the OSD's cgroup in the cluster's hierarchy and record it in ``s`` (not yet limited)."""
    root = cl.cgroup_root
    if cl.cgroup_version == 2:  # the io controller must be enabled for the root's children
        ctl = Path(root, "cgroup.subtree_control")
        if "io" not in ctl.read_text().split():
            tb._write(ctl, "+io")
    cg = os.path.join(root, f"{cgroup_prefix(cl.dir)}-{s.name}")
    s.cgroup = cg
    cl.save()
    os.makedirs(cg, exist_ok=True)
    return cg


def _view(cl: Cluster, s: ClusterServer) -> tuple[tb.Testbed, tb.TestbedServer]:
    """The OSD's cgroup and device as a one-server testbed, for the testbed's throttle functions."""
    view = tb.Testbed(dir=cl.dir, size=cl.osd_size, cgroup_version=cl.cgroup_version, cgroup=s.cgroup,
                      cgroup_root=cl.cgroup_root)
    srv = tb.TestbedServer(name=s.name, kind=s.kind, iops=s.iops, bps=s.bps, image=s.image, loop=s.loop,
                           majmin=s.majmin)
    view.servers.append(srv)
    return view, srv


def throttle(cl: Cluster, s: ClusterServer) -> None:
    """Write the server's limits (read and write IOPS and bytes/s) for its loop device into its cgroup."""
    view, srv = _view(cl, s)
    try:
        tb._apply_limits(view, srv)
    except OSError as exc:
        raise ParioError(f"cannot throttle {s.name} ({s.loop}) in {s.cgroup}: {exc.strerror}") from None


def read_throttle(cl: Cluster, s: ClusterServer) -> dict[str, int] | None:
    """The limits in force for the server's device, as read back from its cgroup (None if none)."""
    view, srv = _view(cl, s)
    return tb._read_limits(view, srv)


def restart_throttle(cl: Cluster, *, wait: bool = True) -> None:
    """Restart every OSD's throttle slices (:func:`pario.testbed.core.restart_throttle`): a
    measurement that starts now is not helped by credit from earlier idle time."""
    for s in cl.servers:
        if s.cgroup and s.majmin and os.path.isdir(s.cgroup):
            view, _srv = _view(cl, s)
            tb.restart_throttle(view, wait=False)
    if wait:
        time.sleep(tb.SLICE_EXPIRY_S)


def cgroup_procs(cg: str) -> list[int]:
    try:
        return [int(p) for p in Path(cg, "cgroup.procs").read_text().split()]
    except OSError:
        return []


def remove_cgroup(cg: str, root: str) -> bool:
    """Move anything still inside ``cg`` to the hierarchy's root and remove it; True when gone."""
    if not os.path.isdir(cg):
        return True
    for _ in range(40):
        for pid in cgroup_procs(cg):
            with contextlib.suppress(OSError):
                tb._write(os.path.join(root, "cgroup.procs"), str(pid))
        try:
            os.rmdir(cg)
            return True
        except OSError:
            time.sleep(0.05)
    return not os.path.isdir(cg)


def leftover_cgroups(d: str | Path) -> list[str]:
    """Cgroups named for the cluster in ``d`` that exist now (whether recorded or not)."""
    h = tb.cgroup_hierarchy()
    if h is None:
        return []
    prefix = cgroup_prefix(d) + "-"
    with contextlib.suppress(OSError):
        return sorted(os.path.join(h[1], e) for e in os.listdir(h[1]) if e.startswith(prefix))
    return []
