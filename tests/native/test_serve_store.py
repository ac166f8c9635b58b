"""pario's store data path in C (src/pario/native/store, docs/serve.md) against the Python store.

tests/c/serve_driver.c links the serve sources and the RMT core (no MPI) and is driven by
command lines.  Every answer is checked against an independent one:

* layouts: the C mapping of random requests equals the numpy mapping of tests/oracles/layout.py row for row
  (every layout kind: fixed and varied ⟨h, s⟩ striping, 2-D groups, PSA regions, CEDA extent
  maps with and without a default), the C pieces place every byte where
  ``pario.store.pieces.pieces`` does, the byte-count functions equal ``Layout.counts``;
* data: C writes → Python (``pario.store.Store``) reads and Python writes → C reads, byte for
  byte against a numpy reference, sizes equal, ``fsck`` clean, for several profiles and every
  layout kind, exclusive and shared stores;
* CEDA replicas made by ``pario replicate`` from a CEDA plan of a random trace: the bytes the
  C reads take from replicas equal what the Python redirector's ``served_by`` routes there; C
  writes mark DIRTY entries (checked by replaying the journal with the independent Python
  reader ``pario.store.rmt_journal``), a C close flushes them, fsck clean, bytes equal;
* hybrid full replicas (route ``cheapest``): the C cost equals ``profile_cost`` exactly, C
  reads go where Python's routing sends them;
* bad input: one-line errors, no crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import C_DIR

from oracles.layout import map_requests

from pario.layout import ExtentMap, Striped, layout_to_dict, parse_layout
from pario.store import Store, init_store
from pario.store import rmt_journal as J
from pario.store.fsck import fsck
from oracles.store import pieces, profile_cost
from pario.store.replicator import Replicator, ReplicaSpec
from pario.system import load_system

DRIVER_SRC = C_DIR / "serve_driver.c"
KiB, MiB = 1 << 10, 1 << 20


@pytest.fixture(scope="module")
def driver(tmp_path_factory, build_native):
    bn = build_native
    exe = tmp_path_factory.mktemp("serve") / "serve_driver"
    cmd = bn.serve_driver_command(DRIVER_SRC, exe)
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, " ".join(cmd) + "\n" + r.stderr
    return exe


class Driver:
    """The C driver as a process: one command, one JSON answer."""

    def __init__(self, exe: Path, env=None):
        self.p = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)

    def __call__(self, *args, ok: bool = True) -> dict:
        self.p.stdin.write(" ".join(map(str, args)) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, f"driver died on {args}: {self.p.stderr.read()[-2000:]}"
        ans = json.loads(line)
        if ok:
            assert ans["ok"], (args, ans)
        return ans

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)
        err = self.p.stderr.read()
        self.p.stderr.close()
        self.p.stdout.close()
        assert self.p.returncode == 0, err
        assert err == "", err


def run_lines(exe: Path, lines: list[str], env=None) -> list[dict]:
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(s) for s in r.stdout.splitlines() if s.strip()]


# ---------------------------------------------------------------------- layouts
def layouts():
    """(system, Layout) of every kind, including odd stripes a user could not write (meta.db may)."""
    hdd8, h4s4 = load_system("ceda-hdd8"), load_system("psa-4h4s")
    out = [
        (hdd8, parse_layout("fixed:64k", hdd8)),
        (hdd8, parse_layout("fixed:4k@H1,H3,H6", hdd8)),
        (h4s4, parse_layout("var:hdd=28K,ssd=100K", h4s4)),                       # PADP ⟨h, s⟩
        (h4s4, parse_layout("var:hdd=0,ssd=64K", h4s4)),                          # PADP h = 0
        (hdd8, Striped((5, 0, 3, 7), (1000, 3, 0, 77_777))),
        (hdd8, parse_layout("2d:2:64k", hdd8)),
        (hdd8, parse_layout("2d:4:16k", hdd8)),
        (h4s4, parse_layout({"type": "grouped", "groups": [["H0"], ["H1", "H2", "S3"], ["S0", "S1"]], "stripe": 5000},
                            h4s4)),
        (h4s4, parse_layout({"type": "regions", "regions": [
            {"start": 0, "end": "1m", "layout": {"type": "fixed", "stripe": "64k"}},
            {"start": "1m", "end": 3_000_000, "layout": {"type": "striped", "servers": ["H0", "H1", "S0", "S1"],
                                                          "stripes": [28_000, 28_000, 100_000, 100_000]}},
            {"start": 3_000_000, "end": None, "layout": {"type": "grouped", "groups": [["S0", "S2"], ["H3"]],
                                                         "stripe": 4096}}]}, h4s4)),   # PSA regions
    ]
    rng = np.random.default_rng(11)
    k = 40
    off = np.sort(rng.choice(np.arange(0, 6 * MiB, 8 * KiB), k, replace=False))
    ln = rng.integers(1, 8 * KiB + 1, k)
    srv = rng.integers(0, 8, k)
    loc = np.cumsum(np.concatenate(([0], ln[:-1])))
    df = rng.integers(1, 4, k)
    out.append((hdd8, ExtentMap(off, ln, srv, loc, df, parse_layout("fixed:64k", hdd8))))      # CEDA over default
    out.append((hdd8, ExtentMap(off[::-1].copy(), ln[::-1].copy(), srv[::-1].copy(), loc[::-1].copy(),
                                df[::-1].copy(), None)))                                     # no default
    return out


def _requests(rng, n, hi):
    x = rng.integers(0, hi, n)
    L = np.where(rng.random(n) < 0.3, rng.integers(0, 300, n), rng.integers(1, 700_000, n))
    return x.astype(np.int64), L.astype(np.int64)


def _normal(rows):
    """Pieces (server, datafile, local, len, logical) with neighbours that continue each other merged."""
    out = []
    for s, d, lo, n, x in sorted(rows, key=lambda r: r[4]):
        if out and out[-1][0] == s and out[-1][1] == d and out[-1][2] + out[-1][3] == lo and out[-1][4] + out[-1][3] == x:
            out[-1][3] += n
        else:
            out.append([s, d, lo, n, x])
    return out


@pytest.mark.parametrize("case", range(11))
def test_layout_mapping_equals_map_requests(driver, tmp_path, case):
    system, lay = layouts()[case]
    p = tmp_path / "layout.json"
    p.write_text(json.dumps(layout_to_dict(lay, system)))
    rng = np.random.default_rng(case)
    if isinstance(lay, ExtentMap) and lay.default is None:       # requests inside the extents only
        i = rng.integers(0, len(lay), 60)
        a = rng.integers(0, lay.length[i])
        x = lay.offset[i] + a
        L = rng.integers(0, lay.length[i] - a + 1)
        # and some spanning two adjacent extents that touch
        x, L = x.astype(np.int64), L.astype(np.int64)
    else:
        x, L = _requests(rng, 120, 8 * MiB)
    lines = [f"names {','.join(system.names)}"]
    for a in range(0, len(x), 40):
        args = " ".join(f"{int(o)} {int(n)}" for o, n in zip(x[a:a + 40], L[a:a + 40]))
        lines.append(f"map {p} {len(x[a:a + 40])} {args}")
        lines.append(f"pieces {p} {len(x[a:a + 40])} {args}")
    ans = run_lines(driver, lines)
    assert ans[0]["n"] == system.n
    for a, (m, pc) in zip(range(0, len(x), 40), zip(ans[1::2], ans[2::2])):
        assert m["ok"] and pc["ok"], (m, pc)
        xs, Ls = x[a:a + 40], L[a:a + 40]
        sub = map_requests(lay, xs, Ls)
        want = np.stack([sub.req, sub.server, sub.local, sub.length, sub.datafile], axis=1).tolist() if len(sub) else []
        assert m["subs"] == want
        ref = []
        for o, n in zip(xs.tolist(), Ls.tolist()):
            if n:
                s, d, lo, ln_, bo = pieces(lay, [o], [n], [o])
                ref += list(zip(s.tolist(), d.tolist(), lo.tolist(), ln_.tolist(), bo.tolist()))
        got = [tuple(r) for r in pc["pieces"]]
        assert _normal(got) == _normal(ref)
    if not isinstance(lay, ExtentMap):
        for v in (0, 1, 4095, 65_536, 999_999, 3_000_001, 123_456_789_012):
            c = run_lines(driver, [f"names {','.join(system.names)}", f"counts {p} {v}"])[1]
            servers, cnt = lay.counts(np.array([v]))
            assert c["servers"] == servers.tolist() and c["counts"] == cnt[:, 0].tolist()


def _bound_layouts(v: int) -> list[dict]:
    """Layouts (JSON) whose largest offset is exactly ``v``: a striped round, a 2-D round, a
    region bound, an extent's end (original and server-local)."""
    n = 8
    srv = [f"H{i}" for i in range(n)]
    return [{"type": "striped", "servers": srv, "stripes": [v - 7 * 4096] + [4096] * 7},
            {"type": "grouped", "groups": [srv[:4], srv[4:]], "stripe": v // 8} if v % 8 == 0 else
            {"type": "grouped", "groups": [srv], "stripe": 1},
            {"type": "regions", "regions": [{"start": 0, "end": v, "layout": {"type": "striped", "servers": srv,
                                                                             "stripes": [65536] * 8}},
                                            {"start": v, "end": None, "layout": {"type": "striped", "servers": srv,
                                                                                "stripes": [4096] * 8}}]},
            {"type": "extents", "extents": [[v - 4096, 4096, "H1", 0, 1], [0, 4096, "H2", v - 4096, 1]],
             "default": None}]


def test_layouts_beyond_the_store_limit_are_refused_by_c_and_python_alike(driver, tmp_path):
    """Issue 24: one bound for every consumer of a layout: 2^52 bytes (a round, a region
    bound, an extent's end) is accepted by the Python layouts and the C runtime, one byte more
    refused by both (a 2^62 stripe used to be stored, then unreadable)."""
    from pario import ParioError
    from pario.layout import LAYOUT_MAX, layout_from_dict
    from pario.system import load_system

    system = load_system("ceda-hdd8")
    lines, want = [f"names {','.join(system.names)}"], []
    for v in (LAYOUT_MAX, LAYOUT_MAX + 8, 1 << 62):
        for k, d in enumerate(_bound_layouts(v)):
            p = tmp_path / f"l{v}-{k}.json"
            p.write_text(json.dumps(d))
            lines.append(f"map {p} 1 0 1")
            try:
                layout_from_dict(d, system)
                ok = True
            except ParioError as exc:
                ok = False
                assert "2^52" in str(exc) and "\n" not in str(exc)
            want.append(ok)
            if k != 1 or v % 8 == 0:
                assert ok == (v <= LAYOUT_MAX), (v, k)
    got = [a["ok"] for a in run_lines(driver, lines)[1:]]
    assert got == want


# ---------------------------------------------------------------------- data, both ways
SPECS = [
    ("ceda-hdd8", "fixed:64k"),
    ("ceda-hdd8", "fixed:4k@H1,H3,H6"),
    ("psa-4h4s", "var:hdd=28K,ssd=100K"),
    ("padp-6h2s", "var:hdd=0,ssd=64K"),
    ("ci-layout-eth", "2d:2:64k"),
    ("psa-4h4s", "regions"),
    ("ceda-hdd8", "extents"),
]


def _spec_layout(system, spec):
    if spec == "regions":
        return layouts()[8][1]
    if spec == "extents":
        return layouts()[9][1]
    return parse_layout(spec, system)


def _blob(tmp_path, seed, n):
    data = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
    p = tmp_path / f"blob{seed}.bin"
    data.tofile(p)
    return data, p


def _rand_extents(rng, k, hi, maxlen):
    x = rng.integers(0, hi, k)
    n = rng.integers(1, maxlen, k)
    return x.tolist(), n.tolist()


@pytest.mark.parametrize("sysname,spec", SPECS)
@pytest.mark.parametrize("shared", [False, True])
def test_c_and_python_write_read_each_other(driver, tmp_path, sysname, spec, shared):
    root = tmp_path / "st"
    init_store(root, sysname)
    system = load_system(sysname)
    with Store(root) as st:
        st.create("f", _spec_layout(system, spec))
    blob, bp = _blob(tmp_path, 1, 4 * MiB)
    rng = np.random.default_rng(hash((sysname, spec, shared)) & 0xFFFF)
    ref = np.zeros(0, np.uint8)

    def put(x, n, src):
        nonlocal ref
        if x + n > len(ref):
            ref = np.concatenate([ref, np.zeros(x + n - len(ref), np.uint8)])
        ref[x:x + n] = src

    # C writes: single extents and one vectored write, some extending, some inside
    d = Driver(driver)
    d("open", root, *(["shared"] if shared else []))
    h = d("fopen", "f")["h"]
    pos = 0
    xs, ns = _rand_extents(rng, 25, 3 * MiB, 200_000)
    for x, n in zip(xs, ns):
        d("write", h, x, n, bp, pos)
        put(x, n, blob[pos:pos + n])
        pos += n
    vx = [5 * MiB + 7, 100, 4 * MiB - 3]          # non-overlapping ranges of one writev
    vn = [70_001, 9_000, 64 * KiB]
    d("writev", h, bp, pos, 3, *[v for pair in zip(vx, vn) for v in pair])
    for x, n in zip(vx, vn):
        put(x, n, blob[pos:pos + n])
        pos += n
    assert d("size", h)["size"] == len(ref)
    d("fclose", h)
    d("close_store")
    d.close()

    with Store(root) as st:
        assert st.stat("f").size == len(ref)
        with st.open("f") as f:
            assert f.read(0, len(ref)) == ref.tobytes()
            # Python writes
            xs, ns = _rand_extents(rng, 20, 6 * MiB, 150_000)
            for x, n in zip(xs, ns):
                f.write(x, blob[pos:pos + n].tobytes())
                put(x, n, blob[pos:pos + n])
                pos = (pos + n) % (2 * MiB)
        rep = fsck(st)
        assert rep["ok"], rep

    # C reads it all back: in pieces, past the end, and vectored
    out = tmp_path / "out.bin"
    d = Driver(driver)
    d("open", root, *(["shared"] if shared else []))
    h = d("fopen", "f")["h"]
    assert d("size", h)["size"] == len(ref)
    chunk = 700_001
    for x in range(0, len(ref) + chunk, chunk):
        got = d("read", h, x, chunk, out, x)["got"]
        assert got == max(0, min(chunk, len(ref) - x))
    back = np.fromfile(out, np.uint8)
    assert np.array_equal(back[:len(ref)], ref) and not back[len(ref):].any()
    rx, rn = _rand_extents(rng, 30, len(ref) + 1000, 90_000)
    d("readv", h, out, 0, len(rx), *[v for pair in zip(rx, rn) for v in pair])
    back = np.fromfile(out, np.uint8)
    p = 0
    for x, n in zip(rx, rn):
        want = np.zeros(n, np.uint8)
        inside = max(0, min(n, len(ref) - x))
        want[:inside] = ref[x:x + inside]
        assert np.array_equal(back[p:p + n], want), (x, n)
        p += n
    # truncate from C: shrink and grow, then Python sees the same (an extent-map file only
    # shrinks here: as in local.py its truncate sets the size and leaves the data files)
    d("trunc", h, len(ref) - 12_345)
    ref = ref[:len(ref) - 12_345]
    if spec != "extents":
        d("trunc", h, len(ref) + 5000)
        ref = np.concatenate([ref, np.zeros(5000, np.uint8)])
    d("fclose", h)
    d("close_store")
    d.close()
    with Store(root) as st:
        assert st.stat("f").size == len(ref)
        with st.open("f") as f:
            assert f.read(0, len(ref) + 10) == ref.tobytes()
        rep = fsck(st)
        assert rep["ok"], rep


def test_crash_before_close_recovers_the_size(driver, tmp_path):
    """C extends a file and dies without closing: `dirty` was committed before the first
    byte past the size, so the next opener (C or Python) recovers the size from the data files."""
    root = tmp_path / "st"
    init_store(root, "psa-4h4s")
    with Store(root) as st:
        st.create("f", "var:hdd=28K,ssd=100K")
    blob, bp = _blob(tmp_path, 2, MiB)
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    d("write", h, 300_000, 500_000, bp, 0)
    d.p.kill()
    d.p.wait()
    d.p.stdin.close(), d.p.stdout.close(), d.p.stderr.close()
    ref = np.zeros(800_000, np.uint8)
    ref[300_000:] = blob[:500_000]
    with Store(root) as st:
        assert st.stat("f").size == 800_000
        with st.open("f") as f:
            assert f.read(0, 900_000) == ref.tobytes()
        assert fsck(st)["ok"]


# ---------------------------------------------------------------------- CEDA replicas
def _one_file_store(tmp_path, seed, n, system="ceda-hdd8", layout="fixed:64k"):
    """A store of ``system`` at tmp_path/st with file f (``layout``) of n seeded bytes."""
    root = tmp_path / "st"
    init_store(root, system)
    init, _ = _blob(tmp_path, seed, n)
    with Store(root) as st:
        st.create("f", layout)
        with st.open("f") as f:
            f.write(0, init.tobytes())
    return root, init


def _ceda_store(tmp_path, driver_size=4 * MiB):
    from pario.plan.ceda import CEDAPlanner
    from pario.workload import ior

    system = load_system("ceda-hdd8")
    root, init = _one_file_store(tmp_path, 5, driver_size)
    # a random-access trace over the first half of the file: CEDA replicates it (seed 000 §4)
    trace = ior(8, 16 * KiB, 8 * 16 * KiB, 2, pattern="random", op="read", seed=3, file="f")
    plan = CEDAPlanner(original="fixed:64K").plan(trace, system)
    assert list(plan.replicas) == ["f"]
    pp = tmp_path / "plan.json"
    plan.save(pp, system)
    from pario.cli import main

    assert main(["replicate", str(pp), "--store", str(root), "--json"]) == 0
    return root, init.copy()


def test_ceda_reads_served_by_replicas_writes_dirty_close_flushes(driver, tmp_path, capsys):
    root, ref = _ceda_store(tmp_path)
    capsys.readouterr()
    rng = np.random.default_rng(9)
    reads = [(int(x), int(n)) for x, n in zip(rng.integers(0, 4 * MiB, 60), rng.integers(1, 100_000, 60))]
    reads += [(k * 16 * KiB, 16 * KiB) for k in rng.integers(0, 64, 20).tolist()]     # CEDA's request-shaped extents
    # where the Python redirector sends each read (independent: pario.store.redirect)
    with Store(root) as st:
        with st.open("f") as f:
            want_rep = sum(t - s for x, n in reads for s, t, r in f.served_by(x, min(x + n, len(ref))) if r)
        rfiles = [r["r_file"] for r in st.rmt.replicas("f")]
        fid, rid = st.rmt.fid("f"), st.rmt.fid(rfiles[0])
    assert want_rep > 0
    out = tmp_path / "out.bin"
    d = Driver(driver)
    d("open", root, "shared")
    h = d("fopen", "f")["h"]
    for x, n in reads:
        d("read", h, x, n, out, 0)
        got = np.fromfile(out, np.uint8)[:n]
        inside = max(0, min(n, len(ref) - x))
        assert np.array_equal(got[:inside], ref[x:x + inside])
    s = d("stats", h)
    assert s["replicas"] == 1 and s["read_replica"] == want_rep and s["redirected_reads"] > 0
    assert s["read_replica"] + s["read_original"] == sum(max(0, min(n, len(ref) - x)) for x, n in reads)
    # writes into replicated ranges go to the replica, DIRTY (the independent journal replay says so)
    blob, bp = _blob(tmp_path, 6, MiB)
    writes = [(int(k) * 16 * KiB + 100, 5000) for k in rng.choice(64, 12, replace=False)]
    writes += [(3 * MiB + 11, 70_000), (4 * MiB - 10, 30_000)]        # not replicated, one extending
    pos = 0
    for x, n in writes:
        d("write", h, x, n, bp, pos)
        if x + n > len(ref):
            ref = np.concatenate([ref, np.zeros(x + n - len(ref), np.uint8)])
        ref[x:x + n] = blob[pos:pos + n]
        pos += n
    s = d("stats", h)
    assert s["written_replica"] > 0 and s["redirected_writes"] > 0
    model, _ = J.replay(root / "rmt.log")
    ents = model.entries(fid)
    dirty = sum(n for r, off, n, ro, fl in ents if fl == J.DIRTY and r == rid)
    assert dirty == s["written_replica"]
    # the original still holds the old bytes of a dirty range; reads see the new ones
    x0, n0 = writes[0]
    d("read", h, x0, n0, out, 0)
    assert np.array_equal(np.fromfile(out, np.uint8)[:n0], ref[x0:x0 + n0])
    d("fclose", h)                         # close flushes: DIRTY -> original, CLEAN
    model, _ = J.replay(root / "rmt.log")
    assert not [e for e in model.entries(fid) if e[4] != J.CLEAN]
    d("close_store")
    d.close()
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"] and rep["unclean"] == 0, rep
        with st.open("f") as f:
            assert f.size == len(ref) and f.read(0, len(ref)) == ref.tobytes()
        # the original's own data files hold every byte (read without the replicas)
        oh = st.backend.open("f")
        assert st.backend.read_at(oh, 0, len(ref)) == ref.tobytes()
        st.backend.close(oh)


def test_c_rewrite_after_truncation_goes_to_the_replica(driver, tmp_path, capsys):
    """The C store as IOR's write phase uses it: truncate to 0, then the file written again
    from the start.  The bytes inside the replica's extents (its layout in the store, read by
    Python) go to the replica, DIRTY (the independent journal replay says so); close flushes;
    a new reader is redirected again, as the Python redirector routes it."""
    root, ref = _ceda_store(tmp_path)
    capsys.readouterr()
    with Store(root) as st:
        rname = st.rmt.replicas("f")[0]["r_file"]
        lay = st.backend.open(rname).layout
        fid, rid = st.rmt.fid("f"), st.rmt.fid(rname)
    size = len(ref)
    slots = [(int(o), min(int(o + n), size)) for o, n in zip(lay.offset, lay.length) if o < size]
    blob, bp = _blob(tmp_path, 8, size)
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    d("trunc", h, 0)
    for x in range(0, size, 256 * KiB):                        # IOR -t 256k: every write extends
        d("write", h, x, 256 * KiB, bp, x)
    s = d("stats", h)
    assert s["written_replica"] == sum(b - a for a, b in slots)
    model, _ = J.replay(root / "rmt.log")
    dirty = sorted((off, off + n) for r, off, n, ro, fl in model.entries(fid) if fl == J.DIRTY and r == rid)
    merged = []
    for a, b in dirty:
        if merged and a == merged[-1][1]:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    want = []
    for a, b in slots:                                         # adjacent extents are one range
        if want and a == want[-1][1]:
            want[-1] = (want[-1][0], b)
        else:
            want.append((a, b))
    assert merged == want
    d("fclose", h)                                             # close flushes: DIRTY -> original
    d("close_store")
    d.close()
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"] and rep["unclean"] == 0, rep
        oh = st.backend.open("f")
        assert st.backend.read_at(oh, 0, size) == blob[:size].tobytes()
        st.backend.close(oh)
        with st.open("f") as f:
            routed = sum(t - s_ for s_, t, r in f.served_by(0, size) if r)
    assert routed == sum(b - a for a, b in slots)


def test_c_write_after_a_relayout_by_another_process_is_refused(driver, tmp_path):
    """As the Python redirector (File.revalidate): a C process keeps the file open while a
    Python process relays it out (shared store); the C write through the old copy is refused
    with one line (it would be lost), the bytes written before are in the new layout, reads
    go on."""
    root, data = _one_file_store(tmp_path, 12, MiB)
    new, np_ = _blob(tmp_path, 13, 4096)
    d = Driver(driver)
    d("open", root, "shared")
    h = d("fopen", "f")["h"]
    d("write", h, 8192, 4096, np_, 0)                        # before: goes in
    with Store(root, shared=True) as st:
        st.relayout("f", "var:hdd=28K,ssd=100K", chunk=256 << 10)
    ans = d("write", h, 65536, 4096, np_, 0, ok=False)      # after: refused, one line
    assert not ans["ok"] and "relaid out by another process" in ans["error"] and "\n" not in ans["error"]
    d("fclose", h)
    d("close_store")
    d.close()
    want = data.copy()
    want[8192:8192 + 4096] = new
    with Store(root) as st:
        with st.open("f") as f:
            assert f.read(0, MiB) == want.tobytes()
        assert fsck(st)["ok"]


def test_python_dirty_replica_read_by_c(driver, tmp_path, capsys):
    """Python writes into a replica (DIRTY) and dies without flushing: C reads the newest bytes
    from the replica; a C store open recovers (flushes) it."""
    root, ref = _ceda_store(tmp_path)
    capsys.readouterr()
    st = Store(root)
    f = st.open("f")
    data = np.full(20_000, 0xAB, np.uint8)
    f.write(16 * KiB * 5 + 10, data.tobytes())
    ref[16 * KiB * 5 + 10:16 * KiB * 5 + 10 + 20_000] = data
    assert st.rmt.files_with_unclean() == ["f"]
    import os

    st.engine.abandon()            # "crash": no flush, the lock gone
    out = tmp_path / "out.bin"
    d = Driver(driver)
    d("open", root)                 # first opener: recovers (flushes) the dirty range
    h = d("fopen", "f")["h"]
    d("read", h, 0, len(ref), out, 0)
    assert np.array_equal(np.fromfile(out, np.uint8), ref)
    d("close_store")
    d.close()
    model, _ = J.replay(root / "rmt.log")
    assert all(e[4] == J.CLEAN for o in model.originals() for e in model.entries(o))
    with Store(root) as st2:
        assert fsck(st2)["ok"]
        oh = st2.backend.open("f")
        assert st2.backend.read_at(oh, 0, len(ref)) == ref.tobytes()
        st2.backend.close(oh)


# ---------------------------------------------------------------------- hybrid routing
def test_hybrid_cost_and_cheapest_routing(driver, tmp_path):
    system = load_system("psa-4h4s")
    root, init = _one_file_store(tmp_path, 7, 3 * MiB, "psa-4h4s", "fixed:16k")
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "dv", parse_layout("var:hdd=0,ssd=1m", system), "cheapest"),
                        ReplicaSpec("f", "dh", parse_layout("fixed:256k", system), "cheapest")], chunk=MiB).run()
    ref = init.copy()
    rng = np.random.default_rng(4)
    reads = [(int(x), int(n)) for x, n in zip(rng.integers(0, 3 * MiB, 40), rng.integers(1, 2 * MiB, 40))]
    cost = profile_cost(system, op=0)
    with Store(root) as st:
        with st.open("f") as f:
            want_rep = sum(t - s for x, n in reads for s, t, r in f.served_by(x, min(x + n, len(ref))) if r)
        lays = {"f": st.stat("f").layout}
        for r in st.rmt.replicas("f"):
            lays[r["r_file"]] = st.stat(r["r_file"]).layout
    d = Driver(driver, env={**os.environ, "PARIO_LAZY_SYNC": "0"})   # the steps by hand here
    d("open", root)
    h = d("fopen", "f")["h"]
    s = d("stats", h)
    assert s["cheapest"] == 1 and s["full"] == 2 and s["replicas"] == 2
    for x, n in reads[:10]:                        # the C cost is profile_cost, to the last bit
        assert d("cost", h, x, n)["cost"] == cost(lays["f"], x, n)
    out = tmp_path / "out.bin"
    for x, n in reads:
        d("read", h, x, n, out, 0)
        inside = max(0, min(n, len(ref) - x))
        assert np.array_equal(np.fromfile(out, np.uint8)[:inside], ref[x:x + inside])
    s = d("stats", h)
    assert s["read_replica"] == want_rep > 0 and s["choices"] > 0
    # writes go to the cheapest copy, the others STALE; an extending write grows the full replicas
    blob, bp = _blob(tmp_path, 8, MiB)
    for k, (x, n) in enumerate([(100_000, 600_000), (2 * MiB + 5, 900_000), (10, 3000)]):
        d("write", h, x, n, bp, k * 1000)
        if x + n > len(ref):
            ref = np.concatenate([ref, np.zeros(x + n - len(ref), np.uint8)])
        ref[x:x + n] = blob[k * 1000:k * 1000 + n]
    more = d("sync_step", h, 64 * KiB)["more"]
    assert more == 1
    d("read", h, 0, len(ref), out, 0)
    assert np.array_equal(np.fromfile(out, np.uint8)[:len(ref)], ref)
    _close_full_replicas_hold(d, h, root, ref)


def _close_full_replicas_hold(d, h, root, ref) -> None:
    """Close the C file and store, then: fsck clean with nothing unclean, f and every (full)
    replica of it hold ``ref``."""
    d("fclose", h)
    d("close_store")
    d.close()
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"] and rep["unclean"] == 0, rep
        with st.open("f") as f:
            assert f.size == len(ref) and f.read(0, len(ref)) == ref.tobytes()
        for r in st.rmt.replicas("f"):              # every full replica holds the newest bytes
            with st.open(r["r_file"]) as g:
                assert g.read(0, len(ref)) == ref.tobytes()


def test_hybrid_replicas_are_synchronised_in_the_background(driver, tmp_path):
    """CI-LAYOUT's lazy synchronisation in the C store (lazysync.c): writes to a file with
    "cheapest" routing leave the other full replica STALE; with the file still open and no
    call of the program, a background thread brings it up to date (the independent journal
    replay shows no unclean entry; the stats count the bytes it copied), and the replica then
    holds the newest bytes."""
    system = load_system("psa-4h4s")
    root, init = _one_file_store(tmp_path, 17, 2 * MiB, "psa-4h4s", "fixed:16k")
    with Store(root) as st:
        Replicator(st, [ReplicaSpec("f", "dv", parse_layout("var:hdd=0,ssd=1m", system), "cheapest")],
                   chunk=MiB).run()
        fid = st.rmt.fid("f")
    ref = init.copy()
    blob, bp = _blob(tmp_path, 18, MiB)
    d = Driver(driver)
    d("open", root)
    h = d("fopen", "f")["h"]
    for k, (x, n) in enumerate([(100_000, 600_000), (1_500_000, 400_000)]):
        d("write", h, x, n, bp, k * 1000)
        ref[x:x + n] = blob[k * 1000:k * 1000 + n]
    deadline = time.monotonic() + 60
    while True:          # liveness, not timing: wait (up to a minute) for the thread's work
        model, _ = J.replay(root / "rmt.log")
        if not [e for e in model.entries(fid) if e[4] != J.CLEAN] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not [e for e in model.entries(fid) if e[4] != J.CLEAN]
    assert d("stats", h)["synced"] > 0
    _close_full_replicas_hold(d, h, root, ref)


# ---------------------------------------------------------------------- bad input
def test_bad_input_one_line_errors(driver, tmp_path):
    root = tmp_path / "st"
    init_store(root, "ceda-hdd8")
    with Store(root) as st:
        st.create("f", "fixed:64k")
    ans = run_lines(driver, [f"open {tmp_path / 'nope'}"])
    assert not ans[0]["ok"] and "is not a pario store" in ans[0]["error"]
    ans = run_lines(driver, [f"open {root}", "fopen missing", "fopen f", "read 9 0 10 x 0", "write 0 -5 10 /dev/zero 0",
                             "trunc 0 -1", "bogus 1"])
    assert ans[0]["ok"] and "no file 'missing' in the store" in ans[1]["error"] and ans[2]["ok"]
    assert [a["ok"] for a in ans[3:]] == [False] * 4
    assert "offset must be >= 0" in ans[4]["error"] and "size must be >= 0" in ans[5]["error"]
    # exclusive store in use
    d = Driver(driver)
    d("open", root)
    a = run_lines(driver, [f"open {root}"])[0]
    assert not a["ok"] and "in use by another process" in a["error"]
    d("close_store")
    d.close()
    # a damaged store.json, a bad layout in meta.db, a damaged meta.db
    cfg = (root / "store.json").read_text()
    (root / "store.json").write_text(cfg[: len(cfg) // 2])
    a = run_lines(driver, [f"open {root}"])[0]
    assert not a["ok"] and "unreadable store configuration" in a["error"]
    (root / "store.json").write_text(cfg)
    import sqlite3

    con = sqlite3.connect(root / "meta.db")
    con.execute("INSERT INTO files(name, layout) VALUES ('bad', '{\"type\": \"striped\", \"stripes\": [1]}')")
    con.execute("INSERT INTO files(name, layout) VALUES ('bad2', '{\"type\": \"fixed\", \"stripe\": 4096, \"servers\": [\"X9\"]}')")
    con.commit()
    con.close()
    ans = run_lines(driver, [f"open {root}", "fopen bad", "fopen bad2", "fopen f"])
    assert "needs one stripe size per server" in ans[1]["error"] and "unknown server 'X9'" in ans[2]["error"]
    assert ans[3]["ok"]
    (root / "meta.db-wal").unlink(missing_ok=True)
    raw = bytearray((root / "meta.db").read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)
    (root / "meta.db").write_bytes(bytes(raw))
    a = run_lines(driver, [f"open {root}"])[0]
    assert not a["ok"] and "meta.db" in a["error"] and "\n" not in a["error"]
    # a missing server directory
    root2 = tmp_path / "st2"
    init_store(root2, "ceda-hdd8")
    (root2 / "servers" / "H3").rmdir()
    a = run_lines(driver, [f"open {root2}"])[0]
    assert not a["ok"] and "server H3 directory" in a["error"]


def test_json_reader_strict_and_never_crashes(driver, tmp_path):
    rng = np.random.default_rng(2)
    good = [{"a": [1, -2.5e-3, "x\u00e9\u4e2d\U0001F600", None, True, False, {"b": []}], "c": 9223372036854775807},
            [], {}, "s", 0, -0.0, 1e300, [[[[[]]]]]]
    bad = ['{"a": 1,}', "[1 2]", "{'a': 1}", '"\\x"', '"\\ud800"', "NaN", "01", "1.", "[", '{"a"}', "tru", '"a\nb"',
           "[1]x", "", " ", "-", '"\\u12"', "[" * 500 + "]" * 500]
    files = []
    for k, v in enumerate(good):
        p = tmp_path / f"g{k}.json"
        p.write_text(json.dumps(v, ensure_ascii=k % 2 == 0))
        files.append((p, True))
    for k, s in enumerate(bad):
        p = tmp_path / f"b{k}.json"
        p.write_text(s)
        files.append((p, False))
    text = json.dumps({"type": "extents", "extents": [[0, 10, "H0", 0, 1]] * 3, "default": {"type": "fixed"}})
    for k in range(200):                         # truncated and corrupted documents: an answer, no crash
        t = bytearray(text.encode())
        if k % 2:
            t = t[: rng.integers(0, len(t))]
        else:
            for _ in range(3):
                t[rng.integers(0, len(t))] = rng.integers(0, 256)
        p = tmp_path / f"f{k}.json"
        p.write_bytes(bytes(t))
        files.append((p, None))
    ans = run_lines(driver, [f"json {p}" for p, _ in files])
    assert len(ans) == len(files)
    for (p, want), a in zip(files, ans):
        if want is not None:
            assert a["ok"] == want, (p.read_text()[:80], a)
        if not a["ok"]:
            assert "at byte" in a["error"] or "unreadable" in a["error"]
    # layouts from the fuzzed text: parse errors are one line too
    lines = ["names H0,H1"] + [f"map {p} 1 0 100" for p, _ in files[len(good) + len(bad):]]
    for a in run_lines(driver, lines)[1:]:
        assert a["ok"] or ("\n" not in a["error"] and a["error"])


# ---------------------------------------------------------------------- several processes
def test_shared_store_c_ranks_and_python_at_once(driver, tmp_path, capsys):
    """Two C processes and a Python process use one shared store at once (as MPI ranks do):
    disjoint writes, some into a CEDA replica, some extending the file; each reader sees the
    others' acknowledged writes (journal followed, size from metadata and data files); the
    last process out flushes and commits the final size (MAX of everybody's)."""
    root, ref = _ceda_store(tmp_path)
    capsys.readouterr()
    blob, bp = _blob(tmp_path, 12, 2 * MiB)
    a, b = Driver(driver), Driver(driver)
    a("open", root, "shared")
    b("open", root, "shared")
    st = Store(root, shared=True, lock_timeout=30)
    ha, hb = a("fopen", "f")["h"], b("fopen", "f")["h"]
    f = st.open("f")

    def put(x, n, src):
        nonlocal ref
        if x + n > len(ref):
            ref = np.concatenate([ref, np.zeros(x + n - len(ref), np.uint8)])
        ref[x:x + n] = src

    pos = 0
    for k in range(6):           # a: replicated ranges of the first MiB; b: past the end
        x, n = k * 16 * KiB * 3 + 77, 9000
        a("write", ha, x, n, bp, pos)
        put(x, n, blob[pos:pos + n])
        pos += n
        x, n = 4 * MiB + k * 100_000, 60_000
        b("write", hb, x, n, bp, pos)
        put(x, n, blob[pos:pos + n])
        pos += n
    f.write(2 * MiB + 3, blob[pos:pos + 50_000].tobytes())
    put(2 * MiB + 3, 50_000, blob[pos:pos + 50_000])
    assert f.current_size() == len(ref)
    assert f.read(0, len(ref)) == ref.tobytes()              # Python sees both C ranks' writes
    out = tmp_path / "out.bin"
    for d, h in ((a, ha), (b, hb)):
        assert d("size", h)["size"] == len(ref)
        d("read", h, 0, len(ref), out, 0)
        assert np.array_equal(np.fromfile(out, np.uint8)[:len(ref)], ref)
    assert a("stats", ha)["written_replica"] > 0
    for d in (a, b):
        d("close_store")
        d.close()
    f.close()
    st.close()                                               # the last one out
    with Store(root) as st2:
        rep = fsck(st2)
        assert rep["ok"] and rep["unclean"] == 0, rep
        assert st2.stat("f").size == len(ref)
        with st2.open("f") as g:
            assert g.read(0, len(ref)) == ref.tobytes()


def test_direct_io(driver, tmp_path):
    import errno
    import os

    try:           # does the file system of the test directory take O_DIRECT?
        os.close(os.open(tmp_path / "probe", os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644))
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            pytest.skip("the file system of the test directory refuses O_DIRECT")
        raise
    root = tmp_path / "st"
    init_store(root, "ceda-hdd8")
    with Store(root) as st:
        st.create("f", "fixed:64k")
    blob, bp = _blob(tmp_path, 13, 2 * MiB)
    d = Driver(driver)
    d("open", root, "direct")
    h = d("fopen", "f")["h"]
    d("write", h, 4096, 300 * 4096, bp, 0)
    bad = d("write", h, 100, 4096, bp, 0, ok=False)
    assert "O_DIRECT needs 4096-byte aligned" in bad["error"]
    out = tmp_path / "out.bin"
    d("read", h, 0, 302 * 4096, out, 0)
    ref = np.zeros(301 * 4096, np.uint8)
    ref[4096:] = blob[:300 * 4096]
    got = np.fromfile(out, np.uint8)
    assert np.array_equal(got[:len(ref)], ref) and not got[len(ref):].any()
    d("close_store")
    d.close()
    with Store(root, direct=True) as st:
        with st.open("f") as f:
            assert f.size == len(ref) and f.read(0, len(ref)) == ref.tobytes()
