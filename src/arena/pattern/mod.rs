//! Pattern mode: an arena learns one thread's run of allocations and serves
//! the next runs with the same sequence from one planned block.
//!
//! A *run* is one thread's allocate and free events between two boundaries
//! (`ExecutionArena::begin_run`, `ArenaRun::clear`, entering a scope of
//! the scoped global allocator). The first run with a new key is recorded
//! ([`recorder`]); at the next boundary its buffers that were freed become
//! intervals and are packed into one block ([`packing`]). From then on, the
//! i-th request of a run with that key gets its planned offset through an
//! O(1) cursor ([`cursor`]) while the events match the recording; at the
//! first deviation the run goes on from the classes.
//!
//! This module is pure bookkeeping (no `unsafe`, no system call): the arena
//! seam (`seam.rs`) grants and returns the block and hands out the
//! addresses.
//!
//! # Why buffers already handed out stay valid
//!
//! Number a run's events 0, 1, 2, ... Recorded allocation `k` has its
//! allocation event at `a(k)` and its free at `f(k)`; it is planned only if
//! it was freed, and the plan gives it bytes `[o(k), o(k) + c(k))`. The
//! plan's guarantee: if `[a(j), f(j))` and `[a(k), f(k))` overlap, the byte
//! ranges are disjoint.
//!
//! Claim: while every event so far matched, the planned buffers live now
//! are exactly `L(p) = { k planned : a(k) < p <= f(k) }`, where `p` is the
//! cursor (events matched). Induction: `L(0)` is empty and so is the run.
//! A matched allocation at `p` is allocation `k` with `a(k) = p`; it joins
//! and `p + 1` counts it. A matched free at `p` is the free of the buffer
//! at `base + o(k)` where the recording says `Free { k }`, `f(k) = p`: since
//! the live buffers are pairwise disjoint (below), the address names `k`
//! alone, `k` leaves, and `L(p + 1)` no longer contains it. Any two members
//! of `L(p)` both contain time `p - 1` in their intervals, so they overlap
//! in time, so the plan made them disjoint in bytes.
//!
//! At the first deviation the cursor stops: no planned offset is handed
//! out for the rest of the run, so the live planned set can only shrink
//! from a set that was pairwise disjoint. A buffer freed out of order or
//! kept past its recorded free is still live in the block; the block is
//! not given back, and no later run is served from it, until every planned
//! buffer in it is freed (`Pattern::live == 0`). Allocations of other
//! threads, and of this thread after a deviation, come from the classes
//! and never from the block. So no two live buffers share a byte.
//! The lock-free hit path (`fast.rs`) changes none of this: it is the
//! same cursor, moved by one thread at a time (the owner, between two of
//! its locked operations), and it hands out and takes back only matching
//! events, stopping at anything else. A planned buffer freed by another
//! thread while the owner has the cursor leaves the live set early without
//! moving the cursor, so the live planned buffers are a subset of `L(p)`,
//! still pairwise disjoint; the owner's run then deviates where that free
//! was expected. The block goes back only under the lock, never while the
//! cursor is owned (`Pattern::block_releasable`).
//! `tests::proptest_live_buffers_never_overlap` checks this on random runs
//! with random deviations, frees and boundaries on another thread, and the
//! last handle dropped there.

mod cursor;
pub(crate) mod fast;
mod packing;
mod recorder;
pub(crate) mod seam;
#[cfg(test)]
mod tests;

pub(crate) use cursor::BlockRef;
use cursor::{Pattern, Served};
use fast::Claim;
pub(crate) use fast::Fast;
use recorder::Recorder;

/// Patterns kept per arena (least recently used goes first).
pub(crate) const CACHE_LEN: usize = 4;

/// Consecutive deviating runs after which a pattern is learned again.
pub(crate) const RELEARN_AFTER: u32 = 3;

/// Most events one learning run may record (allocations and frees): a run
/// past it is refused (`pattern_refusals`) and served from the classes.
pub(crate) const MAX_EVENTS: usize = 1 << 21;

/// What selects a pattern for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// `begin_run_keyed(key)`.
    Caller(u64),
    /// No key given: the run's first request.
    First { size: usize, align: usize },
}

/// Pattern-mode counters, copied into `ArenaStats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PatternCounters {
    /// Runs that matched their pattern to the end.
    pub hits: u64,
    /// Runs that had a pattern but deviated, ended early or found its block busy.
    pub misses: u64,
    /// Patterns learned again after `RELEARN_AFTER` deviating runs.
    pub relearns: u64,
    /// Runs recorded and planned.
    pub learned: u64,
    /// Learning runs refused (past `MAX_EVENTS`, or a grant failed).
    pub refusals: u64,
    /// Requests served at a planned offset.
    pub planned_allocations: u64,
}

#[derive(Debug)]
enum Run {
    /// No run, or a run that is served from the classes only.
    Idle,
    /// A run without a key, waiting for its first request.
    Pending {
        thread: usize,
    },
    Learning {
        thread: usize,
        key: Key,
        rec: Recorder,
    },
    Serving {
        thread: usize,
        index: usize,
    },
}

/// A learning run that ended, to be planned ([`plan`]).
#[derive(Debug)]
pub(crate) struct Learned {
    key: Key,
    rec: Recorder,
}

/// A planned run, for [`PatternSet::insert`]; no pattern when the run was
/// refused.
#[derive(Debug)]
pub(crate) struct Planned {
    pattern: Option<Pattern>,
}

/// Plans a learning run: pure, and the slow part of a boundary after a
/// learning run, so the arena runs it outside its lock.
pub(crate) fn plan(l: Learned) -> Planned {
    if l.rec.refused {
        return Planned { pattern: None };
    }
    let rec = l.rec;
    let packed = packing::pack(&rec.events, &rec.caps, &rec.aligns);
    Planned {
        pattern: Some(Pattern::new(l.key, 0, &rec.events, &rec.caps, packed)),
    }
}

/// An action the arena must take on its own blocks.
pub(crate) type Release = Option<BlockRef>;

/// The outcome of an allocation request in pattern mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Hand out `cap` bytes at `addr` (inside the held block).
    Planned { addr: usize, cap: usize },
    /// Serve from the classes; if `record` is set, report the grant with
    /// [`PatternSet::granted`] (or [`PatternSet::failed`]).
    Ordinary { record: Option<u32> },
}

/// Every pattern of an arena and the run in progress.
#[derive(Debug)]
pub(crate) struct PatternSet {
    patterns: Vec<Pattern>,
    run: Run,
    clock: u64,
    next_id: u64,
    max_events: usize,
    pub counters: PatternCounters,
}

impl Default for PatternSet {
    fn default() -> Self {
        Self::new(MAX_EVENTS)
    }
}

impl PatternSet {
    pub(crate) fn new(max_events: usize) -> Self {
        PatternSet {
            patterns: Vec::new(),
            run: Run::Idle,
            clock: 0,
            next_id: 0,
            max_events,
            counters: PatternCounters::default(),
        }
    }

    /// The block pattern `index` asks for (height and alignment): the
    /// largest of its own and those of the patterns that have had a block,
    /// so that runs with different keys take turns with one block (runs
    /// are served one at a time) and the arena retains one block, not one
    /// per key. A pattern learned and never served (a one-off run) does not
    /// make the block larger.
    pub(crate) fn block_request(&self, index: usize) -> (usize, usize) {
        self.patterns
            .iter()
            .enumerate()
            .filter(|&(i, p)| p.carved || i == index)
            .fold((1, 16), |(h, a), (_, p)| (h.max(p.height), a.max(p.align)))
    }

    /// Bytes of the block the patterns share: the largest height of the
    /// patterns that have had a block (of any pattern, before one has).
    pub(crate) fn block_bytes(&self) -> usize {
        let carved = self
            .patterns
            .iter()
            .filter(|p| p.carved)
            .map(|p| p.height)
            .max();
        carved.unwrap_or_else(|| self.patterns.iter().map(|p| p.height).max().unwrap_or(0))
    }

    /// Whether the run in progress is served from a pattern (its
    /// bookkeeping allocates nothing).
    #[inline]
    pub(crate) fn serving(&self) -> bool {
        matches!(self.run, Run::Serving { .. })
    }

    /// Whether the run in progress is being recorded (its bookkeeping may allocate).
    #[cfg(test)]
    pub(crate) fn learning(&self) -> bool {
        matches!(self.run, Run::Learning { .. })
    }

    /// Ends the run in progress without starting another. A run whose
    /// cursor another thread owns (the caller detached its own) is told to
    /// stop; its owner finishes it at its next locked operation.
    pub(crate) fn end_run(&mut self, fast: &Fast) -> Release {
        match core::mem::replace(&mut self.run, Run::Idle) {
            Run::Idle | Run::Pending { .. } => None,
            Run::Learning { key, rec, .. } => {
                self.learn(key, rec);
                None
            }
            Run::Serving { index, .. } => {
                if self.patterns[index].owned {
                    fast.stop();
                    return None;
                }
                self.finish(index)
            }
        }
    }

    /// Ends pattern `index`'s run: a hit or a miss, and its block if it
    /// can go back.
    fn finish(&mut self, index: usize) -> Release {
        let p = &mut self.patterns[index];
        if p.finish() {
            self.counters.hits += 1;
        } else {
            self.counters.misses += 1;
        }
        let r = p.block_releasable();
        if r.is_some() {
            p.block = None;
        }
        r
    }

    /// After a locked operation of `thread`: hands the cursor to the fast
    /// path when `thread`'s run is served, matching, its block is held and
    /// the recording's last step is still ahead.
    pub(crate) fn claim(&mut self, thread: usize, fast: &Fast) {
        let Run::Serving { thread: t, index } = self.run else {
            return;
        };
        if t != thread || thread == 0 || thread == fast::NO_THREAD || fast.owner() != 0 {
            return;
        }
        let p = &mut self.patterns[index];
        let Some(b) = p.block else {
            return;
        };
        if !p.matching || p.owned || p.pos + 1 >= p.steps.len() {
            return;
        }
        fast.install(
            thread,
            Claim {
                steps: p.steps.as_ptr(),
                len: p.steps.len(),
                base: b.base,
                pos: p.pos,
                id: p.id,
            },
        );
        p.owned = true;
        p.foreign = 0;
    }

    /// Takes the cursor back from the fast path, under the lock, on the
    /// owner's thread (or when the owner can no longer act, see
    /// `fast.rs`): the pattern gets the cursor's position and live count;
    /// a run that was ended meanwhile is finished. Returns a block to give
    /// back.
    pub(crate) fn detach(&mut self, fast: &Fast) -> Release {
        let c = fast.take()?;
        let Some(index) = self.patterns.iter().position(|p| p.id == c.id) else {
            debug_assert!(false, "an owned pattern left the cache");
            return None;
        };
        let p = &mut self.patterns[index];
        debug_assert!(p.owned);
        self.counters.planned_allocations += u64::from(p.planned[c.pos] - p.planned[c.from]);
        p.live = Self::owned_live(p, c);
        p.owned = false;
        p.pos = c.pos;
        p.foreign = 0;
        let current = matches!(self.run, Run::Serving { index: i, .. } if i == index);
        if current {
            None
        } else {
            self.finish(index)
        }
    }

    /// The planned buffers live in owned pattern `p` with its cursor at `c`.
    fn owned_live(p: &Pattern, c: fast::Cursor) -> usize {
        let held = p.live + p.net[c.pos] as usize - p.net[c.from] as usize;
        debug_assert!(held >= p.foreign);
        held.saturating_sub(p.foreign)
    }

    /// The planned buffers live in the pattern the fast path owns (`None`
    /// when it owns none).
    pub(crate) fn fast_live(&self, fast: &Fast) -> Option<usize> {
        let c = fast.cursor()?;
        let p = self.patterns.iter().find(|p| p.id == c.id)?;
        Some(Self::owned_live(p, c))
    }

    /// Requests served at a planned offset, the fast path's included.
    pub(crate) fn planned_allocations(&self, fast: &Fast) -> u64 {
        let owned = fast.cursor().and_then(|c| {
            let p = self.patterns.iter().find(|p| p.id == c.id)?;
            Some(u64::from(p.planned[c.pos] - p.planned[c.from]))
        });
        self.counters.planned_allocations + owned.unwrap_or(0)
    }

    fn select(&mut self, thread: usize, key: Key) -> Run {
        self.clock += 1;
        let Some(index) = self.patterns.iter().position(|p| p.key == key) else {
            return self.record(thread, key);
        };
        let p = &mut self.patterns[index];
        if p.live > 0 || p.serving || p.owned {
            // Buffers of an earlier run still live in the block.
            self.counters.misses += 1;
            return Run::Idle;
        }
        if p.deviated_runs >= RELEARN_AFTER {
            self.counters.relearns += 1;
            self.patterns.remove(index);
            return self.record(thread, key);
        }
        p.start(self.clock);
        Run::Serving { thread, index }
    }

    fn record(&mut self, thread: usize, key: Key) -> Run {
        Run::Learning {
            thread,
            key,
            rec: Recorder::new(self.max_events),
        }
    }

    fn learn(&mut self, key: Key, rec: Recorder) {
        self.insert(plan(Learned { key, rec }));
    }

    /// Adds a planned pattern to the cache (least recently used out);
    /// `true` when it was added.
    pub(crate) fn insert(&mut self, planned: Planned) -> bool {
        let Some(mut p) = planned.pattern else {
            self.counters.refusals += 1;
            return false;
        };
        let key = p.key;
        self.next_id += 1;
        p.id = self.next_id;
        p.last_used = self.clock;
        // Another thread's run may be served meanwhile (planning happens
        // outside the lock): keep its index right as patterns leave.
        let serving_id = match self.run {
            Run::Serving { index, .. } => Some(self.patterns[index].id),
            _ => None,
        };
        self.patterns
            .retain(|q| q.key != key || q.live > 0 || q.serving || q.owned);
        let mut added = true;
        if self.patterns.len() >= CACHE_LEN {
            // Evict the least recently used pattern whose block is not held.
            let victim = self
                .patterns
                .iter()
                .enumerate()
                .filter(|(_, q)| q.block.is_none() && !q.serving && !q.owned)
                .min_by_key(|(_, q)| q.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    self.patterns.remove(i);
                }
                None => added = false,
            }
        }
        if added {
            self.counters.learned += 1;
            self.patterns.push(p);
        }
        if let (Some(id), Run::Serving { index, .. }) = (serving_id, &mut self.run) {
            match self.patterns.iter().position(|q| q.id == id) {
                Some(i) => *index = i,
                None => debug_assert!(false, "a served pattern left the cache"),
            }
        }
        added
    }

    /// Ends the run in progress like [`PatternSet::end_run`], except that
    /// a learning run is handed back to be planned outside the lock (then
    /// [`PatternSet::insert`]) rather than planned here.
    pub(crate) fn end_run_deferred(&mut self, fast: &Fast) -> (Release, Option<Learned>) {
        if let Run::Learning { .. } = self.run {
            if let Run::Learning { key, rec, .. } = core::mem::replace(&mut self.run, Run::Idle) {
                return (None, Some(Learned { key, rec }));
            }
        }
        (self.end_run(fast), None)
    }

    /// Starts `thread`'s run (the previous one ended), selected by `key`
    /// or by its first request.
    pub(crate) fn start_run(&mut self, thread: usize, key: Option<u64>) {
        debug_assert!(matches!(self.run, Run::Idle));
        self.run = match key {
            Some(k) => self.select(thread, Key::Caller(k)),
            None => Run::Pending { thread },
        };
    }

    /// Ends the run in progress without planning: a learning run is
    /// dropped (the last handle is going, no run will follow).
    pub(crate) fn end_run_unplanned(&mut self, fast: &Fast) -> Release {
        self.end_run_deferred(fast).0
    }

    /// An allocation request from `thread`. `grant_block(height, align,
    /// first)` grants a pattern's block when it is needed (`first`: the
    /// pattern's first block, so the learning runs' class buffers can go).
    #[inline]
    pub(crate) fn on_allocate(
        &mut self,
        thread: usize,
        size: usize,
        align: usize,
        grant_block: impl FnOnce(usize, usize, bool) -> Option<BlockRef>,
    ) -> Action {
        if let Run::Pending { thread: t } = self.run {
            if t != thread {
                return Action::Ordinary { record: None };
            }
            self.run = self.select(thread, Key::First { size, align });
        }
        if let Run::Serving { thread: t, index } = self.run {
            if t == thread {
                let (height, block_align) = self.block_request(index);
                let p = &mut self.patterns[index];
                let first = !p.carved;
                let served = p.serve(size, align, || grant_block(height, block_align, first));
                p.carved |= p.block.is_some();
                return match served {
                    Served::Planned { addr, cap } => {
                        self.counters.planned_allocations += 1;
                        Action::Planned { addr, cap }
                    }
                    Served::Ordinary => Action::Ordinary { record: None },
                };
            }
        }
        match &mut self.run {
            Run::Learning { thread: t, rec, .. } if *t == thread => Action::Ordinary {
                record: rec.alloc(size, align),
            },
            _ => Action::Ordinary { record: None },
        }
    }

    /// [`PatternSet::on_allocate`] for a run being served whose block is
    /// held: `None` when the request needs more (a first request, a
    /// recording, a block to grant).
    #[inline]
    pub(crate) fn try_hit(&mut self, thread: usize, size: usize, align: usize) -> Option<Action> {
        let Run::Serving { thread: t, index } = self.run else {
            return None;
        };
        let p = &mut self.patterns[index];
        if t != thread || p.block.is_none() {
            return None;
        }
        Some(match p.serve(size, align, || None) {
            Served::Planned { addr, cap } => {
                self.counters.planned_allocations += 1;
                Action::Planned { addr, cap }
            }
            Served::Ordinary => Action::Ordinary { record: None },
        })
    }

    /// Recorded allocation `k` was granted arena block `block` of `cap` bytes.
    pub(crate) fn granted(&mut self, k: u32, block: u32, cap: usize) {
        if let Run::Learning { rec, .. } = &mut self.run {
            rec.granted(k, block, cap);
        }
    }

    /// A recorded allocation could not be granted: the run is not planned.
    pub(crate) fn failed(&mut self) {
        if let Run::Learning { rec, .. } = &mut self.run {
            rec.failed();
        }
    }

    /// An arena block (not a planned buffer) was freed.
    #[inline]
    pub(crate) fn on_free_block(&mut self, block: u32) {
        if let Run::Learning { rec, .. } = &mut self.run {
            rec.free(block);
        }
    }

    /// Whether `addr` lies in a held pattern block (a planned buffer).
    #[cfg(test)]
    pub(crate) fn owns(&self, addr: usize) -> bool {
        self.patterns.iter().any(|p| p.holds(addr))
    }

    /// The planned buffer at `addr` was freed. `None` if `addr` is in no
    /// held block; otherwise the block to give back, if it is now unused.
    #[inline]
    pub(crate) fn on_free_planned(&mut self, addr: usize) -> Option<Release> {
        let p = self.patterns.iter_mut().find(|p| p.holds(addr))?;
        p.free(addr);
        let r = p.block_releasable();
        if r.is_some() {
            p.block = None;
        }
        Some(r)
    }

    /// The capacity of the live planned buffer at `addr`.
    pub(crate) fn cap_at(&self, addr: usize, fast: &Fast) -> Option<usize> {
        let p = self.patterns.iter().find(|p| p.holds(addr))?;
        let pos = match fast.cursor() {
            Some(c) if p.owned => c.pos,
            _ => p.pos,
        };
        p.cap_at(addr, pos)
    }

    /// Patterns in the cache.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.patterns.len()
    }
}
