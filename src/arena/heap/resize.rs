//! A live heap piece resized in place. Grown, it takes the start of the
//! free extent just above it, so a buffer that grows (a `Vec` doubling, a
//! cache that gains a step) keeps its address and its bytes are not
//! copied. Shrunk (`shrink_to_fit`, `into_boxed_slice`), it gives the pages
//! past its new end back to the heap as a free extent, merged with the one
//! above it, so other requests can use them.
//!
//! Why placement stays repeatable: whether a piece grows depends only on
//! the heap's pieces (the extent above it and its length), never on which
//! pages are materialized. A growth that reaches above its segment's mark
//! materializes up to its new end, as a cold carve does, so a later run
//! that grows the same piece finds those pages resident; a shrink frees
//! already materialized pages. Only the heap's thread resizes pieces
//! (other threads' requests never change the heap's placement but by
//! frees).

use super::piece_len;
use crate::arena::blocks::{Block, BlockState, Place};
use crate::arena::release::STAMP_SEQ_BITS;
use crate::arena::state::ArenaState;
use crate::os::OsCounters;

impl ArenaState {
    /// The live, unpinned heap piece that starts at `addr`: its record
    /// number, a copy of the record, its segment.
    fn resizable_piece_at(&self, addr: usize) -> Option<(u32, Block, u32)> {
        let i = self.large_block_at(addr)?;
        let b = *self.table.get(i)?;
        let Place::Heap(s) = b.place else { return None };
        let live = b.state == BlockState::Live && b.addr == addr && !self.pins.is_pinned(i);
        live.then_some((i, b, s))
    }

    /// Grows the live heap piece at `addr` in place so that it holds a
    /// request of `eff` bytes (size rounded to its alignment, which the
    /// piece's address meets): its new capacity (as a carve for `eff`
    /// would make it), or `None` (nothing changed) when no live, unpinned
    /// heap piece starts at `addr` or the free extent just above it is
    /// missing or too short. A piece that already holds `eff` bytes
    /// answers its capacity.
    pub(crate) fn heap_grow_at(
        &mut self,
        addr: usize,
        eff: usize,
        os: &OsCounters,
    ) -> Option<usize> {
        let (i, b, s) = self.resizable_piece_at(addr)?;
        let cap = piece_len(eff);
        if cap <= b.cap {
            return Some(b.cap);
        }
        if self.heap.learn.following() {
            // The plan was learned from an epoch that resized nothing in
            // place: its growths all moved, and so do these.
            return None;
        }
        // The parked segment is another (this one has a live piece); merged
        // first, as every general heap path does.
        self.unpark();
        let extra = cap - b.cap;
        let hi = self.table.at(i).hi;
        let h = *self.table.get(hi)?;
        if h.state != BlockState::Extent || h.cap < extra {
            return None;
        }
        self.heap.version += 1;
        self.unbin(hi);
        if h.cap == extra {
            // The whole extent: the piece takes its place in the order.
            self.absorb(i, hi);
        } else {
            let e = self.table.at(hi);
            e.addr += extra;
            e.cap -= extra;
            self.bin(hi);
        }
        let p = self.table.at(i);
        p.cap = cap;
        p.class = super::bin_of(cap) as u16;
        self.note_grown(extra);
        self.learn_resized();
        self.raise_mark(s, addr + cap, os);
        Some(cap)
    }

    /// Shrinks the live heap piece at `addr` in place to what a request of
    /// `eff` bytes gets: the pages past its new end become a free extent
    /// (merged with the free extent above, if any). Its new capacity, or
    /// `None` (nothing changed) when no live, unpinned heap piece starts at
    /// `addr` or a record for the new extent cannot be made. A piece no
    /// longer than that answers its capacity.
    pub(crate) fn heap_shrink_at(
        &mut self,
        addr: usize,
        eff: usize,
        os: &OsCounters,
    ) -> Option<usize> {
        let (i, b, s) = self.resizable_piece_at(addr)?;
        let cap = piece_len(eff);
        if cap >= b.cap {
            return Some(b.cap);
        }
        if self.heap.learn.following() {
            return None;
        }
        self.unpark();
        let hi = self.table.at(i).hi;
        let above = self.is_extent(hi);
        if !above && self.table.vacant_len() == 0 {
            // A record for the cut-off pages, reserved as the cold path
            // reserves them (decided by the pieces alone, so a later run
            // resizes as this one did).
            let in_use = self.table.len();
            self.table.add_vacant(in_use + 3).ok()?;
            self.pins.ensure(self.table.len()).ok()?;
        }
        let (cut, tail) = (b.cap - cap, addr + cap);
        self.heap.version += 1;
        self.clock += 1;
        let stamp = self.clock << STAMP_SEQ_BITS;
        if above {
            self.unbin(hi);
            let e = self.table.at(hi);
            e.addr = tail;
            e.cap += cut;
            e.freed_at = stamp;
            self.bin(hi);
        } else {
            let mut r = Block::new(tail, cut, 0, Place::Heap(s));
            r.state = BlockState::Extent;
            r.freed_at = stamp;
            let j = self.table.insert(r);
            self.link_after(i, j);
            self.bin(j);
        }
        let p = self.table.at(i);
        p.cap = cap;
        p.class = super::bin_of(cap) as u16;
        self.stats.live_bytes -= cut;
        self.learn_resized();
        self.hold_cap(os);
        Some(cap)
    }
}
