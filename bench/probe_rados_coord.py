"""Probe of the RADOS mechanisms a ``rados`` coordination member would be built from
(docs/multinode.md, "rados"): measured against a running cluster, nothing of pario's store.

    python bench/probe_rados_coord.py CLUSTER_DIR POOL

1. cls_lock lease: a holder of an exclusive lock with duration D is SIGKILLed; the time until
   another client's lock_exclusive succeeds (the lease: "duration" of rados_lock_exclusive,
   https://docs.ceph.com/en/pacific/rados/api/librados/).
2. fencing by object version: after a takeover bumps the journal object's version, the dead
   holder's write operation asserting the version it last saw fails (rados_write_op_assert_version).
3. following: the cost of one stat (header read per request) and of a notify round trip
   (rados_notify2 waits for every watcher's ack).
4. libcephsqlite: the SQLite VFS "ceph" loaded into Python's sqlite3 (docs:
   https://docs.ceph.com/en/pacific/rados/api/libcephsqlite/): open, a transaction, a query.
"""
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import statistics
import sys
import time

import rados

CL, POOL = sys.argv[1], sys.argv[2]
NS = "probe-%d" % os.getpid()


def connect():
    c = rados.Rados(conffile=os.path.join(CL, "ceph.conf"))
    c.connect()
    io = c.open_ioctx(POOL)
    io.set_namespace(NS)
    return c, io


def holder(d, ready):
    c, io = connect()
    io.lock_exclusive("journal", "jl", "holder", duration=d)
    ready.set()
    time.sleep(3600)


def lease(d):
    ready = mp.Event()
    p = mp.Process(target=holder, args=(d, ready))
    p.start()
    ready.wait()
    c, io = connect()
    os.kill(p.pid, signal.SIGKILL)
    t0 = time.monotonic()
    p.join()
    while True:
        try:
            io.lock_exclusive("journal", "jl", "taker", duration=d)
            break
        except (rados.ObjectBusy, rados.ObjectExists):
            time.sleep(0.05)
    took = time.monotonic() - t0
    io.unlock("journal", "jl", "taker")
    c.shutdown()
    return took


def fencing():
    c, io = connect()
    io.write_full("journal", b"header")
    v = io.get_last_version()
    # a takeover: the new holder's first write bumps the version
    io.write("journal", b"taken", 0)
    op = io.create_write_op()
    op.assert_version(v)
    op.write(b"late", 100)
    try:
        io.operate_write_op(op, "journal")
        out = "late append SUCCEEDED (not fenced)"
    except rados.Error as e:
        out = "late append refused: %s errno %s" % (type(e).__name__, getattr(e, "errno", "?"))
    io.release_write_op(op)
    c.shutdown()
    return out


def follow(n=200):
    c, io = connect()
    io.write_full("journal", b"x" * 64)
    st = []
    for _ in range(n):
        t = time.perf_counter(); io.stat("journal"); st.append(time.perf_counter() - t)
    c2, io2 = connect()
    seen = []
    w = io2.watch("journal", lambda *a: seen.append(1))
    nt = []
    for _ in range(n):
        t = time.perf_counter(); io.notify("journal", "changed", timeout_ms=5000); nt.append(time.perf_counter() - t)
    w.close()
    c2.shutdown(); c.shutdown()
    return statistics.median(st) * 1e6, statistics.median(nt) * 1e6, len(seen)


def cephsqlite(n=50):
    con = sqlite3.connect(":memory:")
    con.enable_load_extension(True)
    con.load_extension("libcephsqlite.so")
    con.close()
    os.environ["CEPH_CONF"] = os.path.join(CL, "ceph.conf")
    uri = "file:///%s:%s/meta.db?vfs=ceph" % (POOL, NS)
    t = time.perf_counter()
    db = sqlite3.connect(uri, uri=True, isolation_level=None)
    db.execute("PRAGMA journal_mode = PERSIST")
    db.execute("CREATE TABLE IF NOT EXISTS files (id INTEGER PRIMARY KEY, name TEXT UNIQUE, size INTEGER)")
    t_open = time.perf_counter() - t
    tx = []
    for i in range(n):
        t = time.perf_counter()
        db.execute("BEGIN IMMEDIATE"); db.execute("INSERT INTO files (name, size) VALUES (?, ?)", ("f%d" % i, i)); db.execute("COMMIT")
        tx.append(time.perf_counter() - t)
    q = []
    for i in range(n):
        t = time.perf_counter(); db.execute("SELECT size FROM files WHERE name = ?", ("f%d" % i,)).fetchone(); q.append(time.perf_counter() - t)
    # a second connection (another client would be another process: same VFS locks)
    t = time.perf_counter()
    db2 = sqlite3.connect(uri, uri=True, isolation_level=None)
    rows = db2.execute("SELECT count(*) FROM files").fetchone()[0]
    t_open2 = time.perf_counter() - t
    db2.close(); db.close()
    return {"open_create_ms": t_open * 1e3, "txn_median_ms": statistics.median(tx) * 1e3,
            "select_median_ms": statistics.median(q) * 1e3, "second_open_select_ms": t_open2 * 1e3, "rows": rows}


if __name__ == "__main__":
    what = sys.argv[3:] or ["lease", "fencing", "follow", "cephsqlite"]
    res = {}
    if "lease" in what:
        for d in (2.0, 5.0):
            res["lease_%gs_takeover_s" % d] = [round(lease(d), 2) for _ in range(3)]
    if "fencing" in what:
        res["fencing"] = fencing()
    if "follow" in what:
        s, n, seen = follow()
        res["follow_stat_median_us"] = s
        res["follow_notify_median_us"] = n
        res["notifies_seen"] = seen
    if "cephsqlite" in what:
        try:
            res["cephsqlite"] = cephsqlite()
        except Exception as e:     # the probe reports, it does not decide
            res["cephsqlite"] = "unusable: %s: %s" % (type(e).__name__, e)
    print(json.dumps(res, indent=1))
