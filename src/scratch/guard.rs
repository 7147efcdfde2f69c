//! The claim an execution holds: the buffer is the holder's alone from the
//! claim until this guard drops.

use super::engine::SlotRef;
use super::slot::Claimed;
use core::ptr::NonNull;

/// Exclusive use of `len()` bytes of scratch until dropped. It borrows its
/// engine, so an engine cannot be dropped (and a private buffer freed)
/// while one of its executions runs. It may be sent to and dropped on
/// another thread, for executions that complete elsewhere.
///
/// ```
/// use warmarena::scratch::{EngineScratch, ScratchMode};
/// let engine = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
/// let mut g = engine.claim(16).unwrap();
/// let bytes = g.as_mut_slice().unwrap();
/// bytes.copy_from_slice(&[1; 16]);
/// assert_eq!(g.as_slice().unwrap(), &[1; 16]);
/// ```
pub struct ScratchGuard<'e> {
    slot: Option<SlotRef<'e>>,
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    host: bool,
}

// SAFETY: the guard owns an exclusive claim on the bytes behind `ptr`;
// ending it (`Slot::release`) takes the slot's mutex and works from any
// thread, and the slot it names is `Sync`. So the guard, and with it the
// claim, may move to another thread (a completion thread, say).
unsafe impl Send for ScratchGuard<'_> {}
// SAFETY: through `&ScratchGuard` only `as_slice` reads the bytes; writes
// need `&mut`, so shared references on several threads only read.
unsafe impl Sync for ScratchGuard<'_> {}

impl<'e> ScratchGuard<'e> {
    pub(crate) fn new(slot: SlotRef<'e>, claimed: Claimed, len: usize, host: bool) -> Self {
        ScratchGuard {
            slot: Some(slot),
            ptr: claimed.ptr,
            len,
            capacity: claimed.capacity,
            host,
        }
    }

    /// The guard of an engine that needs no scratch: no buffer, no claim.
    pub(crate) fn empty() -> Self {
        ScratchGuard {
            slot: None,
            ptr: NonNull::dangling(),
            len: 0,
            capacity: 0,
            host: true,
        }
    }

    /// Bytes claimed.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
    /// assert_eq!(e.claim(10).unwrap().len(), 10);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was claimed (an engine with requirement 0).
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(0, ScratchMode::Shared).unwrap();
    /// assert!(e.claim(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the buffer behind the claim (at least `len()`); the bytes
    /// past `len()` are also the holder's until the guard drops.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Private).unwrap();
    /// assert!(e.claim(10).unwrap().capacity() >= 4096);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The buffer's first byte, in the device's address space: what a GPU
    /// back end passes to its kernels. Valid for `capacity()` bytes until
    /// the guard drops; dangling when nothing was claimed.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
    /// let g = e.claim(4096).unwrap();
    /// assert_eq!(g.as_ptr().as_ptr() as usize % warmarena::page_size(), 0);
    /// ```
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The claimed bytes, when the device's memory is host-accessible.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
    /// assert_eq!(e.claim(8).unwrap().as_slice().unwrap().len(), 8);
    /// ```
    pub fn as_slice(&self) -> Option<&[u8]> {
        if !self.host {
            return None;
        }
        // SAFETY: the claim gives this guard exclusive use of the buffer,
        // which holds at least `len` bytes, stays allocated until the claim
        // is released in `drop`, and is host memory whose bytes were all
        // initialized (zeroed at allocation, or written as bytes since).
        // For the empty guard `len` is 0 and the pointer is dangling, which
        // a zero-length slice permits.
        Some(unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) })
    }

    /// The claimed bytes, writable, when the device's memory is
    /// host-accessible. They hold whatever the buffer's previous claimant
    /// left: scratch is not zeroed between claims.
    ///
    /// ```
    /// use warmarena::scratch::{EngineScratch, ScratchMode};
    /// let e = EngineScratch::new(4096, ScratchMode::Shared).unwrap();
    /// let mut g = e.claim(8).unwrap();
    /// g.as_mut_slice().unwrap().fill(0xAB);
    /// ```
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        if !self.host {
            return None;
        }
        // SAFETY: as in `as_slice`; `&mut self` makes this the only view
        // handed out by the guard for its duration.
        Some(unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) })
    }
}

impl Drop for ScratchGuard<'_> {
    fn drop(&mut self) {
        if let Some(slot) = &self.slot {
            slot.get().release();
        }
    }
}

impl core::fmt::Debug for ScratchGuard<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScratchGuard")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}
