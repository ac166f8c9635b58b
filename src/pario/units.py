"""Size strings with IOR-style suffixes.

``64k`` = 65536, ``4m`` = 4 MiB, ``1g`` = 1 GiB, ``2t`` = 2 TiB: suffixes are powers of
two, case-insensitive, with an optional ``b``/``ib`` (``64KiB``, ``4MB``).  A plain integer
is bytes.
"""

from __future__ import annotations

import re

from . import ParioError

_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, what: str = "size") -> int:
    """Parse ``text`` (e.g. ``"64k"``) into a byte count; raise :class:`ParioError` if bad."""
    if isinstance(text, bool):
        raise ParioError(f"bad {what}: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ParioError(f"bad {what}: {text} (must be >= 0)")
        return text
    m = _RE.match(str(text))
    if not m:
        raise ParioError(f"bad {what}: {text!r} (expected a byte count like 4096, 64k, 4m, 1g)")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if value != int(value):
        raise ParioError(f"bad {what}: {text!r} is not a whole number of bytes")
    return int(value)


def format_size(n: float) -> str:
    """Human form of a byte count using binary units (``65536`` → ``64 KiB``)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            if unit == "B" or n == int(n):
                return f"{int(n)} {unit}" if n == int(n) else f"{n:.1f} {unit}"
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"
