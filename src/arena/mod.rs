//! The arena core and its two faces, [`ExecutionArena`] (node intermediates
//! and kernel workspaces) and [`IoArena`] (graph outputs and staged inputs).
//!
//! An arena keeps freed buffers with their pages on per-class free lists, in
//! least-recently-freed order, and serves each request from a retained
//! buffer of its own class (`reuse.rs` says why never a larger one), every
//! retained buffer materialized up to the largest request its class has
//! served (`ready.rs`). Only when the class has none does it go to the OS. A
//! retention cap bounds what is kept; `trim` gives it all back.
//!
//! The warm path is short enough to inline into the caller: a range check
//! on the request, the lock (one atomic each way), the
//! newest buffer of the request's own class (a hot slot: no list
//! relinking when a buffer is freed and its class asked for again), and
//! live-byte counters; retained bytes and warm counts are derived when
//! `stats()` is read rather than kept on every operation. The result comes
//! back in registers: returning it through memory used to cost more than
//! all the bookkeeping (about 23 ns a pair against 12 ns now).
//!
//! Both arenas share this code and differ only in what they are for:
//! keeping them apart is what lets a burst of held outputs never evict the
//! execution working set, and vice versa.
//!
//! Where buffers live: classes below 64 KiB are carved from 256 KiB runs of
//! one class, cut from 2 MiB-aligned regions (huge-page advised from an
//! arena's second region on, so only a model with many small buffers pays
//! a huge page for them); classes from 64 KiB to 16 MiB are carved, page-aligned and
//! back to back, from 32 MiB segments shared by all those classes and
//! advised for transparent huge pages, so a cold run takes about one fault
//! per 2 MiB and the tail of one buffer shares a huge page with the next;
//! larger classes (multiples of 2 MiB) get a 2 MiB-aligned mapping each,
//! advised for huge pages but for the huge page its first request ends in
//! (which would otherwise be resident whole: 16 MiB for a 15 MiB block).
//! Evicting a segment-carved buffer gives its pages back at once
//! (`MADV_DONTNEED` of its range); a segment whose buffers are all released
//! is reset and reused by any class.
//!
//! ```
//! use warmarena::ExecutionArena;
//! let arena = ExecutionArena::new();
//! for run in 0..3 {
//!     let a = arena.allocate(1 << 20, 64).unwrap();
//!     let b = arena.allocate(3000, 16).unwrap();
//!     drop((a, b));
//!     let s = arena.stats();
//!     assert_eq!(s.cold_allocations, 2, "run {run}: only the first run goes to the OS");
//! }
//! ```

mod bitmap;
pub(crate) mod blocks;
mod check;
mod config;
mod error;
mod hash;
mod heap;
mod heap_owner;
#[cfg(test)]
mod heap_tests;
pub(crate) mod metadata;
pub(crate) mod owners;
#[cfg(all(test, loom))]
mod owners_loom;
pub(crate) mod pattern;
pub(crate) mod pins;
mod ready;
mod release;
mod reserve;
mod reuse;
mod run_index;
pub(crate) mod shared;
pub(crate) mod small;
pub(crate) mod state;
pub(crate) mod tcache;
#[cfg(test)]
mod tests;
mod thread_life;
mod warm;

pub use config::ArenaConfig;
pub use error::ArenaError;
// Not part of the stable API (tests, benches, the CLI and the fuzz
// targets use it): hidden from the docs and the public-API listing.
#[doc(hidden)]
pub use owners::table_os_stats as owner_table_os_stats;

use crate::stats::ArenaStats;

/// The largest alignment an arena serves (2 MiB, one huge page).
pub const MAX_ALIGN: usize = 2 << 20;

/// Classes below this capacity are carved from shared runs; classes at or
/// above it get one mapping per buffer. Not part of the stable API (the
/// policy model test uses it).
#[doc(hidden)]
pub const CARVE_LIMIT: usize = 64 << 10;

/// Classes from [`CARVE_LIMIT`] up to (not including) this capacity are
/// carved from shared huge-page segments; larger classes (whose capacities
/// are whole multiples of 2 MiB) get one mapping per buffer.
pub(crate) const SEGMENT_CARVE_MAX: usize = 16 << 20;

/// The length of one segment: 2 MiB-aligned, huge-page advised, shared by
/// every class carved from segments.
#[cfg(not(miri))]
pub(crate) const SEGMENT_LEN: usize = 32 << 20;
/// Under Miri (a heap stand-in whose every byte is tracked) segments are
/// small and carve only the classes that fit, so tests stay fast.
#[cfg(miri)]
pub(crate) const SEGMENT_LEN: usize = 1 << 20;

/// The length of one small-class run.
pub(crate) const RUN_LEN: usize = 256 << 10;

/// Small-class runs are cut from mappings of this length, 2 MiB-aligned: an
/// arena's first such region has 4 KiB pages (a model with a few small
/// buffers keeps a small footprint); the later ones are advised for huge
/// pages like segments, so a model with many small buffers takes about one
/// cold fault per 2 MiB of them too.
#[cfg(not(miri))]
pub(crate) const RUN_REGION_LEN: usize = 2 << 20;
/// Under Miri (the heap stand-in maps and unmaps whole blocks only) each
/// region is one run.
#[cfg(miri)]
pub(crate) const RUN_REGION_LEN: usize = RUN_LEN;

/// The alignment of a run: at least every small class's capacity, so any
/// alignment a small request carries holds for every block of its class.
pub(crate) const RUN_ALIGN: usize = CARVE_LIMIT;

/// Which arena a buffer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArenaKind {
    /// Node intermediates and kernel workspaces.
    Execution,
    /// Graph outputs and staged inputs: memory that crosses the runtime boundary.
    Io,
}

macro_rules! arena_face {
    ($name:ident, $kind:ident, $what:literal) => {
        #[doc = concat!("An arena for ", $what, ".")]
        ///
        /// A cheap `Clone` handle to one shared arena; `Send + Sync`. The
        /// arena lives while any handle or any buffer it served is alive.
        ///
        /// Make one per model or session and keep it across runs: its
        /// memory is warm from the second run on. Making an arena maps its
        /// first segment and dropping it unmaps everything (tens of
        /// microseconds and a fresh set of page faults), so an arena made
        /// per request pays the cold path every time. Each thread that
        /// uses an arena keeps a cache for it; a thread caches for up to
        /// 64 arenas at once and serves any more through the lock.
        #[derive(Clone)]
        pub struct $name {
            pub(crate) core: shared::CoreHandle,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("stats", &self.stats())
                    .finish()
            }
        }

        impl $name {
            /// An arena with the default [`ArenaConfig`].
            ///
            /// ```
            #[doc = concat!("let a = warmarena::", stringify!($name), "::new();")]
            /// assert_eq!(a.stats().live_bytes, 0);
            /// ```
            pub fn new() -> Self {
                Self::with_config(ArenaConfig::default())
            }

            /// An arena configured by `config`.
            ///
            /// ```
            #[doc = concat!("use warmarena::{ArenaConfig, ", stringify!($name), "};")]
            #[doc = concat!("let a = ", stringify!($name), "::with_config(ArenaConfig::default().retention_cap(1 << 20));")]
            /// assert_eq!(a.stats().retention_cap, 1 << 20);
            /// ```
            pub fn with_config(config: ArenaConfig) -> Self {
                $name {
                    core: shared::CoreHandle::new(ArenaKind::$kind, config),
                }
            }

            /// A snapshot of this arena's accounting.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            /// let a = arena.allocate(100, 8).unwrap();
            /// assert_eq!(arena.stats().live_buffers, 1);
            /// # drop(a);
            /// ```
            pub fn stats(&self) -> ArenaStats {
                self.core.stats()
            }

            /// Releases every retained buffer to the OS and returns the bytes
            /// released. Live (and leased) buffers are untouched. Buffers
            /// the calling thread's cache holds go too, and so does the one
            /// large buffer each other thread's cache offers (the piece the
            /// execution heap's thread keeps back, a buffer above 1 MiB);
            /// the rest of other threads' caches is given back, and
            /// released, at those threads' next operation on this arena.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            /// drop(arena.allocate(1 << 20, 8).unwrap());
            /// assert_eq!(arena.trim(), 1 << 20);
            /// assert_eq!(arena.stats().retained_bytes, 0);
            /// ```
            pub fn trim(&self) -> usize {
                self.core.trim()
            }

            /// Sets the retention cap and evicts least-recently-freed buffers
            /// at once until the retained bytes fit. Live buffers are never evicted.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            /// drop(arena.allocate(1 << 20, 8).unwrap());
            /// arena.set_retention_cap(0);
            /// assert_eq!(arena.stats().evictions, 1);
            /// ```
            pub fn set_retention_cap(&self, bytes: usize) {
                self.core.set_retention_cap(bytes)
            }

            /// Restarts peak tracking from the current live bytes.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            /// drop(arena.allocate(4096, 8).unwrap());
            /// arena.reset_peak();
            /// assert_eq!(arena.stats().peak_live_bytes, 0);
            /// ```
            pub fn reset_peak(&self) {
                self.core.reset_peak()
            }

            /// Verifies the arena's internal invariants from scratch (slow;
            /// for tests and fuzzing): the first disagreement, if any.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            /// drop(arena.allocate(100, 8).unwrap());
            /// assert_eq!(arena.check_invariants(), Ok(()));
            /// ```
            #[doc(hidden)]
            pub fn check_invariants(&self) -> Result<(), String> {
                self.core.lock().check()
            }

            /// Which arena this is.
            ///
            /// ```
            #[doc = concat!("let arena = warmarena::", stringify!($name), "::new();")]
            #[doc = concat!("assert_eq!(arena.kind(), warmarena::ArenaKind::", stringify!($kind), ");")]
            /// ```
            pub fn kind(&self) -> ArenaKind {
                ArenaKind::$kind
            }

            /// Whether two handles refer to the same arena.
            ///
            /// ```
            #[doc = concat!("let a = warmarena::", stringify!($name), "::new();")]
            /// assert!(a.same_arena(&a.clone()));
            #[doc = concat!("assert!(!a.same_arena(&warmarena::", stringify!($name), "::new()));")]
            /// ```
            pub fn same_arena(&self, other: &Self) -> bool {
                self.core.ptr() == other.core.ptr()
            }
        }
    };
}

arena_face!(
    ExecutionArena,
    Execution,
    "node intermediates and kernel workspaces"
);
arena_face!(IoArena, Io, "graph outputs and staged inputs");
