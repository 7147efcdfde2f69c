#!/usr/bin/env bash
# Miri over the library's unit tests: size classes, bitmap, block lists,
# free lists and eviction order, trim and the cap, leases and their
# refcount (last release on another thread, arena dropped first), the
# allocator-api2 paths, the planner and its readers, and the scratch claim
# protocol, all over the heap-backed `os` stand-in (src/os/sys_heap.rs).
# Tests too slow for Miri are marked `#[cfg_attr(miri, ignore)]`.
#
# Skips (exit 0, with a message) when no nightly toolchain is installed;
# adds the miri and rust-src components when nightly exists without them.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "miri: SKIPPED (no nightly toolchain; 'rustup toolchain install nightly' to enable)"
    exit 0
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "miri: adding the miri and rust-src components to nightly"
    if ! rustup component add --toolchain nightly miri rust-src; then
        echo "miri: SKIPPED (nightly has no miri component)"
        exit 0
    fi
fi
cargo +nightly miri --version
cargo +nightly miri setup >/dev/null
# Symbolic alignment checks catch code that relies on the heap happening to
# align a block; -Zmiri-many-seeds is left to longer local runs.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-symbolic-alignment-check}"
echo "MIRIFLAGS=$MIRIFLAGS"
cargo +nightly miri test -p warmarena --lib "$@"
