//! `warmarena plan FILE`: plan a trace or graph and print its height against the lower bound.
//!
//! ```text
//! warmarena plan FILE [--budget-ms N] [--out solution.csv] [--json]
//! ```
//!
//! `FILE` is MiniMalloc's CSV (`id,lower,upper,size`) or the JSON graph
//! format of [`crate::planner::parse_graph_json`] (chosen by a `.json`
//! extension or a leading `{`). The search stops after `--budget-ms`
//! (default 1000) or when it proves the height optimal. `--out` writes the
//! solution as CSV with an `offset` column; `--json` prints one object.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::planner::plan_trace;

struct Args {
    file: String,
    budget_ms: u64,
    out: Option<String>,
    json: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let usage = "usage: warmarena plan FILE [--budget-ms N] [--out solution.csv] [--json]";
    let mut file = None;
    let mut budget_ms = 1000;
    let mut out = None;
    let mut json = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--budget-ms" => {
                let v = it.next().ok_or(usage)?;
                budget_ms = v
                    .parse()
                    .map_err(|_| format!("--budget-ms: `{v}` is not a number"))?;
            }
            "--out" => out = Some(it.next().ok_or(usage)?.clone()),
            "--json" => json = true,
            "-h" | "--help" => return Err(usage.to_string()),
            s if s.starts_with('-') => return Err(format!("unknown option `{s}`\n{usage}")),
            s => {
                if file.replace(s.to_string()).is_some() {
                    return Err(usage.to_string());
                }
            }
        }
    }
    Ok(Args {
        file: file.ok_or(usage)?,
        budget_ms,
        out,
        json,
    })
}

/// Runs `warmarena plan` with the arguments after the subcommand name.
/// The whole command (read, plan, validate, write) is
/// [`crate::planner::plan_trace`]'s, within `--budget-ms`.
pub fn main(args: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let args = parse_args(args)?;
    let budget = Duration::from_millis(args.budget_ms);
    let mut plan = plan_trace(Path::new(&args.file), started, budget)
        .map_err(|e| format!("{}: {e}", args.file))?;
    if let Some(path) = &args.out {
        plan.write_csv(Path::new(path))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    if args.json {
        println!("{}", plan.json(&args.file, started));
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
    Ok(())
}
