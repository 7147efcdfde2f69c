//! A thread cache's large slots: for each class from [`CARVE_LIMIT`] up to
//! [`LARGE_MAX`], one free buffer, and the buffers of the class the arena
//! handed to this thread under its lock ("lent"), each with its ready
//! length (the bytes known to have their pages, `ready.rs`). The slots of
//! the classes up to [`BUDGET_MAX`] share a budget of [`LARGE_BYTES`]
//! (less once more than two threads have caches on the arena:
//! [`budget_for`]); above it a cache holds one buffer at a time, so a thread that stops
//! using a class strands at most that one buffer there (as mimalloc's
//! thread-owned large pages do; `trim`, the cap and the thread's exit
//! reach it as they reach the rest of the cache).
//!
//! Why lent entries: a small class's buffers are always wholly
//! materialized, a large one's only up to the largest request its class
//! has seen when it was handed out. A free into the slot must know that
//! length without the lock, and a handle or an allocator-api2 free knows
//! only the address (and block). So the arena's grant records it here
//! (under the lock, where the block record is), a free finds it by
//! address, and the slot serves a later request only up to it; anything
//! larger goes to the arena, whose free materializes the buffer up to its
//! class's high water (`ArenaState::free`). Only buffers this thread was
//! lent come back into its slots, as the small bins take only frees
//! against their credit.
//!
//! Pure bookkeeping over plain values: no atomics, no unsafe, so Miri and
//! unit tests cover it whole.

use super::super::CARVE_LIMIT;
use crate::size_class::{class_of_classed, Class};

/// The largest capacity a thread caches: the classes up to
/// [`BUDGET_MAX`] share [`LARGE_BYTES`]; above it, a cache holds one buffer
/// at a time (a cache counts its bytes in 32 bits: with the small bins
/// and their spills, the budget and the execution heap's slot, below
/// 4 GiB).
pub(crate) const LARGE_MAX: usize = 512 << 20;
/// The largest capacity whose buffers share the [`LARGE_BYTES`] budget.
pub(crate) const BUDGET_MAX: usize = 1 << 20;

// Everything a cache may hold fits its 32-bit byte count (`Held`): the
// small bins and their spills, the budget, one buffer above it, and the
// execution heap's slot's piece.
const _: () = assert!(
    super::bin::SMALL_BINS_MAX
        + super::spill::SPILLS_MAX
        + LARGE_BYTES
        + LARGE_MAX
        + super::super::heap::LENDABLE_MAX
        < 1 << 32
);
/// The first large class (capacity [`CARVE_LIMIT`]).
pub(crate) const LARGE_FIRST: Class = class_of_classed(CARVE_LIMIT);
/// One past the last cached large class.
pub(crate) const LARGE_END: Class = class_of_classed(LARGE_MAX) + 1;
/// Cached large classes.
pub(crate) const LARGE_CLASSES: usize = LARGE_END - LARGE_FIRST;
/// Bytes a cache holds in the slots of the classes up to [`BUDGET_MAX`] at
/// most: a few buffers, so a thread that stops using a class strands
/// little. Above [`BUDGET_MAX`] a cache holds at most one buffer (of any
/// class): a thread strands at most that one ([`has_room`]).
pub(crate) const LARGE_BYTES: usize = 4 << 20;

/// What the caches of all threads on one arena hold in their budgeted
/// slots together, at most, once more than two threads have caches there
/// (see [`budget_for`]).
pub(crate) const SHARED_LARGE_BYTES: usize = 2 * LARGE_BYTES;

/// A cache's budget for the classes up to [`BUDGET_MAX`] while `threads`
/// threads have caches on its arena: the whole [`LARGE_BYTES`] for up to
/// two, then an equal share of [`SHARED_LARGE_BYTES`], never less than
/// [`BUDGET_MAX`] (one buffer of every budgeted class still fits).
///
/// Why: each thread's slots keep the buffers its own requests freed, so
/// with a fixed budget the bytes held beside the arena grew with the
/// threads (at 32 threads half of what the arena held, measured with
/// `examples/threads_warm.rs`). The arena's stash (`stash.rs`) takes what
/// a smaller budget refuses, without the lock, so sharing one amount
/// costs few locks. One and two threads keep the budget they had, and
/// with it a repeated run's exact reuse on one thread.
#[inline]
pub(crate) const fn budget_for(threads: usize) -> usize {
    if threads <= 2 {
        return LARGE_BYTES;
    }
    let share = SHARED_LARGE_BYTES / threads;
    if share > BUDGET_MAX {
        share
    } else {
        BUDGET_MAX
    }
}

/// Whether a cache whose budgeted slots hold `budgeted` bytes of its
/// `budget` ([`budget_for`]) and whose slots above [`BUDGET_MAX`] hold
/// `big` bytes may hold one more buffer of `cap` bytes.
#[inline(always)]
pub(crate) const fn has_room(budgeted: usize, big: usize, cap: usize, budget: usize) -> bool {
    if cap <= BUDGET_MAX {
        budgeted + cap <= budget
    } else {
        big == 0
    }
}
/// Lent buffers remembered per class (older ones are forgotten: their
/// frees then go to the arena).
const LENT: usize = 2;

/// A large buffer: address (0: none), block record and ready length.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Piece {
    pub addr: usize,
    pub block: u32,
    pub ready: usize,
}

impl Piece {
    /// Whether this is the buffer at `addr` with block `block` (any block
    /// with `any_block`: an address-only free); never for address 0 (no
    /// buffer).
    #[inline(always)]
    pub(crate) fn is(&self, addr: usize, block: u32, any_block: bool) -> bool {
        self.addr == addr && addr != 0 && (any_block || self.block == block)
    }
}

/// One large class's buffers known to this thread: each entry is a
/// buffer lent to it (in its user's hands) or held (free, in the slot).
/// At most one is held.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Large {
    pieces: [Piece; LENT],
    /// Bit `k` set: `pieces[k]` is held.
    held: u8,
    /// The held buffer's free stamp (its place in the arena's free order).
    stamp: u64,
    /// The entry the next grant overwrites when none is free.
    next: u8,
}

impl Large {
    /// Whether the slot holds a buffer.
    #[inline(always)]
    pub(crate) fn holds(&self) -> bool {
        self.held != 0
    }

    /// The held buffer, taken, when it is ready for `size` bytes; it is
    /// lent again (its free may come back here).
    /// (The hit peeks, withdraws an offer, then marks it taken.)
    #[cfg(test)]
    pub(crate) fn take(&mut self, size: usize) -> Option<Piece> {
        let p = self.peek(size)?;
        self.held = 0;
        Some(p)
    }

    /// The buffer [`Large::peek`] returned leaves the slot (it stays lent).
    #[inline(always)]
    pub(crate) fn taken(&mut self) {
        self.held = 0;
    }

    /// What `take` (tests) would return, nothing changed.
    #[inline(always)]
    pub(crate) fn peek(&self, size: usize) -> Option<Piece> {
        let k = self.held.trailing_zeros() as usize;
        let p = *self.pieces.get(k)?;
        (p.ready >= size).then_some(p)
    }

    /// The held buffer's block, if one is held.
    #[inline(always)]
    pub(crate) fn held_block(&self) -> Option<u32> {
        self.pieces
            .get(self.held.trailing_zeros() as usize)
            .map(|p| p.block)
    }

    /// Remembers that `p` was handed to this thread (in place of its own
    /// entry, a free one, or the oldest lent one; never the held one).
    #[inline(always)]
    pub(crate) fn lend(&mut self, p: Piece) {
        let lent = |k: usize| self.held & (1 << k) == 0;
        let k = (0..LENT)
            .find(|&k| lent(k) && (self.pieces[k].addr == 0 || self.pieces[k].addr == p.addr))
            .or_else(|| {
                let k = usize::from(self.next) % LENT;
                self.next = self.next.wrapping_add(1);
                lent(k).then_some(k)
            })
            .or_else(|| (0..LENT).find(|&k| lent(k)));
        if let Some(e) = k.and_then(|k| self.pieces.get_mut(k)) {
            *e = p;
        }
    }

    /// The lent buffer at `addr` (with block `block`, unless `any_block`:
    /// an address-only free) is being freed: into the slot, at the free
    /// stamp `stamp` gives (asked only then), when it is empty and the
    /// cache has `room` (`true`), else forgotten (`false`, the arena takes
    /// it); also `false`, and nothing changed, when it is not lent here.
    #[inline(always)]
    pub(crate) fn returned(
        &mut self,
        addr: usize,
        block: u32,
        any_block: bool,
        room: bool,
        stamp: impl FnOnce() -> u64,
    ) -> bool {
        // Acts inside the search, not after `lent_index`: that form took
        // allocator-api2's 1 MiB pair from 12.46 to 12.74 ns.
        for k in 0..LENT {
            if self.pieces[k].is(addr, block, any_block) && self.held & (1 << k) == 0 {
                if self.held != 0 || !room {
                    self.pieces[k] = Piece::default();
                    return false;
                }
                self.held = 1 << k;
                self.stamp = stamp();
                return true;
            }
        }
        false
    }

    /// The buffer at `addr` (with block `block`, unless `any_block`) as it
    /// was lent here, when it is lent and not held; forgotten, so its
    /// next free (after whoever takes it next) does not come back here on
    /// this record.
    #[inline]
    pub(crate) fn forget_lent_piece(
        &mut self,
        addr: usize,
        block: u32,
        any_block: bool,
    ) -> Option<Piece> {
        let k = self.lent_index(addr, block, any_block)?;
        Some(core::mem::take(&mut self.pieces[k]))
    }

    /// Whether the buffer at `addr` (with block `block`, unless
    /// `any_block`) is lent here and not held: its free may come back.
    #[inline(always)]
    pub(crate) fn is_lent(&self, addr: usize, block: u32, any_block: bool) -> bool {
        self.lent_index(addr, block, any_block).is_some()
    }

    /// The entry recording the buffer at `addr` (with block `block`,
    /// unless `any_block`) as lent here and not held.
    #[inline(always)]
    fn lent_index(&self, addr: usize, block: u32, any_block: bool) -> Option<usize> {
        (0..LENT).find(|&k| self.pieces[k].is(addr, block, any_block) && self.held & (1 << k) == 0)
    }

    /// The held buffer, if any.
    #[cfg(test)]
    pub(crate) fn held_piece(&self) -> Option<Piece> {
        self.pieces
            .get(self.held.trailing_zeros() as usize)
            .copied()
    }

    /// The held buffer and its free stamp, taken out and forgotten (for a
    /// flush).
    pub(crate) fn take_held(&mut self) -> Option<(Piece, u64)> {
        let k = self.held.trailing_zeros() as usize;
        let p = core::mem::take(self.pieces.get_mut(k)?);
        self.held = 0;
        Some((p, self.stamp))
    }

    /// Forgets every lent buffer (after a flush: a trim may have released
    /// their pages, and their frees go to the arena from now on). The held
    /// one stays.
    pub(crate) fn forget_lent(&mut self) {
        for k in 0..LENT {
            if self.held & (1 << k) == 0 {
                self.pieces[k] = Piece::default();
            }
        }
    }
}

/// The slot index of class `c`, when it is a cached large class.
#[inline(always)]
pub(crate) const fn large_index(c: Class) -> Option<usize> {
    let k = c.wrapping_sub(LARGE_FIRST);
    if k < LARGE_CLASSES {
        Some(k)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size_class::capacity;

    fn piece(k: usize, ready: usize) -> Piece {
        Piece {
            addr: (k + 1) << 20,
            block: k as u32,
            ready,
        }
    }

    #[test]
    fn a_cache_holds_a_budget_below_one_mib_and_one_buffer_above() {
        let b = LARGE_BYTES;
        assert!(has_room(0, 0, BUDGET_MAX, b));
        assert!(has_room(LARGE_BYTES - BUDGET_MAX, 0, BUDGET_MAX, b));
        assert!(!has_room(LARGE_BYTES - BUDGET_MAX + 1, 0, BUDGET_MAX, b));
        // Above the budget's classes: one buffer, whatever the budget holds.
        assert!(has_room(LARGE_BYTES, 0, LARGE_MAX, b));
        assert!(!has_room(0, BUDGET_MAX * 2, BUDGET_MAX * 2, b));
        // The budget does not count the one above it.
        assert!(has_room(0, LARGE_MAX, CARVE_LIMIT, b));
        // A smaller budget refuses sooner, and only below BUDGET_MAX.
        assert!(!has_room(CARVE_LIMIT, 0, BUDGET_MAX, BUDGET_MAX));
        assert!(has_room(LARGE_BYTES, 0, LARGE_MAX, BUDGET_MAX));
    }

    #[test]
    fn the_threads_share_one_budget_past_two_and_each_keeps_one_buffer_of_every_class() {
        assert_eq!(budget_for(0), LARGE_BYTES);
        assert_eq!(budget_for(1), LARGE_BYTES);
        assert_eq!(budget_for(2), LARGE_BYTES);
        assert_eq!(budget_for(4), SHARED_LARGE_BYTES / 4);
        for t in 3..=256 {
            let b = budget_for(t);
            assert!((BUDGET_MAX..=LARGE_BYTES).contains(&b), "{t} threads: {b}");
            assert!(b <= budget_for(t - 1), "{t} threads: not monotone");
            // Together at most the shared amount, or one buffer of the
            // largest budgeted class each.
            assert!(t * b <= SHARED_LARGE_BYTES.max(t * BUDGET_MAX), "{t}");
        }
        assert_eq!(budget_for(64), BUDGET_MAX);
    }

    #[test]
    fn the_classes_run_from_the_carve_limit_to_512_mib() {
        assert_eq!(capacity(LARGE_FIRST), CARVE_LIMIT);
        assert_eq!(capacity(LARGE_END - 1), LARGE_MAX);
        assert_eq!(large_index(LARGE_FIRST - 1), None);
        assert_eq!(large_index(LARGE_FIRST), Some(0));
        assert_eq!(large_index(LARGE_END - 1), Some(LARGE_CLASSES - 1));
        assert_eq!(large_index(LARGE_END), None);
    }

    #[test]
    fn only_a_lent_buffer_comes_back_and_only_as_far_as_it_is_ready() {
        let mut l = Large::default();
        let p = piece(0, 100 << 10);
        l.lend(p);
        // Another buffer, or the right address with another block: no.
        assert!(!l.returned(piece(1, 0).addr, 1, false, true, || 5));
        assert!(!l.returned(p.addr, 7, false, true, || 5));
        assert!(l.returned(p.addr, 0, false, true, || 5));
        assert!(l.holds());
        assert_eq!(l.held_piece(), Some(p));
        // Held, it is not lent: a second free of it is refused.
        assert!(!l.returned(p.addr, 0, true, true, || 5));
        // A request beyond its ready bytes is not served from it.
        assert_eq!(l.take((100 << 10) + 1), None);
        assert_eq!(l.take(100 << 10), Some(p));
        assert!(!l.holds());
        assert_eq!(l.take(1), None);
        // Taken, it is lent again: an address-only free finds it.
        assert!(l.returned(p.addr, 99, true, true, || 5));
        assert_eq!(l.take_held(), Some((p, 5)));
        assert_eq!(l.take_held(), None);
        // Taken out by a flush, it is forgotten.
        assert!(!l.returned(p.addr, 0, false, true, || 5));
    }

    #[test]
    fn a_full_slot_forgets_the_buffer_it_refuses() {
        let mut l = Large::default();
        let (a, b) = (piece(0, 1), piece(1, 1));
        l.lend(a);
        l.lend(b);
        assert!(l.returned(a.addr, 0, false, true, || 5));
        // No room in the cache: refused and forgotten.
        l.lend(b);
        assert!(!l.returned(b.addr, 1, false, false, || 5));
        assert!(!l.returned(b.addr, 1, false, true, || 5));
        l.lend(b);
        // The slot is full: `b` goes to the arena and is forgotten here.
        assert!(!l.returned(b.addr, 1, false, true, || 5));
        assert_eq!(l.take(1), Some(a));
        assert!(!l.returned(b.addr, 1, false, true, || 5));
        // A grant never overwrites the held buffer.
        assert!(l.returned(a.addr, 0, false, true, || 5));
        for k in 2..6 {
            l.lend(piece(k, 1));
        }
        assert_eq!(l.held_piece(), Some(a));
        l.forget_lent();
        assert_eq!(l.take(1), Some(a));
    }

    #[test]
    fn lent_entries_are_bounded_and_forgettable() {
        let mut l = Large::default();
        for k in 0..5 {
            l.lend(piece(k, 1));
        }
        let kept = (0..5)
            .filter(|&k| {
                let back = l.returned(piece(k, 0).addr, k as u32, false, true, || 5);
                if back {
                    l.take_held();
                }
                back
            })
            .count();
        assert_eq!(kept, LENT);
        l.lend(piece(9, 1));
        l.forget_lent();
        assert!(!l.returned(piece(9, 0).addr, 9, false, true, || 5));
        // Lending the same address again replaces its entry.
        l.lend(piece(3, 1));
        l.lend(piece(3, 2));
        assert!(l.returned(piece(3, 0).addr, 3, false, true, || 5));
        assert_eq!(l.take(2).map(|p| p.ready), Some(2));
    }
}
