//! A cache's spills on its thread's path (`spill.rs`): a full bin's batch
//! set aside, an empty bin refilled from it, its room made; and another
//! thread's request taking what the spills of its class hold before it
//! takes new memory, and the cache settling that afterwards (`steal.rs`).

use super::bin::{Bin, Move};
use super::cache::{Cache, Held, Own};
use super::spill::{spill_limit, Spill};
use super::steal::class_bit;
use crate::arena::shared::ArenaCore;
use crate::arena::state::ArenaState;
use crate::size_class::{capacity, Class};
use core::sync::atomic::Ordering::Relaxed;

/// Sets the `n` oldest buffers of full bin `c` aside in its spill, without
/// the lock, when the spill is open and has room for them (made when this
/// thread first takes a new buffer of the class, [`open_room`]); `false`
/// (and no change) otherwise, or when another thread is taking the spill
/// right now. Counts stay: the spill's buffers are held like the bin's.
#[inline]
pub(super) fn spill(core: &ArenaCore, cache: &Cache, o: &mut Own, c: Class, n: usize) -> bool {
    if o.spill_rooms & class_bit(c) == 0 || !cache.spill_guards[c].try_enter() {
        return false;
    }
    // SAFETY: this thread holds the class's guard; no other borrow of its
    // spill is alive.
    let spill = unsafe { cache.spill(c) };
    let was_empty = spill.len() == 0;
    let done = spill.takes(n) && o.bins[c].give_oldest(n, |s| spill.push_all(s));
    cache.spill_guards[c].leave();
    if done && was_empty {
        core.spilled.note(c);
    }
    done
}

/// Bin `c` ran dry: reopens its spill (`spill.rs`) and, while the bin is
/// empty, refills it with a batch of the spill's newest, without the lock
/// (nothing when another thread is taking the spill right now).
#[inline]
pub(super) fn refill_from_spill(cache: &Cache, o: &mut Own, c: Class) {
    if o.spill_rooms & class_bit(c) == 0 || !cache.spill_guards[c].try_enter() {
        return;
    }
    // SAFETY: this thread holds the class's guard; no other borrow of its
    // spill is alive.
    let spill = unsafe { cache.spill(c) };
    spill.reopen();
    if spill.len() > 0 && o.bins[c].len() == 0 {
        // What the bin set aside: already held.
        let (_, sorted) = batch_into(spill, &mut o.bins[c]);
        if !sorted {
            o.bins[c].sort_by_stamp();
        }
    }
    cache.spill_guards[c].leave();
}

/// Moves a refill's batch of `spill`'s newest entries into the empty
/// `bin` (a streak pushed since its last take put in order first);
/// returns how many, and whether they are in stamp order.
fn batch_into(spill: &mut Spill, bin: &mut Bin) -> (usize, bool) {
    let sorted = spill.in_order();
    let n = bin.move_batch(Move::Refill);
    let k = spill.take_newest(n, |s| {
        let pushed = bin.push_all(s);
        debug_assert!(pushed, "an empty bin holds a batch");
    });
    (k, sorted)
}

/// Makes the room of class `c`'s spill (capacity `cap`), after this thread
/// took a new buffer of the class from the arena: a cold allocation, so
/// never in a warm run. Nothing when the class does not spill, the system
/// allocator has no room, or another thread is looking into the spills
/// right now (the class's next cold allocation tries again).
pub(super) fn open_room(cache: &Cache, o: &mut Own, c: Class, cap: usize) {
    if o.spill_rooms & class_bit(c) != 0
        || spill_limit(cap) == 0
        || !cache.spill_guards[c].try_enter()
    {
        return;
    }
    // SAFETY: this thread holds the class's guard; no other borrow of its
    // spill is alive.
    if unsafe { cache.spill(c).open_room(cap) } {
        o.spill_rooms |= class_bit(c);
    }
    cache.spill_guards[c].leave();
}

/// Under the arena's lock, for `thief`'s request of class `c` (`o` its
/// own part) that found neither the depot nor the free lists holding any:
/// refills the thief's empty bin with the newest batch another cache's
/// spill of the class holds; returns how many buffers, and whether they
/// are in stamp order. Looks only when some spill of the class may hold
/// buffers ([`Spilled`](super::steal::Spilled)), and takes from the first
/// spill it finds holding any.
///
/// A batch, not the whole spill: a thread short of a few buffers of a
/// class its neighbour streams through too (the rounds of the `stream`
/// table change their sizes) takes only what its bin holds, and the
/// neighbour keeps the rest of its spill for its own next round, without
/// the lock; a thread that needs the whole spill (a task that moved to
/// it) takes it a batch at each of its refills, which take the lock
/// anyway. (Taking the whole spill into the depot made two such threads
/// take it from each other round after round: 5 % slower, 0.1 locks per
/// 100 operations more.)
///
/// The buffers stay in their cache's held word and published bytes until
/// that cache's thread settles them at its next locked operation on the
/// arena, its exit at the latest ([`settle_stolen`]); meanwhile
/// `stolen_bytes` and `stolen_buffers` count them, `stats()` takes them
/// off the caches' sum, and `cached_bytes` is left as it was: the buffers
/// are cached either way, now held and published by the thief, whose
/// published bytes grow as the stolen bytes do.
pub(super) fn steal_spills(
    st: &mut ArenaState,
    core: &ArenaCore,
    thief: &Cache,
    o: &mut Own,
    c: Class,
) -> (usize, bool) {
    if st.caches.len() < 2 || o.bins[c].len() != 0 || !core.spilled.take_for_look(c) {
        return (0, true);
    }
    let cap = capacity(c);
    // Whether a spill of the class may still hold buffers after this look:
    // one not looked into, not emptied, or not reached.
    let mut left_behind = false;
    let mut got = (0, true);
    for k in 0..st.caches.len() {
        let p = st.caches[k];
        // SAFETY: registered caches stay allocated until the arena frees
        // them (`sweep_caches`, `leave_caches`), both under this lock.
        let v = unsafe { p.as_ref() };
        // Its own spill ran dry before this (`allocate_slow`); a left
        // thread gave its spills back at its exit; one that has yet to
        // honour the epoch gives them back at its next operation (with
        // their pages, after a trim, which a theft would keep).
        if core::ptr::eq(v, thief)
            || v.link.thread_left()
            || v.counters.seen.load(Relaxed) != core.epoch.load(Relaxed)
        {
            continue;
        }
        if !v.spill_guards[c].try_enter() {
            // Its thread is at its spill of the class.
            left_behind = true;
            continue;
        }
        // SAFETY: this thread holds the class's guard and the arena's
        // lock, which its thread's locked changes of its spills take too;
        // no other borrow of the spill is alive.
        let spill = unsafe { v.spill(c) };
        if spill.len() > 0 {
            got = batch_into(spill, &mut o.bins[c]);
            left_behind |= spill.len() > 0;
        }
        v.spill_guards[c].leave();
        if got.0 != 0 {
            note_stolen(st, v, cap, got.0);
            // Held by the thief now, and published with the lock's frame.
            thief.counters.add_held(Held::one(cap) * got.0 as u64);
            o.published += got.0 * cap;
            // The caches after it were not reached.
            left_behind |= k + 1 < st.caches.len();
            break;
        }
    }
    if left_behind {
        core.spilled.restore(c);
    }
    got
}

/// `n` buffers of capacity `cap` went from cache `v`'s spill to a thief.
fn note_stolen(st: &mut ArenaState, v: &Cache, cap: usize, n: usize) {
    st.stolen_bytes += n * cap;
    st.stolen_buffers += n;
    // Only lock holders write it.
    let s = &v.counters.stolen;
    s.store(s.load(Relaxed) + Held::one(cap) * n as u64, Relaxed);
}

/// The cache's thread, under the arena's lock (before it publishes), or
/// the arena sweeping the cache after its thread left: what other threads
/// took from its spills comes off its held word. Its published bytes
/// still count those buffers, which their thieves' count too, and
/// `cached_bytes` counted them once (as the published bytes less the
/// stolen ones): it takes them back with the stolen count, and the
/// publish (or the sweep) that follows takes off the published bytes.
#[inline]
pub(super) fn settle_stolen(st: &mut ArenaState, cache: &Cache) {
    let s = cache.counters.stolen.load(Relaxed);
    if s == 0 {
        return;
    }
    cache.counters.sub_held(s);
    let s = Held(s);
    st.cached_bytes += s.bytes();
    st.stolen_bytes -= s.bytes();
    st.stolen_buffers -= s.buffers();
    cache.counters.stolen.store(0, Relaxed);
}
