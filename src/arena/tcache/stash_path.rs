//! The arena's stash (`stash.rs`) as caches use it: with two or more
//! threads, a large buffer a slot cannot keep goes there without the lock,
//! and any thread's request of its class takes it from there.

use super::cache::{Cache, Own};
use super::front::fast_cache;
use super::large::{large_index, Piece, LARGE_FIRST};
use super::large_path::borrowable;
use super::STASH_CLASSES;
use crate::arena::blocks::NIL;
use crate::arena::release::STAMP_SEQ_BITS;
use crate::arena::reuse::serves_alignment;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use crate::size_class::{capacity, Class};
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;

/// With two or more threads on the arena: the buffer at `addr` lent to
/// large slot `k`, which the slot cannot take now, into the arena's stash
/// (`stash.rs`) instead of the arena under its lock; its free counted
/// here, as a cached free is. `false` (nothing changed) on one thread,
/// for a buffer not lent here, a class the stash does not cover, or a
/// full stash.
#[cold]
#[inline(never)]
pub(super) fn stash_refused(
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
