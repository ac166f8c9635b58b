"""The coordination interface (src/pario/native/store/coord.h; docs/store.md, "Coordination"):
the member store.json names, the default "host", an unknown member refused with one line,
and the store lock Python takes being the engine's (pario.store.locks.StoreLock)."""

import json

import pytest

from pario import ParioError
from pario.store import Store, init_store
from pario.store.locks import StoreLock


def _set_coord(root, value):
    p = root / "store.json"
    cfg = json.loads(p.read_text())
    if value is None:
        cfg.pop("coord", None)
    else:
        cfg["coord"] = value
    p.write_text(json.dumps(cfg))


def test_default_and_named_host_member(tmp_path):
    root = init_store(tmp_path / "s", "ceda-hdd8")
    with Store(root) as st:                      # no "coord": host, as every store made before
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, b"x" * 1000)
    _set_coord(root, "host")
    with Store(root, shared=True) as st:
        with st.open("f") as f:
            assert f.read(0, 1000) == b"x" * 1000


def test_unknown_member_is_one_line_error_and_cli_exit_2(tmp_path, capsys):
    from pario.cli import main

    root = init_store(tmp_path / "s", "ceda-hdd8")
    _set_coord(root, "rados-omap")
    with pytest.raises(ParioError, match="coordination 'rados-omap' is not available") as ei:
        Store(root)
    assert "\n" not in str(ei.value)
    capsys.readouterr()
    assert main(["store", "ls", "--store", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pario: error: ") and "\n" not in err and "rados-omap" in err
    _set_coord(root, 3)
    with pytest.raises(ParioError, match='"coord" must be the name of a coordination member'):
        Store(root)


def test_python_store_lock_is_the_engines(tmp_path):
    root = init_store(tmp_path / "s", "ceda-hdd8")
    Store(root).close()                                       # the journal made (a first opener)
    lock = StoreLock(root / ".lock")
    assert lock.member == "host" and lock.mode is None
    assert lock.try_exclusive() and lock.mode == "ex"
    with pytest.raises(ParioError, match="in use"):            # the engine sees the same lock
        Store(root)
    assert lock.downgrade() and lock.mode == "sh"
    with pytest.raises(ParioError, match="in use"):            # shared: an exclusive opener still waits
        Store(root)
    with Store(root, shared=True, lock_timeout=2):            # ... a shared one does not
        other = StoreLock(root)
        assert not other.try_exclusive() and other.try_shared()
        other.close()
    lock.close()
    assert lock.mode is None
    with Store(root):                                         # released: exclusive again
        assert not StoreLock(root).try_shared()


def test_store_lock_never_follows_a_planted_link(tmp_path):
    root = init_store(tmp_path / "s", "ceda-hdd8")
    (root / ".lock").unlink(missing_ok=True)
    (root / ".lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ParioError, match="symbolic link"):
        StoreLock(root / ".lock")
