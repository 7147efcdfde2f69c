//! The execution heap's live pieces found from their address by
//! arithmetic: every piece starts on a 4 KiB boundary of its segment
//! (pieces are whole pages, segments page-aligned), so a segment keeps one
//! block number per 4 KiB of its length, and an address names its entry
//! by `(addr - base) >> 12` once its segment is known (a binary search
//! over the few segments, sorted by base).
//!
//! Why not the address hash map the other large blocks use: a heap piece
//! can start at any page of a segment, so a map that keeps an entry per
//! address ever used (a repeated run then inserts nothing) grew to tens
//! of thousands of entries for a few hundred live pieces, and its probes
//! missed the cache on every carve and free. Here the entries of the
//! marked bytes (4 bytes per 4 KiB, a thousandth of them) stay in cache.
//!
//! Memory: a mapping of `len / 1024` bytes per segment (1 MiB for a 1 GiB
//! segment) of the kernel's zero pages, each touched only as the
//! segment's mark rises over the 4 MiB it describes ([`PieceIndex::clear`],
//! on the cold path that raises it). A warm run writes only entries of
//! marked bytes, so it takes no fault here either. A mapping rather than
//! the system allocator's zeroed memory: glibc serves a 1 MiB request
//! again from memory it recycles once one was freed, and clears all of it
//! (made resident whole, and 20 us added to every arena whose heap was
//! used). Its system calls are counted apart from the arena's, as the
//! owner table's are (metadata, on the cold path).
//!
//! Entries are block numbers plus one (zero: none). An entry may be stale
//! (its piece freed, merged, or its record reused), as the hash map's
//! were: callers check that the record starts at the address and is live.
//!
//! Bookkeeping over one mapping per segment ([`crate::os`], which serves
//! it from the Rust heap under Miri).

use crate::arena::blocks::NIL;
use crate::os::{self, MapRequest, OsCounters};
use core::ptr::NonNull;

/// The system calls of every arena's index mappings.
static INDEX_OS: OsCounters = OsCounters::new();

/// The granule entries describe: the smallest page size, so every piece
/// start is a multiple of it.
const GRANULE_SHIFT: u32 = 12;

/// One segment's entries.
struct SegEntries {
    base: usize,
    len: usize,
    /// Per granule of the segment: the block starting there plus one, or 0.
    blocks: Entries,
}

/// The live heap pieces by address: one entry array per heap segment.
#[derive(Default)]
pub(crate) struct PieceIndex {
    /// By segment number (the heap's creation order).
    segs: Vec<SegEntries>,
    /// Segment numbers sorted by base.
    by_base: Vec<u32>,
}

impl core::fmt::Debug for PieceIndex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let spans: Vec<(usize, usize)> = self.segs.iter().map(|g| (g.base, g.len)).collect();
        f.debug_struct("PieceIndex").field("segs", &spans).finish()
    }
}

/// A segment's entries: `n` zeroed `u32`s in a mapping of their own
/// (none when `n` is 0), given back when dropped. Made before the
/// segment's mapping ([`PieceIndex::entries_for`]), so that adding the
/// segment cannot fail.
pub(crate) struct Entries {
    ptr: NonNull<u32>,
    n: usize,
    /// Where its mapping's system calls are counted.
    os: &'static OsCounters,
}

// SAFETY: an `Entries` owns its mapping alone (nothing else has its
// pointer), so it may move to and be used from another thread like a `Box`.
unsafe impl Send for Entries {}
// SAFETY: shared references only read (as `&[u32]`).
unsafe impl Sync for Entries {}

impl Entries {
    /// `n` zeroed entries, or `None` when the kernel refuses the mapping;
    /// its system calls counted in `os`.
    fn zeroed(n: usize, os: &'static OsCounters) -> Option<Entries> {
        if n == 0 {
            return Some(Entries {
                ptr: NonNull::dangling(),
                n: 0,
                os,
            });
        }
        let req = MapRequest {
            len: n.checked_mul(4)?,
            align: os::page_size(),
            huge_pages: false,
            prefault: false,
        };
        let ptr = os::map(req, os).ok()?.cast::<u32>();
        Some(Entries { ptr, n, os })
    }

    fn as_slice(&self) -> &[u32] {
        // SAFETY: `ptr` is `n` initialized `u32`s (a zeroed mapping, or
        // dangling for `n == 0`), aligned (page or dangling), owned by
        // `self`; the borrow of `self` keeps them alive and unwritten.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.n) }
    }

    fn as_mut_slice(&mut self) -> &mut [u32] {
        // SAFETY: as in `as_slice`; the unique borrow of `self` makes this
        // the only access.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.n) }
    }
}

impl Drop for Entries {
    fn drop(&mut self) {
        if self.n > 0 {
            // SAFETY: `ptr` is the mapping of `n * 4` bytes `zeroed` made,
            // owned by `self` and given back once, here.
            unsafe { os::unmap(self.ptr.cast(), self.n * 4, self.os) };
        }
    }
}

impl PieceIndex {
    /// Room for one more segment of `len` bytes, and its entries; `Err`
    /// (nothing changed) when the allocator refuses.
    pub(crate) fn entries_for(&mut self, len: usize) -> Result<Entries, ()> {
        self.segs.try_reserve(1).map_err(|_| ())?;
        self.by_base.try_reserve(1).map_err(|_| ())?;
        Entries::zeroed(len >> GRANULE_SHIFT, &INDEX_OS).ok_or(())
    }

    /// Adds segment `s` (the next number: as many as there are) of `len`
    /// bytes at `base` (4 KiB-aligned), no piece indexed, with the entries
    /// [`PieceIndex::entries_for`] made for it. Never allocates.
    pub(crate) fn add_segment(&mut self, s: u32, base: usize, len: usize, e: Entries) {
        debug_assert_eq!(s as usize, self.segs.len(), "segments are added in order");
        debug_assert_eq!(base % (1 << GRANULE_SHIFT), 0);
        debug_assert_eq!(e.n, len >> GRANULE_SHIFT);
        let at = self
            .by_base
            .partition_point(|&t| self.segs[t as usize].base < base);
        self.segs.push(SegEntries {
            base,
            len,
            blocks: e,
        });
        self.by_base.insert(at, s);
    }

    /// The block indexed at `addr` (live or not), if a segment holds `addr`
    /// and an entry names one there.
    #[inline]
    pub(crate) fn block_at(&self, addr: usize) -> Option<u32> {
        let g = match self.by_base.as_slice() {
            [] => return None,
            [s] => self.segs.get(*s as usize)?,
            many => {
                let k = many.partition_point(|&t| self.segs[t as usize].base <= addr);
                self.segs.get(*many.get(k.checked_sub(1)?)? as usize)?
            }
        };
        let off = addr.wrapping_sub(g.base);
        if off >= g.len || off % (1 << GRANULE_SHIFT) != 0 {
            return None;
        }
        let e = *g.blocks.as_slice().get(off >> GRANULE_SHIFT)?;
        e.checked_sub(1)
    }

    /// Indexes block `i` at `addr`, a piece start in segment `s`.
    #[inline]
    pub(crate) fn set(&mut self, s: u32, addr: usize, i: u32) {
        debug_assert!(i != NIL);
        if let Some(g) = self.segs.get_mut(s as usize) {
            let off = addr.wrapping_sub(g.base);
            debug_assert!(off < g.len && off % (1 << GRANULE_SHIFT) == 0);
            if let Some(e) = g.blocks.as_mut_slice().get_mut(off >> GRANULE_SHIFT) {
                *e = i.wrapping_add(1);
            }
        }
    }

    /// Clears the entries of segment `s`'s bytes `[from, to)` (offsets from
    /// its base): called as its mark rises over them, where no piece is
    /// live. The writes are what touches the entries' pages on the cold
    /// path, so that a warm run's carves there take no fault.
    pub(crate) fn clear(&mut self, s: u32, from: usize, to: usize) {
        if let Some(g) = self.segs.get_mut(s as usize) {
            let lo = from >> GRANULE_SHIFT;
            let e = g.blocks.as_mut_slice();
            let hi = (to >> GRANULE_SHIFT).min(e.len());
            if let Some(e) = e.get_mut(lo..hi) {
                e.fill(0);
            }
        }
    }

    /// Forgets every segment (the arena is giving its mappings back).
    pub(crate) fn clear_all(&mut self) {
        self.segs.clear();
        self.by_base.clear();
    }

    /// Bytes of entries kept (for tests and the docs' figures).
    #[cfg(test)]
    pub(crate) fn entry_bytes(&self) -> usize {
        self.segs.iter().map(|g| g.blocks.n * 4).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K4: usize = 4096;

    fn add(x: &mut PieceIndex, s: u32, base: usize, len: usize) {
        let e = x.entries_for(len).unwrap();
        x.add_segment(s, base, len, e);
    }

    #[test]
    fn entries_are_a_zeroed_mapping_given_back_when_dropped() {
        // Its own counters (a static: no leak for Miri to report).
        static OS: OsCounters = OsCounters::new();
        let os = &OS;
        let mut e = Entries::zeroed(3 * K4, os).unwrap();
        assert!(e.as_slice().iter().all(|&x| x == 0));
        e.as_mut_slice()[5] = 9;
        assert_eq!(e.as_slice()[5], 9);
        let s = os.snapshot();
        assert_eq!(
            (s.maps, s.unmaps, s.mapped_bytes),
            (1, 0, 3 * K4 as u64 * 4)
        );
        drop(e);
        let s = os.snapshot();
        assert_eq!(
            (s.maps, s.unmaps, s.unmapped_bytes),
            (1, 1, 3 * K4 as u64 * 4)
        );
        // None: no call.
        drop(Entries::zeroed(0, os).unwrap());
        assert_eq!(os.snapshot().syscalls(), 2);
    }

    #[test]
    fn a_piece_is_found_at_its_start_only() {
        let mut x = PieceIndex::default();
        add(&mut x, 0, 1 << 30, 64 * K4);
        assert_eq!(x.block_at((1 << 30) + 3 * K4), None);
        x.set(0, (1 << 30) + 3 * K4, 7);
        assert_eq!(x.block_at((1 << 30) + 3 * K4), Some(7));
        // Not a granule start, outside, just past the end.
        assert_eq!(x.block_at((1 << 30) + 3 * K4 + 16), None);
        assert_eq!(x.block_at((1 << 30) - K4), None);
        assert_eq!(x.block_at((1 << 30) + 64 * K4), None);
        // Block 0 is a block, not "none".
        x.set(0, 1 << 30, 0);
        assert_eq!(x.block_at(1 << 30), Some(0));
        assert_eq!(x.entry_bytes(), 64 * 4);
    }

    #[test]
    fn segments_are_found_whatever_order_they_were_made_in() {
        let mut x = PieceIndex::default();
        // Made at descending, then interleaved bases.
        let bases = [9usize, 5, 1, 7, 3];
        for (s, b) in bases.iter().enumerate() {
            add(&mut x, s as u32, b << 30, 16 * K4);
            x.set(s as u32, (b << 30) + 2 * K4, 100 + s as u32);
        }
        for (s, b) in bases.iter().enumerate() {
            assert_eq!(x.block_at((b << 30) + 2 * K4), Some(100 + s as u32));
            assert_eq!(x.block_at((b << 30) + 3 * K4), None);
            // Between segments, below the lowest, above the highest.
            assert_eq!(x.block_at((b << 30) + 16 * K4), None);
        }
        assert_eq!(x.block_at(0), None);
        assert_eq!(x.block_at(usize::MAX & !(K4 - 1)), None);
    }

    #[test]
    fn clear_forgets_a_range_and_leaves_the_rest() {
        let mut x = PieceIndex::default();
        add(&mut x, 0, 1 << 30, 8 * K4);
        for p in 0..8 {
            x.set(0, (1 << 30) + p * K4, p as u32);
        }
        x.clear(0, 2 * K4, 5 * K4);
        let found: Vec<Option<u32>> = (0..8).map(|p| x.block_at((1 << 30) + p * K4)).collect();
        assert_eq!(
            found,
            [
                Some(0),
                Some(1),
                None,
                None,
                None,
                Some(5),
                Some(6),
                Some(7)
            ]
        );
        // Past the end is ignored.
        x.clear(0, 6 * K4, 100 * K4);
        assert_eq!(x.block_at((1 << 30) + 7 * K4), None);
        x.clear_all();
        assert_eq!(x.block_at(1 << 30), None);
    }
}
