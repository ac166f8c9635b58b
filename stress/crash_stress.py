"""Crash stress: SIGKILL a writer / replicator / hybrid writer at random points, then check.

    python stress/crash_stress.py [--trials 1000] [--seed 0] [--dir /tmp/x]

Each trial builds a store with a 2 MiB file (CEDA partial replicas or hybrid full replicas),
starts a worker subprocess that writes (logging each write as begun, then done) or
replicates, kills it with SIGKILL after a random delay, reopens the store (recovery
finishes any flush) and checks: fsck clean, every byte equals the reference built from the
acknowledged writes, or — inside the one write in flight — the in-flight data; a replicator
re-run completes.  The test suite runs ``run_trial`` ≥ 20 times (tests/test_crash.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SIZE = 2 << 20
MODES = ("writer", "replicator", "hybrid")


def data_for(seed: int, n: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def ceda_specs(system):
    from pario.layout import ExtentMap
    from pario.store.replicator import ReplicaSpec

    # three replicated extents (one spans stripe boundaries) on two servers, contiguous per server
    off = np.array([70_000, 600_000, 1_500_000])
    ln = np.array([200_000, 150_000, 400_000])
    return [ReplicaSpec("f", "r1", ExtentMap(off, ln, np.array([0, 1, 0]), np.array([0, 0, 200_000]),
                                             np.array([1, 1, 1])))]


def hybrid_specs(system):
    from pario.layout import Grouped, Striped
    from pario.store.replicator import ReplicaSpec

    return [ReplicaSpec("f", "h1", Striped.fixed(1 << 20, range(system.n)), "cheapest"),
            ReplicaSpec("f", "h2", Grouped(((0, 1, 2, 3), (4, 5, 6, 7)), 32 << 10), "cheapest")]


def setup(root: Path, mode: str, seed: int) -> bytes:
    """Store with file ``f`` (2 MiB of seeded bytes) and, except for mode 'replicator', its replicas."""
    from pario.store import Store, init_store
    from pario.store.replicator import Replicator

    if root.exists():
        shutil.rmtree(root)
    init_store(root, "ceda-hdd8")
    init = data_for(seed, SIZE)
    with Store(root) as st:
        st.create("f", "fixed:64k")
        f = st.open("f")
        f.write(0, init)
        f.close()
        if mode == "writer":
            Replicator(st, ceda_specs(st.system)).run()
        elif mode == "hybrid":
            Replicator(st, hybrid_specs(st.system)).run()
    return init


def worker(root: str, mode: str, seed: int, log: str) -> None:
    """Runs until killed: writes (logging begin/done) or replicates in small chunks."""
    from pario.store import Store
    from pario.store.replicator import Replicator

    st = Store(root)
    rng = random.Random(seed)
    with open(log, "a", buffering=1) as lg:
        lg.write(json.dumps({"ready": 1}) + "\n")
        if mode == "replicator":
            specs = ceda_specs(st.system) + hybrid_specs(st.system)[:1]
            Replicator(st, specs, chunk=64 << 10, idle=0).run()
            lg.write(json.dumps({"finished": 1}) + "\n")
            time.sleep(60)
            return
        f = st.open("f")
        k = 0
        while True:
            k += 1
            if rng.random() < 0.1:
                f.flush()
                continue
            off = rng.randrange(0, SIZE + 100_000)
            n = rng.randrange(1, 150_000)
            s = seed * 1_000_003 + k
            lg.write(json.dumps({"op": "w", "off": off, "n": n, "seed": s, "state": "begin"}) + "\n")
            f.write(off, data_for(s, n))
            lg.write(json.dumps({"op": "w", "k": k, "state": "done"}) + "\n")


def check(root: Path, mode: str, init: bytes, log: Path) -> dict:
    """Reopen (recovery), fsck, compare bytes with the reference; raise AssertionError if wrong."""
    from pario.store import Store
    from pario.store.fsck import fsck
    from pario.store.replicator import Replicator

    ref = bytearray(init)
    inflight = None
    for line in log.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # torn last line
            continue
        if rec.get("state") == "begin":
            inflight = rec
        elif rec.get("state") == "done":
            o, n = inflight["off"], inflight["n"]
            if o + n > len(ref):
                ref.extend(bytes(o + n - len(ref)))
            ref[o:o + n] = data_for(inflight["seed"], n)
            inflight = None
    with Store(root) as st:
        rep = fsck(st)
        assert rep["ok"], rep["problems"]
        assert rep["unclean"] == 0, "recovery left unclean RMT entries"
        f = st.open("f")
        got = bytearray(f.read(0, f.size))
        f.close()
        alt = None
        if inflight is not None:
            o, n = inflight["off"], inflight["n"]
            alt = data_for(inflight["seed"], n)
            assert len(ref) <= len(got) <= max(len(ref), o + n), (len(got), len(ref))
            if len(got) > len(ref):
                ref.extend(bytes(len(got) - len(ref)))
            seg = np.frombuffer(bytes(got[o:o + n]), np.uint8)
            okseg = (seg == np.frombuffer(bytes(ref[o:o + n]), np.uint8)) | (seg == np.frombuffer(alt, np.uint8)[:len(seg)])
            assert okseg.all(), f"stale/lost byte inside the in-flight write at {o + int(np.flatnonzero(~okseg)[0])}"
            got[o:o + n] = ref[o:o + n]
        assert len(got) == len(ref), (len(got), len(ref))
        if got != ref:
            i = int(np.flatnonzero(np.frombuffer(bytes(got), np.uint8) != np.frombuffer(bytes(ref), np.uint8))[0])
            raise AssertionError(f"byte {i} lost or stale after the crash")
        if mode == "replicator":  # a re-run finishes the job
            r = Replicator(st, ceda_specs(st.system) + hybrid_specs(st.system)[:1]).run()
            rep = fsck(st)
            assert rep["ok"], rep["problems"]
            for s in r.specs:
                cov = sum(n for _, n in st.rmt.covered(s.r_file))
                assert cov == int(s.extents(SIZE)[1].sum()), (s.name, cov)
            f = st.open("f")
            assert f.read(0, f.size) == bytes(ref)
            f.close()
    return {"mode": mode, "inflight": inflight is not None}


def run_trial(base: Path, trial: int, seed: int = 0, mode: str | None = None) -> dict:
    rng = random.Random(seed * 7919 + trial)
    mode = mode or MODES[trial % len(MODES)]
    root = base / f"t{trial}"
    init = setup(root, mode, seed + trial)
    log = base / f"t{trial}.log"
    log.write_text("")
    here = Path(__file__).resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(here.parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, str(here), "--worker", str(root), mode, str(seed + trial), str(log)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while '"ready"' not in log.read_text():
        if p.poll() is not None:
            raise RuntimeError(f"worker died: {p.stderr.read().decode()[-500:]}")
        if time.monotonic() - t0 > 30:
            p.kill()
            raise RuntimeError("worker did not start")
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.25))
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stderr.close()
    out = check(root, mode, init, log)
    shutil.rmtree(root)
    log.unlink()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--worker", nargs=4, metavar=("ROOT", "MODE", "SEED", "LOG"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.worker[0], a.worker[1], int(a.worker[2]), a.worker[3])
        return 0
    import tempfile

    base = Path(a.dir or tempfile.mkdtemp(prefix="pario-crash-"))
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    counts = {}
    for t in range(a.trials):
        r = run_trial(base, t, a.seed)
        counts[r["mode"]] = counts.get(r["mode"], 0) + 1
        if (t + 1) % 50 == 0:
            print(f"{t + 1} trials ok ({time.time() - t0:.0f} s) {counts}", flush=True)
    print(f"all {a.trials} crash trials passed: fsck clean, no byte lost, no stale byte ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
