"""Replicator: plans, space budget, bad input (no data touched), resume, background thread, CLI."""

import json

import numpy as np
import pytest

from pario import ParioError
from pario.layout import ExtentMap, Striped
from pario.plan.base import Plan
from pario.store import Store, init_store
from pario.store.fsck import fsck
from pario.store.replicator import Replicator, ReplicaSpec, specs_from_plan
from pario.system import load_system

EXT = ExtentMap(np.array([0, 50_000]), np.array([20_000, 30_000]), np.array([1, 1]), np.array([0, 20_000]),
                np.array([1, 1]))


def _store(path, system="ceda-hdd8"):
    init_store(path, system)
    st = Store(path)
    st.create("f", "fixed:16k")
    with st.open("f") as f:
        f.write(0, bytes(range(256)) * 400)
    return st


def _plan(tmp_path, system="ceda-hdd8", file="f", layout=EXT):
    p = Plan("ceda", replicas={file: [{"name": "r1", "layout": layout}]}, system_name=system)
    path = tmp_path / "plan.json"
    p.save(path, load_system("ceda-hdd8"))
    return path


def _snapshot(st):
    return sorted(n for n in st.backend.list()), st.rmt.all_rows()


def test_plan_replicates_and_fsck_checks(tmp_path):
    st = _store(tmp_path / "s")
    r = Replicator(st, specs_from_plan(_plan(tmp_path), st)).run()
    assert r.done == 50_000
    assert st.rmt.covered(".replica/f/r1") == [(0, 20_000), (50_000, 30_000)]
    assert fsck(st)["ok"] and fsck(st)["checked_bytes"] == 50_000
    # fsck detects a corrupted clean replica byte
    h = st.backend.open(".replica/f/r1")
    st.backend.write_at(h, 60_000, b"\xee")
    st.backend.close(h)
    rep = fsck(st)
    assert not rep["ok"] and "differs" in rep["problems"][0]
    st.close()


def test_plan_for_another_store_touches_nothing(tmp_path):
    st = _store(tmp_path / "s")
    before = _snapshot(st)
    with pytest.raises(ParioError, match="plan is for system 'other'"):
        specs_from_plan(_plan(tmp_path, system="other"), st)
    with pytest.raises(ParioError, match="not in store"):
        specs_from_plan(_plan(tmp_path, file="g"), st)
    assert _snapshot(st) == before
    st.close()


def test_full_replica_space_touches_nothing(tmp_path):
    st = _store(tmp_path / "s")
    before = _snapshot(st)
    with pytest.raises(ParioError, match="replica space full") as ei:
        Replicator(st, specs_from_plan(_plan(tmp_path), st), space=10_000)
    assert "\n" not in str(ei.value)
    assert _snapshot(st) == before
    # budget admits replicas in plan order while they fit; the rest is skipped
    specs = [ReplicaSpec("f", "a", EXT), ReplicaSpec("f", "b", Striped.fixed(4096, (2, 3)))]
    r = Replicator(st, specs, space=60_000).run()
    assert [s.name for s, _, _ in r.work] == ["a"] and [s.name for s, _ in r.skipped] == ["b"]
    st.close()


def test_server_free_space_checked(tmp_path, monkeypatch):
    st = _store(tmp_path / "s")
    monkeypatch.setattr(st.backend, "free_space", lambda: np.full(8, 1000, dtype=np.int64))
    with pytest.raises(ParioError, match="replica space full: server H1"):
        Replicator(st, [ReplicaSpec("f", "a", EXT)])
    st.close()


def test_resume_continues_where_it_stopped(tmp_path):
    st = _store(tmp_path / "s")
    spec = ReplicaSpec("f", "a", Striped.fixed(4096, range(8)))
    r = Replicator(st, [spec], chunk=10_000)
    r.progress = lambda d, t: r._stop.set() if d >= 30_000 else None
    r.run()
    assert sum(n for _, n in st.rmt.covered(spec.r_file)) == 30_000
    from pario.store.replicator import resume_specs
    (again,) = resume_specs(st)
    r2 = Replicator(st, [again], chunk=10_000).run()
    assert r2.total == 102_400 - 30_000
    assert st.rmt.covered(spec.r_file) == [(0, 102_400)]
    assert fsck(st)["ok"]
    st.close()


def test_background_replication_with_foreground_writes(tmp_path):
    st = _store(tmp_path / "s")
    ref = bytearray(bytes(range(256)) * 400)
    r = Replicator(st, [ReplicaSpec("f", "a", Striped.fixed(8192, range(8)), "replica")], chunk=4096, idle=0.0005).start()
    f = st.open("f")
    rng = np.random.default_rng(3)
    for _ in range(200):
        o, n = int(rng.integers(0, 100_000)), int(rng.integers(1, 3000))
        d = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        f.write(o, d)
        ref[o:o + n] = d
        assert f.read(o, 5000) == bytes(ref[o:o + 5000])
    r.join()
    f.flush()
    assert f.read(0, len(ref)) == bytes(ref)
    f.close()
    assert fsck(st)["ok"]
    st.close()


def test_cli_replicate_and_flush(tmp_path, capsys):
    from pario.cli import main

    st = _store(tmp_path / "s")
    st.close()
    plan = _plan(tmp_path)
    assert main(["replicate", str(plan), "--store", str(tmp_path / "s"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["copied_bytes"] == 50_000
    assert main(["replicate", str(plan), "--store", str(tmp_path / "s"), "--json"]) == 0   # nothing left
    assert json.loads(capsys.readouterr().out)["copied_bytes"] == 0
    assert main(["store", "flush", "--store", str(tmp_path / "s")]) == 0
    assert main(["store", "fsck", "--store", str(tmp_path / "s")]) == 0
    assert main(["replicate", str(plan), "--store", str(tmp_path / "s"), "--space", "1k"]) == 0  # already done
