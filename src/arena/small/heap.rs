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
use crate::arena::tcache::epoch::NO_CACHE;
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// How many slow paths a heap's empty current run waits before it goes
/// back to the arena.
const RETIRE_TICKS: u32 = 16;

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

impl Counters {
    /// Restarts the published peak (`reset_peak`, under the arena's lock;
    /// the owner's next allocation raises it again).
    pub(crate) fn reset_peak(&self) {
        self.peak.store(0, Relaxed);
    }

    /// Zeroes every count (a spare heap taken by a new thread, its counts
    /// folded when it left).
    fn clear(&self) {
        for a in [
            &self.allocs,
            &self.alloc_bytes,
            &self.frees,
            &self.free_bytes,
            &self.cold,
            &self.cold_bytes,
            &self.peak,
            &self.copies,
            &self.copied_bytes,
        ] {
            a.store(0, Relaxed);
        }
    }
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
    /// What other threads touch: its own allocation, so that the owner's
    /// `&mut ThreadHeap` never covers memory another thread reads or
    /// writes. Its address is the heap's id in its runs' headers.
    shared: NonNull<Shared>,
    /// Slow paths taken so far: the clock of retirement.
    ticks: u32,
    /// Per class, the tick at which its current run emptied, while it
    /// stays empty (retired); `u32::MAX` when it is not.
    retired_at: [u32; SMALL_CLASSES],
    /// Classes whose current run is retired.
    retired: usize,
    /// Per class, the one other run kept after it emptied (null: none),
    /// so a class whose runs empty and refill by turns takes no lock for
    /// it; a second run that empties goes back at once, and the spare
    /// itself `RETIRE_TICKS` slow paths later.
    spare: [*mut Run; SMALL_CLASSES],
    /// Per class, the tick at which its spare emptied.
    spare_at: [u32; SMALL_CLASSES],
    /// Classes with a spare.
    spares: usize,
    /// The arena's own heap, used under its lock (`Pool::locked_heap`): it
    /// never takes the lock itself, so it keeps the runs that empty.
    locked: bool,
    /// Bytes this thread allocated less those it freed: the arena's small
    /// live bytes when it is the only thread (the peak's term).
    live: usize,
}

impl Drop for ThreadHeap {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`; the heap goes with its
        // arena, when no other thread can name it any more.
        drop(unsafe { Box::from_raw(self.shared.as_ptr()) });
    }
}

/// Words of a heap's per-class remote bits.
const REMOTE_WORDS: usize = SMALL_CLASSES.div_ceil(64);

/// The part of a heap other threads touch: its counters (read by
/// `stats()`) and its remote bits (set by remote frees).
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) counters: Counters,
    /// Per class, a bit set by a thread whose free starts a remote list
    /// on one of this heap's runs of the class: while it is set, the heap
    /// takes no untouched slot of the class before it has collected them
    /// all. Heaps are kept until their arena goes (`Pool::spare_heaps`),
    /// so a late store here never reaches freed memory.
    remote: [AtomicU64; REMOTE_WORDS],
}

/// Tells heap `owner` (a run owner's address; 0 for none) that a remote
/// free started a list on one of its runs of class `c`. The heap's memory
/// outlives every run it may have owned (it is freed with its arena).
pub(crate) fn notify(owner: usize, c: usize) {
    if owner != 0 {
        // SAFETY: a heap's memory lives as long as its arena, which the
        // caller's live slot keeps; only the atomic is touched.
        let w = unsafe { &(*(owner as *const Shared)).remote[c / 64] };
        let bit = 1u64 << (c % 64);
        if w.load(Relaxed) & bit == 0 {
            w.fetch_or(bit, Relaxed);
        }
    }
}

impl ThreadHeap {
    /// A heap of the arena whose body's original pointer is `core` (the
    /// pointer a heap's thread may free the body through when it leaves).
    pub(crate) fn new(core: *const ArenaCore, seen: u64) -> ThreadHeap {
        ThreadHeap {
            seen,
            core,
            cur: [null_mut(); SMALL_CLASSES],
            runs: [RunList::EMPTY; SMALL_CLASSES],
            shared: NonNull::from(Box::leak(Box::default())),
            ticks: 0,
            retired_at: [u32::MAX; SMALL_CLASSES],
            retired: 0,
            spare: [null_mut(); SMALL_CLASSES],
            spare_at: [0; SMALL_CLASSES],
            spares: 0,
            locked: false,
            live: 0,
        }
    }

    /// The arena's own heap, used by lock holders only.
    pub(crate) fn new_locked(core: &ArenaCore) -> ThreadHeap {
        // (Not `..ThreadHeap::new(..)`: the temporary's drop would free
        // the shared part its copied pointer names.)
        let mut h = ThreadHeap::new(core, 0);
        h.locked = true;
        h
    }

    /// Makes a heap that left its arena ready for another thread (under
    /// the lock; its runs were given back and its counters folded). The
    /// remote flag stays: other threads may still store to it.
    pub(crate) fn reset(&mut self, seen: u64) {
        debug_assert!(self.cur.iter().all(|r| r.is_null()));
        self.seen = seen;
        self.ticks = 0;
        self.retired_at = [u32::MAX; SMALL_CLASSES];
        self.retired = 0;
        debug_assert_eq!(self.spares, 0, "a heap leaves with its spares given back");
        self.shared().counters.clear();
        self.live = 0;
    }

    /// Bytes this thread allocated less those it freed.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// What other threads touch of this heap.
    #[inline(always)]
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: made in `new`, freed only with the heap.
        unsafe { self.shared.as_ref() }
    }

    /// The heap's shared part, as the arena's registry names the heap.
    pub(crate) fn shared_ptr(&self) -> NonNull<Shared> {
        self.shared
    }

    /// The address of the heap's shared part, as runs name their owner.
    #[inline(always)]
    pub(crate) fn id(&self) -> usize {
        self.shared.as_ptr() as usize
    }

    /// A slot of class `c` from the current run (freed, else fresh below
    /// its limit while no remote free is waiting to be collected), or
    /// `None`.
    #[inline(always)]
    pub(crate) fn take(&mut self, c: usize) -> Option<Grant> {
        let fresh = self.shared().remote[c / 64].load(Relaxed) & (1u64 << (c % 64)) == 0;
        self.take_in(c, fresh)
    }

    #[inline(always)]
    fn take_in(&mut self, c: usize, fresh: bool) -> Option<Grant> {
        let r = self.cur[c];
        if r.is_null() {
            return None;
        }
        // SAFETY: the heap's current run: a live header its thread owns.
        let run = unsafe { &*r };
        let (p, cold) = run.take(fresh);
        if p == 0 {
            return None;
        }
        Some(self.note_allocated(p, run.cap as usize, cold))
    }

    #[inline(always)]
    fn note_allocated(&mut self, p: usize, cap: usize, cold: bool) -> Grant {
        bump(&self.shared().counters.allocs, 1);
        bump(&self.shared().counters.alloc_bytes, cap as u64);
        if cold {
            bump(&self.shared().counters.cold, 1);
            bump(&self.shared().counters.cold_bytes, cap as u64);
        }
        self.live = self.live.wrapping_add(cap);
        // SAFETY: a heap's arena outlives it (a registered heap keeps the body).
        let others = unsafe { &*self.core }.live_mirror.load(Relaxed);
        let now = others.wrapping_add(self.live);
        // Against the published peak, which `reset_peak` may lower.
        if now as u64 > self.shared().counters.peak.load(Relaxed) && (now as isize) >= 0 {
            self.shared().counters.peak.store(now as u64, Relaxed);
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
        bump(&self.shared().counters.copies, 1);
        bump(&self.shared().counters.copied_bytes, bytes as u64);
    }

    #[inline(always)]
    pub(crate) fn note_freed(&mut self, cap: usize) {
        bump(&self.shared().counters.frees, 1);
        bump(&self.shared().counters.free_bytes, cap as u64);
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
            let run = unsafe { &*r };
            run.push(p);
            self.note_freed(run.cap as usize);
            let cur = self.cur[c];
            if r != cur {
                // A freed slot elsewhere in the heap comes before the
                // current run's untouched pages: its open fresh slots close.
                if !cur.is_null() {
                    // SAFETY: the current run is this heap's.
                    unsafe { (*cur).limit.set((*cur).fresh.get()) };
                }
            }
            // (The arena's own heap is used under its lock already: its
            // runs stay. A current run retired already stays so: a pair
            // on one class empties it at every free.)
            if run.used.get() == 0
                && !self.locked
                && (r != cur || self.retired_at[c] == u32::MAX || self.seen & NO_CACHE != 0)
            {
                self.emptied(c, r, cur);
            }
            return true;
        }
        // SAFETY: the caller's contract.
        if unsafe { push_remote(r, p, |owner| notify(owner, c)) } {
            // SAFETY: as above; `cap` never changes while a slot is live.
            self.note_freed(unsafe { (*r).cap } as usize);
            return true;
        }
        false
    }

    /// An owned run besides the current one emptied (or the current one,
    /// under a retention cap below `epoch::MIN_CAP_FOR_CACHE`, where a heap
    /// keeps no empty run): back to the arena.
    #[cold]
    #[inline(never)]
    fn run_emptied(&mut self, c: usize, r: *mut Run) {
        // SAFETY: the heap's arena outlives it.
        let core = unsafe { &*self.core };
        let mut st = core.lock();
        // SAFETY: `r` is this heap's: its current run or on its list of
        // class `c`.
        unsafe {
            if r == self.cur[c] {
                self.cur[c] = null_mut();
            } else {
                self.runs[c].unlink(r);
            }
            (*r).abandon();
            st.small.take_back(c, r);
        }
        super::enforce_cap(&mut st, core);
    }

    /// A slot of class `c` past the current run's free list, in this
    /// order: slots other threads freed into the current run; freed slots
    /// of the heap's other runs (their remote frees collected); a run the
    /// arena holds (`arena(owner, false)`: abandoned, else empty); fresh
    /// slots of the current run, then of the other runs; a new run
    /// (`arena(owner, true)`). `None` when the arena has no memory for one.
    /// So every freed slot the heap or the arena holds is used before an
    /// untouched page, and a repeated run takes no new memory.
    pub(crate) fn refill(
        &mut self,
        c: usize,
        mut arena: impl FnMut(usize, bool) -> Option<*mut Run>,
    ) -> Option<Grant> {
        let bit = 1u64 << (c % 64);
        if self.shared().remote[c / 64].load(Relaxed) & bit != 0 {
            // Every remote free from here on sets the bit again; every
            // one before it is collected now, from each run of the class.
            self.shared().remote[c / 64].fetch_and(!bit, Relaxed);
            core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
            self.collect_all(c);
        }
        let r = self.cur[c];
        // SAFETY: the current run is a live header this heap owns.
        if !r.is_null() && unsafe { (*r).collect() } > 0 {
            return self.take_in(c, true);
        }
        if let Some(s) = self.find(c, |run| {
            run.collect();
            run.free.get() != 0
        }) {
            self.make_current(c, s);
            return self.take_in(c, true);
        }
        while let Some(s) = arena(self.id(), false) {
            // SAFETY: a run just adopted by this heap.
            let run = unsafe { &*s };
            if run.free.get() != 0 || run.open_fresh() {
                self.make_current(c, s);
                return self.take_in(c, true);
            }
            // Full (its live slots elsewhere): kept with the heap's others.
            // SAFETY: owned now, on no list.
            unsafe { self.runs[c].push_back(s) };
        }
        // SAFETY: as above.
        if !r.is_null() && unsafe { (*r).open_fresh() } {
            return self.take_in(c, true);
        }
        if let Some(s) = self.find(c, Run::open_fresh) {
            self.make_current(c, s);
            return self.take_in(c, true);
        }
        let s = arena(self.id(), true)?;
        // SAFETY: a run just carved for this heap.
        unsafe { (*s).open_fresh() };
        self.make_current(c, s);
        self.take_in(c, true)
    }

    /// Run `r` of class `c` just emptied (`cur`: the class's current
    /// run): back to the arena, kept as the spare, or retired.
    #[cold]
    #[inline(never)]
    fn emptied(&mut self, c: usize, r: *mut Run, cur: *mut Run) {
        if self.seen & NO_CACHE != 0 {
            self.run_emptied(c, r);
        } else if r != cur {
            self.keep_spare(c, r);
        } else {
            self.retire(c);
        }
    }

    /// Run `r` of class `c`, not the current one, just emptied: it stays
    /// as the class's spare unless the class has an empty spare already,
    /// which then stays instead.
    #[cold]
    fn keep_spare(&mut self, c: usize, r: *mut Run) {
        let sp = self.spare[c];
        // SAFETY: a spare is a run this heap owns (cleared before it
        // leaves the heap).
        if !sp.is_null() && sp != r && sp != self.cur[c] && unsafe { (*sp).used.get() } == 0 {
            return self.run_emptied(c, r);
        }
        if sp.is_null() {
            self.spares += 1;
        }
        self.spare[c] = r;
        self.spare_at[c] = self.ticks;
    }

    /// Class `c`'s current run just emptied: it stays, for a repeated
    /// allocate-and-free of the class, until `RETIRE_TICKS` slow paths
    /// later (`tick`).
    #[cold]
    fn retire(&mut self, c: usize) {
        if self.retired_at[c] == u32::MAX {
            self.retired_at[c] = self.ticks;
            self.retired += 1;
        }
    }

    /// A slow path of a thread heap for class `c` begins: one tick, and the
    /// current runs that stayed empty for `RETIRE_TICKS` slow paths (but
    /// class `c`'s, about to be served) go back to the arena, so a pool's
    /// worker that moved on to other classes does not keep them from the
    /// next worker (mimalloc's retired pages).
    pub(crate) fn tick(&mut self, c: usize) {
        self.ticks = self.ticks.wrapping_add(1);
        if self.retired == 0 && self.spares == 0 {
            return;
        }
        let mut due = [null_mut::<Run>(); SMALL_CLASSES];
        let mut spare_due = [null_mut::<Run>(); SMALL_CLASSES];
        let mut n = self.spares_due(c, &mut spare_due);
        let ticks = self.ticks;
        for (k, (at, cur)) in self
            .retired_at
            .iter_mut()
            .zip(self.cur.iter_mut())
            .enumerate()
        {
            if *at == u32::MAX {
                continue;
            }
            let r = *cur;
            // SAFETY: the current run is this heap's.
            if r.is_null() || unsafe { (*r).used.get() } != 0 {
                *at = u32::MAX;
                self.retired -= 1;
            } else if k != c && ticks.wrapping_sub(*at) >= RETIRE_TICKS {
                *at = u32::MAX;
                self.retired -= 1;
                *cur = null_mut();
                due[k] = r;
                n += 1;
            }
        }
        if n == 0 {
            return;
        }
        // SAFETY: the heap's arena outlives it.
        let core = unsafe { &*self.core };
        let mut st = core.lock();
        let both = due.iter().enumerate().chain(spare_due.iter().enumerate());
        for (k, &r) in both {
            if !r.is_null() {
                // SAFETY: an empty run this heap owned, on no list.
                unsafe {
                    (*r).abandon();
                    st.small.take_back(k, r);
                }
            }
        }
    }

    /// The spares (but class `c`'s) that stayed empty `RETIRE_TICKS` slow
    /// paths, taken off the heap's lists into `due`; how many. A spare
    /// that was used again, or became the current run, stops being one.
    fn spares_due(&mut self, c: usize, due: &mut [*mut Run; SMALL_CLASSES]) -> usize {
        if self.spares == 0 {
            return 0;
        }
        let mut n = 0;
        for (k, slot) in due.iter_mut().enumerate() {
            let s = self.spare[k];
            if s.is_null() {
                continue;
            }
            // SAFETY: a spare is a run this heap owns.
            if s == self.cur[k] || unsafe { (*s).used.get() } != 0 {
                self.spare[k] = null_mut();
                self.spares -= 1;
            } else if k != c && self.ticks.wrapping_sub(self.spare_at[k]) >= RETIRE_TICKS {
                self.spare[k] = null_mut();
                self.spares -= 1;
                // SAFETY: an empty run other than the current one: on the
                // class's list.
                unsafe { self.runs[k].unlink(s) };
                *slot = s;
                n += 1;
            }
        }
        n
    }

    /// Collects the remote frees of every run of class `c` the heap owns.
    fn collect_all(&mut self, c: usize) {
        let mut s = self.cur[c];
        if !s.is_null() {
            // SAFETY: the current run is this heap's.
            unsafe { (*s).collect() };
        }
        s = self.runs[c].head;
        while !s.is_null() {
            // SAFETY: runs on the heap's list are live headers it owns.
            let run = unsafe { &*s };
            run.collect();
            s = run.next.get();
        }
    }

    /// The first of the heap's other runs of class `c` that `ok` accepts,
    /// taken off the list.
    fn find(&mut self, c: usize, mut ok: impl FnMut(&Run) -> bool) -> Option<*mut Run> {
        let mut s = self.runs[c].head;
        while !s.is_null() {
            // SAFETY: runs on the heap's list are live headers it owns.
            let run = unsafe { &*s };
            if ok(run) {
                // SAFETY: `s` is on the list of class `c`.
                unsafe { self.runs[c].unlink(s) };
                return Some(s);
            }
            s = run.next.get();
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
        self.spare = [null_mut(); SMALL_CLASSES];
        self.spares = 0;
        for c in 0..SMALL_CLASSES {
            let mut s = self.runs[c].head;
            while !s.is_null() {
                // SAFETY: runs on the heap's list are live headers it owns.
                let next = unsafe { (*s).next.get() };
                // SAFETY: as above.
                let run = unsafe { &*s };
                run.collect();
                if run.used.get() == 0 || partial || all {
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
            let run = unsafe { &*r };
            run.collect();
            if all || run.used.get() == 0 {
                self.cur[c] = null_mut();
                run.abandon();
                // SAFETY: on no list; the lock is held.
                unsafe { st.small.take_back(c, r) };
            }
        }
    }
}
