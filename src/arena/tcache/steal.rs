//! How one thread takes the buffers another thread's spill holds
//! (`spill.rs`): the spill's guard, and the arena's per-class hint that
//! some spill may hold buffers of a class.
//!
//! Why: a spill keeps up to 128 KiB of a class for its own thread, without
//! the lock. Where a pool's tasks move between its workers from run to run
//! (the same work, another worker), the worker that now needs a class
//! found the depot empty, because the worker that ran the task last
//! holds the class's buffers in its spill, and took new memory: run after
//! run, until every worker's spills held every task's share (on
//! `examples/threads_warm.rs ... moving`, 4 workers went cold for 3 runs more and held 5.8 MiB
//! where 3.0 did without spills). So a request about to take new memory
//! for a small class first looks into the other threads' spills of the
//! class, under the arena's lock, and takes a batch of what one holds
//! into its bin (`spill_path.rs`).
//!
//! The guard: one flag per cache and class. The cache's thread holds it
//! while it pushes to or takes from its spill of the class without the
//! arena's lock; a thief holds it, under the arena's lock, while it takes
//! from the spill. (One flag per cache made a thread at its spill of
//! one class, or preempted there, keep every thief out of all the others:
//! four workers on two loaded cores then took new memory for a whole
//! task's streak now and then.)
//! Each side only tries: a thread that finds its flag held by a thief
//! leaves its spill alone for that operation (its batch goes through the
//! lock, as when the spill is full), and a thief that finds it held by the
//! thread goes on to the next cache. So nobody waits on it; the arena's
//! lock orders thieves among themselves and the thread's locked changes
//! of its spills (the give-back at an overflow, a flush) with them.
//!
//! The hint: one bit per class on the arena. A thread sets its class's bit
//! when its spill of the class goes from empty to holding buffers (a load
//! first, so a bit already set costs no write); a thief clears it before
//! it looks, and looks only when it was set. A look that finds nothing
//! leaves it clear, so a run that takes new memory without any spill to
//! take from pays one load per request, not a pass over every cache. A
//! spill is never left holding buffers behind a clear bit: the thief
//! clears the bit before it takes each cache's guard, and the thread reads
//! the bit after it let go of its guard, so whichever of the two takes
//! that guard second sees the other's write (the thief the pushed buffers,
//! the thread the cleared bit, which it sets again); a thief that cannot
//! take a guard, or stops before the last cache, sets the bit back. The
//! loom model below checks it.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The guard of one cache's spill of one class.
#[derive(Debug, Default)]
pub(crate) struct Guard(AtomicBool);

impl Guard {
    /// Takes the guard; `false` when the other side holds it.
    #[inline]
    pub(crate) fn try_enter(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Lets go of the guard: what the holder wrote is seen by the next
    /// holder.
    #[inline]
    pub(crate) fn leave(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Per small class, whether some cache's spill may hold buffers of it.
#[derive(Debug, Default)]
pub(crate) struct Spilled(AtomicU64);

impl Spilled {
    /// A thread's spill of class `c` went from empty to holding buffers,
    /// and the thread let go of its guard after the push (the bit is read
    /// after the guard's release: see the module's text).
    #[inline]
    pub(crate) fn note(&self, c: usize) {
        let bit = class_bit(c);
        if self.0.load(Ordering::Relaxed) & bit == 0 {
            self.0.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// A thief, under the arena's lock, about to look into the spills of
    /// class `c`: `false` when no spill may hold any; else the bit is
    /// cleared first.
    #[inline]
    pub(crate) fn take_for_look(&self, c: usize) -> bool {
        let bit = class_bit(c);
        if self.0.load(Ordering::Relaxed) & bit == 0 {
            return false;
        }
        // Before the guards' acquisitions: ordered by them.
        self.0.fetch_and(!bit, Ordering::Relaxed);
        true
    }

    /// The thief left buffers of class `c` behind (a spill it could not
    /// look into, or more than it took): the bit again.
    #[inline]
    pub(crate) fn restore(&self, c: usize) {
        self.0.fetch_or(class_bit(c), Ordering::Relaxed);
    }
}

/// Class `c`'s bit in a word of spilling classes (the hint's, a cache's
/// `spill_rooms`): 0 for a class past the word, none of which spills.
#[inline(always)]
pub(crate) const fn class_bit(c: usize) -> u64 {
    if c < 64 {
        1 << c
    } else {
        0
    }
}

// Every class that spills has a bit.
const _: () = {
    let mut c = 64;
    while c < super::SMALL_CLASSES {
        assert!(super::spill::spill_limit(crate::size_class::capacity(c)) == 0);
        c += 1;
    }
};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_guard_has_one_holder_at_a_time() {
        let g = Guard::default();
        assert!(g.try_enter());
        assert!(!g.try_enter(), "held");
        g.leave();
        assert!(g.try_enter(), "let go");
        g.leave();
    }

    #[test]
    fn a_look_clears_its_class_and_only_a_note_or_restore_sets_it() {
        let s = Spilled::default();
        assert!(!s.take_for_look(3), "nothing spilled yet");
        s.note(3);
        s.note(3);
        s.note(39);
        assert!(s.take_for_look(3));
        assert!(!s.take_for_look(3), "cleared by the look");
        assert!(s.take_for_look(39), "another class keeps its bit");
        s.restore(3);
        assert!(s.take_for_look(3), "restored");
        assert!(!s.take_for_look(0));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::SpinLock;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// One cache's spill as the model sees it: its length, and its first
    /// entry's bytes (written by the thread, read by whoever takes it).
    struct Spill {
        len: u32,
        entry: u32,
    }

    struct Shared {
        guard: Guard,
        spilled: Spilled,
        spill: UnsafeCell<Spill>,
        /// The arena's lock, and the buffers taken from the spill (by the
        /// thief, or through the lock by the thread).
        depot: SpinLock<u32>,
    }

    // SAFETY (model): `spill` is touched only under `guard`.
    unsafe impl Sync for Shared {}
    // SAFETY (model): as above.
    unsafe impl Send for Shared {}

    /// A thread pushes two buffers into its empty spill (the second
    /// through the lock when a thief holds its guard) and takes one back,
    /// while a thief under the lock looks once: no buffer is lost or
    /// taken twice, a thief that takes one reads what the thread wrote,
    /// and once both are done a spill that still holds buffers has its
    /// class's bit set, so the next look finds it.
    #[test]
    fn loom_a_spill_is_taken_once_and_never_hidden_from_the_next_look() {
        crate::sync::loom_model(3, || {
            let sh = Arc::new(Shared {
                guard: Guard::default(),
                spilled: Spilled::default(),
                spill: UnsafeCell::new(Spill { len: 0, entry: 0 }),
                depot: SpinLock::new(0),
            });
            let th = Arc::clone(&sh);
            let thief = thread::spawn(move || {
                let mut depot = th.depot.lock();
                if th.spilled.take_for_look(0) {
                    if th.guard.try_enter() {
                        // SAFETY (model): under the guard.
                        th.spill.with_mut(|p| unsafe {
                            if (*p).len > 0 {
                                assert_eq!((*p).entry, 7, "the thread's write");
                                *depot += (*p).len;
                                (*p).len = 0;
                            }
                        });
                        th.guard.leave();
                    } else {
                        th.spilled.restore(0);
                    }
                }
            });
            let mut mine = 0u32;
            // The thread's push: into the spill, or through the lock.
            for _ in 0..2 {
                if sh.guard.try_enter() {
                    // SAFETY (model): under the guard.
                    let was = sh.spill.with_mut(|p| unsafe {
                        (*p).entry = 7;
                        (*p).len += 1;
                        (*p).len - 1
                    });
                    sh.guard.leave();
                    if was == 0 {
                        sh.spilled.note(0);
                    }
                } else {
                    *sh.depot.lock() += 1;
                }
            }
            // Its take: one back from the spill, if any is left.
            if sh.guard.try_enter() {
                // SAFETY (model): under the guard.
                sh.spill.with_mut(|p| unsafe {
                    if (*p).len > 0 {
                        (*p).len -= 1;
                        mine += 1;
                    }
                });
                sh.guard.leave();
            }
            thief.join().unwrap();
            assert!(sh.guard.try_enter(), "both let go");
            // SAFETY (model): under the guard, both threads done.
            let left = sh.spill.with(|p| unsafe { (*p).len });
            assert_eq!(mine + left + *sh.depot.lock(), 2, "every buffer once");
            if left > 0 {
                assert!(
                    sh.spilled.take_for_look(0),
                    "held buffers behind a clear bit"
                );
            }
        });
    }
}
