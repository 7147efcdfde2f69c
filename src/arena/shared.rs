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

use super::blocks::{BlockState, NIL};
use super::error::ArenaError;
use super::metadata;
use super::owners::Owner;
use super::pins::{PinInfo, PinRecord};
use super::state::{ArenaState, Grant};
use super::tcache::{self, LargeFree, SMALL_CLASSES};
use super::{ArenaConfig, ArenaKind, CARVE_LIMIT, MAX_ALIGN};
use crate::os::OsCounters;
use crate::size_class::{
    aligned_size, capacity, class_of, class_of_classed, Class, MAX_CLASS_SIZE, MIN_CAPACITY,
};
use crate::stats::ArenaStats;
use crate::sync::rc::{fence, AtomicUsize, Ordering};
use crate::sync::{SpinGuard, SpinLock};
use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;
use crossbeam_utils::CachePadded;

/// The shared body of an arena. Aligned to 128 bytes: the owner table tags
/// its pointer's low bits with a small class (`owners.rs`).
///
/// Laid out by how often each part is written, so that a thread-cache hit
/// (which reads only the first part) misses no line another thread keeps
/// writing: the first 128 bytes (a line and the neighbour the hardware
/// prefetches with it) hold what every operation reads and almost nothing
/// writes; the handle count, the lock with the state and the mirrors its
/// holder writes at every unlock, and pattern mode's cursor each start on
/// lines of their own.
#[repr(C, align(128))]
pub(crate) struct ArenaCore {
    /// This body's number, unique in the process: thread caches tell a new
    /// body at a reused address from the one they cached for.
    pub(crate) id: u64,
    /// Thread caches' instructions (`tcache`): a count advanced by `trim`
    /// and `set_retention_cap`, and the `ORPHANED` and `NO_CACHE` flags.
    /// Written only under the lock; read with one relaxed load per cached
    /// operation.
    pub(crate) epoch: core::sync::atomic::AtomicU64,
    pub(crate) kind: ArenaKind,
    /// Pattern mode is on (fixed at creation): allocate and free go
    /// through `pattern::seam` first.
    pub(crate) pattern_on: bool,
    /// The small classes are served by thread heaps that own runs
    /// (`small/`, `ArenaConfig::run_ownership`), not the thread caches.
    pub(crate) small_owned: bool,
    /// The thread whose large requests the execution heap serves
    /// (`heap::thread_token`; 0 for arenas without a heap): its large
    /// buffers bypass the thread caches' class slots (whose holding a
    /// piece back would change the heap's placement) and use the heap slot
    /// instead, which keeps back only a piece the heap would hand out again
    /// as it is (`tcache/heap_slot.rs`). The mirror of
    /// `ArenaState::heap_thread`, written with it under the lock, read
    /// without it by the hot paths (a stale read only sends a request to
    /// the locked path, which decides by the state's value); it moves to
    /// another thread only while no heap piece is live (`heap_owner.rs`).
    pub(crate) heap_thread: core::sync::atomic::AtomicUsize,
    /// Written by every handle clone and drop.
    handles: CachePadded<AtomicUsize>,
    state: CachePadded<SpinLock<ArenaState>>,
    /// Small buffers freed on threads whose caches did not hand them out,
    /// one stack per class, taken by the next lock holder or by a thread
    /// whose bin of the class ran empty (`tcache/remotes.rs`): lines of
    /// their own, the ones the freeing threads write.
    pub(crate) remotes: tcache::remotes::Remotes,
    /// Per small class, whether some thread cache's spill may hold its
    /// buffers (`tcache/steal.rs`): set by the caches' threads, cleared by
    /// a request that looks into the spills before it takes new memory.
    pub(crate) spilled: CachePadded<tcache::steal::Spilled>,
    /// Live bytes less the bytes thread caches last published
    /// (`ArenaState::live_uncached`), stored at every unlock (beside the state the holder just wrote): a thread's
    /// cache reads it when it becomes the thread's current one, and from
    /// then on sees this thread's own unlocks (`tcache::note_unlock`).
    pub(crate) live_mirror: core::sync::atomic::AtomicUsize,
    /// The arena's free count, stored at every unlock, read like
    /// `live_mirror`: a free into a thread cache stamps its place in free
    /// order with it.
    pub(crate) clock_mirror: core::sync::atomic::AtomicU64,
    /// The execution heap's version (`Heap::version`), stored at every
    /// unlock: the heap's thread keeps a piece back, and hands it out
    /// again, only while it stays (`tcache/heap_slot.rs`).
    pub(crate) heap_version: core::sync::atomic::AtomicU64,
    pub(crate) os: OsCounters,
    /// Free large buffers any thread takes and fills without the lock
    /// (`tcache/stash.rs`).
    pub(crate) stash: tcache::Stash,
    /// Threads with a cache on this arena, stored at every unlock: the
    /// stash takes frees only while two or more do (on one thread a
    /// refused free goes to the arena, which keeps `peak_live_bytes`
    /// exact there).
    pub(crate) cache_threads: core::sync::atomic::AtomicUsize,
    /// Pattern mode's lock-free cursor (`pattern::fast`), written by its
    /// owner at every planned operation: unused when pattern mode is off.
    pub(crate) pattern_fast: CachePadded<super::pattern::Fast>,
}

/// Where the body's private parts that other threads write begin (for the
/// layout test in `arena::tests`).
#[cfg(test)]
pub(crate) const PRIVATE_WRITTEN: [(&str, usize); 3] = [
    ("handles", core::mem::offset_of!(ArenaCore, handles)),
    ("state", core::mem::offset_of!(ArenaCore, state)),
    ("remotes", core::mem::offset_of!(ArenaCore, remotes)),
];

/// What allocator-api2's free hit ([`ArenaCore::free_hit_layout`]) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreeHit {
    /// The buffer is in this thread's cache.
    Done,
    /// A small buffer of this class, not taken by the cache's hit.
    Small(usize),
    /// Not a small buffer of this arena.
    Other,
}

/// `size` (at least 1) rounded up to `align`: the unchecked form of
/// [`aligned_size`] for the hot paths, whose callers have checked that
/// `size` is in `1..` a class bound and `align` a power of two up to a
/// page, so nothing overflows (and the result is at least `align`).
///
/// Every buffer of the class of the result meets `align`: a class's
/// capacity is a multiple of every power of two that divides some size
/// the class serves (the test `rounded_classes_meet_their_alignment` checks
/// every class at every alignment), so the hot paths need no
/// `tcache::serves`.
#[inline(always)]
fn rounded_to(size: usize, align: usize) -> usize {
    debug_assert!(size >= 1 && align.is_power_of_two());
    (size + (align - 1)) & !(align - 1)
}

/// The class of `size` bytes rounded up to `align` (as [`rounded_to`]).
#[inline(always)]
fn rounded_class(size: usize, align: usize) -> Class {
    let c = class_of_classed(rounded_to(size, align));
    debug_assert!(tcache::serves(c, align));
    c
}

/// The small class a thread cache serves `size` bytes aligned to `align`
/// from: `None` for a zero or large size, or an alignment that is not a
/// power of two up to a page.
#[inline(always)]
fn cached_class(size: usize, align: usize) -> Option<Class> {
    if align.is_power_of_two() {
        return cached_class_pow2(size, align);
    }
    None
}

/// [`cached_class`] for an alignment known to be a power of two.
#[inline(always)]
fn cached_class_pow2(size: usize, align: usize) -> Option<Class> {
    // Above the largest small capacity no rounding makes a size small:
    // a 64 KiB request skips the class computation here.
    if size.wrapping_sub(1) < SMALL_MAX && align <= 4096 {
        let c = rounded_class(size, align);
        if c < SMALL_CLASSES {
            return Some(c);
        }
    }
    None
}

/// The largest small capacity: a request of at most this many bytes at
/// an alignment up to [`MIN_CAPACITY`] is in a small class.
const SMALL_MAX: usize = capacity(SMALL_CLASSES - 1);

/// [`cached_class`] for a `Layout`'s size and alignment (a power of two,
/// so that check is left out). Up to [`MIN_CAPACITY`] the size alone picks
/// the class: every capacity is a multiple of it and every buffer is
/// aligned to it.
#[inline(always)]
pub(crate) fn cached_class_of_layout(size: usize, align: usize) -> Option<Class> {
    debug_assert!(align.is_power_of_two());
    if align <= MIN_CAPACITY {
        return (size.wrapping_sub(1) < SMALL_MAX).then(|| class_of_classed(size));
    }
    cached_class_pow2(size, align)
}

impl ArenaCore {
    #[inline]
    pub(crate) fn lock(&self) -> StateGuard<'_> {
        let mut st = self.lock_for_refill();
        if self.remotes.pending() {
            // Other threads' frees first: every locked operation (but a
            // cache's refill, `lock_for_refill`) sees the arena as if they
            // had taken the lock themselves.
            tcache::remote::absorb_waiting(&mut st, self);
        }
        st
    }

    /// [`ArenaCore::lock`] for an operation that only moves retained
    /// buffers of one class between the arena and a thread's cache (a
    /// refill): the remote stacks stay for the threads whose bins of their
    /// classes run empty next (`tcache/remotes.rs`). It creates no memory,
    /// releases none and reads no total, so nothing it does depends on
    /// frees that wait there.
    #[inline]
    pub(crate) fn lock_for_refill(&self) -> StateGuard<'_> {
        let mut g = self.state.lock();
        // Plain arithmetic on a line the lock holder owns now.
        g.stats.locked_operations += 1;
        StateGuard { g, core: self }
    }

    /// Checks a request and serves it warm if a retained buffer fits, cold otherwise.
    ///
    /// The common case (a classed size, an alignment up to a page, a
    /// retained buffer of the request's own class) is inlined into the
    /// caller; everything else, bad input included, takes the out-of-line
    /// [`ArenaCore::allocate_general`].
    #[inline(always)]
    pub(crate) fn allocate(&self, size: usize, align: usize) -> Result<Grant, ArenaError> {
        if self.pattern_on {
            return self.allocate_patterned(size, align);
        }
        // One range check stands for "non-zero, classed, no overflow in
        // rounding"; one bit test for "power of two up to a page".
        if size.wrapping_sub(1) < MAX_CLASS_SIZE / 2 && align.is_power_of_two() && align <= 4096 {
            let eff = rounded_to(size, align);
            let c = rounded_class(size, align);
            if c < SMALL_CLASSES {
                let (addr, block, cap, fresh, warm) = tcache::allocate_parts(self, c, eff, align);
                if let Some(ptr) = NonNull::new(addr as *mut u8) {
                    return Ok(Grant {
                        ptr,
                        cap,
                        block,
                        fresh,
                        warm,
                    });
                }
                if self.small_owned {
                    return Err(ArenaError::OutOfMemory { size, errno: 0 });
                }
            }
            if c >= SMALL_CLASSES {
                if self.on_heap_thread() {
                    if let Some(g) = tcache::allocate_heap_hit(self, eff) {
                        return Ok(g);
                    }
                    return self.allocate_heap_miss(c, eff, align);
                }
                if capacity(c) <= tcache::LARGE_MAX {
                    if let Some(g) = tcache::allocate_large_hit(self, c, eff) {
                        return Ok(g);
                    }
                    return self.allocate_large_miss(c, eff, align);
                }
            }
            let mut st = self.lock();
            self.adopt_orphaned_heap(&mut st);
            if let Some(g) = st.take_exact(c, eff, align, &self.os) {
                return Ok(g);
            }
            // Checked and classed already, and the lock is held: go on from here.
            return self.serve_classed(st, c, eff, align, false);
        }
        self.allocate_general(size, align)
    }

    /// The lock-free hits of [`ArenaCore::allocate`] alone: pattern mode's
    /// planned hit, or a small class's hit in this thread's cache. `None`
    /// (nothing changed) sends the request to [`ArenaCore::allocate`]. The
    /// handle's `allocate` builds its result straight from this: a grant
    /// merged with the out-of-line paths' results went through the stack
    /// twice (stored, reloaded, checked, stored again as the handle).
    ///
    /// With the grant: the small class whose bin served it, or
    /// [`tcache::NO_CLASS`] for a planned buffer (the handle keeps it for
    /// its drop).
    #[inline(always)]
    pub(crate) fn allocate_hit(&self, size: usize, align: usize) -> Option<(Grant, u8)> {
        if self.pattern_on {
            return self
                .allocate_planned_hit(size, align)
                .map(|g| (g, tcache::NO_CLASS));
        }
        let c = cached_class(size, align)?;
        // Small classes are fewer than `NO_CLASS` (asserted beside it).
        tcache::allocate_hit(self, c).map(|g| (g, c as u8))
    }

    /// allocator-api2's hit: a small buffer for `layout` from this thread's
    /// cache; `None` (nothing changed) for anything else, pattern mode
    /// included ([`ArenaCore::allocate`] serves those).
    #[inline(always)]
    pub(crate) fn allocate_hit_layout(&self, layout: Layout) -> Option<Grant> {
        // No pattern check: a pattern arena's epoch turns caching off, so
        // its thread caches never hit (`epoch::epoch_flags`).
        let c = cached_class_of_layout(layout.size(), layout.align())?;
        tcache::allocate_hit(self, c)
    }

    /// allocator-api2's free hit: the small buffer at `addr`, freed with a
    /// layout of `size` bytes at `align`, into this thread's cache.
    /// Otherwise (nothing changed) it says what the free is, so the
    /// caller's slow path does not look it up again: a small buffer of a
    /// class the cache did not take (no credit, a full bin, an epoch to
    /// honour), or anything else.
    ///
    /// The class is the one the layout names when the owner table's entry
    /// for `addr` confirms that `addr` is in this arena's run of that
    /// class; else the class the entry's run tag names, if any.
    ///
    /// Why: the class from the table is a value two dependent loads after
    /// the address, and the cache's push waits for it; the class from the
    /// layout is arithmetic on values the caller had all along, and the
    /// table's entry only decides a branch the core predicts. A tight
    /// allocate+free loop is one dependency chain through the bin, so the
    /// two loads were on it (an allocator-api2 pair measured about twice
    /// the handle's time on an Intel Xeon VM before the class came from the
    /// layout). The layout alone is not enough: a buffer may be freed with
    /// a layout that names a small class it was not served from (a heap
    /// piece shrunk in place to a small size), so a mismatch takes the
    /// table's class.
    #[inline(always)]
    pub(crate) fn free_hit_layout(&self, addr: usize, size: usize, align: usize) -> FreeHit {
        // No pattern check here either: a pattern arena's caches never hit,
        // and its misses go to the pattern seam ([`Self::free_small_missed`]).
        let entry = super::owners::lookup_tagged(addr);
        if let Some(c) = cached_class_of_layout(size, align) {
            if entry.is_run_of(self.as_owner(), c) {
                return self.free_hit_class(c, addr);
            }
        }
        match entry.small_class_for(self.as_owner()) {
            Some(c) => self.free_hit_class(c, addr),
            None => FreeHit::Other,
        }
    }

    /// The free hit of a small buffer of class `c` at `addr`: into this
    /// thread's cache, or what the slow path needs to know.
    #[inline(always)]
    fn free_hit_class(&self, c: usize, addr: usize) -> FreeHit {
        if tcache::free_hit(self, c, addr) {
            FreeHit::Done
        } else {
            FreeHit::Small(c)
        }
    }

    /// This body as the owner table names it.
    #[inline(always)]
    fn as_owner(&self) -> super::owners::Owner {
        super::owners::Owner((self as *const ArenaCore).cast_mut().cast())
    }

    /// A small buffer of class `c` at `addr` whose free the cache's hit
    /// did not take ([`FreeHit::Small`]): the cache's slow path (a flush,
    /// the remote stack), else the lock. `false` when no live buffer of
    /// this arena starts at `addr`. The caller holds a handle.
    #[inline(never)]
    pub(crate) fn free_small_missed(&self, c: usize, addr: usize) -> bool {
        if self.pattern_on {
            return self.free_at(addr);
        }
        tcache::free_slow(self, c, addr) || self.free_locked_at(addr)
    }

    /// Returns the live buffer at `addr` under the lock; out of line, so
    /// the paths that try the caches first save no registers for it. The
    /// caller holds a handle.
    #[inline(never)]
    fn free_locked_at(&self, addr: usize) -> bool {
        self.lock().free(NIL, addr, &self.os)
    }

    /// A small buffer for `layout` from this thread's cache, when the cache
    /// holds one; `None` (nothing changed) otherwise, and for anything but
    /// a small class with an alignment up to a page. The scoped global
    /// allocator's hit.
    #[inline(always)]
    pub(crate) fn allocate_cached_layout(&self, layout: Layout) -> Option<NonNull<u8>> {
        let c = cached_class_of_layout(layout.size(), layout.align())?;
        tcache::allocate_hit(self, c).map(|g| g.ptr)
    }

    /// Returns a buffer of small class `class` at `addr` to this thread's
    /// cache if the cache can take it now; `false` (nothing changed)
    /// otherwise. The scoped global allocator's hit, and a handle's drop
    /// (a cached buffer needs no block record: `tcache/bin.rs`).
    #[inline(always)]
    pub(crate) fn free_cached(&self, class: usize, addr: usize) -> bool {
        tcache::free_hit(self, class, addr)
    }

    /// A request of large class `c` this thread's slot could not serve
    /// (`tcache/large.rs`): the cache made current (it may not have been)
    /// and looked at again, else the arena under its lock, the grant lent
    /// to this thread's cache.
    #[inline(never)]
    fn allocate_large_miss(&self, c: usize, eff: usize, align: usize) -> Result<Grant, ArenaError> {
        tcache::prepare(self);
        if let Some(g) = tcache::allocate_large_hit(self, c, eff) {
            return Ok(g);
        }
        if let Some(g) = tcache::allocate_stashed(self, c, eff, align) {
            return Ok(g);
        }
        let mut st = self.lock();
        self.adopt_orphaned_heap(&mut st);
        if let Some(g) = st.take_exact(c, eff, align, &self.os) {
            tcache::note_lent(&st, self, c, &g);
            return Ok(g);
        }
        self.serve_classed(st, c, eff, align, true)
    }

    /// A large request of the execution heap's thread that its heap slot
    /// could not serve (`tcache/heap_slot.rs`): under the lock, the slot's
    /// piece back to the heap first, then as any request; a grant the heap
    /// would hand out again as it is goes to the slot as lent.
    #[inline(never)]
    fn allocate_heap_miss(&self, c: usize, eff: usize, align: usize) -> Result<Grant, ArenaError> {
        let mut st = self.lock_for_heap();
        if let Some(g) = st.take_exact(c, eff, align, &self.os) {
            tcache::note_lent(&st, self, c, &g);
            return Ok(g);
        }
        self.adopt_orphaned_heap(&mut st);
        self.serve_classed(st, c, eff, align, true)
    }

    /// The lock, taken by the execution heap's thread for a heap request
    /// (an allocation, a resize): its cache made current first, and the
    /// piece its heap slot keeps back given back to the heap, so the heap
    /// sees that free where it happened.
    #[inline(always)]
    fn lock_for_heap(&self) -> StateGuard<'_> {
        tcache::prepare(self);
        let mut st = self.lock();
        tcache::settle_heap(&mut st, self);
        st
    }

    /// Whether the calling thread is the one whose large requests the
    /// execution heap serves (never, for arenas without a heap).
    #[inline(always)]
    fn on_heap_thread(&self) -> bool {
        let t = self.heap_thread.load(Relaxed);
        t != 0 && t == super::heap::thread_token()
    }

    /// A classed request of `eff` bytes (class `c`) with the lock held:
    /// a retained buffer of the class, else the cold path; with `large`,
    /// the grant is lent to this thread's cache (`tcache::note_lent`).
    #[inline(never)]
    fn serve_classed(
        &self,
        mut st: StateGuard<'_>,
        c: usize,
        eff: usize,
        align: usize,
        large: bool,
    ) -> Result<Grant, ArenaError> {
        // A buffer of the class this thread's large slot holds but could
        // not serve this request with: back to the arena, which serves it.
        tcache::settle_large(&mut st, self, c);
        if self.on_heap_thread() {
            tcache::settle_heap(&mut st, self);
        }
        let mut warm = st.take_warm(c, eff, align, &self.os);
        if warm.is_none() && capacity(c) > tcache::BUDGET_MAX && capacity(c) <= tcache::LARGE_MAX {
            // Another thread's cache may hold one of the class, on offer.
            let own_class = |b: &super::blocks::Block| {
                b.class as usize == c && !matches!(b.place, super::blocks::Place::Heap(_))
            };
            if tcache::claim_offers(&mut st, self, own_class) > 0 {
                warm = st.take_warm(c, eff, align, &self.os);
            }
        }
        let mut class = c;
        if warm.is_none() {
            // Its own class is short: a free buffer of a class up to twice
            // its size before new memory (`ArenaState::take_larger_warm`),
            // counting those in the stash (`tcache/stash.rs`).
            let mut larger = st.take_larger_warm(c, eff, align, &self.os);
            if larger.is_none() && tcache::unstash_for(&mut st, self, c) {
                warm = st.take_warm(c, eff, align, &self.os);
                if warm.is_none() {
                    larger = st.take_larger_warm(c, eff, align, &self.os);
                }
            }
            if let Some((k, g)) = larger {
                class = k;
                warm = Some(g);
            }
        }
        let g = match warm {
            Some(g) => g,
            None => {
                // The cold path may grow metadata through the global
                // allocator while this thread holds the lock.
                let _m = metadata::enter();
                st.take_cold(c, eff, align, &self.os)?
            }
        };
        if large {
            tcache::note_lent(&st, self, class, &g);
        }
        Ok(g)
    }

    /// A request of small class `c` (`eff` bytes at `align`) whose
    /// cache's refill found nothing of the class, served under the lock
    /// that refill holds, as [`ArenaCore::allocate`]'s locked path serves
    /// it: other threads' waiting frees taken first, then a retained
    /// buffer of the class if they brought one, else a new one. `None`
    /// when the locked path must serve it (nothing changed for the
    /// request; waiting frees taken back stay taken, as any lock holder
    /// takes them): an execution heap to adopt first (that gives back
    /// this thread's own large slots, which the refill's caller has
    /// borrowed), or an error, which the locked path reports.
    ///
    /// Why: a thread's first run took the lock twice per small
    /// allocation, once for a refill that found nothing and once to carve.
    /// What the locked path does besides is for large classes (their
    /// slots, offers, stash and larger classes) and the heap's thread.
    pub(crate) fn serve_small_cold(
        &self,
        st: &mut ArenaState,
        c: usize,
        eff: usize,
        align: usize,
    ) -> Option<Grant> {
        debug_assert!(c < SMALL_CLASSES);
        if st.heap_adoption_due() {
            return None;
        }
        if self.remotes.pending() {
            tcache::remote::absorb_waiting(st, self);
        }
        if let Some(g) = st.take_exact(c, eff, align, &self.os) {
            return Some(g);
        }
        let _m = metadata::enter();
        st.take_cold(c, eff, align, &self.os).ok()
    }

    /// [`ArenaCore::allocate`] for requests off the inlined path: validation
    /// with typed errors, then as [`ArenaCore::serve_classed`] or a
    /// dedicated mapping.
    #[inline(never)]
    fn allocate_general(&self, size: usize, align: usize) -> Result<Grant, ArenaError> {
        if size == 0 {
            return Err(ArenaError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(ArenaError::BadAlignment { align });
        }
        if align > MAX_ALIGN {
            return Err(ArenaError::UnsupportedAlignment {
                align,
                max: MAX_ALIGN,
            });
        }
        let eff = aligned_size(size, align).ok_or(ArenaError::SizeOverflow { size })?;
        // A small class with a larger alignment: this thread's cache may
        // hold the buffer the class policy would hand out.
        if let Some(c) = class_of(eff).filter(|&c| c < SMALL_CLASSES && tcache::serves(c, align)) {
            let (addr, block, cap, fresh, warm) = tcache::allocate_parts(self, c, eff, align);
            if let Some(ptr) = NonNull::new(addr as *mut u8) {
                return Ok(Grant {
                    ptr,
                    cap,
                    block,
                    fresh,
                    warm,
                });
            }
            if self.small_owned {
                return Err(ArenaError::OutOfMemory { size, errno: 0 });
            }
        }
        // With run ownership the small classes exist only as run slots: a
        // small size whose class cannot meet the alignment takes the
        // smallest large class.
        let eff = if self.small_owned {
            eff.max(CARVE_LIMIT)
        } else {
            eff
        };
        let mut st = self.lock();
        match class_of(eff) {
            Some(c) => {
                self.adopt_orphaned_heap(&mut st);
                self.serve_classed(st, c, eff, align, false)
            }
            None => {
                let _m = metadata::enter();
                st.map_dedicated(eff, align, &self.os)
            }
        }
    }

    /// Runs `f` on the state under the lock, then frees the body when that
    /// left it orphaned with nothing live: the one place "the last one out
    /// frees the body" is written.
    ///
    /// # Safety
    /// `this` must point to a live arena body for the call. When this
    /// returns, the body may be gone: the caller must not use `this` again
    /// unless it holds a handle.
    #[inline(always)]
    pub(crate) unsafe fn locked_last_out<R>(
        this: NonNull<ArenaCore>,
        f: impl FnOnce(&mut ArenaState, &ArenaCore) -> R,
    ) -> R {
        let (r, dead) = {
            // SAFETY: the caller guarantees `this` is live for this call.
            let core = unsafe { this.as_ref() };
            let mut st = core.lock();
            let r = f(&mut st, core);
            (
                r,
                st.orphaned && st.stats.live_buffers == 0 && !st.unsettled() && st.small.idle(),
            )
        };
        if dead {
            // SAFETY: no handle and no live buffer remains, and the decision
            // was taken under the lock, so no one else can reach the body.
            unsafe { Self::destroy(this) };
        }
        r
    }

    /// Returns a buffer; `false` when `block` is not a live buffer at `addr`.
    ///
    /// # Safety
    /// `this` must point to a live arena body (one that served the buffer,
    /// or that a handle keeps alive). When this returns, the body may be
    /// gone: the caller must not use `this` again unless it holds a handle.
    #[inline(always)]
    pub(crate) unsafe fn free(this: NonNull<ArenaCore>, block: u32, addr: usize) -> bool {
        // SAFETY: the caller guarantees `this` is live for this call.
        if unsafe { this.as_ref() }.pattern_on {
            // SAFETY: forwarded from the caller.
            return unsafe { Self::free_patterned(this, Some(block), addr) };
        }
        // SAFETY: forwarded contract.
        unsafe { Self::locked_last_out(this, |st, core| st.free(block, addr, &core.os)) }
    }

    /// [`ArenaCore::free`] for a buffer of capacity `cap` whose small
    /// class's bin was tried already (a handle's drop) or that has none:
    /// the pattern check, then the execution heap's slot or this thread's
    /// large slot. Out of line, with the fields by value: the handle's
    /// drop glue is then the hit and one call, small enough to be inlined
    /// into its callers with the handle in registers. Every way on from
    /// here is a call in tail position, so none of them is a second call
    /// level on the slots' hits inlined here.
    ///
    /// # Safety
    /// As for [`ArenaCore::free`].
    #[inline(never)]
    pub(crate) unsafe fn free_past_cache(
        this: NonNull<ArenaCore>,
        block: u32,
        addr: usize,
        cap: usize,
    ) -> bool {
        // SAFETY: the caller guarantees `this` is live for this call.
        let core = unsafe { this.as_ref() };
        if core.pattern_on {
            // SAFETY: forwarded from the caller.
            return unsafe { Self::free_patterned(this, Some(block), addr) };
        }
        if cap < CARVE_LIMIT {
            // SAFETY: forwarded contract; not in pattern mode.
            return unsafe { Self::free_small_past_bin(this, block, addr, cap) };
        }
        if core.on_heap_thread() {
            if tcache::free_heap_hit(core, addr, block) {
                // Kept in the heap's thread's slot (`tcache/heap_slot.rs`).
                return true;
            }
        } else if cap <= tcache::LARGE_MAX {
            // Into this thread's large slot (`tcache/large.rs`).
            match tcache::free_large_fast(core, class_of_classed(cap), addr, block) {
                LargeFree::Kept => return true,
                // SAFETY: forwarded contract; not in pattern mode.
                LargeFree::Slow => return unsafe { Self::free_large_slow(this, block, addr, cap) },
                LargeFree::Arena => {}
            }
        }
        // SAFETY: forwarded contract; not in pattern mode.
        unsafe { Self::free_locked(this, block, addr) }
    }

    /// [`ArenaCore::free_past_cache`] for a small buffer its bin's hit did
    /// not take: the cache's slow path, then the lock.
    ///
    /// # Safety
    /// As for [`ArenaCore::free`]; the arena is not in pattern mode.
    #[inline(never)]
    unsafe fn free_small_past_bin(
        this: NonNull<ArenaCore>,
        block: u32,
        addr: usize,
        cap: usize,
    ) -> bool {
        // SAFETY: the caller guarantees `this` is live for this call.
        if unsafe { this.as_ref() }.small_owned {
            // SAFETY: forwarded contract; the body may go on the way out.
            unsafe { super::small::free(this, class_of_classed(cap), addr) };
            return true;
        }
        // SAFETY: the caller guarantees `this` is live for this call.
        if tcache::free_slow(unsafe { this.as_ref() }, class_of_classed(cap), addr) {
            return true;
        }
        // SAFETY: forwarded contract; not in pattern mode.
        unsafe { Self::free_locked(this, block, addr) }
    }

    /// [`ArenaCore::free_past_cache`] for a large buffer its slot's inline
    /// path left undecided (a full slot, a cache without room, a buffer
    /// lent to a larger class's slot, or not lent here): the slot's whole
    /// free, then the lock.
    ///
    /// # Safety
    /// As for [`ArenaCore::free`]; the arena is not in pattern mode.
    #[cold]
    #[inline(never)]
    unsafe fn free_large_slow(
        this: NonNull<ArenaCore>,
        block: u32,
        addr: usize,
        cap: usize,
    ) -> bool {
        // SAFETY: the caller guarantees `this` is live for this call.
        if tcache::free_large_hit(unsafe { this.as_ref() }, class_of_classed(cap), addr, block) {
            return true;
        }
        // SAFETY: forwarded contract; not in pattern mode.
        unsafe { Self::free_locked(this, block, addr) }
    }

    /// [`ArenaCore::free`] past the pattern check, under the lock; out of
    /// line, so that the cache hits before it save no registers for it.
    ///
    /// # Safety
    /// As for [`ArenaCore::free`]; the arena is not in pattern mode.
    #[inline(never)]
    unsafe fn free_locked(this: NonNull<ArenaCore>, block: u32, addr: usize) -> bool {
        // SAFETY: forwarded contract.
        unsafe { Self::locked_last_out(this, |st, core| st.free(block, addr, &core.os)) }
    }

    /// Returns the live buffer that starts at `addr`, found by address, and
    /// frees the body when that was the last thing keeping it alive: the
    /// by-address twin of [`ArenaCore::free`], for owners that hold no
    /// handle (the scoped global allocator). `small` is the buffer's class
    /// when the owner table tagged its run (then it may go into this
    /// thread's cache). `false` (and no change) when no live buffer starts
    /// at `addr`.
    ///
    /// # Safety
    /// `this` must be the body's original pointer (as registered in the
    /// owner table or returned by [`CoreHandle::ptr`]) and the body must be
    /// alive: the buffer at `addr` is live, or the caller holds a handle.
    /// When this returns, the body may be gone.
    pub(crate) unsafe fn free_by_addr(
        this: NonNull<ArenaCore>,
        addr: usize,
        small: Option<usize>,
    ) -> bool {
        // SAFETY: the caller guarantees `this` is live for this call.
        if unsafe { this.as_ref() }.pattern_on {
            // SAFETY: forwarded from the caller.
            return unsafe { Self::free_patterned(this, None, addr) };
        }
        if let Some(c) = small {
            // SAFETY: the caller guarantees `this` is live for this call.
            if unsafe { this.as_ref() }.small_owned {
                // SAFETY: forwarded contract; the body may go on the way out.
                unsafe { super::small::free(this, c, addr) };
                return true;
            }
            // SAFETY: the caller guarantees `this` is live for this call.
            if tcache::free(unsafe { this.as_ref() }, c, addr) {
                return true;
            }
        }
        // SAFETY: forwarded contract.
        unsafe { Self::locked_last_out(this, |st, core| st.free(NIL, addr, &core.os)) }
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
        if core.small_owned && block == NIL {
            if let Some(c) = core.small_class_at(addr) {
                // A run slot has no block: its record is the small path's.
                let mut st = core.lock();
                let cap = capacity(c);
                let rec = st.small.pin_slot(this.as_ptr(), addr, len, cap)?;
                st.stats.leased_bytes += cap;
                st.stats.leases += 1;
                return Some(rec);
            }
        }
        let mut st = core.lock();
        // A buffer served from a thread cache may not know its record.
        let block = if block == NIL {
            st.live_block_at(addr)?
        } else {
            block
        };
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
        if let Some(id) = super::small::slot_pin_id(info.block) {
            {
                // SAFETY: as above: the slot, still live, keeps the body.
                let mut st = unsafe { this.as_ref() }.lock();
                st.stats.leased_bytes -= info.cap;
                st.stats.leases -= 1;
                st.small.unpin_slot(id);
            }
            // SAFETY: a live slot of this arena's run-owned small path, its
            // last owner gone; nothing uses `this` afterwards.
            unsafe { super::small::free(this, class_of_classed(info.cap), info.addr) };
            return;
        }
        // SAFETY: as above; nothing uses `this` afterwards.
        unsafe {
            Self::locked_last_out(this, |st, core| {
                st.stats.leased_bytes -= info.cap;
                st.stats.leases -= 1;
                let freed = st.free(info.block, info.addr, &core.os);
                debug_assert!(freed, "a pinned block was not live");
            })
        }
    }

    /// [`ArenaCore::free_at`] for a buffer allocated for `size` bytes at
    /// `align` (allocator-api2's deallocate): a large one this thread was
    /// lent may go into its cache's slot for the class, or, on the
    /// execution heap's thread, into its heap slot. Inlined into its one
    /// caller (allocator-api2's out-of-line slow free): one call, not two.
    #[inline]
    pub(crate) fn free_at_layout(&self, addr: usize, size: usize, align: usize) -> bool {
        if self.free_large_hit_at(addr, size, align) {
            return true;
        }
        // A buffer of `CARVE_LIMIT` bytes or more is no small-class slot
        // (every run-carved capacity is below it): its block is found in
        // the address index alone, without the owner table's run tag and
        // the run index that `free_at` asks first.
        if size >= CARVE_LIMIT && !self.pattern_on && self.free_locked_large_at(addr) {
            return true;
        }
        self.free_at(addr)
    }

    /// Grows the live buffer at `addr` in place to hold `size` bytes at
    /// `align` (which `addr` meets) when it is a piece of the execution
    /// heap, the calling thread is the heap's, and the free extent just
    /// above the piece is long enough (`heap/resize.rs`): its new capacity,
    /// what a new piece for that request would have; `None` (nothing
    /// changed) otherwise. The caller holds the buffer.
    #[inline(never)]
    pub(crate) fn grow_in_place(&self, addr: usize, size: usize, align: usize) -> Option<usize> {
        if self.pattern_on || size < CARVE_LIMIT || !self.on_heap_thread() {
            return None;
        }
        let eff = aligned_size(size, align)?;
        self.lock_for_heap().heap_grow_at(addr, eff, &self.os)
    }

    /// Shrinks the live buffer at `addr` in place to what a request of
    /// `size` bytes at `align` gets, when it is a piece of the execution
    /// heap and the calling thread is the heap's: the pages past the new
    /// end go back to the heap (`heap/resize.rs`). Its new capacity, or
    /// `None` (nothing changed). The caller holds the buffer.
    #[inline(never)]
    pub(crate) fn shrink_in_place(&self, addr: usize, size: usize, align: usize) -> Option<usize> {
        if self.pattern_on || !self.on_heap_thread() {
            return None;
        }
        let eff = aligned_size(size.max(1), align)?;
        let mut st = self.lock_for_heap();
        // A record for the cut-off pages may have to be made.
        let _m = metadata::enter();
        st.heap_shrink_at(addr, eff, &self.os)
    }

    /// Returns the live buffer of `CARVE_LIMIT` bytes or more at `addr`
    /// under the lock; `false` (no change) when the address index names no
    /// live block there. The caller holds a handle.
    #[inline(never)]
    fn free_locked_large_at(&self, addr: usize) -> bool {
        let mut st = self.lock();
        match st.large_block_at(addr) {
            Some(i) => st.free(i, addr, &self.os),
            None => false,
        }
    }

    /// The lock-free frees of a buffer of 32 KiB and up, requested as
    /// `size` bytes aligned to `align`, at `addr`: into the execution
    /// heap's slot on the heap's thread, or into this thread's large slot
    /// of its class; `false` (nothing changed) for anything else. The
    /// caller holds a handle or the live buffer at `addr` (so the body
    /// outlives the call); a cache whose arena was orphaned takes nothing.
    #[inline]
    pub(crate) fn free_large_hit_at(&self, addr: usize, size: usize, align: usize) -> bool {
        if self.pattern_on || size < CARVE_LIMIT / 2 {
            return false;
        }
        if self.on_heap_thread() {
            return tcache::free_heap_hit(self, addr, NIL);
        }
        if size.wrapping_sub(1) < tcache::LARGE_MAX && align.is_power_of_two() && align <= 4096 {
            let c = rounded_class(size, align);
            if c < SMALL_CLASSES {
                return false;
            }
            return match tcache::free_large_fast(self, c, addr, NIL) {
                LargeFree::Kept => true,
                LargeFree::Arena => false,
                LargeFree::Slow => self.free_large_hit_slow(c, addr),
            };
        }
        false
    }

    /// [`ArenaCore::free_large_hit_at`] where the large slot's inline path
    /// left the free undecided: the slot's whole free, out of line.
    #[cold]
    #[inline(never)]
    fn free_large_hit_slow(&self, c: usize, addr: usize) -> bool {
        tcache::free_large_hit(self, c, addr, NIL)
    }

    /// Returns the live buffer that starts at `addr`, found by address;
    /// `false` (and no change) when there is none. For callers that hold a
    /// handle, so the body outlives the call.
    pub(crate) fn free_at(&self, addr: usize) -> bool {
        if self.pattern_on {
            // SAFETY: the caller holds a handle, so the body outlives the call.
            return unsafe { Self::free_patterned(NonNull::from(self), None, addr) };
        }
        if let Some(c) = self.small_class_at(addr) {
            if tcache::free(self, c, addr) {
                return true;
            }
        }
        self.free_locked_at(addr)
    }

    /// The class of the small buffer of this arena at `addr`, from the
    /// owner table's run tag (no lock, no search); `None` for any other
    /// address.
    #[inline]
    pub(crate) fn small_class_at(&self, addr: usize) -> Option<usize> {
        super::owners::small_class_owned_by(addr, self.as_owner())
    }

    /// The live block starting at `addr` and its capacity. With run
    /// ownership a small slot has no block: any slot start of a run of
    /// this arena answers (`NIL`, its capacity); whether the slot is live
    /// is the caller's to know, as with C's `free`.
    pub(crate) fn live_block_at(&self, addr: usize) -> Option<(u32, usize)> {
        if self.small_owned {
            if let Some(c) = self.small_class_at(addr) {
                return super::small::is_slot_start(addr, c).then(|| (NIL, capacity(c)));
            }
        }
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
        if self.small_owned && super::small::note_copy(self, bytes) {
            return;
        }
        if tcache::note_copy(self, bytes) {
            return;
        }
        let mut st = self.lock();
        st.stats.copies += 1;
        st.stats.copied_bytes += bytes;
    }

    /// The arena's counters with the thread caches' summed in: cached
    /// buffers move from live to retained, their frees are counted.
    ///
    /// Exact when no other thread is operating on the arena. While others
    /// run, each cache's counters are read once with relaxed loads under
    /// the lock: every figure is one some thread's cache had at a moment
    /// during the call, and the sums may mix moments (a buffer freed into
    /// one cache while another is read may show as live or retained, never
    /// both). `peak_live_bytes` is exact on one thread; with several, a
    /// peak reached only while buffers sat in caches may be missed or
    /// counted up to one cache's worth high (`tcache::bin::BIN_BYTES` per
    /// class and thread, and a spill's as much for the classes up to
    /// 2 KiB), and buffers in the arena's stash (`tcache/
    /// stash.rs`, used only with two or more threads) count as live to it
    /// until taken or drained, so it may read high by up to their bytes.
    pub(crate) fn stats(&self) -> ArenaStats {
        let mut st = self.lock();
        let mut t = st.cache_totals();
        let (bytes, buffers) = tcache::stash_totals(self);
        t.held_bytes += bytes;
        t.held_buffers += buffers;
        let mut s = st.stats();
        if let Some(set) = &st.pattern {
            super::pattern::seam::fill_stats(set, &self.pattern_fast, &mut s);
        }
        let small = st.small.stats();
        drop(st);
        s.live_bytes += small.live_bytes;
        s.live_buffers += small.live_buffers;
        s.retained_bytes += small.retained_bytes;
        s.retained_buffers += small.retained_buffers;
        s.frees += small.frees;
        s.cold_allocations += small.cold;
        s.copies += small.copies;
        s.copied_bytes += small.copied_bytes;
        s.peak_live_bytes = s.peak_live_bytes.max(small.peak);
        s.live_bytes -= t.held_bytes;
        s.live_buffers -= t.held_buffers;
        s.retained_bytes += t.held_bytes;
        s.retained_buffers += t.held_buffers - t.merged_rests;
        s.frees = s.frees - t.flushed + t.frees;
        s.copies += t.copies;
        s.copied_bytes += t.copied_bytes as usize;
        s.warm_allocations = s.frees + s.live_buffers as u64 - s.cold_allocations;
        s.peak_live_bytes = s.peak_live_bytes.max(t.peak);
        s.os = self.os.snapshot();
        s
    }

    /// Gives every retained buffer back, this thread's cached ones too;
    /// other threads give theirs back (and release them) at their next
    /// operation on this arena.
    pub(crate) fn trim(&self) -> usize {
        let mut st = self.lock();
        tcache::flush_own(&mut st, self);
        tcache::claim_offers(&mut st, self, |_| true);
        tcache::drain_stash(&mut st, self, false);
        // This thread's heap gives its empty runs back while its epoch
        // still matches; other heaps at their next operation.
        let small = super::small::trim(&mut st, self);
        let e = tcache::epoch::after_trim(self.epoch.load(Relaxed));
        self.epoch.store(e, Relaxed);
        st.trim_epoch = e;
        let total = st.trim(&self.os) + small;
        st.stats.trimmed_bytes += small;
        total
    }

    /// Sets the cap (reaching thread caches as `trim` does; a cap below
    /// `MIN_CAP_FOR_CACHE` turns caching off).
    pub(crate) fn set_retention_cap(&self, cap: usize) {
        let mut st = self.lock();
        tcache::flush_own(&mut st, self);
        tcache::claim_offers(&mut st, self, |_| true);
        tcache::drain_stash(&mut st, self, false);
        let flags = tcache::epoch_flags(st.config.thread_cache, cap, self.pattern_on);
        let e = tcache::epoch::after_cap(self.epoch.load(Relaxed), flags);
        self.epoch.store(e, Relaxed);
        st.set_retention_cap(cap, &self.os);
        super::small::enforce_cap(&mut st, self);
    }

    pub(crate) fn reset_peak(&self) {
        let mut st = self.lock();
        let t = st.cache_totals();
        let (stashed, _) = tcache::stash_totals(self);
        let small = st.small.stats().live_bytes;
        st.stats.peak_live_bytes = st.stats.live_bytes - t.held_bytes - stashed + small;
        st.reset_cache_peaks();
        st.small.reset_peaks();
    }

    /// # Safety
    /// Nothing may reach the body afterwards.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn destroy(this: NonNull<ArenaCore>) {
        #[cfg(loom)]
        LIVE_BODIES.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        #[cfg(all(test, not(loom)))]
        // SAFETY: the body is alive until the `Box::from_raw` below.
        destroyed::note(unsafe { this.as_ref() }.id);
        // SAFETY: the body was made by `Box::into_raw` in `CoreHandle::new`
        // and the caller guarantees this is its only release.
        let mut body = unsafe { Box::from_raw(this.as_ptr()) };
        body.state.get_mut().leave_caches();
        let os = &body.os as *const OsCounters;
        // SAFETY: `os` points into `body`, which lives until the end of this scope.
        body.state.get_mut().release_everything(unsafe { &*os });
    }
}

/// The arena lock's guard: on release it stores the live-bytes mirror.
pub(crate) struct StateGuard<'a> {
    g: SpinGuard<'a, ArenaState>,
    core: &'a ArenaCore,
}

impl core::ops::Deref for StateGuard<'_> {
    type Target = ArenaState;
    #[inline(always)]
    fn deref(&self) -> &ArenaState {
        &self.g
    }
}

impl core::ops::DerefMut for StateGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut ArenaState {
        &mut self.g
    }
}

impl Drop for StateGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let st: &ArenaState = &self.g;
        // Modular: published bytes a cache's thread took out since and
        // freed elsewhere may exceed the live bytes for a while.
        let live = st.live_uncached();
        self.core.live_mirror.store(live, Relaxed);
        self.core.clock_mirror.store(st.clock, Relaxed);
        self.core.heap_version.store(st.heap.version, Relaxed);
        self.core.cache_threads.store(st.caches.len(), Relaxed);
        tcache::note_unlock(self.core, live, st.clock, st.caches.len());
    }
}

/// Which bodies were destroyed, for tests that check "exactly once".
#[cfg(all(test, not(loom)))]
pub(crate) mod destroyed {
    static IDS: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

    pub(crate) fn note(id: u64) {
        let _m = super::metadata::enter();
        IDS.lock().unwrap_or_else(|e| e.into_inner()).push(id);
    }

    /// How many times body `id` was destroyed.
    pub(crate) fn count(id: u64) -> usize {
        let ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
        ids.iter().filter(|&&i| i == id).count()
    }
}

/// The next arena body's `id`.
static NEXT_ID: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

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
            let id = NEXT_ID.fetch_add(1, Relaxed);
            let pattern_on = config.pattern && kind == ArenaKind::Execution;
            Box::new(ArenaCore {
                kind,
                id,
                epoch: core::sync::atomic::AtomicU64::new(
                    tcache::first_epoch(id)
                        | tcache::epoch_flags(
                            config.thread_cache,
                            config.retention_cap,
                            pattern_on,
                        ),
                ),
                handles: CachePadded::new(AtomicUsize::new(1)),
                live_mirror: core::sync::atomic::AtomicUsize::new(0),
                clock_mirror: core::sync::atomic::AtomicU64::new(0),
                heap_version: core::sync::atomic::AtomicU64::new(0),
                state: CachePadded::new(SpinLock::new(ArenaState::new(config))),
                remotes: tcache::remotes::Remotes::default(),
                spilled: CachePadded::new(tcache::steal::Spilled::default()),
                os: OsCounters::new(),
                stash: tcache::Stash::new(tcache::STASH_CLASSES),
                cache_threads: core::sync::atomic::AtomicUsize::new(0),
                pattern_on,
                // Under loom the arena models see the locked path alone (the
                // small path has its own models on `Run`).
                small_owned: config.run_ownership && !pattern_on && !cfg!(loom),
                // The execution heap's thread (a thread-local's address:
                // never 0), set below for arenas with a heap; pattern mode
                // keeps the class lists.
                heap_thread: core::sync::atomic::AtomicUsize::new(0),
                pattern_fast: CachePadded::new(Default::default()),
            })
        };
        let raw = Box::into_raw(body);
        #[cfg(loom)]
        LIVE_BODIES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: `raw` is the only pointer to the new body; the owner tag
        // keeps its provenance so the owner table can lead back to it.
        unsafe { (*raw).state.get_mut().owner = Owner(raw.cast()) };
        // SAFETY: as above. Execution arenas place the large buffers of one
        // thread at a time in the execution heap (`heap.rs`), at first the
        // one that made the arena (`heap_owner.rs`); pattern mode keeps the
        // class lists.
        unsafe {
            if kind == ArenaKind::Execution && !config.pattern {
                let _m = metadata::enter();
                let me = super::heap::thread_token();
                *(*raw).heap_thread.get_mut() = me;
                let st = (*raw).state.get_mut();
                st.heap_on = true;
                st.heap.learn.on = config.learn_placement;
                st.heap_thread = me;
                st.heap_life = super::thread_life::Life::current();
            }
        }
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
        // SAFETY: this handle keeps the body alive until the call; it is not
        // used afterwards.
        unsafe {
            ArenaCore::locked_last_out(self.0, |st, core| {
                tcache::flush_own(st, core);
                // No more stashed frees: the later ones through the lock.
                tcache::drain_stash(st, core, true);
                st.orphaned = true;
                super::small::orphaned(st, core);
                // No more remote frees: the ones pushed since this lock
                // was taken come back now, the later ones through the lock.
                tcache::remote::absorb_closing(st, core);
                st.settle_depot_at_close();
                let e = core.epoch.load(Relaxed);
                core.epoch.store(tcache::epoch::orphaned(e), Relaxed);
                if st.cached_bytes.get() != 0 || !st.caches.is_empty() {
                    // Other threads' caches may hold its buffers.
                    tcache::note_orphaned();
                }
            })
        }
    }
}

#[cfg(all(test, not(loom)))]
mod layout_class_tests {
    use super::{cached_class, cached_class_of_layout};

    /// The global allocator's class pick (size alone up to 16-byte
    /// alignment) agrees with the general one for every size and every
    /// power-of-two alignment.
    #[test]
    fn a_layouts_class_is_the_general_pick() {
        let step = if cfg!(miri) { 997 } else { 1 };
        for align in (0..14).map(|k| 1usize << k) {
            for size in (0..70_000)
                .step_by(step)
                .chain([usize::MAX, usize::MAX - 15])
            {
                assert_eq!(
                    cached_class_of_layout(size, align),
                    cached_class(size, align),
                    "size {size} align {align}"
                );
            }
        }
    }
}

#[cfg(test)]
mod rounding_tests {
    use super::*;

    /// Every class that serves some multiple of a power-of-two alignment
    /// up to a page has a capacity that is a multiple of it, so the class
    /// of a size rounded up to the alignment meets it (`rounded_to`).
    #[test]
    fn rounded_classes_meet_their_alignment() {
        for align in (0..=12).map(|k| 1usize << k) {
            for c in 0..crate::size_class::CLASS_COUNT {
                let below = if c == 0 { 0 } else { capacity(c - 1) };
                let first_multiple = (below / align + 1) * align;
                assert!(
                    first_multiple > capacity(c) || capacity(c) % align == 0,
                    "class {c} serves {first_multiple} but its capacity {} is not a multiple of {align}",
                    capacity(c)
                );
                assert!(first_multiple > capacity(c) || tcache::serves(c, align));
            }
            let step = if cfg!(miri) { 61 } else { 1 };
            for size in (1..=(4 * align).min(CARVE_LIMIT)).step_by(step) {
                assert!(tcache::serves(rounded_class(size, align), align));
            }
        }
    }
}
