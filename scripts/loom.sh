#!/usr/bin/env bash
# loom models of the concurrent pieces (exhaustive interleavings, up to a
# preemption bound; LOOM_MAX_PREEMPTIONS overrides the models' defaults):
#   src/handle/loom_tests.rs   lease refcount, last release, arena lifetime
#                              (real IoLease / ArenaCore / CoreHandle code)
#   src/scratch/loom_tests.rs  claim / grow / release / trim (real Slot)
#   src/arena/owners_loom.rs   owner-by-address table (extracted core)
#   src/sync.rs                the arena lock (a release never leaves a
#                              waiter asleep; the futex modelled)
#   src/arena/tcache/*.rs      epoch (trim, orphaning), link (who frees a
#                              cache), claim (a cache's offered buffer),
#                              remote (the remote-free stack: push, take,
#                              take without the lock, close), remotes (one
#                              stack per class: flags, put-back), stash (the
#                              large-buffer stash: put, take, drain, close),
#                              steal (a spill's guard and the per-class hint)
# Built in its own target directory (target/loom) so that the cfg change
# does not invalidate the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg loom ${RUSTFLAGS:-}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/loom}"
export LOOM_LOG="${LOOM_LOG:-error}"
cargo test -p warmarena --lib --release loom_ -- --test-threads=1 "$@"
