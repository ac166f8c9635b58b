"""``pario store gc`` and ``pario run --fresh``'s emptying (:mod:`pario.store.gc`): what pario
left behind is removed, nothing else.

Oracles: the file system itself, listed before and after (every path that existed and is not
a gone store's data file, marker or pario-made directory still exists with its bytes); fsck
of the live store; the store's own listing."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from helpers import run_cli

from pario import ParioError
from pario.store import Store, init_store
from pario.store.gc import MARKER, collect, empty_store


def _tree(root):
    """Every path below root with its bytes (directories: None), links not followed."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[os.path.join(dirpath, d)] = None
        for f in files:
            p = os.path.join(dirpath, f)
            out[p] = os.readlink(p) if os.path.islink(p) else open(p, "rb").read()
    return out


def _store(tmp_path, name, mounts, **servers):
    """A ceda-hdd8 store with H0/H1 on ``mounts/<H>/<name>`` (a testbed's layout), one file written."""
    dirs = {h: str(mounts / h / name) for h in ("H0", "H1")}
    dirs.update(servers)
    root = tmp_path / name
    init_store(root, "ceda-hdd8", dirs)
    with Store(root) as st:
        st.create("f", "fixed:64K@H0,H1")
        with st.open("f") as f:
            f.write(0, b"x" * 300_000)
    return root, dirs


def test_marker_is_invisible_to_the_store(tmp_path):
    root, dirs = _store(tmp_path, "s", tmp_path / "tb")
    for h, d in dirs.items():
        body = json.loads((tmp_path / "tb" / h / "s" / MARKER).read_text())
        assert body == {"pario_server_dir": 1, "store": str(root.resolve()), "store_id": body["store_id"],
                        "server": h, "made_dir": True}
    from pario.store.fsck import fsck

    with Store(root) as st:
        assert fsck(st)["ok"]
        usage = st.backend.usage()
        data = sum(os.stat(os.path.join(d, n)).st_blocks * 512 for d in dirs.values() for n in os.listdir(d)
                   if n != MARKER)
        assert int(usage[:2].sum()) == data


def test_gc_keeps_live_stores_and_removes_gone_ones(tmp_path):
    mounts = tmp_path / "tb"
    live, _ = _store(tmp_path, "live", mounts)
    gone, gone_dirs = _store(tmp_path, "gone", mounts)
    # a directory of the gone store pario did not make keeps existing, emptied of pario's files
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    other, _ = _store(tmp_path, "other", tmp_path / "tb2", H0=str(tmp_path / "tb2" / "H0" / "other"),
                      H1=str(tmp_path / "tb2" / "H1" / "other"))
    # not pario's: a directory without a marker holding a data-file name
    (mounts / "H0" / "handmade").mkdir()
    (mounts / "H0" / "handmade" / "00000001.0").write_bytes(b"keep")
    shutil.rmtree(gone)
    before = _tree(tmp_path)
    dry = collect(mounts, dry_run=True)
    assert _tree(tmp_path) == before
    assert sorted(r["dir"] for r in dry["removed"]) == sorted(str((mounts / h / "gone").resolve()) for h in ("H0", "H1"))
    assert sorted(k["dir"] for k in dry["kept"]) == sorted(str((mounts / h / "live").resolve()) for h in ("H0", "H1"))
    rep = collect(mounts)
    assert rep["removed"] == dry["removed"]
    after = _tree(tmp_path)
    went = set(before) - set(after)
    assert went == {p for p in before if p.startswith(str(mounts / "H0" / "gone"))
                    or p.startswith(str(mounts / "H1" / "gone"))}
    assert all(after[p] == before[p] for p in after)
    n_data = sum(1 for p in went if os.path.basename(p)[:8].isdigit())
    assert n_data == sum(r["data_files"] for r in rep["removed"]) > 0
    from pario.store.fsck import fsck

    for root in (live, other):
        with Store(root) as st:
            assert fsck(st)["ok"] and st.files() == ["f"]


def test_gc_of_a_directory_pario_did_not_make_and_foreign_content(tmp_path):
    pre = tmp_path / "pre"
    pre.mkdir()
    root, _ = _store(tmp_path, "s", tmp_path / "tb", H1=str(pre))
    shutil.rmtree(root)
    (tmp_path / "tb" / "H0" / "s" / "README").write_text("someone's")
    rep = collect(tmp_path)
    # H0's directory holds a file pario does not make: kept whole; H1's (made by the user): emptied, kept
    assert [k["dir"] for k in rep["kept"]] == [str((tmp_path / "tb" / "H0" / "s").resolve())]
    assert "README" in rep["kept"][0]["why"]
    assert sorted(os.listdir(tmp_path / "tb" / "H0" / "s"))[0:1] == [MARKER]
    assert [r["dir"] for r in rep["removed"]] == [str(pre.resolve())] and not rep["removed"][0]["dir_removed"]
    assert pre.is_dir() and os.listdir(pre) == []


def test_gc_follows_no_link_and_a_recreated_store_is_not_the_old_one(tmp_path):
    mounts = tmp_path / "tb"
    root, _ = _store(tmp_path, "s", mounts)
    outside = tmp_path / "outside"
    gone, _ = _store(tmp_path, "g", outside)
    shutil.rmtree(gone)
    os.symlink(outside, mounts / "link")
    rep = collect(mounts)
    assert rep["removed"] == [] and all("in use" in k["why"] for k in rep["kept"])
    assert (outside / "H0" / "g" / MARKER).exists()          # behind the link: not touched
    # the store's root made again (another id) with other server directories: the old ones go
    shutil.rmtree(root)
    init_store(root, "ceda-hdd8", {"H0": str(tmp_path / "new0")})
    rep = collect(mounts)
    assert sorted(r["server"] for r in rep["removed"]) == ["H0", "H1"]
    assert not (mounts / "H0" / "s").exists() and (tmp_path / "new0" / MARKER).exists()


def test_init_refuses_a_server_directory_with_data(tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    (d / "00000007.0").write_bytes(b"old")
    with pytest.raises(ParioError, match=r"server H2 directory .*srv holds data files \(e.g. 00000007.0\)"):
        init_store(tmp_path / "s", "ceda-hdd8", {"H2": str(d)})
    assert not (tmp_path / "s").exists() and sorted(os.listdir(d)) == ["00000007.0"]


def test_cli_gc_and_bad_input(tmp_path):
    root, _ = _store(tmp_path, "s", tmp_path / "tb")
    shutil.rmtree(root)
    rc, out, err = run_cli("store", "gc", str(tmp_path / "tb"), "--dry-run")
    assert rc == 0 and "2 directories to remove" in " ".join(out.split()) and err == ""
    rc, out, err = run_cli("store", "gc", str(tmp_path / "tb"), "--json")
    assert rc == 0 and len(json.loads(out)["removed"]) == 2 and not (tmp_path / "tb" / "H0" / "s").exists()
    os.symlink(tmp_path / "tb", tmp_path / "ln")
    for arg, msg in ((tmp_path / "ln", "is a symbolic link"), (tmp_path / "nope", "no such directory")):
        rc, out, err = run_cli("store", "gc", str(arg))
        assert rc == 2 and out == "" and err.startswith("pario: error: ") and msg in err and err.count("\n") == 1


def test_empty_store(tmp_path):
    root, _ = _store(tmp_path, "s", tmp_path / "tb")
    with Store(root) as st:
        st.create("g", "fixed:16K@H0")
    assert empty_store(root) == ["f", "g"]
    from pario.store.fsck import fsck

    with Store(root) as st:
        assert st.files() == [] and fsck(st)["ok"]
        assert int(st.backend.usage().sum()) == 0
    with Store(root, shared=True):
        with pytest.raises(ParioError, match="in use"):
            empty_store(root)
