"""Emitters (pario.apply): every plan kind the schemes produce, emitted for Lustre, BeeGFS,
OrangeFS and CephFS, parsed back by a small independent parser per grammar and compared
byte by byte (random offsets) with the plan's layout where the emitter claims it exact."""

from __future__ import annotations

import json
import posixpath
import shlex

import numpy as np
import pytest
from oracles.layout import map_requests

from pario.apply import TARGETS, get_emitter
from pario.cli import main
from pario.layout import ExtentMap, Grouped, Region, Regions, Striped
from pario.plan.base import Plan
from pario.plan.ceda import CEDAPlanner
from pario.plan.hybrid import HybridReplicationPlanner
from pario.plan.schemes import make_planner
from pario.system import load_system
from pario.trace import Trace
from pario.workload.ior import ior

K, M = 1024, 1 << 20


# ---------------------------------------------------------------------- plans
def _plans():
    out = {}
    h62 = load_system("hacio-6h2s")
    out["padp-varied"] = (make_planner("padp").plan(ior(8, 256 * K, 2 * M, 2, pattern="sequential", op="both", seed=3),
                                                    h62), h62)
    p44 = load_system("psa-4h4s")
    out["psa-regions"] = (make_planner("psa").plan(ior(8, 256 * K, 2 * M, 2, pattern="random", op="both", seed=3),
                                                   p44), p44)
    c8 = load_system("ceda-hdd8")
    out["ceda"] = (CEDAPlanner().plan(ior(16, 64 * K, M, 2, pattern="random", op="read", seed=7, file="rand.dat"), c8),
                   c8)
    two = Trace.concat([ior(16, 4 * M, 4 * M, 4, pattern="strided", op="read", file="a.dat"),
                        ior(1, 4 * M, 32 * M, 1, pattern="sequential", op="read", file="b.dat")])
    out["hybrid"] = (HybridReplicationPlanner(replicas="classic").plan(two, c8), c8)
    out["ci-layout-2d"] = (make_planner("ci-layout").plan(ior(8, 256 * K, 2 * M, 2, pattern="random", op="both",
                                                              seed=3), load_system("padp-6h2s")),
                           load_system("padp-6h2s"))
    # hand-made plans for the exact branches the small workloads may not reach: varied stripes
    # that are multiples of 64 KiB (Lustre overstriping), and a region starting mid-round
    out["varied-64k"] = (Plan("padp", layouts={"v.dat": Striped(tuple(range(8)), (64 * K,) * 6 + (128 * K,) * 2)},
                              system_name=h62.name), h62)
    out["regions-rotated"] = (Plan("psa", layouts={"r.dat": Regions((
        Region(0, 192 * K, Striped.fixed(64 * K, (4, 5, 6, 7))),
        Region(192 * K, None, Striped((0, 1, 2, 3, 4), (64 * K, 64 * K, 128 * K, 64 * K, 64 * K)))))},
        system_name=p44.name), p44)
    return out


@pytest.fixture(scope="module")
def plans():
    return _plans()


def test_plans_cover_every_kind(plans):
    kinds = {name: {type(l).__name__ for l in p.layouts.values()} for name, (p, _) in plans.items()}
    padp = plans["padp-varied"][0].layout_for("ior.dat")
    assert isinstance(padp, Striped) and not padp.is_fixed            # PADP's ⟨h, s⟩
    assert "Regions" in kinds["psa-regions"]                           # PSA's regions
    assert any(isinstance(r["layout"], ExtentMap) for reps in plans["ceda"][0].replicas.values() for r in reps)
    assert any(not isinstance(r["layout"], ExtentMap) for reps in plans["hybrid"][0].replicas.values() for r in reps)
    assert "Grouped" in kinds["ci-layout-2d"]                          # CI-LAYOUT 2-D


# ---------------------------------------------------------------------- parsers
def _size(text: str) -> int:
    t = text.strip().lower()
    mult = {"k": K, "m": M, "g": 1 << 30}.get(t[-1:], 1)
    return int(t[:-1] if t[-1:] in "kmg" else t) * mult


def _commands(emission):
    for line in emission.script().splitlines():
        if line.strip() and not line.startswith("#") and line not in ("set -e",):
            yield shlex.split(line)


def parse_lustre(emission):
    """path → list of mirrors, each a list of components (start, end, stripe, [ost, ...])."""
    files = {}

    def comps(tokens):
        out, cur, start = [], {}, 0
        i = 0
        while i < len(tokens):
            t = tokens[i]
            if t == "-E":
                if cur:
                    out.append(cur)
                end = int(tokens[i + 1])
                cur = {"start": start, "end": None if end == -1 else end}
                start = cur["end"]
                i += 2
                continue
            cur.setdefault("start", 0)
            cur.setdefault("end", None)
            if t == "-S":
                cur["S"] = _size(tokens[i + 1])
            elif t in ("-c", "-C"):
                cur["count"] = int(tokens[i + 1])
                cur["over"] = t == "-C"
            elif t == "-o":
                cur["osts"] = [int(v) for v in tokens[i + 1].split(",")]
            else:
                raise AssertionError(f"unknown lfs option {t}")
            i += 2
        if cur:
            out.append(cur)
        for c in out:
            c.setdefault("S", M)   # not given: the directory's default (irrelevant for one stripe)
            assert c["S"] % (64 * K) == 0 and c["count"] == len(c["osts"])
            assert c["over"] or len(set(c["osts"])) == len(c["osts"])
        return out

    for tok in _commands(emission):
        assert tok[0] == "lfs" and tok[-2] == "--"      # the file operand after "--"
        path = tok[-1]
        if tok[1] == "setstripe":
            files[path] = [comps(tok[2:-2])]
        elif tok[1:3] == ["mirror", "create"]:
            mirrors, cur = [], None
            for t in tok[3:-2]:
                if t == "-N":
                    if cur is not None:
                        mirrors.append(cur)
                    cur = []
                else:
                    cur.append(t)
            mirrors.append(cur)
            files[path] = [comps(m) if m else None for m in mirrors]
        else:
            raise AssertionError(tok)
    return files


def lustre_servers(components, x):
    """OST of byte x: the stripe of the *file* offset inside its component (lov_stripe_number)."""
    out = np.empty(len(x), dtype=np.int64)
    for c in components:
        end = np.iinfo(np.int64).max if c["end"] is None else c["end"]
        sel = (x >= c["start"]) & (x < end)
        osts = np.array(c["osts"])
        out[sel] = osts[(x[sel] // c["S"]) % len(osts)]
    return out


def parse_beegfs(emission):
    pools = {1: None}   # None: every target not moved elsewhere
    files, dirs = {}, {}
    for tok in _commands(emission):
        assert tok[0] == "beegfs-ctl"
        opts = dict(t[2:].split("=", 1) for t in tok[1:] if t.startswith("--") and "=" in t)
        if tok[1] == "--addstoragepool":
            pools[int(opts["id"])] = [int(v) for v in opts["targets"].split(",")]
        elif tok[1] == "--createfile":
            chunk = _size(opts.get("chunksize", "512k"))
            assert chunk >= 64 * K and chunk & (chunk - 1) == 0
            n = int(opts["numtargets"])
            targets = [int(v) for v in opts["targets"].split(",")]
            assert len(set(targets)) == len(targets) and len(targets) >= n
            files[tok[-1]] = (chunk, targets[:n])
        elif tok[1] == "--setpattern":
            chunk = _size(opts["chunksize"])
            assert chunk >= 64 * K and chunk & (chunk - 1) == 0
            dirs[tok[-1]] = (chunk, int(opts["numtargets"]), int(opts["storagepoolid"]))
        else:
            raise AssertionError(tok)
    return files, dirs, pools


def parse_orangefs(emission, system):
    hints, files = {}, {}
    for tok in _commands(emission):
        if tok[0] == "setfattr":
            assert tok[1] == "-n" and tok[3] == "-v" and tok[2].startswith("user.pvfs2.") and tok[5] == "--"
            hints.setdefault(tok[6], {})[tok[2][len("user.pvfs2."):]] = tok[4]
        elif tok[0] == "pvfs2-touch":
            assert tok[1] == "-l" and tok[3] == "--" and len(tok) == 5
            addrs = [a.split("://", 1)[1].rsplit(":", 1)[0] for a in tok[2].split(",")]
            files[tok[4]] = (dict(hints[posixpath.dirname(tok[4])]), [system.index(a) for a in addrs])
        elif tok[0] == "mv":
            assert tok[1] == "--" and len(tok) == 4
            files[tok[3]] = files.pop(tok[2])
        else:
            assert tok[0] in ("mkdir", "rmdir") and tok[-2] == "--", tok
    return files, hints


def orangefs_datafile(h, x):
    """Datafile of byte x under a distribution's hints (simple_stripe or varstrip_dist)."""
    if h["dist_name"] == "simple_stripe":
        s = int(h["dist_params"].split(":")[1])
        return (x // s) % int(h["num_dfiles"])
    assert h["dist_name"] == "varstrip_dist" and h["dist_params"].startswith("strips:")
    pairs = [p.split(":") for p in h["dist_params"][len("strips:"):].split(";") if p]
    df = np.array([int(d) for d, _ in pairs])
    sizes = np.array([_size(s) for _, s in pairs])
    assert set(df.tolist()) == set(range(df.max() + 1)) and (sizes > 0).all()
    ends = np.cumsum(sizes)
    return df[np.searchsorted(ends, x % ends[-1], side="right")]


def parse_cephfs(emission):
    rule_class, pool_class, layouts = {}, {}, {}
    for tok in _commands(emission):
        if tok[:5] == ["ceph", "osd", "crush", "rule", "create-replicated"]:
            rule_class[tok[5]] = tok[8] if len(tok) > 8 else None
        elif tok[:4] == ["ceph", "osd", "pool", "set"] and tok[5] == "crush_rule":
            pool_class[tok[4]] = rule_class[tok[6]]
        elif tok[0] == "ceph":
            continue
        elif tok[0] == "touch":
            assert tok[1] == "--" and len(tok) == 3
            layouts[tok[2]] = {"stripe_unit": 4 * M, "stripe_count": 1, "object_size": 4 * M, "pool": "cephfs_data"}
        elif tok[0] == "setfattr":
            kind, field = tok[2].rsplit(".", 1)
            assert kind in ("ceph.file.layout", "ceph.dir.layout") and tok[5] == "--" and len(tok) == 7
            lay = layouts.setdefault(tok[6], {"stripe_unit": 4 * M, "stripe_count": 1, "object_size": 4 * M})
            lay[field] = tok[4] if field == "pool" else int(tok[4])
            su, os_ = lay["stripe_unit"], lay["object_size"]     # Ceph refuses an invalid layout
            assert su % (64 * K) == 0 and os_ % (64 * K) == 0 and os_ % su == 0 and lay["stripe_count"] > 0, lay
        else:
            raise AssertionError(tok)
    return layouts, pool_class


# ---------------------------------------------------------------------- comparison
def offsets(lay, rng, n=3000):
    x = [rng.integers(0, 1 << 26, n), rng.integers(0, 1 << 40, n // 3)]
    if isinstance(lay, Regions):
        for r in lay.regions[1:]:
            x.append(r.start + rng.integers(-(1 << 22), 1 << 22, n // 3))
    x = np.concatenate(x)
    return x[x >= 0].astype(np.int64)


def plan_servers(lay, x):
    sub = map_requests(lay, x, np.ones_like(x))
    assert len(sub) == len(x)
    return sub.server.astype(np.int64)


def column_of(lay, x):
    order = list(lay.servers_used()) if isinstance(lay, (Striped, Grouped)) else None
    idx = {s: i for i, s in enumerate(order)}
    return np.array([idx[s] for s in plan_servers(lay, x)]), order


def aspects(item):
    return {d["aspect"] for d in item.inexact}


@pytest.mark.parametrize("name", ["padp-varied", "psa-regions", "ceda", "hybrid", "ci-layout-2d", "varied-64k",
                                  "regions-rotated"])
def test_lustre_round_trip(plans, name):
    plan, system = plans[name]
    em = get_emitter("lustre").emit(plan, system)
    files = parse_lustre(em)
    rng = np.random.default_rng(1)
    checked = 0
    for it in em.items:
        assert it.status in ("exact", "nearest", "not-expressible")
        if it.what == "layout":
            mirrors = files[it.path]
            lay = plan.layouts[it.file]
            if it.status == "exact":
                x = offsets(lay, rng)
                assert (lustre_servers(mirrors[0], x) == plan_servers(lay, x)).all(), it.to_dict()
                checked += 1
            else:
                assert it.inexact
            reps = [r for r in plan.replicas.get(it.file, []) if not isinstance(r["layout"], ExtentMap)]
            assert len(mirrors) == 1 + len(reps)
            for r, m in zip(reps, mirrors[1:]):   # FLR mirrors: each a whole-file replica's layout
                x = offsets(r["layout"], rng)
                assert (lustre_servers(m, x) == plan_servers(r["layout"], x)).all()
                checked += 1
        elif isinstance(plan.replicas[it.file][0]["layout"], ExtentMap):
            assert it.status == "nearest" and "partial replica" in aspects(it)
            emap = next(r["layout"] for r in plan.replicas[it.file] if f"replica {r['name']}" == it.what)
            placed = {(d["datafile"], system.index(d["server"])): d["path"] for d in it.datafiles}
            assert set(placed) == set(zip(emap.datafile.tolist(), emap.server.tolist()))
            for (df, srv), p in placed.items():     # each data file: one stripe on its server's OST
                (comp,), = files[p]
                assert comp["osts"] == [srv] and comp["count"] == 1
            checked += 1
        else:
            assert "routing" in aspects(it)
    assert checked or name == "padp-varied"   # its one layout is checked against the rule below
    if name == "padp-varied":   # ⟨24K, 64K⟩: not multiples of 64 KiB → the stated rule
        (it,) = em.items
        assert it.status == "nearest" and "stripe sizes" in aspects(it)
        comp = files[it.path][0][0]
        lay = plan.layouts[it.file]
        assert comp["S"] == 64 * K and comp["osts"] == list(lay.servers_used())
    if name == "varied-64k":    # exact through overstriping: S0, S1 twice each
        comp = files[em.items[0].path][0][0]
        assert comp["over"] and comp["osts"] == [0, 1, 2, 3, 4, 5, 6, 6, 7, 7]
    if name == "regions-rotated":
        comp = files[em.items[0].path][0][1]
        assert comp["osts"] != [0, 1, 2, 2, 3, 4]      # rotated: the region starts mid-round


@pytest.mark.parametrize("name", ["padp-varied", "psa-regions", "ceda", "hybrid", "ci-layout-2d", "varied-64k"])
def test_beegfs_round_trip(plans, name):
    plan, system = plans[name]
    em = get_emitter("beegfs").emit(plan, system)
    files, dirs, pools = parse_beegfs(em)
    rng = np.random.default_rng(2)
    for it in em.items:
        if it.what == "layout":
            lay = plan.layouts[it.file]
            if isinstance(lay, Regions):
                assert it.status == "nearest" and "regions" in aspects(it)
                continue
            x = offsets(lay, rng)
            if it.file == "*":
                chunk, n, pool = dirs[it.path]
                col, order = column_of(lay, x)
                members = pools[pool] or [t for t in range(1, system.n + 1)
                                          if not any(t in v for k, v in pools.items() if v and k != pool)]
                assert sorted(t - 1 for t in members) == sorted(order) and n == len(order)
                assert it.status in ("striping", "nearest") and "server placement" in aspects(it)
                if it.status == "striping":
                    assert ((x // chunk) % n == col).all()
            elif it.status == "exact":
                chunk, targets = files[it.path]
                got = np.array(targets)[(x // chunk) % len(targets)] - 1
                assert (got == plan_servers(lay, x)).all()
            else:
                assert "stripe sizes" in aspects(it)
        else:
            rep = next(r for r in plan.replicas[it.file] if f"replica {r['name']}" == it.what)
            if isinstance(rep["layout"], ExtentMap):
                assert "partial replica" in aspects(it)
                for d in it.datafiles:
                    assert files[d["path"]][1] == [system.index(d["server"]) + 1]
            else:
                assert it.status == "not-expressible" and "replica" in aspects(it) and not it.commands


@pytest.mark.parametrize("name", ["padp-varied", "psa-regions", "ceda", "hybrid", "ci-layout-2d", "varied-64k"])
def test_orangefs_round_trip(plans, name):
    plan, system = plans[name]
    em = get_emitter("orangefs").emit(plan, system)
    files, hints = parse_orangefs(em, system)
    rng = np.random.default_rng(3)
    exact = 0
    for it in em.items:
        if it.what != "layout":
            rep = next(r for r in plan.replicas[it.file] if f"replica {r['name']}" == it.what)
            if isinstance(rep["layout"], ExtentMap):
                for d in it.datafiles:
                    assert files[d["path"]][1] == [system.index(d["server"])]
            else:
                assert it.status == "not-expressible"
            continue
        lay = plan.layouts[it.file]
        if isinstance(lay, Regions):
            assert "regions" in aspects(it)
            continue
        x = offsets(lay, rng)
        if it.file == "*":
            col, order = column_of(lay, x)
            h = hints[it.path]
            assert it.status == "striping" and int(h["num_dfiles"]) == len(order)
            assert (orangefs_datafile(h, x) == col).all()
            continue
        assert it.status == "exact"             # simple_stripe and varstrip_dist express every striping
        h, servers = files[it.path]
        assert (np.array(servers)[orangefs_datafile(h, x)] == plan_servers(lay, x)).all()
        exact += 1
    if name == "padp-varied":   # PADP's ⟨h, s⟩ exactly as varstrip_dist strips
        h = files[em.items[0].path][0]
        assert h["dist_name"] == "varstrip_dist" and exact == 1


@pytest.mark.parametrize("name", ["padp-varied", "psa-regions", "ceda", "hybrid", "ci-layout-2d"])
def test_cephfs_round_trip(plans, name):
    plan, system = plans[name]
    em = get_emitter("cephfs").emit(plan, system)
    layouts, pool_class = parse_cephfs(em)
    rng = np.random.default_rng(4)
    for it in em.items:
        assert it.status != "exact"             # CRUSH, not the layout, picks OSDs
        if it.what != "layout":
            rep = next(r for r in plan.replicas[it.file] if f"replica {r['name']}" == it.what)
            if isinstance(rep["layout"], ExtentMap):
                for d in it.datafiles:
                    assert pool_class[layouts[d["path"]]["pool"]] == system.servers[system.index(d["server"])].kind
            else:
                assert it.status == "not-expressible"
            continue
        lay = plan.layouts[it.file]
        assert "server placement" in aspects(it)
        if isinstance(lay, Regions):
            assert "regions" in aspects(it)
            continue
        L = layouts[it.path]
        kinds = {system.servers[s].kind for s in lay.servers_used()}
        assert pool_class[L["pool"]] == (next(iter(kinds)) if len(kinds) == 1 else None)
        x = offsets(lay, rng)
        col, order = column_of(lay, x)
        assert L["stripe_count"] == len(order)
        if it.status == "striping":
            assert ((x // L["stripe_unit"]) % L["stripe_count"] == col).all()
        else:
            assert "stripe sizes" in aspects(it)


# ---------------------------------------------------------------------- CLI
def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_writes_script_and_json(plans, tmp_path, capsys):
    plan, system = plans["padp-varied"]
    path = tmp_path / "plan.json"
    plan.save(path, system)
    script = tmp_path / "apply.sh"
    rc, out, err = run(capsys, "apply", path, "--emit", "orangefs", "-o", script)
    assert rc == 0 and "exact" in out and script.read_text().startswith("#!/bin/sh")
    assert "varstrip_dist" in script.read_text()
    rc, out, _ = run(capsys, "apply", path, "--emit", "LUSTRE", "--json")
    d = json.loads(out)
    assert rc == 0 and d["target"] == "lustre" and d["items"][0]["status"] == "nearest"
    assert any(c.startswith("lfs setstripe") for c in d["items"][0]["commands"])
    rc, out, err = run(capsys, "apply", path, "--emit", "cephfs")
    assert rc == 0 and "setfattr -n ceph.file.layout.stripe_unit" in out and "nearest (stripe sizes" in err


@pytest.mark.parametrize("argv, msg", [
    (["apply", "{missing}", "--emit", "lustre"], "does not exist"),
    (["apply", "{plan}", "--emit", "gpfs"], "unknown emit target"),
    (["apply", "{plan}"], "give --emit"),
    (["apply", "{plan}", "--emit", "beegfs", "--system", "ceda-hdd8"], "is for system"),
    (["apply", "{bad}", "--emit", "lustre"], "not a JSON plan"),
])
def test_cli_bad_input(plans, tmp_path, capsys, argv, msg):
    plan, system = plans["padp-varied"]
    p = tmp_path / "plan.json"
    plan.save(p, system)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    argv = [a.format(plan=p, missing=tmp_path / "nope.json", bad=bad) for a in argv]
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and err.startswith("pario: error: ") and msg in err and err.count("\n") == 1, err


def test_every_target_is_registered():
    assert {get_emitter(t).name for t in TARGETS} == set(TARGETS)
