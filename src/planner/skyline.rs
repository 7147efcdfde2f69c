//! Skyline packing: a constructive pass in O(n log n) that needs no
//! conflict lists, for problems too large to enumerate conflicts.
//!
//! Buffers are placed in nondecreasing offset order, always at the lowest
//! level any unplaced buffer can take (its *candidate*: the highest top
//! already placed over its lifetime). Among buffers at that level the best
//! ranked goes first. A segment tree over time sections answers candidates
//! (range max) and records placements (range max-assign); a heap holds
//! candidates lazily, refreshed when popped, since they only grow.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::interval::{Buffer, Placement};

/// Range "raise to at least v" and range max over `n` leaves, bottom up:
/// `max[k]` is the largest value in node `k`'s subtree, `tag[k]` a raise
/// applied to all of it. Every node covering part of a query range has its
/// pending raises on the paths from the two boundary leaves to the root.
struct MaxTree {
    n: usize,
    max: Vec<usize>,
    tag: Vec<usize>,
}

impl MaxTree {
    fn new(leaves: usize) -> Self {
        let n = leaves.max(1).next_power_of_two();
        MaxTree {
            n,
            max: vec![0; 2 * n],
            tag: vec![0; 2 * n],
        }
    }

    fn raise(&mut self, l: usize, r: usize, v: usize) {
        if l >= r {
            return;
        }
        let (mut a, mut b) = (l + self.n, r + self.n);
        while a < b {
            if a & 1 == 1 {
                self.max[a] = self.max[a].max(v);
                self.tag[a] = self.tag[a].max(v);
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                self.max[b] = self.max[b].max(v);
                self.tag[b] = self.tag[b].max(v);
            }
            a >>= 1;
            b >>= 1;
        }
        for leaf in [l + self.n, r - 1 + self.n] {
            let mut k = leaf >> 1;
            // No early exit: a covering node on this path already holds v,
            // its ancestors may not.
            while k >= 1 {
                self.max[k] = self.max[k].max(v);
                k >>= 1;
            }
        }
    }

    fn query(&self, l: usize, r: usize) -> usize {
        if l >= r {
            return 0;
        }
        let mut res = 0;
        let (mut a, mut b) = (l + self.n, r + self.n);
        while a < b {
            if a & 1 == 1 {
                res = res.max(self.max[a]);
                a += 1;
            }
            if b & 1 == 1 {
                b -= 1;
                res = res.max(self.max[b]);
            }
            a >>= 1;
            b >>= 1;
        }
        for leaf in [l + self.n, r - 1 + self.n] {
            let mut k = leaf >> 1;
            while k >= 1 {
                res = res.max(self.tag[k]);
                k >>= 1;
            }
        }
        res
    }
}

/// Skyline placement of `bufs` (non-trivial ones; `span` from
/// [`sections`](super::interval::sections)), ties broken by `rank`.
pub(crate) fn skyline(
    bufs: &[Buffer],
    span: &[(u32, u32)],
    nsec: usize,
    order: &[usize],
) -> Placement {
    let n = bufs.len();
    let mut rank = vec![0u32; n];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as u32;
    }
    let mut tree = MaxTree::new(nsec);
    let mut heap: BinaryHeap<Reverse<(usize, u32, u32)>> =
        (0..n).map(|i| Reverse((0, rank[i], i as u32))).collect();
    let mut offsets = vec![0usize; n];
    let mut height = 0;
    while let Some(Reverse((c, r, i))) = heap.pop() {
        let (lo, hi) = span[i as usize];
        let now = tree.query(lo as usize, hi as usize);
        // A stale key goes back only if another buffer now comes first.
        if now > c && heap.peek().is_some_and(|Reverse(t)| (now, r, i) > *t) {
            heap.push(Reverse((now, r, i)));
            continue;
        }
        let top = now + bufs[i as usize].size;
        offsets[i as usize] = now;
        height = height.max(top);
        tree.raise(lo as usize, hi as usize, top);
    }
    Placement { offsets, height }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::interval::sections;
    use crate::planner::validate::validate_placement;

    #[test]
    fn tree_matches_a_plain_array() {
        let mut tree = MaxTree::new(37);
        let mut plain = [0usize; 37];
        let mut seed = 7u64;
        for step in 0..2000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let l = (seed >> 33) as usize % 37;
            let r = l + 1 + (seed >> 40) as usize % (37 - l);
            if step % 2 == 0 {
                let v = (seed >> 20) as usize % 100;
                tree.raise(l, r, v);
                for x in &mut plain[l..r] {
                    *x = (*x).max(v);
                }
            } else {
                assert_eq!(tree.query(l, r), plain[l..r].iter().copied().max().unwrap());
            }
        }
    }

    #[test]
    fn skyline_placements_are_valid() {
        let bufs: Vec<Buffer> = (0..20)
            .map(|i| Buffer::new(i % 7, i % 7 + 1 + i % 4, 1 + (i * 13) % 9))
            .collect();
        let (span, nsec) = sections(&bufs);
        let order: Vec<usize> = (0..bufs.len()).collect();
        let p = skyline(&bufs, &span, nsec, &order);
        assert_eq!(validate_placement(&bufs, &p, 1), Ok(()));
    }
}
