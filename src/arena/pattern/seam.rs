//! The arena side of pattern mode: run boundaries, the patterned allocate
//! and free paths, and the block's life as an ordinary arena buffer.
//!
//! An arena with pattern mode on (`ArenaConfig::pattern`) checks one
//! constant flag at the top of `allocate` and `free` and comes here; an
//! arena without it never does. Here a hit of the thread that owns the
//! run's cursor is served inline without the lock (`fast.rs`); everything
//! else takes the lock, takes the cursor back first and may hand it over
//! again at the end (`PatternSet::detach`, `PatternSet::claim`). Planned buffers carry the block index
//! [`PLANNED_BLOCK`], so their free is recognised by one comparison; the
//! by-address paths (the scoped global allocator) find them by an address
//! range check against the held blocks.
//!
//! The block is an ordinary buffer of the arena: granted (warm, usually)
//! when a run needs it, freed back to its class when no run uses it and no
//! planned buffer lives in it, so the retention cap, LRU eviction and
//! `trim` apply to it like to any retained buffer. While it is held it is
//! live, so a planned buffer keeps its arena alive like any buffer.

use super::cursor::planned_len;
use super::fast::NO_THREAD;
use super::{Action, BlockRef, Fast, PatternSet, Release};
use crate::arena::error::ArenaError;
use crate::arena::metadata;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use crate::arena::{CARVE_LIMIT, MAX_ALIGN};
use crate::size_class::{aligned_size, capacity, class_of};
use core::ptr::NonNull;

/// The block index a planned buffer carries (never a real block: the block
/// table is indexed by `u32` and `u32::MAX` is its NIL).
pub(crate) const PLANNED_BLOCK: u32 = u32::MAX - 1;

thread_local! {
    static TOKEN: u8 = const { 0 };
}

/// A number that tells this thread from every other live thread (an
/// address, so never 0); [`NO_THREAD`] once the thread's locals are gone,
/// which never owns a cursor.
#[inline]
fn thread_token() -> usize {
    TOKEN
        .try_with(|t| t as *const u8 as usize)
        .unwrap_or(NO_THREAD)
}

impl ArenaCore {
    /// Serves a request with the lock held, as the ordinary paths would.
    fn grant_locked(
        &self,
        st: &mut ArenaState,
        size: usize,
        align: usize,
    ) -> Result<Grant, ArenaError> {
        if size == 0 {
            return Err(ArenaError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(ArenaError::BadAlignment { align });
        }
        if align > crate::arena::MAX_ALIGN {
            return Err(ArenaError::UnsupportedAlignment {
                align,
                max: crate::arena::MAX_ALIGN,
            });
        }
        let eff = aligned_size(size, align).ok_or(ArenaError::SizeOverflow { size })?;
        match class_of(eff) {
            Some(c) => {
                if align <= 4096 {
                    if let Some(g) = st.take_exact(c, eff, align, &self.os) {
                        return Ok(g);
                    }
                }
                if let Some(g) = st.take_warm(c, eff, align, &self.os) {
                    return Ok(g);
                }
                let _m = metadata::enter();
                st.take_cold(c, eff, align, &self.os)
            }
            None => {
                let _m = metadata::enter();
                st.map_dedicated(eff, align, &self.os)
            }
        }
    }

    /// A pattern's block of `height` bytes: a retained buffer of its class
    /// when there is one, else a new one in a mapping of its own
    /// (`take_cold_own`: advised for huge pages only where whole).
    fn grant_block(
        &self,
        st: &mut ArenaState,
        height: usize,
        align: usize,
    ) -> Result<Grant, ArenaError> {
        let eff = aligned_size(height, align).ok_or(ArenaError::SizeOverflow { size: height })?;
        match class_of(eff) {
            Some(c) if capacity(c) >= CARVE_LIMIT && align <= MAX_ALIGN => {
                if let Some(g) = st.take_warm(c, eff, align, &self.os) {
                    return Ok(g);
                }
                let _m = metadata::enter();
                st.take_cold_own(c, eff, &self.os)
            }
            _ => self.grant_locked(st, height, align),
        }
    }

    /// Gives a released pattern block back to the arena (retained, warm).
    fn give_back(&self, st: &mut ArenaState, r: Release) {
        if let Some(b) = r {
            let freed = st.free(b.index, b.base, &self.os);
            debug_assert!(freed, "a pattern block was not live");
        }
    }

    /// A planned buffer at `addr` of `cap` bytes.
    #[inline(always)]
    fn planned_grant(addr: usize, cap: usize) -> Grant {
        Grant {
            // SAFETY: `addr` is inside a held block (base + an offset below
            // the block's height), so it is not null.
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            cap,
            block: PLANNED_BLOCK,
            fresh: false,
            warm: true,
        }
    }

    /// `allocate` in an arena with pattern mode on: the owner of a matching
    /// run is served here without the lock (`fast.rs`); everything else
    /// goes to [`ArenaCore::allocate_patterned_locked`].
    #[inline(always)]
    pub(crate) fn allocate_patterned(
        &self,
        size: usize,
        align: usize,
    ) -> Result<Grant, ArenaError> {
        if let Some((addr, cap)) = self.pattern_fast.try_alloc(thread_token(), size, align) {
            return Ok(Self::planned_grant(addr, cap));
        }
        self.allocate_patterned_locked(size, align)
    }

    /// [`ArenaCore::allocate_patterned`]'s lock-free hit alone: `None`
    /// (nothing changed) when the request is not the owned cursor's next
    /// planned event.
    #[inline(always)]
    pub(crate) fn allocate_planned_hit(&self, size: usize, align: usize) -> Option<Grant> {
        let (addr, cap) = self.pattern_fast.try_alloc(thread_token(), size, align)?;
        Some(Self::planned_grant(addr, cap))
    }

    /// The locked part of [`ArenaCore::allocate_patterned`].
    #[inline(never)]
    fn allocate_patterned_locked(&self, size: usize, align: usize) -> Result<Grant, ArenaError> {
        let thread = thread_token();
        let mut st = self.lock();
        let Some(mut set) = st.pattern.take() else {
            return self.grant_locked(&mut st, size, align);
        };
        let out = self.allocate_with(&mut st, &mut set, thread, size, align);
        set.claim(thread, &self.pattern_fast);
        st.pattern = Some(set);
        out
    }

    /// Takes the cursor back from the fast path when `thread` owns it,
    /// giving back a block that run leaves unused.
    fn detach_own(&self, st: &mut ArenaState, set: &mut PatternSet, thread: usize) {
        if self.pattern_fast.owner() == thread {
            let r = set.detach(&self.pattern_fast);
            self.give_back(st, r);
        }
    }

    /// An allocation with the lock held and the pattern set taken out.
    fn allocate_with(
        &self,
        st: &mut ArenaState,
        set: &mut PatternSet,
        thread: usize,
        size: usize,
        align: usize,
    ) -> Result<Grant, ArenaError> {
        self.detach_own(st, set, thread);
        // The locked hit path: a matching run whose block is held.
        if let Some(a) = set.try_hit(thread, size, align) {
            return match a {
                Action::Planned { addr, cap } => Ok(Self::planned_grant(addr, cap)),
                Action::Ordinary { .. } => self.grant_locked(st, size, align),
            };
        }
        // Recording may grow the event list through the global allocator.
        let _m = (!set.serving()).then(metadata::enter);
        let action = set.on_allocate(thread, size, align, |height, align, first| {
            if first {
                // A pattern's first block may be larger than the one the
                // other keys used so far: keep only the new block's class
                // (the learning buffers went at the learning boundary), so
                // the arena retains one block, not one per size.
                let keep = aligned_size(height, align).and_then(class_of);
                st.trim_classes(|c| Some(c) == keep, &self.os);
            }
            let g = self.grant_block(st, height, align).ok()?;
            Some(BlockRef {
                index: g.block,
                base: g.ptr.as_ptr() as usize,
            })
        });
        match action {
            Action::Planned { addr, cap } => Ok(Self::planned_grant(addr, cap)),
            Action::Ordinary { record } => {
                let g = self.grant_locked(st, size, align);
                if let Some(k) = record {
                    match &g {
                        // Planned at the bytes asked for (16-byte granules),
                        // not the class capacity: the block packs requests,
                        // not classes.
                        Ok(g) => set.granted(k, g.block, planned_len(size)),
                        Err(_) => set.failed(),
                    }
                }
                g
            }
        }
    }

    /// Frees with the lock held in an arena with pattern mode on: a planned
    /// buffer (`block == PLANNED_BLOCK`, or found by address when `block`
    /// is `None`) or an arena block (noted if the run is being learned).
    fn free_patterned_locked(&self, st: &mut ArenaState, block: Option<u32>, addr: usize) -> bool {
        let thread = thread_token();
        let Some(mut set) = st.pattern.take() else {
            return match block {
                Some(PLANNED_BLOCK) => false,
                Some(b) => st.free(b, addr, &self.os),
                None => st.free(crate::arena::blocks::NIL, addr, &self.os),
            };
        };
        self.detach_own(st, &mut set, thread);
        let out = self.free_with(st, &mut set, block, addr);
        set.claim(thread, &self.pattern_fast);
        st.pattern = Some(set);
        out
    }

    fn free_with(
        &self,
        st: &mut ArenaState,
        set: &mut PatternSet,
        block: Option<u32>,
        addr: usize,
    ) -> bool {
        if matches!(block, Some(PLANNED_BLOCK) | None) {
            if let Some(r) = set.on_free_planned(addr) {
                self.give_back(st, r);
                return true;
            }
        }
        let b = match block {
            Some(PLANNED_BLOCK) => return false,
            Some(b) => b,
            None => match st.live_block_at(addr) {
                Some(b) => b,
                None => return false,
            },
        };
        set.on_free_block(b);
        st.free(b, addr, &self.os)
    }

    /// `free` (by block, or by address when `block` is `None`) in an arena
    /// with pattern mode on: the owner's next recorded free is done here
    /// without the lock (`fast.rs`).
    ///
    /// # Safety
    /// As [`ArenaCore::free`].
    #[inline(always)]
    pub(crate) unsafe fn free_patterned(
        this: NonNull<ArenaCore>,
        block: Option<u32>,
        addr: usize,
    ) -> bool {
        if matches!(block, Some(PLANNED_BLOCK) | None) {
            // SAFETY: the caller guarantees `this` is live for this call.
            let fast = unsafe { &this.as_ref().pattern_fast };
            if fast.try_free(thread_token(), addr) {
                return true;
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { Self::free_patterned_slow(this, block, addr) }
    }

    /// The locked part of [`ArenaCore::free_patterned`].
    ///
    /// # Safety
    /// As [`ArenaCore::free`].
    #[inline(never)]
    unsafe fn free_patterned_slow(
        this: NonNull<ArenaCore>,
        block: Option<u32>,
        addr: usize,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe {
            Self::locked_last_out(this, |st, core| core.free_patterned_locked(st, block, addr))
        }
    }

    /// The capacity of the live planned buffer at `addr`, if there is one.
    pub(crate) fn planned_cap_at(&self, addr: usize) -> Option<usize> {
        self.lock()
            .pattern
            .as_ref()?
            .cap_at(addr, &self.pattern_fast)
    }

    /// A run boundary for the current thread (`key` selects the pattern;
    /// without one, the run's first request does). No-op when pattern mode is off.
    pub(crate) fn pattern_boundary(&self, key: Option<u64>) {
        if !self.pattern_on {
            return;
        }
        let thread = thread_token();
        let mut planned = None;
        // Each pass ends the run in progress; a learning run is planned
        // with the lock released (other threads go on meanwhile) and added
        // at the next pass. After a few passes (other threads kept ending
        // learning runs in between) the planning happens under the lock.
        for pass in 0.. {
            let mut st = self.lock();
            let Some(mut set) = st.pattern.take() else {
                return;
            };
            self.detach_own(&mut st, &mut set, thread);
            if let Some(p) = planned.take() {
                let _m = metadata::enter();
                if set.insert(p) {
                    // A new pattern: the buffers its learning run used are
                    // retained in their classes, and its block will replace
                    // them. Give them back now (this boundary pays these
                    // system calls), so the block takes their place rather
                    // than opening more memory, and no partly touched
                    // learning buffer is left for the block's class. Runs
                    // that deviate later take class buffers anew.
                    st.trim_classes(|_| false, &self.os);
                }
            }
            let (r, learned) = if pass < 3 {
                set.end_run_deferred(&self.pattern_fast)
            } else {
                let _m = metadata::enter();
                (set.end_run(&self.pattern_fast), None)
            };
            self.give_back(&mut st, r);
            match learned {
                None => {
                    set.start_run(thread, key);
                    set.claim(thread, &self.pattern_fast);
                    st.pattern = Some(set);
                    return;
                }
                Some(l) => {
                    st.pattern = Some(set);
                    drop(st);
                    let _m = metadata::enter();
                    planned = Some(super::plan(l));
                }
            }
        }
    }

    /// Ends the run in progress (the last handle is going). A cursor that
    /// another thread owns is taken back when that thread holds no planned
    /// buffer: with no handle left it cannot allocate, so it will not act
    /// on the cursor again (`fast.rs`).
    pub(crate) fn pattern_end(&self) {
        let mut st = self.lock();
        let Some(mut set) = st.pattern.take() else {
            return;
        };
        self.detach_own(&mut st, &mut set, thread_token());
        let r = {
            let _m = metadata::enter();
            set.end_run_unplanned(&self.pattern_fast)
        };
        self.give_back(&mut st, r);
        if set.fast_live(&self.pattern_fast) == Some(0) {
            let r = set.detach(&self.pattern_fast);
            self.give_back(&mut st, r);
        }
        st.pattern = Some(set);
    }
}

/// Fills the pattern fields of a stats snapshot.
pub(crate) fn fill_stats(set: &PatternSet, fast: &Fast, s: &mut crate::stats::ArenaStats) {
    let c = set.counters;
    s.pattern_hits = c.hits;
    s.pattern_misses = c.misses;
    s.pattern_relearns = c.relearns;
    s.pattern_learned = c.learned;
    s.pattern_refusals = c.refusals;
    s.pattern_planned_allocations = set.planned_allocations(fast);
    s.pattern_block_bytes = set.block_bytes();
}

impl crate::arena::ExecutionArena {
    /// A run boundary: for pattern mode ([`ArenaConfig::pattern`](crate::ArenaConfig::pattern)),
    /// the current thread's run so far ends (and is planned, if it was
    /// being learned), and a new one starts, matched against the pattern
    /// whose first request it repeats. Without pattern mode, the execution
    /// heap (which serves one thread's large buffers at a time) moves to
    /// the calling thread if no heap buffer is live: call it where a run
    /// starts when runs move between threads (a worker pool), so each run
    /// places its large buffers as the last one did. Costs one load when
    /// the heap serves this thread already.
    ///
    /// ```
    /// use warmarena::{ArenaConfig, ExecutionArena};
    /// let arena = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    /// for _ in 0..3 {
    ///     arena.begin_run();
    ///     let a = arena.allocate(4096, 64).unwrap();
    ///     let b = arena.allocate(1000, 16).unwrap();
    ///     drop((a, b));
    /// }
    /// arena.begin_run();
    /// let s = arena.stats();
    /// assert_eq!((s.pattern_learned, s.pattern_hits), (1, 2));
    /// ```
    pub fn begin_run(&self) {
        self.core.heap_boundary();
        self.core.pattern_boundary(None)
    }

    /// [`begin_run`](Self::begin_run) with a caller's key (an input shape's
    /// hash, say): runs with the same key share a pattern, so runs that
    /// alternate between shapes are each served from their own block.
    ///
    /// ```
    /// use warmarena::{ArenaConfig, ExecutionArena};
    /// let arena = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    /// for run in 0..6u64 {
    ///     arena.begin_run_keyed(run % 2);
    ///     drop(arena.allocate(1000 << (run % 2), 64).unwrap());
    /// }
    /// arena.begin_run();
    /// assert_eq!(arena.stats().pattern_hits, 4);
    /// ```
    pub fn begin_run_keyed(&self, key: u64) {
        self.core.heap_boundary();
        self.core.pattern_boundary(Some(key))
    }
}
