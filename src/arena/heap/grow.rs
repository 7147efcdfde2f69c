//! A live heap piece grown in place: it takes the start of the free extent
//! just above it, so a buffer that grows (a `Vec` doubling, a cache that
//! gains a step) keeps its address and its bytes are not copied.
//!
//! Why placement stays repeatable: whether a piece grows depends only on
//! the heap's pieces (the extent above it and its length), never on which
//! pages are materialized. A growth that reaches above its segment's mark
//! materializes up to its new end, as a cold carve does, so a later run
//! that grows the same piece finds those pages resident. Only the heap's
//! thread grows pieces (other threads' requests never change the heap's
//! placement but by frees).

use super::piece_len;
use crate::arena::blocks::{BlockState, Place, NIL};
use crate::arena::state::ArenaState;
use crate::os::{self, OsCounters};
use core::ptr::NonNull;

impl ArenaState {
    /// Grows the live heap piece at `addr` in place so that it holds a
    /// request of `eff` bytes (size rounded to its alignment, which the
    /// piece's address meets): its new capacity (as a carve for `eff`
    /// would make it), or `None` (nothing changed) when no
    /// live, unpinned heap piece starts at `addr` or the free extent just
    /// above it is missing or too short. A piece that already holds `size`
    /// bytes answers its capacity.
    pub(crate) fn heap_grow_at(
        &mut self,
        addr: usize,
        eff: usize,
        os: &OsCounters,
    ) -> Option<usize> {
        let i = self.large_block_at(addr)?;
        let b = *self.table.get(i)?;
        let Place::Heap(s) = b.place else { return None };
        if b.state != BlockState::Live || b.addr != addr || self.pins.is_pinned(i) {
            return None;
        }
        let cap = piece_len(eff);
        if cap <= b.cap {
            return Some(b.cap);
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
            self.table.at(i).hi = h.hi;
            if h.hi != NIL {
                self.table.at(h.hi).lo = i;
            }
            self.table.vacate(hi);
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
        let seg = &mut self.heap.segs[s as usize];
        let (mark, end) = (seg.base + seg.mark, addr + cap);
        if end > mark {
            seg.mark = end - seg.base;
            self.heap.marked += end - mark;
            // SAFETY: [mark, end) is page-aligned (marks and piece ends are
            // whole pages), non-empty, inside the segment's live read-write
            // mapping, and was free until now: nobody else owns those bytes.
            unsafe { os::prefault(NonNull::new_unchecked(mark as *mut u8), end - mark, os) };
        }
        Some(cap)
    }
}
