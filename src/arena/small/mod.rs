//! The small path on run ownership (`ArenaConfig::run_ownership`): every
//! buffer below [`CARVE_LIMIT`] is a slot of a run, and every run has one
//! owner, a thread's heap or the arena. The design is mimalloc's free-list
//! sharding (a page's `free`, `local_free` and `thread_free`) and
//! snmalloc's message passing, written for an arena that must know when
//! its last buffer is gone.
//!
//! Concepts, each owned by one file:
//! 1. **Run** (`run.rs`): `RUN_LEN` bytes of one class and its header at
//!    the region's start, found from any slot's address by arithmetic.
//! 2. **Free list** (`run.rs`): the owner's free slots, linked through
//!    their first word; slots never used are taken from the run's fresh
//!    end instead, so untouched pages stay untouched.
//! 3. **Thread free** (`run.rs`): a free on a thread that does not own
//!    the run is one compare-exchange onto the run's atomic list; the
//!    owner takes the list with one swap when its free list runs dry.
//! 4. **Abandoned mark** (`run.rs`): while the arena owns a run, its
//!    thread-free word says so and frees go through the arena's lock.
//! 5. **Heap** (`heap.rs`): one thread's runs of one arena, a current run
//!    and a list of others per class.
//! 6. **Counters** (`heap.rs`): each heap counts its own allocations and
//!    frees in single-writer atomics; `stats()` sums them under the lock.
//! 7. **Pool** (`pool.rs`): the runs no heap owns, empty (newest first)
//!    or abandoned (with live slots), per class; a heap adopts from it
//!    before the arena carves a new run.
//! 8. **Give back** (`heap.rs`): a heap keeps one other run per class
//!    that empties (its spare) and returns a second one at once; it
//!    returns a spare or an empty current run that stayed so for 16 slow
//!    paths, all its empty runs when the arena's epoch moves, every run
//!    but the current ones at a run boundary, and every run at its
//!    thread's exit.
//! 9. **Thread table** (`thread.rs`): which heap a thread uses for an
//!    arena, found with one thread-local load and an epoch compare.
//! 10. **Release** (`pool.rs`): `trim` and the retention cap release the
//!     pages of empty runs, least recently emptied first.
//!
//! Lifetime: the body is freed by whoever finds, under the lock, that the
//! arena is orphaned, no heap is registered, no run is abandoned with live
//! slots and every small allocation has been freed ([`Pool::idle`]). A
//! remote free's compare-exchange succeeds only while the run's owner is a
//! registered heap (which keeps the body), and touches nothing after it;
//! a free into an abandoned run happens under the lock, and an abandoned
//! run with live slots keeps the body. So no free writes to a body that
//! another thread may free.
//!
//! What `stats()` sees: exact when no thread is in an operation. While
//! threads run, each heap's counters are read one at a time, so a buffer
//! freed on another thread between two reads may show as freed but not yet
//! allocated (live bytes low by it) or the reverse.
//!
//! [`CARVE_LIMIT`]: crate::arena::CARVE_LIMIT
//! [`Pool::idle`]: pool::Pool::idle

mod heap;
pub(crate) mod pool;
mod run;
#[cfg(all(test, not(loom)))]
mod tests;
mod thread;

pub(crate) use self::pool::Pool;
use self::run::{run_of, Run};
use crate::arena::metadata;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use crate::arena::tcache::epoch::{self, ORPHANED};
use crate::size_class::{capacity, Class};
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;

/// The classes this path serves: capacities below `CARVE_LIMIT`.
pub(crate) const SMALL_CLASSES: usize = crate::size_class::class_of_classed(super::CARVE_LIMIT);

/// The calling thread's small live bytes in `core` (the peak's term on
/// the locked path).
pub(crate) fn own_live(core: *const ArenaCore) -> usize {
    thread::own_live(core)
}

/// A pin record's block number that names a slot's record: this bit set,
/// the record's number in the small path's table below it.
pub(crate) const SLOT_PIN: u32 = 1 << 31;

/// The slot pin record number a pinned buffer's block number names, if it
/// names one.
pub(crate) fn slot_pin_id(block: u32) -> Option<u32> {
    (block != crate::arena::blocks::NIL && block & SLOT_PIN != 0).then_some(block & !SLOT_PIN)
}

/// Whether `addr`, inside a run of class `c`, is where one of its slots
/// starts (arithmetic only: nothing another thread writes is read).
pub(crate) fn is_slot_start(addr: usize, c: Class) -> bool {
    let cap = capacity(c);
    let base = addr & !(super::RUN_LEN - 1);
    let first = run::first_slot(base, cap);
    addr >= first && (addr - first) % cap == 0 && addr + cap <= base + super::RUN_LEN
}

/// Counts a payload copy on this thread's heap; `false` (nothing
/// counted) without a current heap.
pub(crate) fn note_copy(core: &ArenaCore, bytes: usize) -> bool {
    match thread::current(core) {
        Some(h) => {
            h.note_copy(bytes);
            true
        }
        None => false,
    }
}

/// A slot of class `c` from this thread's current run, or `None` (nothing
/// changed).
#[inline(always)]
pub(crate) fn allocate_hit(core: &ArenaCore, c: Class) -> Option<Grant> {
    thread::current(core)?.take(c)
}

/// A slot of class `c`: the hit, else the heap's slow path; `None` when
/// the arena cannot map a new run.
#[inline(always)]
pub(crate) fn allocate(core: &ArenaCore, c: Class) -> Option<Grant> {
    if let Some(g) = allocate_hit(core, c) {
        return Some(g);
    }
    allocate_slow(core, c)
}

#[cold]
#[inline(never)]
fn allocate_slow(core: &ArenaCore, c: Class) -> Option<Grant> {
    if let Some(h) = thread::current(core) {
        h.tick(c);
        return h.refill(c, |owner, carve| new_run(core, c, owner, carve));
    }
    match thread::heap_for(core) {
        Some(h) => match h.take(c) {
            Some(g) => Some(g),
            None => {
                h.tick(c);
                h.refill(c, |owner, carve| new_run(core, c, owner, carve))
            }
        },
        None => {
            // No heap for this thread (its thread-locals are gone, or it
            // uses too many arenas): the arena's own heap, under the lock.
            let mut st = core.lock();
            let h = st.small.locked_heap(core)?;
            // SAFETY: the locked heap is the lock holder's to use.
            let h = unsafe { &mut *h.as_ptr() };
            match h.take(c) {
                Some(g) => Some(g),
                None => h.refill(c, |owner, carve| run_locked(&mut st, core, c, owner, carve)),
            }
        }
    }
}

/// A run of class `c` for heap `owner`: adopted, or with `carve` new.
fn new_run(core: &ArenaCore, c: Class, owner: usize, carve: bool) -> Option<*mut Run> {
    let mut st = core.lock();
    run_locked(&mut st, core, c, owner, carve)
}

fn run_locked(
    st: &mut ArenaState,
    core: &ArenaCore,
    c: Class,
    owner: usize,
    carve: bool,
) -> Option<*mut Run> {
    if !carve {
        return st.small.adopt(c, owner);
    }
    let _m = metadata::enter();
    let base = st.cut_small_run(c, &core.os).ok()?;
    // SAFETY: a new run of a live region, ours under the lock.
    Some(unsafe { Run::init(base, capacity(c), owner) })
}

/// Frees the live small buffer of class `c` at `addr` into this thread's
/// heap when it has one: its own run's free list, or another run's remote
/// list. `false` (nothing changed) otherwise; then [`free`] decides. Never
/// frees the body: this thread's registered heap keeps it.
///
/// # Safety
/// `addr` is a live slot of class `c` that `core` served, given up by the
/// caller when this returns `true`.
#[inline(always)]
pub(crate) unsafe fn free_hit(core: &ArenaCore, c: Class, addr: usize) -> bool {
    match thread::current(core) {
        // SAFETY: the caller's contract.
        Some(h) => unsafe { h.free(c, run_of(addr), addr) },
        None => false,
    }
}

/// Frees the live small buffer of class `c` at `addr`: always taken.
///
/// # Safety
/// `this` is the body's original pointer ([`CoreHandle::ptr`]); `addr` is
/// a live slot of class `c` that it served, given up by the caller, who
/// keeps the body alive for the call (a handle, or the buffer). When this
/// returns the body may be gone unless the caller holds a handle.
///
/// [`CoreHandle::ptr`]: crate::arena::shared::CoreHandle::ptr
#[inline(always)]
pub(crate) unsafe fn free(this: NonNull<ArenaCore>, c: Class, addr: usize) {
    // SAFETY: the caller's contract (the reference ends with the call).
    if unsafe { free_hit(this.as_ref(), c, addr) } {
        return;
    }
    // SAFETY: forwarded.
    unsafe { free_slow(this, c, addr) }
}

/// [`free`] past this thread's heap's hit. Takes the body's pointer, not
/// a reference: the body may be freed on the way out.
#[cold]
#[inline(never)]
unsafe fn free_slow(this: NonNull<ArenaCore>, c: Class, addr: usize) {
    let r = run_of(addr);
    // SAFETY: the caller keeps the body alive until the free lands; this
    // reference is not used after that.
    let core = unsafe { this.as_ref() };
    if let Some(h) = thread::heap_for(core) {
        // SAFETY: the caller's contract.
        if !unsafe { h.free(c, r, addr) } {
            // The arena owns the run: under the lock, counted by this heap
            // (which keeps the body).
            let mut st = core.lock();
            // SAFETY: the caller's contract.
            unsafe { free_locked(&mut st, c, r, addr) };
            drop(st);
            h.note_freed(capacity(c));
        }
        if core.epoch.load(Relaxed) & ORPHANED != 0 {
            // The last handle is gone: this thread's heap goes now, and
            // with it perhaps the body.
            // SAFETY: the heap keeps the body; `core` is not used after.
            unsafe { thread::leave_current(this) };
        }
        return;
    }
    // No heap: everything under the lock, counted by the arena's heap.
    // SAFETY: the buffer keeps the body until its free lands under the
    // lock; `core` is not used after.
    unsafe {
        ArenaCore::locked_last_out(this, |st, core| {
            if let Some(h) = st.small.locked_heap(core) {
                // SAFETY: the locked heap is the lock holder's to use.
                let h = &mut *h.as_ptr();
                if !h.free(c, r, addr) {
                    free_locked(st, c, r, addr);
                    h.note_freed(capacity(c));
                }
            }
        })
    }
}

/// A free of slot `p` of run `r` with the lock held: into the run if the
/// arena owns it, else (adopted meanwhile) onto its remote list.
///
/// # Safety
/// `p` is a live slot of class `c` in run `r`, given up by the caller.
unsafe fn free_locked(st: &mut ArenaState, c: Class, r: *mut Run, p: usize) {
    // SAFETY: a live slot keeps its run's header live.
    if unsafe { (*r).abandoned() } {
        // SAFETY: the arena owns the run (under this lock).
        unsafe { st.small.free_abandoned(c, r, p) };
    } else {
        // Adopted since the push failed: its owner collects it.
        // SAFETY: the caller's contract.
        let pushed = unsafe { run::push_remote(r, p, |owner| heap::notify(owner, c)) };
        debug_assert!(pushed, "a run is abandoned only under the lock");
    }
}

/// What heap `h` does when its arena's epoch moved since it last looked
/// (called with the heap found, before the operation): its empty runs go
/// to the arena, and their pages are released when a trim happened since.
pub(crate) fn honour(h: &mut heap::ThreadHeap, core: &ArenaCore) {
    let e = core.epoch.load(Relaxed);
    if h.seen == e {
        return;
    }
    let mut st = core.lock();
    let trimmed = epoch::due(h.seen, e, st.trim_epoch).release;
    h.give_back(&mut st, false, false);
    if e & ORPHANED != 0 {
        // Only frees reach an orphaned arena; each leaves the heap after
        // it (`free_slow`), so this heap never takes the fast path again.
        return;
    }
    if trimmed {
        let n = release(&mut st, core, |_| true);
        st.stats.trimmed_bytes += n;
    } else {
        enforce_cap(&mut st, core);
    }
    h.seen = e;
}

/// A run boundary on this thread: its heap keeps only its current runs,
/// so other threads' heaps can adopt the rest.
pub(crate) fn boundary(core: &ArenaCore) {
    if let Some(h) = thread::current(core) {
        let mut st = core.lock();
        h.give_back(&mut st, true, false);
    }
}

/// `trim` on this thread: its heap's empty runs back, then every empty
/// run's pages released; the bytes.
pub(crate) fn trim(st: &mut ArenaState, core: &ArenaCore) -> usize {
    if let Some(h) = thread::current(core) {
        h.give_back(st, false, false);
    }
    release(st, core, |_| true)
}

/// Releases the pages of empty runs, least recently emptied first, while
/// `more(bytes so far)`; the bytes.
fn release(st: &mut ArenaState, core: &ArenaCore, more: impl FnMut(usize) -> bool) -> usize {
    let plain = st.plain_run_region();
    st.small.release(&core.os, plain, more)
}

/// Releases empty runs, oldest first, while the arena retains more than
/// its cap.
pub(crate) fn enforce_cap(st: &mut ArenaState, core: &ArenaCore) {
    let cap = st.config.retention_cap;
    if cap == usize::MAX {
        return;
    }
    let retained = st.retained_bytes() + st.small.stats().retained_bytes;
    if retained <= cap {
        return;
    }
    let over = retained - cap;
    let n = release(st, core, |done| done < over);
    st.stats.evictions += (n > 0) as u64;
    st.stats.evicted_bytes += n;
}

/// The arena's last handle is going (under the lock): this thread's heap
/// goes too, and other threads let go of theirs at their next slow path.
pub(crate) fn orphaned(st: &mut ArenaState, core: &ArenaCore) {
    thread::leave_own(st, core);
    if !st.small.heaps.is_empty() {
        thread::note_orphaned();
    }
}
