//! A bin's spill: the buffers a thread's full bin of a class set aside
//! without the arena's lock, for that thread's next refills of the class.
//!
//! Why: a thread that allocates a few thousand small buffers and then
//! frees them (a kernel building a temporary structure) overflows its bin
//! once a bin's worth and runs it dry as often. Each overflow and each
//! refill took the arena's lock, and with several threads streaming
//! through one arena those acquisitions, and the lock's and the arena
//! state's lines moving between cores at each, were what the shared arena
//! cost over an arena each. A spill keeps the
//! bin's batches in the thread's cache instead, up to [`SPILL_BYTES`] of
//! the class, and hands them back to the bin when it runs dry: no lock
//! either way while the thread's streak fits.
//!
//! What a spill holds is held by the cache, as its bin's buffers are: in
//! the cache's held word (so `stats()` counts it retained, and a bin's
//! move into or out of its spill changes no count), given back with the
//! bin at the epoch, at the thread's exit and when the arena is orphaned.
//! Unlike a bin, a spill can also be taken by another thread: a request
//! about to take new memory for the class takes a batch of it into its
//! bin (`steal.rs`), so that a task moving between a pool's workers finds the
//! buffers it freed on the worker before.
//!
//! A streak that outgrows the spill goes to the arena's depot whole: the
//! spill's buffers and the batch that found it full move into the depot in
//! one locked move, and the rest of the streak follows them there (the
//! spill stays closed until the bin's next refill). So a streak is never
//! split between the spill and the depot, and whichever holds it orders it
//! as one (`streak.rs`): a run freed in its allocation order comes back
//! rising, one freed at random comes back in address order, as they did
//! from the depot alone.
//!
//! Only classes whose bin holds [`BIN_SLOTS`] entries spill (capacities up
//! to 2 KiB): a larger buffer is worth a lock. The entries' room is
//! allocated when the cache's thread first takes a new buffer of the class
//! from the arena (a cold allocation, so never in a warm run, whatever
//! order later runs flush in), and kept with the cache's memory (a left
//! cache's memory, reused for a new thread, keeps its spills' room): a
//! warm run allocates nothing. A thread that only ever takes buffers other
//! threads made (from the depot) has no spill for their class, and goes
//! to the depot as before.

use super::bin::{keeps_order, limit_for, Slot, BIN_SLOTS};
use super::streak;
use super::SMALL_CLASSES;
use crate::arena::metadata;
use crate::size_class::capacity;
use core::ptr::NonNull;
use std::alloc::Layout;

/// Bytes of buffers a spill holds at most, per class.
pub(crate) const SPILL_BYTES: usize = 128 << 10;

/// Entries a spill holds at most (the 16- and 32-byte classes: 64 KiB of
/// entries).
pub(crate) const SPILL_SLOTS_MAX: usize = 4096;

/// How many entries the spill of a class of capacity `cap` holds: a
/// whole number of bins' worth within [`SPILL_BYTES`] and
/// [`SPILL_SLOTS_MAX`]; 0 for the classes whose bins hold fewer than
/// [`BIN_SLOTS`].
pub(crate) const fn spill_limit(cap: usize) -> usize {
    if limit_for(cap) as usize != BIN_SLOTS {
        return 0;
    }
    let n = SPILL_BYTES / cap;
    let n = if n > SPILL_SLOTS_MAX {
        SPILL_SLOTS_MAX
    } else {
        n
    };
    n / BIN_SLOTS * BIN_SLOTS
}

/// The most bytes the spills of one cache hold together (every small
/// class's spill full).
pub(crate) const SPILLS_MAX: usize = {
    let (mut c, mut sum) = (0, 0);
    while c < SMALL_CLASSES {
        let cap = capacity(c);
        sum += spill_limit(cap) * cap;
        c += 1;
    }
    sum
};
// 4.4 MiB, in 27 392 entries (428 KiB of room) over 40 classes, with every
// spilling class full (docs/threads.md, "Design").
const _: () = assert!(SPILLS_MAX < 6 << 20);

/// One class's spill: a stack of entries in room of its own, newest on
/// top, as a depot list keeps them (`depot.rs`), pushed by one thread.
/// No `Drop`: a cache is never dropped, only freed or reused
/// (`spare.rs`), and [`Spill::free_room`] gives the room back then.
#[derive(Debug)]
pub(crate) struct Spill {
    /// The room, `room` entries (none before the first
    /// [`Spill::open_room`]).
    at: Option<NonNull<Slot>>,
    room: u32,
    len: u32,
    /// Where the entries pushed since the last take begin: a streak, put in
    /// order at the next take (`streak.rs`).
    from: u32,
    /// The bin's streak outgrew the spill and went to the depot: no push
    /// until the bin's next refill ([`Spill::reopen`]).
    closed: bool,
    /// Whether the entries are in stamp order (oldest first), so that what
    /// a take hands the bin is: each push was a bin's sorted slice, and no
    /// older than the entries below it. A push after a take can be older
    /// (the bin's refilled entries went back under newer frees).
    in_order: bool,
}

impl Spill {
    /// A spill with no room yet.
    pub(crate) const EMPTY: Spill = Spill {
        at: None,
        room: 0,
        len: 0,
        from: 0,
        closed: false,
        in_order: true,
    };

    /// How many entries it holds.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether `n` more entries may be pushed: open, with room for them
    /// (none before [`Spill::open_room`]).
    #[inline]
    pub(crate) fn takes(&self, n: usize) -> bool {
        !self.closed && self.len as usize + n <= self.room as usize
    }

    /// Whether its room is allocated.
    pub(crate) fn has_room(&self) -> bool {
        self.at.is_some()
    }

    /// Whether the bin's streak went to the depot since its last refill.
    #[cfg(test)]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Allocates the room for a class of capacity `cap` (a cold path: this
    /// cache's first new buffer of the class); `false` when the class does
    /// not spill or the system allocator has no room (the bin then goes to
    /// the arena as before). Room allocated once stays.
    pub(crate) fn open_room(&mut self, cap: usize) -> bool {
        if self.at.is_some() {
            return true;
        }
        let n = spill_limit(cap);
        if n == 0 {
            return false;
        }
        let Ok(layout) = Layout::array::<Slot>(n) else {
            return false;
        };
        let _m = metadata::enter();
        // SAFETY: `layout` has a non-zero size (`n > 0` entries of 16 bytes).
        let p = unsafe { std::alloc::alloc(layout) }.cast::<Slot>();
        let Some(p) = NonNull::new(p) else {
            return false;
        };
        self.at = Some(p);
        self.room = n as u32;
        true
    }

    /// Gives the room back (the cache's memory is being freed: what the
    /// spill held was given back at the thread's exit, with the bins).
    pub(crate) fn free_room(&mut self) {
        if let Some(p) = self.at.take() {
            let _m = metadata::enter();
            // SAFETY: `p` came from `open_room`'s `alloc` with this layout
            // (`room` entries, which `Layout::array` accepted there), and
            // is freed once: `at` is `None` from here on.
            unsafe {
                std::alloc::dealloc(
                    p.as_ptr().cast(),
                    Layout::array::<Slot>(self.room as usize).unwrap_unchecked(),
                )
            };
        }
        *self = Spill::EMPTY;
    }

    /// Made empty and open for a new cache in a left cache's memory: the
    /// room stays.
    pub(crate) fn reset(&mut self) {
        self.emptied();
        self.closed = false;
    }

    /// Holds nothing now: no streak, and in order.
    fn emptied(&mut self) {
        self.len = 0;
        self.from = 0;
        self.in_order = true;
    }

    /// Whether the entries are in stamp order (see the field).
    #[inline]
    pub(crate) fn in_order(&self) -> bool {
        self.in_order
    }

    /// The entries held, oldest first.
    fn entries(&mut self) -> &mut [Slot] {
        match self.at {
            // SAFETY: `at` points to `room` entries allocated for this
            // spill, of which the first `len <= room` were written (by
            // `push_all`), and `&mut self` makes the borrow unique.
            Some(p) => unsafe { core::slice::from_raw_parts_mut(p.as_ptr(), self.len as usize) },
            None => &mut [],
        }
    }

    /// Pushes all of `s` (a bin's oldest, oldest first) as the newest
    /// entries; `false` (and no change) when it does not [take](Spill::takes)
    /// them.
    pub(crate) fn push_all(&mut self, s: &[Slot]) -> bool {
        if !self.takes(s.len()) {
            return false;
        }
        let Some(p) = self.at else {
            return false;
        };
        if !keeps_order(self.entries().last(), s.first()) {
            self.in_order = false;
        }
        // SAFETY: `len + s.len() <= room` (checked by `takes`): the copy
        // stays within the room `at` points to, which `s` (a bin's slots)
        // does not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(s.as_ptr(), p.as_ptr().add(self.len as usize), s.len())
        };
        self.len += s.len() as u32;
        true
    }

    /// Takes up to `n` of the newest entries, handing them to `f` in one
    /// slice, oldest first; returns how many. A streak pushed since the
    /// last take is put in order first, as the depot orders one
    /// (`streak.rs`; a sort goes in place, without the depot's room).
    pub(crate) fn take_newest(&mut self, n: usize, f: impl FnOnce(&[Slot])) -> usize {
        let from = self.from as usize;
        let len = self.len as usize;
        if let Some(streak) = self.entries().get_mut(from..) {
            streak::order(streak, &mut Vec::new());
        }
        let k = n.min(len);
        if let Some(s) = self.entries().get(len - k..) {
            f(s);
        }
        self.len = (len - k) as u32;
        self.from = self.len;
        if self.len == 0 {
            self.in_order = true;
        }
        k
    }

    /// Hands every entry to `f` in one slice, oldest first; empties the
    /// spill when `f` accepts them (`true`), else changes nothing.
    pub(crate) fn give_all(&mut self, f: impl FnOnce(&[Slot]) -> bool) -> bool {
        if !f(self.entries()) {
            return false;
        }
        self.emptied();
        true
    }

    /// Hands every entry to `f`, oldest first, and empties the spill.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(Slot)) {
        for s in self.entries().iter() {
            f(*s);
        }
        self.emptied();
    }

    /// The bin's streak outgrew the spill: no push until the next refill.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    /// The bin is being refilled: pushes are welcome again.
    #[inline]
    pub(crate) fn reopen(&mut self) {
        self.closed = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(ks: impl IntoIterator<Item = usize>) -> Vec<Slot> {
        ks.into_iter().map(Slot::for_test).collect()
    }

    fn keys(s: &[Slot]) -> Vec<usize> {
        s.iter().map(Slot::test_key).collect()
    }

    #[test]
    fn the_limits_are_whole_bins_within_the_byte_budget() {
        assert_eq!(spill_limit(16), SPILL_SLOTS_MAX);
        assert_eq!(spill_limit(32), SPILL_SLOTS_MAX);
        assert_eq!(spill_limit(112), 1152);
        assert_eq!(spill_limit(2048), BIN_SLOTS);
        // A bin of fewer than `BIN_SLOTS` entries does not spill.
        assert_eq!(spill_limit(4096), 0);
        for c in 0..SMALL_CLASSES {
            let cap = capacity(c);
            let n = spill_limit(cap);
            assert_eq!(n % BIN_SLOTS, 0, "class {c}");
            assert!(n * cap <= SPILL_BYTES && n <= SPILL_SLOTS_MAX, "class {c}");
        }
    }

    #[test]
    fn a_spill_takes_nothing_before_its_room_and_nothing_past_it() {
        let mut s = Spill::EMPTY;
        assert!(!s.push_all(&slots(0..1)));
        assert!(!s.open_room(4096), "a class that does not spill");
        assert!(s.open_room(2048));
        assert!(s.open_room(2048), "room allocated once stays");
        assert!(s.push_all(&slots(0..64)));
        assert!(!s.push_all(&slots(64..65)), "one bin's worth of 2 KiB");
        assert_eq!(s.len(), 64);
        s.drain(|_| {});
        s.free_room();
        assert!(!s.has_room());
    }

    #[test]
    fn takes_hand_out_the_newest_and_a_rising_streak_first_in_first_out() {
        let mut s = Spill::EMPTY;
        assert!(s.open_room(32));
        // A streak freed in allocation order (rising addresses).
        for b in 0..4 {
            assert!(s.push_all(&slots(b * 64..(b + 1) * 64)));
        }
        let mut got = Vec::new();
        while s.take_newest(64, |x| got.extend(keys(x).into_iter().rev())) > 0 {}
        assert_eq!(got, (0..256).collect::<Vec<_>>(), "first in, first out");
        // A short streak, a bin's worth: as it was pushed, newest first.
        assert!(s.push_all(&slots(0..32)));
        let mut got = Vec::new();
        s.take_newest(64, |x| got.extend(keys(x).into_iter().rev()));
        assert_eq!(got, (0..32).rev().collect::<Vec<_>>());
        assert_eq!(s.len(), 0);
        s.free_room();
    }

    #[test]
    fn a_closed_spill_takes_no_push_until_reopened() {
        let mut s = Spill::EMPTY;
        assert!(s.open_room(32));
        assert!(s.push_all(&slots(0..8)));
        assert!(s.give_all(|x| x.len() == 8));
        s.close();
        assert!(s.is_closed() && !s.takes(1) && !s.push_all(&slots(8..9)));
        s.reopen();
        assert!(s.push_all(&slots(8..9)));
        // A refused hand-over changes nothing.
        assert!(!s.give_all(|_| false));
        assert_eq!(s.len(), 1);
        s.reset();
        assert_eq!(s.len(), 0);
        assert!(s.has_room(), "a reset keeps the room");
        s.free_room();
    }

    #[test]
    fn a_spill_knows_whether_its_entries_are_in_stamp_order() {
        let at = |k: usize, stamp: u64| Slot {
            addr: 4096 * (k + 1),
            stamp,
        };
        let mut s = Spill::EMPTY;
        assert!(s.open_room(32));
        assert!(s.push_all(&[at(0, 1), at(1, 2)]) && s.push_all(&[at(2, 3)]));
        assert!(s.in_order());
        // A batch older than the top: a bin's refilled entries flushed
        // again under newer ones.
        assert!(s.push_all(&[at(3, 0)]));
        assert!(!s.in_order());
        while s.take_newest(64, |_| {}) > 0 {}
        assert!(s.in_order(), "an empty spill is in order");
        s.free_room();
    }
}
