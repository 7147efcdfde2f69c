#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, every test target
# and doctest. Long or heavy checks are gated behind `--ignored` or features
# and listed in the README.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

# The Rust crates: the library (root), the CLI (cli/) and the example
# network (net/); the Python crate needs its venv's interpreter (below).
RUST_CRATES=(--workspace --exclude warmarena-python)

echo "== cargo clippy ${RUST_CRATES[*]} --all-targets -- -D warnings"
cargo clippy "${RUST_CRATES[@]}" --all-targets -- -D warnings

# Private items too: the crate's internal docs link to each other, and a
# link that no longer resolves is caught here (fifteen had gone stale).
echo "== cargo doc --no-deps --document-private-items (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc "${RUST_CRATES[@]}" --no-deps --document-private-items --quiet

# Also the repository's own text: tests/repo_docs.rs fails on numbered
# history references ("stop" or "issue" and a number) in Markdown and code,
# and on a path ARCHITECTURE.md names that does not exist.
echo "== cargo test (unit, integration, doctests)"
# libwarmarena.so (malloc/) is a cdylib without a test harness: its tests
# run C programs under LD_PRELOAD of the library built here first.
cargo build -p warmarena-malloc
cargo test "${RUST_CRATES[@]}" --all-targets --no-fail-fast
cargo test "${RUST_CRATES[@]}" --doc

# The Python bindings (python/): lints, then a debug build of the extension
# into python/.venv (made by scripts/python-setup.sh with maturin, numpy and
# pytest) and the pytest suite against real NumPy.
echo "== python: setup (python/.venv)"
bash scripts/python-setup.sh
VENV_PY="$PWD/python/.venv/bin/python"
export PYO3_PYTHON="$VENV_PY"

echo "== python: cargo clippy -p warmarena-python --all-targets -- -D warnings"
cargo clippy -p warmarena-python --all-targets -- -D warnings

echo "== python: maturin develop (debug build of warmarena._warmarena)"
(cd python && VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" maturin develop --quiet)

echo "== python: pytest python/tests"
set +e
"$VENV_PY" -m pytest -q -p no:cacheprovider python/tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: python/tests must hold the binding tests" >&2
    exit 1
fi
exit "$rc"
