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
}

/// Adds one event of `bytes` bytes: `count` += 1, and `bytes_counter` += bytes.
#[inline]
pub(crate) fn note(count: Counter, bytes: Option<(Counter, usize)>) {
    let id = SLOT_ID
        .try_with(|c| {
            if c.get() == 0 {
                c.set(NEXT_ID.fetch_add(1, Relaxed));
            }
            c.get()
        })
        .unwrap_or(usize::MAX);
    let add = |k: Counter, v: u64| match OWN.get(id.wrapping_sub(1)) {
        Some(slot) => {
            // Only this thread writes its slot: no locked add needed.
            let a = &slot.0[k as usize];
            a.store(a.load(Relaxed).wrapping_add(v), Relaxed);
        }
        None => {
            SHARED.0[k as usize].fetch_add(v, Relaxed);
        }
    };
    add(count, 1);
    if let Some((k, b)) = bytes {
        add(k, b as u64);
    }
}

pub(crate) fn sum(k: Counter) -> u64 {
    let own: u64 = OWN.iter().map(|s| s.0[k as usize].load(Relaxed)).sum();
    own.wrapping_add(SHARED.0[k as usize].load(Relaxed))
}
