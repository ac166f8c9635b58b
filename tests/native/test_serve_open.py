"""MPI_File_open of a served file has MPICH's semantics, errors included (issue 24).

tests/c/open_semantics.c runs each case once without pario (MPICH's own behaviour: the
oracle) and once served from a store (``PARIO_SERVE=all``); the printed results must be
identical, line for line, and the store's files must hold the bytes MPICH's files hold:
concurrent creates with MPI_COMM_SELF (50 tries per run, and two jobs at once), MPI_MODE_EXCL
(one winner of a race), a create in a missing directory, access modes MPICH refuses, and a
shared file pointer per collective open.  A clean run leaves no shadow file in the store;
a killed run's are removed by the store's next first opener.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_serve_mpi import VENV_BIN, _env, _mpiexec, _store, _store_bytes, compile_mpi
from helpers import C_DIR, PARIO

SRC = C_DIR / "open_semantics.c"
P = 4
TRIES = 50


@pytest.fixture(scope="module")
def exe(lib, tmp_path_factory):
    return compile_mpi(SRC, tmp_path_factory.mktemp("open") / "open_semantics")


def _both(lib, exe, tmp_path, case, tries=TRIES):
    """(plain stdout, served stdout, plain dir, served dir, store)."""
    plain, served = tmp_path / "plain", tmp_path / "served"
    plain.mkdir()
    served.mkdir()
    want = _mpiexec([exe, plain, case, tries], _env(lib), tmp_path, n=P)
    store = _store(tmp_path / "store")
    got = _mpiexec([exe, served, case, tries], _env(lib, store=store, serve="all"), tmp_path, n=P)
    assert "pario:" not in got.stderr, got.stderr
    return want.stdout, got.stdout, plain, served, store


def _shadows(store: Path) -> list[str]:
    d = store / ".pario-shadow"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


@pytest.mark.parametrize("case", ["selfcreate", "excl", "nodir", "amode", "shared", "delete"])
def test_open_semantics_equal_mpich(lib, exe, tmp_path, case):
    want, got, plain, served, store = _both(lib, exe, tmp_path, case)
    assert got.splitlines() == want.splitlines()
    # the oracle's own sanity: what MPICH says (so that the comparison compares something)
    text = want
    if case == "selfcreate":
        assert f"selfcreate: {TRIES} tries, 0 failed" in text
    elif case == "excl":
        assert "excl existing: rank 0 ERR_FILE_EXISTS" in text and f"exactly one winner in {TRIES}," in text
    elif case == "nodir":
        assert "create in a missing directory: rank 0 ERR_NO_SUCH_FILE" in text
    elif case == "amode":
        assert text.count("ERR_AMODE") == 3
    elif case == "shared":
        assert "self write_shared: size 4" in text and "reopened: shared pointer 0" in text
    # the served files hold MPICH's bytes; none was written beside the store
    names = sorted(p.name for p in plain.iterdir())
    assert bool(names) == (case not in ("nodir", "amode")) and not any(served.iterdir())
    for nm in names:
        assert _store_bytes(store, str(served / nm)) == (plain / nm).read_bytes(), nm
    assert _shadows(store) == []                     # a clean run leaves no shadow file


def test_two_jobs_create_the_same_files_at_once(lib, exe, tmp_path):
    """Two separate jobs, every rank of both creating the same new files with MPI_COMM_SELF."""
    store = _store(tmp_path / "store")
    d = tmp_path / "d"
    d.mkdir()
    env = _env(lib, store=store, serve="all")
    jobs = [subprocess.Popen([str(VENV_BIN / "mpiexec"), "-n", "2", str(exe), str(d), "selfcreate", str(TRIES)],
                             env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outs = [j.communicate(timeout=300) for j in jobs]
    for j, (out, err) in zip(jobs, outs):
        assert j.returncode == 0 and "pario:" not in err, err
        assert f"selfcreate: {TRIES} tries, 0 failed" in out
    for k in range(TRIES):
        assert _store_bytes(store, str(d / f"self.{k}")) == b"aaaabbbb"
    assert _shadows(store) == []


def test_store_put_racing_a_served_create(lib, exe, tmp_path):
    """`pario store put` of the names a served job creates at the same moment: each name
    ends up either the program's file (put refused with one line, nothing stored) or put's
    file opened by the program (create-or-open); the program never fails."""
    import sys

    store = _store(tmp_path / "store")
    d = tmp_path / "d"
    d.mkdir()
    src = tmp_path / "src.bin"
    src.write_bytes(b"P" * 16)
    job = subprocess.Popen([str(VENV_BIN / "mpiexec"), "-n", "2", str(exe), str(d), "selfcreate", "20"],
                           env=_env(lib, store=store, serve="all"), cwd=str(tmp_path), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    put_rc = {}
    for k in range(20):
        cp = subprocess.run([*PARIO,
                             "store", "put", str(src), str(d / f"self.{k}"), "--store", str(store),
                             "--layout", "fixed:64k"], capture_output=True, text=True)
        assert cp.returncode in (0, 2), cp.stderr
        if cp.returncode == 2:
            assert cp.stderr.startswith("pario: error:") and cp.stderr.count("\n") == 1 and "exists" in cp.stderr
        put_rc[k] = cp.returncode
    out, err = job.communicate(timeout=300)
    assert job.returncode == 0 and "pario:" not in err, err
    assert "selfcreate: 20 tries, 0 failed" in out
    for k, rc in put_rc.items():
        got = _store_bytes(store, str(d / f"self.{k}"))
        # the program wrote its 8 bytes at 0..8 either way; put's bytes remain past them
        assert got == (b"aaaabbbb" + b"P" * 8 if rc == 0 else b"aaaabbbb"), (k, rc, got)


def test_a_killed_runs_shadow_files_go_at_the_next_first_open(lib, exe, tmp_path):
    """A job killed while its files are open leaves their shadow files; the store's next
    first opener (here a served run, then fsck) removes them, and only regular files inside
    the shadow directory (a planted link's target stays)."""
    from test_reboot import SRC as REBOOT_SRC

    store = _store(tmp_path / "store")
    prog = compile_mpi(REBOOT_SRC, tmp_path / "reboot_check")
    stop = tmp_path / "stop"
    job = subprocess.Popen([str(VENV_BIN / "mpiexec"), "-n", "2", str(prog), str(tmp_path / "f"), "1", "4096",
                            f"pause:{stop}"], env=_env(lib, store=store, serve="all"), cwd=str(tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    t0 = time.monotonic()
    while not Path(f"{stop}.ready").exists():
        assert job.poll() is None and time.monotonic() - t0 < 120
        time.sleep(0.05)
    assert len(_shadows(store)) == 2                 # the open's shadow and its shared pointer
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (store / ".pario-shadow" / "planted").symlink_to(victim)
    cp = _mpiexec([prog, tmp_path / "g", "1", "4096", "run"], _env(lib, store=store, serve="all"), tmp_path, n=2)
    assert "pario:" not in cp.stderr
    assert _shadows(store) == [] and victim.read_bytes() == b"keep"
    # and by the Python store's first opener (fsck)
    (store / ".pario-shadow" / "0123456789abcdef.shfp").write_bytes(bytes(8))
    (store / ".pario-shadow" / "planted").symlink_to(victim)
    from pario.store import Store

    Store(store).close()
    assert _shadows(store) == [] and victim.read_bytes() == b"keep"


def test_served_runs_refuse_a_store_that_lost_its_metadata_or_has_planted_links(lib, exe, tmp_path):
    """The C store as the Python one: a missing meta.db next to data is one line and the
    files pass through (never an empty store whose new files take old data files); a data
    file replaced by a link is never written through (the write fails, the victim keeps its
    bytes)."""
    from test_reboot import SRC as REBOOT_SRC

    prog = compile_mpi(REBOOT_SRC, tmp_path / "reboot_check")
    store = _store(tmp_path / "store")
    name = tmp_path / "f"
    _mpiexec([prog, name, "1", "65536", "run"], _env(lib, store=store, serve="all"), tmp_path, n=2)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    data = sorted((store / "servers").rglob("*.0"))
    assert data
    data[0].unlink()
    data[0].symlink_to(victim)
    cp = _mpiexec([prog, name, "2", "65536", "run"], _env(lib, store=store, serve="all"), tmp_path, n=2, check=False)
    assert cp.returncode != 0 and "symbolic link" in cp.stderr
    assert victim.read_bytes() == b"precious"
    (store / "meta.db").unlink()
    cp = _mpiexec([prog, name, "3", "65536", "run"], _env(lib, store=store, serve="all"), tmp_path, n=2)
    said = [ln for ln in cp.stderr.splitlines() if ln.startswith("pario:")]
    assert len(said) == 1 and "meta.db is missing or empty" in said[0] and "--repair" in said[0], cp.stderr
    assert sorted(cp.stdout.splitlines()) == ["rank 0 wrong 0", "rank 1 wrong 0"]
    assert not (store / "meta.db").exists()                         # never re-created
    assert name.stat().st_size == 2 * 65536                          # the file passed through


def test_names_with_control_characters_are_never_stored(lib, exe, tmp_path):
    """One validation of names (pario.names.check_name, and its twin in the C runtime): a
    served program creating a file whose name has a newline gets it from MPICH (one line
    says why), `store put` of such a name is one error line, a plan's replica name that is
    not one path component is refused by `pario replicate`."""
    import json
    import sys

    from test_reboot import SRC as REBOOT_SRC

    prog = compile_mpi(REBOOT_SRC, tmp_path / "reboot_check")
    store = _store(tmp_path / "store")
    for bad in ("a\nb", "tab\there", "sep\u2028x", "c1\u0085x"):
        name = tmp_path / bad
        cp = _mpiexec([prog, name, "1", "4096", "run"], _env(lib, store=store, serve="all"), tmp_path, n=2)
        said = [ln for ln in cp.stderr.splitlines() if ln.startswith("pario:")]
        assert said and all("control character" in ln for ln in said), cp.stderr       # one line an open
        assert name.stat().st_size == 2 * 4096                      # MPICH's file
    src = tmp_path / "src"
    src.write_bytes(b"x" * 100)

    def pario(*args):
        return subprocess.run([*PARIO,
                               *map(str, args)], capture_output=True, text=True)

    cp = pario("store", "put", src, "evil\nname", "--store", store, "--layout", "fixed:64k")
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and "control character" in cp.stderr
    assert pario("store", "put", src, "f", "--store", store, "--layout", "fixed:64k").returncode == 0
    for rname in ("../x", "a/b", "r\n1"):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"pario_plan": 1, "scheme": "ceda", "system": "hacio-6h2s", "layouts": {},
                                    "replicas": {"f": [{"name": rname, "layout": {
                                        "type": "extents", "extents": [[0, 50, "H1", 0, 1]], "default": None}}]}}))
        cp = pario("replicate", plan, "--store", store)
        assert cp.returncode == 2 and cp.stderr.count("\n") == 1 and "replica name" in cp.stderr, cp.stderr
    with __import__("pario.store", fromlist=["Store"]).Store(store) as st:
        assert st.files() == ["f"]
