//! `warmarena plan FILE`: plan a trace or graph and print its height against the lower bound.

/// Runs `warmarena plan` with the arguments after the subcommand name.
pub fn main(_args: &[String]) -> Result<(), String> {
    Err("warmarena plan: not built yet".to_string())
}
