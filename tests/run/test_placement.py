"""The options that place ranks on nodes (pario.run.launch.placement: `pario run` and `pario
trace run` --hosts/--hostfile/--launcher/--launcher-exec): hydra's own option names, each
checked before anything runs, bad input one line and exit 2."""

import os

import pytest

from helpers import run_cli
from pario import ParioError
from pario.run.launch import mpi_command, placement


def test_placement_gives_hydras_options(tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("n1:2\nn2:2\n")
    exe = tmp_path / "launch"
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    assert placement() == []
    assert placement("n1,n2:4") == ["-hosts", "n1,n2:4"]
    assert placement(hostfile=str(hf), launcher="ssh", launcher_exec=str(exe)) == [
        "-f", str(hf.resolve()), "-launcher", "ssh", "-launcher-exec", str(exe.resolve())]
    cmd = mpi_command("mpiexec", 4, str(exe), ["x"], placement("n1,n2"))
    assert cmd == ["mpiexec", "-hosts", "n1,n2", "-n", "4", str(exe.absolute()), "x"]


@pytest.mark.parametrize("kw, msg", [
    ({"hosts": "n1 n2"}, "--hosts"), ({"hosts": "n1,;rm"}, "--hosts"), ({"hosts": ""}, "--hosts"),
    ({"hostfile": "/nonexistent/hosts"}, "--hostfile"), ({"launcher": "ssh -x"}, "--launcher"),
    ({"launcher_exec": "/nonexistent/x"}, "--launcher-exec"), ({"hosts": "n1", "hostfile": "f"}, "give one"),
])
def test_bad_placement_is_refused(kw, msg):
    with pytest.raises(ParioError, match=msg):
        placement(**kw)


def test_cli_refuses_bad_placement_with_one_line(tmp_path):
    rc, out, err = run_cli("trace", "run", "--hosts", "a b", "--", "/bin/true")
    assert rc == 2 and err.startswith("pario: error: --hosts") and err.count("\n") <= 1
    rc, out, err = run_cli("run", "-n", "2", "--store", str(tmp_path / "s"), "--hostfile", str(tmp_path / "none"),
                           "/bin/true")
    assert rc == 2 and "--hostfile" in err and not (tmp_path / "s").exists()


def test_run_makes_its_store_with_the_coordination_asked(tmp_path):
    """`pario run --coord pfs` makes a missing store for nodes (store.json "coord"), and the
    loop runs on it (bytes identical, fsck clean: the loop's own checks); an unknown member is
    one line before anything is written."""
    prog = tmp_path / "wr.py"
    prog.write_text("from mpi4py import MPI\nimport sys\nc = MPI.COMM_WORLD\n"
                    "fh = MPI.File.Open(c, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_WRONLY)\n"
                    "fh.Write_at_all(c.rank * 4096, bytes([65 + c.rank]) * 4096)\nfh.Close()\n")
    rc, out, err = run_cli("run", "-n", "2", "--store", str(tmp_path / "bad"), "--system", "ceda-hdd8", "--coord",
                           "paxos", "--out", str(tmp_path / "o1"), str(prog), str(tmp_path / "d1"))
    assert rc == 2 and "--coord 'paxos'" in err and not (tmp_path / "bad").exists() and not (tmp_path / "o1").exists()
    rc, out, err = run_cli("run", "-n", "2", "--store", str(tmp_path / "s"), "--system", "ceda-hdd8", "--coord", "pfs",
                           "--out", str(tmp_path / "o2"), "--json", str(prog), str(tmp_path / "d2"))
    import json

    assert rc == 0, err
    assert json.loads((tmp_path / "s" / "store.json").read_text())["coord"] == "pfs"


def test_a_program_given_through_a_link_runs_as_the_link(tmp_path):
    """A venv's python is a symbolic link to the base interpreter; run through the link it
    finds the venv's packages, through its target not: the command keeps the link."""
    target = tmp_path / "real"
    target.write_text("#!/bin/sh\n")
    os.chmod(target, 0o755)
    link = tmp_path / "bin-python"
    link.symlink_to(target)
    assert mpi_command("mpiexec", 1, str(link), [])[-1] == str(link)
