"""Identity memoisation for values derived from a trace.

A planner prices one trace under many layouts, and every model call used to derive the same
per-request arrays again (batch ids, p_b, the sequential mask, the service order …): a sort
of the whole trace each time.  :class:`IdentityCache` keeps such values by the *identity* of
the objects they were derived from (strings, numbers, None and booleans by value); it holds
those objects, so an id is never reused while its entry lives.  Entries are evicted least
recently used first, beyond ``size`` entries or once the cached arrays exceed the byte
budget (``PARIO_CACHE_BYTES``, default 1 GiB) — the most recent entry always stays, so a
trace larger than the budget is still derived once, not once per call.  Cached numpy
arrays are made read-only: a caller that modified one would change what every later caller
gets.  Thread-safe (the pricing runs candidates on threads).
"""

from __future__ import annotations

import functools
import os
import threading
import weakref

import numpy as np

_PLAIN = (str, int, float, bool, type(None))


def _key(args) -> tuple:
    return tuple(("v", a) if isinstance(a, _PLAIN) else ("i", id(a)) for a in args)


def _freeze(value):
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, tuple):
        for v in value:
            _freeze(v)
    return value


def nbytes(value) -> int:
    """Bytes of the numpy arrays in ``value`` (an array, a tuple of values, or an object with
    array attributes in ``__slots__`` or ``__dict__``); arrays counted once."""
    seen: set[int] = set()

    def walk(v) -> int:
        if isinstance(v, np.ndarray):
            base = v if not isinstance(v.base, np.ndarray) else v.base  # numba's arrays: base is not numpy's
            if id(base) in seen:
                return 0
            seen.add(id(base))
            return int(base.nbytes)
        if isinstance(v, (tuple, list)):
            return sum(walk(x) for x in v)
        attrs = getattr(type(v), "__slots__", None)
        if attrs:
            return sum(walk(getattr(v, a, None)) for a in attrs)
        if hasattr(v, "__dict__"):
            return sum(walk(x) for x in vars(v).values())
        return 0

    return walk(value)


def budget() -> int:
    env = os.environ.get("PARIO_CACHE_BYTES", "").strip()
    if env.isdigit():
        return int(env)
    return 1 << 30


_ALL: "weakref.WeakSet[IdentityCache]" = weakref.WeakSet()


def total_bytes() -> int:
    """Bytes held by every identity cache."""
    return sum(c.nbytes() for c in list(_ALL))


def clear_all() -> None:
    """Empty every identity cache (e.g. between planners when they hold more than the budget:
    each planner then derives what it needs again, and the process holds one planner's)."""
    for c in list(_ALL):
        c.clear()


class IdentityCache:
    """Values keyed by the identity of argument tuples (see the module docstring)."""

    def __init__(self, size: int = 4):
        _ALL.add(self)
        self.size = size
        self._entries: list = []  # [(key, args, value, nbytes)], most recent last
        self._lock = threading.Lock()
        self._busy: dict = {}  # key → lock held while one thread computes that key's value

    def get_or_compute(self, args, fn):
        """The cached value for ``args``, else ``fn()`` stored and returned; two threads asking
        for the same key compute it once (the second waits), so callers downstream see one
        object."""
        got = self.get(args)
        if got is not None:
            return got
        key = _key(args)
        with self._lock:
            lock = self._busy.setdefault(key, threading.Lock())
        try:
            with lock:
                got = self.get(args)
                if got is None:
                    got = self.put(args, fn())
        finally:  # also when fn() raises: no stale lock left behind
            with self._lock:
                if self._busy.get(key) is lock:
                    del self._busy[key]
        return got

    def get(self, args):
        """The cached value for ``args``, or None."""
        key = _key(args)
        with self._lock:
            for i, e in enumerate(self._entries):
                if e[0] == key:
                    self._entries.append(self._entries.pop(i))
                    return e[2]
        return None

    def put(self, args, value):
        value = _freeze(value)
        entry = (_key(args), tuple(args), value, nbytes(value))
        with self._lock:
            self._entries = [e for e in self._entries if e[0] != entry[0]] + [entry]
            cap = budget()
            while len(self._entries) > 1 and (len(self._entries) > self.size
                                               or sum(e[3] for e in self._entries) > cap):
                self._entries.pop(0)
        return value

    def nbytes(self) -> int:
        with self._lock:
            return sum(e[3] for e in self._entries)

    def values(self) -> list:
        """The cached values (most recent last)."""
        with self._lock:
            return [e[2] for e in self._entries]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def by_identity(size: int = 4):
    """Decorator: memoise ``fn(*args)`` (positional arguments only) in an
    :class:`IdentityCache` of ``size`` entries."""

    def wrap(fn):
        cache = IdentityCache(size)

        @functools.wraps(fn)
        def cached(*args):
            return cache.get_or_compute(args, lambda: fn(*args))

        cached.cache_clear = cache.clear
        return cached

    return wrap
