"""The coordination member ``rados`` (docs/multinode.md, "rados"): designed and measured, not
built, so asking for it must be refused with one line before anything is written — never a
store that half works.  Without the rados data plane the reason is the plane; with it (on a
real cluster, marker ``ceph``) the reason is the missing member; a store.json naming
``"coord": "rados"`` by hand is refused by the engine's registry at open.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from ceph_fixture import ceph_cluster  # noqa: F401  (the fixture)

from helpers import PARIO

from pario import ParioError
from pario.store.locks import check_coord, coord_members




def _pario(*args):
    return subprocess.run([*PARIO, *map(str, args)], capture_output=True, text=True, timeout=300)


def _one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_rados_without_the_rados_plane_is_refused(tmp_path):
    d = tmp_path / "s"
    r = _pario("store", "init", d, "--system", "nominal", "--coord", "rados")
    _one_line_error(r, "--coord rados", "rados data plane")
    assert not d.exists()                                   # nothing written


def test_check_coord():
    assert "rados" not in coord_members()                   # not registered: not built
    check_coord("host")
    check_coord("pfs")
    with pytest.raises(ParioError, match="rados data plane"):
        check_coord("rados")                                # pario run's stores: the local plane
    with pytest.raises(ParioError, match="not implemented yet"):
        check_coord("rados", "rados")
    with pytest.raises(ParioError, match="unknown coordination 'nfs'"):
        check_coord("nfs", "rados")


@pytest.mark.ceph
def test_rados_member_refused_on_a_cluster(ceph_cluster, tmp_path):
    d = tmp_path / "s"
    r = _pario("store", "init", d, "--backend", "rados", "--cluster", ceph_cluster.dir, "--coord", "rados")
    _one_line_error(r, "coordination 'rados'", "not implemented yet", "docs/multinode.md")
    assert not d.exists()
    # a rados store with the member named by hand: the engine's registry refuses it at open
    r = _pario("store", "init", d, "--backend", "rados", "--cluster", ceph_cluster.dir)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((d / "store.json").read_text())
    cfg["coord"] = "rados"
    (d / "store.json").write_text(json.dumps(cfg))
    r = _pario("store", "ls", "--store", d)
    _one_line_error(r, "coordination 'rados' is not available", "members: host, pfs")
