#!/usr/bin/env python3
"""Online placement policies for the execution heap, simulated.

Replays traces (MiniMalloc CSV: id,lower,upper,size) the way the replay
test does (each buffer allocated at `lower`, freed at `upper`, frees of a
step first) through a model of one heap segment: pieces of 64 KiB and up
(smaller requests go to the small-class runs), page-rounded, split from a
free extent, coalesced with free neighbours on free. It prints, per trace
and policy, the segment's mark (the highest byte ever placed: what the heap
materializes) over the live peak of heap bytes, the figure the report's
"held / live peak" shows for dynamic mode.

Policies:
  bf        best fit, lowest address on ties, piece at the extent's start
            (the heap's policy, `src/arena/heap.rs`, without its scan limit)
  ff        address-ordered first fit
  bf_high   best fit, pieces placed at the high end of a hole
  wf_below  worst fit among holes below the mark, else the lowest fit

Usage: python3 scripts/heap_policy.py [DATA_DIR]
(DATA_DIR defaults to $WARMARENA_DATA or ../shared/data; the built-in CNN
model is generated the way `cli/src/trace.rs::synthetic_cnn` does.)
"""

import bisect
import csv
import glob
import os
import statistics
import sys

PAGE = 4096
SMALL_MAX = 61440  # the largest small-class capacity (below 64 KiB)


def cnn(scale):
    """The report's built-in CNN-shaped model (batch 8, f32)."""
    bufs, step = [], 0
    stages = [(112, 64, 2), (56, 256, 3), (28, 512, 4), (14, 1024, 6), (7, 2048, 3)]

    def size(hw, c):
        return max(int(8 * hw * hw * c * 4 * scale), 64)

    prev = size(224, 3)
    for hw, c, blocks in stages:
        for _ in range(blocks):
            block_in = cur = step
            for k in range(3):
                s = size(hw, c if k == 2 else c // 4)
                bufs.append((cur, cur + 1, s // 2 + 4096))
                bufs.append((cur, cur + 2, s))
                cur += 1
            bufs.append((max(block_in - 1, 0), cur + 1, prev))
            prev = size(hw, c)
            bufs.append((cur, cur + 2, prev))
            step = cur + 1
    bufs.append((step, step + 2, size(1, 2048)))
    bufs.append((step + 1, step + 3, 8 * 1000 * 4))
    return bufs


def load(path):
    with open(path) as f:
        return [(int(r["lower"]), int(r["upper"]), int(r["size"])) for r in csv.DictReader(f)]


def events(bufs):
    ev = []
    for i, (lo, up, s) in enumerate(bufs):
        if s > 0:
            ev.append((lo, 1, i))
            ev.append((up, 0, i))
    ev.sort()
    return ev


def choose(free, length, policy, mark):
    """(index of the extent, address of the piece)."""
    fits = [k for k, (_, l) in enumerate(free) if l >= length]
    top = len(free) - 1
    if policy == "ff":
        k = fits[0]
        return k, free[k][0]
    if policy == "wf_below":
        below = [k for k in fits if free[k][0] + length <= mark]
        k = max(below, key=lambda k: (free[k][1], -free[k][0])) if below else fits[0]
        return k, free[k][0]
    k = min(fits, key=lambda k: (free[k][1], free[k][0]))
    a, l = free[k]
    if policy == "bf_high" and k != top:
        return k, a + l - length
    return k, a


def simulate(bufs, policy, scales):
    """Mark over live peak for the runs of `scales` in turn (one segment)."""
    free = [(0, 1 << 50)]
    live, mark, cur, peak = {}, 0, 0, 0
    for sc in scales:
        for _, is_alloc, i in events(bufs):
            s = int(bufs[i][2] * sc)
            if s <= SMALL_MAX:
                continue
            length, key = -(-s // PAGE) * PAGE, (sc, i)
            if is_alloc:
                k, a = choose(free, length, policy, mark)
                fa, fl = free[k]
                parts = []
                if a > fa:
                    parts.append((fa, a - fa))
                if a + length < fa + fl:
                    parts.append((a + length, fa + fl - a - length))
                free[k : k + 1] = parts
                live[key] = (a, length)
                mark, cur = max(mark, a + length), cur + length
                peak = max(peak, cur)
            elif key in live:
                a, length = live.pop(key)
                cur -= length
                k = bisect.bisect(free, (a, 0))
                merged = length
                if k < len(free) and free[k][0] == a + length:
                    merged += free.pop(k)[1]
                if k > 0 and sum(free[k - 1]) == a:
                    free[k - 1] = (free[k - 1][0], free[k - 1][1] + merged)
                else:
                    free.insert(k, (a, merged))
    return mark / peak if peak else 1.0


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("WARMARENA_DATA", "../shared/data")
    traces = {"built-in cnn (report)": cnn(0.5)}
    for p in sorted(glob.glob(os.path.join(root, "planner", "*", "*.csv"))):
        if os.path.getsize(p) <= 3_000_000:  # larger files take minutes in Python
            traces[os.path.relpath(p, os.path.join(root, "planner"))] = load(p)
    policies = ["bf", "ff", "bf_high", "wf_below"]
    print(f"{'trace':34}" + "".join(f"{p:>10}" for p in policies) + "   (alternating x1, x3/4, x2)")
    ratios = {p: [] for p in policies}
    for name, bufs in traces.items():
        biggest = max(s for _, _, s in bufs)
        # Small traces are scaled so their buffers reach the heap.
        sc = (4 << 20) / biggest if biggest < (1 << 20) else 1.0
        one = [simulate(bufs, p, [sc]) for p in policies]
        alt = [simulate(bufs, p, [sc, 0.75 * sc, 2 * sc]) for p in policies]
        for p, v in zip(policies, one):
            ratios[p].append(v)
        print(f"{name:34}" + "".join(f"{v:10.3f}" for v in one) + "   " + " ".join(f"{v:.3f}" for v in alt))
    print(f"{'geometric mean':34}" + "".join(f"{statistics.geometric_mean(ratios[p]):10.3f}" for p in policies))


if __name__ == "__main__":
    main()
