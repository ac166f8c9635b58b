"""Embedded striped store with the CEDA data path and hybrid replication.

- :mod:`pario.store.base`       – the backend interface (aiori-like)
- :mod:`pario.store.local`      – ``local`` backend: a directory per server, a data file per server
- :mod:`pario.store.pieces`     – cutting requests into single-server pieces (exact mapping)
- :mod:`pario.store.meta`       – crash-safe file metadata
- :mod:`pario.store.rmt`        – the replica mapping table (CEDA seed 000 §4.5, §5.1)
- :mod:`pario.store.redirect`   – the redirector and hybrid routing (seed 000 §4.6, seed 002 §5)
- :mod:`pario.store.hybrid`     – per-request cost and the lazy synchronisation thread
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
from .rmt import CLEAN, DIRTY, RMT, STALE
from .root import Store, init_store, open_store, replica_name

__all__ = ["Backend", "FileStat", "Handle", "RMT", "CLEAN", "DIRTY", "STALE", "Store", "init_store",
           "open_store", "replica_name"]
