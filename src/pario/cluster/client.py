"""A RADOS client of the cluster (Debian's ``rados`` module): monitor commands, pool I/O.

Every connection reads ``DIR/ceph.conf`` (whose ``[client]`` section sets the operation
timeouts, :mod:`pario.cluster.conf`) and sets them again explicitly, so that no call waits
forever on a down OSD or monitor: it fails with a ParioError naming the command.
"""

from __future__ import annotations

import contextlib
import json

from .. import ParioError
from .conf import CLIENT_MON_TIMEOUT, CLIENT_OP_TIMEOUT

INSTALL_HINT = ("run scripts/setup.sh ceph (as root) in a pario checkout; a pip-installed pario: the same Debian "
                "packages and Debian's rados module linked into this environment (docs/cluster.md)")


def rados_module():
    """Debian's ``rados`` module, or a ParioError naming the set-up command."""
    try:
        import rados
    except ImportError:
        raise ParioError(f"Ceph's Python module 'rados' (Debian's python3-rados) is not importable here; {INSTALL_HINT}"
                         ) from None
    return rados


def connect(conf: str, *, timeout: int = CLIENT_MON_TIMEOUT, op_timeout: int = CLIENT_OP_TIMEOUT):
    """A connected ``rados.Rados`` for the cluster of ``conf`` (call ``shutdown()`` when done)."""
    rados = rados_module()
    r = rados.Rados(conffile=conf, conf={"rados_osd_op_timeout": str(op_timeout),
                                         "rados_mon_op_timeout": str(timeout),
                                         "client_mount_timeout": str(timeout)})
    try:
        r.connect(timeout=timeout)
    except rados.Error as exc:
        with contextlib.suppress(Exception):
            r.shutdown()
        raise ParioError(f"cannot connect to the cluster of {conf}: {exc}") from None
    return r


@contextlib.contextmanager
def session(conf: str, **kw):
    """``with session(conf) as r:`` a connection that is shut down afterwards."""
    r = connect(conf, **kw)
    try:
        yield r
    finally:
        r.shutdown()


def mon(r, prefix: str, *, check: bool = True, inbuf: bytes = b"", **args):
    """Run the monitor command ``prefix`` with ``args``; its JSON output (or text if not JSON).

    With ``check`` a non-zero return is a ParioError carrying Ceph's message."""
    cmd = {"prefix": prefix, "format": "json", **args}
    try:
        ret, out, err = r.mon_command(json.dumps(cmd), inbuf)
    except Exception as exc:  # rados.Error subclasses, a timed-out op included
        raise ParioError(f"ceph {prefix}: {exc}") from None
    if ret != 0:
        if check:
            raise ParioError(f"ceph {prefix} {json.dumps(args)}: {err.strip() or 'error ' + str(ret)}")
        return None
    text = out.decode(errors="replace").strip()
    if not text:
        return err.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
