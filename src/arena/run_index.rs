//! Small-class blocks found from their address by arithmetic: a run is
//! `RUN_LEN`-aligned and cut into slots of one capacity, so an address
//! names its run (`addr / RUN_LEN`) and its slot (`offset / capacity`).
//! The index keeps one entry per run (a small map that stays in cache)
//! and one block number per slot, in one array, each run's slots
//! together. It replaces a per-buffer hash entry: with hundreds of
//! thousands of small live buffers, a free by address (the scoped global
//! allocator's, allocator-api2's) missed the cache on that hash table.
//!
//! Pure bookkeeping: no OS, no unsafe. It grows only when a run is made
//! (a cold allocation); the warm path only reads it and writes slots
//! that exist.

use super::blocks::NIL;
use super::hash::MulHasher;
use super::RUN_LEN;
use crate::size_class::{capacity, class_of_classed, Class};
use core::hash::BuildHasherDefault;
use std::collections::HashMap;

/// Where one run's slots are: its number in the arena's run list, its
/// first slot in [`RunIndex::slots`], its base and capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunEntry {
    run: u32,
    base: usize,
    cap: usize,
    first: usize,
    /// `slot_count(cap)`, kept: a lookup divides by nothing.
    count: usize,
    /// `reciprocal(cap)`: an offset's slot is a multiply and a shift.
    recip: u64,
}

/// Small-class runs by address, and each run's blocks by slot.
#[derive(Debug, Default)]
pub(crate) struct RunIndex {
    /// By run number (`base / RUN_LEN`): mostly consecutive integers,
    /// hashed whole.
    at: HashMap<usize, RunEntry, BuildHasherDefault<MulHasher<0>>>,
    /// Each slot's block, `NIL` until the slot is carved.
    slots: Vec<u32>,
}

/// How many slots a run of `cap`-byte blocks has.
fn slot_count(cap: usize) -> usize {
    RUN_LEN / cap
}

/// The shift of [`reciprocal`]'s fixed point.
const RECIP_SHIFT: u32 = 40;

/// `2^RECIP_SHIFT / cap` rounded up: for every offset `off` in a run,
/// `off * reciprocal(cap) >> RECIP_SHIFT` is `off / cap` exactly, because
/// the rounding error (below `cap`) times `off` stays below
/// `2^RECIP_SHIFT` while `off * cap` does (`RUN_LEN * cap <= 2^34` for
/// every run-carved class; `run_index` tests every class and offset).
/// A division on the lookup cost more than the rest of it.
const fn reciprocal(cap: usize) -> u64 {
    (1u64 << RECIP_SHIFT).div_ceil(cap as u64)
}

const _: () = assert!((RUN_LEN as u128) * (super::CARVE_LIMIT as u128) <= 1u128 << RECIP_SHIFT);

/// The run-carved classes: every class below `CARVE_LIMIT`.
const RUN_CLASSES: usize = class_of_classed(super::CARVE_LIMIT);

/// Per run-carved class, [`reciprocal`] of its capacity.
const RECIPS: [u64; RUN_CLASSES] = {
    let mut r = [0; RUN_CLASSES];
    let mut c = 0;
    while c < RUN_CLASSES {
        r[c] = reciprocal(capacity(c));
        c += 1;
    }
    r
};

/// Whether `addr` is where a slot starts in a run of class `c` (runs are
/// `RUN_LEN`-aligned, slot 0 at the base): arithmetic only, no map. A
/// buffer freed by address, whose run the owner table says is of class
/// `c`, is checked this way before it is kept without its block.
#[inline]
pub(crate) fn starts_slot(c: Class, addr: usize) -> bool {
    let Some(&r) = RECIPS.get(c) else {
        return false;
    };
    let cap = capacity(c);
    let off = addr % RUN_LEN;
    let k = ((off as u64 * r) >> RECIP_SHIFT) as usize;
    k * cap == off && k < slot_count(cap)
}

impl RunIndex {
    /// Makes room for one more run of `cap`-byte blocks, so that
    /// [`RunIndex::add_run`] cannot fail; call before the run's OS work.
    pub(crate) fn reserve(&mut self, cap: usize) -> Result<(), ()> {
        self.at.try_reserve(1).map_err(|_| ())?;
        self.slots.try_reserve(slot_count(cap)).map_err(|_| ())
    }

    /// Records run number `run` at `base` (`RUN_LEN`-aligned), cut into
    /// `cap`-byte blocks, none carved yet. Never allocates after
    /// [`RunIndex::reserve`].
    pub(crate) fn add_run(&mut self, run: u32, base: usize, cap: usize) {
        debug_assert_eq!(base % RUN_LEN, 0, "runs are RUN_LEN-aligned");
        debug_assert!(cap > 0 && cap <= RUN_LEN);
        let first = self.slots.len();
        self.slots.resize(first + slot_count(cap), NIL);
        self.at.insert(
            base / RUN_LEN,
            RunEntry {
                run,
                base,
                cap,
                first,
                count: slot_count(cap),
                recip: reciprocal(cap),
            },
        );
    }

    /// Records that block `block` was carved at `addr` (inside a run
    /// added before). `false`, and no change, if `addr` is no slot's start.
    pub(crate) fn set(&mut self, addr: usize, block: u32) -> bool {
        match self.slot_of(addr) {
            Some(s) => {
                self.slots[s] = block;
                true
            }
            None => false,
        }
    }

    /// The slot at `addr` in run `e`: `None` when `addr` is not the start
    /// of one of its slots.
    #[inline]
    fn slot_in(e: &RunEntry, addr: usize) -> Option<usize> {
        // Same run number, so `addr >= e.base`.
        let off = addr - e.base;
        let k = ((off as u64 * e.recip) >> RECIP_SHIFT) as usize;
        (k * e.cap == off && k < e.count).then_some(e.first + k)
    }

    /// The slot at `addr`: `None` when no run holds `addr` or `addr` is
    /// not the start of one of its slots.
    #[inline]
    fn slot_of(&self, addr: usize) -> Option<usize> {
        Self::slot_in(self.at.get(&(addr / RUN_LEN))?, addr)
    }

    /// `None` when no small-class run holds `addr`; else the block carved
    /// at `addr`, if `addr` starts a carved slot (one map probe for both).
    #[inline]
    pub(crate) fn lookup(&self, addr: usize) -> Option<Option<u32>> {
        let e = self.at.get(&(addr / RUN_LEN))?;
        let i = Self::slot_in(e, addr).and_then(|s| self.slots.get(s).copied());
        Some(i.filter(|&i| i != NIL))
    }

    /// The block carved at `addr`, if `addr` starts a carved slot.
    #[inline]
    pub(crate) fn block_at(&self, addr: usize) -> Option<u32> {
        self.lookup(addr).flatten()
    }

    /// The runs indexed: (run number, base, capacity) each, then the
    /// blocks of its slots in address order (for the invariant checker).
    pub(crate) fn runs(&self) -> impl Iterator<Item = (u32, usize, usize, &[u32])> {
        self.at.values().map(|e| {
            let slots = &self.slots[e.first..e.first + slot_count(e.cap)];
            (e.run, e.base, e.cap, slots)
        })
    }

    /// Forgets every run (the arena gave back all its mappings).
    pub(crate) fn clear(&mut self) {
        self.at.clear();
        self.slots.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: usize = 7 * RUN_LEN;

    #[test]
    fn the_reciprocal_divides_every_offset_of_a_run_exactly() {
        // Every run-carved class; every offset natively, a sample under Miri.
        let step = if cfg!(miri) { 4093 } else { 1 };
        let mut c = 0;
        while crate::size_class::capacity(c) < crate::arena::CARVE_LIMIT {
            let cap = crate::size_class::capacity(c);
            let r = reciprocal(cap);
            for off in (0..RUN_LEN).step_by(step).chain([RUN_LEN - 1]) {
                let k = ((off as u64 * r) >> RECIP_SHIFT) as usize;
                assert_eq!(k, off / cap, "cap {cap}, offset {off}");
            }
            c += 1;
        }
        assert!(c > 40, "the small classes were walked");
    }

    #[test]
    fn a_carved_slot_is_found_from_any_of_its_runs_addresses() {
        let mut x = RunIndex::default();
        x.reserve(48).unwrap();
        x.add_run(3, BASE, 48);
        x.reserve(16).unwrap();
        x.add_run(4, BASE + RUN_LEN, 16);
        assert!(x.set(BASE + 48 * 5, 11));
        assert!(x.set(BASE + RUN_LEN, 12));
        assert_eq!(x.block_at(BASE + 48 * 5), Some(11));
        assert_eq!(x.block_at(BASE + RUN_LEN), Some(12));
        // Not yet carved, not a slot start, outside every run.
        assert_eq!(x.block_at(BASE), None);
        assert_eq!(x.block_at(BASE + 48 * 5 + 16), None);
        assert_eq!(x.block_at(BASE - 48), None);
        assert_eq!(x.block_at(BASE + 3 * RUN_LEN), None);
        assert_eq!(x.lookup(BASE + RUN_LEN - 1), Some(None), "held, no slot");
        assert_eq!(x.lookup(BASE + 2 * RUN_LEN), None, "no run there");
        assert!(!x.set(BASE + 1, 9), "not a slot start");
        assert!(!x.set(BASE + 2 * RUN_LEN, 9), "no run there");
        let mut runs: Vec<_> = x.runs().map(|(r, b, c, s)| (r, b, c, s.len())).collect();
        runs.sort_unstable();
        assert_eq!(
            runs,
            vec![
                (3, BASE, 48, RUN_LEN / 48),
                (4, BASE + RUN_LEN, 16, RUN_LEN / 16)
            ]
        );
        x.clear();
        assert_eq!(x.block_at(BASE + 48 * 5), None);
    }

    #[test]
    fn a_slot_start_is_found_by_arithmetic_as_the_index_finds_it() {
        // Every run-carved class: every slot start of a run (a sample under
        // Miri) and the bytes beside it, against a run added to the index.
        let step = if cfg!(miri) { 97 } else { 1 };
        for c in (0..RUN_CLASSES).step_by(if cfg!(miri) { 7 } else { 1 }) {
            let cap = capacity(c);
            let mut x = RunIndex::default();
            x.reserve(cap).unwrap();
            x.add_run(0, BASE, cap);
            for k in (0..slot_count(cap)).step_by(step) {
                let a = BASE + k * cap;
                assert!(x.set(a, k as u32));
                assert!(starts_slot(c, a), "class {c}, slot {k}");
                for b in [a + 1, a + cap / 2, a + cap - 1] {
                    assert_eq!(starts_slot(c, b), x.set(b, 0), "class {c}, {b:#x}");
                }
            }
            let tail = BASE + slot_count(cap) * cap;
            if tail < BASE + RUN_LEN {
                assert!(!starts_slot(c, tail), "class {c}: the tail holds no slot");
            }
        }
        assert!(!starts_slot(RUN_CLASSES, BASE), "not a run-carved class");
    }

    #[test]
    fn the_tail_past_a_runs_last_whole_slot_is_no_slot() {
        // 48 does not divide RUN_LEN: the last 16 bytes hold no slot.
        let mut x = RunIndex::default();
        x.reserve(48).unwrap();
        x.add_run(0, BASE, 48);
        let last = (RUN_LEN / 48 - 1) * 48;
        assert!(x.set(BASE + last, 1));
        assert_eq!(x.block_at(BASE + last), Some(1));
        assert!(!x.set(BASE + last + 48, 2));
        assert_eq!(x.block_at(BASE + last + 48), None);
    }
}
