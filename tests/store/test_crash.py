"""Crash safety: SIGKILL writers, replicators, readers and closers at random points
(stress/crash_stress.py), and the stress's own oracles against known faults."""

import shutil
import struct

import numpy as np
import pytest
from helpers import load_script

crash = load_script("stress/crash_stress.py", "crash_stress")

SEED = 11_000_000


def _ok(res):
    assert not res["problems"], f"{res['mode']} seed {res['seed']}: {res['problems']}"


# ---------------------------------------------------------------------- trials: 3 per mode (24)
@pytest.mark.parametrize("k", range(3))
@pytest.mark.parametrize("mode", crash.MODES)
def test_sigkill_then_recover(tmp_path, mode, k):
    """Trial k of each mode.  k = 0: a coverage loss injected (and its negative control);
    shared modes kill every process.  k = 1: one process killed at a random time.  k = 2:
    killed just after a marker of its log (a write begun, a replicator chunk, a close begun);
    in close and shared-writers with the journal grown past 4 MiB, so that the (last) close
    compacts it.  Otherwise as the trial's seed says."""
    tseed = SEED + 10 * crash.MODES.index(mode) + k
    over = {"inject": k == 0}
    if k == 0:
        over["bloat"] = False    # a compacted journal of full replicas grown since has no ADD to cut
    if mode in crash.SHARED:
        over["kill_all"] = k == 0
    if k == 1:
        over["trigger"] = None
    if k == 2:
        if mode == "close":
            over["trigger"] = ("closing", 1, 0.003)
        elif mode in ("replicator", "replicate-write", "shared-replicate"):
            over["trigger"] = ("chunk", 4, 0.0005)
            over["victim"] = "rp" if mode in crash.SHARED else "w0"
        else:
            over["trigger"] = ("b", 20, 0.00003)
            over["victim"] = "w0"
        if mode in ("close", "shared-writers"):
            over["bloat"] = True
    res = crash.run_trial(tmp_path, mode, tseed, **over)
    _ok(res)
    assert res["fsck_ok"] and res["lost"] == 0 and res["stale_reads"] == 0
    if res["cfg"]["reader"] and k != 1:
        # (k = 1 kills at a random time, which can be before the reader's first read: the
        # stale-read check is then vacuous for that trial, not wrong)
        assert res["reads"] > 0, "the reader logged no read"
    if k == 0:
        inj = res["inject"]
        assert inj["control_ok"], inj
        assert inj["injected"] and inj["detected"], inj
    if mode in crash.SHARED:
        assert len(res["victims"]) >= 1
        if k == 0:
            assert len(res["victims"]) >= 2      # all of them


@pytest.mark.parametrize("mode,kill", [("writer", False), ("replicator", True), ("shared-writers", True)])
def test_sigkill_then_recover_in_another_boot(tmp_path, monkeypatch, mode, kill):
    """--reboot (issue 28): the recovery after the kill in another boot; with ``kill`` a
    first recovery is SIGKILLed midway.  The journal left unclean must be verified byte for
    byte by the recovery that finishes it (crash.reboot_checks), nothing differs (SIGKILL
    loses no page), and every other check holds."""
    monkeypatch.setattr(crash, "REBOOT", True)
    monkeypatch.setattr(crash, "REBOOT_KILL", 1.0 if kill else 0.0)
    over = {"kill_all": True} if mode in crash.SHARED else {}
    res = crash.run_trial(tmp_path, mode, SEED + 900 + crash.MODES.index(mode), trigger=None, **over)
    _ok(res)
    rb = res["reboot"]
    assert rb["unclean"] and res["differed"] == 0
    assert rb.get("first") == ("killed" if kill else None) or (kill and rb.get("first") == "finished")
    assert res["verified"] or rb.get("first") is not None


def test_reboot_oracle_fails_on_a_skipped_verification(tmp_path):
    """The --reboot checks against known faults: an unclean journal recovered without the
    verification, a stamped header without its flag after a killed recovery that had not
    verified, a flag left set, a CLEAN range that differed."""
    from pario.store import init_store

    root = tmp_path / "s"
    init_store(root, "ceda-hdd8")
    from pario.store import Store

    Store(root).close()
    boot = "b2"
    unclean = {"clean": 0, "verify": 0, "boot_id": "b1"}
    assert crash.reboot_checks(boot, unclean, None, True, 0, root) == []
    assert crash.reboot_checks(boot, unclean, None, False, 0, root)                     # skipped
    assert crash.reboot_checks(boot, unclean, {**unclean, "boot_id": boot, "verify": 1}, False, 0, root)
    assert crash.reboot_checks(boot, unclean, {**unclean, "boot_id": "b1"}, False, 0, root)   # killed before the stamp
    assert crash.reboot_checks(boot, unclean, None, True, 2, root)                      # a CLEAN range differed
    assert crash.reboot_checks(boot, {**unclean, "clean": 1}, None, True, 0, root)      # a clean journal verified
    raw = bytearray((root / "rmt.log").read_bytes())
    struct.pack_into("<I", raw, 52, 1)
    (root / "rmt.log").write_bytes(bytes(raw))
    assert any("still set" in p for p in crash.reboot_checks(boot, unclean, None, True, 0, root))


def test_cli_runs_and_summarises(tmp_path, capsys):
    assert crash.main(["--trials", "2", "--seed", "5", "--mode", "close", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "close: 2 trials, 2 passed, 0 failed; lost acknowledged bytes 0, stale reads 0" in out


# ---------------------------------------------------------------------- the oracles can fail
def _quiet_store(tmp_path, mode="writer"):
    cfg = crash.make_config(mode, 3)
    cfg.update(inject=False)
    tdir = tmp_path / "t"
    tdir.mkdir()
    root = tdir / "store"
    init = crash.setup(root, cfg)
    return cfg, tdir, root, init


def test_check_detects_a_byte_changed_behind_the_store(tmp_path):
    """One byte of the original's data file changed (found with the stress's own mapping:
    offset 500,000 is stripe 7 on server H7, local offset 41,248; no replica covers it)."""
    cfg, tdir, root, init = _quiet_store(tmp_path)
    assert crash.check(root, tdir, cfg, init)["problems"] == []
    x = 500_000
    stripe = x // crash.STRIPE
    fid = crash.read_meta(root)[0]
    path = root / "servers" / f"H{stripe % 8}" / f"{fid:08d}.0"
    local = (stripe // 8) * crash.STRIPE + x % crash.STRIPE
    raw = bytearray(path.read_bytes())
    assert raw[local] == init[x]
    raw[local] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert crash.read_original_raw(root)[x] == init[x] ^ 0xFF
    out = crash.check(root, tdir, cfg, init)
    assert out["lost"] == 1
    assert any("lost or stale, first at offset 500000" in p for p in out["problems"])


def test_check_detects_an_acknowledged_write_missing(tmp_path):
    """The log says a write was acknowledged that the store never got."""
    cfg, tdir, root, init = _quiet_store(tmp_path)
    w = cfg["writers"][0]
    k = next(k for k in range(1, 100) if crash.write_op(cfg, w, k)[0] == "w")
    (tdir / "w0.log").write_text(f"ready 1\nb {k} 2\nd {k} 3\n")
    out = crash.check(root, tdir, cfg, init)
    assert out["lost"] > 0 and out["problems"]
    # begun, not acknowledged: old bytes are fine
    (tdir / "w0.log").write_text(f"ready 1\nb {k} 2\n")
    assert crash.check(root, tdir, cfg, init)["problems"] == []


def test_stale_read_oracle():
    init = bytes(crash.SIZE)
    w1 = crash.Write(0, 1, 100, 50, 1, tb=10, td=20)      # acknowledged at 20
    w2 = crash.Write(0, 2, 120, 50, 2, tb=30, td=None)    # begun at 30, never acknowledged
    new1, new2 = w1.data, w2.data
    state = np.zeros(300, np.uint8)

    def read(t0, t1, vals):
        return (t0, t1, 100, np.asarray(vals, np.uint8)[100:200])
    # before w1 was acknowledged: old or new both fine
    assert crash.check_reads(init, [w1, w2], [read(5, 15, state)])[0] == 0
    after1 = state.copy()
    after1[100:150] = new1
    assert crash.check_reads(init, [w1, w2], [read(21, 25, after1)])[0] == 0
    # after w1 was acknowledged: the old bytes are a stale read
    bad, nbytes, msg = crash.check_reads(init, [w1, w2], [read(21, 25, state)])
    assert bad == 1 and nbytes == int((new1 != 0).sum()) and "stale" in msg
    # w2 in flight during a read that ends after it began: its bytes are fine, partly too
    mix = after1.copy()
    mix[120:140] = new2[:20]
    assert crash.check_reads(init, [w1, w2], [read(25, 35, mix)])[0] == 0
    # ... but not for a read that ended before w2 began
    assert crash.check_reads(init, [w1, w2], [read(22, 28, mix)])[0] == 1


def test_every_injected_coverage_loss_fails_fsck(tmp_path):
    """Every candidate injection (drop or shrink of an ADD record) of a store with CEDA and
    hybrid replicas makes fsck fail; the unchanged rewrite keeps it clean."""
    from pario.store import Store
    from pario.store import rmt_journal as rj
    from pario.store.fsck import fsck

    cfg = crash.make_config("writer", 4)
    cfg["setup"] = ["r1", "r2", "h1"]
    root = tmp_path / "s"
    crash.setup(root, cfg)
    assert crash.rewrite_journal(root)
    with Store(root) as st:
        assert fsck(st)["ok"]
    cuts = crash.coverage_cuts(root, crash.read_meta(root)[2], seed=1, tries=100)
    kinds = {c[0] for c in cuts}
    assert kinds == {"drop", "shrink"}
    recs = rj.read(root / "rmt.log").records
    assert all(recs[i].type == rj.ADD for _, i, _, _ in cuts)
    for how, i, lost, m in cuts[:8]:
        work = tmp_path / f"c{how}{i}"
        shutil.copytree(root, work)
        if how == "drop":
            crash.rewrite_journal(work, drop=i)
        else:
            crash.rewrite_journal(work, shrink=(i, m))
        j = rj.read(work / "rmt.log")
        assert j.stop_reason == "end" and len(j.records) == len(recs) - (how == "drop")
        hdr_end, hdr_seq = struct.unpack_from("<QQ", (work / "rmt.log").read_bytes(), 24)
        assert hdr_end == j.end and hdr_seq == len(j.records)
        with Store(work) as st:
            rep = fsck(st)
        assert not rep["ok"], (how, i, lost)
        assert any("lost coverage" in p or "refused" in p for p in rep["problems"]), rep["problems"]
