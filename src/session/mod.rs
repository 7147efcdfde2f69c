//! The router: a graph's declared outputs decide, before any run, which
//! arena backs each (node, output slot); per run, [`ArenaRun`] hands
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

pub use context::{ArenaRun, SessionError};
pub use graph::{Graph, GraphError, NodeSpec};
#[allow(deprecated)]
pub use kernel::KernelContext;
pub use kernel::{OutputBuffer, RunMemory};
pub use planned::{PlannedBuffer, PlannedRun};
pub use router::{NodeId, Session};

/// The graph a [`Session`] runs, under its former name.
#[deprecated(note = "renamed `session::Graph`: the one graph type users build")]
pub type GraphSpec = Graph;

/// A run with one arena buffer per value, under its former name.
#[deprecated(note = "renamed `ArenaRun`: a run whose every value is its own arena buffer")]
pub type RunContext<'s, 'i> = ArenaRun<'s, 'i>;

/// A run in planned mode, under its former name.
#[deprecated(
    note = "renamed `PlannedRun`: a run whose intermediates are windows of one planned block"
)]
pub type PlannedContext<'s, 'i> = PlannedRun<'s, 'i>;

/// A session value's id, under its former name (it was a bare `usize`).
#[deprecated(
    note = "use `planner::ValueId` (what `Session::value_id` returns): one id for a value everywhere"
)]
pub type ValueIndex = crate::planner::ValueId;
