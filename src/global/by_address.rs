//! What a C allocator built on the arenas needs beyond [`ScopedGlobal`]
//! (the `malloc/` crate, `libwarmarena.so`): `free(p)` and
//! `malloc_usable_size(p)` come without a size, so the capacity of a buffer
//! is found by address, and a `fork()` must not happen while another thread
//! holds the arena's lock.
//!
//! [`ScopedGlobal`]: super::ScopedGlobal

use crate::arena::owners::{self, Owner};
use crate::arena::shared::{ArenaCore, StateGuard};
use crate::arena::ExecutionArena;
use core::alloc::Layout;
use core::ptr::NonNull;

/// Whether `ptr` lies in a 64 KiB granule that an arena of this process
/// mapped and registered in the owner table (`arena::owners`): two atomic
/// loads, no lock. Memory from any other allocator (the system's, a
/// library's own) is never in such a granule, so `false` names a foreign
/// pointer.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let a = arena.allocate(100, 16).unwrap();
/// assert!(warmarena::global::is_arena_memory(a.as_ptr()));
/// let b = Box::new(7u64); // the system allocator's
/// assert!(!warmarena::global::is_arena_memory(&*b as *const u64 as *const u8));
/// ```
#[inline]
pub fn is_arena_memory(ptr: *const u8) -> bool {
    owners::lookup(ptr as usize) != Owner::NONE
}

/// The capacity of the live arena buffer that starts at `ptr` (what
/// `malloc_usable_size` answers: every byte of it may be written), or
/// `None` when `ptr` is not arena memory ([`is_arena_memory`]) or, in an
/// arena's granule, no live buffer starts there. A small buffer's capacity
/// comes from its run's entry in the owner table (no lock); a larger one is
/// looked up under its arena's lock.
///
/// # Safety
/// `ptr` is not arena memory, or it is a live buffer of an arena (one that
/// nothing frees during the call: the buffer keeps its arena alive).
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let a = arena.allocate(100, 16).unwrap();
/// let b = arena.allocate(1 << 20, 64).unwrap();
/// // SAFETY: both are live buffers of `arena`; a stack address is not arena memory.
/// unsafe {
///     assert_eq!(warmarena::global::usable_size(a.as_ptr()), Some(a.capacity()));
///     assert_eq!(warmarena::global::usable_size(b.as_ptr()), Some(b.capacity()));
///     let x = 0u8;
///     assert_eq!(warmarena::global::usable_size(&x), None);
/// }
/// ```
pub unsafe fn usable_size(ptr: *const u8) -> Option<usize> {
    let addr = ptr as usize;
    let (owner, small) = owners::lookup_small(addr);
    if owner == Owner::NONE {
        return None;
    }
    if let Some(c) = small {
        return Some(crate::size_class::capacity(c));
    }
    // SAFETY: a registered owner is a live body's original pointer, kept
    // alive by the live buffer at `ptr` (the caller's contract).
    let core = unsafe { &*owner.0.cast::<ArenaCore>() };
    core.live_block_at(addr).map(|(_, cap)| cap)
}

/// Holds `arena`'s lock until dropped: taken in a `pthread_atfork` prepare
/// handler and dropped in both the parent's and the child's handler, so a
/// forked child never inherits the lock held by a thread that does not
/// exist there (it would wait for it forever at its first allocation that
/// takes the lock). Do not allocate from `arena` on this thread while
/// holding it.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let held = warmarena::global::lock_for_fork(&arena);
/// drop(held);
/// drop(arena.allocate(64, 16).unwrap()); // the lock is free again
/// ```
#[must_use = "the lock is released when the guard is dropped"]
pub struct ForkLock<'a> {
    _guard: StateGuard<'a>,
}

impl core::fmt::Debug for ForkLock<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ForkLock").finish_non_exhaustive()
    }
}

/// Takes `arena`'s lock for a `fork()`; see [`ForkLock`].
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let _held = warmarena::global::lock_for_fork(&arena);
/// ```
pub fn lock_for_fork(arena: &ExecutionArena) -> ForkLock<'_> {
    ForkLock {
        _guard: arena.core.lock_for_refill(),
    }
}

impl ExecutionArena {
    /// A buffer of at least `size` bytes at `align` (a power of two) from
    /// this thread's cache of the arena (its heap's current run, on run
    /// ownership), taking no lock and counting nothing in
    /// [`stats`](super::stats()); `None` (nothing changed) when the cache
    /// has none ready, and for any request that is not in a small class.
    /// The hit of a C allocator's `malloc`, which serves a `None` through
    /// [`ScopedGlobal`](super::ScopedGlobal) or [`ExecutionArena::allocate`]
    /// and frees what it got with [`ExecutionArena::free_by_address`].
    ///
    /// # Safety
    /// Not called re-entrantly on this thread from inside another operation
    /// of an arena: a global allocator that the arena's own metadata
    /// allocations reach must not call it (the scoped global allocator
    /// checks for that; a C allocator sends its own re-entrant calls
    /// elsewhere).
    ///
    /// ```
    /// let arena = warmarena::ExecutionArena::new();
    /// drop(arena.allocate(64, 16).unwrap()); // the thread's cache holds one now
    /// // SAFETY: not inside another arena operation.
    /// let p = unsafe { arena.allocate_hit(64, 16) }.expect("a cached buffer");
    /// // SAFETY: a live buffer of `arena`, given up here.
    /// assert_eq!(unsafe { warmarena::ExecutionArena::free_by_address(p.as_ptr()) }, Some(true));
    /// ```
    #[inline(always)]
    pub unsafe fn allocate_hit(&self, size: usize, align: usize) -> Option<NonNull<u8>> {
        let layout = Layout::from_size_align(size, align).ok()?;
        self.core.allocate_cached_layout(layout)
    }

    /// Frees the live buffer that starts at `ptr`, found by address in
    /// whichever arena of this process owns it, as `free(ptr)` must: one
    /// owner-table lookup names the owner and, for a small buffer, its
    /// class, and the buffer goes into this thread's cache when it takes it
    /// (a larger one's capacity is looked up under its arena's lock). Counts
    /// nothing in [`stats`](super::stats()).
    ///
    /// Returns `None` when `ptr` is not arena memory ([`is_arena_memory`]:
    /// a foreign pointer, for its own allocator), `Some(true)` when the
    /// buffer was freed, and `Some(false)` (nothing changed) when no live
    /// buffer of a larger class starts there (an interior pointer, or one
    /// freed twice).
    ///
    /// # Safety
    /// `ptr` is not arena memory, or it is a live buffer of an arena (one
    /// that nothing else frees during the call), which the caller gives up;
    /// not called re-entrantly from inside an arena operation (as
    /// [`ExecutionArena::allocate_hit`]).
    ///
    /// ```
    /// use warmarena::ExecutionArena;
    /// let arena = ExecutionArena::new();
    /// let small = std::mem::ManuallyDrop::new(arena.allocate(100, 16).unwrap());
    /// let large = std::mem::ManuallyDrop::new(arena.allocate(1 << 20, 64).unwrap());
    /// let x = 0u8;
    /// // SAFETY: two live buffers, given up (never dropped); a stack address.
    /// unsafe {
    ///     assert_eq!(ExecutionArena::free_by_address(small.as_ptr().cast_mut()), Some(true));
    ///     assert_eq!(ExecutionArena::free_by_address(large.as_ptr().cast_mut()), Some(true));
    ///     assert_eq!(ExecutionArena::free_by_address(&x as *const u8 as *mut u8), None);
    /// }
    /// assert_eq!(arena.stats().live_buffers, 0);
    /// ```
    #[inline(always)]
    pub unsafe fn free_by_address(ptr: *mut u8) -> Option<bool> {
        let addr = ptr as usize;
        let (owner, small) = owners::lookup_small(addr);
        if owner == Owner::NONE {
            return None;
        }
        let this = owner.0.cast::<ArenaCore>();
        if let Some(c) = small {
            // SAFETY: a registered owner is a live body's original pointer,
            // kept alive by the live buffer at `ptr` (the caller's).
            if unsafe { &*this }.free_cached(c, addr) {
                return Some(true);
            }
        }
        // SAFETY: as above.
        Some(unsafe { free_missed(this, small, addr) })
    }
}

/// [`ExecutionArena::free_by_address`] past the cache's hit, out of line:
/// a larger buffer into this thread's heap or large slot when it takes it,
/// else under the lock.
///
/// # Safety
/// `this` is the registered owner of `addr`'s granule, kept alive by the
/// live buffer at `addr` (the caller gives it up).
#[inline(never)]
unsafe fn free_missed(this: *mut ArenaCore, small: Option<usize>, addr: usize) -> bool {
    if small.is_none() {
        // SAFETY: the caller's contract: a live body.
        let core = unsafe { &*this };
        let Some((_, cap)) = core.live_block_at(addr) else {
            return false;
        };
        if core.free_large_hit_at(addr, cap, crate::size_class::MIN_CAPACITY) {
            return true;
        }
    }
    // SAFETY: the caller's contract; a body's pointer is never null.
    unsafe { ArenaCore::free_by_addr(NonNull::new_unchecked(this), addr, small) }
}
