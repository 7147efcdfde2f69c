//! One thread's cache for one arena (`Cache`): the counters other threads
//! read (`Counters`, `Held`), what only its thread touches (`Own`), the
//! arena as its thread last saw it (`View`), and the frame every locked
//! change of a cache keeps (publish, change, store). Also the free stamp
//! and the peak check a hand-out makes.

use super::bin::Bin;
use super::claim::Claim;
use super::heap_slot::HeapSlot;
use super::large::{Large, BUDGET_MAX, LARGE_CLASSES};
use super::link::Link;
use super::spill::Spill;
use super::spill_path::settle_stolen;
use super::steal::Guard;
use super::{hints, SMALL_CLASSES};
use crate::arena::metadata;
use crate::arena::release::STAMP_SEQ_BITS;
use crate::arena::shared::ArenaCore;
use crate::arena::state::ArenaState;
use core::cell::{Cell, UnsafeCell};
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicU64, AtomicUsize};

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
    /// cache ([`own_unpublished`](super::front::own_unpublished)).
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
    /// Buffers (and their bytes, as [`Held`]) other threads took from this
    /// cache's spills (`steal.rs`) and this thread has not yet taken off
    /// its held word: written only under the arena's lock, settled at the
    /// cache's next locked frame ([`publish`]).
    pub stolen: AtomicU64,
    /// The arena epoch this cache has honoured (`Cache::seen`), stored
    /// under the lock when it honours one: a thief (`steal.rs`) leaves the
    /// spills of a cache that has yet to honour the current epoch alone,
    /// since its thread gives them back (released, after a trim) at its
    /// next operation.
    pub seen: AtomicU64,
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
    pub(super) fn add_held(&self, d: u64) -> u64 {
        let h = self.held.load(Relaxed) + d;
        self.held.store(h, Relaxed);
        h
    }

    /// Takes `d` ([`Held`] deltas) from the held word; its new value.
    #[inline(always)]
    pub(super) fn sub_held(&self, d: u64) -> u64 {
        let h = self.held.load(Relaxed) - d;
        self.held.store(h, Relaxed);
        h
    }

    /// Counts `n` more frees this cache took.
    #[inline(always)]
    pub(super) fn add_frees(&self, n: u64) {
        self.frees.store(self.frees.load(Relaxed) + n, Relaxed);
    }

    /// Counts a moved reallocation of `bytes` bytes.
    #[inline(always)]
    pub(super) fn add_copy(&self, bytes: u64) {
        self.copies.store(self.copies.load(Relaxed) + 1, Relaxed);
        self.copied_bytes
            .store(self.copied_bytes.load(Relaxed) + bytes, Relaxed);
    }

    /// A buffer of `one` ([`Held::one`]) freed into the cache.
    #[inline(always)]
    pub(super) fn note_cached_free(&self, one: u64) {
        self.add_held(one);
        self.add_frees(1);
    }
}

/// A cache's held bytes (high half) and buffers (low half) in one word: a
/// cache holds at most `SMALL_BINS_MAX` (13.4 MiB) in its bins and
/// `SPILLS_MAX` (4.4 MiB) in their spills, in at most
/// `SMALL_CLASSES * BIN_SLOTS` and `SMALL_CLASSES * SPILL_SLOTS_MAX`
/// buffers, and `LARGE_BYTES` (4 MiB) in its large slots, so each half has
/// room to spare, and a hit updates both with one add and one store.
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
pub(super) struct Own {
    /// An epoch with caching off that this cache has honoured (flushed
    /// under): while the arena's epoch stays there, the cache is empty and
    /// every operation goes straight to the arena.
    pub(super) off_seen: u64,
    /// Held bytes as last added to the arena's `cached_bytes`.
    pub(super) published: usize,
    pub(super) bins: [Bin; SMALL_CLASSES],
    /// Per small class, a bit set once its spill has room
    /// ([`Cache::spills`]): the classes whose bins may spill.
    pub(super) spill_rooms: u64,
    /// The large classes' slots (`large.rs`).
    pub(super) large: [Large; LARGE_CLASSES],
    /// Bytes held in `large`'s classes up to `BUDGET_MAX`.
    pub(super) large_bytes: usize,
    /// Bytes held in `large`'s classes above `BUDGET_MAX` (one buffer at most).
    pub(super) big_bytes: usize,
    /// The execution heap's thread's slot (`heap_slot.rs`).
    pub(super) heap: HeapSlot,
    /// Per small class, this cache's last pushes onto the arena's remote
    /// stack: the prefetch hints its next push carries (`hints.rs`).
    pub(super) recent: [hints::Recent; SMALL_CLASSES],
}

impl Own {
    /// The byte count of the large slots a buffer of `cap` bytes is held in.
    #[inline(always)]
    pub(super) fn slot_bytes(&mut self, cap: usize) -> &mut usize {
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
/// while it is ([`note_unlock`](super::front::note_unlock)). On one
/// thread that is every change, so a hit reads its own line instead of one
/// the lock holder writes at every unlock. Atomics written by the cache's
/// thread only (plain moves): they are written while `Own` may be borrowed.
#[derive(Debug, Default)]
pub(super) struct View {
    pub(super) live: AtomicUsize,
    /// The last free stamp this cache gave (see [`stamp`]): the arena's
    /// free count (its clock) as last seen, shifted by [`STAMP_SEQ_BITS`],
    /// plus this cache's sequence. A cached free adds one.
    pub(super) stamp: AtomicU64,
    /// A held word ([`Held`]) below which this cache's hand-outs may take
    /// the live bytes past the peak: a hit compares its held word with it
    /// and only then computes the live bytes ([`note_peak`]). Set to the
    /// maximum whenever what it was computed from may have changed (the
    /// view, the published bytes, a peak reset), so that the next hit
    /// computes it again; lowered only by [`note_peak`], exactly.
    pub(super) floor: AtomicU64,
    /// This cache's budget for its large slots up to [`BUDGET_MAX`]
    /// ([`large::budget_for`](super::large::budget_for) the threads with
    /// caches on the arena, as this thread last saw them under the lock:
    /// [`note_unlock`](super::front::note_unlock)).
    pub(super) large_budget: AtomicUsize,
}

impl View {
    pub(super) fn refresh(&self, core: &ArenaCore) {
        self.see(
            core.live_mirror.load(Relaxed),
            core.clock_mirror.load(Relaxed),
        );
    }

    /// Takes the arena's `live` bytes and free count `clock` as seen now.
    /// The sequence goes on from where it was (so this cache's stamps never
    /// go back), under the new clock.
    #[inline(always)]
    pub(super) fn see(&self, live: usize, clock: u64) {
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
    /// First, so that [`fast_cache`](super::front::fast_cache) reads it
    /// through [`LAST`](super::front::LAST) whether that points to a cache
    /// or to [`NEVER`](super::front::NEVER). Only the cache's thread
    /// touches it.
    pub(super) seen: Cell<u64>,
    /// The arena body's original pointer (from `ArenaState::owner`).
    pub(super) core: *const ArenaCore,
    /// The arena's id (`ArenaCore::id`).
    pub(super) id: u64,
    pub(crate) link: Link,
    pub(crate) counters: Counters,
    pub(super) view: View,
    pub(super) own: UnsafeCell<Own>,
    /// Per small class, held by whoever touches its spill without the
    /// arena's lock: the cache's thread, or another thread taking it
    /// (`steal.rs`). One a class, so that a thread at its spill of one
    /// class never keeps a thief from another.
    pub(super) spill_guards: [Guard; SMALL_CLASSES],
    /// Per small class, what its full bin set aside (`spill.rs`): held,
    /// like the bin's own buffers. Outside `own`: another thread may take
    /// them, under the class's guard and the arena's lock
    /// ([`Cache::spill`]).
    pub(super) spills: [UnsafeCell<Spill>; SMALL_CLASSES],
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
    pub(super) unsafe fn own(&self) -> &mut Own {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.own.get() }
    }

    /// Class `c`'s spill.
    ///
    /// # Safety
    /// No other borrow of it is alive, and the caller holds the class's
    /// [guard](Cache::spill_guards), or is the cache's thread and holds
    /// the arena's lock (a thief holds both), or has the cache to itself
    /// (making or freeing it).
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(super) unsafe fn spill(&self, c: usize) -> &mut Spill {
        // SAFETY: the caller's contract (`c` is a small class: in bounds).
        unsafe { &mut *self.spills[c].get() }
    }

    /// Stores the published bytes, after a slow path changed them under
    /// the lock (before it lets go).
    pub(super) fn store_published(&self, o: &Own) {
        self.counters.published.store(o.published, Relaxed);
    }

    /// Frees a cache whose thread and arena have both let go.
    ///
    /// # Safety
    /// `c` came from `Box::into_raw` and nothing refers to it any more.
    pub(crate) unsafe fn free(c: NonNull<Cache>) {
        let _m = metadata::enter();
        // SAFETY: the caller's contract.
        let mut b = unsafe { Box::from_raw(c.as_ptr()) };
        // The spills' room is the one thing a cache owns beside its memory.
        for s in b.spills.iter_mut() {
            s.get_mut().free_room();
        }
        drop(b);
    }
}

/// Publishes this cache's held bytes into the arena's total (under its
/// lock), so the arena's peak tracking sees them as not live, once what
/// other threads took from its spills is off its held word. The stored
/// copy follows at once: the arena's peak check under this lock reads it
/// (`own_unpublished`), and a cold request served under a refill's lock
/// (`small_path.rs`) checks the peak before the frame's closing store.
pub(super) fn publish(st: &mut ArenaState, cache: &Cache, o: &mut Own) {
    settle_stolen(st, cache);
    let held = cache.counters.held().bytes();
    st.cached_bytes -= o.published;
    st.cached_bytes += held;
    o.published = held;
    cache.store_published(o);
}

/// A buffer left this cache for its user, whose held word is now `held`:
/// when it fell below the view's floor, the live bytes may be a new peak
/// ([`note_peak`]).
#[inline(always)]
pub(super) fn check_peak(cache: &Cache, o: &Own, held: u64) {
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

/// Runs `f` on the arena's state and this thread's cache under the lock,
/// in the frame every locked change of a cache keeps: the cache's held
/// bytes published first, its counters stored before the lock is let go
/// (the arena's peak check and `stats()` read them).
pub(super) fn locked<R>(
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    f: impl FnOnce(&mut ArenaState, &mut Own) -> R,
) -> R {
    framed(core.lock(), cache, o, f)
}

/// [`locked`] for a refill (`ArenaCore::lock_for_refill`: the remote
/// stacks stay for their collectors).
pub(super) fn locked_refill<R>(
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

/// A free's place in the arena's free order: the free count the arena
/// had at this thread's last unlock of it (the cache's [`View`]), then
/// this cache's own sequence. Exact on one thread, where every unlock is
/// this thread's; with several, a cached free orders after every free its
/// thread has seen. One load and one store: the clock part is set when
/// the view is, not at each free.
#[inline(always)]
pub(super) fn stamp(cache: &Cache) -> u64 {
    // After 2^24 cached frees between two unlocks the sequence carries into
    // the clock part: those stamps then tie with or pass the arena's next
    // frees (order among them is approximate), and never go back.
    let s = cache.view.stamp.load(Relaxed) + 1;
    cache.view.stamp.store(s, Relaxed);
    s
}
