//! The cold path: a buffer from fresh pages. Small classes are carved from
//! one-class runs, themselves cut from 2 MiB run regions (huge-page advised
//! from an arena's second region on); larger classes get a mapping each,
//! aligned for huge pages from 2 MiB up; sizes above the largest class get a
//! dedicated mapping that is released on free.
//!
//! Every step that can fail (metadata room, the mapping itself) happens before
//! any state changes, so a refusal leaves the arena exactly as it was. Each
//! new mapping is registered in the owner table (`owners.rs`) before any
//! buffer of it is handed out; registration is best effort (the global
//! allocator checks it before it serves a buffer), so it cannot fail a request.

use super::blocks::{Block, BlockState, Place, DEDICATED, NIL};
use super::error::ArenaError;
use super::owners::{self, GRANULE};
use super::state::{ArenaState, Grant, HugeAdvice, Run, RunRegion};
use super::{
    CARVE_LIMIT, MAX_ALIGN, RUN_ALIGN, RUN_LEN, RUN_REGION_LEN, SEGMENT_CARVE_MAX, SEGMENT_LEN,
};
use crate::os::{self, MapRequest, OsCounters, OsError, HUGE_PAGE_SIZE};
use crate::size_class::{capacity, Class};
use core::ptr::NonNull;

fn oom(size: usize, e: OsError) -> ArenaError {
    match e {
        OsError::MapFailed { errno, .. } => ArenaError::OutOfMemory { size, errno },
        OsError::BadLayout => ArenaError::SizeOverflow { size },
    }
}

const NO_ROOM: fn(usize) -> ArenaError = |size| ArenaError::OutOfMemory { size, errno: 0 };

impl ArenaState {
    /// Serves a request of `size` bytes at `align` in `class` from memory
    /// that is not retained.
    pub(crate) fn take_cold(
        &mut self,
        class: Class,
        size: usize,
        align: usize,
        os: &OsCounters,
    ) -> Result<Grant, ArenaError> {
        let cap = capacity(class);
        let g = if cap < CARVE_LIMIT {
            self.carve(class, os)
        } else if self.heap_serves() {
            // Placement and materialization are the heap's (`heap.rs`).
            return self.heap_take_cold(size, align, os);
        } else if cap < SEGMENT_CARVE_MAX.min(SEGMENT_LEN + 1) {
            self.carve_segment(class, align, os)
        } else {
            self.map_block(class, size, os)
        }?;
        // The request writes its own bytes; the tail past them is
        // materialized up to the class's largest request (`ready.rs`).
        self.ready_new(g.block, size, os);
        Ok(g)
    }

    /// A new buffer of `class` (64 KiB and up) in a mapping of its own,
    /// whatever the class's usual placement: pattern mode's block. The huge
    /// page its first `size` bytes end in stays on base pages (`map_block`),
    /// so the block costs the bytes its plan touches, not those rounded up
    /// to that huge page, as it did in a segment advised whole.
    pub(crate) fn take_cold_own(
        &mut self,
        class: Class,
        size: usize,
        os: &OsCounters,
    ) -> Result<Grant, ArenaError> {
        debug_assert!(capacity(class) >= CARVE_LIMIT);
        let g = self.map_block(class, size, os)?;
        self.ready_new(g.block, size, os);
        Ok(g)
    }

    /// A block of a class from 64 KiB to 16 MiB: a released block of the
    /// class (if suitably aligned), else the next suitably aligned slice of the
    /// current segment, taking an idle segment or mapping a new one when it
    /// is full.
    fn carve_segment(
        &mut self,
        class: Class,
        align: usize,
        os: &OsCounters,
    ) -> Result<Grant, ArenaError> {
        let cap = capacity(class);
        let page = os::page_size();
        let i = self.cold[class].head;
        if i != NIL && self.table.get(i).is_some_and(|b| b.addr % align == 0) {
            // Its pages were released with the eviction: the request faults
            // them in, as for a new block.
            return Ok(self.revive_cold(class, i));
        }
        self.room_for_one_block(cap)?;
        // Every block of a class is aligned to the largest power of two that
        // divides its capacity (at most MAX_ALIGN), the same guarantee the
        // other placements give: a class then serves a request of alignment
        // `a` exactly when `a` divides its capacity, warm or cold.
        let class_align = (1usize << cap.trailing_zeros()).min(MAX_ALIGN);
        let step = align.max(page).max(class_align);
        let fits = |r: &Run| {
            let start = (r.base + r.carved + step - 1) & !(step - 1);
            start + cap <= r.base + r.len
        };
        let mut s = self.current_segment;
        if s == NIL || !fits(&self.runs[s as usize]) {
            if let Some(idle) = self.idle_segments.pop() {
                s = idle;
            } else {
                self.runs.try_reserve(1).map_err(|_| NO_ROOM(cap))?;
                self.idle_segments
                    .try_reserve(self.runs.len() + 1)
                    .map_err(|_| NO_ROOM(cap))?;
                let req = MapRequest {
                    len: SEGMENT_LEN,
                    align: HUGE_PAGE_SIZE,
                    huge_pages: self.config.huge_pages,
                    prefault: self.config.prefault,
                };
                let base = os::map(req, os).map_err(|e| oom(cap, e))?;
                owners::register(base.as_ptr() as usize, SEGMENT_LEN, self.owner);
                self.runs.push(Run {
                    base: base.as_ptr() as usize,
                    len: SEGMENT_LEN,
                    class: u16::MAX,
                    carved: 0,
                    active: 0,
                    touched: false,
                    segment: true,
                    huge: HugeAdvice::mapped(self.config.huge_pages),
                });
                self.stats.mapped_bytes += SEGMENT_LEN;
                s = (self.runs.len() - 1) as u32;
            }
            self.current_segment = s;
        }
        let seg = &mut self.runs[s as usize];
        let addr = (seg.base + seg.carved + step - 1) & !(step - 1);
        seg.carved = addr + cap - seg.base;
        seg.active += 1;
        seg.touched = true;
        Ok(self.grant_new(Block::new(addr, cap, class as u16, Place::Segment(s))))
    }

    /// Hands out again cold block `i` of `class` (carved from a run or a
    /// segment whose pages it gave back): live, counted as a cold
    /// allocation, its run active and touched again.
    fn revive_cold(&mut self, class: Class, i: u32) -> Grant {
        self.table.unlink(&mut self.cold[class], i);
        let b = self.table.at(i);
        b.state = BlockState::Live;
        let (addr, cap, place) = (b.addr, b.cap, b.place);
        // Only carved blocks turn cold.
        if let Place::Run(run) | Place::Segment(run) = place {
            let r = &mut self.runs[run as usize];
            r.active += 1;
            r.touched = true;
        }
        self.note_new_live(cap);
        Grant {
            // SAFETY: carved blocks lie inside a live, non-null run or
            // segment mapping.
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            cap,
            block: i,
            fresh: false,
            warm: false,
        }
    }

    fn room_for_one_block(&mut self, size: usize) -> Result<(), ArenaError> {
        self.table.reserve_one().map_err(|_| NO_ROOM(size))?;
        self.pins
            .ensure(self.table.len() + 1)
            .map_err(|_| NO_ROOM(size))?;
        self.by_addr.try_reserve(1).map_err(|_| NO_ROOM(size))
    }

    fn grant_new(&mut self, b: Block) -> Grant {
        let (addr, cap, place) = (b.addr, b.cap, b.place);
        let i = self.table.insert(b);
        if let Place::Run(_) = place {
            let indexed = self.run_index.set(addr, i);
            debug_assert!(indexed, "a run's block starts one of its slots");
        } else {
            self.by_addr.insert(addr, i);
        }
        self.note_new_live(cap);
        Grant {
            // SAFETY: `addr` is inside a mapping the OS layer returned as non-null.
            ptr: unsafe { NonNull::new_unchecked(addr as *mut u8) },
            cap,
            block: i,
            fresh: true,
            warm: false,
        }
    }

    /// A small-class block: a released one of the class if any, else the next
    /// slice of the class's current run, mapping a new run when it is full.
    fn carve(&mut self, class: Class, os: &OsCounters) -> Result<Grant, ArenaError> {
        let cap = capacity(class);
        let i = self.cold[class].head;
        if i != NIL {
            return Ok(self.revive_cold(class, i));
        }
        self.room_for_one_block(cap)?;
        // The depot can keep every block of the class (`tcache/depot.rs`).
        self.depot.reserve_one(class).map_err(|_| NO_ROOM(cap))?;
        let mut r = self.current_run[class];
        if r == NIL || self.runs[r as usize].carved + cap > self.runs[r as usize].len {
            self.runs.try_reserve(1).map_err(|_| NO_ROOM(cap))?;
            self.run_index.reserve(cap).map_err(|_| NO_ROOM(cap))?;
            // The depot's sort has a bitmap's room for every run, the new
            // one too (`tcache/streak.rs`; the list's segments get one each
            // they do not need, 2 KiB a 32 MiB segment).
            self.depot
                .reserve_runs(self.runs.len() + 1)
                .map_err(|_| NO_ROOM(cap))?;
            let (base, huge) = self.cut_run(cap, os)?;
            // The run's granules name its class too (a free finds it by
            // address). They are the region's, registered already, so this
            // only rewrites their entries.
            let tagged = owners::register(base, RUN_LEN, self.owner.tagged(class));
            debug_assert!(tagged, "a run region's granules are in the owner table");
            self.runs.push(Run {
                base,
                len: RUN_LEN,
                class: class as u16,
                carved: 0,
                active: 0,
                touched: false,
                segment: false,
                huge: HugeAdvice::mapped(huge),
            });
            r = (self.runs.len() - 1) as u32;
            self.run_index.add_run(r, base, cap);
            self.current_run[class] = r;
        }
        let run = &mut self.runs[r as usize];
        let addr = run.base + run.carved;
        run.carved += cap;
        run.active += 1;
        run.touched = true;
        debug_assert_eq!(run.class as usize, class);
        Ok(self.grant_new(Block::new(addr, cap, class as u16, Place::Run(r))))
    }

    /// A new run of small class `class` for the run-owning small path
    /// (`small/`): cut like any run, its granules tagged with the class.
    /// Its blocks are not recorded here: the run's header keeps its slots.
    pub(crate) fn cut_small_run(
        &mut self,
        class: Class,
        os: &OsCounters,
    ) -> Result<usize, ArenaError> {
        let (base, _) = self.cut_run(capacity(class), os)?;
        let tagged = owners::register(base, RUN_LEN, self.owner.tagged(class));
        debug_assert!(tagged, "a run region's granules are in the owner table");
        Ok(base)
    }

    /// The address of a new run, and whether its region is advised for huge
    /// pages: the next `RUN_LEN` of the current run region, mapping a new
    /// region when it is full (see `RUN_REGION_LEN`).
    fn cut_run(&mut self, cap: usize, os: &OsCounters) -> Result<(usize, bool), ArenaError> {
        let room = |g: &RunRegion| g.carved + RUN_LEN <= g.len;
        if !self.run_regions.last().is_some_and(room) {
            self.run_regions.try_reserve(1).map_err(|_| NO_ROOM(cap))?;
            let req = MapRequest {
                len: RUN_REGION_LEN,
                align: RUN_REGION_LEN.max(RUN_ALIGN),
                huge_pages: self.region_advised(self.run_regions.len()),
                prefault: self.config.prefault,
            };
            let base = os::map(req, os).map_err(|e| oom(cap, e))?;
            // Every small-class buffer is findable by address, always: a
            // thread cache's hit hands buffers out without asking the owner
            // table (the scoped global allocator's hit relies on it). A
            // region the table cannot hold (no memory for a leaf) is not used.
            if !owners::register(base.as_ptr() as usize, RUN_REGION_LEN, self.owner) {
                owners::unregister(base.as_ptr() as usize, RUN_REGION_LEN, self.owner);
                // SAFETY: just mapped by this call, `RUN_REGION_LEN` bytes, and
                // nothing of it was handed out or published.
                unsafe { os::unmap(base, RUN_REGION_LEN, os) };
                return Err(NO_ROOM(cap));
            }
            self.stats.mapped_bytes += RUN_REGION_LEN;
            self.run_regions.push(RunRegion {
                base: base.as_ptr() as usize,
                len: RUN_REGION_LEN,
                carved: 0,
            });
        }
        let Some(g) = self.run_regions.last_mut() else {
            return Err(NO_ROOM(cap));
        };
        let base = g.base + g.carved;
        g.carved += RUN_LEN;
        // The region just cut from is the last one.
        Ok((base, self.region_advised(self.run_regions.len() - 1)))
    }

    /// Whether run region `index` is (or will be) mapped advised for huge
    /// pages: an arena's regions after its first, when huge pages are on
    /// (see `RUN_REGION_LEN`).
    fn region_advised(&self, index: usize) -> bool {
        self.config.huge_pages && index > 0
    }

    /// The one run region on base pages when the others are advised for
    /// huge pages (`region_advised`); `None` when none is advised.
    pub(crate) fn plain_run_region(&self) -> Option<usize> {
        let first = self.run_regions.first().map_or(0, |g| g.base);
        (!self.region_advised(0) && self.region_advised(1)).then_some(first)
    }

    /// A block with its own mapping, aligned to the largest power of two not
    /// above its capacity (capped at [`MAX_ALIGN`]), so every alignment a
    /// request of this class may carry is met by every buffer of the class.
    /// `size` is the first request's: the huge page it ends in stays on base
    /// pages (`os::keep_straddled_page_small`).
    fn map_block(
        &mut self,
        class: Class,
        size: usize,
        os: &OsCounters,
    ) -> Result<Grant, ArenaError> {
        let cap = capacity(class);
        self.room_for_one_block(cap)?;
        let pow2_floor = 1usize << (usize::BITS - 1 - cap.leading_zeros());
        let huge_pages = self.config.huge_pages && cap >= HUGE_PAGE_SIZE;
        let req = MapRequest {
            len: cap,
            align: pow2_floor.min(MAX_ALIGN),
            huge_pages,
            prefault: self.config.prefault,
        };
        let p = os::map(req, os).map_err(|e| oom(cap, e))?;
        if huge_pages && !self.config.prefault {
            os::keep_straddled_page_small(p, cap, p.as_ptr() as usize + size, os);
        }
        owners::register(p.as_ptr() as usize, cap, self.owner);
        self.stats.mapped_bytes += cap;
        Ok(self.grant_new(Block::new(
            p.as_ptr() as usize,
            cap,
            class as u16,
            Place::Own,
        )))
    }

    /// A mapping for a request above the largest class, released on free.
    pub(crate) fn map_dedicated(
        &mut self,
        size: usize,
        align: usize,
        os: &OsCounters,
    ) -> Result<Grant, ArenaError> {
        let len = os::round_to_pages(size).ok_or(ArenaError::SizeOverflow { size })?;
        self.room_for_one_block(size)?;
        // Aligned to the owner table's granule so the buffer's first granule
        // is wholly the arena's and can be registered (see `owners.rs`).
        let req = MapRequest {
            len,
            align: align.max(GRANULE),
            huge_pages: self.config.huge_pages,
            prefault: self.config.prefault,
        };
        let p = os::map(req, os).map_err(|e| oom(size, e))?;
        owners::register(p.as_ptr() as usize, len, self.owner);
        self.stats.mapped_bytes += len;
        self.stats.dedicated_allocations += 1;
        Ok(self.grant_new(Block::new(
            p.as_ptr() as usize,
            len,
            DEDICATED,
            Place::Dedicated,
        )))
    }
}
