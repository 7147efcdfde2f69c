//! Which operations take the arena's shared lock, counted by
//! `ArenaStats::locked_operations`: the warm small-object hits (the thread
//! cache, through the handle and through allocator-api2) and pattern mode's
//! planned hits take none; a large pair on the execution heap takes it
//! once each way. The share of operations that take the lock is what
//! limits how many cores one arena serves at once, so these counts are
//! the scalability contract, checked without timing anything.

use allocator_api2::alloc::{Allocator, Layout};
use warmarena::{ArenaConfig, ExecutionArena, IoArena};

/// Locks taken by `f`, less the `stats` call that reads the count after it.
fn locks_taken(locked: impl Fn() -> u64, f: impl FnOnce()) -> u64 {
    let before = locked();
    f();
    locked() - before - 1
}

#[test]
fn warm_small_pairs_through_the_handle_take_no_lock() {
    for size in [16, 256, 4096, 60 << 10] {
        let arena = ExecutionArena::new();
        drop(arena.allocate(size, 64).unwrap());
        let n = locks_taken(
            || arena.stats().locked_operations,
            || {
                for _ in 0..10_000 {
                    let mut a = arena.allocate(size, 64).unwrap();
                    a.as_mut_slice()[0] = 1;
                }
            },
        );
        assert_eq!(n, 0, "size {size}");
        let io = IoArena::new();
        drop(io.allocate(size, 64).unwrap());
        let n = locks_taken(
            || io.stats().locked_operations,
            || {
                for _ in 0..10_000 {
                    drop(io.allocate(size, 64).unwrap());
                }
            },
        );
        assert_eq!(n, 0, "I/O arena, size {size}");
    }
}

#[test]
fn warm_small_pairs_through_allocator_api2_take_no_lock() {
    let arena = ExecutionArena::new();
    let layouts: Vec<Layout> = [24, 100, 1000, 5000]
        .iter()
        .map(|&s| Layout::from_size_align(s, 8).unwrap())
        .collect();
    let pairs = |n: usize| {
        for _ in 0..n {
            for &l in &layouts {
                let p = Allocator::allocate(&arena, l).unwrap();
                // SAFETY: `p` was allocated just now with layout `l`.
                unsafe { Allocator::deallocate(&arena, p.cast(), l) };
            }
        }
    };
    pairs(1);
    assert_eq!(
        locks_taken(|| arena.stats().locked_operations, || pairs(5_000)),
        0
    );
    // A batch of live buffers deeper than a thread cache's bin refills and
    // flushes under the lock: a few times per bin's worth, not per buffer.
    let l = layouts[1];
    let batch = |n: usize| {
        let v: Vec<_> = (0..n)
            .map(|_| Allocator::allocate(&arena, l).unwrap())
            .collect();
        for p in v {
            // SAFETY: each `p` was allocated above with layout `l`.
            unsafe { Allocator::deallocate(&arena, p.cast(), l) };
        }
    };
    batch(1000);
    let n = locks_taken(|| arena.stats().locked_operations, || batch(1000));
    assert!(n <= 2000 / 12, "{n} locks for 2000 operations");
}

#[test]
fn planned_hits_take_no_lock_but_the_run_boundary() {
    let arena = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    let run = |arena: &ExecutionArena| {
        arena.begin_run();
        let mut live = Vec::new();
        for i in 0..1000usize {
            live.push(arena.allocate(64 + (i % 7) * 1000, 64).unwrap());
            if live.len() > 4 {
                live.remove(0);
            }
        }
    };
    run(&arena); // learned
    run(&arena); // planned at its boundary, block made
    run(&arena);
    let s = arena.stats();
    let n = locks_taken(|| arena.stats().locked_operations, || run(&arena));
    assert!(
        arena.stats().pattern_hits > s.pattern_hits,
        "the run was a hit"
    );
    // The boundary (and the run's first and last events, which claim and
    // give back the cursor) lock; the 2000 planned events between do not.
    assert!(n <= 4, "{n} locks for a planned run of 2000 events");
}

#[test]
fn a_large_pair_on_the_execution_heap_takes_no_lock_while_alone() {
    let arena = ExecutionArena::new();
    for size in [64 << 10, 1 << 20, 24 << 20] {
        drop(arena.allocate(size, 64).unwrap());
        // The only piece in its segment: kept back by the heap's thread
        // and handed out again, the heap's placement unchanged.
        let n = locks_taken(
            || arena.stats().locked_operations,
            || {
                for _ in 0..100 {
                    drop(arena.allocate(size, 64).unwrap());
                }
            },
        );
        assert_eq!(n, 0, "size {size}");
        // With another piece live below it: the heap serves and takes it
        // back, once each way.
        let keep = arena.allocate(size, 64).unwrap();
        drop(arena.allocate(size, 64).unwrap());
        let n = locks_taken(
            || arena.stats().locked_operations,
            || {
                for _ in 0..100 {
                    drop(arena.allocate(size, 64).unwrap());
                }
            },
        );
        assert_eq!(n, 200, "size {size}");
        drop(keep);
    }
}
