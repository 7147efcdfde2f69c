//! A stable LSD radix sort of `(key, payload)` pairs: the time
//! compression and validation of traces with a million buffers sort
//! millions of integer keys, which comparison sorts take several times
//! longer to do.

/// Bits per digit: 2048 counters, a few passes for the keys of a trace.
const DIGIT: u32 = 11;

/// Sorts `v` by key, stably (equal keys keep their order): one counting
/// pass per 11 bits of the largest key.
pub(crate) fn sort_by_key(v: &mut Vec<(u64, u32)>) {
    let max = v.iter().map(|e| e.0).max().unwrap_or(0);
    let bits = 64 - max.leading_zeros();
    if v.len() < 64 {
        v.sort_by_key(|e| e.0);
        return;
    }
    let mut buf = vec![(0u64, 0u32); v.len()];
    let mut shift = 0;
    let mask = (1u64 << DIGIT) - 1;
    while shift < bits {
        let mut count = vec![0usize; 1 << DIGIT];
        for e in v.iter() {
            count[((e.0 >> shift) & mask) as usize] += 1;
        }
        let mut at = 0;
        for c in count.iter_mut() {
            let k = *c;
            *c = at;
            at += k;
        }
        for &e in v.iter() {
            let d = ((e.0 >> shift) & mask) as usize;
            buf[count[d]] = e;
            count[d] += 1;
        }
        std::mem::swap(v, &mut buf);
        shift += DIGIT;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rng::Rng;

    #[test]
    fn sorts_stably_like_the_standard_sort() {
        let mut rng = Rng::new(29);
        for (n, range) in [(10, 100u64), (500, 3000), (700, u64::MAX), (300, 1 << 40)] {
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
