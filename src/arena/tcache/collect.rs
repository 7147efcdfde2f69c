//! A refill that takes the arena's remote stack without its lock.
//!
//! Buffers freed on threads that did not allocate them wait on the arena's
//! remote stack (`remote.rs`), linked through their own first bytes. The
//! next lock holder used to take them all and walk the chain under the
//! lock: one cache miss per buffer (the freeing thread wrote the link on
//! another core), a dependent load each, while every other thread that
//! needed the lock waited. With one consumer freeing what four producers
//! allocated that walk was 45 % of the whole run's time (`perf`, the
//! threads bench's handoff group), and the producers queued behind it.
//!
//! Now a thread whose bin of the requested class is empty first takes the
//! stack itself, with one compare-exchange and no lock, walks it, and
//! keeps each buffer it has a credit for in its own bin (`Bin::
//! push_returned`): a buffer of a class this cache handed out and has not
//! had back. That is mimalloc's owner collecting its thread-free list: the
//! miss is paid by the thread that will write into the buffer next, and
//! nobody waits for it. What it has no credit or room for goes back to
//! the arena under the lock, as a lock holder's take would have returned
//! it ([`remote::absorb`]): a thread does not hoard classes it does not
//! allocate.
//!
//! To the arena a buffer on the stack is live; one collected here is
//! cached (live to the arena, held by this cache, its free counted by the
//! cache), exactly as if its user had freed it into this cache. Counters
//! are stored once for the whole collection.

use super::bin::Slot;
use super::remote::{self, link};
use super::{Cache, Own};
use crate::arena::blocks::NIL;
use crate::arena::shared::ArenaCore;

/// Takes the arena's remote stack (if any buffer waits) and keeps what
/// this cache has credit and room for; returns the rest as a chain, newest
/// first, for [`remote::absorb`] under the lock (0: nothing left). The
/// caller operates on the arena through a handle (an allocation), so the
/// stack is open and the buffers stay the arena's while they are walked.
pub(super) fn collect(core: &ArenaCore, cache: &Cache, o: &mut Own) -> usize {
    let head = core.remote.take_shared();
    if head == 0 {
        return 0;
    }
    // Oldest first, so that the newest ends on top of its bin. Reversing
    // reads each buffer's link once (the miss), the walk below hits.
    // SAFETY: taken from the stack (acquire after each push's release);
    // every pushed buffer carries a link written by `link::write`, and is
    // the arena's (free, at least 16 bytes) until absorbed or kept.
    let mut at = unsafe { link::reversed(head, usize::MAX) };
    // What is not kept here, newest first (each joins at the head).
    let mut rest = 0;
    let mut kept = 0u64;
    while at != 0 {
        // SAFETY: as above.
        let (next, stamp) = unsafe { link::read(at) };
        if keep(core, cache, o, at, stamp) {
            kept += 1;
        } else {
            // SAFETY: as above.
            unsafe { link::write(at, rest, stamp) };
            rest = at;
        }
        at = next;
    }
    if kept > 0 {
        cache.counters.add_frees(kept);
    }
    rest
}

/// Keeps the remotely freed buffer at `addr` in its class's bin, as a free
/// with credit would; `false` when the bin has no credit or no room, or
/// the address is not a small buffer's slot start (never: the freeing
/// thread found its class the same way).
fn keep(core: &ArenaCore, cache: &Cache, o: &mut Own, addr: usize, stamp: u64) -> bool {
    let Some(k) = remote::pushed_class(core, addr) else {
        return false;
    };
    let bin = &mut o.bins[k];
    let s = Slot {
        addr,
        block: NIL,
        stamp,
    };
    if !bin.push_returned(s) {
        return false;
    }
    cache.counters.add_held(bin.held_one());
    true
}
