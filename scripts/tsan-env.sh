# Sourced by scripts/tsan.sh and scripts/tsan-malloc.sh: the target folder
# and flags they share (so the sanitized std is built once), and
# `tsan_ready NAME`, which prints why NAME is skipped and fails when this
# machine cannot run ThreadSanitizer (not x86-64, no nightly, no rust-src).
TARGET=${CARGO_TARGET_DIR:-$PWD/target}/tsan
triple=x86_64-unknown-linux-gnu
TSAN_RUSTFLAGS="-Zsanitizer=thread --cfg warmarena_tsan"

tsan_ready() {
    if [ "$(uname -m)" != x86_64 ]; then echo "$1: SKIPPED (x86-64 only)"; return 1; fi
    if ! rustup run nightly rustc --version >/dev/null 2>&1; then
        echo "$1: SKIPPED (no nightly toolchain)"; return 1
    fi
    if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
        echo "$1: SKIPPED (nightly has no rust-src; rustup component add rust-src --toolchain nightly)"
        return 1
    fi
}
