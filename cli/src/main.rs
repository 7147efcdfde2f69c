//! The `warmarena` binary: `report` (the default) shows what a warm run costs
//! on warmarena and its peers; `plan` packs a trace or graph into one block.
//!
//! Exit status: 0 on success, 2 for a usage error (an unknown option, a bad
//! value, options that conflict; clap's own convention), 1 when the run
//! itself fails (a file that cannot be read or written, a trace or graph
//! that does not parse).

use clap::{CommandFactory, Parser, Subcommand};
use warmarena_cli::{plan::PlanArgs, report::ReportArgs};

/// The memory layer of an ML inference runtime: what a warm run costs on
/// warmarena and on glibc, mimalloc and jemalloc, and the activation planner.
///
/// With no subcommand, runs `report` with the options given. `--json`
/// means the same in every subcommand: machine-readable JSON on standard
/// output instead of the text. Exit status: 2 for a usage error, 1 when the
/// run fails.
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

/// Exit status of a run that failed (usage errors exit 2 through clap).
const RUN_FAILED: i32 = 1;

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Plan(args)) => warmarena_cli::plan::run(&args),
        Some(Command::Report(args)) => report(&args),
        None => report(&cli.report),
    };
    if let Err(e) = result {
        eprintln!("warmarena: {e}");
        std::process::exit(RUN_FAILED);
    }
}

/// Checks the report's options (a usage error exits 2, as clap's own do),
/// then runs it.
fn report(args: &ReportArgs) -> Result<(), String> {
    let options = args.options().unwrap_or_else(|e| {
        Cli::command()
            .error(clap::error::ErrorKind::ValueValidation, e)
            .exit()
    });
    warmarena_cli::report::run(&options)
}
