//! First fit and best fit without conflict lists.
//!
//! Both place buffers one by one in a given order, each in a gap between
//! the *placed* buffers it conflicts with. Conflict lists cost memory in
//! the number of conflicting pairs (hundreds of millions on large traces),
//! so the placed buffers are found by a query instead: buffers sorted by
//! start, and a max tree over that order holding each placed buffer's end
//! (0 while unplaced). The buffers overlapping `[l, r)` are the placed ones
//! among those starting before `r` whose end is above `l`; the descent
//! skips every subtree whose largest end is at most `l`. Memory is O(n);
//! time O(n log n) plus the conflicting pairs met (each pair once, when the
//! later of the two is placed).

use super::interval::{Buffer, Placement};

/// The placed buffers, indexed by start time for overlap queries.
pub(crate) struct PlacedIndex {
    /// `lower` of the buffers in start order.
    starts: Vec<usize>,
    /// The buffer at each position of the start order.
    at: Vec<u32>,
    /// Position of each buffer in the start order.
    pos: Vec<u32>,
    /// Leaves (a power of two, at least 1).
    leaves: usize,
    /// `top[k]`: the largest `upper` of a placed buffer under node `k`.
    top: Vec<usize>,
}

impl PlacedIndex {
    /// An index over `bufs` (all non-trivial) with nothing placed.
    pub(crate) fn new(bufs: &[Buffer]) -> Self {
        let n = bufs.len();
        let mut at: Vec<u32> = (0..n as u32).collect();
        at.sort_unstable_by_key(|&i| (bufs[i as usize].lower, i));
        let mut pos = vec![0u32; n];
        for (p, &i) in at.iter().enumerate() {
            pos[i as usize] = p as u32;
        }
        let leaves = n.max(1).next_power_of_two();
        PlacedIndex {
            starts: at.iter().map(|&i| bufs[i as usize].lower).collect(),
            at,
            pos,
            leaves,
            top: vec![0; 2 * leaves],
        }
    }

    /// Marks buffer `i` (live until `upper`) as placed.
    pub(crate) fn insert(&mut self, i: usize, upper: usize) {
        let mut k = self.pos[i] as usize + self.leaves;
        while k >= 1 && self.top[k] < upper {
            self.top[k] = upper;
            k >>= 1;
        }
    }

    /// Calls `f` with every placed buffer live somewhere in `[l, r)`.
    pub(crate) fn overlapping(&self, l: usize, r: usize, f: &mut impl FnMut(u32)) {
        let end = self.starts.partition_point(|&s| s < r);
        // Depth-first over nodes (index, first leaf, width): a node is
        // entered when it starts before `end` and holds an end above `l`.
        let mut stack = [(0usize, 0usize, 0usize); 66];
        let mut len = 0;
        if end > 0 {
            stack[0] = (1, 0, self.leaves);
            len = 1;
        }
        while len > 0 {
            len -= 1;
            let (k, lo, w) = stack[len];
            if lo >= end || self.top[k] <= l {
                continue;
            }
            if w == 1 {
                f(self.at[lo]);
                continue;
            }
            let half = w / 2;
            stack[len] = (2 * k + 1, lo + half, half);
            stack[len + 1] = (2 * k, lo, half);
            len += 2;
        }
    }
}

/// How a buffer picks its gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The lowest gap that holds it.
    First,
    /// The smallest gap that holds it (lowest on ties), else on top.
    Best,
}

/// Calls to `stop` are this many buffers apart.
const STOP_EVERY: usize = if cfg!(miri) { 16 } else { 256 };

/// Places the non-trivial `bufs` in `order` by `fit`. `None` when `stop`
/// said so before the end.
pub(crate) fn place(
    bufs: &[Buffer],
    order: &[usize],
    fit: Fit,
    stop: Option<&dyn Fn() -> bool>,
) -> Option<Placement> {
    let mut index = PlacedIndex::new(bufs);
    let mut offsets = vec![0usize; bufs.len()];
    // Placed conflicts as `offset << 64 | top`: one integer compare a step.
    let mut taken: Vec<u128> = Vec::new();
    let mut height = 0;
    for (k, &i) in order.iter().enumerate() {
        if k % STOP_EVERY == STOP_EVERY - 1 && stop.is_some_and(|f| f()) {
            return None;
        }
        let b = bufs[i];
        taken.clear();
        index.overlapping(b.lower, b.upper, &mut |j| {
            let o = offsets[j as usize];
            taken.push((o as u128) << 64 | (o + bufs[j as usize].size) as u128);
        });
        taken.sort_unstable();
        let o = match fit {
            Fit::First => lowest_gap(&taken, b.size),
            Fit::Best => best_gap(&taken, b.size),
        };
        offsets[i] = o;
        height = height.max(o + b.size);
        index.insert(i, b.upper);
    }
    Some(Placement { offsets, height })
}

/// Splits a packed `offset << 64 | top`.
fn range(t: u128) -> (usize, usize) {
    ((t >> 64) as usize, t as u64 as usize)
}

/// Lowest offset where `size` bytes fit between the sorted packed ranges
/// of `taken`.
fn lowest_gap(taken: &[u128], size: usize) -> usize {
    let mut at = 0usize;
    for (lo, hi) in taken.iter().map(|&t| range(t)) {
        if lo >= at + size {
            break;
        }
        at = at.max(hi);
    }
    at
}

/// Start of the smallest gap between the sorted ranges of `taken` that
/// holds `size` bytes (the lowest on ties), else the top of them all.
fn best_gap(taken: &[u128], size: usize) -> usize {
    let (mut at, mut best, mut best_gap) = (0usize, None, usize::MAX);
    for (lo, hi) in taken.iter().map(|&t| range(t)) {
        if lo >= at && lo - at >= size && lo - at < best_gap {
            best_gap = lo - at;
            best = Some(at);
        }
        at = at.max(hi);
    }
    best.unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rng::Rng;
    use crate::planner::validate::validate_placement;

    #[test]
    fn overlap_query_matches_a_scan() {
        let mut rng = Rng::new(11);
        let bufs: Vec<Buffer> = (0..if cfg!(miri) { 60 } else { 300 })
            .map(|_| {
                let l = rng.below(100);
                Buffer::new(l, l + 1 + rng.below(20), 1 + rng.below(9))
            })
            .collect();
        let mut index = PlacedIndex::new(&bufs);
        let mut placed = vec![false; bufs.len()];
        for i in 0..bufs.len() {
            if i % 3 != 0 {
                index.insert(i, bufs[i].upper);
                placed[i] = true;
            }
            let (l, r) = (rng.below(110), 0);
            let r = r + l + 1 + rng.below(15);
            let mut got = Vec::new();
            index.overlapping(l, r, &mut |j| got.push(j as usize));
            got.sort_unstable();
            let want: Vec<usize> = (0..bufs.len())
                .filter(|&j| placed[j] && bufs[j].lower < r && bufs[j].upper > l)
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn both_fits_are_valid_and_stop_ends_them() {
        let mut rng = Rng::new(5);
        // Above STOP_EVERY, so that the stop callback is consulted.
        let bufs: Vec<Buffer> = (0..if cfg!(miri) { 2 * STOP_EVERY } else { 500 })
            .map(|_| {
                let l = rng.below(200);
                Buffer::new(l, l + 1 + rng.below(30), 1 + rng.below(100))
            })
            .collect();
        let order: Vec<usize> = (0..bufs.len()).rev().collect();
        for fit in [Fit::First, Fit::Best] {
            let p = place(&bufs, &order, fit, None).unwrap();
            assert_eq!(validate_placement(&bufs, &p, 1), Ok(()));
        }
        assert!(place(&bufs, &order, Fit::First, Some(&|| true)).is_none());
    }
}
