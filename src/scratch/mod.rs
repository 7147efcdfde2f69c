//! The shared per-device scratch pool.
//!
//! When one model is lowered into many engines (one per layer, subgraph or
//! session) and each holds its own scratch workspace for life, memory grows
//! with the engine count. Engines that opt in here draw their workspace
//! from one buffer per device (per lane, see below), grown to the largest
//! request, so the pool holds `max(s_i)` where private engines hold
//! `sum(s_i)`: what sharing reclaims is the sum of the requirements less
//! the largest.
//!
//! ```
//! use warmarena::scratch::{DeviceId, ScratchMode, ScratchPool};
//! let pool = ScratchPool::new();
//! let page = warmarena::page_size();
//! let engines: Vec<_> = [1, 3, 2]
//!     .iter()
//!     .map(|n| pool.engine(DeviceId::HOST, n * page, ScratchMode::Shared).unwrap())
//!     .collect();
//! for e in &engines {
//!     let mut scratch = e.claim(e.requirement()).unwrap(); // exclusive until dropped
//!     scratch.as_mut_slice().unwrap().fill(1);
//! }
//! let s = pool.stats(DeviceId::HOST).unwrap();
//! assert_eq!(s.held_bytes, 3 * page); // max, not sum (6 pages)
//! assert_eq!(s.reclaimed_bytes(), 3 * page);
//! ```
//!
//! # Rules
//!
//! - **Opt in at creation.** [`EngineScratch::new`] takes a [`ScratchMode`];
//!   [`EngineScratch::from_config`] asks the pool's default (set in code, or
//!   the [`MODE_ENV_VAR`] environment variable `WARMARENA_SCRATCH=shared`
//!   for programs that cannot change code). Either way the engine keeps the
//!   mode it was created with.
//! - **A claim lasts the whole execution.** [`EngineScratch::claim`] returns
//!   a [`ScratchGuard`]; nobody else uses those bytes until it drops. (The
//!   reviewed GPU design released its lock before the work was submitted,
//!   and two engines then wrote the same scratch.)
//! - **Growth allocates first.** A larger request allocates the new buffer
//!   before freeing the old one, so a refused growth returns
//!   [`ScratchError::Device`] and leaves the old buffer serving; the old one
//!   is freed only after [`Device::wait_idle`] says its last user is done,
//!   and leaked (counted in [`DeviceScratchStats::leaked_bytes`]) if that
//!   wait fails. For that moment both buffers are held, which
//!   [`DeviceScratchStats::peak_held_bytes`] shows.
//! - **Zero.** An engine recording a requirement of 0 gets no buffer and
//!   never claims. A request of 0 from an engine that recorded more is
//!   [`ScratchError::ZeroRequest`] (a failed size query), never a reuse of
//!   an old pointer.
//! - **Locks.** Finding a device takes one short registry lock with no
//!   allocation under it; each device has its own lane registry and each
//!   buffer its own claim, so a growth on one device or lane never delays a
//!   claim on another. Entries are never removed.
//!
//! # Lanes: concurrency without serialization
//!
//! One buffer per device serializes every engine on the device. Claims are
//! therefore keyed by (device, [`Lane`]), where a lane is the caller's
//! execution lane (a thread, a queue, a GPU stream): engines on one lane
//! share one buffer and take turns, engines on different lanes run at once.
//! The cost is memory: each lane keeps a buffer as large as the largest
//! request made on it, so `k` lanes hold up to `k * max(s_i)` (still below
//! `sum(s_i)` while `k` is below the engine count). [`ScratchPool::trim`]
//! frees the buffers of idle lanes. On a GPU, work queued on one stream runs
//! in order, which is what lets consecutive claimants of a stream's buffer
//! skip any wait; a growth still waits (`wait_idle`) before freeing.
//!
//! # Choosing a mode
//!
//! Private costs `sum(s_i)` and never waits. Shared costs `max(s_i)` per
//! lane and one uncontended claim per execution (a mutex lock and unlock on
//! claim, again on release; see `docs/benchmarks.md` for figures). Use shared
//! when engines outnumber the lanes that run them, which is the many-layer
//! case this module exists for.
//!
//! # Layout
//!
//! `device.rs` (where memory comes from), `registry.rs` (the append-only
//! maps), `slot.rs` (the claim protocol, the only place that waits),
//! `pool.rs`, `engine.rs`, `guard.rs`, `stats.rs`, and `sync.rs` (the
//! primitives, swappable for `loom`).

mod device;
mod engine;
mod error;
mod guard;
mod pool;
mod registry;
mod slot;
mod stats;
mod sync;
mod thread_lane;

pub use device::{Device, DeviceBuffer, DeviceError, DeviceId, HostDevice};
pub use engine::{EngineScratch, ScratchMode, MODE_ENV_VAR};
pub use error::ScratchError;
pub use guard::ScratchGuard;
pub use pool::{Lane, ScratchPool};
pub use stats::{DeviceScratchStats, LaneStats};

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
