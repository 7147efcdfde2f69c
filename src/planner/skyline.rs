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

/// Range "raise to at least v" and range max over `n` leaves.
struct MaxTree {
    n: usize,
    max: Vec<usize>,
    tag: Vec<usize>,
}

impl MaxTree {
    fn new(n: usize) -> Self {
        let size = 4 * n.max(1);
        MaxTree {
            n,
            max: vec![0; size],
            tag: vec![0; size],
        }
    }

    fn raise(&mut self, l: usize, r: usize, v: usize) {
        self.raise_at(1, 0, self.n, l, r, v);
    }

    fn raise_at(&mut self, k: usize, lo: usize, hi: usize, l: usize, r: usize, v: usize) {
        if r <= lo || hi <= l {
            return;
        }
        self.max[k] = self.max[k].max(v);
        if l <= lo && hi <= r {
            self.tag[k] = self.tag[k].max(v);
            return;
        }
        let mid = (lo + hi) / 2;
        self.raise_at(2 * k, lo, mid, l, r, v);
        self.raise_at(2 * k + 1, mid, hi, l, r, v);
    }

    fn query(&self, l: usize, r: usize) -> usize {
        self.query_at(1, 0, self.n, l, r)
    }

    fn query_at(&self, k: usize, lo: usize, hi: usize, l: usize, r: usize) -> usize {
        if r <= lo || hi <= l {
            return 0;
        }
        if l <= lo && hi <= r {
            return self.max[k];
        }
        let mid = (lo + hi) / 2;
        self.tag[k]
            .max(self.query_at(2 * k, lo, mid, l, r))
            .max(self.query_at(2 * k + 1, mid, hi, l, r))
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
        if now > c {
            heap.push(Reverse((now, r, i)));
            continue;
        }
        let top = c + bufs[i as usize].size;
        offsets[i as usize] = c;
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
