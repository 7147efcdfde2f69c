//! The execution arena a bench measures: the default configuration, or
//! with `WARMARENA_BENCH_RUN_OWNERSHIP=1` the small path on run ownership
//! (`ArenaConfig::run_ownership`), so both paths run the same benches.

use warmarena::{ArenaConfig, ExecutionArena};

/// Whether this run measures the run-owning small path.
pub fn run_ownership() -> bool {
    std::env::var("WARMARENA_BENCH_RUN_OWNERSHIP").is_ok_and(|v| v == "1")
}

/// A new execution arena in the configuration this run measures.
pub fn exec_arena() -> ExecutionArena {
    ExecutionArena::with_config(ArenaConfig::default().run_ownership(run_ownership()))
}
