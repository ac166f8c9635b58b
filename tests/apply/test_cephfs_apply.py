"""``pario apply PLAN --cephfs CLUSTER_DIR`` on a real CephFS (a ``pario cluster``, root and
Ceph needed: run by .ci/run with ``-m ceph``).

A plan with a fixed layout on the HDD-like servers, one on the SSD-like servers and a varied
(PADP-like) one over both is set through the cluster's ceph-fuse mount; checked against Ceph
itself: every layout read back (``ceph.file.layout.*``) equals what was set, and after
writing through the mount the file's objects are in the pool of its servers' device class
with the count the layout implies (listed with ``rados``, not with pario's mapping)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.ceph, pytest.mark.xdist_group("ceph")]
MiB = 1 << 20


def _plan(tmp_path: Path, system: str) -> Path:
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({
        "pario_plan": 1, "scheme": "padp", "system": system, "replicas": {},
        "layouts": {
            "a.dat": {"type": "striped", "servers": ["H0", "H1"], "stripes": [MiB, MiB]},
            "b.dat": {"type": "striped", "servers": ["S0", "S1"], "stripes": [65536, 65536]},
            "c.dat": {"type": "striped", "servers": ["H0", "S0"], "stripes": [65536, 196608]}}}))
    return p


def _objects(conf: str, pool: str, ino: int) -> list[str]:
    from pario.cluster.client import session

    with session(conf) as r:
        io = r.open_ioctx(pool)
        try:
            return sorted(o.key for o in io.list_objects() if o.key.startswith(f"{ino:x}."))
        finally:
            io.close()


def test_layouts_set_and_read_back_and_objects_in_the_class_pool(ceph_cluster, tmp_path):  # noqa: F811
    from pario.apply import load_plan
    from pario.apply.cephfs_live import apply_cephfs, read_layout

    from pario.system import load_system

    cl = ceph_cluster
    prof = str(Path(cl.dir) / "nominal.toml")
    plan, system = load_plan(_plan(tmp_path, load_system(prof).name), prof)
    res = apply_cephfs(plan, system, cl.dir, subdir="t1")
    assert res.ok and len(res.files) == 3
    root = Path(cl.mount) / "t1"
    hdd, ssd = cl.fs_pools["hdd"], cl.fs_pools["ssd"]
    assert read_layout(root / "a.dat") == {"pool": hdd, "stripe_count": "2", "stripe_unit": str(MiB),
                                           "object_size": str(4 * MiB)}
    assert read_layout(root / "b.dat") == {"pool": ssd, "stripe_count": "2", "stripe_unit": "65536",
                                           "object_size": str(4 * MiB)}
    c = read_layout(root / "c.dat")            # not expressible exactly: the report says what instead
    assert c["stripe_unit"] == str(131072) and c["pool"] == hdd
    status = {it.file: it.status for it in res.emission.items}
    assert status["a.dat"] == status["b.dat"] == "striping" and status["c.dat"] == "nearest"
    # Ceph's own placement: 8 MiB through the mount -> (8 MiB / (sc * os)) object sets of sc objects
    for name, pool, n in (("a.dat", hdd, 2), ("b.dat", ssd, 2)):
        with open(root / name, "wb") as fh:
            fh.write(os.urandom(8 * MiB))
            fh.flush()
            os.fsync(fh.fileno())
        ino = os.stat(root / name).st_ino
        assert len(_objects(cl.conf, pool, ino)) == n, name
        other = ssd if pool == hdd else hdd
        assert _objects(cl.conf, other, ino) == [], name


def test_a_file_with_bytes_is_refused_in_one_line(ceph_cluster, tmp_path):  # noqa: F811
    cl = ceph_cluster
    root = Path(cl.mount) / "t2"
    root.mkdir(exist_ok=True)
    (root / "a.dat").write_bytes(b"x" * 10)
    from pario.system import load_system

    prof = str(Path(cl.dir) / "nominal.toml")
    r = subprocess.run([str(Path(sys.executable).parent / "pario"), "apply", str(_plan(tmp_path, load_system(prof).name)),
                        "--cephfs", cl.dir, "--root", "t2", "--system", prof],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.startswith("pario: error: ") and "empty file" in r.stderr and r.stderr.count("\n") == 1
    assert (root / "a.dat").read_bytes() == b"x" * 10


def test_hostile_names_are_refused_before_anything_changes(ceph_cluster, tmp_path):  # noqa: F811
    """Issue 24 on the real mount: a name that leaves --root, one with a newline, and one
    through a symbolic link out of the mount are each refused in one line, nothing created."""
    from pario.system import load_system

    cl = ceph_cluster
    root = Path(cl.mount) / "t3"
    root.mkdir(exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "out").symlink_to(outside)
    prof = str(Path(cl.dir) / "nominal.toml")
    p = tmp_path / "plan.json"
    for bad, msg in (("../x.dat", "leaves the root"), ("a\nb.dat", "control character"),
                     ("out/x.dat", "outside the CephFS mount")):
        p.write_text(json.dumps({"pario_plan": 1, "scheme": "padp", "system": load_system(prof).name, "replicas": {},
                                 "layouts": {bad: {"type": "striped", "servers": ["H0", "H1"], "stripes": [MiB, MiB]}}}))
        r = subprocess.run([str(Path(sys.executable).parent / "pario"), "apply", str(p), "--cephfs", cl.dir,
                            "--root", "t3", "--system", prof], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("pario: error: ") and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert [x.name for x in root.iterdir()] == ["out"] and list(outside.iterdir()) == []
    assert not (Path(cl.mount) / "x.dat").exists()
