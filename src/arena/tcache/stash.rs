//! The arena's stash of free large buffers (the classes from
//! [`CARVE_LIMIT`](crate::arena::CARVE_LIMIT) up to
//! [`BUDGET_MAX`](super::BUDGET_MAX)), shared by every thread and taken
//! and filled without the arena's lock.
//!
//! Why: a thread's large slots (`large.rs`) hold one free buffer per class
//! and a few MiB in all, so with a mix of large sizes most large requests
//! find their class's slot empty and most frees find it taken, and each
//! then took the arena's lock: 0.85 locked operations in 100 in the
//! threads bench, where 1 in 100 requests is large. On two cores that
//! costs little; on many, every thread's large requests queue on one lock
//! and every one moves the arena's state between cores. The stash is what
//! the lock path would have done, without the lock: a free the slot
//! refuses goes into its class's stash, and a request its slot cannot
//! serve takes from it (its own class or one up to twice its size,
//! `allocate_stashed`), whichever thread freed the buffer. Unlike bigger
//! per-thread slots, it strands nothing: every thread sees it.
//!
//! Each class has [`ENTRIES`] entries, each a state word and the buffer's
//! address, block and ready length (the bytes known to have their pages,
//! `ready.rs`: a take serves only requests up to it). A put claims an
//! empty entry with a compare-exchange, writes the buffer and publishes it
//! with a release store; a take claims a full entry the same way, reads
//! the buffer and empties it. The arena's locked paths drain it
//! ([`Stash::drain`]: `trim`, a new cap) and the last handle drains and
//! closes it: a put then sees [`CLOSED`] and frees through the lock, so no
//! buffer lands in the stash of an arena whose body is about to go. A
//! stashed buffer is live to the arena's state (it never saw the free)
//! and retained to `stats()` (the count per class is summed in, as the
//! caches' held bytes are). The loom model below checks put, take and
//! drain against each other.

use super::large::Piece;
#[cfg(not(loom))]
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Entries per class: a class's stash absorbs this many frees in a row
/// before the next goes to the lock.
pub(crate) const ENTRIES: usize = 4;

/// An entry's states.
const EMPTY: u32 = 0;
/// Claimed by a put, a take or a drain, which is reading or writing it.
const BUSY: u32 = 1;
const FULL: u32 = 2;
/// The arena's last handle has gone: no more puts.
const CLOSED: u32 = 3;

/// One buffer's place in the stash. The buffer's fields are atomics read
/// and written only by whoever holds the entry [`BUSY`] (relaxed: the
/// state word's acquire and release order them).
#[derive(Debug)]
struct Entry {
    state: AtomicU32,
    block: AtomicU32,
    addr: AtomicUsize,
    ready: AtomicUsize,
}

impl Entry {
    fn new() -> Self {
        Entry {
            state: AtomicU32::new(EMPTY),
            block: AtomicU32::new(0),
            addr: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
        }
    }

    /// Claims the entry from state `from`; `false` if it was not in it.
    #[inline(always)]
    fn claim(&self, from: u32) -> bool {
        self.state
            .compare_exchange(from, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The buffer in a claimed entry.
    #[inline(always)]
    fn read(&self) -> Piece {
        Piece {
            addr: self.addr.load(Ordering::Relaxed),
            block: self.block.load(Ordering::Relaxed),
            ready: self.ready.load(Ordering::Relaxed),
        }
    }

    /// Writes `p` into a claimed entry.
    #[inline(always)]
    fn write(&self, p: Piece) {
        self.addr.store(p.addr, Ordering::Relaxed);
        self.block.store(p.block, Ordering::Relaxed);
        self.ready.store(p.ready, Ordering::Relaxed);
    }

    /// Lets go of a claimed entry in state `to`: release, so the buffer's
    /// fields (and, for [`FULL`], its user's last writes) come before
    /// whoever claims it next.
    #[inline(always)]
    fn release(&self, to: u32) {
        self.state.store(to, Ordering::Release);
    }
}

/// One class's entries and how many are full, on lines of their own.
#[derive(Debug)]
#[repr(align(128))]
struct ClassStash {
    entries: [Entry; ENTRIES],
    /// Buffers in the class's stash: counted before a put publishes one,
    /// uncounted when a take or a drain has it, so never below the full
    /// entries (one above while a put is in flight).
    count: AtomicUsize,
}

impl ClassStash {
    fn new() -> Self {
        ClassStash {
            entries: core::array::from_fn(|_| Entry::new()),
            count: AtomicUsize::new(0),
        }
    }
}

/// The stash of every class it covers, indexed as the large slots are
/// (class `LARGE_FIRST + k`).
#[derive(Debug)]
pub(crate) struct Stash {
    classes: Box<[ClassStash]>,
}

impl Stash {
    /// A stash for `classes` classes, all empty.
    pub(crate) fn new(classes: usize) -> Self {
        Stash {
            classes: (0..classes).map(|_| ClassStash::new()).collect(),
        }
    }

    /// Puts buffer `p` into class `k`'s stash; `false` (nothing changed)
    /// when the class is not stashed, its entries are all in use, or the
    /// stash is closed.
    #[inline]
    pub(crate) fn put(&self, k: usize, p: Piece) -> bool {
        let Some(s) = self.classes.get(k) else {
            return false;
        };
        for e in &s.entries {
            if e.claim(EMPTY) {
                e.write(p);
                // Counted before it can be taken: the count never drops
                // below the full entries (nor wraps).
                s.count.fetch_add(1, Ordering::Relaxed);
                e.release(FULL);
                return true;
            }
        }
        false
    }

    /// A buffer of class `k` ready for `size` bytes, taken out of the
    /// stash; `None` (nothing changed) when there is none.
    #[inline]
    pub(crate) fn take(&self, k: usize, size: usize) -> Option<Piece> {
        let s = self.classes.get(k)?;
        for e in &s.entries {
            if e.state.load(Ordering::Relaxed) != FULL || !e.claim(FULL) {
                continue;
            }
            let p = e.read();
            if p.ready < size {
                e.release(FULL);
                continue;
            }
            s.count.fetch_sub(1, Ordering::Relaxed);
            e.release(EMPTY);
            return Some(p);
        }
        None
    }

    /// Takes every stashed buffer out, calling `f` with its class index;
    /// with `close`, no put succeeds afterwards. Waits for puts and takes
    /// in flight (each holds an entry for a few stores). Returns how many
    /// buffers it took.
    pub(crate) fn drain(&self, close: bool, mut f: impl FnMut(usize, Piece)) -> usize {
        let mut n = 0;
        for (k, s) in self.classes.iter().enumerate() {
            for e in &s.entries {
                loop {
                    match e.state.load(Ordering::Relaxed) {
                        FULL if e.claim(FULL) => {
                            let p = e.read();
                            s.count.fetch_sub(1, Ordering::Relaxed);
                            e.release(if close { CLOSED } else { EMPTY });
                            f(k, p);
                            n += 1;
                            break;
                        }
                        EMPTY if !close || e.claim(EMPTY) => {
                            if close {
                                e.release(CLOSED);
                            }
                            break;
                        }
                        CLOSED => break,
                        _ => spin_once(),
                    }
                }
            }
        }
        n
    }

    /// Stashed buffers of class index `k` (0 for classes not stashed).
    pub(crate) fn count(&self, k: usize) -> usize {
        self.classes
            .get(k)
            .map_or(0, |s| s.count.load(Ordering::Relaxed))
    }

    /// Classes the stash covers.
    pub(crate) fn classes(&self) -> usize {
        self.classes.len()
    }
}

/// One wait for an entry another thread holds [`BUSY`].
#[inline(always)]
fn spin_once() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn piece(n: usize, ready: usize) -> Piece {
        Piece {
            addr: n << 16,
            block: n as u32,
            ready,
        }
    }

    #[test]
    fn a_put_buffer_comes_back_once_and_only_for_what_it_is_ready_for() {
        let s = Stash::new(2);
        assert!(s.put(1, piece(1, 100)));
        assert_eq!(s.count(1), 1);
        assert_eq!(s.take(0, 1), None, "another class");
        assert_eq!(s.take(1, 101), None, "not ready that far");
        assert_eq!(s.count(1), 1, "a refused take leaves it");
        assert_eq!(s.take(1, 100), Some(piece(1, 100)));
        assert_eq!(s.take(1, 1), None, "once");
        assert_eq!(s.count(1), 0);
        assert!(!s.put(2, piece(2, 1)), "no such class");
        assert_eq!(s.count(2), 0);
    }

    #[test]
    fn a_class_holds_its_entries_then_refuses() {
        let s = Stash::new(1);
        for n in 0..ENTRIES {
            assert!(s.put(0, piece(n + 1, 10)));
        }
        assert!(!s.put(0, piece(99, 10)), "full");
        assert_eq!(s.count(0), ENTRIES);
        let mut got = vec![];
        assert_eq!(s.drain(false, |k, p| got.push((k, p.block))), ENTRIES);
        got.sort_unstable();
        assert_eq!(
            got,
            (1..=ENTRIES as u32).map(|b| (0, b)).collect::<Vec<_>>()
        );
        assert_eq!(s.count(0), 0);
        assert!(
            s.put(0, piece(7, 10)),
            "a drain without close reopens nothing: it never closed"
        );
    }

    #[test]
    fn a_closed_stash_takes_no_more_buffers() {
        let s = Stash::new(3);
        assert!(s.put(2, piece(5, 1)));
        let mut got = vec![];
        assert_eq!(s.drain(true, |k, p| got.push((k, p))), 1);
        assert_eq!(got, vec![(2, piece(5, 1))]);
        for k in 0..3 {
            assert!(!s.put(k, piece(6, 1)), "class {k} closed");
            assert_eq!(s.take(k, 0), None);
        }
        assert_eq!(s.drain(true, |_, _| panic!("empty")), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// A thread puts a buffer and another takes from the class while the
    /// arena's last handle drains and closes: the buffer comes out exactly
    /// once (by the take or the drain), or the put was refused and its
    /// thread keeps it; nothing is left in a closed stash.
    #[test]
    fn loom_every_stashed_buffer_comes_out_exactly_once() {
        crate::sync::loom_model(3, || {
            let s = Arc::new(Stash::new(1));
            let p = Piece {
                addr: 1 << 16,
                block: 1,
                ready: 8,
            };
            let (s1, s2) = (Arc::clone(&s), Arc::clone(&s));
            let putter = thread::spawn(move || s1.put(0, p));
            let taker = thread::spawn(move || s2.take(0, 8));
            let mut drained = 0;
            s.drain(true, |_, q| {
                assert_eq!(q, p);
                drained += 1;
            });
            let put = putter.join().unwrap();
            let taken = taker.join().unwrap();
            assert_eq!(
                taken.map_or(0, |q| {
                    assert_eq!(q, p);
                    1
                }) + drained,
                usize::from(put)
            );
            assert_eq!(s.count(0), 0);
            assert!(!s.put(0, p), "closed");
        });
    }
}
