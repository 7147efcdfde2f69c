//! The run-owning small path through the arena's public face.

use crate::{ArenaConfig, ExecutionArena, IoArena};
use std::sync::{Arc, Barrier};

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(ArenaConfig::default().run_ownership(true))
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn a_warm_run_takes_no_new_memory_and_counts_exactly() {
    let a = arena();
    for run in 0..3 {
        let bufs: Vec<_> = (0..1000)
            .map(|i| a.allocate(16 + i % 700, 8).unwrap())
            .collect();
        let s = a.stats();
        assert_eq!(s.live_buffers, 1000, "run {run}");
        drop(bufs);
        let s = a.stats();
        assert_eq!((s.live_bytes, s.live_buffers), (0, 0), "run {run}");
        assert_eq!(s.frees, 1000 * (run + 1), "run {run}");
        assert_eq!(
            s.cold_allocations, 1000,
            "run {run}: only the first run is cold"
        );
        assert_eq!(s.warm_allocations, 1000 * run);
        assert!(s.retained_bytes > 0);
    }
}

#[test]
fn peak_is_exact_on_one_thread() {
    let a = arena();
    let x = a.allocate(100, 8).unwrap();
    let y = a.allocate(1000, 8).unwrap();
    let peak = x.capacity() + y.capacity();
    drop(x);
    let z = a.allocate(50, 8).unwrap();
    assert_eq!(a.stats().peak_live_bytes, peak);
    drop((y, z));
    assert_eq!(a.stats().peak_live_bytes, peak);
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn frees_on_another_thread_come_back_to_the_owner() {
    let a = Arc::new(arena());
    let bufs: Vec<_> = (0..5000).map(|_| a.allocate(64, 8).unwrap()).collect();
    let cold = a.stats().cold_allocations;
    std::thread::scope(|s| {
        s.spawn(move || drop(bufs));
    });
    let s = a.stats();
    assert_eq!((s.live_buffers, s.frees), (0, 5000));
    // The remote frees flagged the class: the owner collects them all
    // before it takes an untouched slot.
    let again: Vec<_> = (0..5000).map(|_| a.allocate(64, 8).unwrap()).collect();
    assert_eq!(
        a.stats().cold_allocations,
        cold,
        "no new slot for a freed one"
    );
    drop(again);
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn a_thread_that_exits_leaves_its_runs_to_the_next() {
    let a = Arc::new(arena());
    for round in 0..4 {
        let a2 = Arc::clone(&a);
        std::thread::spawn(move || {
            let v: Vec<_> = (0..3000)
                .map(|i| a2.allocate(32 + i % 200, 8).unwrap())
                .collect();
            drop(v);
        })
        .join()
        .unwrap();
        let s = a.stats();
        assert_eq!(s.live_buffers, 0, "round {round}");
        assert_eq!(
            s.cold_allocations, 3000,
            "round {round}: later threads adopt the runs"
        );
    }
}

#[test]
fn buffers_kept_past_their_threads_exit_are_freed_through_the_arena() {
    let a = Arc::new(arena());
    let a2 = Arc::clone(&a);
    let kept = std::thread::spawn(move || {
        (0..500)
            .map(|_| a2.allocate(200, 8).unwrap())
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    assert_eq!(a.stats().live_buffers, 500);
    drop(kept); // into runs the arena owns: under its lock
    let s = a.stats();
    assert_eq!((s.live_buffers, s.live_bytes), (0, 0));
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn an_arena_dropped_while_other_threads_hold_buffers_is_freed_once() {
    for _ in 0..20 {
        let a = arena();
        let bufs: Vec<_> = (0..300).map(|_| a.allocate(48, 8).unwrap()).collect();
        let barrier = Arc::new(Barrier::new(2));
        let b2 = Arc::clone(&barrier);
        let t = std::thread::spawn(move || {
            b2.wait();
            drop(bufs);
        });
        drop(a);
        barrier.wait();
        t.join().unwrap();
    }
}

#[test]
fn an_arena_dropped_on_a_thread_with_a_heap_is_freed_when_the_other_heap_leaves() {
    let a = arena();
    let x = a.allocate(64, 8).unwrap();
    let bufs: Vec<_> = (0..100).map(|_| a.allocate(64, 8).unwrap()).collect();
    // Another thread frees (and so keeps a heap for the arena).
    std::thread::scope(|s| {
        s.spawn(move || drop(bufs));
    });
    drop(a);
    drop(x); // the last buffer: the body goes with this thread's heap
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn trim_releases_every_empty_run_and_reaches_other_threads() {
    let a = Arc::new(arena());
    let a2 = Arc::clone(&a);
    let (go, done) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (go2, done2) = (Arc::clone(&go), Arc::clone(&done));
    let t = std::thread::spawn(move || {
        let v: Vec<_> = (0..4000).map(|_| a2.allocate(512, 8).unwrap()).collect();
        drop(v);
        go2.wait();
        done2.wait();
        // Its next operation honours the trim.
        drop(a2.allocate(512, 8).unwrap());
    });
    go.wait();
    let before = a.stats().retained_bytes;
    assert!(before >= 4000 * 512 - 512 * 1024, "{before}");
    a.trim();
    done.wait();
    t.join().unwrap();
    a.trim();
    let s = a.stats();
    assert_eq!(s.live_bytes, 0);
    assert!(
        s.retained_bytes < 64 << 10,
        "{} retained after trims",
        s.retained_bytes
    );
}

#[test]
fn io_arenas_and_allocator_api2_use_the_same_path() {
    let io = IoArena::with_config(ArenaConfig::default().run_ownership(true));
    let mut v = allocator_api2::vec::Vec::new_in(&io);
    for i in 0..1000u32 {
        v.push(i);
    }
    let b = allocator_api2::boxed::Box::new_in(7u64, &io);
    assert!(io.stats().live_buffers >= 2);
    drop((v, b));
    assert_eq!(io.stats().live_bytes, 0);
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn many_threads_free_each_others_buffers() {
    let a = Arc::new(arena());
    let n = 4;
    let (tx, rx): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| std::sync::mpsc::channel::<Vec<crate::Allocation>>())
        .unzip();
    let mut rx = rx.into_iter().map(Some).collect::<Vec<_>>();
    std::thread::scope(|s| {
        for i in 0..n {
            let a = Arc::clone(&a);
            let next = tx[(i + 1) % n].clone();
            let mine = rx[i].take().unwrap();
            s.spawn(move || {
                for round in 0..50 {
                    let v: Vec<_> = (0..200)
                        .map(|k| a.allocate(16 + (k * 37 + round) % 900, 8).unwrap())
                        .collect();
                    next.send(v).unwrap();
                    drop(mine.recv().unwrap());
                }
            });
        }
        drop(tx);
    });
    let s = a.stats();
    assert_eq!((s.live_buffers, s.live_bytes), (0, 0));
    assert_eq!(s.frees, (n * 50 * 200) as u64);
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn a_moved_growth_is_counted_without_the_lock() {
    let a = arena();
    let grow = || {
        let mut v = allocator_api2::vec::Vec::new_in(&a);
        for i in 0..2000u32 {
            v.push(i as u8);
        }
    };
    grow(); // the heap and its runs exist now
    let (locks, copies) = (a.stats().locked_operations, a.stats().copies);
    for _ in 0..10 {
        grow();
    }
    let s = a.stats();
    assert!(s.copies - copies >= 50, "growths moved the vector");
    assert!(
        s.locked_operations - locks <= 10,
        "a warm growth takes no lock per copy"
    );
}

#[test]
#[cfg_attr(miri, ignore)] // thousands of buffers: minutes under Miri
fn a_consumer_freeing_a_producers_buffers_keeps_later_runs_warm() {
    let a = Arc::new(arena());
    let (tx, rx) = std::sync::mpsc::channel::<Vec<crate::Allocation>>();
    let consumer = std::thread::spawn(move || {
        for v in rx {
            drop(v);
        }
    });
    let mut cold = Vec::new();
    for _ in 0..8 {
        let bufs: Vec<_> = (0..2000)
            .map(|i| a.allocate(24 + (i * 31) % 1000, 8).unwrap())
            .collect();
        tx.send(bufs).unwrap();
        // The run ends when the consumer has freed its outputs.
        while a.stats().live_buffers != 0 {
            std::thread::yield_now();
        }
        cold.push(a.stats().cold_allocations);
    }
    drop(tx);
    consumer.join().unwrap();
    assert!(
        cold.iter().all(|&c| c == cold[0]),
        "later runs took new slots: {cold:?}"
    );
}

#[test]
fn reset_peak_restarts_from_the_live_bytes() {
    let a = arena();
    let x = a.allocate(100, 8).unwrap();
    drop(a.allocate(1000, 8).unwrap());
    a.reset_peak();
    assert_eq!(a.stats().peak_live_bytes, x.capacity());
    let y = a.allocate(50, 8).unwrap();
    assert_eq!(a.stats().peak_live_bytes, x.capacity() + y.capacity());
}

#[test]
#[cfg_attr(miri, ignore)] // seventy arenas: slow under Miri
fn a_thread_using_more_arenas_than_it_keeps_heaps_for_goes_through_the_lock() {
    let arenas: Vec<_> = (0..70).map(|_| arena()).collect();
    for round in 0..3 {
        let bufs: Vec<_> = arenas
            .iter()
            .flat_map(|a| (0..300).map(move |i| a.allocate(16 + i % 200, 8).unwrap()))
            .collect();
        drop(bufs);
        for a in &arenas {
            let s = a.stats();
            assert_eq!((s.live_buffers, s.frees), (0, 300 * (round + 1)));
        }
    }
}

#[test]
fn a_run_that_empties_and_refills_by_turns_takes_no_lock() {
    let a = arena();
    // 16 KiB slots: a run holds at most 16, so a few hundred fill many.
    let mut bufs: Vec<_> = (0..100).map(|_| a.allocate(16 << 10, 8).unwrap()).collect();
    let run_of = |p: *const u8| p as usize & !(crate::arena::RUN_LEN - 1);
    let first = run_of(bufs[0].as_ptr());
    let last = run_of(bufs[99].as_ptr());
    assert_ne!(
        first, last,
        "test premise: the first run is not the current one"
    );
    let before = a.stats().locked_operations;
    for _ in 0..10 {
        // Every buffer of the first run goes, so the run empties; as many
        // come back, from the same run (the class's spare).
        let (gone, kept): (Vec<_>, Vec<_>) =
            bufs.into_iter().partition(|b| run_of(b.as_ptr()) == first);
        let n = gone.len();
        drop(gone);
        bufs = kept;
        bufs.extend((0..n).map(|_| a.allocate(16 << 10, 8).unwrap()));
        assert!(bufs[bufs.len() - n..]
            .iter()
            .all(|b| run_of(b.as_ptr()) == first));
    }
    // The one lock is the `stats()` call above.
    assert_eq!(a.stats().locked_operations - before, 1);
}
