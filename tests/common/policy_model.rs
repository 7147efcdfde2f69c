//! The arena's retention policy written plainly, as a model to check the
//! real arena against. One copy, included by path from the proptest model
//! (`tests/suite/arena_model.rs`) and the fuzz target
//! (`fuzz/fuzz_targets/arena_ops.rs`, its own workspace, hence no crate).
//!
//! The own-class policy (I/O arenas; execution arenas below 64 KiB): a
//! request is served from a retained buffer of its own class when the
//! alignment divides the class's capacity, taking that class's most
//! recently freed buffer; otherwise it is cold. A free retains the buffer;
//! when retained bytes pass the cap, the least recently freed go first.
//!
//! The execution heap (execution arenas, 64 KiB and more; `src/arena/heap.rs`),
//! written with plain vectors and scans: pieces of whole pages placed by
//! best fit over free extents (each on the bin of its length's class,
//! newest first; the first 16 entries of the request's own bin, else of the
//! first non-empty bin above, else the rest of the own bin, else the
//! lowest-created idle segment; ties by segment, then offset), split on
//! allocation, merged with free neighbours on free. A segment is 1 GiB, or
//! the request rounded to 2 MiB if larger. A live piece grows in place
//! into the free extent just above it when that is long enough, and a
//! shrunk piece's cut-off pages join that extent (or become one). Each
//! segment's mark: warm below it, raised by a cold allocation or growth. Retained = marked bytes not live. The cap
//! and trim release, highest segment first, the free extent at a segment's
//! top (lowering its mark), then least-recently-freed own-class buffers.

use warmarena::size_class::{aligned_size, capacity, class_of, CLASS_COUNT};
use warmarena::ArenaStats;

const SEGMENT: usize = 1 << 30;
const SCAN: usize = 16;
const HUGE: usize = 2 << 20;
const CARVE_LIMIT: usize = 64 << 10;

/// A buffer the model handed out: `Class(c)` under the own-class policy,
/// `Piece(id)` in the heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    Class(usize),
    Piece(usize),
}

#[derive(Debug, Clone, Copy)]
struct Piece {
    seg: usize,
    off: usize,
    len: usize,
    live: bool,
    /// Merged away (its record vacated).
    gone: bool,
}

#[derive(Debug, Clone, Copy)]
struct Seg {
    len: usize,
    mark: usize,
    live: usize,
    idle: bool,
}

/// The execution heap's model.
#[derive(Debug, Default)]
pub struct HeapModel {
    pieces: Vec<Piece>,
    segs: Vec<Seg>,
    /// Per bin, extent ids, head first.
    bins: Vec<Vec<usize>>,
    idle: Vec<usize>,
    live_bytes: usize,
    pub mapped: usize,
}

fn bin_of(len: usize) -> usize {
    class_of(len).unwrap_or(CLASS_COUNT - 1)
}

impl HeapModel {
    fn new() -> Self {
        HeapModel {
            bins: vec![Vec::new(); CLASS_COUNT],
            ..HeapModel::default()
        }
    }

    fn marked(&self) -> usize {
        self.segs.iter().map(|s| s.mark).sum()
    }

    fn retained(&self) -> usize {
        self.marked() - self.live_bytes
    }

    fn retained_extents(&self) -> usize {
        let segs = &self.segs;
        self.pieces
            .iter()
            .filter(|p| !p.gone && !p.live && p.off < segs[p.seg].mark)
            .count()
    }

    fn bin_best(&self, c: usize, need: usize, scan: usize) -> Option<usize> {
        self.bins[c]
            .iter()
            .take(scan)
            .copied()
            .filter(|&i| self.pieces[i].len >= need)
            .min_by_key(|&i| {
                let p = &self.pieces[i];
                (p.len, p.seg, p.off)
            })
    }

    fn find(&self, need: usize) -> Option<usize> {
        let c = bin_of(need);
        if let Some(i) = self.bin_best(c, need, SCAN) {
            return Some(i);
        }
        if let Some(b) = (c + 1..CLASS_COUNT).find(|&b| !self.bins[b].is_empty()) {
            return self.bin_best(b, need, SCAN);
        }
        if self.bins[c].len() > SCAN {
            if let Some(i) = self.bin_best(c, need, usize::MAX) {
                return Some(i);
            }
        }
        self.idle
            .iter()
            .find(|&&s| self.segs[s].len >= need)
            .map(|&s| self.first_of(s))
    }

    fn first_of(&self, s: usize) -> usize {
        (0..self.pieces.len())
            .find(|&i| !self.pieces[i].gone && self.pieces[i].seg == s && self.pieces[i].off == 0)
            .unwrap()
    }

    fn at(&self, s: usize, off: usize) -> Option<usize> {
        (0..self.pieces.len()).find(|&i| {
            let p = &self.pieces[i];
            !p.gone && p.seg == s && p.off == off
        })
    }

    fn bin(&mut self, i: usize) {
        let c = bin_of(self.pieces[i].len);
        self.bins[c].insert(0, i);
    }

    fn unbin(&mut self, i: usize) {
        let c = bin_of(self.pieces[i].len);
        let k = self.bins[c].iter().position(|&x| x == i).unwrap();
        self.bins[c].remove(k);
    }

    /// Serves `eff` bytes at `align`: (piece, capacity, warm).
    fn alloc(&mut self, eff: usize, align: usize, page: usize) -> (usize, usize, bool) {
        let cap = ((eff + page - 1) & !(page - 1)).max(CARVE_LIMIT);
        let need = cap + (align.max(page) - page);
        let i = match self.find(need) {
            Some(i) => i,
            None => {
                let len = (need.max(SEGMENT) + HUGE - 1) & !(HUGE - 1);
                self.segs.push(Seg {
                    len,
                    mark: 0,
                    live: 0,
                    idle: true,
                });
                self.mapped += len;
                let s = self.segs.len() - 1;
                self.idle.push(s);
                self.pieces.push(Piece {
                    seg: s,
                    off: 0,
                    len,
                    live: false,
                    gone: false,
                });
                self.pieces.len() - 1
            }
        };
        let e = self.pieces[i];
        let s = e.seg;
        if self.segs[s].idle {
            self.segs[s].idle = false;
            self.idle.retain(|&x| x != s);
        } else {
            self.unbin(i);
        }
        let off = (e.off + align - 1) & !(align - 1);
        let blk = if off > e.off {
            self.pieces[i].len = off - e.off;
            self.bin(i);
            self.pieces.push(Piece { off, ..e });
            self.pieces.len() - 1
        } else {
            i
        };
        let end = off + cap;
        if end < e.off + e.len {
            self.pieces.push(Piece {
                seg: s,
                off: end,
                len: e.off + e.len - end,
                live: false,
                gone: false,
            });
            let r = self.pieces.len() - 1;
            self.bin(r);
        }
        let p = &mut self.pieces[blk];
        p.len = cap;
        p.live = true;
        self.live_bytes += cap;
        let seg = &mut self.segs[s];
        seg.live += 1;
        let warm = end <= seg.mark;
        seg.mark = seg.mark.max(end);
        (blk, cap, warm)
    }

    fn free(&mut self, i: usize) {
        let b = self.pieces[i];
        assert!(b.live && !b.gone, "model: freeing a piece that is not live");
        self.pieces[i].live = false;
        self.live_bytes -= b.len;
        let mut k = i;
        let lo = (0..self.pieces.len()).find(|&j| {
            let p = &self.pieces[j];
            !p.gone && p.seg == b.seg && p.off + p.len == b.off
        });
        if let Some(lo) = lo.filter(|&j| !self.pieces[j].live) {
            self.unbin(lo);
            self.pieces[lo].len += self.pieces[k].len;
            self.pieces[k].gone = true;
            k = lo;
        }
        let top = self.pieces[k].off + self.pieces[k].len;
        if let Some(hi) = self.at(b.seg, top).filter(|&j| !self.pieces[j].live) {
            self.unbin(hi);
            self.pieces[k].len += self.pieces[hi].len;
            self.pieces[hi].gone = true;
        }
        let seg = &mut self.segs[b.seg];
        seg.live -= 1;
        if seg.live == 0 {
            seg.idle = true;
            self.idle.push(b.seg);
            self.idle.sort_unstable();
        } else {
            self.bin(k);
        }
    }

    /// Grows live piece `i` in place for `eff` bytes when the free extent
    /// just above it is long enough (taking its start, or all of it): the
    /// new capacity.
    fn grow(&mut self, i: usize, eff: usize, page: usize) -> Option<usize> {
        let p = self.pieces[i];
        assert!(p.live && !p.gone, "model: growing a piece that is not live");
        let cap = ((eff + page - 1) & !(page - 1)).max(CARVE_LIMIT);
        if cap <= p.len {
            return Some(p.len);
        }
        let extra = cap - p.len;
        let hi = self
            .at(p.seg, p.off + p.len)
            .filter(|&j| !self.pieces[j].live && self.pieces[j].len >= extra)?;
        self.unbin(hi);
        if self.pieces[hi].len == extra {
            self.pieces[hi].gone = true;
        } else {
            self.pieces[hi].off += extra;
            self.pieces[hi].len -= extra;
            self.bin(hi);
        }
        self.pieces[i].len = cap;
        self.live_bytes += extra;
        let seg = &mut self.segs[p.seg];
        seg.mark = seg.mark.max(p.off + cap);
        Some(cap)
    }

    /// Shrinks live piece `i` in place to what `eff` bytes get: the pages
    /// past its new end join the free extent above it, or become one. The
    /// new capacity.
    fn shrink(&mut self, i: usize, eff: usize, page: usize) -> usize {
        let p = self.pieces[i];
        assert!(
            p.live && !p.gone,
            "model: shrinking a piece that is not live"
        );
        let cap = ((eff + page - 1) & !(page - 1)).max(CARVE_LIMIT);
        if cap >= p.len {
            return p.len;
        }
        let (cut, tail) = (p.len - cap, p.off + cap);
        match self
            .at(p.seg, p.off + p.len)
            .filter(|&j| !self.pieces[j].live)
        {
            Some(hi) => {
                self.unbin(hi);
                self.pieces[hi].off = tail;
                self.pieces[hi].len += cut;
                self.bin(hi);
            }
            None => {
                self.pieces.push(Piece {
                    seg: p.seg,
                    off: tail,
                    len: cut,
                    live: false,
                    gone: false,
                });
                let r = self.pieces.len() - 1;
                self.bin(r);
            }
        }
        self.pieces[i].len = cap;
        self.live_bytes -= cut;
        cap
    }

    /// Releases segment tops, highest segment first, while `retained()`
    /// passes `limit`: (bytes, extents).
    fn release(&mut self, limit: usize) -> (usize, u64) {
        let (mut bytes, mut n) = (0, 0);
        for s in (0..self.segs.len()).rev() {
            if self.retained() <= limit {
                break;
            }
            let seg = self.segs[s];
            if seg.mark == 0 {
                continue;
            }
            let top = (0..self.pieces.len()).find(|&j| {
                let p = &self.pieces[j];
                !p.gone && p.seg == s && p.off + p.len == seg.len
            });
            let Some(t) = top.map(|j| self.pieces[j]) else {
                continue;
            };
            if t.live || t.off >= seg.mark {
                continue;
            }
            bytes += seg.mark - t.off;
            n += 1;
            self.segs[s].mark = t.off;
        }
        (bytes, n)
    }
}

/// One arena's expected counters and retained buffers.
#[derive(Debug, Default)]
pub struct PolicyModel {
    pub live: usize,
    pub live_buffers: usize,
    pub peak: usize,
    pub leases: usize,
    pub leased: usize,
    /// Retained own-class buffers as (class, freed-at), oldest first.
    pub retained: Vec<(usize, u64)>,
    pub cap: Option<usize>,
    pub clock: u64,
    /// Times `enforce` had to evict something.
    pub evicting_ops: u64,
    pub evictions: u64,
    pub evicted_bytes: usize,
    /// The execution heap, for an execution arena's model.
    pub heap: Option<HeapModel>,
    /// The OS page size.
    pub page: usize,
    /// Free stamps (in `retained`) of buffers freed on another thread: the
    /// arena orders such a free only after the frees its thread had seen
    /// (docs/threads.md, "Promises"), not exactly where it happened.
    pub uncertain: Vec<u64>,
    /// Set when a decision that depends on an uncertain buffer's place in
    /// the free order was taken (an eviction while one was retained): the
    /// model no longer knows which buffers the arena retains, only how many
    /// bytes are live. Cleared by a trim, after which both retain nothing.
    pub inexact: bool,
    /// Moves of the heap between threads: at least, at most.
    pub heap_moves: (u64, u64),
    /// The heap went to a thread that exited and may not be back yet.
    pub heap_away: bool,
    /// A boundary found a live heap piece: boundaries move it no more
    /// while its thread lives.
    pub heap_overlap: bool,
}

impl PolicyModel {
    /// The model of an execution arena: buffers of 64 KiB and more in the heap.
    pub fn execution() -> Self {
        PolicyModel {
            heap: Some(HeapModel::new()),
            page: warmarena::page_size(),
            ..PolicyModel::default()
        }
    }

    fn own_retained_bytes(&self) -> usize {
        self.retained.iter().map(|&(c, _)| capacity(c)).sum()
    }

    /// A run boundary crossed on another thread, which then exits having
    /// asked for nothing (`heap_owner.rs`): the heap moves to it when no
    /// heap piece is live, unless runs were seen overlapping (a boundary
    /// that found a live piece) and the heap's thread is alive. The heap
    /// comes back at a later request of this thread, at the first heap
    /// piece at the latest, so the count of moves is known within bounds.
    #[allow(dead_code)] // used by the fuzz target
    pub fn boundary_elsewhere(&mut self) {
        let Some(h) = self.heap.as_ref() else { return };
        let live = h.segs.iter().any(|s| s.live > 0);
        let (lo, hi) = &mut self.heap_moves;
        if self.heap_away {
            // Held by an exited thread (whose thread token the new thread
            // may have been given: then it serves it without a move), or
            // back with this one already (then overlap keeps it here).
            *hi += 2;
        } else if live {
            self.heap_overlap = true;
        } else if !self.heap_overlap {
            *lo += 1;
            *hi += 2;
            self.heap_away = true;
        }
    }

    pub fn retained_bytes(&self) -> usize {
        self.own_retained_bytes() + self.heap.as_ref().map_or(0, HeapModel::retained)
    }

    pub fn retained_buffers(&self) -> usize {
        self.retained.len() + self.heap.as_ref().map_or(0, HeapModel::retained_extents)
    }

    /// The capacity a held buffer has.
    pub fn cap_of(&self, h: Held) -> usize {
        match h {
            Held::Class(c) => capacity(c),
            Held::Piece(i) => self.heap.as_ref().unwrap().pieces[i].len,
        }
    }

    /// Serves a request; returns (class served, warm?) under the own-class
    /// policy (the model of an I/O arena).
    #[allow(dead_code)] // used by the fuzz target
    pub fn alloc(&mut self, size: usize, align: usize) -> (usize, bool) {
        match self.alloc_any(size, align) {
            (Held::Class(c), warm) => (c, warm),
            (Held::Piece(_), _) => panic!("model: a heap piece asked for as a class"),
        }
    }

    /// Serves a request; returns what was handed out and whether it was warm.
    pub fn alloc_any(&mut self, size: usize, align: usize) -> (Held, bool) {
        let eff = aligned_size(size, align).unwrap();
        let c = class_of(eff).unwrap();
        let page = self.page;
        if let (Some(h), true) = (self.heap.as_mut(), capacity(c) >= CARVE_LIMIT) {
            if self.heap_away {
                // Taken back from the exited thread, at the latest now.
                self.heap_moves.0 += 1;
                self.heap_away = false;
            }
            let (i, cap, warm) = h.alloc(eff, align, page);
            self.live += cap;
            self.live_buffers += 1;
            self.peak = self.peak.max(self.live);
            return (Held::Piece(i), warm);
        }
        let fits = |k: usize| k == c && (align <= 16 || capacity(k) % align == 0);
        let best = self
            .retained
            .iter()
            .map(|&(k, _)| k)
            .filter(|&k| fits(k))
            .min();
        let served = match best {
            Some(k) => {
                // The most recently freed buffer of that class.
                let i = self
                    .retained
                    .iter()
                    .enumerate()
                    .filter(|(_, &(kk, _))| kk == k)
                    .max_by_key(|(_, &(_, t))| t)
                    .map(|(i, _)| i)
                    .unwrap();
                let (_, t) = self.retained.remove(i);
                // Same class, same bytes: but which one the arena handed
                // out depends on the uncertain one's place, so every buffer
                // of the class left is as uncertain.
                if self.uncertain.contains(&t)
                    || self
                        .retained
                        .iter()
                        .any(|&(kk, tt)| kk == k && self.uncertain.contains(&tt))
                {
                    let more: Vec<u64> = self
                        .retained
                        .iter()
                        .filter(|&&(kk, _)| kk == k)
                        .map(|&(_, tt)| tt)
                        .collect();
                    self.uncertain.extend(more);
                }
                self.uncertain.retain(|&u| u != t);
                (k, true)
            }
            None => (c, false),
        };
        self.live += capacity(served.0);
        self.live_buffers += 1;
        self.peak = self.peak.max(self.live);
        (Held::Class(served.0), served.1)
    }

    /// A live buffer grows in place to `size` bytes at `align` (which its
    /// address meets), as the heap's thread asks: `Some(capacity)` when it
    /// is a heap piece with a long enough free extent just above it.
    #[allow(dead_code)] // used by the fuzz target
    pub fn grow_in_place(&mut self, h: Held, size: usize, align: usize) -> Option<usize> {
        let Held::Piece(i) = h else { return None };
        let eff = aligned_size(size, align)?;
        let page = self.page;
        let heap = self.heap.as_mut()?;
        let old = heap.pieces[i].len;
        let cap = heap.grow(i, eff, page)?;
        self.live += cap - old;
        self.peak = self.peak.max(self.live);
        Some(cap)
    }

    /// A live buffer shrinks in place to `size` bytes at `align`, as the
    /// heap's thread asks: `Some(capacity)` when it is a heap piece (whose
    /// cut-off pages go back to the heap, retained up to the cap).
    #[allow(dead_code)] // used by the fuzz target
    pub fn shrink_in_place(&mut self, h: Held, size: usize, align: usize) -> Option<usize> {
        let Held::Piece(i) = h else { return None };
        let eff = aligned_size(size.max(1), align)?;
        let page = self.page;
        let heap = self.heap.as_mut()?;
        let old = heap.pieces[i].len;
        let cap = heap.shrink(i, eff, page);
        self.live -= old - cap;
        self.enforce();
        Some(cap)
    }

    /// A live own-class buffer of `class` is freed (and retained, up to the cap).
    #[allow(dead_code)] // used by the fuzz target
    pub fn free(&mut self, class: usize) {
        self.free_any(Held::Class(class));
    }

    /// A live buffer is freed (retained, up to the cap).
    pub fn free_any(&mut self, h: Held) {
        self.free_at_place(h, false);
    }

    /// A live buffer is freed on another thread: retained as by
    /// [`PolicyModel::free_any`], at an uncertain place in the free order.
    #[allow(dead_code)] // used by the fuzz target
    pub fn free_elsewhere(&mut self, h: Held) {
        self.free_at_place(h, true);
    }

    fn free_at_place(&mut self, h: Held, uncertain: bool) {
        self.live -= self.cap_of(h);
        self.live_buffers -= 1;
        self.clock += 1;
        match h {
            Held::Class(c) => {
                self.retained.push((c, self.clock));
                if uncertain {
                    self.uncertain.push(self.clock);
                }
            }
            Held::Piece(i) => self.heap.as_mut().unwrap().free(i),
        }
        self.enforce();
    }

    /// Whether the model still knows which buffers the arena retains.
    #[allow(dead_code)] // used by the fuzz target
    pub fn exact(&self) -> bool {
        !self.inexact
    }

    /// Releases retained memory until the cap holds (or only heap holes
    /// remain): heap tops first, then the least recently freed buffers.
    pub fn enforce(&mut self) {
        let cap = self.cap.unwrap_or(usize::MAX);
        if self.retained_bytes() > cap {
            self.evicting_ops += 1;
        }
        if let Some(h) = self.heap.as_mut() {
            if h.marked() > 0 {
                let own = self
                    .retained
                    .iter()
                    .map(|&(c, _)| capacity(c))
                    .sum::<usize>();
                // The real arena compares all retained bytes with the cap.
                let (bytes, n) = h.release(cap.saturating_sub(own));
                self.evictions += n;
                self.evicted_bytes += bytes;
            }
        }
        if self.retained_bytes() > cap
            && self
                .retained
                .iter()
                .any(|(_, t)| self.uncertain.contains(t))
        {
            // Which buffers go depends on where the uncertain ones stand.
            self.inexact = true;
        }
        while self.retained_bytes() > cap && !self.retained.is_empty() {
            let (c, t) = self.retained.remove(0);
            self.uncertain.retain(|&u| u != t);
            self.evictions += 1;
            self.evicted_bytes += capacity(c);
        }
    }

    /// Releases everything releasable; returns the bytes released.
    pub fn trim(&mut self) -> usize {
        let own = self.own_retained_bytes();
        self.retained.clear();
        self.uncertain.clear();
        self.inexact = false;
        own + self.heap.as_mut().map_or(0, |h| h.release(0).0)
    }

    /// Bytes mapped for the heap so far.
    #[allow(dead_code)] // used by the proptest model, not the fuzz target
    pub fn heap_mapped(&self) -> usize {
        self.heap.as_ref().map_or(0, |h| h.mapped)
    }

    /// Panics with `what` and the field when the arena's counters differ.
    pub fn check(&self, s: &ArenaStats, what: &str) {
        assert_eq!(s.live_bytes, self.live, "{what}: live bytes");
        assert_eq!(s.live_buffers, self.live_buffers, "{what}: live buffers");
        assert_eq!(s.peak_live_bytes, self.peak, "{what}: peak");
        assert_eq!(s.leases, self.leases, "{what}: leases");
        assert_eq!(s.leased_bytes, self.leased, "{what}: leased bytes");
        let (lo, hi) = self.heap_moves;
        assert!(
            (lo..=hi).contains(&s.heap_moves),
            "{what}: heap moves {} not in {lo}..={hi}",
            s.heap_moves
        );
        if self.inexact {
            // Only what no free order decides: without a heap (whose holes
            // may stay above it), the cap holds.
            if self.heap.is_none() {
                let cap = self.cap.unwrap_or(usize::MAX);
                assert!(s.retained_bytes <= cap, "{what}: retained above the cap");
            }
            return;
        }
        assert_eq!(
            s.retained_bytes,
            self.retained_bytes(),
            "{what}: retained bytes"
        );
        assert_eq!(
            s.retained_buffers,
            self.retained_buffers(),
            "{what}: retained buffers"
        );
    }
}
