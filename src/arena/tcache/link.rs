//! Who frees a thread cache: the tie between one thread's cache for an
//! arena and that arena. Both sides may go first: the thread (it exits, or
//! drops an empty cache) or the arena (its body is destroyed). Each side
//! leaves exactly once by swapping its mark in; whoever leaves second sees
//! the other's mark and frees the cache. A side that has not left may
//! still read the cache (the arena its counters, the thread everything).
//!
//! Pure logic over one atomic (loom's under `cfg(loom)`): the loom model
//! below and Miri (`scripts/miri.sh`) check it.

use crate::sync::rc::{AtomicUsize, Ordering};

const BOTH: usize = 0;
const THREAD_LEFT: usize = 1;
const ARENA_LEFT: usize = 2;

/// The attachment of one cache to one arena.
#[derive(Debug)]
pub(crate) struct Link(AtomicUsize);

impl Link {
    pub(crate) fn new() -> Self {
        Link(AtomicUsize::new(BOTH))
    }

    /// The thread lets go; `true` when the arena left first, so the thread
    /// must free the cache now. Release: the counters the thread wrote
    /// before are visible to an arena that frees the cache after.
    pub(crate) fn thread_leaves(&self) -> bool {
        self.0.swap(THREAD_LEFT, Ordering::AcqRel) == ARENA_LEFT
    }

    /// The arena lets go; `true` when the thread left first, so the arena
    /// must free the cache now.
    pub(crate) fn arena_leaves(&self) -> bool {
        self.0.swap(ARENA_LEFT, Ordering::AcqRel) == THREAD_LEFT
    }

    /// Whether the thread has left (the arena may then absorb the cache's
    /// counters and free it, after `arena_leaves`).
    pub(crate) fn thread_left(&self) -> bool {
        self.0.load(Ordering::Acquire) == THREAD_LEFT
    }

    /// Whether the arena has left (the thread must not reach it through
    /// this cache again, and frees the cache after `thread_leaves`).
    pub(crate) fn arena_left(&self) -> bool {
        self.0.load(Ordering::Acquire) == ARENA_LEFT
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_second_to_leave_frees() {
        let l = Link::new();
        assert!(!l.thread_left() && !l.arena_left());
        assert!(!l.thread_leaves());
        assert!(l.thread_left());
        assert!(l.arena_leaves());
        let l = Link::new();
        assert!(!l.arena_leaves());
        assert!(l.arena_left());
        assert!(l.thread_leaves());
    }

    #[test]
    fn racing_sides_free_exactly_once() {
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        for _ in 0..rounds {
            let l = Link::new();
            let (a, b) = std::thread::scope(|s| {
                let a = s.spawn(|| l.thread_leaves());
                let b = s.spawn(|| l.arena_leaves());
                (a.join().unwrap(), b.join().unwrap())
            });
            assert!(a ^ b, "exactly one side frees");
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Thread exit against arena destruction: the cache (a counter in a
    /// loom cell standing for its memory) is freed exactly once, and the
    /// counters the thread wrote before leaving are seen by an arena that
    /// frees it.
    #[test]
    fn loom_thread_exit_and_arena_destroy_free_the_cache_once() {
        crate::sync::loom_model(3, || {
            let link = Arc::new(Link::new());
            let frees = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let counter = Arc::new(loom::cell::UnsafeCell::new(0u64));
            let (l2, f2, c2) = (Arc::clone(&link), Arc::clone(&frees), Arc::clone(&counter));
            let t = thread::spawn(move || {
                // SAFETY (model): the thread owns the counter until it leaves.
                c2.with_mut(|p| unsafe { *p = 7 });
                if l2.thread_leaves() {
                    f2.fetch_add(1, Ordering::Relaxed);
                }
            });
            if link.arena_leaves() {
                // The thread left first: its writes must be visible.
                // SAFETY (model): the thread has left; the arena owns it now.
                assert_eq!(counter.with(|p| unsafe { *p }), 7);
                frees.fetch_add(1, Ordering::Relaxed);
            }
            t.join().unwrap();
            assert_eq!(frees.load(Ordering::Relaxed), 1);
        });
    }
}
