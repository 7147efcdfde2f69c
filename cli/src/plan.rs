//! `warmarena plan FILE`: plan a trace or graph and print its height
//! against the lower bound.
//!
//! `FILE` is MiniMalloc's CSV (`id,lower,upper,size`) or the JSON graph
//! format of [`warmarena::planner::parse_graph_json`] (chosen by a `.json`
//! extension or a leading `{`). The whole command (read, plan, validate,
//! write) is [`warmarena::planner::plan_trace`]'s, within `--budget-ms`;
//! the search stops earlier when it proves the height optimal. `--out`
//! writes the solution as CSV with an `offset` column; `--json` prints one
//! JSON object on standard output instead of the text; `--svg` draws the
//! packing. A file that cannot be read, planned or written is a run failure
//! (exit status 1).

use std::path::Path;
use std::time::{Duration, Instant};

use warmarena::planner::plan_trace;

/// Options of `warmarena plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// The trace (MiniMalloc CSV: `id,lower,upper,size`) or graph (JSON,
    /// chosen by a `.json` extension or a leading `{`) to plan.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Wall-time budget of the whole command in milliseconds (reading,
    /// planning, validating, writing); the search also stops when it proves
    /// the height optimal.
    #[arg(long, default_value_t = 1000)]
    pub budget_ms: u64,
    /// Write the solution as CSV with an `offset` column to this file.
    #[arg(long, value_name = "solution.csv")]
    pub out: Option<String>,
    /// Print one JSON object on standard output instead of the text
    /// summary (`"schema": 1` first, `time_ms` for the whole command and
    /// `phases_ms` for each phase).
    #[arg(long)]
    pub json: bool,
    /// Draw the packing (offset over time, one rectangle per buffer, the
    /// lower bound and the height) as an SVG picture to this file.
    #[arg(long, value_name = "plan.svg")]
    pub svg: Option<String>,
}

/// Runs `warmarena plan` with parsed arguments.
pub fn run(args: &PlanArgs) -> Result<(), String> {
    let started = Instant::now();
    let budget = Duration::from_millis(args.budget_ms);
    let mut plan = plan_trace(Path::new(&args.file), started, budget)
        .map_err(|e| format!("{}: {e}", args.file))?;
    if let Some(path) = &args.out {
        plan.write_csv(Path::new(path))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(path) = &args.svg {
        let sol = &plan.solution;
        let mut pic = crate::draw::convert::plan_picture(
            &args.file,
            &plan.ids,
            &plan.buffers,
            &sol.placement.offsets,
        );
        pic.lower_bound = sol.lower_bound;
        pic.height = sol.placement.height;
        pic.time_ms = started.elapsed().as_secs_f64() * 1e3;
        pic.optimal = sol.optimal;
        let svg = crate::draw::plan_svg(&pic).map_err(|e| format!("{path}: {e}"))?;
        std::fs::write(path, svg).map_err(|e| format!("{path}: {e}"))?;
    }
    if args.json {
        println!("{}", with_schema(&plan.json(&args.file, started)));
        exit_without_freeing(plan);
        return Ok(());
    }
    let sol = &plan.solution;
    println!("file         {}", args.file);
    println!("buffers      {}", plan.buffers.len());
    println!("lower bound  {}", sol.lower_bound);
    println!(
        "height       {}  ({:.4} x LB{})",
        sol.placement.height,
        plan.ratio(sol.placement.height),
        if sol.optimal { ", optimal" } else { "" }
    );
    match sol.greedy_height {
        Some(h) => println!("greedy       {h}  ({:.4} x LB)", plan.ratio(h)),
        None => {
            println!("greedy       not run (another pass reached the bound, or the budget ran out)")
        }
    }
    println!("naive sum    {}", sol.naive_bytes);
    println!(
        "time         {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    exit_without_freeing(plan);
    Ok(())
}

/// The version of `plan --json`'s object (its `"schema"` field): raised
/// when a field changes meaning or goes away, not when one is added.
pub const JSON_SCHEMA: u32 = 1;

/// The planner's JSON object with `"schema"` as its first field.
///
/// ```
/// let s = warmarena_cli::plan::with_schema(r#"{"file": "a.csv", "buffers": 2}"#);
/// assert_eq!(s, r#"{"schema": 1, "file": "a.csv", "buffers": 2}"#);
/// ```
pub fn with_schema(object: &str) -> String {
    match object.trim_start().strip_prefix('{') {
        Some(rest) if rest.trim_start().starts_with('}') => {
            format!("{{\"schema\": {JSON_SCHEMA}}}")
        }
        Some(rest) => format!("{{\"schema\": {JSON_SCHEMA}, {}", rest.trim_start()),
        None => object.to_string(),
    }
}

/// The plan is the last thing the command holds: the process ends next,
/// and freeing a million ids one by one would cost tens of milliseconds of
/// the budget for nothing.
fn exit_without_freeing(plan: warmarena::planner::TracePlan) {
    std::mem::forget(plan);
}
