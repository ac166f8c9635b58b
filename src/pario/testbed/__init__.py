"""Emulated hybrid testbed: HDD-like and SSD-like servers on one machine.

Every server is an ext4 file system on its own loop device, mounted at ``DIR/<name>``
(``H0 .. H(N-1)`` for the HDD-like servers, ``S0 .. S(M-1)`` for the SSD-like ones), and
throttled per device by the blkio cgroup ``pario-…``: cgroup v1
``blkio.throttle.{read,write}_{bps,iops}_device`` or, where the machine runs the unified
hierarchy, cgroup v2 ``io.max``.  The throttle is a per-device token bucket, so a
queue-depth-1 stream of requests of ``s`` bytes costs on average
``max(1/IOPS, s/BPS)`` per request (measured in ``docs/calibration.md``), and a device
that idled for one throttle slice (100 ms on these rotational loop queues) passes the
next slice's worth of bytes and requests at once.  Idle time inside a slice that is still
open (up to 200 ms after the last request) is credit too, so :func:`enter` and the
collective replay restart the throttles before every measured window
(:func:`restart_throttle`): each run gets the one slice an idle device gets and no more,
and a device that must pass B bytes at rate R takes at least B/R − 100 ms.
:mod:`pario.testbed.throttle` prices a
two-phase collective schedule with that ``max`` shape next to the papers' ``α + β·s``.

Throttling only applies to the processes *inside* the cgroup and only to I/O that reaches
the block layer from them (O_DIRECT; buffered writes are written back by the kernel's
flusher threads outside the cgroup).  :func:`enter` moves the calling process (and so its
future children) into the testbed's cgroup; ``pario calibrate`` and ``pario bench run``
do that themselves when their paths lie on a testbed.

Everything ``up`` creates is recorded in ``DIR/pario-testbed.json`` *before* the next
step, so ``down`` releases it (cgroup, mounts, loop devices, images) also after a crash.
Only resources named ``pario-…`` (images, ext4 labels, cgroups) are ever made or removed.
"""

from .core import (
    STATE_FILE,
    Testbed,
    TestbedServer,
    check_support,
    down,
    enter,
    find_testbed,
    load_state,
    nominal_system,
    restart_throttle,
    status,
    up,
)

__all__ = [
    "STATE_FILE",
    "Testbed",
    "TestbedServer",
    "check_support",
    "down",
    "enter",
    "find_testbed",
    "load_state",
    "nominal_system",
    "restart_throttle",
    "status",
    "up",
]
