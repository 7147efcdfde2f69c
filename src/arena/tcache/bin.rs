//! One size class's bounded stack of free buffers in a thread cache: the
//! newest on top (handed out first, most likely still in cache), the oldest
//! at the bottom (the ones a flush gives back). Pure bookkeeping over plain
//! values: no atomics, no unsafe, so Miri and unit tests cover it whole.
//!
//! The entries live in the cache, not threaded through the free buffers: a
//! push or pop touches one slot of a line the thread just used, where a list
//! through the buffers would read the freed buffer's first line (a miss for
//! a buffer freed long ago, and a write into memory a flush may release).

/// Most entries a bin holds, whatever its class. A power of two: an
/// index masked with `BIN_SLOTS - 1` is in bounds, so the hit's slot
/// access needs no bounds check (and no `unsafe`).
pub(crate) const BIN_SLOTS: usize = 64;
const _: () = assert!(BIN_SLOTS.is_power_of_two());

/// `n` as an index into a bin's slots: `n` itself for every `n` the bin
/// can hold (`len <= limit <= BIN_SLOTS`).
#[inline(always)]
const fn slot_index(n: u32) -> usize {
    debug_assert!((n as usize) < BIN_SLOTS);
    n as usize & (BIN_SLOTS - 1)
}

/// Bytes a bin may hold: larger classes hold fewer entries, but never
/// fewer than [`MIN_SLOTS`].
pub(crate) const BIN_BYTES: usize = 128 << 10;

/// One cached free buffer: its address and when it was freed. No block
/// record: 16 bytes an entry, where the record's number made 24 (with
/// hundreds of thousands of small buffers free, the depot's lists are
/// megabytes and every flush and refill moves them). Whoever needs the
/// record finds it from the address (`run_index.rs`): the locked paths
/// that settle a buffer into the free lists, pin it, or free it without a
/// cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub addr: usize,
    /// When its user freed it, in the arena's free order (`release.rs`).
    pub stamp: u64,
}

const EMPTY: Slot = Slot { addr: 0, stamp: 0 };

/// Whether a run that starts with `next`, put after `last`, keeps a list
/// in stamp order: `next` freed no earlier (or either missing). The depot
/// and the spills keep whether their lists are in order by it.
#[inline]
pub(crate) fn keeps_order(last: Option<&Slot>, next: Option<&Slot>) -> bool {
    match (last, next) {
        (Some(x), Some(y)) => x.stamp <= y.stamp,
        _ => true,
    }
}

#[cfg(test)]
impl Slot {
    /// The `k`-th of a series of distinct slots (page-spaced addresses).
    pub(crate) fn for_test(k: usize) -> Slot {
        Slot {
            addr: 4096 * (k + 1),
            stamp: k as u64,
        }
    }

    /// The `k` of [`Slot::for_test`]`(k)`.
    pub(crate) fn test_key(&self) -> usize {
        self.addr / 4096 - 1
    }
}

/// Moves entry `i` of `s` down past the entries below it that were freed
/// later (a higher stamp), when those below `i` are in order: one step of
/// an insertion sort.
fn sink_by_stamp(s: &mut [Slot], i: usize) {
    let mut j = i;
    while j > 0 && s[j - 1].stamp > s[j].stamp {
        s.swap(j - 1, j);
        j -= 1;
    }
}

/// A bounded stack of free buffers of one class.
#[derive(Debug)]
pub(crate) struct Bin {
    len: u32,
    limit: u32,
    /// `len` plus the credit: buffers of this class the cache handed out
    /// and has not yet taken back. A free is cached only against this
    /// credit. A thread that frees what others allocated (a consumer) so
    /// returns those buffers to the arena, where the allocating threads
    /// find them again; otherwise they would pile up in the consumer's
    /// cache while the producers went to the OS for new ones, run after
    /// run. A hit moves one buffer between `len` and the credit, so this
    /// sum stays: only the slow paths write it.
    reach: u32,
    /// `min(reach, limit)`: the length a cached free may take the bin to
    /// (a credit left and room left), so the free's hit tests one bound.
    room: u32,
    /// The class's capacity (below `CARVE_LIMIT`).
    cap: u32,
    /// Which way the bin's last locked move went: a second move the same
    /// way is a thread streaming through the class, and moves the whole
    /// bin ([`Bin::move_batch`]).
    last_move: Option<Move>,
    /// One buffer of the class as a delta of a cache's held word
    /// (`Held::one`), kept rather than computed on each hit.
    one: u64,
    slots: [Slot; BIN_SLOTS],
}

/// A bin's locked moves: a full bin's flush, an empty bin's refill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    Flush,
    Refill,
}

/// Fewest buffers a bin holds, past [`BIN_BYTES`] for the classes above
/// 8 KiB: with fewer, a thread that frees and allocates a few such
/// buffers in turn flushed and refilled (one lock each) every few
/// operations.
pub(crate) const MIN_SLOTS: usize = 16;

/// How many buffers of capacity `cap` a bin holds.
pub(crate) const fn limit_for(cap: usize) -> u32 {
    let n = BIN_BYTES / cap;
    if n < MIN_SLOTS {
        MIN_SLOTS as u32
    } else if n > BIN_SLOTS {
        BIN_SLOTS as u32
    } else {
        n as u32
    }
}

/// The most bytes the small bins of one cache hold together (every
/// small class's bin full).
pub(crate) const SMALL_BINS_MAX: usize = {
    let (mut c, mut sum) = (0, 0);
    while c < super::SMALL_CLASSES {
        let cap = crate::size_class::capacity(c);
        sum += limit_for(cap) as usize * cap;
        c += 1;
    }
    sum
};
// 13.4 MiB with 64 slots and at least 16 (docs/threads.md, "Design").
const _: () = assert!(SMALL_BINS_MAX < 16 << 20);

impl Bin {
    pub(crate) const fn new(cap: usize) -> Self {
        Bin {
            len: 0,
            limit: limit_for(cap),
            reach: 0,
            room: 0,
            cap: cap as u32,
            last_move: None,
            one: ((cap as u64) << 32) | 1,
            slots: [EMPTY; BIN_SLOTS],
        }
    }

    /// [`Bin::new`] holding at most `limit` entries: the tests' small bins.
    #[cfg(test)]
    pub(crate) fn with_limit(cap: usize, limit: u32) -> Self {
        Bin {
            limit,
            ..Bin::new(cap)
        }
    }

    /// This bin made what [`Bin::new`]`(cap)` is, but for its slots, left
    /// as they are: nothing reads a slot at or past `len`. A left cache's
    /// memory reused for a new thread (`make.rs`, `spare.rs`) is 79 bins
    /// of 1 KiB of slots; writing them all again was most of making it.
    pub(crate) fn reset(&mut self, cap: usize) {
        self.len = 0;
        self.limit = limit_for(cap);
        self.reach = 0;
        self.room = 0;
        self.cap = cap as u32;
        self.last_move = None;
        self.one = ((cap as u64) << 32) | 1;
    }

    /// The shared path handed out one buffer of this class on the cache's
    /// behalf: one more credit. Saturating: only a thread that allocated
    /// 2^32 buffers more than it freed reaches the bound, and a missing
    /// credit then sends a free to the arena, which is always correct
    /// (what a credit saves is a lock, nothing more).
    #[inline]
    pub(crate) fn note_handed_out(&mut self) {
        self.set_reach(self.reach.saturating_add(1));
    }

    /// Whether a free may be cached here (it uses one credit if so; the
    /// caller then [`Bin::push`]es or gives the credit back).
    #[inline]
    pub(crate) fn take_credit(&mut self) -> bool {
        if self.reach <= self.len {
            return false;
        }
        self.set_reach(self.reach - 1);
        true
    }

    /// The credit: buffers handed out and not yet taken back.
    #[cfg(test)]
    pub(crate) fn credit(&self) -> u32 {
        self.reach - self.len
    }

    #[inline(always)]
    fn set_reach(&mut self, reach: u32) {
        debug_assert!(reach >= self.len);
        self.reach = reach;
        self.room = reach.min(self.limit);
    }

    /// One buffer of this class as a delta of a cache's held word
    /// (`Held::one`).
    #[inline(always)]
    pub(crate) fn held_one(&self) -> u64 {
        self.one
    }

    /// The capacity of the class's buffers.
    #[inline(always)]
    pub(crate) fn cap(&self) -> usize {
        self.cap as usize
    }

    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// How many returned buffers [`Bin::push_returned`] would take now:
    /// the credit, up to the room left.
    #[inline]
    pub(crate) fn returnable(&self) -> usize {
        (self.room - self.len) as usize
    }

    /// How many entries a refill or a flush moves at once: half the bin.
    #[inline]
    pub(crate) fn batch(&self) -> usize {
        (self.limit as usize).div_ceil(2)
    }

    /// How many entries a flush of the full bin moves, or a refill of the
    /// empty bin asks for, and notes the move: half the bin
    /// ([`Bin::batch`]), or the whole bin when the bin's last locked move
    /// went the same way (a flush with no refill since: the thread is
    /// freeing a streak of the class; or a refill with no flush since).
    /// Half keeps a thread that frees and allocates around a full or
    /// empty bin from flushing and refilling by turns; the whole bin
    /// halves the locks a streak takes, and with many threads streaming
    /// through one arena those locks are what they wait on
    /// (measured on the `threads` bench).
    #[inline]
    pub(crate) fn move_batch(&mut self, way: Move) -> usize {
        let n = if self.last_move == Some(way) {
            self.limit as usize
        } else {
            self.batch()
        };
        self.last_move = Some(way);
        n
    }

    /// Hands out the newest entry, if any: it becomes one more credit.
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<Slot> {
        let n = self.len.checked_sub(1)?;
        self.len = n;
        // `n < len <= BIN_SLOTS`: the masked index is `n` itself.
        Some(self.slots[slot_index(n)])
    }

    /// Takes back a buffer its user freed, against one credit: `false`
    /// (and no change) when the bin has no credit or no room left. The
    /// free's hit: one bound, one store of the entry, one of the length.
    #[inline(always)]
    pub(crate) fn push_freed(&mut self, s: Slot) -> bool {
        // `room <= limit`: the entry fits.
        self.len < self.room && self.put_on_top(s)
    }

    /// [`Bin::push_freed`] for a buffer freed on another thread and taken
    /// from the arena's remote stack (`collect.rs`): against a credit and
    /// while the bin has room, at its place in free order (its stamp may
    /// be older than entries freed here since: it goes below those).
    pub(crate) fn push_returned(&mut self, s: Slot) -> bool {
        if !self.push_freed(s) {
            return false;
        }
        let len = self.len as usize;
        sink_by_stamp(&mut self.slots[..len], len - 1);
        true
    }

    /// Adds `s` as the newest entry without using a credit (a refill, or
    /// a free whose credit [`Bin::take_credit`] took); `false` (and no
    /// change) when full.
    #[inline(always)]
    pub(crate) fn push(&mut self, s: Slot) -> bool {
        if self.len >= self.limit {
            return false;
        }
        self.put_on_top(s);
        self.set_reach(self.reach.saturating_add(1));
        true
    }

    /// Puts `s` on top; the caller checked `len < limit` (`true`, for
    /// chaining into a bound check).
    #[inline(always)]
    fn put_on_top(&mut self, s: Slot) -> bool {
        // `len < limit <= BIN_SLOTS`: the masked index is `len` itself.
        self.slots[slot_index(self.len)] = s;
        self.len += 1;
        true
    }

    /// Adds all of `s` (oldest first) as the newest entries in one copy,
    /// without using credits (a refill); `false` (and no change) when they
    /// do not all fit.
    #[inline]
    pub(crate) fn push_all(&mut self, s: &[Slot]) -> bool {
        let len = self.len as usize;
        let Some(to) = self.slots.get_mut(len..len + s.len()) else {
            return false;
        };
        if len + s.len() > self.limit as usize {
            return false;
        }
        to.copy_from_slice(s);
        // `s.len() <= limit <= BIN_SLOTS`: no overflow.
        self.len += s.len() as u32;
        self.set_reach(self.reach.saturating_add(s.len() as u32));
        true
    }

    /// Puts the entries in free order by their stamps, the most recently
    /// freed on top (handed out first), as the arena hands out its newest
    /// retained buffer. A refill adds runs that are each in order (a
    /// depot's slice, oldest first): an insertion sort passes over them
    /// once and moves only the few out of place (stamps of different
    /// threads, a run older than the one before it), with no call into a
    /// general sort.
    pub(crate) fn sort_by_stamp(&mut self) {
        let len = self.len as usize;
        let s = &mut self.slots[..len];
        for i in 1..s.len() {
            sink_by_stamp(s, i);
        }
    }

    /// The oldest entry, if any.
    pub(crate) fn oldest(&self) -> Option<Slot> {
        (self.len > 0).then(|| self.slots[0])
    }

    /// Drops the oldest entry and adds `s` as the newest (no change when
    /// empty): the bin keeps its length.
    pub(crate) fn replace_oldest(&mut self, s: Slot) {
        let len = self.len as usize;
        if len == 0 {
            return;
        }
        self.slots.copy_within(1..len, 0);
        self.slots[len - 1] = s;
    }

    /// Removes the `n` oldest entries (all when fewer), handing them to
    /// `f` in one slice, oldest first, if it accepts them all (`true`);
    /// when `f` refuses, nothing changes. The rest move down, keeping
    /// their order.
    pub(crate) fn give_oldest(&mut self, n: usize, f: impl FnOnce(&[Slot]) -> bool) -> bool {
        let len = self.len as usize;
        let n = n.min(len);
        if !f(&self.slots[..n]) {
            return false;
        }
        self.drop_oldest(n, len);
        true
    }

    /// Removes the `n` oldest entries (all when fewer), handing each to
    /// `f` oldest first; the rest move down, keeping their order.
    pub(crate) fn drain_oldest(&mut self, n: usize, mut f: impl FnMut(Slot)) {
        let len = self.len as usize;
        let n = n.min(len);
        for s in &self.slots[..n] {
            f(*s);
        }
        self.drop_oldest(n, len);
    }

    /// Drops the `n` oldest of the `len` entries (`n <= len == self.len`).
    fn drop_oldest(&mut self, n: usize, len: usize) {
        self.slots.copy_within(n..len, 0);
        self.len = (len - n) as u32;
        // The credits stay: `reach` moves with `len`.
        self.set_reach(self.reach - n as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_move_the_same_way_moves_the_whole_bin() {
        let mut b = Bin::new(64);
        let (half, whole) = (BIN_SLOTS / 2, BIN_SLOTS);
        assert_eq!(b.batch(), half);
        // Flushes in a row: half, then the whole bin each time.
        assert_eq!(b.move_batch(Move::Flush), half);
        assert_eq!(b.move_batch(Move::Flush), whole);
        assert_eq!(b.move_batch(Move::Flush), whole);
        // A refill between: half again, both ways.
        assert_eq!(b.move_batch(Move::Refill), half);
        assert_eq!(b.move_batch(Move::Refill), whole);
        assert_eq!(b.move_batch(Move::Flush), half);
        assert_eq!(b.move_batch(Move::Refill), half);
        // A reset forgets the last move; small bins move their own limit.
        b.reset(64);
        assert_eq!(b.move_batch(Move::Refill), half);
        let mut t = Bin::with_limit(64, 5);
        assert_eq!(
            (t.move_batch(Move::Flush), t.move_batch(Move::Flush)),
            (3, 5)
        );
    }

    #[test]
    fn a_reset_bin_behaves_as_a_new_one() {
        let mut used = Bin::new(4096);
        for _ in 0..8 {
            used.note_handed_out();
        }
        for k in 0..8 {
            assert!(used.push(s(k)));
        }
        used.reset(64);
        let mut new = Bin::new(64);
        for b in [&mut used, &mut new] {
            assert_eq!((b.len(), b.cap(), b.held_one()), (0, 64, (64 << 32) | 1));
            assert_eq!(b.pop(), None);
            assert!(!b.push_freed(s(1)), "no credit");
            b.note_handed_out();
            assert!(b.push_freed(s(2)));
            assert_eq!(b.pop(), Some(s(2)));
        }
        assert_eq!(
            (used.limit, used.reach, used.room),
            (new.limit, new.reach, new.room)
        );
    }

    #[test]
    fn an_entry_is_an_address_and_a_stamp() {
        // The depot's lists are megabytes with many small buffers free:
        // every byte of an entry is moved by each flush and refill.
        assert_eq!(core::mem::size_of::<Slot>(), 16);
    }

    #[test]
    fn replacing_the_oldest_keeps_the_length_and_puts_the_new_on_top() {
        let mut b = Bin::new(64);
        assert_eq!(b.oldest(), None);
        b.replace_oldest(s(9));
        assert_eq!(b.len(), 0, "nothing to replace");
        for k in 0..3 {
            assert!(b.push(s(k)));
        }
        assert_eq!(b.oldest(), Some(s(0)));
        b.replace_oldest(s(7));
        assert_eq!(b.len(), 3);
        assert_eq!(b.oldest(), Some(s(1)));
        assert_eq!(b.pop(), Some(s(7)));
        assert_eq!(b.pop(), Some(s(2)));
        assert_eq!(b.pop(), Some(s(1)));
    }

    fn s(k: usize) -> Slot {
        Slot::for_test(k)
    }

    #[test]
    fn a_returned_buffer_needs_a_credit_and_goes_in_at_its_stamp() {
        let mut b = Bin::new(64);
        assert_eq!(b.returnable(), 0);
        assert!(!b.push_returned(s(5)), "no credit: back to the arena");
        for _ in 0..4 {
            b.note_handed_out();
        }
        assert_eq!(b.returnable(), 4, "four credits");
        assert!(b.push_freed(s(2)));
        assert!(b.push_freed(s(6)));
        assert!(
            b.push_returned(s(4)),
            "older than the top, newer than the bottom"
        );
        assert!(b.push_returned(s(1)), "older than every entry");
        assert!(!b.push_returned(s(9)), "four credits, all used");
        assert_eq!((b.credit(), b.returnable()), (0, 0));
        let order: Vec<u64> = std::iter::from_fn(|| b.pop()).map(|x| x.stamp).collect();
        assert_eq!(order, vec![6, 4, 2, 1], "newest on top");
    }

    #[test]
    fn a_free_is_taken_back_against_a_credit_while_there_is_room() {
        // A scripted mix of every operation against a model of the length
        // and the credit (the hit's single bound stands for both).
        let mut b = Bin::with_limit(16 << 10, 8);
        let (mut len, mut credit) = (0u32, 0u32);
        for step in 0..400usize {
            match (step * 5 + step / 7) % 7 {
                0 => {
                    let ok = b.push(s(step));
                    assert_eq!(ok, len < 8, "step {step}");
                    len += ok as u32;
                }
                1 | 2 => {
                    let ok = b.push_freed(s(step));
                    assert_eq!(ok, credit > 0 && len < 8, "step {step}");
                    len += ok as u32;
                    credit -= ok as u32;
                }
                3 | 4 => {
                    let ok = b.pop().is_some();
                    assert_eq!(ok, len > 0, "step {step}");
                    len -= ok as u32;
                    credit += ok as u32;
                }
                5 => {
                    if step % 2 == 0 {
                        b.note_handed_out();
                        credit += 1;
                    } else {
                        assert_eq!(b.take_credit(), credit > 0, "step {step}");
                        credit = credit.saturating_sub(1);
                    }
                }
                _ => {
                    let n = (step % 3) as u32;
                    b.drain_oldest(n as usize, |_| {});
                    len -= n.min(len);
                }
            }
            assert_eq!((b.len() as u32, b.credit()), (len, credit), "step {step}");
            assert_eq!(b.returnable() as u32, credit.min(8 - len), "step {step}");
        }
    }

    #[test]
    fn bulk_moves_keep_order_and_refuse_whole() {
        let mut b = Bin::with_limit(16 << 10, 8);
        let run: Vec<Slot> = (0..5).map(s).collect();
        assert!(b.push_all(&run));
        assert_eq!((b.len(), b.credit()), (5, 0), "a refill uses no credit");
        assert!(!b.push_all(&run[..4]), "9 entries do not fit in 8");
        assert_eq!(b.len(), 5, "a refused push changes nothing");
        assert!(b.push_all(&run[..3]) && b.len() == 8);
        // A refusing taker leaves the bin as it was.
        assert!(!b.give_oldest(3, |_| false));
        assert_eq!(b.len(), 8);
        let mut got = vec![];
        assert!(b.give_oldest(3, |x| {
            got.extend_from_slice(x);
            true
        }));
        assert_eq!(got, run[..3], "the oldest, oldest first");
        let rest: Vec<Slot> = core::iter::from_fn(|| b.pop()).collect();
        let want: Vec<Slot> = [3, 4, 0, 1, 2].into_iter().rev().map(s).collect();
        assert_eq!(rest, want, "the rest moved down in order");
        assert!(b.give_oldest(4, |x| x.is_empty()), "nothing left to give");
    }

    #[test]
    fn limits_follow_capacity() {
        assert_eq!(limit_for(16), BIN_SLOTS as u32);
        assert_eq!(limit_for(4096), 32);
        assert_eq!(limit_for(8 << 10), 16);
        // Past 128 KiB from 16 KiB up: never fewer than `MIN_SLOTS`.
        assert_eq!(limit_for(16 << 10), MIN_SLOTS as u32);
        assert_eq!(limit_for(48 << 10), MIN_SLOTS as u32);
        assert_eq!(Bin::new(48 << 10).batch(), MIN_SLOTS / 2);
    }

    #[test]
    fn a_bins_held_delta_is_one_buffer_of_its_class() {
        for cap in [16, 48, 4096, 48 << 10] {
            let one = Bin::new(cap).held_one();
            assert_eq!(one, super::super::cache::Held::one(cap));
            assert_eq!(super::super::cache::Held(one).bytes(), cap);
            assert_eq!(super::super::cache::Held(one).buffers(), 1);
        }
    }

    #[test]
    fn sorted_by_stamp_the_most_recently_freed_is_on_top() {
        let mut b = Bin::new(1024);
        for k in [3usize, 9, 1, 5] {
            assert!(b.push(s(k)));
        }
        b.sort_by_stamp();
        let order: Vec<u64> = core::iter::from_fn(|| b.pop()).map(|x| x.stamp).collect();
        assert_eq!(order, [9, 5, 3, 1]);
    }

    #[test]
    fn behaves_as_a_bounded_stack_with_oldest_first_drain() {
        let mut b = Bin::with_limit(16 << 10, 8);
        let mut model: Vec<Slot> = vec![];
        // A scripted mix of pushes, pops and drains against a Vec.
        for step in 0..200usize {
            match (step * 7 + step / 5) % 6 {
                0..=2 => {
                    let ok = b.push(s(step));
                    assert_eq!(ok, model.len() < 8, "step {step}");
                    if ok {
                        model.push(s(step));
                    }
                }
                3 | 4 => assert_eq!(b.pop(), model.pop(), "step {step}"),
                _ => {
                    let n = step % 4;
                    let mut got = vec![];
                    b.drain_oldest(n, |x| got.push(x));
                    let k = n.min(model.len());
                    assert_eq!(got, model.drain(..k).collect::<Vec<_>>(), "step {step}");
                }
            }
            assert_eq!(b.len(), model.len());
        }
        let mut rest = vec![];
        b.drain_oldest(usize::MAX, |x| rest.push(x));
        assert_eq!(rest, model);
        assert_eq!(b.pop(), None);
    }
}
