"""ROMCIO / CACIO / HACIO request orders (pario.plan.collective.request_order: the C table of
collective/order.c) against seed 004's worked example."""

import numpy as np
import pytest

from pario import ParioError
from pario.plan.collective import request_order

# seed 004 §2.2: servers H0 S0 H1 S1 (indices 0..3) in round-robin block order
SERVER = {b: b % 4 for b in range(16)}
KIND = {0: 0, 1: 1, 2: 0, 3: 1}  # 0 = HServer, 1 = SServer
DOMAINS = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}  # aggregator A0, A1 (2 aggregators, 8 blocks)


def _order(method, a, blocks=None, proc=None):
    blocks = np.array(DOMAINS[a] if blocks is None else blocks)
    srv = np.array([SERVER[b] for b in blocks])
    kind = np.array([KIND[s] for s in srv])
    o = request_order(method, blocks * 4096, srv, kind, a, proc=proc, servers=[0, 1, 2, 3],
                      server_kinds=[KIND[s] for s in range(4)])
    return blocks[o].tolist()


def test_romcio_is_logical_order():
    assert _order("romcio", 0) == [0, 1, 2, 3]
    assert _order("romcio", 1) == [4, 5, 6, 7]
    assert request_order("romcio", [30, 10, 20]).tolist() == [1, 2, 0]


def test_cacio_matches_fig4():
    # Fig. 4: "aggregator A1 sends requests in the order of 5,6,7,4 instead of 4,5,6,7"
    assert _order("cacio", 0) == [0, 1, 2, 3]
    assert _order("cacio", 1) == [5, 6, 7, 4]


def test_hacio_follows_algorithm1():
    # Algorithm 1 by hand: T[H][0]={0}, T[H][1]={2}, T[S][0]={1}, T[S][1]={3} for A0;
    # A0 (a=0) appends H numbers 0,1 then S numbers 0,1; A1 (a=1) starts at number 1.
    assert _order("hacio", 0) == [0, 2, 1, 3]
    assert _order("hacio", 1) == [6, 4, 7, 5]


def test_hacio_walks_processes_in_rank_order_and_drops_duplicates():
    # two processes' pieces on HServer 0: process 1's come after process 0's whatever the offset
    blocks = [4, 0, 8]
    proc = [0, 1, 0]
    assert _order("hacio", 0, blocks=blocks, proc=proc) == [4, 8, 0]
    # a duplicate piece (same offset, same server) is kept once (line 7)
    o = request_order("hacio", [0, 0, 4096], [0, 0, 1], [0, 0, 1], 0)
    assert len(o) == 2 and sorted(o.tolist())[-1] == 2


def test_cacio_skips_servers_missing_from_the_domain():
    # the domain has no piece on server position 1: aggregator 1 starts at the next one
    o = request_order("cacio", [0, 2, 3], [0, 2, 3], aggregator=1, servers=[0, 1, 2, 3])
    assert o.tolist() == [1, 2, 0]


def test_orders_are_permutations():
    rng = np.random.default_rng(1)
    off = rng.permutation(200) * 100
    srv = rng.integers(0, 6, 200)
    kind = (srv >= 4).astype(int)
    for m in ("romcio", "cacio", "hacio"):
        for a in range(3):
            o = request_order(m, off, srv, kind, a)
            assert sorted(o.tolist()) == list(range(200))


def test_unknown_order():
    with pytest.raises(ParioError):
        request_order("fifo", [0], [0], [0], 0)


# ---------------------------------------------------------------- aggregator view
from hypothesis import given, settings, strategies as st  # noqa: E402

from pario.plan.collective import aggregator_ranks, aggregator_view  # noqa: E402
from pario.trace import Trace  # noqa: E402


def test_aggregator_ranks_follow_romio_placement():
    # 8 ranks, 2 per node: nodes {0,1} {2,3} {4,5} {6,7}; first rank of each node, then the second
    assert aggregator_ranks(8, 2).tolist() == [0, 2, 4, 6]
    assert aggregator_ranks(8, 2, 6).tolist() == [0, 1, 2, 3, 4, 6]
    assert aggregator_ranks(4, 4).tolist() == [0]
    assert aggregator_ranks(3, 1, 10).tolist() == [0, 1, 2]


def _brute_force(offs, lens, A, B):
    """Per byte: requested bytes of the call, their domain (⌈span/A⌉ each) and cycle (rank of the
    byte among its domain's requested bytes, // B)."""
    req = sorted({x for o, n in zip(offs, lens) for x in range(o, o + n)})
    lo, hi = req[0], req[-1] + 1
    fd = -(-(hi - lo) // A)
    seen, out = {}, {}
    for x in req:
        d = (x - lo) // fd
        out[x] = (d, seen.get(d, 0) // B)
        seen[d] = seen.get(d, 0) + 1
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3000), st.integers(0, 400)), min_size=1, max_size=25),
       st.integers(1, 3), st.integers(50, 900), st.booleans())
def test_aggregator_view_matches_per_byte_brute_force(reqs, ppn, B, with_independent):
    rank = [r for r, _, _ in reqs]
    offs = [o for _, o, _ in reqs]
    lens = [n for _, _, n in reqs]
    coll = [True] * len(reqs)
    if with_independent:   # one independent request passes through unchanged
        rank.append(0), offs.append(123), lens.append(45), coll.append(False)
    t = Trace.from_arrays(rank, np.zeros(len(rank), np.int64), np.ones(len(rank), np.int8), offs, lens,
                          files=("f",), collective=np.array(coll))
    v = aggregator_view(t, ppn, B)
    aggs = aggregator_ranks(int(t.rank.max()) + 1, ppn)
    cv = v.collective
    if with_independent:
        assert (~cv).sum() == 1 and v.offset[~cv][0] == 123 and v.length[~cv][0] == 45
    if sum(lens[:len(reqs)]) == 0:
        assert cv.sum() == 0
        return
    want = _brute_force(offs[:len(reqs)], lens[:len(reqs)], len(aggs), B)
    got = {}
    for r, o, n, c in zip(v.rank[cv], v.offset[cv], v.length[cv], v.order[cv]):
        assert n > 0
        for x in range(int(o), int(o + n)):
            assert x not in got, "byte issued twice"
            got[x] = (int(np.flatnonzero(aggs == r)[0]), int(c))
    assert got == want
    # runs are maximal: no two runs of one aggregator and cycle touch
    key = sorted(zip(v.rank[cv].tolist(), v.order[cv].tolist(), v.offset[cv].tolist(), (v.offset + v.length)[cv].tolist()))
    for a, b in zip(key, key[1:]):
        assert not (a[:2] == b[:2] and a[3] == b[2])
