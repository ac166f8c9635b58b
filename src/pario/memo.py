"""Identity memoisation for values derived from a trace.

A planner prices one trace under many layouts, and every model call used to derive the same
per-request arrays again (batch ids, p_b, the sequential mask, …): a sort of the whole trace
each time.  :func:`by_identity` caches such a function's result by the *identity* of its
arguments (strings, numbers, None and booleans by value), for the last few argument tuples;
the cache holds the arguments themselves, so an id is never reused while its entry lives.
Results that are numpy arrays are made read-only: a caller that modified one would change
what every later caller gets.
"""

from __future__ import annotations

import functools

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


def by_identity(size: int = 4):
    """Decorator: memoise ``fn(*args)`` (positional arguments only) by the identity of the
    arguments, keeping the ``size`` most recently used entries."""

    def wrap(fn):
        entries: list = []  # [(key, args, value)], most recent last

        @functools.wraps(fn)
        def cached(*args):
            key = _key(args)
            for i, (k, _, v) in enumerate(entries):
                if k == key:
                    if i != len(entries) - 1:
                        entries.append(entries.pop(i))
                    return v
            value = _freeze(fn(*args))
            entries.append((key, args, value))
            del entries[:-size]
            return value

        cached.cache_clear = entries.clear
        return cached

    return wrap
