//! Branch and bound over canonical placements.
//!
//! Any valid placement can be pushed down until every buffer sits at offset 0
//! or on top of a buffer it conflicts with, without raising the height. Sort
//! such a *canonical* placement by (offset, rank) and place buffers in that
//! order: each lands exactly on its *candidate*, the highest top among the
//! placed buffers it conflicts with. So the search only decides which buffer
//! comes next, and offsets never decrease along a branch:
//!
//! * at a node, `x` is the lowest candidate among the buffers still allowed;
//!   the children place one of the buffers whose candidate is `x` (best rank
//!   first), and a last child places none of them at `x`;
//! * a child that places buffer `b_i` forbids `b_0..b_{i-1}` at `x` (those
//!   orders were explored by the earlier siblings), and buffers identical to
//!   an explored sibling are skipped;
//! * every future offset is at least `x`, so a section (elementary time
//!   segment) whose floor plus the bytes still to place in it exceeds the
//!   capacity prunes the node; so does a buffer whose candidate plus size
//!   exceeds it.
//!
//! * when the unplaced buffers split into groups that share no section
//!   (components), each is searched on its own: once one is placed, the
//!   alternatives inside it are cut, since they cannot help the others.
//!
//! A run answers one question: is there a placement at or below a capacity?
//! It ends at the first one found, when the budget runs out, or when the
//! tree is exhausted, which proves there is none.
//!
//! The decision search ([`decide`](super::decide)) replaced it in
//! [`solve`](super::solve): given the last eighth of the search budget
//! (1 000 000 nodes in all) it left every MiniMalloc instance A–K at the
//! same height. It stays as the independent oracle of `decide`'s tests
//! (built for tests only).

use super::interval::Buffer;

use super::budget::{Budget, Outcome};

enum Undo {
    Cand(u32, usize),
    MinOff(u32, usize),
    Floor(u32, usize),
    Place(u32),
}

struct Frame {
    x: usize,
    /// Whether the last child (placing none of the kids at x) is allowed.
    skip: bool,
    kids: (usize, usize),
    next: usize,
    mark: usize,
    /// Sections this frame branches in: one independent component.
    range: (u32, u32),
}

/// The search state over the non-trivial buffers of a problem.
pub(crate) struct Search<'a> {
    bufs: &'a [Buffer],
    adj: &'a [Vec<u32>],
    span: &'a [(u32, u32)],
    rank: Vec<u32>,
    class: Vec<u32>,
    cand: Vec<usize>,
    minoff: Vec<usize>,
    offset: Vec<usize>,
    placed: Vec<bool>,
    unplaced: usize,
    floor: Vec<usize>,
    rem: Vec<usize>,
    trail: Vec<Undo>,
    kids: Vec<u32>,
    stack: Vec<Frame>,
    low: Vec<usize>,
    /// Unplaced buffers (any order) and each buffer's index in it.
    list: Vec<u32>,
    pos: Vec<u32>,
    effs: Vec<(usize, u32)>,
    next: Vec<u32>,
    packed: Vec<u64>,
    count: Vec<i32>,
    /// Largest height a solution may have.
    cap: usize,
    pub(crate) nodes: u64,
    pub(crate) best: Option<(Vec<usize>, usize)>,
}

impl<'a> Search<'a> {
    /// `order` ranks the buffers: earlier ones are tried first among equals.
    pub(crate) fn new(
        bufs: &'a [Buffer],
        adj: &'a [Vec<u32>],
        span: &'a [(u32, u32)],
        sections: usize,
        order: &[usize],
    ) -> Self {
        let n = bufs.len();
        let mut rank = vec![0u32; n];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r as u32;
        }
        // Identical buffers get one class: trying one after another failed is useless.
        let mut by_shape: Vec<usize> = (0..n).collect();
        by_shape.sort_unstable_by_key(|&i| (bufs[i].lower, bufs[i].upper, bufs[i].size, i));
        let mut class = vec![0u32; n];
        for w in 1..n {
            let (p, i) = (by_shape[w - 1], by_shape[w]);
            class[i] = if bufs[p] == bufs[i] {
                class[p]
            } else {
                w as u32
            };
        }
        let mut rem = vec![0usize; sections];
        for (i, b) in bufs.iter().enumerate() {
            for s in span[i].0..span[i].1 {
                rem[s as usize] += b.size;
            }
        }
        Search {
            bufs,
            adj,
            span,
            rank,
            class,
            cand: vec![0; n],
            minoff: vec![0; n],
            offset: vec![0; n],
            placed: vec![false; n],
            unplaced: n,
            floor: vec![0; sections],
            rem,
            trail: Vec::new(),
            kids: Vec::new(),
            stack: Vec::new(),
            low: Vec::new(),
            list: (0..n as u32).collect(),
            pos: (0..n as u32).collect(),
            effs: Vec::new(),
            next: Vec::new(),
            packed: Vec::new(),
            count: Vec::new(),
            cap: usize::MAX,
            nodes: 0,
            best: None,
        }
    }

    fn undo_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Undo::Cand(i, v)) => self.cand[i as usize] = v,
                Some(Undo::MinOff(i, v)) => self.minoff[i as usize] = v,
                Some(Undo::Floor(s, v)) => self.floor[s as usize] = v,
                Some(Undo::Place(i)) => {
                    let i = i as usize;
                    self.placed[i] = false;
                    let p = self.pos[i] as usize;
                    if p < self.list.len() {
                        let moved = self.list[p];
                        self.pos[moved as usize] = self.list.len() as u32;
                        self.list.push(moved);
                        self.list[p] = i as u32;
                    } else {
                        self.list.push(i as u32);
                    }
                    self.unplaced += 1;
                    let (lo, hi) = self.span[i];
                    for s in lo..hi {
                        self.rem[s as usize] += self.bufs[i].size;
                    }
                }
                None => break,
            }
        }
    }

    /// Places buffer `i` at `x`; false when a neighbour can no longer fit.
    fn place(&mut self, i: usize, x: usize) -> bool {
        let size = self.bufs[i].size;
        let top = x + size;
        self.placed[i] = true;
        let p = self.pos[i] as usize;
        let last = self.list.pop().unwrap_or(i as u32);
        if last as usize != i {
            self.list[p] = last;
            self.pos[last as usize] = p as u32;
        }
        self.unplaced -= 1;
        self.offset[i] = x;
        self.trail.push(Undo::Place(i as u32));
        let (lo, hi) = self.span[i];
        for s in lo..hi {
            let s = s as usize;
            self.trail.push(Undo::Floor(s as u32, self.floor[s]));
            self.floor[s] = top;
            self.rem[s] -= size;
        }
        let mut ok = true;
        for &j in &self.adj[i] {
            let j = j as usize;
            if !self.placed[j] && self.cand[j] < top {
                self.trail.push(Undo::Cand(j as u32, self.cand[j]));
                self.cand[j] = top;
                ok &= top + self.bufs[j].size <= self.cap;
            }
        }
        ok
    }

    /// The runs of sections in `range` that still have bytes to place,
    /// pushed on `out`.
    fn runs(&self, (a, b): (u32, u32), out: &mut Vec<(u32, u32)>) {
        let mut s = a;
        while s < b {
            if self.rem[s as usize] == 0 {
                s += 1;
                continue;
            }
            let start = s;
            while s < b && self.rem[s as usize] > 0 {
                s += 1;
            }
            out.push((start, s));
        }
    }

    /// Opens a node branching inside `range`: `None` when it is a leaf
    /// (solution or dead end).
    fn expand(&mut self, mut range: (u32, u32)) -> Option<Frame> {
        self.nodes += 1;
        if self.unplaced == 0 {
            let height = (0..self.bufs.len())
                .map(|i| self.offset[i] + self.bufs[i].size)
                .max()
                .unwrap_or(0);
            if height <= self.cap {
                self.best = Some((self.offset.clone(), height));
            }
            return None;
        }
        let mut runs: Vec<(u32, u32)> = Vec::new();
        self.runs(range, &mut runs);
        if runs.is_empty() {
            // The component is placed. Its frames' alternatives cannot help
            // the other components: cut them, and go on in the innermost
            // enclosing range that still has work.
            let mut k = self.stack.len();
            while k > 0 {
                k -= 1;
                self.runs(self.stack[k].range, &mut runs);
                if !runs.is_empty() {
                    break;
                }
                let f = &mut self.stack[k];
                f.next = f.kids.1 - f.kids.0 + 1;
                f.skip = false;
            }
            if runs.is_empty() {
                self.runs((0, self.rem.len() as u32), &mut runs);
            }
        }
        // Branch in the component with the most pressure first (fail first).
        let pressure = |&(a, b): &(u32, u32)| {
            (a..b)
                .map(|s| self.floor[s as usize] + self.rem[s as usize])
                .max()
                .unwrap_or(0)
        };
        let mut best_run = runs[0];
        let mut best_p = pressure(&best_run);
        for r in &runs[1..] {
            let p = pressure(r);
            if p > best_p {
                best_p = p;
                best_run = *r;
            }
        }
        if best_p > self.cap {
            return None;
        }
        range = best_run;
        let (span, cand, minoff) = (self.span, &self.cand, &self.minoff);
        let inside = |i: usize| span[i].0 >= range.0 && span[i].1 <= range.1;
        let mut x = usize::MAX;
        for &i in &self.list {
            let i = i as usize;
            if cand[i] >= minoff[i] && cand[i] < x && inside(i) {
                x = cand[i];
            }
        }
        if x == usize::MAX {
            return None;
        }
        // Lowest offset each unplaced buffer can still take. Dominance: a
        // buffer that must go above x but fits in the free gap under x
        // could be moved down; that placement is explored elsewhere.
        self.effs.clear();
        for &i in &self.list {
            let iu = i as usize;
            if !inside(iu) {
                continue;
            }
            let c = cand[iu];
            let eff = if c >= minoff[iu] {
                c
            } else {
                if c + self.bufs[iu].size <= x {
                    return None;
                }
                minoff[iu].max(x + 1)
            };
            self.effs.push((eff, i));
        }
        // Each section's bytes still to place start no lower than the lowest
        // offset any of its unplaced buffers can take: paint sections in
        // increasing offset order, skipping painted ones.
        if self.bufs.len() < 1 << 16 && x < 1 << 47 && self.cap < 1 << 47 {
            // Offsets above the capacity never matter: clamp, pack, sort as u64.
            let cap = self.cap as u64 + 1;
            let mut packed: Vec<u64> = std::mem::take(&mut self.packed);
            packed.clear();
            packed.extend(
                self.effs
                    .iter()
                    .map(|&(e, i)| ((e as u64).min(cap) << 16) | i as u64),
            );
            packed.sort_unstable();
            for (slot, &k) in self.effs.iter_mut().zip(&packed) {
                *slot = ((k >> 16) as usize, (k & 0xffff) as u32);
            }
            self.packed = packed;
        } else {
            self.effs.sort_unstable();
        }
        let (a, b) = (range.0 as usize, range.1 as usize);
        self.low.clear();
        self.low.resize(b - a, usize::MAX);
        self.next.clear();
        self.next.extend(0..=(b - a) as u32);
        fn find(next: &mut [u32], mut k: u32) -> u32 {
            while next[k as usize] != k {
                let up = next[next[k as usize] as usize];
                next[k as usize] = up;
                k = up;
            }
            k
        }
        for &(eff, i) in &self.effs {
            let (lo, hi) = (span[i as usize].0 - range.0, span[i as usize].1 - range.0);
            let mut k = find(&mut self.next, lo);
            while k < hi {
                self.low[k as usize] = eff;
                self.next[k as usize] = k + 1;
                k = find(&mut self.next, k + 1);
            }
        }
        // A section whose stack starts at x with no slack must get one of
        // its buffers at x: branch only on those, for the section with
        // the fewest (no "none at x" child: it would leave a gap there).
        let mut tight = false;
        for s in a..b {
            let r = self.rem[s];
            let base = self.low[s - a].max(self.floor[s]);
            if r > 0 && base + r > self.cap {
                return None;
            }
            if r > 0 && base == x && base + r == self.cap {
                tight = true;
            }
        }
        let start = self.kids.len();
        for &(eff, i) in &self.effs {
            if eff > x {
                break;
            }
            if self.cand[i as usize] == x {
                self.kids.push(i);
            }
        }
        let mut skip = true;
        if tight {
            self.count.clear();
            self.count.resize(b - a + 1, 0);
            for &i in &self.kids[start..] {
                let (lo, hi) = span[i as usize];
                self.count[(lo - range.0) as usize] += 1;
                self.count[(hi - range.0) as usize] -= 1;
            }
            let mut run = 0i32;
            let mut pick: Option<(i32, usize)> = None;
            for s in a..b {
                run += self.count[s - a];
                let base = self.low[s - a].max(self.floor[s]);
                let r = self.rem[s];
                if r > 0 && base == x && base + r == self.cap && pick.is_none_or(|(c, _)| run < c) {
                    pick = Some((run, s));
                }
            }
            if let Some((c, s)) = pick {
                if c == 0 {
                    self.kids.truncate(start);
                    return None;
                }
                let s = s as u32;
                let mut w = start;
                for k in start..self.kids.len() {
                    let i = self.kids[k] as usize;
                    if span[i].0 <= s && s < span[i].1 {
                        self.kids[w] = self.kids[k];
                        w += 1;
                    }
                }
                self.kids.truncate(w);
                skip = false;
            }
        }
        let rank = &self.rank;
        self.kids[start..].sort_unstable_by_key(|&i| rank[i as usize]);
        Some(Frame {
            x,
            skip,
            kids: (start, self.kids.len()),
            next: 0,
            mark: self.trail.len(),
            range,
        })
    }

    /// Looks for a placement of height at most `cap`; stops at the first one
    /// (left in `best`), when the tree is exhausted, or when the budget ends.
    pub(crate) fn run(&mut self, cap: usize, budget: &Budget<'_>) -> Outcome {
        self.cap = cap;
        self.best = None;
        self.stack.clear();
        self.kids.clear();
        let all = (0, self.rem.len() as u32);
        if let Some(f) = self.expand(all) {
            self.stack.push(f);
        }
        let mut check = 0u64;
        let outcome = loop {
            if self.best.is_some() {
                break Outcome::Found;
            }
            let Some(top) = self.stack.len().checked_sub(1) else {
                break Outcome::Exhausted;
            };
            if self.nodes >= budget.max_nodes {
                break Outcome::OutOfBudget;
            }
            if self.nodes >= check {
                check = self.nodes + 4096;
                if budget.stop.is_some_and(|f| f()) {
                    break Outcome::OutOfBudget;
                }
            }
            let f = &mut self.stack[top];
            let (x, (k0, k1), i, mark, range, skip) =
                (f.x, f.kids, f.next, f.mark, f.range, f.skip);
            self.undo_to(mark);
            if k0 + i > k1 || (k0 + i == k1 && !skip) {
                self.kids.truncate(k0);
                self.stack.pop();
                continue;
            }
            let f = &mut self.stack[top];
            f.next += 1;
            if i > 0 {
                // The previous sibling's orders are explored: forbid it at x.
                let prev = self.kids[k0 + i - 1] as usize;
                self.trail
                    .push(Undo::MinOff(prev as u32, self.minoff[prev]));
                self.minoff[prev] = x + 1;
                self.stack[top].mark = self.trail.len();
            }
            if k0 + i < k1 {
                let b = self.kids[k0 + i] as usize;
                let cls = self.class[b];
                if self.kids[k0..k0 + i]
                    .iter()
                    .any(|&p| self.class[p as usize] == cls)
                {
                    continue;
                }
                if !self.place(b, x) {
                    continue;
                }
            }
            if let Some(child) = self.expand(range) {
                self.stack.push(child);
            }
        };
        self.undo_to(0);
        outcome
    }
}
