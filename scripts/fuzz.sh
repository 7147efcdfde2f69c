#!/usr/bin/env bash
# Runs every fuzz target for a bounded time each (default 60 s), starting
# from the committed seed corpora in fuzz/corpus/<target>/ (new inputs go to
# a scratch copy, so a CI run leaves the tree clean). Needs a nightly
# toolchain; installs cargo-fuzz from crates.io when it is missing.
#
#   bash scripts/fuzz.sh            # 60 s per target
#   bash scripts/fuzz.sh 600        # 10 min per target
#   FUZZ_TARGETS="arena_ops" bash scripts/fuzz.sh 3600
#   FUZZ_SEED=1 FUZZ_RUNS=400000 FUZZ_RUNS_arena_ops=10000 bash scripts/fuzz.sh 60   # CI
#
# With FUZZ_RUNS set, c_malloc runs FUZZ_RUNS_c_malloc inputs (default
# 30000: 2-3 s from the seed corpus with seed 1; its inputs slow down as
# they grow, 100000 take about 25 s).
#
# Without FUZZ_SEED each run takes a fresh random seed and explores new
# inputs. CI fixes the seed and the number of inputs per target, so the
# same tree always gets the same verdict; exploring is for longer runs.
# A crash leaves its input in fuzz/artifacts/<target>/ and fails the run;
# replay it with `cargo +nightly fuzz run <target> <file>`, then add it as a
# regression test (tests/fuzz_regressions.rs) and to the seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
targets="${FUZZ_TARGETS:-arena_ops small_ops planner csv json c_malloc}"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz: SKIPPED (no nightly toolchain; install with 'rustup toolchain install nightly')"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz from crates.io"
    cargo +nightly install cargo-fuzz --locked
fi

# c_malloc loads libwarmarena.so (the malloc/ crate, a debug build: its
# debug assertions on) with dlopen; the test command's build leaves it
# there already, so this is quick in CI. The library's TLS is initial-exec,
# so a dlopen needs more static TLS than glibc's default 512 bytes: the
# tunable below, for that target's run only.
if [[ " $targets " == *" c_malloc "* ]]; then
    echo "fuzz: building libwarmarena.so for c_malloc (debug)"
    cargo build -q -p warmarena-malloc
    export WARMARENA_SO="${CARGO_TARGET_DIR:-$PWD/target}/debug/libwarmarena.so"
    if [ -n "${FUZZ_RUNS:-}" ]; then : "${FUZZ_RUNS_c_malloc:=30000}"; fi
fi

echo "fuzz: building targets (release, debug assertions, ASan)"
cargo +nightly fuzz build --debug-assertions

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for t in $targets; do
    mkdir -p "$work/$t"
    seeds=()
    [ -d "fuzz/corpus/$t" ] && seeds=("fuzz/corpus/$t")
    fixed=()
    [ -n "${FUZZ_SEED:-}" ] && fixed+=("-seed=$FUZZ_SEED")
    # FUZZ_RUNS_<target> overrides FUZZ_RUNS for one target (arena_ops runs
    # a few hundred inputs a second, the others tens of thousands).
    runs_var="FUZZ_RUNS_$t"
    runs="${!runs_var:-${FUZZ_RUNS:-}}"
    [ -n "$runs" ] && fixed+=("-runs=$runs")
    echo "== fuzz $t for ${secs}s${FUZZ_SEED:+, seed $FUZZ_SEED}${runs:+, at most $runs inputs}"
    # -rss_limit_mb: the arena target maps up to a few hundred MiB at once.
    tunables=()
    if [ "$t" = c_malloc ]; then
        tunables=("GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.rtld.optional_static_tls=8192")
    fi
    if ! env "${tunables[@]}" cargo +nightly fuzz run --debug-assertions "$t" "$work/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" "${fixed[@]}" -rss_limit_mb=4096 -print_final_stats=1 2>&1 |
        grep -v -e '^#[0-9].*\(NEW\|REDUCE\|pulse\)' -e '^"' -e 'Uses: '; then
        echo "fuzz: $t FAILED (input saved under fuzz/artifacts/$t/)" >&2
        status=1
    fi
done
exit "$status"
