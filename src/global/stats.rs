//! The global allocator's counters.
//!
//! Counting must not cost the scoped path a shared atomic read-modify-write
//! per call, so each thread gets its own cache-line-sized slot of counters,
//! which only that thread writes (plain relaxed load and store, no locked
//! instruction); [`stats`](super::stats()) sums the slots. A thread claims a
//! free slot the first time it counts and gives it back when it exits; the
//! next thread to claim it goes on adding to the same counters, so the sums
//! stay exact and a process that starts and ends threads all day keeps
//! every thread on a slot of its own. Only while more than [`SLOTS`]
//! threads count at once do the extra ones share one more slot through
//! atomic adds (they try for an own slot again at each count).
//!
//! Slot pointers live in a const thread-local without destructor, so
//! counting works during thread exit (after the slot is given back, in the
//! shared slot); a second thread-local with a destructor gives it back.

use crate::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use core::cell::Cell;

/// What is counted; the index of a counter in a slot.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    ScopedAllocs,
    ScopedBytes,
    FallbackAllocs,
    FallbackBytes,
    MetadataAllocs,
    ReturnedInScope,
    ReturnedInScopeBytes,
    ReturnedOutside,
    ReturnedOutsideBytes,
    ReallocInPlace,
    ReallocMoved,
}

const COUNTERS: usize = 11;
const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot([AtomicU64; COUNTERS]);

impl Slot {
    const fn new() -> Self {
        Slot([const { AtomicU64::new(0) }; COUNTERS])
    }
}

static OWN: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
static SHARED: Slot = Slot::new();
/// Bit `k` set: slot `k` of [`OWN`] has a thread writing it.
static TAKEN: AtomicU64 = AtomicU64::new(0);
const _: () = assert!(SLOTS <= 64, "one bit of TAKEN per slot");

thread_local! {
    /// This thread's own slot; null before its first count, while every
    /// slot is taken, and once the thread has given its slot back.
    static MINE: Cell<*const Slot> = const { Cell::new(core::ptr::null()) };
    /// Set when this thread's slot lease has been dropped (thread exit):
    /// from then on it counts in the shared slot without trying to claim.
    static GONE: Cell<bool> = const { Cell::new(false) };
    /// Gives this thread's slot back when the thread exits.
    static LEASE: SlotLease = const { SlotLease(Cell::new(NO_SLOT)) };
}

const NO_SLOT: usize = usize::MAX;

/// The index of the slot this thread holds ([`NO_SLOT`]: none); its
/// destructor stops this thread's own counting, then frees the slot.
struct SlotLease(Cell<usize>);

impl Drop for SlotLease {
    fn drop(&mut self) {
        let _ = GONE.try_with(|g| g.set(true));
        let _ = MINE.try_with(|m| m.set(core::ptr::null()));
        release(self.0.replace(NO_SLOT));
    }
}

/// Takes the lowest free slot's bit; `None` when all are taken. Acquire:
/// the last holder's counts (published by its release) are what this
/// thread's plain load-and-store adds to.
fn claim() -> Option<usize> {
    let mut taken = TAKEN.load(Relaxed);
    while taken != u64::MAX {
        let k = (!taken).trailing_zeros() as usize;
        match TAKEN.compare_exchange_weak(taken, taken | 1 << k, Acquire, Relaxed) {
            Ok(_) => return Some(k),
            Err(now) => taken = now,
        }
    }
    None
}

/// Frees slot `k` ([`NO_SLOT`]: nothing). Release: this thread's last
/// counts reach the next holder of the slot.
fn release(k: usize) {
    if k < SLOTS {
        TAKEN.fetch_and(!(1u64 << k), Release);
    }
}

/// Adds one event of `bytes` bytes: `count` += 1, and `bytes_counter` += bytes.
#[inline(always)]
pub(crate) fn note(count: Counter, bytes: Option<(Counter, usize)>) {
    let mine = MINE.try_with(Cell::get).unwrap_or(core::ptr::null());
    // SAFETY: a non-null `MINE` points into the static `OWN`.
    let Some(slot) = (unsafe { mine.as_ref() }) else {
        return note_claiming(count, bytes);
    };
    // Only this thread writes its slot: no locked add needed.
    let add = |k: Counter, v: u64| {
        let a = &slot.0[k as usize];
        a.store(a.load(Relaxed).wrapping_add(v), Relaxed);
    };
    add(count, 1);
    if let Some((k, b)) = bytes {
        add(k, b as u64);
    }
}

/// [`note`] for a thread without a slot: it claims a free one (not once
/// it is exiting), else counts in the shared slot.
#[cold]
#[inline(never)]
fn note_claiming(count: Counter, bytes: Option<(Counter, usize)>) {
    if !GONE.try_with(Cell::get).unwrap_or(true) && claim_for_this_thread() {
        return note(count, bytes);
    }
    SHARED.0[count as usize].fetch_add(1, Relaxed);
    if let Some((k, b)) = bytes {
        SHARED.0[k as usize].fetch_add(b as u64, Relaxed);
    }
}

/// Claims a slot and records it in this thread's lease (whose destructor
/// gives it back) and in [`MINE`]; `false` (nothing held) when every
/// slot is taken or the lease is gone already.
fn claim_for_this_thread() -> bool {
    let Some(k) = claim() else {
        return false;
    };
    // The lease first: once it holds `k`, thread exit gives `k` back.
    let leased = LEASE.try_with(|l| {
        l.0.get() == NO_SLOT && {
            l.0.set(k);
            true
        }
    });
    if leased != Ok(true) || MINE.try_with(|m| m.set(&OWN[k])).is_err() {
        // Exiting, or a claim nested in this one (a destructor's
        // registration that allocated) won: give `k` back.
        if leased == Ok(true) {
            let _ = LEASE.try_with(|l| l.0.set(NO_SLOT));
        }
        release(k);
        return false;
    }
    true
}

pub(crate) fn sum(k: Counter) -> u64 {
    let own: u64 = OWN.iter().map(|s| s.0[k as usize].load(Relaxed)).sum();
    own.wrapping_add(SHARED.0[k as usize].load(Relaxed))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn has_own_slot() -> bool {
        MINE.with(|m| !m.get().is_null())
    }

    /// Threads that come and go one after another each count in a slot of
    /// their own, however many have come before: slots of exited threads
    /// are reused, and the counts of every holder add up. Then more
    /// threads than slots at once: the extra ones count in the shared
    /// slot, and no count is lost either way. (Other tests may add to the
    /// counters meanwhile, so the sums are lower bounds; a lost count
    /// would fall short of them.)
    #[test]
    fn exited_threads_slots_are_reused_and_no_count_is_lost() {
        let threads = if cfg!(miri) { 4 } else { 3 * SLOTS };
        let before = sum(Counter::ReallocMoved);
        for _ in 0..threads {
            let own = std::thread::spawn(|| {
                note(Counter::ReallocMoved, None);
                has_own_slot()
            })
            .join()
            .unwrap();
            assert!(own, "a thread started after others exited has no slot");
        }
        assert!(sum(Counter::ReallocMoved) - before >= threads as u64);

        let threads = if cfg!(miri) { 4 } else { SLOTS + 8 };
        let before = sum(Counter::ReallocMoved);
        let bytes_before = sum(Counter::ReallocInPlace);
        let all_here = std::sync::Barrier::new(threads);
        let own = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..10 {
                        note(Counter::ReallocMoved, Some((Counter::ReallocInPlace, 3)));
                    }
                    own.fetch_add(has_own_slot() as usize, Relaxed);
                    all_here.wait();
                });
            }
        });
        assert!(sum(Counter::ReallocMoved) - before >= 10 * threads as u64);
        assert!(sum(Counter::ReallocInPlace) - bytes_before >= 30 * threads as u64);
        assert!(own.load(Relaxed) <= SLOTS);
    }
}
