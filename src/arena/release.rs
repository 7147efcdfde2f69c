//! The free path and the ways retained memory goes back to the OS: a free
//! puts a buffer on its class's warm list (least-recently-freed order) or
//! back into the execution heap (`heap.rs`); the retention cap evicts the
//! heap's releasable extents and the oldest retained buffers; `trim`
//! releases them all.

use super::blocks::{Block, BlockState, Place, DEDICATED, NIL};
use super::owners;
use super::state::{ArenaState, HugeAdvice};
use super::tcache::prefetch;
use super::warm::InsertRun;
use super::RUN_REGION_LEN;
use crate::os::{self, OsCounters};
use crate::size_class::{Class, CLASS_COUNT};
use core::ops::Range;
use core::ptr::NonNull;

/// A free's stamp is the arena's free count shifted by this many bits,
/// plus, for a free into a thread cache, that cache's own sequence number:
/// a cached free stamped with the count the thread last saw orders after
/// the arena frees before it and before those after it.
pub(crate) const STAMP_SEQ_BITS: u32 = 24;

impl ArenaState {
    /// Returns live block `i` to the arena. `false` (and no change) when the
    /// block is not live or does not start at `addr`: a buffer is returned at
    /// most once.
    /// `i` may be `NIL` when the caller knows only the address (a buffer
    /// served from a thread cache that had it from an address-only free).
    #[inline(always)]
    pub(crate) fn free(&mut self, i: u32, addr: usize, os: &OsCounters) -> bool {
        let i = if i == NIL {
            match self.live_block_at(addr) {
                Some(i) => i,
                None => return false,
            }
        } else {
            i
        };
        let Some(b) = self.table.get(i) else {
            return false;
        };
        if b.state != BlockState::Live || b.addr != addr {
            return false;
        }
        let (cap, class, place) = (b.cap, b.class, b.place);
        self.note_dead(cap);
        match place {
            Place::Dedicated => {
                self.free_dedicated(i, addr, os);
                return true;
            }
            Place::Heap(_) => {
                self.heap_free(i, os);
                return true;
            }
            Place::Run(_) | Place::Segment(_) | Place::Own => {}
        }
        let c = class as usize;
        self.clock += 1;
        if self.behind_high(i) {
            self.catch_up(i, os);
        }
        let b = self.table.at(i);
        b.state = BlockState::Warm;
        b.freed_at = self.clock << STAMP_SEQ_BITS;
        self.warm.push(&mut self.table, c, i);
        self.hold_cap(os);
        true
    }

    /// Returns live small block `i` (or the one at `addr` when `i` is
    /// `NIL`) that a thread cache held, freed by its user at `stamp` (see
    /// [`STAMP_SEQ_BITS`]): it takes its place in free order, so eviction
    /// stays least-recently-freed first. The block is retained whatever
    /// the cap (caching is on only for caps far above a cache's bytes).
    /// Returns the block, or `NIL` when it was not live.
    pub(crate) fn free_cached(&mut self, i: u32, addr: usize, stamp: u64) -> u32 {
        self.free_cached_next(i, addr, stamp, &mut InsertRun::default())
    }

    /// [`ArenaState::free_cached`] for the next of a run of buffers of one
    /// class given oldest first (see [`WarmSets::insert_next`]).
    ///
    /// [`WarmSets::insert_next`]: super::warm::WarmSets::insert_next
    pub(crate) fn free_cached_next(
        &mut self,
        i: u32,
        addr: usize,
        stamp: u64,
        run: &mut InsertRun,
    ) -> u32 {
        let i = if i == NIL {
            match self.live_block_at(addr) {
                Some(i) => i,
                None => return NIL,
            }
        } else {
            i
        };
        let Some(b) = self.table.get(i) else {
            return NIL;
        };
        if b.state != BlockState::Live || b.addr != addr || b.class == DEDICATED {
            return NIL;
        }
        let (cap, c) = (b.cap, b.class as usize);
        self.note_dead(cap);
        self.clock += 1;
        let b = self.table.at(i);
        b.state = BlockState::Warm;
        b.freed_at = stamp;
        self.warm.insert_next(&mut self.table, c, i, run);
        i
    }

    /// Whether a cache's flush may keep `bytes` more in the depot
    /// (`tcache/depot.rs`): not once the arena is orphaned (its last
    /// buffers must come back as frees, so the body can go), and only
    /// while what the arena retains, the depot's buffers counted, stays
    /// within the retention cap (the depot is outside the eviction order:
    /// [`ArenaState::enforce_cap`] settles it first when over).
    #[inline]
    pub(crate) fn depot_admits(&self, bytes: usize) -> bool {
        !self.orphaned
            && (self.config.retention_cap == usize::MAX
                || self
                    .retained_bytes()
                    .saturating_add(self.depot.bytes())
                    .saturating_add(bytes)
                    <= self.config.retention_cap)
    }

    /// Whether some cache has yet to settle buffers other threads took from
    /// it (claimed offers, stolen spills): they keep the body alive.
    #[inline]
    pub(crate) fn unsettled(&self) -> bool {
        self.claimed_buffers != 0 || self.stolen_buffers != 0
    }

    /// Whether the arena retains more than its cap (the depot counted).
    #[inline]
    pub(crate) fn over_cap(&self) -> bool {
        self.retained_bytes().saturating_add(self.depot.bytes()) > self.config.retention_cap
    }

    /// Frees every depot buffer into its class's free list at its free
    /// stamp, as a cache's flush would have: for a trim, an exceeded
    /// retention cap and an orphaned arena, which work on the free lists.
    /// A class's buffers go in oldest stamp first ([`Depot::drain`]), as
    /// one run into its list.
    ///
    /// [`Depot::drain`]: super::tcache::Depot::drain
    pub(crate) fn settle_depot(&mut self) {
        if self.depot.buffers() == 0 {
            return;
        }
        // Taken out and put back to borrow the lists beside the state (an
        // empty depot allocates nothing; the lists keep their room).
        let mut depot = core::mem::take(&mut self.depot);
        let mut run = InsertRun::default();
        depot.drain(|c, s, ahead| {
            self.prefetch_record(ahead.map(|a| a.addr));
            let i = self.free_cached_next(NIL, s.addr, s.stamp, &mut run);
            debug_assert!(i != NIL, "a depot buffer was not live");
            self.cached_bytes -= crate::size_class::capacity(c);
            self.cache_flushed += 1;
        });
        self.depot = depot;
    }

    /// The depot at the last handle's drop (the arena is orphaned): its
    /// buffers stop being cached. When they are every live buffer the
    /// arena has (no thread's cache or slot holds one, no user does, none
    /// is claimed), the caller destroys the body under this same lock, so
    /// they are counted as freed without their records, which nothing
    /// reads again; otherwise they settle into the free lists, as at a
    /// trim.
    ///
    /// Why: an arena dropped after a run of many small buffers spent its
    /// drop sorting and inserting each into a free list it unmapped next
    /// (8 % of a fresh arena's first run of 100 000 small buffers, drop
    /// included).
    pub(crate) fn settle_depot_at_close(&mut self) {
        debug_assert!(self.orphaned, "the depot closes with the last handle");
        let n = self.depot.buffers();
        if n == 0 || n != self.stats.live_buffers || self.unsettled() {
            self.settle_depot();
            return;
        }
        let mut depot = core::mem::take(&mut self.depot);
        depot.forget(|c, n| {
            let bytes = crate::size_class::capacity(c) * n;
            self.stats.live_bytes -= bytes;
            self.stats.live_buffers -= n;
            self.cached_bytes -= bytes;
            self.cache_flushed += n as u64;
            self.clock += n as u64;
        });
        self.depot = depot;
    }

    /// Every depot buffer freed and evicted at once, for a trim: a trim
    /// releases every retained buffer, so the free order a settle keeps
    /// (a sort of each class's list, an insert into its free list) would
    /// be undone at once. Returns the bytes released.
    ///
    /// Why: a trim after eight threads streamed 80 000 buffers each spent
    /// most of its time, under the lock, settling the depot into free
    /// lists it then emptied.
    fn evict_depot(&mut self, os: &OsCounters) -> usize {
        if self.depot.buffers() == 0 {
            return 0;
        }
        let mut depot = core::mem::take(&mut self.depot);
        let mut total = 0;
        depot.drain_unordered(|c, s, ahead| {
            self.prefetch_record(ahead.map(|a| a.addr));
            self.cached_bytes -= crate::size_class::capacity(c);
            self.cache_flushed += 1;
            let bytes = self.evict_cached(s.addr, os);
            debug_assert!(bytes != 0, "a depot buffer was not live");
            total += bytes;
        });
        self.depot = depot;
        total
    }

    /// Asks the core for the block record of the buffer at `ahead`, which
    /// a depot drain hands over a few places later ([`Depot::drain`]):
    /// drained in list order, the records are at scattered addresses (a
    /// hint: nothing changes).
    ///
    /// [`Depot::drain`]: super::tcache::Depot::drain
    #[inline]
    fn prefetch_record(&self, ahead: Option<usize>) {
        let later = ahead.and_then(|a| self.run_index.block_at(a));
        if let Some(b) = later.and_then(|j| self.table.get(j)) {
            prefetch(b as *const Block as usize);
        }
    }

    /// Frees the cached buffer at `addr` (live in its record: a depot's or
    /// a bin's) and evicts it at once, without putting it on its free list:
    /// a trim's. Returns the bytes released, 0 (nothing changed) when no
    /// live buffer starts at `addr`.
    pub(crate) fn evict_cached(&mut self, addr: usize, os: &OsCounters) -> usize {
        let Some(i) = self.live_block_at(addr) else {
            return 0;
        };
        let cap = self.table.at(i).cap;
        self.note_dead(cap);
        self.clock += 1;
        self.evict_unlisted(i, os)
    }

    /// A dedicated mapping goes back to the OS as soon as it is freed.
    #[inline(never)]
    fn free_dedicated(&mut self, i: u32, addr: usize, os: &OsCounters) {
        let Some(&b) = self.table.get(i) else { return };
        self.dedicated_frees += 1;
        self.note_unheld(b.cap);
        self.unmap_block(i, addr, b.cap, os);
    }

    fn unmap_block(&mut self, i: u32, addr: usize, map_len: usize, os: &OsCounters) {
        // Clear the owner entries first: once unmapped, the kernel may give
        // these addresses to another allocator.
        owners::unregister(addr, map_len, self.owner);
        if let Some(p) = NonNull::new(addr as *mut u8) {
            // SAFETY: the block owns this whole mapping and is no longer live
            // or retained, so nothing refers to its memory.
            unsafe { os::unmap(p, map_len, os) };
        }
        self.by_addr.remove(&addr);
        self.table.vacate(i);
        self.stats.mapped_bytes -= map_len;
    }

    /// The least recently freed retained buffer: the oldest of the class
    /// heads (each class list is in free order). O(classes), and only
    /// called when something must be evicted.
    fn least_recently_freed(&self) -> u32 {
        let mut best = NIL;
        let mut best_at = u64::MAX;
        for c in self.warm.classes.iter_in(0, CLASS_COUNT - 1) {
            let i = self.warm.oldest(c);
            if let Some(b) = self.table.get(i) {
                if b.freed_at < best_at {
                    best_at = b.freed_at;
                    best = i;
                }
            }
        }
        best
    }

    /// [`Self::enforce_cap`] when what the arena retains, the depot
    /// counted, exceeds the cap: the step after anything that made
    /// buffers retained (a free, a flush, absorbed remote frees, a heap
    /// piece shrunk or parked).
    #[inline]
    pub(crate) fn hold_cap(&mut self, os: &OsCounters) {
        if self.over_cap() {
            self.enforce_cap(os);
        }
    }

    /// Releases retained memory until retained bytes fit the cap: the
    /// heap's releasable extents first (`heap.rs`), then least-recently-freed
    /// own-class buffers. Holes between live heap buffers are not
    /// releasable, so the cap may stay exceeded by them.
    #[inline(never)]
    pub(crate) fn enforce_cap(&mut self, os: &OsCounters) {
        if self.depot.buffers() > 0 && self.over_cap() {
            // Into the free lists, in free order, where eviction finds them.
            self.settle_depot();
        }
        if self.heap.marked > 0 {
            let (bytes, n) = self.heap_release(self.config.retention_cap, os);
            self.stats.evictions += n;
            self.stats.evicted_bytes += bytes;
        }
        while self.retained_bytes() > self.config.retention_cap {
            let i = self.least_recently_freed();
            if i == NIL {
                break;
            }
            let cap = self.evict(i, os);
            self.stats.evictions += 1;
            self.stats.evicted_bytes += cap;
        }
    }

    /// Releases warm block `i`'s pages; returns its capacity.
    pub(crate) fn evict(&mut self, i: u32, os: &OsCounters) -> usize {
        let c = self.table.at(i).class as usize;
        self.warm.remove(&mut self.table, c, i);
        self.evict_unlisted(i, os)
    }

    /// [`ArenaState::evict`] for a block on no free list: held, not live
    /// (a cached buffer a trim freed, [`ArenaState::evict_cached`]).
    fn evict_unlisted(&mut self, i: u32, os: &OsCounters) -> usize {
        let b = *self.table.at(i);
        let c = b.class as usize;
        self.note_unheld(b.cap);
        let run = match b.place {
            Place::Own | Place::Dedicated => {
                self.unmap_block(i, b.addr, b.cap, os);
                return b.cap;
            }
            Place::Run(r) | Place::Segment(r) => r,
            // Heap pieces are never on warm lists.
            Place::Heap(_) => return 0,
        };
        let cold = self.table.at(i);
        cold.state = BlockState::Cold;
        cold.ready = 0;
        self.table.push_back(&mut self.cold[c], i);
        if let Place::Segment(_) = b.place {
            // A segment block is page-aligned and page-sized: its pages go
            // back now. Once no block of the segment is live or warm, the
            // whole segment's pages go back instead (the alignment gaps
            // between blocks and the uncarved tail included: a huge page
            // faulted in by a block materializes its neighbours' bytes too,
            // and only a release of the whole range returns them), and the
            // segment is reset for any class.
            let seg = &mut self.runs[run as usize];
            seg.active -= 1;
            let idle = seg.active == 0;
            let (addr, len) = if idle {
                (seg.base, seg.len)
            } else {
                (b.addr, b.cap)
            };
            let within = seg.base..seg.base + seg.len;
            // SAFETY: the block is no longer live or retained, and when the
            // segment is idle no block of it is; the range is page-aligned
            // inside the segment, one live mapping.
            unsafe { self.release_run_pages(run, addr, len, within, os) };
            if idle {
                self.reset_segment(run);
            }
            return b.cap;
        }
        // A small-class block cannot give back its pages alone (they may be
        // shared with neighbours); it turns cold, and the whole run's pages
        // go back once no block of it is live or warm.
        let r = &mut self.runs[run as usize];
        r.active -= 1;
        if r.active == 0 && r.touched {
            r.touched = false;
            // Regions are aligned to their length, so the run's is found
            // from its address.
            let region = r.base & !(RUN_REGION_LEN - 1);
            let (addr, len) = (r.base, r.len);
            // SAFETY: every block of the run is cold or never carved, so no
            // one holds data in it; the run is page-aligned inside its
            // region, one live mapping.
            unsafe { self.release_run_pages(run, addr, len, region..region + RUN_REGION_LEN, os) };
        }
        b.cap
    }

    /// Gives back the pages of `[addr, addr + len)` in run or segment `r`,
    /// `within` being the mapping it lies in. On huge-page-advised pages,
    /// the huge pages the range covers only in part are advised off first,
    /// so khugepaged never collapses them under a warm run (`os/split.rs`);
    /// a segment's whole release advises them on again.
    ///
    /// # Safety
    /// The range is page-aligned inside `within`, a live mapping of the
    /// arena's, and holds nothing anyone still needs.
    unsafe fn release_run_pages(
        &mut self,
        r: u32,
        addr: usize,
        len: usize,
        within: Range<usize>,
        os: &OsCounters,
    ) {
        let Some(p) = NonNull::new(addr as *mut u8) else {
            return;
        };
        let run = &mut self.runs[r as usize];
        if run.huge == HugeAdvice::Off {
            // SAFETY: the caller's contract.
            unsafe { os::release_pages(p, len, os) };
            return;
        }
        let whole = addr == within.start && len == within.len();
        // SAFETY: the caller's contract.
        if unsafe { os::release_pages_in_huge(p, len, within, os) } {
            run.huge = HugeAdvice::Split;
        } else if whole && run.huge == HugeAdvice::Split {
            // Nothing of the mapping is resident: khugepaged has nothing to
            // collapse in it, and the next touches fault huge pages again.
            os::restore_huge_advice(p, len, os);
            run.huge = HugeAdvice::On;
        }
    }

    /// Forgets every (cold) block of an idle segment and makes the segment
    /// available to any class. Never allocates: the idle list's capacity
    /// was reserved when the segment was made.
    fn reset_segment(&mut self, s: u32) {
        for i in 0..self.table.len() as u32 {
            let Some(b) = self.table.get(i) else { continue };
            if b.state == BlockState::Cold && b.place == Place::Segment(s) {
                let (c, addr) = (b.class as usize, b.addr);
                self.table.unlink(&mut self.cold[c], i);
                self.by_addr.remove(&addr);
                self.table.vacate(i);
            }
        }
        let seg = &mut self.runs[s as usize];
        seg.carved = 0;
        seg.touched = false;
        if self.current_segment == s {
            self.current_segment = NIL;
        }
        self.idle_segments.push(s);
    }

    /// Releases every retained buffer (of the heap: every releasable
    /// extent, see `heap.rs`); returns the bytes released.
    pub(crate) fn trim(&mut self, os: &OsCounters) -> usize {
        let mut total = self.evict_depot(os);
        while let Some(c) = self.warm.classes.first_in(0, CLASS_COUNT - 1) {
            total += self.evict(self.warm.oldest(c), os);
        }
        total += self.heap_release(0, os).0;
        self.stats.trims += 1;
        self.stats.trimmed_bytes += total;
        total
    }

    /// Releases every retained buffer of every class for which `keep` is
    /// false; returns the bytes released. Pattern mode calls it once a new
    /// block exists, to give back what the learning run's buffers hold.
    pub(crate) fn trim_classes(&mut self, keep: impl Fn(Class) -> bool, os: &OsCounters) -> usize {
        self.settle_depot();
        let mut total = 0;
        let mut from = 0;
        while let Some(c) = self.warm.classes.first_in(from, CLASS_COUNT - 1) {
            if keep(c) {
                if c + 1 >= CLASS_COUNT {
                    break;
                }
                from = c + 1;
                continue;
            }
            total += self.evict(self.warm.oldest(c), os);
        }
        if total > 0 {
            self.stats.trims += 1;
            self.stats.trimmed_bytes += total;
        }
        total
    }

    /// Sets the retention cap and evicts at once down to it.
    pub(crate) fn set_retention_cap(&mut self, cap: usize, os: &OsCounters) {
        self.config.retention_cap = cap;
        self.stats.retention_cap = cap;
        self.enforce_cap(os);
    }
}
