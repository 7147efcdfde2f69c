//! The `warmarena` binary: `report` (the default) shows what a warm run costs
//! on warmarena and its peers; `plan` packs a trace or graph into one block.

use clap::{Parser, Subcommand};
use warmarena_cli::{plan::PlanArgs, report::ReportArgs};

/// The memory layer of an ML inference runtime: what a warm run costs on
/// warmarena and on glibc, mimalloc and jemalloc, and the activation planner.
///
/// With no subcommand, runs `report` with the options given.
#[derive(Debug, Parser)]
#[command(name = "warmarena", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The warm-run report: six scenarios, every back end in one process.
    Report(ReportArgs),
    /// Pack a trace (MiniMalloc CSV) or a graph (JSON) into one block.
    Plan(PlanArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        None => warmarena_cli::report::run(&cli.report),
        Some(Command::Report(args)) => warmarena_cli::report::run(&args),
        Some(Command::Plan(args)) => warmarena_cli::plan::run(&args),
    };
    if let Err(e) = result {
        eprintln!("warmarena: {e}");
        std::process::exit(2);
    }
}
