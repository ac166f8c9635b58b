"""Crash safety: SIGKILL the replicator and writers at random points (stress/crash_stress.py)."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("crash_stress", Path(__file__).resolve().parents[1] / "stress" / "crash_stress.py")
crash = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash)


@pytest.mark.parametrize("trial", range(21))
def test_sigkill_then_recover(tmp_path, trial):
    out = crash.run_trial(tmp_path, trial, seed=11)
    assert out["mode"] == crash.MODES[trial % 3]


def test_check_detects_a_lost_byte(tmp_path):
    """The oracle can fail: corrupt one original byte behind the store's back."""
    root = tmp_path / "s"
    init = crash.setup(root, "writer", 3)
    log = tmp_path / "log"
    log.write_text("")
    from pario.store import Store

    with Store(root) as st:
        f = st.open("f")
        f.write(5, b"\xff" * 3 if init[5:8] != b"\xff" * 3 else b"\x00" * 3)
        f.close()
    with pytest.raises(AssertionError):
        crash.check(root, "writer", init, log)
