//! The `warmarena` command's subcommands, as a library so that tests can
//! drive them: `report` (the warm-run report against the peers) and `plan`
//! (the planner on a trace or graph). The binary (`src/main.rs`) parses the
//! command line with clap and dispatches here.

pub mod backend;
pub mod draw;
pub mod plan;
pub mod planned;
pub mod progress;
pub mod replay;
pub mod report;
pub mod scenario;
pub mod trace;
pub mod turns;
pub mod workload;
