//! The arenas a bench measures: the default configuration, or with
//! `WARMARENA_BENCH_RUN_OWNERSHIP=1` (or `0`) the small path on run
//! ownership (or the thread caches), so both small paths run the same
//! benches while both exist.

use warmarena::{ArenaConfig, ExecutionArena, IoArena};

/// The configuration this run measures.
pub fn config() -> ArenaConfig {
    let config = ArenaConfig::default();
    match std::env::var("WARMARENA_BENCH_RUN_OWNERSHIP").as_deref() {
        Ok("1") => config.run_ownership(true),
        Ok("0") => config.run_ownership(false),
        _ => config,
    }
}

/// A new execution arena in the configuration this run measures.
pub fn exec_arena() -> ExecutionArena {
    ExecutionArena::with_config(config())
}

/// A new I/O arena in the configuration this run measures.
#[allow(dead_code)] // not every bench has an I/O arena
pub fn io_arena() -> IoArena {
    IoArena::with_config(config())
}
