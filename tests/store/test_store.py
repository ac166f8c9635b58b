"""The local backend: every layout byte-for-byte, server placement, holes, size recovery, O_DIRECT, CLI."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import random_io
from oracles.layout import map_requests

from pario import ParioError
from pario.layout import ExtentMap, Grouped, Region, Regions, Striped
from pario.store import Store, init_store

LAYOUTS = {
    "fixed": Striped.fixed(4096, range(8)),
    "varied": Striped((0, 1, 2, 5), (3000, 0, 10000, 777)),
    "grouped": Grouped(((0, 1), (2, 3, 4)), 2048),
    "regions": Regions((Region(0, 50_000, Striped.fixed(8192, (0, 1))),
                        Region(50_000, None, Grouped(((2,), (3, 4)), 4096)))),
    "extents": ExtentMap(np.array([1000, 30_000]), np.array([5000, 20_000]), np.array([6, 7]),
                         np.array([0, 100]), np.array([1, 2]), Striped.fixed(5000, (0, 3))),
}


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_random_io_matches_reference(store, kind):
    store.create("f", LAYOUTS[kind])
    f = store.open("f")
    rng = np.random.default_rng(hash(kind) % 1000)
    ref = random_io(f, rng, 60, 120_000, 40_000, 60_000)
    assert f.size == len(ref)
    f.close()
    store.close()
    st2 = Store(store.root)
    g = st2.open("f")
    assert g.read(0, g.size) == bytes(ref)
    st2.close()


def test_bytes_sit_where_map_requests_puts_them(store):
    lay = LAYOUTS["varied"]
    store.create("f", lay)
    data = np.random.default_rng(1).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    with store.open("f") as f:
        f.write(0, data)
        fid = f.fid
    # an independent oracle: byte x goes to the server and local offset that the numpy mapping
    # (tests/oracles/layout.py) gives [x, x+1)
    xs = np.arange(0, 100_000, 997)
    sub = map_requests(lay, xs, np.ones_like(xs))
    for x, s, loc in zip(xs, sub.server, sub.local):
        p = store.backend.datafile_path(fid, int(s), 0)
        with open(p, "rb") as fh:
            fh.seek(int(loc))
            assert fh.read(1) == data[x:x + 1]


def test_holes_stay_sparse(store):
    store.create("f", "fixed:64k")
    with store.open("f") as f:
        f.write(200 << 20, b"x")
        assert f.read(100 << 20, 10) == bytes(10)
        assert f.size == (200 << 20) + 1
    assert int(store.backend.usage().sum()) < (1 << 20)


def test_size_recovered_after_crash_without_close(tmp_path):
    init_store(tmp_path / "s", "psa-4h4s")
    st = Store(tmp_path / "s")
    st.create("f", "var:hdd=28K,ssd=100K")
    f = st.open("f")
    f.write(0, b"a" * 10)
    f.write(777_777, b"b" * 12345)
    assert st.backend.meta.get("f")[3] == 1          # dirty: size not committed yet
    # simulate a crash: drop the store without close (no size commit), release the lock
    st.engine.abandon()
    st2 = Store(tmp_path / "s")
    g = st2.open("f")
    assert g.size == 777_777 + 12345
    assert g.read(777_777, 12345) == b"b" * 12345
    st2.close()


def test_truncate(store):
    store.create("f", "2d:2:4k")
    with store.open("f") as f:
        f.write(0, b"z" * 100_000)
        f.truncate(50_001)
        assert f.size == 50_001
        f.truncate(60_000)
        assert f.read(50_000, 10_000) == b"z" + bytes(9_999)


def test_missing_server_directory_is_clear_error(tmp_path):
    init_store(tmp_path / "s", "ceda-hdd8", {"H3": str(tmp_path / "mnt3")})
    shutil.rmtree(tmp_path / "mnt3")        # (it holds pario store gc's marker)
    with pytest.raises(ParioError, match="server H3 directory .* is missing"):
        Store(tmp_path / "s")


def test_store_in_use_and_reserved_names(store):
    with pytest.raises(ParioError, match="in use"):
        Store(store.root)
    with pytest.raises(ParioError, match="reserved"):
        store.create(".replica/x/y", "fixed:64k")
    store.create("f", "fixed:64k")
    with pytest.raises(ParioError, match="already exists"):
        store.create("f", "fixed:64k")


def _refuses_direct(d: Path) -> bool:
    try:
        fd = os.open(d / "probe", os.O_RDWR | os.O_CREAT | os.O_DIRECT)
    except OSError:
        return True
    os.close(fd)
    (d / "probe").unlink()
    return False


def test_odirect_error_or_roundtrip(tmp_path):
    """O_DIRECT: a clear error where the file system refuses it, else aligned I/O round-trips."""
    dirs = [tmp_path]
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        import tempfile
        dirs.append(Path(tempfile.mkdtemp(dir=shm)))
    try:
        for d in dirs:
            init_store(d / "s", "ceda-hdd8")
            if _refuses_direct(d):
                with pytest.raises(ParioError, match="refuses O_DIRECT"):
                    Store(d / "s", direct=True)
                continue
            st = Store(d / "s", direct=True)
            st.create("f", "fixed:64k")
            data = os.urandom(1 << 20)
            with st.open("f") as f:
                f.write(0, data)
            with st.open("f") as f:
                assert f.read(0, 1 << 20) == data
                with pytest.raises(ParioError, match="aligned"):
                    f.read(1, 100)
            st.close()
    finally:
        import shutil
        for d in dirs[1:]:
            shutil.rmtree(d)


def test_cli_roundtrip(tmp_path, capsys):
    from pario.cli import main

    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(300_000))
    assert main(["store", "init", str(tmp_path / "s"), "--system", "psa-4h4s"]) == 0
    assert main(["store", "put", str(src), "a", "--store", str(tmp_path / "s"), "--layout", "var:hdd=28K,ssd=100K"]) == 0
    assert main(["store", "get", "a", str(tmp_path / "out"), "--store", str(tmp_path / "s")]) == 0
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    capsys.readouterr()
    assert main(["store", "ls", "--store", str(tmp_path / "s"), "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    (f,) = out["files"]
    assert f["size"] == 300_000 and sum(f["servers"].values()) == 300_000
    # 28K per HServer, 100K per SServer per round of 4·28K + 4·100K = 512K: an SServer gets 100K of the first round
    assert f["servers"]["S0"] == 100 * 1024
    assert main(["store", "fsck", "--store", str(tmp_path / "s")]) == 0
    assert main(["store", "ls", "--store", str(tmp_path / "nope")]) == 2
