//! [`IoLease`]: shared, read-only ownership of an exported I/O buffer.

use super::Allocation;
use crate::arena::pins::PinRecord;
use crate::arena::shared::ArenaCore;
use crate::arena::ArenaKind;
use crate::sync::rc::{fence, Ordering};
use core::ptr::NonNull;

/// A shared owner of an exported I/O-arena buffer.
///
/// Made from an I/O allocation in O(1) without copying
/// ([`Allocation::into_lease`], [`crate::IoArena::export`]). While any clone
/// lives the buffer is never reused, trimmed or evicted, and the arena's
/// state stays alive even if every `IoArena` handle is dropped; the last
/// clone returns the buffer to its arena (or, if the arena is gone, to the
/// OS together with the arena's state).
///
/// A lease is one pointer: cloning is one atomic increment, and the count
/// lives in a record the arena made when it grew, so exporting on a warm run
/// allocates nothing.
///
/// ```
/// use warmarena::IoArena;
/// let io = IoArena::new();
/// let mut out = io.allocate(16, 8).unwrap();
/// out.as_mut_slice().copy_from_slice(&[7; 16]);
/// let lease = out.into_lease().unwrap();
/// let copy = lease.clone();
/// drop(io);
/// assert_eq!(copy.as_slice(), &[7; 16]);
/// ```
pub struct IoLease {
    rec: NonNull<PinRecord>,
}

// SAFETY: the lease's bytes are only read through shared references (or
// written through `get_mut` when it is the unique owner); the count is atomic
// and the record's details are immutable while pinned.
unsafe impl Send for IoLease {}
// SAFETY: as above.
unsafe impl Sync for IoLease {}

impl Allocation {
    /// Turns an I/O-arena allocation into a lease, in O(1) and without
    /// copying: the address stays the same. An execution-arena allocation is
    /// handed back unchanged (its memory must not leave the runtime).
    ///
    /// ```
    /// let io = warmarena::IoArena::new();
    /// let a = io.allocate(100, 8).unwrap();
    /// let p = a.as_ptr();
    /// let lease = a.into_lease().unwrap();
    /// assert_eq!(lease.as_ptr(), p);
    /// assert_eq!(io.stats().leases, 1);
    /// let exec = warmarena::ExecutionArena::new();
    /// assert!(exec.allocate(8, 8).unwrap().into_lease().is_err());
    /// ```
    pub fn into_lease(self) -> Result<IoLease, Allocation> {
        if self.kind() != ArenaKind::Io {
            return Err(self);
        }
        let (core, block, addr, len) = self.parts();
        // SAFETY: the allocation is live, so its arena body is alive.
        let pinned = unsafe { ArenaCore::pin(core, block, addr, len) };
        match pinned {
            Some(rec) => {
                // Ownership of the buffer moves to the lease.
                core::mem::forget(self);
                Ok(IoLease { rec })
            }
            None => Err(self),
        }
    }
}

impl IoLease {
    fn info(&self) -> crate::arena::pins::PinInfo {
        // SAFETY: a lease's record is pinned while the lease exists.
        unsafe { self.rec.as_ref().info() }
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.info().addr as *const u8
    }

    /// The exported length in bytes.
    pub fn len(&self) -> usize {
        self.info().len
    }

    /// Whether the exported length is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the buffer holds (its size class).
    pub fn capacity(&self) -> usize {
        self.info().cap
    }

    /// The exported bytes.
    pub fn as_slice(&self) -> &[u8] {
        let i = self.info();
        // SAFETY: the buffer is live and pinned for as long as this lease
        // exists; no one writes it while it is shared.
        unsafe { core::slice::from_raw_parts(i.addr as *const u8, i.len) }
    }

    /// The bytes, writable, when this is the only owner.
    ///
    /// ```
    /// let io = warmarena::IoArena::new();
    /// let mut l = io.allocate(4, 4).unwrap().into_lease().unwrap();
    /// l.get_mut().unwrap().fill(1);
    /// let c = l.clone();
    /// assert!(l.get_mut().is_none());
    /// # drop(c);
    /// ```
    pub fn get_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: the record is pinned while the lease exists.
        let refs = unsafe { self.rec.as_ref() }.refs.load(Ordering::Acquire);
        if refs != 1 {
            return None;
        }
        let i = self.info();
        // SAFETY: the unique owner may write; `&mut self` keeps it unique.
        Some(unsafe { core::slice::from_raw_parts_mut(i.addr as *mut u8, i.len) })
    }

    /// How many owners share the buffer.
    pub fn owners(&self) -> usize {
        // SAFETY: the record is pinned while the lease exists.
        unsafe { self.rec.as_ref() }.refs.load(Ordering::Acquire)
    }

    /// Which arena owns the buffer (always [`ArenaKind::Io`]).
    pub fn kind(&self) -> ArenaKind {
        // SAFETY: a pinned buffer is live, so its arena is alive.
        unsafe { (*self.info().core).kind }
    }

    /// Gives up this owner as a raw pointer, for a foreign owner (a C or
    /// Python capsule) to hold; [`IoLease::from_raw`] takes it back. The
    /// pointer is not the buffer's address; read that with
    /// [`IoLease::as_ptr`] first.
    ///
    /// ```
    /// let io = warmarena::IoArena::new();
    /// let lease = io.allocate(64, 8).unwrap().into_lease().unwrap();
    /// let addr = lease.as_ptr();
    /// let raw = lease.into_raw();
    /// // SAFETY: `raw` came from `into_raw` and is taken back once.
    /// let back = unsafe { warmarena::IoLease::from_raw(raw) };
    /// assert_eq!(back.as_ptr(), addr);
    /// ```
    pub fn into_raw(self) -> *const core::ffi::c_void {
        let p = self.rec.as_ptr() as *const core::ffi::c_void;
        core::mem::forget(self);
        p
    }

    /// Takes back an owner given up by [`IoLease::into_raw`].
    ///
    /// # Safety
    /// `raw` must come from `into_raw` and be taken back at most once.
    pub unsafe fn from_raw(raw: *const core::ffi::c_void) -> IoLease {
        IoLease {
            // SAFETY: `into_raw` returned a non-null record pointer.
            rec: unsafe { NonNull::new_unchecked(raw as *mut PinRecord) },
        }
    }
}

impl Clone for IoLease {
    fn clone(&self) -> Self {
        // SAFETY: the record is pinned while this lease exists.
        let old = unsafe { self.rec.as_ref() }
            .refs
            .fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc` does: an owner count this large means leaked clones;
            // going on would risk wrapping to zero and a use after free.
            std::process::abort();
        }
        if old == 0 {
            // No owner left: a raw lease retained after its last release
            // (a C or Python owner's bug). Resurrecting the buffer would
            // hand out memory the arena may already have reused.
            owner_bug("retained after its last release");
        }
        IoLease { rec: self.rec }
    }
}

impl Drop for IoLease {
    fn drop(&mut self) {
        // SAFETY: the record is pinned while this lease exists (a released
        // record stays allocated while its arena lives, so a double release
        // through a raw lease reads a count of 0 here, below).
        let old = unsafe { self.rec.as_ref() }
            .refs
            .fetch_sub(1, Ordering::Release);
        if old != 1 {
            if old == 0 {
                // One release more than there were owners: a raw lease
                // released twice. Going on would leave the count wrapped
                // (the block could never be exported again) or free the
                // buffer under its next owner.
                owner_bug("released more times than it was retained");
            }
            return;
        }
        fence(Ordering::Acquire);
        // SAFETY: the count just reached zero: this was the last owner.
        unsafe { ArenaCore::unpin_and_free(self.rec) };
    }
}

/// A foreign owner broke the raw-lease contract: say so and abort, since
/// the count can no longer be trusted.
#[cold]
fn owner_bug(what: &str) -> ! {
    eprintln!("warmarena: an IoLease was {what} (double release through a raw lease?); aborting");
    std::process::abort()
}

impl core::fmt::Debug for IoLease {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IoLease")
            .field("ptr", &self.as_ptr())
            .field("len", &self.len())
            .field("owners", &self.owners())
            .finish()
    }
}

/// Releases one owner given up by [`IoLease::into_raw`], from C.
///
/// # Safety
/// `raw` must come from `into_raw` (or [`warmarena_lease_retain`]) and be
/// released at most once.
#[no_mangle]
pub unsafe extern "C" fn warmarena_lease_release(raw: *const core::ffi::c_void) {
    if raw.is_null() {
        return;
    }
    // SAFETY: forwarded from the caller's contract.
    drop(unsafe { IoLease::from_raw(raw) });
}

/// Adds one owner to a raw lease, from C; release it with
/// [`warmarena_lease_release`].
///
/// # Safety
/// `raw` must be a live raw lease.
#[no_mangle]
pub unsafe extern "C" fn warmarena_lease_retain(raw: *const core::ffi::c_void) {
    if raw.is_null() {
        return;
    }
    // SAFETY: forwarded from the caller's contract; the borrowed owner is
    // given back with `into_raw` so the count changes by exactly one.
    let lease = unsafe { IoLease::from_raw(raw) };
    let extra = lease.clone();
    let _ = lease.into_raw();
    let _ = extra.into_raw();
}

impl crate::IoArena {
    /// Exports an allocation of this arena as a lease, in O(1) and without
    /// copying. An allocation of another arena is handed back unchanged.
    ///
    /// ```
    /// let io = warmarena::IoArena::new();
    /// let lease = io.export(io.allocate(256, 64).unwrap()).unwrap();
    /// assert_eq!(io.stats().leased_bytes, lease.capacity());
    /// let other = warmarena::IoArena::new();
    /// assert!(other.export(io.allocate(8, 8).unwrap()).is_err());
    /// ```
    pub fn export(&self, alloc: Allocation) -> Result<IoLease, Allocation> {
        if alloc.parts().0 != self.core.ptr() {
            return Err(alloc);
        }
        alloc.into_lease()
    }
}

#[cfg(test)]
mod tests {
    use crate::IoArena;

    #[test]
    fn last_lease_returns_the_buffer_and_outlives_the_arena() {
        let io = IoArena::new();
        let mut a = io.allocate(100, 16).unwrap();
        a.as_mut_slice().fill(3);
        let l = a.into_lease().unwrap();
        let clones: Vec<_> = (0..3).map(|_| l.clone()).collect();
        assert_eq!(l.owners(), 4);
        drop(clones);
        assert_eq!(io.stats().leases, 1);
        drop(io);
        assert!(l.as_slice().iter().all(|&b| b == 3));
        drop(l);
    }

    #[test]
    fn leases_cross_threads() {
        let io = IoArena::new();
        let l = io.allocate(4096, 16).unwrap().into_lease().unwrap();
        let c = l.clone();
        std::thread::spawn(move || drop(c)).join().unwrap();
        assert_eq!(l.owners(), 1);
        let raw = l.into_raw();
        // SAFETY: raw came from into_raw and is released once.
        unsafe { super::warmarena_lease_release(raw) };
        assert_eq!(io.stats().leases, 0);
        assert_eq!(io.stats().retained_buffers, 1);
    }
}
