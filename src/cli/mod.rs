//! The `warmarena` binary's subcommands. The binary's `main` only dispatches here.

pub mod plan;
