//! The arena's side of the small path, behind the arena's lock: the runs no
//! heap owns, the heaps that exist, and the counts of heaps that are gone.
//!
//! - **Empty runs**, per class, newest first: a heap adopts the newest
//!   (its pages are the likeliest resident), the retention cap and `trim`
//!   release the oldest first.
//! - **Abandoned runs**, per class: runs with live slots that their heap
//!   gave up (at its thread's exit or a run boundary). A heap adopts them
//!   before an empty run; their frees meanwhile come through the lock.
//! - **Heaps**: every registered thread heap, whose counters `stats()`
//!   sums, and the counters of the heaps that left, folded.

use super::heap::{Counters, Shared, ThreadHeap, Totals};
use super::run::Run;
use super::SMALL_CLASSES;
use crate::arena::pins::{PinInfo, PinRecord, PinTable};
use crate::arena::shared::ArenaCore;
use crate::arena::RUN_REGION_LEN;
use crate::os::{self, OsCounters};
use core::ptr::{null_mut, NonNull};

/// A doubly linked list of runs through their `prev` and `next`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunList {
    pub(crate) head: *mut Run,
    pub(crate) tail: *mut Run,
}

impl RunList {
    pub(crate) const EMPTY: RunList = RunList {
        head: null_mut(),
        tail: null_mut(),
    };

    /// Puts `r` (on no list) first.
    ///
    /// # Safety
    /// `r` and every run on the list are live headers the caller owns.
    pub(crate) unsafe fn push_front(&mut self, r: *mut Run) {
        // SAFETY: the caller's contract.
        unsafe {
            (*r).prev.set(null_mut());
            (*r).next.set(self.head);
            match self.head.is_null() {
                true => self.tail = r,
                false => (*self.head).prev.set(r),
            }
        }
        self.head = r;
    }

    /// Puts `r` (on no list) last.
    ///
    /// # Safety
    /// As for [`RunList::push_front`].
    pub(crate) unsafe fn push_back(&mut self, r: *mut Run) {
        // SAFETY: the caller's contract.
        unsafe {
            (*r).next.set(null_mut());
            (*r).prev.set(self.tail);
            match self.tail.is_null() {
                true => self.head = r,
                false => (*self.tail).next.set(r),
            }
        }
        self.tail = r;
    }

    /// Takes `r` (on this list) off it.
    ///
    /// # Safety
    /// As for [`RunList::push_front`]; `r` is on this list.
    pub(crate) unsafe fn unlink(&mut self, r: *mut Run) {
        // SAFETY: the caller's contract.
        unsafe {
            let (p, n) = ((*r).prev.get(), (*r).next.get());
            match p.is_null() {
                true => self.head = n,
                false => (*p).next.set(n),
            }
            match n.is_null() {
                true => self.tail = p,
                false => (*n).prev.set(p),
            }
            (*r).prev.set(null_mut());
            (*r).next.set(null_mut());
        }
    }
}

/// The arena's side of the small path (in `ArenaState`).
pub(crate) struct Pool {
    empty: [RunList; SMALL_CLASSES],
    abandoned: [RunList; SMALL_CLASSES],
    /// Abandoned runs (each has live slots): while any exists, the body
    /// stays.
    abandoned_runs: usize,
    /// Registered heaps, by their shared parts (all that other threads
    /// may touch while a heap's thread works in it).
    pub(crate) heaps: Vec<NonNull<Shared>>,
    /// What the heaps that left counted.
    pub(crate) folded: Totals,
    /// The heap of threads that cannot keep one, used under the lock.
    locked: Option<NonNull<ThreadHeap>>,
    /// Heaps whose threads let go, kept for the next thread: a heap's
    /// memory lives as long as the arena (remote frees may still store to
    /// its flag).
    pub(crate) spare_heaps: Vec<NonNull<ThreadHeap>>,
    /// Pin records of slots exported as leases (a slot has no block
    /// record), and the record numbers free for reuse.
    pins: PinTable,
    free_pins: Vec<u32>,
    pins_made: u32,
    /// Slots and bytes whose pages were released since they were written.
    released_slots: u64,
    released_bytes: u64,
}

// SAFETY: the raw pointers name run headers in the arena's own mappings and
// heaps registered with it; the pool is only used under the arena's lock.
unsafe impl Send for Pool {}

impl Drop for Pool {
    fn drop(&mut self) {
        let _m = crate::arena::metadata::enter();
        debug_assert!(
            self.heaps.is_empty(),
            "the body goes with no heap registered"
        );
        for h in self
            .locked
            .take()
            .into_iter()
            .chain(self.spare_heaps.drain(..))
        {
            // SAFETY: made by `Box::leak` (`locked_heap`, `thread::make`);
            // the arena goes, so nothing uses it now.
            drop(unsafe { Box::from_raw(h.as_ptr()) });
        }
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            empty: [RunList::EMPTY; SMALL_CLASSES],
            abandoned: [RunList::EMPTY; SMALL_CLASSES],
            abandoned_runs: 0,
            heaps: Vec::new(),
            folded: Totals::default(),
            locked: None,
            spare_heaps: Vec::new(),
            pins: PinTable::default(),
            free_pins: Vec::new(),
            pins_made: 0,
            released_slots: 0,
            released_bytes: 0,
        }
    }
}

/// The small path's part of `stats()`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SmallStats {
    pub live_bytes: usize,
    pub live_buffers: usize,
    pub retained_bytes: usize,
    pub retained_buffers: usize,
    pub cold: u64,
    pub frees: u64,
    pub peak: usize,
    pub copies: u64,
    pub copied_bytes: usize,
}

impl Pool {
    /// A run of class `c` for heap `owner`: an abandoned one, else the
    /// newest empty one; `None` when the class has neither.
    pub(crate) fn adopt(&mut self, c: usize, owner: usize) -> Option<*mut Run> {
        let (list, abandoned) = match self.abandoned[c].head.is_null() {
            false => (&mut self.abandoned[c], true),
            true => (&mut self.empty[c], false),
        };
        let r = list.head;
        if r.is_null() {
            return None;
        }
        // SAFETY: runs on the pool's lists are live headers the arena
        // (this lock holder) owns.
        unsafe {
            list.unlink(r);
            (*r).adopt(owner);
        }
        self.abandoned_runs -= abandoned as usize;
        Some(r)
    }

    /// Takes run `r` from its heap (which just gave it up with
    /// [`Run::abandon`]): onto the empty or the abandoned list.
    ///
    /// # Safety
    /// `r` is a live header on no list, abandoned by its heap under this
    /// lock.
    pub(crate) unsafe fn take_back(&mut self, c: usize, r: *mut Run) {
        // SAFETY: the caller's contract.
        unsafe {
            if (*r).used.get() == 0 {
                self.empty[c].push_front(r);
            } else {
                self.abandoned[c].push_front(r);
                self.abandoned_runs += 1;
            }
        }
    }

    /// A free of slot `p` of abandoned run `r` under the lock; an emptied
    /// run moves to the empty list.
    ///
    /// # Safety
    /// `r` is abandoned (checked under this lock) and `p` a live slot of it.
    pub(crate) unsafe fn free_abandoned(&mut self, c: usize, r: *mut Run, p: usize) {
        // SAFETY: the arena owns the run; the caller's contract.
        unsafe {
            (*r).push(p);
            if (*r).used.get() == 0 {
                self.abandoned[c].unlink(r);
                self.abandoned_runs -= 1;
                self.empty[c].push_front(r);
            }
        }
    }

    /// Pins the live slot at `addr` (of capacity `cap`, logical length
    /// `len`) for shared ownership: a record with one owner whose block
    /// number names the record ([`super::slot_pin_id`]); `None` when no
    /// record can be made.
    pub(crate) fn pin_slot(
        &mut self,
        core: *mut ArenaCore,
        addr: usize,
        len: usize,
        cap: usize,
    ) -> Option<NonNull<PinRecord>> {
        let _m = crate::arena::metadata::enter();
        let id = match self.free_pins.pop() {
            Some(id) => id,
            None => {
                let id = self.pins_made;
                if id >= super::SLOT_PIN - 1 {
                    return None;
                }
                self.pins.ensure(id as usize + 1).ok()?;
                self.free_pins.try_reserve(id as usize + 1).ok()?;
                self.pins_made += 1;
                id
            }
        };
        let rec = self.pins.record(id)?;
        // SAFETY: records live as long as the pool; this one is unpinned
        // (its number was free) and the lock is held.
        let r = unsafe { rec.as_ref() };
        // SAFETY: as above.
        unsafe {
            r.set_info(PinInfo {
                core,
                addr,
                len,
                cap,
                block: super::SLOT_PIN | id,
            })
        };
        r.refs.store(1, crate::sync::rc::Ordering::Relaxed);
        Some(rec)
    }

    /// Slot pin record `id` is free again (its last owner let go).
    pub(crate) fn unpin_slot(&mut self, id: u32) {
        // Room for every record made was reserved when it was made.
        debug_assert!(self.free_pins.len() < self.free_pins.capacity());
        self.free_pins.push(id);
    }

    /// The arena's own heap, for threads that cannot keep one (made on
    /// first use); `None` when it cannot be made.
    pub(crate) fn locked_heap(&mut self, core: &ArenaCore) -> Option<NonNull<ThreadHeap>> {
        if self.locked.is_none() {
            let _m = crate::arena::metadata::enter();
            let h = Box::new(ThreadHeap::new_locked(core));
            self.locked = Some(NonNull::from(Box::leak(h)));
        }
        self.locked
    }

    /// Everything counted: the folded counts, the locked heap's and every
    /// registered heap's.
    fn totals(&self) -> Totals {
        let mut t = self.folded;
        // SAFETY: the locked heap lives as long as the pool.
        if let Some(h) = self.locked {
            t.add(&unsafe { h.as_ref() }.shared().counters);
        }
        for h in &self.heaps {
            // SAFETY: registered heaps stay allocated until they are
            // unregistered under this lock.
            t.add(&unsafe { h.as_ref() }.counters);
        }
        t
    }

    /// Whether nothing of the small path keeps the body: no heap, no
    /// abandoned run, nothing live.
    pub(crate) fn idle(&self) -> bool {
        if !self.heaps.is_empty() || self.abandoned_runs != 0 {
            return false;
        }
        let t = self.totals();
        t.allocs == t.frees
    }

    /// Releases the pages of empty runs, oldest first, while `more` says
    /// so (given the bytes released so far); the bytes released.
    ///
    /// `plain_region`: the one run region on base pages (`None`: every
    /// region is); in every other region a release
    /// advises off the huge page it covers in part first, so khugepaged
    /// never collapses it under the region's other runs.
    pub(crate) fn release(
        &mut self,
        os: &OsCounters,
        plain_region: Option<usize>,
        mut more: impl FnMut(usize) -> bool,
    ) -> usize {
        let page = os::page_size();
        let mut total = 0;
        for c in 0..SMALL_CLASSES {
            let mut r = self.empty[c].tail;
            while !r.is_null() && more(total) {
                // SAFETY: an empty run the arena owns, in a live region.
                let run = unsafe { &*r };
                let resident = run.resident();
                if resident > 0 {
                    self.released_slots += (resident / run.cap as usize) as u64;
                    self.released_bytes += resident as u64;
                    let (start, len) = run.forget_slots(page);
                    if len > 0 {
                        // SAFETY: whole pages of an empty run (none of its
                        // slots is live; the headers stay below `start`),
                        // inside the arena's live region.
                        unsafe {
                            let p = NonNull::new_unchecked(start as *mut u8);
                            let region = start & !(RUN_REGION_LEN - 1);
                            if plain_region.is_none_or(|b| b == region) {
                                os::release_pages(p, len, os);
                            } else {
                                let within = region..region + RUN_REGION_LEN;
                                os::release_pages_in_huge(p, len, within, os);
                            }
                        };
                    }
                    total += resident;
                }
                r = run.prev.get();
            }
        }
        total
    }

    /// The small path's part of `stats()`: the folded counts and every
    /// registered heap's (exact when no thread is in an operation).
    pub(crate) fn stats(&self) -> SmallStats {
        let t = self.totals();
        let live_bytes = t.alloc_bytes.wrapping_sub(t.free_bytes) as usize;
        let live_buffers = t.allocs.wrapping_sub(t.frees) as usize;
        SmallStats {
            live_bytes,
            live_buffers,
            retained_bytes: (t.cold_bytes - self.released_bytes) as usize - live_bytes,
            retained_buffers: (t.cold - self.released_slots) as usize - live_buffers,
            cold: t.cold,
            frees: t.frees,
            peak: t.peak as usize,
            copies: t.copies,
            copied_bytes: t.copied_bytes as usize,
        }
    }

    /// Restarts every heap's published peak (`reset_peak`).
    pub(crate) fn reset_peaks(&mut self) {
        self.folded.peak = 0;
        // SAFETY: the locked heap lives as long as the pool.
        if let Some(h) = self.locked {
            unsafe { h.as_ref() }.shared().counters.reset_peak();
        }
        for h in &self.heaps {
            // SAFETY: registered heaps stay allocated while registered.
            unsafe { h.as_ref() }.counters.reset_peak();
        }
    }

    /// Folds a leaving heap's counters in.
    pub(crate) fn fold(&mut self, c: &Counters) {
        self.folded.add(c);
    }
}
