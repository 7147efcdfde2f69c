//! Turns a recorded run into offsets inside one block.
//!
//! Every recorded buffer that was freed during the run becomes an interval
//! `[allocation event, free event)` of its capacity. Two placements are
//! made and the lower one kept:
//!
//! * a replay of the run through a best-fit offset allocator with
//!   coalescing (O(n log n): a 600 000-allocation run packs in well under a
//!   second), which respects each buffer's own alignment;
//! * for small runs (at most [`SOLVE_LIMIT`] buffers, alignments up to 64),
//!   the planner's own [`solve`] with a node budget
//!   of [`SOLVE_NODES`] and [`SOLVE_TIME`], which often reaches the lower bound where the replay does not.

use super::recorder::Event;
use crate::planner::{solve, Budget, Buffer, SolveOptions};
use std::collections::{BTreeMap, BTreeSet};

/// Marks a recorded allocation that has no offset (served from classes).
pub(crate) const UNPLANNED: usize = usize::MAX;

/// Runs with more planned buffers than this are packed by the replay only.
pub(crate) const SOLVE_LIMIT: usize = 2000;

/// The planner's node budget at a boundary.
pub(crate) const SOLVE_NODES: u64 = 200_000;

/// The planner's search also stops after this long: the boundary's caller
/// waits for its plan (with the arena lock released), so its stall is
/// bounded (the replay's placement stands whenever the search finds
/// nothing lower in time).
pub(crate) const SOLVE_TIME: std::time::Duration = std::time::Duration::from_millis(150);

/// Offsets for one recorded run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Packed {
    /// One per recorded allocation; [`UNPLANNED`] for buffers never freed.
    pub offsets: Vec<usize>,
    /// Bytes the block needs.
    pub height: usize,
    /// Alignment the block's base needs (the largest planned alignment).
    pub align: usize,
}

/// Packs the planned buffers of `events` (`caps[k]` bytes, aligned to
/// `aligns[k]`).
pub(crate) fn pack(events: &[Event], caps: &[usize], aligns: &[usize]) -> Packed {
    let n = caps.len();
    let mut lower = vec![0usize; n];
    let mut upper = vec![usize::MAX; n];
    let mut k = 0usize;
    for (t, e) in events.iter().enumerate() {
        match *e {
            Event::Alloc { .. } => {
                lower[k] = t;
                k += 1;
            }
            Event::Free { k: f } => upper[f as usize] = t,
        }
    }
    let planned = |k: usize| upper[k] != usize::MAX && caps[k] > 0;
    let align = (0..n)
        .filter(|&k| planned(k))
        .map(|k| aligns[k])
        .max()
        .unwrap_or(1)
        .max(16);
    let mut best = replay(events, caps, aligns, &planned);
    let count = (0..n).filter(|&k| planned(k)).count();
    if count <= SOLVE_LIMIT && align <= 64 {
        if let Some(p) = with_planner(&lower, &upper, caps, &planned) {
            if p.height < best.height {
                best = p;
            }
        }
    }
    best.align = align;
    best
}

fn align_up(x: usize, a: usize) -> usize {
    (x + (a - 1)) & !(a - 1)
}

/// The planner on sizes rounded to 64 (so every offset it returns is a
/// multiple of 64); `None` if an offset is not (never expected).
fn with_planner(
    lower: &[usize],
    upper: &[usize],
    caps: &[usize],
    planned: &dyn Fn(usize) -> bool,
) -> Option<Packed> {
    let keep: Vec<usize> = (0..caps.len()).filter(|&k| planned(k)).collect();
    let bufs: Vec<Buffer> = keep
        .iter()
        .map(|&k| Buffer::new(lower[k], upper[k], align_up(caps[k], 64)))
        .collect();
    let opts = SolveOptions {
        max_nodes: SOLVE_NODES,
        ..SolveOptions::default()
    };
    let start = std::time::Instant::now();
    let stop = move || start.elapsed() > SOLVE_TIME;
    let budget = Budget {
        max_nodes: opts.max_nodes,
        stop: Some(&stop),
    };
    let sol = solve(&bufs, &opts, &budget).ok()?;
    let mut offsets = vec![UNPLANNED; caps.len()];
    for (i, &k) in keep.iter().enumerate() {
        let o = sol.placement.offsets[i];
        if o % 64 != 0 {
            return None;
        }
        offsets[k] = o;
    }
    Some(Packed {
        offsets,
        height: sol.placement.height,
        align: 64,
    })
}

/// A best-fit allocator over offsets with coalescing: free ranges by offset
/// and by (length, offset); the range that reaches the top is not kept but
/// lowers the top.
#[derive(Default)]
struct Space {
    by_off: BTreeMap<usize, usize>,
    by_len: BTreeSet<(usize, usize)>,
    top: usize,
    height: usize,
}

impl Space {
    fn insert(&mut self, off: usize, len: usize) {
        if len > 0 {
            self.by_off.insert(off, len);
            self.by_len.insert((len, off));
        }
    }

    fn remove(&mut self, off: usize, len: usize) {
        self.by_off.remove(&off);
        self.by_len.remove(&(len, off));
    }

    fn take(&mut self, len: usize, align: usize) -> usize {
        // Best fit among the first few ranges long enough (alignment may
        // make the shortest ones unusable).
        let fit = self
            .by_len
            .range((len, 0)..)
            .take(8)
            .copied()
            .find(|&(flen, foff)| align_up(foff, align) + len <= foff + flen);
        if let Some((flen, foff)) = fit {
            self.remove(foff, flen);
            let start = align_up(foff, align);
            self.insert(foff, start - foff);
            self.insert(start + len, foff + flen - start - len);
            return start;
        }
        let start = align_up(self.top, align);
        self.insert(self.top, start - self.top);
        self.top = start + len;
        self.height = self.height.max(self.top);
        start
    }

    fn give(&mut self, mut off: usize, mut len: usize) {
        if let Some((&p, &plen)) = self.by_off.range(..off).next_back() {
            if p + plen == off {
                self.remove(p, plen);
                off = p;
                len += plen;
            }
        }
        if let Some(&nlen) = self.by_off.get(&(off + len)) {
            self.remove(off + len, nlen);
            len += nlen;
        }
        if off + len == self.top {
            self.top = off;
        } else {
            self.insert(off, len);
        }
    }
}

fn replay(
    events: &[Event],
    caps: &[usize],
    aligns: &[usize],
    planned: &dyn Fn(usize) -> bool,
) -> Packed {
    let mut offsets = vec![UNPLANNED; caps.len()];
    let mut space = Space::default();
    let mut k = 0usize;
    for e in events {
        match *e {
            Event::Alloc { .. } => {
                if planned(k) {
                    offsets[k] = space.take(caps[k], aligns[k].max(16));
                }
                k += 1;
            }
            Event::Free { k: f } => {
                let f = f as usize;
                if offsets[f] != UNPLANNED {
                    space.give(offsets[f], caps[f]);
                }
            }
        }
    }
    Packed {
        offsets,
        height: space.height,
        align: 16,
    }
}
