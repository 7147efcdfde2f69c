//! The warm path: serve a request from a retained buffer, best fit, O(1).

use super::blocks::BlockState;
use super::state::{ArenaState, Grant};
use crate::size_class::{capacity, max_fit_class, Class, MIN_CAPACITY};
use core::ptr::NonNull;

impl ArenaState {
    /// The smallest retained class in `class..=max_fit_class(class)` whose
    /// buffers satisfy `align`, and its most recently freed buffer (the one
    /// most likely still in cache). No system call, no allocation.
    pub(crate) fn take_warm(&mut self, class: Class, align: usize) -> Option<Grant> {
        let k = self.best_fit_class(class, align)?;
        Some(self.take_tail(k))
    }

    /// [`ArenaState::take_warm`] when the request's own class has a buffer
    /// aligned enough (then it is the best fit, and no window is scanned).
    #[inline(always)]
    pub(crate) fn take_exact(&mut self, class: Class, align: usize) -> Option<Grant> {
        if !self.warm.has(class) || !serves_alignment(class, align) {
            return None;
        }
        Some(self.take_tail(class))
    }

    /// Hands out the most recently freed buffer of class `k` (non-empty).
    #[inline(always)]
    fn take_tail(&mut self, k: Class) -> Grant {
        let i = self.warm.pop_newest(&mut self.table, k);
        let b = self.table.at(i);
        b.state = BlockState::Live;
        let (addr, cap) = (b.addr, b.cap);
        self.note_live(cap);
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

    /// The smallest retained class in `class..=max_fit_class(class)` whose
    /// buffers satisfy `align`.
    fn best_fit_class(&self, class: Class, align: usize) -> Option<Class> {
        let hi = max_fit_class(class);
        if align <= MIN_CAPACITY {
            self.warm.classes.first_in(class, hi)
        } else {
            self.warm
                .classes
                .iter_in(class, hi)
                .find(|&k| serves_alignment(k, align))
        }
    }
}

/// Whether every buffer of class `k` is aligned to `align` (a power of two
/// up to `MAX_ALIGN`): each is aligned to the largest power of two dividing
/// its capacity (up to `MAX_ALIGN`), so exactly when `align` divides it.
#[inline(always)]
fn serves_alignment(k: Class, align: usize) -> bool {
    align <= MIN_CAPACITY || capacity(k) & (align - 1) == 0
}
