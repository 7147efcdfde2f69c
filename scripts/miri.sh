#!/usr/bin/env bash
# Miri over the library's unit tests: size classes, bitmap, block lists,
# free lists and eviction order, trim and the cap, leases and their
# refcount (last release on another thread, arena dropped first), the
# allocator-api2 paths, the planner and its readers, and the scratch claim
# protocol, all over the heap-backed `os` stand-in (src/os/sys_heap.rs).
# Tests too slow for Miri are marked `#[cfg_attr(miri, ignore)]`.
# Arguments go to `cargo miri test` (one process); without them the tests
# run in two shards at once (below).
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
if [ $# -gt 0 ]; then
    exec cargo +nightly miri test -p warmarena --lib "$@"
fi
# No arguments: every unit test, in two shards at once (Miri interprets on
# one core; CI has two), balanced by their Miri times on a clean clone
# (the arena's tests but its thread caches 265 s; the thread
# caches 204 s; everything outside the arena 126 s). Built once first;
# each shard's output is printed whole when both have ended. Between them
# the shards name every test: `arena::` less `arena::tcache`, then
# `arena::tcache` and everything but `arena::`.
cargo +nightly miri test -p warmarena --lib --no-run
logs=$(mktemp -d)
cargo +nightly miri test -p warmarena --lib -- arena:: --skip arena::tcache >"$logs/arena" 2>&1 &
arena_pid=$!
(
    cargo +nightly miri test -p warmarena --lib -- arena::tcache &&
        cargo +nightly miri test -p warmarena --lib -- --skip arena::
) >"$logs/rest" 2>&1 &
rest_pid=$!
# A shard must not outlive this script (CI's `timeout` stops only it).
trap 'pkill -P "$rest_pid" 2>/dev/null; kill "$arena_pid" "$rest_pid" 2>/dev/null || true' TERM INT
arena_rc=0
rest_rc=0
wait "$arena_pid" || arena_rc=$?
wait "$rest_pid" || rest_rc=$?
echo "== miri shard 1: arena:: but arena::tcache (exit $arena_rc)"
cat "$logs/arena"
echo "== miri shard 2: arena::tcache, then everything but arena:: (exit $rest_rc)"
cat "$logs/rest"
rm -rf "$logs"
if [ "$arena_rc" -ne 0 ] || [ "$rest_rc" -ne 0 ]; then
    exit 1
fi
