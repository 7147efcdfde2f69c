#!/usr/bin/env bash
# The library's public API, one item a line (cargo-public-api over rustdoc's
# JSON; blanket impls left out), committed as public-api.txt so that any
# change to the surface shows in review.
#
#   bash scripts/public-api.sh          # rewrite public-api.txt
#   bash scripts/public-api.sh --check  # fail, printing the diff, if it differs
#
# Needs a nightly toolchain (rustdoc JSON) and cargo-public-api
# (`cargo install cargo-public-api --locked`); exits 3 when either is missing
# or the tool fails.
# Items marked #[doc(hidden)] (the internals the tests, benches and fuzz
# targets use) are not in the listing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-public-api >/dev/null 2>&1; then
    echo "public-api: cargo-public-api is not installed (cargo install cargo-public-api --locked)" >&2
    exit 3
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "public-api: no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 3
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Its own target folder: rustdoc JSON on nightly would otherwise rebuild
# the stable build's artifacts.
# A failure of the tool itself (a nightly whose rustdoc JSON is newer than
# the installed cargo-public-api reads, say) is reported as missing (exit 3)
# with its message: the crate's own build errors are caught by the tests.
if ! CARGO_TARGET_DIR="${PUBLIC_API_TARGET_DIR:-target/public-api}" \
    cargo public-api -p warmarena --omit blanket-impls >"$out" 2>"$out.err"; then
    cat "$out.err" >&2
    echo "public-api: cargo public-api failed (above); no listing made" >&2
    rm -f "$out.err"
    exit 3
fi
rm -f "$out.err"

if [ "${1:-}" = "--check" ]; then
    if ! diff -u public-api.txt "$out"; then
        echo "public-api: the public API differs from public-api.txt (above: - committed, + now)." >&2
        echo "public-api: if the change is meant, run 'bash scripts/public-api.sh' and commit public-api.txt." >&2
        exit 1
    fi
    echo "public-api: unchanged ($(wc -l <public-api.txt) lines)"
else
    cp "$out" public-api.txt
    echo "public-api: wrote public-api.txt ($(wc -l <public-api.txt) lines)"
fi
