"""The OSDs' caches: measured and dropped before a timed run, so that its reads reach the
throttled devices.

An OSD keeps data in memory beside its device: BlueStore's buffer cache (the bytes of
recently read objects, and of written ones while they are being committed) and its onode
cache (object metadata), plus the OSD's object contexts.  The loop devices under the OSDs
use direct I/O (:mod:`pario.cluster.devices`), so the host's page cache holds none of their
data; the OSD's own caches do.  Right after ``pario replicate`` the buffer cache served part
of the new replica's reads (issue 27: device reads 76-158 where the replica had 228-273
extents), and a measured speed-up came out larger than the model's.  ``ceph tell osd.N cache
drop`` empties them (Ceph's admin command "Drop all OSD caches"); ``cache status`` counts
what they hold.  :func:`drop` is called before every timed run of ``pario run`` on a store in
a ``pario cluster``, of ``pario bench run`` and of ``bench/bench_ceph.py``.
"""

from __future__ import annotations

import json

from .. import ParioError
from .client import mon, session


def _osd(r, osd: int, prefix: str) -> dict:
    try:
        ret, out, err = r.osd_command(osd, json.dumps({"prefix": prefix, "format": "json"}), b"", timeout=60)
    except Exception as exc:  # rados.Error subclasses, a timed-out op included
        raise ParioError(f"ceph tell osd.{osd} {prefix}: {exc}") from None
    if ret != 0:
        raise ParioError(f"ceph tell osd.{osd} {prefix}: {(err or '').strip() or 'error ' + str(ret)}")
    text = out.decode(errors="replace").strip()
    return json.loads(text) if text else {}


def status(conf: str) -> dict[int, dict[str, int]]:
    """Per OSD id: what its caches hold (``bluestore_buffers``, ``bluestore_onode``,
    ``object_ctx``: entries, as ``ceph tell osd.N cache status`` counts them)."""
    with session(conf) as r:
        return {int(i): {k: int(v) for k, v in _osd(r, int(i), "cache status").items()} for i in mon(r, "osd ls")}


def drop(conf: str) -> dict[int, dict[str, int]]:
    """Empty every OSD's caches; returns what each held just before (:func:`status`)."""
    with session(conf) as r:
        held = {}
        for i in mon(r, "osd ls"):
            held[int(i)] = {k: int(v) for k, v in _osd(r, int(i), "cache status").items()}
            _osd(r, int(i), "cache drop")
        return held


def buffers(held: dict[int, dict[str, int]]) -> int:
    """The buffer-cache entries of every OSD together (the data a read could get from memory)."""
    return sum(v.get("bluestore_buffers", 0) for v in held.values())


def drop_for_store(store_root) -> dict[int, dict[str, int]] | None:
    """:func:`drop` for the cluster of a store on the ``rados`` plane whose cluster is a
    ``pario cluster`` (its ``cluster.json`` beside ``ceph.conf``); None for any other store
    (a site's cluster's caches are its operators' to drop)."""
    from pathlib import Path

    from ..store.root import read_config
    from .state import CONF_FILE, STATE_FILE

    cfg = read_config(store_root)
    if cfg.get("backend") != "rados" or not cfg.get("cluster"):
        return None
    d = Path(cfg["cluster"])
    if not (d / STATE_FILE).is_file() or not (d / CONF_FILE).is_file():
        return None
    return drop(str(d / CONF_FILE))
