//! The one buffer a thread cache holds that other threads may take: the
//! execution heap's thread's kept piece (`heap_slot.rs`) or the buffer a
//! cache holds above the large slots' budget (`large.rs`).
//!
//! Why: a buffer in a thread's cache is invisible to every other thread
//! until its own thread's next operation on the arena. For a few small
//! buffers that strands little; for one of 100 MiB it strands a cold
//! allocation for whichever thread asks next, and a `trim` that cannot
//! release it. So the cache offers that one buffer in a word the arena's
//! locked paths can read: a `trim`, a new retention cap, and another
//! thread's request that finds its class empty claim it and free it into
//! the arena on the spot.
//!
//! The protocol, one word per cache: 0 (nothing offered), a block plus
//! one (offered), [`CLAIMED`]. The cache's thread offers (a store: the word
//! is 0 then) and withdraws (a compare-exchange back to 0) without the
//! lock; a claimer, under the arena's lock, compare-exchanges an offer to
//! [`CLAIMED`] and frees the buffer. Exactly one side wins each offer. The
//! cache sees a claim when its withdrawal fails (or under the lock, when it
//! gives the buffer back) and then settles, under the lock, its own
//! counters and the arena's count of claimed bytes ([`Claim::settle`]).
//! The offer's release store and the claim's acquire read order the
//! buffer's last use by its user before its reuse by anyone the arena
//! hands it to. The loom model below checks it.

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};

/// The word's value once another thread claimed the offer.
const CLAIMED: u64 = u64::MAX;

/// One cache's offer word.
#[derive(Debug)]
pub(crate) struct Claim(AtomicU64);

impl Default for Claim {
    fn default() -> Self {
        Claim(AtomicU64::new(0))
    }
}

impl Claim {
    /// The cache's thread offers block `b`, which its cache now holds. The
    /// word is empty: an offer is withdrawn or settled before the next.
    #[inline(always)]
    pub(crate) fn offer(&self, b: u32) {
        self.0.store(u64::from(b) + 1, Ordering::Release);
    }

    /// The cache's thread takes block `b` back for itself; `false` when
    /// another thread claimed it (the cache must [`Claim::settle`]).
    #[inline(always)]
    pub(crate) fn withdraw(&self, b: u32) -> bool {
        self.0
            .compare_exchange(u64::from(b) + 1, 0, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The block on offer, if any (not claimed).
    #[inline]
    pub(crate) fn offered(&self) -> Option<u32> {
        match self.0.load(Ordering::Acquire) {
            0 | CLAIMED => None,
            w => Some((w - 1) as u32),
        }
    }

    /// Another thread, under the arena's lock, claims block `b` (as read
    /// from [`Claim::offered`]); `false` when the cache's thread withdrew
    /// it first.
    #[inline]
    pub(crate) fn claim(&self, b: u32) -> bool {
        self.0
            .compare_exchange(
                u64::from(b) + 1,
                CLAIMED,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The cache's thread, under the arena's lock, after a failed
    /// withdrawal: the word is empty again.
    #[inline]
    pub(crate) fn settle(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn each_offer_goes_to_one_side() {
        let c = Claim::default();
        assert_eq!(c.offered(), None);
        c.offer(7);
        assert_eq!(c.offered(), Some(7));
        assert!(!c.claim(8), "only the block on offer");
        assert!(c.withdraw(7));
        assert!(!c.claim(7), "withdrawn first");
        c.offer(0);
        assert!(c.claim(0));
        assert_eq!(c.offered(), None);
        assert!(!c.withdraw(0), "claimed first");
        c.settle();
        assert_eq!(c.offered(), None);
        c.offer(u32::MAX - 1);
        assert_eq!(c.offered(), Some(u32::MAX - 1));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::SpinLock;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// What the arena's lock guards: who has the buffer on the arena's
    /// side, and the claimed count the cache settles.
    #[derive(Default)]
    struct Arena {
        in_arena: u32,
        claimed: u32,
    }

    /// The cache's thread offers its buffer and later wants it back, while
    /// another thread claims under the lock: the buffer ends on exactly one
    /// side, the claimer's read of the buffer sees the user's last write,
    /// and once the cache settles the claimed count is back to 0.
    #[test]
    fn loom_an_offered_buffer_goes_to_exactly_one_side() {
        crate::sync::loom_model(3, || {
            let lock = Arc::new(SpinLock::new(Arena::default()));
            let claim = Arc::new(Claim::default());
            // The buffer's bytes: written by its user before the free.
            let bytes = Arc::new(UnsafeCell::new(0u32));
            let (l2, c2, b2) = (Arc::clone(&lock), Arc::clone(&claim), Arc::clone(&bytes));
            let claimer = thread::spawn(move || {
                let mut st = l2.lock();
                if let Some(b) = c2.offered() {
                    if c2.claim(b) {
                        // SAFETY (model): the claim's acquire orders this
                        // read after the user's write and the offer.
                        let v = b2.with(|p| unsafe { *p });
                        assert_eq!(v, 5);
                        st.in_arena += 1;
                        st.claimed += 1;
                    }
                }
            });
            // The user writes, frees into the cache: offered.
            // SAFETY (model): nobody else has the buffer before the offer.
            bytes.with_mut(|p| unsafe { *p = 5 });
            claim.offer(3);
            let mine = claim.withdraw(3);
            if !mine {
                let mut st = lock.lock();
                claim.settle();
                st.claimed -= 1;
            }
            claimer.join().unwrap();
            let st = lock.lock();
            assert_eq!(u32::from(mine) + st.in_arena, 1);
            assert_eq!(st.claimed, 0);
            assert_eq!(claim.offered(), None);
        });
    }
}
