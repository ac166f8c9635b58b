#!/usr/bin/env bash
# The full pario loop on an IOR-like MPI program, by hand (see examples/README.md).
# usage: examples/full_loop.sh [WORKDIR] [NPROCS] [TESTBED]
#   without TESTBED: an embedded store for ceda-hdd8 (directories on this machine's disk),
#                    IOR strided 16 KiB, write + read, the program's own options as hints;
#   with TESTBED (a 'pario testbed up TESTBED --hdd 4 --ssd 0' directory; root): the store's
#                    servers on the testbed's throttled servers, O_DIRECT, the ranks inside the
#                    testbed's cgroup, and a read-mostly analysis (IOR strided 256 KiB read 4 times,
#                    written once before run 1), with the PARIO_* environment variables as hints.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${1:-$(mktemp -d /tmp/pario-loop.XXXX)}"
N="${2:-4}"
TB="${3:-}"
BIN="$ROOT/.venv/bin"
MPIEXEC="$BIN/mpiexec"; PY="$BIN/python"; PARIO="$BIN/pario"
mkdir -p "$W"
W="$(cd "$W" && pwd)"
digest() { grep '^sha256' "$1" | cut -d' ' -f2; }

if [ -z "$TB" ]; then
  SYSTEM=ceda-hdd8
  IOR=(--pattern strided --xfer 16K --segments 64)   # independent: CEDA replicates this pattern
  rm -rf "$W/store"
  "$PY" -c "from pario.store import init_store; init_store('$W/store', '$SYSTEM')"
  echo "== run 1: traced (pario_trace), writes the data and reads it back"
  "$MPIEXEC" -n "$N" "$PY" "$ROOT/examples/ior_like.py" data --store "$W/store" --trace "$W/run1.parquet" "${IOR[@]}" --digest | tee "$W/run1.txt"
  echo "== advise"
  "$PARIO" advise "$W/run1.parquet" --system "$SYSTEM" --schemes ceda -o "$W/plan.json"
  echo "== replicate"
  "$PARIO" replicate "$W/plan.json" --store "$W/store"
  echo "== run 2: with the plan (redirected reads and writes)"
  "$MPIEXEC" -n "$N" "$PY" "$ROOT/examples/ior_like.py" data --store "$W/store" --plan "$W/plan.json" "${IOR[@]}" --digest | tee "$W/run2.txt"
else
  TB="$(cd "$TB" && pwd)"
  SYSTEM="$TB/nominal.toml"                          # or a profile calibrated on the testbed
  SIZE=(--pattern strided --xfer 256K --segments 64)
  # a store whose servers are the testbed's (one directory per server, on its throttled mount)
  if [ -f "$W/store/store.json" ]; then             # a store of an earlier run: its data too
    "$PY" -c "import json,shutil,sys; [shutil.rmtree(d, ignore_errors=True) for d in json.load(open(sys.argv[1]))['servers'].values() if d.startswith('/')]" "$W/store/store.json"
  fi
  rm -rf "$W/store"
  SERVERS=()
  for s in $("$PY" -c "from pario.system import load_system; print(' '.join(load_system('$SYSTEM').names))"); do
    SERVERS+=(--server "$s=$TB/$s/$(basename "$W")-store")
  done
  "$PARIO" store init "$W/store" --system "$SYSTEM" "${SERVERS[@]}"
  # hints from the environment: every File.open of the program gets them (docs/mpi.md)
  export PARIO_STORE="$W/store" PARIO_SYSTEM="$SYSTEM" PARIO_DIRECT=1
  RUN=("$PARIO" testbed run "$TB" -- "$MPIEXEC" -n "$N" "$PY" "$ROOT/examples/ior_like.py" data)
  echo "== prepare: write the input (not traced)"
  "${RUN[@]}" --write-only "${SIZE[@]}"
  echo "== run 1: traced (PARIO_TRACE), reads the data 4 times"
  PARIO_TRACE="$W/run1.parquet" "${RUN[@]}" --read-only "${SIZE[@]}" --reads 4 --digest | tee "$W/run1.txt"
  echo "== advise"
  "$PARIO" advise "$W/run1.parquet" --system "$SYSTEM" --schemes ceda -o "$W/plan.json"
  echo "== replicate (then sync: the replicator writes through the page cache, outside the cgroup)"
  "$PARIO" replicate "$W/plan.json" --store "$W/store"
  sync
  echo "== run 2: with the plan (PARIO_PLAN: reads redirected to the replica)"
  PARIO_PLAN="$W/plan.json" PARIO_TRACE="$W/run2.parquet" "${RUN[@]}" --read-only "${SIZE[@]}" --reads 4 --digest | tee "$W/run2.txt"
fi
d1=$(digest "$W/run1.txt"); d2=$(digest "$W/run2.txt")
[ "$d1" = "$d2" ] && echo "identical bytes: yes ($d1)" || { echo "identical bytes: NO ($d1 vs $d2)"; exit 1; }
