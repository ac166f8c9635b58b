"""Size strings with IOR-style suffixes, and the limits every byte count is checked against.

``64k`` = 65536, ``4m`` = 4 MiB, ``1g`` = 1 GiB, ``2t`` = 2 TiB: suffixes are powers of
two, case-insensitive, with an optional ``b``/``ib`` (``64KiB``, ``4MB``).  A plain integer
is bytes.

Limits (docs/traces.md, "Limits"): an offset, a length, a size and the end of a request
(offset + length) are at most :data:`MAX_BYTES` = 2^63 − 1 (the largest file offset a
64-bit file system can address; pario keeps offsets in int64); a stripe size given by a
user is at least :data:`MIN_STRIPE` = 512 bytes (one sector: no file system stripes
finer; 0 still means "no data on this server" where a layout allows it).
"""

from __future__ import annotations

import re
from fractions import Fraction

from . import ParioError

MAX_BYTES = (1 << 63) - 1
MIN_STRIPE = 512

_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50, "e": 1 << 60}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(?:i?b)?\s*$", re.IGNORECASE)


def _short(text) -> str:
    t = repr(text)
    return t if len(t) <= 40 else t[:37] + "…'"


def check_bytes(value: int, what: str = "size", text=None) -> int:
    """``value`` if it is a byte count in [0, MAX_BYTES], else a one-line ParioError naming ``what``."""
    shown = _short(text if text is not None else value)
    if value < 0:
        raise ParioError(f"bad {what}: {shown} (must be >= 0)")
    if value > MAX_BYTES:
        raise ParioError(f"bad {what}: {shown} is beyond 2^63-1 bytes (8 EiB), the largest offset a file can have")
    return int(value)


def parse_size(text: str | int, what: str = "size") -> int:
    """Parse ``text`` (e.g. ``"64k"``) into a byte count in [0, MAX_BYTES]; raise
    :class:`ParioError` (one line naming ``what``) if bad.  Exact: no float rounding."""
    if isinstance(text, bool):
        raise ParioError(f"bad {what}: {text!r}")
    if isinstance(text, int):
        return check_bytes(text, what)
    m = _RE.match(str(text))
    if not m:
        raise ParioError(f"bad {what}: {_short(text)} (expected a byte count like 4096, 64k, 4m, 1g)")
    digits = m.group(1)
    if len(digits) > 40:
        raise ParioError(f"bad {what}: {_short(text)} is beyond 2^63-1 bytes (8 EiB), the largest offset a file can have")
    value = Fraction(digits) * _SUFFIX[m.group(2).lower()]
    if value.denominator != 1:
        raise ParioError(f"bad {what}: {_short(text)} is not a whole number of bytes")
    return check_bytes(int(value), what, text)


def parse_stripe(text: str | int, what: str = "stripe size", allow_zero: bool = False) -> int:
    """A stripe size given by a user: a byte count of at least :data:`MIN_STRIPE` (or 0 where
    ``allow_zero``: a server left out of a varied layout)."""
    n = parse_size(text, what)
    if n == 0 and allow_zero:
        return 0
    if n < MIN_STRIPE:
        raise ParioError(f"bad {what}: {_short(text)} is below the minimum stripe size of {MIN_STRIPE} bytes")
    return n


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
