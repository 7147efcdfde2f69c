//! The execution heap: every buffer of 64 KiB and more in an execution
//! arena is placed by best fit over the free extents of a few large
//! segments, split on allocation, coalesced with its free neighbours on
//! free; a segment whose buffers are all free is idle, and idle segments
//! are taken lowest-created first, only when no extent of a segment in use
//! fits.
//!
//! Why: the placement depends only on the sequence of requests and frees,
//! never on which pages are materialized, and once every buffer is free the
//! heap is back in its starting state (one extent per segment, all idle).
//! A repeated workload then makes exactly the first run's choices, at the
//! same addresses, touching the same pages: no fault, no system call, while
//! any free space serves any size (RSS near the live peak, where the
//! own-class policy kept, per class, the most buffers the class ever had
//! live). The proof that a later run never needs a segment the first did
//! not: a new segment is made only when nothing fits, and a later run finds
//! at that point the same segments in use, in the same state, plus idle
//! ones created later, the lowest of which is the one made then.
//!
//! Each segment keeps a mark: the bytes from its base whose pages are
//! materialized. Every live piece ends at or below it; a request placed
//! below it is warm, one that reaches above it is cold (everything from the
//! mark to the piece's end is materialized then, so the prefix stays whole).
//! Retained bytes are the marked bytes not live. Trim and the retention cap
//! release the free extent at the top of each segment (lowering its mark)
//! and whole idle segments; free holes between live pieces stay
//! materialized until the pieces around them are freed.
//!
//! Learned placement (`heap/learn.rs`, on by default) keeps that
//! argument with one more input: a plan, made from a sequence the heap
//! served and followed by a later sequence that starts the same way, is a
//! function of what ran, and best fit serves whatever a plan does not. The
//! set of plans changes only when a sequence took new memory.
//!
//! Free extents are on size bins (the size classes of their lengths) with a
//! bitmap of non-empty bins: a search scans at most [`SCAN`] entries of the
//! request's own bin, then of the first non-empty bin above it, O(1).
//! Records for the pieces a split makes come from vacant slots reserved on
//! the cold path, so a warm allocation never allocates metadata.

mod learn;
mod pieces;
mod resize;

pub(crate) use self::learn::Learn;
use self::learn::Planned;
pub(crate) use self::pieces::PieceIndex;

use super::bitmap::ClassBitmap;
use super::blocks::{Block, BlockState, List, Place, NIL};
use super::error::ArenaError;
use super::owners;
use super::release::STAMP_SEQ_BITS;
use super::state::{ArenaState, Grant};
use super::CARVE_LIMIT;
use crate::os::{self, MapRequest, OsCounters, HUGE_PAGE_SIZE};
use crate::size_class::{class_of, Class, CLASS_COUNT};
use core::ptr::NonNull;

/// The length of a heap segment: address space only, its pages are
/// materialized as the mark rises. A larger request gets a segment of its
/// own size (rounded to 2 MiB). `tests/common/policy_model.rs` models
/// the heap with the same length, [`SCAN`] and order of choices.
#[cfg(not(miri))]
pub(crate) const HEAP_SEGMENT_LEN: usize = 1 << 30;
/// Under Miri (a heap stand-in that backs every byte) segments are small.
#[cfg(miri)]
pub(crate) const HEAP_SEGMENT_LEN: usize = super::SEGMENT_LEN;

/// Entries of a bin a search looks at (the best of them is taken).
const SCAN: usize = 16;

/// One heap segment: a mapping tiled by pieces (live buffers and free
/// extents) linked in address order from `first`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapSeg {
    pub base: usize,
    pub len: usize,
    /// Bytes from `base` whose pages are materialized.
    pub mark: usize,
    /// Bytes from `base` whose granules name the arena in the owner table
    /// (`owners.rs`): whole granules up to the highest mark so far. Made
    /// as the mark rises, not with the segment: a 1 GiB segment is 16 384
    /// granules, and registering and clearing them all was half of what
    /// making, using once and dropping an arena cost (about 50 of 110 us).
    pub owned: usize,
    /// Live pieces.
    pub live: u32,
    /// The piece at `base` (merges keep the lower record, so it never changes).
    pub first: u32,
    /// No live piece: one extent covers the segment, off the bins, in the idle set.
    pub idle: bool,
}

/// The execution heap's segments, size bins and idle set.
#[derive(Debug)]
pub(crate) struct Heap {
    pub segs: Vec<HeapSeg>,
    pub bins: [List; CLASS_COUNT],
    pub binned: ClassBitmap,
    /// Idle segments. Room for every segment is made when one is, so a
    /// free never grows it.
    pub idle: IdleSet,
    /// The sum of the segments' marks.
    pub marked: usize,
    /// Free extents on bins.
    pub binned_n: u32,
    /// An idle segment whose merge is put off (`NIL` when none): its first
    /// piece, the last buffer freed, is an extent of its own and the rest
    /// of the segment another, left on its bin. The heap behaves as if they
    /// were one idle extent (every other operation merges them first); a
    /// request that the merged heap would serve with exactly that first
    /// piece takes it back without splitting again (`take_parked`).
    pub parked: u32,
    /// Advanced by every change of the heap's pieces (a carve, a free, a
    /// park and its take, a merge, a release) and mirrored in
    /// `ArenaCore::heap_version` at each unlock: the execution heap's
    /// thread keeps a piece back only while the heap stays as it was when
    /// the piece was lent ([`ArenaState::heap_lendable`]).
    pub version: u64,
    /// The length of a new segment ([`HEAP_SEGMENT_LEN`]; tests shorten
    /// it to see many segments with little memory).
    pub segment_len: usize,
    /// Learned placement (`heap/learn.rs`).
    pub learn: Learn,
    /// Live pieces by address (`heap/pieces.rs`).
    pub pieces: PieceIndex,
}

impl Default for Heap {
    fn default() -> Self {
        Heap {
            segs: Vec::new(),
            bins: [List::default(); CLASS_COUNT],
            binned: ClassBitmap::default(),
            idle: IdleSet::default(),
            marked: 0,
            binned_n: 0,
            parked: NIL,
            version: 0,
            segment_len: HEAP_SEGMENT_LEN,
            learn: Learn::default(),
            pieces: PieceIndex::default(),
        }
    }
}

/// A set of segments, as bits: O(1) to add and remove, visited
/// lowest-created first.
#[derive(Debug, Default)]
pub(crate) struct IdleSet {
    words: Vec<u64>,
}

impl IdleSet {
    /// Room for segments `0..n`; never shrinks.
    fn make_room(&mut self, n: usize) -> Result<(), ()> {
        let need = n.div_ceil(64);
        if need > self.words.len() {
            self.words
                .try_reserve(need - self.words.len())
                .map_err(|_| ())?;
            self.words.resize(need, 0);
        }
        Ok(())
    }

    #[inline(always)]
    fn insert(&mut self, s: u32) {
        self.words[s as usize / 64] |= 1 << (s % 64);
    }

    #[inline(always)]
    fn remove(&mut self, s: u32) {
        self.words[s as usize / 64] &= !(1 << (s % 64));
    }

    pub(crate) fn contains(&self, s: u32) -> bool {
        self.words
            .get(s as usize / 64)
            .is_some_and(|w| w & (1 << (s % 64)) != 0)
    }

    /// Whether `s` is the lowest member.
    #[inline(always)]
    fn is_lowest(&self, s: u32) -> bool {
        let k = s as usize / 64;
        let below = (1u64 << (s % 64)) - 1;
        self.contains(s) && self.words[k] & below == 0 && self.words[..k].iter().all(|&w| w == 0)
    }

    /// The members, lowest first.
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(k, &w)| {
            let mut w = w;
            core::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(k as u32 * 64 + b)
            })
        })
    }
}

/// The bin of a free extent of `len` bytes.
#[inline(always)]
pub(crate) fn bin_of(len: usize) -> Class {
    class_of(len).unwrap_or(CLASS_COUNT - 1)
}

/// A piece's length for a request of `eff` bytes (whole pages, at least
/// [`CARVE_LIMIT`] so that it never passes for a small-class buffer), and
/// the extent length that holds it at `align` wherever the extent starts.
#[inline(always)]
fn sizes(eff: usize, align: usize) -> (usize, usize) {
    let page = os::page_size();
    let cap = piece_len(eff);
    (cap, cap + (align.max(page) - page))
}

/// The length of the heap piece that serves a request of `eff` bytes:
/// whole pages, at least [`CARVE_LIMIT`].
#[inline(always)]
pub(crate) fn piece_len(eff: usize) -> usize {
    let page = os::page_size();
    ((eff + page - 1) & !(page - 1)).max(CARVE_LIMIT)
}

/// The longest piece the heap's thread keeps back (`tcache/heap_slot.rs`):
/// a cache counts its bytes in 32 bits.
pub(crate) const LENDABLE_MAX: usize = 1 << 30;

const NO_ROOM: fn(usize) -> ArenaError = |size| ArenaError::OutOfMemory { size, errno: 0 };

/// A number that tells the calling thread from every other live thread:
/// the address of a thread-local byte (no destructor, so usable inside the
/// global allocator).
#[inline(always)]
pub(crate) fn thread_token() -> usize {
    std::thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.with(|t| t as *const u8 as usize)
}

impl ArenaState {
    /// Whether this request goes to the heap: the arena has one and the
    /// calling thread is the one it serves (`heap_thread`, `heap_owner.rs`).
    /// Other threads' large requests take own classes, whose reuse does
    /// not depend on the order requests come in; buffers already in the
    /// heap still return to it, from any thread.
    #[inline(always)]
    pub(crate) fn heap_serves(&self) -> bool {
        self.heap_on && self.heap_thread == thread_token()
    }

    /// A request of `eff` bytes at `align` served from heap memory that is
    /// already materialized, with no system call and no metadata growth;
    /// `None` when that is not possible (the cold path then serves it).
    /// The parked segment's piece (a repeated allocate and free of the
    /// segment's only buffer) is taken inline; everything else, out of line.
    #[inline(always)]
    pub(crate) fn heap_take_warm(
        &mut self,
        eff: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<Grant> {
        if self.heap.learn.on {
            return self.heap_take_warm_learning(eff, align, os);
        }
        self.heap_take_warm_placed(eff, align, os)
    }

    /// [`ArenaState::heap_take_warm`] with learned placement on: the
    /// followed plan's place, else best fit; recorded.
    #[inline(always)]
    fn heap_take_warm_learning(
        &mut self,
        eff: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<Grant> {
        if self.heap.learn.may_follow() {
            let (cap, _) = sizes(eff, align);
            match self.take_planned(cap, align, false, os) {
                Planned::Taken(g) => return Some(g),
                Planned::NeedsCold => return None,
                Planned::Unplanned => {}
            }
        }
        let g = self.heap_take_warm_placed(eff, align, os)?;
        self.learn_granted(g.block, g.ptr.as_ptr() as usize, g.cap, align, !g.warm);
        Some(g)
    }

    /// Best fit from materialized memory: the parked piece inline, the
    /// rest out of line.
    #[inline(always)]
    fn heap_take_warm_placed(
        &mut self,
        eff: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<Grant> {
        if self.heap.parked != NIL {
            let (cap, need) = sizes(eff, align);
            if let Some(g) = self.take_parked(cap, need) {
                return Some(g);
            }
        }
        self.heap_take_warm_general(eff, align, os)
    }

    /// [`ArenaState::heap_take_warm`] past the parked piece (which its
    /// caller tried): the parked segment merged, then a best fit.
    #[inline(never)]
    fn heap_take_warm_general(
        &mut self,
        eff: usize,
        align: usize,
        os: &OsCounters,
    ) -> Option<Grant> {
        let (cap, need) = sizes(eff, align);
        self.unpark();
        let i = self.heap_find(need);
        let e = *self.table.get(i)?;
        let Place::Heap(s) = e.place else { return None };
        let seg = self.heap.segs[s as usize];
        let addr = (e.addr + align - 1) & !(align - 1);
        let records = usize::from(addr > e.addr) + usize::from(addr + cap < e.addr + e.cap);
        if addr + cap > seg.base + seg.mark || self.table.vacant_len() < records {
            return None;
        }
        Some(self.heap_carve(i, s, addr, cap, os))
    }

    /// The cold path for the heap: room for every record first, then an
    /// extent (a fitting one, an idle segment, or a new segment), carved.
    pub(crate) fn heap_take_cold(
        &mut self,
        eff: usize,
        align: usize,
        os: &OsCounters,
    ) -> Result<Grant, ArenaError> {
        let (cap, need) = sizes(eff, align);
        self.unpark();
        // At most three new records: a new segment's extent, a front pad, a
        // rest. Vacant records are kept at least as many as those in use:
        // a later run that starts with every own-class block already made
        // then still finds the records its splits need (the warm path takes
        // vacant ones only). When short, twice as many are made, so that a
        // cold request of a later run (a thread interleaving not seen
        // before) rarely has to grow the table again.
        let in_use = self.table.len() - self.table.vacant_len();
        if self.table.vacant_len() < in_use + 3 {
            let n = 2 * in_use + 3 - self.table.vacant_len();
            self.table.add_vacant(n).map_err(|_| NO_ROOM(cap))?;
        }
        self.pins
            .ensure(self.table.len())
            .map_err(|_| NO_ROOM(cap))?;
        if self.heap.learn.on {
            self.learn_reserve();
            if self.heap.learn.may_follow() {
                if let Planned::Taken(g) = self.take_planned(cap, align, true, os) {
                    return Ok(g);
                }
            }
        }
        let mut i = self.heap_find(need);
        if i == NIL {
            i = self.heap_new_segment(need, cap, os)?;
        }
        let Some(&Block {
            addr: start,
            place: Place::Heap(s),
            ..
        }) = self.table.get(i)
        else {
            return Err(NO_ROOM(cap));
        };
        let addr = (start + align - 1) & !(align - 1);
        let g = self.heap_carve(i, s, addr, cap, os);
        if self.heap.learn.on {
            self.learn_granted(g.block, addr, cap, align, !g.warm);
        }
        Ok(g)
    }

    /// The best fitting extent for `need` bytes: the smallest of the first
    /// [`SCAN`] entries of its own bin that fits, else of the first
    /// non-empty bin above (where every extent fits), else of the rest of
    /// its own bin, else the lowest-created idle segment that fits; `NIL`
    /// when none.
    #[inline]
    fn heap_find(&self, need: usize) -> u32 {
        let c = bin_of(need);
        let own = self.bin_best(c, need, SCAN);
        if own != NIL {
            return own;
        }
        if c + 1 < CLASS_COUNT {
            if let Some(b) = self.heap.binned.first_in(c + 1, CLASS_COUNT - 1) {
                return self.bin_best(b, need, SCAN);
            }
        }
        // Nothing above: the whole of the own bin, then idle segments.
        if self.heap.bins[c].len as usize > SCAN {
            let all = self.bin_best(c, need, usize::MAX);
            if all != NIL {
                return all;
            }
        }
        for s in self.heap.idle.iter() {
            let seg = &self.heap.segs[s as usize];
            if seg.len >= need {
                return seg.first;
            }
        }
        NIL
    }

    /// The smallest extent of at least `need` bytes among the first `scan`
    /// of bin `c` (among equals, the one of the lowest-created segment,
    /// then the lowest address: an order that does not depend on where
    /// the OS put the segments); `NIL` when none.
    #[inline]
    fn bin_best(&self, c: Class, need: usize, scan: usize) -> u32 {
        let mut j = self.heap.bins[c].head;
        let (mut best, mut key) = (NIL, (usize::MAX, u32::MAX, usize::MAX));
        let mut n = 0;
        while j != NIL && n < scan {
            let Some(b) = self.table.get(j) else { break };
            let seg = match b.place {
                Place::Heap(s) => s,
                _ => u32::MAX,
            };
            if b.cap >= need && (b.cap, seg, b.addr) < key {
                key = (b.cap, seg, b.addr);
                best = j;
            }
            j = b.next;
            n += 1;
        }
        best
    }

    /// Maps a segment for a request of `need` bytes; returns its extent
    /// (idle). Nothing changes unless it succeeds.
    #[cold]
    fn heap_new_segment(
        &mut self,
        need: usize,
        cap: usize,
        os: &OsCounters,
    ) -> Result<u32, ArenaError> {
        let len = need
            .max(self.heap.segment_len)
            .checked_add(HUGE_PAGE_SIZE - 1)
            .ok_or(ArenaError::SizeOverflow { size: cap })?
            & !(HUGE_PAGE_SIZE - 1);
        self.heap.segs.try_reserve(1).map_err(|_| NO_ROOM(cap))?;
        self.heap
            .idle
            .make_room(self.heap.segs.len() + 1)
            .map_err(|_| NO_ROOM(cap))?;
        let entries = self
            .heap
            .pieces
            .entries_for(len)
            .map_err(|_| NO_ROOM(cap))?;
        let req = MapRequest {
            len,
            align: HUGE_PAGE_SIZE,
            huge_pages: self.config.huge_pages,
            prefault: false,
        };
        let p = os::map(req, os).map_err(|e| match e {
            os::OsError::MapFailed { errno, .. } => ArenaError::OutOfMemory { size: cap, errno },
            os::OsError::BadLayout => ArenaError::SizeOverflow { size: cap },
        })?;
        if self.config.huge_pages {
            // The request this segment is made for goes at its base: the
            // huge page it ends in stays on base pages (`os`), so a block
            // alone in its segment (planned mode's) costs its own bytes.
            os::keep_straddled_page_small(p, len, p.as_ptr() as usize + cap, os);
        }
        let base = p.as_ptr() as usize;
        // Its granules are registered as the mark rises (`raise_mark`).
        self.stats.mapped_bytes += len;
        let s = self.heap.segs.len() as u32;
        let mut e = Block::new(base, len, bin_of(len) as u16, Place::Heap(s));
        e.state = BlockState::Extent;
        let i = self.table.insert(e);
        self.heap.pieces.add_segment(s, base, len, entries);
        self.heap.segs.push(HeapSeg {
            base,
            len,
            mark: 0,
            owned: 0,
            live: 0,
            first: i,
            idle: true,
        });
        self.heap.idle.insert(s);
        Ok(i)
    }

    /// Cuts a live piece of `cap` bytes at `addr` out of extent `i` of
    /// segment `s` (the rest before and after stays free), materializing up
    /// to its end if it reaches above the segment's mark. Records were
    /// reserved.
    fn heap_carve(&mut self, i: u32, s: u32, addr: usize, cap: usize, os: &OsCounters) -> Grant {
        self.heap.version += 1;
        let e = *self.table.at(i);
        let seg = &mut self.heap.segs[s as usize];
        if seg.idle {
            seg.idle = false;
            self.heap.idle.remove(s);
        } else {
            self.unbin(i);
        }
        let blk = if addr > e.addr {
            // The front pad keeps extent `i`'s record.
            let j = self.table.insert(Block::new(addr, cap, 0, Place::Heap(s)));
            self.link_after(i, j);
            let pad = self.table.at(i);
            pad.cap = addr - e.addr;
            self.bin(i);
            j
        } else {
            i
        };
        let end = addr + cap;
        let e_end = e.addr + e.cap;
        if end < e_end {
            let mut r = Block::new(end, e_end - end, 0, Place::Heap(s));
            r.state = BlockState::Extent;
            r.freed_at = e.freed_at;
            let j = self.table.insert(r);
            self.link_after(blk, j);
            self.bin(j);
        }
        let b = self.table.at(blk);
        b.state = BlockState::Live;
        b.cap = cap;
        b.class = bin_of(cap) as u16;
        self.note_live(cap);
        self.held_buffers += 1;
        let seg = &mut self.heap.segs[s as usize];
        seg.live += 1;
        let mark = seg.base + seg.mark;
        let warm = end <= mark;
        if !warm {
            self.stats.cold_allocations += 1;
            self.raise_mark(s, end, os);
        }
        // After the mark: raising it clears the entries above the old one.
        self.heap.pieces.set(s, addr, blk);
        Grant {
            // SAFETY: the piece lies in a live, non-null segment mapping.
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            cap,
            block: blk,
            fresh: addr >= mark,
            warm,
        }
    }

    /// Raises segment `s`'s mark to `end` when it is below: everything
    /// from the mark to `end` (a carved or grown piece's end, with the free
    /// pad before it) is materialized now, one system call instead of a
    /// fault per page, so a later run that reaches as far (threads
    /// interleaving in an order not seen before, a piece grown the same
    /// way) costs no fault.
    fn raise_mark(&mut self, s: u32, end: usize, os: &OsCounters) {
        let seg = &mut self.heap.segs[s as usize];
        let mark = seg.base + seg.mark;
        if end <= mark {
            return;
        }
        let old = seg.mark;
        seg.mark = end - seg.base;
        self.heap.marked += end - mark;
        if seg.mark > seg.owned {
            // The granules the new bytes touch, before any piece there is
            // handed out (a free by address finds the arena through them).
            // A granule the table has no memory for stays unowned, as a
            // failed registration always left it.
            let to = seg.mark.next_multiple_of(owners::GRANULE).min(seg.len);
            owners::register(seg.base + seg.owned, to - seg.owned, self.owner);
            seg.owned = to;
        }
        self.heap.pieces.clear(s, old, end - seg.base);
        // SAFETY: [mark, end) is page-aligned (marks and piece ends are
        // whole pages), non-empty, and inside the segment's live read-write
        // mapping; nobody owns those bytes (free space, or a piece being
        // handed out or grown, whose new bytes are not yet written).
        unsafe { os::prefault(NonNull::new_unchecked(mark as *mut u8), end - mark, os) };
    }

    /// Lowers segment `s`'s mark to `from` when it is above, releasing the
    /// pages in between; returns the bytes released. `from` is a whole page
    /// in the segment, and no live piece lies above it (the caller's
    /// contract: those pages are free).
    fn lower_mark(&mut self, s: u32, from: usize, os: &OsCounters) -> usize {
        let seg = &mut self.heap.segs[s as usize];
        let to = seg.base + seg.mark;
        if from >= to {
            return 0;
        }
        seg.mark = from - seg.base;
        let within = seg.base..seg.base + seg.len;
        self.heap.marked -= to - from;
        self.heap.version += 1;
        if let Some(p) = NonNull::new(from as *mut u8) {
            // SAFETY: [from, to) is page-aligned (`from` by the contract,
            // the mark as every mark), inside the segment's live mapping,
            // and free: no live piece lies above `from`.
            unsafe {
                if self.config.huge_pages {
                    // The huge page `from` lies in keeps live pieces below
                    // it: advised off, khugepaged never collapses it under
                    // them (`os/split.rs`).
                    os::release_pages_in_huge(p, to - from, within, os);
                } else {
                    os::release_pages(p, to - from, os);
                }
            }
        }
        to - from
    }

    /// Returns live heap piece `i`: it becomes a free extent, merged with
    /// free neighbours; the segment goes idle when it was its last live
    /// piece. The segment's only buffer, at its base, is parked inline (see
    /// [`Heap::parked`]); everything else, out of line.
    #[inline(always)]
    pub(crate) fn heap_free(&mut self, i: u32, os: &OsCounters) {
        if self.heap.learn.on {
            // Recorded; the epoch ends with the last live piece
            // (`heap/learn.rs`).
            self.learn_freeing(i);
            self.heap_free_placed(i, os);
            if self.heap.learn.idle() {
                self.learn_epoch_end(os);
            }
            return;
        }
        self.heap_free_placed(i, os);
    }

    #[inline(always)]
    fn heap_free_placed(&mut self, i: u32, os: &OsCounters) {
        if self.heap.parked == NIL {
            if let Some(s) = self.parks_on_free(i) {
                self.heap_park(i, s, os);
                return;
            }
        }
        self.heap_free_general(i, os);
    }

    /// The segment of live heap piece `i` when freeing it parks it: it is
    /// the segment's only live piece and lies at its base, with free space
    /// above it.
    #[inline(always)]
    fn parks_on_free(&self, i: u32) -> Option<u32> {
        let b = self.table.get(i)?;
        let Place::Heap(s) = b.place else { return None };
        (b.lo == NIL && b.hi != NIL && self.heap.segs[s as usize].live == 1).then_some(s)
    }

    /// Whether live heap piece `i` may be kept back by the heap's thread
    /// at its free and handed out again at its next request of the same
    /// length (`tcache/heap_slot.rs`): it is alone in its segment, at its
    /// base, with free space above (its free would park it).
    ///
    /// Why that suffices, given that the slot keeps and serves it only
    /// while the heap's version stays (nothing carved, freed, merged or
    /// released anywhere since the grant): the heap chose this piece for a
    /// request of this length from state `S`, carving it at the base of a
    /// segment that was idle (or taking it back parked). Freeing it parks
    /// it, which leaves the heap in a state equivalent to `S` with that
    /// segment idle, so the same request finds the same piece again. The
    /// heap thus ends where it would have. Never under a retention cap (a
    /// parked piece counts against it, a kept one would not) and never for
    /// a piece of [`LENDABLE_MAX`] or more.
    pub(crate) fn heap_lendable(&self, i: u32) -> bool {
        self.parks_on_free(i).is_some()
            && self
                .table
                .get(i)
                .is_some_and(|b| b.state == BlockState::Live && b.cap < LENDABLE_MAX)
            && self.config.retention_cap == usize::MAX
    }

    /// Piece `i`, the only live one of segment `s` and at its base, is
    /// freed: the segment goes idle with it parked (its merge with the rest
    /// put off). No segment is parked already.
    #[inline(always)]
    fn heap_park(&mut self, i: u32, s: u32, os: &OsCounters) {
        // The address stays in the index: a lookup checks that the record
        // is live at that address, and a repeated workload's next piece
        // there (usually this record again) then costs no insert. The cold
        // path purges entries that went stale.
        self.held_buffers -= 1;
        self.clock += 1;
        self.heap.version += 1;
        let f = self.table.at(i);
        f.state = BlockState::Extent;
        f.freed_at = self.clock << STAMP_SEQ_BITS;
        let seg = &mut self.heap.segs[s as usize];
        seg.live = 0;
        seg.idle = true;
        self.heap.idle.insert(s);
        self.heap.parked = s;
        self.hold_cap(os);
    }

    /// [`ArenaState::heap_free`] past the inline park.
    #[inline(never)]
    fn heap_free_general(&mut self, i: u32, os: &OsCounters) {
        self.unpark();
        if let Some(s) = self.parks_on_free(i) {
            self.heap_park(i, s, os);
            return;
        }
        let (place, lo) = {
            let b = self.table.at(i);
            (b.place, b.lo)
        };
        let Place::Heap(s) = place else { return };
        self.held_buffers -= 1;
        self.clock += 1;
        self.heap.version += 1;
        let stamp = self.clock << STAMP_SEQ_BITS;
        let f = self.table.at(i);
        f.state = BlockState::Extent;
        f.freed_at = stamp;
        let mut k = i;
        if lo != NIL && self.is_extent(lo) {
            self.unbin(lo);
            self.absorb(lo, k);
            k = lo;
        }
        let hi = self.table.at(k).hi;
        if hi != NIL && self.is_extent(hi) {
            self.unbin(hi);
            self.absorb(k, hi);
        }
        self.table.at(k).freed_at = stamp;
        let seg = &mut self.heap.segs[s as usize];
        seg.live -= 1;
        if seg.live == 0 {
            seg.idle = true;
            self.heap.idle.insert(s);
        } else {
            self.bin(k);
        }
        self.hold_cap(os);
    }

    /// Releases the free memory at the top of each segment (above its last
    /// live piece), idle segments whole, highest-created first, until
    /// retained bytes are at most `limit`. Returns (bytes, extents) released.
    pub(crate) fn heap_release(&mut self, limit: usize, os: &OsCounters) -> (usize, u64) {
        self.unpark();
        let (mut bytes, mut n) = (0, 0);
        for s in (0..self.heap.segs.len()).rev() {
            if self.retained_bytes() <= limit {
                break;
            }
            let seg = self.heap.segs[s];
            if seg.mark == 0 {
                continue;
            }
            // The top piece: the last one in address order.
            let mut top = seg.first;
            while let Some(b) = self.table.get(top).filter(|b| b.hi != NIL) {
                top = b.hi;
            }
            let Some(t) = self.table.get(top).copied() else {
                continue;
            };
            if t.state != BlockState::Extent || t.addr >= seg.base + seg.mark {
                continue;
            }
            // No live piece lies above the top extent's start.
            bytes += self.lower_mark(s as u32, t.addr, os);
            n += 1;
        }
        if n > 0 {
            self.heap.learn.note_released();
        }
        (bytes, n)
    }

    /// Free extents of the heap with materialized bytes (for `stats`; a
    /// parked segment's two count as the one they stand for).
    ///
    /// Walks each segment's pieces in address order: the heap's records
    /// only. A scan of the whole block table (every small buffer's record
    /// too) took milliseconds under the lock on an arena with hundreds of
    /// thousands of small buffers, at every `stats()`. `check()` compares
    /// the two.
    pub(crate) fn heap_retained_extents(&self) -> usize {
        let rest = self.parked_rest();
        let mut n = 0;
        for g in &self.heap.segs {
            let mut i = g.first;
            while let Some(b) = self.table.get(i) {
                if b.state == BlockState::Extent && i != rest && b.addr < g.base + g.mark {
                    n += 1;
                }
                i = b.hi;
            }
        }
        n
    }

    /// The record of a parked segment's rest (its second extent), or `NIL`.
    pub(crate) fn parked_rest(&self) -> u32 {
        match self.heap.segs.get(self.heap.parked as usize) {
            Some(g) => self.table.get(g.first).map_or(NIL, |b| b.hi),
            None => NIL,
        }
    }

    /// Whether the free extent just above live heap piece `i` has
    /// materialized bytes (so it counts as a retained extent of its own
    /// while `i` is held in the heap's thread's slot, where parked, the two
    /// would count as one).
    pub(crate) fn heap_rest_retained(&self, i: u32) -> bool {
        let Some(b) = self.table.get(i) else {
            return false;
        };
        let (Place::Heap(s), Some(r)) = (b.place, self.table.get(b.hi)) else {
            return false;
        };
        let seg = &self.heap.segs[s as usize];
        b.state == BlockState::Live && r.state == BlockState::Extent && r.addr < seg.base + seg.mark
    }

    /// Serves a request of a piece of `cap` bytes (an extent of `need`)
    /// from the parked segment, when the merged heap would serve it with
    /// exactly the parked first piece: no extent on any bin, the parked
    /// segment the lowest idle one, fitting, the piece of that length.
    /// The split the merged heap would make is the one still there.
    #[inline(always)]
    fn take_parked(&mut self, cap: usize, need: usize) -> Option<Grant> {
        let s = self.heap.parked;
        let seg = &self.heap.segs[s as usize];
        let x = seg.first;
        let (len, top) = (seg.len, seg.base + seg.mark);
        let addr = {
            let b = self.table.get(x)?;
            if b.cap != cap {
                return None;
            }
            b.addr
        };
        // The rest is the one extent on a bin.
        if len < need || self.heap.binned_n != 1 || addr + cap > top || !self.heap.idle.is_lowest(s)
        {
            return None;
        }
        // Still indexed: it was live when parked, below the mark, and
        // entries are cleared only above a mark as it rises.
        debug_assert_eq!(self.heap.pieces.block_at(addr), Some(x));
        self.heap.parked = NIL;
        self.heap.version += 1;
        self.heap.idle.remove(s);
        let g = &mut self.heap.segs[s as usize];
        g.idle = false;
        g.live = 1;
        // Its class is still that of its length (`heap_carve`).
        self.table.at(x).state = BlockState::Live;
        self.note_live(cap);
        self.held_buffers += 1;
        Some(Grant {
            // SAFETY: the piece lies in a live, non-null segment mapping.
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            cap,
            block: x,
            fresh: false,
            warm: true,
        })
    }

    /// Merges the parked segment's two extents, if any (see [`Heap::parked`]).
    #[inline(always)]
    fn unpark(&mut self) {
        if self.heap.parked != NIL {
            self.unpark_now();
        }
    }

    #[inline(never)]
    fn unpark_now(&mut self) {
        let s = self.heap.parked;
        self.heap.parked = NIL;
        self.heap.version += 1;
        let x = self.heap.segs[s as usize].first;
        let hi = self.table.at(x).hi;
        if hi != NIL {
            self.unbin(hi);
            self.absorb(x, hi);
        }
    }

    #[inline(always)]
    fn is_extent(&self, i: u32) -> bool {
        self.table
            .get(i)
            .is_some_and(|b| b.state == BlockState::Extent)
    }

    /// Extent `hi` (just above `lo`) joins `lo`; its record is vacated.
    #[inline]
    fn absorb(&mut self, lo: u32, hi: u32) {
        let h = *self.table.at(hi);
        let l = self.table.at(lo);
        l.cap += h.cap;
        l.hi = h.hi;
        if h.hi != NIL {
            self.table.at(h.hi).lo = lo;
        }
        self.table.vacate(hi);
    }

    /// Links piece `j` just above piece `i` in address order.
    #[inline]
    fn link_after(&mut self, i: u32, j: u32) {
        let next = self.table.at(i).hi;
        self.table.at(i).hi = j;
        let b = self.table.at(j);
        b.lo = i;
        b.hi = next;
        if next != NIL {
            self.table.at(next).lo = j;
        }
    }

    /// Puts free extent `i` on the bin of its length (newest first).
    #[inline]
    fn bin(&mut self, i: u32) {
        let c = bin_of(self.table.at(i).cap);
        self.table.at(i).class = c as u16;
        self.table.insert_after(&mut self.heap.bins[c], NIL, i);
        self.heap.binned.set(c);
        self.heap.binned_n += 1;
    }

    /// Takes free extent `i` off its bin.
    #[inline]
    fn unbin(&mut self, i: u32) {
        let c = self.table.at(i).class as usize;
        let list = &mut self.heap.bins[c];
        self.table.unlink(list, i);
        self.heap.binned_n -= 1;
        if list.is_empty() {
            self.heap.binned.clear(c);
        }
    }
}

#[cfg(test)]
#[path = "heap/resize_tests.rs"]
mod resize_tests;

#[cfg(test)]
#[path = "heap/learn_tests.rs"]
mod learn_tests;
