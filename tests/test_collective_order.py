"""ROMCIO / CACIO / HACIO request orders (pario.plan.collective) against seed 004's worked example."""

import numpy as np
import pytest

from pario import ParioError
from pario.plan.collective import cacio_order, hacio_order, request_order, romcio_order

# seed 004 §2.2: servers H0 S0 H1 S1 (indices 0..3) in round-robin block order
SERVER = {b: b % 4 for b in range(16)}
KIND = {0: 0, 1: 1, 2: 0, 3: 1}  # 0 = HServer, 1 = SServer
DOMAINS = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}  # aggregator A0, A1 (2 aggregators, 8 blocks)


def _order(method, a, blocks=None, proc=None):
    blocks = np.array(DOMAINS[a] if blocks is None else blocks)
    srv = np.array([SERVER[b] for b in blocks])
    kind = np.array([KIND[s] for s in srv])
    o = request_order(method, blocks * 4096, srv, kind, a, proc=proc, servers=[0, 1, 2, 3],
                      kind_servers=((0, 2), (1, 3)))
    return blocks[o].tolist()


def test_romcio_is_logical_order():
    assert _order("romcio", 0) == [0, 1, 2, 3]
    assert _order("romcio", 1) == [4, 5, 6, 7]
    assert romcio_order([30, 10, 20]).tolist() == [1, 2, 0]


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
    o = hacio_order([0, 0, 4096], [0, 0, 1], [0, 0, 1], 0)
    assert len(o) == 2 and sorted(o.tolist())[-1] == 2


def test_cacio_skips_servers_missing_from_the_domain():
    # the domain has no piece on server position 1: aggregator 1 starts at the next one
    o = cacio_order([0, 2, 3], [0, 2, 3], 1, servers=[0, 1, 2, 3])
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
