//! Online best fit: the buffers in start order, each in the smallest free
//! gap among the buffers live at its start (an allocator's view of the
//! trace). O(n log n) whatever the number of conflicting pairs, so it is
//! the pass that always completes on very large traces (where the skyline
//! may not finish in the budget and the fits meet billions of pairs).

use std::collections::BTreeMap;

use super::constructive::start_order;
use super::interval::{Buffer, Placement};
use super::radix::sort_pairs;

/// No block: the end of the address list.
const NONE: u32 = u32::MAX;

/// A stretch of `[0, top)`: a live buffer's bytes or a free gap.
#[derive(Clone, Copy)]
struct Block {
    offset: usize,
    len: usize,
    free: bool,
    /// The blocks below and above in address order.
    prev: u32,
    next: u32,
}

/// Memory below the live buffers' highest top, as a list of blocks in
/// address order (live buffers and the gaps between them; no two gaps
/// touch), and the gaps by size for the best fit. A freed buffer finds
/// its neighbours through the list, so merging costs no lookup.
struct Gaps {
    blocks: Vec<Block>,
    /// Slots of `blocks` no longer used.
    spare: Vec<u32>,
    /// `(len, offset)` of every gap -> its block.
    by_size: BTreeMap<(usize, usize), u32>,
    /// The highest block, or `NONE`.
    last: u32,
    /// Everything from here up is free.
    top: usize,
}

impl Gaps {
    fn new() -> Self {
        Gaps {
            blocks: Vec::new(),
            spare: Vec::new(),
            by_size: BTreeMap::new(),
            last: NONE,
            top: 0,
        }
    }

    fn add(&mut self, b: Block) -> u32 {
        match self.spare.pop() {
            Some(k) => {
                self.blocks[k as usize] = b;
                k
            }
            None => {
                self.blocks.push(b);
                (self.blocks.len() - 1) as u32
            }
        }
    }

    /// Takes block `k` out of the address list.
    fn unlink(&mut self, k: u32) {
        let Block { prev, next, .. } = self.blocks[k as usize];
        if prev != NONE {
            self.blocks[prev as usize].next = next;
        }
        if next != NONE {
            self.blocks[next as usize].prev = prev;
        } else {
            self.last = prev;
        }
        self.spare.push(k);
    }

    /// Places `size` bytes in the smallest gap that holds them (lowest on
    /// ties), else at the top: returns the offset and the block.
    fn alloc(&mut self, size: usize) -> (usize, u32) {
        let fit = self
            .by_size
            .range((size, 0)..)
            .next()
            .map(|(&k, &g)| (k, g));
        match fit {
            Some(((len, offset), g)) => {
                self.by_size.remove(&(len, offset));
                if len == size {
                    self.blocks[g as usize].free = false;
                    return (offset, g);
                }
                // The buffer takes the gap's low end; the rest stays free.
                let prev = self.blocks[g as usize].prev;
                let k = self.add(Block {
                    offset,
                    len: size,
                    free: false,
                    prev,
                    next: g,
                });
                if prev != NONE {
                    self.blocks[prev as usize].next = k;
                }
                let gap = &mut self.blocks[g as usize];
                gap.prev = k;
                gap.offset += size;
                gap.len -= size;
                self.by_size.insert((gap.len, gap.offset), g);
                (offset, k)
            }
            None => {
                let offset = self.top;
                let k = self.add(Block {
                    offset,
                    len: size,
                    free: false,
                    prev: self.last,
                    next: NONE,
                });
                if self.last != NONE {
                    self.blocks[self.last as usize].next = k;
                }
                self.last = k;
                self.top += size;
                (offset, k)
            }
        }
    }

    /// Gives block `k` back, merged with free neighbours (or the top).
    fn free(&mut self, k: u32) {
        let Block { prev, next, .. } = self.blocks[k as usize];
        if prev != NONE && self.blocks[prev as usize].free {
            let p = self.blocks[prev as usize];
            self.by_size.remove(&(p.len, p.offset));
            self.unlink(prev);
            let b = &mut self.blocks[k as usize];
            b.offset = p.offset;
            b.len += p.len;
        }
        if next != NONE && self.blocks[next as usize].free {
            let q = self.blocks[next as usize];
            self.by_size.remove(&(q.len, q.offset));
            self.unlink(next);
            self.blocks[k as usize].len += q.len;
        }
        let b = self.blocks[k as usize];
        if b.next == NONE {
            self.top = b.offset;
            self.unlink(k);
        } else {
            self.blocks[k as usize].free = true;
            self.by_size.insert((b.len, b.offset), k);
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
    let ends = sort_pairs(
        bufs.iter()
            .enumerate()
            .filter(|(_, b)| !b.is_trivial())
            .map(|(i, b)| (b.upper as u64, i as u32)),
    );
    let mut ends = ends.payloads().map(|j| j as usize).peekable();
    let mut gaps = Gaps::new();
    let mut block = vec![NONE; bufs.len()];
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
            gaps.free(block[j]);
        }
        let (o, at) = gaps.alloc(b.size);
        offsets[i] = o;
        block[i] = at;
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

    /// Online best fit the slow way: the gaps between the live buffers,
    /// the smallest that holds the buffer (lowest on ties), else the top.
    fn reference(bufs: &[Buffer]) -> Vec<usize> {
        let mut offsets = vec![0usize; bufs.len()];
        let mut live: Vec<usize> = Vec::new();
        for i in start_order(bufs) {
            let b = bufs[i];
            if b.is_trivial() {
                continue;
            }
            live.retain(|&j| bufs[j].upper > b.lower);
            let mut spans: Vec<(usize, usize)> = live
                .iter()
                .map(|&j| (offsets[j], offsets[j] + bufs[j].size))
                .collect();
            spans.sort_unstable();
            let (mut at, mut best) = (0, None::<(usize, usize)>);
            for &(lo, hi) in &spans {
                if lo >= at + b.size && best.is_none_or(|(len, _)| lo - at < len) {
                    best = Some((lo - at, at));
                }
                at = at.max(hi);
            }
            offsets[i] = best.map_or(at, |(_, o)| o);
            live.push(i);
        }
        offsets
    }

    #[test]
    fn online_best_fit_matches_the_slow_reference() {
        let mut rng = Rng::new(31);
        let (rounds, n) = if cfg!(miri) { (3, 40) } else { (60, 500) };
        for round in 0..rounds {
            let sizes = [4, 16, 600][round % 3];
            let bufs: Vec<Buffer> = (0..n)
                .map(|_| {
                    let l = rng.below(200);
                    Buffer::new(l, l + rng.below(40), rng.below(sizes))
                })
                .collect();
            let p = online_best_fit(&bufs, None).unwrap();
            let want = reference(&bufs);
            for (i, b) in bufs.iter().enumerate() {
                if !b.is_trivial() {
                    assert_eq!(p.offsets[i], want[i], "round {round}, buffer {i}");
                }
            }
        }
    }
}
