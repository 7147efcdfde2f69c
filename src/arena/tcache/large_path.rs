//! The large classes' slots (`large.rs`) as the arena uses them: a buffer
//! lent to this thread, its free and re-request without the lock, and
//! each way a slot's buffer goes back to the arena.

use super::cache::{check_peak, locked, stamp, Cache, Held, Own};
use super::front::{fast_cache, give_back_own};
use super::heap_path::{give_back_heap, note_heap_lent};
use super::large::{has_room, large_index, Large, Piece, BUDGET_MAX, LARGE_CLASSES, LARGE_FIRST};
use super::offers::settle_claimed;
use super::stash_path::stash_refused;
use crate::arena::blocks::{Place, NIL};
use crate::arena::reuse::may_borrow;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use crate::size_class::{capacity, class_of_classed, Class};
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;

/// A buffer of large class `c` (see `large.rs`) for a request of `size`
/// bytes from this thread's slot, when it holds one materialized that far;
/// `None` (nothing changed) otherwise.
#[inline(always)]
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

/// What [`free_large_fast`] did with a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LargeFree {
    /// Kept in this thread's slot of its class.
    Kept,
    /// Not a large class, or no cache of this arena here: the arena's.
    Arena,
    /// Something the inline path does not decide: [`free_large_hit`]
    /// does, out of line. Nothing changed.
    Slow,
}

/// [`free_large_hit`]'s common case, with no call in it, so that a caller
/// that inlines it can end every other way in a call in tail position:
/// the buffer was lent to this thread, its class's slot is empty and the
/// cache has room.
/// Anything else is [`LargeFree::Slow`] or [`LargeFree::Arena`], and
/// nothing changed.
#[inline(always)]
pub(crate) fn free_large_fast(core: &ArenaCore, c: Class, addr: usize, block: u32) -> LargeFree {
    let Some(k) = large_index(c) else {
        return LargeFree::Arena;
    };
    let Some(cache) = fast_cache(core) else {
        return LargeFree::Arena;
    };
    // SAFETY: this thread's cache; the borrow ends within this function.
    let o = unsafe { cache.own() };
    let cap = capacity(LARGE_FIRST + k);
    let budget = cache.view.large_budget.load(Relaxed);
    let empty = o.large.get(k).is_some_and(|l| !l.holds());
    // An empty slot's `returned` changes nothing when the buffer is not
    // lent to it.
    if empty
        && has_room(o.large_bytes, o.big_bytes, cap, budget)
        && put_large(cache, o, k, cap, addr, block, true)
    {
        return LargeFree::Kept;
    }
    LargeFree::Slow
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
pub(super) fn borrowable(first: usize, limit: usize) -> impl Iterator<Item = usize> {
    (first..limit).take_while(move |&k| may_borrow(LARGE_FIRST + first, LARGE_FIRST + k))
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
    let Some(l) = o.large.get_mut(k) else {
        return false;
    };
    if !l.returned(addr, block, block == NIL, room, || stamp(cache)) {
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
pub(super) fn flush_large(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    trim: bool,
) {
    for k in 0..LARGE_CLASSES {
        if let Some(l) = o.large.get_mut(k) {
            l.forget_lent();
        }
        give_back_large(st, core, cache, o, k, trim);
    }
    give_back_heap(st, core, cache, o, trim);
}
