"""Starting and stopping the cluster's processes (mon, mgr, OSDs, MDS, ceph-fuse).

Every daemon runs in the foreground mode of its binary (``-f``), detached from pario: a
short-lived ``sh`` starts it in the background in a new session and prints its PID, so the
daemon's parent is init (or the nearest subreaper), never the pario process that ran
``up`` — nothing is left as a zombie of a long-lived caller (a test session) after ``down``.
An OSD joins its blkio cgroup *before* it executes (``echo $$ > …/cgroup.procs; exec
ceph-osd``), so every one of its I/Os is throttled from the first.

Every command line names ``-c DIR/ceph.conf``: a process is the cluster's if and only if
its command line holds that path (:func:`cluster_processes`), which is how ``down`` checks
a recorded PID before signalling it (a PID may have been reused) and finds daemons the
state file never recorded (a crash between a start and the next save).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from .. import ParioError


def spawn(cmd: list[str], log: str | Path, *, cgroup: str | None = None, cwd: str | Path | None = None) -> int:
    """Start ``cmd`` detached (new session, stdin /dev/null, stdout+stderr appended to ``log``),
    inside ``cgroup`` (a directory of the blkio hierarchy) when given; return its PID."""
    inner = list(cmd)
    if cgroup:
        inner = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(cgroup, "cgroup.procs"), *inner]
    outer = ["sh", "-c", 'log=$0; setsid "$@" </dev/null >>"$log" 2>&1 & echo $!', str(log), *inner]
    try:
        res = subprocess.run(outer, capture_output=True, text=True, timeout=30, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ParioError(f"cannot start {cmd[0]}: {exc}") from None
    out = res.stdout.strip()
    if res.returncode != 0 or not out.isdigit():
        raise ParioError(f"cannot start {cmd[0]}: {res.stderr.strip() or 'no PID'}")
    return int(out)


def cmdline(pid: int) -> list[str] | None:
    """The argument list of a live process (None if it is gone or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if not raw:  # a zombie (or a kernel thread)
        return None
    return [a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")]


def alive(pid: int, conf: str) -> bool:
    """``pid`` is a running process of the cluster whose configuration is ``conf``."""
    args = cmdline(pid)
    return args is not None and conf in args


def cluster_processes(conf: str) -> list[int]:
    """PIDs of every live process whose command line names ``conf`` (the cluster's daemons and
    any client started with ``-c conf``), except this process."""
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            args = cmdline(int(entry))
            if args and conf in args:
                out.append(int(entry))
    return sorted(out)


def stop(pids: list[int], conf: str, *, timeout: float = 20.0) -> list[int]:
    """SIGTERM every PID still belonging to the cluster, wait up to ``timeout`` s for all of
    them, SIGKILL what is left and wait for that too.  Returns the PIDs that did not exit."""
    own = [p for p in dict.fromkeys(pids) if alive(p, conf)]
    for p in own:
        _signal(p, signal.SIGTERM)
    left = _wait_gone(own, conf, timeout)
    for p in left:
        _signal(p, signal.SIGKILL)
    left = _wait_gone(left, conf, 10.0)
    _wait_reaped([p for p in own if p not in left], 5.0)
    return left


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pids: list[int], conf: str, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left:
        for p in list(left):
            _reap(p)
            if not alive(p, conf):
                left.remove(p)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return left


def zombie(pid: int) -> bool:
    """``pid`` has exited and waits to be collected by its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].startswith("Z")


def wait_reaped(pids: list[int], timeout: float = 5.0) -> None:
    """Wait (bounded) for the zombies among ``pids`` (daemons that died before ``down``) to be collected."""
    _wait_reaped([p for p in pids if zombie(p)], timeout)


def _wait_reaped(pids: list[int], timeout: float) -> None:
    """Wait (bounded) until exited processes have been collected by their parent (init for a
    detached daemon), so that not even a zombie of theirs is left when ``down`` returns."""
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        for p in pids:
            _reap(p)
        time.sleep(0.05)


def _reap(pid: int) -> None:
    """Collect ``pid`` if it is a child of this process (it is not when started by :func:`spawn`)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_for(what: str, check, timeout: float, *, interval: float = 0.25, detail=None):
    """Call ``check()`` until it returns a true value (returned); ParioError after ``timeout`` s.
    ``detail()`` (optional) says what was seen last, for the error."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            extra = ""
            if detail is not None:
                try:
                    extra = f" ({detail()})"
                except Exception as exc:  # noqa: BLE001 - only decoration of the error
                    extra = f" ({exc})"
            raise ParioError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        time.sleep(interval)
