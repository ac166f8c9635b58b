"""The repository's C MPI-IO program of every access style (tests/c/tracer_styles.c: file
views of vector, subarray, darray, indexed, struct and resized types, nonblocking, split and
collective calls, shared and ordered pointers, `_c` counts, short reads), served from a "pfs"
store and from a rados store coordinated in RADOS ("rados") with its 4 ranks on two emulated nodes (2 each; darray's 2 x 2 grid needs 4) and traced.
The rados store runs twice: with its directory on the CephFS, and with a directory of its own
on each node ("rados-local": each node's private /tmp holding a copy of store.json), which
only works when nothing the ranks share is in that directory (the shared and ordered pointers
are counters in RADOS; each node makes its own shadow file).
The oracle is the run's own trace (every write extent of rank r holds the byte r, later calls
over earlier ones: helpers.expected_from_trace), read on the host from the trace directory the
ranks of both nodes wrote into; the store file's bytes are read from node n2 with `pario store
get`, so the ranks' writes of n1 are read from the other node."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import C_DIR, VENV_BIN, expected_from_trace

pytestmark = pytest.mark.multinode
B, N = 48, 8
ORDER_FREE = {"shared.dat", "more.dat"}     # across nodes the trace's start times do not order them


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1]


@pytest.mark.parametrize("coord", ["pfs", "rados", "rados-local"])
def test_every_access_style_served_across_two_nodes(cluster3, lib, coord):
    from pario.trace.native import read_native

    exe = cluster3.home / "bin" / "tracer_styles"
    exe.parent.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([str(VENV_BIN / "mpicc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
                        str(C_DIR / "tracer_styles.c"), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = cluster3.pfs / f"views-{coord}"
    local = coord == "rados-local"
    store, data = (Path("/tmp/pario-views-store") if local else d / "store"), d / "data"
    tdir, out = cluster3.home / f"views-trace-{coord}", cluster3.home / f"views-out-{coord}"
    for x in (tdir, out):       # a repetition on the same cluster (PARIO_MN_REPEAT) starts empty
        shutil.rmtree(x, ignore_errors=True)
        x.mkdir()
    pario = shlex.quote(str(VENV_BIN / "pario"))
    made = (f"--system hacio-6h2s --coord pfs" if coord == "pfs"
            else f"--backend rados --cluster {cluster3.home / 'ceph'} --coord rados")
    cluster3.run("n1", f"rm -rf {d} {store} && mkdir -p {data} && {pario} store init {store} {made}")
    if local:       # n2's own directory: a copy of store.json, through the shared home
        share = cluster3.home / "views-store.json"
        cluster3.run("n1", f"cp {store}/store.json {share}")
        cluster3.run("n2", f"rm -rf {store} && mkdir -p {store} && cp {share} {store}/store.json")
    env = {"LD_PRELOAD": str(lib), "PARIO_STORE": str(store), "PARIO_SERVE": "all", "PARIO_TRACE_DIR": str(tdir)}
    cp = cluster3.mpi("n1,n2", 4, [exe, "all", data, B, N], env=env, timeout=300)
    assert cp.returncode == 0 and "pario:" not in cp.stdout + cp.stderr, (cp.stdout + cp.stderr)[-3000:]
    trace = read_native(tdir)
    names = sorted(n for n in trace.files if n.startswith(str(data) + "/") and n.endswith(".dat"))
    assert len(names) >= 17, names                      # every style but "kill" has its file
    gets = " && ".join(f"{pario} store get {shlex.quote(n)} {out / _base(n)} --store {store} >/dev/null"
                       for n in names)
    cluster3.run("n2", f"test -z \"$(ls {data})\" && {gets}", timeout=300)   # served: nothing on the plain path
    for n in names:
        got = np.fromfile(out / _base(n), dtype=np.uint8)
        want = expected_from_trace(trace, n)
        assert len(got) == len(want), n
        if _base(n) in ORDER_FREE:      # shared-pointer writes land in the order the ranks came: the same bytes
            assert np.array_equal(np.sort(got), np.sort(want)), n
        else:
            assert np.array_equal(got, want), n
    if local:       # nothing of the run in either node's directory
        for node in ("n1", "n2"):
            _, left = cluster3.run(node, f"ls -A {store} {store}/.pario-shadow")
            seen = [x for x in (ln.split("] ", 1)[-1].strip() for ln in left.splitlines()) if x]
            assert seen == [f"{store}:", ".pario-shadow", "store.json", f"{store}/.pario-shadow:"], left
            cluster3.run(node, f"rm -rf {store}", check=False)
    cluster3.run("n1", f"rm -rf {d}", check=False)
