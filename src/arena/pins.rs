//! Address-stable records for buffers pinned by shared owners (the handle
//! layer's leases). One record per block index, allocated in chunks when the
//! block table grows, never moved or freed while the arena lives, so a
//! shared owner can reach its record (and its reference count) without the
//! arena lock and without any allocation on the warm path.

use crate::sync::rc::AtomicUsize;
use core::cell::UnsafeCell;
use core::ptr::NonNull;

const CHUNK: usize = 64;

/// What a pinned buffer's owners need to know, written once when pinned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PinInfo {
    pub core: *mut super::shared::ArenaCore,
    pub addr: usize,
    pub len: usize,
    pub cap: usize,
    pub block: u32,
}

/// The shared-ownership record of one block.
pub(crate) struct PinRecord {
    /// Owners of the pinned buffer; 0 while not pinned.
    pub refs: AtomicUsize,
    info: UnsafeCell<PinInfo>,
}

// SAFETY: `info` is written only while `refs` is 0 and the block is live and
// uniquely owned by the pinning thread (under the arena lock); afterwards it
// is only read until the last owner drops it. Publication to other threads
// goes through the move of the owner (Send) or the atomic count.
unsafe impl Sync for PinRecord {}
// SAFETY: as above.
unsafe impl Send for PinRecord {}

impl PinRecord {
    fn empty() -> Self {
        PinRecord {
            refs: AtomicUsize::new(0),
            info: UnsafeCell::new(PinInfo {
                core: core::ptr::null_mut(),
                addr: 0,
                len: 0,
                cap: 0,
                block: 0,
            }),
        }
    }

    /// The pinned buffer's details.
    ///
    /// # Safety
    /// The record must be pinned (some owner holds it).
    pub(crate) unsafe fn info(&self) -> PinInfo {
        // SAFETY: pinned records are not written (see the type's contract).
        unsafe { *self.info.get() }
    }

    /// # Safety
    /// Only while unpinned, with the arena lock held and the block live.
    pub(crate) unsafe fn set_info(&self, info: PinInfo) {
        // SAFETY: no owner can read the record while it is unpinned.
        unsafe { *self.info.get() = info };
    }
}

/// Every block's record, in stable chunks.
#[derive(Default)]
pub(crate) struct PinTable {
    chunks: Vec<Box<[PinRecord]>>,
}

impl PinTable {
    /// Makes sure records exist for block indices `0..n`. Allocates only when
    /// the arena grows past the last chunk.
    pub(crate) fn ensure(&mut self, n: usize) -> Result<(), ()> {
        while self.chunks.len() * CHUNK < n {
            self.chunks.try_reserve(1).map_err(|_| ())?;
            let chunk: Box<[PinRecord]> = (0..CHUNK).map(|_| PinRecord::empty()).collect();
            self.chunks.push(chunk);
        }
        Ok(())
    }

    /// Whether block `i` is pinned (some shared owner holds it).
    pub(crate) fn is_pinned(&self, i: u32) -> bool {
        self.record(i).is_some_and(|r| {
            // SAFETY: records live as long as the table.
            unsafe { r.as_ref() }
                .refs
                .load(crate::sync::rc::Ordering::Relaxed)
                != 0
        })
    }

    /// The record of block `i` (which `ensure` has covered).
    pub(crate) fn record(&self, i: u32) -> Option<NonNull<PinRecord>> {
        let i = i as usize;
        let r = self.chunks.get(i / CHUNK)?.get(i % CHUNK)?;
        Some(NonNull::from(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_stay_put_as_the_table_grows() {
        let mut t = PinTable::default();
        t.ensure(1).unwrap();
        let first = t.record(0).unwrap();
        t.ensure(1000).unwrap();
        assert_eq!(t.record(0).unwrap(), first);
        assert!(t.record(999).is_some());
        assert!(t.record(10_000).is_none());
    }
}
