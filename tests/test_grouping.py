"""The one-pass grouping kernels (pario.grouping) against the sorts they replace.

Each kernel is compared with an independent sort-based definition written here (lexsort of
the keys, then the definition), on traces in time order (the one-pass path) and shuffled
(the kernels must refuse and the callers fall back), with ties, sparse ranks and files,
and on the callers (batch ids, sequential mask, service order, p_b, request classes).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pario.grouping import dense_groups, rank_positions, sequential, service_order
from pario.model.batches import batch_ids, ranks_per_batch
from pario.model.common import RequestClasses, sequential_mask
from pario.system import load_system
from pario.trace import Trace
from pario.workload.ior import ior


def ref_positions(rank, order):
    n = len(rank)
    idx = np.lexsort((np.arange(n), order, rank))
    out = np.empty(n, dtype=np.int64)
    r = rank[idx]
    for k in range(n):  # position = how many earlier (in sorted order) rows share the rank
        out[idx[k]] = 0 if k == 0 or r[k] != r[k - 1] else out[idx[k - 1]] + 1
    return out


def ref_sequential(rank, file, order, offset, length):
    n = len(rank)
    idx = np.lexsort((np.arange(n), order, file, rank))
    out = np.zeros(n, dtype=bool)
    for a, b in zip(idx[:-1], idx[1:]):
        out[b] = rank[a] == rank[b] and file[a] == file[b] and offset[b] == offset[a] + length[a]
    return out


def random_columns(rng, n, ranks, files, sorted_rows):
    rank = rng.integers(0, ranks, n)
    file = rng.integers(0, files, n)
    order = rng.integers(0, max(1, n // 3), n)  # many ties
    if sorted_rows:
        order = np.sort(order)
    offset = rng.integers(0, 8, n) * 4096
    length = rng.choice([0, 4096, 8192], n)
    return rank, file, order, offset, length


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 9), st.integers(1, 4), st.booleans())
def test_kernels_equal_the_sorted_definitions(seed, n, ranks, files, sorted_rows):
    rng = np.random.default_rng(seed)
    rank, file, order, offset, length = random_columns(rng, n, ranks, files, sorted_rows)
    pos = rank_positions(rank, order)
    seq = sequential(rank, file, order, offset, length, files)
    if sorted_rows:  # in order: the one-pass path must answer
        assert pos is not None and seq is not None
    if pos is not None:
        assert np.array_equal(pos, ref_positions(rank, order))
    if seq is not None:
        assert np.array_equal(seq, ref_sequential(rank, file, order, offset, length))
    bid = rng.integers(0, max(1, n // 4), n)
    assert np.array_equal(service_order(bid, order), np.lexsort((order, bid)))


def test_out_of_order_rows_are_refused():
    rank = np.array([0, 0, 1])
    order = np.array([1, 0, 0])
    assert rank_positions(rank, order) is None
    assert sequential(rank, np.zeros(3, dtype=np.int32), order, np.zeros(3, np.int64), np.ones(3, np.int64), 1) is None


def test_sparse_ranks_take_the_sort():
    rank = np.array([0, 10**12], dtype=np.int64)  # a table of 10^12 entries is refused
    assert rank_positions(rank, np.array([0, 0])) is None


@pytest.mark.parametrize("shuffle", [False, True])
def test_callers_equal_on_ior_and_shuffled(shuffle):
    tr = ior(6, 4096, 8 * 4096, 5, pattern="random", op="both", seed=2)
    if shuffle:
        tr = tr.take(np.random.default_rng(1).permutation(len(tr)))
    n = len(tr)
    bid = batch_ids(tr, "order")
    assert np.array_equal(bid, ref_positions(tr.rank, tr.order))
    assert np.array_equal(sequential_mask(tr), ref_sequential(tr.rank, tr.file, tr.order, tr.offset, tr.length))
    perm = service_order(bid, tr.order)
    assert np.array_equal(perm, np.lexsort((tr.order, bid)))
    nb = int(bid.max()) + 1
    ref_p = np.array([len(set(tr.rank[bid == b].tolist())) for b in range(nb)])
    assert np.array_equal(ranks_per_batch(tr.rank, bid, nb, perm), ref_p)
    assert np.array_equal(ranks_per_batch(tr.rank, bid, nb), ref_p)
    # time batching: ranks repeat inside a batch
    tb = np.arange(n) // 7
    ref_t = np.array([len(set(tr.rank[tb == b].tolist())) for b in range(int(tb.max()) + 1)])
    assert np.array_equal(ranks_per_batch(tr.rank, tb, None, service_order(tb, tr.order)), ref_t)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 400), st.integers(1, 50))
def test_dense_groups_equal_unique(seed, n, distinct):
    rng = np.random.default_rng(seed)
    vals = rng.integers(-2**40, 2**40, distinct)
    key = vals[rng.integers(0, distinct, n)]
    gid, keys, first = dense_groups(key, max_groups=16)  # > 16 groups: the sort path
    u, inv = np.unique(key, return_inverse=True)
    assert np.array_equal(keys, u) and np.array_equal(gid, inv.ravel())
    assert np.array_equal(first, [int(np.flatnonzero(key == k)[0]) for k in u])


def test_request_classes_equal_the_lexsort():
    tr = Trace.from_arrays(np.array([0, 1, 0, 1, 2, 2]), np.zeros(6, dtype=np.int32), np.array([0, 0, 1, 1, 0, 0]),
                           np.arange(6) * 10**15, np.array([5, 5, 7, 7, 5, 2**40]), files=["f"])
    rc = RequestClasses(tr, load_system("ceda-hdd8"), "order", None, "auto")
    cols = [tr.op.astype(np.int64), tr.length.astype(np.int64), rc.p.astype(np.int64), rc.c.astype(np.int64),
            rc.seq.astype(np.int64)]
    o = np.lexsort(cols[::-1])
    keys = [tuple(int(c[i]) for c in cols) for i in range(len(tr))]
    ranks = {k: j for j, k in enumerate(sorted(set(keys)))}
    assert rc.cls.tolist() == [ranks[k] for k in keys]
    assert rc.first.tolist() == [min(i for i in o if keys[i] == k) for k in sorted(set(keys))]


def test_identity_cache_budget_and_identity(monkeypatch):
    from pario.memo import IdentityCache, by_identity

    monkeypatch.setenv("PARIO_CACHE_BYTES", str(3000))
    c = IdentityCache(size=10)
    a, b, d = object(), object(), object()
    c.put((a,), np.zeros(200))          # 1600 B
    c.put((b,), np.zeros(100))          # 800 B: 2400 in all, both kept
    assert c.get((a,)) is not None and c.get((b,)) is not None
    c.put((d,), np.zeros(1000))         # 8000 B alone beyond the budget: kept, the others evicted
    assert c.get((d,)) is not None and c.get((a,)) is None and c.get((b,)) is None
    calls = []

    @by_identity(size=2)
    def f(x, k):
        calls.append(k)
        return np.arange(3) + k

    x = np.zeros(1)
    r = f(x, 1)
    assert f(x, 1) is r and calls == [1] and not r.flags.writeable
    assert f(np.zeros(1), 1) is not r and calls == [1, 1]  # another object: another entry


def test_identity_cache_computes_a_key_once_across_threads():
    import threading
    import time

    from pario.memo import IdentityCache

    c = IdentityCache()
    a = object()
    calls, out = [], []

    def slow():
        calls.append(1)
        time.sleep(0.05)
        return np.zeros(3)

    ts = [threading.Thread(target=lambda: out.append(c.get_or_compute((a,), slow))) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(calls) == 1 and all(x is out[0] for x in out)


def test_identity_cache_a_failed_compute_leaves_nothing_behind():
    from pario.memo import IdentityCache

    c = IdentityCache()
    a = object()

    def boom():
        raise ValueError("no")

    with pytest.raises(ValueError):
        c.get_or_compute((a,), boom)
    assert c._busy == {} and c.get((a,)) is None
    assert c.get_or_compute((a,), lambda: np.ones(2)).sum() == 2  # computed the next time
