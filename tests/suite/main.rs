//! The integration suite: one test binary, a module per concern.
//!
//! The binary installs a counting global allocator (per-thread counts, so
//! tests running side by side do not disturb each other) so that tests can
//! assert "no heap allocation on the warm path".

mod support;

#[path = "../common/policy_model.rs"]
mod policy_model;

mod arena_bad_input;
mod arena_concurrency;
mod arena_huge_pages;
mod arena_locking;
mod arena_model;
mod arena_policy;
mod arena_warm_path;
mod dlpack_c;
mod handle_model;
mod handle_rules;
mod handle_warm_path;
mod pattern_mode;
mod run_model;
mod session_graph_errors;
mod session_net;
mod session_planned;
mod session_routing;
mod session_rules;

#[global_allocator]
static COUNTING: support::CountingAlloc = support::CountingAlloc;
