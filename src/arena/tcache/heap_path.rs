//! The execution heap's thread's slot (`heap_slot.rs`) as the arena uses
//! it: lent a piece the heap would hand out again as it is, the piece's
//! re-request and free without the lock, and its return to the heap.

use super::cache::{check_peak, Cache, Held, Own};
use super::front::{fast_cache, give_back_own};
use super::large::Piece;
use super::offers::settle_claimed;
use crate::arena::blocks::NIL;
use crate::arena::shared::ArenaCore;
use crate::arena::state::{ArenaState, Grant};
use core::ptr::NonNull;
use core::sync::atomic::Ordering::Relaxed;

/// [`note_lent`](super::large_path::note_lent) for heap piece `block` at
/// `addr`: lent to the heap's thread's slot when the heap would serve its
/// re-request with it.
#[inline(never)]
pub(super) fn note_heap_lent(st: &ArenaState, core: &ArenaCore, block: u32, addr: usize) {
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
    let len = crate::arena::heap::piece_len(eff);
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

/// Frees the piece the heap slot holds into the heap (with `trim`, the
/// heap's free memory is released after it, as the trim that asked for
/// this released it before) and forgets the lent one.
pub(super) fn give_back_heap(
    st: &mut ArenaState,
    core: &ArenaCore,
    cache: &Cache,
    o: &mut Own,
    trim: bool,
) {
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
