//! The static activation planner: which values share memory, and at which
//! offset each lives inside one block.
//!
//! A run that gives every intermediate its own buffer needs the sum of all
//! their sizes. A plan needs one block of its *height*, close to the largest
//! set of values live at one time. The planner is pure (no `unsafe`, no
//! system calls, no clock) and deterministic.
//!
//! ```text
//! PlanGraph + ViewMap + size oracle
//!   -> compute_liveness      live interval per buffer owner (views folded in)
//!   -> in-place hints        an output may take over a dying input's slot
//!   -> solve                 offsets: constructive passes (the lowest kept),
//!                            a decision search, a local search
//!   -> validate              every returned plan is checked (debug builds)
//! ```
//!
//! Callers that track liveness themselves use [`plan_intervals`] (live
//! ranges and sizes in, offsets and height out). Dynamic shapes go through
//! [`PlanCache`]. [`plan_trace`] is the whole `plan` command (read a trace
//! or graph file, plan, validate) against one wall-clock deadline, with
//! each phase timed. [`synth`] generates instance families for tests and
//! benchmarks.
//!
//! ```
//! use warmarena::planner::{plan_intervals, Buffer, PlanOptions};
//! // Three buffers: the first and last never live together, so they share.
//! let bufs = [Buffer::new(0, 2, 4096), Buffer::new(1, 3, 1024), Buffer::new(2, 4, 4096)];
//! let sol = plan_intervals(&bufs, &PlanOptions::default()).unwrap();
//! assert_eq!(sol.placement.height, 5120);
//! assert_eq!(sol.placement.offsets[0], sol.placement.offsets[2]);
//! assert!(sol.optimal);
//! ```
//!
//! # Knobs
//!
//! * [`PlanOptions::alignment`] (default 64): every offset is a multiple of
//!   it. Raise it for kernels that need wider alignment; it costs up to
//!   `alignment - 1` bytes per value.
//! * [`SolveOptions::max_nodes`] (default 500 000): the search budget in nodes.
//!   0 keeps the constructive passes only (fastest, a few percent higher on
//!   hard instances). A [`Budget`] can add a wall-clock stop callback,
//!   checked in every phase.
//! * [`SolveOptions::search_limit`] (default 4000 buffers): larger problems
//!   skip the exact search.

mod budget;
mod cache;
mod constructive;
mod csv;
mod decide;
mod fit;
mod graph;
mod greedy;
mod interval;
mod json;
mod liveness;
mod local;
mod maxtree;
mod online;
mod pack;
mod plan;
mod radix;
mod rankset;
mod rng;
mod rounds;
#[cfg(test)]
mod search;
mod skyline;
#[doc(hidden)]
pub mod synth;
mod trace;
mod validate;

pub use budget::Budget;
pub use cache::PlanCache;
#[doc(hidden)]
pub use constructive::Pass;
pub use csv::{parse_csv, write_csv, CsvError, CsvInstance};
pub use graph::{InPlaceHint, Node, PlanError, PlanGraph, ValueId, ViewMap};
#[doc(hidden)]
pub use greedy::{greedy, greedy_by_size, GreedyOrder};
pub use interval::{check_buffers, lower_bound, Buffer, IntervalError, Placement};
pub use json::{parse_graph_json, GraphFile, JsonError};
#[doc(hidden)]
pub use json::{parse_json, Json};
pub use liveness::{compute_liveness, Interval, Liveness};
pub use pack::{solve, Solution, SolveOptions};
pub use plan::{
    plan, plan_intervals, plan_with_budget, validate, ActivationPlan, PlanOptions, PlanStatus,
    SlotId, SlotInfo,
};
pub use trace::{plan_trace, plan_trace_text, PhaseTimes, TraceError, TracePlan};
pub use validate::{validate_placement, ValidateError};

/// The planner's graph under its former name.
#[deprecated(
    note = "renamed `PlanGraph`: the graph by value id that the planner reads (`session::Graph` is the graph users build)"
)]
pub type Graph = PlanGraph;

/// A graph file's contents under their former name.
#[deprecated(note = "renamed `GraphFile`: what `parse_graph_json` reads from a graph file")]
pub type JsonGraph = GraphFile;
