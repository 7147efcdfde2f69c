#!/usr/bin/env bash
# Valgrind memcheck over integration test binaries, failing on any error
# (invalid read/write, use of uninitialised memory, invalid free, and
# definite or indirect leaks).
#
# Subset (kept to a few minutes on 2 cores): the integration suite
# (tests/suite: arenas, handles, leases, DLPack, sessions) without its two
# proptest models (the arena_ops fuzz target runs that model natively) and
# five heavy tests (listed below), the
# scratch pool tests, the scoped global allocator tests and the fuzz
# regressions. Valgrind runs the threads of a test one at a time, so tests
# run with --test-threads=2 to keep memory in check.
#
# Page-fault counters mean nothing under valgrind (its own JIT touches
# memory on the test's thread), so the script sets WARMARENA_UNDER_VALGRIND=1
# and the tests that assert zero faults skip that assertion, saying so.
#
#   bash scripts/valgrind.sh              # the subset
#   VALGRIND_TESTS="suite" bash scripts/valgrind.sh -- arena_warm_path
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1; then
    echo "valgrind: SKIPPED (valgrind is not installed; apt-get install valgrind)"
    exit 0
fi
valgrind --version

tests="${VALGRIND_TESTS:-suite scratch global fuzz_regressions}"
extra=()
if [ "${1:-}" = "--" ]; then
    shift
    extra=("$@")
fi

echo "valgrind: building test binaries"
# Debug build, as the README's test command makes it (the same packages
# selected, so the same features and the binaries it built already: with
# `-p warmarena` alone the features differ and everything was built
# again); the JSON lines name each executable.
json="$(cargo test --workspace --exclude warmarena-python --tests --no-run --message-format=json 2>/dev/null)"
status=0
for t in $tests; do
    exe="$(printf '%s\n' "$json" | python3 -c '
import json, sys
want, root = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["target"]["name"] == want and "test" in m["target"]["kind"] \
            and m["target"]["src_path"].startswith(root + "/tests/"):
        print(m["executable"])
' "$t" "$PWD")"
    if [ -z "$exe" ]; then
        echo "valgrind: no test binary named $t" >&2
        exit 1
    fi
    args=(--test-threads=2)
    if [ "$t" = suite ]; then
        # Also skipped: six tests that write hundreds of MiB per run (the
        # two threaded stress tests, the I/O warm path, the example network's
        # two runs, the planned warm runs, which also assert zero faults); under valgrind they take 12 of the suite's 13 minutes
        # and exercise no code the rest does not.
        args+=(--skip arena_model --skip handle_model
            --skip arena_concurrency::threads_never_share_a_buffer_and_accounting_balances
            --skip arena_concurrency::many_more_threads_than_cores_hand_buffers_around
            --skip arena_warm_path::io_arena_keeps_the_same_promise
            --skip session_net::outputs_match_the_reference_bit_for_bit
            --skip session_net::ten_warm_runs_cost_nothing_and_peak_is_the_live_set
            --skip session_planned::ten_warm_planned_runs_cost_nothing_and_peak_is_the_height)
    fi
    echo "== valgrind $t ($exe)"
    if ! WARMARENA_UNDER_VALGRIND=1 valgrind --quiet --error-exitcode=99 \
        --leak-check=full --show-leak-kinds=definite,indirect \
        --errors-for-leak-kinds=definite,indirect \
        --suppressions=scripts/valgrind.supp \
        "$exe" "${args[@]}" "${extra[@]}"; then
        echo "valgrind: $t FAILED" >&2
        status=1
    fi
done
exit "$status"
