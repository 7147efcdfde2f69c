#!/usr/bin/env bash
# Creates (or reuses) the Python virtual environment the bindings are built
# and tested in, `python/.venv` (git-ignored), with maturin, numpy and pytest
# pinned below. Safe to run repeatedly: it only installs what is missing.
# Prints nothing but progress; `scripts/test.sh` calls it before the Python tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=python/.venv
PY=${PYTHON:-python3}
REQS=(maturin==1.16.0 numpy==2.4.6 pytest==9.2.0)

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV with $($PY --version)"
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -m pip show -q maturin numpy pytest >/dev/null 2>&1; then
    echo "== installing ${REQS[*]}"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${REQS[@]}"
fi
