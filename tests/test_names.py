"""pario.names: what a plan's file name may be, and where it lands under a root (the one check
every consumer of plan names calls; issue 24)."""

from __future__ import annotations

import pytest

from pario import ParioError
from pario.names import MAX_BYTES, check_name, printable, root_path, target_path


@pytest.mark.parametrize("name, why", [
    ("", "is empty"),
    ("a\nb", "control character"),
    ("a\x00b", "control character"),
    ("\x1b[2J", "control character"),
    ("a\x85b", "control character"),            # NEL: category Cc
    ("a\u2028b", "control character"),          # LINE SEPARATOR: Zl
    ("a\u2029b", "control character"),          # PARAGRAPH SEPARATOR: Zp
    ("a\ud800b", "lone surrogate"),
    ("é" * (MAX_BYTES // 2 + 1), "bytes (at most 4096)"),
    (7, "not a string"),
])
def test_check_name_refuses_in_one_printable_line(name, why):
    with pytest.raises(ParioError) as exc:
        check_name(name)
    msg = str(exc.value)
    assert why in msg and "\n" not in msg and msg.isprintable() and len(msg) < 300, msg


@pytest.mark.parametrize("name", ["a.dat", "-t", "--mirror-count=5", "a b/$(rm -rf ~)'`;|&*?[~", "é😀", "x" * 4096])
def test_check_name_keeps_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["a/b", ".", ".."])
def test_component_is_one_path_component(name):
    assert check_name(name) == name
    with pytest.raises(ParioError, match="one path component"):
        check_name(name, "replica name", component=True)


@pytest.mark.parametrize("root, name, want", [
    (".", "a.dat", "./a.dat"),
    (".", "-t", "./-t"),
    (".", "--mirror-count=5", "./--mirror-count=5"),
    (".", "a/./b//c", "./a/b/c"),
    (".", "a/b/../c", "./a/c"),
    ("out", "a.dat", "./out/a.dat"),
    ("-r", "a.dat", "./-r/a.dat"),
    ("/mnt/fs/", "a.dat", "/mnt/fs/a.dat"),
    ("/mnt/fs", "-t", "/mnt/fs/-t"),
    ("", "a", "./a"),
])
def test_target_path_lands_under_the_root_never_as_an_option(root, name, want):
    assert target_path(root, name) == want


@pytest.mark.parametrize("name, why", [
    ("../x", "leaves the root"),
    ("a/../../x", "leaves the root"),
    ("..", "leaves the root"),
    (".", "the root directory itself"),
    ("a/..", "the root directory itself"),
    ("./", "the root directory itself"),
    ("a/", "names a directory"),
    ("a/b/..", "names a directory"),
    ("a/b/.", "names a directory"),
    ("/etc/passwd", "--absolute-names"),
    ("", "is empty"),
    ("a\nrm -rf ~", "control character"),
])
def test_target_path_refuses(name, why):
    with pytest.raises(ParioError) as exc:
        target_path("/mnt/fs", name)
    assert why in str(exc.value) and str(exc.value).isprintable()


def test_absolute_names_only_when_allowed():
    assert target_path("/mnt/fs", "/data/x/../a.dat", allow_absolute=True) == "/data/a.dat"
    with pytest.raises(ParioError, match="root directory"):
        target_path("/mnt/fs", "//", allow_absolute=True)


def test_root_path_and_printable():
    assert [root_path(r) for r in (".", "", "out/", "-r", "/mnt/fs/")] == [".", ".", "./out", "./-r", "/mnt/fs"]
    with pytest.raises(ParioError, match="--root"):
        root_path("a\nb")
    assert printable("plan 'x\ny'\u2028\x1b\ud800 é") == "plan 'x\\ny'\\u2028\\x1b\\ud800 é"
