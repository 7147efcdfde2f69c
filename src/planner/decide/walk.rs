//! The decision search's walk: an explicit stack of open nodes and splits
//! (no recursion: a path is as deep as there are buffers).
//!
//! A *node* tries its candidates in (minimum offset, rank) order: it places
//! one and opens what follows, a node in the same range or, when that
//! buffer was the last one joining two sides, a *split* that searches the
//! parts one after the other (each ranked afresh). A popped frame is
//! resumed with its child's answer; it either pushes itself back with a new
//! child above it or answers its parent.

use super::{Decide, Status};

/// An open node: the candidates `cands[next..]` (its list runs from
/// `base` to the end) are still to try, in (offset, rank) order.
pub(super) struct Node {
    range: (u32, u32),
    set: (usize, usize),
    base: usize,
    next: usize,
    /// Trail length before the candidate being tried, and whether that
    /// candidate conflicted with no unplaced buffer.
    mark: usize,
    hatless: bool,
}

/// An open split: `count` parts from `parts[parts..]`, searched in turn.
pub(super) struct Split {
    /// Pool and part-list lengths before the split, restored at its end.
    pool: usize,
    parts: usize,
    count: usize,
    /// The next part, and where the ranks of the one searched are saved.
    next: usize,
    saved: usize,
}

/// One entry of the stack.
pub(super) enum Frame {
    Node(Node),
    Split(Split),
}

impl Decide<'_> {
    /// Searches the parts of `range` (buffers `pool[set]`) one after the
    /// other, with an explicit stack of open nodes and splits (no
    /// recursion: a path is as deep as there are buffers).
    pub(super) fn walk(
        &mut self,
        range: (u32, u32),
        set: (usize, usize),
        stop: Option<&dyn Fn() -> bool>,
    ) -> Status {
        self.frames.clear();
        self.parts.clear();
        let mut ret = match self.open_split(range, set) {
            Ok(frame) => {
                self.frames.push(frame);
                None
            }
            Err(status) => return status,
        };
        // A frame popped is resumed with its child's answer (`None` when
        // it was just opened); it either pushes itself back and a child
        // above it, or answers its parent.
        while let Some(frame) = self.frames.pop() {
            ret = match frame {
                Frame::Node(node) => self.resume_node(node, ret.take(), stop),
                Frame::Split(split) => self.resume_split(split, ret.take(), stop),
            };
        }
        ret.unwrap_or(Status::NotFound)
    }

    /// Opens a split of `range` into the parts no unplaced buffer connects
    /// (`Err(Found)` when nothing is left to place).
    fn open_split(&mut self, range: (u32, u32), set: (usize, usize)) -> Result<Frame, Status> {
        let pool = self.pool.len();
        for k in set.0..set.1 {
            let j = self.pool[k];
            if !self.placed[j as usize] {
                self.pool.push(j);
            }
        }
        let span = &self.span;
        self.pool[pool..].sort_unstable_by_key(|&j| span[j as usize].0);
        let parts = self.parts.len();
        let (mut start, mut at) = (range.0, pool);
        for k in range.0..range.1 {
            if k + 1 < range.1 && self.cuts[k as usize] != 0 {
                continue;
            }
            let end = k + 1;
            let from = at;
            while at < self.pool.len() && self.span[self.pool[at] as usize].0 < end {
                at += 1;
            }
            if at > from {
                self.parts.push(((start, end), (from, at)));
            }
            start = end;
        }
        if self.parts.len() == parts {
            self.pool.truncate(pool);
            return Err(Status::Found);
        }
        Ok(Frame::Split(Split {
            pool,
            parts,
            count: self.parts.len() - parts,
            next: 0,
            saved: 0,
        }))
    }

    /// Goes on with a split: the child's answer is for part `next - 1`
    /// (ranked afresh while it was searched); a part that fails fails the
    /// split, and when all are placed it succeeds.
    fn resume_split(
        &mut self,
        mut split: Split,
        mut child: Option<Status>,
        stop: Option<&dyn Fn() -> bool>,
    ) -> Option<Status> {
        loop {
            if let Some(status) = child.take() {
                let (_, (from, at)) = self.parts[split.parts + split.next - 1];
                for k in from..at {
                    self.rank[self.pool[k] as usize] = self.saved[split.saved + k - from];
                }
                self.saved.truncate(split.saved);
                if status != Status::Found {
                    self.pool.truncate(split.pool);
                    self.parts.truncate(split.parts);
                    return Some(status);
                }
            }
            if split.next == split.count {
                self.pool.truncate(split.pool);
                self.parts.truncate(split.parts);
                return Some(Status::Found);
            }
            let (range, (from, at)) = self.parts[split.parts + split.next];
            split.next += 1;
            split.saved = self.saved.len();
            for k in from..at {
                self.saved.push(self.rank[self.pool[k] as usize]);
            }
            self.rank_part(from, at);
            match self.open_search(range, (from, at), (0, 0), stop) {
                Ok(frame) => {
                    self.frames.push(Frame::Split(split));
                    self.frames.push(frame);
                    return None;
                }
                Err(status) => child = Some(status),
            }
        }
    }

    /// Opens a node over the unplaced buffers of `range` (`pool[set]`) that
    /// come after `last` = (offset, rank) in canonical order: `Err` when it
    /// answers at once (all placed, dead, or out of budget).
    fn open_search(
        &mut self,
        range: (u32, u32),
        set: (usize, usize),
        last: (usize, u32),
        stop: Option<&dyn Fn() -> bool>,
    ) -> Result<Frame, Status> {
        if self.nodes >= self.limit {
            return Err(Status::Abort);
        }
        self.nodes += 1;
        if self.nodes >= self.check_at {
            self.check_at = self.nodes + 4096;
            if stop.is_some_and(|f| f()) {
                self.limit = 0;
                return Err(Status::Abort);
            }
        }
        let mut min_top = usize::MAX;
        for &j in &self.pool[set.0..set.1] {
            let j = j as usize;
            if !self.placed[j] {
                min_top = min_top.min(self.minoff[j] + self.bufs[j].size);
            }
        }
        if min_top == usize::MAX {
            return Err(Status::Found);
        }
        // Section inference with a monotone floor: no later offset fits
        // above `cap - fullest`.
        let room = self
            .cap
            .checked_sub(self.fullest(range))
            .ok_or(Status::NotFound)?;
        let base = self.cands.len();
        for &j in &self.pool[set.0..set.1] {
            let ju = j as usize;
            let m = self.minoff[ju];
            if !self.placed[ju] && m < min_top && m <= room && (m, self.rank[ju]) >= last {
                self.cands.push((m, self.rank[ju], j));
            }
        }
        self.cands[base..].sort_unstable();
        Ok(Frame::Node(Node {
            range,
            set,
            base,
            next: base,
            mark: 0,
            hatless: false,
        }))
    }

    /// Goes on with a node: undoes the child's placement, stops on an
    /// answer (or after a hatless child), else places the next candidate
    /// and opens what follows it.
    fn resume_node(
        &mut self,
        mut node: Node,
        mut child: Option<Status>,
        stop: Option<&dyn Fn() -> bool>,
    ) -> Option<Status> {
        loop {
            if let Some(status) = child.take() {
                self.undo_to(node.mark);
                // A buffer under no unplaced one constrains nothing above
                // it: if the rest fails with it in place, it fails anyway.
                if status != Status::NotFound || node.hatless {
                    self.cands.truncate(node.base);
                    return Some(status);
                }
            }
            let mut next = None;
            while node.next < self.cands.len() {
                let (x, r, j) = self.cands[node.next];
                node.next += 1;
                let mark = self.trail.len();
                if self.place(j as usize, x) {
                    next = Some((x, r, j as usize, mark));
                    break;
                }
                self.undo_to(mark);
            }
            let Some((x, r, j, mark)) = next else {
                self.cands.truncate(node.base);
                return Some(Status::NotFound);
            };
            node.mark = mark;
            node.hatless = self.hatless;
            // Go on in the same range, or in each part of it when `j` was
            // the last buffer joining them.
            let (lo, hi) = self.span[j];
            let cut = (lo..hi.saturating_sub(1)).any(|k| self.cuts[k as usize] == 0);
            let opened = if cut {
                self.open_split(node.range, node.set)
            } else {
                self.open_search(node.range, node.set, (x, r), stop)
            };
            match opened {
                Ok(frame) => {
                    self.frames.push(Frame::Node(node));
                    self.frames.push(frame);
                    return None;
                }
                Err(status) => child = Some(status),
            }
        }
    }
}
