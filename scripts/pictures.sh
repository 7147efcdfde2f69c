#!/usr/bin/env bash
# Draws the sample pictures (a MiniMalloc plan, the README's report figures)
# and screenshots them with headless Chromium into docs/plan.png and
# docs/report.png. Needs `chromium` (Debian: apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
# Release: the header shows the planner's time, which a debug build inflates.
cargo test --release --lib draw::samples -- --ignored --nocapture
out="$PWD/target/pictures"
shot() { # FILE PNG WIDTH,HEIGHT
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="$3" --screenshot="$2" "file://$out/$1" 2>/dev/null
}
shot plan.svg docs/plan.png 1400,860
shot report.html docs/report.png 1400,1150
shot plan_gap.svg "$out/plan_gap.png" 1400,860
shot plan_small.svg "$out/plan_small.png" 1400,860
if [ -f "$out/plan_large.svg" ]; then shot plan_large.svg "$out/plan_large.png" 1400,860; fi
ls -l docs/plan.png docs/report.png
