//! Buffers a cache offers (`claim.rs`) that another thread's lock holder
//! claims and frees into the arena: for a trim, a new cap, or a request
//! the arena has nothing for.

use super::cache::Cache;
use crate::arena::blocks::{Place, NIL};
use crate::arena::release::STAMP_SEQ_BITS;
use crate::arena::shared::ArenaCore;
use crate::arena::state::ArenaState;

/// The cache's side of a claim (`claim.rs`), under the arena's lock: its
/// buffer of `cap` bytes, which another thread claimed and freed into the
/// arena, is settled (the caller has taken it off the cache's counters
/// as for any give-back).
pub(super) fn settle_claimed(st: &mut ArenaState, cache: &Cache, cap: usize) {
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
    want: impl Fn(&crate::arena::blocks::Block) -> bool,
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
        if blk.state != crate::arena::blocks::BlockState::Live
            || !want(&blk)
            || !c.counters.claim.claim(b)
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
