//! Learned placement for the execution heap: a sequence of heap requests
//! and frees that ran once is planned with the lifetimes it showed, and a
//! later sequence that repeats it takes the planned offsets.
//!
//! Why: best fit knows no lifetimes. A long-lived buffer placed where a
//! short-lived one just was splits the free space, and a model with a
//! residual input beside short workspaces ends with its mark (the heap's
//! materialized bytes) well above the live peak (1.28x on the report's CNN
//! model; no online policy tried did better, `docs/design/execution-heap.md`).
//! A runtime repeats its runs, so the second run can know what the first
//! one showed.
//!
//! The unit is an *epoch*: the requests and frees between two moments
//! when no heap piece is live (a run of a model usually is one). What
//! happens at an epoch's end, under the arena's lock, in the free that
//! emptied the heap:
//!
//! - The epoch followed a plan to its end: nothing.
//! - The epoch took new memory (a cold heap request), stayed in the first
//!   segment, asked no alignment above a page, resized nothing, and no
//!   plan starts with its first request yet: the static planner packs its
//!   intervals (page units; a budget in search nodes, [`plan_nodes`], so a
//!   sequence gets the same plan on any machine; epochs of at most
//!   [`MAX_PLAN_ALLOCS`] allocations). A plan at least
//!   [`MIN_GAIN_DIV`]th lower than the epoch's own top is kept, and the
//!   first segment's pages above every kept plan (and above the top of
//!   every epoch that no plan serves) are released: a system call in an
//!   epoch that made them anyway.
//! - Otherwise the epoch's top joins `kept_high`, the floor below which
//!   nothing is ever released, so that an epoch no plan serves repeats
//!   warm.
//!
//! At an epoch's first request, the plan whose first request has the same
//! length and alignment is followed: request `k` goes at the plan's offset
//! `k` while its length and alignment are the plan's and that range is
//! one free extent; the first difference ends the following for the
//! epoch, and best fit serves the rest. Best fit is a function of the heap
//! state and the sequence, and the plan set changes only at the end of an
//! epoch that took new memory, at most [`MAX_PLANS`] times: a sequence
//! that repeats is placed as it was, so its pages stay resident.
//!
//! Memory for recording grows only on the cold path (room for three times
//! what an epoch recorded by its last cold request); an epoch that
//! outgrows it is not learned. Planning and the release run at the end of
//! an epoch that took new memory: in the run that took it, unless a heap
//! buffer lives on into the next run (the epoch then ends there).

use super::super::blocks::{BlockState, Place};
use super::super::state::ArenaState;
use crate::os::{self, OsCounters};
use crate::planner::{solve, Budget, Buffer, SolveOptions};

/// Most plans an arena keeps; past that, no new plan and no release.
pub(crate) const MAX_PLANS: usize = 8;

/// Search nodes the planner may spend on an epoch of `n` allocations:
/// [`PLAN_WORK`] over `n` (a node's work grows with the epoch), at most
/// [`PLAN_NODES`]. A budget in nodes, not time, so that the same epoch
/// gets the same plan on any machine under any load.
pub(crate) fn plan_nodes(n: usize) -> u64 {
    (PLAN_WORK / n.max(1) as u64).min(PLAN_NODES)
}

/// The most search nodes for one epoch.
#[cfg(not(miri))]
pub(crate) const PLAN_NODES: u64 = 100_000;
/// Under Miri (every step interpreted) the tests' small epochs get a
/// small search.
#[cfg(miri)]
pub(crate) const PLAN_NODES: u64 = 2_000;

/// Nodes times allocations: about 20 ms of search on this machine (2 µs
/// a node at 500 allocations, 3.7 µs at 1 000), besides the first
/// constructive pass (15 ms at 1 000).
pub(crate) const PLAN_WORK: u64 = 4_000_000;

/// A plan is kept only when its height is below the epoch's top by at
/// least the top over this.
pub(crate) const MIN_GAIN_DIV: usize = 32;

/// Epochs with more allocations than this are not learned: the planner
/// runs under the arena's lock, and its first constructive pass grows
/// faster than linearly (an epoch of 20 000 allocations took seconds, one
/// of 1 900 a third of a second).
pub(crate) const MAX_PLAN_ALLOCS: usize = 1000;

/// Room for an epoch's events: its allocations and their frees.
const MAX_EVENTS: usize = 2 * MAX_PLAN_ALLOCS;

/// No allocation index (a record the epoch did not hand out).
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Alloc,
    Free(u32),
}

/// One planned epoch: per allocation, its length, alignment and offset
/// from the first segment's base.
#[derive(Debug)]
struct Plan {
    caps: Vec<usize>,
    aligns: Vec<usize>,
    offsets: Vec<usize>,
    height: usize,
    /// The release generation in which it was made or last followed.
    gen: u64,
}

impl Plan {
    /// Whether its first request is `key` (length, alignment).
    fn starts_with(&self, key: (usize, usize)) -> bool {
        self.caps.first() == Some(&key.0) && self.aligns.first() == Some(&key.1)
    }
}

/// An epoch's first request as seen (`Learn::seen`).
#[derive(Debug, Clone, Copy)]
struct Seen {
    key: (usize, usize),
    hash: u64,
    mixed: bool,
}

/// Most first requests `Learn::seen` keeps; past that, no new plan.
const MAX_SEEN: usize = 256;

/// What a planned request got.
pub(crate) enum Planned {
    /// Placed at the plan's offset.
    Taken(super::super::state::Grant),
    /// The plan's place is above the mark or needs records: the cold path
    /// places it (the plan still holds).
    NeedsCold,
    /// No plan is followed (any more): best fit places it.
    Unplanned,
}

/// The heap's learning state (`Heap::learn`).
#[derive(Debug, Default)]
pub(crate) struct Learn {
    /// On for execution arenas with [`crate::ArenaConfig::learn_placement`].
    pub on: bool,
    evs: Vec<Ev>,
    caps: Vec<usize>,
    aligns: Vec<usize>,
    /// Per block record: its allocation index in this epoch.
    ks: Vec<u32>,
    /// Heap pieces live now.
    live: usize,
    /// This epoch took new memory.
    cold: bool,
    /// This epoch cannot be planned (another segment, a large alignment,
    /// a resize, recording room ran out).
    irregular: bool,
    /// Highest end of a piece of this epoch in the first segment, from its base.
    high: usize,
    plans: Vec<Plan>,
    /// The plan this epoch follows, and how many of its requests it did.
    follow: Option<usize>,
    matched: usize,
    /// Highest top of an epoch no plan served: never released below.
    kept_high: usize,
    /// [`MAX_PLANS`] reached: no new plan, no release.
    full: bool,
    /// The last planned piece's record: where the next search starts.
    hint: u32,
    /// This epoch's first request (length, alignment): the plan it follows
    /// starts with the same.
    key: Option<(usize, usize)>,
    /// A hash of this epoch's requests and frees.
    hash: u64,
    /// Per first request seen, the hash of the first epoch that started
    /// with it, and whether another epoch started with it too (then no
    /// plan is made for it: see [`ArenaState::learn_epoch_end`]).
    seen: Vec<Seen>,
    /// Advanced by every trim or cap release of the heap: plans not used
    /// since and epochs before it no longer hold pages back.
    gen: u64,
}

impl Learn {
    /// Whether a request may be placed by a plan: one is followed, or an
    /// epoch starts and plans exist.
    #[inline(always)]
    pub(crate) fn may_follow(&self) -> bool {
        self.follow.is_some() || (self.live == 0 && !self.plans.is_empty())
    }

    /// Whether this epoch follows a plan (so far).
    #[inline(always)]
    pub(crate) fn following(&self) -> bool {
        self.follow.is_some()
    }

    /// Whether no heap piece is live (an epoch has ended, or none began).
    #[inline(always)]
    pub(crate) fn idle(&self) -> bool {
        self.live == 0
    }

    /// Whether one more event (and allocation) fits in the room the cold
    /// path reserved: recording never allocates anywhere else.
    #[inline]
    fn has_room(&self) -> bool {
        self.evs.len() < self.evs.capacity() && self.caps.len() < self.caps.capacity()
    }

    /// Notes the ending epoch's first request and hash in `seen`; whether
    /// it is the only sequence seen to start with that request. An epoch
    /// that started before a plan for its first request existed is placed
    /// by that plan in its next run: only when it is the plan's own
    /// sequence does it fit under the pages the plan keeps. Past
    /// [`MAX_SEEN`] first requests, learning stops (`full`).
    fn note_seen(&mut self) -> bool {
        let Some(key) = self.key else {
            return false;
        };
        let hash = if self.irregular { u64::MAX } else { self.hash };
        if let Some(x) = self.seen.iter_mut().find(|x| x.key == key) {
            x.mixed |= x.hash != hash || hash == u64::MAX;
            return !x.mixed;
        }
        if self.seen.len() == self.seen.capacity() {
            self.full = true;
            return false;
        }
        self.seen.push(Seen {
            key,
            hash,
            mixed: hash == u64::MAX,
        });
        hash != u64::MAX
    }

    /// The heap released memory (a trim or the retention cap): what ran
    /// before holds no pages back any more.
    pub(crate) fn note_released(&mut self) {
        self.gen += 1;
        self.kept_high = 0;
    }
}

impl ArenaState {
    /// Cold path: room to record what the warm path may add (events, and
    /// an index per block record), so recording never allocates there.
    pub(crate) fn learn_reserve(&mut self) {
        let n = self.table.len();
        let l = &mut self.heap.learn;
        if l.ks.len() < n && l.ks.try_reserve(n - l.ks.len()).is_ok() {
            l.ks.resize(n, NONE);
        }
        // An epoch's warm requests and its frees follow its last cold
        // request: room for three times what it recorded so far.
        let want = (4 * l.evs.len() + 256).min(MAX_EVENTS);
        let ok = reserve_to(&mut l.seen, MAX_SEEN)
            && reserve_to(&mut l.evs, want)
            && reserve_to(&mut l.caps, want)
            && reserve_to(&mut l.aligns, want);
        if !ok {
            l.irregular = true;
        }
    }

    /// A heap request of `cap` bytes at `align`: placed at the followed
    /// plan's offset when it matches (see [`Planned`]); `cold` allows
    /// materializing (the cold path, which reserved the records).
    pub(crate) fn take_planned(
        &mut self,
        cap: usize,
        align: usize,
        cold: bool,
        os: &OsCounters,
    ) -> Planned {
        let l = &mut self.heap.learn;
        if l.live == 0 {
            // An epoch starts: the plan that starts as this request does.
            l.follow = l.plans.iter().position(|p| p.starts_with((cap, align)));
            l.matched = 0;
        }
        let k = l.caps.len();
        let want = l
            .follow
            .and_then(|f| l.plans.get(f))
            .filter(|p| k == l.matched && p.caps.get(k) == Some(&cap))
            .filter(|p| p.aligns.get(k) == Some(&align))
            .and_then(|p| p.offsets.get(k).copied());
        let Some(off) = want else {
            l.follow = None;
            return Planned::Unplanned;
        };
        let Some(seg) = self.heap.segs.first().copied() else {
            self.heap.learn.follow = None;
            return Planned::Unplanned;
        };
        let (addr, end) = (seg.base + off, seg.base + off + cap);
        if !cold && (end > seg.base + seg.mark || self.table.vacant_len() < 2) {
            return Planned::NeedsCold;
        }
        self.unpark();
        let Some(i) = self.extent_holding(addr, end) else {
            self.heap.learn.follow = None;
            return Planned::Unplanned;
        };
        let g = self.heap_carve(i, 0, addr, cap, os);
        self.heap.learn.hint = g.block;
        self.heap.learn.matched += 1;
        self.stats.heap_planned_allocations += 1;
        self.learn_granted(g.block, addr, cap, align, !g.warm);
        Planned::Taken(g)
    }

    /// The free extent of the first segment that holds `[addr, end)`, if
    /// any: found by walking the pieces in address order from the last
    /// planned piece (a plan's next request usually lies near it), or
    /// from the segment's first piece.
    fn extent_holding(&self, addr: usize, end: usize) -> Option<u32> {
        let seg = self.heap.segs.first()?;
        if end > seg.base + seg.len {
            return None;
        }
        let near = self.table.get(self.heap.learn.hint).filter(|b| {
            b.place == Place::Heap(0) && matches!(b.state, BlockState::Live | BlockState::Extent)
        });
        let mut j = if near.is_some() {
            self.heap.learn.hint
        } else {
            seg.first
        };
        // Down to a piece that starts at or below `addr`, then up to the
        // one that holds it.
        while let Some(b) = self.table.get(j).filter(|b| b.addr > addr) {
            j = b.lo;
        }
        while let Some(b) = self.table.get(j) {
            if b.addr + b.cap > addr {
                let free = b.state == BlockState::Extent;
                return (free && b.addr <= addr && end <= b.addr + b.cap).then_some(j);
            }
            j = b.hi;
        }
        None
    }

    /// Records a heap grant: piece `block` of `cap` bytes at `addr` for a
    /// request aligned to `align`; `cold` when it took new memory. An
    /// epoch that cannot be learned any more costs two stores here.
    #[inline(always)]
    pub(crate) fn learn_granted(
        &mut self,
        block: u32,
        addr: usize,
        cap: usize,
        align: usize,
        cold: bool,
    ) {
        let l = &mut self.heap.learn;
        l.live += 1;
        l.cold |= cold;
        if !l.irregular {
            self.learn_record_grant(block, addr, cap, align);
        }
    }

    #[inline(never)]
    fn learn_record_grant(&mut self, block: u32, addr: usize, cap: usize, align: usize) {
        let first = self.heap.segs.first().map(|g| (g.base, g.len));
        let l = &mut self.heap.learn;
        if l.key.is_none() {
            l.key = Some((cap, align));
        }
        l.hash = mix(l.hash, cap as u64, align as u64);
        let k = l.caps.len();
        let in_first = first.is_some_and(|(base, len)| addr >= base && addr < base + len);
        if !in_first || align > os::page_size() || !l.has_room() || block as usize >= l.ks.len() {
            l.irregular = true;
            return;
        }
        if let Some((base, _)) = first {
            l.high = l.high.max(addr + cap - base);
        }
        l.evs.push(Ev::Alloc);
        l.caps.push(cap);
        l.aligns.push(align);
        l.ks[block as usize] = k as u32;
    }

    /// A live piece of this epoch was resized in place: not learned.
    pub(crate) fn learn_resized(&mut self) {
        self.heap.learn.irregular = true;
    }

    /// Records the free of heap piece `block` (before the heap takes it).
    #[inline(always)]
    pub(crate) fn learn_freeing(&mut self, block: u32) {
        let l = &mut self.heap.learn;
        l.live = l.live.saturating_sub(1);
        if l.irregular {
            return;
        }
        let k = l.ks.get(block as usize).copied().unwrap_or(NONE);
        l.hash = mix(l.hash, u64::MAX, k as u64);
        if k == NONE || !l.has_room() {
            l.irregular = true;
        } else {
            l.evs.push(Ev::Free(k));
        }
    }

    /// After the free that left no heap piece live: the epoch ends (see
    /// the module's doc).
    #[inline(never)]
    pub(crate) fn learn_epoch_end(&mut self, os: &OsCounters) {
        // The top an irregular epoch reached is not recorded: the first
        // segment's mark is at or above it.
        let mark = self.heap.segs.first().map_or(0, |g| g.mark);
        let l = &mut self.heap.learn;
        if l.irregular {
            l.high = l.high.max(mark);
        }
        let (n, gen) = (l.caps.len(), l.gen);
        let done = match l.follow.and_then(|f| l.plans.get_mut(f)) {
            Some(p) if l.matched == p.caps.len() && n == p.caps.len() => {
                p.gen = gen;
                true
            }
            _ => false,
        };
        let single = l.note_seen();
        if !done {
            let mut kept = false;
            let plannable = l.cold
                && single
                && !l.irregular
                && !l.full
                && l.caps.len() >= 2
                && l.key
                    .is_some_and(|k| !l.plans.iter().any(|p| p.starts_with(k)));
            if plannable {
                let seg_len = self.heap.segs.first().map_or(0, |g| g.len);
                let _m = super::super::metadata::enter();
                if let Some(p) = plan_epoch(&self.heap.learn) {
                    let l = &mut self.heap.learn;
                    if p.height + l.high / MIN_GAIN_DIV <= l.high
                        && p.height <= seg_len
                        && l.plans.try_reserve(1).is_ok()
                    {
                        l.plans.push(p);
                        l.full = l.plans.len() >= MAX_PLANS;
                        self.stats.heap_plans = l.plans.len();
                        kept = true;
                    }
                }
            }
            let l = &mut self.heap.learn;
            if !kept {
                l.kept_high = l.kept_high.max(l.high);
            } else {
                self.release_above_plans(os);
            }
        }
        let l = &mut self.heap.learn;
        l.evs.clear();
        l.caps.clear();
        l.aligns.clear();
        l.cold = false;
        l.irregular = false;
        l.high = 0;
        l.follow = None;
        l.matched = 0;
        l.key = None;
        l.hash = 0;
    }

    /// Releases the first segment's pages above every plan and every
    /// unplanned epoch's top (no piece is live).
    fn release_above_plans(&mut self, os: &OsCounters) {
        let l = &self.heap.learn;
        let page = os::page_size();
        let top = l
            .plans
            .iter()
            .filter(|p| p.gen == l.gen)
            .map(|p| p.height)
            .max()
            .unwrap_or(0);
        let keep = (top.max(l.kept_high) + page - 1) & !(page - 1);
        let Some(seg) = self.heap.segs.first().copied() else {
            return;
        };
        if seg.mark <= keep || !seg.idle {
            return;
        }
        self.unpark();
        // The segment is idle: everything above `keep` is free.
        let released = self.lower_mark(0, seg.base + keep, os);
        self.stats.heap_plan_released_bytes += released;
    }
}

/// `v`'s capacity raised to at least `n` (within reason); `false` when the
/// allocation failed.
fn reserve_to<T>(v: &mut Vec<T>, n: usize) -> bool {
    n <= v.capacity() || v.try_reserve(n - v.len()).is_ok()
}

/// The epoch recorded in `l` packed by the static planner, in page units.
fn plan_epoch(l: &Learn) -> Option<Plan> {
    let page = os::page_size();
    let n = l.caps.len();
    let mut lower = vec![0usize; n];
    let mut upper = vec![usize::MAX; n];
    let mut k = 0usize;
    for (t, e) in l.evs.iter().enumerate() {
        match *e {
            Ev::Alloc => {
                *lower.get_mut(k)? = t;
                k += 1;
            }
            Ev::Free(f) => *upper.get_mut(f as usize)? = t,
        }
    }
    if k != n || upper.contains(&usize::MAX) {
        return None;
    }
    let bufs: Vec<Buffer> = (0..n)
        .map(|k| Buffer::new(lower[k], upper[k], l.caps[k] / page))
        .collect();
    let opts = SolveOptions {
        max_nodes: plan_nodes(n),
        ..SolveOptions::default()
    };
    let sol = solve(&bufs, &opts, &Budget::nodes(opts.max_nodes)).ok()?;
    Some(Plan {
        caps: l.caps.clone(),
        aligns: l.aligns.clone(),
        offsets: sol.placement.offsets.iter().map(|o| o * page).collect(),
        height: sol.placement.height * page,
        gen: l.gen,
    })
}

/// One step of an epoch's hash.
#[inline(always)]
fn mix(h: u64, a: u64, b: u64) -> u64 {
    (h.rotate_left(5) ^ a ^ b.rotate_left(32)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
