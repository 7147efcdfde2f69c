//! The arena's depot: small buffers the thread caches gave back, kept per
//! class as the caches had them (address and free stamp, 16 bytes), for
//! the next refill of any thread's cache. No entry keeps its buffer's
//! block record: the few that need it (a settle into the free lists, a
//! pin, a free without a cache, the invariant checker) find it by address
//! (`run_index.rs`), and neither a flush nor a refill moves it.
//!
//! A flush into the arena's free lists writes each buffer's block record
//! (its state, stamp and list links) and a refill writes it again. With
//! hundreds of thousands of small live buffers those records are out of
//! cache, and the two misses per buffer were most of what a flush and a
//! refill cost. The depot moves the entries as they are, a few bytes each,
//! in order: the records are not touched until something needs them in
//! the free lists ([`super::super::state::ArenaState::settle_depot`]: an
//! exceeded retention cap, an orphaned arena that other buffers keep), or
//! gone (a trim evicts each depot buffer without listing it; an orphaned
//! arena whose only live buffers are the depot's forgets them, and goes).
//!
//! To the arena a depot buffer is what a cached one is: live in its block
//! record and counted in `cached_bytes`, retained in `stats()`.
//!
//! Room: each class's list has room for every block of the class the
//! arena ever carved (reserved when one is carved, a cold path), so a push
//! never allocates. Pure bookkeeping: no atomics, no unsafe.
//!
//! A long streak of pushes that mostly rises (a run's buffers freed in
//! about the order a fresh carve handed them out) comes back first in,
//! first out, not reversed; one that sweeps its addresses more than twice
//! comes back lowest address first: the first take after it reorders its
//! addresses, leaving the stamps in place (`streak.rs`). The sort's
//! bitmaps have room reserved as runs are made (2 KiB a 256 KiB run).
//!
//! Only a streak one pusher made is looked at: one thread's flushes, or
//! the remote frees a lock holder absorbed. Threads streaming through one
//! class interleave their flushes, a bin's batch each, so their common
//! streak sweeps its addresses once per batch and would be sorted, under
//! the lock the other threads wait on: with two threads streaming 100 000
//! buffers each, the first take after their frees sorted 200 000 entries,
//! and the shared arena took 1.2-1.4x the time it takes with the streak
//! left as pushed (two and eight threads). What
//! the sort is for, a thread's next run walking its buffers in address
//! order, a streak of several threads' batches does not give: whoever
//! refills gets the others' buffers too. Left as pushed, the refill takes
//! the batch flushed last, the one most likely still in a cache.

use super::bin::{keeps_order, Slot};
use super::streak;
use super::SMALL_CLASSES;
use crate::size_class::{capacity, Class};

/// Who pushes into the depot: a thread cache (its address, never 0, 1 or
/// `usize::MAX`), or [`REMOTES`].
pub(crate) type Pusher = usize;

/// The pusher of the remote frees a lock holder absorbs (`remote.rs`):
/// buffers of many threads, in the order their frees reached the stack.
pub(crate) const REMOTES: Pusher = 1;

/// No push since the class's last take.
const NOBODY: Pusher = 0;

/// Pushes of more than one pusher since the class's last take.
const MANY: Pusher = usize::MAX;

/// A class's entries pushed since its last take: where they begin in its
/// list, and who pushed them.
#[derive(Debug, Clone, Copy)]
struct Streak {
    from: usize,
    /// Nobody ([`NOBODY`]), one pusher (its [`Pusher`] token), or [`MANY`].
    by: Pusher,
}

impl Streak {
    /// An empty list's: nothing pushed.
    const NONE: Streak = Streak {
        from: 0,
        by: NOBODY,
    };
}

/// Per small class, the buffers the caches gave back, oldest stamp first.
#[derive(Debug)]
pub(crate) struct Depot {
    lists: [Vec<Slot>; SMALL_CLASSES],
    /// Per class, the entries pushed since its last take.
    streaks: [Streak; SMALL_CLASSES],
    /// Per class, whether its list is in stamp order (oldest first), so
    /// that a slice a take hands out is too: every push so far was a
    /// sorted run no older than the list's newest. One pusher's flushes
    /// are (a thread's stamps never go back); several threads' interleave.
    ordered: [bool; SMALL_CLASSES],
    /// Per class, the buffers its list must have room for: every block of
    /// the class carved so far.
    blocks: [usize; SMALL_CLASSES],
    /// Scratch for sorting a streak (`streak.rs`): capacity for a bitmap
    /// of every run the arena made, reserved as each is made, so a sort
    /// never allocates. Its contents mean nothing between takes.
    sort_room: Vec<u64>,
    bytes: usize,
    buffers: usize,
}

impl Default for Depot {
    fn default() -> Self {
        Depot {
            lists: [const { Vec::new() }; SMALL_CLASSES],
            streaks: [Streak::NONE; SMALL_CLASSES],
            ordered: [true; SMALL_CLASSES],
            blocks: [0; SMALL_CLASSES],
            sort_room: Vec::new(),
            bytes: 0,
            buffers: 0,
        }
    }
}

impl Depot {
    /// Makes room for one more buffer of class `c` (one was just carved).
    pub(crate) fn reserve_one(&mut self, c: Class) -> Result<(), ()> {
        let (Some(l), Some(n)) = (self.lists.get_mut(c), self.blocks.get_mut(c)) else {
            return Ok(());
        };
        // Room for all of the class's blocks, the new one too, whatever
        // the list holds now (`try_reserve` counts from its length).
        l.try_reserve(*n + 1 - l.len()).map_err(|_| ())?;
        *n += 1;
        Ok(())
    }

    /// Makes room in the sort's scratch for a bitmap of each of `runs`
    /// runs (the arena is about to have that many, a cold path). Asking
    /// again for as many, after a run that failed to be made, adds nothing.
    pub(crate) fn reserve_runs(&mut self, runs: usize) -> Result<(), ()> {
        // `try_reserve` counts from the length, which a sort leaves at most
        // the words of the runs it had room for.
        let more = (runs * streak::RUN_WORDS).saturating_sub(self.sort_room.len());
        self.sort_room.try_reserve(more).map_err(|_| ())
    }

    /// Keeps `s`, a buffer of class `c` that `by` pushes; `false` (and no
    /// change) when the class's list has no room left (never, while every
    /// carve reserves).
    #[inline]
    pub(crate) fn push(&mut self, c: Class, s: Slot, by: Pusher) -> bool {
        let Some(l) = self.lists.get_mut(c) else {
            return false;
        };
        if l.len() == l.capacity() {
            return false;
        }
        if !keeps_order(l.last(), Some(&s)) {
            self.ordered[c] = false;
        }
        l.push(s);
        self.note_pusher(c, by);
        self.bytes += capacity(c);
        self.buffers += 1;
        true
    }

    /// Counts `by` among the pushers of class `c`'s streak.
    #[inline]
    fn note_pusher(&mut self, c: Class, by: Pusher) {
        if let Some(k) = self.streaks.get_mut(c) {
            if k.by == NOBODY {
                k.by = by;
            } else if k.by != by {
                k.by = MANY;
            }
        }
    }

    /// Before a take of class `c`: the entries pushed since its last take
    /// are a streak, put in order if it is one (`streak.rs`) and one
    /// pusher made it. The take then marks them no longer new
    /// ([`Depot::taken_to`]).
    fn order_streak(&mut self, c: Class) {
        let (Some(l), Some(&k)) = (self.lists.get_mut(c), self.streaks.get(c)) else {
            return;
        };
        if k.by == MANY {
            return;
        }
        if let Some(s) = l.get_mut(k.from..) {
            streak::order(s, &mut self.sort_room);
        }
    }

    /// After a take left class `c`'s list `len` long: nothing in it is new
    /// (an empty list included: its mark is 0 already).
    fn taken_to(&mut self, c: Class, len: usize) {
        if let Some(k) = self.streaks.get_mut(c) {
            *k = Streak {
                from: len,
                by: NOBODY,
            };
        }
        if len == 0 {
            if let Some(o) = self.ordered.get_mut(c) {
                *o = true;
            }
        }
    }

    /// Whether class `c`'s list is in stamp order, so that what a take
    /// hands out is (and a bin refilled from it alone needs no sort).
    #[inline]
    pub(crate) fn is_ordered(&self, c: Class) -> bool {
        self.ordered.get(c).copied().unwrap_or(false)
    }

    /// The newest buffer of class `c`, if any.
    #[inline]
    pub(crate) fn pop(&mut self, c: Class) -> Option<Slot> {
        self.order_streak(c);
        let l = self.lists.get_mut(c)?;
        let s = l.pop()?;
        let len = l.len();
        self.taken_to(c, len);
        self.bytes -= capacity(c);
        self.buffers -= 1;
        Some(s)
    }

    /// Takes up to `n` of class `c`'s buffers from the newest end, while
    /// their stamps are at least `from` (all of them with `None`), and
    /// hands them to `f` in one slice, oldest first; returns how many. One
    /// bound check, one copy and one count update for the lot: a refill
    /// that the depot serves alone moves a batch this way.
    #[inline]
    pub(crate) fn take_newest(
        &mut self,
        c: Class,
        n: usize,
        from: Option<u64>,
        f: impl FnOnce(&[Slot]),
    ) -> usize {
        self.order_streak(c);
        let Some(l) = self.lists.get_mut(c) else {
            return 0;
        };
        let k = match from {
            // Nothing on the free list to stay newer than: the count is
            // arithmetic (a streaming thread's every refill), not a walk.
            None => n.min(l.len()),
            Some(m) => l.iter().rev().take(n).take_while(|s| s.stamp >= m).count(),
        };
        let keep = l.len() - k;
        f(&l[keep..]);
        l.truncate(keep);
        // The next take's entries, on their way while the bin hands these out.
        prefetch_slots(&l[keep.saturating_sub(n)..]);
        self.taken_to(c, keep);
        self.bytes -= k * capacity(c);
        self.buffers -= k;
        k
    }

    /// Keeps all of `s`, buffers of class `c` that `by` pushes, oldest
    /// first, in one copy; `false` (and no change) when the class's list
    /// has not room for all. `sorted`: whether `s` is in stamp order (a
    /// bin's slice is).
    #[inline]
    pub(crate) fn push_all(&mut self, c: Class, s: &[Slot], by: Pusher, sorted: bool) -> bool {
        let Some(l) = self.lists.get_mut(c) else {
            return false;
        };
        if l.capacity() - l.len() < s.len() {
            return false;
        }
        if !(sorted && keeps_order(l.last(), s.first())) {
            self.ordered[c] = false;
        }
        l.extend_from_slice(s);
        // The lines the next push of as many will write.
        prefetch_slots(l.spare_capacity_mut().get(..s.len()).unwrap_or_default());
        self.note_pusher(c, by);
        self.bytes += s.len() * capacity(c);
        self.buffers += s.len();
        true
    }

    /// The free stamp of the buffer [`Depot::pop`] would return.
    #[inline]
    pub(crate) fn newest_stamp(&self, c: Class) -> Option<u64> {
        self.lists.get(c)?.last().map(|s| s.stamp)
    }

    /// How many more buffers of class `c` fit without allocating.
    #[inline]
    pub(crate) fn room(&self, c: Class) -> usize {
        self.lists.get(c).map_or(0, |l| l.capacity() - l.len())
    }

    /// Bytes of the buffers kept.
    #[inline]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many buffers are kept.
    #[inline]
    pub(crate) fn buffers(&self) -> usize {
        self.buffers
    }

    /// Class `c`'s buffers, oldest first, and the room its list has.
    pub(crate) fn class(&self, c: Class) -> (&[Slot], usize) {
        self.lists
            .get(c)
            .map_or((&[][..], 0), |l| (&l[..], l.capacity()))
    }

    /// Removes every buffer, handing each to `f` with its class, class by
    /// class, oldest stamp first within a class, and the buffer
    /// [`DRAIN_AHEAD`] places after it in its class, if any (for `f` to
    /// prefetch what it will need for that one). Keeps the lists' room.
    ///
    /// A list is in the order its buffers were pushed, which is not their
    /// stamps' order when several threads' caches flushed into it: each
    /// thread's stamps start from the arena's free count as that thread
    /// last saw it. It is sorted in place first (no allocation: this runs
    /// under the arena's lock, where an allocation could come back to it).
    pub(crate) fn drain(&mut self, f: impl FnMut(Class, Slot, Option<Slot>)) {
        self.drain_sorted(true, f);
    }

    /// [`Depot::drain`] in the order the buffers were pushed, for a caller
    /// to whom their order is nothing (a trim evicts every one).
    pub(crate) fn drain_unordered(&mut self, f: impl FnMut(Class, Slot, Option<Slot>)) {
        self.drain_sorted(false, f);
    }

    fn drain_sorted(&mut self, sort: bool, mut f: impl FnMut(Class, Slot, Option<Slot>)) {
        for (c, l) in self.lists.iter_mut().enumerate() {
            if sort {
                l.sort_unstable_by_key(|s| s.stamp);
            }
            for (k, &s) in l.iter().enumerate() {
                f(c, s, l.get(k + DRAIN_AHEAD).copied());
            }
            l.clear();
        }
        self.emptied();
    }

    /// Empties every list without reading its entries (the room stays),
    /// calling `f` with each class that held buffers and how many.
    pub(crate) fn forget(&mut self, mut f: impl FnMut(Class, usize)) {
        for (c, l) in self.lists.iter_mut().enumerate() {
            if !l.is_empty() {
                f(c, l.len());
                l.clear();
            }
        }
        self.emptied();
    }

    /// The counts of a depot whose lists were just cleared.
    fn emptied(&mut self) {
        self.streaks = [Streak::NONE; SMALL_CLASSES];
        self.ordered = [true; SMALL_CLASSES];
        self.bytes = 0;
        self.buffers = 0;
    }
}

/// Asks the core for the cache lines of `s` (a prefetch: nothing the
/// program sees changes). A class's list holds an entry for every free
/// buffer of the class, 16 bytes each: with hundreds of thousands of them
/// most of the list is out of cache, and a refill's copy of its batch
/// stalled on those lines. Takes and pushes
/// move along the list's end a batch at a time, so the lines the next
/// one needs are known one batch ahead.
#[inline]
fn prefetch_slots<T>(s: &[T]) {
    for line in lines(s.as_ptr() as usize, core::mem::size_of_val(s)) {
        super::hints::prefetch(line);
    }
}

/// The starts of the 64-byte lines that `bytes` bytes at `addr` touch
/// (none for no bytes).
fn lines(addr: usize, bytes: usize) -> impl Iterator<Item = usize> {
    let end = addr.saturating_add(bytes);
    let first = if bytes == 0 { end } else { addr & !(LINE - 1) };
    (first..end).step_by(LINE)
}

/// How far ahead of the buffer it hands out a drain shows the next one:
/// a settle frees each buffer through its block record, read in stamp
/// order at scattered addresses (85 % of a large settle's time), and asks
/// for the record this many buffers ahead.
pub(crate) const DRAIN_AHEAD: usize = 8;

/// Bytes in a cache line on the cores we prefetch for.
const LINE: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// A pusher for tests: one cache.
    const ME: Pusher = 0x1000;

    #[test]
    fn the_lines_of_a_range_run_from_its_first_line_to_its_last() {
        let at = |a, n| lines(a, n).collect::<Vec<_>>();
        assert_eq!(at(128, 64), [128]);
        assert_eq!(at(130, 64), [128, 192], "straddles two lines");
        assert_eq!(at(100, 24 * 16), [64, 128, 192, 256, 320, 384, 448]);
        assert_eq!(at(4096, 0), Vec::<usize>::new(), "nothing to touch");
        assert_eq!(at(130, 0), Vec::<usize>::new(), "nothing, unaligned");
        assert_eq!(at(usize::MAX - 10, 100), [usize::MAX - 63], "no overflow");
    }

    #[test]
    fn a_long_rising_streak_is_taken_first_in_first_out_with_the_newest_stamps() {
        let mut d = Depot::default();
        for _ in 0..200 {
            d.reserve_one(2).unwrap();
        }
        let streak: Vec<Slot> = (0..100).map(slot).collect();
        assert!(d.push_all(2, &streak, ME, true));
        let mut got = vec![];
        assert_eq!(d.take_newest(2, 16, None, |s| got.extend_from_slice(s)), 16);
        // Handed to the bin oldest stamp first; the bin hands out its last.
        let stamps: Vec<u64> = got.iter().map(|s| s.stamp).collect();
        assert_eq!(stamps, (84..100).collect::<Vec<u64>>(), "the newest stamps");
        let order: Vec<usize> = got.iter().rev().map(Slot::test_key).collect();
        assert_eq!(order, (0..16).collect::<Vec<usize>>(), "the first pushed");
        // Pushes after a take are a new streak: a short one stays a stack.
        assert!(d.push_all(2, &[slot(150), slot(151)], ME, true));
        assert_eq!(d.pop(2).map(|s| s.test_key()), Some(151));
        assert_eq!(d.pop(2).map(|s| s.test_key()), Some(150));
        assert_eq!(d.pop(2).map(|s| s.test_key()), Some(16));
    }

    #[test]
    fn a_scattered_streak_is_sorted_in_the_room_reserved_for_its_runs() {
        let mut d = Depot::default();
        d.reserve_runs(4).unwrap();
        let cap = d.sort_room.capacity();
        assert!(cap >= 4 * streak::RUN_WORDS);
        d.reserve_runs(4).unwrap();
        assert_eq!(d.sort_room.capacity(), cap, "as many again adds nothing");
        let (base, streak) = scattered_streak();
        for _ in 0..streak.len() {
            d.reserve_one(3).unwrap();
        }
        assert!(d.push_all(3, &streak, ME, true));
        let got = take_all(&mut d, 3);
        let want: Vec<usize> = (0..2048).map(|k| base + 512 * k).collect();
        assert_eq!(got, want, "lowest address first");
        assert_eq!(d.sort_room.capacity(), cap, "nothing allocated");
    }

    #[test]
    fn a_streak_of_two_pushers_is_taken_as_pushed_and_the_next_one_is_ordered_again() {
        let mut d = Depot::default();
        d.reserve_runs(4).unwrap();
        // The scattered streak the test above sorts, pushed a bin's batch
        // at a time by two caches in turn (threads streaming one class).
        let (base, streak) = scattered_streak();
        for _ in 0..2 * streak.len() {
            d.reserve_one(3).unwrap();
        }
        for (i, batch) in streak.chunks(64).enumerate() {
            assert!(d.push_all(3, batch, if i % 2 == 0 { ME } else { ME + 128 }, true));
        }
        let got = take_all(&mut d, 3);
        let pushed: Vec<usize> = streak.iter().rev().map(|s| s.addr).collect();
        assert_eq!(
            got, pushed,
            "a stack: the last pushed first, nothing reordered"
        );
        // The takes ended that streak: one pusher's next streak is sorted.
        assert!(d.push_all(3, &streak, ME + 128, true));
        let got = take_all(&mut d, 3);
        let want: Vec<usize> = (0..2048).map(|k| base + 512 * k).collect();
        assert_eq!(got, want, "lowest address first");
        // Remote frees absorbed under the lock are one pusher too.
        assert!(d.push(3, streak[0], REMOTES));
        assert!(d.push(3, streak[1], ME));
        assert_eq!(d.streaks[3].by, MANY);
        assert_eq!(d.pop(3), Some(streak[1]));
        assert_eq!(d.streaks[3].by, NOBODY, "a take ends the streak");
    }

    /// 2 048 buffers of 128 B in four runs (from the returned base),
    /// freed at random.
    fn scattered_streak() -> (usize, Vec<Slot>) {
        let base = 64 * crate::arena::RUN_LEN;
        let ks = streak::tests::shuffled((0..2048).map(|k| 4 * k).collect(), 5);
        let streak = ks
            .iter()
            .enumerate()
            .map(|(i, &k)| Slot {
                addr: base + 128 * k,
                stamp: i as u64,
            })
            .collect();
        (base, streak)
    }

    /// The addresses of class `c`, in the order refills of 16 get them.
    fn take_all(d: &mut Depot, c: Class) -> Vec<usize> {
        let mut got = vec![];
        while d.take_newest(c, 16, None, |s| got.extend(s.iter().rev().map(|x| x.addr))) > 0 {}
        got
    }

    fn slot(k: usize) -> Slot {
        Slot::for_test(k)
    }

    #[test]
    fn a_drain_hands_each_class_oldest_stamp_first_and_keeps_the_room() {
        let mut d = Depot::default();
        for _ in 0..8 {
            d.reserve_one(1).unwrap();
            d.reserve_one(4).unwrap();
        }
        // Two threads' flushes into one list: batches whose stamps interleave.
        let at = |k: usize, stamp: u64| Slot {
            addr: 4096 + 64 * k,
            stamp,
        };
        assert!(d.push_all(4, &[at(0, 10), at(1, 11), at(2, 12)], ME, true));
        assert!(d.push_all(4, &[at(3, 3), at(4, 4)], ME, true));
        assert!(d.push_all(4, &[at(5, 13), at(6, 5)], ME, false));
        assert!(d.push_all(1, &[at(7, 9), at(8, 2)], ME, false));
        let mut got = vec![];
        d.drain(|c, s, _| got.push((c, s.stamp)));
        assert_eq!(
            got,
            [
                (1, 2),
                (1, 9),
                (4, 3),
                (4, 4),
                (4, 5),
                (4, 10),
                (4, 11),
                (4, 12),
                (4, 13)
            ]
        );
        assert_eq!((d.buffers(), d.bytes()), (0, 0));
        assert_eq!(d.room(4), 8, "the room stays");
    }

    #[test]
    fn a_drain_shows_the_buffer_drain_ahead_places_later_in_its_class() {
        let mut d = Depot::default();
        let n = DRAIN_AHEAD + 3;
        for _ in 0..n {
            d.reserve_one(2).unwrap();
            d.reserve_one(5).unwrap();
        }
        let two: Vec<Slot> = (0..n).map(slot).rev().collect();
        assert!(d.push_all(2, &two, ME, true));
        assert!(d.push_all(5, &[slot(40), slot(41)], ME, true));
        let mut seen = vec![];
        d.drain(|c, s, a| seen.push((c, s.stamp, a.map(|a| a.stamp))));
        // Class 2 in stamp order, each with the one `DRAIN_AHEAD` later;
        // none past its class's end, none from the next class.
        let mut want: Vec<(usize, u64, Option<u64>)> = (0..n as u64)
            .map(|k| (2, k, Some(k + DRAIN_AHEAD as u64).filter(|&a| a < n as u64)))
            .collect();
        want.extend([(5, 40, None), (5, 41, None)]);
        assert_eq!(seen, want);
    }

    #[test]
    fn keeps_buffers_per_class_within_reserved_room() {
        let mut d = Depot::default();
        assert!(
            !d.push(0, slot(0), ME),
            "no room before a carve reserved it"
        );
        for _ in 0..5 {
            d.reserve_one(0).unwrap();
        }
        d.reserve_one(3).unwrap();
        let room = d.class(0).1;
        assert!(room >= 5);
        assert!(d.push(0, slot(0), ME) && d.pop(0).is_some());
        d.reserve_one(0).unwrap();
        assert!(d.class(0).1 >= 6, "room counts every block, not the length");
        for k in 0..room {
            assert!(d.push(0, slot(k), ME));
        }
        assert_eq!(d.room(0), 0);
        assert!(!d.push(0, slot(99), ME), "a full list refuses");
        assert!(d.push(3, slot(7), ME));
        assert_eq!(d.buffers(), room + 1);
        assert_eq!(d.bytes(), room * capacity(0) + capacity(3));
        assert_eq!((d.class(1).0.len(), d.class(3).0.len()), (0, 1));
        assert_eq!(d.pop(0), Some(slot(room - 1)), "newest first");
        let mut got = vec![];
        let newest = d.class(0).0.last().unwrap().stamp;
        assert_eq!(
            d.take_newest(0, 5, Some(newest), |s| got.extend_from_slice(s)),
            1
        );
        assert_eq!(got, [slot(room - 2)], "stops at a stamp below the bound");
        assert!(d.push(0, slot(room - 2), ME));
        // Several at once: all or nothing, oldest first, back as they went.
        while d.room(0) < 2 {
            d.reserve_one(0).unwrap();
        }
        let before = (d.buffers(), d.bytes());
        let room_now = d.room(0);
        let many: Vec<Slot> = (100..100 + room_now + 1).map(slot).collect();
        assert!(!d.push_all(0, &many, ME, true), "one too many");
        assert_eq!(
            (d.buffers(), d.bytes()),
            before,
            "a refused push changes nothing"
        );
        assert!(d.push_all(0, &many[..2], ME, true));
        assert_eq!(d.buffers(), before.0 + 2);
        let mut back = vec![];
        assert_eq!(d.take_newest(0, 2, None, |s| back.extend_from_slice(s)), 2);
        assert_eq!(back, many[..2], "the newest two, oldest first");
        assert!(
            !d.push_all(SMALL_CLASSES, &many[..1], ME, true),
            "no such class"
        );
        let mut seen = vec![];
        let kept = d.class(0).1;
        d.drain(|c, s, _| seen.push((c, s.test_key())));
        let want: Vec<_> = (0..room - 1).map(|k| (0, k)).chain([(3, 7)]).collect();
        assert_eq!(seen, want, "oldest first within a class");
        assert_eq!((d.bytes(), d.buffers()), (0, 0));
        assert_eq!(d.class(0).1, kept, "room stays");
        assert_eq!(d.pop(0), None);
        assert!(d.class(SMALL_CLASSES).0.is_empty() && d.pop(SMALL_CLASSES).is_none());
    }

    #[test]
    fn a_list_knows_whether_it_is_in_stamp_order() {
        let mut d = Depot::default();
        let at = |k: usize, stamp: u64| Slot {
            addr: 4096 * (k + 1),
            stamp,
        };
        for _ in 0..8 {
            assert!(d.reserve_one(4).is_ok());
        }
        assert!(d.is_ordered(4), "an empty list");
        assert!(d.push_all(4, &[at(0, 1), at(1, 2)], ME, true));
        assert!(d.push(4, at(2, 3), ME));
        assert!(d.is_ordered(4), "each push no older than the newest");
        // An older push (another thread's, a remote free's) breaks it.
        assert!(d.push(4, at(3, 0), REMOTES));
        assert!(!d.is_ordered(4));
        // A take that empties the list makes it ordered again.
        while d.take_newest(4, 8, None, |_| {}) > 0 {}
        assert!(d.is_ordered(4));
        // So does an unsorted slice, or one older than the newest.
        assert!(d.push_all(4, &[at(0, 5), at(1, 4)], ME, false));
        assert!(!d.is_ordered(4));
        d.drain(|_, _, _| {});
        assert!(d.is_ordered(4));
        assert!(d.push_all(4, &[at(0, 5), at(1, 6)], ME, true));
        assert!(d.push_all(4, &[at(2, 4), at(3, 7)], ME, true));
        assert!(!d.is_ordered(4));
    }
}
