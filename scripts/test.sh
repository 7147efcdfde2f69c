#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, every test target
# and doctest. Long or heavy checks are gated behind `--ignored` or features
# and listed in the README.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

echo "== cargo test (unit, integration, doctests)"
cargo test --all-targets --no-fail-fast
cargo test --doc
