//! How a thread lets go of its caches: at its exit (flushed under the
//! arena's lock, the memory kept for the next thread or freed), and of
//! caches whose arenas were orphaned (their buffers keep the arenas alive).

use super::cache::{publish, Cache};
use super::epoch::{self, ORPHANED};
use super::front::{flush, Front, LAST, NO_CACHE_PTR, RECLAIM};
use crate::arena::shared::ArenaCore;
use core::ptr::{null_mut, NonNull};
use core::sync::atomic::Ordering::Relaxed;

/// [`LAST`] no longer points to cache `p` (about to be freed or left).
pub(super) fn forget_last(p: *mut Cache) {
    let _ = LAST.try_with(|l| {
        if l.get() == p {
            l.set(NO_CACHE_PTR)
        }
    });
}

/// Flushes this thread's non-empty caches of orphaned arenas (their
/// buffers keep those arenas alive), when some arena was orphaned since.
pub(super) fn reclaim_orphans(f: &Front) {
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
pub(super) unsafe fn leave(c: NonNull<Cache>) {
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
