#!/usr/bin/env bash
# Real programs under each C allocator, through LD_PRELOAD: glibc (none
# preloaded), warmarena (libwarmarena.so, the malloc/ crate), mimalloc and
# jemalloc (malloc/bench/peers: a shim built from their crates' C sources;
# skipped with a message when they do not build). For every program and
# allocator: elapsed time (best of $REPS), max RSS and minor faults (of
# that best run), and whether the output is byte-identical to glibc's.
# Prints a markdown table.
#
#   bash scripts/preload-bench.sh            # REPS=3, every program
#   REPS=1 PEERS=0 bash scripts/preload-bench.sh   # quick: glibc and warmarena only
#
# Environment: REPS (runs per cell, default 3), LIMIT (seconds per run,
# default 120), PEERS=0 (skip mimalloc/jemalloc), PEER_LIST (default
# "mimalloc jemalloc"), PROGRAMS (a space-separated
# subset of: numpy numpy_gaps pytest onnx prodcons prodcons_cxx sort git
# python), REPO (the repository `git log`
# reads, default this one), PYTHON (an interpreter with numpy for the NumPy
# loop; default python/.venv's, else python3), WARMARENA_SO / MIMALLOC_SO / JEMALLOC_SO (use
# these libraries instead of building them), CARGO_TARGET_DIR.
#
# The programs: the NumPy temporaries loop (16 MiB temporaries, 200 steps;
# needs python3 with numpy: python/.venv's if it exists; it also prints the
# minor faults of each warm step, summed up in a second table), the same
# loop with a 0.2 s idle gap before each step (`numpy_gaps`: where an
# allocator that returns memory when idle re-faults), the project's Python
# test suite (`pytest`: python/.venv with the bindings, scripts/python-setup.sh),
# the ONNX Runtime example of python/examples (`onnx`: skipped when the
# interpreter has no onnxruntime; no model is downloaded), a C++
# producer/consumer program (malloc/bench/prodcons.cpp), a multi-threaded
# C producer/consumer program (malloc/bench/prodcons.c: 4 producers, 4
# consumers, realloc growth, 1-4 MiB temporaries per request), `sort` of a
# generated 1.5 M-line file, `git log --stat` on this repository, and a
# `python3 -c` workload (dicts, lists, strings, json).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$TARGET/preload-bench
REPS=${REPS:-3}
LIMIT=${LIMIT:-120}
PEERS=${PEERS:-1}
PROGRAMS=${PROGRAMS:-numpy numpy_gaps pytest onnx prodcons prodcons_cxx sort git python}
REPO=${REPO:-$ROOT}
mkdir -p "$WORK"

note() { echo "preload-bench: $*" >&2; }

# ---- the libraries ----------------------------------------------------------

if [ -n "${WARMARENA_SO:-}" ]; then
    note "using $WARMARENA_SO"
else
    note "building libwarmarena.so (release)"
    if ! CARGO_TARGET_DIR=$TARGET cargo build --release -q -p warmarena-malloc; then
        note "libwarmarena.so did not build"; exit 1
    fi
    WARMARENA_SO=$TARGET/release/libwarmarena.so
fi
declare -A LIB=([glibc]="" [warmarena]="$WARMARENA_SO")
declare -A GIVEN=([mimalloc]="${MIMALLOC_SO:-}" [jemalloc]="${JEMALLOC_SO:-}")
ALLOCATORS=(glibc warmarena)
if [ "$PEERS" != 0 ]; then
    for peer in ${PEER_LIST:-mimalloc jemalloc}; do
        if [ -n "${GIVEN[$peer]}" ]; then
            LIB[$peer]=${GIVEN[$peer]}
            ALLOCATORS+=("$peer")
            continue
        fi
        note "building the $peer shim (malloc/bench/peers, --features $peer)"
        if (cd malloc/bench/peers && CARGO_TARGET_DIR=$TARGET/preload-peers-$peer \
                cargo build --release -q --features "$peer") >"$WORK/$peer-build.log" 2>&1; then
            LIB[$peer]=$TARGET/preload-peers-$peer/release/libpreload_peers.so
            ALLOCATORS+=("$peer")
        else
            note "skipping $peer: its shim did not build (see $WORK/$peer-build.log)"
        fi
    done
fi

# ---- the programs -----------------------------------------------------------

declare -A CMD
ORDER=()
want() { [[ " $PROGRAMS " == *" $1 "* ]]; }

PY=""
for p in ${PYTHON:-} "$ROOT/python/.venv/bin/python" python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
if want numpy || want numpy_gaps; then
    if [ -n "$PY" ]; then
        cat >"$WORK/numpy_loop.py" <<'EOF'
import numpy as np
a = np.random.default_rng(0).standard_normal((1024, 2048))  # 16 MiB
acc = 0.0
import resource, sys, time
gap = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
faults = []
for step in range(steps):
    if gap:
        time.sleep(gap)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = a * 1.0001 + 0.5          # a 16 MiB temporary per operation
    u = np.sqrt(np.abs(t)) - t
    acc += float(u[step % 1024, step % 2048])
    del t, u
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(f"{acc:.6f}")
warm = sorted(faults[3:])
# To standard error, which the output comparison leaves out.
print(f"faults per warm step: median {warm[len(warm) // 2]}, max {warm[-1]}, mean {sum(warm) / len(warm):.0f}", file=sys.stderr)
EOF
        if want numpy; then CMD[numpy]="$PY $WORK/numpy_loop.py"; ORDER+=(numpy); fi
        if want numpy_gaps; then CMD[numpy_gaps]="$PY $WORK/numpy_loop.py 0.2 40"; ORDER+=(numpy_gaps); fi
    else
        note "skipping numpy: no python3 with numpy (bash scripts/python-setup.sh makes python/.venv)"
    fi
fi

if want pytest; then
    if [ -n "$PY" ] && "$PY" -c "import pytest, warmarena" 2>/dev/null; then
        # The verdict only (timings in pytest's output differ run to run).
        CMD[pytest]="sh -c '$PY -m pytest -q -p no:cacheprovider $ROOT/python/tests >/dev/null 2>&1; echo pytest exit \$?'"
        ORDER+=(pytest)
    else
        note "skipping pytest: ${PY:-python3} has no pytest or no warmarena bindings (bash scripts/python-setup.sh)"
    fi
fi

if want onnx; then
    if [ -n "$PY" ] && "$PY" -c "import onnxruntime, warmarena" 2>/dev/null; then
        CMD[onnx]="$PY $ROOT/python/examples/onnxruntime_outputs.py"; ORDER+=(onnx)
    else
        note "skipping onnx: ${PY:-python3} has no onnxruntime (or no warmarena bindings); nothing is downloaded"
    fi
fi

if want prodcons_cxx; then
    if command -v c++ >/dev/null 2>&1 && c++ -O2 -pthread -o "$WORK/prodcons_cxx" malloc/bench/prodcons.cpp; then
        CMD[prodcons_cxx]="$WORK/prodcons_cxx 4 4 20000"; ORDER+=(prodcons_cxx)
    else
        note "skipping prodcons_cxx: no C++ compiler"
    fi
fi

if want prodcons; then
    if command -v cc >/dev/null 2>&1 && cc -O2 -pthread -o "$WORK/prodcons" malloc/bench/prodcons.c; then
        CMD[prodcons]="$WORK/prodcons 4 4 3000"; ORDER+=(prodcons)
    else
        note "skipping prodcons: no C compiler"
    fi
fi

if want sort; then
    if [ ! -s "$WORK/sort-input.txt" ]; then
        awk 'BEGIN { srand(42); for (i = 0; i < 1500000; i++)
            printf "%d %s%s\n", int(rand() * 1e9), substr("abcdefghijklmnopqrstuvwxyz", int(rand() * 26) + 1, 4), i % 97 }' \
            >"$WORK/sort-input.txt"
    fi
    CMD[sort]="sort -S 256M --parallel=2 $WORK/sort-input.txt"; ORDER+=(sort)
fi

if want git; then
    if command -v git >/dev/null 2>&1 && REV=$(git -C "$REPO" rev-parse HEAD 2>/dev/null); then
        CMD[git]="git -C $REPO log --stat --no-color -n 3000 $REV"; ORDER+=(git)
    else
        note "skipping git: no git or not a repository"
    fi
fi

if want python; then
    if command -v python3 >/dev/null 2>&1; then
        cat >"$WORK/py_workload.py" <<'EOF'
import json
d = {}
for i in range(300000):
    d[str(i)] = [i] * (i % 7)
s = sorted(d, key=lambda k: (len(d[k]), k))
text = json.dumps(d)
words = " ".join(k * 3 for k in s[:100000]).split()
print(len(s), s[:3], sum(len(v) for v in d.values()), len(text), len(words))
EOF
        CMD[python]="python3 $WORK/py_workload.py"; ORDER+=(python)
    else
        note "skipping python: no python3"
    fi
fi

# ---- measuring --------------------------------------------------------------

# One run: prints "elapsed_s max_rss_kib minor_faults", stdout to $2.
if [ -x /usr/bin/time ] && /usr/bin/time -f "%e" true 2>/dev/null; then
    measure() { # lib out cmd...
        local lib=$1 out=$2; shift 2
        timeout "$LIMIT" /usr/bin/time -f "%e %M %R" -o "$WORK/time.txt" \
            env ${lib:+LD_PRELOAD=$lib} "$@" >"$out" 2>"$out.err" || { echo "fail"; return; }
        cat "$WORK/time.txt"
    }
elif command -v python3 >/dev/null 2>&1; then
    cat >"$WORK/measure.py" <<'EOF'
import os, subprocess, sys, time
out = sys.argv[1]; cmd = sys.argv[2:]
t = time.monotonic()
with open(out, "wb") as o, open(out + ".err", "wb") as e:
    p = subprocess.Popen(cmd, stdout=o, stderr=e)
    _, status, ru = os.wait4(p.pid, 0)
el = time.monotonic() - t
print("fail" if status else f"{el:.2f} {ru.ru_maxrss} {ru.ru_minflt}")
EOF
    measure() {
        local lib=$1 out=$2; shift 2
        timeout "$LIMIT" python3 "$WORK/measure.py" "$out" env ${lib:+LD_PRELOAD=$lib} "$@" || echo "fail"
    }
else
    note "neither GNU time nor python3: cannot measure RSS and faults"; exit 1
fi

echo
echo "| program | allocator | elapsed (s, best of $REPS) | max RSS (MiB) | minor faults | output = glibc's |"
echo "|---|---|---:|---:|---:|---|"
for prog in "${ORDER[@]}"; do
    for alloc in "${ALLOCATORS[@]}"; do
        best=""; rss=""; flt=""; failed=0
        out="$WORK/out.$prog.$alloc"
        for ((r = 0; r < REPS; r++)); do
            # The command is a word list (pytest's holds a quoted sh -c).
            res=$(eval "measure \"\${LIB[\$alloc]}\" \"\$out\" ${CMD[$prog]}")
            if [ "$res" = fail ]; then failed=1; break; fi
            read -r el m f <<<"$res"
            if [ -z "$best" ] || awk -v a="$el" -v b="$best" 'BEGIN { exit !(a < b) }'; then
                best=$el; rss=$m; flt=$f
            fi
        done
        if [ "$failed" = 1 ]; then
            echo "| $prog | $alloc | failed (see $out.err) | | | |"
            continue
        fi
        same=yes
        [ "$alloc" != glibc ] && ! cmp -s "$out" "$WORK/out.$prog.glibc" && same=NO
        echo "| $prog | $alloc | $best | $(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }') | $flt | $same |"
    done
done
if [ -n "${CMD[numpy]:-}${CMD[numpy_gaps]:-}" ]; then
    echo
    echo "| NumPy loop | allocator | minor faults per warm step |"
    echo "|---|---|---|"
    for prog in numpy numpy_gaps; do
        [ -n "${CMD[$prog]:-}" ] || continue
        for alloc in "${ALLOCATORS[@]}"; do
            echo "| $prog | $alloc | $(grep -h 'faults per warm step' "$WORK/out.$prog.$alloc.err" 2>/dev/null | tail -1 | sed 's/faults per warm step: //') |"
        done
    done
fi
echo
echo "Machine: $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(uname -sr); $(ldd --version 2>/dev/null | head -1); $(date -u +%Y-%m-%d)"
