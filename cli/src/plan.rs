//! `warmarena plan FILE`: plan a trace or graph and print its height against the lower bound.
//!
//! `FILE` is MiniMalloc's CSV (`id,lower,upper,size`) or the JSON graph
//! format of [`warmarena::planner::parse_graph_json`] (chosen by a `.json`
//! extension or a leading `{`). The search stops after `--budget-ms`
//! (default 1000) or when it proves the height optimal. `--out` writes the
//! solution as CSV with an `offset` column; `--json` prints one object.

use std::time::Instant;

use warmarena::planner::{
    greedy_by_size, parse_csv, parse_graph_json, plan_with_budget, solve, write_csv, Budget,
    Buffer, PlanOptions, PlanStatus, SolveOptions, ValueId,
};

/// Options of `warmarena plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// The trace (MiniMalloc CSV: `id,lower,upper,size`) or graph (JSON,
    /// chosen by a `.json` extension or a leading `{`) to plan.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Search budget in milliseconds; the search also stops when it proves
    /// the height optimal.
    #[arg(long, default_value_t = 1000)]
    pub budget_ms: u64,
    /// Write the solution as CSV with an `offset` column to this file.
    #[arg(long, value_name = "solution.csv")]
    pub out: Option<String>,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// Draw the packing (offset over time, one rectangle per buffer, the
    /// lower bound and the height) as an SVG picture to this file.
    #[arg(long, value_name = "plan.svg")]
    pub svg: Option<String>,
}

/// What one planning run produced, ready to print.
struct Report {
    ids: Vec<String>,
    buffers: Vec<Buffer>,
    offsets: Vec<usize>,
    lower_bound: usize,
    height: usize,
    naive_bytes: usize,
    greedy: usize,
    optimal: bool,
    time_ms: f64,
}

/// Runs `warmarena plan` with parsed arguments.
pub fn run(args: &PlanArgs) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.file).map_err(|e| format!("{}: {e}", args.file))?;
    let start = Instant::now();
    let deadline = args.budget_ms as f64 / 1000.0;
    let stop = move || start.elapsed().as_secs_f64() >= deadline;
    let budget = Budget {
        max_nodes: u64::MAX,
        stop: Some(&stop),
    };
    // About 1000 search nodes a millisecond on this machine (the decision
    // search's nodes are the cheap ones): the node budget splits the time
    // between search and local search; the callback is the hard stop.
    let solve_opts = SolveOptions {
        max_nodes: args.budget_ms.saturating_mul(1000),
        ..SolveOptions::default()
    };
    let is_json = args.file.ends_with(".json") || text.trim_start().starts_with('{');
    let report = if is_json {
        let g = parse_graph_json(&text).map_err(|e| format!("{}: {e}", args.file))?;
        let options = PlanOptions {
            alignment: g.alignment.unwrap_or(64),
            solve: solve_opts,
        };
        let sizes = g.sizes.clone();
        let size = |v: ValueId| sizes.get(v.index()).copied().flatten();
        let status = plan_with_budget(&g.graph, &g.views, &g.hints, size, &options, &budget)
            .map_err(|e| format!("{}: {e}", args.file))?;
        let time_ms = start.elapsed().as_secs_f64() * 1000.0;
        let p = match status {
            PlanStatus::Ready(p) => p,
            PlanStatus::Deferred { unknown } => {
                let names: Vec<&str> = unknown
                    .iter()
                    .map(|v| g.names[v.index()].as_str())
                    .collect();
                return Err(format!("deferred: symbolic sizes for {}", names.join(", ")));
            }
        };
        // One row per slot, named by the values it backs.
        let mut ids = vec![String::new(); p.slots.len()];
        for (v, s) in p.slot_of.iter().enumerate() {
            if let (Some(s), true) = (s, g.views.source_of(ValueId(v as u32)).is_none()) {
                let id = &mut ids[s.0 as usize];
                if !id.is_empty() {
                    id.push('+');
                }
                id.push_str(&g.names[v]);
            }
        }
        let buffers: Vec<Buffer> = p
            .slots
            .iter()
            .map(|s| Buffer::new(s.live.start, s.live.end, s.size))
            .collect();
        Report {
            greedy: greedy_by_size(&buffers).height,
            offsets: p.slots.iter().map(|s| s.offset).collect(),
            ids,
            buffers,
            lower_bound: p.lower_bound,
            height: p.height,
            naive_bytes: p.naive_bytes,
            optimal: p.optimal,
            time_ms,
        }
    } else {
        let inst = parse_csv(&text).map_err(|e| format!("{}: {e}", args.file))?;
        let sol = solve(&inst.buffers, &solve_opts, &budget)
            .map_err(|e| format!("{}: {e}", args.file))?;
        let time_ms = start.elapsed().as_secs_f64() * 1000.0;
        Report {
            greedy: greedy_by_size(&inst.buffers).height,
            ids: inst.ids,
            buffers: inst.buffers,
            offsets: sol.placement.offsets,
            lower_bound: sol.lower_bound,
            height: sol.placement.height,
            naive_bytes: sol.naive_bytes,
            optimal: sol.optimal,
            time_ms,
        }
    };
    if let Some(path) = &args.out {
        std::fs::write(
            path,
            write_csv(&report.ids, &report.buffers, &report.offsets),
        )
        .map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(path) = &args.svg {
        let mut pic = crate::draw::convert::plan_picture(
            &args.file,
            &report.ids,
            &report.buffers,
            &report.offsets,
        );
        pic.lower_bound = report.lower_bound;
        pic.height = report.height;
        pic.time_ms = report.time_ms;
        pic.optimal = report.optimal;
        let svg = crate::draw::plan_svg(&pic).map_err(|e| format!("{path}: {e}"))?;
        std::fs::write(path, svg).map_err(|e| format!("{path}: {e}"))?;
    }
    let ratio = |h: usize| {
        if report.lower_bound == 0 {
            1.0
        } else {
            h as f64 / report.lower_bound as f64
        }
    };
    if args.json {
        println!(
            "{{\"file\": {}, \"buffers\": {}, \"lower_bound\": {}, \"height\": {}, \"height_over_lb\": {:.6}, \"naive_bytes\": {}, \"greedy_height\": {}, \"time_ms\": {:.3}, \"optimal\": {}}}",
            json_string(&args.file),
            report.buffers.len(),
            report.lower_bound,
            report.height,
            ratio(report.height),
            report.naive_bytes,
            report.greedy,
            report.time_ms,
            report.optimal
        );
    } else {
        println!("file         {}", args.file);
        println!("buffers      {}", report.buffers.len());
        println!("lower bound  {}", report.lower_bound);
        println!(
            "height       {}  ({:.4} x LB{})",
            report.height,
            ratio(report.height),
            if report.optimal { ", optimal" } else { "" }
        );
        println!(
            "greedy       {}  ({:.4} x LB)",
            report.greedy,
            ratio(report.greedy)
        );
        println!("naive sum    {}", report.naive_bytes);
        println!("time         {:.1} ms", report.time_ms);
    }
    Ok(())
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
