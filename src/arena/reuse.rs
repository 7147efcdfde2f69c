//! The warm path: serve a request from a retained buffer, best fit, O(1).

use super::blocks::BlockState;
use super::state::{ArenaState, Grant};
use crate::size_class::{capacity, max_fit_class, Class, MIN_CAPACITY};
use core::ptr::NonNull;

impl ArenaState {
    /// The smallest retained class in `class..=max_fit_class(class)` whose
    /// buffers satisfy `align`, and its most recently freed buffer (the one
    /// most likely still in cache). No system call, no allocation.
    #[inline]
    pub(crate) fn take_warm(&mut self, class: Class, align: usize) -> Option<Grant> {
        let hi = max_fit_class(class);
        let k = if align <= MIN_CAPACITY {
            self.bitmap.first_in(class, hi)?
        } else {
            // Every buffer of class k is aligned to the largest power of two
            // dividing capacity(k) (up to MAX_ALIGN), so it is aligned
            // exactly when `align` divides the capacity.
            self.bitmap
                .iter_in(class, hi)
                .find(|&k| capacity(k) % align == 0)?
        };
        let i = self.warm[k].tail;
        self.table.unlink(&mut self.warm[k], i);
        if self.warm[k].is_empty() {
            self.bitmap.clear(k);
        }
        let b = self.table.at(i);
        b.state = BlockState::Live;
        let (addr, cap) = (b.addr, b.cap);
        self.stats.retained_bytes -= cap;
        self.stats.retained_buffers -= 1;
        self.stats.warm_allocations += 1;
        self.note_live(cap);
        Some(Grant {
            // A block's address is never zero: it came from a successful mapping.
            ptr: NonNull::new(addr as *mut u8)?,
            cap,
            block: i,
            fresh: false,
            warm: true,
        })
    }
}
