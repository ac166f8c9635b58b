"""Layouts and the exact mapping, against a per-byte brute-force walk (an independent oracle)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pario import ParioError
from pario.layout import (ExtentMap, Grouped, Region, Regions, Striped, describe, layout_from_dict,
                          layout_to_dict, map_requests, parse_layout, server_load)
from pario.system import load_system
from pario.trace import Trace


# ---------------------------------------------------------------- brute-force oracle
def walk_striped(servers, stripes, nbytes, counters):
    """Owner (server, local) of each of the first nbytes bytes, by walking stripe after stripe."""
    out = []
    while len(out) < nbytes:
        for s, w in zip(servers, stripes):
            for _ in range(w):
                if len(out) == nbytes:
                    return out
                out.append((s, counters.get(s, 0)))
                counters[s] = counters.get(s, 0) + 1
    return out


def walk_grouped(groups, stripe, nbytes):
    out, counters = [], {}
    ptr = [0] * len(groups)  # stripe position inside each group
    while len(out) < nbytes:
        for k, g in enumerate(groups):
            for _ in range(len(g)):  # one block = |g| stripes
                s = g[ptr[k] % len(g)]
                ptr[k] += 1
                for _ in range(stripe):
                    out.append((s, counters.get(s, 0)))
                    counters[s] = counters.get(s, 0) + 1
    return out[:nbytes]


def walk(layout, nbytes):
    if isinstance(layout, Striped):
        return walk_striped(layout.servers, layout.stripes, nbytes, {})
    if isinstance(layout, Grouped):
        return walk_grouped(layout.groups, layout.stripe, nbytes)
    if isinstance(layout, Regions):
        out, counters = [], {}
        for r in layout.regions:
            end = nbytes if r.end is None else min(r.end, nbytes)
            if end <= r.start:
                # still account the region's usage for later regions
                continue
            lay = r.layout
            if isinstance(lay, Striped):
                out += walk_striped(lay.servers, lay.stripes, end - r.start, counters)
            else:
                raise NotImplementedError
            if r.end is not None and r.end > nbytes:
                break
        return out[:nbytes]
    raise NotImplementedError


def per_byte(layout, x, n):
    """Map every byte of [x, x+n) as its own 1-byte request."""
    sub = map_requests(layout, np.arange(x, x + n), np.ones(n, dtype=np.int64))
    assert len(sub) == n and (sub.length == 1).all()
    return list(zip(sub.server.tolist(), sub.local.tolist()))


stripe_st = st.integers(min_value=0, max_value=7)


@st.composite
def striped_layouts(draw):
    n = draw(st.integers(1, 5))
    stripes = draw(st.lists(stripe_st, min_size=n, max_size=n).filter(lambda s: sum(s) > 0))
    servers = draw(st.permutations(list(range(6))))[:n]
    return Striped(tuple(servers), tuple(stripes))


@st.composite
def grouped_layouts(draw):
    g = draw(st.integers(1, 3))
    size = draw(st.integers(1, 3))
    stripe = draw(st.integers(1, 5))
    return Grouped(tuple(tuple(range(k * size, (k + 1) * size)) for k in range(g)), stripe)


@st.composite
def region_layouts(draw):
    first = draw(striped_layouts())
    second = draw(striped_layouts())
    cut = draw(st.integers(1, 60))
    return Regions((Region(0, cut, first), Region(cut, None, second)))


any_layout = st.one_of(striped_layouts(), grouped_layouts(), region_layouts())


@settings(max_examples=150, deadline=None)
@given(any_layout)
def test_single_bytes_match_brute_force_walk(layout):
    n = 120
    assert per_byte(layout, 0, n) == walk(layout, n)


@settings(max_examples=150, deadline=None)
@given(any_layout, st.lists(st.tuples(st.integers(0, 100), st.integers(0, 40)), min_size=1, max_size=12))
def test_requests_conserve_bytes_and_agree_with_per_byte_mapping(layout, reqs):
    off = np.array([r[0] for r in reqs])
    ln = np.array([r[1] for r in reqs])
    sub = map_requests(layout, off, ln)
    # bytes conserved per request
    per_req = np.bincount(sub.req, weights=sub.length, minlength=len(reqs))
    assert (per_req == ln).all()
    # each sub-request covers exactly the per-byte owners of its request's bytes on that server
    truth = walk(layout, int((off + ln).max()) + 1)
    for k, (x, n) in enumerate(zip(off, ln)):
        want = {}
        for b in range(x, x + n):
            s, l = truth[b]
            want.setdefault(s, []).append(l)
        got = {int(s): (int(l), int(m)) for r, s, l, m in zip(sub.req, sub.server, sub.local, sub.length) if r == k}
        assert set(got) == set(want)
        for s, locs in want.items():
            # contiguous on the server, starting at the first local byte
            assert got[s] == (min(locs), len(locs)) and max(locs) - min(locs) + 1 == len(locs)


@settings(max_examples=100, deadline=None)
@given(any_layout)
def test_two_logical_bytes_never_share_a_server_byte(layout):
    owners = per_byte(layout, 0, 150)
    assert len(set(owners)) == len(owners)


def test_extent_map_with_default():
    base = Striped.fixed(4, (0, 1))
    em = ExtentMap(np.array([8, 20]), np.array([4, 6]), np.array([1, 0]), np.array([0, 100]),
                   np.array([1, 2]), default=base)
    sub = map_requests(em, np.array([6, 18]), np.array([8, 10]))
    rows = sorted(zip(sub.req.tolist(), sub.server.tolist(), sub.local.tolist(), sub.length.tolist(), sub.datafile.tolist()))
    # request 0 = [6,14): [6,8) default (server 1, local 2..4), [8,12) replica (srv1, local 0, df1), [12,14) default srv1 local 4
    # request 1 = [18,28): [18,20) default srv 0 local 10, [20,26) replica srv0 local 100 df2, [26,28) default srv 0 local 14
    assert rows == [
        (0, 1, 0, 4, 1), (0, 1, 2, 2, 0), (0, 1, 4, 2, 0),
        (1, 0, 10, 2, 0), (1, 0, 14, 2, 0), (1, 0, 100, 6, 2),
    ]
    assert np.bincount(sub.req, weights=sub.length).tolist() == [8, 10]


def test_extent_map_without_default_refuses_uncovered_bytes():
    em = ExtentMap(np.array([0]), np.array([10]), np.array([0]), np.array([0]), np.array([1]))
    map_requests(em, np.array([2]), np.array([8]))
    with pytest.raises(ParioError, match="does not cover"):
        map_requests(em, np.array([5]), np.array([10]))


def test_extent_map_rejects_overlap():
    with pytest.raises(ParioError, match="overlap"):
        ExtentMap(np.array([0, 5]), np.array([10, 10]), np.array([0, 1]), np.array([0, 0]), np.array([1, 1]))


def test_spec_strings_and_json_round_trip():
    sysp = load_system("padp-6h2s")
    lay = parse_layout("var:hdd=28K,ssd=100K", sysp)
    assert lay.stripes == (28 << 10,) * 6 + (100 << 10,) * 2
    assert describe(lay, sysp) == "⟨28K, 100K⟩"
    assert parse_layout("var:hdd=0,ssd=32k", sysp).servers_used() == (6, 7)
    assert parse_layout("fixed:64K@S1,H0", sysp).servers == (7, 0)
    g = parse_layout("2d:4:16k", sysp)
    assert g.groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    for spec in ("fixed:64k", "var:H0=28K,S0=100K", "2d:2:64K"):
        lay = parse_layout(spec, sysp)
        assert layout_from_dict(layout_to_dict(lay, sysp), sysp) == lay
    reg = Regions((Region(0, 1 << 20, parse_layout("var:hdd=120k,ssd=8k", sysp)),
                   Region(1 << 20, None, parse_layout("fixed:128k@H0,H1,H2,H3,H4,H5", sysp))))
    assert layout_from_dict(layout_to_dict(reg, sysp), sysp) == reg


@pytest.mark.parametrize("bad", ["fixed:", "fixed:12q", "var:hdd", "2d:3:64k", "2d:x:64k", "nope", "var:hdd=0,ssd=0",
                                 "fixed:64k@Z9", "missing.json"])
def test_bad_specs_are_one_line_errors(bad):
    with pytest.raises(ParioError) as exc:
        parse_layout(bad, load_system("padp-6h2s"))
    assert "\n" not in str(exc.value)


def test_server_load_fixed_stripe_ior_strided():
    # 4 ranks x 8 segments of 64 KiB, round-robin over 4 servers with 64 KiB stripes:
    # request i goes to server i mod 4, so each server gets 8*4/4 = 8 requests of 64 KiB.
    k = 64 << 10
    off = np.arange(32) * k
    t = Trace.from_arrays(off // k % 4, None, ["read"] * 32, off, [k] * 32)
    sysp = load_system("ceda-ssd4")
    nbytes, count = server_load(t, parse_layout("fixed:64k", sysp), sysp.n)
    assert nbytes.tolist() == [8 * k] * 4 and count.tolist() == [8] * 4


@st.composite
def extent_maps(draw):
    """Random extent maps (disjoint extents in [0, 200), some with a default layout)."""
    cuts = sorted(set(draw(st.lists(st.integers(0, 200), min_size=2, max_size=12))))
    rows = [(a, b - a) for a, b in zip(cuts[::2], cuts[1::2]) if b > a]
    n = len(rows)
    srv = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    loc = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n))
    df = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    default = draw(st.one_of(st.none(), striped_layouts(), grouped_layouts(), region_layouts()))
    return ExtentMap(np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64),
                     np.array(srv, dtype=np.int64), np.array(loc, dtype=np.int64), np.array(df, dtype=np.int64),
                     default=default)


@settings(max_examples=200, deadline=None)
@given(st.one_of(any_layout, extent_maps()),
       st.lists(st.tuples(st.integers(0, 240), st.integers(0, 60)), min_size=1, max_size=16))
def test_the_engine_maps_as_the_independent_numpy_mapping(layout, reqs):
    """pario.layout.map_requests (the store engine's mapping, store/layout.c) equals the
    numpy mapping from the byte-count functions (tests/oracles/layout.py) row for row, and
    refuses what it refuses (an extent map without a default that leaves bytes uncovered)."""
    from oracles.layout import map_requests as oracle

    off = np.array([r[0] for r in reqs], dtype=np.int64)
    ln = np.array([r[1] for r in reqs], dtype=np.int64)
    try:
        want = oracle(layout, off, ln)
    except ParioError as exc:
        with pytest.raises(ParioError, match="does not cover"):
            map_requests(layout, off, ln)
        assert "does not cover" in str(exc)
        return
    got = map_requests(layout, off, ln)
    for col in ("req", "server", "local", "length", "datafile"):
        assert getattr(got, col).tolist() == getattr(want, col).tolist(), col
