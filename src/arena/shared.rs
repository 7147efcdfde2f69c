//! One arena as shared by its handles and the buffers it served: the state
//! behind a lock, the OS-call counters beside it, the validation every request
//! passes, and the arena's own lifetime.
//!
//! Lifetime without a reference count per buffer: the arena's body lives
//! while any handle exists *or* any buffer it served is live. Handles are
//! counted atomically; live buffers are already counted under the lock
//! (`live_buffers`), so a buffer keeps its arena alive at no extra cost. The
//! last handle marks the arena orphaned; whoever (last handle or last
//! buffer) sees "orphaned and nothing live" under the lock frees the body.

use super::blocks::BlockState;
use super::error::AllocError;
use super::metadata;
use super::owners::Owner;
use super::pins::{PinInfo, PinRecord};
use super::state::{ArenaState, Grant};
use super::{ArenaConfig, ArenaKind, MAX_ALIGN};
use crate::os::OsCounters;
use crate::size_class::{aligned_size, class_of, class_of_classed, MAX_CLASS_SIZE};
use crate::stats::ArenaStats;
use crate::sync::rc::{fence, AtomicUsize, Ordering};
use crate::sync::{SpinGuard, SpinLock};
use core::ptr::NonNull;

/// The shared body of an arena.
pub(crate) struct ArenaCore {
    pub(crate) kind: ArenaKind,
    handles: AtomicUsize,
    state: SpinLock<ArenaState>,
    pub(crate) os: OsCounters,
    /// Pattern mode is on (fixed at creation): allocate and free go
    /// through `pattern::seam` first.
    pub(crate) pattern_on: bool,
}

impl ArenaCore {
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, ArenaState> {
        self.state.lock()
    }

    /// Checks a request and serves it warm if a retained buffer fits, cold otherwise.
    ///
    /// The common case (a classed size, an alignment up to a page, a
    /// retained buffer of the request's own class) is inlined into the
    /// caller; everything else, bad input included, takes the out-of-line
    /// [`ArenaCore::allocate_general`].
    #[inline(always)]
    pub(crate) fn allocate(&self, size: usize, align: usize) -> Result<Grant, AllocError> {
        if self.pattern_on {
            return self.allocate_patterned(size, align);
        }
        // One range check stands for "non-zero, classed, no overflow in
        // rounding"; one bit test for "power of two up to a page".
        if size.wrapping_sub(1) < MAX_CLASS_SIZE / 2 && align.is_power_of_two() && align <= 4096 {
            let eff = (size.max(align) + (align - 1)) & !(align - 1);
            let c = class_of_classed(eff);
            let mut st = self.lock();
            if let Some(g) = st.take_exact(c, eff, align, &self.os) {
                return Ok(g);
            }
            // Checked and classed already, and the lock is held: go on from here.
            return self.serve_classed(st, c, eff, align);
        }
        self.allocate_general(size, align)
    }

    /// A classed request of `eff` bytes (class `c`) with the lock held:
    /// a retained buffer of the class, else the cold path.
    #[inline(never)]
    fn serve_classed(
        &self,
        mut st: SpinGuard<'_, ArenaState>,
        c: usize,
        eff: usize,
        align: usize,
    ) -> Result<Grant, AllocError> {
        if let Some(g) = st.take_warm(c, eff, align, &self.os) {
            return Ok(g);
        }
        // The cold path may grow metadata through the global allocator
        // while this thread holds the lock.
        let _m = metadata::enter();
        st.take_cold(c, eff, align, &self.os)
    }

    /// [`ArenaCore::allocate`] for requests off the inlined path: validation
    /// with typed errors, then as [`ArenaCore::serve_classed`] or a
    /// dedicated mapping.
    #[inline(never)]
    fn allocate_general(&self, size: usize, align: usize) -> Result<Grant, AllocError> {
        if size == 0 {
            return Err(AllocError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(AllocError::BadAlignment { align });
        }
        if align > MAX_ALIGN {
            return Err(AllocError::UnsupportedAlignment {
                align,
                max: MAX_ALIGN,
            });
        }
        let eff = aligned_size(size, align).ok_or(AllocError::SizeOverflow { size })?;
        let mut st = self.lock();
        match class_of(eff) {
            Some(c) => self.serve_classed(st, c, eff, align),
            None => {
                let _m = metadata::enter();
                st.map_dedicated(eff, align, &self.os)
            }
        }
    }

    /// Returns a buffer; `false` when `block` is not a live buffer at `addr`.
    ///
    /// # Safety
    /// `this` must point to a live arena body (one that served the buffer,
    /// or that a handle keeps alive). When this returns, the body may be
    /// gone: the caller must not use `this` again unless it holds a handle.
    #[inline(always)]
    pub(crate) unsafe fn free(this: NonNull<ArenaCore>, block: u32, addr: usize) -> bool {
        let (returned, dead) = {
            // SAFETY: the caller guarantees `this` is live for this call.
            let core = unsafe { this.as_ref() };
            if core.pattern_on {
                // SAFETY: forwarded from the caller.
                return unsafe { Self::free_patterned(this, Some(block), addr) };
            }
            let mut st = core.lock();
            let returned = st.free(block, addr, &core.os);
            (returned, st.orphaned && st.stats.live_buffers == 0)
        };
        if dead {
            // SAFETY: no handle and no live buffer remains, and the decision
            // was taken under the lock, so no one else can reach the body.
            unsafe { Self::destroy(this) };
        }
        returned
    }

    /// Returns the live buffer that starts at `addr`, found by address, and
    /// frees the body when that was the last thing keeping it alive: the
    /// by-address twin of [`ArenaCore::free`], for owners that hold no
    /// handle (the scoped global allocator). `false` (and no change) when
    /// no live buffer starts at `addr`.
    ///
    /// # Safety
    /// `this` must be the body's original pointer (as registered in the
    /// owner table or returned by [`CoreHandle::ptr`]) and the body must be
    /// alive: the buffer at `addr` is live, or the caller holds a handle.
    /// When this returns, the body may be gone.
    pub(crate) unsafe fn free_by_addr(this: NonNull<ArenaCore>, addr: usize) -> bool {
        let (returned, dead) = {
            // SAFETY: the caller guarantees `this` is live for this call.
            let core = unsafe { this.as_ref() };
            if core.pattern_on {
                // SAFETY: forwarded from the caller.
                return unsafe { Self::free_patterned(this, None, addr) };
            }
            let mut st = core.lock();
            let returned = match st.live_block_at(addr) {
                Some(i) => st.free(i, addr, &core.os),
                None => false,
            };
            (returned, st.orphaned && st.stats.live_buffers == 0)
        };
        if dead {
            // SAFETY: no handle and no live buffer remains, and the decision
            // was taken under the lock, so no one else can reach the body.
            unsafe { Self::destroy(this) };
        }
        returned
    }

    /// Pins live block `block` (at `addr`, logical length `len`) for shared
    /// ownership: its record gets one owner and the buffer counts as leased.
    /// `None` if the block is not live at `addr` or is pinned already.
    ///
    /// Takes the body as the pointer the arena was made with (not a
    /// reference), because the last owner may free the body through it.
    ///
    /// # Safety
    /// `this` must point to a live arena body.
    pub(crate) unsafe fn pin(
        this: NonNull<ArenaCore>,
        block: u32,
        addr: usize,
        len: usize,
    ) -> Option<NonNull<PinRecord>> {
        // SAFETY: the caller guarantees the body is alive.
        let core = unsafe { this.as_ref() };
        let mut st = core.lock();
        let b = *st.table.get(block)?;
        if b.state != BlockState::Live || b.addr != addr {
            return None;
        }
        let rec = st.pins.record(block)?;
        // SAFETY: records live as long as the arena; this one is only
        // touched under the lock while unpinned.
        let r = unsafe { rec.as_ref() };
        if r.refs.load(Ordering::Relaxed) != 0 {
            return None;
        }
        // SAFETY: unpinned, under the lock, block live.
        unsafe {
            r.set_info(PinInfo {
                core: this.as_ptr(),
                addr,
                len,
                cap: b.cap,
                block,
            })
        };
        r.refs.store(1, Ordering::Relaxed);
        st.stats.leased_bytes += b.cap;
        st.stats.leases += 1;
        Some(rec)
    }

    /// The last owner of a pinned buffer lets go: the buffer is unpinned
    /// and returned to the arena (which may then go away).
    ///
    /// # Safety
    /// `rec` must be a pinned record whose count just dropped to zero, and
    /// nothing may use it (or its arena, without a handle) afterwards.
    pub(crate) unsafe fn unpin_and_free(rec: NonNull<PinRecord>) {
        // SAFETY: the record was pinned; its info is stable until now.
        let info = unsafe { rec.as_ref().info() };
        // SAFETY: a pinned buffer is live, so its arena body is alive.
        let this = unsafe { NonNull::new_unchecked(info.core) };
        let dead = {
            // SAFETY: as above.
            let core = unsafe { this.as_ref() };
            let mut st = core.lock();
            st.stats.leased_bytes -= info.cap;
            st.stats.leases -= 1;
            let freed = st.free(info.block, info.addr, &core.os);
            debug_assert!(freed, "a pinned block was not live");
            st.orphaned && st.stats.live_buffers == 0
        };
        if dead {
            // SAFETY: no handle and no live buffer remains; decided under the lock.
            unsafe { Self::destroy(this) };
        }
    }

    /// Returns the live buffer that starts at `addr`, found by address;
    /// `false` (and no change) when there is none. For callers that hold a
    /// handle, so the body outlives the call.
    pub(crate) fn free_at(&self, addr: usize) -> bool {
        if self.pattern_on {
            // SAFETY: the caller holds a handle, so the body outlives the call.
            return unsafe { Self::free_patterned(NonNull::from(self), None, addr) };
        }
        let mut st = self.lock();
        match st.live_block_at(addr) {
            Some(i) => st.free(i, addr, &self.os),
            None => false,
        }
    }

    /// The live block starting at `addr` and its capacity.
    pub(crate) fn live_block_at(&self, addr: usize) -> Option<(u32, usize)> {
        if self.pattern_on {
            if let Some(cap) = self.planned_cap_at(addr) {
                return Some((super::pattern::seam::PLANNED_BLOCK, cap));
            }
        }
        let st = self.lock();
        let i = st.live_block_at(addr)?;
        Some((i, st.table.get(i)?.cap))
    }

    /// Records a payload copy of `bytes` into or out of this arena's memory.
    pub(crate) fn note_copy(&self, bytes: usize) {
        let mut st = self.lock();
        st.stats.copies += 1;
        st.stats.copied_bytes += bytes;
    }

    pub(crate) fn stats(&self) -> ArenaStats {
        let st = self.lock();
        let mut s = st.stats();
        if let Some(set) = &st.pattern {
            super::pattern::seam::fill_stats(set, &mut s);
        }
        drop(st);
        s.os = self.os.snapshot();
        s
    }

    pub(crate) fn trim(&self) -> usize {
        self.lock().trim(&self.os)
    }

    pub(crate) fn set_retention_cap(&self, cap: usize) {
        self.lock().set_retention_cap(cap, &self.os)
    }

    pub(crate) fn reset_peak(&self) {
        let mut st = self.lock();
        st.stats.peak_live_bytes = st.stats.live_bytes;
    }

    /// # Safety
    /// Nothing may reach the body afterwards.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn destroy(this: NonNull<ArenaCore>) {
        #[cfg(loom)]
        LIVE_BODIES.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: the body was made by `Box::into_raw` in `CoreHandle::new`
        // and the caller guarantees this is its only release.
        let mut body = unsafe { Box::from_raw(this.as_ptr()) };
        let os = &body.os as *const OsCounters;
        // SAFETY: `os` points into `body`, which lives until the end of this scope.
        body.state.get_mut().release_everything(unsafe { &*os });
    }
}

/// Arena bodies made and not yet destroyed, for the loom models to check
/// that every body is freed exactly once (a plain atomic: it observes the
/// model, it is not part of it; the models run one at a time).
#[cfg(loom)]
pub(crate) static LIVE_BODIES: std::sync::atomic::AtomicIsize =
    std::sync::atomic::AtomicIsize::new(0);

/// A counted reference to an arena body: what `ExecutionArena` and
/// `IoArena` hold. Cloning is one relaxed atomic increment.
pub(crate) struct CoreHandle(NonNull<ArenaCore>);

// SAFETY: the body is only reached through `&ArenaCore`, whose mutable parts
// are behind the spin lock or atomic.
unsafe impl Send for CoreHandle {}
// SAFETY: as above.
unsafe impl Sync for CoreHandle {}

impl CoreHandle {
    pub(crate) fn new(kind: ArenaKind, config: ArenaConfig) -> Self {
        // The body is arena metadata: never served from a scoped arena.
        let body = {
            let _m = metadata::enter();
            Box::new(ArenaCore {
                kind,
                handles: AtomicUsize::new(1),
                state: SpinLock::new(ArenaState::new(config)),
                os: OsCounters::new(),
                pattern_on: config.pattern && kind == ArenaKind::Execution,
            })
        };
        let raw = Box::into_raw(body);
        #[cfg(loom)]
        LIVE_BODIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: `raw` is the only pointer to the new body; the owner tag
        // keeps its provenance so the owner table can lead back to it.
        unsafe { (*raw).state.get_mut().owner = Owner(raw.cast()) };
        // SAFETY: as above, the body is not shared yet.
        unsafe {
            if (*raw).pattern_on {
                (*raw).state.get_mut().pattern = Some(Box::default());
            }
        }
        // SAFETY: Box::into_raw never returns null.
        CoreHandle(unsafe { NonNull::new_unchecked(raw) })
    }

    /// Gives up this handle's count without dropping it: the body stays
    /// alive until [`CoreHandle::from_raw`] takes the count back.
    pub(crate) fn into_raw(self) -> NonNull<ArenaCore> {
        let p = self.0;
        core::mem::forget(self);
        p
    }

    /// Takes back a count given up by [`CoreHandle::into_raw`].
    ///
    /// # Safety
    /// `p` must come from `into_raw`, and each such count is taken back once.
    pub(crate) unsafe fn from_raw(p: NonNull<ArenaCore>) -> Self {
        CoreHandle(p)
    }

    /// The body, for buffers that must find their way back.
    pub(crate) fn ptr(&self) -> NonNull<ArenaCore> {
        self.0
    }
}

impl core::ops::Deref for CoreHandle {
    type Target = ArenaCore;
    fn deref(&self) -> &ArenaCore {
        // SAFETY: a handle keeps the body alive.
        unsafe { self.0.as_ref() }
    }
}

impl Clone for CoreHandle {
    fn clone(&self) -> Self {
        self.handles.fetch_add(1, Ordering::Relaxed);
        CoreHandle(self.0)
    }
}

impl Drop for CoreHandle {
    fn drop(&mut self) {
        if self.handles.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        if self.pattern_on {
            self.pattern_end();
        }
        let dead = {
            let mut st = self.lock();
            st.orphaned = true;
            st.stats.live_buffers == 0
        };
        if dead {
            // SAFETY: the last handle is going and no buffer is live; the
            // decision was taken under the lock.
            unsafe { ArenaCore::destroy(self.0) };
        }
    }
}
