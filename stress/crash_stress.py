"""Crash stress: SIGKILL writers, replicators, readers and closers of a store at random points, then check.

    python stress/crash_stress.py --trials 1000 --seed 1 --mode exclusive [--dir D]
    python stress/crash_stress.py --trials 1000 --seed 1 --mode shared
    python stress/crash_stress.py --mode close --trial-seed 1000017     # one trial again

``--mode``: ``exclusive`` (the five one-process modes in turn), ``shared`` (the three
several-process modes in turn), ``all`` (both, the default) or one mode's name.

Every trial builds a store (system ceda-hdd8: 8 servers) with file ``f``: 2 MiB of seeded
bytes, layout ``fixed:64k``, and replicas (``r1``, ``r2``: CEDA partial replicas of a few
extents, overlapping each other, one crossing the file's end; ``h1``, ``h2``: hybrid full
replicas), forks its worker processes (the parent holds no store while they run), SIGKILLs
one or all of them at a random point, lets the survivors finish, reopens the store (the
first opener recovers) and checks.

Exclusive modes (one process, ``Store(root)``):

* ``writer``      redirected writes to a file with CEDA replicas r1, r2 (flushes now and then);
* ``replicator``  the replicator builds r1, r2, h1 (64 KiB chunks);
* ``hybrid``      writes to a file with full replicas h1, h2 (cheapest route, lazy sync);
* ``close``       writes aimed at replicated ranges (dirtying replicas), then file close and
  store close (flush, final sizes, and in a quarter of the trials the compaction of a
  journal grown past 4 MiB first), reopen, again;
* ``replicate-write`` ``Replicator(...).start()`` builds r1, r2 (and h1) in a thread while
  the main thread writes.

Except in ``close``, a reader thread of the same process reads random ranges meanwhile; the
writer or replicator starts only once the reader has logged its first read (shared modes
too), so a marker-placed kill never precedes every read.

Shared modes (``Store(root, shared=True)`` in every process): 2–3 writer processes on
disjoint ranges (random blocks of 40–300 kB over ``[0, 2 MiB + 256 KiB)``: some replicated,
some not, some past the end, so writes extend the file), one reader process, and

* ``shared-writers``   CEDA replicas r1 (and r2) made before;
* ``shared-replicate`` r1 made before, a replicator process builds r2 (and h1) meanwhile;
* ``shared-hybrid``    full replica h1 made before, a replicator process builds h2 in half
  of the trials.

One random process (35 %: all of them) is killed; the survivors get a stop request 50–250 ms
later and must finish without error (close: the last one out flushes).

Kill points: half of the trials (``close``: 30 %) kill at a uniformly random time after the
workers are ready (:data:`KILL_WINDOW`), the others right after the n-th marker (n random)
of the victim's log plus a short random delay: a write's ``b`` (0–60 µs), a replicator
chunk's ``chunk`` (0–1 ms), a close's ``closing`` (0–10 ms; a close takes 1–90 ms).  What
the kill interrupted (the victim's last marker: a write, a flush, a close, the reopen after
a close, the replicator's run) is counted.

Oracles, independent of the store's code:

* Every writer appends to its own log (``os.write``, unbuffered) ``b k t`` before write ``k``
  and ``d k t`` after it returned (``t``: ``time.monotonic_ns``).  Writes are regenerated
  from the writer's seed and ``k`` (:func:`write_op`), so the expected bytes are the initial
  bytes + the acknowledged writes; inside a write begun and not acknowledged (at most one
  per killed writer) each byte may be old or new.
* After recovery: fsck clean with no unclean entry left; every byte read through the store
  equals the expected bytes ("lost acknowledged bytes" counts the others, and the size must
  lie between the acknowledged one and the in-flight write's end); a replicator re-run
  (``--resume``, then the same plan again) completes, fsck stays clean, every replica covers
  exactly its extents; after the store is closed the original is read straight from the
  servers' data files (own mapping of ``fixed:64k`` over 8 servers, file id, size and
  ``dirty`` = 0 from ``meta.db`` with sqlite3) and must equal what the store served.
  (fsck compares every CLEAN replica entry with the original.)
* Stale reads: the reader logs every read (start, end, offset, bytes).  For each byte the
  value must be that of the last write acknowledged before the read started, or of a write
  begun before the read ended and not acknowledged before it started — never older.
* Injected coverage loss (half of the trials, after the checks, store closed): the journal
  ``rmt.log`` is rewritten (records renumbered, CRCs recomputed, header ``end``/``seq``/
  ``synced`` set, the old tail zeroed) once without change — a negative control: the
  records must come out byte for byte and fsck must stay clean — and once without one ADD
  record of a replica whose replicator job finished, or with its length halved, chosen with
  an own replay of coverage (ADD, GROW, TRIM, DROP; :func:`_coverage`) so that bytes the job
  copied are covered before and not after: fsck must fail.  (A journal compacted at close
  with full replicas grown since has no such record: counted as "without an injectable
  record".)

``--reboot`` (issue 28): every trial's recovery happens in "another boot" (``PARIO_BOOT_ID``
changed between the crash and the recovery, as after a power loss).  Where the crash left the
journal unclean (its header read by the independent reader, :mod:`pario.store.rmt_journal`),
the header's ``verify`` flag must be set after the first opener and the checked recovery must
have verified every CLEAN entry byte for byte; in a third of those trials a first recovery is
SIGKILLed first, 0–30 ms into its open (so the verification is interrupted, done, or not begun),
and the next opener must still verify.  A SIGKILL loses no page of the journal, so no CLEAN
entry may differ (a differing one would be a record the store lost); afterwards the flag is 0.

The test suite runs every mode (tests/store/test_crash.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import sys
import threading
import time
import traceback
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

SIZE = 2 << 20                 # initial file size
EXT = 256 << 10                # writes reach up to SIZE + EXT (extending the file)
END = SIZE + EXT
STRIPE = 64 << 10              # layout fixed:64k ...
NSERV = 8                      # ... over the 8 servers of ceda-hdd8 (--cluster: the cluster's servers)
CLUSTER: str | None = None     # --cluster DIR: every trial's store on RADOS (backend rados, 64 KiB objects)
IN_CHILD = False              # this process is one of isolated()'s children
COORD = "host"                # --coord: the stores' coordination member ("pfs": the journal with pread/pwrite)
REBOOT = False                 # --reboot: the recovery in another boot (PARIO_BOOT_ID)
REBOOT_KILL = 1 / 3            # --reboot: share of unclean trials whose first recovery is SIGKILLed
OBJECT_SIZE = 64 << 10
MAXW = 150_000                 # largest write
MAXR = 65_536                  # largest read of the reader
READ_BUDGET = 16 << 20         # bytes a reader logs per trial at most
EXCLUSIVE = ("writer", "replicator", "hybrid", "close", "replicate-write")
SHARED = ("shared-writers", "shared-replicate", "shared-hybrid")
MODES = EXCLUSIVE + SHARED
TIMEOUT = 60.0                 # any wait of the harness
# When a trial kills (parent side): half of the trials (close: 30 %) at a uniformly random
# time in [0, KILL_WINDOW] s after the workers are ready; the others just after the n-th
# marker of the victim's log (n random) plus a random delay: a write's "b", a replicator
# chunk's "chunk", a close's "closing" (see make_config).  The windows are a little longer
# than the work of each mode (the replicator alone takes ~10–40 ms, beside writes ~20–200 ms;
# a close 1–90 ms), so kills also land after it.
KILL_WINDOW = {"writer": 0.4, "replicator": 0.05, "hybrid": 0.4, "close": 0.6, "replicate-write": 0.2,
               "shared-writers": 0.6, "shared-replicate": 0.25, "shared-hybrid": 0.4}
CLOSE_DELAY = 0.010            # 'close' kills after a "closing" marker: within this many seconds
RHDR = struct.Struct("<qqqq")  # read log record: t0, t1, offset, length; then the bytes

# replicated ranges of the CEDA replicas (r2 overlaps r1 and crosses the file's end)
EXTENTS = {"r1": ([70_000, 600_000, 1_500_000], [200_000, 150_000, 400_000], [0, 1, 0], [0, 0, 200_000]),
           "r2": ([200_000, 1_000_000, 1_950_000], [150_000, 300_000, 250_000], [3, 5, 3], [0, 0, 150_000])}


def now() -> int:
    return time.monotonic_ns()


def data_for(seed: int, n: int) -> bytes:
    return np.random.default_rng(seed).bytes(n)


def make_specs(names):
    """ReplicaSpecs of the named replicas (r1, r2 partial; h1, h2 full)."""
    from pario.layout import ExtentMap, Grouped, Striped
    from pario.store.replicator import ReplicaSpec

    out = []
    for nm in names:
        if nm in EXTENTS:
            o, n, s, loc = (np.array(v) for v in EXTENTS[nm])
            s = s % NSERV
            out.append(ReplicaSpec("f", nm, ExtentMap(o, n, s, loc, np.ones(len(o), dtype=np.int64))))
        elif nm == "h1":
            out.append(ReplicaSpec("f", nm, Striped.fixed(1 << 20, range(NSERV)), "cheapest"))
        elif nm == "h2":
            half = NSERV // 2
            out.append(ReplicaSpec("f", nm, Grouped((tuple(range(half)), tuple(range(half, NSERV))), 32 << 10),
                                   "cheapest"))
        else:
            raise ValueError(nm)
    return out


def make_replicator(st, names, log=None):
    """The workers' replicator: 64 KiB chunks (many kill points), no idle wait."""
    from pario.store.replicator import Replicator

    kw = {"chunk": 64 << 10, "idle": 0}
    if log is not None:
        kw["progress"] = lambda done, total: log("chunk", now())
    return Replicator(st, make_specs(names), **kw)


def wanted(name: str, upto: int) -> list[tuple[int, int]]:
    """``[a, b)`` ranges replica ``name`` must cover for a file of ``upto`` bytes (own definition)."""
    if name in EXTENTS:
        o, n = EXTENTS[name][0], EXTENTS[name][1]
        return [(a, min(a + m, upto)) for a, m in zip(o, n) if a < upto]
    return [(0, upto)] if upto > 0 else []


def _minus(spans, others):
    """Sorted disjoint ``[a, b)`` spans minus the union of ``others``."""
    from pario.store.rmt_journal import _minus as minus

    return [piece for a, b in spans for piece in minus(a, b, others)]


def _merge(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


# ---------------------------------------------------------------------- configuration
def make_config(mode: str, tseed: int) -> dict:
    """Everything a trial does, from its seed (the checker rebuilds it the same way)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    rng = random.Random(tseed)
    shared = mode in SHARED
    cfg = {"mode": mode, "tseed": tseed, "shared": shared, "setup": [], "replicate": [], "bloat": False,
           "reader": mode != "close", "replicator_proc": False, "inject": rng.random() < 0.5}
    if mode == "writer":
        cfg["setup"] = ["r1", "r2"]
    elif mode == "replicator":
        cfg["replicate"] = ["r1", "r2", "h1"]
    elif mode == "hybrid":
        cfg["setup"] = ["h1", "h2"]
    elif mode == "close":
        cfg["setup"] = ["r1", "r2"] if rng.random() < 0.5 else ["h1", "h2"]
        cfg["bloat"] = rng.random() < 0.25
    elif mode == "replicate-write":
        cfg["replicate"] = ["r1", "r2"] + (["h1"] if rng.random() < 0.5 else [])
    elif mode == "shared-writers":
        cfg["setup"] = ["r1"] + (["r2"] if rng.random() < 0.5 else [])
    elif mode == "shared-replicate":
        cfg["setup"] = ["r1"]
        cfg["replicate"] = ["r2"] + (["h1"] if rng.random() < 0.5 else [])
        cfg["replicator_proc"] = True
    elif mode == "shared-hybrid":
        cfg["setup"] = ["h1"]
        if rng.random() < 0.5:
            cfg["replicate"] = ["h2"]
            cfg["replicator_proc"] = True
    if shared:
        cfg["bloat"] = rng.random() < 0.15
        nw = rng.randrange(2, 4)
        bounds = [0]
        while bounds[-1] < END:
            bounds.append(min(END, bounds[-1] + rng.randrange(40_000, 300_000)))
        blocks = list(zip(bounds, bounds[1:]))
        shift = rng.randrange(nw)
        regions = [[b for j, b in enumerate(blocks) if (j + shift) % nw == i] for i in range(nw)]
        cfg["kill_all"] = rng.random() < 0.35
    else:
        nw = 1
        regions = [[(0, END)]]
    hot = _merge([r for nm in cfg["setup"] + cfg["replicate"] for r in wanted(nm, END)])
    cfg["writers"] = [{"id": i, "seed": rng.randrange(1 << 40), "regions": regions[i],
                       "hot": _merge([(max(a, c), min(b, d)) for a, b in regions[i] for c, d in hot
                                      if max(a, c) < min(b, d)])} for i in range(nw)]
    cfg["grace"] = rng.uniform(0.05, 0.25)
    cfg["reader_seed"] = rng.randrange(1 << 40)
    # the victim (shared: one process, or all) and when it dies
    roles = [f"w{i}" for i in range(nw)] + (["rd"] if shared else []) + (["rp"] if cfg["replicator_proc"] else [])
    cfg["victim"] = roles[rng.randrange(len(roles))]
    cfg["victim_pick"] = rng.random()
    cfg["kill_at"] = rng.uniform(0, KILL_WINDOW[mode])
    cfg["trigger"] = None
    if rng.random() < (0.7 if mode == "close" else 0.5):
        if mode == "close":
            cfg["trigger"] = ("closing", rng.randrange(1, 4), rng.uniform(0, CLOSE_DELAY))
        elif mode in ("replicator", "replicate-write") or cfg["victim"] == "rp":
            cfg["trigger"] = ("chunk", rng.randrange(1, 40 if mode == "replicator" else 12), rng.uniform(0, 0.001))
        elif cfg["victim"].startswith("w"):
            cfg["trigger"] = ("b", rng.randrange(1, 80), rng.uniform(0, 0.00006))
    cfg["inject_pick"] = rng.random()
    if COORD == "rados":
        # no 4 MiB journal to compact at close: 90,000 records as RADOS object writes take
        # minutes and, on the 2 GiB OSDs of a test cluster, filled the coordination pool's OSD
        # (its RocksDB: every small overwrite of the journal object is a deferred write)
        cfg["bloat"] = False
    return cfg


def write_op(cfg: dict, w: dict, k: int):
    """Operation ``k`` of writer ``w``: ("w", off, n, data_seed) | ("flush",) | ("reopen",) | ("closestore",)."""
    rng = random.Random(w["seed"] * 1_000_003 + k)
    u = rng.random()
    if cfg["mode"] == "close":
        if u < 0.15:
            return ("closestore",)
        if u < 0.2:
            return ("flush",)
    elif u < 0.02:
        return ("flush",)
    elif u < 0.03:
        return ("reopen",)
    regions = w["hot"] if (w["hot"] and cfg["mode"] == "close" and rng.random() < 0.85) else w["regions"]
    total = sum(b - a for a, b in regions)
    pick = rng.randrange(total)
    for a, b in regions:
        if pick < b - a:
            break
        pick -= b - a
    off = a + pick
    n = rng.randrange(1, min(MAXW, b - off) + 1)
    return ("w", off, n, w["seed"] * 1_000_003 + k)


# ---------------------------------------------------------------------- store setup
def setup(root: Path, cfg: dict) -> bytes:
    """Store with file ``f`` (2 MiB of seeded bytes) and the replicas ``cfg["setup"]``."""
    from pario.store import Store, init_store
    from pario.store.replicator import Replicator

    if root.exists():
        shutil.rmtree(root)
    if CLUSTER:
        init_store(root, None, backend="rados", cluster=CLUSTER, object_size=OBJECT_SIZE, coord=COORD)
    else:
        init_store(root, "ceda-hdd8", coord=COORD)
    init = data_for(cfg["tseed"], SIZE)
    with Store(root) as st:
        st.create("f", "fixed:64k")
        f = st.open("f")
        f.write(0, init)
        f.close()
        if cfg["setup"]:     # 256 KiB chunks: several ADD records per replica (injections can drop one)
            Replicator(st, make_specs(cfg["setup"]), chunk=256 << 10).run()
    return init


def bloat(st, cfg: dict, pairs: int = 45_000) -> None:
    """Grow the journal beyond 4 MiB (MARK records that flip a replica's flags over 100
    bytes whose copies are equal), so that the store's close compacts it."""
    core = st.rmt.core
    name = cfg["setup"][0]
    o, r = st.rmt.fid("f"), st.rmt.fid(f".replica/f/{name}")
    a = wanted(name, SIZE)[0][0]
    for _ in range(pairs):
        core.mark(o, r, a, a + 100)
        core.mark(o, 0, a, a + 100)


# ---------------------------------------------------------------------- workers (forked)
class Log:
    """An append-only text log written with one ``os.write`` per line (survives SIGKILL)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, *items) -> None:
        os.write(self.fd, (" ".join(str(x) for x in items) + "\n").encode())


def reader_loop(f, path, seed: int, stop) -> None:
    """Read random ranges until ``stop()``, logging each (start, end, offset, bytes)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    rng = random.Random(seed)
    logged = 0
    while not stop():
        if logged >= READ_BUDGET:
            time.sleep(0.005)
            continue
        off = rng.randrange(0, END)
        n = rng.randrange(1, min(MAXR, END - off) + 1)
        buf = bytearray(n)
        t0 = now()
        f.readinto(off, buf)
        t1 = now()
        os.write(fd, RHDR.pack(t0, t1, off, n) + buf)
        logged += n
        time.sleep(rng.uniform(0, 0.002))


def _until(cond, what: str) -> None:
    """Poll ``cond()`` every 0.5 ms until it holds; RuntimeError ``what`` after :data:`TIMEOUT`."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > TIMEOUT:
            raise RuntimeError(what)
        time.sleep(0.0005)


def _await_first_read(tdir: str) -> None:
    """Wait until the reader has logged its first read (its log is no longer empty), so that a
    kill placed after the victim's n-th marker never comes before any read: on a loaded
    machine the reader's first read could otherwise lag the replicator's first chunks, and the
    trial's stale-read check would hold vacuously.  A failed reader thread ends the wait
    (:func:`check` reports it), and so does a reader the harness killed before its first read
    (a kill at a random time: the harness marks it, ``killed.rd``)."""
    def read_or_failed() -> bool:
        log = Path(f"{tdir}/reads.bin")
        return ((log.exists() and log.stat().st_size > 0) or Path(f"{tdir}/reader.err").exists()
                or Path(f"{tdir}/killed.rd").exists())
    _until(read_or_failed, "the reader logged no read")


def writer_loop(cfg, w, st, f, log, stop, reopen_store=None, on_op=None):
    """Run writer ``w``'s operations until ``stop()``; returns the open (store, file)."""
    k = 0
    while not stop():
        k += 1
        op = write_op(cfg, w, k)
        if op[0] == "w":
            _, off, n, ds = op
            data = data_for(ds, n)
            log("b", k, now())
            f.write(off, data)
            log("d", k, now())
        elif op[0] == "flush":
            log("flushing", k, now())
            f.flush()
            log("flushed", k, now())
        elif op[0] == "reopen":
            log("closing", k, now())
            f.close()
            log("closed", k, now())
            f = st.open("f")
        elif op[0] == "closestore":
            log("closing", k, now())
            f.close()
            st.close()
            log("closed", k, now())
            st = reopen_store()                  # the first opener: recovery
            f = st.open("f")
            log("opened", k, now())
        if on_op is not None:
            on_op()
    return st, f


def excl_worker(cfg: dict, root: str, tdir: str) -> None:
    """The one process of an exclusive mode: runs until killed."""
    from pario.store import Store

    st = Store(root)
    log = Log(f"{tdir}/w0.log")
    if cfg["bloat"]:
        bloat(st, cfg)
    f = st.open("f")
    rep = None
    if cfg["replicate"]:
        rep = make_replicator(st, cfg["replicate"], log)
    if cfg["reader"]:
        rf = st.open("f")

        def read_thread():
            try:
                reader_loop(rf, f"{tdir}/reads.bin", cfg["reader_seed"], lambda: False)
            except BaseException:             # reported by check()
                Path(f"{tdir}/reader.err").write_text(traceback.format_exc())
        threading.Thread(target=read_thread, daemon=True).start()
        _await_first_read(tdir)
    log("ready", now())
    mode = cfg["mode"]
    if mode == "replicator":
        rep.run()
        log("replicated", now())
        time.sleep(TIMEOUT)
        return
    state = {"logged": False}

    def watch_replicator():
        if rep is not None and not state["logged"] and not rep._thread.is_alive():
            rep.join()                                  # re-raises the replicator's error
            state["logged"] = True
            log("replicated", now())
    if mode == "replicate-write":
        rep.start()
    writer_loop(cfg, cfg["writers"][0], st, f, log, lambda: False, reopen_store=lambda: Store(root),
                on_op=watch_replicator if rep is not None else None)


def shared_worker(cfg: dict, root: str, tdir: str, role: str, i: int) -> None:
    """One process of a shared mode: a writer, the reader or the replicator."""
    from pario.store import Store

    tdir_p = Path(tdir)
    log = Log(f"{tdir}/{pname(role, i)}.log")
    st = Store(root, shared=True, lock_timeout=30)
    if role == "writer" and i == 0 and cfg["bloat"]:
        bloat(st, cfg)
    rep = None
    if role == "replicator":
        rep = make_replicator(st, cfg["replicate"], log)
    f = st.open("f") if role != "replicator" else None
    log("ready", now())
    _until((tdir_p / "go").exists, "no go")

    if role != "reader" and cfg["reader"]:
        _await_first_read(tdir)

    def stop() -> bool:
        return (tdir_p / "stop").exists()
    if role == "writer":
        st, f = writer_loop(cfg, cfg["writers"][i], st, f, log, stop)
    elif role == "reader":
        reader_loop(f, f"{tdir}/reads.bin", cfg["reader_seed"], stop)
    else:
        rep.run()
        log("replicated", now())
    log("closing", "end", now())
    if f is not None:
        f.close()
    st.close()
    log("end", now())


def pname(role: str, i: int) -> str:
    return {"writer": f"w{i}", "reader": "rd", "replicator": "rp"}[role]


def _die_with_parent() -> None:
    """SIGKILL this (forked) process when the harness dies (Linux ``PR_SET_PDEATHSIG``): an
    exclusive worker writes until it is killed."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _spawn(fn, args, errpath: Path) -> int:
    """Fork a child that runs ``fn(*args)``; its traceback goes to ``errpath``; exit 0 iff it returned."""
    pid = os.fork()
    if pid == 0:                                      # the child: never returns
        code = 1
        try:
            with open(errpath, "w") as err:
                try:
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    _die_with_parent()
                    fn(*args)
                    code = 0
                except BaseException:
                    traceback.print_exc(file=err)
                    err.flush()
        finally:
            os._exit(code)
    return pid


def _reap(pid: int, block: bool = False):
    """Exit status (``os.waitstatus_to_exitcode``: negative = signal) or None if still running."""
    p, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    if p == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def _lines(path: Path) -> list[list[str]]:
    """Complete lines of a log, split (a torn last line is dropped)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    text = raw[:raw.rfind(b"\n") + 1].decode(errors="replace")
    return [ln.split() for ln in text.splitlines() if ln]


def _last_marker(path: Path):
    """The last marker line of a writer log (what a kill interrupted)."""
    last = None
    for p in _lines(path):
        if p[0] in ("closing", "closed", "opened", "flushing", "flushed", "b", "d", "replicated", "ready", "end"):
            last = p[0]
    return last


def _err_tail(path: Path) -> str:
    try:
        return path.read_text()[-800:].strip().replace("\n", " | ")
    except FileNotFoundError:
        return ""


def _wait_kill(cfg: dict, logs: list[Path], t0: float, exited) -> None:
    """Return when the victim is to be killed: ``cfg["kill_at"]`` s after ``t0``, or just after
    the n-th marker of ``cfg["trigger"]`` in any of ``logs`` (plus the trigger's delay; at the
    latest 5 s after ``t0``, or when ``exited()``: the victim ended on its own)."""
    trig = cfg["trigger"]
    if trig is None:
        while time.monotonic() - t0 < cfg["kill_at"]:
            if exited():
                return
            time.sleep(min(0.001, max(0.0, cfg["kill_at"] - (time.monotonic() - t0))))
        return
    marker, count, delay = trig
    key = ("\n" + marker + " ").encode()
    fds = [os.open(lg, os.O_RDONLY | os.O_CREAT, 0o644) for lg in logs]
    pos, seen, tail = [0] * len(fds), 0, [b"\n"] * len(fds)
    try:
        while seen < count:         # spin on the logs' new bytes: the kill follows the marker within µs
            for j, fd in enumerate(fds):
                new = os.pread(fd, 1 << 16, pos[j])
                if new:
                    pos[j] += len(new)
                    buf = tail[j] + new
                    cut = buf.rfind(b"\n")       # whole lines only
                    seen += buf[:cut + 1].count(key)
                    tail[j] = buf[cut:]
            if time.monotonic() - t0 > 5 or exited():
                return
    finally:
        for fd in fds:
            os.close(fd)
    end = time.monotonic() + delay
    while time.monotonic() < end:
        pass


def _run_exclusive(cfg: dict, root: Path, tdir: Path) -> dict:
    log = tdir / "w0.log"
    pid = _spawn(excl_worker, (cfg, str(root), str(tdir)), tdir / "w0.err")
    gone = {}

    def exited() -> bool:
        if not gone:
            code = _reap(pid)
            if code is not None:
                gone["code"] = code
        return bool(gone)
    t0 = time.monotonic()
    try:
        while not any(p[0] == "ready" for p in _lines(log)):
            if exited():
                raise RuntimeError(f"worker exited ({gone['code']}) before ready: {_err_tail(tdir / 'w0.err')}")
            if time.monotonic() - t0 > TIMEOUT:
                raise RuntimeError("worker did not start")
            time.sleep(0.001)
        _wait_kill(cfg, [log], time.monotonic(), exited)
        if exited():        # the worker never ends by itself: it failed
            raise RuntimeError(f"worker exited ({gone['code']}) before the kill: {_err_tail(tdir / 'w0.err')}")
        os.kill(pid, signal.SIGKILL)
        gone["code"] = _reap(pid, block=True)
    finally:
        if not gone:
            os.kill(pid, signal.SIGKILL)
            _reap(pid, block=True)
    last = _last_marker(log)
    marks = [p[0] for p in _lines(log)]
    return {"victims": ["w0"], "in_close": last == "closing", "in_flush": last == "flushing", "in_write": last == "b",
            "in_open": cfg["mode"] == "close" and last == "closed",
            "replicating": bool(cfg["replicate"]) and "replicated" not in marks}


def _run_shared(cfg: dict, root: Path, tdir: Path) -> dict:
    roles = [("writer", i) for i in range(len(cfg["writers"]))] + [("reader", 0)]
    if cfg["replicator_proc"]:
        roles.append(("replicator", 0))
    procs = {}
    for role, i in roles:
        name = pname(role, i)
        procs[name] = _spawn(shared_worker, (cfg, str(root), str(tdir), role, i), tdir / f"{name}.err")
    exited = {}
    problems = []

    def poll():
        for name, pid in procs.items():
            if name not in exited:
                code = _reap(pid)
                if code is not None:
                    exited[name] = code
    try:
        t0 = time.monotonic()
        while not all(any(p[0] == "ready" for p in _lines(tdir / f"{n}.log")) for n in procs):
            poll()
            if exited:
                raise RuntimeError(f"workers exited before ready: {exited} "
                                   + "; ".join(_err_tail(tdir / f"{n}.err") for n in exited))
            if time.monotonic() - t0 > TIMEOUT:
                raise RuntimeError("workers did not start")
            time.sleep(0.001)
        (tdir / "go").touch()
        t_go = time.monotonic()
        _wait_kill(cfg, [tdir / f"{cfg['victim']}.log"], t_go, lambda: (poll(), cfg["victim"] in exited)[1])
        poll()
        alive = [n for n in procs if n not in exited]
        if cfg["kill_all"]:
            victims = alive
        elif cfg["victim"] in alive:
            victims = [cfg["victim"]]
        else:                    # it ended on its own (the replicator): another one
            victims = [alive[int(cfg["victim_pick"] * len(alive))]] if alive else []
        for n in victims:
            os.kill(procs[n], signal.SIGKILL)
        for n in victims:
            exited[n] = _reap(procs[n], block=True)
            (tdir / f"killed.{n}").touch()      # survivors waiting for it stop waiting
        in_close = any(_last_marker(tdir / f"{n}.log") == "closing" for n in victims)
        in_flush = any(_last_marker(tdir / f"{n}.log") == "flushing" for n in victims)
        in_write = any(_last_marker(tdir / f"{n}.log") == "b" for n in victims)
        time.sleep(cfg["grace"])
        (tdir / "stop").touch()
        t1 = time.monotonic()
        while len(exited) < len(procs) and time.monotonic() - t1 < TIMEOUT:
            poll()
            time.sleep(0.002)
        for n in procs:
            if n not in exited:
                problems.append(f"survivor {n} did not finish within {TIMEOUT:g} s")
            elif n not in victims and exited[n] != 0:
                problems.append(f"survivor {n} failed (exit {exited[n]}): {_err_tail(tdir / f'{n}.err')}")
            elif n not in victims and not any(p[0] == "end" for p in _lines(tdir / f"{n}.log")):
                problems.append(f"survivor {n} exited without finishing")
    finally:
        for n, pid in procs.items():
            if n not in exited:
                os.kill(pid, signal.SIGKILL)
                exited[n] = _reap(pid, block=True)
    return {"victims": victims, "in_close": in_close, "in_flush": in_flush, "in_write": in_write,
            "replicating": cfg["replicator_proc"] and "rp" in victims
            and not any(p[0] == "replicated" for p in _lines(tdir / "rp.log")),
            "harness_problems": problems}


# ---------------------------------------------------------------------- oracles
class Write:
    __slots__ = ("wid", "k", "off", "n", "seed", "tb", "td", "_data")

    def __init__(self, wid, k, off, n, seed, tb, td):
        self.wid, self.k, self.off, self.n, self.seed, self.tb, self.td = wid, k, off, n, seed, tb, td
        self._data = None

    @property
    def data(self) -> np.ndarray:
        if self._data is None:
            self._data = np.frombuffer(data_for(self.seed, self.n), np.uint8)
        return self._data


def parse_writes(cfg: dict, tdir: Path) -> tuple[list[Write], list[str]]:
    """Every write begun by every writer (``td`` None: not acknowledged), from the logs and
    :func:`write_op`; plus problems of the logs themselves."""
    out, problems = [], []
    for w in cfg["writers"]:
        begun, done = {}, {}
        for p in _lines(tdir / f"w{w['id']}.log"):
            if p[0] == "b" and len(p) == 3:
                begun[int(p[1])] = int(p[2])
            elif p[0] == "d" and len(p) == 3:
                done[int(p[1])] = int(p[2])
        open_ = [k for k in begun if k not in done]
        if len(open_) > 1 or (open_ and open_[0] != max(begun)):
            problems.append(f"writer {w['id']}: writes {open_} begun and not done (only the last may be)")
        for k in sorted(begun):
            op = write_op(cfg, w, k)
            if op[0] != "w":
                problems.append(f"writer {w['id']}: log says write {k}, the plan says {op[0]}")
                continue
            out.append(Write(w["id"], k, op[1], op[2], op[3], begun[k], done.get(k)))
    return out, problems


def expected(init: bytes, writes: list[Write]) -> tuple[np.ndarray, int, list[Write]]:
    """(bytes after the acknowledged writes (zeros up to END), their size, writes in flight)."""
    ref = np.zeros(END, np.uint8)
    ref[:SIZE] = np.frombuffer(init, np.uint8)
    size = SIZE
    for w in sorted((w for w in writes if w.td is not None), key=lambda w: w.td):
        ref[w.off:w.off + w.n] = w.data
        size = max(size, w.off + w.n)
    return ref, size, [w for w in writes if w.td is None]


def compare(got: np.ndarray, ref: np.ndarray, size: int, inflight: list[Write]) -> tuple[int, str | None]:
    """Bytes of ``got`` (a whole file) that are neither the expected byte nor, inside a write
    in flight, its new byte; plus the first such offset as a message."""
    top = max([size] + [w.off + w.n for w in inflight])
    if not size <= len(got) <= top:
        return max(1, abs(len(got) - size)), f"file size {len(got)}, expected {size}" + \
            (f" .. {top} (a write in flight)" if top > size else "")
    ok = got == ref[:len(got)]
    for w in inflight:
        e = min(w.off + w.n, len(got))
        if e > w.off:
            ok[w.off:e] |= got[w.off:e] == w.data[:e - w.off]
    bad = np.flatnonzero(~ok)
    if len(bad):
        return len(bad), f"{len(bad)} bytes lost or stale, first at offset {int(bad[0])}"
    return 0, None


def parse_reads(path: Path) -> list[tuple[int, int, int, np.ndarray]]:
    """(t0, t1, offset, bytes) of every complete record of a read log."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    out, pos = [], 0
    while pos + RHDR.size <= len(raw):
        t0, t1, off, n = RHDR.unpack_from(raw, pos)
        if pos + RHDR.size + n > len(raw):
            break                                   # torn by the kill
        out.append((t0, t1, off, np.frombuffer(raw, np.uint8, n, pos + RHDR.size)))
        pos += RHDR.size + n
    return out


def check_reads(init: bytes, writes: list[Write], reads) -> tuple[int, int, str | None]:
    """Stale reads: (reads with a byte older than allowed, such bytes, first message)."""
    state = np.zeros(END, np.uint8)
    state[:SIZE] = np.frombuffer(init, np.uint8)
    acked = sorted((w for w in writes if w.td is not None), key=lambda w: w.td)
    i = 0
    bad_reads = bad_bytes = 0
    first = None
    for t0, t1, off, got in sorted(reads, key=lambda r: r[0]):
        while i < len(acked) and acked[i].td < t0:
            w = acked[i]
            state[w.off:w.off + w.n] = w.data
            i += 1
        n = len(got)
        ok = got == state[off:off + n]
        if ok.all():
            continue
        for w in writes:           # in flight during the read: begun before it ended, not done before it began
            if w.tb < t1 and (w.td is None or w.td >= t0) and w.off < off + n and w.off + w.n > off:
                s, e = max(off, w.off), min(off + n, w.off + w.n)
                ok[s - off:e - off] |= got[s - off:e - off] == w.data[s - w.off:e - w.off]
        nb = int((~ok).sum())
        if nb:
            bad_reads += 1
            bad_bytes += nb
            if first is None:
                x = off + int(np.flatnonzero(~ok)[0])
                first = f"read [{off}, {off + n}) returned {nb} stale bytes, first at offset {x}"
    return bad_reads, bad_bytes, first


def read_meta(root: Path, name: str = "f") -> tuple[int, dict, int, int]:
    """(id, layout, size, dirty) of a file, read from meta.db with sqlite3 (not the store; a
    store coordinated in RADOS: through the engine's metadata connection, the database being
    reachable only through Ceph's SQLite VFS)."""
    if COORD == "rados":
        from pario.store.meta import Meta

        m = Meta(root / "meta.db", coord="rados")
        try:
            fid, layout, size, dirty = m.get(name)
        finally:
            m.close()
        return int(fid), layout, int(size), int(dirty)
    con = sqlite3.connect(str(root / "meta.db"))
    try:
        row = con.execute("SELECT id, layout, size, dirty FROM files WHERE name=?", (name,)).fetchone()
    finally:
        con.close()
    return int(row[0]), json.loads(row[1]), int(row[2]), int(row[3])


def read_original_raw(root: Path, name: str = "f") -> np.ndarray:
    """The original's bytes straight from the servers' data files: stripe ``x // 64k`` on
    server ``stripe % NSERV`` at ``(stripe // NSERV) * 64k + x % 64k`` of its data file 0
    (bytes past a data file's end read as 0)."""
    fid, layout, size, dirty = read_meta(root, name)
    assert layout.get("type") == "striped" and layout.get("stripes") == [STRIPE] * NSERV \
        and layout.get("servers") == server_names(root), f"unexpected layout {layout}"
    assert not dirty, "the file's size is not final after the last close"
    return striped_bytes(root, fid, size)


def server_names(root: Path) -> list[str]:
    """The profile's server names, in order (store.json)."""
    from pario.system import System

    cfg = json.loads((root / "store.json").read_text())
    return list(System.from_dict(cfg["profile"]).names)


def server_dirs(root: Path) -> list[Path]:
    """The data directories of the servers, from store.json (relative ones under root)."""
    cfg = json.loads((root / "store.json").read_text())
    dirs = [Path(cfg["servers"][n]) for n in server_names(root)]
    return [d if d.is_absolute() else root / d for d in dirs]


def datafile_blobs(root: Path, fid: int, df: int = 0) -> list[bytes]:
    """Every server's data file ``df`` of file id ``fid``, as bytes: the local backend's
    ``<dir>/<id:08d>.<df>``, or a rados store's objects ``<id:08d>.<df>.<k:08x>`` in the
    server's pool and the store's namespace, read with the ``rados`` module (not pario's
    backend) and laid end to end (absent objects: zeros; the length ends at the last object)."""
    cfg = json.loads((root / "store.json").read_text())
    if cfg.get("backend", "local") != "rados":
        out = []
        for d in server_dirs(root):
            p = d / f"{fid:08d}.{df}"
            out.append(p.read_bytes() if p.exists() else b"")
        return out
    import rados

    osz = int(cfg["object_size"])
    r = rados.Rados(conffile=str(Path(cfg["cluster"]) / "ceph.conf"))
    r.connect(timeout=30)
    try:
        out = []
        for n in server_names(root):
            io = r.open_ioctx(cfg["pools"][n])
            try:
                io.set_namespace(cfg["id"])
                pre = f"{fid:08d}.{df}."
                ks = sorted(int(o.key[len(pre):], 16) for o in io.list_objects() if o.key.startswith(pre))
                buf = bytearray()
                for k in ks:
                    data = io.read(f"{pre}{k:08x}", osz, 0)
                    buf.extend(bytes(k * osz - len(buf)))
                    buf.extend(data)
                out.append(bytes(buf))
            finally:
                io.close()
        return out
    finally:
        r.shutdown()


def drop_namespace(root: Path) -> None:
    """A rados store's objects removed from every pool (a passed trial leaves nothing)."""
    cfg = json.loads((root / "store.json").read_text())
    if cfg.get("backend", "local") != "rados":
        return
    import rados

    r = rados.Rados(conffile=str(Path(cfg["cluster"]) / "ceph.conf"))
    r.connect(timeout=30)
    try:
        spaces = [(pool, cfg["id"]) for pool in cfg["pools"].values()]
        if cfg.get("coord") == "rados":     # its metadata, journal, catalog and lock objects
            spaces.append((cfg["coord_pool"], cfg["id"] + ".coord"))
        for pool, ns in spaces:
            io = r.open_ioctx(pool)
            try:
                io.set_namespace(ns)
                for o in list(io.list_objects()):
                    io.remove_object(o.key)
            finally:
                io.close()
    finally:
        r.shutdown()


def striped_bytes(root: Path, fid: int, size: int) -> np.ndarray:
    """``size`` bytes of file id ``fid`` under fixed:64k over the servers, read by an own
    mapping of the data files (bytes past a data file's end read as 0)."""
    blobs = datafile_blobs(root, fid)
    out = np.zeros(size, np.uint8)
    for s in range((size + STRIPE - 1) // STRIPE):
        x, e = s * STRIPE, min(size, (s + 1) * STRIPE)
        loc = (s // NSERV) * STRIPE
        piece = blobs[s % NSERV][loc:loc + (e - x)]
        out[x:x + len(piece)] = np.frombuffer(piece, np.uint8)
    return out


# ---------------------------------------------------------------------- journal rewriting
def journal_raw(root: Path) -> bytes:
    """The RMT journal's bytes: DIR/rmt.log, or a rados-coordinated store's object (read in a
    forked child when called by the harness itself: librados in the parent would be inherited,
    threads lost, by every later fork)."""
    from pario.store.locks import shared_record

    if COORD == "rados" and not IN_CHILD:
        return isolated(journal_raw, root)
    return shared_record(root, "rmt.log") or b""


def journal_pwrite(root: Path, chunks: list[tuple[bytes, int]]) -> None:
    """Write ``(bytes, offset)`` pieces into the journal behind the store's back (durable)."""
    cfg = json.loads((root / "store.json").read_text())
    if cfg.get("coord") != "rados":
        fd = os.open(root / "rmt.log", os.O_WRONLY)
        try:
            for data, off in chunks:
                os.pwrite(fd, data, off)
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    import rados

    r = rados.Rados(conffile=str(Path(cfg["cluster"]) / "ceph.conf"))
    r.connect(timeout=30)
    try:
        io = r.open_ioctx(cfg["coord_pool"])
        io.set_namespace(cfg["id"] + ".coord")
        for data, off in chunks:
            io.write("rmt.log", data, off)
        io.close()
    finally:
        r.shutdown()


def rewrite_journal(root: Path, drop: int | None = None, shrink: tuple[int, int] | None = None) -> bool:
    """Rewrite the RMT journal without record index ``drop`` / with ADD record ``shrink[0]``'s
    length set to ``shrink[1]``: later records renumbered, CRCs recomputed, header end/seq/
    synced set, the old tail zeroed.  Returns whether the record bytes came out unchanged."""
    from pario.store import rmt_journal as rj

    raw = bytearray(journal_raw(root))
    j = rj.read("rmt.log", raw=bytes(raw))
    if j.stop_reason != "end":
        raise RuntimeError(f"journal does not parse to its end: {j.stop_reason}")
    body = bytearray()
    seq = 0
    for i, rec in enumerate(j.records):
        if i == drop:
            continue
        size = struct.unpack_from("<I", raw, rec.pos)[0]
        b = bytearray(raw[rec.pos:rec.pos + size])
        if shrink is not None and i == shrink[0]:
            assert rec.type == rj.ADD
            struct.pack_into("<Q", b, rj.HEAD.size + 4 * 8, shrink[1])
        seq += 1
        struct.pack_into("<Q", b, 8, seq)
        struct.pack_into("<I", b, 4, zlib.crc32(bytes(b[8:])))
        body += b
    old_end = j.end
    new_end = rj.HDR_SIZE + len(body)
    same = bytes(body) == bytes(raw[rj.HDR_SIZE:old_end])
    journal_pwrite(root, [(bytes(body) + bytes(old_end - new_end), rj.HDR_SIZE),
                          (struct.pack("<QQQ", new_end, seq, new_end), 24)])     # end, seq, synced
    return same


def _coverage(recs, r: int, o: int, skip: int | None = None, shrink: tuple[int, int] | None = None):
    """The ``[a, b)`` ranges replica ``r`` of original ``o`` covers after the records, with
    record ``skip`` left out or ADD record ``shrink[0]`` of length ``shrink[1]`` — coverage
    only, from the format's definitions: ADD adds its range, GROW adds ``[top, end)`` (top:
    the end of the replica's last entry), TRIM clips at the size, DROP empties."""
    from pario.store import rmt_journal as rj

    cov: list[tuple[int, int]] = []
    for i, rec in recs:
        if i == skip:
            continue
        if rec.type == rj.ADD:
            n = shrink[1] if shrink is not None and i == shrink[0] else rec.u[4]
            cov = _merge(cov + [(rec.u[2], rec.u[2] + n)])
        elif rec.type == rj.GROW:
            top = cov[-1][1] if cov else 0
            if top < rec.u[2]:
                cov = _merge(cov + [(top, rec.u[2])])
        elif rec.type == rj.TRIM:
            cov = [(a, min(b, rec.u[1])) for a, b in cov if a < rec.u[1]]
        elif rec.type == rj.DROP:
            cov = []
    return cov


def coverage_cuts(root: Path, size: int, seed: int, tries: int = 24) -> list[tuple[str, int, int, int]]:
    """Injections that lose coverage, computed from the records alone (own replay of
    coverage, :func:`_coverage`): ``("drop", i, lost, 0)`` or ``("shrink", i, lost, new_len)``
    for ADD records ``i`` of registered replicas whose last job record says done, where
    ``lost`` bytes of what the job copied (the replica's own extents, up to min(job's size,
    file size, any TRIM since the job record)) are covered without the change and not with
    it.  Up to ``tries`` random ADD records are tried."""
    from pario.store import rmt_journal as rj

    recs = rj.read("rmt.log", raw=journal_raw(root)).records
    reg, jobs = {}, {}
    mine = defaultdict(list)              # replica -> [(index, record)] that change its coverage
    trims = defaultdict(list)
    for i, rec in enumerate(recs):
        if rec.type == rj.REGISTER:
            reg[rec.u[0]] = rec.u[1]
        elif rec.type == rj.DROP:
            reg.pop(rec.u[0], None)
            jobs.pop(rec.u[0], None)
            mine[rec.u[0]].append((i, rec))
        elif rec.type == rj.JOB:
            jobs[rec.u[0]] = (rec.a16, json.loads(rec.data.decode()), i)
        elif rec.type == rj.ADD:
            mine[rec.u[1]].append((i, rec))
        elif rec.type == rj.GROW:
            mine[rec.u[1]].append((i, rec))
        elif rec.type == rj.TRIM:
            trims[rec.u[0]].append((i, rec))
    cands = []
    for r, (done, spec, ji) in jobs.items():
        if not done or r not in reg:
            continue
        o = reg[r]
        rr = sorted(mine[r] + trims[o])
        upto = min([int(spec.get("size", 0)), size] + [rec.u[1] for i, rec in trims[o] if i > ji])
        want = wanted(spec["name"], upto)
        before = _coverage(rr, r, o)
        cands += [(r, o, rr, want, before, i, rec.u[4]) for i, rec in rr if rec.type == rj.ADD]
    random.Random(seed).shuffle(cands)
    out = []
    for r, o, rr, want, before, i, n in cands[:tries]:
        base = _clip(before, want)
        lost = sum(b - a for a, b in _minus(base, _coverage(rr, r, o, skip=i)))
        if lost:
            out.append(("drop", i, lost, 0))
        if n > 1:
            lost = sum(b - a for a, b in _minus(base, _coverage(rr, r, o, shrink=(i, n // 2))))
            if lost:
                out.append(("shrink", i, lost, n // 2))
    return out


def _clip(spans, want):
    return _merge([(max(a, c), min(b, d)) for a, b in spans for c, d in want if max(a, c) < min(b, d)])


def inject(root: Path, cfg: dict) -> dict:
    """Negative control, then one coverage loss; fsck after each (store opened again)."""
    from pario.store import Store
    from pario.store.fsck import fsck

    res = {"control_ok": False, "injected": False, "detected": False, "how": None}
    same = rewrite_journal(root)
    with Store(root) as st:
        rep = fsck(st)
    res["control_ok"] = same and rep["ok"]
    if not res["control_ok"]:
        res["control_problem"] = ("rewrite changed the records; " if not same else "") + "; ".join(rep["problems"][:3])
    cuts = coverage_cuts(root, read_meta(root)[2], cfg["tseed"])
    if not cuts:
        return res
    how, i, lost, m = cuts[int(cfg["inject_pick"] * len(cuts))]
    if how == "drop":
        rewrite_journal(root, drop=i)
    else:
        rewrite_journal(root, shrink=(i, m))
    res.update(injected=True, how=f"{how} ADD record #{i + 1} ({lost} bytes)")
    try:
        with Store(root) as st:
            rep = fsck(st)
        res["detected"] = not rep["ok"]
        res["fsck_says"] = rep["problems"][:2]
    except Exception as exc:         # refusing to open is a detection too
        res["detected"] = True
        res["fsck_says"] = [f"open failed: {exc}"]
    return res


# ---------------------------------------------------------------------- the check
def check(root: Path, tdir: Path, cfg: dict, init: bytes) -> dict:
    """Reopen (recovery) and check; returns metrics and ``problems`` (empty: the trial passed)."""
    from pario.store import Store
    from pario.store.fsck import fsck
    from pario.store.replicator import Replicator, resume_specs

    problems = []
    writes, p = parse_writes(cfg, tdir)
    problems += p
    ref, size, inflight = expected(init, writes)
    out = {"lost": 0, "fsck_ok": False, "writes": len(writes), "acked": sum(w.td is not None for w in writes)}
    if COORD == "rados":      # the killed processes' leased locks (no kernel drops them at death)
        time.sleep(float(os.environ.get("PARIO_RADOS_LEASE", "10")) + 0.5)
    with Store(root) as st:                               # the first opener recovers
        out["verified"] = st.verified_ranges is not None
        out["differed"] = len(st.verified_ranges or [])
        rep = fsck(st)
        out["fsck_ok"] = rep["ok"] and rep["unclean"] == 0
        if not rep["ok"]:
            problems.append("fsck after recovery: " + "; ".join(rep["problems"][:4]))
        if rep["unclean"]:
            problems.append(f"recovery left {rep['unclean']} unclean RMT entries")
        f = st.open("f")
        got = np.frombuffer(f.read(0, f.size), np.uint8)
        f.close()
        lost, msg = compare(got, ref, size, inflight)
        out["lost"] = lost
        if msg:
            problems.append(f"read through the store after recovery: {msg}")
        # the replicator again: --resume, then the whole plan (a killed replicator's replicas complete)
        pending = resume_specs(st)
        out["resumed"] = len(pending)
        if pending:
            Replicator(st, pending).run()
        names = list(dict.fromkeys(cfg["setup"] + cfg["replicate"]))
        if names:
            r = Replicator(st, make_specs(names)).run()
            if r.skipped:
                problems.append(f"replicator re-run skipped {[s.name for s, _ in r.skipped]}")
        if st.rmt.jobs(pending_only=True):
            problems.append(f"jobs still pending after the re-run: {[j[0] for j in st.rmt.jobs(pending_only=True)]}")
        fsize = st.stat("f").size
        for nm in names:
            cov = _merge([(a, a + n) for a, n in st.rmt.covered(f".replica/f/{nm}")])
            if cov != _merge(wanted(nm, fsize)):
                problems.append(f"replica {nm} covers {cov} after the re-run, its extents are "
                                f"{_merge(wanted(nm, fsize))}")
        rep = fsck(st)
        if not rep["ok"] or rep["unclean"]:
            problems.append("fsck after the replicator re-run: " + "; ".join(rep["problems"][:4])
                            + (f" ({rep['unclean']} unclean)" if rep["unclean"] else ""))
            out["fsck_ok"] = False
        f = st.open("f")
        again = np.frombuffer(f.read(0, f.size), np.uint8)
        f.close()
        if not np.array_equal(again, got):
            problems.append("the store reads other bytes after the replicator re-run")
    raw = read_original_raw(root)
    if not np.array_equal(raw, got):
        d = np.flatnonzero(raw[:min(len(raw), len(got))] != got[:min(len(raw), len(got))])
        problems.append(f"the original's data files differ from what the store serves (size {len(raw)} vs "
                        f"{len(got)}, {len(d)} bytes differ{', first at ' + str(int(d[0])) if len(d) else ''})")
        out["lost"] = max(out["lost"], len(d) + abs(len(raw) - len(got)))
    if (tdir / "reader.err").exists():
        problems.append("the reader thread failed: " + _err_tail(tdir / "reader.err"))
    reads = parse_reads(tdir / "reads.bin")
    bad_reads, bad_bytes, msg = check_reads(init, writes, reads)
    out.update(reads=len(reads), stale_reads=bad_reads, stale_bytes=bad_bytes)
    if msg:
        problems.append(f"stale read during the run: {msg} ({bad_reads} of {len(reads)} reads)")
    if cfg["inject"]:
        inj = inject(root, cfg)
        out["inject"] = inj
        if not inj["control_ok"]:
            problems.append(f"negative control: fsck not clean after rewriting the journal unchanged: "
                            f"{inj.get('control_problem')}")
        if inj["injected"] and not inj["detected"]:
            problems.append(f"injected coverage loss ({inj['how']}) not detected by fsck")
    out["problems"] = problems
    return out


# ---------------------------------------------------------------------- trials
def isolated(fn, *args):
    """``fn(*args)``; with ``--cluster`` in a forked child whose result comes back pickled.

    librados is not fork-safe: a child forked from a process that has used it (even after
    ``shutdown``) can hang in its first operations (seen here: ops that never reach an OSD).
    So the harness's parent never uses librados itself; only the processes it forks do —
    the workers, and these one-off children for setup and checks."""
    if not CLUSTER:
        return fn(*args)
    import pickle

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        global IN_CHILD
        IN_CHILD = True
        os.close(rfd)
        try:
            out = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
            out = ("err", f"{type(exc).__name__}: {exc} {traceback.format_exc(limit=-3).strip().splitlines()[-3:]}")
        with os.fdopen(wfd, "wb") as w:
            pickle.dump(out, w)
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        data = r.read()
    os.waitpid(pid, 0)
    if not data:
        raise RuntimeError(f"{fn.__name__}: the child died without a result")
    kind, val = pickle.loads(data)
    if kind == "err":
        raise RuntimeError(f"{fn.__name__}: {val}")
    return val


def journal_header(root: Path) -> dict:
    """The RMT journal's header, read by the independent reader."""
    from pario.store import rmt_journal

    return rmt_journal.read("rmt.log", raw=journal_raw(Path(root))).header


def killed_recovery(root: Path, boot: str, delay: float, shared: bool = False) -> str:
    """A first opener of the store in boot ``boot`` (a process of its own), SIGKILLed
    ``delay`` seconds after it starts opening; returns where it was: "killed" or "finished"."""
    import subprocess

    code = ("import sys\nfrom pario.store import Store\nprint('go', flush=True)\n"
            f"Store(sys.argv[1], shared={bool(shared)}, lock_timeout=30).close()\nprint('done', flush=True)\n")
    env = {**os.environ, "PARIO_BOOT_ID": boot}
    p = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, text=True)
    try:
        if p.stdout.readline().strip() != "go":
            raise RuntimeError(f"the recovery process failed to start: {p.communicate(timeout=TIMEOUT)[1][-400:]}")
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        out, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode == -signal.SIGKILL:
        return "killed"
    if p.returncode != 0:
        raise RuntimeError(f"the recovery process failed (exit {p.returncode}): {err[-400:]}")
    return "finished"


def reboot_config(tseed: int) -> dict:
    """--reboot: the new boot's id, whether a first recovery is killed, and when."""
    rng = random.Random(tseed ^ 0xB007)
    return {"boot": f"reboot-{tseed}", "kill": rng.random() < REBOOT_KILL, "delay": rng.uniform(0, 0.03)}


def reboot_checks(boot: str, before: dict, after_first: dict | None, verified: bool, differed: int,
                  root: Path) -> list[str]:
    """--reboot: what the headers (independent reader: ``before`` the new boot, ``after_first``
    a killed first recovery) and the checked recovery must show."""
    problems = []
    unclean = before["clean"] == 0
    stamped = after_first is not None and after_first["boot_id"] == boot
    # stamped with the flag cleared: the killed recovery had finished its verification
    pending = unclean and (not stamped or after_first["verify"] == 1)
    if pending and not verified:
        problems.append("the recovery in the new boot skipped the byte-for-byte verification")
    if not unclean and verified:
        problems.append("a store closed cleanly was verified after the reboot")
    if differed:
        problems.append(f"{differed} CLEAN ranges differed from their originals after a SIGKILL (no page was lost)")
    if journal_header(root)["verify"] != 0:
        problems.append("the verify flag is still set after the recovery")
    return problems


def run_trial(base: Path, mode: str, tseed: int, keep: bool = False, **overrides) -> dict:
    """One trial; returns its metrics with ``problems`` (empty: passed).  The trial's
    directory is removed when it passed (unless ``keep``).  ``overrides`` replace entries of
    the trial's configuration (tests: ``inject=True``, ``kill_all=True``, ``trigger=None`` …)."""
    cfg = make_config(mode, tseed)
    cfg.update(overrides)
    tdir = Path(base) / f"{mode}-{tseed}"
    if tdir.exists():
        shutil.rmtree(tdir)
    tdir.mkdir(parents=True)
    root = tdir / "store"
    t0 = time.monotonic()
    res = {"mode": mode, "seed": tseed, "problems": [], "cfg": cfg}
    try:
        init = isolated(setup, root, cfg)
        run = _run_shared(cfg, root, tdir) if cfg["shared"] else _run_exclusive(cfg, root, tdir)
        res.update(run)
        res["problems"] += run.pop("harness_problems", [])
        if REBOOT:
            rb = res["reboot"] = reboot_config(tseed)
            before, after_first = journal_header(root), None
            os.environ["PARIO_BOOT_ID"] = rb["boot"]
            try:
                if rb["kill"] and before["clean"] == 0:
                    rb["first"] = killed_recovery(root, rb["boot"], rb["delay"], shared=cfg["shared"])
                    after_first = journal_header(root)
                out = isolated(check, root, tdir, cfg, init)
            finally:
                del os.environ["PARIO_BOOT_ID"]
            res["problems"] += reboot_checks(rb["boot"], before, after_first, out["verified"], out["differed"], root)
            rb["unclean"] = before["clean"] == 0
        else:
            out = isolated(check, root, tdir, cfg, init)
        res["problems"] += out.pop("problems")
        res.update(out)
    except Exception as exc:        # the harness or the store raised: a failed trial, kept for analysis
        where = traceback.format_exc(limit=-3).strip().splitlines()[-3:]
        res["problems"].append(f"{type(exc).__name__}: {exc} {where}")
    res["seconds"] = time.monotonic() - t0
    if not res["problems"] and not keep:
        try:
            isolated(drop_namespace, root)
        except Exception as exc:  # noqa: BLE001 - the trial passed; say what was left
            print(f"warning: {root}: objects left on the cluster ({exc})", flush=True)
        shutil.rmtree(tdir, ignore_errors=True)
    return res


class TallyBase:
    """Counts of one mode's trials (this script's and stress/serve_kill.py's): trials, passes,
    failures (seed, message), seconds; subclasses add their own counts and ``line()``."""

    def __init__(self, mode: str):
        self.mode = mode
        self.n = self.passed = 0
        self.fails: list[tuple[int, str]] = []
        self.seconds = 0.0

    def add(self, r: dict) -> None:
        self.n += 1
        self.seconds += r["seconds"]
        if r["problems"]:
            self.fails.append((r["seed"], "; ".join(r["problems"])[:800]))
        else:
            self.passed += 1


class Tally(TallyBase):
    def __init__(self, mode: str):
        super().__init__(mode)
        self.lost = self.stale = self.reads = self.fsck_ok = 0
        self.controls = self.controls_ok = self.injected = self.detected = self.noinject = 0
        self.in_close = self.in_flush = self.in_write = self.in_open = self.replicating = 0
        self.victims: dict[str, int] = defaultdict(int)
        self.kill_all = 0
        self.rb_unclean = self.rb_verified = self.rb_killed = 0

    def add(self, r: dict) -> None:
        super().add(r)
        rb = r.get("reboot")
        if rb:
            self.rb_unclean += bool(rb.get("unclean"))
            self.rb_verified += bool(r.get("verified"))
            self.rb_killed += rb.get("first") == "killed"
        self.lost += r.get("lost", 0)
        self.stale += r.get("stale_reads", 0)
        self.reads += r.get("reads", 0)
        self.fsck_ok += bool(r.get("fsck_ok"))
        inj = r.get("inject")
        if inj:
            self.controls += 1
            self.controls_ok += inj["control_ok"]
            self.injected += inj["injected"]
            self.detected += inj["injected"] and inj["detected"]
            self.noinject += not inj["injected"]
        self.in_close += bool(r.get("in_close"))
        self.in_flush += bool(r.get("in_flush"))
        self.in_write += bool(r.get("in_write"))
        self.in_open += bool(r.get("in_open"))
        self.replicating += bool(r.get("replicating"))
        v = r.get("victims") or []
        for x in v:
            self.victims[x[:2] if x[0] == "r" else "w"] += 1
        self.kill_all += len(v) > 1

    def line(self) -> str:
        s = (f"{self.mode}: {self.n} trials, {self.passed} passed, {len(self.fails)} failed; "
             f"lost acknowledged bytes {self.lost}, stale reads {self.stale} (of {self.reads} reads checked), "
             f"fsck clean {self.fsck_ok}/{self.n}, injected coverage losses detected {self.detected}/{self.injected} "
             f"(negative controls clean {self.controls_ok}/{self.controls}"
             + (f", {self.noinject} without an injectable record" if self.noinject else "") + "); kills: ")
        kills = []
        if self.mode in SHARED:
            kills.append(f"all {self.kill_all}, one {self.n - self.kill_all} "
                         f"(processes killed: writer {self.victims['w']}, reader {self.victims['rd']}, "
                         f"replicator {self.victims['rp']})")
        if self.in_write:
            kills.append(f"inside a write {self.in_write}")
        if self.in_close:
            kills.append(f"inside a close {self.in_close}")
        if self.in_flush:
            kills.append(f"inside a flush {self.in_flush}")
        if self.in_open:
            kills.append(f"inside the reopen after a close {self.in_open}")
        if self.replicating:
            kills.append(f"while replicating {self.replicating}")
        s += ", ".join(kills) or "-"
        if self.rb_unclean or self.rb_verified:
            s += (f"; reboot: {self.rb_unclean} left unclean, {self.rb_verified} verified byte for byte, "
                  f"{self.rb_killed} after a recovery killed midway")
        return s + f"; {self.seconds:.0f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", default="all", help="all | exclusive | shared | one of: " + ", ".join(MODES))
    ap.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    ap.add_argument("--trial-seed", type=int, default=None, help="run the one trial of this seed (with --mode MODE)")
    ap.add_argument("--keep", action="store_true", help="keep every trial's directory")
    ap.add_argument("--cluster", default=None, metavar="DIR",
                    help="every trial's store on this 'pario cluster' (backend rados, 64 KiB objects)")
    ap.add_argument("--coord", default="host", metavar="MEMBER",
                    help="every trial's store made with this coordination member (host, pfs; with --cluster also "
                         "rados; docs/store.md)")
    ap.add_argument("--reboot", action="store_true",
                    help="recover every trial in another boot (PARIO_BOOT_ID): the power-loss verification")
    a = ap.parse_args(argv)
    global COORD
    COORD = a.coord
    if COORD == "rados" and not a.cluster:
        ap.error("--coord rados needs --cluster DIR (a store coordinated in RADOS is on the rados data plane)")
    if a.reboot:
        global REBOOT
        REBOOT = True
    if a.cluster:
        global CLUSTER, NSERV
        from pario.cluster.state import load_state

        CLUSTER = str(load_state(a.cluster).dir)
        NSERV = len(load_state(a.cluster).servers)
    modes = {"all": MODES, "exclusive": EXCLUSIVE, "shared": SHARED}.get(a.mode, (a.mode,))
    if any(m not in MODES for m in modes):
        ap.error(f"--mode {a.mode}: unknown (all, exclusive, shared, {', '.join(MODES)})")
    import tempfile

    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-crash-"))
    base.mkdir(parents=True, exist_ok=True)
    plan = ([(modes[0], a.trial_seed)] if a.trial_seed is not None
            else [(modes[t % len(modes)], a.seed * 1_000_000 + t) for t in range(a.trials)])
    return drive(plan, lambda mode, ts: (run_trial(base, mode, ts, keep=a.keep), ""), {m: Tally(m) for m in modes},
                 base, "crash stress" + (" (recovery after a reboot)" if a.reboot else ""), a.seed,
                 "stress/crash_stress.py" + (" --reboot" if a.reboot else ""))


def drive(plan, run_one, tallies: dict, base: Path, title: str, seed: int, script: str) -> int:
    """The trial loop of a stress script (this one and stress/serve_kill.py): every (mode,
    trial seed) of ``plan`` run by ``run_one(mode, seed) -> (result, note)``, a FAIL line for
    every failed trial (``note``: e.g. " (reused store)"), progress every 50 trials, then
    one summary line per mode (``tallies[mode].line()``) and every failure with the command
    that reproduces it.  Returns the exit code: 1 if any trial failed."""
    t0 = time.time()
    for t, (mode, ts) in enumerate(plan):
        r, note = run_one(mode, ts)
        tallies[mode].add(r)
        if r["problems"]:
            print(f"FAIL {mode} seed {ts}{note}: {'; '.join(r['problems'])[:1200]}  (kept in {base / f'{mode}-{ts}'})",
                  flush=True)
        if (t + 1) % 50 == 0:
            nf = sum(len(x.fails) for x in tallies.values())
            print(f"{t + 1}/{len(plan)} trials, {nf} failed ({time.time() - t0:.0f} s)", flush=True)
    print(f"{title}: {len(plan)} trials, seed {seed}, {time.time() - t0:.0f} s wall, work dir {base}")
    for m, tally in tallies.items():
        if tally.n:
            print(tally.line())
            for s, msg in tally.fails:
                print(f"  FAIL seed {s}: {msg}\n"
                      f"    reproduce: python {script} --mode {m} --trial-seed {s}")
    return 1 if any(x.fails for x in tallies.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
