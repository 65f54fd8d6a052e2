#!/usr/bin/env bash
# Create .venv (if missing) and install rlflow with its dev tools. Idempotent and quick when done.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.rlflow-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    # torch is pinned to the CPU wheel that lies on this machine's disk (see pyproject.toml).
    .venv/bin/python -m pip install -q -e '.[dev]'
    touch "$stamp"
fi
