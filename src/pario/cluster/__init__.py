"""A real Ceph cluster on this host: ``pario cluster up|status|down`` (root, Ceph installed).

One monitor, one manager, N + M BlueStore OSDs and an MDS, all on 127.0.0.1 with auth
``none``, every file under the cluster's directory ``DIR``:

- every pario server (``H0 .. H(N-1)`` HDD-like, ``S0 .. S(M-1)`` SSD-like) is one OSD on its
  own loop device (``losetup --direct-io=on`` over a sparse image ``DIR/img/<name>.img``),
  throttled like the testbed's servers (:mod:`pario.testbed`: blk-throttle per device) in
  its own blkio cgroup, which the OSD process joins before it executes; its CRUSH device
  class (``hdd`` / ``ssd``) is written into its directory before its first start;
- every OSD is alone in its own CRUSH host bucket, so the pool of server ``H0``
  (``pario-H0``: a rule over that bucket, size 1) places every object on ``H0``'s OSD only —
  checked with ``ceph osd map`` by ``up`` itself (:mod:`pario.cluster.pools`); pools per
  device class and CephFS data pools per device class complete it;
- CephFS ``pario`` is mounted with ``ceph-fuse`` at ``DIR/mnt``;
- ``DIR/cluster.json`` records every PID, loop device, cgroup and pool as soon as it exists
  (:mod:`pario.cluster.state`), so ``down`` releases everything also after a crash;
- ``DIR/nominal.toml`` is the system profile of the servers (α = 1/IOPS, β = 1/BPS, the
  testbed's nominal profile) that pario's planners price the cluster with.

Clients (``ceph``, ``rados``, librados through :func:`pario.cluster.client.connect`) read
``DIR/ceph.conf``, whose ``[client]`` section gives every operation a timeout.
"""

from .client import connect, mon, session
from .core import DEFAULT_OSD_SIZE, check_support, down, nominal_system, status, up
from .devices import restart_throttle
from .state import CONF_FILE, MOUNT_DIR, NOMINAL_PROFILE, STATE_FILE, Cluster, ClusterServer, Daemon, find_cluster, load_state

__all__ = [
    "CONF_FILE",
    "Cluster",
    "ClusterServer",
    "DEFAULT_OSD_SIZE",
    "Daemon",
    "MOUNT_DIR",
    "NOMINAL_PROFILE",
    "STATE_FILE",
    "check_support",
    "connect",
    "down",
    "find_cluster",
    "load_state",
    "mon",
    "nominal_system",
    "restart_throttle",
    "session",
    "status",
    "up",
]
