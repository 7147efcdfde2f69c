//! The fixed-capacity decision search: "do the buffers fit in `cap` bytes?"
//!
//! The technique is MiniMalloc's (Moffitt, ASPLOS '23); the code is our own.
//! Buffers go in *canonical* order: each at its minimum offset (the highest
//! top among the placed buffers it conflicts with), and the sequence of
//! (offset, rank) pairs never decreases, so every canonical placement is
//! reached once. At a node the children are the unplaced buffers in
//! (minimum offset, rank) order:
//!
//! * *canonical*: a buffer whose (offset, rank) comes before the last placed
//!   one's is skipped (it can only be placed once a later buffer raises it);
//! * *dominance*: a buffer whose minimum offset is at or above the lowest
//!   top any unplaced buffer could reach is skipped: placing it would leave
//!   a gap below it that the other buffer could drop into;
//! * *section inference*: time is cut into sections (the buffers live just
//!   before some buffer dies: the maximal overlapping sets, so a section's
//!   buffers all conflict). A section's floor is the lowest minimum offset
//!   of its unplaced buffers (all sit above its placed ones); a node where
//!   some section's `max(floor, offset) + unplaced bytes` exceeds `cap` is
//!   cut (later offsets never go below the current one);
//! * *hatless*: a buffer conflicting with no unplaced buffer constrains
//!   nothing; if the rest fails with it placed, its siblings are not tried;
//! * *decomposition*: when no unplaced buffer crosses the boundary between
//!   two sections, the two sides are independent: each is searched on its
//!   own, and a failure on one side fails the node without trying the other
//!   side's alternatives.
//!
//! Minimum offsets, bytes per section and the crossing counts are updated
//! in place and undone on backtrack from a trail. Floors are not stored: a
//! raise can only break a section with less than the new top to spare, and
//! one scan of its buffers decides. A node scans its part's buffers once
//! and sorts only the few candidates below the dominance limit.
//!
//! [`Decide::run`] answers for one capacity under one ranking with a node
//! limit; the caller restarts it over rankings with growing limits (one
//! ranking alone is heavy-tailed).

mod walk;

use self::walk::Frame;
use super::budget::{Budget, Outcome};
use super::interval::Buffer;
use super::rng::Rng;

/// How one subtree ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Found,
    NotFound,
    Abort,
}

enum Undo {
    Place(u32),
    MinOff(u32, usize),
}

/// The decision search over the non-trivial buffers of a problem.
pub(crate) struct Decide<'a> {
    bufs: &'a [Buffer],
    adj: &'a [Vec<u32>],
    /// Sections `[lo, hi)` each buffer is live in.
    span: Vec<(u32, u32)>,
    /// Buffers live in each section.
    members: Vec<Vec<u32>>,
    /// Buffers crossing each boundary `k | k + 1`, before any is placed.
    cuts0: Vec<u32>,
    /// Bytes live in each section, before any is placed.
    total0: Vec<usize>,
    /// The ranking in use (an index into [`KEYS`]) and each buffer's place
    /// in it; a part split off is ranked afresh, with its sections' bytes
    /// at that point.
    h: usize,
    rank: Vec<u32>,
    /// Perturbs the rankings when set.
    rng: Option<Rng>,
    /// Ranks saved while a part is searched, and a scratch list of keys.
    saved: Vec<u32>,
    keyed: Vec<([u128; 3], u32)>,
    cap: usize,
    minoff: Vec<usize>,
    offset: Vec<usize>,
    placed: Vec<bool>,
    total: Vec<usize>,
    cuts: Vec<u32>,
    /// The buffers of each open part, one list after the other (a part's
    /// list may hold buffers placed since it was made: they are skipped).
    pool: Vec<u32>,
    trail: Vec<Undo>,
    /// Candidate lists of the open nodes, one after the other.
    cands: Vec<(usize, u32, u32)>,
    /// The open nodes and splits, innermost last, and the parts of the
    /// open splits: (sections, pool range of their buffers).
    frames: Vec<Frame>,
    parts: Vec<((u32, u32), (usize, usize))>,
    /// Whether the buffer last placed conflicts with no unplaced buffer.
    hatless: bool,
    limit: u64,
    check_at: u64,
    /// Nodes expanded over all runs.
    pub(crate) nodes: u64,
}

/// The clique sections: one per distinct end time `e`, holding the buffers
/// with `lower < e <= upper` (every maximal set of buffers live together is
/// one of them). Coarser than `interval::elementary_sections`, which cuts
/// time at every start and end: the decision search needs one section per
/// clique, the constructive passes one per elementary interval. Returns
/// each buffer's section range and the count.
fn clique_sections(bufs: &[Buffer]) -> (Vec<(u32, u32)>, usize) {
    let mut ends: Vec<usize> = bufs.iter().map(|b| b.upper).collect();
    ends.sort_unstable();
    ends.dedup();
    let span = bufs
        .iter()
        .map(|b| {
            let lo = ends.partition_point(|&e| e <= b.lower) as u32;
            let hi = ends.partition_point(|&e| e <= b.upper) as u32;
            (lo, hi)
        })
        .collect();
    (span, ends.len())
}

/// What the rankings look at.
struct Facts {
    width: u128,
    area: u128,
    fullest: u128,
}

/// MiniMalloc's three rankings (largest first): lifetime, area, fullest
/// section crossed, in three priorities.
const KEYS: [fn(&Facts) -> [u128; 3]; 3] = [
    |f| [f.width, f.area, f.fullest],
    |f| [f.fullest, f.area, f.width],
    |f| [f.fullest, f.width, f.area],
];

impl<'a> Decide<'a> {
    /// Prepares the search over `bufs` (all non-trivial) with conflict lists
    /// `adj`, under MiniMalloc's three rankings (by lifetime, area and the
    /// fullest section crossed, in three priorities).
    pub(crate) fn new(bufs: &'a [Buffer], adj: &'a [Vec<u32>]) -> Self {
        let n = bufs.len();
        let (span, nsec) = clique_sections(bufs);
        let mut members = vec![Vec::new(); nsec];
        let mut total0 = vec![0usize; nsec];
        let mut cuts0 = vec![0u32; nsec.saturating_sub(1)];
        for (i, &(lo, hi)) in span.iter().enumerate() {
            for s in lo..hi {
                members[s as usize].push(i as u32);
                total0[s as usize] += bufs[i].size;
            }
            for k in lo..hi.saturating_sub(1) {
                cuts0[k as usize] += 1;
            }
        }
        Decide {
            bufs,
            adj,
            span,
            members,
            cuts0,
            total0,
            h: 0,
            rank: vec![0; n],
            rng: None,
            saved: Vec::new(),
            keyed: Vec::new(),
            cap: 0,
            minoff: vec![0; n],
            offset: vec![0; n],
            placed: vec![false; n],
            total: Vec::new(),
            cuts: Vec::new(),
            pool: Vec::new(),
            trail: Vec::new(),
            cands: Vec::new(),
            frames: Vec::new(),
            parts: Vec::new(),
            hatless: false,
            limit: 0,
            check_at: 0,
            nodes: 0,
        }
    }

    /// Number of rankings [`Decide::run`] takes.
    pub(crate) fn rankings(&self) -> usize {
        KEYS.len()
    }

    /// Ranks the buffers `pool[from..to]` under ranking `self.h` (the
    /// fullest section a buffer crosses counts the bytes still unplaced).
    fn rank_part(&mut self, from: usize, to: usize) {
        self.keyed.clear();
        for &j in &self.pool[from..to] {
            let ju = j as usize;
            let (lo, hi) = self.span[ju];
            let fullest = self.total[lo as usize..hi as usize]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            let b = self.bufs[ju];
            let facts = Facts {
                width: (b.upper - b.lower) as u128,
                area: b.size as u128 * (b.upper - b.lower) as u128,
                fullest: fullest as u128,
            };
            self.keyed.push((KEYS[self.h](&facts), j));
        }
        self.keyed
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        if let Some(rng) = &mut self.rng {
            // A perturbed ranking: each buffer trades places with one up to
            // eight later, with probability 1/4.
            let m = self.keyed.len();
            for i in 0..m {
                let r = rng.next_u64();
                if r % 4 == 0 {
                    let j = (i + 1 + (r >> 2) as usize % 8).min(m - 1);
                    self.keyed.swap(i, j);
                }
            }
        }
        for (r, &(_, j)) in self.keyed.iter().enumerate() {
            self.rank[j as usize] = r as u32;
        }
    }

    /// Looks for a placement of height at most `cap` under ranking `h`,
    /// perturbed by `seed` unless it is 0, expanding at most
    /// `budget.max_nodes` nodes in all (counted over runs). `Found` gives
    /// the offsets.
    pub(crate) fn run(
        &mut self,
        cap: usize,
        (h, seed): (usize, u64),
        budget: &Budget<'_>,
    ) -> (Outcome, Option<Vec<usize>>) {
        let n = self.bufs.len();
        self.cap = cap;
        self.h = h % KEYS.len();
        self.rng = (seed != 0).then(|| Rng::new(seed));
        self.minoff.iter_mut().for_each(|m| *m = 0);
        self.placed.iter_mut().for_each(|p| *p = false);
        self.total.clone_from(&self.total0);
        self.cuts.clone_from(&self.cuts0);
        self.pool.clear();
        self.pool.extend(0..n as u32);
        self.trail.clear();
        self.cands.clear();
        self.limit = budget.max_nodes;
        self.check_at = self.nodes;
        let stop = budget.stop;
        let status = self.walk((0, self.total.len() as u32), (0, n), stop);
        match status {
            Status::Found => (Outcome::Found, Some(self.offset.clone())),
            Status::NotFound => (Outcome::Exhausted, None),
            Status::Abort => (Outcome::OutOfBudget, None),
        }
    }

    fn undo_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Undo::Place(i)) => {
                    let i = i as usize;
                    self.placed[i] = false;
                    let size = self.bufs[i].size;
                    let (lo, hi) = self.span[i];
                    for s in lo..hi {
                        self.total[s as usize] += size;
                    }
                    for k in lo..hi.saturating_sub(1) {
                        self.cuts[k as usize] += 1;
                    }
                }
                Some(Undo::MinOff(i, v)) => self.minoff[i as usize] = v,
                None => break,
            }
        }
    }

    /// Places buffer `i` at `x` and propagates; false when some buffer or
    /// section no longer fits under the capacity.
    fn place(&mut self, i: usize, x: usize) -> bool {
        let size = self.bufs[i].size;
        let top = x + size;
        if top > self.cap {
            return false;
        }
        self.placed[i] = true;
        self.offset[i] = x;
        self.trail.push(Undo::Place(i as u32));
        let (lo, hi) = self.span[i];
        for s in lo..hi {
            let s = s as usize;
            self.total[s] -= size;
        }
        for k in lo..hi.saturating_sub(1) {
            self.cuts[k as usize] -= 1;
        }
        self.hatless = true;
        // Sections whose floor may rise lie in the raised buffers' spans,
        // which all meet `i`'s: one range.
        let (mut from, mut to) = (u32::MAX, 0);
        for &j in &self.adj[i] {
            let j = j as usize;
            if self.placed[j] {
                continue;
            }
            self.hatless = false;
            if self.minoff[j] >= top {
                continue;
            }
            self.trail.push(Undo::MinOff(j as u32, self.minoff[j]));
            self.minoff[j] = top;
            if top + self.bufs[j].size > self.cap {
                return false;
            }
            from = from.min(self.span[j].0);
            to = to.max(self.span[j].1);
        }
        // A section's floor is its unplaced buffers' lowest minimum offset
        // (each sits on the section's placed ones); floor plus bytes must
        // fit. Only a section holding a raised buffer (now at `top`) can
        // have changed, and only one with less than `top` to spare can fail.
        for s in from as usize..to as usize {
            let t = self.total[s];
            if t == 0 || top + t <= self.cap {
                continue;
            }
            let spare = self.cap - t;
            let fits = self.members[s]
                .iter()
                .any(|&j| !self.placed[j as usize] && self.minoff[j as usize] <= spare);
            if !fits {
                return false;
            }
        }
        true
    }

    /// The most unplaced bytes in one section of `range`. Every floor
    /// plus its bytes is within the capacity at a node (each raise is
    /// checked where it happens), and all later offsets are at least the
    /// one being placed, `x`: so `x` plus this is the one bound left to
    /// check (a placed buffer's sections rise to at least `x + size` and
    /// lose `size` bytes, which leaves the sum at `x` plus their old bytes).
    fn fullest(&self, (a, b): (u32, u32)) -> usize {
        self.total[a as usize..b as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::greedy::conflicts;
    use crate::planner::interval::Placement;
    use crate::planner::validate::validate_placement;

    const CASES: usize = 400;

    /// The answer for `cap`, the same under every ranking (plain and
    /// perturbed); a placement found is checked.
    fn decide(bufs: &[Buffer], cap: usize) -> Outcome {
        let adj = conflicts(bufs);
        let mut d = Decide::new(bufs, &adj);
        let mut answers = Vec::new();
        for key in [(0, 0), (1, 0), (2, 0), (0, 0x9e37_79b9), (2, 12345)] {
            let (out, offs) = d.run(cap, key, &Budget::nodes(d.nodes + 1_000_000));
            if let Some(offs) = offs {
                let p = Placement::from_offsets(bufs, offs).unwrap();
                assert!(p.height <= cap);
                assert_eq!(validate_placement(bufs, &p, 1), Ok(()));
            }
            answers.push(out);
        }
        assert!(answers.iter().all(|&a| a == answers[0]), "{answers:?}");
        answers[0]
    }

    /// The lowest height the older branch and bound (`search.rs`, its own
    /// code) finds, scanning up from the bound: below it, its trees are
    /// exhausted.
    fn optimum(bufs: &[Buffer]) -> usize {
        let adj = conflicts(bufs);
        let (span, nsec) = crate::planner::interval::elementary_sections(bufs);
        let order: Vec<usize> = (0..bufs.len()).collect();
        let mut s = crate::planner::search::Search::new(bufs, &adj, &span, nsec, &order);
        let mut cap = crate::planner::lower_bound(bufs);
        loop {
            match s.run(cap, &Budget::nodes(s.nodes + 1_000_000)) {
                Outcome::Found => return cap,
                Outcome::Exhausted => cap += 1,
                Outcome::OutOfBudget => panic!("oracle out of budget: {bufs:?}"),
            }
        }
    }

    #[test]
    fn agrees_with_the_branch_and_bound() {
        // Seeded small instances: the decision flips exactly at the optimum.
        let mut rng = Rng::new(0x1234_5678_9abc_def1);
        let mut rand = move |m: usize| rng.below(m);
        let cases = if cfg!(miri) { 2 } else { CASES };
        for _ in 0..cases {
            let bufs: Vec<Buffer> = (0..2 + rand(10))
                .map(|_| {
                    let lo = rand(12);
                    Buffer::new(lo, lo + 1 + rand(6), 1 + rand(8))
                })
                .collect();
            let h = optimum(&bufs);
            assert_eq!(decide(&bufs, h), Outcome::Found, "{bufs:?}");
            assert_eq!(decide(&bufs, h - 1), Outcome::Exhausted, "{bufs:?}");
        }
    }

    #[test]
    fn independent_parts_are_solved_separately() {
        let bufs: Vec<Buffer> = (0..6)
            .map(|i| Buffer::new(2 * (i / 2), 2 * (i / 2) + 2, 1 + i % 2))
            .collect();
        assert_eq!(decide(&bufs, 3), Outcome::Found);
        assert_eq!(decide(&bufs, 2), Outcome::Exhausted);
    }

    #[test]
    fn a_deep_path_needs_no_deep_stack() {
        // A chain places buffer after buffer without a split: the path is
        // as deep as there are buffers, on a small thread stack.
        let n = if cfg!(miri) { 40 } else { 1000 };
        let out = std::thread::Builder::new()
            .stack_size(128 << 10)
            .spawn(move || {
                let bufs: Vec<Buffer> = (0..n).map(|i| Buffer::new(i, i + 3, 1 + i % 3)).collect();
                decide(&bufs, 9)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(out, Outcome::Found);
    }
}
