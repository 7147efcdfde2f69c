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
