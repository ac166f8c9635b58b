"""``pario store …``: the embedded striped store (see docs/store.md).

    pario store init DIR --system P [--server NAME=PATH ...] [--coord host|pfs]
    pario store init DIR --backend rados --cluster CLUSTER_DIR [--system P] [--object-size SIZE] [--coord rados]
    pario store put SRC DST --store DIR --layout SPEC
    pario store get SRC DST --store DIR
    pario store ls --store DIR [--json]
    pario store rm NAME --store DIR
    pario store flush --store DIR
    pario store fsck --store DIR [--no-checksums] [--repair] [--json]
    pario store gc DIR [--dry-run] [--json]
"""

from __future__ import annotations

from rich.table import Table

from .. import ParioError
from ..units import format_size
from .common import console, print_json, size_arg


def register(sub) -> None:
    p = sub.add_parser("store", help="the striped store: init, put, get, ls, rm, flush, fsck, gc")
    s = p.add_subparsers(dest="store_cmd", metavar="ACTION")
    s.required = True

    i = s.add_parser("init", help="create a store for a system profile")
    i.add_argument("dir", metavar="DIR", help="a new or empty directory for the store")
    i.add_argument("--system", metavar="P",
                   help="built-in profile name or TOML file (rados: default the cluster's calibrated.toml, else its nominal.toml)")
    i.add_argument("--server", action="append", default=[], metavar="NAME=PATH",
                   help="put server NAME's directory at PATH (another mount); repeatable")
    i.add_argument("--backend", default="local", metavar="PLANE",   # a name of pario.store.PLANES
                   help="local: server directories (default); rados: one pool per server of a Ceph cluster")
    i.add_argument("--cluster", metavar="CLUSTER_DIR", help="rados: the 'pario cluster up' directory")
    i.add_argument("--object-size", type=size_arg, default=None, metavar="SIZE",
                   help="rados: bytes per RADOS object (default 4m)")
    i.add_argument("--coord", default="host", metavar="MEMBER",
                   help="how processes share the store: host (one machine, default) or pfs (nodes of a "
                        "parallel file system the store directory is on; docs/multinode.md) or rados "
                        "(with --backend rados: metadata, RMT journal and locks in RADOS, for clients of the "
                        "cluster on any node)")
    i.set_defaults(func=_init)

    def store_arg(q):
        q.add_argument("--store", required=True, metavar="DIR", help="store directory")
        q.add_argument("--direct", action="store_true", help="use O_DIRECT for data files")

    pu = s.add_parser("put", help="copy a local file into the store with a layout")
    pu.add_argument("src", metavar="SRC", help="local file to copy in (all or nothing)")
    pu.add_argument("dst", metavar="DST", help="name in the store")
    pu.add_argument("--layout", required=True, metavar="SPEC",
                    help="fixed:64K[@H0,..] | var:hdd=28K,ssd=100K | 2d:G:SIZE | FILE.json")
    store_arg(pu)
    pu.set_defaults(func=_put)

    g = s.add_parser("get", help="copy a store file out to a local file")
    g.add_argument("src", metavar="SRC", help="name in the store")
    g.add_argument("dst", metavar="DST", help="local file to write")
    store_arg(g)
    g.set_defaults(func=_get)

    ls = s.add_parser("ls", help="files: layout, size, per-server bytes, replicas")
    store_arg(ls)
    ls.add_argument("--json", action="store_true", help="print the listing as JSON")
    ls.set_defaults(func=_ls)

    rm = s.add_parser("rm", help="delete a file and its replicas")
    rm.add_argument("name", metavar="NAME", help="name in the store")
    store_arg(rm)
    rm.set_defaults(func=_rm)

    fl = s.add_parser("flush", help="write dirty replica data back and refresh stale replicas")
    store_arg(fl)
    fl.set_defaults(func=_flush)

    fk = s.add_parser("fsck", help="check metadata, RMT and replica checksums")
    store_arg(fk)
    fk.add_argument("--no-checksums", action="store_true", help="skip comparing replica bytes")
    fk.add_argument("--repair", action="store_true",
                    help="salvage a store whose metadata database or RMT journal is damaged (needs the store to "
                         "itself; the damaged files are kept aside; docs/store.md)")
    fk.add_argument("--json", action="store_true", help="print the report as JSON")
    fk.set_defaults(func=_fsck)

    gc = s.add_parser("gc", help="remove the server directories of stores that are gone (e.g. pario run's on a testbed)",
                      description="Below DIR (3 levels, no symbolic link followed): every server directory pario made "
                                  "outside a store's root (its marker .pario-server) whose store is gone — no "
                                  "store.json at the root it names, or another store there — is removed: its data "
                                  "files, the marker, and the directory when pario made it.  A directory holding "
                                  "anything else is kept and reported; directories without a marker are never touched.")
    gc.add_argument("dir", metavar="DIR", help="where to look, e.g. a testbed directory or a server's mount")
    gc.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    gc.add_argument("--json", action="store_true", help="print the report as JSON")
    gc.set_defaults(func=_gc)


def _open(args, exclusive: bool = False, unverified_ok: bool = False):
    """The store, shared with other processes (MPI ranks, a running ``pario replicate``)
    unless the command changes its structure (``rm``)."""
    from ..store import Store

    return Store(args.store, direct=getattr(args, "direct", False), shared=not exclusive,
                 unverified_ok=unverified_ok)


def _init(args) -> int:
    from ..store import init_store

    servers = {}
    for item in args.server:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise ParioError(f"--server {item!r}: expected NAME=PATH")
        servers[name] = path
    if args.system is None and args.backend == "local":
        raise ParioError("store init: --system is required (or --backend rados --cluster DIR)")
    root = init_store(args.dir, args.system, servers, backend=args.backend, cluster=args.cluster,
                      object_size=args.object_size, coord=args.coord)
    console.print(f"store {root} created")
    return 0


def _put(args) -> int:
    with _open(args) as st:
        n = st.put(args.src, args.dst, args.layout)
        from ..layout import describe

        console.print(f"{args.dst}: {format_size(n)} stored as {describe(st.stat(args.dst).layout, st.system)}")
    return 0


def _get(args) -> int:
    with _open(args) as st:
        n = st.get(args.src, args.dst)
    console.print(f"{args.dst}: {format_size(n)}")
    return 0


def _ls(args) -> int:
    from ..layout import describe

    with _open(args) as st:
        rows = []
        for name in st.files():
            s = st.stat(name)
            reps = st.rmt.replicas(name)
            rows.append({"name": name, "size": s.size, "layout": describe(s.layout, st.system),
                         "servers": {st.system.names[j]: int(b) for j, b in enumerate(s.server_bytes) if b},
                         "replicas": [{"name": r["name"], "mode": r["mode"], "route": r["route"],
                                       "layout": describe(st.stat(r["r_file"]).layout, st.system),
                                       "bytes": sum(n for _, n in st.rmt.covered(r["r_file"]))} for r in reps]})
        usage, free = st.backend.usage(), st.backend.free_space()
        if args.json:
            print_json({"store": str(st.root), "system": st.system.name, "files": rows,
                        "usage": dict(zip(st.system.names, usage.tolist())),
                        "free": dict(zip(st.system.names, free.tolist()))})
            return 0
        tab = Table("file", "size", "layout", "per-server bytes", "replicas")
        for r in rows:
            per = " ".join(f"{k}:{format_size(v)}" for k, v in r["servers"].items())
            rep = ", ".join(f"{x['name']} ({x['mode']}, {format_size(x['bytes'])})" for x in r["replicas"]) or "-"
            tab.add_row(r["name"], format_size(r["size"]), r["layout"], per, rep)
        console.print(tab)
        console.print("allocated: " + " ".join(f"{n}:{format_size(int(u))}" for n, u in zip(st.system.names, usage)))
    return 0


def _rm(args) -> int:
    with _open(args, exclusive=True) as st:
        st.delete(args.name)
    return 0


def _flush(args) -> int:
    with _open(args) as st:
        names = st.flush()
    console.print(f"flushed {len(names)} file(s)")
    return 0


def _fsck(args) -> int:
    from ..store.fsck import fsck

    if args.repair:
        from ..store.repair import repair

        done = repair(args.store)
        rep = done["fsck"]
        if not args.json:
            m, r = done["meta"], done["rmt"]
            if m is None and r is None:
                console.print("nothing to repair: the metadata database and the RMT journal are readable")
            if m is not None:
                console.print(f"metadata salvaged: {m['kept_files']} file(s) kept, {m['rebuilt_files']} rebuilt from "
                              f"the store's catalog, {m['lost_files']} lost; new ids start at {m['next_id']}"
                              + (f"; the damaged database is kept as {m['damaged_copy']}" if m["damaged_copy"] else ""))
            if r is not None:
                console.print(f"RMT journal restarted empty: {r['dropped_replica_files']} replica file(s) dropped "
                              f"(writes only in dirty replicas are lost); the damaged journal is kept as "
                              f"{r['damaged_copy']}")
        else:
            print_json({**done, "fsck": rep})
            return 0 if rep["ok"] else 1
    else:
        with _open(args, unverified_ok=True) as st:
            rep = fsck(st, checksums=not args.no_checksums)
    if args.json:
        print_json(rep)
    else:
        for p in rep["problems"]:
            console.print(f"[red]problem[/red]: {p}")
        ver = rep.get("verification")
        if isinstance(ver, dict):
            console.print(f"verified after an unclean end in another boot: {len(ver['differed'])} replicated "
                          "range(s) differed from their originals (the copy reads were served from was kept)")
        console.print(f"{'clean' if rep['ok'] else 'NOT clean'}: {rep['files']} files, {rep['entries']} RMT entries "
                      f"({rep['unclean']} pending sync), {format_size(rep['checked_bytes'])} of replicas checked")
    return 0 if rep["ok"] else 1


def _gc(args) -> int:
    from ..store.gc import collect

    rep = collect(args.dir, dry_run=args.dry_run)
    if args.json:
        print_json(rep)
        return 0
    verb = "would remove" if rep["dry_run"] else "removed"
    for r in rep["removed"]:
        console.print(f"{verb} {r['dir']} (server {r['server']} of the store at {r['store']}, gone): "
                      f"{r['data_files']} data file(s), {format_size(r['bytes'])}"
                      + ("" if r["dir_removed"] else "; the directory itself stays (pario did not make it)")
                      + (f"; {r['note']}" if r.get("note") else ""), markup=False, highlight=False)
    for r in rep["kept"]:
        console.print(f"kept {r['dir']}: {r['why']}", markup=False, highlight=False)
    total = sum(r["bytes"] for r in rep["removed"])
    n = len(rep["removed"])
    console.print(f"{n} director{'y' if n == 1 else 'ies'} {'to remove' if rep['dry_run'] else 'removed'}, "
                  f"{format_size(total)} of data files; {len(rep['kept'])} kept")
    return 0
