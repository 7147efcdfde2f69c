//! Online best fit: the buffers in start order, each in the smallest free
//! gap among the buffers live at its start (an allocator's view of the
//! trace). O(n log n) whatever the number of conflicting pairs, so it is
//! the pass that always completes on very large traces (where the skyline
//! may not finish in the budget and the fits meet billions of pairs).

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::constructive::start_order;
use super::interval::{Buffer, Placement};
use super::radix::sort_by_key;

/// Hashes an offset by one multiplication (offsets are not adversarial:
/// the planner makes them); the standard hasher costs more than the
/// lookups it serves.
#[derive(Default)]
struct OffsetHasher(u64);

impl Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, x: usize) {
        self.0 = (x as u64 ^ self.0)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

type OffsetMap = HashMap<usize, usize, BuildHasherDefault<OffsetHasher>>;

/// Free space below the live buffers' highest top: gaps by size (ordered,
/// for the best fit), and by start and by end (hashed, to merge a freed
/// block with its free neighbours in O(1)).
struct Gaps {
    by_size: BTreeSet<(usize, usize)>,
    /// Offset -> length.
    by_start: OffsetMap,
    /// End -> offset.
    by_end: OffsetMap,
    /// Everything from here up is free.
    top: usize,
}

impl Gaps {
    fn remove(&mut self, offset: usize, len: usize) {
        self.by_size.remove(&(len, offset));
        self.by_start.remove(&offset);
        self.by_end.remove(&(offset + len));
    }

    fn insert(&mut self, offset: usize, len: usize) {
        self.by_size.insert((len, offset));
        self.by_start.insert(offset, len);
        self.by_end.insert(offset + len, offset);
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
        if let Some(&o) = self.by_end.get(&offset) {
            self.remove(o, offset - o);
            offset = o;
        }
        if let Some(&len) = self.by_start.get(&end) {
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
const STOP_EVERY: usize = if cfg!(miri) { 64 } else { 4096 };

/// Places `bufs` by online best fit (see the module docs; a trivial
/// buffer gets offset 0 and no bytes); `None` when `stop` said so first.
pub(crate) fn online_best_fit(
    bufs: &[Buffer],
    stop: Option<&dyn Fn() -> bool>,
) -> Option<Placement> {
    let mut offsets = vec![0usize; bufs.len()];
    // Buffers leave in end order, ties by index (a stable radix sort): a
    // buffer ending by the next start began before it, so it is placed.
    let mut ends: Vec<(u64, u32)> = bufs
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.is_trivial())
        .map(|(i, b)| (b.upper as u64, i as u32))
        .collect();
    sort_by_key(&mut ends);
    let mut ends = ends.into_iter().map(|e| e.1 as usize).peekable();
    let mut gaps = Gaps {
        by_size: BTreeSet::new(),
        by_start: OffsetMap::default(),
        by_end: OffsetMap::default(),
        top: 0,
    };
    let mut height = 0;
    for (k, i) in start_order(bufs).into_iter().enumerate() {
        if k % STOP_EVERY == STOP_EVERY - 1 && stop.is_some_and(|f| f()) {
            return None;
        }
        let b = bufs[i];
        if b.is_trivial() {
            continue;
        }
        while let Some(j) = ends.next_if(|&j| bufs[j].upper <= b.lower) {
            gaps.free(offsets[j], bufs[j].size);
        }
        let o = gaps.alloc(b.size);
        offsets[i] = o;
        height = height.max(o + b.size);
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
