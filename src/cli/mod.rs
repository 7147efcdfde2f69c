//! The `warmarena` binary's subcommands. The binary's `main` only dispatches here.

pub mod backend;
pub mod draw;
pub mod plan;
pub mod planned;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod trace;
pub mod workload;
