//! Ownership of buffers once they leave an arena: [`Allocation`], the
//! move-only owner that returns its buffer exactly once.

mod allocation;

pub use allocation::Allocation;
