#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod alloc_api;
pub mod arena;
pub mod faults;
pub mod global;
pub mod handle;
pub(crate) mod os;
pub mod planner;
pub mod scratch;
pub mod session;
// Not part of the stable API: the size classes are an implementation
// detail, public for the tests and the fuzz targets only.
#[doc(hidden)]
pub mod size_class;
pub mod stats;
mod sync;

pub use arena::{ArenaConfig, ArenaError, ArenaKind, ExecutionArena, IoArena};
pub use handle::{Allocation, IoLease};
pub use os::{page_size, OsStats};
pub use stats::ArenaStats;
