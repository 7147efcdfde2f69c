//! One learned pattern: the recorded run as a stream of steps (each with
//! its planned offset), the block the buffers live in while a run uses it,
//! and the O(1) cursor that matches a run against the recording.

use super::packing::{Packed, UNPLANNED};
use super::recorder::Event;
use super::Key;

/// The arena block a pattern's buffers live in while it is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockRef {
    /// The arena's block index (for giving it back).
    pub index: u32,
    /// Its first byte.
    pub base: usize,
}

/// The bytes a planned buffer gets for a request of `size`: 16-byte
/// granules (the arena's smallest capacity step).
#[inline(always)]
pub(crate) fn planned_len(size: usize) -> usize {
    size.saturating_add(15) & !15
}

/// Requests at or above this size have no tag (no arena serves them).
const TAGGED_SIZES: usize = 1 << 57;

/// An allocation request in one word: the size above six bits of
/// `log2(align) + 1` (never 0, so 0 can mark a free); `None` for sizes no
/// tag holds (never recorded: no arena grants them).
#[inline(always)]
pub(crate) fn request_tag(size: usize, align: usize) -> Option<usize> {
    (size < TAGGED_SIZES).then(|| (size << 6) | (align.trailing_zeros() as usize + 1))
}

/// Set in the tag of an unplanned allocation's step: no request tag has
/// it, so the fast path's one comparison sends such a step to the lock.
pub(crate) const UNPLANNED_TAG: usize = 1 << 63;

/// One recorded event with what serving it needs, in 16 bytes: the cursor
/// reads one step per event, front to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The request's [`request_tag`] (with [`UNPLANNED_TAG`] set when it
    /// has no offset); 0 marks a free.
    pub tag: usize,
    /// The buffer's planned offset (the one allocated or freed), or
    /// [`UNPLANNED`].
    pub off: usize,
}

impl Step {
    /// The capacity handed out for this allocation step.
    #[inline(always)]
    pub(crate) fn cap(&self) -> usize {
        planned_len((self.tag & !UNPLANNED_TAG) >> 6)
    }

    /// Whether this step is the allocation with tag `tag`, planned or not.
    #[inline]
    pub(crate) fn is_alloc(&self, tag: usize) -> bool {
        self.tag & !UNPLANNED_TAG == tag
    }
}

/// What the cursor says about one allocation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// Hand out `cap` bytes at `addr` inside the block.
    Planned { addr: usize, cap: usize },
    /// Serve from the classes (unplanned, or the run no longer matches).
    Ordinary,
}

/// A learned run and its serving state.
#[derive(Debug)]
pub(crate) struct Pattern {
    pub key: Key,
    /// Unique in its set: names the pattern while its indices move.
    pub id: u64,
    /// The recording, one step per event. Never changed after `new`: the
    /// fast path reads it through a raw pointer while it owns the run.
    pub steps: Vec<Step>,
    /// Per position `i` (0 to `steps.len()`): planned allocations and
    /// planned allocations less frees among `steps[..i]`. A cursor that
    /// moved from `a` to `b` handed out `planned[b] - planned[a]` buffers
    /// and holds `net[b] - net[a]` more, so the fast path keeps only its
    /// position.
    pub planned: Vec<u32>,
    pub net: Vec<u32>,
    /// Planned allocations sorted by (offset, event position, capacity):
    /// finds the live buffer at an address (the latest handed out there).
    by_offset: Vec<(usize, u32, usize)>,
    pub height: usize,
    pub align: usize,
    pub block: Option<BlockRef>,
    /// Planned buffers handed out and not yet freed (stale while `owned`).
    pub live: usize,
    /// A run is being served from this pattern now.
    pub serving: bool,
    /// The fast path owns the cursor (`fast::Fast`): `pos` and `live` are
    /// its, and frees by other threads are counted in `foreign`.
    pub owned: bool,
    /// Planned buffers freed by other threads while `owned`.
    pub foreign: usize,
    /// Every event of the current (or last) run so far matched.
    pub matching: bool,
    /// Events of the current run matched so far.
    pub pos: usize,
    /// Consecutive runs that deviated.
    pub deviated_runs: u32,
    /// The pattern has had a block (its first served run carved one).
    pub carved: bool,
    /// Last use, for LRU eviction from the cache.
    pub last_used: u64,
}

impl Pattern {
    pub(crate) fn new(key: Key, id: u64, events: &[Event], caps: &[usize], packed: Packed) -> Self {
        let mut steps = Vec::with_capacity(events.len());
        let mut by_offset = Vec::new();
        let mut k = 0usize;
        for (t, e) in events.iter().enumerate() {
            steps.push(match *e {
                Event::Alloc { size, align } => {
                    let mut off = packed.offsets[k];
                    // Planned capacities are the granules of the request
                    // (the seam records them so), which the step derives.
                    debug_assert!(off == UNPLANNED || caps[k] == planned_len(size));
                    let mut tag = request_tag(size, align).unwrap_or(UNPLANNED_TAG);
                    if tag == UNPLANNED_TAG {
                        off = UNPLANNED;
                    }
                    if off == UNPLANNED {
                        tag |= UNPLANNED_TAG;
                    }
                    if off != UNPLANNED {
                        by_offset.push((off, t as u32, planned_len(size)));
                    }
                    k += 1;
                    Step { tag, off }
                }
                Event::Free { k: f } => Step {
                    tag: 0,
                    off: packed.offsets[f as usize],
                },
            });
        }
        by_offset.sort_unstable();
        let (mut planned, mut net) = (vec![0u32], vec![0u32]);
        for s in &steps {
            let (p, n) = (*planned.last().unwrap_or(&0), *net.last().unwrap_or(&0));
            match (s.tag, s.off) {
                (_, UNPLANNED) => {
                    planned.push(p);
                    net.push(n);
                }
                (0, _) => {
                    planned.push(p);
                    net.push(n.saturating_sub(1));
                }
                _ => {
                    planned.push(p + 1);
                    net.push(n + 1);
                }
            }
        }
        Pattern {
            key,
            id,
            steps,
            planned,
            net,
            by_offset,
            height: packed.height,
            align: packed.align,
            block: None,
            live: 0,
            serving: false,
            owned: false,
            foreign: 0,
            matching: false,
            pos: 0,
            deviated_runs: 0,
            carved: false,
            last_used: 0,
        }
    }

    /// Starts serving a run (the caller checked `live == 0`).
    pub(crate) fn start(&mut self, now: u64) {
        debug_assert_eq!(self.live, 0);
        self.serving = true;
        self.matching = true;
        self.pos = 0;
        self.last_used = now;
    }

    /// Ends the run; `true` when it matched the whole recording.
    pub(crate) fn finish(&mut self) -> bool {
        self.serving = false;
        let hit = self.matching && self.pos == self.steps.len();
        self.matching = false;
        if hit {
            self.deviated_runs = 0;
        } else {
            self.deviated_runs += 1;
        }
        hit
    }

    /// The block may go back to the arena: no run uses it, nothing lives in it.
    pub(crate) fn block_releasable(&self) -> Option<BlockRef> {
        if self.serving || self.owned || self.live > 0 {
            return None;
        }
        self.block
    }

    /// Matches an allocation request against the next recorded event.
    /// `grant_block()` is called when the block is needed and not held
    /// (the set sizes it: at least this pattern's height and alignment);
    /// `None` from it ends the match.
    #[inline]
    pub(crate) fn serve(
        &mut self,
        size: usize,
        align: usize,
        grant_block: impl FnOnce() -> Option<BlockRef>,
    ) -> Served {
        debug_assert!(!self.owned);
        if !self.matching {
            return Served::Ordinary;
        }
        let tag = request_tag(size, align);
        let s = match self.steps.get(self.pos) {
            Some(s) if tag.is_some_and(|t| s.is_alloc(t)) => *s,
            _ => {
                self.matching = false;
                return Served::Ordinary;
            }
        };
        if s.off == UNPLANNED {
            self.pos += 1;
            return Served::Ordinary;
        }
        let base = match self.block {
            Some(b) => b.base,
            None => match grant_block() {
                Some(b) => {
                    self.block = Some(b);
                    b.base
                }
                None => {
                    self.matching = false;
                    return Served::Ordinary;
                }
            },
        };
        self.pos += 1;
        self.live += 1;
        Served::Planned {
            addr: base + s.off,
            cap: s.cap(),
        }
    }

    /// Whether `addr` lies in this pattern's held block.
    #[inline]
    pub(crate) fn holds(&self, addr: usize) -> bool {
        matches!(self.block, Some(b) if addr >= b.base && addr - b.base < self.height.max(1))
    }

    /// A planned buffer at `addr` (in the held block) was freed: O(1)
    /// bookkeeping, and a match against the next recorded event while the
    /// run being served still matches.
    #[inline]
    pub(crate) fn free(&mut self, addr: usize) {
        if self.owned {
            // Another thread's free: the fast path keeps the cursor.
            self.foreign += 1;
            return;
        }
        self.live -= 1;
        if !(self.serving && self.matching) {
            return;
        }
        let base = self.block.map_or(0, |b| b.base);
        match self.steps.get(self.pos) {
            Some(s) if s.tag == 0 && s.off != UNPLANNED && base + s.off == addr => self.pos += 1,
            _ => self.matching = false,
        }
    }

    /// The capacity of the live planned buffer that starts at `addr`, with
    /// the cursor at `pos`.
    pub(crate) fn cap_at(&self, addr: usize, pos: usize) -> Option<usize> {
        let base = self.block?.base;
        let off = addr.checked_sub(base)?;
        // The latest buffer handed out at this offset is the only one that
        // can be live there (an earlier one would overlap it in time).
        let pos = u32::try_from(pos).unwrap_or(u32::MAX);
        let i = self
            .by_offset
            .partition_point(|&(o, t, _)| (o, t) < (off, pos));
        let (o, _, cap) = *self.by_offset.get(i.checked_sub(1)?)?;
        (o == off).then_some(cap)
    }
}
