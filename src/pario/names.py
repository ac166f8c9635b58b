"""File names from a plan: what is a name, and where it lands under a root.

A plan is a file users receive from others, and its file names become operands of shell
commands (``pario apply --emit``) and paths pario creates (``pario apply --cephfs``).  Every
consumer checks them here, once::

    check_name(name, what="file name")          # -> name, or ParioError (one line)
    target_path(root, name)                      # -> "./a.dat", "ROOT/a.dat": where it lands
    root_path(root)                              # -> the root itself as an operand
    printable(text)                              # -> text with control characters escaped

A **name** is a non-empty ``str`` of at most :data:`MAX_BYTES` bytes in UTF-8 (so no lone
surrogates) with no control character (:data:`CONTROL`: Unicode categories Cc — NUL, newline,
tab, DEL, the C1 controls — and Zl / Zp, the line and paragraph separators).  A name for one
path component (``component=True``: a replica or server name inside a file name) also has no
``/`` and is not ``.`` or ``..``.

A name **lands** under the root at its lexically normalised path (``a/./b`` = ``a/b``,
``a/b/../c`` = ``a/c``): refused when that leaves the root (``..``, ``a/../..``), is the root
itself (``.``, ``a/..``) or names a directory (ends with ``/``, ``.`` or ``..``: ``a/``,
``a/b/..``); an absolute name is refused unless the caller allows absolute names
(``pario apply --absolute-names``), and then lands where it says (``/`` itself is refused).  The path returned can never be taken as an option: a relative one starts with
``./``, an absolute one with ``/``.  Symbolic links are not followed (the path is lexical):
a consumer that creates files itself must also check where the path resolves.

Error messages show a name with :func:`repr` (control characters escaped, one line).
"""

from __future__ import annotations

import posixpath
import unicodedata

from . import ParioError

MAX_BYTES = 4096                  # PATH_MAX on Linux, including the terminating NUL
CONTROL = ("Cc", "Zl", "Zp")      # Unicode categories a name may not contain


def _shown(name) -> str:
    t = repr(name)
    return t if len(t) <= 80 else t[:76] + "…" + t[0]


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in CONTROL


def check_name(name, what: str = "file name", *, component: bool = False) -> str:
    """``name`` if it is a name (see the module's doc), else a one-line :class:`ParioError`
    naming ``what``.  ``component``: also a single path component (no ``/``, not ``.``/``..``)."""
    if not isinstance(name, str):
        raise ParioError(f"{what} {_shown(name)}: not a string")
    if not name:
        raise ParioError(f"{what} is empty")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ParioError(f"{what} {_shown(name)}: not valid Unicode (a lone surrogate)") from None
    if size > MAX_BYTES:
        raise ParioError(f"{what} {_shown(name)}: {size} bytes (at most {MAX_BYTES})")
    bad = next((ch for ch in name if _is_control(ch)), None)
    if bad is not None:
        raise ParioError(f"{what} {_shown(name)}: contains the control character {bad!r}")
    if component and ("/" in name or name in (".", "..")):
        raise ParioError(f"{what} {_shown(name)}: must be one path component (no '/', not '.' or '..')")
    return name


def root_path(root: str) -> str:
    """The root directory as an operand that cannot be taken as an option (``.``, ``/…`` or
    ``./…``); ``root`` is checked as a name (``--root``)."""
    r = posixpath.normpath(check_name(root or ".", "--root"))
    return r if r == "." or r.startswith("/") else "./" + r


def target_path(root: str, name, *, allow_absolute: bool = False, what: str = "file name") -> str:
    """The path where the plan's file ``name`` lands under ``root`` (see the module's doc):
    starts with ``./`` or ``/``; a :class:`ParioError` (one line) for a name that is not a
    name, leaves the root, is the root, names a directory, or is absolute and ``allow_absolute``
    is false."""
    check_name(name, what)
    names_dir = name.endswith("/") or name.rsplit("/", 1)[-1] in (".", "..")
    if name.startswith("/"):
        if not allow_absolute:
            raise ParioError(f"{what} {_shown(name)}: an absolute name (refused unless absolute names are allowed: "
                             "pario apply --absolute-names)")
        path = posixpath.normpath(name)
        if path.strip("/") == "":
            raise ParioError(f"{what} {_shown(name)}: names the file system's root directory")
    else:
        path = posixpath.normpath(name)
        if path == ".." or path.startswith("../"):
            raise ParioError(f"{what} {_shown(name)}: leaves the root directory ('..')")
        if path == ".":
            raise ParioError(f"{what} {_shown(name)}: names the root directory itself")
    if names_dir:
        raise ParioError(f"{what} {_shown(name)}: names a directory (ends with '/', '.' or '..'), not a file")
    return path if path.startswith("/") else posixpath.join(root_path(root), path)


def printable(text: str) -> str:
    """``text`` with every control character (:data:`CONTROL`) and lone surrogate written as its
    backslash escape (``\\n``, ``\\x1b``, ``\\u2028``): one line (comments of emitted scripts)."""
    return "".join(repr(ch)[1:-1] if _is_control(ch) or unicodedata.category(ch) == "Cs" else ch
                   for ch in str(text))


__all__ = ["CONTROL", "MAX_BYTES", "check_name", "printable", "root_path", "target_path"]
