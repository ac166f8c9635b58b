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
    assert cmd == ["mpiexec", "-hosts", "n1,n2", "-n", "4", str(exe.resolve()), "x"]


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
