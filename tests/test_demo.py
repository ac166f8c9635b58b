"""`pario demo`: runs end to end on built-in defaults and verifies the bytes it reads back."""

from __future__ import annotations

import pytest

from pario.cli import main


@pytest.mark.slow
def test_demo_runs_and_verifies(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all bytes verified" in out
    assert "summary" in out
    assert len(list((tmp_path / "plots").glob("*.png"))) == 4


def test_demo_store_roundtrip_is_verified(tmp_path):
    """The store step alone on a small CEDA plan: every byte read back matches what was written."""
    from pario.cli.demo import _store_roundtrip
    from pario.reproduce.families import _ceda_plans, make_system
    from pario.workload import ior

    trace = ior(4, 64 << 10, 512 << 10, pattern="random", op="read", seed=1)
    plan = _ceda_plans(trace, make_system("ceda-hdd8"))["CEDA"]
    rt = _store_roundtrip(tmp_path / "st", trace, plan, "ceda-hdd8")
    assert rt["mismatches"] == 0
    assert rt["checked"] == int(trace.length.sum())
    assert 0 < rt["redirected"] <= rt["checked"]
