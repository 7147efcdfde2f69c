//! A thread's caches (`Front`, one slot per arena it caches for) and how
//! an operation finds its own: the fast path's one thread-local load and
//! epoch compare (`fast_cache`), and past it a cache made ready, found or
//! made and registered, with the arena's epoch honoured (`ready_cache`).

use super::cache::{locked, publish, Cache, Own};
use super::large_path::flush_large;
use super::leave::{forget_last, leave, reclaim_orphans};
use super::small_path::{give_back, give_back_spill};
use super::{epoch, large, SLOTS, SMALL_CLASSES};
use crate::arena::metadata;
use crate::arena::shared::ArenaCore;
use crate::arena::state::ArenaState;
use core::cell::Cell;
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// Bumped when an arena is orphaned while buffers of it may sit in caches:
/// threads then flush such caches at their next slow path.
pub(super) static RECLAIM: AtomicU64 = AtomicU64::new(0);

/// The thread's caches (owned; flushed when the thread exits).
pub(super) struct Front {
    pub(super) slots: [Cell<*mut Cache>; SLOTS],
    /// The arena body each slot's cache was made for, as a hint: a switch
    /// between arenas finds its slot here, in the thread's own lines,
    /// instead of reading every cache's link and owner on the way (the
    /// cache found is still checked, and a stale hint falls back to the
    /// full scan).
    pub(super) keys: [Cell<*const ArenaCore>; SLOTS],
    pub(super) reclaim_seen: Cell<u64>,
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
pub(super) static NEVER: u64 = u64::MAX;

/// [`NEVER`] as [`LAST`] holds it. Never dereferenced as a cache: only its
/// first word is read, and [`last`] filters it out.
pub(super) const NO_CACHE_PTR: *mut Cache = (&raw const NEVER).cast_mut().cast::<Cache>();

thread_local! {
    /// The cache used last, or [`NO_CACHE_PTR`]: the fast path's one
    /// thread-local load. Reset before the cache it points to is freed. No
    /// destructor, so it still reads during thread exit (where the epoch
    /// check of a left cache fails: [`Front`]'s drop reset it first).
    pub(super) static LAST: Cell<*mut Cache> = const { Cell::new(NO_CACHE_PTR) };
    /// The arena (and its epoch) whose caching this thread found off and
    /// whose cache it emptied: `ready_cache` answers at once for it. An
    /// epoch names one arena (its id is in the high bits), so a body made
    /// later at the same address never matches.
    pub(super) static OFF: Cell<(*const ArenaCore, u64)> =
        const { Cell::new((core::ptr::null(), 0)) };
    pub(super) static FRONT: Front = const {
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
pub(super) fn fast_cache(core: &ArenaCore) -> Option<&Cache> {
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
pub(super) fn last() -> Option<&'static Cache> {
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
/// is `core`'s, takes them into its [`View`](super::cache::View).
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

/// Makes this thread's cache for `core` its current one (made if need be,
/// with the arena's epoch honoured), so that
/// [`note_lent`](super::large_path::note_lent) finds it: for a large
/// request about to take the lock.
#[inline]
pub(crate) fn prepare(core: &ArenaCore) {
    let _ = ready_cache(core);
}

/// Under the arena's lock: this thread's cache for `core` (current or not,
/// found in its slot: the request may come through a path that did not
/// make it current), when it has one and `due` says it holds something to
/// give back, publishes its counters, gives back what `give` takes, and
/// stores its counters again.
pub(super) fn give_back_own(
    st: &mut ArenaState,
    core: &ArenaCore,
    due: impl FnOnce(&Own) -> bool,
    give: impl FnOnce(&mut ArenaState, &Cache, &mut Own),
) {
    if cfg!(loom) {
        return;
    }
    let Some(cache) = own_cache(core) else {
        return;
    };
    // SAFETY: this thread's cache; no other borrow of it is alive.
    let o = unsafe { cache.own() };
    if !due(o) {
        return;
    }
    publish(st, cache, o);
    give(st, cache, o);
    cache.store_published(o);
}

/// This thread's cache for the arena body `core`, current or in its slot.
/// The current one first: the locked paths that give a cache's holdings
/// back (a heap request's [`settle_heap`](super::heap_path::settle_heap)
/// on every allocation of the execution heap's thread) mostly run right
/// after [`prepare`] made it current, and the slots' scan under the
/// metadata guard was 41 instructions of such an allocation's 690.
#[inline]
fn own_cache(core: &ArenaCore) -> Option<&Cache> {
    let id = core.id;
    if let Some(c) = last().filter(|c| is_for(c, core, id)) {
        return Some(c);
    }
    // SAFETY: the slots name caches this thread owns and has not freed.
    slotted(core, id).map(|p| unsafe { &*p })
}

/// The address of this thread's ready cache for `core`, if it has one
/// (tests: which memory a cache was made in).
#[cfg(all(test, not(loom)))]
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

/// This thread's usable cache for `core` (made and registered if need be),
/// with the epoch honoured; `None` when the arena must serve directly. The
/// caller holds a handle or a live buffer of `core`, so a flush here never
/// empties an orphaned arena.
#[inline]
pub(super) fn ready_cache(core: &ArenaCore) -> Option<&Cache> {
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
            // Its spills' thieves read it (under this lock).
            cache.counters.seen.store(due.seen, Relaxed);
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

/// Gives back every spill's buffers and up to `n` of the oldest buffers of
/// every bin (`usize::MAX`: all) to the arena, under its lock; with
/// `trim`, their pages go too.
pub(super) fn flush(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    n: usize,
    trim: bool,
) {
    for c in 0..SMALL_CLASSES {
        // The spill's buffers are older than the bin's: first.
        // SAFETY: this thread's cache (or one the arena owns), under the
        // arena's lock; no other borrow of its spills is alive.
        if unsafe { cache.spill(c).len() } > 0 {
            give_back_spill(st, core, cache, o, c, trim);
        }
        if o.bins[c].len() > 0 {
            give_back(st, core, cache, o, c, n, trim);
        }
    }
    flush_large(st, core, cache, o, trim);
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
    let core = unsafe { &*core };
    own_cache(core).map_or((0, 0), |c| {
        (
            c.counters.published.load(Relaxed),
            c.counters.held().bytes(),
        )
    })
}
