"""The ``ceph_cluster`` fixture: a small real Ceph cluster (pario.cluster) for one test module.

Use it by importing it into a test module::

    from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture)

    def test_something(ceph_cluster):
        cl = ceph_cluster          # a pario.cluster.Cluster: cl.conf, cl.servers[i].pool, cl.mount …

It brings up 2 HDD-like servers (H0, H1: 250 IOPS, 16 MiB/s) and 2 SSD-like ones (S0, S1:
the testbed's defaults) on 2 GiB sparse OSDs, on a free port range of its own (a standard
cluster or another test's can run beside it), and takes it down after the module; every test
of the module skips with the reason when the machine cannot run it (not root, Ceph not
installed: ``scripts/setup.sh ceph``).
"""

from __future__ import annotations

import os
import socket

import pytest

from pario import ParioError
from pario.cluster import conf as cluster_conf
from pario.cluster import core as cluster_core

HDD, SSD = 2, 2
HDD_IOPS, HDD_BPS = 250, 16 << 20
OSD_SIZE = 2 << 30


def ceph_skip_reason() -> str | None:
    """Why this machine cannot run a cluster (None when it can)."""
    try:
        cluster_core.check_support()
    except ParioError as exc:
        return str(exc)
    return None


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_base(n_osds: int) -> int:
    """A port base whose whole range (monitor + daemons) is free now; xdist workers start their
    search at different places so that two of them do not pick the same range."""
    span = cluster_conf.bind_span(n_osds) + 2
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    start = int(worker[2:]) if worker[2:].isdigit() else 0
    for k in range(start * 7, start * 7 + 60):
        base = 21000 + 200 * (k % 100)
        if all(_free(p) for p in range(base, base + span)):
            return base
    raise RuntimeError("no free port range for a test cluster")


@pytest.fixture(scope="module")
def ceph_cluster(tmp_path_factory):
    reason = ceph_skip_reason()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("ceph") / "cluster"
    cl = cluster_core.up(d, hdd=HDD, ssd=SSD, hdd_iops=HDD_IOPS, hdd_bps=HDD_BPS, osd_size=OSD_SIZE,
                         port_base=free_port_base(HDD + SSD))
    try:
        yield cl
    finally:
        cluster_core.down(d)
