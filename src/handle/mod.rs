//! Ownership of buffers once they leave an arena: [`Allocation`], the
//! move-only owner that returns its buffer exactly once; [`IoLease`], the
//! shared owner of an exported output that pins its buffer and keeps its
//! arena alive; raw and DLPack export for foreign owners; and [`ValueMemory`],
//! what holds one value of a run (owned, leased, or a caller's borrowed bytes).

mod allocation;
pub mod dlpack;
mod lease;
#[cfg(all(test, loom))]
mod loom_tests;
mod memory;
mod raw;

pub use allocation::Allocation;
pub use lease::{warmarena_lease_release, warmarena_lease_retain, IoLease};
#[allow(deprecated)]
pub use memory::{Memory, ValueMemory};
pub use raw::{free_raw, raw_capacity};
