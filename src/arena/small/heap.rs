//! A thread heap: one thread's runs of one arena's small classes, a current
//! run and a list of the others per class, and the thread's counters.
//!
//! Only its thread touches a heap's runs and lists; other threads read its
//! counters (single-writer atomics) under the arena's lock for `stats()`.

use super::pool::RunList;
use super::run::{push_remote, Run};
use super::SMALL_CLASSES;
use crate::arena::blocks::NIL;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// A heap's counts, each written by its thread alone (a load and a store,
/// no read-modify-write), read by `stats()` under the arena's lock.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    allocs: AtomicU64,
    alloc_bytes: AtomicU64,
    /// Frees this thread made, of its own slots and of other heaps'.
    frees: AtomicU64,
    free_bytes: AtomicU64,
    /// Allocations of never-used slots, and their bytes.
    cold: AtomicU64,
    cold_bytes: AtomicU64,
    /// The most live bytes this thread saw at one of its allocations.
    peak: AtomicU64,
    /// Payload copies this thread made (a buffer moved to grow it).
    copies: AtomicU64,
    copied_bytes: AtomicU64,
}

#[inline(always)]
fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
}

/// Counters summed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub allocs: u64,
    pub alloc_bytes: u64,
    pub frees: u64,
    pub free_bytes: u64,
    pub cold: u64,
    pub cold_bytes: u64,
    pub peak: u64,
    pub copies: u64,
    pub copied_bytes: u64,
}

impl Totals {
    pub(crate) fn add(&mut self, c: &Counters) {
        self.allocs = self.allocs.wrapping_add(c.allocs.load(Relaxed));
        self.alloc_bytes = self.alloc_bytes.wrapping_add(c.alloc_bytes.load(Relaxed));
        self.frees = self.frees.wrapping_add(c.frees.load(Relaxed));
        self.free_bytes = self.free_bytes.wrapping_add(c.free_bytes.load(Relaxed));
        self.cold += c.cold.load(Relaxed);
        self.cold_bytes += c.cold_bytes.load(Relaxed);
        self.peak = self.peak.max(c.peak.load(Relaxed));
        self.copies += c.copies.load(Relaxed);
        self.copied_bytes += c.copied_bytes.load(Relaxed);
    }
}

/// One thread's heap for one arena.
#[repr(C)]
pub(crate) struct ThreadHeap {
    /// The arena's epoch this heap honoured last. First: the fast path
    /// reads it through a pointer that may name `thread::NEVER` instead.
    pub(crate) seen: u64,
    pub(crate) core: *const ArenaCore,
    /// Per class, the run served from first (null: none yet).
    pub(crate) cur: [*mut Run; SMALL_CLASSES],
    /// Per class, the heap's other runs.
    pub(crate) runs: [RunList; SMALL_CLASSES],
    pub(crate) counters: Counters,
    /// Bytes this thread allocated less those it freed: the arena's small
    /// live bytes when it is the only thread (the peak's term).
    live: usize,
    peak: usize,
}

impl ThreadHeap {
    pub(crate) fn new(core: &ArenaCore, seen: u64) -> ThreadHeap {
        ThreadHeap {
            seen,
            core,
            cur: [null_mut(); SMALL_CLASSES],
            runs: [RunList::EMPTY; SMALL_CLASSES],
            counters: Counters::default(),
            live: 0,
            peak: 0,
        }
    }

    /// Bytes this thread allocated less those it freed.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// This heap's address, as runs name their owner.
    #[inline(always)]
    pub(crate) fn id(&self) -> usize {
        self as *const ThreadHeap as usize
    }

    /// A slot of class `c` from the current run (freed, else fresh below
    /// its limit), or `None`.
    #[inline(always)]
    pub(crate) fn take(&mut self, c: usize) -> Option<Grant> {
        let r = self.cur[c];
        if r.is_null() {
            return None;
        }
        // SAFETY: the heap's current run: a live header its thread owns.
        let run = unsafe { &mut *r };
        let (p, cold) = run.take();
        if p == 0 {
            return None;
        }
        Some(self.note_allocated(p, run.cap as usize, cold))
    }

    #[inline(always)]
    fn note_allocated(&mut self, p: usize, cap: usize, cold: bool) -> Grant {
        bump(&self.counters.allocs, 1);
        bump(&self.counters.alloc_bytes, cap as u64);
        if cold {
            bump(&self.counters.cold, 1);
            bump(&self.counters.cold_bytes, cap as u64);
        }
        self.live = self.live.wrapping_add(cap);
        // SAFETY: a heap's arena outlives it (a registered heap keeps the body).
        let others = unsafe { &*self.core }.live_mirror.load(Relaxed);
        let now = others.wrapping_add(self.live);
        if now > self.peak && (now as isize) >= 0 {
            self.peak = now;
            self.counters.peak.store(now as u64, Relaxed);
        }
        Grant {
            // SAFETY: slots lie in the arena's mappings: never null.
            ptr: unsafe { NonNull::new_unchecked(p as *mut u8) },
            cap,
            block: NIL,
            fresh: false,
            warm: !cold,
        }
    }

    /// Counts a payload copy of `bytes`.
    pub(crate) fn note_copy(&mut self, bytes: usize) {
        bump(&self.counters.copies, 1);
        bump(&self.counters.copied_bytes, bytes as u64);
    }

    #[inline(always)]
    pub(crate) fn note_freed(&mut self, cap: usize) {
        bump(&self.counters.frees, 1);
        bump(&self.counters.free_bytes, cap as u64);
        self.live = self.live.wrapping_sub(cap);
    }

    /// Frees slot `p` of run `r` of class `c`: on its free list when this
    /// heap owns the run, else onto its remote list; `false` (nothing
    /// changed) when the arena owns the run and the lock must take it.
    /// An owned run other than the current one that empties goes back to
    /// the arena (`run_emptied`).
    ///
    /// # Safety
    /// `p` is a live slot of class `c` in run `r`, given up by the caller.
    #[inline(always)]
    pub(crate) unsafe fn free(&mut self, c: usize, r: *mut Run, p: usize) -> bool {
        // SAFETY: a live slot keeps its run's header live; `owner` is atomic.
        if unsafe { (*r).owner.load(Relaxed) } == self.id() {
            // SAFETY: this heap owns the run: its plain fields are ours.
            let run = unsafe { &mut *r };
            run.push(p);
            self.note_freed(run.cap as usize);
            if run.used == 0 && r != self.cur[c] {
                self.run_emptied(c, r);
            }
            return true;
        }
        // SAFETY: the caller's contract.
        if unsafe { push_remote(r, p) } {
            // SAFETY: as above; `cap` never changes while a slot is live.
            self.note_freed(unsafe { (*r).cap } as usize);
            return true;
        }
        false
    }

    /// An owned run besides the current one emptied: back to the arena.
    #[cold]
    #[inline(never)]
    fn run_emptied(&mut self, c: usize, r: *mut Run) {
        // SAFETY: the heap's arena outlives it.
        let core = unsafe { &*self.core };
        let mut st = core.lock();
        // SAFETY: `r` is on this heap's list of class `c`.
        unsafe {
            self.runs[c].unlink(r);
            (*r).abandon();
            st.small.take_back(c, r);
        }
        super::enforce_cap(&mut st, core);
    }

    /// A slot of class `c` past the current run's free list, in this
    /// order: slots other threads freed into the current run, freed slots
    /// of the heap's other runs, fresh slots of the current run, of the
    /// other runs, then a run from `arena` (adopted or new); `None` when
    /// the arena has no memory for one. Freed slots anywhere in the heap
    /// come before untouched pages.
    pub(crate) fn refill(
        &mut self,
        c: usize,
        arena: impl FnOnce(usize) -> Option<*mut Run>,
    ) -> Option<Grant> {
        let r = self.cur[c];
        // SAFETY: the current run is a live header this heap owns.
        if !r.is_null() && unsafe { (*r).collect() } > 0 {
            return self.take(c);
        }
        if let Some(s) = self.find(c, |run| {
            run.collect();
            run.free != 0
        }) {
            self.make_current(c, s);
            return self.take(c);
        }
        // SAFETY: as above.
        if !r.is_null() && unsafe { (*r).open_fresh() } {
            return self.take(c);
        }
        if let Some(s) = self.find(c, Run::open_fresh) {
            self.make_current(c, s);
            return self.take(c);
        }
        let s = arena(self.id())?;
        // SAFETY: a run just adopted or carved for this heap.
        unsafe { (*s).open_fresh() };
        self.make_current(c, s);
        self.take(c)
    }

    /// The first of the heap's other runs of class `c` that `ok` accepts,
    /// taken off the list.
    fn find(&mut self, c: usize, mut ok: impl FnMut(&mut Run) -> bool) -> Option<*mut Run> {
        let mut s = self.runs[c].head;
        while !s.is_null() {
            // SAFETY: runs on the heap's list are live headers it owns.
            let run = unsafe { &mut *s };
            if ok(run) {
                // SAFETY: `s` is on the list of class `c`.
                unsafe { self.runs[c].unlink(s) };
                return Some(s);
            }
            s = run.next;
        }
        None
    }

    /// Run `s` (on no list, owned) becomes class `c`'s current one; the
    /// old current goes last on the list.
    fn make_current(&mut self, c: usize, s: *mut Run) {
        let old = self.cur[c];
        if !old.is_null() {
            // SAFETY: the old current run is this heap's and on no list.
            unsafe { self.runs[c].push_back(old) };
        }
        self.cur[c] = s;
    }

    /// Gives runs to the arena (under its lock, `st`): every empty run,
    /// and with `all` every run with live slots too (the thread's exit,
    /// the arena's last handle) or, with `partial`, every one but the
    /// current runs (a run boundary).
    pub(crate) fn give_back(&mut self, st: &mut ArenaState, partial: bool, all: bool) {
        for c in 0..SMALL_CLASSES {
            let mut s = self.runs[c].head;
            while !s.is_null() {
                // SAFETY: runs on the heap's list are live headers it owns.
                let next = unsafe { (*s).next };
                // SAFETY: as above.
                let run = unsafe { &mut *s };
                run.collect();
                if run.used == 0 || partial || all {
                    // SAFETY: `s` is on this list; the lock is held.
                    unsafe {
                        self.runs[c].unlink(s);
                        run.abandon();
                        st.small.take_back(c, s);
                    }
                }
                s = next;
            }
            let r = self.cur[c];
            if r.is_null() {
                continue;
            }
            // SAFETY: the current run is this heap's.
            let run = unsafe { &mut *r };
            run.collect();
            if all || run.used == 0 {
                self.cur[c] = null_mut();
                run.abandon();
                // SAFETY: on no list; the lock is held.
                unsafe { st.small.take_back(c, r) };
            }
        }
    }
}
