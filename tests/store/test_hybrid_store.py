"""Hybrid replication (seed 002 §5): cheapest copy per request, lazy sync, never stale."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st_

from pario.layout import Grouped, Striped
from pario.store import STALE, Store, init_store
from pario.store.fsck import fsck
from oracles.store import profile_cost
from pario.store.replicator import ReplicaSpec, Replicator
from pario.system import load_system

N = 400_000


def _store(path, cost=None, lazy=True):
    init_store(path, "ceda-hdd8")
    st = Store(path, cost=cost)
    if not lazy:
        st.engine.set_lazy(False)          # keep synchronisation pending
    st.create("f", "fixed:4k")
    init = np.random.default_rng(0).integers(0, 256, N, dtype=np.uint8).tobytes()
    with st.open("f") as f:
        f.write(0, init)
    Replicator(st, [ReplicaSpec("f", "dv", Striped.fixed(1 << 20, range(8))),
                    ReplicaSpec("f", "2d", Grouped(((0, 1, 2, 3), (4, 5, 6, 7)), 16 << 10))]).run()
    return st, bytearray(init)


def test_profile_cost_is_max_over_servers():
    s = load_system("ceda-hdd8")
    c = profile_cost(s)
    a, b = s.servers[0].alpha_for(0, False), s.servers[0].beta_for(0)
    # 64 KiB over 4 KiB stripes on 8 servers: 8 KiB per server
    assert c(Striped.fixed(4096, range(8)), 0, 65536) == pytest.approx(a + 8192 * b)
    # one 1 MiB stripe: one server gets all 64 KiB
    assert c(Striped.fixed(1 << 20, range(8)), 0, 65536) == pytest.approx(a + 65536 * b)


def test_each_read_goes_to_the_cheapest_copy(tmp_path):
    # a cost that makes server 0 expensive: requests inside the 1 MiB stripe of "dv" on H0 avoid it
    calls = []

    def cost(layout, off, n):
        from oracles.layout import map_requests
        sub = map_requests(layout, [off], [n])
        c = float(max(sub.length)) + 1e6 * float((sub.server == 0).any())
        calls.append(c)
        return c
    st, ref = _store(tmp_path / "s", cost=cost)
    f = st.open("f")
    assert f.read(100_000, 8192) == ref[100_000:108_000 + 192]
    # fixed:4k puts 4 KiB on two servers, 2d puts 8 KiB on ≤ 2, dv all 8 KiB on H0 (expensive):
    # the engine's choice (its own routing, asked through served_by) avoids dv
    (_, _, seen), = f.served_by(100_000, 108_192)
    assert seen in (None, ".replica/f/2d") and calls
    f.close()
    st.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st_.lists(st_.tuples(st_.sampled_from("wr"), st_.integers(0, N), st_.integers(1, 60_000), st_.integers(0, 255)),
                 min_size=1, max_size=20), st_.booleans())
def test_pending_sync_never_returns_stale_bytes(tmp_path_factory, seq, lazy):
    path = tmp_path_factory.mktemp("h") / "s"
    st, ref = _store(path, lazy=lazy)
    f = st.open("f")
    try:
        for op, a, b, c in seq:
            if op == "w":
                f.write(a, bytes([c]) * b)
                ref.extend(bytes(max(0, a + b - len(ref))))
                ref[a:a + b] = bytes([c]) * b
            assert f.read(a, b) == bytes(ref[a:a + b])
        assert f.read(0, len(ref)) == bytes(ref)
        f.close()                                  # close synchronises all copies
        assert st.rmt.files_with_unclean() == []
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
        # every replica now holds the newest bytes of what it covers
        for r in ("dv", "2d"):
            h = st.backend.open(f".replica/f/{r}")
            cov = st.rmt.covered(f".replica/f/{r}")
            assert sum(n for _, n in cov) == len(ref)
            assert st.backend.read_at(h, 0, len(ref)) == bytes(ref)
            st.backend.close(h)
    finally:
        st.close()


def test_writes_leave_other_copies_stale_until_synced(tmp_path):
    st, ref = _store(tmp_path / "s", lazy=False)
    f = st.open("f")
    f.write(1000, b"\x09" * 5000)
    flags = [fl for _, _, o, _, _, n, fl in st.rmt.all_rows() if o <= 1000 < o + n]
    assert STALE in flags
    assert f.read(0, 10_000) == bytes(ref[:1000]) + b"\x09" * 5000 + bytes(ref[6000:10_000])
    f.flush()
    assert st.rmt.files_with_unclean() == []
    f.close()
    st.close()
