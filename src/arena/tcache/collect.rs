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
//! nobody waits for it.
//!
//! The stacks are one per class (`remotes.rs`) and the
//! thread takes only its requested class's, and reads only as many
//! buffers as its bin takes (the newest); the older ones go back on the
//! stack unread (`Remotes::restore`), for the next thread whose bin of the
//! class runs empty. Before, it took every class at once, read every link
//! and sent what its bins had no room for back to the arena under the
//! lock: with two producers, half of all buffers, each read twice (once
//! on each core) and moved under the lock twice (into the depot, out in a
//! refill). What it still cannot keep (never, in practice: the class is
//! its own and the credit was checked) goes back under the lock
//! ([`remote::absorb`]).
//!
//! To the arena a buffer on the stack is live; one collected here is
//! cached (live to the arena, held by this cache, its free counted by the
//! cache), exactly as if its user had freed it into this cache. Counters
//! are stored once for the whole collection.

use super::bin::{Slot, BIN_SLOTS};
use super::cache::{Cache, Own};
use super::hints;
use super::remote::{self, link};
use crate::arena::shared::ArenaCore;
use crate::size_class::Class;

/// Takes the arena's remote stack of class `c` (if any buffer waits) and
/// keeps its newest buffers, as many as this cache has credit and room
/// for; puts the older ones back on the stack, unread, for the next thread
/// whose bin of the class runs empty (`Remotes::restore`). Returns what
/// it could neither keep nor put back as a chain, newest first, for
/// [`remote::absorb`] under the lock (0: nothing; in practice always 0).
/// The caller operates on the arena through a handle (an allocation), so
/// the stack is open and the buffers stay the arena's while they are
/// walked.
pub(super) fn collect(core: &ArenaCore, cache: &Cache, o: &mut Own, c: Class) -> usize {
    let want = o.bins[c].returnable();
    if want == 0 {
        return 0;
    }
    let head = core.remotes.take_class(c);
    if head == 0 {
        return 0;
    }
    // The newest `want` (at most a bin), read in stack order, newest
    // first: each link read once (the miss this thread pays instead of its
    // next write into the buffer) and not written, so the line stays
    // shared until its user writes it. The older ones are not read here.
    let mut got = [(0usize, 0u64); BIN_SLOTS];
    let mut n = 0;
    let mut at = head;
    let limit = want.min(BIN_SLOTS);
    let h = hints::count(c);
    while at != 0 && n < limit {
        // SAFETY: taken from the stack (acquire after each push's release);
        // every pushed buffer carries a link written by `link::write`, and
        // is the arena's (free, at least 16 bytes) until absorbed or kept.
        let (next, stamp) = unsafe { link::read(at) };
        // SAFETY: pushed by `free_remote` with its class's hints written,
        // and taken by this thread (as for the link).
        unsafe { hints::prefetch_ahead(at, n, h, limit) };
        got[n] = (at, stamp);
        n += 1;
        at = next;
    }
    // What is not kept here, newest first (each joins at the head).
    let mut rest = 0;
    if at != 0 {
        // SAFETY: `newer` was taken from the stack as `head` was; the last
        // of its buffers is the arena's to link.
        rest = core
            .remotes
            .restore(c, at, |newer, older| unsafe { link::joined(newer, older) });
    }
    // Oldest first, so that the newest ends on top of its bin.
    let mut kept = 0u64;
    for &(addr, stamp) in got[..n].iter().rev() {
        if keep(core, cache, o, addr, stamp) {
            kept += 1;
        } else {
            // SAFETY: as above.
            unsafe { link::write(addr, rest, stamp) };
            rest = addr;
        }
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
    let s = Slot { addr, stamp };
    if !bin.push_returned(s) {
        return false;
    }
    cache.counters.add_held(bin.held_one());
    true
}
