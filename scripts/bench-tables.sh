#!/usr/bin/env bash
# Runs benches and rewrites their tables in docs/benchmarks.md, between the
# markers `<!-- bench:NAME begin -->` and `<!-- bench:NAME end -->`: each
# section gets the command, the machine and the date, then the Markdown
# tables the bench printed (each with the line that introduces it). The
# page is rewritten in place, never appended to; text outside the markers
# is kept.
#
#   bash scripts/bench-tables.sh                 # every bench below
#   bash scripts/bench-tables.sh arena_pairs     # some of them
#   BENCH_ARGS=--quick bash scripts/bench-tables.sh threads
#
# Benches print their tables after criterion's output; BENCH_ARGS go to the
# bench binary (after `--`). Run on a quiet machine: the tables compare
# allocators measured in the same process, but every time is the machine's.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL=(arena_pairs threads workloads replay planner pattern global session_route scratch)
page=docs/benchmarks.md
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
    benches=("${ALL[@]}")
fi

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true)
machine="${cpu:-unknown CPU}, $(nproc) cores, Linux $(uname -r | cut -d- -f1), THP ${thp:-unknown}"
date=$(date -u +%Y-%m-%d)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for b in "${benches[@]}"; do
    if ! grep -q "<!-- bench:$b begin -->" "$page"; then
        echo "no markers for '$b' in $page (known: ${ALL[*]})" >&2
        exit 2
    fi
    cmd="cargo bench -p warmarena --bench $b${BENCH_ARGS:+ -- $BENCH_ARGS}"
    echo "== $cmd"
    # shellcheck disable=SC2086
    cargo bench -p warmarena --bench "$b" -- ${BENCH_ARGS:-} | tee "$out/$b.log"
    {
        echo "\`$cmd\` at $commit; $machine; $date."
        echo
        # Table blocks, each with the line just before it when that line
        # introduces it (ends with a colon).
        awk '
            /^\|/ { if (!in_table && prev ~ /:$/) print prev; print; in_table = 1; next }
            { if (in_table) print ""; in_table = 0; prev = $0 }
            END { if (in_table) print "" }
        ' "$out/$b.log"
    } >"$out/$b.md"
done

python3 - "$page" "$out" "${benches[@]}" <<'PY'
import pathlib, sys
page, out, names = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3:]
text = page.read_text()
for name in names:
    begin, end = f"<!-- bench:{name} begin -->", f"<!-- bench:{name} end -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    body = (out / f"{name}.md").read_text().rstrip("\n")
    text = text[:i] + "\n" + body + "\n" + text[j:]
page.write_text(text)
PY
echo "rewrote ${benches[*]} in $page"
