//! The execution heap's thread's slot: one heap piece kept back at its
//! free and handed out again, without the lock, to the next request of its
//! length.
//!
//! Why only one, and only some: the heap places every piece by the order
//! of requests and frees it sees (`heap.rs`), so a piece held back where
//! the heap expected a free would change later choices. One case changes
//! nothing: a piece alone in its segment, at the segment's base, whose free
//! parks it and whose re-request takes it back from there (the workspace
//! pattern: one large scratch buffer allocated and freed per run). The
//! arena says under its lock when a grant is such a piece
//! (`ArenaState::heap_lendable`) and with which heap version; the slot
//! keeps it back at its free, and serves it again, only while the heap's
//! version is still that one (no carve, free, merge or release anywhere in
//! the heap since). Any other request of the thread that reaches the heap
//! first gives the piece back (`settle_heap`), so the heap sees the free
//! where it happened.
//!
//! Pure bookkeeping over plain values: no atomics, no unsafe, so Miri and
//! unit tests cover it whole.

use super::large::Piece;

/// The piece lent to the heap's thread (its `ready` is its length), and
/// whether it is held (free, in the slot).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HeapSlot {
    piece: Piece,
    /// The heap version under which the piece was lent.
    version: u64,
    held: bool,
}

impl HeapSlot {
    /// Whether the slot holds the piece.
    #[inline(always)]
    pub(crate) fn holds(&self) -> bool {
        self.held
    }

    /// The held piece's length (0 when none is held).
    #[inline(always)]
    pub(crate) fn held_len(&self) -> usize {
        if self.held {
            self.piece.ready
        } else {
            0
        }
    }

    /// The held piece's block, if one is held.
    #[inline(always)]
    pub(crate) fn held_block(&self) -> Option<u32> {
        self.held.then_some(self.piece.block)
    }

    /// Remembers that lendable piece `p` was handed to this thread with
    /// the heap at `version`. A held piece is never replaced (the lock
    /// paths give it back first).
    #[inline]
    pub(crate) fn lend(&mut self, p: Piece, version: u64) {
        if !self.held {
            self.piece = p;
            self.version = version;
        }
    }

    /// The lent piece at `addr` (with block `block`, unless `any_block`:
    /// an address-only free) is being freed with the heap at `version`:
    /// held (`true`) when nothing in the heap changed since it was lent;
    /// `false` (the arena takes it) otherwise.
    #[inline(always)]
    pub(crate) fn returned(
        &mut self,
        addr: usize,
        block: u32,
        any_block: bool,
        version: u64,
    ) -> bool {
        if self.held || !self.piece.is(addr, block, any_block) || self.version != version {
            return false;
        }
        self.held = true;
        true
    }

    /// The held piece, for a request whose piece length is `len`, with the
    /// heap at `version`; it stays lent (its free may come back here).
    /// (The hit peeks, withdraws the offer, then marks it taken.)
    #[cfg(test)]
    pub(crate) fn take(&mut self, len: usize, version: u64) -> Option<Piece> {
        let p = self.peek(len, version)?;
        self.held = false;
        Some(p)
    }

    /// The piece [`HeapSlot::peek`] returned leaves the slot (it stays lent).
    #[inline(always)]
    pub(crate) fn taken(&mut self) {
        self.held = false;
    }

    /// What `take` (tests) would return, nothing changed.
    #[inline(always)]
    pub(crate) fn peek(&self, len: usize, version: u64) -> Option<Piece> {
        (self.held && self.piece.ready == len && self.version == version).then_some(self.piece)
    }

    /// The held piece, taken out and forgotten (for the lock paths and
    /// flushes, which free it into the heap).
    pub(crate) fn take_held(&mut self) -> Option<Piece> {
        if !self.held {
            return None;
        }
        self.held = false;
        Some(core::mem::take(&mut self.piece))
    }

    /// Forgets the lent piece unless it is held (after a flush: its free
    /// goes to the arena from now on).
    pub(crate) fn forget_lent(&mut self) {
        if !self.held {
            self.piece = Piece::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Piece = Piece {
        addr: 1 << 30,
        block: 3,
        ready: 1 << 20,
    };

    #[test]
    fn a_lent_piece_comes_back_and_goes_out_while_the_heap_stays() {
        let mut h = HeapSlot::default();
        assert!(!h.returned(P.addr, P.block, false, 0), "nothing lent");
        h.lend(P, 7);
        // Another address, another block, or a heap that moved on: no.
        assert!(!h.returned(P.addr + 4096, P.block, false, 7));
        assert!(!h.returned(P.addr, 4, false, 7));
        assert!(!h.returned(P.addr, P.block, false, 8));
        assert!(h.returned(P.addr, P.block, false, 7));
        assert!(h.holds());
        assert_eq!(h.held_len(), P.ready);
        // Held, a second free of it is refused.
        assert!(!h.returned(P.addr, P.block, true, 7));
        // Another length, or a heap that moved on: not served.
        assert_eq!(h.take(P.ready + 4096, 7), None);
        assert_eq!(h.take(P.ready, 8), None);
        assert_eq!(h.take(P.ready, 7), Some(P));
        assert!(!h.holds());
        assert_eq!(h.held_len(), 0);
        assert_eq!(h.take(P.ready, 7), None);
        // Still lent: an address-only free finds it.
        assert!(h.returned(P.addr, 99, true, 7));
    }

    #[test]
    fn a_held_piece_is_given_back_once_and_never_replaced() {
        let mut h = HeapSlot::default();
        h.lend(P, 1);
        assert!(h.returned(P.addr, P.block, false, 1));
        let q = Piece { addr: 2 << 30, ..P };
        h.lend(q, 2);
        h.forget_lent();
        assert_eq!(h.take_held(), Some(P));
        assert_eq!(h.take_held(), None);
        // Taken out, it is forgotten.
        assert!(!h.returned(P.addr, P.block, false, 1));
        h.lend(q, 2);
        h.forget_lent();
        assert!(!h.returned(q.addr, q.block, false, 2));
    }
}
