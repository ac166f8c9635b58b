"""``DIR/ceph.conf``: one cluster on 127.0.0.1, auth none, everything kept under DIR.

Ports: the monitor listens on msgr2 and msgr1 addresses (Ceph's standard 3300 and 6789);
the OSDs, the manager and the MDS bind within ``[ms bind port min, ms bind port max]``
(standard 6800–7300).  ``port_base = P`` moves all of them: monitor P (msgr2) and P + 1
(msgr1), daemons P + 2 … P + 2 + :func:`bind_span`, so that a second cluster (a test's)
runs beside the standard one.

Clients get timeouts from the ``[client]`` section (every ``ceph`` / ``rados`` command,
librados and libcephfs user reads it): an operation on a down OSD or an unreachable monitor
fails after ``rados osd op timeout`` / ``rados mon op timeout`` seconds instead of hanging.
"""

from __future__ import annotations

from pathlib import Path

STANDARD_MON_PORTS = (3300, 6789)
STANDARD_BIND_PORTS = (6800, 7300)
CLIENT_OP_TIMEOUT = 60     # s: rados osd op timeout (a throttled OSD may be slow, not down)
CLIENT_MON_TIMEOUT = 30    # s: rados mon op timeout, client mount timeout


def bind_span(n_osds: int) -> int:
    """Ports the daemons need: an OSD binds 4 messengers (public, cluster, 2 heartbeat) with
    a msgr2 and a msgr1 port each; manager and MDS 2 each; plus room for rebinds."""
    return 8 * n_osds + 2 + 2 + 32


def ports(n_osds: int, port_base: int | None) -> tuple[tuple[int, int], tuple[int, int]]:
    """((mon msgr2, mon msgr1), (bind min, bind max)) for ``port_base`` (None: Ceph's standard ports)."""
    if port_base is None:
        return STANDARD_MON_PORTS, STANDARD_BIND_PORTS
    p = int(port_base)
    return (p, p + 1), (p + 2, p + 2 + bind_span(n_osds))


def mon_addrs(mon_ports: tuple[int, int]) -> list[str]:
    return [f"v2:127.0.0.1:{mon_ports[0]}", f"v1:127.0.0.1:{mon_ports[1]}"]


def conf_text(d: str | Path, fsid: str, mon: list[str], bind: tuple[int, int],
              hosts: dict[int, str]) -> str:
    """The ceph.conf of the cluster in ``d``; ``hosts`` maps OSD id → its own CRUSH host bucket."""
    d = str(d)
    lines = [
        "# written by 'pario cluster up': a single-host cluster on 127.0.0.1 (see docs/cluster.md)",
        "[global]",
        f"fsid = {fsid}",
        f"mon host = [{','.join(mon)}]",
        "public addr = 127.0.0.1",
        "cluster addr = 127.0.0.1",
        "ms bind ipv4 = true",
        "ms bind ipv6 = false",
        f"ms bind port min = {bind[0]}",
        f"ms bind port max = {bind[1]}",
        "auth cluster required = none",
        "auth service required = none",
        "auth client required = none",
        "auth allow insecure global id reclaim = false",
        f"keyring = {d}/$cluster.$name.keyring",
        f"run dir = {d}/run",
        f"admin socket = {d}/run/$name.asok",
        f"log file = {d}/log/$name.log",
        f"mon cluster log file = {d}/log/cluster.log",
        f"mon data = {d}/mon/$cluster-$id",
        f"mgr data = {d}/mgr/$cluster-$id",
        f"osd data = {d}/osd/$cluster-$id",
        f"mds data = {d}/mds/$cluster-$id",
        # one copy: a server's pool lives on exactly one OSD
        "osd pool default size = 1",
        "osd pool default min size = 1",
        "mon allow pool size one = true",
        "mon allow pool delete = true",
        "mon warn on pool no redundancy = false",
        "osd pool default pg autoscale mode = off",
        "osd pool default pg num = 8",
        "osd pool default pgp num = 8",
        # the images are sparse files on the host's disk: no free-space alarms about that disk
        "mon data avail warn = 2",
        "mon data avail crit = 1",
        "osd memory target = 1073741824",
        # a read reaches the server's (throttled) device every time, as the testbed's O_DIRECT
        # reads do: BlueStore keeps no data it read in its cache (its metadata cache stays), so
        # a calibration that reads a range twice measures the device, not the OSD's memory
        "bluestore default buffered read = false",
        # and every write lands where it belongs at once: an HDD-class OSD otherwise defers
        # writes of up to 64 KiB (bluestore_prefer_deferred_size_hdd) through its RocksDB WAL and
        # serves reads of them from memory until it applies them; measured: 16-55 of 64 fresh
        # 16 KiB objects read with no device request, before and after `cache drop` and the
        # host's drop_caches (with this: 64 of 64); a CEDA replica just copied read faster
        # than its model (issue 27)
        "bluestore prefer deferred size hdd = 0",
        "osd fast shutdown = true",
        # the monitor commits a change after 0.1 s, not 1 s: creating a pool is three commands
        "paxos propose interval = 0.1",
        "",
        "[client]",
        f"admin socket = {d}/run/$name.$pid.asok",
        f"log file = {d}/log/$name.$pid.log",
        f"rados osd op timeout = {CLIENT_OP_TIMEOUT}",
        f"rados mon op timeout = {CLIENT_MON_TIMEOUT}",
        f"client mount timeout = {CLIENT_MON_TIMEOUT}",
        "",
    ]
    for osd, host in sorted(hosts.items()):
        lines += [f"[osd.{osd}]", f"crush location = root=default host={host}", ""]
    return "\n".join(lines)
