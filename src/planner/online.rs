//! Online best fit: the buffers in start order, each in the smallest free
//! gap among the buffers live at its start (an allocator's view of the
//! trace). O(n log n) whatever the number of conflicting pairs, so it is
//! the pass that always completes on very large traces (where the skyline
//! may not finish in the budget and the fits meet billions of pairs).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::constructive::start_order;
use super::interval::{Buffer, Placement};

/// Free space below the live buffers' highest top: gaps by size (for the
/// best fit) and by offset (to merge freed neighbours).
struct Gaps {
    by_size: BTreeSet<(usize, usize)>,
    by_offset: BTreeMap<usize, usize>,
    /// Everything from here up is free.
    top: usize,
}

impl Gaps {
    fn remove(&mut self, offset: usize, len: usize) {
        self.by_size.remove(&(len, offset));
        self.by_offset.remove(&offset);
    }

    fn insert(&mut self, offset: usize, len: usize) {
        self.by_size.insert((len, offset));
        self.by_offset.insert(offset, len);
    }

    /// The start of the smallest gap that holds `size` (lowest on ties),
    /// else the top.
    fn alloc(&mut self, size: usize) -> usize {
        match self.by_size.range((size, 0)..).next().copied() {
            Some((len, offset)) => {
                self.remove(offset, len);
                if len > size {
                    self.insert(offset + size, len - size);
                }
                offset
            }
            None => {
                self.top += size;
                self.top - size
            }
        }
    }

    /// Gives `[offset, offset + size)` back, merged with free neighbours.
    fn free(&mut self, mut offset: usize, size: usize) {
        let mut end = offset + size;
        if let Some((&o, &len)) = self.by_offset.range(..offset).next_back() {
            if o + len == offset {
                self.remove(o, len);
                offset = o;
            }
        }
        if let Some(&len) = self.by_offset.get(&end) {
            self.remove(end, len);
            end += len;
        }
        if end == self.top {
            self.top = offset;
        } else {
            self.insert(offset, end - offset);
        }
    }
}

/// Calls to `stop` are this many buffers apart.
const STOP_EVERY: usize = 4096;

/// Places the non-trivial `bufs` by online best fit (see the module docs);
/// `None` when `stop` said so first.
pub(crate) fn online_best_fit(
    bufs: &[Buffer],
    stop: Option<&dyn Fn() -> bool>,
) -> Option<Placement> {
    let mut offsets = vec![0usize; bufs.len()];
    let mut live: BinaryHeap<Reverse<(usize, u32)>> = BinaryHeap::new();
    let mut gaps = Gaps {
        by_size: BTreeSet::new(),
        by_offset: BTreeMap::new(),
        top: 0,
    };
    let mut height = 0;
    for (k, i) in start_order(bufs).into_iter().enumerate() {
        if k % STOP_EVERY == STOP_EVERY - 1 && stop.is_some_and(|f| f()) {
            return None;
        }
        let b = bufs[i];
        while let Some(&Reverse((end, j))) = live.peek() {
            if end > b.lower {
                break;
            }
            live.pop();
            let j = j as usize;
            gaps.free(offsets[j], bufs[j].size);
        }
        let o = gaps.alloc(b.size);
        offsets[i] = o;
        height = height.max(o + b.size);
        live.push(Reverse((b.upper, i as u32)));
    }
    Some(Placement { offsets, height })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::rng::Rng;
    use crate::planner::validate::validate_placement;

    #[test]
    fn online_best_fit_is_valid_and_reuses_freed_gaps() {
        // 0 and 1 live together; 2 starts when 0 is gone and takes its gap.
        let bufs = [
            Buffer::new(0, 2, 8),
            Buffer::new(0, 4, 8),
            Buffer::new(2, 4, 8),
        ];
        let p = online_best_fit(&bufs, None).unwrap();
        assert_eq!(p.height, 16);
        assert_eq!(p.offsets[2], p.offsets[0]);
        let mut rng = Rng::new(23);
        let (rounds, n) = if cfg!(miri) { (2, 40) } else { (30, 400) };
        for _ in 0..rounds {
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let l = rng.below(150);
                    Buffer::new(l, l + 1 + rng.below(30), 1 + rng.below(500))
                })
                .collect();
            let p = online_best_fit(&bufs, None).unwrap();
            assert_eq!(validate_placement(&bufs, &p, 1), Ok(()));
        }
        let many: Vec<Buffer> = (0..2 * STOP_EVERY)
            .map(|i| Buffer::new(i, i + 2, 4))
            .collect();
        assert!(online_best_fit(&many, Some(&|| true)).is_none());
    }
}
