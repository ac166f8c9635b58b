"""The state of one cluster, ``DIR/cluster.json``: what ``up`` made, saved before each next step.

``down`` works from this file (and from scans of ``/proc``, ``/proc/mounts``, ``losetup``
and the cgroup hierarchy for anything the file missed), so it must name every resource as
soon as it exists: a daemon's PID right after its start, a loop device right after
``losetup``, a cgroup right after ``mkdir``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import ParioError

STATE_FILE = "cluster.json"
NOMINAL_PROFILE = "nominal.toml"
CALIBRATED_PROFILE = "calibrated.toml"
CONF_FILE = "ceph.conf"
MOUNT_DIR = "mnt"


@dataclass
class ClusterServer:
    """One pario server = one OSD: a loop device over ``image``, throttled in its own cgroup."""

    name: str            # H0.., S0.. (the system profile's server name)
    kind: str            # hdd | ssd (also the OSD's CRUSH device class)
    iops: int
    bps: int
    image: str
    osd: int | None = None       # the OSD id (``ceph osd new``)
    uuid: str | None = None
    host: str | None = None      # its CRUSH host bucket (it holds only this OSD)
    pool: str | None = None      # its pool: CRUSH rule over ``host`` only, size 1
    loop: str | None = None
    majmin: str | None = None
    cgroup: str | None = None    # absolute path of its blkio cgroup

    def limits(self) -> dict[str, int]:
        return {"read_iops": int(self.iops), "write_iops": int(self.iops),
                "read_bps": int(self.bps), "write_bps": int(self.bps)}


@dataclass
class Daemon:
    """One process ``up`` started (detached: its parent is not pario)."""

    name: str            # mon.a, mgr.x, osd.0, mds.a, client.fuse
    pid: int
    cmd: list[str]
    log: str


@dataclass
class Cluster:
    """State of one cluster (saved as ``DIR/cluster.json``)."""

    dir: str
    fsid: str
    mon_addrs: list[str]         # [v2 addr, v1 addr]
    bind_ports: list[int]        # [min, max] for OSD / mgr / MDS messengers
    osd_size: int
    cgroup_version: int = 1
    cgroup_root: str | None = None
    servers: list[ClusterServer] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)
    pools: dict[str, str] = field(default_factory=dict)   # pool → what it is for
    fs_name: str = "pario"
    fs_pools: dict[str, str] = field(default_factory=dict)  # metadata | data | hdd | ssd → pool
    mount: str | None = None
    created: float = 0.0
    up_seconds: float | None = None
    complete: bool = False

    @property
    def state_path(self) -> Path:
        return Path(self.dir) / STATE_FILE

    @property
    def conf(self) -> str:
        return str(Path(self.dir) / CONF_FILE)

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, self.state_path)

    def server(self, name: str) -> ClusterServer:
        for s in self.servers:
            if s.name == name:
                return s
        raise ParioError(f"cluster {self.dir} has no server {name!r} (servers: {', '.join(s.name for s in self.servers)})")

    def daemon(self, name: str) -> Daemon | None:
        for dm in self.daemons:
            if dm.name == name:
                return dm
        return None


def load_state(d: str | Path) -> Cluster:
    """Load ``DIR/cluster.json`` (ParioError if DIR is not a cluster)."""
    p = Path(d).resolve() / STATE_FILE
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise ParioError(f"{Path(d)} is not a pario cluster (no {STATE_FILE}); create one with 'pario cluster up'") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ParioError(f"{p}: unreadable cluster state ({exc})") from None
    servers = [ClusterServer(**s) for s in raw.pop("servers", [])]
    daemons = [Daemon(**dm) for dm in raw.pop("daemons", [])]
    return Cluster(servers=servers, daemons=daemons, **raw)


def find_cluster(path: str | Path) -> Cluster | None:
    """The cluster whose directory contains ``path`` (walking up; e.g. a file under ``DIR/mnt``), or None."""
    p = Path(path).resolve()
    for q in (p, *p.parents):
        if (q / STATE_FILE).is_file() and (q / CONF_FILE).is_file():
            try:
                return load_state(q)
            except ParioError:
                return None
    return None
