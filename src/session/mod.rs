//! The router: a graph's declared outputs decide, before any run, which
//! arena backs each (node, output slot); per run, [`RunContext`] hands
//! kernels the right memory for each output and workspace, borrows or stages
//! inputs, frees intermediates at their last use, and exports outputs as
//! leases without copying.
//!
//! The runtime decides the arena, never the kernel: a kernel names the slot
//! it writes. Declared outputs go to the I/O arena and intermediates to the
//! execution arena from the moment they are allocated, so a node that
//! writes both needs no migration copy; workspaces are always execution
//! memory.

mod context;
mod graph;
mod kernel;
mod planned;
mod router;

pub use context::{RunContext, SessionError};
pub use graph::{GraphError, GraphSpec, NodeSpec};
pub use kernel::{KernelContext, OutputBuffer};
pub use planned::{PlannedBuffer, PlannedContext};
pub use router::{NodeId, Session, ValueIndex};
