//! The order in which a depot list hands back a long streak of frees
//! (`depot.rs`).
//!
//! A class's depot list is a stack: a refill takes its newest entries. A
//! program that frees a long streak in about the order it allocated (a
//! tree or a queue dropped front to back) gets the streak back reversed,
//! and the run after that the right way round again. serde_json's tree
//! (`examples/global_scope.rs`) showed it: every second warm iteration
//! wrote its new values from high addresses down and took 1.2-1.3x as
//! long as the one before (docs/threads.md, stop 45).
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
//! Only addresses move, each with its block; the stamps stay where they
//! are, so the free order the arena keeps is unchanged and its newest
//! stamps still go first. Which buffer of a class carries which stamp is
//! not observable in the arena's counts: a stamp orders the eviction of a
//! whole buffer of the class, and the class's buffers are alike. Which
//! runs' pages a cap gives back can differ: the oldest stamps now sit on
//! the buffers the streak hands out last, so a cap evicts those first.
//!
//! Pure logic over plain values: no atomics, no unsafe, no allocation.

use super::bin::Slot;

/// Fewest pushes a streak must have before its order is looked at.
pub(crate) const STREAK_MIN: usize = 64;

/// Reorders the addresses of `s` (each with its block; the stamps stay)
/// so that a stack taking from the end hands them back first in, first
/// out, the leading falling run last, when `s` is at least
/// [`STREAK_MIN`] long and at least two of every three of its entries lie
/// below the entry [`TREND`] places on; returns whether it did.
pub(crate) fn order(s: &mut [Slot]) -> bool {
    let n = s.len();
    if n < STREAK_MIN {
        return false;
    }
    if 3 * rising_over(s, TREND) < 2 * (n - TREND) {
        return false;
    }
    let falling = s.windows(2).take_while(|w| w[0].addr > w[1].addr).count();
    let head = if falling >= HEAD_MIN { falling } else { 0 };
    reverse_addresses(&mut s[head..]);
    true
}

/// How far apart two entries are compared to tell which way a streak
/// runs: far enough that a program freeing each few buffers it allocated
/// together in another order (a node before its children, two fields
/// swapped) still reads as rising.
const TREND: usize = 8;

/// Fewest falling steps at a streak's start taken for a bin's worth kept
/// from the run before; fewer are the program's own order.
const HEAD_MIN: usize = 4;

/// How many entries of `s` lie below the entry `d` places after them.
fn rising_over(s: &[Slot], d: usize) -> usize {
    s.iter()
        .zip(s.iter().skip(d))
        .filter(|(a, b)| a.addr < b.addr)
        .count()
}

/// Reverses the order of the addresses of `s`, each with its block.
fn reverse_addresses(s: &mut [Slot]) {
    let n = s.len();
    for i in 0..n / 2 {
        let (lo, hi) = (s[i], s[n - 1 - i]);
        (s[i].addr, s[i].block) = (hi.addr, hi.block);
        (s[n - 1 - i].addr, s[n - 1 - i].block) = (lo.addr, lo.block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streak whose `i`-th entry is the buffer `k = ks[i]` (address
    /// `64 * k`, block `k`), freed `i`-th (stamp `100 + i`).
    fn streak(ks: &[usize]) -> Vec<Slot> {
        ks.iter()
            .enumerate()
            .map(|(i, &k)| Slot {
                addr: 64 * k,
                block: k as u32,
                stamp: 100 + i as u64,
            })
            .collect()
    }

    /// The buffers in the order a stack taking from the end hands them out.
    fn taken(s: &[Slot]) -> Vec<usize> {
        s.iter().rev().map(|x| x.addr / 64).collect()
    }

    /// What every call keeps: the same buffers, each with its own block,
    /// and the stamps where they were.
    fn same_buffers_and_stamps(before: &[Slot], after: &[Slot]) {
        let stamps = |s: &[Slot]| s.iter().map(|x| x.stamp).collect::<Vec<_>>();
        assert_eq!(stamps(before), stamps(after), "stamps never move");
        assert!(after.iter().all(|x| x.addr == 64 * x.block as usize));
        let (mut a, mut b) = (taken(before), taken(after));
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "the same buffers");
    }

    #[test]
    fn a_rising_streak_comes_back_first_in_first_out() {
        let ks: Vec<usize> = (0..200).collect();
        let before = streak(&ks);
        let mut s = before.clone();
        assert!(order(&mut s));
        same_buffers_and_stamps(&before, &s);
        assert_eq!(taken(&s), ks);
        // Not strictly rising: still in the order it was freed.
        let ks: Vec<usize> = (0..200)
            .map(|k| if k % 8 >= 6 { k ^ 1 } else { k })
            .collect();
        let before = streak(&ks);
        let mut s = before.clone();
        assert!(order(&mut s));
        same_buffers_and_stamps(&before, &s);
        assert_eq!(taken(&s), ks);
    }

    #[test]
    fn the_leading_falling_run_comes_back_last_in_the_order_before_it() {
        // The bin's 32 from the run before, handed out newest first, so
        // freed falling; then the rest rising.
        let mut ks: Vec<usize> = (468..500).rev().collect();
        ks.extend(0..436);
        let before = streak(&ks);
        let mut s = before.clone();
        assert!(order(&mut s));
        same_buffers_and_stamps(&before, &s);
        let want: Vec<usize> = (0..436).chain(468..500).collect();
        assert_eq!(taken(&s), want);
    }

    #[test]
    fn a_falling_short_or_unordered_streak_is_left_as_it_was() {
        let falling: Vec<usize> = (0..200).rev().collect();
        let short: Vec<usize> = (0..STREAK_MIN - 1).collect();
        let mut scrambled: Vec<usize> = (0..200).collect();
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for i in (1..scrambled.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            scrambled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for ks in [falling, short, scrambled] {
            let mut s = streak(&ks);
            assert!(!order(&mut s), "{ks:?}");
            assert_eq!(s, streak(&ks));
        }
    }

    /// The order a run frees its buffers in, made from its allocation order.
    type FreeOrder = dyn Fn(&[usize]) -> Vec<usize>;

    /// Runs of `n` buffers, each freed in an order `free_order` makes
    /// of its allocation order, through a model of a bin (its 32 newest
    /// kept, the rest flushed) and a depot list ordered by [`order`] at its
    /// first take: each run's allocation order.
    fn runs(n: usize, runs: usize, free_order: impl Fn(&[usize]) -> Vec<usize>) -> Vec<Vec<usize>> {
        let mut bin: Vec<Slot> = Vec::new();
        let mut depot: Vec<Slot> = Vec::new();
        let mut stamp = 0u64;
        let mut orders = Vec::new();
        let mut order_now: Vec<usize> = (0..n).collect(); // the cold carve
        for _ in 0..runs {
            for k in free_order(&order_now) {
                stamp += 1;
                bin.push(Slot {
                    addr: 64 * k,
                    block: k as u32,
                    stamp,
                });
                if bin.len() > 32 {
                    depot.push(bin.remove(0));
                }
            }
            orders.push(order_now);
            // The next run: the bin first, newest first; then the depot,
            // from its end.
            let mut next = Vec::new();
            while let Some(x) = bin.pop() {
                next.push(x.addr / 64);
            }
            order(&mut depot);
            while let Some(x) = depot.pop() {
                next.push(x.addr / 64);
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
            assert!(rising >= n - 1 - 64, "run {r}: {rising}");
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
                    rising >= n - 2 * TREND - 64,
                    "shape {shape} run {r}: {rising}"
                );
            }
        }
    }
}
