"""The registry of the store's data planes (IOR's ``aiori_select``: one table, one file per plane).

A data plane is where a store's data files live (``store.json``'s ``"backend"``): its C half
moves the bytes (``src/pario/native/store/planes/``, one file per plane behind
``plane.h``), its Python half (a :class:`pario.store.base.Backend` subclass) configures a new
store, opens an existing one and lists, measures and removes data files.  :func:`init_store`
and :class:`~pario.store.root.Store` choose the plane only through :data:`PLANES`; a new
plane is its two files plus one line here and one in the C table.
"""

from __future__ import annotations

from ..registry import Registry

PLANES = Registry("data plane", {
    "local": "pario.store.local:LocalBackend",     # a directory per server (pario.store.local)
    "rados": "pario.store.rados:RadosBackend",     # a pool per server on Ceph (pario.store.rados)
})

__all__ = ["PLANES"]
