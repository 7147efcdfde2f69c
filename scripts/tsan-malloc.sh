#!/usr/bin/env bash
# ThreadSanitizer over the multi-threaded sections of the C test
# (malloc/tests/c/preload_test.c: 64 short-lived threads with TLS
# destructors, producer/consumer frees) with libwarmarena.so preloaded.
# The library is built on nightly with -Zsanitizer=thread and a
# sanitized std (-Zbuild-std, needs the rust-src component), plus
# --cfg warmarena_tsan (malloc/src/tsan.rs: uninstrumented entry points
# for the calls the sanitizer's runtime makes while it starts); the test
# program with `cc -fsanitize=thread`. Prints SKIPPED with the reason when
# nightly, rust-src or a compiler with ThreadSanitizer is missing.
#
#   bash scripts/tsan-malloc.sh          # exit 1 on a ThreadSanitizer report
#
# A run that dies inside the sanitizer's runtime without a report (a
# crash of the runtime itself, not a finding) is printed as NOT CHECKED.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/tsan-env.sh
. scripts/tsan-env.sh
tsan_ready tsan-malloc || exit 0
if ! command -v cc >/dev/null 2>&1 || ! echo 'int main(void){return 0;}' |
        cc -x c -fsanitize=thread -o /dev/null - >/dev/null 2>&1; then
    echo "tsan-malloc: SKIPPED (no cc with -fsanitize=thread)"; exit 0
fi

echo "tsan-malloc: building libwarmarena.so with -Zsanitizer=thread"
RUSTFLAGS="$TSAN_RUSTFLAGS" CARGO_TARGET_DIR=$TARGET \
    cargo +nightly build --release -q -Zbuild-std --target $triple -p warmarena-malloc || exit 1
so=$TARGET/$triple/release/libwarmarena.so

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The runtime of an older compiler may lack the memory functions newer
# LLVM instruments with; the program provides them (its interceptors then
# check the accesses).
cat >"$work/shim.c" <<'C'
#include <string.h>
void *__tsan_memcpy(void *d, const void *s, size_t n) { return memcpy(d, s, n); }
void *__tsan_memmove(void *d, const void *s, size_t n) { return memmove(d, s, n); }
void *__tsan_memset(void *d, int c, size_t n) { return memset(d, c, n); }
C
cc -O1 -g -pthread -fsanitize=thread -rdynamic -Wno-alloc-size-larger-than -Wno-use-after-free \
    -o "$work/preload_test" malloc/tests/c/preload_test.c "$work/shim.c" -ldl || exit 1

status=0
for args in "threads 64" "prodcons"; do
    echo "== tsan-malloc: preload_test $args"
    # shellcheck disable=SC2086
    timeout 300 env LD_PRELOAD="$so" TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        "$work/preload_test" $args >"$work/out" 2>&1
    rc=$?
    tail -n 30 "$work/out"
    if grep -q "WARNING: ThreadSanitizer" "$work/out"; then
        echo "tsan-malloc: $args: FAILED (a ThreadSanitizer report above)"; status=1
    elif [ "$rc" -eq 0 ]; then
        echo "tsan-malloc: $args: ok, no report"
    elif grep -q "ThreadSanitizer: SEGV\|DEADLYSIGNAL" "$work/out"; then
        echo "tsan-malloc: $args: NOT CHECKED (the sanitizer's runtime crashed without a report: exit $rc)"
    else
        echo "tsan-malloc: $args: FAILED (exit $rc)"; status=1
    fi
done
exit "$status"
