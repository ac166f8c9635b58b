#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with pario installed (editable), and
# pario's C code built in place (scripts/build_native.py: only what changed).
# Usage: scripts/setup.sh [test]   -- "test" also installs the test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extras=""
[ "${1:-}" = "test" ] && extras="[test]"
stamp=".venv/.pario-installed${extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".${extras}"
  touch "$stamp"
fi
.venv/bin/python scripts/build_native.py --quiet
