#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with pario installed (editable: its C code
# built in place by setup.py, as any install builds it), then rebuilt in place when a C source
# changed (scripts/build_native.py: only what changed; one build definition for both,
# src/pario/native/build.py).
# Usage: scripts/setup.sh [test|ceph]   -- "test" also installs the test extras (and, as root,
# Debian's parallel HDF5 for IOR's HDF5 backend in the tests); "ceph" (root)
# installs Debian's Ceph packages (mon, mgr, osd, mds, fuse, librados/libcephfs and their
# Python modules; libcephsqlite, SQLite's VFS over RADOS: docs/multinode.md "rados") with
# apt-get and makes `import rados, cephfs` work in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extras=""
[ "${1:-}" = "test" ] && extras="[test]"
stamp=".venv/.pario-installed${extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".${extras}"
  touch "$stamp"
fi
.venv/bin/python scripts/build_native.py --quiet
# pario's kernels compiled ahead (numba keeps them in its on-disk cache), so that the first
# command that plans does not pay the compile (about 30 s here; src/pario/jit.py): again only
# when a Python source changed since
warmed=".venv/.pario-warm"
if [ ! -f "$warmed" ] || [ -n "$(find src/pario -name '*.py' -newer "$warmed" -print -quit)" ]; then
  if .venv/bin/python -m pario.jit; then touch "$warmed"; else echo "setup: compiling pario's kernels ahead failed: the first command that plans compiles them"; fi
fi
if [ "${1:-}" = "test" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
   && ! dpkg -s libhdf5-mpich-dev >/dev/null 2>&1; then
  # IOR's HDF5 backend in the test suite (tests/run/test_run_variation.py): Debian's parallel HDF5
  # for MPICH, linked statically into IOR (scripts/build_native.py); without it those tests
  # skip with the reason (pytest -rs)
  { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libhdf5-mpich-dev pkg-config >/dev/null; } \
    || echo "setup: apt-get install libhdf5-mpich-dev failed: the HDF5 tests will skip"
fi
if [ "${1:-}" = "ceph" ]; then
  if ! command -v ceph-osd >/dev/null || ! [ -e /usr/lib/python3/dist-packages/rados.cpython-311-x86_64-linux-gnu.so ] \
     || ! [ -e /usr/lib/x86_64-linux-gnu/libcephsqlite.so ]; then
    [ "$(id -u)" = 0 ] || { echo "pario: error: scripts/setup.sh ceph installs Debian packages: run it as root" >&2; exit 2; }
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common python3-rados python3-cephfs \
      librados-dev libcephfs-dev libsqlite3-mod-ceph attr uuid-runtime >/dev/null
  fi
  # Debian's rados/cephfs modules, and only them, on the venv's path (all of dist-packages
  # would shadow the venv's own packages)
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p .venv/ceph-modules
  for m in rados cephfs; do
    ln -sf "/usr/lib/python3/dist-packages/$m.cpython-311-x86_64-linux-gnu.so" ".venv/ceph-modules/"
  done
  echo "$PWD/.venv/ceph-modules" > "$site/pario-ceph.pth"
fi
