"""An emulated cluster of nodes on this one host, driven through ../shared/tools/multinode.sh
(called by path, never copied): each node nK has its own network, mount, UTS and IPC
namespaces, private /tmp and /dev/shm, its own boot id, and the CephFS of a ``pario cluster``
mounted at ``HOME/pfs`` by a ceph-fuse process of its own (docs/multinode.md, "Test fixture").

``Nodes`` is the object the ``cluster3`` fixture yields: ``run`` (a shell command on some
nodes), ``mpi`` (one MPI job across nodes), ``home`` (the directory every node and the host
share through the host's page cache: binaries, scripts) and ``pfs`` (the CephFS path as the
nodes see it; the host has no CephFS there).  ``down`` then ``leftovers`` say what the
teardown left behind."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import SHARED

SCRIPT = SHARED / "tools" / "multinode.sh"
RUN = Path("/run/mn2")                 # the script's state; one emulated cluster at a time
SWITCH = "mn2sw"                       # the netns holding the bridge
TOOLS = ("ip", "nsenter", "unshare")
# the script's own defaults for these apply unless a call passes them (env=)
_DROP = ("MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER", "FI_TCP_IFACE", "UCX_NET_DEVICES", "UCX_TLS")


class NodesError(RuntimeError):
    """A call of multinode.sh failed (its exit status and output are in the message)."""


def project_main() -> Path | None:
    """The directory holding the .venv this interpreter runs from (multinode.sh's MN_MAIN)."""
    prefix = Path(sys.prefix)
    return prefix.parent if prefix.name == ".venv" else None


def skip_reason(nodes: list[str]) -> str | None:
    """Why this machine cannot bring up the emulated cluster now (None when it can)."""
    from ceph_fixture import ceph_skip_reason

    if os.geteuid() != 0:
        return "multinode: needs root (network, mount, UTS and IPC namespaces; a Ceph cluster)"
    if not SCRIPT.exists():
        return f"multinode: {SCRIPT} is absent (../shared/tools beside the repository)"
    reason = ceph_skip_reason()           # ceph-mon, ceph-fuse, … missing: says to run scripts/setup.sh ceph
    if reason:
        return f"multinode: {reason}"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"multinode: {', '.join(missing)} not found (iproute2, util-linux)"
    main = project_main()
    if main is None or not (main / ".venv" / "bin" / "pario").exists():
        return f"multinode: the tests must run from the project's .venv (sys.prefix is {sys.prefix})"
    if RUN.exists():
        return (f"multinode: an emulated cluster already exists ({RUN}{'/up' if (RUN / 'up').exists() else ''}); "
                f"it is not this session's: see `{SCRIPT} status`")
    taken = sorted(set(netns_names()) & {SWITCH, *nodes})
    if taken:
        return f"multinode: network namespaces {', '.join(taken)} already exist (not this session's)"
    return None


def netns_names() -> list[str]:
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def loop_devices() -> set[str]:
    """``losetup -a``, one line a device."""
    r = subprocess.run(["losetup", "-a"], capture_output=True, text=True)
    return {line.strip() for line in r.stdout.splitlines() if line.strip()}


def _ns_inode(path: str | Path) -> int | None:
    """The inode of the namespace ``path`` is (a /proc/PID/ns link or a file bound to one), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino if st.st_dev == os.stat("/proc/self/ns/mnt").st_dev else None


def _mountpoints() -> list[str]:
    with open("/proc/self/mounts") as f:
        return [line.split()[1].encode().decode("unicode_escape") for line in f]


def by_node(output: str) -> dict[str, list[str]]:
    """The lines of a ``run`` output ("[nK] line") by node, prefix removed."""
    out: dict[str, list[str]] = {}
    for line in output.splitlines():
        m = re.match(r"\[(n\d+)\] ?(.*)$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


class Nodes:
    """One emulated cluster (see the module docstring); made by ``up``, removed by ``down``."""

    def __init__(self, home: Path, main: Path, nodes: list[str], ceph_port: int):
        if any(c.isspace() for c in str(home)):
            raise ValueError(f"multinode.sh needs a home without blanks, not {home!r}")
        self.home, self.main, self.nodes, self.ceph_port = Path(home), Path(main), list(nodes), int(ceph_port)
        self.pfs = self.home / "pfs"
        self.times: dict[str, float] = {}
        self.log: dict[str, str] = {}
        # what up made, recorded for the leftover check: namespace inodes, daemon PIDs
        self._ns: set[int] = set()
        self._pids: dict[int, bytes] = {}

    # ------------------------------------------------------------------ the script
    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MN_", "MN2_")) and k not in _DROP}
        env.update(MN_DIR=str(self.home), MN_MAIN=str(self.main), MN2_NODES=" ".join(self.nodes),
                   MN2_CEPH_PORT=str(self.ceph_port))
        env.update(extra or {})
        return env

    def _call(self, args: list[str], timeout: float, extra: dict[str, str] | None = None,
              merge: bool = False) -> subprocess.CompletedProcess:
        """multinode.sh ARGS in a session of its own: killed as a group on timeout or interrupt."""
        p = subprocess.Popen(["bash", str(SCRIPT), *args], env=self._env(extra), cwd=str(self.home),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise NodesError(f"multinode.sh {shlex.join(args)}: no end after {timeout} s\n{out}{err or ''}") from None
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err or "")

    def _hosts(self, hosts) -> str:
        hl = hosts.split(",") if isinstance(hosts, str) else list(hosts)
        bad = [h for h in hl if h not in self.nodes]
        if not hl or bad:
            raise ValueError(f"hosts {hosts!r}: not among {self.nodes}")
        return ",".join(hl)

    # ------------------------------------------------------------------ life cycle
    def up(self, timeout: float = 300) -> None:
        t0 = time.monotonic()
        try:
            cp = self._call(["up"], timeout, merge=True)
        finally:
            self.times["up"] = time.monotonic() - t0
            self._record()
        self.log["up"] = cp.stdout
        if cp.returncode != 0:
            raise NodesError(f"multinode.sh up exited {cp.returncode}:\n{cp.stdout[-3000:]}")

    def _record(self) -> None:
        """The namespaces and daemons up made (as far as it got), for ``leftovers``."""
        own = {_ns_inode("/proc/self/ns/mnt"), _ns_inode("/proc/self/ns/net")}   # a file not (yet) bound
        for n in self.nodes:
            self._ns |= {_ns_inode(RUN / f"{n}.mnt"), _ns_inode(Path("/run/netns") / n)} - own - {None}
        for pidfile in [RUN / "host.holder", RUN / "nsfwd.pid", *(RUN / f"{n}.ceph-fuse.pid" for n in self.nodes)]:
            try:
                pid = int(pidfile.read_text())
                self._pids[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                pass

    def down(self, timeout: float = 300) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        try:
            cp = self._call(["down"], timeout, merge=True)
        finally:
            self.times["down"] = time.monotonic() - t0
        self.log["down"] = cp.stdout
        return cp

    def status(self) -> str:
        return self._call(["status"], 60, merge=True).stdout

    def leftovers(self, loops_before: set[str]) -> list[str]:
        """What the cluster left on the host after ``down`` (empty: nothing)."""
        left = []
        names = set(netns_names()) & {SWITCH, *self.nodes}
        if names:
            left.append(f"network namespaces {sorted(names)}")
        roots = (str(RUN), str(self.home))
        mounts = [m for m in _mountpoints() if any(m == r or m.startswith(r + "/") for r in roots)]
        if mounts:
            left.append(f"mounts {mounts}")
        if RUN.exists():
            left.append(f"{RUN} still exists")
        procs = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            pid = int(d.name)
            inos = {_ns_inode(d / "ns" / "mnt"), _ns_inode(d / "ns" / "net")}
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if inos & self._ns or self._pids.get(pid) == cmd:
                procs.append(f"{pid} {shlex.join(a.decode(errors='replace') for a in cmd.split(bytes(1)) if a)}")
        if procs:
            left.append(f"processes of the nodes {procs}")
        # this cluster's (backed by files under its home): another session's clusters may come and go
        new_loops = sorted(d for d in loop_devices() - loops_before if str(self.home) in d)
        if new_loops:
            left.append(f"loop devices {new_loops}")
        if not mounts:            # no walk into a file system that is still mounted
            jsons = sorted(str(p) for p in self.home.rglob("cluster.json"))
            if jsons:
                left.append(f"a pario cluster ({', '.join(jsons)})")
        return left

    # ------------------------------------------------------------------ use
    def run(self, hosts, cmd: str, check: bool = True, timeout: float = 120) -> tuple[int, str]:
        """``cmd`` (bash -c, cwd home) in every node of ``hosts`` ("n1,n2" or a list) at once:
        (the worst exit status, the output with each line prefixed "[nK] ")."""
        cp = self._call(["run", self._hosts(hosts), "--", cmd], timeout, merge=True)
        if check and cp.returncode != 0:
            raise NodesError(f"on {hosts}: {cmd!r} exited {cp.returncode}:\n{cp.stdout[-3000:]}")
        return cp.returncode, cp.stdout

    def mpi(self, hosts, np: int, argv, env: dict[str, str] | None = None, mpiexec_opts=None, wdir=None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """One MPI job of ``np`` ranks over ``hosts`` (np/len(hosts) per node, in host order),
        launched from the first host; ``env``: extra variables for mpiexec and the ranks (no
        blanks or glob characters: the script splits them on blanks); ``mpiexec_opts``: a string
        or a list of options; ``wdir``: the ranks' directory (default: home)."""
        hosts = self._hosts(hosts)
        if np <= 0 or np % len(hosts.split(",")):
            raise ValueError(f"np={np} is not a multiple of the {len(hosts.split(','))} hosts")
        extra = {}
        if env:
            bad = [k for k, v in env.items() if not k.isidentifier() or re.search(r"[\s*?\[]", str(v))]
            if bad:
                raise ValueError(f"env {bad}: names must be identifiers, values without blanks or glob characters")
            extra["MN2_ENV"] = " ".join(f"{k}={v}" for k, v in env.items())
        if mpiexec_opts:
            extra["MN2_MPIEXEC_OPTS"] = (mpiexec_opts if isinstance(mpiexec_opts, str)
                                         else shlex.join(str(o) for o in mpiexec_opts))
        if wdir is not None:
            extra["MN2_WDIR"] = shlex.quote(str(wdir))
        return self._call(["mpi", hosts, str(np), "--", *(str(a) for a in argv)], timeout, extra)

