//! The arena's state behind its lock: the block table, free lists, runs,
//! address index and counters. The life of a buffer is split across files
//! named for it: `reuse.rs` (warm path), `reserve.rs` (cold path),
//! `release.rs` (free, eviction, trim).

use super::blocks::{BlockState, BlockTable, List, NIL};
use super::config::ArenaConfig;
use super::hash::MulHasher;
use super::heap::Heap;
use super::owners::{self, Owner};
use super::pins::PinTable;
use super::run_index::RunIndex;
use super::tcache::spare::Spares;
use super::tcache::{Cache, Depot};
use super::warm::WarmSets;
use crate::os::{self, OsCounters};
use crate::size_class::CLASS_COUNT;
use crate::stats::ArenaStats;
use core::hash::BuildHasherDefault;
use core::ptr::NonNull;
use std::collections::HashMap;

/// Buffer addresses are distinct and 16-byte aligned: their hash drops the
/// four low bits (`hash.rs`).
pub(crate) type AddrMap = HashMap<usize, u32, BuildHasherDefault<MulHasher<4>>>;

/// A region carved into blocks of one small class.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub base: usize,
    pub len: usize,
    pub class: u16,
    /// Bytes carved from the front so far.
    pub carved: usize,
    /// Carved blocks that are live or warm (not cold).
    pub active: u32,
    /// Some block of the run has been handed out since its pages were last released.
    pub touched: bool,
    /// A segment shared by large classes (blocks release their own pages),
    /// rather than a one-class run.
    pub segment: bool,
    /// The huge-page advice of the pages it lies on.
    pub huge: HugeAdvice,
}

/// The huge-page advice of a run's or segment's pages: a release that
/// covers one of their huge pages only in part advises that page off, so
/// khugepaged never collapses it under a warm run (`os/split.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HugeAdvice {
    /// Base pages: not advised.
    Off,
    /// Advised for huge pages.
    On,
    /// Advised, and some huge pages advised off since by partial releases:
    /// a segment's next whole release advises them on again.
    Split,
}

impl HugeAdvice {
    /// The advice of pages mapped with huge pages asked for (`advised`) or not.
    pub(crate) const fn mapped(advised: bool) -> Self {
        if advised {
            HugeAdvice::On
        } else {
            HugeAdvice::Off
        }
    }
}

/// One mapping that small-class runs are cut from, front to back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunRegion {
    pub base: usize,
    pub len: usize,
    /// Bytes handed to runs so far.
    pub carved: usize,
}

/// The arena's `cached_bytes`: the caches' published bytes and the
/// depot's, less the stolen bytes their caches have not settled.
///
/// Modular (additions and subtractions wrap): a cache publishes what it
/// holds only at its locked operations, so the buffers it set aside in
/// its spill since may be missing from its published bytes, and when
/// another thread takes them the total goes below the true sum of what
/// its parts publish until that cache settles (`tcache/spill_path.rs`).
/// Its readers compute with it modulo the word (the live bytes less it,
/// for the peak), where such a dip cancels against the cache's own held
/// bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CachedBytes(usize);

impl CachedBytes {
    /// The value, modulo the word.
    #[inline(always)]
    pub(crate) fn get(self) -> usize {
        self.0
    }
}

impl core::ops::AddAssign<usize> for CachedBytes {
    #[inline(always)]
    fn add_assign(&mut self, b: usize) {
        self.0 = self.0.wrapping_add(b);
    }
}

impl core::ops::SubAssign<usize> for CachedBytes {
    #[inline(always)]
    fn sub_assign(&mut self, b: usize) {
        self.0 = self.0.wrapping_sub(b);
    }
}

/// What an allocation hands back to the layer above.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant {
    pub ptr: NonNull<u8>,
    pub cap: usize,
    pub block: u32,
    /// The pages are straight from the OS and read as zero.
    pub fresh: bool,
    /// Served from retained memory.
    pub warm: bool,
}

/// Everything behind the arena lock.
pub(crate) struct ArenaState {
    pub table: BlockTable,
    pub warm: WarmSets,
    pub cold: [List; CLASS_COUNT],
    /// Frees of classed buffers so far: the stamp that orders retained
    /// buffers by free time, and a term of `ArenaStats::frees`.
    pub clock: u64,
    /// Frees of dedicated mappings so far (the other term of `frees`).
    pub dedicated_frees: u64,
    /// Capacity and number of blocks that are live or warm (heap pieces:
    /// live ones in the number only; their bytes held are the heap's marks).
    /// The warm path moves a block between the two without touching the
    /// bytes, so retained bytes (held minus live) cost it nothing; see
    /// [`ArenaState::stats`].
    pub held_bytes: usize,
    pub held_buffers: usize,
    pub runs: Vec<Run>,
    /// The mappings small-class runs are cut from (`RUN_REGION_LEN` each;
    /// only the last one may still have room): unmapped whole when the
    /// arena goes, while runs themselves are never unmapped.
    pub run_regions: Vec<RunRegion>,
    pub current_run: [u32; CLASS_COUNT],
    /// The largest request each class has served (see `ready.rs`).
    pub high: [usize; CLASS_COUNT],
    /// The segment large classes are carved from now.
    pub current_segment: u32,
    /// Segments whose buffers were all released, ready to be carved again.
    /// Capacity for every segment is reserved when one is made, so pushing
    /// here (on the free path) never allocates.
    pub idle_segments: Vec<u32>,
    /// Live buffers by address (and every own-class block, free or not),
    /// except small-class blocks (in `run_index`) and execution heap pieces
    /// (in `heap.pieces`; heap extents are found through their neighbours).
    pub by_addr: AddrMap,
    /// Small-class blocks by address, by arithmetic on their runs.
    pub run_index: RunIndex,
    /// Buffers of 64 KiB and more go to the execution heap (`heap.rs`)
    /// rather than to own-class lists: set for execution arenas not in
    /// pattern mode.
    pub heap_on: bool,
    /// The thread the heap serves (`heap::thread_token`): at first the one
    /// that made the arena. The heap's placement is repeatable only
    /// when the order of requests is, which threads interleaving
    /// differently run by run break; own classes do not depend on it. It
    /// moves only while no heap piece is live (`heap_owner.rs`).
    pub heap_thread: usize,
    /// The heap's thread's life flag (`thread_life.rs`; `None` when it
    /// could not be read): cleared, that thread has exited.
    pub heap_life: Option<super::thread_life::Life>,
    /// A run boundary found another thread's heap piece live: runs
    /// overlap, and boundaries no longer move the heap (`heap_owner.rs`).
    pub heap_runs_overlap: bool,
    pub heap: Heap,
    pub pins: PinTable,
    pub config: ArenaConfig,
    pub stats: ArenaStats,
    /// Every handle is gone; the last live buffer frees the arena.
    pub orphaned: bool,
    /// The small path's runs and heaps (`small/`, with run ownership on).
    pub small: super::small::Pool,
    /// The body's own pointer, under which this arena's mappings are
    /// registered in the owner table (`owners.rs`); set once the body exists.
    pub owner: Owner,
    /// Pattern mode's patterns and run (`None` when it is off).
    pub pattern: Option<Box<super::pattern::PatternSet>>,
    /// The thread caches registered with this arena (`tcache`).
    pub caches: CacheList,
    /// Left caches' memory kept for the next thread (`tcache/spare.rs`).
    pub spares: Spares,
    /// Bytes of buffers in thread caches, as the caches last published
    /// them, and in the depot: the arena counts them live, its peak does
    /// not. Less what other threads took from caches' spills and those
    /// caches have not settled (`stolen_bytes`), so modular: see
    /// [`CachedBytes`].
    pub cached_bytes: CachedBytes,
    /// Small buffers the caches gave back, kept for their next refills
    /// (`tcache/depot.rs`): live to their records, in `cached_bytes`.
    pub depot: Depot,
    /// Frees the arena performed for cache flushes (already counted as
    /// frees by the caches).
    pub cache_flushed: u64,
    /// Buffers (and their bytes) other threads claimed from caches that
    /// have not settled yet (`tcache/claim.rs`): still in those caches'
    /// counters, the arena's again. They keep the body alive.
    pub claimed_bytes: usize,
    pub claimed_buffers: usize,
    /// Buffers (and their bytes) other threads took from caches' spills
    /// into their own bins (`tcache/steal.rs`) that the robbed caches have
    /// not settled yet: still in those caches' held words and published
    /// bytes as well as in the thieves', which `cached_bytes` counts less
    /// these (so `cached_bytes` plus these is the published bytes and the
    /// depot's). They keep the body alive, as claimed buffers do.
    pub stolen_bytes: usize,
    pub stolen_buffers: usize,
    /// Frees counted by caches that are gone.
    pub absorbed_frees: u64,
    /// The highest peak of caches that are gone.
    pub peak_absorbed: usize,
    /// The epoch set by the latest `trim`: a cache that has not seen it
    /// releases what it gives back.
    pub trim_epoch: u64,
}

/// Registered thread caches (`tcache::Cache`), by pointer.
#[derive(Default)]
pub(crate) struct CacheList(pub Vec<NonNull<Cache>>);

// SAFETY: the list is only used under the arena lock; the caches it names
// are `Sync` and their freeing is settled by `tcache::link`.
unsafe impl Send for CacheList {}

impl core::ops::Deref for CacheList {
    type Target = Vec<NonNull<Cache>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl core::ops::DerefMut for CacheList {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl ArenaState {
    pub(crate) fn new(config: ArenaConfig) -> Self {
        ArenaState {
            table: BlockTable::default(),
            warm: WarmSets::default(),
            cold: [List::default(); CLASS_COUNT],
            clock: 0,
            dedicated_frees: 0,
            held_bytes: 0,
            held_buffers: 0,
            runs: Vec::new(),
            run_regions: Vec::new(),
            current_run: [NIL; CLASS_COUNT],
            high: [0; CLASS_COUNT],
            current_segment: NIL,
            idle_segments: Vec::new(),
            by_addr: AddrMap::default(),
            run_index: RunIndex::default(),
            heap_on: false,
            heap_thread: 0,
            heap_life: None,
            heap_runs_overlap: false,
            heap: Heap::default(),
            pins: PinTable::default(),
            config,
            stats: ArenaStats {
                retention_cap: config.retention_cap,
                ..ArenaStats::default()
            },
            orphaned: false,
            small: Default::default(),
            owner: Owner::NONE,
            pattern: None,
            caches: CacheList::default(),
            spares: Spares::default(),
            cached_bytes: CachedBytes::default(),
            depot: Depot::default(),
            cache_flushed: 0,
            claimed_bytes: 0,
            claimed_buffers: 0,
            stolen_bytes: 0,
            stolen_buffers: 0,
            absorbed_frees: 0,
            peak_absorbed: 0,
            trim_epoch: 0,
        }
    }

    /// A block that was neither live nor warm becomes live (cold paths).
    pub(crate) fn note_new_live(&mut self, cap: usize) {
        self.held_bytes += cap;
        self.held_buffers += 1;
        self.stats.cold_allocations += 1;
        self.note_live(cap);
    }

    /// A warm block leaves the arena's keeping (evicted or trimmed).
    pub(crate) fn note_unheld(&mut self, cap: usize) {
        self.held_bytes -= cap;
        self.held_buffers -= 1;
    }

    /// Bytes of free buffers kept with their pages: own-class blocks held
    /// and the heap's materialized bytes, less what is live.
    #[inline]
    pub(crate) fn retained_bytes(&self) -> usize {
        self.held_bytes + self.heap.marked - self.stats.live_bytes
    }

    /// The counters, with the ones the warm path leaves implicit filled in:
    /// every allocation is warm or cold, and was freed or is live.
    pub(crate) fn stats(&self) -> ArenaStats {
        let mut s = self.stats;
        s.retained_bytes = self.retained_bytes();
        s.retained_buffers = self.held_buffers - s.live_buffers;
        if self.heap.marked > 0 {
            s.retained_buffers += self.heap_retained_extents();
        }
        s.frees = self.clock + self.dedicated_frees;
        s.warm_allocations = s.frees + s.live_buffers as u64 - s.cold_allocations;
        s
    }

    #[inline]
    pub(crate) fn note_live(&mut self, cap: usize) {
        self.stats.live_bytes += cap;
        self.stats.live_buffers += 1;
        // Buffers in thread caches count as live to the arena, not to its
        // peak: what caches hold is taken off only when a peak is possible.
        if self.stats.live_bytes > self.stats.peak_live_bytes {
            self.note_peak();
        }
    }

    /// A live buffer grew in place by `extra` bytes.
    #[inline]
    pub(crate) fn note_grown(&mut self, extra: usize) {
        self.stats.live_bytes += extra;
        if self.stats.live_bytes > self.stats.peak_live_bytes {
            self.note_peak();
        }
    }

    /// Live bytes less what thread caches hold, as the peak if higher:
    /// this thread's own cache by its current counters, every other cache
    /// by the bytes it last published (`cached_bytes`). Exact on one
    /// thread; no pass over other threads' caches (whose lines their
    /// threads keep writing) while the lock is held.
    #[cold]
    #[inline(never)]
    fn note_peak(&mut self) {
        let (published, held) = super::tcache::own_unpublished(self.owner.0.cast_const().cast());
        let small = super::small::own_live(self.owner.0.cast_const().cast());
        let live = (self.live_uncached() as isize)
            .wrapping_add(published as isize)
            .wrapping_sub(held as isize)
            .wrapping_add(small as isize);
        if live > 0 && live as usize > self.stats.peak_live_bytes {
            self.stats.peak_live_bytes = live as usize;
        }
    }

    /// The live bytes less `cached_bytes`, modulo the word: what the peak
    /// checks start from, the lock holder's ([`ArenaState::note_peak`])
    /// and the caches' own (through the live mirror the lock's release
    /// stores). Claimed buffers are freed (out of the live bytes) but
    /// still in their caches' published bytes, so in `cached_bytes`,
    /// until those caches settle: added back.
    #[inline]
    pub(crate) fn live_uncached(&self) -> usize {
        self.stats
            .live_bytes
            .wrapping_sub(self.cached_bytes.get())
            .wrapping_add(self.claimed_bytes)
    }

    /// A buffer counted in `cached_bytes` is live to its user again.
    #[inline]
    pub(crate) fn note_uncached(&mut self, cap: usize) {
        self.cached_bytes -= cap;
        if self.stats.live_bytes > self.stats.peak_live_bytes {
            self.note_peak();
        }
    }

    #[inline]
    pub(crate) fn note_dead(&mut self, cap: usize) {
        self.stats.live_bytes -= cap;
        self.stats.live_buffers -= 1;
    }

    /// The block that starts at `addr`, if it is live.
    pub(crate) fn live_block_at(&self, addr: usize) -> Option<u32> {
        let i = self.indexed_block(addr)?;
        let b = self.table.get(i)?;
        (b.state == BlockState::Live && b.addr == addr).then_some(i)
    }

    /// The block indexed at `addr` (live or not): a small-class run's slot
    /// when a run holds `addr`, else as [`ArenaState::large_block_at`].
    #[inline]
    pub(crate) fn indexed_block(&self, addr: usize) -> Option<u32> {
        match self.run_index.lookup(addr) {
            Some(block) => block,
            None => self.large_block_at(addr),
        }
    }

    /// The block indexed at `addr` (live or not) for a buffer known not to
    /// be a small-class slot: the execution heap's entry when a heap
    /// segment holds `addr`, else the address index's.
    #[inline]
    pub(crate) fn large_block_at(&self, addr: usize) -> Option<u32> {
        match self.heap.pieces.block_at(addr) {
            Some(i) => Some(i),
            None => self.by_addr.get(&addr).copied(),
        }
    }

    /// Gives every mapping back to the OS. Called once, when the last handle
    /// and the last allocation of the arena are gone.
    pub(crate) fn release_everything(&mut self, os: &OsCounters) {
        // Every mapping the arena made: blocks with their own, segments, and
        // the regions small-class runs were cut from (runs are not mappings).
        let blocks = self
            .table
            .iter()
            .filter(|b| b.state != BlockState::Vacant)
            .filter_map(|b| Some((b.addr, b.own_mapping()?)));
        let segments = self
            .runs
            .iter()
            .filter(|r| r.segment)
            .map(|r| (r.base, r.len));
        let regions = self.run_regions.iter().map(|g| (g.base, g.len, g.len));
        // A heap segment's granules are registered up to its highest mark.
        let heap = self.heap.segs.iter().map(|g| (g.base, g.len, g.owned));
        let whole = blocks.chain(segments).map(|(base, len)| (base, len, len));
        for (base, len, owned) in whole.chain(regions).chain(heap) {
            owners::unregister(base, owned, self.owner);
            if let Some(p) = NonNull::new(base as *mut u8) {
                // SAFETY: each range is one whole mapping the arena made;
                // with the arena gone nobody can reach its memory any more.
                unsafe { os::unmap(p, len, os) };
            }
        }
        self.runs.clear();
        self.run_index.clear();
        self.run_regions.clear();
        self.heap.segs.clear();
        self.heap.pieces.clear_all();
        self.stats.mapped_bytes = 0;
    }
}
