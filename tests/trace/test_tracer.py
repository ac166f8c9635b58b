"""The pario MPI-IO tracer (libpario_trace.so, LD_PRELOAD) and its reader, on real MPI.

tests/c/tracer_styles.c runs one MPI-IO access style per file under ``mpiexec -n 4``
(MPICH's ROMIO, the wheel's).  Every traced extent is compared with the extents this file
derives on its own, in numpy, from the program's parameters (block size B, block count N,
4 ranks) and the layouts the MPI standard defines for each view: explicit offsets,
individual and shared file pointers, ordered calls (rank order, MPI-4.1 §14.4.4),
collective, nonblocking (MPI_Wait, MPI_Testall) and split calls, vector, subarray, darray
(element ownership by BLOCK and CYCLIC(2), §5.1.4), indexed, struct and resized views, a
large-count (_c) call and a short read at end of file.  Shared-pointer writes are checked
byte by byte against the file they produced; the aggregators against ROMIO's own list
(``romio_aggregator_list``) and the bytes it wrote; a killed program leaves a readable
partial trace; without PARIO_TRACE_DIR the program's output is unchanged and no file
appears.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import C_DIR, VENV_BIN

from pario import ParioError
from pario.trace.native import CALLS, F_ERROR, F_FREED, F_PENDING, kind_name, read_calls, read_native

SRC = C_DIR / "tracer_styles.c"
P, B, N = 4, 48, 8
STYLES = ("at", "individual", "all", "vector", "subarray", "darray", "indexed", "struct", "resized", "nbwait",
          "nbtestall", "split", "shared", "ordered", "large", "short", "aggregators", "more")


class Env:
    """The compiled program and the tracer library."""

    def __init__(self, tmp: Path, bn):
        if not (VENV_BIN / "mpicc").exists() or not (VENV_BIN / "mpiexec").exists():
            pytest.skip("the MPICH wheel's mpicc/mpiexec are not installed (scripts/setup.sh test)")
        self.lib = bn.build_tracer(quiet=True)
        if self.lib is None:
            pytest.skip("no mpicc: the tracer is not built")
        self.tmp = tmp
        self.exe = tmp / "tracer_styles"
        r = subprocess.run([*bn.mpicc(), "-std=c11", "-Wall", "-Wextra", "-Werror", str(SRC), "-o", str(self.exe)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    def run(self, style: str, name: str, *, trace: bool = True, preload: bool = True, n: int = N,
            extra_env: dict | None = None, check: bool = True):
        """Run STYLE in a fresh directory tmp/NAME (data files in NAME/data, records in
        NAME/trace); the CompletedProcess and the two directories."""
        base = self.tmp / name
        data, tdir = base / "data", base / "trace"
        data.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PARIO_TRACE_DIR", "LD_PRELOAD")}
        if preload:
            env["LD_PRELOAD"] = str(self.lib)
        if trace:
            tdir.mkdir()
            env["PARIO_TRACE_DIR"] = str(tdir)
        env.update(extra_env or {})
        cp = subprocess.run([str(VENV_BIN / "mpiexec"), "-n", str(P), str(self.exe), style, str(data), str(B), str(n)],
                            capture_output=True, text=True, env=env, cwd=str(base), timeout=120)
        if check:
            assert cp.returncode == 0, cp.stderr
        return cp, data, tdir


@pytest.fixture(scope="module")
def env(tmp_path_factory, build_native):
    return Env(tmp_path_factory.mktemp("tracer"), build_native)


@pytest.fixture(scope="module")
def traced(env):
    """Every style in one traced run: (trace, data calls, file names, data dir, trace dir, stdout)."""
    cp, data, tdir = env.run("all", "all")
    calls, names = read_calls(tdir)
    return read_native(tdir), calls, names, data, tdir, cp.stdout


# ---------------------------------------------------------------------- the expected extents

def _merge(ext: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent extents (in data order) joined, as the tracer records them."""
    out: list[list[int]] = []
    for o, n in ext:
        if out and out[-1][0] + out[-1][1] == o:
            out[-1][1] += n
        else:
            out.append([o, n])
    return [tuple(e) for e in out]


def _darray_runs(r: int) -> list[tuple[int, int]]:
    """MPI_Type_create_darray, ints, 8 x 12, BLOCK x CYCLIC(2) on a 2 x 2 grid, C order
    (MPI-4.1 §5.1.4): element (i, j) belongs to process (i // ceil(8/2), (j // 2) % 2)."""
    i, j = np.meshgrid(np.arange(8), np.arange(12), indexing="ij")
    owner = (i // 4) * 2 + (j // 2) % 2
    offs = ((i * 12 + j) * 4)[owner == r]           # row-major: the local array's order
    return _merge([(int(o), 4) for o in offs])


def expected(style: str, r: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """[(op, extents of the call)] of rank r, in call order (op 0 read, 1 write)."""
    blocks = [((i * P + r) * B, B) for i in range(N)]
    if style in ("at", "all"):
        return [(1, [b]) for b in blocks] + [(0, [b]) for b in blocks]
    if style == "individual":
        mine = [(r * N * B + i * B, B) for i in range(N)]
        return [(1, [b]) for b in mine] + [(0, [b]) for b in mine]
    if style in ("vector", "large"):
        vec = [(r * B + i * P * B, B) for i in range(N)]
        return [(1, vec[:N // 2]), (1, vec[N // 2:])] if style == "vector" else [(1, vec)]
    if style == "subarray":
        py, px = divmod(r, 2)
        return [(1, [(((py * N + j) * 16 + px * 8) * 4, 32) for j in range(N)])]
    if style == "darray":
        return [(1, _darray_runs(r))]
    if style == "indexed":
        lens, displs = (2, 1, 3), (2 * r, 8 + r, 12 + 3 * r)
        return [(1, _merge([((k * 24 + d) * 4, n * 4) for k in range(2) for d, n in zip(displs, lens)]))]
    if style == "struct":
        return [(1, [(32 * r + k * 32 * P + d, 8) for k in range(N) for d in (0, 16)])]
    if style == "resized":
        return [(1, [(r * B + k * 2 * P * B, B) for k in range(N)])]
    if style == "nbwait":
        return [(1, [(r * N * B, N * B)]), (0, [(r * N * B, N * B)])]
    if style == "nbtestall":
        h = N * B // 2
        return [(1, [(r * N * B, N * B)]), (0, [(r * N * B, h)]), (0, [(r * N * B + h, h)])]
    if style == "split":
        return [(1, [(r * B, B)]), (0, [(r * B, B)])]
    if style == "ordered":   # rank order: rank r after ranks 0..r-1 (MPI-4.1 §14.4.4)
        sizes = 16 * (np.arange(P) + 1)
        before, total = int(sizes[:r].sum()), int(sizes.sum())
        return [(1, [(k * total + before, int(sizes[r]))]) for k in range(2)]
    if style == "short":
        return [(1, [(r * B, B)]), (0, [(P * B - 10 - r, 100)])]
    if style == "aggregators":
        return [(1, [b]) for b in blocks]
    raise AssertionError(style)


def traced_calls(tr, name: str, r: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """[(op, extents)] of rank r on the file named NAME, from the trace, in call order."""
    f = tr.files.index(name)
    m = (tr.rank == r) & (tr.file == f)
    order = np.argsort(tr.order[m], kind="stable")
    call, op = tr.call[m][order], tr.op[m][order]
    off, ln = tr.offset[m][order], tr.length[m][order]
    out = []
    for c in np.unique(call):      # a handful of calls per rank and file
        k = call == c
        out.append((int(op[k][0]), [(int(a), int(b)) for a, b in zip(off[k], ln[k])]))
    return out


def _name(data: Path, style: str) -> str:
    return str(data / f"{style}.dat")


# ---------------------------------------------------------------------- every style

@pytest.mark.parametrize("style", [s for s in STYLES if s not in ("shared", "more")])
def test_extents_match_the_standard(traced, style):
    tr, calls, names, data, _, _ = traced
    for r in range(P):
        assert traced_calls(tr, _name(data, style), r) == expected(style, r), (style, r)


KINDS = {"at": ("at blocking", False), "individual": ("individual blocking", False), "all": ("at blocking", True),
         "vector": ("individual blocking", True), "resized": ("individual blocking", False),
         "nbwait": (None, False), "nbtestall": (None, False), "split": (None, True),
         "shared": ("shared blocking", False), "ordered": ("ordered blocking", True),
         "large": ("at blocking", True)}


@pytest.mark.parametrize("style", sorted(KINDS))
def test_kind_collective_and_bytes(traced, style):
    """Each call's kind and collective flag is the routine's; its data bytes are count x
    the datatype's size, which (no short reads here) the status confirms."""
    tr, calls, names, data, _, _ = traced
    c = calls[calls["file"] == names.index(_name(data, style))]
    kind, coll = KINDS[style]
    if kind is not None:
        assert {kind_name(k) for k in c["kind"]} == {kind}
    assert (c["collective"] == coll).all()
    for r in range(P):
        want = [sum(n for _, n in ext) for _, ext in expected(style, r)] if style != "shared" else [16 * (r + 1)] * N
        mine = c[c["rank"] == r]
        assert mine["bytes"].tolist() == want
        if style == "nbtestall":    # what MPICH's MPI_Testall statuses said (tracer_styles.c)
            said = [int(line.split()[0]) for line in (data.parent / f"nbtestall-{r}.txt").read_text().splitlines()]
            assert mine["moved"].tolist() == want[:1] + said
        else:
            assert mine["moved"].tolist() == want
    assert (c["end"] >= c["start"]).all()


def test_nonblocking_and_split_completion(traced):
    """MPI_Wait, MPI_Testall and *_end complete the calls they issued: kinds, the status's
    bytes, and one completion time for the requests one MPI_Testall completed (the program
    says which poll completed each: MPICH's MPI_ERR_IN_STATUS may complete one request and a
    later call the other, MPI-4.1 §3.7.5)."""
    tr, calls, names, data, _, _ = traced
    for style, kinds in (("nbwait", ["at blocking", "at nonblocking"]),
                         ("nbtestall", ["at blocking", "individual nonblocking", "individual nonblocking"]),
                         ("split", ["at split", "individual split"])):
        c = calls[calls["file"] == names.index(_name(data, style))]
        for r in range(P):
            mine = c[c["rank"] == r]
            assert [kind_name(k) for k in mine["kind"]] == kinds
            assert not np.isnan(mine["end"]).any()
            if style == "nbtestall":
                polls = [int(line.split()[1]) for line in (data.parent / f"nbtestall-{r}.txt").read_text().splitlines()]
                ends = mine["end"][1:3].tolist()
                assert (ends[0] == ends[1]) == (polls[0] == polls[1]), (ends, polls)   # one call, one time
                if polls[0] != polls[1]:                                # the later poll, the later time
                    assert (ends[0] < ends[1]) == (polls[0] < polls[1]), (ends, polls)
                assert mine["start"][1] <= mine["start"][2] <= max(ends)


def test_every_other_routine(traced):
    """The rest of §14.4 (tracer_styles.c "more"): nonblocking collectives completed by
    MPI_Waitany and MPI_Waitsome, split ordered and explicit-offset collectives, read_ordered
    after seek_shared, a request freed unseen, _c nonblocking calls completed by MPI_Testany
    and MPI_Testsome, and read_shared / iwrite_shared, whose extents tile [0, P*B) once."""
    tr, calls, names, data, _, _ = traced
    name = _name(data, "more")
    c = calls[calls["file"] == names.index(name)]
    kinds = ["at nonblocking", "individual nonblocking", "ordered split", "ordered blocking", "at split",
             "at nonblocking", "at nonblocking", "at nonblocking", "shared blocking", "shared nonblocking"]
    ops = [1, 0, 1, 0, 0, 0, 0, 1, 0, 1]
    shared_starts = {8: [], 9: []}
    for r in range(P):
        mine = c[c["rank"] == r]
        assert [kind_name(k) for k in mine["kind"]] == kinds
        assert mine["collective"].tolist() == [True] * 5 + [False] * 5
        assert mine["op"].tolist() == ops and (mine["bytes"] == B).all()
        assert mine["moved"].tolist() == [B] * 5 + [-1] + [B] * 4     # a freed request has no status
        assert ((mine["flags"] & F_FREED) != 0).tolist() == [i == 5 for i in range(10)]
        assert not (mine["flags"] & F_PENDING).any() and not np.isnan(mine["end"]).any()
        ext = traced_calls(tr, name, r)
        assert ext[:8] == [(op, [(r * B, B)]) for op in ops[:8]]
        for k in shared_starts:
            (o, n), = ext[k][1]
            assert n == B
            shared_starts[k].append(o)
    for k, starts in shared_starts.items():
        assert sorted(starts) == [q * B for q in range(P)]
    assert any(f"{P} request(s) freed" in n for n in tr.meta.notes)


def test_shared_pointer_writes_cover_the_file_once(traced):
    """4 ranks write_shared at once: the traced extents tile [0, total) exactly once, and
    each byte of the file holds the rank whose extent covers it."""
    tr, calls, names, data, _, _ = traced
    f = tr.files.index(_name(data, "shared"))
    m = tr.file == f
    off, ln, rk = tr.offset[m], tr.length[m], tr.rank[m]
    total = N * 16 * sum(range(1, P + 1))
    assert int(ln.sum()) == total
    owner = np.full(total, -1)
    cover = np.zeros(total, dtype=np.int64)
    for o, n, r in zip(off, ln, rk):     # N * P extents
        cover[o:o + n] += 1
        owner[o:o + n] = r
    assert (cover == 1).all()
    content = np.frombuffer((data / "shared.dat").read_bytes(), dtype=np.uint8)
    assert len(content) == total
    assert np.array_equal(content, owner.astype(np.uint8))
    for r in range(P):                   # each rank's lengths, its own parameters
        assert sorted(ln[rk == r].tolist()) == [16 * (r + 1)] * N


def test_short_read_keeps_the_request_and_the_moved_bytes(traced):
    tr, calls, names, data, _, _ = traced
    c = calls[(calls["file"] == names.index(_name(data, "short"))) & (calls["op"] == 0)]
    assert c["rank"].tolist() == list(range(P))
    assert c["bytes"].tolist() == [100] * P
    assert c["moved"].tolist() == [10 + r for r in range(P)]       # the file ends at P*B
    # the note counts every call the records say moved less than it asked for (its own
    # reader against read_calls): this style's 90 - r bytes each, and any other short call
    # of the run (none expected; named in the message if one shows up)
    short = calls[(calls["moved"] >= 0) & (calls["moved"] < calls["bytes"]) & ((calls["flags"] & F_ERROR) == 0)]
    lost = int((short["bytes"] - short["moved"]).sum())
    assert lost >= sum(90 - r for r in range(P))
    assert any("short reads" in n and f"{len(short)} call(s)" in n and f"{lost} B" in n for n in tr.meta.notes), \
        (tr.meta.notes, short.tolist())


def test_job_metadata(traced):
    tr, calls, names, data, tdir, _ = traced
    m = tr.meta
    assert m.source == "pario tracer" and m.nprocs == P and not m.partial
    assert str(SRC.stem) in m.command and m.command.endswith(f"all {data} {B} {N}")
    assert set(tr.files) == {_name(data, s) for s in STYLES}
    assert m.hint("romio_filesystem_type") is not None
    # one clock for all ranks, zeroed at MPI_Init: every call lies within the run
    assert (tr.start >= 0).all() and (tr.end >= tr.start).all()
    # calls are numbered per rank in increasing order of issue
    for r in range(P):
        ids = calls["id"][calls["rank"] == r]
        assert (np.diff(ids) > 0).all()


def test_aggregators_are_romios(env):
    """cb_nodes 2 with collective buffering forced: the ranks the POSIX layer saw writing
    during the collective calls are ROMIO's aggregator list, and they wrote every byte."""
    cp, data, tdir = env.run("aggregators", "aggregators")
    romio = [int(x) for x in cp.stdout.split("romio_aggregator_list=")[1].split()]
    assert len(romio) == 2
    tr = read_native(tdir)
    assert list(tr.meta.aggregators) == romio
    assert tr.meta.hint("cb_nodes") == "2" and tr.meta.hint("romio_cb_write") == "enable"
    job = json.loads((tdir / "job.json").read_text())
    (entry,) = job["files"]
    coll_written = {row[0]: row[2] for row in entry["posix_bytes"]}
    assert sorted(r for r, b in coll_written.items() if b > 0) == romio
    assert sum(coll_written.values()) == N * P * B == tr.bytes_written


def test_tracing_off_changes_nothing(env, traced):
    """Preloaded without PARIO_TRACE_DIR: same output, same files, nothing else written;
    and the traced run wrote the same data."""
    cp_off, data_off, _ = env.run("all", "off", trace=False)
    cp_plain, data_plain, _ = env.run("all", "plain", trace=False, preload=False)
    assert cp_off.stdout == cp_plain.stdout == traced[5]
    assert sorted(p.name for p in (env.tmp / "off").rglob("*")) == sorted(p.name for p in (env.tmp / "plain").rglob("*"))
    for f in sorted(data_plain.iterdir()):
        ref = f.read_bytes()
        for d in (data_off, traced[3]):
            got = (d / f.name).read_bytes()
            if f.name in ("shared.dat", "more.dat"):     # the order of shared-pointer writes is the run's
                got, want = bytes(sorted(got)), bytes(sorted(ref))
            else:
                want = ref
            diff = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
            assert got == want, (f"{d.parent.name}/{f.name}: {len(got)} vs {len(want)} bytes, {len(diff)} differ "
                                 f"from {diff[:1]}: {got[:256].hex()} vs {want[:256].hex()}")


def test_killed_program_leaves_a_partial_trace(env, tmp_path):
    """Rank 1 dies of SIGKILL after 3/4 of its writes; with a 4 KiB buffer most records were
    spilled: each rank's trace is a prefix of its writes, and the trace says it is partial.
    run_traced reports the failure in one line and saves what was recorded."""
    from pario.trace import load
    from pario.trace.launch import run_traced

    n = 400
    out = tmp_path / "kill.parquet"
    with pytest.raises(ParioError) as exc:
        run_traced([str(env.exe), "kill", str(tmp_path), "16", str(n)], P, out,
                   env={**os.environ, "PARIO_TRACE_BUFFER": "4096"})
    assert "\n" not in str(exc.value) and "partial" in str(exc.value)
    tr = load(out)
    assert tr.meta.partial and any("MPI_Finalize" in note for note in tr.meta.notes)
    for r in range(P):
        off = tr.offset[tr.rank == r]
        k = len(off)
        assert np.array_equal(off, (np.arange(k) * P + r) * 16)
        assert (tr.length[tr.rank == r] == 16).all()
        if r == 1:
            assert 4096 // 80 <= k <= 3 * n // 4    # at least one full buffer spilled


def test_cli_run_then_show(env, tmp_path, capsys):
    from pario.cli import main

    out = tmp_path / "v.parquet"
    assert main(["trace", "run", "--procs", str(P), "-o", str(out), "--", str(env.exe), "vector", str(tmp_path),
                 str(B), str(N)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == (f"tracer_styles: {N * P} requests in {2 * P} calls from {P} of {P} ranks on 1 file, "
                    f"{N * P * B / 1024:g} KiB written, 0 B read -> {out}")
    assert main(["trace", "show", str(out)]) == 0
    assert str(out) in capsys.readouterr().out


def test_pario_run_serves_a_c_program(env, tmp_path):
    """``pario run`` on a C MPI-IO program (not pario.mpi.File): run 1 is traced by the
    preloaded library and served from the store, the trace holds every extent of the vector
    view (as ``pario trace run`` gives them), advise plans it, run 2 runs with the plan, and
    the store's file equals the file the program writes without pario, byte for byte."""
    from pario.run import exit_status, run_loop
    from pario.trace import load

    data = tmp_path / "data"
    data.mkdir()
    s = run_loop(str(env.exe), ["vector", str(data), str(B), str(N)], procs=P, store=tmp_path / "store",
                 system="hacio-6h2s", out=str(tmp_path / "out"), tool_stdout=io.StringIO())
    name = str(data / "vector.dat")
    assert s["unmodified"] is True and exit_status(s) == 0 and s["identical"] and s["fsck_ok"]
    assert s["plain"]["files"][name] == s["files"][name] == s["files_run1"][name]
    tr = load(tmp_path / "out" / "run1.parquet")
    assert tr.meta.source == "pario tracer" and len(tr) == N * P and tr.bytes_written == N * P * B
    for r in range(P):
        assert traced_calls(tr, name, r) == expected("vector", r)
    assert load(tmp_path / "out" / "run2.parquet").bytes_written == N * P * B
    assert not list((tmp_path / "out").glob("*.pxt"))


def test_run_traced_failure_is_one_line(env, tmp_path):
    from pario.trace.launch import run_traced

    with pytest.raises(ParioError, match=r"exited with status \d+: unknown style nope$"):
        run_traced([str(env.exe), "nope", str(tmp_path), "16", "2"], 2, tmp_path / "x.parquet")
    with pytest.raises(ParioError, match="unknown trace format"):
        run_traced([str(env.exe)], 1, tmp_path / "x.txt")


# ---------------------------------------------------------------------- bad record files

def _one_line_or_ok(tdir: Path):
    try:
        return read_native(tdir)
    except ParioError as exc:
        assert "\n" not in str(exc)
        return None


def test_garbage_rank_files_are_one_line(traced, tmp_path):
    """Random bytes, a valid file with flipped bytes, and truncations: never anything but
    one ParioError line; a truncated file reads as partial."""
    _, _, _, _, tdir, _ = traced
    rng = np.random.default_rng(7)
    good = (tdir / "rank-2.pxt").read_bytes()
    for trial in range(60):
        d = tmp_path / f"t{trial}"
        shutil.copytree(tdir, d)
        f = d / "rank-2.pxt"
        if trial < 20:          # random bytes
            f.write_bytes(rng.integers(0, 256, int(rng.integers(0, 3000)), dtype=np.uint8).tobytes())
            with pytest.raises(ParioError):
                read_native(d)
            _one_line_or_ok(d)
        elif trial < 40:        # flipped bytes after the header
            b = bytearray(good)
            for i in rng.integers(64, len(b), 8):
                b[i] ^= int(rng.integers(1, 256))
            f.write_bytes(bytes(b))
            _one_line_or_ok(d)
        else:                   # cut anywhere: partial, never an error
            f.write_bytes(good[:int(rng.integers(0, len(good)))])
            tr = read_native(d)
            assert tr.meta.partial


def test_not_a_trace_directory(tmp_path):
    with pytest.raises(ParioError, match="no pario tracer records"):
        read_native(tmp_path)
    with pytest.raises(ParioError, match="not a trace directory"):
        read_native(tmp_path / "missing")
    assert CALLS.names[0] == "rank"
