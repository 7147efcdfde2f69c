//! A stable LSD radix sort of `(key, payload)` pairs: the time
//! compression and validation of traces with a million buffers sort
//! millions of integer keys, which comparison sorts take several times
//! longer to do.

/// Bits per digit: 2048 counters, a few passes for the keys of a trace.
const DIGIT: u32 = 11;

/// Sorts `v` by key, stably (equal keys keep their order): one counting
/// pass per 11 bits of the largest key. Keys below 2^32 are sorted packed
/// with their payload in one `u64` (half the bytes to move a pass).
pub(crate) fn sort_by_key(v: &mut Vec<(u64, u32)>) {
    if v.len() < 64 {
        v.sort_by_key(|e| e.0);
        return;
    }
    let max = v.iter().map(|e| e.0).max().unwrap_or(0);
    if max >> 32 == 0 {
        let mut packed: Vec<u64> = v.iter().map(|e| e.0 << 32 | u64::from(e.1)).collect();
        sort_words(&mut packed, 32, 64 - max.leading_zeros());
        for (e, &p) in v.iter_mut().zip(&packed) {
            *e = (p >> 32, p as u32);
        }
    } else {
        sort_words(v, 0, 64 - max.leading_zeros());
    }
}

/// What [`sort_words`] sorts: a word or a pair, by a 64-bit key.
trait Keyed: Copy + Default {
    fn key(&self) -> u64;
}

impl Keyed for u64 {
    fn key(&self) -> u64 {
        *self
    }
}

impl Keyed for (u64, u32) {
    fn key(&self) -> u64 {
        self.0
    }
}

/// Sorts `v` stably by the `bits` bits of the key from bit `low` up. The
/// counts of every digit are taken in one read of `v`, and a digit all
/// keys share is skipped.
fn sort_words<T: Keyed>(v: &mut Vec<T>, low: u32, bits: u32) {
    let digits = bits.div_ceil(DIGIT) as usize;
    let mask = (1u64 << DIGIT) - 1;
    let digit = |e: &T, d: usize| ((e.key() >> (low + d as u32 * DIGIT)) & mask) as usize;
    let mut counts = vec![[0usize; 1 << DIGIT]; digits];
    for e in v.iter() {
        for (d, count) in counts.iter_mut().enumerate() {
            count[digit(e, d)] += 1;
        }
    }
    let mut buf = vec![T::default(); v.len()];
    for (d, count) in counts.iter_mut().enumerate() {
        if count.contains(&v.len()) {
            continue;
        }
        let mut at = 0;
        for c in count.iter_mut() {
            let k = *c;
            *c = at;
            at += k;
        }
        for e in v.iter() {
            let k = digit(e, d);
            buf[count[k]] = *e;
            count[k] += 1;
        }
        std::mem::swap(v, &mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rng::Rng;

    #[test]
    fn sorts_stably_like_the_standard_sort() {
        let mut rng = Rng::new(29);
        for (n, range) in [
            (10, 100u64),
            (500, 3000),
            (700, u64::MAX),
            (300, 1 << 40),
            (900, 1 << 31),
            (5000, 1 << 33),
        ] {
            let n = if cfg!(miri) { n.min(80) } else { n };
            let v: Vec<(u64, u32)> = (0..n)
                .map(|i| {
                    let k = if range == u64::MAX {
                        rng.next_u64()
                    } else {
                        rng.next_u64() % range
                    };
                    (k, i as u32)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|e| e.0);
            let mut got = v;
            sort_by_key(&mut got);
            assert_eq!(got, want);
        }
    }
}
