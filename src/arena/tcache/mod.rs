//! The per-thread front end of the arenas: each thread keeps, per arena it
//! uses, a small cache of free buffers of the small classes (capacities
//! below [`CARVE_LIMIT`]), so the common allocate and free take no lock and
//! no shared atomic read-modify-write; and, for the large classes up to
//! [`LARGE_MAX`], one free buffer per class among those the arena lent this
//! thread, with the bytes each has materialized (`large.rs`), so a warm
//! large pair takes no lock either; on the execution heap's thread, whose
//! placement depends on every request reaching the heap, one piece the
//! heap would hand out again as it is (`heap_slot.rs`).
//!
//! Design (after jemalloc's tcache, with mimalloc's address arithmetic):
//! - A cache is a bounded stack per class (`bin.rs`). A hit is a pop or a
//!   push and a few owner-only counter stores. An empty bin is refilled with
//!   half a bin's worth of the class's retained buffers under one lock
//!   acquisition; a full one gives its oldest half back the same way. A
//!   second refill with no flush between (or a second flush with no
//!   refill) moves the whole bin: a thread streaming through a class
//!   takes the lock once a bin. A class up to 2 KiB has a spill beside its
//!   bin (`spill.rs`): the full bin's batches set aside, and taken back by
//!   the empty bin, without the lock, while the streak fits. Another
//!   thread about to take new memory for the class takes a batch from
//!   a spill first (`steal.rs`, `spill_path.rs`).
//! - A buffer belongs to the arena, not to a thread: a buffer freed on
//!   another thread goes into *that* thread's cache when it has a credit
//!   for its class (it handed one out), else onto the arena's remote stack
//!   (`remote.rs`), which the next lock holder, or a thread whose bin ran
//!   empty (`collect.rs`, no lock), takes whole; any thread's flush
//!   returns what it holds.
//! - Finding the class of a small buffer from its address alone (the
//!   scoped global allocator and allocator-api2 frees) is arithmetic: the
//!   owner table (`owners.rs`) tags each run's granules with the run's
//!   class, so one lookup gives both the arena and the class.
//! - The arena sees cached buffers as live (so they keep its body alive)
//!   and `stats()` moves them from live to retained by summing the caches'
//!   counters; see [`super::shared::ArenaCore::stats`] for what a reader
//!   sees while other threads run.
//! - The arena's *epoch* word (read with one relaxed load per operation)
//!   tells caches to give everything back: `trim` and `set_retention_cap`
//!   advance it, an orphaned arena or a cap below [`epoch::MIN_CAP_FOR_CACHE`]
//!   sets a flag that turns caching off. A thread honours it at its next
//!   operation on that arena; `trim` gives back the calling thread's own
//!   cache at once.
//! - A thread's caches are flushed when it exits (a thread-local
//!   destructor). Who frees a cache's memory, the thread or the arena, is
//!   settled by `link.rs`.
//!
//! Where each part lives:
//! - the cache and what it counts: `cache.rs`; how a thread finds its
//!   cache for an arena, or makes one: `front.rs`; how it lets go of its
//!   caches (its exit, an orphaned arena): `leave.rs`; what the arena sums
//!   of its caches: `totals.rs`;
//! - the paths through a cache: small classes (`small_path.rs`, over
//!   `bin.rs`, the arena's `depot.rs`, `remotes.rs` and `collect.rs`),
//!   large classes (`large_path.rs` over `large.rs`), the execution heap's
//!   thread (`heap_path.rs` over `heap_slot.rs`), the stash between
//!   threads (`stash_path.rs` over `stash.rs`), buffers one cache offers
//!   and another thread claims (`offers.rs` over `claim.rs`).
//!
//! Under `cfg(loom)` the front end is off (every call answers "not
//! handled"), so the loom models of the arena lifetime see the shared path
//! they were written for; `link.rs` has its own model.

mod bin;
mod cache;
mod claim;
mod collect;
mod depot;
pub(crate) mod epoch;
mod front;
mod heap_path;
mod heap_slot;
#[cfg(all(test, not(loom)))]
mod heap_slot_tests;
mod hints;
mod large;
mod large_path;
#[cfg(all(test, not(loom)))]
mod large_tests;
mod leave;
mod link;
mod make;
mod offers;
pub(crate) mod remote;
#[cfg(all(test, not(loom)))]
mod remote_tests;
pub(crate) mod remotes;
mod small_path;
pub(crate) mod spare;
pub(crate) mod spill;
mod spill_path;
mod stash;
mod stash_path;
#[cfg(all(test, not(loom)))]
mod stash_tests;
pub(crate) mod steal;
#[cfg(all(test, not(loom)))]
mod steal_tests;
mod streak;
#[cfg(all(test, not(loom)))]
mod tests;
mod totals;

pub(crate) use self::cache::Cache;
pub(crate) use self::depot::Depot;
pub(crate) use self::epoch::{epoch_flags, first_epoch};
pub(crate) use self::front::{flush_own, note_copy, note_unlock, own_unpublished, prepare};
pub(crate) use self::heap_path::{allocate_heap_hit, free_heap_hit, settle_heap};
pub(crate) use self::hints::prefetch;
use self::large::large_index;
pub(crate) use self::large::{BUDGET_MAX, LARGE_MAX};
pub(crate) use self::large_path::{
    allocate_large_hit, free_large_fast, free_large_hit, note_lent, settle_all_large, settle_large,
    LargeFree,
};
pub(crate) use self::leave::note_orphaned;
pub(crate) use self::offers::claim_offers;
pub(crate) use self::small_path::{allocate_hit, allocate_parts, free, free_hit, free_slow};
pub(crate) use self::stash::Stash;
pub(crate) use self::stash_path::{allocate_stashed, drain_stash, stash_totals, unstash_for};
use super::CARVE_LIMIT;
use crate::size_class::{capacity, class_of_classed, Class, MIN_CAPACITY};

/// The classes a thread caches: every class whose capacity is below
/// [`CARVE_LIMIT`] (the run-carved ones).
pub(crate) const SMALL_CLASSES: usize = class_of_classed(CARVE_LIMIT);
/// The large classes the arena's stash covers (`stash.rs`): those whose
/// slots share the budget, from [`CARVE_LIMIT`] up to [`BUDGET_MAX`],
/// indexed as the slots are.
pub(crate) const STASH_CLASSES: usize = match large_index(class_of_classed(BUDGET_MAX)) {
    Some(k) => k + 1,
    None => 0,
};

/// A handle's small class as it keeps it in a byte, for a buffer of no
/// small class (64 KiB and up, or planned).
pub(crate) const NO_CLASS: u8 = u8::MAX;
const _: () = assert!(SMALL_CLASSES < NO_CLASS as usize);

/// Arenas one thread caches for at once; a thread using more arenas serves
/// the extra ones through the shared path. A serving thread may run the
/// sessions of dozens of models, each with its own execution arena; a
/// slot is one pointer, and a cache is made only for an arena the thread
/// uses (with 8 slots, a thread cycling through 32 arenas took the lock in
/// three operations of four). Under Miri 8, which the tests that fill
/// every slot need (each arena maps its first segment there).
const SLOTS: usize = if cfg!(miri) { 8 } else { 64 };

/// Whether every buffer of class `k` is aligned to `align`.
#[inline(always)]
pub(crate) fn serves(k: Class, align: usize) -> bool {
    align <= MIN_CAPACITY || capacity(k) & (align - 1) == 0
}
