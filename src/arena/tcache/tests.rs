//! The front end against its promises: counts exact on one thread, frees
//! on another thread, trim and the cap reaching other threads' caches,
//! thread exit, and an arena dropped while other threads cache its buffers.

use crate::arena::shared::destroyed;
use crate::{ArenaConfig, ExecutionArena};
use std::sync::{Arc, Barrier};

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(
        ArenaConfig::default()
            .run_ownership(false)
            .huge_pages(false),
    )
}

#[test]
fn warm_small_pairs_hit_the_cache_and_count_exactly() {
    // A handle keeps its small class in what was padding, and its drop
    // tries that class's bin first.
    assert_eq!(core::mem::size_of::<crate::Allocation>(), 40);
    let a = arena();
    drop(a.allocate(100, 8).unwrap());
    let before = a.stats();
    for _ in 0..1000 {
        let x = a.allocate(100, 8).unwrap();
        assert!(x.served_warm());
        drop(x);
    }
    let s = a.stats();
    assert_eq!(s.cold_allocations, 1);
    assert_eq!(s.warm_allocations, 1000);
    assert_eq!(s.frees, 1001);
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!((s.retained_bytes, s.retained_buffers), (112, 1));
    assert_eq!(s.os, before.os, "no system call while warm");
    assert_eq!(s.peak_live_bytes, 112);
    // The one locked operation is `stats()` itself.
    assert_eq!(s.locked_operations, before.locked_operations + 1);
    // Dropped on another thread (no credit there): it still comes back.
    let x = a.allocate(100, 8).unwrap();
    std::thread::spawn(move || drop(x)).join().unwrap();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers, s.frees), (0, 0, 1002));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_thread_streaming_past_its_spill_locks_once_a_bin() {
    // 64 bins' worth (24 under Miri) of 100-byte buffers (class 112: a
    // bin of 64, a spill of 18 bins' worth) allocated, then freed, warm:
    // the streak outgrows the spill, which goes to the depot with it
    // (`spill.rs`), and after the first move each way every refill and
    // every flush moves the whole bin.
    use crate::arena::tcache::bin::BIN_SLOTS;
    use crate::arena::tcache::spill::spill_limit;
    let a = arena();
    let n = if cfg!(miri) { 24 } else { 64 } * BIN_SLOTS;
    let run = || {
        let v: Vec<_> = (0..n).map(|_| a.allocate(100, 8).unwrap()).collect();
        drop(v);
    };
    run();
    run();
    let before = a.stats().locked_operations;
    run();
    // At most one lock per bin's worth each way, a half bin's move first
    // each way, and the `stats()` that reads the count; at least one per
    // bin's worth past the spill's each way.
    let locks = a.stats().locked_operations - before;
    let per_way = (n - BIN_SLOTS / 2).div_ceil(BIN_SLOTS) as u64 + 1;
    assert!(
        locks <= 2 * per_way + 1,
        "{locks} locks for {n} buffers each way"
    );
    let past = ((n - spill_limit(112)) / BIN_SLOTS) as u64;
    assert!(locks >= 2 * past - 4, "{locks} locks");
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_streak_within_the_spill_takes_no_lock_and_keeps_its_order() {
    // A run of 100-byte buffers (class 112) as long as the spill holds,
    // freed in allocation order: once the first run has made them (and
    // the spill's room, at the first new buffer) no operation takes the
    // lock, the buffers come back rising run after run, and every count
    // stays exact.
    use crate::arena::tcache::bin::BIN_SLOTS;
    use crate::arena::tcache::spill::spill_limit;
    let a = arena();
    let n = if cfg!(miri) {
        4 * BIN_SLOTS
    } else {
        spill_limit(112)
    };
    let run = || {
        let v: Vec<_> = (0..n).map(|_| a.allocate(100, 8).unwrap()).collect();
        let addrs: Vec<usize> = v.iter().map(|b| b.as_ptr() as usize).collect();
        drop(v);
        addrs
    };
    run();
    let before = a.stats();
    for _ in 0..3 {
        let addrs = run();
        // The bin's worth from the run before first, newest first; then rising.
        let rising = addrs.windows(2).filter(|w| w[0] < w[1]).count();
        assert!(rising >= n - 1 - BIN_SLOTS, "{rising} of {}", n - 1);
    }
    let s = a.stats();
    assert_eq!(
        s.locked_operations,
        before.locked_operations + 1,
        "only `stats()`"
    );
    assert_eq!(s.os, before.os, "no system call while warm");
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!((s.retained_bytes, s.retained_buffers), (n * 112, n));
    assert_eq!(s.frees, before.frees + 3 * n as u64);
    assert_eq!(s.cold_allocations, n as u64);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn trim_and_thread_exit_reach_what_a_spill_holds() {
    // A thread's streak, set aside in its spill (no lock), counts as
    // retained; a trim on the main thread releases it at that thread's
    // next operation, and what it spills after that comes back when it
    // exits.
    use crate::arena::tcache::bin::BIN_SLOTS;
    let a = arena();
    let n = 8 * BIN_SLOTS;
    let step = Arc::new(Barrier::new(2));
    let (a2, s2) = (a.clone(), Arc::clone(&step));
    let t = std::thread::spawn(move || {
        for _ in 0..3 {
            let v: Vec<_> = (0..n).map(|_| a2.allocate(100, 8).unwrap()).collect();
            drop(v);
        }
        s2.wait(); // spilled here
        s2.wait(); // trimmed there
        drop(a2.allocate(100, 8).unwrap());
        s2.wait(); // honoured here
        s2.wait(); // counted there
        let v: Vec<_> = (0..n).map(|_| a2.allocate(100, 8).unwrap()).collect();
        drop(v);
    });
    step.wait();
    let s = a.stats();
    assert_eq!((s.retained_bytes, s.retained_buffers), (n * 112, n));
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    a.trim();
    step.wait();
    step.wait();
    let s = a.stats();
    assert_eq!(s.trimmed_bytes, n * 112, "every spilled buffer was trimmed");
    assert_eq!((s.retained_bytes, s.retained_buffers), (112, 1));
    step.wait();
    t.join().unwrap();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!((s.retained_bytes, s.retained_buffers), (n * 112, n));
    assert_eq!(a.check_invariants(), Ok(()));
    // Every cached byte came back to the arena at the exit: what is cached
    // now is the depot's.
    let st = a.core.lock();
    assert_eq!(st.cached_bytes.get(), st.depot.bytes());
}

#[test]
fn the_peak_stays_exact_when_locked_operations_come_between_cached_ones() {
    // A cache reads the arena's live bytes from its own view, which this
    // thread's unlocks keep current while the cache is the thread's
    // current one, and which is read afresh when it becomes current again.
    let (a, b) = (arena(), arena());
    drop(a.allocate(100, 8).unwrap());
    drop(b.allocate(100, 8).unwrap());
    drop(a.allocate(100, 8).unwrap()); // a's cache is current

    // A locked allocation on a while a's cache is current, then a hit.
    let big = a.allocate(1 << 20, 64).unwrap();
    let small = a.allocate(100, 8).unwrap();
    assert!(small.served_warm());
    assert_eq!(a.stats().peak_live_bytes, big.capacity() + 112);
    drop((big, small));
    // A locked allocation on a while b's cache is current, then a hit on a.
    drop(b.allocate(100, 8).unwrap());
    let big = a.allocate(2 << 20, 64).unwrap();
    let small = a.allocate(100, 8).unwrap();
    assert!(small.served_warm());
    assert_eq!(a.stats().peak_live_bytes, big.capacity() + 112);
    drop((big, small));
    assert_eq!(a.check_invariants(), Ok(()));
    assert_eq!(b.check_invariants(), Ok(()));
}

#[test]
fn cached_hand_outs_raise_the_peak_exactly_after_a_reset() {
    // A hit computes the live bytes only when its held bytes fall below the
    // view's floor; a reset of the peak (and each unlock) must make the
    // next hits compute again.
    let a = arena();
    let bufs: Vec<_> = (0..6).map(|_| a.allocate(100, 8).unwrap()).collect();
    let cap = bufs[0].capacity();
    drop(bufs); // all six into the cache
    assert_eq!(a.stats().peak_live_bytes, 6 * cap);
    a.reset_peak();
    assert_eq!(a.stats().peak_live_bytes, 0);
    for n in 1..=6 {
        let held: Vec<_> = (0..n).map(|_| a.allocate(100, 8).unwrap()).collect();
        assert!(held.iter().all(|b| b.served_warm()));
        assert_eq!(a.stats().peak_live_bytes, n * cap, "{n} handed out");
        drop(held);
        // Below the peak again: no new peak until above it.
        let one = a.allocate(100, 8).unwrap();
        assert_eq!(a.stats().peak_live_bytes, n * cap);
        drop(one);
        a.reset_peak();
    }
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_reset_on_one_thread_reaches_the_peak_checks_of_another_threads_cache() {
    use std::sync::mpsc::channel;
    let a = Arc::new(arena());
    let (go, wait) = channel::<()>();
    let (done, seen) = channel::<usize>();
    let t = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || {
            let bufs: Vec<_> = (0..6).map(|_| a.allocate(100, 8).unwrap()).collect();
            let cap = bufs[0].capacity();
            drop(bufs);
            // Six hits: this cache's peak check has run at the sixth.
            drop(
                (0..6)
                    .map(|_| a.allocate(100, 8).unwrap())
                    .collect::<Vec<_>>(),
            );
            done.send(cap).unwrap();
            wait.recv().unwrap(); // the other thread resets the peak
            let three: Vec<_> = (0..3).map(|_| a.allocate(100, 8).unwrap()).collect();
            assert!(three.iter().all(|b| b.served_warm()), "no lock taken");
            done.send(0).unwrap();
            wait.recv().unwrap();
            drop(three);
        })
    };
    let cap = seen.recv().unwrap();
    a.reset_peak();
    go.send(()).unwrap();
    seen.recv().unwrap();
    assert_eq!(a.stats().peak_live_bytes, 3 * cap);
    go.send(()).unwrap();
    t.join().unwrap();
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_locked_peak_counts_what_the_own_cache_handed_out_since_it_published() {
    // The arena's peak check takes this thread's cache by its current
    // counters: buffers it handed out after its last publication are live.
    let a = arena();
    let smalls: Vec<_> = (0..4).map(|_| a.allocate(100, 8).unwrap()).collect();
    let cap = smalls[0].capacity();
    drop(smalls); // into the cache

    // A miss of another class takes the lock: the cache publishes its 4.
    let other = a.allocate(200, 8).unwrap();
    // Handed out again without the lock: the arena still counts them cached.
    let smalls: Vec<_> = (0..4).map(|_| a.allocate(100, 8).unwrap()).collect();
    assert!(smalls.iter().all(|s| s.served_warm()));
    let big = a.allocate(1 << 20, 64).unwrap();
    let live = 4 * cap + other.capacity() + big.capacity();
    assert_eq!(a.stats().peak_live_bytes, live);
    assert_eq!(a.stats().live_bytes, live);
    drop((smalls, other, big));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn buffers_freed_on_another_thread_come_back_and_count() {
    let a = arena();
    // Fewer under Miri (minutes per hundred buffers there).
    let n = if cfg!(miri) { 24 } else { 200 };
    let bufs: Vec<_> = (0..n)
        .map(|k| {
            let mut b = a.allocate(16 + k * 7, 16).unwrap();
            b.as_mut_slice().fill(k as u8);
            b
        })
        .collect();
    let cold = a.stats().cold_allocations;
    // A joined thread (not a scoped one: a scope may end before the
    // thread's thread-local destructors have run).
    std::thread::spawn(move || {
        for (k, b) in bufs.into_iter().enumerate() {
            assert!(b.as_slice().iter().all(|&x| x == k as u8));
            drop(b);
        }
    })
    .join()
    .unwrap();
    // The other thread exited: its cache went back to the arena.
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.retained_buffers, n);
    assert_eq!(s.frees, n as u64);
    // Served warm again here.
    let again: Vec<_> = (0..n)
        .map(|k| a.allocate(16 + k * 7, 16).unwrap())
        .collect();
    assert_eq!(a.stats().cold_allocations, cold);
    drop(again);
}

#[test]
fn trim_on_one_thread_returns_another_threads_cached_pages() {
    let a = arena();
    let step = Arc::new(Barrier::new(2));
    let (a2, s2) = (a.clone(), Arc::clone(&step));
    let t = std::thread::spawn(move || {
        // A whole run's worth of 4 KiB buffers, freed into this thread's cache.
        let bufs: Vec<_> = (0..16).map(|_| a2.allocate(4096, 64).unwrap()).collect();
        drop(bufs);
        s2.wait(); // cached here
        s2.wait(); // trimmed there
                   // The next operation honours the trim: everything cached goes.
        drop(a2.allocate(64, 8).unwrap());
        s2.wait();
        s2.wait();
    });
    step.wait();
    let s = a.stats();
    assert_eq!(
        s.retained_bytes,
        16 * 4096,
        "the cached buffers count as retained"
    );
    let releases = s.os.page_releases;
    a.trim();
    step.wait();
    step.wait();
    let s = a.stats();
    assert_eq!(
        s.retained_bytes, 64,
        "only the 64 B buffer freed after the trim"
    );
    assert!(
        s.os.page_releases > releases,
        "the cached run's pages went back"
    );
    assert_eq!(s.trimmed_bytes, 16 * 4096);
    step.wait();
    t.join().unwrap();
}

#[test]
fn a_small_cap_reaches_cached_buffers_and_turns_caching_off() {
    let a = arena();
    drop(
        (0..8)
            .map(|_| a.allocate(1000, 8).unwrap())
            .collect::<Vec<_>>(),
    );
    assert_eq!(a.stats().retained_bytes, 8 * 1024);
    a.set_retention_cap(2048);
    let s = a.stats();
    assert_eq!(s.retained_bytes, 2048);
    assert_eq!(s.evictions, 6);
    drop(
        (0..8)
            .map(|_| a.allocate(1000, 8).unwrap())
            .collect::<Vec<_>>(),
    );
    assert_eq!(a.stats().retained_bytes, 2048, "the cap holds: no cache");
    a.set_retention_cap(usize::MAX);
    drop(
        (0..8)
            .map(|_| a.allocate(1000, 8).unwrap())
            .collect::<Vec<_>>(),
    );
    assert_eq!(a.stats().retained_bytes, 8 * 1024);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn an_arena_dropped_while_another_thread_caches_its_buffers_is_freed_once() {
    let a = arena();
    let id = a.core.id;
    let mine = a.clone();
    let step = Arc::new(Barrier::new(2));
    let s2 = Arc::clone(&step);
    let t = std::thread::spawn(move || {
        // Allocated and freed here: into this thread's cache (a free is
        // cached against what the cache handed out), keeping the body alive.
        drop(mine.allocate(64, 8).unwrap());
        drop(mine);
        s2.wait();
        s2.wait();
    });
    step.wait();
    drop(a);
    assert_eq!(destroyed::count(id), 0, "a cached buffer keeps the arena");
    step.wait();
    t.join().unwrap();
    // The thread's exit gave the buffer back; the last one out freed the body.
    assert_eq!(destroyed::count(id), 1, "freed exactly once");
}

#[test]
fn an_orphaned_arena_is_reclaimed_at_a_threads_next_slow_path() {
    let a = arena();
    let other = arena();
    let id = a.core.id;
    let probe = a.allocate(64, 8).unwrap();
    let step = Arc::new(Barrier::new(2));
    let s2 = Arc::clone(&step);
    let t = std::thread::spawn(move || {
        drop(probe);
        s2.wait();
        s2.wait();
        // Any cache miss on any arena flushes caches of orphaned ones.
        drop(other.allocate(200, 8).unwrap());
        s2.wait();
        s2.wait();
    });
    step.wait();
    drop(a);
    step.wait();
    step.wait();
    assert_eq!(destroyed::count(id), 1, "reclaimed before the thread exits");
    step.wait();
    t.join().unwrap();
}

#[test]
fn stress_threads_allocate_here_and_free_there() {
    let a = arena();
    let (threads, rounds) = if cfg!(miri) { (2, 30) } else { (4, 3000) };
    let (tx, rx): (Vec<_>, Vec<_>) = (0..threads).map(|_| std::sync::mpsc::channel()).unzip();
    // Joined threads: their caches are flushed (thread-local destructors)
    // before `join` returns.
    let handles: Vec<_> = rx
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let a = a.clone();
            let tx: Vec<_> = tx.clone();
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9u64 + t as u64;
                for r in 0..rounds {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let size = 1 + (x as usize % 3000);
                    let mut b = a.allocate(size, 8).unwrap();
                    let tag = (t * 131 + r) as u8;
                    b.as_mut_slice().fill(tag);
                    // To another thread, which checks and frees it.
                    let _ = tx[(t + 1 + r % (threads - 1)) % threads].send((b, tag));
                    while let Ok((b, tag)) = rx.try_recv() {
                        assert!(b.as_slice().iter().all(|&v| v == tag), "contents");
                        drop(b);
                    }
                }
            })
        })
        .collect();
    drop(tx);
    for h in handles {
        h.join().unwrap();
    }
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.frees, (threads * rounds) as u64);
    assert_eq!(s.warm_allocations + s.cold_allocations, s.frees);
    assert_eq!(a.check_invariants(), Ok(()));
}

/// Found by the `arena_ops` fuzz target (`fuzz/corpus/arena_ops/
/// peak-with-thread-caches`): a refill counted its buffers as live in the
/// arena before the cache's counters said it held them, so a peak check
/// during the refill saw cached buffers as live.
#[test]
fn a_refill_never_raises_the_peak() {
    let a = arena();
    // Sixteen 32-byte buffers, freed on another thread: they go back to
    // the arena (that thread's cache never handed them out).
    let bufs: Vec<_> = (0..16).map(|_| a.allocate(32, 8).unwrap()).collect();
    std::thread::spawn(move || drop(bufs)).join().unwrap();
    a.reset_peak();
    assert_eq!(a.stats().peak_live_bytes, 0);
    // One allocation refills this thread's bin with several buffers; one
    // of them is live.
    let x = a.allocate(32, 8).unwrap();
    let s = a.stats();
    assert_eq!(s.live_bytes, 32);
    assert_eq!(s.peak_live_bytes, 32, "cached buffers counted in the peak");
    drop(x);
    assert_eq!(a.check_invariants(), Ok(()));
}

/// Found by the `arena_ops` fuzz target (`fuzz/corpus/arena_ops/
/// cache-large-alignment`): a small class asked for with an alignment
/// above a page skipped the cache, so a buffer of the class waiting in the
/// cache was not reused and a new one was carved.
#[test]
fn a_small_class_with_a_large_alignment_reuses_the_cached_buffer() {
    let a = arena();
    // Handed out through the cache (a page alignment or less), so its
    // free is cached.
    let x = a.allocate(16 << 10, 64).unwrap();
    assert_eq!(x.capacity(), 16 << 10);
    drop(x);
    let before = a.stats();
    let y = a.allocate(12 << 10, 8192).unwrap();
    assert!(y.served_warm());
    assert_eq!(y.as_ptr() as usize % 8192, 0);
    let s = a.stats();
    assert_eq!(s.cold_allocations, before.cold_allocations);
    assert_eq!((s.retained_buffers, s.live_buffers), (0, 1));
    drop(y);
    assert_eq!(a.check_invariants(), Ok(()));
}

/// `n` buffers of `size` bytes allocated and freed on a thread of their
/// own, which exits: its cache's flushes leave them in the arena's depot.
/// Their addresses, in the order they were freed.
fn through_another_threads_cache(a: &ExecutionArena, n: usize, size: usize) -> Vec<usize> {
    let a2 = a.clone();
    std::thread::spawn(move || {
        let v: Vec<_> = (0..n).map(|_| a2.allocate(size, 8).unwrap()).collect();
        let addrs = v.iter().map(|b| b.as_ptr() as usize).collect();
        drop(v); // in index order
        addrs
    })
    .join()
    .unwrap()
}

#[test]
fn flushed_buffers_wait_in_the_depot_and_count_as_retained() {
    let a = arena();
    let n = if cfg!(miri) { 40 } else { 300 };
    through_another_threads_cache(&a, n, 16);
    let cap = 16;
    {
        let st = a.core.lock();
        assert_eq!(st.depot.buffers(), n, "every flush went to the depot");
        assert_eq!(
            (st.depot.bytes(), st.cached_bytes.get()),
            (n * cap, n * cap)
        );
    }
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!((s.retained_bytes, s.retained_buffers), (n * cap, n));
    assert_eq!(s.frees, n as u64);
    assert_eq!(a.check_invariants(), Ok(()));
    // This thread's refills take them: nothing new is carved or mapped.
    let before = a.stats();
    let v: Vec<_> = (0..n).map(|_| a.allocate(16, 8).unwrap()).collect();
    let s = a.stats();
    assert_eq!(s.cold_allocations, before.cold_allocations);
    assert_eq!(s.os, before.os, "no system call");
    assert_eq!(a.core.lock().depot.buffers(), 0);
    assert_eq!((s.live_bytes, s.peak_live_bytes), (n * cap, n * cap));
    drop(v);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_thread_caches_for_dozens_of_arenas_at_once() {
    // A serving thread that runs the sessions of many models, each with its
    // own arena, in turn: after one round, no operation takes a lock.
    let arenas: Vec<_> = (0..super::SLOTS.min(32)).map(|_| arena()).collect();
    let round = || {
        for a in &arenas {
            let v: Vec<_> = (0..8).map(|_| a.allocate(256, 8).unwrap()).collect();
            drop(v);
        }
    };
    round();
    let locked = |arenas: &[ExecutionArena]| -> u64 {
        arenas.iter().map(|a| a.stats().locked_operations).sum()
    };
    let before = locked(&arenas);
    for _ in 0..3 {
        round();
    }
    // Each `stats()` read is one locked operation of its own.
    let reads = arenas.len() as u64;
    assert_eq!(
        locked(&arenas),
        before + reads,
        "every arena served from a cache"
    );
    for a in &arenas {
        assert_eq!(a.stats().live_buffers, 0);
        assert_eq!(a.check_invariants(), Ok(()));
    }
}

#[test]
fn a_request_without_a_cache_is_served_from_the_depot() {
    let a = arena();
    let n = if cfg!(miri) { 40 } else { 300 };
    through_another_threads_cache(&a, n, 100);
    let before = a.stats();
    let a2 = a.clone();
    let got = std::thread::spawn(move || {
        // A thread that caches for as many other arenas as it can serves
        // this one through the shared path, under the lock.
        let others: Vec<_> = (0..super::SLOTS).map(|_| arena()).collect();
        let held: Vec<_> = others.iter().map(|o| o.allocate(64, 8).unwrap()).collect();
        let locked = a2.stats().locked_operations;
        let v: Vec<_> = (0..n).map(|_| a2.allocate(100, 8).unwrap()).collect();
        let s = a2.stats();
        assert!(s.locked_operations >= locked + n as u64, "uncached");
        drop((v, held));
        s
    })
    .join()
    .unwrap();
    assert_eq!(
        got.cold_allocations, before.cold_allocations,
        "all from the depot"
    );
    assert_eq!(got.os, before.os, "no system call");
    assert_eq!(a.check_invariants(), Ok(()));
}

/// An arena whose depot holds `n` buffers of 16 B another thread
/// allocated and freed, with its body's id and `n`.
fn with_a_filled_depot() -> (ExecutionArena, u64, usize) {
    let a = arena();
    let id = a.core.id;
    let n = if cfg!(miri) { 40 } else { 300 };
    through_another_threads_cache(&a, n, 16);
    (a, id, n)
}

#[test]
fn trim_and_a_dropped_arena_reach_the_depot() {
    let (a, id, n) = with_a_filled_depot();
    let releases = a.stats().os.page_releases;
    assert_eq!(a.trim(), n * 16);
    let s = a.stats();
    assert_eq!((s.retained_bytes, s.retained_buffers), (0, 0));
    assert!(s.os.page_releases > releases, "the run's pages went back");
    assert_eq!(a.core.lock().depot.buffers(), 0);
    assert_eq!(a.check_invariants(), Ok(()));
    // Again into the depot, then the last handle goes: the depot's buffers
    // are freed with the arena, which goes exactly once.
    through_another_threads_cache(&a, n, 16);
    assert_eq!(a.core.lock().depot.buffers(), n);
    drop(a);
    assert_eq!(destroyed::count(id), 1, "freed exactly once");
}

#[test]
fn a_dropped_arena_whose_user_holds_a_buffer_settles_its_depot_and_goes_with_it() {
    // The depot's buffers are not every live buffer at the drop (its
    // user holds one): they settle into the free lists, the body stays,
    // and the held buffer's free frees it, once.
    let (a, id, _) = with_a_filled_depot();
    let kept = a.allocate(16, 8).unwrap();
    assert!(
        kept.served_warm(),
        "from the depot, through this thread's bin"
    );
    drop(a);
    assert_eq!(destroyed::count(id), 0, "a held buffer keeps the body");
    drop(kept);
    assert_eq!(destroyed::count(id), 1, "freed exactly once");
}

#[test]
fn a_threads_first_run_takes_the_lock_once_a_new_small_buffer() {
    // A refill that finds nothing of the class carves the request's
    // buffer under its own lock, once (not twice) a buffer.
    let a = arena();
    let n = if cfg!(miri) { 10 } else { 200 };
    // This thread's cache made first, by a request of another class.
    drop(a.allocate(16, 8).unwrap());
    let before = a.stats();
    let v: Vec<_> = (0..n).map(|_| a.allocate(100, 8).unwrap()).collect();
    assert!(v.iter().all(|x| !x.served_warm()));
    let s = a.stats();
    // One lock a buffer, and the `stats()` that reads the count.
    assert_eq!(s.locked_operations - before.locked_operations, n as u64 + 1);
    assert_eq!(s.cold_allocations, n as u64 + 1);
    assert_eq!((s.live_bytes, s.live_buffers), (n * 112, n));
    assert_eq!(s.peak_live_bytes, n * 112);
    drop(v);
    // The frees are cached against the credits the carves gave.
    let s = a.stats();
    assert_eq!((s.live_bytes, s.retained_buffers), (0, n + 1));
    let again: Vec<_> = (0..n).map(|_| a.allocate(100, 8).unwrap()).collect();
    assert!(again.iter().all(|x| x.served_warm()));
    assert_eq!(a.stats().cold_allocations, n as u64 + 1);
    drop(again);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_retention_cap_counts_the_depot_and_evicts_it_in_free_order() {
    let a = arena();
    let n = if cfg!(miri) { 40 } else { 300 };
    let freed = through_another_threads_cache(&a, n, 16);
    // A cap the depot fits in leaves it as it is.
    a.set_retention_cap(1 << 30);
    assert_eq!(a.core.lock().depot.buffers(), n);
    assert_eq!(a.check_invariants(), Ok(()));
    // A cap below it settles the depot into the free lists and evicts
    // the older half.
    let keep = n / 2;
    a.set_retention_cap(keep * 16);
    let s = a.stats();
    assert_eq!(a.core.lock().depot.buffers(), 0);
    assert_eq!((s.retained_bytes, s.live_buffers), (keep * 16, 0));
    assert_eq!(s.evictions, (n - keep) as u64);
    assert_eq!(a.check_invariants(), Ok(()));
    // What stayed is the last half freed: the retained buffers, served
    // again (under so small a cap, without a cache), are exactly those.
    let held: Vec<_> = (0..keep).map(|_| a.allocate(16, 8).unwrap()).collect();
    assert_eq!(a.stats().cold_allocations, s.cold_allocations);
    let mut again: Vec<usize> = held.iter().map(|b| b.as_ptr() as usize).collect();
    again.sort_unstable();
    let mut newest = freed[n - keep..].to_vec();
    newest.sort_unstable();
    assert_eq!(again, newest);
}

#[test]
#[cfg_attr(miri, ignore = "maps 80 MiB")]
fn flushes_keep_what_the_arena_retains_within_its_cap() {
    // The smallest cap that keeps caching on.
    let cap = super::epoch::MIN_CAP_FOR_CACHE;
    let a = ExecutionArena::with_config(
        ArenaConfig::default()
            .run_ownership(false)
            .huge_pages(false)
            .retention_cap(cap),
    );
    let n = cap / (16 << 10) * 5 / 4;
    through_another_threads_cache(&a, n, 16 << 10);
    let s = a.stats();
    assert!(s.retained_bytes <= cap, "{} over the cap", s.retained_bytes);
    assert!(
        s.retained_bytes + 64 * (16 << 10) > cap,
        "{} far under the cap",
        s.retained_bytes
    );
    assert_eq!(s.live_bytes, 0);
    assert_eq!(
        s.retained_bytes + s.evicted_bytes,
        n * (16 << 10),
        "each freed buffer retained or evicted"
    );
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_thread_that_starts_after_others_left_gets_a_left_caches_memory() {
    use super::spare::SPARES;
    let a = arena();
    // This thread's own cache first, so that it never takes a spare.
    drop(a.allocate(64, 8).unwrap());
    // Threads in turn, each with a cache on the arena; each joined, so its
    // thread-local destructor has run. Which memory did each cache use?
    let run = |n: usize| -> Vec<usize> {
        (0..n)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || {
                    drop(a.allocate(64, 8).unwrap());
                    super::front::cache_addr(&a.core).unwrap()
                })
                .join()
                .unwrap()
            })
            .collect()
    };
    let first = run(1)[0];
    // It held the freed buffer, so its thread flushed it under the arena's
    // lock on the way out, and the arena kept its memory.
    assert_eq!(a.core.lock().spares.len(), 1);
    let later = run(3);
    assert!(
        later.iter().all(|&p| p == first),
        "each new thread took the left cache's memory: {first:#x} {later:x?}"
    );
    // A cache empty when its thread left (the thread only freed a buffer
    // it did not allocate) stays registered until the arena's next sweep,
    // here the next thread's registration, which then reuses it.
    let buf = a.allocate(64, 8).unwrap();
    let emptied = {
        let a = a.clone();
        std::thread::spawn(move || {
            drop(buf);
            super::front::cache_addr(&a.core)
        })
        .join()
        .unwrap()
    };
    assert_eq!(emptied, Some(first));
    assert_eq!(a.core.lock().spares.len(), 0, "still registered");
    assert_eq!(run(1), vec![first], "the swept cache's memory, again");
    // Several left at once: the arena keeps at most SPARES of them.
    let b = Arc::new(Barrier::new(SPARES + 2));
    let threads: Vec<_> = (0..SPARES + 2)
        .map(|_| {
            let (a, b) = (a.clone(), Arc::clone(&b));
            std::thread::spawn(move || {
                drop(a.allocate(64, 8).unwrap());
                b.wait();
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.core.lock().spares.len(), SPARES);
    // Dropped with the arena (Miri checks that nothing leaks or is freed twice).
    drop(a);
}

/// A run that frees its small buffers in the order it allocated them (a
/// tree or a queue dropped front to back) gets them back in that order in
/// every later run, not reversed in every second one (`streak.rs`); also
/// when it frees each pair the other way round. Before, every second run's
/// buffers came falling.
#[test]
fn a_run_freed_in_allocation_order_gets_its_buffers_rising_run_after_run() {
    let n = if cfg!(miri) { 256 } else { 4096 };
    for swap_pairs in [false, true] {
        let a = arena();
        for run in 0..6 {
            let bufs: Vec<_> = (0..n).map(|_| a.allocate(128, 8).unwrap()).collect();
            let addrs: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
            // Entries below the one eight places on: the bin's worth from the
            // run before comes first, newest first: all but two bins' worth rise.
            let rising = addrs
                .iter()
                .zip(addrs.iter().skip(8))
                .filter(|(x, y)| x < y)
                .count();
            assert!(
                rising >= n - 8 - 2 * super::bin::BIN_SLOTS,
                "swap_pairs {swap_pairs} run {run}: {rising} of {}",
                n - 8
            );
            let mut bufs: Vec<_> = bufs.into_iter().map(Some).collect();
            for i in 0..n {
                let j = if swap_pairs { i ^ 1 } else { i };
                drop(bufs[j].take());
            }
        }
        let s = a.stats();
        assert_eq!((s.cold_allocations, s.live_buffers), (n as u64, 0));
    }
}

/// A run that frees its small buffers in a scattered order (at random,
/// or every third one at a time) gets them back lowest address first in
/// the next run, past the bin's worth (`streak.rs`), whether it frees by
/// handle or by address (allocator-api2); the arena's counts and its
/// invariants hold throughout.
#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the sort is safe code, and its Miri tests are in streak.rs"
)]
fn a_run_freed_in_a_scattered_order_gets_its_buffers_in_address_order() {
    use allocator_api2::alloc::{Allocator, Layout};
    use core::ptr::NonNull;
    let n = 6000;
    let l = Layout::from_size_align(96, 8).unwrap();
    for (shape, by_address) in [(0, false), (0, true), (1, false), (1, true)] {
        let a = arena();
        let mut x = 0x2545_F491_4F6C_DD1D_u64 + shape;
        for run in 0..3 {
            let mut handles = Vec::new();
            let mut ptrs = Vec::new();
            for _ in 0..n {
                if by_address {
                    ptrs.push(Allocator::allocate(&a, l).unwrap().cast::<u8>());
                } else {
                    let b = a.allocate(96, 8).unwrap();
                    ptrs.push(NonNull::new(b.as_ptr().cast_mut()).unwrap());
                    handles.push(Some(b));
                }
            }
            if run > 0 {
                // The bin's worth from the run before first; then rising.
                assert!(
                    ptrs[super::bin::BIN_SLOTS..]
                        .windows(2)
                        .all(|w| w[0] < w[1]),
                    "shape {shape} by address {by_address} run {run}"
                );
            }
            let order: Vec<usize> = if shape == 0 {
                let mut o: Vec<usize> = (0..n).collect();
                for i in (1..n).rev() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    o.swap(i, (x % (i as u64 + 1)) as usize);
                }
                o
            } else {
                (0..3).flat_map(|r| (r..n).step_by(3)).collect()
            };
            for i in order {
                if by_address {
                    // SAFETY: each buffer is live and freed once, with its layout.
                    unsafe { Allocator::deallocate(&a, ptrs[i], l) };
                } else {
                    drop(handles[i].take());
                }
            }
            a.core.lock().check().unwrap();
        }
        let s = a.stats();
        assert_eq!((s.cold_allocations, s.live_buffers), (n as u64, 0));
    }
}

#[test]
fn threads_streaming_through_one_class_settle_into_free_order() {
    // Four threads (two under Miri) stream buffers of one class through
    // one arena at once, so their flushes interleave in the depot's list
    // with stamps from four views of the free count. A trim settles the
    // list into the free lists (sorted first, one run per class) and
    // releases it; then a cap settles a second streaming round and evicts
    // down to it, least recently freed first.
    let a = Arc::new(arena());
    let threads = if cfg!(miri) { 2 } else { 4 };
    let n = if cfg!(miri) { 100 } else { 5_000 };
    let stream = |a: &Arc<ExecutionArena>| {
        let bar = Arc::new(Barrier::new(threads));
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (a, bar) = (a.clone(), bar.clone());
                std::thread::spawn(move || {
                    for _ in 0..3 {
                        bar.wait();
                        let v: Vec<_> = (0..n).map(|_| a.allocate(32, 8).unwrap()).collect();
                        drop(v);
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    };
    stream(&a);
    assert!(a.core.lock().depot.buffers() > 0, "flushed into the depot");
    assert_eq!(a.check_invariants(), Ok(()));
    a.trim();
    let s = a.stats();
    assert_eq!((s.live_buffers, s.retained_buffers), (0, 0));
    assert_eq!(a.core.lock().depot.buffers(), 0);
    assert_eq!(a.check_invariants(), Ok(()));
    stream(&a);
    let held = a.stats().retained_bytes;
    a.set_retention_cap(held / 2);
    let s = a.stats();
    assert_eq!(a.core.lock().depot.buffers(), 0);
    assert!(
        s.retained_bytes <= held / 2,
        "{} over the cap",
        s.retained_bytes
    );
    assert_eq!(s.live_buffers, 0);
    assert_eq!(a.check_invariants(), Ok(()));
}
