"""``pario run`` on programs that do not write the same bytes twice (issue 24, "Real
programs"): the store's files are judged against two runs without pario, outside the
positions where those two differ (:mod:`pario.run.variation`).

Oracles: the comparison of :func:`compare_sources` against a position-by-position Python
loop over hand-made and random byte strings of different sizes, chunked and not; IOR
(../shared/clients/ior, unmodified) with its MPIIO backend (the same bytes in every run: no
second plain run) and its HDF5 backend (Debian's libhdf5-mpich-dev, linked statically by
scripts/build_native.py: HDF5 stores modification times, so two runs without pario differ):
the varying positions recomputed here from the two plain files with numpy, and run 2's bytes
read back through the store equal the plain run's everywhere else; a byte flipped in the
store's copy outside those positions is found, at exactly its offset, and fails the run.
The repo's C MPI programs (tests/c) under ``pario run``: exit 0, and the store's file equals
the file the program writes without pario.
"""

from __future__ import annotations

import io
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import C_DIR, IOR_SRC, VENV_BIN

from pario.run import variation
from pario.run.variation import PLAIN, compare_sources


# ---------------------------------------------------------------------- the comparison itself

class Mem:
    """A source over bytes in memory (None: a missing file)."""

    def __init__(self, data: bytes | None):
        self.data, self.size = data, None if data is None else len(data)

    def read(self, offset, n):
        return self.data[offset:offset + n]


def _oracle(p1: bytes | None, p2: bytes | None, runs: dict, pairs):
    """Position by position in Python: the varying positions (different bytes, or a byte only
    one plain run has) and, per pair, the positions where the two differ outside them."""
    def at(b, i):
        return None if b is None or i >= len(b) else b[i]

    p2 = p1 if p2 is None else p2
    src = {PLAIN: p1, **runs}
    total = max(len(b or b"") for b in [p1, p2, *runs.values()])
    vary = [i for i in range(total) if at(p1, i) != at(p2, i)]
    out = {}
    for a, b in pairs:
        out[(a, b)] = [i for i in range(total) if i not in set(vary) and at(src[a], i) != at(src[b], i)]
    return vary, out


def _ranges(pos: list[int]) -> list[list[int]]:
    out = []
    for i in pos:
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out


def _check_against_oracle(p1, p2, runs, pairs, chunk, keep=3):
    got = compare_sources(Mem(p1), Mem(p2) if p2 is not None else None, {k: Mem(v) for k, v in runs.items()},
                          pairs, chunk=chunk, keep=keep)
    vary, diff = _oracle(p1, p2, runs, pairs)
    want_r = _ranges(vary)
    assert got["varying"] == {"bytes": len(vary), "ranges": want_r[:keep], "range_count": len(want_r)}
    for p in pairs:
        r = _ranges(diff[p])
        assert got["pairs"][p] == {"bytes": len(diff[p]), "ranges": r[:keep], "range_count": len(r)}, (p, chunk)
    assert got["plain_sizes"][0] == (None if p1 is None else len(p1))
    assert got["sizes"] == {k: (None if v is None else len(v)) for k, v in runs.items() if any(k in q for q in pairs)}


def test_compare_hand_made():
    """Worked by hand: the plain runs "abcdef" and "abXdefgh" vary at 2 (different byte) and
    6, 7 (only the second has them); a run is judged at every other position."""
    p1, p2 = b"abcdef", b"abXdefgh"
    runs = {"same": b"abZdefg", "first": b"Abcdef", "short": b"abcde", "long": b"abcdefghi", "gone": None}
    pairs = [(k, PLAIN) for k in runs] + [("first", "same")]
    got = compare_sources(Mem(p1), Mem(p2), {k: Mem(v) for k, v in runs.items()}, pairs, chunk=4)
    assert got["varying"] == {"bytes": 3, "ranges": [[2, 3], [6, 8]], "range_count": 2}
    assert got["plain_sizes"] == [6, 8]
    d = {a: r["bytes"] for (a, b), r in got["pairs"].items() if b == PLAIN}
    assert d == {"same": 0, "first": 1, "short": 1, "long": 1, "gone": 5}
    assert got["pairs"][("first", PLAIN)]["ranges"] == [[0, 1]]
    assert got["pairs"][("short", PLAIN)]["ranges"] == [[5, 6]]      # lacks a byte both plain runs have
    assert got["pairs"][("long", PLAIN)]["ranges"] == [[8, 9]]       # has a byte neither has
    assert got["pairs"][("gone", PLAIN)]["ranges"] == [[0, 2], [3, 6]]
    assert got["pairs"][("first", "same")]["ranges"] == [[0, 1]]      # 2 and 6 vary; 0 does not
    # one plain run: nothing varies, every difference counts
    one = compare_sources(Mem(p1), None, {"same": Mem(b"abZdefg")}, [("same", PLAIN)], chunk=4)
    assert one["varying"]["bytes"] == 0 and one["pairs"][("same", PLAIN)]["ranges"] == [[2, 3], [6, 7]]


@pytest.mark.parametrize("seed", range(6))
def test_compare_random_against_oracle(seed):
    """Random files of different sizes (one sometimes missing) with a few varying and a few
    corrupted positions, compared in chunks of 1, 3, 7 and 64 bytes and in one piece:
    counts, first ranges and range counts equal the position-by-position oracle's."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 90))
    base = rng.integers(0, 4, n, dtype=np.uint8)

    def variant(flips, resize):
        b = base.copy()
        idx = rng.integers(0, n, flips)
        b[idx] = rng.integers(0, 4, flips, dtype=np.uint8)
        m = max(0, n + int(rng.integers(-resize, resize + 1)))
        return np.r_[b, rng.integers(0, 4, max(0, m - n), dtype=np.uint8)][:m].tobytes()

    p1, p2 = variant(4, 3), variant(4, 3)
    runs = {"run 1": variant(6, 4), "run 2": variant(2, 2), "run 3": None if seed % 3 == 0 else variant(0, 0)}
    pairs = [("run 1", PLAIN), ("run 2", PLAIN), ("run 3", PLAIN), ("run 2", "run 1")]
    for chunk in (1, 3, 7, 64, 1 << 20):
        _check_against_oracle(p1, p2, runs, pairs, chunk)
        _check_against_oracle(p1, None, runs, pairs[:2], chunk)


def test_ranges_across_chunks():
    """A range that goes on across chunks is one range; only the first ``keep`` are listed."""
    r = variation.Ranges(keep=2)
    r.add(np.array([0, 1, 1], bool), 0)
    r.add(np.array([1, 1, 0], bool), 3)
    r.add(np.array([1, 0, 1], bool), 6)
    r.add(np.array([1, 1, 1], bool), 9)
    assert variation.n_bytes(1, "vary") == "1 byte varies" and variation.n_bytes(2, "differ") == "2 bytes differ"
    assert r.as_dict() == {"bytes": 9, "ranges": [[1, 5], [6, 7]], "range_count": 3}   # 1-4, 6, 8-11
    assert variation.offsets_text([[1, 5], [6, 7]], 3) == "1–4, 6, … (3 ranges)"


# ---------------------------------------------------------------------- real programs

@pytest.fixture(scope="module")
def iors(lib, build_native, tmp_path_factory):
    """``{"mpiio": IOR with its MPIIO backend, "hdf5": IOR with HDF5 too, or the reason it
    could not be built}``: one build with HDF5 when Debian's package is installed, else IOR's
    own build.sh (POSIX + MPIIO)."""
    if not (IOR_SRC / "build.sh").exists():
        pytest.skip("../shared/clients/ior is absent")
    out = tmp_path_factory.mktemp("ior")
    try:
        exe = build_native.build_ior_hdf5(IOR_SRC / "src", out)
        return {"mpiio": exe, "hdf5": exe}
    except build_native.Unavailable as exc:
        reason = f"IOR's HDF5 backend: {exc}"
    r = subprocess.run(["bash", str(IOR_SRC / "build.sh"), str(out), str(VENV_BIN / "mpicc")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return {"mpiio": Path(r.stdout.strip().splitlines()[-1]), "hdf5": reason}


def _hdf5(iors) -> Path:
    if isinstance(iors["hdf5"], str):
        pytest.skip(iors["hdf5"])
    return iors["hdf5"]


def _flip_after(monkeypatch, label: str, store: Path, name: str, offset: int):
    """Flip the bits of byte ``offset`` of ``name`` in the store right after the run whose
    label starts with ``label`` ends: pario's own corruption, as the comparison must see it."""
    from pario.run import loop
    from pario.store import Store

    real = loop.launch

    def launch(cmd, env, log, timeout, what):
        out = real(cmd, env, log, timeout, what)
        if what.startswith(label):
            with Store(str(store)) as st, st.open(name) as f:
                b = f.read(offset, 1)
                f.write(offset, bytes([b[0] ^ 0xFF]))
        return out

    monkeypatch.setattr(loop, "launch", launch)


def _run(tmp_path, program, args, procs=2, system="ceda-hdd8", **kw):
    from pario.run import exit_status, run_loop

    s = run_loop(str(program), [str(a) for a in args], procs=procs, store=tmp_path / "store", system=system,
                 out=str(tmp_path / "out"), tool_stdout=io.StringIO(), timeout=240, **kw)
    return s, exit_status(s)


def _store_bytes(store: Path, name: str) -> np.ndarray:
    from pario.store import Store

    with Store(str(store)) as st, st.open(name) as f:
        return np.frombuffer(f.read(0, int(f.size)), dtype=np.uint8)


def _report_text(s) -> str:
    from pario.cli.common import console
    from pario.cli.run_cmd import _report

    with console.capture() as cap:
        _report(s)
    return cap.get()


MPIIO = ["-a", "MPIIO", "-G", "5", "-b", "256k", "-t", "64k", "-s", "2", "-w", "-r", "-k"]


def test_ior_mpiio_identical_and_nothing_varies(iors, tmp_path):
    """IOR -a MPIIO under pario run: exit 0, identical; every SHA-256 equals the plain run's,
    so no second plain run is made (no plain-2.log) and no byte varies."""
    data = tmp_path / "ior.dat"
    s, rc = _run(tmp_path, iors["mpiio"], [*MPIIO, "-o", data])
    assert rc == 0 and s["identical"] and s["unmodified"]
    v = s["variation"]
    assert v["plain_runs"] == 1 and v["varying_bytes"] == 0 and v["differing_bytes"] == {}
    assert not (tmp_path / "out" / "plain-2.log").exists() and (tmp_path / "out" / "plain.log").exists()
    assert not (tmp_path / "out" / "compare").exists()
    ref = np.frombuffer(data.read_bytes(), np.uint8)
    assert len(ref) == 2 * 2 * 256 * 1024 and np.array_equal(_store_bytes(tmp_path / "store", str(data)), ref)
    assert "identical bytes: yes (run 1, run 2 and the run without pario)" in _report_text(s)


def test_ior_mpiio_corruption_in_run_1_is_caught(iors, tmp_path, monkeypatch):
    """A byte flipped in the store after run 1 (run 2 writes the file anew): run 1's copy is
    kept, a second plain run finds nothing varying, and exactly that byte is reported — for
    run 1 against the plain run and for run 2 against run 1 — and the run fails."""
    data = tmp_path / "ior.dat"
    x = 300_001
    _flip_after(monkeypatch, "run 1", tmp_path / "store", str(data), x)
    s, rc = _run(tmp_path, iors["mpiio"], [*MPIIO, "-o", data])
    assert rc == 1 and not s["identical"] and not s["plain"]["identical"]
    v = s["variation"]
    f = v["files"][str(data)]
    assert v["plain_runs"] == 2 and v["varying_bytes"] == 0
    assert v["differing_bytes"] == {"run 1": 1, "run 2 vs run 1": 1}
    assert f["differing"]["run 1"] == {"bytes": 1, "ranges": [[x, x + 1]], "range_count": 1}
    assert f["differing"]["run 2 vs run 1"] == {"bytes": 1, "ranges": [[x, x + 1]], "range_count": 1}
    assert "run 2" not in f["differing"]          # same SHA-256 as the plain run's
    assert v["kept"] and Path(v["kept"]).is_dir()
    text = _report_text(s)
    assert f"run 1 vs without pario: 1 byte differs where the runs without pario agree, at {x}" in text
    assert "identical bytes: NO" in text


HDF5 = ["-a", "HDF5", "-G", "5", "-b", "256k", "-t", "64k", "-s", "2", "-w", "-r", "-k"]


def test_ior_hdf5_loads_only_the_wheels_mpi(iors, tmp_path):
    """IOR with HDF5 linked statically: the dynamic loader (LD_DEBUG=libs) loads the wheel's
    libmpi.so.12 and no other MPI (Debian's libmpich, which the shared libhdf5 would bring)."""
    exe = _hdf5(iors)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PARIO_")}, "LD_DEBUG": "libs"}
    cp = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", "1", str(exe), *HDF5, "-o", str(tmp_path / "x.h5")],
                        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr[-2000:]
    loaded = {ln.split("calling init: ")[1].strip() for ln in cp.stderr.splitlines() if "calling init: " in ln}
    mpi = {p for p in loaded if "libmpi" in Path(p).name}
    assert mpi and all(Path(p).parent == VENV_BIN.parent / "lib" for p in mpi), mpi
    assert not any("mpich" in Path(p).name or "hdf5" in Path(p).name for p in loaded), loaded


def test_ior_hdf5_variation_reported_and_the_rest_identical(iors, tmp_path, monkeypatch):
    """IOR -a HDF5 under pario run (CEDA replicas on the slow servers: run 2's reads and writes
    go through them; --repeat 2: every run's files judged): exit 0 and identical, with the bytes
    HDF5 varies (modification times) reported — exactly where the two plain files differ,
    recomputed here with numpy — and the last run 2's file equal to the second plain run's at
    every other byte."""
    from test_run import HDD2_SLOW2

    exe = _hdf5(iors)
    moved = {}
    real_move = variation.Kept.move

    def move(self, name, digest):       # note where the first plain run's file went (the oracle reads it)
        real_move(self, name, digest)
        moved[name] = self.path(name, digest)

    monkeypatch.setattr(variation.Kept, "move", move)
    monkeypatch.setattr(variation.Kept, "remove", lambda self: None)
    from pario.run import loop

    real = loop.launch

    def launch(cmd, env, log, timeout, what):   # run 2 a second after the plain run: other time stamps
        if what.startswith("run 2 (1 of"):
            time.sleep(1.1)
        return real(cmd, env, log, timeout, what)

    monkeypatch.setattr(loop, "launch", launch)
    (tmp_path / "p.toml").write_text(HDD2_SLOW2)
    data = tmp_path / "ior.h5"
    s, rc = _run(tmp_path, exe, [*HDF5, "-o", data], system=str(tmp_path / "p.toml"), repeat=2)
    assert rc == 0 and s["identical"] and s["plain"]["identical"], s["variation"]
    assert s["redirected"]["hit_write_requests"] > 0           # run 2 wrote through replicas
    v, name = s["variation"], str(data)
    f = v["files"][name]
    assert v["plain_runs"] == 2 and v["differing_bytes"] == {}
    assert set(f["differing"]) <= {"run 1", "run 1 (2 of 2)", "run 2", "run 2 (2 of 2)", "run 2 vs run 1"}
    a = np.frombuffer(Path(moved[name]).read_bytes(), np.uint8)
    b = np.frombuffer(data.read_bytes(), np.uint8)
    assert len(a) == len(b) == f["plain_sizes"][0] == f["plain_sizes"][1]
    vary = np.flatnonzero(a != b)
    assert 0 < len(vary) == v["varying_bytes"] == f["varying_bytes"] < 64
    starts = vary[np.r_[True, np.diff(vary) > 1]]
    assert [r[0] for r in f["varying_ranges"]] == starts[:variation.KEEP].tolist()
    st = _store_bytes(tmp_path / "store", name)
    keep = np.ones(len(b), bool)
    keep[vary] = False
    assert len(st) == len(b) and np.array_equal(st[keep], b[keep])
    text = _report_text(s)
    assert f"identical bytes: yes: {len(vary)} bytes vary from run to run; all other bytes identical" in text
    assert f"{name}: {len(vary)} bytes vary from run to run (two runs without pario differ at {vary[0]}" in text


def test_ior_hdf5_corruption_outside_the_varying_bytes_is_caught(iors, tmp_path, monkeypatch):
    """The negative control: a byte of run 2's file flipped in the store, in IOR's data (not
    where HDF5 keeps its times): reported at exactly its offset, against the plain run and
    against run 1, and the run fails; the varying bytes are still reported."""
    exe = _hdf5(iors)
    data = tmp_path / "ior.h5"
    x = 700_000
    _flip_after(monkeypatch, "run 2", tmp_path / "store", str(data), x)
    s, rc = _run(tmp_path, exe, [*HDF5, "-o", data])
    assert rc == 1 and not s["identical"]
    v = s["variation"]
    f = v["files"][str(data)]
    assert v["plain_runs"] == 2 and v["varying_bytes"] > 0
    assert not any(a <= x < b for a, b in f["varying_ranges"])
    assert f["differing"]["run 2"] == {"bytes": 1, "ranges": [[x, x + 1]], "range_count": 1}
    assert f["differing"]["run 2 vs run 1"] == {"bytes": 1, "ranges": [[x, x + 1]], "range_count": 1}
    assert f["differing"].get("run 1", {"bytes": 0})["bytes"] == 0
    assert v["differing_bytes"] == {"run 2": 1, "run 2 vs run 1": 1}
    assert ("identical bytes: NO: bytes differ where the runs without pario agree (run 2 vs without pario: 1 byte; "
            f"run 2 vs run 1: 1 byte); {v['varying_bytes']} bytes vary from run to run") in _report_text(s)


# ---------------------------------------------------------------------- the repo's C programs

@pytest.fixture(scope="module")
def c_programs(lib, tmp_path_factory):
    out = tmp_path_factory.mktemp("cprog")
    exes = {}
    for src in ("tracer_styles", "serve_resize", "reboot_check"):
        exe = out / src
        r = subprocess.run([str(VENV_BIN / "mpicc"), "-std=c11", "-O2", "-Wall", "-Werror",
                            str(C_DIR / f"{src}.c"), "-o", str(exe)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        exes[src] = exe
    return exes


@pytest.mark.parametrize("program,args,file", [
    ("tracer_styles", ["aggregators", "{d}", "48", "8"], "aggregators.dat"),    # two-phase, 2 aggregators
    ("tracer_styles", ["darray", "{d}", "48", "8"], "darray.dat"),              # a darray file view
    ("tracer_styles", ["nbwait", "{d}", "48", "8"], "nbwait.dat"),              # nonblocking + MPI_Wait
    ("serve_resize", ["{d}/resize.dat"], "resize.dat"),                         # set_size between writes
    ("reboot_check", ["{d}/check.dat", "3", "65536", "run"], "check.dat"),      # write, sync, read back
], ids=["styles-aggregators", "styles-darray", "styles-nbwait", "serve_resize", "reboot_check"])
def test_c_programs_under_pario_run(c_programs, tmp_path, program, args, file):
    """The repo's C MPI-IO programs under pario run (4 ranks, hacio-6h2s): exit 0, identical,
    no second plain run needed, and the store's file equals the one the program wrote
    without pario (at its path), byte for byte."""
    d = tmp_path / "data"
    d.mkdir()
    s, rc = _run(tmp_path, c_programs[program], [a.format(d=d) for a in args], procs=4, system="hacio-6h2s")
    name = str(d / file)
    assert rc == 0 and s["identical"] and s["fsck_ok"] and s["unmodified"]
    assert s["variation"]["plain_runs"] == 1 and s["variation"]["varying_bytes"] == 0
    ref = np.frombuffer((d / file).read_bytes(), np.uint8)
    assert len(ref) > 0 and np.array_equal(_store_bytes(tmp_path / "store", name), ref)


def test_ior_hdf5_build_says_why_it_cannot(build_native, monkeypatch, tmp_path):
    """Without Debian's parallel HDF5 (or IOR's source) the build helper raises Unavailable
    with the reason (the HDF5 tests skip with it), before compiling anything."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "aiori-HDF5.c").write_text("")
    monkeypatch.setattr(build_native, "HDF5_PKG", "no-such-hdf5-package")
    with pytest.raises(build_native.Unavailable, match="apt-get install libhdf5-mpich-dev"):
        build_native.build_ior_hdf5(src, tmp_path / "out")
    with pytest.raises(build_native.Unavailable, match="no IOR source"):
        build_native.build_ior_hdf5(tmp_path / "empty", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_report_says_sizes_and_where():
    """The printed lines for a file whose plain runs differ in size, and a run that differs
    where they agree (and has a size of its own)."""
    from pario.cli.common import console
    from pario.cli.run_cmd import _report_variation

    vr = {"plain_runs": 2, "varying_bytes": 3, "differing_bytes": {"run 2": 2}, "identical": False, "kept": "OUT/c",
          "files": {"f.dat": {"plain_sizes": [6, 8], "varying_bytes": 3, "varying_ranges": [[2, 3], [6, 8]],
                              "varying_range_count": 2, "sizes": {"run 2": 10},
                              "differing": {"run 2": {"bytes": 2, "ranges": [[8, 10]], "range_count": 1}}}}}
    with console.capture() as cap:
        _report_variation(vr)
    lines = [ln.strip() for ln in cap.get().splitlines()]
    assert lines == ["f.dat: 3 bytes vary from run to run (two runs without pario differ at 2, 6–7); their sizes "
                     "differ (6 and 8 bytes)",
                     "f.dat: run 2 vs without pario: 2 bytes differ where the runs without pario agree, at 8–9 "
                     "(run 2 has 10 bytes)",
                     "the runs' files are kept in OUT/c"]


def test_ior_unseeded_shuffle_is_named_and_its_bytes_follow_the_clock(iors, tmp_path):
    """IOR -z on a shared file writes other bytes in another second unless seeded (IOR's
    init_random_seed: time(NULL)); with --random-offset-seed its bytes repeat.  The real
    program is the oracle of unseeded_randomness: it names exactly the setting whose output
    followed the clock here."""
    mpiexec = VENV_BIN / "mpiexec"
    base = ["-a", "MPIIO", "-G", "5", "-b", "64k", "-t", "16k", "-s", "4", "-z", "-k", "-w"]

    def once(args, name):
        out = tmp_path / name
        r = subprocess.run([str(mpiexec), "-n", "4", str(iors["mpiio"]), *args, "-o", str(out)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return out.read_bytes()

    def twice(args):
        a = once(args, "a.dat")
        time.sleep(1.1)          # another second of the clock
        return a, once(args, "b.dat")

    a, b = twice(base)
    assert a != b                                          # the clock dealt the transfers otherwise
    assert "--random-offset-seed" in variation.unseeded_randomness(iors["mpiio"], base)
    seeded = [*base, "--random-offset-seed=7"]
    a, b = twice(seeded)
    assert a == b
    assert variation.unseeded_randomness(iors["mpiio"], seeded) is None
    # the settings that do not vary: reads only, a file per process, no -z, another program
    assert variation.unseeded_randomness("ior", ["-z", "-r", "-k"]) is None
    assert variation.unseeded_randomness("ior", ["-z", "-F", "-w"]) is None
    assert variation.unseeded_randomness("ior", ["-w", "-r"]) is None
    assert variation.unseeded_randomness("./my_app", ["-z", "-w"]) is None
    assert variation.unseeded_randomness("ior", ["-zz"]) is not None     # write and read: IOR's default
