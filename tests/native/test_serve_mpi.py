"""Unmodified MPI programs served from a pario store by the preloaded library (issue 16):
interpose/serve.c puts MPI_File_* calls of files the store holds (or the plan covers) through
the store's layout and RMT, and collective calls through pario's two-phase I/O.

Oracles: the program itself (tests/c/tracer_styles.c writes the byte value of its rank;
the served run's own trace says where each call went, so the expected file is built by
replaying those extents in time order), MPICH's ROMIO on a plain file (the same program
without pario writes the same bytes at every byte both write), and pario's Python store
(which reads what the C library wrote).  IOR from ../shared/clients/ior: byte-identical to
the same IOR run without pario, for every collective order.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import C_DIR, IOR_SRC, VENV_BIN, expected_from_trace, load_script, on_path

STYLES_SRC = C_DIR / "tracer_styles.c"
P, B, N = 4, 48, 8
SYSTEM = "hacio-6h2s"
STYLES = ("at", "individual", "all", "vector", "subarray", "darray", "indexed", "struct", "resized", "nbwait",
          "nbtestall", "split", "shared", "ordered", "large", "short", "aggregators", "more")
ORDER_FREE = {"shared", "more"}     # shared-pointer writes land in the order the ranks come


def compile_mpi(src: Path, exe: Path) -> Path:
    """A test's MPI program (tests/c/*.c), built with the MPICH wheel's mpicc, warnings as errors."""
    r = subprocess.run([str(VENV_BIN / "mpicc"), "-std=c11", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="module")
def styles_exe(lib, tmp_path_factory):
    return compile_mpi(STYLES_SRC, tmp_path_factory.mktemp("styles") / "tracer_styles")


def _env(lib, *, store=None, trace=None, serve=None, plan=None, extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARIO_") and k != "LD_PRELOAD"}
    env["LD_PRELOAD"] = str(lib)
    for key, val in (("PARIO_STORE", store), ("PARIO_TRACE_DIR", trace), ("PARIO_SERVE", serve),
                     ("PARIO_PLAN", plan)):
        if val is not None:
            env[key] = str(val)
    env.update(extra or {})
    return env


def _mpiexec(argv, env, cwd, n=P, check=True):
    cp = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", str(n), *map(str, argv)], capture_output=True, text=True,
                        env=env, cwd=str(cwd), timeout=300)
    if check:
        assert cp.returncode == 0, cp.stderr[-2000:]
    return cp


def _store(path: Path, system: str = SYSTEM) -> Path:
    from pario.cli import main

    assert main(["store", "init", str(path), "--system", system]) == 0
    return path


def _store_bytes(store: Path, name: str) -> bytes:
    from pario.store import Store

    with Store(str(store)) as st:
        with st.open(name) as f:
            return bytes(f.read(0, int(f.size)))


@pytest.fixture(scope="module")
def served_styles(lib, styles_exe, tmp_path_factory):
    """Every style once served (PARIO_SERVE=all on a fresh store, traced too) and once plain
    (traced): (store, served data dir, served trace, plain data dir, plain trace)."""
    from pario.trace.native import read_native

    tmp = tmp_path_factory.mktemp("served")
    store = _store(tmp / "store")
    out = {}
    for kind in ("served", "plain"):
        data, tdir = tmp / kind / "data", tmp / kind / "trace"
        data.mkdir(parents=True)
        tdir.mkdir()
        env = _env(lib, trace=tdir, store=store if kind == "served" else None, serve="all" if kind == "served" else None)
        _mpiexec([styles_exe, "all", data, B, N], env, tmp / kind)
        out[kind] = (data, read_native(tdir))
    return store, *out["served"], *out["plain"]


@pytest.mark.parametrize("style", STYLES)
def test_styles_served_write_what_the_program_wrote(served_styles, style):
    """Every access style (views, nonblocking, split, shared, ordered, _c, short reads) written
    through the store: the store file holds exactly the program's bytes where its calls
    wrote them and zeros elsewhere (holes), nothing lands on the plain path, and ROMIO on a
    plain file wrote the same bytes wherever it wrote."""
    store, sdata, strace, pdata, ptrace = served_styles
    name = str(sdata / f"{style}.dat")
    assert not Path(name).exists()                       # served: no byte on the plain path
    want = expected_from_trace(strace, name)
    got = np.frombuffer(_store_bytes(store, name), dtype=np.uint8)
    assert len(got) == len(want) and np.array_equal(got, want), style
    plain = np.frombuffer((pdata / f"{style}.dat").read_bytes(), dtype=np.uint8)
    pwant = expected_from_trace(ptrace, str(pdata / f"{style}.dat"))
    covered = np.zeros(len(pwant), dtype=bool)
    pname = str(pdata / f"{style}.dat")
    f = ptrace.files.index(pname)
    m = (ptrace.file == f) & (ptrace.op == 1)
    for o, n in zip(ptrace.offset[m], ptrace.length[m]):
        covered[o:o + n] = True
    assert np.array_equal(plain[:len(pwant)][covered], pwant[covered])
    if style in ORDER_FREE:                              # the same bytes, in the order the run had
        assert sorted(got.tolist()) == sorted(pwant.tolist())
    else:
        assert np.array_equal(want, pwant)               # the served calls went where ROMIO's did


def test_served_traces_equal_plain_traces(served_styles):
    """Tracing a served run records the same calls and extents as tracing the plain run."""
    store, sdata, strace, pdata, ptrace = served_styles
    for style in STYLES:
        if style in ORDER_FREE or style == "shared":
            continue
        a = strace.take(strace.file == strace.files.index(str(sdata / f"{style}.dat"))).sorted()
        b = ptrace.take(ptrace.file == ptrace.files.index(str(pdata / f"{style}.dat"))).sorted()
        for col in ("rank", "op", "offset", "length", "collective"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), (style, col)


def test_files_outside_the_store_pass_through(lib, styles_exe, tmp_path):
    """PARIO_STORE without PARIO_SERVE=all: a file the store does not hold and no plan covers
    goes to MPICH unchanged (the plain file is written, the store stays empty)."""
    from pario.store import Store

    store = _store(tmp_path / "store")
    data = tmp_path / "data"
    data.mkdir()
    _mpiexec([styles_exe, "vector", data, B, N], _env(lib, store=store), tmp_path)
    assert (data / "vector.dat").stat().st_size == N * P * B
    with Store(str(store)) as st:
        assert st.files() == []


def test_plan_layout_is_used_when_the_program_creates_the_file(lib, styles_exe, tmp_path):
    """A plan covering the file: the program's MPI_File_open(CREATE) creates it in the store
    with the plan's layout (here PADP-style varied stripes), and the bytes are the program's."""
    from pario.layout import Striped, layout_to_dict
    from pario.store import Store
    from pario.system import load_system

    prof = load_system(SYSTEM)
    store = _store(tmp_path / "store")
    data = tmp_path / "data"
    data.mkdir()
    name = str(data / "all.dat")
    lay = Striped(tuple(range(prof.n)), tuple(16 if prof.servers[j].kind == "hdd" else 64 for j in range(prof.n)))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"pario_plan": 1, "scheme": "padp", "system": SYSTEM,
                                "layouts": {name: layout_to_dict(lay, prof)}, "replicas": {},
                                "collective_order": "hacio"}))
    tdir = tmp_path / "trace"
    tdir.mkdir()
    _mpiexec([styles_exe, "all", data, B, N], _env(lib, store=store, plan=plan, trace=tdir), tmp_path)
    from pario.trace.native import read_native

    with Store(str(store)) as st:
        assert st.files() == [name]
        assert st.stat(name).layout == lay
    got = np.frombuffer(_store_bytes(store, name), dtype=np.uint8)
    assert np.array_equal(got, expected_from_trace(read_native(tdir), name))


def test_a_plan_for_another_system_passes_through(lib, styles_exe, tmp_path):
    """A plan made for another system: one 'pario: serve:' line, and the program runs on
    plain files, correctly."""
    store = _store(tmp_path / "store")
    data = tmp_path / "data"
    data.mkdir()
    name = str(data / "at.dat")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"pario_plan": 1, "scheme": "ceda", "system": "ceda-hdd8", "layouts": {},
                                "replicas": {name: [{"name": "x"}]}}))
    cp = _mpiexec([styles_exe, "at", data, B, N], _env(lib, store=store, plan=plan), tmp_path)
    lines = [ln for ln in cp.stderr.splitlines() if ln.startswith("pario: serve:")]
    assert len(lines) == 1 and "ceda-hdd8" in lines[0] and "passes through" in lines[0]
    blocks = np.frombuffer((data / "at.dat").read_bytes(), dtype=np.uint8).reshape(N, P, B)
    assert (blocks == np.arange(P, dtype=np.uint8)[None, :, None]).all()


# ---------------------------------------------------------------------- IOR, unmodified

@pytest.fixture(scope="module")
def ior_bin(lib, tmp_path_factory):
    if not (IOR_SRC / "build.sh").exists():
        pytest.skip("../shared/clients/ior is absent")
    out = tmp_path_factory.mktemp("ior")
    r = subprocess.run(["bash", str(IOR_SRC / "build.sh"), str(out), str(VENV_BIN / "mpicc")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1])


def test_ior_collective_orders_are_byte_identical_to_plain(lib, ior_bin, tmp_path):
    """IOR -a MPIIO -c (collective writes and reads) served with each order (ROMCIO, CACIO,
    HACIO): every file equals the one the same IOR run writes without pario (-G fixes IOR's
    time stamp in the data), and IOR's own read-back check (-R) passes."""
    store = _store(tmp_path / "store")
    args = ["-a", "MPIIO", "-G", "4242", "-b", "64k", "-t", "16k", "-s", "8", "-w", "-r", "-R", "-k"]
    plain = tmp_path / "plain.dat"
    _mpiexec([ior_bin, *args, "-o", plain], _env(lib), tmp_path)
    ref = plain.read_bytes()
    assert len(ref) == P * 8 * 64 * 1024
    for order in ("romcio", "cacio", "hacio"):
        name = tmp_path / f"ior-{order}.dat"
        cp = _mpiexec([ior_bin, *args, "-c", "-o", name], _env(lib, store=store, serve="all",
                                                               extra={"PARIO_ORDER": order}), tmp_path)
        assert "pario: serve:" not in cp.stderr
        assert not name.exists()
        assert _store_bytes(store, str(name)) == ref, order


def test_ior_random_reads_of_a_store_file(lib, ior_bin, tmp_path):
    """IOR -z reads (random offsets) of a file written before, served and plain: IOR's own
    data check (-R) reports the same thing in both (with -z IOR checks against the pattern of
    the sequential offset, so it counts the same mismatches when the bytes read are the
    same), and the store holds the plain file's bytes."""
    import re

    store = _store(tmp_path / "store")
    seen = {}
    for kind in ("plain", "served"):
        name = tmp_path / f"{kind}.dat"
        base = ["-a", "MPIIO", "-G", "99", "-b", "256k", "-t", "16k", "-s", "2", "-k", "-o", name]
        env = _env(lib, store=store, serve="all") if kind == "served" else _env(lib)
        _mpiexec([ior_bin, *base, "-w"], env, tmp_path)
        cp = _mpiexec([ior_bin, *base, "-r", "-R", "-z", "--random-offset-seed", "7", "-E"],
                      _env(lib, store=store) if kind == "served" else _env(lib), tmp_path, check=False)
        assert "pario: serve:" not in cp.stderr
        seen[kind + " status"] = cp.returncode     # IOR exits with its error count
        seen[kind] = re.findall(r"Incorrect data on read \((\d+) errors found\)", cp.stdout + cp.stderr)
    assert seen["served"] == seen["plain"] and seen["served status"] == seen["plain status"]
    assert not (tmp_path / "served.dat").exists()
    assert _store_bytes(store, str(tmp_path / "served.dat")) == (tmp_path / "plain.dat").read_bytes()


def test_ior_aggregators_issue_the_plans_order(lib, ior_bin, tmp_path):
    """IOR -c served with collective buffering forced (hints through IOR: cb_nodes 2, 64 KiB
    buffer, so every call runs several cycles; cb_config_list *:* lets both be on this one
    node), for each order: every aggregator's accesses,
    cycle by cycle, are exactly what pario's former Python runtime (tests/oracles/twophase.py: _plan_domain
    with pario.plan.collective's ROMCIO / CACIO / HACIO, seed 004 Algorithm 1) plans for the
    requests the trace recorded, call by call, on the store file's layout (64 KiB over the
    6 HServers and 2 SServers of hacio-6h2s)."""
    from test_serve_twophase import Case, oracle_schedule, read_log

    from pario.trace.native import read_native

    hints = {f"IOR_HINT__MPI__{k}": v for k, v in (("romio_cb_write", "enable"), ("romio_cb_read", "enable"),
                                                   ("cb_nodes", "2"), ("cb_config_list", "*:*"),
                                                   ("cb_buffer_size", "65536"))}     # IOR passes them to open
    layout = [(s, 64 * 1024, 0 if s < 6 else 1) for s in range(8)]     # the store's default layout
    seen = {}
    for order in ("romcio", "cacio", "hacio"):
        store = _store(tmp_path / f"store-{order}")
        name, tdir, log = tmp_path / f"ior-{order}.dat", tmp_path / f"t-{order}", tmp_path / f"order-{order}"
        tdir.mkdir()
        _mpiexec([ior_bin, "-a", "MPIIO", "-G", "7", "-c", "-b", "192k", "-t", "96k", "-s", "2", "-w", "-k",
                  "-o", name], _env(lib, store=store, serve="all", trace=tdir,
                                    extra={"PARIO_ORDER": order, **hints,
                                           "PARIO_SERVE_ORDER_LOG": str(log)}), tmp_path)
        tr = read_native(tdir)
        assert tr.meta.hint("cb_nodes") == "2" and tr.meta.hint("cb_buffer_size") == "65536"
        tr = tr.take((tr.file == tr.files.index(str(name))) & tr.collective).sorted()
        expect: dict[int, list] = {}
        ncalls = len(np.unique(tr.call[tr.rank == 0]))
        for j in range(ncalls):      # the j-th collective call of every rank
            exts = []
            for r in range(P):
                mine = tr.take(tr.rank == r)
                c = np.unique(mine.call)[j]
                k = mine.call == c
                exts.append(np.stack([mine.offset[k], mine.length[k]], axis=1).astype(np.int64))
            case = Case(id=f"ior{j}", op="write", exts=exts, order=order, cb_buffer=65536, cb_nodes=2)
            for agg, cycles in oracle_schedule(case, P, layout).items():
                expect.setdefault(agg, []).extend(cycles)
        got = read_log(str(log), P)
        assert got == expect, order
        assert len(got) == 2               # two aggregators (ROMIO's cb_nodes)
        assert all(c >= 0 for rows in got.values() for c, _ in rows)
        seen[order] = got
    assert seen["romcio"] != seen["hacio"] and seen["romcio"] != seen["cacio"]    # the orders differ here


# ---------------------------------------------------------------------- pario run on IOR

def _pario_run(tmp_path, ior_bin, args, prepare=None, schemes="ceda", space="16m", system="ceda-hdd8", env=None,
               procs=P):
    import io

    from pario.run import exit_status, run_loop

    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        s = run_loop(str(ior_bin), args, procs=procs, store=tmp_path / "store", system=system, schemes=schemes,
                     space=space, out=str(tmp_path / "out"), prepare=prepare, tool_stdout=io.StringIO())
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert s["unmodified"] and s["identical"] and s["fsck_ok"] and exit_status(s) == 0
    assert set(s["plain"]["files"]) == set(s["files"]) and None not in s["plain"]["files"].values()
    return s


def test_pario_run_ior_strided_reads_are_redirected(ior_bin, tmp_path):
    """pario run on IOR (unmodified): strided 256 KiB reads by 2 ranks after a --prepare
    write, on a profile where two of the four servers are twice as slow (tests/run/test_run.py's
    HDD2_SLOW2: CEDA replicates whatever the ranks' timing); run 2's reads are all served by
    the replicas (RMT hits counted from the store's RMT against run 2's trace), and the file
    equals IOR's without pario."""
    on_path("run")   # tests/run/test_run.py, from this folder
    from test_run import HDD2_SLOW2

    (tmp_path / "p.toml").write_text(HDD2_SLOW2)
    data = tmp_path / "ior.dat"
    base = f"-a MPIIO -G 5 -b 256k -t 256k -s 8 -k -o {data}"
    s = _pario_run(tmp_path, ior_bin, [*base.split(), "-r", "-E"], prepare=f"{base} -w", procs=2,
                   system=str(tmp_path / "p.toml"), space=None)
    h = s["redirected"]
    assert s["replicas_planned"] >= 1 and h["requests"] == 2 * 8 and h["hit_requests"] == h["requests"]
    assert h["hit_bytes"] == 2 * 8 * 256 * 1024


def test_pario_run_ior_random_reads(ior_bin, tmp_path):
    """pario run on IOR -z reads (random offsets) after a --prepare write: same bytes as
    without pario; every request of run 2 traced."""
    data = tmp_path / "ior.dat"
    base = f"-a MPIIO -G 5 -b 256k -t 16k -s 2 -k -o {data}"
    s = _pario_run(tmp_path, ior_bin, [*base.split(), "-r", "-z", "--random-offset-seed", "3", "-E"],
                   prepare=f"{base} -w")
    assert s["redirected"]["requests"] == P * 2 * 256 // 16


@pytest.mark.parametrize("order", ["romcio", "cacio", "hacio"])
def test_pario_run_ior_collective_writes(ior_bin, tmp_path, order):
    """pario run on IOR -c writes with each collective order (PARIO_ORDER reaches every run):
    run 1, run 2 and IOR without pario leave the same bytes."""
    data = tmp_path / "ior.dat"
    s = _pario_run(tmp_path, ior_bin, ["-a", "MPIIO", "-G", "5", "-c", "-b", "256k", "-t", "64k", "-s", "4", "-w",
                                       "-k", "-o", str(data)], schemes="padp", space=None, system="hacio-6h2s",
                   env={"PARIO_ORDER": order})
    assert s["collective_requests_run1"] == P * 4 * 4


def test_pario_run_applies_a_layout_plan(ior_bin, tmp_path):
    """pario run on IOR with a PADP plan: pario replicate relays out the store file before
    run 2 (the summary names it), both runs are priced by the distribution model with run 1's
    own layout as ORIG (the plan's baselines do not price it), and the bytes are IOR's."""
    from pario.layout import Striped
    from pario.model import DistributionModel
    from pario.plan.base import Plan
    from pario.store import Store
    from pario.system import load_system
    from pario.trace import load

    data = tmp_path / "ior.dat"
    s = _pario_run(tmp_path, ior_bin, ["-a", "MPIIO", "-G", "5", "-b", "1m", "-t", "256k", "-s", "2", "-w", "-r",
                                       "-k", "-o", str(data)], schemes="padp", space=None, system="hacio-6h2s")
    prof = load_system("hacio-6h2s")
    plan = Plan.load(tmp_path / "out" / "plan.json", prof)
    with Store(str(tmp_path / "store")) as st:
        now = st.stat(str(data)).layout
    assert now == plan.layouts[str(data)]
    assert s["relaid"] == [str(data)] and s["predicted"]["model"] == "distribution"
    # the relayout is a step of its own, before the replicas; its copy priced as pario advise prices
    # it (checked against the reference model, the copy rebuilt by hand) and measured by its step
    names = [x["name"] for x in s["steps"]]
    assert names.index("advise") < names.index("relayout") < names.index("replicate") < names.index("run 2")
    w = s["whole_job"]
    size = P * 2 * (1 << 20)
    assert [(c["kind"], c["file"], c["bytes"]) for c in w["setup"]["copies"]] == [("relayout", str(data), size)]
    on_path("plan")
    from test_setup_cost import _reference_copy

    want = _reference_copy(Striped(tuple(range(prof.n)), (64 * 1024,) * prof.n), plan.layouts[str(data)], [0], [size],
                           prof, 8 << 20, True)
    assert w["advised"]["setup_s"] == pytest.approx(want, rel=1e-9)       # the copies, as advise prices them
    assert w["setup_s"]["predicted"] == pytest.approx(want + w["costs"]["advise_s"], rel=1e-9)  # + advise as it ran
    rel = sum(x["seconds"] for x in s["steps"] if x["name"] == "relayout")
    assert w["costs"]["relayout_s"] == pytest.approx(rel) and rel > 0
    # IOR is unmodified: a run without pario was made, and the trace overhead is run 1's wall time minus its
    assert w["costs"]["trace_overhead_s"] == pytest.approx(s["run1_s"] - s["plain"]["wall_s"])
    f2 = w["costs"]["flush"]["run2"]
    assert f2["at"] == ["finalize"] and f2["ranks"] == P and f2["flushed_bytes"] == 0     # no replica: nothing to flush
    t1 = load(tmp_path / "out" / "run1.parquet")
    from pario.model.batches import batch_ids

    default = Striped(tuple(range(prof.n)), (64 * 1024,) * prof.n)      # run 1: the store's default layout
    # batched as the plan was made: in lock-step, the page cache having served run 1 (pario.run.loop)
    assert s["batching"] == "order"
    want = DistributionModel().trace_cost(t1, {str(data): default}, prof, batches=batch_ids(t1, "order")).predicted_s
    assert s["predicted"]["ORIG"] == pytest.approx(want, rel=1e-9)


def test_ior_rewrite_goes_to_the_replica_and_home_when_the_program_ends(lib, ior_bin, tmp_path):
    """CEDA inside MPI-IO on IOR's write + read (the write phase truncates the file, then
    writes it again): the rewrite of the replicated range goes to the replica (DIRTY: the
    journal's records, replayed by the independent reader, show the replica's DIRTY entries
    added), the read phase after IOR's close and reopen is served from it, and the dirty
    bytes reach the original by the time the program ends (MPI_Finalize; seed 000 §5: "when
    the application ends its execution"): right after mpiexec, before any other process
    opens the store (whose recovery would flush too), the journal has no unclean entry and
    the original's own data files (read with the stress scripts' own mapping) hold the bytes
    IOR writes without pario."""
    from pario.cli import main
    from pario.store import rmt_journal as J

    cs = load_script("stress/crash_stress.py", "crash_stress")
    store = _store(tmp_path / "store", "ceda-hdd8")      # fixed:64k over H0..H7 (crash_stress)
    name = tmp_path / "ior.dat"
    shape = ["-a", "MPIIO", "-b", "256k", "-t", "64k", "-s", "4", "-k"]
    _mpiexec([ior_bin, *shape, "-G", "11", "-w", "-o", name], _env(lib, store=store, serve="all"), tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "pario_plan": 1, "scheme": "ceda", "system": "ceda-hdd8", "layouts": {}, "collective_order": "romcio",
        "replicas": {str(name): [{"name": "r1", "layout": {"type": "extents", "default": None,
                                                            "extents": [[0, 2 << 20, "H3", 0, 1]]}}]}}))
    assert main(["replicate", str(plan), "--store", str(store), "--no-layouts"]) == 0
    plain = tmp_path / "plain.dat"
    _mpiexec([ior_bin, *shape, "-G", "12", "-w", "-o", plain], _env(lib), tmp_path)
    stats = tmp_path / "serve.jsonl"
    cp = _mpiexec([ior_bin, *shape, "-G", "12", "-w", "-r", "-R", "-E", "-o", name],
                  _env(lib, store=store, plan=plan, extra={"PARIO_SERVE_STATS": str(stats)}), tmp_path)
    assert "pario: serve:" not in cp.stderr
    # every rank reported its close of the store at MPI_Finalize (PARIO_SERVE_STATS): the flushes
    # copied the rewritten replicated range home once, and some rank was the last one out
    lines = [json.loads(x) for x in stats.read_text().splitlines()]
    assert sorted(x["rank"] for x in lines) == list(range(P)) and {x["at"] for x in lines} == {"finalize"}
    assert {x["store"] for x in lines} == {str(store)}
    assert sum(x["flushed_bytes"] for x in lines) == 2 << 20
    assert any(x["last_out"] for x in lines) and all(x["close_s"] >= x["flush_s"] + x["last_out_s"] for x in lines)
    assert max(x["flush_s"] for x in lines if x["flushed_bytes"]) > 0
    j = J.read(store / "rmt.log")
    dirty_adds = [r for r in j.records if r.type == J.ADD and r.a16 == J.DIRTY]
    assert sum(int(r.u[4]) for r in dirty_adds) == 2 << 20          # the whole replicated range, rewritten
    model, _ = J.replay(store / "rmt.log")
    fid, layout, size, dirty = cs.read_meta(store, str(name))
    ents = model.entries(fid)
    assert ents and all(e[4] == J.CLEAN for e in ents)              # flushed when the program ended
    ref = np.frombuffer(plain.read_bytes(), np.uint8)
    assert size == len(ref) and not dirty
    assert np.array_equal(cs.striped_bytes(store, fid, size), ref)


def test_set_size_between_ranks_writes_matches_mpich(lib, tmp_path):
    """tests/c/serve_resize.c: a collective MPI_File_set_size between writes of several
    ranks (a rank whose handle read a larger size at open writes up to that size after the
    truncation; a rank that extended the file before a truncation): the sizes after every
    phase and the final bytes equal MPICH's own on a plain file (the program run without
    pario)."""
    exe = compile_mpi(C_DIR / "serve_resize.c", tmp_path / "serve_resize")
    plain = tmp_path / "plain.dat"
    want = _mpiexec([exe, plain], _env(lib), tmp_path).stdout.split()
    assert want == ["size", str(P * 65536), "size", str(P * 65536), "size", "32768"]   # the program's own sizes
    store = _store(tmp_path / "store")
    name = tmp_path / "served.dat"
    cp = _mpiexec([exe, name], _env(lib, store=store, serve="all"), tmp_path)
    assert "pario: serve:" not in cp.stderr
    assert cp.stdout.split() == want
    assert not name.exists()
    assert _store_bytes(store, str(name)) == plain.read_bytes()
