//! The planner's one random generator: xorshift64, seeded, so every run
//! with the same budget repeats.

/// A xorshift64 generator (Marsaglia's 13/7/17 triple).
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced by a fixed odd constant:
    /// xorshift never leaves 0).
    pub(crate) fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut s = self.0;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.0 = s;
        s
    }

    /// A number in `0..m` (`m > 0`; the modulo bias is irrelevant here).
    pub(crate) fn below(&mut self, m: usize) -> usize {
        (self.next_u64() % m as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_and_covers_the_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            seen[x] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_ne!(Rng::new(0).next_u64(), 0);
    }
}
