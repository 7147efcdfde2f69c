//! The order in which a depot list hands back a long streak of frees
//! (`depot.rs`).
//!
//! A class's depot list is a stack: a refill takes its newest entries. A
//! program that frees a long streak in about the order it allocated (a
//! tree or a queue dropped front to back) gets the streak back reversed,
//! and the run after that the right way round again. serde_json's tree
//! (`examples/global_scope.rs`) showed it: every second warm iteration
//! wrote its new values from high addresses down and took 1.2-1.3x as
//! long as the one before.
//!
//! So the first take after a streak of at least [`STREAK_MIN`] pushes
//! looks at it once. When it mostly rises (a run whose buffers a fresh
//! carve handed out rising, freed in about that order), the stack
//! is made to hand the streak back first in, first out, by reversing the
//! order of its addresses. One part is kept out of that: the streak's
//! leading falling run. Those are what the thread's bin kept back at the
//! end of the run before and handed out first, newest first, in this run;
//! left where they are, they come back last, in the order the run before
//! had them. So a run that frees in the order it allocates gets the same
//! order run after run, where reversing the whole streak would move a
//! bin's worth to the front each run.
//!
//! A streak that mostly falls (freed in the reverse of its allocation,
//! a stack) already comes back in its allocation order and is left as it
//! is; so is a short one, a bin's batch given and taken, where the
//! buffers just flushed are the ones still in cache.
//!
//! A long streak that sweeps its addresses more than twice (buffers freed
//! at random, a tree's children before their parents, every fifth buffer
//! at a time) is sorted instead: the stack hands it out lowest address
//! first. Left as it was, the next run got its buffers in the order they
//! were freed, spread over every run of the class, and its writes and
//! walks brought each cache line in once per sweep. mimalloc hands out a
//! page's blocks in address order once the page is empty, whatever order
//! they were freed in. The sort sets a bit per
//! buffer in a bitmap per run (256 KiB) the streak touches, kept in room
//! the depot reserves as the arena makes runs, and reads them back:
//! linear in the streak, nothing allocated. Where that does not serve
//! (runs 64 MiB or more apart share a bucket) it groups the streak by run
//! in place and sorts each run through a bitmap on the stack.
//!
//! Only addresses move; the stamps stay where they
//! are, so the free order the arena keeps is unchanged and its newest
//! stamps still go first. Which buffer of a class carries which stamp is
//! not observable in the arena's counts: a stamp orders the eviction of a
//! whole buffer of the class, and the class's buffers are alike. Which
//! runs' pages a cap gives back can differ: the oldest stamps now sit on
//! the buffers the streak hands out last, so a cap evicts those first.
//!
//! Pure logic over plain values: no atomics, no unsafe, no allocation
//! (the sort's bitmaps are in the caller's room, used within its
//! capacity, or one of 2 KiB on the stack).

use super::super::RUN_LEN;
use super::bin::Slot;
use crate::size_class::MIN_CAPACITY;

/// Fewest pushes a streak must have before its order is looked at.
pub(crate) const STREAK_MIN: usize = 64;

/// Reorders the addresses of `s` (the stamps stay)
/// when it is at least [`STREAK_MIN`] long: sorted so that a stack taking
/// from the end hands out the lowest address first, when it is at least
/// [`SORT_MIN`] long and sweeps its address range more than twice (see
/// [`Survey::sweeps_again`]); else, when at least two of every three of
/// its entries past a leading falling run lie below the entry [`TREND`]
/// places on, so that the stack hands them back first in, first out, the
/// leading falling run last.
/// `room` is scratch for the sort's bitmaps, used within its capacity
/// only (see [`sort_by_address`]).
pub(crate) fn order(s: &mut [Slot], room: &mut Vec<u64>) -> Order {
    let n = s.len();
    if n < STREAK_MIN {
        return Order::Kept;
    }
    let v = survey(s);
    if n >= SORT_MIN && v.sweeps_again() {
        sort_by_address(s, room);
        return Order::Sorted;
    }
    // A leading falling run (the bin's worth the run before handed out
    // newest first, freed first, each few maybe swapped) is not counted
    // against the rest: with a bin of 64, a run of a few hundred buffers
    // freed in allocation order is a third falling head. Falling as the
    // rest is judged rising: against the entry `TREND` places on.
    let falling = s
        .windows(TREND + 1)
        .take_while(|w| w[0].addr > w[TREND].addr)
        .count();
    let head = if falling >= HEAD_MIN { falling } else { 0 };
    let body = n - head;
    if body < STREAK_MIN || 3 * v.rising < 2 * (body - TREND) {
        return Order::Kept;
    }
    reverse_addresses(&mut s[head..]);
    Order::Reversed
}

/// What [`order`] did to a streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Left as it was: short, or falling (a stack's order, which the
    /// stack hands back in its allocation order), or neither rising nor
    /// long enough to sort.
    Kept,
    /// It mostly rose in one sweep: it comes back first in, first out.
    Reversed,
    /// It swept its addresses more than twice: it comes back lowest
    /// address first.
    Sorted,
}

/// Fewest entries a streak must have to be sorted: fewer are a few bins'
/// worth, which the caches hold in any order.
const SORT_MIN: usize = 1024;

/// The run an address lies in, by number (its base is the number times
/// `RUN_LEN`), as the run index numbers runs.
fn run_of(addr: usize) -> usize {
    addr / RUN_LEN
}

/// Buckets a sort groups runs into first: runs further apart than this
/// share a bucket (their buffers stay together, interleaved, unsorted). A
/// class's runs lie in a few 2 MiB regions, mostly within 64 MiB of each
/// other.
const BUCKETS: usize = 256;

/// One pass over a streak: what [`order`] decides by.
struct Survey {
    /// Entries below the one [`TREND`] places on.
    rising: usize,
    /// The sum, over every entry below the one [`TREND`] places on, of
    /// how far below, in [`MIN_CAPACITY`] steps, each step at most
    /// [`STEP_MAX`]: estimated from every [`SAMPLE`]-th entry.
    climb: u64,
    /// The lowest and highest address of the sampled entries.
    low: usize,
    high: usize,
}

impl Survey {
    /// Whether the streak climbs through its address range more than two
    /// and a half times, [`TREND`] entries at a stride: the stride's climbs
    /// of one sweep add up to `TREND` times the range, however each few
    /// buffers are shuffled on the way (a node before its children, two
    /// fields swapped). A streak of buffers freed at random climbs about
    /// `n / 3` times; one freed in five strided passes five times; one
    /// freed every second one last twice; one freed as it came once; one
    /// freed in reverse (a stack) not at all.
    ///
    /// Why not from two: the next run writes its buffers in the order the
    /// stack hands them out, and an order of `k` sweeps brings each line
    /// in `k` times where the data outgrows the caches; a sort saves the
    /// `k - 1` but costs about 4 ns a buffer (the survey, a count, the
    /// bitmaps set and read back). At two sweeps it did not pay:
    /// serde_json's tree (`examples/global_scope.rs`) frees its largest
    /// class in two sweeps, and sorting it gave its walk nothing and took
    /// 1.5-2 ms more an iteration.
    fn sweeps_again(&self) -> bool {
        let range = (self.high.saturating_sub(self.low) / MIN_CAPACITY) as u128;
        2 * u128::from(self.climb) > 5 * TREND as u128 * range
    }
}

/// How often the survey samples the climbs and the range: every
/// `SAMPLE`-th entry. One sweep's climbs are alike along it, so a sample
/// sums to about a `SAMPLE`-th; the count of rising entries, which decides
/// a reversal, takes every entry (it is cheaper).
const SAMPLE: usize = 4;

/// The largest climb one step adds, in [`MIN_CAPACITY`] steps (256 MiB):
/// the sum cannot overflow for any streak a list could hold.
const STEP_MAX: usize = 1 << 24;

fn survey(s: &[Slot]) -> Survey {
    // One pass: the list outgrows the caches, and a second pass read it
    // from memory again. In chunks of `SAMPLE` pairs, the chunk's first
    // pair sampled: no index test per entry.
    let mut rising = 0;
    let (mut climb, mut low, mut high) = (0u64, usize::MAX, 0);
    // The sampled pair `x`, `y` (`TREND` entries on).
    let mut sample = |x: &Slot, y: &Slot| {
        climb += (y.addr.saturating_sub(x.addr) / MIN_CAPACITY).min(STEP_MAX) as u64;
        (low, high) = (low.min(x.addr), high.max(x.addr));
    };
    let pairs = s.len().saturating_sub(TREND);
    let (xs, ys) = (&s[..pairs], s.get(TREND..).unwrap_or_default());
    let mut xc = xs.chunks_exact(SAMPLE);
    let mut yc = ys.chunks_exact(SAMPLE);
    for (x, y) in (&mut xc).zip(&mut yc) {
        let mut r = 0;
        for k in 0..SAMPLE {
            r += usize::from(x[k].addr < y[k].addr);
        }
        rising += r;
        sample(&x[0], &y[0]);
    }
    for (k, (x, y)) in xc.remainder().iter().zip(yc.remainder()).enumerate() {
        rising += usize::from(x.addr < y.addr);
        if k == 0 {
            sample(x, y);
        }
    }
    Survey {
        rising,
        climb: climb.saturating_mul(SAMPLE as u64),
        low,
        high,
    }
}

/// Moves the addresses of `s` (the stamps stay) so
/// that a stack taking from the end hands out the lowest address first.
/// Through a bitmap per run in `room` when it has the capacity
/// ([`sort_through_bitmaps`]); else in place: buckets of runs laid out
/// from the highest at the start to the lowest at the end, each filled by
/// cycles of swaps (every entry moves once), then each bucket of one run
/// in address order ([`sort_run`]). A bucket of several runs (a bucket's
/// width apart) stays in the order the swaps left.
#[inline(never)]
fn sort_by_address(s: &mut [Slot], room: &mut Vec<u64>) {
    // Entries per bucket, by run number modulo BUCKETS, and the lowest.
    let mut counts = [0usize; BUCKETS];
    let mut low = usize::MAX;
    for x in s.iter() {
        counts[run_of(x.addr) % BUCKETS] += 1;
        low = low.min(x.addr);
    }
    let lowest = run_of(low);
    if sort_through_bitmaps(s, &counts, lowest, room) {
        return;
    }
    // A run's bucket, counted from the start: the lowest run's is last.
    let bucket = |addr: usize| BUCKETS - 1 - ((run_of(addr) - lowest) % BUCKETS);
    let mut next = [0usize; BUCKETS];
    let mut end = [0usize; BUCKETS];
    let mut at = 0;
    for b in 0..BUCKETS {
        // Bucket `b` holds the runs `lowest + (BUCKETS - 1 - b)` modulo BUCKETS.
        let k = (lowest + (BUCKETS - 1 - b)) % BUCKETS;
        next[b] = at;
        at += counts[k];
        end[b] = at;
    }
    for b in 0..BUCKETS {
        while next[b] < end[b] {
            let i = next[b];
            let mut held = s[i].addr;
            let mut k = bucket(held);
            while k != b {
                // Into the next free place of its own bucket; carry on with
                // what was there.
                let j = next[k];
                next[k] += 1;
                core::mem::swap(&mut s[j].addr, &mut held);
                k = bucket(held);
            }
            s[i].addr = held;
            next[b] += 1;
        }
    }
    let mut start = 0;
    for &e in &end {
        if let Some(bucket) = s.get_mut(start..e) {
            sort_run(bucket);
        }
        start = e;
    }
}

/// Words of a bitmap with a bit for each [`MIN_CAPACITY`] bytes of a run.
pub(crate) const RUN_WORDS: usize = RUN_LEN / MIN_CAPACITY / 64;

/// Sorts `s` as [`sort_by_address`] does through one bitmap per run it
/// touches, kept in `room` (the depot's, with room for one per run the
/// arena made, so nothing is allocated): a pass setting a bit per buffer,
/// a pass reading the bitmaps back from the top. Three passes in order
/// over the entries in all (the counts were one), where grouping in place
/// swaps each entry into a bucket picked by the one before it, a chain of
/// loads the core cannot run ahead on (about twice the time).
///
/// `false`, with `s` as it was, when `room` has not the capacity, when
/// two runs share a bucket (`counts` are by run number modulo
/// [`BUCKETS`]), or when an address appears twice or off the 16-byte grid
/// (never, while every free is of a live buffer).
fn sort_through_bitmaps(
    s: &mut [Slot],
    counts: &[usize; BUCKETS],
    lowest: usize,
    room: &mut Vec<u64>,
) -> bool {
    // Each non-empty bucket's bitmap, lowest run first.
    let mut place = [0u16; BUCKETS];
    let mut runs = 0;
    for rel in 0..BUCKETS {
        let k = (lowest + rel) % BUCKETS;
        if counts[k] > 0 {
            place[k] = runs as u16;
            runs += 1;
        }
    }
    let words = runs * RUN_WORDS;
    if words > room.capacity() {
        return false;
    }
    room.clear();
    room.resize(words, 0);
    // The run each bitmap is for.
    let mut run_at = [usize::MAX; BUCKETS];
    for x in s.iter() {
        let r = run_of(x.addr);
        let p = usize::from(place[r % BUCKETS]);
        if run_at[p] == usize::MAX {
            run_at[p] = r;
        } else if run_at[p] != r {
            return false;
        }
        let off = x.addr - r * RUN_LEN;
        let bits = room.get_mut(p * RUN_WORDS..(p + 1) * RUN_WORDS);
        if !bits.is_some_and(|b| mark(b, off)) {
            return false;
        }
    }
    let mut to = s.iter_mut();
    for (p, bits) in room.chunks_exact(RUN_WORDS).enumerate().rev() {
        read_back(bits, run_at[p] * RUN_LEN, &mut to);
    }
    true
}

/// Puts the addresses of `s`, buffers of one run, in falling order, so a
/// stack taking from the end hands out the lowest first: a bit per
/// buffer in a bitmap of the run (2 KiB, on the stack), read back from
/// the top. Leaves `s` as
/// it was when its buffers are not all of one run (runs a bucket apart)
/// or one appears twice (never, while every free is of a live buffer).
fn sort_run(s: &mut [Slot]) {
    let Some(first) = s.first() else {
        return;
    };
    let base = run_of(first.addr) * RUN_LEN;
    let mut bits = [0u64; RUN_WORDS];
    if !s.iter().all(|x| mark(&mut bits, x.addr.wrapping_sub(base))) {
        return;
    }
    read_back(&bits, base, &mut s.iter_mut());
}

/// Sets the bit of the buffer `off` bytes into a run in `bits`, the run's
/// bitmap; `false` (nothing set) when `off` is past the run or off the
/// 16-byte grid, or its bit is set already.
fn mark(bits: &mut [u64], off: usize) -> bool {
    if off >= RUN_LEN || off % MIN_CAPACITY != 0 {
        return false;
    }
    let k = off / MIN_CAPACITY;
    let Some(word) = bits.get_mut(k / 64) else {
        return false;
    };
    let bit = 1u64 << (k % 64);
    if *word & bit != 0 {
        return false;
    }
    *word |= bit;
    true
}

/// Writes the addresses whose bits are set in `bits`, the bitmap of the
/// run at `base`, highest first, into the entries `to` yields.
fn read_back<'a>(bits: &[u64], base: usize, to: &mut impl Iterator<Item = &'a mut Slot>) {
    for (w, &word) in bits.iter().enumerate().rev() {
        let mut left = word;
        while left != 0 {
            let top = 63 - left.leading_zeros() as usize;
            left &= !(1u64 << top);
            if let Some(x) = to.next() {
                x.addr = base + (w * 64 + top) * MIN_CAPACITY;
            }
        }
    }
}

/// How far apart two entries are compared to tell which way a streak
/// runs: far enough that a program freeing each few buffers it allocated
/// together in another order (a node before its children, two fields
/// swapped) still reads as rising.
const TREND: usize = 8;

/// Fewest entries at a streak's start, each above the entry [`TREND`]
/// places on, taken for a bin's worth kept from the run before; fewer are
/// the program's own order.
const HEAD_MIN: usize = 4;

/// Reverses the order of the addresses of `s`.
fn reverse_addresses(s: &mut [Slot]) {
    let n = s.len();
    for i in 0..n / 2 {
        let (lo, hi) = (s[i], s[n - 1 - i]);
        s[i].addr = hi.addr;
        s[n - 1 - i].addr = lo.addr;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::bin::BIN_SLOTS;
    use super::*;

    /// A streak whose `i`-th entry is the buffer `k = ks[i]` (address
    /// `64 * k`), freed `i`-th (stamp `100 + i`).
    fn streak(ks: &[usize]) -> Vec<Slot> {
        ks.iter()
            .enumerate()
            .map(|(i, &k)| Slot {
                addr: 64 * k,
                stamp: 100 + i as u64,
            })
            .collect()
    }

    /// The buffers in the order a stack taking from the end hands them out.
    fn taken(s: &[Slot]) -> Vec<usize> {
        s.iter().rev().map(|x| x.addr / 64).collect()
    }

    /// What every call keeps: the same buffers, and the stamps where
    /// they were.
    fn same_buffers_and_stamps(before: &[Slot], after: &[Slot]) {
        let stamps = |s: &[Slot]| s.iter().map(|x| x.stamp).collect::<Vec<_>>();
        assert_eq!(stamps(before), stamps(after), "stamps never move");
        let (mut a, mut b) = (taken(before), taken(after));
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "the same buffers");
    }

    /// [`survey`] entry by entry, the way it was written before it went
    /// by chunks: what the chunked pass must still compute.
    fn survey_by_entry(s: &[Slot]) -> (usize, u64, usize, usize) {
        let (mut rising, mut climb, mut low, mut high) = (0, 0u64, usize::MAX, 0);
        for (i, (x, y)) in s.iter().zip(s.iter().skip(TREND)).enumerate() {
            rising += usize::from(x.addr < y.addr);
            if i % SAMPLE == 0 {
                climb += (y.addr.saturating_sub(x.addr) / MIN_CAPACITY).min(STEP_MAX) as u64;
                (low, high) = (low.min(x.addr), high.max(x.addr));
            }
        }
        (rising, climb * SAMPLE as u64, low, high)
    }

    #[test]
    fn the_survey_by_chunks_counts_what_one_by_one_counts() {
        // Every length around the chunk and trend bounds, the tail of each
        // chunking included, over rising, falling and shuffled addresses.
        for n in 0..(3 * SAMPLE + 2 * TREND + 3) {
            let rising: Vec<usize> = (0..n).collect();
            let falling: Vec<usize> = (0..n).rev().collect();
            let jumbled = shuffled((0..n).map(|k| k * 37 % 101).collect(), n as u64);
            for ks in [rising, falling, jumbled] {
                let s = streak(&ks);
                let v = survey(&s);
                assert_eq!(
                    (v.rising, v.climb, v.low, v.high),
                    survey_by_entry(&s),
                    "{ks:?}"
                );
            }
        }
        let long = streak(&shuffled((0..1000).collect(), 7));
        let v = survey(&long);
        assert_eq!((v.rising, v.climb, v.low, v.high), survey_by_entry(&long));
    }

    #[test]
    fn a_rising_streak_comes_back_first_in_first_out() {
        let ks: Vec<usize> = (0..200).collect();
        let before = streak(&ks);
        let mut s = before.clone();
        assert_eq!(order(&mut s, &mut room()), Order::Reversed);
        same_buffers_and_stamps(&before, &s);
        assert_eq!(taken(&s), ks);
        // Not strictly rising: still in the order it was freed.
        let ks: Vec<usize> = (0..200)
            .map(|k| if k % 8 >= 6 { k ^ 1 } else { k })
            .collect();
        let before = streak(&ks);
        let mut s = before.clone();
        assert_eq!(order(&mut s, &mut room()), Order::Reversed);
        same_buffers_and_stamps(&before, &s);
        assert_eq!(taken(&s), ks);
    }

    #[test]
    fn the_leading_falling_run_comes_back_last_in_the_order_before_it() {
        // A bin's worth (32 here) from the run before, handed out newest
        // first, so freed falling; then the rest rising.
        let mut ks: Vec<usize> = (468..500).rev().collect();
        ks.extend(0..436);
        let before = streak(&ks);
        let mut s = before.clone();
        assert_eq!(order(&mut s, &mut room()), Order::Reversed);
        same_buffers_and_stamps(&before, &s);
        let want: Vec<usize> = (0..436).chain(468..500).collect();
        assert_eq!(taken(&s), want);
    }

    #[test]
    fn a_falling_short_or_unordered_streak_is_left_as_it_was() {
        let falling: Vec<usize> = (0..200).rev().collect();
        let short: Vec<usize> = (0..STREAK_MIN - 1).collect();
        let scrambled = shuffled((0..200).collect(), 0);
        for ks in [falling, short, scrambled] {
            let mut s = streak(&ks);
            assert_eq!(order(&mut s, &mut room()), Order::Kept, "{ks:?}");
            assert_eq!(s, streak(&ks));
        }
    }

    /// `v` shuffled, the same way for the same seed.
    pub(crate) fn shuffled(mut v: Vec<usize>, seed: u64) -> Vec<usize> {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ seed;
        for i in (1..v.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.swap(i, (x % (i as u64 + 1)) as usize);
        }
        v
    }

    /// Room for the bitmaps of as many runs as there are buckets: what a
    /// depot reserves once the arena has made that many runs.
    fn room() -> Vec<u64> {
        Vec::with_capacity(BUCKETS * RUN_WORDS)
    }

    /// Buffers a run holds at the 64-byte spacing of [`streak`].
    const PER_RUN: usize = RUN_LEN / 64;

    /// The runs of the buffers in the order they are taken.
    fn taken_runs(s: &[Slot]) -> Vec<usize> {
        taken(s).iter().map(|k| k / PER_RUN).collect()
    }

    #[test]
    fn a_scattered_streak_comes_back_lowest_address_first() {
        // 2 048 buffers of five runs, freed at random; then 2 048 of one run.
        for ks in [
            shuffled((0..5 * PER_RUN).step_by(10).collect(), 7),
            shuffled((0..PER_RUN).step_by(2).collect(), 3),
        ] {
            let before = streak(&ks);
            let mut s = before.clone();
            assert_eq!(order(&mut s, &mut room()), Order::Sorted);
            same_buffers_and_stamps(&before, &s);
            let got = taken(&s);
            let mut want = ks.clone();
            want.sort_unstable();
            assert_eq!(got, want);
            // Without room for the bitmaps: grouped in place, the same order.
            let mut t = before.clone();
            assert_eq!(order(&mut t, &mut Vec::new()), Order::Sorted);
            assert_eq!(t, s);
        }
    }

    #[test]
    fn runs_a_bucket_apart_come_back_together_before_the_next_bucket() {
        // Runs 3 and 3 + BUCKETS share the first bucket; run 4 has the next.
        let ks: Vec<usize> = [3, 3 + BUCKETS, 4]
            .iter()
            .flat_map(|r| (0..PER_RUN).step_by(8).map(move |j| r * PER_RUN + j))
            .collect();
        let before = streak(&shuffled(ks, 11));
        // The bitmaps refuse a bucket of two runs; grouping in place serves.
        let mut s = before.clone();
        assert_eq!(order(&mut s, &mut room()), Order::Sorted);
        same_buffers_and_stamps(&before, &s);
        let runs = taken_runs(&s);
        let first_of_4 = runs.iter().position(|&r| r == 4).unwrap();
        assert_eq!(first_of_4, 2 * PER_RUN / 8, "the whole first bucket first");
        let fourth = &taken(&s)[first_of_4..];
        assert!(fourth.windows(2).all(|w| w[0] < w[1]), "run 4 in order");
        assert!(fourth.iter().all(|&k| k / PER_RUN == 4));
    }

    #[test]
    fn streaks_of_one_or_two_sweeps_are_not_sorted() {
        // Fewer under Miri, still past SORT_MIN.
        let step = if cfg!(miri) { 16 } else { 4 };
        let ks: Vec<usize> = (0..5 * PER_RUN).step_by(step).collect();
        let falling: Vec<usize> = ks.iter().rev().copied().collect();
        let mut s = streak(&falling);
        assert_eq!(order(&mut s, &mut room()), Order::Kept, "a stack's order");
        assert_eq!(s, streak(&falling));
        // Every second one last: two rising sweeps, handed back as they came.
        let two: Vec<usize> = ks
            .iter()
            .step_by(2)
            .chain(ks.iter().skip(1).step_by(2))
            .copied()
            .collect();
        let mut s = streak(&two);
        assert_eq!(order(&mut s, &mut room()), Order::Reversed);
        assert_eq!(taken(&s), two);
        // Every third one at a time: three sweeps, sorted.
        let three: Vec<usize> = (0..3)
            .flat_map(|r| ks.iter().skip(r).step_by(3).copied())
            .collect();
        let mut s = streak(&three);
        assert_eq!(order(&mut s, &mut room()), Order::Sorted);
        assert_eq!(taken(&s), ks);
    }

    #[test]
    fn runs_that_free_at_random_get_their_buffers_in_address_order() {
        // 2 048 buffers, 256 to a run (eight runs), freed in a new random
        // order each run. From the second run on, all but the bin's worth
        // (handed out first) come in address order.
        let (n, spacing) = (2048, RUN_LEN / 256);
        let seed = core::cell::Cell::new(0);
        let at_random = |o: &[usize]| {
            seed.set(seed.get() + 1);
            shuffled(o.to_vec(), seed.get())
        };
        let orders = spaced_runs(n, spacing, if cfg!(miri) { 2 } else { 50 }, at_random);
        for (r, o) in orders.iter().enumerate().skip(1) {
            assert!(o[BIN_SLOTS..].windows(2).all(|w| w[0] < w[1]), "run {r}");
        }
    }

    /// The order a run frees its buffers in, made from its allocation order.
    type FreeOrder = dyn Fn(&[usize]) -> Vec<usize>;

    /// Runs of `n` buffers, each freed in an order `free_order` makes
    /// of its allocation order, through a model of a bin (its `BIN_SLOTS` newest
    /// kept, the rest flushed) and a depot list ordered by [`order`] at its
    /// first take: each run's allocation order.
    fn runs(n: usize, runs: usize, free_order: impl Fn(&[usize]) -> Vec<usize>) -> Vec<Vec<usize>> {
        spaced_runs(n, 64, runs, free_order)
    }

    /// [`runs`] with buffer `k` at address `spacing * k`.
    fn spaced_runs(
        n: usize,
        spacing: usize,
        runs: usize,
        free_order: impl Fn(&[usize]) -> Vec<usize>,
    ) -> Vec<Vec<usize>> {
        let mut bin: Vec<Slot> = Vec::new();
        let mut depot: Vec<Slot> = Vec::new();
        let mut stamp = 0u64;
        let mut orders = Vec::new();
        let mut order_now: Vec<usize> = (0..n).collect(); // the cold carve
        for _ in 0..runs {
            for k in free_order(&order_now) {
                stamp += 1;
                bin.push(Slot {
                    addr: spacing * k,
                    stamp,
                });
                if bin.len() > BIN_SLOTS {
                    depot.push(bin.remove(0));
                }
            }
            orders.push(order_now);
            // The next run: the bin first, newest first; then the depot,
            // from its end.
            let mut next = Vec::new();
            while let Some(x) = bin.pop() {
                next.push(x.addr / spacing);
            }
            order(&mut depot, &mut room());
            while let Some(x) = depot.pop() {
                next.push(x.addr / spacing);
            }
            order_now = next;
        }
        orders
    }

    /// How many of `o`'s entries lie below the one [`TREND`] places on.
    fn rising_trend(o: &[usize]) -> usize {
        o.iter()
            .zip(o.iter().skip(TREND))
            .filter(|(a, b)| a < b)
            .count()
    }

    /// Buffers a run, and runs: fewer under Miri, which interprets.
    const N: usize = if cfg!(miri) { 256 } else { 4096 };
    const RUNS: usize = if cfg!(miri) { 8 } else { 200 };

    #[test]
    fn a_run_that_frees_in_allocation_order_keeps_its_order_run_after_run() {
        let n = N;
        let orders = runs(n, RUNS, |o| o.to_vec());
        // From the third run on, every second run is the same: the bin's
        // two halves of the tail take turns at the front.
        for (r, o) in orders.iter().enumerate().skip(3) {
            assert_eq!(o, &orders[r - 2], "run {r}");
            let rising = o.windows(2).filter(|w| w[0] < w[1]).count();
            assert!(rising >= n - 1 - 2 * BIN_SLOTS, "run {r}: {rising}");
        }
    }

    #[test]
    fn runs_that_free_each_few_buffers_the_other_way_round_keep_rising() {
        // Each pair freed the other way round; each four in reverse. All
        // but about two bins' worth rise (the bin's tail comes first).
        // (A shuffle of eight applied anew every run drifts: its rising
        // share falls to about two thirds in 40 runs and then takes turns
        // with one third, as the plain stack's order does; docs/threads.md.)
        let n = N;
        let pairs = |o: &[usize]| o.chunks(2).flat_map(|c| c.iter().rev().copied()).collect();
        let fours = |o: &[usize]| o.chunks(4).flat_map(|c| c.iter().rev().copied()).collect();
        let shapes: [&FreeOrder; 2] = [&pairs, &fours];
        for (shape, f) in shapes.into_iter().enumerate() {
            for (r, o) in runs(n, RUNS, f).iter().enumerate() {
                let rising = rising_trend(o);
                assert!(
                    rising >= n - 2 * TREND - 2 * BIN_SLOTS,
                    "shape {shape} run {r}: {rising}"
                );
            }
        }
    }
}
