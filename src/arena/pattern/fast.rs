//! The lock-free hit path: while a run matches its pattern and its block is
//! held, the run's thread owns the cursor and serves planned allocations
//! and frees without the arena lock.
//!
//! Ownership. `owner` is the owning thread's token (0: none). It is set
//! and cleared only under the arena lock and only by the owning thread
//! itself (`PatternSet::claim` at the end of one of its locked operations,
//! `PatternSet::detach` at the start of the next), with one exception made
//! safe below. So a thread that reads its own token there owns the cursor
//! until it takes the lock again: nobody else writes its position, and
//! the pattern (its steps, its block) cannot go away, because a pattern
//! that is `owned` is never evicted, relearned or given back.
//!
//! Everything here is an atomic written by one thread at a time (plain
//! loads and stores on the hot path, no read-modify-write). The owner
//! writes only its position; what it handed out and still holds follows
//! from the pattern's prefix counts, so `stats()` stays exact and
//! by-address look-ups work from any thread.
//!
//! Others talk to the owner through `last`: a boundary crossed by another
//! thread ends the run, so it sets `last` to 0, and the owner's next operation
//! takes the locked path, which detaches and finishes the run. Frees of
//! planned buffers by other threads take the lock and are counted apart
//! (`Pattern::foreign`); the cursor does not advance for them, so the run
//! deviates at the owner's next event that expected that free.
//!
//! The one exception: when the arena's last handle goes, no thread can
//! allocate from it any more. If the owner's position (read with acquire;
//! a fast free's only write is its release store of the position) says
//! it holds no planned buffer, it has none left to free and its last fast
//! free is complete: the thread dropping the handle detaches on the
//! owner's behalf, so the block and the body go. If it still holds planned
//! buffers, the block is live and keeps the body, and the owner's next
//! free of one of them takes the lock (the stopped cursor sends it there)
//! and detaches.

use super::cursor::{request_tag, Step};
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};

/// The token of a thread that can own no cursor (one whose thread-locals
/// are gone): never installed, so it never matches `owner`. Owner 0 means
/// none; real tokens are addresses, neither 0 nor this.
pub(crate) const NO_THREAD: usize = usize::MAX;

/// The cursor of the run served lock-free, if any.
#[derive(Debug, Default)]
pub(crate) struct Fast {
    owner: AtomicUsize,
    /// The next step: the only thing the owner writes. What it handed out
    /// and holds follows from the pattern's prefix counts (`Pattern::planned`,
    /// `Pattern::net`) between `from` and this position.
    cur: AtomicPtr<Step>,
    /// The recording's last step: it goes through the lock (which ends the
    /// ownership), so a finished run owns nothing. Null when another
    /// thread told the owner to stop (under the lock).
    last: AtomicPtr<Step>,
    base: AtomicUsize,
    /// The pattern's first step (`Pattern::steps`, unchanged while owned).
    steps: AtomicPtr<Step>,
    /// The position at the claim.
    from: AtomicUsize,
    /// The owned pattern's `Pattern::id`.
    id: AtomicU64,
}

/// The part of a claim the owner reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim {
    pub steps: *const Step,
    pub len: usize,
    pub base: usize,
    pub pos: usize,
    pub id: u64,
}

/// Where the owned cursor stands: the claim's position and the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub id: u64,
    pub from: usize,
    pub pos: usize,
}

impl Fast {
    /// The owning thread's token (0: none).
    #[inline(always)]
    pub(crate) fn owner(&self) -> usize {
        self.owner.load(Relaxed)
    }

    /// The owned cursor, read by any thread under the lock (acquire: pairs
    /// with the release store of the owner's frees, see the module doc).
    pub(crate) fn cursor(&self) -> Option<Cursor> {
        (self.owner() != 0).then(|| {
            let cur = self.cur.load(Acquire) as usize;
            let first = self.steps.load(Relaxed) as usize;
            Cursor {
                id: self.id.load(Relaxed),
                from: self.from.load(Relaxed),
                pos: (cur - first) / core::mem::size_of::<Step>(),
            }
        })
    }

    /// Tells the owner to stop (its run was ended by another thread).
    pub(crate) fn stop(&self) {
        self.last.store(core::ptr::null_mut(), Relaxed);
    }

    /// Hands the cursor to `thread` (under the lock, on that thread).
    pub(crate) fn install(&self, thread: usize, c: Claim) {
        debug_assert!(thread != 0 && thread != NO_THREAD && self.owner() == 0 && c.len > 0);
        let steps = c.steps.cast_mut();
        self.steps.store(steps, Relaxed);
        self.last.store(steps.wrapping_add(c.len - 1), Relaxed);
        self.base.store(c.base, Relaxed);
        self.cur.store(steps.wrapping_add(c.pos), Relaxed);
        self.from.store(c.pos, Relaxed);
        self.id.store(c.id, Relaxed);
        self.owner.store(thread, Relaxed);
    }

    /// Takes the cursor back (under the lock, on the owner's thread or
    /// when the owner can no longer act): where it stood.
    pub(crate) fn take(&self) -> Option<Cursor> {
        let c = self.cursor();
        self.owner.store(0, Relaxed);
        c
    }

    /// The next step if `thread` owns the cursor and it is before
    /// the recording's last step (and the owner was not told to stop).
    /// `thread` is a real token or [`NO_THREAD`], never 0, so with no owner
    /// nothing here is read past `owner`.
    #[inline(always)]
    fn step(&self, thread: usize) -> Option<(*mut Step, Step)> {
        if self.owner.load(Relaxed) != thread {
            return None;
        }
        let cur = self.cur.load(Relaxed);
        if cur as usize >= self.last.load(Relaxed) as usize {
            return None;
        }
        // SAFETY: `thread` owns the cursor, so the pattern whose steps
        // `cur` points into is owned: never dropped nor changed until the
        // owner (this thread) detaches under the lock; `cur` is before its
        // last step, so in bounds.
        let s = unsafe { *cur };
        Some((cur, s))
    }

    /// An allocation request of `thread`: `(address, capacity)` when it is
    /// the next recorded event and planned; `None` sends it to the lock.
    #[inline(always)]
    pub(crate) fn try_alloc(
        &self,
        thread: usize,
        size: usize,
        align: usize,
    ) -> Option<(usize, usize)> {
        let tag = request_tag(size, align)?;
        let (cur, s) = self.step(thread)?;
        // An unplanned step's tag carries `UNPLANNED_TAG`: it never equals.
        if s.tag != tag {
            return None;
        }
        self.cur.store(cur.wrapping_add(1), Relaxed);
        Some((self.base.load(Relaxed) + s.off, s.cap()))
    }

    /// A free by `thread` of the buffer at `addr`: `true` when it is the
    /// next recorded event (done); `false` sends it to the lock.
    #[inline(always)]
    pub(crate) fn try_free(&self, thread: usize, addr: usize) -> bool {
        let Some((cur, s)) = self.step(thread) else {
            return false;
        };
        if s.tag != 0 || self.base.load(Relaxed).wrapping_add(s.off) != addr {
            return false;
        }
        // The free's only write, release: a thread that reads it (acquire)
        // sees the free done (see the module doc).
        self.cur.store(cur.wrapping_add(1), Release);
        true
    }
}
