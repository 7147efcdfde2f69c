//! The set of size classes that have a retained buffer, as a bitmap, so best
//! fit is two word scans at most, whatever the number of retained buffers.

use crate::size_class::{Class, CLASS_COUNT};

const WORDS: usize = CLASS_COUNT / 64;

/// One bit per class: set while the class's warm list is non-empty.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClassBitmap {
    words: [u64; WORDS],
}

impl ClassBitmap {
    #[inline]
    pub(crate) fn set(&mut self, c: Class) {
        self.words[c / 64] |= 1 << (c % 64);
    }

    #[inline]
    pub(crate) fn clear(&mut self, c: Class) {
        self.words[c / 64] &= !(1 << (c % 64));
    }

    pub(crate) fn contains(&self, c: Class) -> bool {
        self.words[c / 64] & (1 << (c % 64)) != 0
    }

    /// The lowest set class in `lo..=hi`, if any. Touches at most the words
    /// between `lo` and `hi`, which for a 2× fit window is one or two.
    #[inline]
    pub(crate) fn first_in(&self, lo: Class, hi: Class) -> Option<Class> {
        let mut w = lo / 64;
        let mut mask = !0u64 << (lo % 64);
        while w <= hi / 64 && w < WORDS {
            let bits = self.words[w] & mask;
            if bits != 0 {
                let c = w * 64 + bits.trailing_zeros() as usize;
                return (c <= hi).then_some(c);
            }
            w += 1;
            mask = !0;
        }
        None
    }

    /// Every set class in `lo..=hi`, lowest first.
    pub(crate) fn iter_in(&self, lo: Class, hi: Class) -> impl Iterator<Item = Class> + '_ {
        let mut next = lo;
        core::iter::from_fn(move || {
            if next > hi {
                return None;
            }
            let c = self.first_in(next, hi)?;
            next = c + 1;
            Some(c)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_in_finds_lowest_in_window() {
        let mut b = ClassBitmap::default();
        assert_eq!(b.first_in(0, CLASS_COUNT - 1), None);
        b.set(70);
        b.set(130);
        assert!(b.contains(70));
        assert_eq!(b.first_in(0, 255), Some(70));
        assert_eq!(b.first_in(71, 255), Some(130));
        assert_eq!(b.first_in(71, 129), None);
        assert_eq!(b.first_in(63, 70), Some(70));
        assert_eq!(b.first_in(130, 130), Some(130));
        b.clear(70);
        assert_eq!(b.first_in(0, 100), None);
        b.set(255);
        assert_eq!(b.first_in(200, 255), Some(255));
        b.set(0);
        assert_eq!(b.iter_in(0, 255).collect::<Vec<_>>(), vec![0, 130, 255]);
    }

    #[test]
    fn matches_a_naive_scan() {
        let mut b = ClassBitmap::default();
        let mut naive = [false; CLASS_COUNT];
        let mut x = 0x9e3779b97f4a7c15u64;
        let rounds = if cfg!(miri) { 200 } else { 5000 };
        for _ in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = (x % CLASS_COUNT as u64) as usize;
            if x & (1 << 40) != 0 {
                b.set(c);
                naive[c] = true;
            } else {
                b.clear(c);
                naive[c] = false;
            }
            let lo = ((x >> 8) % CLASS_COUNT as u64) as usize;
            let hi = (lo + ((x >> 20) % 20) as usize).min(CLASS_COUNT - 1);
            let expect = (lo..=hi).find(|&i| naive[i]);
            assert_eq!(b.first_in(lo, hi), expect);
        }
    }
}
