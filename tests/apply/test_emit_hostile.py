"""Hostile plan files (issue 24): a plan is a file users receive from others, and its file
names become operands of the scripts ``pario apply --emit`` writes and of the paths
``pario apply --cephfs`` creates.

Checked against independent oracles, not against pario's own reading: each emitted script is
run by ``sh -x`` with PATH holding only stub executables (``lfs``, ``beegfs-ctl``,
``setfattr``, ``getfattr``, ``pvfs2-touch``, ``ceph``, ``mkdir``, ``touch``, ``mv``,
``rmdir``) that log their argv (NUL-separated) and create what the real tool would create; the
filesystem (a sentinel directory beside the root, the working directory, everything under
the temporary directory), the stubs' logs, the shell's own trace of what it ran, and each
tool's own argument grammar (getopt's ``--``; beegfs-ctl's split at ``=`` and trim,
``MapTk::addLineToStringMap``) say where every name landed.  Names that the spec refuses
(this file's own reading of docs/emit.md, :func:`landing`) must be refused with one line,
exit 2 and nothing written."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import types
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from pario import ParioError
from pario.cli import main

TARGETS = ("lustre", "beegfs", "orangefs", "cephfs")
K = 1024
DATAFILES = ((1, "H0"), (2, "H1"))          # the CEDA plan's replica data files: (datafile, server)
STAGE = ".pario-orangefs"                     # OrangeFS's staging directories, under the root
# what a stub does after logging: the real tool for the coreutils; for the file-system tools
# what the real one would do to the file system with its last argument (the path operand)
EFFECTS = {
    "lfs": '[ -d "$p" ] || : > "$p"\n',
    "beegfs-ctl": 'case "$1" in --createfile) : > "$p";; --setpattern) [ -d "$p" ];; esac\n',
    "pvfs2-touch": ': > "$p"\n',
    "setfattr": '[ -e "$p" ]\n',
    "getfattr": '[ -e "$p" ]\n',
    "ceph": "",
    **{tool: f'exec {shlex.quote(shutil.which(tool) or "/bin/false")} "$@"\n'
       for tool in ("mkdir", "touch", "mv", "rmdir")},
}
# beegfs-ctl's option keys in the commands pario emits: every other key is a path
BEEGFS_OPTIONS = {"--createfile", "--setpattern", "--addstoragepool", "--chunksize", "--numtargets", "--targets",
                  "--force", "--storagepoolid", "--id", "--desc"}


# ---------------------------------------------------------------------- plans
def padp_plan(name: str) -> dict:
    return {"pario_plan": 1, "scheme": "padp", "system": "hacio-6h2s", "replicas": {},
            "layouts": {name: {"type": "striped", "servers": ["H0", "H1", "S0"], "stripes": [24 * K, 24 * K, 64 * K]},
                        "*": {"type": "striped", "servers": ["H0", "H1"], "stripes": [64 * K, 64 * K]}}}


def ceda_plan(name: str) -> dict:
    return {"pario_plan": 1, "scheme": "ceda", "system": "ceda-hdd8",
            "layouts": {"*": {"type": "striped", "servers": [f"H{j}" for j in range(8)], "stripes": [64 * K] * 8}},
            "replicas": {name: [{"name": "ceda", "layout": {"type": "extents", "extents": [
                [(df - 1) * 64 * K, 64 * K, srv, 0, df] for df, srv in DATAFILES]}}]}}


PLANS = {"padp": padp_plan, "ceda": ceda_plan}


def landing(name: str) -> str | None:
    """Where the spec says a plan's file name lands, relative to the root; None: refused
    (empty, a control character, not UTF-8, absolute, leaves the root or is the root, or
    names a directory: ends with '/', '.' or '..')."""
    if not name or name.startswith("/") or name.endswith("/") or name.split("/")[-1] in (".", ".."):
        return None
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name):
        return None
    parts: list[str] = []
    for c in name.split("/"):
        if c == "..":
            if not parts:
                return None
            parts.pop()
        elif c not in ("", "."):
            parts.append(c)
    return "/".join(parts) or None


# ---------------------------------------------------------------------- running a CLI / a script
def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def assert_refused(rc, out, err, *needles):
    assert rc == 2 and out == "", (rc, out, err)
    assert err.startswith("pario: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert err[:-1].isprintable(), err                       # the message itself holds no control character
    for n in needles:
        assert n in err, (n, err)


def read_log(path: Path) -> list[list[str]]:
    """The stubs' log: per command its tool, then its arguments (count-prefixed, NUL-ended)."""
    parts = path.read_bytes().split(b"\0") if path.exists() else [b""]
    assert parts[-1] == b""
    out, i = [], 0
    while i < len(parts) - 1:
        n = int(parts[i + 1])
        out.append([parts[i].decode()] + [p.decode("utf-8") for p in parts[i + 2:i + 2 + n]])
        i += 2 + n
    return out


def operands(argv: list[str]) -> list[str]:
    """The file operands of a logged command, by the tool's own grammar."""
    tool, args = argv[0], argv[1:]
    if tool == "ceph":
        return []
    if tool == "beegfs-ctl":   # each argument split at its first '=' and trimmed; non-option keys are paths
        return sorted({a.split("=", 1)[0].strip(" \t\r\n") for a in args} - BEEGFS_OPTIONS)
    assert "--" in args, argv                                # getopt tools: operands after "--"
    return args[args.index("--") + 1:]


def make_stubs(d: Path) -> None:
    d.mkdir()
    for tool, effect in EFFECTS.items():
        p = d / tool
        p.write_text('#!/bin/sh\n{ printf "%s\\0" "${0##*/}" "$#"; for a in "$@"; do printf "%s\\0" "$a"; done; } '
                     '>> "$STUB_LOG"\neval "p=\\${$#}"\n' + effect)
        p.chmod(0o755)


class Sandbox:
    """A temporary directory: ``root`` (the target root), ``sentinel`` beside it, ``cwd`` (the
    script's working directory when the root is absolute), the stubs and their log."""

    def __init__(self, base: Path, relative_root: bool):
        self.base = base
        base.mkdir(exist_ok=True)
        self.root, self.sentinel, self.stubs, self.log = base / "root", base / "sentinel", base / "stubs", base / "log"
        self.root.mkdir()
        self.sentinel.mkdir()
        make_stubs(self.stubs)
        self.relative = relative_root
        self.cwd = self.root if relative_root else base / "cwd"
        self.cwd.mkdir(exist_ok=True)
        self.root_arg = "." if relative_root else str(self.root)

    def expected(self, rel: str) -> str:
        """The operand a name landing at ``rel`` must be passed as."""
        return f"{self.root_arg}/{rel}"

    def emit(self, plan: dict, target: str, *extra):
        p = self.base / "plan.json"
        p.write_text(json.dumps(plan))            # ensure_ascii: lone surrogates survive as \\udXXX
        script = self.base / f"{target}.sh"
        rc, out, err = run_cli("apply", p, "--emit", target, "--root", self.root_arg, "-o", script, *extra)
        return rc, out, err, script

    def run(self, script: Path) -> list[list[str]]:
        """Run the script; (b): it ran only the stubs, every command it ran is logged."""
        self.log.unlink(missing_ok=True)
        r = subprocess.run(["/bin/sh", "-x", str(script)], cwd=self.cwd, capture_output=True, text=True, timeout=60,
                           env={"PATH": str(self.stubs), "STUB_LOG": str(self.log), "PS4": "+ "})
        assert r.returncode == 0, (r.returncode, r.stderr, script.read_text())
        cmds = read_log(self.log)
        traced = [line for line in r.stderr.splitlines() if line.startswith("+ ")]
        assert len(traced) == 1 + len(cmds), (traced, cmds)     # "set -e", then one per stub run: no other command
        return cmds

    def check_filesystem(self, files: set[str]) -> None:
        """(a): nothing outside the root; every expected file (paths relative to the root) made."""
        assert list(self.sentinel.iterdir()) == []
        if not self.relative:
            assert list(self.cwd.iterdir()) == []
        known = {self.root, self.sentinel, self.stubs, self.log, self.cwd, self.base / "plan.json"}
        for p in self.base.iterdir():
            assert p in known or (p.suffix == ".sh" and p.is_file()), p
        for rel in files:
            assert (self.root / rel).is_file(), (rel, sorted(map(str, self.root.rglob("*"))))


def check_emitted(box: Sandbox, kind: str, target: str, name: str, rc, out, err, script: Path) -> None:
    """The property: refused with one line exactly when the spec refuses the name, else the
    script run by sh puts the name (and its data files) at the expected paths under the root,
    each passed as one argument, and does nothing else."""
    rel = landing(name)
    ok = rel is not None and not (target == "beegfs" and ("=" in box.expected(rel) or box.expected(rel).endswith(" ")))
    if not ok:
        assert_refused(rc, out, err)
        assert not script.exists()                   # nothing written
        return
    assert rc == 0, err
    (box.root / rel).parent.mkdir(parents=True, exist_ok=True)   # a plan's directories exist before its files
    cmds = box.run(script)
    files = {rel} if kind == "padp" else {f"{rel}.pario-ceda.d{df}.{srv}" for df, srv in DATAFILES}
    want = {box.expected(f) for f in files} | {box.root_arg}      # the "*" layout: the root itself
    seen = set()
    for argv in cmds:
        ops = operands(argv)
        if argv[0] != "ceph" and argv[1] != "--addstoragepool":
            assert ops, argv
        for op in ops:                                # (c): each operand one argument, under the root
            if not op.startswith(f"{box.root_arg}/{STAGE}/"):       # (OrangeFS's staging directories)
                assert op in want, (op, want, argv)
                seen.add(op)
    assert seen == want
    box.check_filesystem(files)


# ---------------------------------------------------------------------- the property
FRAGMENTS = ["..", ".", "/", "-", "--", "-t", "--mirror-count=5", "$(touch pwned)", "`touch pwned`", "'", '"', "*",
             "?", "[", "]", "~", ";", "|", "&", " ", "\\", "=", "#", "!", "$HOME", "{a,b}", "\n", "\r", "\t", "\x00",
             "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\ud800", "é", "\u202e", "😀", "../sentinel/"]
NAMES = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(), max_size=3)),
                 max_size=6).map("".join).filter(lambda n: n != "*")


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=NAMES, kind=st.sampled_from(sorted(PLANS)), relative_root=st.booleans())
@example(name="a\ntouch pwned", kind="padp", relative_root=False)
@example(name="../sentinel/x", kind="ceda", relative_root=False)
@example(name="--mirror-count=5", kind="padp", relative_root=True)
@example(name="a=b ", kind="padp", relative_root=False)
@example(name="..../sentinel/", kind="ceda", relative_root=False)
def test_hostile_names_are_refused_or_land_under_the_root(name, kind, relative_root):
    for target in TARGETS:
        with tempfile.TemporaryDirectory() as d:
            box = Sandbox(Path(d), relative_root)
            check_emitted(box, kind, target, name, *box.emit(PLANS[kind](name), target))


# ---------------------------------------------------------------------- the reported cases
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", sorted(PLANS))
def test_a_newline_in_a_name_is_refused_in_one_line(tmp_path, target, kind):
    box = Sandbox(tmp_path, relative_root=False)
    rc, out, err, script = box.emit(PLANS[kind]("a.dat\ntouch pwned"), target)
    assert_refused(rc, out, err, "'a.dat\\ntouch pwned'", "control character")
    assert not script.exists() and not (box.cwd / "pwned").exists()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, why", [
    ("../sentinel/x.dat", "leaves the root"),
    ("a/../../x.dat", "leaves the root"),
    ("/tmp/x.dat", "--absolute-names"),
    ("", "is empty"),
    ("a/..", "the root directory itself"),
    ("a/b/..", "names a directory"),
    ("a/", "names a directory"),
    ("a/b/.", "names a directory"),
])
def test_escaping_absolute_and_empty_names_are_refused(tmp_path, target, name, why):
    for kind in PLANS:
        box = Sandbox(tmp_path / kind, relative_root=False)
        rc, out, err, script = box.emit(PLANS[kind](name), target)
        assert_refused(rc, out, err, why)
        assert not script.exists()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["-t", "--mirror-count=5"])
def test_a_leading_dash_is_a_file_not_an_option(tmp_path, target, name):
    for kind, relative in (("padp", True), ("ceda", False)):
        box = Sandbox(tmp_path / kind, relative_root=relative)
        rc, out, err, script = box.emit(PLANS[kind](name), target)
        assert (rc == 0) == (target != "beegfs" or "=" not in name), err    # beegfs-ctl splits at '='
        check_emitted(box, kind, target, name, rc, out, err, script)
        assert box.expected(name).startswith(("./", "/"))


@pytest.mark.parametrize("target", TARGETS)
def test_absolute_names_with_the_flag(tmp_path, target):
    box = Sandbox(tmp_path, relative_root=False)
    elsewhere = tmp_path / "root" / "abs"          # in the sandbox's root, so the filesystem check holds
    elsewhere.mkdir()
    name = str(elsewhere / "x.dat")
    rc, out, err, script = box.emit(padp_plan(name), target, "--absolute-names")
    assert rc == 0, err
    cmds = box.run(script)
    assert [name] in [operands(a) for a in cmds] or [f"{box.root}/{STAGE}/1/x.dat", name] in [operands(a) for a in cmds]
    box.check_filesystem({"abs/x.dat"})


def test_comments_stay_comments(tmp_path):
    """A scheme or replica name with a newline (not a file name) is escaped in the comments."""
    plan = ceda_plan("a.dat")
    plan["scheme"] = "ceda\ntouch pwned"
    box = Sandbox(tmp_path, relative_root=False)
    for target in TARGETS:
        rc, out, err, script = box.emit(plan, target)
        assert rc == 0, err
        assert "ceda\\ntouch pwned" in script.read_text()
        box.run(script)
    assert not (box.cwd / "pwned").exists()
    plan["replicas"]["a.dat"][0]["name"] = "x/../../y"
    rc, out, err, _ = box.emit(plan, "lustre")
    assert_refused(rc, out, err, "replica name", "one path component")


# ---------------------------------------------------------------------- pario apply --cephfs
@pytest.fixture
def live(tmp_path, monkeypatch):
    """A stand-in for a ``pario cluster``: its mount a plain directory, ``touch`` the real one
    and ``setfattr`` a stub on PATH (both logged), layouts read back from the stubs' log."""
    from pario.apply import cephfs_live

    mount, outside = tmp_path / "mnt", tmp_path / "outside"
    mount.mkdir()
    outside.mkdir()
    stubs, log = tmp_path / "stubs", tmp_path / "log"
    make_stubs(stubs)
    cluster = types.SimpleNamespace(mount=str(mount), fs_name="pario", fs_pools={"hdd": "pario-fs-hdd",
                                                                                  "ssd": "pario-fs-ssd"})
    monkeypatch.setattr("pario.cluster.state.load_state", lambda d: cluster)
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == str(mount) or os.path.realpath(p) == str(mount))
    monkeypatch.setenv("PATH", str(stubs))
    monkeypatch.setenv("STUB_LOG", str(log))

    def read_back(path):
        got = {}
        for a in read_log(log):
            if a[0] == "setfattr" and a[-1] == str(path):
                got[a[2].rsplit(".", 1)[1]] = a[4]
        return got

    monkeypatch.setattr(cephfs_live, "read_layout", read_back)
    return types.SimpleNamespace(mount=mount, outside=outside, log=log, tmp=tmp_path)


def _live_plan(tmp: Path, name: str) -> Path:
    p = tmp / "plan.json"
    p.write_text(json.dumps(padp_plan(name)))
    return p


@pytest.mark.parametrize("name", ["a\ntouch pwned", "../x.dat", "../outside/x.dat", "/etc/x.dat", "", "a/.."])
def test_live_apply_refuses_hostile_names_before_changing_anything(live, name):
    rc, out, err = run_cli("apply", _live_plan(live.tmp, name), "--cephfs", "CL", "--root", "t")
    assert_refused(rc, out, err)
    assert list(live.mount.iterdir()) == [] and list(live.outside.iterdir()) == [] and not live.log.exists()


def test_live_apply_refuses_a_link_out_of_the_mount(live):
    (live.mount / "t").mkdir()
    (live.mount / "t" / "link").symlink_to(live.outside)
    rc, out, err = run_cli("apply", _live_plan(live.tmp, "link/x.dat"), "--cephfs", "CL", "--root", "t")
    assert_refused(rc, out, err, "outside the CephFS mount")
    assert list(live.outside.iterdir()) == [] and not live.log.exists()
    rc, out, err = run_cli("apply", _live_plan(live.tmp, str(live.outside / "x.dat")), "--cephfs", "CL",
                           "--root", "t", "--absolute-names")
    assert_refused(rc, out, err, "outside the CephFS mount")
    assert list(live.outside.iterdir()) == [] and not live.log.exists()


def test_live_apply_puts_dashed_and_absolute_names_under_the_mount(live):
    from pario.apply import load_plan
    from pario.apply.cephfs_live import apply_cephfs

    for name, where in (("-t", live.mount / "t" / "-t"), (str(live.mount / "abs.dat"), live.mount / "abs.dat")):
        live.log.unlink(missing_ok=True)
        plan, system = load_plan(_live_plan(live.tmp, name))
        res = apply_cephfs(plan, system, "CL", subdir="t", absolute_names=True)
        assert res.ok and where.is_file()
        cmds = read_log(live.log)
        assert ["touch", "--", str(where)] in cmds
        assert all(a[-2:] == ["--", str(where)] or a[-2:] == ["--", str(live.mount / "t")] for a in cmds), cmds
    assert list(live.outside.iterdir()) == []
    with pytest.raises(ParioError, match="--absolute-names"):
        apply_cephfs(*load_plan(_live_plan(live.tmp, str(live.mount / "abs.dat"))), "CL", subdir="t")
