#!/usr/bin/env bash
# Creates (or reuses) the Python virtual environment the bindings are built
# and tested in, `python/.venv` (git-ignored), with maturin, numpy and pytest
# pinned below, and onnx + onnxruntime for the ONNX Runtime example and its
# test. Safe to run repeatedly: it only installs what is missing or differs.
# `scripts/test.sh` (and so `.ci/run`) calls it before the Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=python/.venv
PY=${PYTHON:-python3}
REQS=(maturin==1.16.0 numpy==2.4.6 pytest==9.2.0)
# Optional: the ONNX Runtime example (python/examples/onnxruntime_outputs.py)
# and its test, which skips with a printed reason when they cannot be
# imported. Installed separately so a platform without an onnxruntime wheel
# still gets a working venv for everything else.
OPTIONAL=(onnx==1.23.2 onnxruntime==1.31.1)

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV with $($PY --version)"
    "$PY" -m venv "$VENV"
fi
# Pinned: pip only goes to the index when something is missing or differs.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${REQS[@]}"
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${OPTIONAL[@]}"; then
    echo "== warning: could not install ${OPTIONAL[*]}; the ONNX Runtime test will skip" >&2
fi
