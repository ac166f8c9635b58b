"""Darshan DXT import (pario.trace.darshan) against the shared logs and their MANIFEST."""

from __future__ import annotations

import json
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import TRACES

from pario import ParioError
from pario.cli import main
from pario.trace import READ, WRITE, load
from pario.trace.darshan import ParioWarning, import_darshan, read_darshan

LOGS = sorted(TRACES.glob("*.darshan")) + sorted(TRACES.glob("real/*.darshan"))
MIB = 1 << 20

pytestmark = pytest.mark.skipif(not LOGS, reason="shared Darshan logs not available")


def log(name: str) -> Path:
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"{name} not available")
    return p


def manifest() -> dict[str, dict]:
    """MANIFEST rows: file -> {module: (writes, reads, MiB written, MiB read)}; the DXT_POSIX
    counts leave out the ROMIO hints file's read where the notes say it is there ("+1 POSIX
    read of the hints file", 96 bytes): the importer does not import it as data."""
    path = TRACES / "MANIFEST.md"
    if not path.exists():
        return {}
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[0].endswith(".darshan"):
            continue
        segs = cells[4].split("/")
        counts = [re.fullmatch(r"(\d+)w\+(\d+)r", s.strip()) for s in segs]
        nbytes = dict(re.findall(r"(POSIX|MPIIO) ([\d.]+w/[\d.]+r)", cells[5]))
        entry = {}
        hints_read = 1 if "+1 POSIX read of the hints file" in line else 0
        for mod, m in zip(("DXT_POSIX", "DXT_MPIIO"), counts):
            key = mod.removeprefix("DXT_")
            if m and key in nbytes:
                w, r = nbytes[key].split("/")
                skip = hints_read if mod == "DXT_POSIX" else 0
                entry[mod] = (int(m.group(1)), int(m.group(2)) - skip, float(w[:-1]),
                              float(r[:-1]) - skip * 96 / MIB)
        rows[cells[0]] = entry
    return rows


MANIFEST = manifest()


def rel(p: Path) -> str:
    return str(p.relative_to(TRACES)) if p.is_relative_to(TRACES) else p.name


# ------------------------------------------------------------------ every log
@pytest.mark.parametrize("path", LOGS, ids=rel)
def test_every_log_imports_or_fails_cleanly(path, capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ParioWarning)
        try:
            t = import_darshan(path)
        except ParioError as exc:
            assert "\n" not in str(exc)
            return
    assert len(t) > 0
    assert t.offset.min() >= 0 and t.length.min() >= 0
    assert np.isfinite(t.start).all() and (t.end >= t.start).all()
    # order numbers each rank's requests 0..k-1 by start time
    s = t.sorted()
    for r in np.unique(s.rank):
        m = s.rank == r
        assert s.order[m].tolist() == list(range(int(m.sum())))
        assert (np.diff(s.start[m]) >= 0).all()
    assert all(isinstance(f, str) and f for f in t.files)
    assert "Error" not in capfd.readouterr().err


@pytest.mark.parametrize("name", sorted(MANIFEST), ids=str)
def test_counts_and_bytes_match_manifest(name):
    path = log(name)
    for module, (w, r, mib_w, mib_r) in MANIFEST[name].items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ParioWarning)  # forced DXT_MPIIO of view-based logs
                t = import_darshan(path, module=module)
        except ParioError as exc:
            # Darshan 3.1 DXT_MPIIO has no offsets: refusing it is the documented behaviour
            assert module == "DXT_MPIIO" and "no file offsets" in str(exc)
            continue
        assert int((t.op == WRITE).sum()) == w, module
        assert int((t.op == READ).sum()) == r, module
        assert t.bytes_written / MIB == pytest.approx(mib_w, abs=0.006), module
        assert t.bytes_read / MIB == pytest.approx(mib_r, abs=0.006), module


def test_manifest_was_parsed():
    if not (TRACES / "MANIFEST.md").exists():
        pytest.skip("no MANIFEST")
    assert len(MANIFEST) >= 30
    assert MANIFEST["ior-mpiio-strided-16r-64k.darshan"]["DXT_MPIIO"] == (1024, 1024, 64.0, 64.0)


# ------------------------------------------------------------------ specific logs
def test_ior_strided_layout():
    res = read_darshan(log("ior-mpiio-strided-16r-64k.darshan"))
    t = res.trace
    assert res.module == "DXT_MPIIO" and not res.partial
    assert t.nranks == 16 and len(t.files) == 1 and t.files[0].endswith("ior.dat")
    assert (t.op == WRITE).sum() == 1024 and (t.op == READ).sum() == 1024
    assert t.bytes_written == 64 * MIB and t.bytes_read == 64 * MIB
    assert not t.collective.any()  # independent write_at/read_at
    # IOR -b 64k -t 64k -s 64: rank r, segment k at offset (k*16 + r) * 64 KiB
    w = t.where(op="write").sorted()
    k = w.order  # writes come first in each rank's stream
    np.testing.assert_array_equal(w.offset, (k * 16 + w.rank) * 65536)


def test_collective_inference():
    coll = import_darshan(log("ior-mpiio-strided-coll-16r-64k.darshan"))
    assert coll.collective.all()  # -c: write_at_all / read_at_all
    with pytest.warns(ParioWarning, match="file views"):  # rebuilt from DXT_POSIX, inside collective calls
        assert import_darshan(log("btio-full-S-4r.darshan")).collective.all()
    assert not import_darshan(log("btio-simple-S-4r.darshan")).collective.any()
    with pytest.warns(ParioWarning, match="file views"):
        assert not import_darshan(log("hpio-indep-c-nc-16r-c512-s16k-sp0.darshan")).collective.any()
    # POSIX segments are never collective
    assert not import_darshan(log("ior-mpiio-strided-coll-16r-64k.darshan"), module="DXT_POSIX").collective.any()


@pytest.mark.parametrize("module", [None, "DXT_POSIX"])
def test_romio_hints_file_is_a_note_not_data(module):
    # ROMIO reads the 96-byte hints file with POSIX read(): one extra DXT_POSIX record (MANIFEST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ParioWarning)
        t = import_darshan(log("hpio-coll-cb4-c-nc-16r-c512-s16k-sp0.darshan"), module=module)
    assert len(t.files) == 1 and not t.files[0].endswith("romio-hints-cb4.txt")
    assert [n for n in t.meta.notes if "romio-hints-cb4.txt" in n and "hints file" in n]


def test_posix_only_log_falls_back_and_forced_mpiio_fails():
    path = log("real/nonmpi_dxt_anonymized.darshan")
    res = read_darshan(path)
    assert res.module == "DXT_POSIX" and len(res.trace) == 9830 + 7822
    with pytest.raises(ParioError, match="no DXT_MPIIO data"):
        import_darshan(path, module="DXT_MPIIO")
    with pytest.raises(ParioError, match="bad DXT module"):
        import_darshan(path, module="HEATMAP")


def test_old_mpiio_without_offsets_falls_back_to_posix():
    path = log("real/mpi-io-test-x86_64-3.1.6.darshan")
    with pytest.warns(ParioWarning, match="no file offsets"):
        res = read_darshan(path)
    assert res.module == "DXT_POSIX"
    # 4 ranks, each one 16 MiB block at rank * 16 MiB (written, then read back)
    assert sorted(res.trace.offset.tolist()) == sorted([r * 16 * MIB for r in range(4)] * 2)
    with pytest.raises(ParioError, match="no file offsets"):
        import_darshan(path, module="DXT_MPIIO")


# ------------------------------------------------------------------ damaged logs
def _copy_with(src: Path, dst: Path, edit) -> Path:
    data = bytearray(src.read_bytes())
    edit(data)
    dst.write_bytes(bytes(data))
    return dst


# Darshan 3.41 header: partial flags (u64 bit mask by module index) at byte 24,
# region maps (u64 offset, u64 length) from byte 32: name records, then module 0, 1, ...
DXT_POSIX_IDX, DXT_MPIIO_IDX = 10, 11


def test_partial_log_warns_with_surviving_count(tmp_path):
    src = log("ior-mpiio-strided-16r-64k.darshan")
    dst = _copy_with(src, tmp_path / "partial.darshan",
                     lambda d: struct.pack_into("<Q", d, 24, (1 << DXT_MPIIO_IDX) | (1 << DXT_POSIX_IDX)))
    with pytest.warns(ParioWarning, match=r"partial.*2048 segments"):
        res = read_darshan(dst)
    assert res.partial and len(res.trace) == 2048


def _drop_dxt(d):
    for idx in (DXT_POSIX_IDX, DXT_MPIIO_IDX):
        struct.pack_into("<QQ", d, 32 + 16 * (1 + idx), 0, 0)


def test_log_without_dxt_goes_to_the_counters_synthesizer(tmp_path, monkeypatch):
    import sys
    import types

    from pario.trace import Trace
    from pario.trace.core import TraceMeta

    dst = _copy_with(log("ior-mpiio-seq-16r-b4m-t64k.darshan"), tmp_path / "nodxt.darshan", _drop_dxt)
    seen = []
    fake = types.ModuleType("pario.trace.darshan_counters")
    fake.synthesize = lambda p: seen.append(p) or Trace.from_arrays(
        [0, 1], ["f", "f"], ["write", "write"], [0, 7], [7, 7], meta=TraceMeta(nprocs=16))
    monkeypatch.setitem(sys.modules, "pario.trace.darshan_counters", fake)
    res = read_darshan(dst)
    assert seen == [dst] and res.module == "counters" and len(res.trace) == 2
    assert res.trace.meta.approximate and res.trace.meta.nprocs == 16  # marked even if the synthesizer forgot
    seen.clear()
    assert len(import_darshan(log("ior-mpiio-seq-16r-b4m-t64k.darshan"), counters=True)) == 2 and seen
    with pytest.raises(ParioError, match="exclude"):
        read_darshan(dst, module="DXT_POSIX", counters=True)
    with pytest.raises(ParioError, match="no DXT_POSIX data"):
        read_darshan(dst, module="DXT_POSIX")


def test_log_without_dxt_without_synthesizer_asks_for_dxt_enable(tmp_path, monkeypatch):
    import sys

    dst = _copy_with(log("ior-mpiio-seq-16r-b4m-t64k.darshan"), tmp_path / "nodxt.darshan", _drop_dxt)
    monkeypatch.setitem(sys.modules, "pario.trace.darshan_counters", None)  # import fails: not built
    with pytest.raises(ParioError, match=r"counters-only log: .*DXT_ENABLE_IO_TRACE=1") as exc:
        import_darshan(dst)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.6, 0.95, 0.999])
def test_truncated_log_fails_cleanly(tmp_path, capfd, fraction):
    src = log("ior-mpiio-strided-16r-64k.darshan")
    data = src.read_bytes()
    dst = tmp_path / "cut.darshan"
    dst.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ParioError) as exc:
        import_darshan(dst)
    assert "\n" not in str(exc.value)
    assert re.search(r"truncated|not a Darshan log", str(exc.value))
    assert capfd.readouterr().err == ""


def test_corrupt_compressed_data_fails_cleanly_and_silently(tmp_path, capfd):
    src = log("ior-mpiio-strided-16r-64k.darshan")

    def scramble(d):
        off, ln = struct.unpack_from("<QQ", d, 32 + 16 * (1 + DXT_MPIIO_IDX))
        for i in range(off + 20, off + min(ln, 80)):
            d[i] ^= 0x5A

    dst = _copy_with(src, tmp_path / "bad.darshan", scramble)
    with pytest.raises(ParioError, match="corrupt Darshan log"):
        import_darshan(dst)
    assert capfd.readouterr().err == ""  # libdarshan's C messages were captured


@pytest.mark.parametrize("content", [b"", b"hello world\n", bytes(range(256)) * 20, b"3.41\0\0\0\0" + b"\0" * 40])
def test_non_darshan_file(tmp_path, capfd, content):
    p = tmp_path / "x.darshan"
    p.write_bytes(content)
    with pytest.raises(ParioError, match="not a Darshan log|not a readable Darshan log"):
        import_darshan(p)
    assert capfd.readouterr().err == ""


def test_missing_and_directory(tmp_path):
    with pytest.raises(ParioError, match="no such file"):
        import_darshan(tmp_path / "nope.darshan")
    with pytest.raises(ParioError, match="directory"):
        import_darshan(tmp_path)


# ------------------------------------------------------------------ CLI
def test_cli_import_and_show(tmp_path, capsys):
    out = tmp_path / "t.parquet"
    rc = main(["trace", "import", str(log("ior-mpiio-strided-16r-64k.darshan")), "-o", str(out)])
    cap = capsys.readouterr()
    assert rc == 0 and cap.err == ""
    assert len(cap.out.strip().splitlines()) == 1 and "2048 requests" in cap.out
    t = load(out)
    assert len(t) == 2048 and t.bytes_read == 64 * MIB
    assert main(["trace", "show", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["requests"] == 2048 and s["ranks"] == 16
    assert s["patterns"]["3"][t.files[0]] == {"kind": "strided", "stride": 16 * 65536,
                                               "requests": 128, "bytes": 128 * 65536}
    assert main(["trace", "show", str(out)]) == 0
    assert "strided" in capsys.readouterr().out


def test_cli_show_darshan_directly_and_module(tmp_path, capsys):
    path = log("hpio-coll-cb4-c-nc-16r-c512-s16k-sp0.darshan")
    assert main(["trace", "show", str(path), "--json", "--module", "posix"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["requests"] == 32 + 32 and len(s["files"]) == 1  # the hints file's read is a note
    assert s["nprocs"] == 16 and s["ranks_with_io"] == 4 and s["aggregators"] == [0, 1, 2, 3]


def test_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    junk = tmp_path / "junk.darshan"
    junk.write_bytes(b"junk")
    for argv in (["trace", "import", str(junk), "-o", str(tmp_path / "o.parquet")],
                 ["trace", "show", str(junk)],
                 ["trace", "import", str(log("ior-mpiio-seq-16r-b4m-t64k.darshan")), "-o", str(tmp_path / "o.txt2")],
                 ["trace", "show", str(tmp_path / "o.csv"), "--module", "DXT_POSIX"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("pario: error:"), err
    assert not (tmp_path / "o.parquet").exists()


def test_cli_partial_warning_is_one_stderr_line(tmp_path, capsys):
    src = log("ior-mpiio-strided-16r-64k.darshan")
    dst = _copy_with(src, tmp_path / "p.darshan", lambda d: struct.pack_into("<Q", d, 24, 1 << DXT_MPIIO_IDX))
    assert main(["trace", "import", str(dst), "-o", str(tmp_path / "p.csv")]) == 0
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pario: warning:") and "2048" in lines[0]
    assert "(partial)" in cap.out


def test_cli_show_csv_with_markup_like_file_names(tmp_path, capsys):
    from pario.trace import Trace, save

    p = save(Trace.from_arrays([0, 1], ["[/bold]x", "[red]y"], ["read", "write"], [0, 0], [1, 2]),
             tmp_path / "m.csv")
    assert main(["trace", "show", str(p)]) == 0
    out = capsys.readouterr().out
    assert "[/bold]x" in out and "[red]y" in out
