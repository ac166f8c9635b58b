"""Crash stress of served MPI programs: SIGKILL one rank (or the whole job) of an unmodified
MPI program whose file pario's preloaded library serves from a store, then check the store.

    python stress/serve_kill.py --trials 200 --seed 1 [--mode all] [--dir D] [--keep]
    python stress/serve_kill.py --mode in-call --trial-seed 1000017      # one trial again

Issue 16, "Bad situations": a rank killed mid-run -> the store recovers, acknowledged writes
kept, fsck clean.  Every trial:

* a store (system ceda-hdd8: 8 servers) holds ``kill.dat``: 1.5 MiB of seeded bytes, layout
  ``fixed:64k``, and two CEDA partial replicas ``r1``, ``r2`` (2-4 random extents each, on
  distinct servers, overlapping each other, some crossing the file's end), described by a
  hand-made CEDA plan (``plan.json``: ``replicas``, ``collective_order``) and copied by
  ``pario replicate``.  30 % of the trials instead reuse the previous trial's store after its
  checks (recovered, then served again; its bytes are the new initial bytes);
* ``mpiexec -n P`` (P = 2-4) runs tests/c/serve_kill.c with ``libpario_trace.so`` preloaded
  (``PARIO_STORE``, ``PARIO_PLAN``, ``PARIO_SERVE=all``): 20-70 operations (independent
  write_at, iwrite_at, write_at_all, iwrite_at_all, write_at_all through a vector file view,
  reads of the rank's own bytes checked by the program, reads of any range logged with
  their bytes, MPI_File_sync, close + reopen), ranks writing disjoint random blocks of
  [0, 1.5 MiB + 256 KiB), so writes into replicated ranges go to the replicas (DIRTY) and
  some extend the file;
* the kill, by mode:
  - ``one-rank``: the harness SIGKILLs one random rank at a random time: a random operation k
    of the run (0..nops) is chosen, and the kill comes a uniformly random part of 1.5x the
    victim's mean operation time so far after the victim logged op k's start (k = 0: within
    0.3 s of the start, in MPI_File_open and the store's open; k = nops: within 50 ms after
    the final MPI_File_close began); hydra then kills the others;
  - ``in-call``: one random rank SIGKILLs itself (a timer with SIGEV_SIGNAL = SIGKILL) a
    random delay after its k-th write began (1 us-2 ms, log-uniform), its k-th
    MPI_File_close began (0-20 ms) or MPI_Finalize began (0-50 ms: the store's close,
    which flushes DIRTY replica bytes), so that the kill lands inside the served call;
  - ``whole-job``: every rank SIGKILLed at once at a random time (as one-rank, watching rank 0);
  - ``no-kill``: the run ends normally (half of these are the stale-read control below);
* in 30 % of the killed trials the program runs again first, only opening and closing the
  file (``nops`` = 0): the C library's first opener recovers the crashed store and its last
  close flushes (it must exit 0, say nothing, and leave no DIRTY byte); in 40 % of these a
  first re-run has one rank SIGKILLed within 0.15 s of its start (in the store's open and
  recovery, the file's open or close, the store's flush at MPI_Finalize);
* then ``pario store fsck --store DIR --json`` (the first opener: recovery) must be clean with
  no unclean RMT entry, and the file read through the Python store must hold every
  acknowledged byte.  The summary counts the recoveries that found DIRTY replica bytes (the
  journal replayed by the independent reader, pario.store.rmt_journal, before recovery).

Oracles, independent of the store's code:

* **Acknowledged bytes.**  Each rank logs ``B gen ...`` (the write's pieces) before a write
  and ``D gen ...`` after it returned MPI_SUCCESS, then fdatasync: that write is
  acknowledged.  A collective write returns on a rank only after every aggregator's data
  access ended (the two-phase I/O ends with an allreduce of the error code).  The byte a
  write puts at x is a function of (seed, rank, gen, x) (:func:`val`, the C program's
  ``val``), so the expected file is the initial bytes + every acknowledged write (ranks own
  disjoint blocks, so the order across ranks does not matter).  Inside a write in flight (B
  without D; at most one per rank) each byte may be old or new.  "lost acknowledged bytes"
  counts the bytes the store serves after recovery that are neither; the size must lie
  between the acknowledged size and the end of the writes in flight.
* **The original, read without the store** after the store is closed: file id, size and
  ``dirty`` = 0 from ``meta.db`` (sqlite3), bytes by an own mapping of ``fixed:64k`` over 8
  servers; must equal what the store served.
* **Stale reads.**  The program checks every read of its own bytes against what it wrote last
  (and that the read is not short before the end it knows): ``S`` records.  Reads of any
  range are logged with their bytes and times; each byte must be the value of the last
  write acknowledged before the read began, or of a write begun before it ended and not
  acknowledged before it began (CLOCK_MONOTONIC in every process).
* **Negative controls** (on a copy of the store, after the checks, in a third of the killed
  trials): one acknowledged byte outside the replicas flipped in the original's data file must
  be found by the lost-bytes check; one byte of a replicated range flipped in the original's
  data file must make fsck fail; one logged read of another rank's bytes changed to the value
  before the last acknowledged write must be found by the stale-read check.  Half of the
  ``no-kill`` trials run the program with ``SK_FORGET``: rank 0 does not record one write
  as its own, and its next read of that range must report stale bytes.

``--reboot`` (issue 28): everything after the kill happens in "another boot"
(``PARIO_BOOT_ID`` changed, as after a power loss).  Where the kill left the journal unclean
(its header read by the independent reader), the C library's re-runs must refuse the store —
exit 0, one line, the file passed through, no DIRTY byte moved, the header's ``verify`` flag
set — in a third of the trials a first Python recovery is SIGKILLed 0–30 ms into its open,
and ``pario store fsck`` (the first opener) must verify every CLEAN entry byte for byte
unless a killed recovery finished that; every other check as above, and the flag is 0 after.

tests/native/test_serve_kill.py runs 10 trials.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import itertools
import json
import math
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SRC = ROOT / "tests" / "c" / "serve_kill.c"
SYSTEM = "ceda-hdd8"
NAME = "kill.dat"
SIZE = 1536 << 10              # initial file size (fresh store)
END = SIZE + (256 << 10)       # writes reach up to here (extending the file)
STRIPE = 64 << 10              # layout fixed:64k ...
NSERV = 8                      # ... over the 8 servers of ceda-hdd8
MAXW = 150_000                 # largest write piece
TIMEOUT = 120.0                # a job that has not ended this long after the kill: a hang
MODES = ("one-rank", "in-call", "whole-job", "no-kill")
CYCLE = ("one-rank", "in-call", "whole-job", "one-rank", "in-call", "one-rank", "in-call", "whole-job",
         "one-rank", "no-kill")          # 200 trials: 80 one-rank, 60 in-call, 40 whole-job, 20 no-kill
COORD = "host"                # --coord: the stores' coordination member ("pfs": the journal with pread/pwrite)
REBOOT = False                 # --reboot: everything after the kill in another boot (PARIO_BOOT_ID)
REUSE = 0.3                    # share of trials that reuse the previous trial's store
CONTROL = 1 / 3                # share of killed trials with negative controls
C_RECOVERY = 0.3               # share of killed trials the C library recovers first (the program re-run)
RHDR = struct.Struct("<qqqqq")  # read log record: t0, t1, offset, length, moved; then the bytes
M64 = (1 << 64) - 1
WRITE_KINDS = {"a": "independent", "n": "nonblocking", "c": "collective", "w": "nonblocking collective",
               "v": "collective through a file view"}


def _crash_stress():
    """stress/crash_stress.py, whose log and metadata readers this stress shares."""
    spec = importlib.util.spec_from_file_location("pario_crash_stress", ROOT / "stress" / "crash_stress.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_cs = _crash_stress()
_lines = _cs._lines


def read_meta(root: Path, name: str = NAME) -> tuple[int, dict, int, int]:
    """(id, layout, size, dirty) of a file, read from meta.db with sqlite3 (not the store)."""
    return _cs.read_meta(root, name)


# ---------------------------------------------------------------------- the program's functions
def val(seed: int, rank: int, gen: int, x: np.ndarray) -> np.ndarray:
    """The byte write ``gen`` of ``rank`` puts at offsets ``x`` (serve_kill.c ``val``, uint32)."""
    x32 = (np.asarray(x, np.int64) & 0xFFFFFFFF).astype(np.uint32)
    add = np.uint32((gen * 0x85EBCA77 + rank * 0xC2B2AE3D + seed) & 0xFFFFFFFF)
    h = x32 * np.uint32(0x9E3779B1) + add
    h ^= h >> np.uint32(15)
    h *= np.uint32(0x2C1B3C6D)
    h ^= h >> np.uint32(13)
    return (h >> np.uint32(24)).astype(np.uint8)


def _splitmix(s: int) -> tuple[int, int]:
    s = (s + 0x9E3779B97F4A7C15) & M64
    z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return s, z ^ (z >> 31)


def op_kinds(seed: int, nops: int) -> str:
    """The program's operation kinds (serve_kill.c main: the generator shared by the ranks):
    a n c w v (writes), r i R (own reads), f (any range), s (sync), o (close + reopen)."""
    s = (seed * 0x9E3779B97F4A7C15 + 1) & M64
    out = []
    for _ in range(nops):
        s, z = _splitmix(s)
        u = z % 100
        out.append("a" if u < 28 else "n" if u < 36 else "c" if u < 46 else "w" if u < 50 else "v" if u < 54 else
                   "r" if u < 68 else "i" if u < 72 else "R" if u < 80 else "f" if u < 94 else "s" if u < 97 else "o")
    return "".join(out)


# ---------------------------------------------------------------------- building
def build(work: Path, lib: Path | None = None) -> tuple[Path, Path]:
    """(libpario_trace.so (``lib``, else built by scripts/build_native.py), the serve_kill
    program compiled with the MPICH wheel's mpicc)."""
    if lib is None:
        spec = importlib.util.spec_from_file_location("build_native", ROOT / "scripts" / "build_native.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        lib = mod.build_tracer(quiet=True)
        if lib is None:
            raise RuntimeError("no mpicc: libpario_trace.so is not built")
    exe = Path(work) / "serve_kill"
    r = subprocess.run([str(VENV_BIN / "mpicc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", str(SRC), "-o",
                        str(exe), "-lrt"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError("compiling serve_kill.c failed: " + r.stderr[-2000:])
    return Path(lib), exe


# ---------------------------------------------------------------------- configuration
def random_replicas(rng: random.Random) -> dict[str, list[tuple[int, int, int]]]:
    """Two CEDA partial replicas: name -> [(offset, length, server)], 2-4 disjoint extents each
    on distinct servers (local offset 0), over [0, END): some cross the file's end."""
    out = {}
    for name in ("r1", "r2"):
        k = rng.randrange(2, 5)
        cuts = sorted(rng.sample(range(0, END - 30_000, 1000), k))
        servers = rng.sample(range(NSERV), k)
        ext = []
        for j, a in enumerate(cuts):
            room = (cuts[j + 1] if j + 1 < k else END) - a
            ext.append((a, min(room, rng.randrange(30_000, 300_000)), servers[j]))
        out[name] = ext
    return out


def make_config(mode: str, tseed: int, prev: dict | None = None) -> dict:
    """Everything a trial does, from its seed; ``prev``: the previous trial's store is reused
    (its replicas, its bytes)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    rng = random.Random(tseed)
    nprocs = rng.choice((2, 3, 4))
    cfg = {"mode": mode, "tseed": tseed, "nprocs": nprocs, "nops": rng.randrange(20, 71),
           "prog_seed": rng.randrange(1, 1 << 32), "order": rng.choice(("romcio", "cacio", "hacio")),
           "replicas": prev["replicas"] if prev else random_replicas(rng), "reused": prev is not None}
    bounds = [0]
    while bounds[-1] < END:
        bounds.append(min(END, bounds[-1] + rng.randrange(20_000, 250_000)))
    blocks = list(itertools.pairwise(bounds))
    shift = rng.randrange(nprocs)
    cfg["blocks"] = [(a, b, (j + shift) % nprocs) for j, (a, b) in enumerate(blocks)]
    kinds = op_kinds(cfg["prog_seed"], cfg["nops"])
    cfg["kinds"] = kinds
    nwrites = sum(k in WRITE_KINDS for k in kinds)
    ncloses = 1 + kinds.count("o")
    cfg["victim"] = rng.randrange(nprocs)
    cfg["kill_op"] = rng.randrange(0, cfg["nops"] + 1)     # one-rank, whole-job: where (see _wait_op)
    cfg["kill_delay"] = rng.random()
    cfg["kill_at"] = None           # in-call: "K KIND DELAY_US" for the victim
    cfg["forget"] = None
    if mode == "in-call":
        what = rng.choices("BCF", (6, 3, 1))[0]
        if what == "B" and nwrites:
            cfg["kill_at"] = f"{rng.randrange(1, nwrites + 1)} B {int(math.exp(rng.uniform(0, math.log(2000))))}"
        elif what in "BC":
            cfg["kill_at"] = f"{rng.randrange(1, ncloses + 1)} C {rng.randrange(0, 20_000)}"
        else:
            cfg["kill_at"] = f"1 F {rng.randrange(0, 50_000)}"
    if mode == "no-kill" and rng.random() < 0.5:
        # stale-read control: a write of rank 0 followed by an own read before the next write
        gens, gen = [], 0
        for i, k in enumerate(kinds):
            if k in WRITE_KINDS:
                gen += 1
                nxt = next((q for q in kinds[i + 1:] if q in WRITE_KINDS or q in "riR"), None)
                if nxt is not None and nxt in "riR":
                    gens.append(gen)
        if gens:
            cfg["forget"] = rng.choice(gens)
    cfg["control"] = mode != "no-kill" and rng.random() < CONTROL
    cfg["control_seed"] = rng.randrange(1 << 30)
    cfg["c_recovery"] = mode != "no-kill" and rng.random() < C_RECOVERY
    cfg["c_recovery_kill"] = cfg["c_recovery"] and rng.random() < 0.4       # ... killed itself once
    cfg["c_recovery_delay"] = rng.random()
    return cfg


def extents_layout(ext) -> dict:
    return {"type": "extents", "extents": [[a, n, f"H{s}", 0, 1] for a, n, s in ext], "default": None}


# ---------------------------------------------------------------------- store setup
def setup(tdir: Path, cfg: dict, carried: Path | None = None, carried_bytes: bytes | None = None) -> bytes:
    """The trial's store (tdir/store), plan (tdir/plan.json) and initial bytes (tdir/init.bin)."""
    from pario.cli import main as cli
    from pario.store import Store, init_store

    root = tdir / "store"
    plan = {"pario_plan": 1, "scheme": "ceda", "system": SYSTEM, "layouts": {}, "collective_order": cfg["order"],
            "replicas": {NAME: [{"name": nm, "layout": extents_layout(ext)} for nm, ext in cfg["replicas"].items()]}}
    (tdir / "plan.json").write_text(json.dumps(plan))
    if carried is not None:
        shutil.move(str(carried), str(root))
        init = carried_bytes
    else:
        init_store(root, SYSTEM, coord=COORD)
        init = np.random.default_rng(cfg["tseed"]).bytes(SIZE)
        with Store(str(root)) as st:
            st.create(NAME, "fixed:64k")
            with st.open(NAME) as f:
                f.write(0, init)
        with contextlib.redirect_stdout(io.StringIO()):
            rc = cli(["replicate", str(tdir / "plan.json"), "--store", str(root), "--json"])
        if rc != 0:
            raise RuntimeError(f"pario replicate failed ({rc})")
    (tdir / "init.bin").write_bytes(init)
    lines = [f"{cfg['prog_seed']} {cfg['nops']} {len(init)} {END} {MAXW}", str(len(cfg["blocks"]))]
    lines += [f"{a} {b} {o}" for a, b, o in cfg["blocks"]]
    (tdir / "config.txt").write_text("\n".join(lines) + "\n")
    lines[0] = f"{cfg['prog_seed']} 0 {len(init)} {END} {MAXW}"          # the recovery run: open, close
    (tdir / "config-open.txt").write_text("\n".join(lines) + "\n")
    return init


# ---------------------------------------------------------------------- running and killing
def _pids(logdir: Path, n: int) -> dict[int, int]:
    out = {}
    for r in range(n):
        for p in _lines(logdir / f"rank-{r}.log")[:1]:
            if p[0] == "P":
                out[int(p[1])] = int(p[2])
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class Tail:
    """The complete lines a log has grown by since the last call."""

    def __init__(self, path: Path):
        self.path, self.pos, self.part = path, 0, b""

    def new(self) -> list[list[str]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                raw = f.read()
        except FileNotFoundError:
            return []
        self.pos += len(raw)
        raw = self.part + raw
        cut = raw.rfind(b"\n") + 1
        self.part = raw[cut:]
        return [ln.split() for ln in raw[:cut].decode(errors="replace").splitlines() if ln]


def _wait_op(cfg: dict, tail: Tail, p, start: float) -> bool:
    """Wait until the kill point of a one-rank/whole-job trial (op ``kill_op`` of the watched
    rank plus a random part of its mean operation time so far; op 0: a random time of the
    open; op nops: a random time after the final close began).  False: the job ended first."""
    k, frac, n = cfg["kill_op"], cfg["kill_delay"], cfg["nops"]
    closes = 1 + cfg["kinds"].count("o")
    seen_c, t_first, t_k = 0, None, None
    if k == 0:
        at = start + frac * 0.3
    else:
        at = None
        while at is None:
            if p.poll() is not None or time.monotonic() - start > TIMEOUT:
                return False
            for q in tail.new():
                if q[0] == "o" and int(q[1]) == 0:
                    t_first = int(q[2])
                if q[0] == "o" and int(q[1]) == k and k < n:
                    t_k = int(q[2])
                    mean = (t_k - t_first) / 1e9 / k if t_first is not None and k > 0 else 0.02
                    at = time.monotonic() + frac * 1.5 * mean
                if q[0] == "C":
                    seen_c += 1
                    if k >= n and seen_c == closes:
                        at = time.monotonic() + frac * 0.05
            time.sleep(0.0005)
    while p.poll() is None and time.monotonic() < at:
        time.sleep(min(0.0005, max(0.0, at - time.monotonic())))
    return p.poll() is None


def run_job(cfg: dict, tdir: Path, lib: Path, exe: Path, logs: str = "logs", config: str = "config.txt",
            kill: bool = True, boot: str | None = None) -> dict:
    """Run the program, kill as the mode says (unless not ``kill``), wait until every rank is
    gone.  ``boot``: the run's PARIO_BOOT_ID (--reboot)."""
    logdir = tdir / logs
    logdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PARIO_", "SK_")) and k != "LD_PRELOAD"}
    env.update({"LD_PRELOAD": str(lib), "PARIO_STORE": str(tdir / "store"), "PARIO_PLAN": str(tdir / "plan.json"),
                "PARIO_SERVE": "all"})
    if boot:
        env["PARIO_BOOT_ID"] = boot
    if cfg["kill_at"] and kill:
        env.update({"SK_KILL_RANK": str(cfg["victim"]), "SK_KILL_AT": cfg["kill_at"]})
    if cfg["forget"] and kill:
        env.update({"SK_FORGET_RANK": "0", "SK_FORGET": str(cfg["forget"])})
    n = cfg["nprocs"]
    out = {"killed": [], "hang": False, "ended_first": False}
    with open(tdir / f"mpiexec-{logs}.out", "wb") as so:
        p = subprocess.Popen([str(VENV_BIN / "mpiexec"), "-n", str(n), str(exe), NAME, str(logdir),
                              str(tdir / config), str(tdir / "init.bin")], env=env, cwd=str(tdir), stdout=so,
                             stderr=subprocess.STDOUT, start_new_session=True)
        t_spawn = time.monotonic()
        pids: dict[int, int] = {}
        while len(pids) < n and p.poll() is None and time.monotonic() - t_spawn < TIMEOUT:
            pids = _pids(logdir, n)
            time.sleep(0.002)
        t0 = time.monotonic()
        if kill and cfg["mode"] in ("one-rank", "whole-job") and len(pids) == n:
            watched = cfg["victim"] if cfg["mode"] == "one-rank" else 0
            if _wait_op(cfg, Tail(logdir / f"rank-{watched}.log"), p, t0):
                victims = [cfg["victim"]] if cfg["mode"] == "one-rank" else list(range(n))
                for r in victims:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pids[r], signal.SIGKILL)
                out["killed"] = victims
                out["kill_time"] = time.monotonic_ns()
            else:
                out["ended_first"] = True
        try:
            rc = p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            out["hang"] = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
        out["rc"] = rc
        out["seconds"] = time.monotonic() - t0
    deadline = time.monotonic() + 10
    while any(_alive(x) for x in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.005)
    left = [r for r, x in pids.items() if _alive(x)]
    if left:
        for r in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids[r], signal.SIGKILL)
        out["left_alive"] = left
    return out


# ---------------------------------------------------------------------- logs
class Write:
    __slots__ = ("gen", "kind", "pieces", "rank", "tb", "td")

    def __init__(self, rank, gen, kind, pieces, tb, td):
        self.rank, self.gen, self.kind, self.pieces, self.tb, self.td = rank, gen, kind, pieces, tb, td

    def data(self, seed: int, a: int, b: int) -> np.ndarray:
        return val(seed, self.rank, self.gen, np.arange(a, b, dtype=np.int64))


INTERRUPTED = ("in a write", "in a close", "in finalize", "in the open", "in a read", "in a sync",
               "before a write", "between calls", "ended")


def _interrupted(rec: str | None, kind: str | None) -> str:
    """What a rank whose last log record is ``rec`` (inside operation ``kind``) was doing."""
    if rec == "o":
        return ("before a write" if kind in WRITE_KINDS else "in a read" if kind in "riRf" else
                "in a sync" if kind == "s" else "between calls")
    return {"B": "in a write", "C": "in a close", "c": "in the open", "P": "in the open", None: "in the open",
            "F": "in finalize", "E": "ended"}.get(rec, "between calls")


def parse_logs(cfg: dict, logdir: Path) -> dict:
    """Writes (``td`` None: in flight), own-read counts and stale records, failures, and the
    last record of each rank (what a kill interrupted)."""
    writes, problems, last, stale, own_reads, errors, ended = [], [], {}, [], 0, [], []
    for r in range(cfg["nprocs"]):
        begun, done = {}, {}
        rec, op = None, None
        for p in _lines(logdir / f"rank-{r}.log"):
            rec = p[0]
            if p[0] == "o":
                op = int(p[1])
            if p[0] == "B":
                n = int(p[4])
                pieces = [(int(p[5 + 2 * i]), int(p[6 + 2 * i])) for i in range(n)]
                begun[int(p[1])] = (int(p[2]), p[3], pieces)
            elif p[0] == "D":
                done[int(p[1])] = int(p[2])
            elif p[0] == "r":
                own_reads += 1
            elif p[0] == "S":
                stale.append((r, " ".join(p)))
            elif p[0] == "X":
                errors.append((r, " ".join(p)))
            elif p[0] == "E":
                ended.append(r)
        last[r] = _interrupted(rec, cfg["kinds"][op] if op is not None else None)
        open_ = [g for g in begun if g not in done]
        if len(open_) > 1 or (open_ and open_[0] != max(begun)):
            problems.append(f"rank {r}: writes {open_} begun and not done (only the last may be)")
        if set(done) - set(begun):
            problems.append(f"rank {r}: writes {sorted(set(done) - set(begun))} done, never begun")
        for g in sorted(begun):
            tb, kind, pieces = begun[g]
            writes.append(Write(r, g, kind, pieces, tb, done.get(g)))
    return {"writes": writes, "problems": problems, "last": last, "stale": stale, "own_reads": own_reads,
            "errors": errors, "ended": ended}


def expected(cfg: dict, init: bytes, writes: list[Write]) -> tuple[np.ndarray, int, list[Write]]:
    """(bytes after the acknowledged writes (zeros up to END), their size, writes in flight)."""
    seed = cfg["prog_seed"]
    ref = np.zeros(END, np.uint8)
    ref[:len(init)] = np.frombuffer(init, np.uint8)
    size = len(init)
    for w in sorted((w for w in writes if w.td is not None), key=lambda w: w.td):
        for a, n in w.pieces:
            ref[a:a + n] = w.data(seed, a, a + n)
            size = max(size, a + n)
    return ref, size, [w for w in writes if w.td is None and w.pieces]


def compare(cfg: dict, got: np.ndarray, ref: np.ndarray, size: int, inflight: list[Write]) -> tuple[int, str | None]:
    """Bytes of ``got`` (a whole file) that are neither the expected byte nor, inside a write
    in flight, its new byte; plus a message."""
    top = max([size] + [a + n for w in inflight for a, n in w.pieces])
    if not size <= len(got) <= top:
        return max(1, abs(len(got) - size)), f"file size {len(got)}, expected {size}" + \
            (f" .. {top} (a write in flight)" if top > size else "")
    ok = got == ref[:len(got)]
    for w in inflight:
        for a, n in w.pieces:
            e = min(a + n, len(got))
            if e > a:
                ok[a:e] |= got[a:e] == w.data(cfg["prog_seed"], a, e)
    bad = np.flatnonzero(~ok)
    if len(bad):
        return len(bad), (f"{len(bad)} bytes lost, first at offset {int(bad[0])} (got {int(got[bad[0]])}, "
                          f"expected {int(ref[bad[0]])})")
    return 0, None


def parse_reads(logdir: Path, nprocs: int) -> list[tuple[int, int, int, int, int, np.ndarray]]:
    """(rank, t0, t1, offset, length, bytes) of every complete record of the read logs."""
    out = []
    for r in range(nprocs):
        try:
            raw = (logdir / f"reads-{r}.bin").read_bytes()
        except FileNotFoundError:
            continue
        pos = 0
        while pos + RHDR.size <= len(raw):
            t0, t1, off, n, moved = RHDR.unpack_from(raw, pos)
            if pos + RHDR.size + moved > len(raw):
                break                                   # torn by the kill
            out.append((r, t0, t1, off, n, np.frombuffer(raw, np.uint8, moved, pos + RHDR.size).copy()))
            pos += RHDR.size + moved
    return out


def check_reads(cfg: dict, init: bytes, writes: list[Write], reads) -> tuple[int, int, str | None]:
    """Stale reads of any range: (reads with a byte older than allowed or short before the
    acknowledged end, such bytes, first message)."""
    seed = cfg["prog_seed"]
    state = np.zeros(END, np.uint8)
    state[:len(init)] = np.frombuffer(init, np.uint8)
    size = len(init)
    acked = sorted((w for w in writes if w.td is not None), key=lambda w: w.td)
    i = 0
    bad_reads = bad_bytes = 0
    first = None
    for r, t0, t1, off, n, got in sorted(reads, key=lambda x: x[1]):
        while i < len(acked) and acked[i].td < t0:
            for a, m in acked[i].pieces:
                state[a:a + m] = acked[i].data(seed, a, a + m)
                size = max(size, a + m)
            i += 1
        moved = len(got)
        short = max(0, min(off + n, size) - (off + moved))
        ok = got == state[off:off + moved]
        if ok.all() and not short:
            continue
        for w in writes:     # in flight during the read: begun before it ended, not done before it began
            if w.tb < t1 and (w.td is None or w.td >= t0):
                for a, m in w.pieces:
                    s, e = max(off, a), min(off + moved, a + m)
                    if s < e:
                        ok[s - off:e - off] |= got[s - off:e - off] == w.data(seed, s, e)
                    if a + m > off + moved and a < off + n:
                        short = 0          # the file's end may be that of a write in flight
        nb = int((~ok).sum()) + short
        if nb:
            bad_reads += 1
            bad_bytes += nb
            if first is None:
                x = off + int(np.flatnonzero(~ok)[0]) if (~ok).any() else off + moved
                first = (f"rank {r} read [{off}, {off + n}) returned {nb} stale bytes" +
                         (f" ({short} missing before the acknowledged end {size})" if short else "") +
                         f", first at offset {x}")
    return bad_reads, bad_bytes, first


# ---------------------------------------------------------------------- the store, read without it
def original_place(root: Path, x: int) -> tuple[Path, int]:
    """(data file, offset in it) of byte ``x`` of the original: stripe ``x // 64k`` on server
    ``stripe % 8`` at ``(stripe // 8) * 64k + x % 64k`` of ``<dir>/<id:08d>.0``."""
    fid = read_meta(root)[0]
    s = x // STRIPE
    return _cs.server_dirs(root)[s % NSERV] / f"{fid:08d}.0", (s // NSERV) * STRIPE + x % STRIPE


def read_original_raw(root: Path) -> tuple[np.ndarray, list[str]]:
    """The original's bytes straight from the servers' data files (bytes past a data file's
    end read as 0), and what is wrong with its metadata."""
    fid, layout, size, dirty = read_meta(root)
    problems = []
    if layout != {"type": "striped", "servers": [f"H{j}" for j in range(NSERV)], "stripes": [STRIPE] * NSERV}:
        problems.append(f"unexpected layout {layout}")
    if dirty:
        problems.append("the file's size is not final after the last close (dirty)")
    return _cs.striped_bytes(root, fid, size), problems


def dirty_bytes(root: Path) -> int:
    """Replica bytes DIRTY in the RMT journal (replayed by the independent reader)."""
    from pario.store import rmt_journal as rj

    model, _ = rj.replay(root / "rmt.log")
    return sum(n for o in model.originals() for _, _, n, _, f in model.entries(o) if f == rj.DIRTY)


def fsck_cli(root: Path) -> dict:
    """``pario store fsck --store ROOT --json`` (in this process); its report and exit code."""
    from pario.cli import main as cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli(["store", "fsck", "--store", str(root), "--json"])
    rep = json.loads(buf.getvalue())
    rep["rc"] = rc
    return rep


def served_bytes(root: Path) -> np.ndarray:
    from pario.store import Store

    with Store(str(root)) as st, st.open(NAME) as f:
        return np.frombuffer(bytes(f.read(0, int(f.size))), np.uint8).copy()


def _flip(path: Path, at: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        b = os.pread(fd, 1, at)
        os.pwrite(fd, bytes([(b[0] if b else 0) ^ 0xFF]), at)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- checking
def check(tdir: Path, cfg: dict, init: bytes, run: dict) -> dict:
    """Recovery and every check; returns metrics and ``problems`` (empty: the trial passed)."""
    root = tdir / "store"
    logs = parse_logs(cfg, tdir / "logs")
    problems = list(logs["problems"])
    writes = logs["writes"]
    killed = bool(run["killed"]) or (cfg["kill_at"] is not None and run["rc"] != 0)
    out = {"lost": 0, "fsck_ok": False, "writes": len(writes), "acked": sum(w.td is not None for w in writes),
           "acked_bytes": sum(n for w in writes if w.td is not None for _, n in w.pieces), "killed": killed,
           "last": logs["last"], "own_reads": logs["own_reads"], "stale_own": len(logs["stale"])}
    if run["hang"]:
        problems.append(f"the job did not end within {TIMEOUT:.0f} s")
    if run.get("left_alive"):
        problems.append(f"ranks {run['left_alive']} still alive 10 s after the job ended")
    text = (tdir / "mpiexec-logs.out").read_text(errors="replace")
    serve_lines = [ln for ln in text.splitlines() if ln.startswith("pario:")]
    out["serve_lines"] = serve_lines
    if not killed:
        if run["rc"] != 0:
            problems.append(f"the job failed (exit {run['rc']}): {text[-600:]!r}")
        if serve_lines:
            problems.append(f"the library said: {serve_lines[:3]}")
        if logs["errors"]:
            problems.append(f"MPI calls failed: {logs['errors'][:3]}")
        if len(logs["ended"]) != cfg["nprocs"]:
            problems.append(f"ranks {sorted(set(range(cfg['nprocs'])) - set(logs['ended']))} did not end")
        nw = sum(k in WRITE_KINDS for k in cfg["kinds"])
        for r in range(cfg["nprocs"]):
            if sum(w.rank == r for w in writes) != nw:
                problems.append(f"rank {r} logged {sum(w.rank == r for w in writes)} writes, the program has {nw}")
    elif logs["errors"] and not run["killed"] and cfg["kill_at"]:
        out["errors_after_kill"] = len(logs["errors"])
    # own stale reads (the program's own check)
    if logs["stale"] and not cfg["forget"]:
        problems.append(f"stale reads of own bytes: {logs['stale'][:3]}")
    if cfg["forget"]:
        out["forget_detected"] = bool(logs["stale"]) and all(r == 0 for r, _ in logs["stale"])
    # what the kill left in the RMT (the independent journal reader): replica bytes DIRTY
    out["dirty_left"] = dirty_bytes(root)
    rb = run.get("reboot")
    refused = bool(rb) and rb["unclean"]        # the C library must refuse the store after the reboot
    if "c_run" in run:
        c = run["c_run"]
        out["c_recovered"] = not refused
        out["dirty_left"] = run["dirty_before_c"]
        ctext = (tdir / "mpiexec-logs-open.out").read_text(errors="replace")
        said = [ln for ln in ctext.splitlines() if ln.startswith("pario:")]
        if refused:
            out["c_refused"] = True
            if c["rc"] != 0 or c["hang"] or len(said) != 1 or "rebooted" not in said[0]:
                problems.append(f"the re-run after the reboot was not refused with one line (exit {c['rc']}): "
                                f"{ctext[-600:]!r}")
            if _cs.journal_header(root)["verify"] != 1:
                problems.append("the journal's verify flag is not set after the refused re-run")
        elif c["rc"] != 0 or c["hang"] or said:
            problems.append(f"the re-run that recovers in C failed (exit {c['rc']}): {ctext[-600:]!r}")
        if "c_kill" in run:
            k = run["c_kill"]
            out["c_killed"] = bool(k["killed"])
            if k["hang"] or k.get("left_alive"):
                problems.append("the killed recovery re-run hung")
            if not k["killed"] and k["rc"] != 0:
                problems.append(f"the recovery re-run failed without a kill (exit {k['rc']})")
        left = dirty_bytes(root)
        if refused and left != run["dirty_before_c"]:
            problems.append(f"the refused re-run moved DIRTY bytes ({run['dirty_before_c']} before, {left} after)")
        elif left and not refused:
            problems.append(f"{left} replica bytes still DIRTY after the C library's recovery and last close")
    if rb and rb["unclean"] and rb.get("kill"):      # a first recovery killed 0-30 ms into its open
        rb["first"] = _cs.killed_recovery(root, rb["boot"], rb["delay"], shared=True)
        rb["after_first"] = _cs.journal_header(root)
    # recovery: pario store fsck (the first opener recovers), then the bytes through the store
    ref, size, inflight = expected(cfg, init, writes)
    out["inflight"] = len(inflight)
    rep = fsck_cli(root)
    out["fsck_ok"] = rep["rc"] == 0 and rep["ok"] and rep["unclean"] == 0
    if not out["fsck_ok"]:
        problems.append(f"pario store fsck (exit {rep['rc']}, {rep['unclean']} unclean): {rep['problems'][:4]}")
    if rb:
        ver = rep.get("verification")
        out["verified"] = isinstance(ver, dict)
        problems += _cs.reboot_checks(rb["boot"], rb["before"], rb.get("after_first"), out["verified"],
                                      len(ver["differed"]) if out["verified"] else 0, root)
    got = served_bytes(root)
    lost, msg = compare(cfg, got, ref, size, inflight)
    out["lost"] = lost
    if msg:
        problems.append(f"read through the store after recovery: {msg}")
    raw, p = read_original_raw(root)
    problems += p
    if not np.array_equal(raw, got):
        m = min(len(raw), len(got))
        d = np.flatnonzero(raw[:m] != got[:m])
        problems.append(f"the original's data files differ from what the store serves (size {len(raw)} vs {len(got)}, "
                        f"{len(d)} bytes differ{', first at ' + str(int(d[0])) if len(d) else ''})")
    # reads of any range
    reads = parse_reads(tdir / "logs", cfg["nprocs"])
    bad_reads, _, msg = check_reads(cfg, init, writes, reads)
    out.update(other_reads=len(reads), stale_other=bad_reads)
    if msg:
        problems.append(f"stale read during the run: {msg} ({bad_reads} of {len(reads)} reads)")
    if cfg["control"]:
        out["controls"] = controls(tdir, cfg, init, writes, reads, got, ref, size, inflight)
        for k, v in out["controls"].items():
            if v is False:
                problems.append(f"negative control not detected: {k}")
    out["problems"] = problems
    out["got"] = got
    return out


def controls(tdir, cfg, init, writes, reads, got, ref, size, inflight) -> dict:
    """Negative controls on a copy of the (recovered, closed) store: True detected, False not,
    None no candidate."""
    rng = random.Random(cfg["control_seed"])
    res = {}
    covered = np.zeros(len(got), bool)
    for ext in cfg["replicas"].values():
        for a, n, _ in ext:
            covered[a:a + n] = True
    moving = np.zeros(len(got), bool)
    for w in inflight:
        for a, n in w.pieces:
            moving[a:a + n] = True
    acked = np.zeros(len(got), bool)
    for w in writes:
        if w.td is not None:
            for a, n in w.pieces:
                acked[a:a + n] = True
    ok = ~moving
    # 1. an acknowledged byte outside the replicas, flipped in the original's data file
    cand = np.flatnonzero(ok & ~covered & acked)
    if not len(cand):
        cand = np.flatnonzero(ok & ~covered)
    ctl = tdir / "store-control"
    if len(cand):
        shutil.copytree(tdir / "store", ctl)
        x = int(cand[rng.randrange(len(cand))])
        _flip(*original_place(ctl, x))
        lost, _ = compare(cfg, served_bytes(ctl), ref, size, inflight)
        res["an acknowledged byte flipped in the original"] = lost == 1
        shutil.rmtree(ctl)
    else:
        res["an acknowledged byte flipped in the original"] = None
    # 2. a replicated byte flipped in the original's data file: fsck compares CLEAN replica
    #    entries with the original (the bytes the RMT says a replica covers, inside the file)
    from pario.store import Store

    clean = np.zeros(len(got), bool)
    with Store(str(tdir / "store")) as st:
        for nm in cfg["replicas"]:
            for a, n in st.rmt.covered(f".replica/{NAME}/{nm}"):
                clean[a:a + n] = True
    cand = np.flatnonzero(clean[:len(got)] & covered)
    if len(cand):
        shutil.copytree(tdir / "store", ctl)
        x = int(cand[rng.randrange(len(cand))])
        _flip(*original_place(ctl, x))
        rep = fsck_cli(ctl)
        res["a replicated byte flipped in the original (fsck)"] = rep["rc"] != 0 and not rep["ok"]
        shutil.rmtree(ctl)
    else:
        res["a replicated byte flipped in the original (fsck)"] = None
    # 3. a logged read of another rank's byte set to its value before the last acknowledged write
    seed = cfg["prog_seed"]
    order = list(range(len(reads)))
    rng.shuffle(order)
    done = None
    for k in order:
        r, t0, t1, off, n, data = reads[k]
        before = [w for w in writes if w.td is not None and w.td < t0 and w.rank != r
                  and any(a < off + len(data) and a + m > off for a, m in w.pieces)]
        for w in sorted(before, key=lambda w: -w.td):
            for a, m in w.pieces:
                s, e = max(off, a), min(off + len(data), a + m)
                for x in range(s, e):
                    # its value before w: the last earlier acknowledged write of it, else the initial byte
                    old = int(init[x]) if x < len(init) else 0
                    for v in sorted((v for v in writes if v.td is not None and v.td < w.td), key=lambda v: v.td):
                        if any(c <= x < c + q for c, q in v.pieces):
                            old = int(v.data(seed, x, x + 1)[0])
                    live = [v for v in writes if v.tb < t1 and (v.td is None or v.td >= t0)
                            and any(c <= x < c + q for c, q in v.pieces)]
                    if old != int(data[x - off]) and not live:
                        bad = list(reads)
                        d2 = data.copy()
                        d2[x - off] = old
                        bad[k] = (r, t0, t1, off, n, d2)
                        nb = check_reads(cfg, init, writes, bad)[0]
                        done = nb >= 1
                        break
                if done is not None:
                    break
            if done is not None:
                break
        if done is not None:
            break
    res["a read of another rank's byte made stale"] = done
    return res


# ---------------------------------------------------------------------- trials
def where(cfg: dict, res: dict) -> str:
    """What the kill interrupted: the victim's state from its last log record (whole job: the
    first of :data:`INTERRUPTED` any rank was in)."""
    if not res.get("killed"):
        return "ended before the kill" if cfg["mode"] != "no-kill" else "-"
    if cfg["mode"] == "whole-job":
        return min(res["last"].values(), key=INTERRUPTED.index)
    w = res["last"].get(cfg["victim"], "in the open")
    return "inside a write" if w == "in a write" and cfg["mode"] == "in-call" else w


def run_trial(base: Path, mode: str, tseed: int, lib: Path, exe: Path, keep: bool = False,
              carry: tuple | None = None, **overrides) -> dict:
    """One trial; returns its metrics with ``problems`` (empty: passed).  ``carry``: (store dir,
    bytes, replicas) of the previous trial to reuse.  The trial's directory is removed when it
    passed (unless ``keep``); a passed trial's store is returned in ``res["carry"]``."""
    prev = {"replicas": carry[2]} if carry else None
    cfg = make_config(mode, tseed, prev)
    cfg.update(overrides)
    tdir = Path(base) / f"{mode}-{tseed}"
    if tdir.exists():
        shutil.rmtree(tdir)
    tdir.mkdir(parents=True)
    t0 = time.monotonic()
    res = {"mode": mode, "seed": tseed, "problems": [], "cfg": cfg}
    try:
        init = setup(tdir, cfg, *(carry[:2] if carry else (None, None)))
        run = run_job(cfg, tdir, lib, exe)
        res["run"] = run
        boot = None
        if REBOOT:       # from here on, another boot
            rb = run["reboot"] = res["reboot"] = _cs.reboot_config(tseed)
            rb["before"] = _cs.journal_header(tdir / "store")
            rb["unclean"] = rb["before"]["clean"] == 0
            boot = rb["boot"]
            os.environ["PARIO_BOOT_ID"] = boot
        try:
            if cfg["c_recovery"] and (run["killed"] or (cfg["kill_at"] and run["rc"] != 0)):
                # the program again, opening and closing the file only: the C library's first
                # opener recovers the crashed store, its last close flushes (--reboot: refuses it)
                run["dirty_before_c"] = dirty_bytes(tdir / "store")
                if cfg["c_recovery_kill"]:      # first a re-run with one rank killed in the open/recovery/close
                    kcfg = dict(cfg, mode="one-rank", kill_op=0, kill_delay=cfg["c_recovery_delay"] / 2, kill_at=None,
                                forget=None)
                    run["c_kill"] = run_job(kcfg, tdir, lib, exe, logs="logs-open-killed", config="config-open.txt",
                                            boot=boot)
                run["c_run"] = run_job(cfg, tdir, lib, exe, logs="logs-open", config="config-open.txt", kill=False,
                                       boot=boot)
            out = check(tdir, cfg, init, run)
        finally:
            os.environ.pop("PARIO_BOOT_ID", None)
        res["problems"] += out.pop("problems")
        got = out.pop("got")
        res.update(out)
        res["where"] = where(cfg, res)
        if cfg["kill_at"] and "what" not in res:
            res["kill_kind"] = cfg["kill_at"].split()[1]
        if not res["problems"]:
            res["carry"] = (tdir / "store", got.tobytes(), cfg["replicas"])
    except Exception as exc:  # noqa: BLE001 -- the harness or the store raised: a failed trial, kept for analysis
        where_ = traceback.format_exc(limit=-3).strip().splitlines()[-3:]
        res["problems"].append(f"{type(exc).__name__}: {exc} {where_}")
    res["seconds"] = time.monotonic() - t0
    if not res["problems"] and not keep:
        for sub in tdir.iterdir():
            if sub.name != "store":
                shutil.rmtree(sub) if sub.is_dir() else sub.unlink()
    return res


class Tally(_cs.TallyBase):
    def __init__(self, mode: str):
        super().__init__(mode)
        self.lost = self.stale_own = self.stale_other = self.own_reads = self.other_reads = self.fsck_ok = 0
        self.acked = self.acked_bytes = self.inflight = self.reused = self.procs = self.dirty = 0
        self.c_rec = self.c_rec_dirty = self.c_rec_killed = 0
        self.rb_unclean = self.rb_refused = self.rb_verified = self.rb_killed = 0
        self.ctl = defaultdict(lambda: [0, 0, 0])     # detected, tried, no candidate
        self.forget = [0, 0]
        self.where: dict[str, int] = defaultdict(int)

    def add(self, r: dict) -> None:
        super().add(r)
        self.lost += r.get("lost", 0)
        self.stale_own += 0 if r["cfg"]["forget"] else r.get("stale_own", 0)
        self.stale_other += r.get("stale_other", 0)
        self.own_reads += r.get("own_reads", 0)
        self.other_reads += r.get("other_reads", 0)
        self.fsck_ok += bool(r.get("fsck_ok"))
        self.acked += r.get("acked", 0)
        self.acked_bytes += r.get("acked_bytes", 0)
        self.inflight += r.get("inflight", 0)
        self.reused += bool(r["cfg"]["reused"])
        self.dirty += bool(r.get("dirty_left"))
        self.c_rec += bool(r.get("c_recovered"))
        self.c_rec_dirty += bool(r.get("c_recovered")) and bool(r.get("dirty_left"))
        self.c_rec_killed += bool(r.get("c_killed"))
        rb = r.get("reboot")
        if rb:
            self.rb_unclean += bool(rb.get("unclean"))
            self.rb_refused += bool(r.get("c_refused"))
            self.rb_verified += bool(r.get("verified"))
            self.rb_killed += rb.get("first") == "killed"
        self.procs += r["cfg"]["nprocs"]
        for k, v in (r.get("controls") or {}).items():
            c = self.ctl[k]
            if v is None:
                c[2] += 1
            else:
                c[1] += 1
                c[0] += bool(v)
        if r["cfg"]["forget"]:
            self.forget[1] += 1
            self.forget[0] += bool(r.get("forget_detected"))
        w = r.get("where")
        if w and w != "-":
            self.where[w] += 1

    def line(self) -> str:
        s = (f"{self.mode}: {self.n} trials ({self.procs} ranks, {self.reused} on a reused store), {self.passed} passed, "
             f"{len(self.fails)} failed; lost acknowledged bytes {self.lost} (of {self.acked} acknowledged writes, "
             f"{self.acked_bytes} bytes; {self.inflight} writes in flight), stale reads {self.stale_own + self.stale_other} "
             f"({self.own_reads} reads of own bytes and {self.other_reads} of any range checked), "
             f"fsck clean {self.fsck_ok}/{self.n} ({self.dirty} recoveries with DIRTY replica bytes left; "
             f"{self.c_rec} recovered by the C library first, {self.c_rec_dirty} of them with DIRTY bytes, "
             f"{self.c_rec_killed} after a recovery run killed itself)")
        ctl = [f"{name} {d}/{t}" + (f" ({nc} without a candidate)" if nc else "")
               for name, (d, t, nc) in sorted(self.ctl.items())]
        if self.forget[1]:
            ctl.append(f"a forgotten write reported stale {self.forget[0]}/{self.forget[1]}")
        if ctl:
            s += "; negative controls detected: " + ", ".join(ctl)
        if self.where:
            s += "; kills: " + ", ".join(f"{k} {v}" for k, v in sorted(self.where.items(), key=lambda kv: -kv[1]))
        if self.rb_unclean or self.rb_verified:
            s += (f"; reboot: {self.rb_unclean} left unclean, {self.rb_refused} re-runs refused by the C library, "
                  f"{self.rb_verified} verified byte for byte by fsck, {self.rb_killed} after a recovery killed midway")
        return s + f"; {self.seconds:.0f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", default="all", help="all | one of: " + ", ".join(MODES))
    ap.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    ap.add_argument("--trial-seed", type=int, default=None, help="run the one trial of this seed (with --mode MODE)")
    ap.add_argument("--keep", action="store_true", help="keep every trial's directory")
    ap.add_argument("--lib", default=None, help="preload this library (default: src/pario/native/libpario_trace.so, "
                                                "built when stale), e.g. a deliberately broken one")
    ap.add_argument("--coord", default="host", metavar="MEMBER",
                    help="every trial's store made with this coordination member (host, pfs; docs/store.md)")
    ap.add_argument("--reboot", action="store_true",
                    help="everything after the kill in another boot (PARIO_BOOT_ID): the power-loss verification")
    a = ap.parse_args(argv)
    global COORD
    COORD = a.coord
    if a.reboot:
        global REBOOT
        REBOOT = True
    modes = MODES if a.mode == "all" else (a.mode,)
    if any(m not in MODES for m in modes):
        ap.error(f"--mode {a.mode}: unknown (all, {', '.join(MODES)})")
    import tempfile

    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-serve-kill-"))
    base.mkdir(parents=True, exist_ok=True)
    lib, exe = build(base, Path(a.lib).resolve() if a.lib else None)
    cycle = CYCLE if a.mode == "all" else modes
    plan = ([(modes[0], a.trial_seed)] if a.trial_seed is not None
            else [(cycle[t % len(cycle)], a.seed * 1_000_000 + t) for t in range(a.trials)])
    carry = [None]     # the previous trial's store (and its bytes, replicas), for a reuse

    def run_one(mode: str, ts: int):
        prev = carry[0]
        reuse = prev is not None and random.Random(ts ^ 0x5EED).random() < REUSE
        if prev is not None and not reuse and not a.keep:
            shutil.rmtree(prev[0].parent, ignore_errors=True)
        r = run_trial(base, mode, ts, lib, exe, keep=a.keep, carry=prev if reuse else None)
        if reuse and not a.keep:
            shutil.rmtree(prev[0].parent, ignore_errors=True)
        carry[0] = r.pop("carry", None)
        return r, " (reused store)" if reuse else ""

    rc = _cs.drive(plan, run_one, {m: Tally(m) for m in modes}, base,
                   "serve kill stress" + (" (recovery after a reboot)" if a.reboot else ""), a.seed,
                   "stress/serve_kill.py" + (" --reboot" if a.reboot else ""))
    if carry[0] is not None and not a.keep:
        shutil.rmtree(carry[0][0].parent, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
