"""``pario reproduce --engine testbed``: experiments measured on the emulated testbed.

The end-to-end test needs root, loop devices and a blkio/io cgroup (skipped otherwise);
the unsupported-experiment tests run everywhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pario import ParioError
from pario.cli import main as cli_main
from pario.layout import parse_layout, server_load
from pario.reproduce import EXPERIMENTS, run_experiment
from pario.reproduce.core import replace
from pario.reproduce.engines import TestbedEngine, Unsupported, unsupported_reason

# The throttle's credit, and why ``makespan >= max_j B_j / R_j - SLICE_S`` holds (B_j = bytes the
# layout maps to server j, R_j its throttled rate).  blk-throttle (kernel 6.18, block/blk-throttle.c)
# dispatches a bio only if dispatched + size <= R * roundup(now - slice_start, 100 ms); trimming
# moves slice_start and the dispatched count together, and a slice is only restarted after it
# ended, i.e. >= 100 ms after the last dispatch, so over a window the bytes it passes stay below
# R * (now - s + 100 ms), s = the start of the slice that is open when the window begins.  The
# testbed restarts every throttle before each measured window and waits until that slice is over
# (pario.testbed.core.restart_throttle: by enter() for a replay, by rank 0 before each collective
# call), so s is the jiffy of the window's first request (>= t0 - 1 jiffy) and the last of the
# B_j bytes passes at >= t0 + B_j / R_j - 100 ms: one slice (docs/calibration.md).  Without the
# restart a window starting < 200 ms after earlier I/O of the cgroup inherits the idle part of
# the still-open slice as well (measured: 8 MiB at 7.86 MB/s in 0.84 s instead of >= 0.97 s).
SLICE_S = 0.1
SLOWDOWN = 16.0


def _support_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (loop devices, ext4 mounts, blkio cgroup)"
    from pario.testbed.core import check_support

    try:
        check_support()
    except ParioError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------- unsupported: one line, everywhere
def test_unsupported_experiment_is_one_line_error():
    for eid in ("ci-table5", "ci-fig8", "ceda-fig9", "hacio-tables1-3"):
        with pytest.raises(Unsupported) as ei:
            run_experiment(EXPERIMENTS[eid], quick=True, engine="testbed")
        msg = str(ei.value)
        assert "\n" not in msg and msg.startswith(f"experiment {eid}: not available on the testbed: ")
    assert unsupported_reason(EXPERIMENTS["padp-fig4"]) is None
    assert unsupported_reason(EXPERIMENTS["hacio-fig8"]) is None


def test_unsupported_cli_one_line(tmp_path, capsys):
    rc = cli_main(["reproduce", "ci-fig8", "--engine", "testbed", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "ci-fig8" in err[0] and "routing" in err[0]
    rc = cli_main(["reproduce", "padp-fig4", "--testbed-slowdown", "2", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--engine testbed" in err[0]


def test_routing_call_is_one_line_error():
    eng = TestbedEngine.__new__(TestbedEngine)  # no testbed needed: refused before any I/O
    eng.experiment = "ci-fig8"
    with pytest.raises(Unsupported, match=r"^experiment ci-fig8: not available on the testbed: hybrid-replica"):
        eng(None, None, routing=object())


# ---------------------------------------------------------------- end to end on a real testbed
class _Recording(TestbedEngine):
    __test__ = False

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.log = []

    def __call__(self, trace, system, layout=None, **kw):
        res = super().__call__(trace, system, layout, **kw)
        self.log.append((trace, system, layout, kw, res))
        return res


def _bps(server, op: int) -> float:
    """The byte rate the test expects the engine to have set: 1/(β·K), rounded as documented."""
    return max(1, round(1.0 / (server.beta_for(op) * SLOWDOWN)))


@pytest.mark.skipif(_support_reason() is not None, reason=str(_support_reason()))
def test_layout_and_collective_measured_on_testbed(tmp_path):
    ind = replace(EXPERIMENTS["padp-fig4"], ops=("write", "read"),
                  quick={"block": 8 << 20, "cases": ({"x": "sequential", "pattern": "sequential"},)})
    col = replace(EXPERIMENTS["hacio-fig8"], ops=("write",),
                  quick={"procs": 4, "cases": ({"x": "interleaved", "pattern": "strided", "block": 256 << 10,
                                                "segments": 32},)})
    d = tmp_path / "tb"
    eng = _Recording(d, slowdown=SLOWDOWN)
    images: list[str] = []
    cgroups: list[str] = []
    try:
        r1 = run_experiment(ind, quick=True, engine="testbed", testbed=eng, out=tmp_path / "out", plot=False)
        r2 = run_experiment(col, quick=True, engine="testbed", testbed=eng, out=tmp_path / "out", plot=False)
        images = [s.image for tb, _, _ in eng._beds.values() for s in tb.servers]
        cgroups = [tb.cgroup for tb, _, _ in eng._beds.values()]
        assert len(eng._beds) == 2  # 4H+4S and 6H+2S, each brought up once
    finally:
        eng.close()
    # outputs say which engine produced them
    assert all(r["engine"] == "testbed" for r in r1.rows + r2.rows)
    assert "emulated testbed" in (tmp_path / "out" / "padp-fig4.md").read_text()
    assert (tmp_path / "out" / "hacio-fig8.csv").read_text().splitlines()[0].endswith(",engine")
    assert len(r1.rows) == 8 and len(r2.rows) == 3 and len(eng.log) == 11
    for trace, system, layout, kw, res in eng.log:
        lay = parse_layout(layout, system)
        mapped = server_load(trace, lay, system.n)[0]  # bytes per server, computed here independently
        assert int(mapped.sum()) == int(trace.length.sum()) == res.bytes
        # bytes verified: what reached each device covers what the layout maps there
        assert np.all(res.server_bytes >= mapped), (res.server_bytes, mapped)
        op = int(trace.op[0])
        bound = max(float(mapped[j]) / _bps(s, op) for j, s in enumerate(system.servers))
        assert bound > 2 * SLICE_S  # the bound is not swallowed by the slice credit
        assert res.makespan_s >= bound - SLICE_S, (res.makespan_s, bound, kw)
        if kw.get("collective"):
            assert res.cost_s == res.makespan_s
            # one collective call (one file, one op) per replay: one window, so one slice of credit
            assert len(set(zip(trace.file.tolist(), trace.op.tolist()))) == 1
    # nothing left behind: no loop device on the images, no mount under the dir, no cgroup
    losetup = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert images and not any(img in losetup for img in images)
    assert not any(str(d) in line for line in Path("/proc/mounts").read_text().splitlines())
    assert cgroups and not any(cg and os.path.isdir(cg) for cg in cgroups)
