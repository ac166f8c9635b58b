"""Embedded striped store with the CEDA data path and hybrid replication.

The data path is the store engine in C (``src/pario/native/store``, bound as
``pario.native._rmt``: layouts, data planes, sizes, metadata, the RMT, redirection, flush,
lazy synchronisation), the same code that serves MPI programs; these modules are its Python
face and what only Python does:

- :mod:`pario.store.base`       – a store's files and their data through the engine (aiori-like)
- :mod:`pario.store.planes`     – the registry of the data planes (:data:`PLANES`)
- :mod:`pario.store.local`      – the ``local`` plane: a directory per server, a data file per server
- :mod:`pario.store.rados`      – the ``rados`` plane: objects in a Ceph cluster's pools
- :mod:`pario.store.meta`       – the file metadata (the engine's), the schema for repairs
- :mod:`pario.store.catalog`    – the namespace's own record, for rebuilding lost metadata
- :mod:`pario.store.rmt`        – the replica mapping table (CEDA seed 000 §4.5, §5.1; the engine's core)
- :mod:`pario.store.redirect`   – an open file: the redirector and hybrid routing (seed 000 §4.6, seed 002 §5)
- :mod:`pario.store.replicator` – plan → replica copies, resumable, in the background
- :mod:`pario.store.fsck`       – consistency check
- :mod:`pario.store.root`       – store directory, open/recover, namespace

Usage::

    init_store("st", "ceda-hdd8")
    with Store("st") as st:
        st.create("f", "fixed:64k")
        with st.open("f") as f:
            f.write(0, b"...")
            f.read(0, 3)
"""

from .base import Backend, FileStat, Handle
from .planes import PLANES
from .rmt import CLEAN, DIRTY, RMT, STALE
from .root import Store, init_store, open_store, replica_name

__all__ = ["PLANES", "Backend", "FileStat", "Handle", "RMT", "CLEAN", "DIRTY", "STALE", "Store", "init_store",
           "open_store", "replica_name"]
