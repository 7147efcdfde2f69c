//! A stable LSD radix sort of `(key, payload)` pairs: the time
//! compression and validation of traces with a million buffers sort
//! millions of integer keys, which comparison sorts take several times
//! longer to do.

/// Bits per digit: 2048 counters, a few passes for the keys of a trace.
const DIGIT: u32 = 11;

/// `(key, payload)` pairs sorted by key.
pub(crate) enum Sorted {
    /// Every key is below 2^32: each pair packed as `key << 32 | payload`
    /// in one word (half the memory of a pair, half the bytes to move a
    /// pass).
    Words(Vec<u64>),
    /// Some key needs more than 32 bits.
    Pairs(Vec<(u64, u32)>),
}

impl Sorted {
    /// How many pairs.
    pub(crate) fn len(&self) -> usize {
        match self {
            Sorted::Words(w) => w.len(),
            Sorted::Pairs(p) => p.len(),
        }
    }

    /// Whether there are no pairs.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k`-th pair in key order.
    pub(crate) fn get(&self, k: usize) -> (u64, u32) {
        match self {
            Sorted::Words(w) => (w[k] >> 32, w[k] as u32),
            Sorted::Pairs(p) => p[k],
        }
    }

    /// The pairs in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + Clone + '_ {
        (0..self.len()).map(|k| self.get(k))
    }

    /// The payloads in key order.
    pub(crate) fn payloads(&self) -> impl Iterator<Item = u32> + Clone + '_ {
        self.iter().map(|e| e.1)
    }
}

/// The pairs `items` yields, sorted by key, stably (equal keys keep the
/// order they came in): one counting pass per 11 bits of the largest key.
pub(crate) fn sort_pairs<I>(items: I) -> Sorted
where
    I: Iterator<Item = (u64, u32)> + Clone,
{
    let max = items.clone().map(|e| e.0).max().unwrap_or(0);
    let bits = 64 - max.leading_zeros();
    if max >> 32 == 0 {
        let mut words: Vec<u64> = items.map(|(k, p)| k << 32 | u64::from(p)).collect();
        if words.len() < 64 {
            words.sort_by_key(|w| w >> 32);
        } else {
            sort_words(&mut words, 32, bits);
        }
        Sorted::Words(words)
    } else {
        let mut pairs: Vec<(u64, u32)> = items.collect();
        if pairs.len() < 64 {
            pairs.sort_by_key(|e| e.0);
        } else {
            sort_words(&mut pairs, 0, bits);
        }
        Sorted::Pairs(pairs)
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
            // Payloads in a shuffled order: ties must keep the input order.
            let v: Vec<(u64, u32)> = (0..n)
                .map(|_| {
                    let k = if range == u64::MAX {
                        rng.next_u64()
                    } else {
                        rng.next_u64() % range
                    };
                    (k, rng.next_u64() as u32)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|e| e.0);
            let got = sort_pairs(v.iter().copied());
            assert_eq!(got.len(), n);
            assert_eq!(got.iter().collect::<Vec<_>>(), want);
        }
    }
}
