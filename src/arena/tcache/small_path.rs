//! The small classes' path through a cache: the hit (a bin's pop or push),
//! and past it a refill from the arena's depot or free lists, a flush of a
//! full bin, and a free without credit onto the arena's remote stack.

use super::bin::{Bin, Move, Slot};
use super::cache::{check_peak, locked, locked_refill, stamp, Cache, Held, Own};
use super::depot::Pusher;
use super::front::{fast_cache, ready_cache};
use super::spill_path::{open_room, refill_from_spill, spill, steal_spills};
use super::{collect, hints, remote};
use crate::arena::blocks::NIL;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use crate::arena::warm::InsertRun;
use crate::size_class::{capacity, Class};
use core::ptr::NonNull;

/// A buffer of small class `c` (`eff` bytes at `align`) from this
/// thread's cache, or, when a refill finds nothing of the class, a new
/// one carved under the refill's lock: its address, block, capacity and
/// whether it is fresh and warm (as [`Grant`]'s fields), or address 0 when
/// the shared path must serve it. The caller builds its grant in
/// registers: an `Option<Grant>` repacked into a `Result` went through the
/// stack with mismatched store and load widths, a stall that cost more
/// than the whole hit.
#[inline(always)]
pub(crate) fn allocate_parts(
    core: &ArenaCore,
    c: Class,
    eff: usize,
    align: usize,
) -> (usize, u32, usize, bool, bool) {
    if core.small_owned {
        return match crate::arena::small::allocate(core, c) {
            Some(g) => (g.ptr.as_ptr() as usize, g.block, g.cap, g.fresh, g.warm),
            None => (0, NIL, 0, false, false),
        };
    }
    if let Some(g) = allocate_hit(core, c) {
        return (g.ptr.as_ptr() as usize, g.block, g.cap, false, true);
    }
    match allocate_slow(core, c, eff, align) {
        Some(g) => (g.ptr.as_ptr() as usize, g.block, g.cap, g.fresh, g.warm),
        None => (0, NIL, 0, false, false),
    }
}

/// [`allocate_parts`]'s hit alone: a buffer of small class `c` from this
/// thread's ready cache, or `None` (nothing changed) without trying
/// anything else.
#[inline(always)]
pub(crate) fn allocate_hit(core: &ArenaCore, c: Class) -> Option<Grant> {
    if core.small_owned {
        return crate::arena::small::allocate_hit(core, c);
    }
    let cache = fast_cache(core)?;
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    let s = o.bins.get_mut(c).and_then(Bin::pop)?;
    Some(take(cache, o, s, c))
}

/// A hit: the counters move the buffer from held to live.
#[inline(always)]
pub(super) fn take(cache: &Cache, o: &mut Own, s: Slot, c: Class) -> Grant {
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

/// Returns a small buffer of class `c` into this thread's cache; `false`
/// when the shared path must take it.
#[inline(always)]
pub(crate) fn free(core: &ArenaCore, c: Class, addr: usize) -> bool {
    if core.small_owned {
        // SAFETY: the callers free a live small buffer of class `c` that
        // `core` served, keeping `core` alive for the call (a caller that
        // may see the body freed calls `small::free` with its pointer).
        unsafe { crate::arena::small::free(NonNull::from(core), c, addr) };
        return true;
    }
    free_hit(core, c, addr) || free_slow(core, c, addr)
}

/// [`free`]'s hit: this thread's ready cache takes the buffer, or `false`
/// (nothing changed) and [`free_slow`] decides.
#[inline(always)]
pub(crate) fn free_hit(core: &ArenaCore, c: Class, addr: usize) -> bool {
    if core.small_owned {
        // SAFETY: as in `free`; the hit never frees the body.
        return unsafe { crate::arena::small::free_hit(core, c, addr) };
    }
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

/// Gives back the `n` oldest buffers of bin `c`: into the arena's depot
/// as they are (`depot.rs`) when it admits them and has room, else each
/// into its class's free list.
pub(super) fn give_back(
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
        // The cache's address tells its flushes from other pushers'.
        keep_in_depot(st, core, o, c, n, cache as *const Cache as Pusher)
    } else {
        free_to_lists(st, core, o, c, n, trim)
    };
    note_given_back(st, core, cache, o, cap, moved, freed);
}

/// Counts `moved` buffers of capacity `cap` gone from a cache, `freed` of
/// them into the free lists (the rest kept in the depot).
fn note_given_back(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    cap: usize,
    moved: usize,
    freed: usize,
) {
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

/// Gives back everything class `c`'s spill holds: into the depot as it
/// is when it admits it and has room, else each buffer into its class's
/// free list (with `trim`, releasing their pages). As [`give_back`] does
/// a bin's.
pub(super) fn give_back_spill(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    c: Class,
    trim: bool,
) {
    let cap = capacity(c);
    // SAFETY: this thread's cache, under the arena's lock (the caller's);
    // no other borrow of its spills is alive.
    let spill = unsafe { cache.spill(c) };
    let n = spill.len();
    let by = cache as *const Cache as Pusher;
    let kept = !trim && st.depot.room(c) >= n && st.depot_admits(n * cap) && {
        let sorted = spill.in_order();
        spill.give_all(|s| st.depot.push_all(c, s, by, sorted))
    };
    let mut freed = 0usize;
    if !kept {
        let mut run = InsertRun::default();
        spill.drain(|s| {
            freed += 1;
            settle_one(st, core, s, trim, &mut run);
        });
    }
    note_given_back(st, core, cache, o, cap, n, freed);
}

/// Frees one cached buffer into its class's free list, as the next of
/// `run` (with `trim`, evicted at once, its pages released).
fn settle_one(st: &mut ArenaState, core: &ArenaCore, s: Slot, trim: bool, run: &mut InsertRun) {
    if trim {
        let bytes = st.evict_cached(s.addr, &core.os);
        debug_assert!(bytes != 0, "a cached buffer was not live");
        st.stats.trimmed_bytes += bytes;
    } else {
        let i = st.free_cached_next(NIL, s.addr, s.stamp, run);
        debug_assert!(i != NIL, "a cached buffer was not live");
    }
}

/// Moves the `n` oldest buffers of bin `c` into the depot (which has room
/// for them), pushed `by` the bin's cache; returns how many left the bin
/// and how many of those the arena freed into the free lists instead (none
/// while the room holds).
fn keep_in_depot(
    st: &mut ArenaState,
    core: &ArenaCore,
    o: &mut Own,
    c: Class,
    n: usize,
    by: Pusher,
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
        st.depot.push_all(c, s, by, true)
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
    // Oldest first, as one run into the class's list; a trim evicts each
    // one at once, without listing it.
    let mut run = InsertRun::default();
    o.bins[c].drain_oldest(n, |s| {
        moved += 1;
        settle_one(st, core, s, trim, &mut run);
    });
    (moved, moved)
}

#[cold]
#[inline(never)]
fn allocate_slow(core: &ArenaCore, c: Class, eff: usize, align: usize) -> Option<Grant> {
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
    refill_from_spill(cache, o, c);
    if let Some(s) = o.bins[c].pop() {
        if rest != 0 {
            locked_refill(core, cache, o, |st, _| remote::absorb(st, core, rest));
        }
        return Some(take(cache, o, s, c));
    }
    // Refill with the class's own retained buffers, newest first: held by
    // the cache as they become live to the arena (one store of the
    // counters for the batch, before the lock is let go). Nothing of the
    // class itself: a new buffer of the class, under the same lock. Only
    // the request's own class is reused, in the cache as in the arena
    // (`reuse.rs`), so that a repeated workload holds the same buffers
    // per class in every run and no warm run goes cold.
    let (sorted, cold) = locked_refill(core, cache, o, |st, o| {
        if rest != 0 {
            remote::absorb(st, core, rest);
        }
        let sorted = refill(st, cache, o, c);
        if o.bins[c].len() != 0 {
            return (sorted, None);
        }
        // Before new memory: a batch of what another thread's spill holds
        // of the class (`steal.rs`).
        let (stolen, in_order) = steal_spills(st, core, cache, o, c);
        if stolen != 0 {
            return (in_order, None);
        }
        (sorted, core.serve_small_cold(st, c, eff, align))
    });
    // Runs in order, the newest run first: the newest goes on top. After
    // the lock is let go: the bin is this thread's alone. A refill from
    // one ordered depot slice is in order already (a thread streaming
    // through the class).
    if !sorted {
        o.bins[c].sort_by_stamp();
    }
    if let Some(s) = o.bins[c].pop() {
        return Some(take(cache, o, s, c));
    }
    // Served by the arena (here, or by the shared path when `None`): this
    // thread may cache its free.
    o.bins[c].note_handed_out();
    if cold.as_ref().is_some_and(|g| !g.warm) {
        // A new buffer of the class, so not a warm run: the spill's room is
        // made here, and no warm run allocates it (after the lock).
        let cap = o.bins[c].cap();
        open_room(cache, o, c, cap);
    }
    cold
}

/// Under the lock: half a bin (the whole bin after a refill, see
/// [`Bin::move_batch`]) of class `c`'s retained buffers into its
/// bin, the most recently freed first, from the depot (no block record to
/// touch; they are in `cached_bytes` already) or the class's free list, so
/// that the cache hands out what the arena would: its newest (once the
/// caller has put the bin in stamp order, after the lock). Returns whether
/// the bin is in stamp order already: one slice of a depot list that is.
fn refill(st: &mut ArenaState, cache: &Cache, o: &mut Own, c: Class) -> bool {
    let cap = capacity(c);
    let batch = o.bins[c].move_batch(Move::Refill);
    let bin = &mut o.bins[c];
    let mut got = 0;
    let mut moves = 0;
    let ordered = st.depot.is_ordered(c);
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
        moves += 1;
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
        moves += 1;
    }
    cache.counters.add_held(Held::one(cap) * got as u64);
    o.published += got * cap;
    ordered && moves == 1
}

/// [`free`] past the hit: the cache made ready (or refused), a full bin
/// flushed; `false` when the shared path must take the buffer.
#[cold]
#[inline(never)]
pub(crate) fn free_slow(core: &ArenaCore, c: Class, addr: usize) -> bool {
    if core.small_owned {
        // SAFETY: as in `free`.
        unsafe { crate::arena::small::free(NonNull::from(core), c, addr) };
        return true;
    }
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
        if !spill(core, cache, o, c, n) {
            locked(core, cache, o, |st, o| {
                // A streak that outgrew the spill goes to the depot whole,
                // the spill's part first (`spill.rs`); not one whose spill
                // has room (another thread held its guard a moment ago).
                // SAFETY: this thread's cache, under the arena's lock; no
                // other borrow of its spills is alive.
                let outgrew = unsafe {
                    let spill = cache.spill(c);
                    spill.len() > 0 && !spill.takes(n)
                };
                if outgrew {
                    give_back_spill(st, core, cache, o, c, false);
                    // SAFETY: as above.
                    unsafe { cache.spill(c).close() };
                }
                give_back(st, core, cache, o, c, n, false)
            });
        }
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
pub(super) fn free_remote(
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
