"""Timed O_DIRECT I/O on one storage target (a directory on the server's file system).

Pre-estimation as in CI-LAYOUT seed 002 §6.2 / PADP seed 003 §3.5 / PSA seed 001 §3.4:
for each op (read, write), pattern (sequential, random) and request size, repeated
batches of single-threaded, queue-depth-1 requests against one file on the target.
A *repetition* is a batch run for at least ``min_time`` seconds (and ``min_count``
requests); its value is the mean time per request.  Timing whole batches instead of
single requests matters for rate-limited devices: a token-bucket throttle lets short
bursts through and then stalls, so only the mean over many requests is meaningful.  One
extra warm-up batch per (op, pattern, size) is run first and discarded (it absorbs the
throttle's burst, the file system's first-touch effects and CPU frequency ramp-up).

The file is opened with ``O_DIRECT`` so that neither the page cache nor write-back hide
the device; where the file system refuses O_DIRECT (tmpfs, some FUSE mounts) the
measurement falls back to buffered I/O with ``fdatasync`` after each write and
``POSIX_FADV_DONTNEED`` before each read, and a warning says so.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .. import ParioError
from ..units import format_size

READ, WRITE = 0, 1
OPS = {"read": READ, "write": WRITE}
PATTERNS = {"seq": True, "rand": False}
ALIGN = 4096
DEFAULT_SIZES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20)
DEFAULT_FILE_SIZE = 64 << 20


@dataclass
class Samples:
    """Columnar samples: one row per repetition (mean seconds per request of one batch)."""

    target: list[str] = field(default_factory=list)
    op: list[int] = field(default_factory=list)
    sequential: list[bool] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    rep: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # mean time per request
    requests: list[int] = field(default_factory=list)

    def add(self, target, op, sequential, size, rep, seconds, requests):
        self.target.append(target)
        self.op.append(op)
        self.sequential.append(sequential)
        self.size.append(size)
        self.rep.append(rep)
        self.seconds.append(seconds)
        self.requests.append(requests)

    def select(self, target: str, op: int, sequential: bool) -> tuple[np.ndarray, np.ndarray]:
        m = (np.array(self.target) == target) & (np.array(self.op) == op) & (np.array(self.sequential) == sequential)
        return np.array(self.size)[m], np.array(self.seconds)[m]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"target": self.target, "op": np.where(np.array(self.op) == READ, "read", "write"),
                             "pattern": np.where(np.array(self.sequential), "seq", "rand"), "size": self.size,
                             "rep": self.rep, "seconds_per_request": self.seconds, "requests": self.requests})


def check_sizes(sizes) -> tuple[int, ...]:
    sizes = tuple(sorted(set(int(s) for s in sizes)))
    if len(sizes) < 2:
        raise ParioError("calibration needs at least two request sizes (--sizes 4k,64k,1m,...)")
    bad = [s for s in sizes if s <= 0 or s % ALIGN]
    if bad:
        raise ParioError(f"request sizes must be positive multiples of {ALIGN} bytes for O_DIRECT, got {bad[0]}")
    return sizes


def capacity_of(path: str) -> float:
    """Bytes available to an unprivileged writer on the file system holding ``path``."""
    st = os.statvfs(path)
    return float(st.f_bavail * st.f_frsize)


def _open(path: str) -> tuple[int, bool]:
    flags = os.O_RDWR | os.O_CREAT
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            return os.open(path, flags | direct, 0o600), True
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
    return os.open(path, flags, 0o600), False


class _Target:
    """An open calibration file on one target with an aligned buffer."""

    def __init__(self, directory: str, file_size: int, max_size: int):
        if not os.path.isdir(directory):
            raise ParioError(f"calibration target {directory!r} is not a directory")
        self.capacity = capacity_of(directory)
        avail = int(self.capacity * 0.8) // ALIGN * ALIGN
        self.file_size = min(int(file_size), avail) // ALIGN * ALIGN
        if self.file_size < 2 * max_size:
            raise ParioError(f"{directory}: only {format_size(avail)} free; need room for a file of at least "
                             f"{format_size(2 * max_size)} (twice the largest --sizes)")
        self.path = os.path.join(directory, f".pario-calibrate-{os.getpid()}.dat")
        try:
            self.fd, self.direct = _open(self.path)
        except OSError as exc:
            raise ParioError(f"cannot create {self.path}: {exc.strerror}") from None
        self.buf = mmap.mmap(-1, max(max_size, 1 << 20))  # page aligned, as O_DIRECT wants
        self.buf.write(os.urandom(min(len(self.buf), 1 << 20)) * (len(self.buf) // min(len(self.buf), 1 << 20)))
        self.view = memoryview(self.buf)

    def prefill(self) -> None:
        """Write the whole file once, so reads hit allocated blocks (holes are not read)."""
        chunk = min(len(self.buf), 8 << 20)
        for off in range(0, self.file_size, chunk):
            n = min(chunk, self.file_size - off)
            self._pwrite(self.view[:n], off)
        os.fsync(self.fd)
        os.sync()  # also flush what lies below (a loop device's backing file) before timing

    def _pwrite(self, mv, off):
        try:
            n = os.pwrite(self.fd, mv, off)
        except OSError as exc:
            if exc.errno == errno.EINVAL and self.direct:  # O_DIRECT accepted at open but refused now
                self._drop_direct()
                n = os.pwrite(self.fd, mv, off)
            else:
                raise ParioError(f"write to {self.path} failed: {exc.strerror}") from None
        if not self.direct:
            os.fdatasync(self.fd)
        return n

    def _drop_direct(self):
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR)
        self.direct = False

    def batch(self, op: int, size: int, offsets: np.ndarray, min_time: float, min_count: int) -> tuple[float, int]:
        """Issue requests at ``offsets`` (cycled) until min_time and min_count are reached."""
        mv = self.view[:size]
        fd = self.fd
        k, n = 0, len(offsets)
        direct = self.direct
        clock = time.perf_counter
        elapsed = 0.0
        t0 = clock()
        while True:
            off = int(offsets[k % n])
            if op == READ:
                if not direct:
                    t_pause = clock()
                    os.posix_fadvise(fd, off, size, os.POSIX_FADV_DONTNEED)
                    t0 += clock() - t_pause
                got = os.preadv(fd, [mv], off)
                if got != size:
                    raise ParioError(f"short read from {self.path}: {got} of {size} bytes")
            else:
                self._pwrite(mv, off)
            k += 1
            elapsed = clock() - t0
            if k >= min_count and elapsed >= min_time:
                break
        return elapsed / k, k

    def close(self):
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        self.view.release()
        self.buf.close()


def measure_target(name: str, directory: str, *, sizes=DEFAULT_SIZES, reps: int = 5, min_time: float = 0.2,
                   min_count: int = 3, file_size: int = DEFAULT_FILE_SIZE, ops=(READ, WRITE),
                   patterns=(True, False), seed: int = 0, samples: Samples | None = None, progress=None,
                   warnings: list[str] | None = None, target=None) -> tuple[Samples, float]:
    """Time ``reps`` batches per (op, pattern, size) on ``directory``; return (samples, capacity).

    ``progress(advance_seconds_estimate, description)`` is called after every batch.
    ``target``: an open target of the same interface instead of a file in ``directory``
    (:class:`pario.calibrate.rados.RadosTarget`); closed here.
    """
    sizes = check_sizes(sizes)
    if reps < 1:
        raise ParioError("--reps must be >= 1")
    samples = samples if samples is not None else Samples()
    warnings = warnings if warnings is not None else []
    tgt = target if target is not None else _Target(directory, file_size, max(sizes))
    rng = np.random.default_rng(seed)
    old_nice = _raise_priority()
    try:
        if not tgt.direct:
            warnings.append(f"{name}: O_DIRECT refused by the file system at {directory}; "
                            "measured buffered I/O with fdatasync / FADV_DONTNEED instead")
        tgt.prefill()
        if not tgt.direct and not any(w.startswith(f"{name}: O_DIRECT") for w in warnings):
            warnings.append(f"{name}: O_DIRECT refused by the file system at {directory}; "
                            "measured buffered I/O with fdatasync / FADV_DONTNEED instead")
        blocks = tgt.file_size // ALIGN
        for op in ops:
            for sequential in patterns:
                for size in sizes:
                    nblk = size // ALIGN
                    if sequential:
                        count = (blocks // nblk)
                        offsets = (np.arange(count, dtype=np.int64) * size)
                    else:
                        offsets = rng.integers(0, blocks - nblk + 1, size=4096, dtype=np.int64) * ALIGN
                    what = f"{name} {'read' if op == READ else 'write'} {'seq' if sequential else 'rand'} " \
                           f"{format_size(size)}"
                    tgt.batch(op, size, offsets, min_time, min_count)  # warm-up, discarded
                    if progress:
                        progress(what)
                    start = 0
                    for r in range(reps):
                        if sequential:  # continue where the previous batch ended
                            offsets = np.roll(offsets, -start)
                        sec, k = tgt.batch(op, size, offsets, min_time, min_count)
                        start = k % len(offsets)
                        samples.add(name, op, sequential, size, r, sec, k)
                        if progress:
                            progress(what)
    finally:
        tgt.close()
        _restore_priority(old_nice)
    return samples, tgt.capacity


def _raise_priority(nice: int = -10) -> int | None:
    """As root, run the timing thread at a higher CPU priority so that other load on the
    machine disturbs the per-request times less; returns the old value (None if unchanged)."""
    try:
        old = os.getpriority(os.PRIO_PROCESS, 0)
        if os.geteuid() == 0 and old > nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)  # this thread only (Linux)
            return old
    except (OSError, AttributeError):
        pass
    return None


def _restore_priority(old: int | None) -> None:
    if old is not None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, old)


def n_batches(sizes, reps: int, ops=(READ, WRITE), patterns=(True, False)) -> int:
    """Progress steps of :func:`measure_target` (warm-up + reps per op, pattern, size)."""
    return len(check_sizes(sizes)) * len(ops) * len(patterns) * (reps + 1)
