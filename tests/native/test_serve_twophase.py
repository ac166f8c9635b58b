"""pario's two-phase collective I/O in C (src/pario/native/collective/twophase.c, order.c).

tests/c/twophase_driver.c, compiled here with the wheel's ``mpicc`` together with the two
sources, runs many cases per ``mpiexec`` launch (1-4 processes).  Every answer is checked
against numbers derived independently:

* bytes: every collective write through pario's C two-phase (POSIX pwrite callback) gives
  the same file, byte for byte, as ROMIO's ``MPI_File_write_at_all`` through an hindexed
  view (or ``MPI_File_write_at`` when a rank's extents are unsorted), as independent
  ``pwrite`` calls and as a numpy model of the extents applied to the file's former bytes
  (so holes inside an aggregator's buffer are never clobbered); every collective read
  returns what ROMIO's read and a numpy gather of the file return (zeros past the end);
* order: every aggregator's per-cycle log of the pieces it issued equals what the oracle
  of tests/oracles/twophase.py (pario's former Python runtime) computes for the same
  requests: the file domains and the routing to aggregators as that runtime did them,
  then ``oracles.twophase._plan_domain`` with a Placement of the same layout and the orders
  of tests/oracles/order.py (numpy ROMCIO, CACIO, HACIO of seed 004 Algorithm 1; pario
  itself computes them with order.c's table); the aggregators equal
  pario.plan.collective.aggregator_ranks (one node);
* bad arguments: one error code, the same on every rank, no crash, and a correct call
  works afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import C_DIR, VENV_BIN

DRIVER_SRC = C_DIR / "twophase_driver.c"
I64 = np.int64

# twophase.h / order.h return codes
OK, EINVAL, EMISMATCH, ENOMEM, ETOOBIG, ELAYOUT, EIO, EMPI = 0, 1, 2, 3, 4, 5, 6, 7
O_EINVAL, O_ESERVER, O_EKIND = 1, 3, 4


@pytest.fixture(scope="module")
def driver(tmp_path_factory, build_native):
    if not (VENV_BIN / "mpicc").exists() or not (VENV_BIN / "mpiexec").exists():
        pytest.skip("the MPICH wheel's mpicc/mpiexec are not installed (scripts/setup.sh test)")
    bn = build_native
    out = tmp_path_factory.mktemp("twophase")
    exe = out / "twophase_driver"
    cmd = bn.collective_driver_command(DRIVER_SRC, exe)
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def mpiexec(exe: Path, nprocs: int, *args: str, timeout: float = 120) -> list[dict]:
    r = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", str(nprocs), str(exe), *args],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(s) for s in r.stdout.splitlines() if s.startswith("{")]


# ---------------------------------------------------------------------- layouts
# (server, stripe, kind) triples: a round-robin striping with one stripe per server
LAYOUTS = {
    "none": None,
    # seed 004 Fig. 2: H0 S0 H1 S1, one block each
    "h0s0h1s1": [(0, 64, 0), (1, 64, 1), (2, 64, 0), (3, 64, 1)],
    # PADP-like varied stripes, servers out of order, one left out (stripe 0)
    "varied": [(2, 96, 0), (0, 32, 1), (3, 0, 0), (1, 32, 1), (4, 128, 0)],
    # 6 HServers + 2 SServers (seed 004's 6H+2S testbed), small stripes
    "6h2s": [(s, 48 if s < 6 else 16, 0 if s < 6 else 1) for s in (0, 6, 1, 2, 7, 3, 4, 5)],
}


def placement_of(layout):
    if layout is None:
        return None
    from pario.layout import Striped
    from pario.mpi.placement import Placement

    kinds = np.zeros(max(s for s, _, _ in layout) + 1, I64)
    for s, _, k in layout:
        kinds[s] = k
    return Placement(Striped(tuple(s for s, _, _ in layout), tuple(w for _, w, _ in layout)), kinds)


# ---------------------------------------------------------------------- patterns
def _ext(pairs) -> np.ndarray:
    a = np.asarray(pairs, dtype=I64).reshape(-1, 2)
    return a


def ior_strided(P, xfer, segments, base=0):
    return [_ext([(base + (s * P + r) * xfer, xfer) for s in range(segments)]) for r in range(P)]


def ior_contiguous(P, block, xfer, base=0):
    return [_ext([(base + r * block + i, min(xfer, block - i)) for i in range(0, block, xfer)]) for r in range(P)]


def hpio(P, regions, size, spacing, base=0):
    """HPIO-like: every rank's regions interleaved with the others', ``spacing`` bytes of
    hole after every region."""
    return [_ext([(base + (i * P + r) * (size + spacing), size) for i in range(regions)]) for r in range(P)]


def random_disjoint(rng, P, chunks, maxlen, base=0, hole=0.25):
    """Disjoint random extents (writes): the file cut into random chunks, each owned by a
    random rank or by nobody (a hole); every rank's chunks in a random data order, some
    zero-length extents mixed in."""
    lens = rng.integers(1, maxlen + 1, chunks)
    offs = base + np.concatenate(([0], np.cumsum(lens)[:-1]))
    owner = np.where(rng.random(chunks) < hole, -1, rng.integers(0, P, chunks))
    out = []
    for r in range(P):
        sel = np.flatnonzero(owner == r)
        rng.shuffle(sel)
        e = np.stack((offs[sel], lens[sel]), axis=1) if len(sel) else np.zeros((0, 2), I64)
        if len(e) and rng.random() < 0.5:   # a zero-length extent somewhere
            e = np.insert(e, rng.integers(0, len(e) + 1), [int(offs[0]) + 5, 0], axis=0)
        out.append(e.astype(I64))
    return out


def uneven(rng, P, base=0):
    """Rank 0 nothing, rank 1 a few small extents, the others big contiguous blocks."""
    out = [np.zeros((0, 2), I64)]
    pos = base
    for r in range(1, P):
        if r == 1:
            e = [(pos + 7 * i, 3) for i in range(5)]
            pos += 40
        else:
            n = int(rng.integers(2000, 6000))
            e = [(pos, n)]
            pos += n + int(rng.integers(0, 300))
        out.append(_ext(e))
    if P == 1:
        out = [_ext([(base + 3, 1000), (base + 2000, 17)])]
    return out


def random_overlapping(rng, P, n, maxlen, span):
    """Reads: random extents anywhere in [0, span) (they overlap, within and across ranks;
    some run past the end of the file), duplicated offsets included."""
    out = []
    for r in range(P):
        o = rng.integers(0, span, n)
        ln = rng.integers(1, maxlen + 1, n)
        if n > 4:
            o[1] = o[0]    # the same offset twice (HACIO line 7)
        if r > 0 and len(out[0]):
            o[-1] = out[0][0, 0]   # and the same offset on two ranks
        out.append(np.stack((o, ln), axis=1).astype(I64))
    return out


# ---------------------------------------------------------------------- cases
@dataclass
class Case:
    id: str
    op: str
    exts: list
    order: str = "romcio"
    cb_buffer: int = 1 << 24
    cb_nodes: int = 0
    mode: str = "enable"
    aggs: list = field(default_factory=list)
    layout: str = "none"
    size: int = 0           # file size before the call


def spec_text(case: Case, impl: str, path: Path, data: Path, log: str) -> str:
    lay = LAYOUTS[case.layout] or []
    toks = ["case", f"{case.id}-{impl}", "op", case.op, "impl", impl, "file", str(path), "order", case.order,
            "cb_buffer", case.cb_buffer, "cb_nodes", case.cb_nodes, "mode", case.mode,
            "aggs", len(case.aggs), *case.aggs, "layout", len(lay), *[x for t in lay for x in t],
            "data", str(data), "log", log]
    for r, e in enumerate(case.exts):
        toks += ["ext", r, len(e), *e.ravel().tolist()]
    toks.append("end")
    return " ".join(map(str, toks))


def expected_aggs(case: Case, P: int) -> list[int]:
    from pario.plan.collective import aggregator_ranks

    if case.aggs:
        return list(case.aggs)
    return aggregator_ranks(P, P, case.cb_nodes or None).tolist()   # one node: P ranks on it


def oracle_schedule(case: Case, P: int, layout=None) -> dict[int, list]:
    """Per aggregator rank: [(cycle, [(off, len), ...]), ...] as the Python runtime plans it
    (``layout``: [(server, stripe, kind), ...] instead of the case's named one).

    Steps 1-3 of the former Python runtime (aggregate range, fd = ceil(span / naggr),
    pieces cut at domain boundaries with split_periodic, routed in rank order, each rank's
    in domain-stable data order), then its _plan_domain (tests/oracles/twophase.py, steps 4-5)."""
    from unittest import mock

    import oracles.order as order_oracle
    import oracles.twophase as twophase
    from oracles.placement import split_periodic

    aggs = expected_aggs(case, P)
    naggr = len(aggs)
    exts = [e[e[:, 1] > 0] for e in case.exts]   # the C code ignores zero-length extents
    has = [e for e in exts if len(e)]
    out: dict[int, list] = {}
    if not has:
        return out
    sts = np.array([int(e[:, 0].min()) if len(e) else -1 for e in exts])
    ens = np.array([int((e[:, 0] + e[:, 1]).max()) if len(e) else -1 for e in exts])
    hv = ens >= 0
    if case.mode == "disable" or (case.mode == "automatic" and not twophase._interleaved(sts[hv], ens[hv])):
        for r, e in enumerate(exts):   # independent: every rank its own extents, one call
            if len(e):
                out[r] = [(-1, [tuple(x) for x in e.tolist()])]
        return out
    min_st, max_end = int(sts[hv].min()), int(ens[hv].max())
    fd = max(1, -(-(max_end - min_st) // naggr))
    routed = [[] for _ in range(naggr)]
    for r, e in enumerate(exts):
        if not len(e):
            continue
        _, o, l = split_periodic(e[:, 0], e[:, 1], fd, np.array([0]), base=min_st)
        dom = (o - min_st) // fd
        by = np.argsort(dom, kind="stable")
        for oo, ll, dd in zip(o[by].tolist(), l[by].tolist(), dom[by].tolist()):
            routed[dd].append((r, oo, ll))
    f = SimpleNamespace(placement=placement_of(layout if layout is not None else LAYOUTS[case.layout]),
                        order=case.order)
    for k in range(naggr):
        if not routed[k]:
            continue
        src = np.array([x[0] for x in routed[k]], I64)
        off = np.array([x[1] for x in routed[k]], I64)
        ln = np.array([x[2] for x in routed[k]], I64)
        with mock.patch.object(twophase, "request_order", order_oracle.request_order):
            s_src, s_off, s_len, s_cyc, s_seq = twophase._plan_domain(f, k, src, off, ln, case.cb_buffer,
                                                                      twophase.Schedule(), 1)
        cycles = []
        for c in range(int(s_cyc.max()) + 1):
            sel = np.flatnonzero(s_cyc == c)
            sel = sel[np.argsort(s_seq[sel], kind="stable")]
            cycles.append((c, list(zip(s_off[sel].tolist(), s_len[sel].tolist()))))
        out[aggs[k]] = cycles
    return out


def read_log(prefix: str, P: int) -> dict[int, list]:
    out = {}
    for r in range(P):
        p = Path(f"{prefix}.{r}")
        rows = []
        for line in p.read_text().splitlines() if p.exists() else []:
            v = list(map(int, line.split()))
            c, n, rest = v[0], v[1], v[2:]
            assert len(rest) == 2 * n
            rows.append((c, list(zip(rest[0::2], rest[1::2]))))
        if rows:
            out[r] = rows
    return out


def apply_writes(before: np.ndarray, exts, datas) -> np.ndarray:
    out = before.copy()
    end = max([len(out)] + [int((e[:, 0] + e[:, 1]).max()) for e in exts if len(e)])
    if end > len(out):
        out = np.concatenate((out, np.zeros(end - len(out), np.uint8)))
    for e, d in zip(exts, datas):
        pos = 0
        for o, l in e.tolist():
            out[o:o + l] = d[pos:pos + l]
            pos += l
    return out


def gather_reads(content: np.ndarray, e: np.ndarray) -> np.ndarray:
    parts = []
    for o, l in e.tolist():
        seg = np.zeros(l, np.uint8)
        have = content[o:o + l]
        seg[:len(have)] = have
        parts.append(seg)
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def first_diff(a: np.ndarray, b: np.ndarray) -> str:
    if len(a) != len(b):
        return f"sizes {len(a)} != {len(b)}"
    i = int(np.flatnonzero(a != b)[0])
    return f"first differing byte at {i}: {a[i]} != {b[i]}"


def make_cases(P: int, seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    orders = ("romcio", "cacio", "hacio")
    cbn = (1, 2, 4, 0)
    cases = []
    writes = [
        ("ior-strided", ior_strided(P, 100, 6, base=0), "h0s0h1s1", 256),
        ("ior-contig", ior_contiguous(P, 3000, 700, base=1000), "6h2s", 1024),
        ("hpio", hpio(P, 12, 40, 24, base=333), "varied", 200),
        ("random", random_disjoint(rng, P, 60, 150, base=77), "varied", 300),
        ("random-tiny-buffer", random_disjoint(rng, P, 30, 40), "h0s0h1s1", 17),
        ("uneven", uneven(rng, P, base=50), "6h2s", 512),
        ("strided-nolayout", ior_strided(P, 64, 5, base=10), "none", 100),
    ]
    i = 0
    for name, exts, lay, B in writes:
        for order in orders:
            i += 1
            end = max([int((e[:, 0] + e[:, 1]).max()) for e in exts if len(e)] + [0])
            cases.append(Case(f"w{i}-{name}-{order}", "write", exts, order=order, cb_buffer=B,
                              cb_nodes=cbn[i % len(cbn)], layout=lay, size=end + 100))
    # explicit aggregator list (a plan's), not sorted; automatic mode both ways
    if P >= 2:
        cases.append(Case("w-aggs-list", "write", hpio(P, 8, 30, 10), order="hacio", cb_buffer=64,
                          aggs=[P - 1, 0], layout="h0s0h1s1", size=4000))
    cases.append(Case("w-automatic-contig", "write", ior_contiguous(P, 500, 128), order="cacio", cb_buffer=128,
                      mode="automatic", layout="varied", size=4000))
    cases.append(Case("w-automatic-strided", "write", ior_strided(P, 50, 4), order="hacio", cb_buffer=64,
                      mode="automatic", layout="varied", size=4000))
    cases.append(Case("w-disable", "write", ior_strided(P, 50, 4), order="hacio", cb_buffer=64,
                      mode="disable", layout="varied", size=4000))
    reads = [
        ("overlap", random_overlapping(rng, P, 25, 120, 5000), "h0s0h1s1", 256, 4800),
        ("overlap-varied", random_overlapping(rng, P, 20, 300, 3000), "varied", 100, 3200),
        ("hpio", hpio(P, 10, 50, 30), "6h2s", 160, 6000),
        ("ior-strided", ior_strided(P, 128, 4), "none", 300, 3000),
        ("uneven", uneven(rng, P), "h0s0h1s1", 1000, 30000),
    ]
    for name, exts, lay, B, size in reads:
        for order in orders:
            i += 1
            cases.append(Case(f"r{i}-{name}-{order}", "read", exts, order=order, cb_buffer=B,
                              cb_nodes=cbn[i % len(cbn)], layout=lay, size=size))
    return cases


# ---------------------------------------------------------------------- the tests
@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_bytes_and_order_match(driver, tmp_path, nprocs):
    cases = make_cases(nprocs, seed=1000 + nprocs)
    rng = np.random.default_rng(nprocs)
    lines, files, expect_w, expect_r = [], {}, {}, {}
    for c in cases:
        before = rng.integers(0, 256, c.size, dtype=np.uint8)
        data = tmp_path / f"{c.id}.data"
        impls = ("pario", "romio", "posix") if c.op == "write" else ("pario", "romio")
        if c.op == "write":
            datas = [rng.integers(0, 256, int(e[:, 1].sum()), dtype=np.uint8) for e in c.exts]
            for r, d in enumerate(datas):
                d.tofile(f"{data}.{r}")
            expect_w[c.id] = apply_writes(before, c.exts, datas)
        else:
            expect_r[c.id] = [gather_reads(before, e) for e in c.exts]
        for impl in impls:
            path = tmp_path / f"{c.id}.{impl}.file"
            before.tofile(path)
            files[(c.id, impl)] = path
            d = data if c.op == "write" else tmp_path / f"{c.id}.{impl}.out"
            log = str(tmp_path / f"{c.id}.log") if impl == "pario" else "-"
            lines.append(spec_text(c, impl, path, d, log))
    spec = tmp_path / "spec.txt"
    spec.write_text("\n".join(lines) + "\n")
    results = {r["case"]: r for r in mpiexec(driver, nprocs, str(spec))}
    n_pieces = 0
    for c in cases:
        res = results[f"{c.id}-pario"]
        assert res["rc"] == [OK] * nprocs, (c.id, res)
        assert res["moved"] == [int(e[:, 1].sum()) for e in c.exts], c.id
        assert res["aggs"] == expected_aggs(c, nprocs), c.id
        if c.op == "write":
            want = expect_w[c.id]
            for impl in ("pario", "romio", "posix"):
                assert results[f"{c.id}-{impl}"]["rc"] == [0] * nprocs, (c.id, impl)
                got = np.fromfile(files[(c.id, impl)], np.uint8)
                assert np.array_equal(got, want), f"{c.id} {impl}: {first_diff(got, want)}"
        else:
            for impl in ("pario", "romio"):
                assert results[f"{c.id}-{impl}"]["rc"] == [0] * nprocs, (c.id, impl)
                for r in range(nprocs):
                    got = np.fromfile(tmp_path / f"{c.id}.{impl}.out.{r}", np.uint8)
                    want = expect_r[c.id][r]
                    assert np.array_equal(got, want), f"{c.id} {impl} rank {r}: {first_diff(got, want)}"
        # the order: every aggregator's per-cycle log equals the Python runtime's plan
        got_log = read_log(str(tmp_path / f"{c.id}.log"), nprocs)
        want_log = oracle_schedule(c, nprocs)
        assert got_log.keys() == want_log.keys(), (c.id, sorted(got_log), sorted(want_log))
        for a in want_log:
            assert got_log[a] == want_log[a], f"{c.id}: aggregator rank {a} issued another order"
            n_pieces += sum(len(p) for _, p in want_log[a])
    assert n_pieces > 200 * nprocs   # the logs are not trivially short


def test_orders_differ_and_follow_algorithm_1(driver, tmp_path):
    """The three orders give the same file and different logs: the worked example of
    seed 004 §2.2 (Fig. 2-7: 4 processes, 2 aggregators, blocks 0-7 on H0 S0 H1 S1, one-block
    buffer).  ROMCIO issues blocks in offset order (A1: 4 5 6 7), CACIO rotates (A1: 5 6 7 4,
    Fig. 4), HACIO puts HServer blocks first (A0: 0 2 1 3; A1: 6 4 7 5 by Algorithm 1 lines
    22-24 with a = 1), each cycle of HACIO hitting one kind of server."""
    P, blk = 4, 64
    exts = [_ext([(r * blk, blk), ((r + 4) * blk, blk)]) for r in range(P)]
    rng = np.random.default_rng(7)
    lines, paths = [], {}
    for order in ("romcio", "cacio", "hacio"):
        c = Case(f"fig2-{order}", "write", exts, order=order, cb_buffer=blk, cb_nodes=2, layout="h0s0h1s1", size=8 * blk)
        data = tmp_path / "fig2.data"
        if order == "romcio":
            datas = [rng.integers(0, 256, 2 * blk, dtype=np.uint8) for _ in range(P)]
            for r, d in enumerate(datas):
                d.tofile(f"{data}.{r}")
        path = tmp_path / f"{order}.file"
        np.zeros(8 * blk, np.uint8).tofile(path)
        paths[order] = (c, path)
        lines.append(spec_text(c, "pario", path, data, str(tmp_path / f"{order}.log")))
    (tmp_path / "spec").write_text("\n".join(lines) + "\n")
    res = mpiexec(driver, P, str(tmp_path / "spec"))
    assert all(r["rc"] == [0] * P for r in res)
    want = apply_writes(np.zeros(8 * blk, np.uint8), exts, datas)
    blocks = {}
    for order, (c, path) in paths.items():
        assert np.array_equal(np.fromfile(path, np.uint8), want), order
        log = read_log(str(tmp_path / f"{order}.log"), P)
        assert log == oracle_schedule(c, P)
        blocks[order] = {a: [p[0][0] // blk for _, p in cyc] for a, cyc in log.items()}
    assert blocks["romcio"] == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    assert blocks["cacio"] == {0: [0, 1, 2, 3], 1: [5, 6, 7, 4]}
    assert blocks["hacio"] == {0: [0, 2, 1, 3], 1: [6, 4, 7, 5]}
    kind = {0: 0, 1: 1, 2: 0, 3: 1}   # block b on server b mod 4
    for c in range(4):   # HACIO: in every cycle both aggregators hit the same kind of server
        assert kind[blocks["hacio"][0][c] % 4] == kind[blocks["hacio"][1][c] % 4]


def test_order_functions_match_request_order(driver, tmp_path):
    """order.c alone on a synthetic server/kind map (no layout: any server for any piece),
    against the numpy reference of tests/oracles/order.py (what pario.plan.collective's
    request_order was before the C table): random offsets with repeats (HACIO line 7),
    random processes and aggregators, the server list given (in a random order) or left to
    the default (the pieces' distinct servers, sorted); a piece on an unlisted server is an
    error in both."""
    from oracles.order import request_order
    from pario import ParioError

    rng = np.random.default_rng(2024)
    queries, want = [], []
    for q in range(300):
        method = ("romcio", "cacio", "hacio")[q % 3]
        nsrv = int(rng.integers(1, 9))
        servers = rng.choice(20, nsrv, replace=False)
        skind = rng.integers(0, 2, nsrv)
        n = int(rng.integers(0, 60))
        pick = rng.integers(0, nsrv, n)
        server, kind = servers[pick], skind[pick]
        off = rng.integers(0, 25, n) * 64          # repeats on purpose
        proc = rng.integers(0, 4, n)
        agg = int(rng.integers(0, 6))
        given = q % 2 == 0
        bad = given and n > 0 and q % 10 == 4       # one piece on a server missing from the list
        if bad:
            server = server.copy()
            server[int(rng.integers(0, n))] = 99
        lst = list(zip(servers.tolist(), skind.tolist())) if given else []
        toks = [method, agg, len(lst), *[x for t in lst for x in t], n]
        toks += [x for i in range(n) for x in (int(off[i]), int(server[i]), int(kind[i]), int(proc[i]))]
        queries.append(" ".join(map(str, toks)))
        try:
            o = request_order(method, off, server, kind, agg, proc=proc,
                              servers=servers if given else None, server_kinds=skind if given else None)
            want.append((0, o.tolist(), off, server))
        except ParioError:
            want.append((O_ESERVER, None, off, server))
    (tmp_path / "q").write_text("\n".join(queries) + "\n")
    got = mpiexec(driver, 1, "--order", str(tmp_path / "q"))
    assert len(got) == len(want)
    dropped = 0
    for g, (rc, order, off, server) in zip(got, want):
        assert g["rc"] == rc
        if rc:
            continue
        assert g["order"] == order
        kept = set(order)
        for i, t in enumerate(g["twin"]):   # a left-out piece names its issued twin
            assert t in kept and off[t] == off[i] and server[t] == server[i]
            assert (t == i) == (i in kept)
            dropped += t != i
    assert dropped > 50   # HACIO did drop repeated (offset, server) pieces


BAD = {
    "negative_offset_on_last_rank": EINVAL, "negative_length_on_rank0": EINVAL, "offset_beyond_2^62": EINVAL,
    "null_buffer": EINVAL, "null_extents": EINVAL, "negative_count": EINVAL, "cb_buffer_zero": EINVAL,
    "cb_buffer_mismatch": EMISMATCH, "order_unknown": EINVAL, "order_mismatch": EMISMATCH,
    "cb_mode_unknown": EINVAL, "aggregator_out_of_range": EINVAL, "aggregator_twice": EINVAL,
    "aggregators_null": EINVAL, "io_null": EINVAL, "layout_map_null": EINVAL,
    "layout_zero_piece": ELAYOUT, "layout_server_not_listed": ELAYOUT, "write_io_fails_on_rank0": EIO,
    "params_null": EINVAL, "comm_null": EINVAL, "write_flag_bad": EINVAL, "read_io_fails_on_last_rank": EIO,
    "order_n_negative": O_EINVAL, "order_null_offsets": O_EINVAL, "order_method_unknown": O_EINVAL,
    "order_hacio_kind_2": O_EKIND, "order_cacio_server_not_listed": O_ESERVER,
    "order_hacio_server_not_listed": O_ESERVER, "order_hacio_null_kind": O_EINVAL,
    "order_negative_aggregator": O_EINVAL, "order_null_norder": O_EINVAL, "order_ok": OK,
    "after_round_trip": OK,
}


@pytest.mark.parametrize("nprocs", [1, 3])
def test_bad_arguments_one_code_on_every_rank(driver, tmp_path, nprocs):
    res = {r["bad"]: r["rc"] for r in mpiexec(driver, nprocs, "--bad", str(tmp_path / "scratch"))}
    assert set(res) == set(BAD)
    for name, code in BAD.items():
        if nprocs == 1 and code == EMISMATCH:
            code = OK   # one rank cannot disagree with itself
        assert res[name] == [code] * nprocs, (name, res[name])


def test_bad_spec_is_one_line(driver, tmp_path):
    """The driver itself: a broken spec is one 'pario: error:' line, not a crash."""
    (tmp_path / "spec").write_text("case x op write bogus 1 end\n")
    r = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", "1", str(driver), str(tmp_path / "spec")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "pario: error: twophase_driver (rank 0): spec: unknown key" in r.stderr


@pytest.fixture(scope="module")
def fault_shim(tmp_path_factory, build_native):
    """tests/c/exchange_fault.c as a preloadable library (one failed receive exchange)."""
    if not (VENV_BIN / "mpicc").exists():
        pytest.skip("the MPICH wheel's mpicc is not installed (scripts/setup.sh test)")
    out = tmp_path_factory.mktemp("fault") / "libexchange_fault.so"
    cmd = [*build_native.mpicc(), "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
           str(C_DIR / "exchange_fault.c"), "-o", str(out), "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("inject", [False, True])
def test_a_failed_exchange_writes_no_byte_nobody_sent(driver, fault_shim, tmp_path, inject):
    """A collective write whose exchange fails on one aggregator (its receives left with bytes
    nobody sent, PMPI_Waitall answering MPI_ERR_OTHER: what a dead sender does under
    MPI_ERRORS_RETURN) fails on every rank with PARIO_TP_EMPI and leaves every byte of the
    file either its old value or the value a rank wrote there; never the receive buffer's
    leftovers (stress/serve_kill.py one-rank 16000183 found 127565 such bytes).  Control:
    the shim preloaded but not armed changes nothing."""
    P = 3
    rng = np.random.default_rng(16000183)
    exts = ior_strided(P, 100, 24)
    c = Case("fault", "write", exts, cb_buffer=300, cb_nodes=P, size=P * 100 * 24 + 50)
    before = rng.integers(0, 256, c.size, dtype=np.uint8)
    datas = [rng.integers(0, 256, int(e[:, 1].sum()), dtype=np.uint8) for e in exts]
    for r, d in enumerate(datas):
        d.tofile(tmp_path / f"data.{r}")
    path = tmp_path / "file"
    before.tofile(path)
    (tmp_path / "spec").write_text(spec_text(c, "pario", path, tmp_path / "data", "-") + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PX_FAULT")}
    env["LD_PRELOAD"] = str(fault_shim)
    if inject:
        env.update(PX_FAULT_RANK="1", PX_FAULT_WAIT="2")
    r = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", str(P), str(driver), str(tmp_path / "spec")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    res = [json.loads(s) for s in r.stdout.splitlines() if s.startswith("{")]
    got = np.fromfile(path, np.uint8)
    new = apply_writes(before, exts, datas)
    assert len(got) == len(new)
    if not inject:
        assert "injected" not in r.stderr
        assert res[0]["rc"] == [OK] * P
        assert np.array_equal(got, new), first_diff(got, new)
        return
    assert "exchange_fault: injected" in r.stderr
    assert res[0]["rc"] == [EMPI] * P
    neither = np.flatnonzero((got != before) & (got != new))
    assert len(neither) == 0, f"{len(neither)} bytes nobody wrote, first at {neither[0]}: {got[neither[0]]:#x}"
    assert np.any(got != new)   # the failed aggregator wrote none of its later cycles


@pytest.mark.parametrize("rank,wait", [(None, None), (0, 1), (1, 1), (1, 3), (2, 2)])
def test_a_failed_read_exchange_fails_on_every_rank(driver, fault_shim, tmp_path, rank, wait):
    """A collective read whose exchange fails on one rank (an aggregator's or a source's
    PMPI_Waitall answering MPI_ERR_OTHER, the receive buffers left with 0xEE: the
    acknowledgements of the replies, or a cycle's data) fails with PARIO_TP_EMPI on every
    rank and no rank waits forever (reads move data without an agreement before it: the
    sources acknowledge their plans, the final Allreduce gives the one code).  A second read
    in the same run, with the shim spent, returns every byte the file holds.  Control: the
    shim preloaded but not armed changes nothing."""
    P = 3
    rng = np.random.default_rng(16000184)
    exts = ior_strided(P, 100, 24)
    size = P * 100 * 24 + 50
    content = rng.integers(0, 256, size, dtype=np.uint8)
    path = tmp_path / "file"
    content.tofile(path)
    faulted = Case("fault", "read", exts, cb_buffer=300, cb_nodes=P, size=size)
    again = Case("again", "read", exts, order="hacio", cb_buffer=256, layout="h0s0h1s1", size=size)
    (tmp_path / "spec").write_text(spec_text(faulted, "pario", path, tmp_path / "faulted", "-") + "\n"
                                   + spec_text(again, "pario", path, tmp_path / "again", "-") + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PX_FAULT")}
    env["LD_PRELOAD"] = str(fault_shim)
    if rank is not None:
        env.update(PX_FAULT_RANK=str(rank), PX_FAULT_WAIT=str(wait))
    r = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", str(P), str(driver), str(tmp_path / "spec")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    res = [json.loads(s) for s in r.stdout.splitlines() if s.startswith("{")]
    assert [x["case"] for x in res] == ["fault-pario", "again-pario"]
    if rank is None:
        assert "injected" not in r.stderr
        assert res[0]["rc"] == [OK] * P
    else:
        assert "exchange_fault: injected" in r.stderr
        assert res[0]["rc"] == [EMPI] * P
    assert res[1]["rc"] == [OK] * P
    for q, e in enumerate(exts):
        got = np.fromfile(f"{tmp_path / 'again'}.{q}", np.uint8)
        want = gather_reads(content, e)
        assert np.array_equal(got, want), first_diff(got, want)
        if rank is None:
            got = np.fromfile(f"{tmp_path / 'faulted'}.{q}", np.uint8)
            assert np.array_equal(got, want), first_diff(got, want)


@pytest.mark.parametrize("order", ["romcio", "hacio"])
def test_a_domain_without_a_piece(driver, tmp_path, order):
    """An aggregator whose domain the range of a rank meets but no piece falls in (rank 0's
    range spans the middle domain, nobody has a byte there): the rank still sends it a
    request without a piece and gets a reply without a segment (the aggregators know whom
    to expect from the Allgather alone).  Write then read back, bytes against numpy."""
    P = 3
    exts = [_ext([(0, 10), (1000, 10)]), _ext([(100, 10)]), _ext([(50, 10)])]
    rng = np.random.default_rng(7)
    before = rng.integers(0, 256, 1100, dtype=np.uint8)
    datas = [rng.integers(0, 256, int(e[:, 1].sum()), dtype=np.uint8) for e in exts]
    for r, d in enumerate(datas):
        d.tofile(tmp_path / f"in.{r}")
    path = tmp_path / "file"
    before.tofile(path)
    w = Case("w", "write", exts, order=order, cb_buffer=8, cb_nodes=P, layout="h0s0h1s1", size=1100)
    rd = Case("r", "read", exts, order=order, cb_buffer=8, cb_nodes=P, layout="h0s0h1s1", size=1100)
    (tmp_path / "spec").write_text(spec_text(w, "pario", path, tmp_path / "in", str(tmp_path / "log")) + "\n"
                                   + spec_text(rd, "pario", path, tmp_path / "out", "-") + "\n")
    res = mpiexec(driver, P, str(tmp_path / "spec"))
    assert [x["rc"] for x in res] == [[OK] * P, [OK] * P]
    assert res[0]["aggs"] == [0, 1, 2]
    new = apply_writes(before, exts, datas)
    got = np.fromfile(path, np.uint8)
    assert np.array_equal(got, new), first_diff(got, new)
    for r, e in enumerate(exts):
        got = np.fromfile(tmp_path / f"out.{r}", np.uint8)
        assert np.array_equal(got, gather_reads(new, e)), r
    log = read_log(str(tmp_path / "log"), P)
    assert 1 not in log   # the middle aggregator had nothing to write
    assert log == oracle_schedule(w, P)
