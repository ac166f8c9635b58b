"""The emulated cluster is faithful (docs/multinode.md, "Test fixture"): each property is
checked against something other than the fixture's own word -- the nodes' kernels (hostname,
boot id, mounts, namespaces), MPI's own view of shared memory, sha256 of bytes made here,
flock(1)'s exit status, and IOR's read-back checks of what it wrote (the baseline the served
multi-node tests compare with)."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import sys
import threading
from pathlib import Path

import pytest
from helpers import on_path
from nodes import RUN, by_node

pytestmark = pytest.mark.multinode
HERE = Path(__file__).parent
PY = shlex.quote(sys.executable)      # the venv's python: the root file system is shared by the nodes


@pytest.fixture(scope="module")
def node_info(cluster3):
    """tests/multinode/node_info.c built with the wheel's mpicc into the nodes' home."""
    on_path("native")   # compile_mpi of tests/native/test_serve_mpi.py, from this folder
    from test_serve_mpi import compile_mpi

    (cluster3.home / "bin").mkdir(exist_ok=True)
    return compile_mpi(HERE / "node_info.c", cluster3.home / "bin" / "node_info")


@pytest.fixture
def pdir(cluster3, request):
    """A fresh directory on the CephFS (path as the nodes see it), removed after the test."""
    d = cluster3.pfs / re.sub(r"\W", "_", request.node.name)
    cluster3.run("n1", f"rm -rf {d} && mkdir {d}")
    yield d
    cluster3.run("n1", f"rm -rf {d}", check=False)


def _nodes_view(cluster3, hosts):
    """{node: (hostname, boot id)} as each node's kernel reports them, without MPI."""
    _, out = cluster3.run(hosts, "hostname; cat /proc/sys/kernel/random/boot_id")
    return {n: tuple(lines) for n, lines in by_node(out).items()}


@pytest.mark.parametrize("hosts,np", [("n1,n2,n3", 3), ("n1,n2", 4)])
def test_mpi_ranks_run_on_distinct_nodes(cluster3, node_info, hosts, np):
    """One MPI job over the hosts: each rank reports the hostname and boot id that its node
    reports outside MPI (block mapping: np/len(hosts) ranks a node, in host order), the nodes'
    boot ids differ from each other and from the host's, and MPI finds no memory shared across
    nodes (the node-local communicator holds the ranks of one node only)."""
    cp = cluster3.mpi(hosts, np, [node_info], timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    ranks = [line.split() for line in cp.stdout.splitlines() if line.startswith("rank ")]
    assert [int(r[1]) for r in ranks] == list(range(np)), cp.stdout
    hl = hosts.split(",")
    ppn = np // len(hl)
    view = _nodes_view(cluster3, hosts)
    host_boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    for r in ranks:
        node = hl[int(r[1]) // ppn]
        assert (r[3], r[5]) == view[node], (r, view)
        assert int(r[7]) == ppn, r
    boots = {b for _, b in view.values()}
    assert len({h for h, _ in view.values()}) == len(hl) and len(boots) == len(hl) and host_boot not in boots


def test_each_node_mounts_cephfs_by_its_own_ceph_fuse(cluster3):
    """Every node sees a fuse.ceph-fuse mount at pfs, of a device of its own (one FUSE
    connection each); the ceph-fuse serving node nK lives in nK's mount namespace (as the
    host's /proc says); the host itself has no CephFS at that path."""
    _, out = cluster3.run("n1,n2,n3", f"findmnt -n -o FSTYPE --mountpoint {cluster3.pfs}; stat -c %d {cluster3.pfs}")
    view = by_node(out)
    assert {n: v[0] for n, v in view.items()} == {n: "fuse.ceph-fuse" for n in cluster3.nodes}, out
    assert len({v[1] for v in view.values()}) == 3, out
    for n in cluster3.nodes:
        pid = int((RUN / f"{n}.ceph-fuse.pid").read_text())
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "ceph-fuse"
        assert os.stat(f"/proc/{pid}/ns/mnt").st_ino == os.stat(RUN / f"{n}.mnt").st_ino
    assert not os.path.ismount(cluster3.pfs)


def test_close_to_open_across_nodes(cluster3, pdir):
    """Random bytes written with pwrite (64 KiB pieces, last first) on n1's CephFS and
    closed are read back byte-identical on n2 (sha256 of the bytes made here)."""
    data = secrets.token_bytes((3 << 20) + 12345)
    src = cluster3.home / "ctoc.src"
    src.write_bytes(data)
    writer = ("import os, sys; d = open(sys.argv[1], 'rb').read(); "
              "fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); "
              "[os.pwrite(fd, d[o:o + 65536], o) for o in reversed(range(0, len(d), 65536))]; os.close(fd)")
    cluster3.run("n1", f"{PY} -c {shlex.quote(writer)} {src} {pdir}/f")
    _, out = cluster3.run("n2", f"stat -c %s {pdir}/f; sha256sum < {pdir}/f")
    size, digest = by_node(out)["n2"]
    assert int(size) == len(data)
    assert digest.split()[0] == hashlib.sha256(data).hexdigest()
    src.unlink()


def test_flock_is_cluster_wide(cluster3, pdir):
    """A flock held on n2 makes a non-blocking flock of the same file on n1 fail with
    flock(1)'s conflict status; once n2 lets go, n1 gets it."""
    lock, held, done = f"{pdir}/lock", f"{pdir}/held", f"{pdir}/done"
    holder = (f"exec 9>>{lock} && flock -n 9 && touch {held} && "
              f"for i in $(seq 300); do [ -e {done} ] && break; sleep 0.1; done")
    res = {}
    t = threading.Thread(target=lambda: res.update(r=cluster3.run("n2", holder, check=False, timeout=60)))
    t.start()
    try:
        _, out = cluster3.run("n1", f"for i in $(seq 200); do [ -e {held} ] && break; sleep 0.1; done; "
                                    f"[ -e {held} ] || exit 3; flock -n -E 75 {lock} true; echo $?; touch {done}")
    finally:
        t.join(70)
    assert res["r"][0] == 0, res
    assert by_node(out)["n1"] == ["75"], out
    rc, out = cluster3.run("n1", f"flock -n -E 75 {lock} true", check=False)
    assert rc == 0, out


def test_tmp_and_shm_are_private_to_a_node(cluster3):
    """A file made in n1's /tmp and /dev/shm is seen on n1 only: not on n2 nor on the host."""
    name = f"mn-private-{secrets.token_hex(4)}"
    try:
        cluster3.run("n1", f"touch /tmp/{name} /dev/shm/{name}")
        test = f"for d in /tmp /dev/shm; do [ -e $d/{name} ] && echo $d yes || echo $d no; done"
        _, out = cluster3.run("n1,n2", test)
        assert by_node(out) == {"n1": ["/tmp yes", "/dev/shm yes"], "n2": ["/tmp no", "/dev/shm no"]}, out
        assert not Path(f"/tmp/{name}").exists() and not Path(f"/dev/shm/{name}").exists()
    finally:
        cluster3.run("n1", f"rm -f /tmp/{name} /dev/shm/{name}", check=False)


# ---------------------------------------------------------------------- IOR baseline

@pytest.mark.parametrize("collective", [False, True], ids=["independent", "collective"])
@pytest.mark.parametrize("hosts", ["n1,n2", "n1,n2,n3"])
def test_ior_mpiio_on_cephfs(cluster3, ior_mn, pdir, hosts, collective):
    """IOR -a MPIIO, one rank a node, writes then reads one shared file on CephFS, each rank
    reading its neighbour's blocks (-C: another node's): IOR's own checks of what it wrote
    (-W, read back after the write) and read (-R) find no error, and the file's size on the
    last node is ranks x block x segments."""
    np, block, segments = len(hosts.split(",")), 1 << 20, 4
    data = f"{pdir}/ior.dat"
    argv = [ior_mn, "-a", "MPIIO", "-w", "-r", "-C", "-e", "-W", "-R", "-k", "-b", "1m", "-t", "64k", "-s", "4",
            *(["-c"] if collective else []), "-o", data]
    cp = cluster3.mpi(hosts, np, argv, timeout=120)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 0, out[-3000:]       # IOR exits with its error count
    assert not re.search(r"incorrect data|error", out, re.I), out[-3000:]
    assert re.search(r"^write\s", cp.stdout, re.M) and re.search(r"^read\s", cp.stdout, re.M), cp.stdout
    last = hosts.split(",")[-1]
    _, st = cluster3.run(last, f"stat -c %s {data}")
    assert int(by_node(st)[last][0]) == np * block * segments
