"""The contract of a collective order, checked on every row of the C table (as scikit-learn's
``check_estimator`` checks every estimator).

The orders are one ``{name, fn}`` table, ``pario_orders[]`` of
src/pario/native/collective/order.c; pario.plan.collective.ORDERS is its names and
request_order runs its rows.  :func:`check_order` states what any order must do on one
aggregator's pieces, so that a new order (one C function + one row) is tested by adding
nothing but its own specific tests:

1. it returns indices of the pieces, none twice;
2. every piece is issued, or stands for an issued twin with the same offset and server
   (seed 004 Algorithm 1 line 7: a piece already in its bucket is not appended again); when
   no (offset, server) pair repeats, the order is a permutation of all the pieces;
3. it is a function of its inputs: the same pieces give the same order, the inputs are not
   changed;
4. where the order is one of the papers' and the tests hold an independent implementation
   (tests/oracles/order.py: numpy, what pario had before the table), it equals it; ROMCIO
   is the logical offset order (stable); HACIO follows seed 004 Algorithm 1: all HServer
   pieces before all SServer pieces, a kind's pieces grouped by server number starting at
   (a + i) mod count (lines 15-25), inside a bucket in process-rank, then offset order
   (lines 2-13), and the worked example of §2.2 (Fig. 2-7).

A deliberately broken test-local order fails the contract (each clause bites).
"""

from __future__ import annotations

import numpy as np
import pytest

import oracles.order as order_oracle
from pario import ParioError
from pario.native import _rmt
from pario.plan.collective import ORDERS, request_order


def c_order(name):
    """The table's row ``name``, as (offset, server, kind, aggregator, proc, servers,
    server_kinds) -> (order, twin)."""
    def run(offset, server, kind, aggregator, proc, servers, server_kinds):
        return request_order(name, offset, server, kind, aggregator, proc=proc, servers=servers,
                             server_kinds=server_kinds, twins=True)
    return run


def random_pieces(rng, repeats: bool):
    """One aggregator's pieces: offsets (distinct, or with repeated (offset, server) pairs),
    servers of a layout of 1-8 servers of random kinds, processes, the aggregator, and the
    layout's server list (in a random order) or none."""
    nsrv = int(rng.integers(1, 9))
    servers = rng.choice(40, nsrv, replace=False)
    skind = rng.integers(0, 2, nsrv)
    n = int(rng.integers(0, 80))
    pick = rng.integers(0, nsrv, n)
    if repeats:
        offset = rng.integers(0, 20, n) * 512
    else:
        offset = rng.permutation(max(n, 1) * 4)[:n] * 512
    listed = bool(rng.integers(0, 2))
    return dict(offset=offset.astype(np.int64), server=servers[pick], kind=skind[pick],
                aggregator=int(rng.integers(0, 6)), proc=rng.integers(0, 5, n),
                servers=servers if listed else None, server_kinds=skind if listed else None)


# seed 004 §2.2 (Fig. 2): blocks b on servers H0 S0 H1 S1 (b mod 4), 2 aggregators, one
# block per stripe; what each order issues (tests/plan/test_collective_order.py derives them)
WORKED = {"romcio": {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]},
          "cacio": {0: [0, 1, 2, 3], 1: [5, 6, 7, 4]},
          "hacio": {0: [0, 2, 1, 3], 1: [6, 4, 7, 5]}}


def _worked_example(order_fn) -> dict[int, list[int]]:
    kinds = np.array([0, 1, 0, 1])
    out = {}
    for a in (0, 1):
        blocks = np.arange(4 * a, 4 * a + 4)
        o, _ = order_fn(blocks * 4096, blocks % 4, kinds[blocks % 4], a, None, np.arange(4), kinds)
        out[a] = blocks[np.asarray(o)].tolist()
    return out


def _check_hacio_algorithm1(p, order):
    """Seed 004 Algorithm 1 read directly off the issued sequence."""
    kind, server, off = p["kind"][order], p["server"][order], p["offset"][order]
    proc = np.zeros(len(order), np.int64) if p["proc"] is None else p["proc"][order]
    assert np.all(np.diff(kind) >= 0), "HServer pieces first, then SServer pieces (lines 15-16)"
    for t in (0, 1):
        sel = kind == t
        if not sel.any():
            continue
        if p["servers"] is not None:
            lst = [s for s, k in zip(p["servers"].tolist(), p["server_kinds"].tolist()) if k == t]
        else:
            lst = sorted(set(p["server"][p["kind"] == t].tolist()))
        count = max(len(lst), 1)
        number = np.array([lst.index(s) for s in server[sel].tolist()])
        step = (number - p["aggregator"]) % count   # number = (a + i) mod count (lines 22-24)
        assert np.all(np.diff(step) >= 0), "a kind's buckets in the order (a + i) mod count"
        for s in np.unique(step):   # inside a bucket: the walk, processes in rank order (lines 2-13)
            b = np.flatnonzero(sel)[step == s]
            key = list(zip(proc[b].tolist(), off[b].tolist()))
            assert key == sorted(key), "a bucket in process-rank, then offset order"


def check_order(name: str, order_fn, seed: int = 0, cases: int = 80) -> None:
    """Assert the contract of the order ``name`` computed by ``order_fn`` (module docstring)."""
    rng = np.random.default_rng(seed)
    for case in range(cases):
        p = random_pieces(rng, repeats=case % 2 == 1)
        n = len(p["offset"])
        before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}
        order, twin = order_fn(**p)
        order, twin = np.asarray(order), np.asarray(twin)
        # 1. indices of the pieces, none twice
        assert order.dtype.kind == "i" and order.ndim == 1, f"{name}: not an index array"
        assert np.all((order >= 0) & (order < n)), f"{name}: an index out of range (case {case})"
        assert len(np.unique(order)) == len(order), f"{name}: a piece issued twice (case {case})"
        # 2. every piece issued or standing for an issued twin with its offset and server
        issued = np.zeros(n, bool)
        issued[order] = True
        assert len(twin) == n and np.all(issued[twin]), f"{name}: a piece neither issued nor twinned (case {case})"
        assert np.all(p["offset"][twin] == p["offset"]) and np.all(p["server"][twin] == p["server"]), \
            f"{name}: a twin with another offset or server (case {case})"
        assert np.all((twin == np.arange(n)) == issued), f"{name}: an issued piece that is not its own twin"
        if len({(o, s) for o, s in zip(p["offset"].tolist(), p["server"].tolist())}) == n:
            assert len(order) == n, f"{name}: not a permutation of the pieces (case {case})"
        # 3. a function of its inputs
        again, _ = order_fn(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()})
        assert np.array_equal(np.asarray(again), order), f"{name}: another order for the same pieces (case {case})"
        for k, v in before.items():
            assert np.array_equal(np.asarray(p[k]), np.asarray(v)) if v is not None else p[k] is None, \
                f"{name}: changed its input {k}"
        # 4. the papers' orders
        if name == "romcio":
            key = list(zip(p["offset"][order].tolist(), order.tolist()))
            assert key == sorted(key), f"romcio: not the logical offset order, stable (case {case})"
        if name == "hacio":
            _check_hacio_algorithm1(p, order)
        if name in order_oracle.ORACLES:
            want = order_oracle.request_order(name, **p)
            assert order.tolist() == want.tolist(), f"{name}: differs from tests/oracles/order.py (case {case})"
    if name in WORKED:
        assert _worked_example(order_fn) == WORKED[name], f"{name}: seed 004's worked example"


def test_the_table_is_the_one_list_of_orders():
    assert ORDERS == _rmt.order_names() and len(ORDERS) >= 3
    assert ORDERS[0] == "romcio"   # row 0: the order without a layout (PARIO_ORDER_ROMCIO)
    for i, name in enumerate(ORDERS):
        assert _rmt.order_find(name) == i == _rmt.order_find(name.upper())
    assert _rmt.order_find("fifo") == -1


@pytest.mark.parametrize("name", ORDERS)
def test_every_registered_order_keeps_the_contract(name):
    check_order(name, c_order(name))


@pytest.mark.parametrize("name", ORDERS)
def test_every_registered_order_is_accepted_where_orders_are_named(name):
    """Hints, plans and the simulator take their names from the table."""
    from pario.mpi.hints import Hints
    from pario.simulate import simulate
    from pario.system import load_system
    from pario.workload import ior

    assert Hints.parse({"pario_order": name.upper()}, environ={}).order == name
    tr = ior(4, 64 << 10, 64 << 10, segments=2, pattern="strided", op="write", collective=True)
    res = simulate(tr, load_system("hacio-6h2s"), "fixed:16K", collective=True, order=name, cb_buffer=128 << 10)
    assert res.makespan_s > 0


def _broken_drops_a_piece(offset, server, kind, aggregator, proc, servers, server_kinds):
    o = order_oracle.romcio_order(offset)
    return o[1:], np.arange(len(o))


def _broken_issues_twice(offset, server, kind, aggregator, proc, servers, server_kinds):
    o = order_oracle.romcio_order(offset)
    if len(o) > 1:
        o[-1] = o[0]
    return o, np.arange(len(o))


def _broken_false_twin(offset, server, kind, aggregator, proc, servers, server_kinds):
    # line 7 done wrong: a piece dropped for a twin on another server
    o = order_oracle.romcio_order(offset)
    twin = np.arange(len(o))
    if len(o) > 1:
        twin[o[-1]] = o[0]
        o = o[:-1]
    return o, twin


_calls = {"n": 0}


def _broken_not_a_function(offset, server, kind, aggregator, proc, servers, server_kinds):
    _calls["n"] += 1
    o = order_oracle.romcio_order(offset)
    return (o[::-1] if _calls["n"] % 2 else o), np.arange(len(o))


def _broken_romcio_unstable(offset, server, kind, aggregator, proc, servers, server_kinds):
    # offset order, ties broken backwards: not ROMIO's order
    o = np.lexsort((-np.arange(len(offset)), np.asarray(offset)))
    return o, np.arange(len(o))


def _broken_hacio_ssd_first(offset, server, kind, aggregator, proc, servers, server_kinds):
    # Algorithm 1 with the types swapped
    return order_oracle.request_order("hacio", offset, server, 1 - np.asarray(kind), aggregator, proc=proc,
                                      servers=servers, server_kinds=None if server_kinds is None else 1 - server_kinds,
                                      twins=True)


@pytest.mark.parametrize("name,fn", [("broken", _broken_drops_a_piece), ("broken", _broken_issues_twice),
                                     ("broken", _broken_false_twin), ("broken", _broken_not_a_function),
                                     ("romcio", _broken_romcio_unstable), ("hacio", _broken_hacio_ssd_first)],
                         ids=["drops-a-piece", "issues-twice", "false-twin", "not-a-function", "romcio-unstable",
                              "hacio-ssd-first"])
def test_a_broken_order_fails_the_contract(name, fn):
    with pytest.raises(AssertionError):
        check_order(name, fn)


def test_order_errors_are_pario_errors():
    with pytest.raises(ParioError, match="unknown collective order 'fifo'"):
        request_order("fifo", [0])
    with pytest.raises(ParioError, match="not in the server list"):
        request_order("cacio", [0, 64], [0, 5], [0, 0], 0, servers=[0, 1], server_kinds=[0, 1])
    with pytest.raises(ParioError, match="kind must be 0"):
        request_order("hacio", [0, 64], [0, 1], [0, 2], 0)
    with pytest.raises(ParioError, match="bad argument"):
        request_order("hacio", [0, 64], [0, 1])   # HACIO needs the kinds
    with pytest.raises(ValueError):
        request_order("cacio", [0, 64], [0])
