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
    # The tested torch and Ray first: pyproject.toml gives only ranges, and pip keeps what
    # already fits them. torch==2.13.0 resolves to the CPU wheel on this machine's disk (pip's
    # find-links; its local label +cpu ranks above PyPI's 2.13.0).
    .venv/bin/python -m pip install -q 'torch==2.13.0' 'ray[default]==2.60.0'
    # The dev tools and the extras the tests and doctests import (ale-py, PettingZoo, MuJoCo:
    # about 26 MB of wheels, EnvPool: 80 MB, Ray Tune, moviepy, pyarrow, onnx and onnxruntime).
    .venv/bin/python -m pip install -q -e '.[dev,atari,envpool,multiagent,mujoco,tune,video,offline,onnx]'
    touch "$stamp"
fi
