"""Bad input: one line on stderr, exit 2, nothing left behind — for the cases users hit and for
random bytes, rows and strings fed to every reader and parser."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from helpers import PARIO, ROOT, TRACES, run_cli as run


HYP = dict(deadline=None, suppress_health_check=list(HealthCheck))


def one_line_error(rc, err, *needles):
    assert rc == 2, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: error: "), err
    assert "internal error" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def ok_or_one_line(rc, err):
    """Success, or exactly one error line (never an internal error or a traceback)."""
    if rc == 0:
        return
    one_line_error(rc, err)


def csv(tmp_path, rows, name="t.csv"):
    p = tmp_path / name
    p.write_text("rank,file,op,offset,length\n" + "".join(f"{r}\n" for r in rows))
    return p


def test_argument_errors_of_every_command_are_one_pario_error_line(tmp_path):
    for argv in (["simulate", tmp_path / "t.parquet", "--layout", "fixed:64k"], ["trace", "show"],
                 ["advise", "--schemes", "all"], ["bogus"], ["trace", "bogus"]):
        one_line_error(*run(*argv)[::2])
    rc, _, err = run("simulate", "x.parquet", "--layout", "fixed:64k")
    one_line_error(rc, err, "simulate: ", "--system")


def test_output_closed_early_is_not_an_error(tmp_path):
    """``pario … | head``: the reader goes away; exit 0, nothing on stderr."""
    t = tmp_path / "t.parquet"
    assert run("workload", "ior", "--procs", 4, "--xfer", "4k", "--block", "64k", "--segments", 64, "--pattern",
               "random", "--op", "both", "-o", t)[0] == 0  # a CEDA plan of ≈ 200 kB: beyond a pipe's buffer
    proc = subprocess.Popen([*PARIO,
                             "advise", str(t), "--system", "ceda-hdd8", "--schemes", "padp,ceda", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()  # before pario writes the rest
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and err == "", err


# ---------------------------------------------------------------------- the cases of issue 14
def test_csv_lengths_beyond_int64_and_empty_traces(tmp_path):
    one_line_error(*run("trace", "show", csv(tmp_path, ["0,f,write,0,99999999999999999999999"]))[::2],
                   "length", "2^63-1")
    one_line_error(*run("simulate", csv(tmp_path, ["0,f,write,9223372036854775000,9223372036854775000"]),
                        "--system", "ceda-hdd8", "--layout", "fixed:64k")[::2], "beyond 2^63-1")
    for rows, what in (([], "empty trace (no requests)"), (["0,f,write,0,0", "1,f,read,10,0"], "none of them moves")):
        p = csv(tmp_path, rows)
        for argv in (("trace", "show", p), ("simulate", p, "--system", "ceda-hdd8", "--layout", "fixed:64k"),
                     ("advise", p, "--system", "ceda-hdd8")):
            one_line_error(*run(*argv)[::2], what)


def test_layout_specs_name_the_spec_and_the_limits(tmp_path):
    p = csv(tmp_path, ["0,f,write,0,64k"])
    for spec, what in (("fixed:99999999999999999999999", "beyond 2^63-1"), ("fixed:3", "below the minimum stripe size"),
                       ("fixed:0", "below the minimum stripe size"), ("var:hdd=0,ssd=100", "below the minimum"),
                       ("2d:2:1", "below the minimum")):
        one_line_error(*run("layout", "map", p, "--system", "ceda-hdd8", "--layout", spec)[::2], repr(spec), what)
    rc, out, err = run("layout", "map", p, "--system", "ceda-hdd8", "--layout", "fixed:512")
    assert rc == 0, err
    rc, out, err = run("layout", "map", p, "--system", "padp-6h2s", "--layout", "var:hdd=0,ssd=100k")
    assert rc == 0, err                      # 0 leaves a kind out, as PADP's ⟨0, s⟩ does


def test_store_get_into_a_missing_directory_and_init_into_a_full_one(tmp_path):
    root = tmp_path / "st"
    assert run("store", "init", root, "--system", "ceda-hdd8")[0] == 0
    src = tmp_path / "d.bin"
    src.write_bytes(os.urandom(100_000))
    assert run("store", "put", src, "f", "--store", root, "--layout", "fixed:64k")[0] == 0
    one_line_error(*run("store", "get", "f", tmp_path / "missing" / "dir" / "x", "--store", root)[::2],
                   "No such file or directory")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    one_line_error(*run("store", "init", full, "--system", "ceda-hdd8")[::2], "not empty")
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"]


def test_trace_import_refuses_an_output_name_that_is_not_a_trace_format(tmp_path):
    log = TRACES / "ior-mpiio-strided-16r-64k.darshan"
    if not log.exists():
        pytest.skip("../shared/traces is not beside the repository")
    out = tmp_path / "x.txt"
    one_line_error(*run("trace", "import", log, "-o", out)[::2], "'.txt'")
    assert not out.exists()


def test_darshan_header_overwritten_is_called_corrupt_not_truncated(tmp_path):
    log = TRACES / "ior-mpiio-strided-16r-64k.darshan"
    if not log.exists():
        pytest.skip("../shared/traces is not beside the repository")
    raw = bytearray(log.read_bytes())
    raw[16:16 + 448] = bytes(range(200, 256)) * 8
    bad = tmp_path / "h.darshan"
    bad.write_bytes(bytes(raw))
    one_line_error(*run("trace", "show", bad)[::2], "corrupt Darshan log")
    short = tmp_path / "t.darshan"
    short.write_bytes(log.read_bytes()[:30_000])
    one_line_error(*run("trace", "show", short)[::2], "truncated Darshan log")


def test_damaged_databases_are_one_line_and_repairable(tmp_path):
    """A damaged metadata database or RMT journal: one line naming the file and the recovery
    command (the integrity report only with --verbose); `fsck --repair` salvages the store and
    every file's bytes come back."""
    root = tmp_path / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    data = {n: os.urandom(k) for n, k in (("f", 200_000), ("g", 1 << 20))}
    for n, b in data.items():
        (tmp_path / n).write_bytes(b)
        assert run("store", "put", tmp_path / n, n, "--store", root, "--layout", "fixed:64k")[0] == 0
    raw = bytearray((root / "meta.db").read_bytes())
    raw[8192:12288] = bytes(4096)                    # a b-tree page zeroed
    (root / "meta.db").write_bytes(bytes(raw))
    rc, _, err = run("store", "ls", "--store", root)
    one_line_error(rc, err, "meta.db is damaged", "--repair")
    rc, _, err = run("--verbose", "store", "ls", "--store", root)
    assert rc == 2 and len(err.strip().splitlines()) > 1            # the details, on request
    rc, out, err = run("store", "fsck", "--store", root, "--repair")
    assert rc == 0, err
    assert "2 file(s) kept, 0 rebuilt from the store's catalog, 0 lost" in out
    for n, b in data.items():
        assert run("store", "get", n, tmp_path / f"{n}.out", "--store", root)[0] == 0
        assert (tmp_path / f"{n}.out").read_bytes() == b
    j = bytearray((root / "rmt.log").read_bytes())
    j[0:8] = b"garbage!"
    (root / "rmt.log").write_bytes(bytes(j))
    one_line_error(*run("store", "ls", "--store", root)[::2], "rmt.log is damaged", "--repair")
    rc, out, err = run("store", "fsck", "--store", root, "--repair")
    assert rc == 0 and "RMT journal restarted empty" in out, err


@pytest.mark.parametrize("how", ["deleted", "emptied", "table dropped", "no catalog"])
def test_a_lost_metadata_database_is_refused_then_rebuilt(tmp_path, how):
    """meta.db deleted, truncated to 0 bytes or without its files table, next to data files
    and a journal: every command refuses the store with one line naming `fsck --repair`
    (never an empty store, never a new file that takes an old one's data files); the repair
    rebuilds the files from the store's catalog, every byte comes back, and a new file gets
    an id no file ever had.  Negative control ("no catalog"): without the catalog the files
    cannot be rebuilt; the repair says so and fsck reports their data files as orphans."""
    import sqlite3

    root = tmp_path / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    data = {n: os.urandom(k) for n, k in (("f", 200_000), ("g", 1 << 20), ("h", 70_000))}
    for n, b in data.items():
        (tmp_path / n).write_bytes(b)
        assert run("store", "put", tmp_path / n, n, "--store", root, "--layout", "fixed:64k")[0] == 0
    assert run("store", "rm", "h", "--store", root)[0] == 0
    ids = {int(p.name.split(".")[0]) for p in (root / "servers").rglob("*.*")}
    if how == "deleted":
        (root / "meta.db").unlink()
    elif how == "emptied":
        (root / "meta.db").write_bytes(b"")
    else:
        con = sqlite3.connect(root / "meta.db")
        con.execute("DROP TABLE files")
        con.commit()
        con.close()
        if how == "no catalog":
            (root / "catalog.log").unlink()
    for cmd in (("store", "ls"), ("store", "get", "f", tmp_path / "x"), ("replicate", tmp_path / "nope.json")):
        rc, _, err = run(*cmd, "--store", root)
        one_line_error(rc, err, "meta.db is missing or empty", "--repair")
    assert not (tmp_path / "x").exists()
    rc, out, err = run("store", "fsck", "--store", root, "--repair")
    if how == "no catalog":
        assert rc == 1 and "0 rebuilt from the store's catalog, 2 lost" in out and "orphan data file" in out
        return
    assert rc == 0, err + out
    assert "2 rebuilt from the store's catalog, 0 lost" in out
    for n in ("f", "g"):
        assert run("store", "get", n, tmp_path / f"{n}.out", "--store", root)[0] == 0
        assert (tmp_path / f"{n}.out").read_bytes() == data[n]
    assert run("store", "put", tmp_path / "h", "new", "--store", root, "--layout", "fixed:64k")[0] == 0
    from pario.store import Store

    with Store(root) as st:
        new_id = st.backend.meta.get("new")[0]
    assert new_id > max(ids) + 1          # after h's id too (deleted, but h's data id was handed out)
    rc, out, _ = run("store", "fsck", "--store", root)
    assert rc == 0 and "clean" in out


def test_planted_links_in_a_store_are_never_followed(tmp_path):
    """A store directory from someone else: a symbolic link planted where the next file's
    data file will be (ids are predictable), one in place of an existing data file, and one
    for meta.db's write-ahead log.  pario never writes through them (the victims keep their
    bytes), refuses with one line, and fsck names every link."""
    root = tmp_path / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    src = tmp_path / "src"
    src.write_bytes(os.urandom(600_000))
    assert run("store", "put", src, "f", "--store", root, "--layout", "fixed:64k")[0] == 0
    victims = {}
    for k in range(3):
        victims[k] = tmp_path / f"victim{k}"
        victims[k].write_bytes(b"precious %d" % k)
    ids = sorted({int(p.name.split(".")[0]) for p in (root / "servers").rglob("*.*")})
    (root / "servers" / "H0" / f"{ids[-1] + 1:08d}.0").symlink_to(victims[0])        # the next file's
    rc, _, err = run("store", "put", src, "g", "--store", root, "--layout", "fixed:64k")
    one_line_error(rc, err, "exists for the new file id")
    existing = root / "servers" / "H3" / f"{ids[0]:08d}.0"
    existing.unlink()
    existing.symlink_to(victims[1])
    rc, _, err = run("store", "get", "f", tmp_path / "out", "--store", root)
    one_line_error(rc, err, "symbolic link")
    (root / "meta.db-wal").unlink(missing_ok=True)
    (root / "meta.db-wal").symlink_to(victims[2])
    one_line_error(*run("store", "ls", "--store", root)[::2], "meta.db-wal is a symbolic link")
    (root / "meta.db-wal").unlink()
    rc, out, _ = run("store", "fsck", "--store", root, "--json")
    probs = json.loads(out)["problems"]
    assert rc == 1 and len([p for p in probs if "is a symbolic link or not a regular file" in p]) == 2, probs
    for k, v in victims.items():
        assert v.read_bytes() == b"precious %d" % k


def test_absurd_layouts_are_refused_before_anything_is_stored(tmp_path):
    """A 2^62-byte stripe in `store put --layout` and in a plan's replica layout: one line,
    exit 2, nothing stored, nothing relaid (these used to succeed and leave bytes pario
    could no longer read), the store still clean."""
    root = tmp_path / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    src = tmp_path / "src"
    src.write_bytes(os.urandom(2 << 20))
    assert run("store", "put", src, "f", "--store", root, "--layout", "fixed:64k")[0] == 0
    before = sorted((p.name, p.stat().st_size) for p in (root / "servers").rglob("*.*"))
    one_line_error(*run("store", "put", src, "g", "--store", root, "--layout", f"fixed:{1 << 62}")[::2], "2^52")
    srv = [f"H{i}" for i in range(8)]
    for lay in ({"type": "striped", "servers": srv, "stripes": [1 << 62] * 8},
                {"type": "extents", "extents": [[0, 1 << 62, "H1", 0, 1]], "default": None}):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"pario_plan": 1, "scheme": "ceda", "system": "ceda-hdd8",
                                    "layouts": {"f": lay} if lay["type"] == "striped" else {},
                                    "replicas": {} if lay["type"] == "striped" else {"f": [{"name": "r", "layout": lay}]}}))
        one_line_error(*run("replicate", plan, "--store", root)[::2], "2^52")
    assert sorted((p.name, p.stat().st_size) for p in (root / "servers").rglob("*.*")) == before
    assert run("store", "get", "f", tmp_path / "out", "--store", root)[0] == 0
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    rc, out, _ = run("store", "fsck", "--store", root, "--json")
    assert rc == 0 and json.loads(out)["ok"]


def test_store_timeout_setting_is_honoured_by_the_python_commands(tmp_path, monkeypatch):
    """PARIO_STORE_TIMEOUT bounds every wait, as in the C runtime: `pario replicate` and
    `store ls` on a store another process holds exclusively give up after the setting's
    seconds (the message says how long it waited), not after the default 60."""
    from pario.store import Store

    root = tmp_path / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"pario_plan": 1, "scheme": "ceda", "system": "ceda-hdd8", "layouts": {}}))
    monkeypatch.setenv("PARIO_STORE_TIMEOUT", "0.5")
    with Store(root):                                    # held exclusively meanwhile
        for cmd in (("replicate", plan, "--store", root), ("store", "ls", "--store", root)):
            one_line_error(*run(*cmd)[::2], "timed out after 0.5 s")
    monkeypatch.setenv("PARIO_STORE_TIMEOUT", "bogus")  # as the C runtime: a bad value is the default
    from pario.store.locks import store_timeout

    assert store_timeout() == 60.0


def test_a_killed_put_leaves_nothing_once_the_next_command_runs(tmp_path):
    """SIGKILL in the middle of `store put`: the hidden upload is not listed, and the next
    store command that has the store to itself removes its bytes."""
    import signal
    import time

    root = tmp_path / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(64 << 20))
    before = sum(p.stat().st_size for p in (root / "servers").rglob("*") if p.is_file())
    proc = subprocess.Popen([*PARIO,
                             "store", "put", str(src), "f", "--store", str(root), "--layout", "fixed:64k"])
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:
        grown = sum(p.stat().st_size for p in (root / "servers").rglob("*") if p.is_file())
        if grown > (8 << 20) or proc.poll() is not None:
            break
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rc, out, err = run("store", "ls", "--store", root, "--json")
    assert rc == 0, err
    import json

    assert json.loads(out)["files"] == []
    after = sum(p.stat().st_size for p in (root / "servers").rglob("*") if p.is_file())
    assert after == before
    rc, out, _ = run("store", "fsck", "--store", root)
    assert rc == 0


def _tmpfs(path: Path, size: str):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    path.mkdir()
    cp = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                        text=True)
    if cp.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {cp.stderr.strip()}")


def test_disk_full_put_is_one_line_and_gives_the_space_back(tmp_path):
    """64 MiB into a 20 MiB tmpfs: one line, exit 2, the used space back to where it was, ls
    and fsck work on the full file system, the file that fitted is intact."""
    mnt = tmp_path / "small"
    _tmpfs(mnt, "20m")
    try:
        root = mnt / "st"
        assert run("store", "init", root, "--system", "ceda-hdd8")[0] == 0
        small = tmp_path / "small.bin"
        small.write_bytes(os.urandom(1 << 20))
        assert run("store", "put", small, "ok", "--store", root, "--layout", "fixed:64k")[0] == 0
        used = shutil.disk_usage(mnt).used
        big = tmp_path / "big.bin"
        big.write_bytes(np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes())
        for _ in range(2):
            rc, _, err = run("store", "put", big, "big", "--store", root, "--layout", "fixed:64k")
            one_line_error(rc, err, "nothing was stored")
            assert shutil.disk_usage(mnt).used <= used + (64 << 10)
        rc, out, err = run("store", "ls", "--store", root, "--json")
        assert rc == 0, err
        import json

        assert [f["name"] for f in json.loads(out)["files"]] == ["ok"]
        assert run("store", "fsck", "--store", root)[0] == 0
        assert run("store", "get", "ok", tmp_path / "ok.out", "--store", root)[0] == 0
        assert (tmp_path / "ok.out").read_bytes() == small.read_bytes()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# ---------------------------------------------------------------------- random input
SIZE_TEXT = st.one_of(st.text(max_size=30), st.from_regex(r"\A-?[0-9]{0,30}(\.[0-9]{0,5})?[kmgtpeKMGTPE]?(i?[bB])?\Z"))
LAYOUT_TEXT = st.one_of(st.text(max_size=40), st.builds(lambda h, s: f"{h}:{s}",
                                                        st.sampled_from(["fixed", "var", "2d", "FIXED", "x"]),
                                                        st.text(alphabet="0123456789kmg=,:@hdsHDS", max_size=30)))


@settings(max_examples=60, **HYP)
@given(SIZE_TEXT)
def test_random_size_strings(text):
    ok_or_one_line(*run("workload", "ior", "--procs", "2", "--xfer", text, "--block", "64k", "-o", os.devnull)[::2])


@settings(max_examples=60, **HYP)
@given(LAYOUT_TEXT)
def test_random_layout_strings(tmp_path_factory, text):
    d = tmp_path_factory.mktemp("lay")
    p = d / "t.csv"
    if not p.exists():
        p.write_text("rank,file,op,offset,length\n0,f,write,0,64k\n")
    ok_or_one_line(*run("layout", "map", p, "--system", "ceda-hdd8", "--layout", text)[::2])


CELL = st.one_of(st.integers(-(10 ** 25), 10 ** 25).map(str), st.text(max_size=12), st.sampled_from(["read", "write", "64k", "", "nan"]))


@settings(max_examples=60, **HYP)
@given(st.lists(st.lists(CELL, min_size=0, max_size=7), max_size=6))
def test_random_csv_rows(tmp_path_factory, rows):
    p = tmp_path_factory.mktemp("csv") / "t.csv"
    p.write_text("rank,file,op,offset,length\n" + "".join(",".join(r) + "\n" for r in rows))
    for argv in (("trace", "show", p), ("simulate", p, "--system", "ceda-hdd8", "--layout", "fixed:64k")):
        ok_or_one_line(*run(*argv)[::2])


READERS = {
    "t.csv": ("trace", "show", "{p}"),
    "t.parquet": ("trace", "show", "{p}"),
    "t.darshan": ("trace", "show", "{p}"),
    "p.json": ("simulate", "{trace}", "--system", "ceda-hdd8", "--plan", "{p}"),
    "l.json": ("layout", "map", "{trace}", "--system", "ceda-hdd8", "--layout", "{p}"),
    "s.toml": ("system", "show", "{p}"),
}


@settings(max_examples=40, **HYP)
@given(st.sampled_from(sorted(READERS)), st.binary(max_size=2000))
def test_random_bytes_to_every_reader(tmp_path_factory, name, blob):
    d = tmp_path_factory.mktemp("r")
    p = d / name
    p.write_bytes(blob)
    trace = d / "ok.csv"
    trace.write_text("rank,file,op,offset,length\n0,f,write,0,64k\n")
    argv = [a.format(p=p, trace=trace) for a in READERS[name]]
    ok_or_one_line(*run(*argv)[::2])


@settings(max_examples=25, **HYP)
@given(st.sampled_from(["meta.db", "rmt.log", "store.json"]), st.binary(max_size=5000))
def test_random_bytes_as_store_files(tmp_path_factory, name, blob):
    root = tmp_path_factory.mktemp("s") / "st"
    run("store", "init", root, "--system", "ceda-hdd8")
    (root / name).write_bytes(blob)
    for argv in (("store", "ls", "--store", root), ("store", "fsck", "--store", root)):
        ok_or_one_line(*run(*argv)[::2])


# ---------------------------------------------------------------------- valid files, one value spoilt
EXTREME = st.sampled_from([10 ** 30, -1, -(10 ** 30), 0, float("nan"), float("inf"), 1e308, "x", "", None, [], {}, True,
                           2 ** 63, 2 ** 63 - 1, 0.5])


def _leaves(o, path=()):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _leaves(v, path + (i,))
    else:
        yield path


@pytest.fixture(scope="module")
def valid_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("valid")
    assert run("workload", "ior", "--procs", "4", "--xfer", "16k", "--block", "256k", "--pattern", "random",
               "--op", "both", "-o", d / "r.parquet")[0] == 0
    assert run("advise", d / "r.parquet", "--system", "ceda-hdd8", "--schemes", "ceda,padp", "--space", "16m",
               "-o", d / "plan.json")[0] == 0
    return d


@settings(max_examples=40, **HYP)
@given(st.sampled_from(["plan", "profile"]), st.data())
def test_valid_files_with_values_spoilt(valid_files, kind, data):
    """A real plan or profile with one to three values replaced by extremes (huge, negative,
    NaN, wrong type): success or one line — never an internal error, never unbounded memory
    (a server count of 2^63 once made a profile allocate until killed)."""
    import copy
    import json
    import tomllib

    import tomli_w

    d = valid_files
    if kind == "plan":
        o = json.loads((d / "plan.json").read_text())
    else:
        o = tomllib.loads((ROOT / "src/pario/system/builtin/padp-6h2s.toml").read_text())
    o = copy.deepcopy(o)
    paths = list(_leaves(o))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        t = o
        for k in path[:-1]:
            t = t[k]
        t[path[-1]] = data.draw(EXTREME)
    if kind == "plan":
        f = d / f"spoilt-{os.getpid()}.json"
        f.write_text(json.dumps(o))
        argv = ("simulate", d / "r.parquet", "--system", "ceda-hdd8", "--plan", f)
    else:
        try:
            text = tomli_w.dumps(o)
        except (TypeError, ValueError):
            return                          # not representable in TOML (e.g. None): no such file exists
        f = d / f"spoilt-{os.getpid()}.toml"
        f.write_text(text)
        argv = ("simulate", d / "r.parquet", "--system", f, "--layout", "fixed:64k")
    ok_or_one_line(*run(*argv)[::2])
