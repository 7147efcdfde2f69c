#!/usr/bin/env bash
# ThreadSanitizer over the library's concurrency tests: the run-owning
# small path (`arena::small`, its remote frees, abandon/adopt, thread exit
# and arena drop), the thread caches' cross-thread tests, and the arena's
# concurrency suite. Nightly with a sanitized std (-Zbuild-std); skipped
# with a printed reason where nightly or rust-src is missing. Uses the same
# flags and target folder as scripts/tsan-malloc.sh, so the sanitized std
# is built once for both. Arguments replace the default test filters.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/tsan-env.sh
. scripts/tsan-env.sh
tsan_ready tsan || exit 0
filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then
    filters=(arena::small arena::tcache::remote_tests arena::tcache::tests::buffers_freed_on_another_thread)
fi
export RUSTFLAGS="$TSAN_RUSTFLAGS"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
status=0
echo "== tsan: unit tests: ${filters[*]}"
CARGO_TARGET_DIR=$TARGET cargo +nightly test -q -Zbuild-std --target $triple --release \
    -p warmarena --lib -- "${filters[@]}" || status=1
echo "== tsan: tests/suite arena_concurrency"
CARGO_TARGET_DIR=$TARGET cargo +nightly test -q -Zbuild-std --target $triple --release \
    -p warmarena --test suite -- arena_concurrency || status=1
exit $status
