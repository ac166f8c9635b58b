#!/usr/bin/env bash
# The full pario loop on an IOR-like MPI program (see examples/README.md).
# usage: examples/full_loop.sh [WORKDIR] [NPROCS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W="${1:-$(mktemp -d /tmp/pario-loop.XXXX)}"
N="${2:-4}"
BIN="$ROOT/.venv/bin"
MPIEXEC="$BIN/mpiexec"; PY="$BIN/python"; PARIO="$BIN/pario"
SYSTEM=ceda-hdd8
IOR=(--pattern strided --xfer 16K --segments 64)   # independent: CEDA replicates this pattern
mkdir -p "$W"; rm -rf "$W/store"
"$PY" -c "from pario.store import init_store; init_store('$W/store', '$SYSTEM')"
echo "== run 1: traced (pario_trace), writes the data and reads it back"
"$MPIEXEC" -n "$N" "$PY" "$ROOT/examples/ior_like.py" data --store "$W/store" --trace "$W/run1.parquet" "${IOR[@]}" --digest | tee "$W/run1.txt"
echo "== advise"
"$PARIO" advise "$W/run1.parquet" --system "$SYSTEM" --schemes ceda -o "$W/plan.json"
echo "== replicate"
"$PARIO" replicate "$W/plan.json" --store "$W/store"
echo "== run 2: with the plan (redirected reads and writes)"
"$MPIEXEC" -n "$N" "$PY" "$ROOT/examples/ior_like.py" data --store "$W/store" --plan "$W/plan.json" "${IOR[@]}" --digest | tee "$W/run2.txt"
d1=$(grep sha256 "$W/run1.txt" | cut -d' ' -f2); d2=$(grep sha256 "$W/run2.txt" | cut -d' ' -f2)
[ "$d1" = "$d2" ] && echo "identical bytes: yes ($d1)" || { echo "identical bytes: NO ($d1 vs $d2)"; exit 1; }
