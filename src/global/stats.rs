//! The global allocator's counters.
//!
//! Counting must not cost the scoped path a shared atomic read-modify-write
//! per call, so each thread gets its own cache-line-sized slot of counters,
//! which only that thread writes (plain relaxed load and store, no locked
//! instruction); [`stats`](super::stats) sums the slots. The first
//! [`SLOTS`] threads that count get a slot of their own; later threads share
//! one more slot through atomic adds. Slot ids live in a const thread-local
//! without destructor, so counting works during thread exit.

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
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
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// This thread's slot id + 1; 0 until it first counts.
    static SLOT_ID: Cell<usize> = const { Cell::new(0) };
    /// This thread's own slot once it has one; null before its first count
    /// and for threads beyond [`SLOTS`] (they count in [`SHARED`]).
    static MINE: Cell<*const Slot> = const { Cell::new(core::ptr::null()) };
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

/// [`note`] for a thread without a slot of its own yet: it claims one
/// (the first time it counts), else counts in the shared slot.
#[cold]
#[inline(never)]
fn note_claiming(count: Counter, bytes: Option<(Counter, usize)>) {
    let id = SLOT_ID
        .try_with(|c| {
            if c.get() == 0 {
                c.set(NEXT_ID.fetch_add(1, Relaxed));
            }
            c.get()
        })
        .unwrap_or(usize::MAX);
    if let Some(slot) = OWN.get(id.wrapping_sub(1)) {
        // Set once; a thread being torn down (no thread-locals) counts in
        // the shared slot below instead.
        if MINE.try_with(|m| m.set(slot)).is_ok() {
            return note(count, bytes);
        }
    }
    SHARED.0[count as usize].fetch_add(1, Relaxed);
    if let Some((k, b)) = bytes {
        SHARED.0[k as usize].fetch_add(b as u64, Relaxed);
    }
}

pub(crate) fn sum(k: Counter) -> u64 {
    let own: u64 = OWN.iter().map(|s| s.0[k as usize].load(Relaxed)).sum();
    own.wrapping_add(SHARED.0[k as usize].load(Relaxed))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Threads beyond the own slots count in the shared one: no count is
    /// lost either way (other tests may add to the counter meanwhile, so
    /// the check is a lower bound; a lost count would fall short of it).
    #[test]
    fn more_threads_than_slots_lose_no_count() {
        let threads = if cfg!(miri) { 4 } else { SLOTS + 8 };
        let before = sum(Counter::ReallocMoved);
        let bytes_before = sum(Counter::ReallocInPlace);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..10 {
                        note(Counter::ReallocMoved, Some((Counter::ReallocInPlace, 3)));
                    }
                });
            }
        });
        assert!(sum(Counter::ReallocMoved) - before >= 10 * threads as u64);
        assert!(sum(Counter::ReallocInPlace) - bytes_before >= 30 * threads as u64);
    }
}
