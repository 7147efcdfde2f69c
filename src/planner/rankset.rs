//! A set of small integers (`0..n`) as bits, with a summary level of
//! 64-bit words above the bits (bit `w` of a level is set when word `w`
//! below is not zero): insert, remove, predecessor and successor each scan
//! a few words per level (four levels for a million members), in `n / 8`
//! bytes and more. The validation sweep keeps the live buffers here by
//! their rank in offset order.

/// Members of `0..n`; see the module docs.
pub(crate) struct RankSet {
    /// `levels[0]` holds the members' bits; each level above summarises
    /// the one below; the last has one word.
    levels: Vec<Vec<u64>>,
}

impl RankSet {
    /// The empty set over `0..n`.
    pub(crate) fn new(n: usize) -> Self {
        let mut levels = Vec::new();
        let mut len = n.max(1);
        loop {
            let words = len.div_ceil(64);
            levels.push(vec![0u64; words]);
            if words == 1 {
                break;
            }
            len = words;
        }
        RankSet { levels }
    }

    /// Adds `x` (below `n`).
    pub(crate) fn insert(&mut self, mut x: usize) {
        for level in &mut self.levels {
            let word = &mut level[x / 64];
            let was_empty = *word == 0;
            *word |= 1 << (x % 64);
            if !was_empty {
                break;
            }
            x /= 64;
        }
    }

    /// Removes `x` (below `n`).
    pub(crate) fn remove(&mut self, mut x: usize) {
        for level in &mut self.levels {
            let word = &mut level[x / 64];
            *word &= !(1 << (x % 64));
            if *word != 0 {
                break;
            }
            x /= 64;
        }
    }

    /// The smallest member at or above `x`.
    pub(crate) fn at_or_after(&self, mut x: usize) -> Option<usize> {
        let mut lvl = 0;
        loop {
            let words = self.levels.get(lvl)?;
            let w = x / 64;
            let m = words.get(w)? & (!0u64 << (x % 64));
            if m != 0 {
                x = w * 64 + m.trailing_zeros() as usize;
                break;
            }
            x = w + 1;
            lvl += 1;
        }
        while lvl > 0 {
            lvl -= 1;
            x = x * 64 + self.levels[lvl][x].trailing_zeros() as usize;
        }
        Some(x)
    }

    /// The largest member at or below `x` (below `n`).
    pub(crate) fn at_or_before(&self, mut x: usize) -> Option<usize> {
        let mut lvl = 0;
        loop {
            let words = self.levels.get(lvl)?;
            let w = x / 64;
            let m = words[w] & (!0u64 >> (63 - x % 64));
            if m != 0 {
                x = w * 64 + 63 - m.leading_zeros() as usize;
                break;
            }
            x = w.checked_sub(1)?;
            lvl += 1;
        }
        while lvl > 0 {
            lvl -= 1;
            x = x * 64 + 63 - self.levels[lvl][x].leading_zeros() as usize;
        }
        Some(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rng::Rng;
    use std::collections::BTreeSet;

    #[test]
    fn agrees_with_an_ordered_set() {
        let mut rng = Rng::new(41);
        let sizes: &[usize] = if cfg!(miri) {
            &[1, 70, 300]
        } else {
            &[1, 63, 64, 65, 4096, 4097, 300_000]
        };
        for &n in sizes {
            let mut set = RankSet::new(n);
            let mut want = BTreeSet::new();
            let ops = if cfg!(miri) { 200 } else { 3000 };
            for _ in 0..ops {
                let x = rng.below(n);
                if rng.below(3) == 0 {
                    set.remove(x);
                    want.remove(&x);
                } else {
                    set.insert(x);
                    want.insert(x);
                }
                let q = rng.below(n);
                assert_eq!(set.at_or_after(q), want.range(q..).next().copied());
                assert_eq!(set.at_or_before(q), want.range(..=q).next_back().copied());
            }
            assert_eq!(set.at_or_after(n), None);
        }
    }
}
