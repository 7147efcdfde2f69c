//! Lane numbers for threads ([`Lane::current_thread`](super::Lane::current_thread)).
//!
//! A thread takes a number the first time it asks and gives it back when
//! it exits; the next thread to ask takes the most recently given back.
//! A lane's slot (and its buffer) lives as long as the pool, so numbering
//! each thread anew would leave one slot and one buffer behind for every
//! thread that ever claimed scratch; reusing numbers keeps as many lanes
//! as threads ran at once, and hands a new thread a buffer already grown.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The first thread lane: thread lanes count up from 2^63, so they do not
/// collide with lanes a caller numbers itself from 0 (queue or stream ids).
pub(super) const FIRST: u64 = 1 << 63;

/// Numbers never handed out yet start here.
static NEXT: AtomicU64 = AtomicU64::new(FIRST);

/// Numbers given back by exited threads, most recent last.
static RETURNED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// This thread's number (0: none yet); given back by the destructor.
struct ThreadLane(Cell<u64>);

impl Drop for ThreadLane {
    fn drop(&mut self) {
        let n = self.0.replace(0);
        if n != 0 {
            // Nothing panics holding the lock, so a poisoned one is whole.
            let mut returned = RETURNED.lock().unwrap_or_else(|e| e.into_inner());
            // Kept only if the vector can hold it: a number lost to a
            // failed allocation is one lane fewer to reuse, nothing more.
            if returned.try_reserve(1).is_ok() {
                returned.push(n);
            }
        }
    }
}

thread_local! {
    static MINE: ThreadLane = const { ThreadLane(Cell::new(0)) };
}

/// The calling thread's lane number: its own while it runs, no other live
/// thread's. A thread already past its thread-local destructors gets a
/// number of its own that is never reused.
pub(super) fn current() -> u64 {
    MINE.try_with(|mine| {
        if mine.0.get() == 0 {
            mine.0.set(take());
        }
        mine.0.get()
    })
    .unwrap_or_else(|_| NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A number no live thread holds: the most recently given back, else a new one.
fn take() -> u64 {
    let reused = RETURNED.lock().unwrap_or_else(|e| e.into_inner()).pop();
    reused.unwrap_or_else(|| NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Threads that run one after another share a number; threads alive
    /// at once never do.
    #[test]
    fn exited_threads_numbers_are_reused_and_live_ones_are_distinct() {
        let first = std::thread::spawn(current).join().unwrap();
        let mut seen = std::collections::BTreeSet::new();
        let in_turn = if cfg!(miri) { 6 } else { 20 };
        for _ in 0..in_turn {
            seen.insert(std::thread::spawn(current).join().unwrap());
        }
        // Other tests' threads may take and give back numbers meanwhile,
        // but threads in turn cannot each need a new one.
        assert!(first >= FIRST);
        assert!(seen.len() < in_turn, "no number was reused: {seen:?}");

        let threads = if cfg!(miri) { 3 } else { 8 };
        let all_here = std::sync::Barrier::new(threads);
        let live: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let n = current();
                        all_here.wait();
                        assert_eq!(current(), n, "a thread's number changed");
                        n
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let distinct: std::collections::BTreeSet<_> = live.iter().collect();
        assert_eq!(distinct.len(), threads, "two live threads share a lane");
    }
}
