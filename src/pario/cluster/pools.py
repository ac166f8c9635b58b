"""The cluster's CRUSH rules and pools: one pool per server, one per device class, CephFS.

- Server pools (exact placement): every OSD is alone in its own host bucket (its
  ``crush location``); the rule ``pario-H0`` (``create-replicated pario-H0 <host> osd``)
  draws from that bucket only, and the pool ``pario-H0`` (size 1, min size 1) uses it.  So
  every object of ``pario-H0`` is on H0's OSD and nowhere else, which :func:`verify_placement`
  checks with Ceph's own mapping (``osd map``) right after the pools exist.
- Class pools ``pario-hdd`` / ``pario-ssd``: rules ``create-replicated … default osd <class>``
  over every OSD of the device class.
- CephFS ``pario``: metadata pool ``pario-fs-meta`` (on the ssd rule where there are SSD-like
  servers), data pools ``pario-fs-hdd`` (the default data pool where there are HDD-like
  servers) and ``pario-fs-ssd``, so that a file's layout can name a pool by device class.
"""

from __future__ import annotations

from .client import mon
from .state import Cluster

PREFIX = "pario-"
PG_NUM = 8


def rule_id(r, name: str) -> int:
    return int(mon(r, "osd crush rule dump", name=name)["rule_id"])


def _pool(r, cl: Cluster, name: str, rule: str, app: str, what: str) -> None:
    """Create ``name`` on ``rule`` (size 1 and min size 1: ceph.conf's pool defaults)."""
    mon(r, "osd pool create", pool=name, pg_num=PG_NUM, pgp_num=PG_NUM, pool_type="replicated", rule=rule)
    mon(r, "osd pool application enable", pool=name, app=app)
    cl.pools[name] = what
    cl.save()


def create(r, cl: Cluster) -> None:
    """Create every rule and pool of the cluster (see the module docstring) and record them."""
    for s in cl.servers:
        mon(r, "osd crush rule create-replicated", name=s.pool, root=s.host, type="osd")
        _pool(r, cl, s.pool, s.pool, "rados", f"server {s.name} (osd.{s.osd} only)")
    kinds = [k for k in ("hdd", "ssd") if any(s.kind == k for s in cl.servers)]
    for k in kinds:
        mon(r, "osd crush rule create-replicated", name=f"{PREFIX}{k}", root="default", type="osd", **{"class": k})
        _pool(r, cl, f"{PREFIX}{k}", f"{PREFIX}{k}", "rados", f"device class {k} (every {k} OSD)")
    meta_rule = f"{PREFIX}ssd" if "ssd" in kinds else f"{PREFIX}hdd"
    _pool(r, cl, f"{PREFIX}fs-meta", meta_rule, "cephfs", f"CephFS {cl.fs_name} metadata")
    cl.fs_pools["metadata"] = f"{PREFIX}fs-meta"
    for k in kinds:
        _pool(r, cl, f"{PREFIX}fs-{k}", f"{PREFIX}{k}", "cephfs", f"CephFS {cl.fs_name} data, device class {k}")
        cl.fs_pools[k] = f"{PREFIX}fs-{k}"
    cl.fs_pools["data"] = cl.fs_pools[kinds[0]]
    mon(r, "fs new", fs_name=cl.fs_name, metadata=cl.fs_pools["metadata"], data=cl.fs_pools["data"])
    for k in kinds[1:]:
        mon(r, "fs add_data_pool", fs_name=cl.fs_name, pool=cl.fs_pools[k])
    # one MDS and no standby wanted: no "insufficient standby" warning on a single host
    mon(r, "fs set", fs_name=cl.fs_name, var="standby_count_wanted", val="0")
    cl.save()


def acting(r, pool: str, obj: str) -> list[int]:
    """The OSDs Ceph maps object ``obj`` of ``pool`` to (``ceph osd map``: the acting set)."""
    m = mon(r, "osd map", pool=pool, object=obj)
    return [int(x) for x in m["acting"]]


def verify_placement(r, cl: Cluster, probes: int = 4) -> None:
    """Every server pool maps objects to its own OSD only (``osd map``), or a ParioError."""
    from .. import ParioError

    for s in cl.servers:
        for i in range(probes):
            got = acting(r, s.pool, f"pario-probe-{i}")
            if got != [s.osd]:
                raise ParioError(f"pool {s.pool} maps object pario-probe-{i} to OSDs {got}, not only osd.{s.osd}")
