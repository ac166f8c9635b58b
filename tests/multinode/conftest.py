"""Fixtures of the multi-node suite (marker ``multinode``; .ci/run runs it as root after the
Ceph suite): ``cluster3``, an emulated cluster of 3 nodes n1, n2, n3 sharing one CephFS (one
ceph-fuse per node), up once per session (tests of 2 nodes use hosts "n1,n2"), and the IOR
it serves as a baseline.  See tests/multinode/nodes.py and docs/multinode.md."""

from __future__ import annotations

import re

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from ceph_fixture import HDD, SSD, free_port_base
from helpers import IOR_SRC, VENV_BIN
from nodes import Nodes, NodesError, loop_devices, project_main, skip_reason

NODES = ["n1", "n2", "n3"]


def pytest_generate_tests(metafunc):
    """PARIO_MN_REPEAT=N: every test of the suite N times in a row on the same cluster (issue 26's
    "20 runs in a row": `PARIO_MN_REPEAT=20 python -m pytest -m multinode tests/multinode/`)."""
    n = int(os.environ.get("PARIO_MN_REPEAT", "1") or 1)
    if n > 1 and metafunc.definition.get_closest_marker("multinode"):
        metafunc.fixturenames.append("mn_run")
        metafunc.parametrize("mn_run", range(1, n + 1), ids=lambda i: f"run{i}")


def _fail_teardown(cl: Nodes, loops_before: set[str], before: str = "") -> None:
    """``down`` whatever state up left, then fail (CI red) with what is left on the host."""
    cp = cl.down()
    left = cl.leftovers(loops_before)
    print(f"multinode: down in {cl.times['down']:.1f} s (exit {cp.returncode})", file=sys.stderr)
    if cp.returncode != 0:
        left.insert(0, f"multinode.sh down exited {cp.returncode}: {cp.stdout[-2000:]}")
    if left or before:
        pytest.fail(f"{before}{'; ' if before and left else ''}"
                    f"{'teardown left: ' + '; '.join(left) + f' (home {cl.home} kept)' if left else ''}",
                    pytrace=False)
    shutil.rmtree(cl.home, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster3():
    """3 emulated nodes with Ceph; skipped with the reason where the machine cannot; taken
    down at the end of the session (also after a failed bring-up), and what that leaves on the
    host (namespaces, mounts, node processes, loop devices, the pario cluster) fails the session."""
    reason = skip_reason(NODES)
    if reason:
        pytest.skip(reason)
    home = Path(tempfile.mkdtemp(prefix="pario-mn-"))
    cl = Nodes(home, project_main(), NODES, free_port_base(HDD + SSD))
    loops = loop_devices()
    try:
        cl.up()
    except NodesError as exc:
        _fail_teardown(cl, loops, f"bring-up failed: {exc}")
    except BaseException:
        _fail_teardown(cl, loops)
        raise
    print(f"multinode: up in {cl.times['up']:.1f} s ({cl.home})", file=sys.stderr)
    try:
        yield cl
    finally:
        _fail_teardown(cl, loops)


@pytest.fixture(scope="session")
def ior_mn(cluster3):
    """IOR (../shared/clients/ior, unmodified) built with the wheel's mpicc into the nodes' home."""
    if not (IOR_SRC / "build.sh").exists():
        pytest.skip("../shared/clients/ior is absent")
    r = subprocess.run(["bash", str(IOR_SRC / "build.sh"), str(cluster3.home / "bin"), str(VENV_BIN / "mpicc")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1])


@pytest.fixture
def sdir(cluster3, request):
    """A fresh directory on the CephFS (as the nodes see it), removed after the test."""
    d = cluster3.pfs / ("s_" + re.sub(r"\W", "_", request.node.name))[:80]
    cluster3.run("n1", f"rm -rf {d} && mkdir -p {d}")
    yield d
    cluster3.run("n1", f"rm -rf {d}", check=False)
