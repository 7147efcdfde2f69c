//! Unit tests of learned placement (`learn.rs`): a repeated epoch is
//! planned below best fit's mark and repeats warm; a different epoch falls
//! back to best fit and repeats warm too; a trim forgets what plans held.
//! Under Miri only the first runs (recording, planning, the release and
//! following, over the heap-backed `os` stand-in): each takes over a
//! minute there.

use crate::{ArenaConfig, ArenaStats, ExecutionArena};
use allocator_api2::alloc::{Allocator, Layout};
use core::ptr::NonNull;

/// The unit of the tests' sizes: 1 MiB, or under Miri (which checks every
/// byte written) the smallest heap piece.
const M: usize = if cfg!(miri) { 64 << 10 } else { 1 << 20 };

fn arena(learn: bool) -> ExecutionArena {
    ExecutionArena::with_config(
        ArenaConfig::default()
            .huge_pages(false)
            .learn_placement(learn),
    )
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Allocate `size` bytes at `align`.
    Take(usize, usize),
    /// Free the `k`-th allocation of the run.
    Give(usize),
}
use Op::{Give, Take};

/// Runs `ops` through allocator-api2, each buffer filled with its index
/// and checked at its free.
fn run(a: &ExecutionArena, ops: &[Op]) {
    let mut bufs: Vec<Option<(NonNull<u8>, Layout)>> = Vec::new();
    for &op in ops {
        match op {
            Take(size, align) => {
                let l = Layout::from_size_align(size, align).unwrap();
                let p = Allocator::allocate(&a, l).unwrap().cast::<u8>();
                // SAFETY: `size` bytes were just allocated.
                unsafe { p.as_ptr().write_bytes(bufs.len() as u8, size) };
                bufs.push(Some((p, l)));
            }
            Give(k) => {
                let (p, l) = bufs[k].take().unwrap();
                // SAFETY: `p` holds `l.size()` bytes written above.
                let s = unsafe { core::slice::from_raw_parts(p.as_ptr(), l.size()) };
                assert!(s.iter().all(|&b| b == k as u8), "buffer {k} kept its bytes");
                // SAFETY: `p` is live and was allocated with `l`.
                unsafe { Allocator::deallocate(&a, p, l) };
            }
        }
    }
    assert!(bufs.iter().all(Option::is_none), "a run frees everything");
}

/// Where each allocation of `ops` landed, as offsets from the first
/// heap segment's base (the buffers are freed at the end).
fn places(a: &ExecutionArena, ops: &[Op]) -> Vec<usize> {
    let mut bufs: Vec<Option<(NonNull<u8>, Layout)>> = Vec::new();
    let mut at = Vec::new();
    for &op in ops {
        match op {
            Take(size, align) => {
                let l = Layout::from_size_align(size, align).unwrap();
                let p = Allocator::allocate(&a, l).unwrap().cast::<u8>();
                // SAFETY: `size` bytes were just allocated.
                unsafe { p.as_ptr().write_bytes(7, size) };
                let base = a.core.lock().heap.segs.first().map_or(0, |g| g.base);
                at.push(p.as_ptr() as usize - base);
                bufs.push(Some((p, l)));
            }
            Give(k) => {
                let (p, l) = bufs[k].take().unwrap();
                // SAFETY: `p` is live and was allocated with `l`.
                unsafe { Allocator::deallocate(&a, p, l) };
            }
        }
    }
    at
}

/// The highest end of the allocations of `ops` placed at `at`.
fn top(at: &[usize], ops: &[Op]) -> usize {
    let sizes = ops.iter().filter_map(|o| match o {
        Take(n, _) => Some(*n),
        Give(_) => None,
    });
    at.iter().zip(sizes).map(|(a, n)| a + n).max().unwrap_or(0)
}

/// Best fit's weak spot: `b` outlives `a`, and `c`, larger than `a`'s
/// hole, goes above `b` (mark 4 MiB, live peak 3 MiB); the planner puts
/// `b` first and `c` over `a`'s place (3 MiB).
fn abc() -> Vec<Op> {
    vec![
        Take(M, 64),
        Take(M, 64),
        Give(0),
        Take(2 * M, 64),
        Give(1),
        Give(2),
    ]
}

/// Warm since `s0`: no new memory, no system call.
fn warm_since(s0: &ArenaStats, s: &ArenaStats) -> bool {
    s.cold_allocations == s0.cold_allocations && s.os == s0.os
}

#[test]
fn a_repeated_run_is_planned_below_best_fits_mark_and_repeats_warm() {
    let (on, off) = (arena(true), arena(false));
    run(&off, &abc());
    let s = off.stats();
    assert_eq!((s.retained_bytes, s.heap_plans), (4 * M, 0), "best fit");
    run(&on, &abc());
    let s1 = on.stats();
    assert_eq!(s1.heap_plans, 1);
    assert_eq!(s1.retained_bytes, 3 * M, "released above the plan");
    assert_eq!(s1.heap_plan_released_bytes, M);
    assert_eq!(s1.peak_live_bytes, 3 * M);
    let first = places(&on, &abc());
    assert_eq!(
        top(&first, &abc()),
        3 * M,
        "the plan's height, not best fit's 4 MiB"
    );
    let s2 = on.stats();
    assert!(warm_since(&s1, &s2), "run 2 warm: {s1:?} {s2:?}");
    assert_eq!(s2.heap_planned_allocations, 3);
    for r in 3..6 {
        assert_eq!(places(&on, &abc()), first, "run {r}");
        let s = on.stats();
        assert!(warm_since(&s1, &s), "run {r} warm");
        assert_eq!(s.retained_bytes, 3 * M);
        assert_eq!(s.heap_planned_allocations, 3 * (r as u64 - 1));
    }
    assert_eq!(on.check_invariants(), Ok(()));
}

#[test]
#[cfg_attr(miri, ignore)] // a minute or more each under Miri; the first test covers the paths
fn a_run_that_differs_falls_back_to_best_fit_and_repeats_warm() {
    let a = arena(true);
    run(&a, &abc());
    // The same first request, then other sizes: the plan is followed for
    // the first request only.
    let other = vec![
        Take(M, 64),
        Take(3 * M, 64),
        Give(0),
        Take(M, 64),
        Give(2),
        Give(1),
    ];
    let s0 = a.stats();
    let p1 = places(&a, &other);
    let s1 = a.stats();
    assert_eq!(s1.heap_planned_allocations, s0.heap_planned_allocations + 1);
    assert_eq!(s1.heap_plans, 1, "its first request has a plan already");
    for r in 0..3 {
        assert_eq!(places(&a, &other), p1, "repeat {r}");
        let s = a.stats();
        assert!(warm_since(&s1, &s), "repeat {r} warm");
        let p = places(&a, &abc());
        assert_eq!(top(&p, &abc()), 3 * M, "the planned run still is");
        assert!(warm_since(&s1, &a.stats()));
    }
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
#[cfg_attr(miri, ignore)] // a minute or more each under Miri; the first test covers the paths
fn alternating_shapes_each_get_a_plan_and_stay_warm() {
    let a = arena(true);
    let x = abc();
    let y: Vec<Op> = abc()
        .into_iter()
        .map(|o| match o {
            Take(n, al) => Take(n + n / 2, al),
            o => o,
        })
        .collect();
    run(&a, &x);
    run(&a, &y);
    let s0 = a.stats();
    assert_eq!(s0.heap_plans, 2);
    let (px, py) = (places(&a, &x), places(&a, &y));
    assert!(warm_since(&s0, &a.stats()));
    for r in 0..4 {
        assert_eq!(places(&a, &x), px, "x, round {r}");
        assert_eq!(places(&a, &y), py, "y, round {r}");
        assert!(warm_since(&s0, &a.stats()), "round {r} warm");
    }
    // Each plan is at its shape's live peak: the larger one's, 4.5 MiB.
    assert_eq!(a.stats().retained_bytes, 3 * M + 3 * M / 2);
}

#[test]
#[cfg_attr(miri, ignore)] // a minute or more each under Miri; the first test covers the paths
fn a_trim_forgets_what_plans_held_and_the_next_run_follows_the_plan() {
    let a = arena(true);
    run(&a, &abc());
    let p = places(&a, &abc());
    a.trim();
    assert_eq!(a.stats().retained_bytes, 0);
    let s0 = a.stats();
    assert_eq!(places(&a, &abc()), p, "planned after the trim too");
    let s1 = a.stats();
    assert!(s1.cold_allocations > s0.cold_allocations, "cold again");
    assert_eq!(s1.retained_bytes, 3 * M);
    assert_eq!(places(&a, &abc()), p);
    assert!(warm_since(&s1, &a.stats()));
}

#[test]
#[cfg_attr(miri, ignore)] // a minute or more each under Miri; the first test covers the paths
fn learning_off_and_pattern_mode_keep_best_fit() {
    let a = arena(false);
    for _ in 0..3 {
        assert_eq!(places(&a, &abc()), [0, M, 2 * M], "best fit");
    }
    let s = a.stats();
    assert_eq!((s.heap_plans, s.heap_planned_allocations), (0, 0));
    assert_eq!(s.retained_bytes, 4 * M);
}

#[test]
#[cfg_attr(miri, ignore)] // a minute or more each under Miri; the first test covers the paths
fn an_epoch_of_one_buffer_or_without_gain_makes_no_plan() {
    let a = arena(true);
    for _ in 0..3 {
        run(&a, &[Take(M, 64), Give(0)]);
        run(&a, &[Take(M, 64), Take(M, 64), Give(0), Give(1)]);
    }
    let s = a.stats();
    assert_eq!((s.heap_plans, s.heap_plan_released_bytes), (0, 0));
    assert_eq!(s.retained_bytes, 2 * M);
}

/// A family of heap-thread workloads, several epochs a run: random sizes
/// (64 KiB to 3 MiB), alignments 64 and 4096, lifetimes random, the heap
/// emptied a few times per run.
fn family(seed: u64) -> Vec<Op> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut ops = Vec::new();
    let mut k = 0usize;
    for _ in 0..1 + next(4) {
        let mut live: Vec<usize> = Vec::new();
        for _ in 0..4 + next(40) {
            if live.is_empty() || (live.len() < 12 && next(3) > 0) {
                let size = (64 << 10) + next(3 * M);
                let align = if next(5) == 0 { 4096 } else { 64 };
                ops.push(Take(size, align));
                live.push(k);
                k += 1;
            } else {
                let j = next(live.len());
                ops.push(Give(live.swap_remove(j)));
            }
        }
        while let Some(j) = live.pop() {
            ops.push(Give(j));
        }
    }
    ops
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_family_of_runs_repeats_warm_from_the_second_run_and_holds_less() {
    let (mut held_on, mut held_off, mut planned) = (0usize, 0usize, 0u64);
    for seed in 0..60 {
        let ops = family(seed);
        let (on, off) = (arena(true), arena(false));
        run(&on, &ops);
        run(&off, &ops);
        let s1 = on.stats();
        let p = places(&on, &ops);
        for r in 0..3 {
            assert_eq!(places(&on, &ops), p, "seed {seed}, run {r}");
            assert!(warm_since(&s1, &on.stats()), "seed {seed}, run {r} warm");
        }
        assert_eq!(on.check_invariants(), Ok(()));
        let s = on.stats();
        held_on += s.retained_bytes;
        held_off += off.stats().retained_bytes;
        planned += s.heap_planned_allocations;
    }
    assert!(planned > 0, "the family is planned somewhere");
    assert!(
        held_on < held_off,
        "held {held_on} with learning, {held_off} without"
    );
}
