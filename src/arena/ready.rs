//! Materialized lengths: a retained buffer serves any request its class has
//! seen so far without a page fault.
//!
//! Each block records how many of its first bytes have their pages
//! (`Block::ready`), and each class the largest request it has served
//! (`ArenaState::high`). A block is handed out or retained only once it is
//! ready up to its class's high water (capped at its capacity): a new block
//! has its tail past the first request materialized that far, a retained
//! block of a class whose high water rises is materialized at once, and a
//! live one when it is freed. So once a workload's sizes have all been seen,
//! whichever retained buffer of its class a request gets, every byte it may
//! write is already there; and no byte beyond the largest request of a
//! class is ever materialized, so retention costs no more than the workload
//! touched.
//!
//! Thread caches hand small buffers out and take them back without the
//! arena, so no request size of theirs reaches a high water, and none is
//! needed: a small buffer starts at a multiple of its capacity in a
//! page-aligned run, and every request of its class ends within the
//! class's last step (a power of two dividing both the capacity and the
//! page size), so no page of the buffer starts between the end of one
//! request of the class and the end of a larger one.

use super::blocks::{DEDICATED, NIL};
use super::state::ArenaState;
use crate::os::{self, OsCounters};
use core::ptr::NonNull;

impl ArenaState {
    /// Block `i` is handed out for a request of `size` bytes: raises its
    /// class's high water if `size` is above it (materializing the class's
    /// retained blocks up to it) and makes the block ready up to that.
    #[cold]
    #[inline(never)]
    pub(crate) fn ready_for(&mut self, i: u32, size: usize, os: &OsCounters) {
        let Some(b) = self.table.get(i) else { return };
        if b.class == DEDICATED {
            return;
        }
        let c = b.class as usize;
        if size > self.high[c] {
            self.high[c] = size;
            self.raise_retained(c, os);
        }
        self.materialize(i, self.high[c], os);
    }

    /// A new or revived block (its pages fresh, its first `size` bytes
    /// about to be written by the request): ready up to its class's high
    /// water, the request's own bytes counted as written.
    pub(crate) fn ready_new(&mut self, i: u32, size: usize, os: &OsCounters) {
        let b = self.table.at(i);
        b.ready = size.min(b.cap);
        self.ready_for(i, size, os);
    }

    /// Whether freed block `i` must be materialized before it is retained
    /// (its class's high water rose while it was live).
    #[inline(always)]
    pub(crate) fn behind_high(&self, i: u32) -> bool {
        self.table.get(i).is_some_and(|b| {
            b.class != DEDICATED && b.ready < self.high[b.class as usize].min(b.cap)
        })
    }

    /// Materializes freed block `i` up to its class's high water.
    #[cold]
    #[inline(never)]
    pub(crate) fn catch_up(&mut self, i: u32, os: &OsCounters) {
        if let Some(b) = self.table.get(i) {
            let c = b.class as usize;
            self.materialize(i, self.high[c], os);
        }
    }

    /// Every retained block of class `c` ready up to the class's high water:
    /// a walk of the class's retained buffers, oldest first, only when the
    /// class serves a request larger than any before.
    fn raise_retained(&mut self, c: usize, os: &OsCounters) {
        let newest = self.warm.newest(c);
        let mut j = self.warm.oldest(c);
        while j != NIL && j != newest {
            // Links do not change while blocks are materialized.
            let next = self.table.get(j).map_or(NIL, |b| b.next);
            self.materialize(j, self.high[c], os);
            j = next;
        }
        if newest != NIL {
            self.materialize(newest, self.high[c], os);
        }
    }

    /// Block `i` ready up to `len` bytes (at most its capacity): the pages
    /// from its ready length on are materialized now.
    fn materialize(&mut self, i: u32, len: usize, os: &OsCounters) {
        let prefault_all = self.config.prefault;
        let b = self.table.at(i);
        let target = len.min(b.cap);
        if b.ready >= target {
            return;
        }
        let (start, end) = (
            os::round_to_pages(b.addr + b.ready),
            os::round_to_pages(b.addr + target),
        );
        b.ready = target;
        if prefault_all {
            // Every mapping was materialized whole when it was made.
            return;
        }
        if let (Some(start), Some(end)) = (start, end) {
            if end > start {
                // SAFETY: [start, end) lies inside the block's mapping: the
                // block's end rounded up to a page stays inside its page-
                // aligned run, segment or own mapping, which is live and
                // read-write. Populating pages does not change their
                // contents, and where the OS cannot populate, the bytes
                // rewritten (the first of each page in the range) all lie in
                // [ready, len) of this block, which no one owns now (it is
                // being handed out, freed, or retained).
                unsafe { os::prefault(NonNull::new_unchecked(start as *mut u8), end - start, os) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CARVE_LIMIT, RUN_LEN};
    use crate::size_class::capacity;

    /// Pages `[addr, addr + len)` reaches.
    fn pages(addr: usize, len: usize) -> usize {
        (addr + len).div_ceil(4096) - addr / 4096
    }

    /// What lets thread caches skip the high water (module docs): in a
    /// run, every buffer of a small class reaches the same pages for the
    /// smallest request of its class as for its whole capacity.
    #[test]
    fn a_small_buffer_reaches_the_same_pages_for_every_request_of_its_class() {
        let mut c = 0;
        while capacity(c) < CARVE_LIMIT {
            let cap = capacity(c);
            let smallest = if c == 0 { 1 } else { capacity(c - 1) + 1 };
            for k in 0..RUN_LEN / cap {
                let at = k * cap;
                assert_eq!(pages(at, smallest), pages(at, cap), "class {cap} slot {k}");
            }
            c += 1;
        }
    }
}
