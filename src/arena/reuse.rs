//! The warm path: serve a request from a retained buffer of its own class,
//! O(1).
//!
//! Only the request's own class is used, never a larger one: a repeating
//! workload then finds, at every step of a warm run, as many retained
//! buffers of each class as the run before had (its live count per class
//! is the same at every step), whatever order buffers were freed in, so a
//! warm run never goes to the OS. Serving from larger classes (a 2× window)
//! saves memory within a run but makes the next run's choices differ from
//! the last one's, and a class left short goes cold mid-run, faulting.

use super::blocks::{BlockState, NIL};
use super::state::{ArenaState, Grant};
use super::CARVE_LIMIT;
use crate::os::OsCounters;
use crate::size_class::{capacity, Class, CLASS_COUNT, MIN_CAPACITY};
use core::ptr::NonNull;

impl ArenaState {
    /// The most recently freed buffer of `class` (the one most likely still
    /// in cache) for a request of `size` bytes at `align`, when the class
    /// has one and its buffers satisfy `align`. No allocation; a system call
    /// only when `size` is above every request the class served before
    /// (see `ready.rs`).
    pub(crate) fn take_warm(
        &mut self,
        class: Class,
        size: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<Grant> {
        self.take_exact(class, size, align, os)
    }

    /// [`ArenaState::take_warm`], inlined into the allocation fast path.
    #[inline(always)]
    pub(crate) fn take_exact(
        &mut self,
        class: Class,
        size: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<Grant> {
        if !self.warm.has(class) || !serves_alignment(class, align) {
            if class >= HEAP_FIRST_CLASS && self.heap_serves() {
                return self.heap_take_warm(size, align, os);
            }
            return self.take_from_depot(class, align);
        }
        if self.depot.newest_stamp(class).is_some() && self.depot_is_newer(class) {
            return self.take_from_depot(class, align);
        }
        Some(self.take_tail(class, size, os))
    }

    /// A retained buffer of a larger class, at most twice `class`'s
    /// capacity, for a request of `class` (64 KiB and up, placed by class)
    /// whose own class has none retained: the smallest such class that has
    /// one, and the grant (it keeps its own class, and goes back to it when
    /// freed). `None` (nothing changed) when there is none.
    ///
    /// Why: with several threads the order of their requests changes from
    /// run to run, so the most buffers of one class live at once does too,
    /// and a class that finds itself short in a later run used to map a new
    /// buffer while buffers of the classes just above sat free: the arena
    /// kept growing run after run. A request served from up to twice its
    /// class wastes at most half the buffer for as long as it lives, and
    /// never more memory than a new buffer would have cost.
    ///
    /// Only while two or more threads have caches on the arena: on one
    /// thread a run repeats its requests in the same order, so each class
    /// alone meets in every later run the demand the first run met, and
    /// the first run's buffers serve every later one (a later run finds
    /// at least as many free buffers of each class at each request). With
    /// borrowing, one class's request takes another's buffer, the classes
    /// no longer stand alone, and a later run can find a class short
    /// where the first did not (measured: 1-3 new buffers in the second
    /// run of a large-buffer workload, none without).
    pub(crate) fn take_larger_warm(
        &mut self,
        class: Class,
        size: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<(Class, Grant)> {
        let cap = capacity(class);
        if cap < CARVE_LIMIT || self.heap_serves() || self.caches.len() < 2 {
            return None;
        }
        let mut k = class + 1;
        while k < CLASS_COUNT && may_borrow(class, k) {
            if self.warm.has(k) && serves_alignment(k, align) {
                return Some((k, self.take_tail(k, size, os)));
            }
            k += 1;
        }
        None
    }

    /// Whether the depot's newest buffer of `class` was freed after the
    /// newest on its free list: the arena hands out its most recently
    /// freed buffer, wherever a cache's flush left it (a request without a
    /// cache, e.g. while caching is off, sees both).
    #[cold]
    #[inline(never)]
    fn depot_is_newer(&self, class: Class) -> bool {
        match (
            self.depot.newest_stamp(class),
            self.list_newest_stamp(class),
        ) {
            (Some(d), Some(l)) => d > l,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// The free stamp of the newest buffer on `class`'s free list, the one
    /// [`ArenaState::take_exact`] would hand out; `None` when the list is
    /// empty. Compared with the depot's (`Depot::newest_stamp`) wherever
    /// both may serve: a refill and a request without a cache.
    pub(crate) fn list_newest_stamp(&self, class: Class) -> Option<u64> {
        if !self.warm.has(class) {
            return None;
        }
        self.table.get(self.warm.newest(class)).map(|b| b.freed_at)
    }

    /// A small buffer of `class` from the depot (`tcache/depot.rs`), the
    /// newest, when the class's free list is empty: what the thread caches
    /// gave back serves requests that come without a cache too, so none of
    /// it goes unused while the arena maps more.
    #[inline(never)]
    fn take_from_depot(&mut self, class: Class, align: usize) -> Option<Grant> {
        if !serves_alignment(class, align) {
            return None;
        }
        let s = self.depot.pop(class)?;
        let cap = capacity(class);
        // Live to its record and counted live already: only no longer cached.
        self.note_uncached(cap);
        Some(Grant {
            // SAFETY: depot entries are buffers the arena carved: never null.
            ptr: unsafe { NonNull::new_unchecked(s.addr as *mut u8) },
            cap,
            block: NIL,
            fresh: false,
            warm: true,
        })
    }

    /// Moves up to `n` of class `c`'s retained buffers, newest first, to a
    /// thread cache's refill: each goes to `put` with its address and free
    /// stamp (it keeps its place in free order should it go back unused;
    /// a cache's entry keeps no block record, `tcache/bin.rs`). Returns
    /// how many. Small classes only (no tail to materialize: a small
    /// block's tail never starts a page a larger request of its class
    /// would touch). They become live to the arena
    /// and held by the cache at once (`cached_bytes`): the live bytes less
    /// the held ones do not move, so neither can the peak, and none is
    /// checked.
    pub(crate) fn take_for_cache(
        &mut self,
        c: Class,
        n: usize,
        mut put: impl FnMut(usize, u64),
    ) -> usize {
        debug_assert!(capacity(c) < CARVE_LIMIT);
        let mut k = 0;
        while k < n && self.warm.has(c) {
            let i = self.warm.pop_newest(&mut self.table, c);
            let b = self.table.at(i);
            b.state = BlockState::Live;
            put(b.addr, b.freed_at);
            k += 1;
        }
        let bytes = k * capacity(c);
        self.cached_bytes += bytes;
        self.stats.live_bytes += bytes;
        self.stats.live_buffers += k;
        k
    }

    /// Hands out the most recently freed buffer of class `k` (non-empty).
    #[inline(always)]
    fn take_tail(&mut self, k: Class, size: usize, os: &OsCounters) -> Grant {
        let i = self.warm.pop_newest(&mut self.table, k);
        let b = self.table.at(i);
        b.state = BlockState::Live;
        let (addr, cap, ready) = (b.addr, b.cap, b.ready);
        self.note_live(cap);
        if size > ready {
            self.ready_for(i, size, os);
        }
        Grant {
            // SAFETY: a block's address is never zero: it came from a
            // successful mapping (or the heap stand-in under Miri).
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            cap,
            block: i,
            fresh: false,
            warm: true,
        }
    }
}

/// The first class placed in the execution heap (capacity [`CARVE_LIMIT`]).
const HEAP_FIRST_CLASS: Class = match crate::size_class::class_of(CARVE_LIMIT) {
    Some(c) => c,
    None => CLASS_COUNT,
};

/// Whether a request of class `c` may take a free buffer of class `k`
/// (`k >= c`) when its own class is short: up to twice its capacity
/// ([`ArenaState::take_larger_warm`], and the thread caches' stash,
/// `tcache/stash.rs`).
#[inline(always)]
pub(crate) const fn may_borrow(c: Class, k: Class) -> bool {
    capacity(k) <= 2 * capacity(c)
}

/// Whether every buffer of class `k` is aligned to `align` (a power of two
/// up to `MAX_ALIGN`): each is aligned to the largest power of two dividing
/// its capacity (up to `MAX_ALIGN`), so exactly when `align` divides it.
#[inline(always)]
pub(crate) fn serves_alignment(k: Class, align: usize) -> bool {
    align <= MIN_CAPACITY || capacity(k) & (align - 1) == 0
}
