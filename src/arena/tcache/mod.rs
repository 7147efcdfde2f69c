//! The per-thread front end of the arenas: each thread keeps, per arena it
//! uses, a small cache of free buffers of the small classes (capacities
//! below [`CARVE_LIMIT`]), so the common allocate and free take no lock and
//! no shared atomic read-modify-write; and, for the large classes up to
//! [`LARGE_MAX`], one free buffer per class among those the arena lent this
//! thread, with the bytes each has materialized (`large.rs`), so a warm
//! large pair takes no lock either; on the execution heap's thread, whose
//! placement depends on every request reaching the heap, one piece the
//! heap would hand out again as it is (`heap_slot.rs`).
//!
//! Design (after jemalloc's tcache, with mimalloc's address arithmetic):
//! - A cache is a bounded stack per class (`bin.rs`). A hit is a pop or a
//!   push and a few owner-only counter stores. An empty bin is refilled with
//!   half a bin's worth of the class's retained buffers under one lock
//!   acquisition; a full one gives its oldest half back the same way. A
//!   second refill with no flush between (or a second flush with no
//!   refill) moves the whole bin: a thread streaming through a class
//!   takes the lock once a bin.
//! - A buffer belongs to the arena, not to a thread: a buffer freed on
//!   another thread goes into *that* thread's cache when it has a credit
//!   for its class (it handed one out), else onto the arena's remote stack
//!   (`remote.rs`), which the next lock holder, or a thread whose bin ran
//!   empty (`collect.rs`, no lock), takes whole; any thread's flush
//!   returns what it holds.
//! - Finding the class of a small buffer from its address alone (the
//!   scoped global allocator and allocator-api2 frees) is arithmetic: the
//!   owner table (`owners.rs`) tags each run's granules with the run's
//!   class, so one lookup gives both the arena and the class.
//! - The arena sees cached buffers as live (so they keep its body alive)
//!   and `stats()` moves them from live to retained by summing the caches'
//!   counters; see [`super::shared::ArenaCore::stats`] for what a reader
//!   sees while other threads run.
//! - The arena's *epoch* word (read with one relaxed load per operation)
//!   tells caches to give everything back: `trim` and `set_retention_cap`
//!   advance it, an orphaned arena or a cap below [`epoch::MIN_CAP_FOR_CACHE`]
//!   sets a flag that turns caching off. A thread honours it at its next
//!   operation on that arena; `trim` gives back the calling thread's own
//!   cache at once.
//! - A thread's caches are flushed when it exits (a thread-local
//!   destructor). Who frees a cache's memory, the thread or the arena, is
//!   settled by `link.rs`.
//!
//! Under `cfg(loom)` the front end is off (every call answers "not
//! handled"), so the loom models of the arena lifetime see the shared path
//! they were written for; `link.rs` has its own model.

mod bin;
mod claim;
mod collect;
mod depot;
pub(crate) mod epoch;
mod heap_slot;
#[cfg(all(test, not(loom)))]
mod heap_slot_tests;
mod hints;
mod large;
#[cfg(all(test, not(loom)))]
mod large_tests;
mod link;
mod make;
pub(crate) mod remote;
#[cfg(all(test, not(loom)))]
mod remote_tests;
pub(crate) mod remotes;
pub(crate) mod spare;
mod stash;
#[cfg(all(test, not(loom)))]
mod stash_tests;
mod streak;
#[cfg(all(test, not(loom)))]
mod tests;

use self::bin::{Bin, Move, Slot};
use self::claim::Claim;
pub(crate) use self::depot::Depot;
pub(crate) use self::epoch::{epoch_flags, first_epoch, ORPHANED};
use self::heap_slot::HeapSlot;
use self::large::{has_room, large_index, Large, Piece, LARGE_CLASSES, LARGE_FIRST};
pub(crate) use self::large::{BUDGET_MAX, LARGE_MAX};
use self::link::Link;
pub(crate) use self::stash::Stash;
use super::blocks::{Place, NIL};
use super::release::STAMP_SEQ_BITS;
use super::reuse::{may_borrow, serves_alignment};
use super::shared::ArenaCore;
use super::state::{ArenaState, Grant};
use super::{metadata, CARVE_LIMIT};
use crate::size_class::{capacity, class_of_classed, Class, MIN_CAPACITY};
use core::cell::{Cell, UnsafeCell};
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// The classes a thread caches: every class whose capacity is below
/// [`CARVE_LIMIT`] (the run-carved ones).
pub(crate) const SMALL_CLASSES: usize = class_of_classed(CARVE_LIMIT);
/// The large classes the arena's stash covers (`stash.rs`): those whose
/// slots share the budget, from [`CARVE_LIMIT`] up to [`BUDGET_MAX`],
/// indexed as the slots are.
pub(crate) const STASH_CLASSES: usize = match large_index(class_of_classed(BUDGET_MAX)) {
    Some(k) => k + 1,
    None => 0,
};

/// A handle's small class as it keeps it in a byte, for a buffer of no
/// small class (64 KiB and up, or planned).
pub(crate) const NO_CLASS: u8 = u8::MAX;
const _: () = assert!(SMALL_CLASSES < NO_CLASS as usize);

/// Arenas one thread caches for at once; a thread using more arenas serves
/// the extra ones through the shared path. A serving thread may run the
/// sessions of dozens of models, each with its own execution arena; a
/// slot is one pointer, and a cache is made only for an arena the thread
/// uses (with 8 slots, a thread cycling through 32 arenas took the lock in
/// three operations of four). Under Miri 8, which the tests that fill
/// every slot need (each arena maps its first segment there).
const SLOTS: usize = if cfg!(miri) { 8 } else { 64 };

/// Bumped when an arena is orphaned while buffers of it may sit in caches:
/// threads then flush such caches at their next slow path.
static RECLAIM: AtomicU64 = AtomicU64::new(0);

/// The counters a cache's thread writes (plain loads and stores: one
/// writer) and the arena sums under its lock: the only copy of each, the
/// thread's own hits included.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Held bytes and buffers, packed as [`Held`] (one load and one store
    /// per hit).
    pub held: AtomicU64,
    /// The held bytes last added to the arena's `cached_bytes` (`Own::
    /// published`), stored before the thread lets go of the lock after
    /// changing it: the arena's peak check reads it for the thread's own
    /// cache ([`own_unpublished`]).
    pub published: AtomicUsize,
    pub frees: AtomicU64,
    /// Buffers a reallocation moved on this thread (allocator-api2's
    /// `grow`/`shrink`, the scoped global allocator's `realloc`), and
    /// their bytes: `ArenaStats::copies` and `copied_bytes`, counted here
    /// so that a `Vec` growing on many threads takes no lock for them.
    pub copies: AtomicU64,
    pub copied_bytes: AtomicU64,
    pub peak: AtomicUsize,
    /// The one held buffer other threads may claim under the arena's lock
    /// (`claim.rs`): the heap slot's piece, or the buffer above the large
    /// slots' budget. `stats()` also reads it to count a held heap piece
    /// and the free extent above it as the one retained extent they would
    /// be if the piece were parked.
    pub claim: Claim,
}

impl Counters {
    #[inline(always)]
    pub(crate) fn held(&self) -> Held {
        Held(self.held.load(Relaxed))
    }

    // The cache's thread is the one writer of `held` and `frees`, so it
    // changes them with a plain load and store (no read-modify-write): one
    // copy, read by the arena's lock holder and `stats()` from others.

    /// Adds `d` ([`Held`] deltas) to the held word; its new value.
    #[inline(always)]
    fn add_held(&self, d: u64) -> u64 {
        let h = self.held.load(Relaxed) + d;
        self.held.store(h, Relaxed);
        h
    }

    /// Takes `d` ([`Held`] deltas) from the held word; its new value.
    #[inline(always)]
    fn sub_held(&self, d: u64) -> u64 {
        let h = self.held.load(Relaxed) - d;
        self.held.store(h, Relaxed);
        h
    }

    /// Counts `n` more frees this cache took.
    #[inline(always)]
    fn add_frees(&self, n: u64) {
        self.frees.store(self.frees.load(Relaxed) + n, Relaxed);
    }

    /// Counts a moved reallocation of `bytes` bytes.
    #[inline(always)]
    fn add_copy(&self, bytes: u64) {
        self.copies.store(self.copies.load(Relaxed) + 1, Relaxed);
        self.copied_bytes
            .store(self.copied_bytes.load(Relaxed) + bytes, Relaxed);
    }

    /// A buffer of `one` ([`Held::one`]) freed into the cache.
    #[inline(always)]
    fn note_cached_free(&self, one: u64) {
        self.add_held(one);
        self.add_frees(1);
    }
}

/// A cache's held bytes (high half) and buffers (low half) in one word: a
/// cache holds at most `SMALL_CLASSES * BIN_BYTES` (10 MiB) in at most
/// `SMALL_CLASSES * BIN_SLOTS` buffers, and `LARGE_BYTES` (4 MiB) in its
/// large slots, so each half has room to spare, and a hit updates both
/// with one add and one store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held(pub u64);

impl Held {
    /// One buffer of `cap` bytes, as a delta.
    #[inline(always)]
    pub(crate) const fn one(cap: usize) -> u64 {
        ((cap as u64) << 32) | 1
    }
    #[inline(always)]
    pub(crate) const fn bytes(self) -> usize {
        (self.0 >> 32) as usize
    }
    #[inline(always)]
    pub(crate) const fn buffers(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
}

/// What only the cache's thread touches.
struct Own {
    /// An epoch with caching off that this cache has honoured (flushed
    /// under): while the arena's epoch stays there, the cache is empty and
    /// every operation goes straight to the arena.
    off_seen: u64,
    /// Held bytes as last added to the arena's `cached_bytes`.
    published: usize,
    bins: [Bin; SMALL_CLASSES],
    /// The large classes' slots (`large.rs`).
    large: [Large; LARGE_CLASSES],
    /// Bytes held in `large`'s classes up to `BUDGET_MAX`.
    large_bytes: usize,
    /// Bytes held in `large`'s classes above `BUDGET_MAX` (one buffer at most).
    big_bytes: usize,
    /// The execution heap's thread's slot (`heap_slot.rs`).
    heap: HeapSlot,
    /// Per small class, this cache's last pushes onto the arena's remote
    /// stack: the prefetch hints its next push carries (`hints.rs`).
    recent: [hints::Recent; SMALL_CLASSES],
}

impl Own {
    /// The byte count of the large slots a buffer of `cap` bytes is held in.
    #[inline(always)]
    fn slot_bytes(&mut self, cap: usize) -> &mut usize {
        if cap <= BUDGET_MAX {
            &mut self.large_bytes
        } else {
            &mut self.big_bytes
        }
    }
}

/// The arena's mirrors (`ArenaCore::live_mirror`, `clock_mirror`) as this
/// cache's thread last saw them: read when the cache becomes the thread's
/// current one and stored at each of the thread's unlocks of the arena
/// while it is ([`note_unlock`]). On one thread that is every change, so a
/// hit reads its own line instead of one the lock holder writes at every
/// unlock. Atomics written by the cache's thread only (plain moves): they
/// are written while `Own` may be borrowed.
#[derive(Debug, Default)]
struct View {
    live: AtomicUsize,
    /// The last free stamp this cache gave (see [`stamp`]): the arena's
    /// free count (its clock) as last seen, shifted by [`STAMP_SEQ_BITS`],
    /// plus this cache's sequence. A cached free adds one.
    stamp: AtomicU64,
    /// A held word ([`Held`]) below which this cache's hand-outs may take
    /// the live bytes past the peak: a hit compares its held word with it
    /// and only then computes the live bytes ([`note_peak`]). Set to the
    /// maximum whenever what it was computed from may have changed (the
    /// view, the published bytes, a peak reset), so that the next hit
    /// computes it again; lowered only by [`note_peak`], exactly.
    floor: AtomicU64,
    /// This cache's budget for its large slots up to [`BUDGET_MAX`]
    /// ([`large::budget_for`] the threads with caches on the arena, as
    /// this thread last saw them under the lock: [`note_unlock`]).
    large_budget: AtomicUsize,
}

impl View {
    fn refresh(&self, core: &ArenaCore) {
        self.see(
            core.live_mirror.load(Relaxed),
            core.clock_mirror.load(Relaxed),
        );
    }

    /// Takes the arena's `live` bytes and free count `clock` as seen now.
    /// The sequence goes on from where it was (so this cache's stamps never
    /// go back), under the new clock.
    #[inline(always)]
    fn see(&self, live: usize, clock: u64) {
        self.live.store(live, Relaxed);
        self.floor.store(u64::MAX, Relaxed);
        let last = self.stamp.load(Relaxed);
        let rebased = (clock << STAMP_SEQ_BITS) | (last & ((1 << STAMP_SEQ_BITS) - 1));
        self.stamp.store(last.max(rebased), Relaxed);
    }
}

/// One thread's cache for one arena. Aligned to 128 bytes: the lines its
/// thread writes at every hit (`counters`, `view`, the bins) are shared
/// with no other allocation, so with no other thread's cache.
#[repr(C, align(128))]
pub(crate) struct Cache {
    /// The arena epoch this cache has honoured (its high bits are the
    /// arena's id, so a body reused at the same address never matches).
    /// First, so that [`fast_cache`] reads it through [`LAST`] whether that
    /// points to a cache or to [`NEVER`]. Only the cache's thread touches it.
    seen: Cell<u64>,
    /// The arena body's original pointer (from `ArenaState::owner`).
    core: *const ArenaCore,
    /// The arena's id (`ArenaCore::id`).
    id: u64,
    pub(crate) link: Link,
    pub(crate) counters: Counters,
    view: View,
    own: UnsafeCell<Own>,
}

// SAFETY: the arena reads a cache's atomics and link from other threads;
// `own` is only touched by the cache's thread (or by whoever frees the cache
// once both sides have left, see `link.rs`).
unsafe impl Sync for Cache {}
// SAFETY: as above.
unsafe impl Send for Cache {}

impl Cache {
    /// # Safety
    /// Only the cache's thread may call this, and not while another borrow
    /// from it is alive.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    unsafe fn own(&self) -> &mut Own {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.own.get() }
    }

    /// Stores the published bytes, after a slow path changed them under
    /// the lock (before it lets go).
    fn store_published(&self, o: &Own) {
        self.counters.published.store(o.published, Relaxed);
    }

    /// Frees a cache whose thread and arena have both let go.
    ///
    /// # Safety
    /// `c` came from `Box::into_raw` and nothing refers to it any more.
    pub(crate) unsafe fn free(c: NonNull<Cache>) {
        let _m = metadata::enter();
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(c.as_ptr()) });
    }
}

/// Publishes this cache's held bytes into the arena's total (under its
/// lock), so the arena's peak tracking sees them as not live.
fn publish(st: &mut ArenaState, cache: &Cache, o: &mut Own) {
    let held = cache.counters.held().bytes();
    st.cached_bytes = st.cached_bytes - o.published + held;
    o.published = held;
}

/// The thread's caches (owned; flushed when the thread exits).
struct Front {
    slots: [Cell<*mut Cache>; SLOTS],
    /// The arena body each slot's cache was made for, as a hint: a switch
    /// between arenas finds its slot here, in the thread's own lines,
    /// instead of reading every cache's link and owner on the way (the
    /// cache found is still checked, and a stale hint falls back to the
    /// full scan).
    keys: [Cell<*const ArenaCore>; SLOTS],
    reclaim_seen: Cell<u64>,
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = LAST.try_with(|l| l.set(NO_CACHE_PTR));
        for s in &self.slots {
            if let Some(c) = NonNull::new(s.replace(null_mut())) {
                // SAFETY: slots hold caches this thread made and still owns.
                unsafe { leave(c) };
            }
        }
    }
}

/// What [`LAST`] points to while this thread has no current cache: a word
/// in a cache's `seen` place that no arena's epoch equals (`u64::MAX` has
/// the flag bits, and a cache only honours epochs without them), so the
/// fast path needs no null test and no owner test (see [`fast_cache`]).
static NEVER: u64 = u64::MAX;

/// [`NEVER`] as [`LAST`] holds it. Never dereferenced as a cache: only its
/// first word is read, and [`last`] filters it out.
const NO_CACHE_PTR: *mut Cache = (&raw const NEVER).cast_mut().cast::<Cache>();

thread_local! {
    /// The cache used last, or [`NO_CACHE_PTR`]: the fast path's one
    /// thread-local load. Reset before the cache it points to is freed. No
    /// destructor, so it still reads during thread exit (where the epoch
    /// check of a left cache fails: [`Front`]'s drop reset it first).
    static LAST: Cell<*mut Cache> = const { Cell::new(NO_CACHE_PTR) };
    /// The arena (and its epoch) whose caching this thread found off and
    /// whose cache it emptied: `ready_cache` answers at once for it. An
    /// epoch names one arena (its id is in the high bits), so a body made
    /// later at the same address never matches.
    static OFF: Cell<(*const ArenaCore, u64)> = const { Cell::new((core::ptr::null(), 0)) };
    static FRONT: Front = const {
        Front {
            slots: [const { Cell::new(null_mut()) }; SLOTS],
            keys: [const { Cell::new(core::ptr::null()) }; SLOTS],
            reclaim_seen: Cell::new(0),
        }
    };
}

/// This thread's cache for `core`, if the fast path may use it now.
///
/// One thread-local load, one load of the cache's `seen` word and one of
/// the arena's epoch: equal words mean the cache is `core`'s and ready.
/// The epoch's high bits are the arena's id (unique in the process), so no
/// other arena's cache, nor [`NEVER`], has seen `core`'s epoch.
#[inline(always)]
fn fast_cache(core: &ArenaCore) -> Option<&Cache> {
    if cfg!(loom) {
        return None;
    }
    let p = LAST.try_with(Cell::get).ok()?;
    // SAFETY: LAST points to a cache this thread owns and has not freed, or
    // to NEVER; either starts with the `seen` word (`Cache` is `repr(C)`),
    // which only this thread writes.
    let seen = unsafe { *p.cast::<u64>() };
    if seen != core.epoch.load(Relaxed) {
        return None;
    }
    // SAFETY: only a cache has seen an arena's epoch (above): `p` is this
    // thread's live cache for `core`.
    Some(unsafe { &*p })
}

/// This thread's current cache, if it has one (any arena's).
#[inline(always)]
fn last() -> Option<&'static Cache> {
    let p = LAST.try_with(Cell::get).ok()?;
    if p == NO_CACHE_PTR {
        return None;
    }
    // SAFETY: LAST is NO_CACHE_PTR or a cache this thread owns and has not
    // freed; the reference is used before this thread's next cache change.
    Some(unsafe { &*p })
}

/// The arena's lock holder on this thread is letting go with `live` and
/// `clock` as the mirrors' new values: this thread's current cache, if it
/// is `core`'s, takes them into its [`View`].
#[inline(always)]
pub(crate) fn note_unlock(core: &ArenaCore, live: usize, clock: u64, threads: usize) {
    if cfg!(loom) {
        return;
    }
    if let Some(c) = last() {
        if core::ptr::eq(c.core, core) {
            c.view.see(live, clock);
            c.view
                .large_budget
                .store(large::budget_for(threads), Relaxed);
        }
    }
}

/// A buffer of small class `c` (aligned for `align`) from this thread's
/// cache: its address, block and capacity (a larger class's when this
/// cache's best fit is larger), or address 0 when the shared path must
/// serve it. The caller builds its grant in registers: an `Option<Grant>`
/// repacked into a `Result` went through the stack with mismatched store
/// and load widths, a stall that cost more than the whole hit.
#[inline(always)]
pub(crate) fn allocate_parts(core: &ArenaCore, c: Class) -> (usize, u32, usize) {
    if let Some(g) = allocate_hit(core, c) {
        return (g.ptr.as_ptr() as usize, g.block, g.cap);
    }
    match allocate_slow(core, c) {
        Some(g) => (g.ptr.as_ptr() as usize, g.block, g.cap),
        None => (0, NIL, 0),
    }
}

/// [`allocate_parts`]'s hit alone: a buffer of small class `c` from this
/// thread's ready cache, or `None` (nothing changed) without trying
/// anything else.
#[inline(always)]
pub(crate) fn allocate_hit(core: &ArenaCore, c: Class) -> Option<Grant> {
    let cache = fast_cache(core)?;
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    let s = o.bins.get_mut(c).and_then(Bin::pop)?;
    Some(take(cache, o, s, c))
}

/// A hit: the counters move the buffer from held to live.
#[inline(always)]
fn take(cache: &Cache, o: &mut Own, s: Slot, c: Class) -> Grant {
    // The pop made the buffer a credit of its bin.
    let (cap, one) = match o.bins.get(c) {
        Some(bin) => (bin.cap(), bin.held_one()),
        None => (capacity(c), Held::one(capacity(c))), // never: `c` is small
    };
    let held = cache.counters.sub_held(one);
    check_peak(cache, o, held);
    Grant {
        // SAFETY: cached addresses are buffers the arena carved: never null.
        ptr: unsafe { NonNull::new_unchecked(s.addr as *mut u8) },
        cap,
        block: NIL,
        fresh: false,
        warm: true,
    }
}

/// A buffer left this cache for its user, whose held word is now `held`:
/// when it fell below the view's floor, the live bytes may be a new peak
/// ([`note_peak`]).
#[inline(always)]
fn check_peak(cache: &Cache, o: &Own, held: u64) {
    if held < cache.view.floor.load(Relaxed) {
        note_peak(cache, o, held);
    }
}

/// The live bytes as the peak, if higher, and the view's floor for the
/// next hits.
#[inline(always)]
fn note_peak(cache: &Cache, o: &Own, held: u64) {
    // Live bytes now: the arena's (less what caches published) less what
    // this cache holds beyond what it published. Exact on one thread.
    let base = cache.view.live.load(Relaxed).wrapping_add(o.published);
    let live = base.wrapping_sub(Held(held).bytes());
    let mut peak = cache.counters.peak.load(Relaxed);
    if (live as isize) >= 0 && live > peak {
        cache.counters.peak.store(live, Relaxed);
        peak = live;
    }
    cache.view.floor.store(floor_word(base, peak), Relaxed);
}

/// The held word below which the live bytes pass `peak`, where `base` is
/// the live bytes with nothing held: `base - peak` bytes in the high half
/// (at most `u32::MAX`, so a hit then always checks), or 0 (never) while
/// `base` is not above the peak, or is negative as modular live bytes can
/// be for a while.
const fn floor_word(base: usize, peak: usize) -> u64 {
    if (base as isize) > 0 && base > peak {
        let f = base - peak;
        let f = if f > u32::MAX as usize {
            u32::MAX as u64
        } else {
            f as u64
        };
        f << 32
    } else {
        0
    }
}

/// A buffer of large class `c` (see `large.rs`) for a request of `size`
/// bytes from this thread's slot, when it holds one materialized that far;
/// `None` (nothing changed) otherwise.
#[inline]
pub(crate) fn allocate_large_hit(core: &ArenaCore, c: Class, size: usize) -> Option<Grant> {
    let k = large_index(c)?;
    let cache = fast_cache(core)?;
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    let cap = capacity(c);
    let l = o.large.get_mut(k)?;
    let p = l.peek(size)?;
    if cap > BUDGET_MAX && !cache.counters.claim.withdraw(p.block) {
        // Claimed by another thread: settled under the lock.
        return None;
    }
    l.taken();
    *o.slot_bytes(cap) -= cap;
    let held = cache.counters.sub_held(Held::one(cap));
    check_peak(cache, o, held);
    Some(Grant {
        // SAFETY: held addresses are buffers the arena carved: never null.
        ptr: unsafe { NonNull::new_unchecked(p.addr as *mut u8) },
        cap,
        block: p.block,
        fresh: false,
        warm: true,
    })
}

/// Makes this thread's cache for `core` its current one (made if need be,
/// with the arena's epoch honoured), so that [`note_lent`] finds it: for a
/// large request about to take the lock.
#[inline]
pub(crate) fn prepare(core: &ArenaCore) {
    let _ = ready_cache(core);
}

/// Under the arena's lock: grant `g` of large class `c` goes to this
/// thread. Its record's ready length is noted in this thread's current
/// cache (when it is `core`'s), so that its free may come back to the
/// class's slot (`large.rs`): own-class buffers (segment or own mapping),
/// and on the execution heap's thread a heap piece the heap would hand
/// out again as it is (`heap_slot.rs`).
pub(crate) fn note_lent(st: &ArenaState, core: &ArenaCore, c: Class, g: &Grant) {
    let Some(b) = st.table.get(g.block) else {
        return;
    };
    let addr = g.ptr.as_ptr() as usize;
    if matches!(b.place, Place::Heap(_)) {
        note_heap_lent(st, core, g.block, addr);
        return;
    }
    let Some(k) = large_index(c) else { return };
    if !matches!(b.place, Place::Segment(_) | Place::Own) || b.addr != addr || b.cap != capacity(c)
    {
        return;
    }
    let Some(cache) = fast_cache(core) else {
        return;
    };
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    if let Some(l) = o.large.get_mut(k) {
        l.lend(Piece {
            addr,
            block: g.block,
            ready: b.ready.min(b.cap),
        });
    }
}

/// [`note_lent`] for heap piece `block` at `addr`: lent to the heap's
/// thread's slot when the heap would serve its re-request with it.
#[inline(never)]
fn note_heap_lent(st: &ArenaState, core: &ArenaCore, block: u32, addr: usize) {
    if !st.heap_lendable(block) {
        return;
    }
    let (Some(b), Some(cache)) = (st.table.get(block), fast_cache(core)) else {
        return;
    };
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    o.heap.lend(
        Piece {
            addr,
            block,
            ready: b.cap,
        },
        st.heap.version,
    );
}

/// A heap piece for a request of `eff` bytes from the execution heap's
/// thread's slot (`heap_slot.rs`), when it holds one of that length and
/// the heap is as it was when the piece was lent; `None` (nothing
/// changed) otherwise. The caller is the heap's thread.
#[inline(always)]
pub(crate) fn allocate_heap_hit(core: &ArenaCore, eff: usize) -> Option<Grant> {
    let cache = fast_cache(core)?;
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    let len = super::heap::piece_len(eff);
    let p = o.heap.peek(len, core.heap_version.load(Relaxed))?;
    if !cache.counters.claim.withdraw(p.block) {
        // Claimed by another thread (a trim): settled under the lock.
        return None;
    }
    o.heap.taken();
    let held = cache.counters.sub_held(Held::one(len));
    check_peak(cache, o, held);
    Some(Grant {
        // SAFETY: lent addresses are pieces the heap carved: never null.
        ptr: unsafe { NonNull::new_unchecked(p.addr as *mut u8) },
        cap: len,
        block: p.block,
        fresh: false,
        warm: true,
    })
}

/// Keeps the heap piece at `addr` (block `block`, or `NIL` when the
/// freeing path knows only the address) in the execution heap's thread's
/// slot, when it was lent there and the heap has not changed since;
/// `false` (nothing kept) when the arena must take it. The caller is the
/// heap's thread.
#[inline]
pub(crate) fn free_heap_hit(core: &ArenaCore, addr: usize, block: u32) -> bool {
    let Some(cache) = fast_cache(core) else {
        return false;
    };
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    if !o
        .heap
        .returned(addr, block, block == NIL, core.heap_version.load(Relaxed))
    {
        return false;
    }
    cache
        .counters
        .note_cached_free(Held::one(o.heap.held_len()));
    cache
        .counters
        .claim
        .offer(o.heap.held_block().unwrap_or(block));
    true
}

/// Under the arena's lock, before a request of the execution heap's
/// thread that the heap serves: the piece its slot holds goes back to the
/// heap first, so the heap sees that free where it happened.
#[inline]
pub(crate) fn settle_heap(st: &mut ArenaState, core: &ArenaCore) {
    give_back_own(
        st,
        core,
        |o| o.heap.holds(),
        |st, cache, o| give_back_heap(st, core, cache, o, false),
    );
}

/// Under the arena's lock: this thread's cache for `core` (current or not,
/// found in its slot: the request may come through a path that did not
/// make it current), when it has one and `due` says it holds something to
/// give back, publishes its counters, gives back what `give` takes, and
/// stores its counters again.
fn give_back_own(
    st: &mut ArenaState,
    core: &ArenaCore,
    due: impl FnOnce(&Own) -> bool,
    give: impl FnOnce(&mut ArenaState, &Cache, &mut Own),
) {
    if cfg!(loom) {
        return;
    }
    let Some(p) = slotted(core, core.id) else {
        return;
    };
    // SAFETY: this thread's cache, found in its slot; no other borrow alive.
    let cache = unsafe { &*p };
    // SAFETY: as above.
    let o = unsafe { cache.own() };
    if !due(o) {
        return;
    }
    publish(st, cache, o);
    give(st, cache, o);
    cache.store_published(o);
}

/// Frees the piece the heap slot holds into the heap (with `trim`, the
/// heap's free memory is released after it, as the trim that asked for
/// this released it before) and forgets the lent one.
fn give_back_heap(st: &mut ArenaState, core: &ArenaCore, cache: &Cache, o: &mut Own, trim: bool) {
    o.heap.forget_lent();
    let Some(p) = o.heap.take_held() else {
        return;
    };
    cache.counters.sub_held(Held::one(p.ready));
    o.published -= p.ready;
    st.cached_bytes -= p.ready;
    if !cache.counters.claim.withdraw(p.block) {
        // Another thread claimed and freed it already.
        settle_claimed(st, cache, p.ready);
        return;
    }
    // Counted as a free by the cache already.
    st.cache_flushed += 1;
    let freed = st.free(p.block, p.addr, &core.os);
    debug_assert!(freed, "a held heap piece was not live");
    if trim {
        let (bytes, _) = st.heap_release(0, &core.os);
        st.stats.trimmed_bytes += bytes;
    }
}

/// Returns a buffer of large class `c` at `addr` (block `block`, or `NIL`
/// when the freeing path knows only the address) into this thread's slot
/// for the class, when the arena lent it to this thread and the slot is
/// empty; `false` (nothing kept) when the arena must take it.
#[inline(always)]
pub(crate) fn free_large_hit(core: &ArenaCore, c: Class, addr: usize, block: u32) -> bool {
    let Some(k) = large_index(c) else {
        return false;
    };
    let Some(cache) = fast_cache(core) else {
        return false;
    };
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    if free_large_in(core, cache, o, k, addr, block) {
        return true;
    }
    // Freed by layout, a buffer a request of this class borrowed from a
    // larger one (`allocate_stashed`, `ArenaState::take_larger_warm`) is
    // lent to that class's slot.
    match lent_above(o, k, addr, block) {
        Some(k) => free_large_in(core, cache, o, k, addr, block),
        None => false,
    }
}

/// [`free_large_hit`] into large slot `k`.
#[inline(always)]
fn free_large_in(
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    k: usize,
    addr: usize,
    block: u32,
) -> bool {
    let cap = capacity(LARGE_FIRST + k);
    let budget = cache.view.large_budget.load(Relaxed);
    if !has_room(o.large_bytes, o.big_bytes, cap, budget) {
        return free_large_making_room(core, cache, o, k, cap, addr, block);
    }
    if o.large
        .get(k)
        .is_some_and(|l| l.holds() && l.is_lent(addr, block, block == NIL))
    {
        if stash_refused(core, cache, o, k, addr, block) {
            return true;
        }
        give_back_older_large(core, cache, o, k);
    }
    put_large(cache, o, k, cap, addr, block, true)
}

/// The large slot above `k`, of a class up to twice its capacity, that
/// the buffer at `addr` (freed by layout: no block) is lent to.
#[cold]
#[inline(never)]
fn lent_above(o: &Own, k: usize, addr: usize, block: u32) -> Option<usize> {
    if block != NIL {
        return None;
    }
    borrowable(k, o.large.len())
        .skip(1)
        .find(|&j| o.large[j].is_lent(addr, NIL, true))
}

/// The large slot indexes from `first` (below `limit`) whose classes a
/// request of slot `first`'s class may borrow ([`may_borrow`]), `first`
/// itself first.
#[inline]
fn borrowable(first: usize, limit: usize) -> impl Iterator<Item = usize> {
    (first..limit).take_while(move |&k| may_borrow(LARGE_FIRST + first, LARGE_FIRST + k))
}

/// With two or more threads on the arena: the buffer at `addr` lent to
/// large slot `k`, which the slot cannot take now, into the arena's stash
/// (`stash.rs`) instead of the arena under its lock; its free counted
/// here, as a cached free is. `false` (nothing changed) on one thread,
/// for a buffer not lent here, a class the stash does not cover, or a
/// full stash.
#[cold]
#[inline(never)]
fn stash_refused(
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    k: usize,
    addr: usize,
    block: u32,
) -> bool {
    if k >= STASH_CLASSES || core.cache_threads.load(Relaxed) < 2 {
        return false;
    }
    let Some(l) = o.large.get_mut(k) else {
        return false;
    };
    let Some(p) = l.forget_lent_piece(addr, block, block == NIL) else {
        return false;
    };
    if !core.stash.put(k, p) {
        // Lent here still: the arena takes it, as before.
        l.lend(p);
        return false;
    }
    cache.counters.add_frees(1);
    true
}

/// A buffer ready for `size` bytes at `align` from the arena's stash, of
/// large class `c` or, as the arena's own borrowing does with two or more
/// threads (`ArenaState::take_larger_warm`), of a class up to twice its
/// capacity; lent to this thread's slot of its class (its free may come
/// back there). `None` (nothing changed) when the stash has none.
#[inline]
pub(crate) fn allocate_stashed(
    core: &ArenaCore,
    c: Class,
    size: usize,
    align: usize,
) -> Option<Grant> {
    let first = large_index(c)?;
    borrowable(first, core.stash.classes())
        .filter(|&k| core.stash.count(k) != 0)
        .filter(|&k| k == first || serves_alignment(LARGE_FIRST + k, align))
        .find_map(|k| take_stashed(core, k, size))
}

/// A buffer of large slot `k`'s class from the arena's stash, lent to
/// this thread's slot `k`.
#[cold]
#[inline(never)]
fn take_stashed(core: &ArenaCore, k: usize, size: usize) -> Option<Grant> {
    let cache = fast_cache(core)?;
    let p = core.stash.take(k, size)?;
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    if let Some(l) = o.large.get_mut(k) {
        l.lend(p);
    }
    Some(Grant {
        // SAFETY: stashed addresses are buffers the arena carved: never null.
        ptr: unsafe { NonNull::new_unchecked(p.addr as *mut u8) },
        cap: capacity(LARGE_FIRST + k),
        block: p.block,
        fresh: false,
        warm: true,
    })
}

/// Under the arena's lock: every buffer in the arena's stash back to the
/// arena, as if freed now (the stash keeps no free order); with `close`
/// (the last handle), the stash takes no more.
pub(crate) fn drain_stash(st: &mut ArenaState, core: &ArenaCore, close: bool) {
    let n = core.stash.drain(close, |_, p| return_stashed(st, core, p));
    settle_unstashed(st, core, n);
}

/// Under the arena's lock, for a request of large class `c` that found
/// nothing of its class or up to twice its size in the arena: the
/// stash's buffers of those classes back to the arena, so that it serves
/// the request with them before new memory (a stashed buffer whose ready
/// length fell short of the request, or one put there since this thread
/// looked). Returns whether there were any.
#[cold]
#[inline(never)]
pub(crate) fn unstash_for(st: &mut ArenaState, core: &ArenaCore, c: Class) -> bool {
    let Some(first) = large_index(c) else {
        return false;
    };
    let mut n = 0;
    for k in borrowable(first, core.stash.classes()) {
        while core.stash.count(k) != 0 {
            let Some(p) = core.stash.take(k, 0) else {
                break;
            };
            return_stashed(st, core, p);
            n += 1;
        }
    }
    settle_unstashed(st, core, n);
    n > 0
}

/// Under the arena's lock: a buffer out of the stash back to the arena,
/// as if freed now, its pages caught up to its class's largest request.
fn return_stashed(st: &mut ArenaState, core: &ArenaCore, p: Piece) {
    let at = st.clock << STAMP_SEQ_BITS;
    let i = st.free_cached(p.block, p.addr, at);
    debug_assert!(i != NIL, "a stashed buffer was not live");
    if i != NIL && st.behind_high(i) {
        st.catch_up(i, &core.os);
    }
}

/// After `n` buffers came back from the stash: each was counted as a
/// free by the cache that stashed it; the cap holds again.
fn settle_unstashed(st: &mut ArenaState, core: &ArenaCore, n: usize) {
    st.cache_flushed += n as u64;
    if n > 0 {
        st.hold_cap(&core.os);
    }
}

/// The bytes and buffers in the arena's stash: retained, though live to
/// the arena's state.
pub(crate) fn stash_totals(core: &ArenaCore) -> (usize, usize) {
    (0..core.stash.classes()).fold((0, 0), |(bytes, n), k| {
        let c = core.stash.count(k);
        (bytes + c * capacity(LARGE_FIRST + k), n + c)
    })
}

/// Under the arena's lock (taken here): the buffer large slot `k` holds
/// goes back to the arena at its own free stamp, so that the one being
/// freed, the class's newest, takes the slot. Otherwise the next request
/// of the class would take the slot's older buffer where the arena's order
/// says the newest, and a later cap would evict differently. The freed
/// buffer took the lock before too (the slot was full).
#[cold]
#[inline(never)]
fn give_back_older_large(core: &ArenaCore, cache: &Cache, o: &mut Own, k: usize) {
    locked(core, cache, o, |st, o| {
        give_back_large(st, core, cache, o, k, false)
    });
}

/// Runs `f` on the arena's state and this thread's cache under the lock,
/// in the frame every locked change of a cache keeps: the cache's held
/// bytes published first, its counters stored before the lock is let go
/// (the arena's peak check and `stats()` read them).
fn locked<R>(
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    f: impl FnOnce(&mut ArenaState, &mut Own) -> R,
) -> R {
    framed(core.lock(), cache, o, f)
}

/// [`locked`] for a refill (`ArenaCore::lock_for_refill`: the remote
/// stacks stay for their collectors).
fn locked_refill<R>(
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    f: impl FnOnce(&mut ArenaState, &mut Own) -> R,
) -> R {
    framed(core.lock_for_refill(), cache, o, f)
}

/// The frame of [`locked`] around `f`, on the state `st` holds locked.
#[inline(always)]
fn framed<R>(
    mut st: crate::arena::shared::StateGuard<'_>,
    cache: &Cache,
    o: &mut Own,
    f: impl FnOnce(&mut ArenaState, &mut Own) -> R,
) -> R {
    publish(&mut st, cache, o);
    let r = f(&mut st, o);
    cache.store_published(o);
    r
}

/// [`free_large_hit`] for a cache without room for the buffer: when it is
/// above the budget's classes and lent here, the one such buffer the cache
/// holds goes back to the arena (a cache keeps the one freed last), and
/// the slot takes it; otherwise the arena does (and the slot forgets it).
#[cold]
#[inline(never)]
fn free_large_making_room(
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    k: usize,
    cap: usize,
    addr: usize,
    block: u32,
) -> bool {
    let room = cap > BUDGET_MAX && o.large[k].is_lent(addr, block, block == NIL);
    if room {
        give_back_big(core, cache, o);
    } else if stash_refused(core, cache, o, k, addr, block) {
        return true;
    }
    put_large(cache, o, k, cap, addr, block, room)
}

/// The slot of class `LARGE_FIRST + k` takes the buffer at `addr` if it
/// was lent here and `room` allows (see `Large::returned`).
#[inline(always)]
fn put_large(
    cache: &Cache,
    o: &mut Own,
    k: usize,
    cap: usize,
    addr: usize,
    block: u32,
    room: bool,
) -> bool {
    let at = stamp(cache);
    let Some(l) = o.large.get_mut(k) else {
        return false;
    };
    if !l.returned(addr, block, block == NIL, room, at) {
        return false;
    }
    let held = l.held_block();
    *o.slot_bytes(cap) += cap;
    cache.counters.note_cached_free(Held::one(cap));
    if cap > BUDGET_MAX {
        // The one buffer above the budget: other threads may claim it.
        cache.counters.claim.offer(held.unwrap_or(block));
    }
    true
}

/// Returns a small buffer of class `c` into this thread's cache; `false`
/// when the shared path must take it.
#[inline(always)]
pub(crate) fn free(core: &ArenaCore, c: Class, addr: usize) -> bool {
    free_hit(core, c, addr) || free_slow(core, c, addr)
}

/// [`free`]'s hit: this thread's ready cache takes the buffer, or `false`
/// (nothing changed) and [`free_slow`] decides.
#[inline(always)]
pub(crate) fn free_hit(core: &ArenaCore, c: Class, addr: usize) -> bool {
    if let Some(cache) = fast_cache(core) {
        // SAFETY: this thread's cache; the borrow ends within this block.
        let o = unsafe { cache.own() };
        let stamp = stamp(cache);
        let Some(bin) = o.bins.get_mut(c) else {
            return false;
        };
        // Against a credit (not handed out by this cache: back to the
        // arena, see `Bin`) and while the bin has room.
        if bin.push_freed(Slot { addr, stamp }) {
            cache.counters.note_cached_free(bin.held_one());
            return true;
        }
    }
    false
}

/// The address of this thread's ready cache for `core`, if it has one
/// (tests: which memory a cache was made in).
#[cfg(test)]
pub(crate) fn cache_addr(core: &ArenaCore) -> Option<usize> {
    fast_cache(core).map(|c| c as *const Cache as usize)
}

/// Counts a moved reallocation of `bytes` bytes in this thread's ready
/// cache for `core`; `false` (nothing counted) when it has none, and the
/// arena counts it under its lock.
#[inline]
pub(crate) fn note_copy(core: &ArenaCore, bytes: usize) -> bool {
    match fast_cache(core) {
        Some(cache) => {
            cache.counters.add_copy(bytes as u64);
            true
        }
        None => false,
    }
}

/// A free's place in the arena's free order: the free count the arena
/// had at this thread's last unlock of it (the cache's [`View`]), then
/// this cache's own sequence. Exact on one thread, where every unlock is
/// this thread's; with several, a cached free orders after every free its
/// thread has seen. One load and one store: the clock part is set when
/// the view is, not at each free.
#[inline(always)]
fn stamp(cache: &Cache) -> u64 {
    // After 2^24 cached frees between two unlocks the sequence carries into
    // the clock part: those stamps then tie with or pass the arena's next
    // frees (order among them is approximate), and never go back.
    let s = cache.view.stamp.load(Relaxed) + 1;
    cache.view.stamp.store(s, Relaxed);
    s
}

/// This thread's usable cache for `core` (made and registered if need be),
/// with the epoch honoured; `None` when the arena must serve directly. The
/// caller holds a handle or a live buffer of `core`, so a flush here never
/// empties an orphaned arena.
#[inline]
fn ready_cache(core: &ArenaCore) -> Option<&Cache> {
    if cfg!(loom) {
        return None;
    }
    // The thread's current cache, ready under the arena's epoch, and no
    // arena orphaned since this thread last looked: nothing to find,
    // flush or reclaim (a refill or flush of the current cache, the common
    // slow path, starts here).
    if let Some(c) = fast_cache(core) {
        if FRONT
            .try_with(|f| RECLAIM.load(Relaxed) == f.reclaim_seen.get())
            .unwrap_or(false)
        {
            return Some(c);
        }
    }
    find_ready_cache(core)
}

/// [`ready_cache`] past the current cache: out of line, because making a
/// cache builds one on the stack (several pages, probed at every call),
/// which every refill, flush and remote free paid while this was inlined.
#[inline(never)]
fn find_ready_cache(core: &ArenaCore) -> Option<&Cache> {
    // The arena whose caching this thread last found off (and whose cache
    // it emptied then): while its epoch stays, no lookup, no lock.
    let key = (core as *const ArenaCore, core.epoch.load(Relaxed));
    if OFF.try_with(|o| o.get() == key).unwrap_or(false) {
        return None;
    }
    let _m = metadata::enter();
    let p = FRONT.try_with(|f| find_or_make(f, core)).ok()??;
    // SAFETY: the cache lives until this thread frees it (not before the
    // end of this call) or the arena frees it (only after this thread left).
    let cache = unsafe { &*p };
    // SAFETY: this thread's cache; no other borrow of `own` is alive.
    let o = unsafe { cache.own() };
    let e = core.epoch.load(Relaxed);
    if e == o.off_seen {
        // Caching is off and this cache was emptied under this epoch
        // already: nothing to flush, no lock to take.
        return None;
    }
    if e != cache.seen.get() {
        let due = locked(core, cache, o, |st, o| {
            // Re-read under the lock: the epoch only moves under it.
            let due = epoch::due(cache.seen.get(), core.epoch.load(Relaxed), st.trim_epoch);
            flush(st, core, cache, o, usize::MAX, due.release);
            due
        });
        if !due.caching {
            // Caching is off: serve directly (the flush above emptied the
            // cache; the buffer the caller holds keeps the arena alive).
            o.off_seen = due.seen;
            let _ = OFF.try_with(|o| o.set((core as *const ArenaCore, due.seen)));
            return None;
        }
        cache.seen.set(due.seen);
    }
    // The cache becomes the thread's current one: from here on it sees
    // this thread's unlocks (`note_unlock`); what happened before, it reads.
    cache.view.refresh(core);
    let _ = LAST.try_with(|l| l.set(p));
    Some(cache)
}

/// Gives back up to `n` of the oldest buffers of every bin (`usize::MAX`:
/// all) to the arena, under its lock; with `trim`, their pages go too.
fn flush(st: &mut ArenaState, core: &ArenaCore, cache: &Cache, o: &mut Own, n: usize, trim: bool) {
    for c in 0..SMALL_CLASSES {
        if o.bins[c].len() > 0 {
            give_back(st, core, cache, o, c, n, trim);
        }
    }
    flush_large(st, core, cache, o, trim);
}

/// Under the arena's lock, before a request of large class `c` that this
/// thread's slot could not serve (its buffer not materialized that far):
/// the slot's buffer goes back to the arena first, which materializes it
/// and serves the request with it, instead of carving another buffer
/// while this one sits in the slot.
#[inline]
pub(crate) fn settle_large(st: &mut ArenaState, core: &ArenaCore, c: Class) {
    let Some(k) = large_index(c) else { return };
    give_back_own(
        st,
        core,
        |o| o.large.get(k).is_some_and(Large::holds),
        |st, cache, o| give_back_large(st, core, cache, o, k, false),
    );
}

/// Under the arena's lock, when this thread becomes the execution heap's
/// (`heap_owner.rs`): every buffer its large slots and its heap slot hold
/// goes back to the arena, and the lent ones are forgotten. From now on
/// its large requests go to the heap, so nothing would take them.
pub(crate) fn settle_all_large(st: &mut ArenaState, core: &ArenaCore) {
    give_back_own(
        st,
        core,
        |_| true,
        |st, cache, o| flush_large(st, core, cache, o, false),
    );
}

/// Under the arena's lock (taken here): the buffer this thread's slots
/// hold above `BUDGET_MAX` goes back to the arena, to make room for the
/// one being freed.
#[cold]
#[inline(never)]
fn give_back_big(core: &ArenaCore, cache: &Cache, o: &mut Own) {
    let first_big = class_of_classed(BUDGET_MAX) + 1 - LARGE_FIRST;
    locked(core, cache, o, |st, o| {
        for k in first_big..LARGE_CLASSES {
            if o.large[k].holds() {
                give_back_large(st, core, cache, o, k, false);
            }
        }
    });
}

/// The cache's side of a claim (`claim.rs`), under the arena's lock: its
/// buffer of `cap` bytes, which another thread claimed and freed into the
/// arena, is settled (the caller has taken it off the cache's counters
/// as for any give-back).
fn settle_claimed(st: &mut ArenaState, cache: &Cache, cap: usize) {
    st.claimed_bytes -= cap;
    st.claimed_buffers -= 1;
    cache.counters.claim.settle();
}

/// Under the arena's lock: every buffer another thread's cache offers
/// (`claim.rs`: the execution heap's thread's kept piece, a buffer above
/// the large slots' budget) that `want` accepts is claimed and freed into
/// the arena, as a flush would free it: for `trim`, a new retention cap,
/// and a request whose class the arena has no buffer for. Returns how
/// many. A claimed buffer keeps the arena's body alive until its cache
/// settles (`claimed_buffers`).
pub(crate) fn claim_offers(
    st: &mut ArenaState,
    core: &ArenaCore,
    want: impl Fn(&super::blocks::Block) -> bool,
) -> usize {
    if cfg!(loom) {
        return 0;
    }
    let mut n = 0;
    for k in 0..st.caches.len() {
        let p = st.caches[k];
        // SAFETY: registered caches stay allocated until the arena frees
        // them (`sweep_caches`, `leave_caches`), both under this lock.
        let c = unsafe { p.as_ref() };
        let Some(b) = c.counters.claim.offered() else {
            continue;
        };
        let Some(blk) = st.table.get(b).copied() else {
            continue;
        };
        if blk.state != super::blocks::BlockState::Live || !want(&blk) || !c.counters.claim.claim(b)
        {
            continue;
        }
        // Counted as a free by the cache already; held in its counters
        // until it settles.
        st.cache_flushed += 1;
        st.claimed_bytes += blk.cap;
        st.claimed_buffers += 1;
        if matches!(blk.place, Place::Heap(_)) {
            let freed = st.free(b, blk.addr, &core.os);
            debug_assert!(freed, "a claimed heap piece was not live");
        } else {
            let i = st.free_cached(b, blk.addr, (st.clock + 1) << STAMP_SEQ_BITS);
            if i != NIL && st.behind_high(i) {
                st.catch_up(i, &core.os);
            }
        }
        n += 1;
    }
    n
}

/// Gives large slot `k`'s buffer back to the arena (see [`flush_large`]).
fn give_back_large(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    k: usize,
    trim: bool,
) {
    let Some((p, at)) = o.large.get_mut(k).and_then(Large::take_held) else {
        return;
    };
    let cap = capacity(LARGE_FIRST + k);
    cache.counters.sub_held(Held::one(cap));
    o.published -= cap;
    *o.slot_bytes(cap) -= cap;
    st.cached_bytes -= cap;
    if cap > BUDGET_MAX && !cache.counters.claim.withdraw(p.block) {
        // Another thread claimed and freed it already.
        settle_claimed(st, cache, cap);
        return;
    }
    // Counted as a free by the cache already.
    st.cache_flushed += 1;
    // In free order, as its user freed it.
    let i = st.free_cached(p.block, p.addr, at);
    debug_assert!(i != NIL, "a cached large buffer was not live");
    if i == NIL {
        return;
    }
    if st.behind_high(i) {
        st.catch_up(i, &core.os);
    }
    if trim {
        let bytes = st.evict(i, &core.os);
        st.stats.trimmed_bytes += bytes;
    }
    st.hold_cap(&core.os);
}

/// Frees every large slot's buffer into its class's free list at its free
/// stamp (materialized up to its class's high water, as the arena's own
/// free does) and forgets the lent buffers (a trim may release their
/// pages; their frees go to the arena from now on); with `trim`, the freed
/// buffers' pages go too.
fn flush_large(st: &mut ArenaState, core: &ArenaCore, cache: &Cache, o: &mut Own, trim: bool) {
    for k in 0..LARGE_CLASSES {
        if let Some(l) = o.large.get_mut(k) {
            l.forget_lent();
        }
        give_back_large(st, core, cache, o, k, trim);
    }
    give_back_heap(st, core, cache, o, trim);
}

/// Gives back the `n` oldest buffers of bin `c`: into the arena's depot
/// as they are (`depot.rs`) when it admits them and has room, else each
/// into its class's free list.
fn give_back(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    c: Class,
    n: usize,
    trim: bool,
) {
    let cap = capacity(c);
    let n = n.min(o.bins[c].len());
    let (moved, freed) = if !trim && st.depot.room(c) >= n && st.depot_admits(n * cap) {
        keep_in_depot(st, core, o, c, n)
    } else {
        free_to_lists(st, core, o, c, n, trim)
    };
    cache.counters.sub_held(Held::one(cap) * moved as u64);
    o.published -= moved * cap;
    // Buffers kept in the depot stay in `cached_bytes`.
    st.cached_bytes -= freed * cap;
    st.cache_flushed += freed as u64;
    // What the caches free counts against the cap like any free.
    if freed > 0 {
        st.hold_cap(&core.os);
    }
}

/// Moves the `n` oldest buffers of bin `c` into the depot (which has room
/// for them); returns how many left the bin and how many of those the
/// arena freed into the free lists instead (none while the room holds).
fn keep_in_depot(
    st: &mut ArenaState,
    core: &ArenaCore,
    o: &mut Own,
    c: Class,
    n: usize,
) -> (usize, usize) {
    // Kept as the bin had them, in one copy: a buffer freed by address
    // goes without its block (`NIL`), which only a settle, a pin or the
    // checker looks up (`tcache/depot.rs`). Its address is one the owner
    // table placed in a run of class `c` when it was freed; that it is a
    // buffer this arena handed out is the freeing caller's contract (the
    // bin hands out its newest entry next, checked or not).
    let mut moved = 0usize;
    if o.bins[c].give_oldest(n, |s| {
        moved = s.len();
        st.depot.push_all(c, s)
    }) {
        return (moved, 0);
    }
    // No room after all (the caller checked): freed as a flush into the
    // lists frees them (which refuses an address no live block starts at).
    free_to_lists(st, core, o, c, n, false)
}

/// Frees the `n` oldest buffers of bin `c` into their class's free list
/// (with `trim`, releasing their pages); returns how many left the bin and
/// how many the arena freed (all of them).
fn free_to_lists(
    st: &mut ArenaState,
    core: &ArenaCore,
    o: &mut Own,
    c: Class,
    n: usize,
    trim: bool,
) -> (usize, usize) {
    let mut moved = 0usize;
    o.bins[c].drain_oldest(n, |s| {
        moved += 1;
        let i = st.free_cached(NIL, s.addr, s.stamp);
        debug_assert!(i != NIL, "a cached buffer was not live");
        if trim && i != NIL {
            let bytes = st.evict(i, &core.os);
            st.stats.trimmed_bytes += bytes;
        }
    });
    (moved, moved)
}

#[cold]
#[inline(never)]
fn allocate_slow(core: &ArenaCore, c: Class) -> Option<Grant> {
    let cache = ready_cache(core)?;
    // SAFETY: this thread's cache; no other borrow of `own` is alive.
    let o = unsafe { cache.own() };
    if let Some(s) = o.bins[c].pop() {
        return Some(take(cache, o, s, c));
    }
    // Buffers other threads freed, kept here against this cache's credits
    // without the lock (`collect.rs`); the rest go back under it.
    let rest = if core.remotes.waiting(c) {
        collect::collect(core, cache, o, c)
    } else {
        0
    };
    if let Some(s) = o.bins[c].pop() {
        if rest != 0 {
            locked_refill(core, cache, o, |st, _| remote::absorb(st, core, rest));
        }
        return Some(take(cache, o, s, c));
    }
    // Refill with the class's own retained buffers, newest first: held by
    // the cache as they become live to the arena (one store of the
    // counters for the batch, before the lock is let go).
    locked_refill(core, cache, o, |st, o| {
        if rest != 0 {
            remote::absorb(st, core, rest);
        }
        refill(st, cache, o, c)
    });
    // Nothing of the class itself: the shared path serves it (a new buffer
    // of the class). Only the request's own class is reused, in the cache
    // as in the arena (`reuse.rs`), so that a repeated workload holds the
    // same buffers per class in every run and no warm run goes cold.
    let Some(s) = o.bins[c].pop() else {
        // The shared path serves this thread now: its free may be cached.
        o.bins[c].note_handed_out();
        return None;
    };
    Some(take(cache, o, s, c))
}

/// Under the lock: half a bin (the whole bin after a refill, see
/// [`Bin::move_batch`]) of class `c`'s retained buffers into its
/// bin, the most recently freed first, from the depot (no block record to
/// touch; they are in `cached_bytes` already) or the class's free list, so
/// that the cache hands out what the arena would: its newest.
fn refill(st: &mut ArenaState, cache: &Cache, o: &mut Own, c: Class) {
    let cap = capacity(c);
    let batch = o.bins[c].move_batch(Move::Refill);
    let bin = &mut o.bins[c];
    let mut got = 0;
    while got < batch {
        // The depot's newest buffers that are newer than the free list's
        // newest, in one move (the free list does not change meanwhile);
        // then, if the batch is not full, the list's newest, now the
        // newest of both.
        let l = st.list_newest_stamp(c);
        got += st.depot.take_newest(c, batch - got, l, |s| {
            let pushed = bin.push_all(s);
            debug_assert!(pushed, "an empty bin holds a batch");
        });
        if got == batch || l.is_none() {
            break;
        }
        let took = st.take_for_cache(c, 1, |addr, stamp| {
            let pushed = bin.push(Slot { addr, stamp });
            debug_assert!(pushed, "an empty bin holds a batch");
        });
        if took != 1 {
            break;
        }
        got += 1;
    }
    // Runs in order, the newest run first: the newest goes on top.
    bin.sort_by_stamp();
    cache.counters.add_held(Held::one(cap) * got as u64);
    o.published += got * cap;
}

/// [`free`] past the hit: the cache made ready (or refused), a full bin
/// flushed; `false` when the shared path must take the buffer.
#[cold]
#[inline(never)]
pub(crate) fn free_slow(core: &ArenaCore, c: Class, addr: usize) -> bool {
    let Some(cache) = ready_cache(core) else {
        return false;
    };
    // SAFETY: this thread's cache; no other borrow of `own` is alive.
    let o = unsafe { cache.own() };
    if !o.bins[c].take_credit() {
        let at = stamp(cache);
        return free_remote(core, c, &mut o.bins[c], &mut o.recent[c], addr, at);
    }
    let slot = Slot {
        addr,
        stamp: stamp(cache),
    };
    if !o.bins[c].push(slot) {
        let n = o.bins[c].move_batch(Move::Flush);
        locked(core, cache, o, |st, o| {
            give_back(st, core, cache, o, c, n, false)
        });
        let pushed = o.bins[c].push(slot);
        debug_assert!(pushed, "a flushed bin has room");
    }
    cache.counters.note_cached_free(o.bins[c].held_one());
    true
}

/// A free this cache has no credit for (it did not hand the buffer out):
/// onto the arena's remote stack of its class `c` (`remotes.rs`) for the
/// next thread whose bin of the class runs empty, or the next lock holder;
/// `false` when the arena's last handle has closed the stacks (the caller
/// frees through the lock). Nothing here touches the arena after the push:
/// it may be gone once the buffer is taken.
///
/// When the bin holds older buffers of the class, the freed one is the
/// class's newest and must be the next one handed out (the arena's order,
/// which a hit from the bin would break): it takes the place of the bin's
/// oldest, and that one goes onto the stack at its own stamp. The cache
/// holds as many buffers as before.
#[inline(never)]
fn free_remote(
    core: &ArenaCore,
    c: Class,
    bin: &mut Bin,
    recent: &mut hints::Recent,
    addr: usize,
    at: u64,
) -> bool {
    let new = Slot { addr, stamp: at };
    let out = bin.oldest().unwrap_or(new);
    // SAFETY: `out` is a buffer of class `c` that its user is freeing, or
    // one this cache holds free: ours to write.
    unsafe { recent.write_into(out.addr, c) };
    // SAFETY: as above (a small buffer holds at least 16 bytes, 16-aligned).
    let pushed = core.remotes.push(c, out.addr, |next| unsafe {
        remote::link::write(out.addr, next, out.stamp)
    });
    if pushed {
        recent.pushed(out.addr);
        // No change when the bin is empty (then `out` is the new buffer).
        bin.replace_oldest(new);
    }
    pushed
}

/// Whether every buffer of class `k` is aligned to `align`.
#[inline(always)]
pub(crate) fn serves(k: Class, align: usize) -> bool {
    align <= MIN_CAPACITY || capacity(k) & (align - 1) == 0
}

/// Finds this thread's cache for `core` in `f`, or makes and registers one.
fn find_or_make(f: &Front, core: &ArenaCore) -> Option<*mut Cache> {
    reclaim_orphans(f);
    let me = core as *const ArenaCore;
    if let Some(k) = f.keys.iter().position(|key| key.get() == me) {
        let p = f.slots[k].get();
        // SAFETY: slots hold caches this thread owns.
        if let Some(c) = unsafe { p.as_ref() } {
            if !c.link.arena_left() && is_for(c, me, core.id) {
                return Some(p);
            }
        }
    }
    let mut free_slot = None;
    for (k, s) in f.slots.iter().enumerate() {
        let p = s.get();
        // SAFETY: slots hold caches this thread owns.
        let Some(c) = (unsafe { p.as_ref() }) else {
            free_slot.get_or_insert(k);
            continue;
        };
        if c.link.arena_left() {
            s.set(null_mut());
            forget_last(p);
            if c.link.thread_leaves() {
                // SAFETY: both sides left; the slot no longer names it; `p`
                // is the pointer `Box::into_raw` gave.
                unsafe { Cache::free(NonNull::new_unchecked(p)) };
            }
            free_slot.get_or_insert(k);
            continue;
        }
        if is_for(c, core, core.id) {
            return Some(p);
        }
    }
    let k = free_slot?;
    let cache;
    {
        let mut st = core.lock();
        // Caches of threads that left first: their memory may serve here.
        st.sweep_caches();
        let spare = st.spares.take();
        cache = Box::into_raw(Cache::new(core, st.owner.0.cast_const().cast(), spare)?);
        if st.caches.try_reserve(1).is_err() {
            drop(st);
            // SAFETY: never shared.
            unsafe { Cache::free(NonNull::new_unchecked(cache)) };
            return None;
        }
        // SAFETY: `cache` is non-null (from Box::into_raw).
        st.caches.push(unsafe { NonNull::new_unchecked(cache) });
    }
    f.slots[k].set(cache);
    f.keys[k].set(me);
    Some(cache)
}

fn forget_last(p: *mut Cache) {
    let _ = LAST.try_with(|l| {
        if l.get() == p {
            l.set(NO_CACHE_PTR)
        }
    });
}

/// Flushes this thread's non-empty caches of orphaned arenas (their
/// buffers keep those arenas alive), when some arena was orphaned since.
fn reclaim_orphans(f: &Front) {
    let r = RECLAIM.load(Relaxed);
    if r == f.reclaim_seen.get() {
        return;
    }
    f.reclaim_seen.set(r);
    for s in &f.slots {
        let p = s.get();
        // SAFETY: slots hold caches this thread owns.
        let Some(c) = (unsafe { p.as_ref() }) else {
            continue;
        };
        if c.counters.held().buffers() == 0 {
            continue;
        }
        // SAFETY: a non-empty cache's buffers are live in its arena, so
        // the body is alive.
        let core = unsafe { &*c.core };
        if core.epoch.load(Relaxed) & ORPHANED != 0 {
            s.set(null_mut());
            forget_last(p);
            // SAFETY: this thread's cache, now out of its slot; `p` is the
            // pointer `Box::into_raw` gave.
            unsafe { leave(NonNull::new_unchecked(p)) };
        }
    }
}

/// This thread lets go of cache `c`: a non-empty cache is flushed and
/// unregistered under its arena's lock (its buffers keep the arena alive)
/// and freed; an empty one is left to the arena unless the arena left first.
///
/// # Safety
/// `c` is a cache this thread made, out of every slot, used by nothing else
/// on this thread afterwards.
unsafe fn leave(c: NonNull<Cache>) {
    // SAFETY: the caller's contract.
    let cache = unsafe { c.as_ref() };
    if cache.counters.held().buffers() == 0 {
        if cache.link.thread_leaves() {
            // SAFETY: both sides left.
            unsafe { Cache::free(c) };
        }
        return;
    }
    // SAFETY: cached buffers are live in the arena: its body is alive.
    let this = unsafe { NonNull::new_unchecked(cache.core as *mut ArenaCore) };
    // SAFETY: the body is alive (above); `this` is not used after. `c`
    // goes to the arena's spares only once it is unregistered and this
    // thread no longer uses it. The closure takes `c` as a pointer and
    // makes its references inside: a body destroyed on the way out frees
    // its spares, this one included, while the closure (an argument of
    // `locked_last_out`) is still alive, so it must hold no reference
    // into the cache.
    let kept = unsafe {
        ArenaCore::locked_last_out(this, move |st, core| {
            // SAFETY (both): the caller's contract; this thread's cache,
            // used only within this call.
            let cache = c.as_ref();
            let o = cache.own();
            publish(st, cache, o);
            let trim =
                epoch::due(cache.seen.get(), core.epoch.load(Relaxed), st.trim_epoch).release;
            flush(st, core, cache, o, usize::MAX, trim);
            st.cached_bytes -= o.published;
            st.absorb_counts(&cache.counters);
            st.caches.retain(|&p| p != c);
            // Kept (`Spares::keep`'s contract): unregistered, and this
            // thread is done with it (the caller's contract), so from here
            // on it is the arena's to reuse. The enclosing `unsafe` covers
            // the call.
            st.spares.keep(c)
        })
    };
    if !kept {
        // SAFETY: unregistered, so the arena no longer refers to it.
        unsafe { Cache::free(c) };
    }
}

/// Marks that an arena was orphaned with buffers possibly in caches.
pub(crate) fn note_orphaned() {
    RECLAIM.fetch_add(1, Relaxed);
}

/// Whether `c` is the cache for the arena body `core` with id `id` (not
/// one for an earlier body at the same address).
fn is_for(c: &Cache, core: *const ArenaCore, id: u64) -> bool {
    core::ptr::eq(c.core, core) && c.id == id
}

/// This thread's cache for the arena body `core` (id `id`) from its slots,
/// if it has one. Called with that arena's lock held.
fn slotted(core: *const ArenaCore, id: u64) -> Option<*mut Cache> {
    // The first touch of the thread-local may register its destructor,
    // which may allocate: never through this arena, whose lock is held.
    let _m = metadata::enter();
    FRONT
        .try_with(|f| {
            f.slots.iter().map(Cell::get).find(|&p| {
                // SAFETY: slots hold caches this thread owns.
                unsafe { p.as_ref() }.is_some_and(|c| is_for(c, core, id))
            })
        })
        .ok()
        .flatten()
}

/// Gives back this thread's cache for `core` now (for `trim`, `reset_peak`
/// and the last handle's drop), under the lock the caller holds.
pub(crate) fn flush_own(st: &mut ArenaState, core: &ArenaCore) {
    give_back_own(
        st,
        core,
        |_| true,
        |st, cache, o| flush(st, core, cache, o, usize::MAX, false),
    );
}

/// This thread's cache for the arena whose body is `core`: the bytes it
/// last published into the arena's `cached_bytes` and the bytes it holds
/// now; `(0, 0)` when it has none. For the arena's peak check, under the
/// arena's lock: on one thread this is every cache, so the peak stays
/// exact without a pass over other threads' caches.
pub(crate) fn own_unpublished(core: *const ArenaCore) -> (usize, usize) {
    if cfg!(loom) {
        return (0, 0);
    }
    // SAFETY: the caller holds the body's lock, so the body is alive.
    let id = unsafe { (*core).id };
    let current = last()
        .filter(|c| is_for(c, core, id))
        .map(|c| (c as *const Cache).cast_mut());
    // SAFETY: LAST and the slots name caches this thread owns and has not
    // freed.
    let found = current
        .or_else(|| slotted(core, id))
        .map(|p| unsafe { &*p });
    found.map_or((0, 0), |c| {
        (
            c.counters.published.load(Relaxed),
            c.counters.held().bytes(),
        )
    })
}

/// The sum of the registered caches' counters (under the arena lock).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Totals {
    pub held_bytes: usize,
    pub held_buffers: usize,
    pub frees: u64,
    pub copies: u64,
    pub copied_bytes: u64,
    pub peak: usize,
    /// Frees the arena performed for flushes (counted by the caches already).
    pub flushed: u64,
    /// Held heap pieces whose free extent above has materialized bytes:
    /// each counts with it as one retained extent, as when parked.
    pub merged_rests: usize,
}

impl ArenaState {
    /// A departing cache's frees and moved reallocations, into the
    /// arena's own counts (`absorbed_frees`, `stats.copies`,
    /// `stats.copied_bytes`).
    fn absorb_counts(&mut self, c: &Counters) {
        self.absorbed_frees += c.frees.load(Relaxed);
        self.stats.copies += c.copies.load(Relaxed);
        self.stats.copied_bytes += c.copied_bytes.load(Relaxed) as usize;
    }

    /// Frees the caches whose threads left (absorbing their counts).
    pub(crate) fn sweep_caches(&mut self) {
        let mut k = 0;
        while k < self.caches.len() {
            let p = self.caches[k];
            // SAFETY: registered caches stay allocated until the arena
            // frees them here or in `leave_caches`, or their thread
            // unregisters them under this lock.
            let c = unsafe { p.as_ref() };
            if c.link.thread_left() {
                // SAFETY: the thread left (acquire): the arena owns the cache.
                let published = unsafe { (*c.own.get()).published };
                self.cached_bytes -= published;
                self.absorb_counts(&c.counters);
                self.peak_absorbed = self.peak_absorbed.max(c.counters.peak.load(Relaxed));
                self.caches.swap_remove(k);
                if c.link.arena_leaves() {
                    // SAFETY: both sides left and it is unregistered: kept
                    // for the next thread, else freed.
                    if !unsafe { self.spares.keep(p) } {
                        // SAFETY: as above.
                        unsafe { Cache::free(p) };
                    }
                }
            } else {
                k += 1;
            }
        }
    }

    /// The registered caches' counters, summed (sweeping departed ones).
    pub(crate) fn cache_totals(&mut self) -> Totals {
        self.sweep_caches();
        let mut t = Totals::default();
        for p in self.caches.iter() {
            // SAFETY: see `sweep_caches`.
            let c = unsafe { p.as_ref() };
            let h = c.counters.held();
            t.held_bytes += h.bytes();
            t.held_buffers += h.buffers();
            if let Some(b) = c.counters.claim.offered() {
                t.merged_rests += usize::from(self.heap_rest_retained(b));
            }
            t.frees += c.counters.frees.load(Relaxed);
            t.copies += c.counters.copies.load(Relaxed);
            t.copied_bytes += c.counters.copied_bytes.load(Relaxed);
            t.peak = t.peak.max(c.counters.peak.load(Relaxed));
        }
        // The depot's buffers are retained like cached ones.
        t.held_bytes += self.depot.bytes();
        t.held_buffers += self.depot.buffers();
        t.peak = t.peak.max(self.peak_absorbed);
        t.frees += self.absorbed_frees;
        // Claimed buffers are the arena's again, still in their caches'
        // counters until those settle.
        t.held_bytes -= self.claimed_bytes;
        t.held_buffers -= self.claimed_buffers;
        t.flushed = self.cache_flushed;
        t
    }

    /// Restarts the caches' peak tracking: each cache's peak to 0 and its
    /// floor to the maximum, so its next hand-out checks again. A racing
    /// hit may still store its own candidate (or a floor computed from the
    /// old peak, until that thread's next unlock) afterwards.
    pub(crate) fn reset_cache_peaks(&mut self) {
        self.peak_absorbed = 0;
        for p in self.caches.iter() {
            // SAFETY: see `sweep_caches`.
            let c = unsafe { p.as_ref() };
            c.counters.peak.store(0, Relaxed);
            c.view.floor.store(u64::MAX, Relaxed);
        }
    }

    /// The arena goes: every cache is let go (each is empty: cached
    /// buffers count as live). Those whose threads left are freed.
    pub(crate) fn leave_caches(&mut self) {
        for p in self.caches.drain(..) {
            // SAFETY: see `sweep_caches`.
            if unsafe { p.as_ref() }.link.arena_leaves() {
                // SAFETY: both sides left.
                unsafe { Cache::free(p) };
            }
        }
    }
}
