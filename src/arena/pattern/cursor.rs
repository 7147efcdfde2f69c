//! One learned pattern: the recorded events, the planned offsets, the block
//! they live in while a run uses it, and the O(1) cursor that matches a run
//! against the recording.

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
    events: Vec<Event>,
    offsets: Vec<usize>,
    caps: Vec<usize>,
    /// Planned allocations sorted by (offset, index): finds the live buffer
    /// at an address (at most one at a time per offset).
    by_offset: Vec<(usize, u32)>,
    pub height: usize,
    pub align: usize,
    pub block: Option<BlockRef>,
    /// Planned buffers handed out and not yet freed.
    pub live: usize,
    /// A run is being served from this pattern now.
    pub serving: bool,
    /// Every event of the current (or last) run so far matched.
    pub matching: bool,
    pos: usize,
    next_k: u32,
    /// Consecutive runs that deviated.
    pub deviated_runs: u32,
    /// Last use, for LRU eviction from the cache.
    pub last_used: u64,
}

impl Pattern {
    pub(crate) fn new(key: Key, events: Vec<Event>, caps: Vec<usize>, packed: Packed) -> Self {
        let mut by_offset: Vec<(usize, u32)> = packed
            .offsets
            .iter()
            .enumerate()
            .filter(|(_, &o)| o != UNPLANNED)
            .map(|(k, &o)| (o, k as u32))
            .collect();
        by_offset.sort_unstable();
        Pattern {
            key,
            events,
            offsets: packed.offsets,
            caps,
            by_offset,
            height: packed.height,
            align: packed.align,
            block: None,
            live: 0,
            serving: false,
            matching: false,
            pos: 0,
            next_k: 0,
            deviated_runs: 0,
            last_used: 0,
        }
    }

    /// Starts serving a run (the caller checked `live == 0`).
    pub(crate) fn start(&mut self, now: u64) {
        debug_assert_eq!(self.live, 0);
        self.serving = true;
        self.matching = true;
        self.pos = 0;
        self.next_k = 0;
        self.last_used = now;
    }

    /// Ends the run; `true` when it matched the whole recording.
    pub(crate) fn finish(&mut self) -> bool {
        self.serving = false;
        let hit = self.matching && self.pos == self.events.len();
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
        if self.serving || self.live > 0 {
            return None;
        }
        self.block
    }

    /// Matches an allocation request against the next recorded event.
    /// `grant_block(height, align)` is called when the block is needed and
    /// not held; `None` from it ends the match.
    #[inline]
    pub(crate) fn serve(
        &mut self,
        size: usize,
        align: usize,
        grant_block: impl FnOnce(usize, usize) -> Option<BlockRef>,
    ) -> Served {
        if !self.matching {
            return Served::Ordinary;
        }
        match self.events.get(self.pos) {
            Some(&Event::Alloc { size: s, align: a }) if s == size && a == align => {}
            _ => {
                self.matching = false;
                return Served::Ordinary;
            }
        }
        let k = self.next_k as usize;
        let off = self.offsets[k];
        if off == UNPLANNED {
            self.pos += 1;
            self.next_k += 1;
            return Served::Ordinary;
        }
        let base = match self.block {
            Some(b) => b.base,
            None => match grant_block(self.height, self.align) {
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
        self.next_k += 1;
        self.live += 1;
        Served::Planned {
            addr: base + off,
            cap: self.caps[k],
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
        self.live -= 1;
        if !(self.serving && self.matching) {
            return;
        }
        let base = self.block.map_or(0, |b| b.base);
        match self.events.get(self.pos) {
            Some(&Event::Free { k }) if base + self.offsets[k as usize] == addr => self.pos += 1,
            _ => self.matching = false,
        }
    }

    /// The capacity of the live planned buffer that starts at `addr`.
    pub(crate) fn cap_at(&self, addr: usize) -> Option<usize> {
        let base = self.block?.base;
        let off = addr.checked_sub(base)?;
        // The latest buffer handed out at this offset is the only one that
        // can be live there (an earlier one would overlap it in time).
        let i = self.by_offset.partition_point(|&e| e < (off, self.next_k));
        let (o, k) = *self.by_offset.get(i.checked_sub(1)?)?;
        (o == off).then(|| self.caps[k as usize])
    }
}
