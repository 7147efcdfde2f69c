//! Frees on threads that did not allocate the buffer (`remote.rs`,
//! `remotes.rs`, `collect.rs`): no lock per free, nothing stranded (every
//! locked operation but a refill, `stats()`, `trim` and the next run see
//! the frees), a collecting thread takes its class's newest and leaves
//! the rest, exact counts, and the last handle's drop racing a remote free
//! frees the body exactly once.

use crate::arena::shared::destroyed;
use crate::size_class::class_of_classed;
use crate::{Allocation, ArenaConfig, ExecutionArena};
use std::sync::{Arc, Barrier};

fn arena() -> ExecutionArena {
    ExecutionArena::with_config(
        ArenaConfig::default()
            .run_ownership(false)
            .huge_pages(false),
    )
}

/// Small sizes of several classes, one per buffer.
fn sizes(n: usize) -> Vec<usize> {
    // Under Miri, small ones only: every byte is written and checked.
    let kinds: &[usize] = if cfg!(miri) {
        &[24, 200, 1000]
    } else {
        &[24, 200, 1000, 3000, 40_000]
    };
    (0..n).map(|k| kinds[k % kinds.len()]).collect()
}

/// Allocates one buffer per size on this thread, each filled with its index.
fn produce(a: &ExecutionArena, sizes: &[usize]) -> Vec<Allocation> {
    sizes
        .iter()
        .enumerate()
        .map(|(k, &s)| {
            let mut x = a.allocate(s, 16).unwrap();
            x.as_mut_slice().fill(k as u8);
            x
        })
        .collect()
}

/// Frees `bufs` on another thread, after checking their contents; returns
/// the locked operations that thread's frees took (its cache's creation
/// included).
fn consume_elsewhere(a: &ExecutionArena, bufs: Vec<Allocation>) -> u64 {
    let before = a.stats().locked_operations;
    std::thread::scope(|s| {
        s.spawn(move || {
            for (k, x) in bufs.into_iter().enumerate() {
                assert!(x.as_slice().iter().all(|&b| b == k as u8), "buffer {k}");
                drop(x);
            }
        });
    });
    // `stats()` itself is one locked operation: it takes the frees.
    a.stats().locked_operations - before - 1
}

#[test]
fn frees_on_another_thread_take_no_lock_each_and_the_next_run_is_warm() {
    let a = arena();
    let n = if cfg!(miri) { 12 } else { 600 };
    let sz = sizes(n);
    let bufs = produce(&a, &sz);
    let cold = a.stats().cold_allocations;
    let locks = consume_elsewhere(&a, bufs);
    // Before: one lock per free (600). Now the consumer's cache is made
    // (a few locks) and its frees wait on the remote stack.
    assert!(locks <= 4, "{locks} locked operations for {n} remote frees");
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.frees, n as u64);
    assert_eq!(a.check_invariants(), Ok(()));
    // The same run again, on the same threads: every buffer warm.
    for run in 0..if cfg!(miri) { 1 } else { 3 } {
        let bufs = produce(&a, &sz);
        assert!(bufs.iter().all(Allocation::served_warm), "run {run}");
        consume_elsewhere(&a, bufs);
        let s = a.stats();
        assert_eq!(s.cold_allocations, cold, "run {run}: no cold allocation");
        assert_eq!(s.live_buffers, 0);
        assert_eq!(s.frees, (n * (run + 2)) as u64);
        assert_eq!(a.check_invariants(), Ok(()));
    }
}

#[test]
fn allocator_api2_frees_on_another_thread_take_no_lock_each_and_come_back() {
    // allocator-api2's free finds the class, misses the hit (no credit)
    // and goes straight to the cache's slow path with it: the remote stack.
    use allocator_api2::alloc::{Allocator, Layout};
    use core::ptr::NonNull;
    let a = arena();
    let n = if cfg!(miri) { 12 } else { 600 };
    let layouts: Vec<Layout> = sizes(n)
        .into_iter()
        .map(|s| Layout::from_size_align(s, 16).unwrap())
        .collect();
    let produce = || -> Vec<(usize, Layout)> {
        layouts
            .iter()
            .enumerate()
            .map(|(k, &l)| {
                let p = Allocator::allocate(&&a, l).unwrap().cast::<u8>();
                // SAFETY: a fresh buffer of `l.size()` bytes.
                unsafe { p.as_ptr().write_bytes(k as u8, l.size()) };
                (p.as_ptr() as usize, l)
            })
            .collect()
    };
    let consume = |bufs: Vec<(usize, Layout)>| -> u64 {
        let before = a.stats().locked_operations;
        std::thread::scope(|s| {
            s.spawn(|| {
                for (k, (p, l)) in bufs.into_iter().enumerate() {
                    // SAFETY: a live buffer of `l` from this arena, freed once.
                    unsafe {
                        let x = core::slice::from_raw_parts(p as *const u8, l.size());
                        assert!(x.iter().all(|&b| b == k as u8), "buffer {k}");
                        Allocator::deallocate(&&a, NonNull::new_unchecked(p as *mut u8), l);
                    }
                }
            });
        });
        a.stats().locked_operations - before - 1
    };
    let cold = {
        let bufs = produce();
        let cold = a.stats().cold_allocations;
        let locks = consume(bufs);
        assert!(locks <= 4, "{locks} locked operations for {n} remote frees");
        cold
    };
    for run in 0..if cfg!(miri) { 1 } else { 3 } {
        let bufs = produce();
        consume(bufs);
        let s = a.stats();
        assert_eq!(s.cold_allocations, cold, "run {run}: no cold allocation");
        assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
        assert_eq!(s.frees, (n * (run + 2)) as u64);
        assert_eq!(a.check_invariants(), Ok(()));
    }
}

#[test]
fn trim_reaches_buffers_freed_on_another_thread() {
    let a = arena();
    let bufs = produce(&a, &sizes(if cfg!(miri) { 6 } else { 50 }));
    consume_elsewhere(&a, bufs);
    // Taken from the stack by `stats()` above, or by the trim's own lock.
    a.trim();
    let s = a.stats();
    assert_eq!(
        (s.live_bytes, s.retained_bytes, s.retained_buffers),
        (0, 0, 0)
    );
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn the_last_handle_takes_the_pending_frees_and_frees_the_body_once() {
    let a = arena();
    let id = a.core.id;
    let bufs = produce(&a, &sizes(if cfg!(miri) { 6 } else { 30 }));
    // Freed on another thread and not yet taken by anyone.
    std::thread::scope(|s| {
        s.spawn(move || drop(bufs));
    });
    assert!(a.core.remotes.pending(), "the frees wait on the stack");
    drop(a);
    assert_eq!(destroyed::count(id), 1, "freed at the last handle's drop");
}

#[test]
fn a_remote_free_racing_the_last_handle_frees_the_body_once() {
    let rounds = if cfg!(miri) { 3 } else { 200 };
    for round in 0..rounds {
        let a = arena();
        let id = a.core.id;
        let bufs = produce(&a, &sizes(8));
        let go = Arc::new(Barrier::new(2));
        let g2 = Arc::clone(&go);
        let t = std::thread::spawn(move || {
            g2.wait();
            drop(bufs);
        });
        go.wait();
        drop(a);
        t.join().unwrap();
        assert_eq!(destroyed::count(id), 1, "round {round}");
    }
}

#[test]
fn a_free_without_credit_is_the_next_hand_out_of_its_class() {
    let a = arena();
    // Caching off under a small cap: this buffer is handed out by the
    // arena, so this thread's cache has no credit for it.
    a.set_retention_cap(1 << 20);
    let x = a.allocate(1665, 16).unwrap();
    a.set_retention_cap(usize::MAX);
    let y = a.allocate(1665, 16).unwrap();
    let (px, py) = (x.as_ptr(), y.as_ptr());
    drop(y); // into the cache's bin (its credit)
    drop(x); // the class's most recently freed buffer
    let z = a.allocate(1665, 16).unwrap();
    // The arena's order hands out the newest; the bin held the older one.
    assert_eq!(z.as_ptr(), px, "not the older {py:?}");
    drop(z);
    let s = a.stats();
    assert_eq!((s.live_buffers, s.retained_buffers), (0, 2));
    assert_eq!(a.check_invariants(), Ok(()));
}

/// A consumer thread that lives across rounds: its cache is made by a
/// first free, so later frees take no lock of their own.
struct Consumer {
    tx: std::sync::mpsc::Sender<Vec<Allocation>>,
    done: std::sync::mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Consumer {
    fn start(a: &ExecutionArena) -> Consumer {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Allocation>>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            for bufs in rx {
                for (k, x) in bufs.into_iter().enumerate() {
                    assert!(x.as_slice().iter().all(|&b| b == k as u8), "buffer {k}");
                    drop(x);
                }
                done_tx.send(()).unwrap();
            }
        });
        let c = Consumer { tx, done, thread };
        // Its cache for `a`, made by this free.
        c.free(produce(a, &[16]));
        c
    }

    /// Frees `bufs` on the consumer's thread and waits until it has.
    fn free(&self, bufs: Vec<Allocation>) {
        self.tx.send(bufs).unwrap();
        self.done.recv().unwrap();
    }

    fn stop(self) {
        drop(self.tx);
        self.thread.join().unwrap();
    }
}

#[test]
fn a_thread_whose_bin_runs_empty_takes_the_remote_frees_without_the_lock() {
    let a = arena();
    let consumer = Consumer::start(&a);
    let n = if cfg!(miri) { 6 } else { 20 };
    let sz = vec![200; n];
    let first = produce(&a, &sz);
    let mut addrs: Vec<*const u8> = first.iter().map(Allocation::as_ptr).collect();
    let before = a.stats();
    consumer.free(first);
    assert!(a.core.remotes.pending(), "the frees wait on the stack");
    // The bin of 200 B is empty: the first allocation takes the stack
    // (this thread handed those buffers out, so it has the credit) and
    // every one is served from the bin.
    let again = produce(&a, &sz);
    assert!(!a.core.remotes.pending(), "taken without the lock");
    let s = a.stats();
    // `stats()` is the one locked operation (before: a refill or more).
    assert_eq!(s.locked_operations, before.locked_operations + 1);
    let mut back: Vec<*const u8> = again.iter().map(Allocation::as_ptr).collect();
    addrs.sort();
    back.sort();
    assert_eq!(back, addrs, "the same buffers, none new");
    assert_eq!(s.cold_allocations, before.cold_allocations);
    assert_eq!((s.live_buffers, s.frees), (n, before.frees + n as u64));
    assert!(again.iter().all(Allocation::served_warm));
    assert_eq!(a.check_invariants(), Ok(()));
    consumer.free(again);
    consumer.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(s.frees, before.frees + 2 * n as u64);
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn remote_frees_of_a_class_a_thread_did_not_hand_out_go_back_to_the_arena() {
    let a = arena();
    let consumer = Consumer::start(&a);
    let n = if cfg!(miri) { 4 } else { 10 };
    // Handed out by the arena itself (caching off under a small cap):
    // this thread's cache has no credit for 3000 B buffers.
    a.set_retention_cap(1 << 20);
    let other = produce(&a, &vec![3000; n]);
    a.set_retention_cap(usize::MAX);
    let mine = produce(&a, &vec![200; n]);
    let theirs: Vec<*const u8> = other.iter().map(Allocation::as_ptr).collect();
    let before = a.stats();
    consumer.free(other);
    consumer.free(mine);
    // 200 B: taken from their stack into this thread's bin; 3000 B: no
    // credit here, and not this thread's class: left on their own stack,
    // not hoarded, for the next lock holder (here `stats()`).
    let again = produce(&a, &vec![200; n]);
    assert!(!a.core.remotes.waiting(class_of_classed(200)));
    assert!(a.core.remotes.waiting(class_of_classed(3000)));
    let s = a.stats();
    assert!(!a.core.remotes.pending(), "a lock holder takes every stack");
    assert_eq!(s.live_buffers, n);
    assert_eq!(s.frees, before.frees + 2 * n as u64);
    assert_eq!(s.retained_buffers, before.retained_buffers + n);
    assert_eq!(a.check_invariants(), Ok(()));
    // Whoever allocates 3000 B next (another thread here) finds them in
    // the arena: warm, the same buffers.
    let other = std::thread::scope(|s| s.spawn(|| produce(&a, &vec![3000; n])).join().unwrap());
    assert!(other.iter().all(Allocation::served_warm));
    let mut got: Vec<*const u8> = other.iter().map(Allocation::as_ptr).collect();
    let mut want = theirs;
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(a.stats().cold_allocations, before.cold_allocations);
    consumer.free(other);
    consumer.free(again);
    consumer.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_collecting_thread_keeps_its_classs_newest_and_leaves_the_older_on_the_stack() {
    let a = arena();
    let consumer = Consumer::start(&a);
    // A bin of 200 B holds `room`; this thread hands out twice that.
    let c = class_of_classed(200);
    let room = super::bin::limit_for(crate::size_class::capacity(c)) as usize;
    let first = produce(&a, &vec![200; 2 * room]);
    let freed: Vec<*const u8> = first.iter().map(Allocation::as_ptr).collect();
    let before = a.stats();
    consumer.free(first); // in this order: the last is the newest
    assert!(a.core.remotes.waiting(c));
    // The first allocation finds the bin empty and collects: the `room`
    // newest, read; the older ones put back on the stack, unread.
    let kept = produce(&a, &vec![200; room]);
    let got: Vec<*const u8> = kept.iter().map(Allocation::as_ptr).collect();
    let newest_first: Vec<*const u8> = freed[room..].iter().rev().copied().collect();
    assert_eq!(got, newest_first, "the newest, newest first");
    assert!(
        a.core.remotes.waiting(c),
        "the older ones wait on the stack"
    );
    let s = a.stats();
    // `stats()` is the one locked operation since, and it took the others.
    assert_eq!(s.locked_operations, before.locked_operations + 1);
    assert!(!a.core.remotes.waiting(c));
    assert_eq!(s.live_buffers, room);
    assert_eq!(s.retained_buffers, before.retained_buffers + room);
    assert_eq!(s.frees, before.frees + 2 * room as u64);
    assert_eq!(a.check_invariants(), Ok(()));
    // The older ones serve the next requests of the class: warm, no new one.
    let rest = produce(&a, &vec![200; room]);
    assert!(rest.iter().all(Allocation::served_warm));
    assert_eq!(a.stats().cold_allocations, before.cold_allocations);
    consumer.free(kept);
    consumer.free(rest);
    consumer.stop();
    let s = a.stats();
    assert_eq!((s.live_bytes, s.live_buffers), (0, 0));
    assert_eq!(a.check_invariants(), Ok(()));
}

#[test]
fn a_refill_leaves_other_classes_remote_frees_and_stats_still_sees_them() {
    let a = arena();
    let consumer = Consumer::start(&a);
    let n = if cfg!(miri) { 4 } else { 12 };
    // 1000 B buffers retained by the arena itself: allocated and freed
    // with caching off (under a small cap), so this thread's bin is empty.
    a.set_retention_cap(1 << 20);
    drop(produce(&a, &vec![1000; n]));
    a.set_retention_cap(usize::MAX);
    let mine = produce(&a, &vec![200; n]);
    let before = a.stats();
    consumer.free(mine);
    let c200 = class_of_classed(200);
    assert!(a.core.remotes.waiting(c200));
    // The 1000 B allocation refills its bin under the lock from the
    // arena's retained buffers, and leaves the 200 B stack alone.
    let x = a.allocate(1000, 16).unwrap();
    assert!(x.served_warm());
    assert!(a.core.remotes.waiting(c200), "the refill left them");
    let s = a.stats();
    assert_eq!(s.cold_allocations, before.cold_allocations);
    // ...which `stats()` (a full lock) took: exact counts.
    assert!(!a.core.remotes.pending());
    assert_eq!(s.live_buffers, 1, "only the 1000 B buffer is live");
    assert_eq!(s.frees, before.frees + n as u64);
    assert_eq!(s.retained_buffers, before.retained_buffers - 1 + n);
    assert_eq!(a.check_invariants(), Ok(()));
    drop(x);
    consumer.stop();
    assert_eq!(a.stats().live_buffers, 0);
}

/// A consumer's remote frees of one class carry, beside each link, the
/// buffers it pushed before the link's (`hints.rs`), which a collecting
/// thread prefetches: hint k of the n-th buffer from the top is the
/// (n + 2 + k)-th, while nobody else pushed and nobody took the stack.
#[test]
fn a_remote_free_carries_the_consumers_earlier_pushes_as_hints() {
    use super::hints;
    use super::remote::link;
    let a = arena();
    let consumer = Consumer::start(&a);
    let c = class_of_classed(200);
    let n = if cfg!(miri) { 9 } else { 20 };
    let before = a.stats();
    consumer.free(produce(&a, &vec![200; n]));
    let head = a.core.remotes.take_class(c);
    let mut chain = Vec::new();
    let mut at = head;
    while at != 0 {
        chain.push(at);
        // SAFETY: taken from the stack; every buffer on it carries a link.
        at = unsafe { link::read(at) }.0;
    }
    assert_eq!(chain.len(), n, "every free is on the class's stack");
    let h = hints::count(c);
    assert_eq!(h, hints::HINTS, "a 200 B buffer carries every hint");
    for (i, &x) in chain.iter().enumerate() {
        for k in 0..h {
            // SAFETY: pushed by `free_remote`, taken above.
            let hint = unsafe { hints::read(x, k) };
            let want = chain.get(i + 2 + k).copied().unwrap_or(0);
            assert_eq!(hint, want, "buffer {i}, hint {k}");
        }
    }
    // Back on the stack; `stats()` takes it under the lock: exact counts.
    // SAFETY: taken from the stack; its last buffer is the arena's.
    let rest = a.core.remotes.restore(c, head, |newer, older| unsafe {
        link::joined(newer, older)
    });
    assert_eq!(rest, 0, "the stack is open");
    let s = a.stats();
    assert_eq!(s.live_buffers, before.live_buffers);
    assert_eq!(s.frees, before.frees + n as u64);
    assert_eq!(a.check_invariants(), Ok(()));
    consumer.stop();
}
