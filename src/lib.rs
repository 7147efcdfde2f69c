//! warmarena: the memory layer of an ML inference runtime.
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
pub mod size_class;
pub mod stats;
mod sync;

pub use arena::{AllocError, ArenaConfig, ArenaKind, ExecutionArena, IoArena};
pub use handle::{Allocation, IoLease};
pub use os::{page_size, OsStats};
pub use stats::ArenaStats;
