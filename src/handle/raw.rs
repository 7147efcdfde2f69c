//! Raw buffers: an [`Allocation`] given up as a bare pointer, for foreign
//! allocator interfaces (NumPy's data memory handler, a C `free(ptr)`) that
//! hand back only the address. The buffer's arena is found again by
//! address in the arenas' owner table (`arena::owners`), as the scoped
//! global allocator does, so no handle travels with the pointer.
//!
//! A raw buffer is a live buffer of its arena: it keeps the arena's state
//! alive after every handle is dropped, and [`free_raw`] returns it (from
//! any thread) exactly as dropping the `Allocation` would have.

use super::Allocation;
use crate::arena::owners::{self, Owner};
use crate::arena::shared::ArenaCore;
use core::ptr::NonNull;

impl Allocation {
    /// Gives up the buffer as a bare pointer, keeping it live: it goes back
    /// to its arena only through [`free_raw`]. Refused (the allocation comes
    /// back unchanged) when the buffer could not be found again by address,
    /// which happens only if the owner table had no memory to register the
    /// buffer's range.
    ///
    /// ```
    /// let arena = warmarena::ExecutionArena::new();
    /// let p = arena.allocate(1 << 20, 64).unwrap().into_raw().unwrap();
    /// drop(arena); // the raw buffer keeps the arena's state alive
    /// // SAFETY: we own the raw buffer at `p`.
    /// assert_eq!(unsafe { warmarena::handle::raw_capacity(p.as_ptr()) }, Some(1 << 20));
    /// // SAFETY: `p` is a raw buffer, freed once.
    /// assert!(unsafe { warmarena::handle::free_raw(p.as_ptr()) });
    /// ```
    pub fn into_raw(self) -> Result<NonNull<u8>, Allocation> {
        let (core, _, addr, _) = self.parts();
        // SAFETY: `addr` is the live buffer's non-null start.
        let ptr = unsafe { NonNull::new_unchecked(addr as *mut u8) };
        if !owners::owned_by(ptr, Owner(core.as_ptr().cast())) {
            return Err(self);
        }
        core::mem::forget(self);
        Ok(ptr)
    }
}

/// Returns the raw buffer at `ptr` (from [`Allocation::into_raw`]) to its
/// arena, which may then go away if nothing else keeps it. Returns whether
/// `ptr` lies in arena memory at all: `false` means some other allocator
/// owns it (and nothing was done); a pointer into arena memory that is not
/// the start of a live buffer changes nothing.
///
/// ```
/// let io = warmarena::IoArena::new();
/// let p = io.allocate(100, 16).unwrap().into_raw().unwrap();
/// assert_eq!(io.stats().live_buffers, 1);
/// // SAFETY: `p` is a raw buffer, freed once.
/// assert!(unsafe { warmarena::handle::free_raw(p.as_ptr()) });
/// assert_eq!(io.stats().live_buffers, 0);
/// let v = vec![0u8; 100];
/// // SAFETY: not arena memory: the call only looks the address up.
/// assert!(!unsafe { warmarena::handle::free_raw(v.as_ptr() as *mut u8) });
/// ```
///
/// # Safety
/// If `ptr` is in arena memory it must be a raw buffer not yet freed (or
/// not a buffer start at all); no one may use the buffer afterwards.
pub unsafe fn free_raw(ptr: *mut u8) -> bool {
    let (owner, small) = owners::lookup_small(ptr as usize);
    let Some(core) = NonNull::new(owner.0.cast::<ArenaCore>()) else {
        return false;
    };
    // SAFETY: a registered owner is a live body's original pointer: a live
    // raw buffer at or around `ptr` keeps it alive during this call.
    if unsafe { core.as_ref() }
        .live_block_at(ptr as usize)
        .is_none()
    {
        // Arena memory, but not a live buffer's start: nothing to free (a
        // small buffer's free would otherwise go into a thread cache
        // unchecked).
        return true;
    }
    // SAFETY: as above; the buffer at `ptr` is live until this call returns it.
    unsafe { ArenaCore::free_by_addr(core, ptr as usize, small) };
    true
}

/// The capacity (size class) of the live arena buffer starting at `ptr`;
/// `None` when `ptr` is not the start of one (system memory included).
///
/// # Safety
/// If `ptr` is in arena memory, the caller owns a live buffer of that arena
/// (normally the raw buffer at `ptr`), so the arena cannot go away during
/// the call.
///
/// ```
/// let arena = warmarena::ExecutionArena::new();
/// let p = arena.allocate(5000, 64).unwrap().into_raw().unwrap();
/// // SAFETY: we own the raw buffer at `p`.
/// assert_eq!(unsafe { warmarena::handle::raw_capacity(p.as_ptr()) }, Some(5120));
/// // SAFETY: `p` is a raw buffer, freed once.
/// unsafe { warmarena::handle::free_raw(p.as_ptr()) };
/// let v = vec![0u8; 64];
/// // SAFETY: not arena memory.
/// assert_eq!(unsafe { warmarena::handle::raw_capacity(v.as_ptr()) }, None);
/// ```
pub unsafe fn raw_capacity(ptr: *const u8) -> Option<usize> {
    let owner = owners::lookup(ptr as usize);
    let core = NonNull::new(owner.0.cast::<ArenaCore>())?;
    // SAFETY: a registered owner is a live body, kept alive during the call
    // by the buffer the caller owns in it.
    let core = unsafe { core.as_ref() };
    core.live_block_at(ptr as usize).map(|(_, cap)| cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ExecutionArena, IoArena};

    /// A raw buffer's address on its way to another thread, as a C caller
    /// would pass it.
    struct Raw(NonNull<u8>);
    // SAFETY: the buffer is owned by whoever holds the `Raw`.
    unsafe impl Send for Raw {}

    #[test]
    fn raw_buffers_are_freed_on_another_thread_after_the_handle_is_dropped() {
        let arena = IoArena::new();
        let a = arena.allocate(3 << 20, 64).unwrap().into_raw().unwrap();
        let b = arena.allocate(100, 16).unwrap().into_raw().unwrap();
        let probe = arena.clone();
        drop(arena);
        assert_eq!(probe.stats().live_buffers, 2);
        let (a, b) = (Raw(a), Raw(b));
        std::thread::spawn(move || {
            let (a, b) = (a, b); // whole values move, not their fields
                                 // SAFETY: raw buffers of ours, each freed once.
            assert!(unsafe { free_raw(a.0.as_ptr()) });
            // SAFETY: as above.
            assert!(unsafe { free_raw(b.0.as_ptr()) });
        })
        .join()
        .unwrap();
        let s = probe.stats();
        assert_eq!((s.live_buffers, s.frees, s.retained_buffers), (0, 2, 2));
        // With no handle left at all, the last free releases the arena's
        // state on the freeing thread (Miri and the sanitizers check it).
        drop(probe);
        let lone = ExecutionArena::new();
        let p = Raw(lone.allocate(5000, 64).unwrap().into_raw().unwrap());
        drop(lone);
        let freed = std::thread::spawn(move || {
            let p = p;
            // SAFETY: the raw buffer, freed once; it kept the state alive.
            unsafe { free_raw(p.0.as_ptr()) }
        });
        assert!(freed.join().unwrap());
    }

    #[test]
    fn an_address_inside_a_buffer_changes_nothing() {
        let arena = ExecutionArena::new();
        let p = arena.allocate(4096, 64).unwrap().into_raw().unwrap();
        // SAFETY: inside arena memory but not a buffer start: a no-op.
        assert!(unsafe { free_raw(p.as_ptr().wrapping_add(64)) });
        // SAFETY: we own the raw buffer at `p`.
        assert_eq!(unsafe { raw_capacity(p.as_ptr().wrapping_add(64)) }, None);
        assert_eq!(arena.stats().live_buffers, 1);
        // SAFETY: the raw buffer, freed once.
        assert!(unsafe { free_raw(p.as_ptr()) });
        assert_eq!(arena.stats().live_buffers, 0);
    }
}
