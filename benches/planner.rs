//! Planner benchmarks: our planner against greedy-by-size on the data sets.
//!
//! `cargo bench --bench planner` prints a markdown table (height / lower
//! bound and time per instance: ours is the whole `plan` command, parse to
//! validation, with a 1000 ms budget; greedy is greedy-by-size alone), then
//! the scaling series (synthetic traces of 10 000 to 1 000 000 buffers,
//! with each phase's time; `WARMARENA_SYNTH_DIR=dir` also writes them as
//! CSV), then criterion timings of the constructive passes on 10 000
//! power-law buffers and of both planners on a few instances. Data: the crate's
//! `tests/data` and `$WARMARENA_DATA/planner` (default `../shared/data`).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::Criterion;
use warmarena::planner::{
    greedy_by_size, parse_csv, plan_trace_text, solve, synth, validate_placement, write_csv,
    Budget, Buffer, SolveOptions, TracePlan,
};

fn shared_root() -> PathBuf {
    std::env::var_os("WARMARENA_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"))
        .join("planner")
}

fn load(path: &Path) -> Option<Vec<Buffer>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(parse_csv(&text).ok()?.buffers)
}

fn instances() -> Vec<(String, PathBuf)> {
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut out = Vec::new();
    for n in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
        out.push((
            format!("minimalloc {n}"),
            local.join(format!("minimalloc/{n}.1048576.csv")),
        ));
    }
    for n in ["alloc_max", "simple", "deep_speech", "five"] {
        out.push((format!("tvm {n}"), local.join(format!("tvm/{n}.csv"))));
    }
    let shared = shared_root();
    for n in ["resnet50", "tiny_bert", "bert_base"] {
        out.push((format!("somas {n}"), shared.join(format!("somas/{n}.csv"))));
    }
    for n in ["G_1", "S_1"] {
        out.push((
            format!("iopddl {n}"),
            shared.join(format!("iopddl/{n}.csv")),
        ));
    }
    out
}

/// Buffers as MiniMalloc CSV text (what the `plan` command reads).
fn csv_text(bufs: &[Buffer]) -> String {
    let ids: Vec<String> = (0..bufs.len()).map(|i| i.to_string()).collect();
    // The offset column is read back but not used by planning.
    write_csv(&ids, bufs, &vec![0; bufs.len()])
}

/// The whole `plan` command on `text` (parse to validation) with a budget.
fn ours(text: &str, budget_ms: u64) -> (TracePlan, f64) {
    let start = Instant::now();
    let plan = plan_trace_text(text, false, start, Duration::from_millis(budget_ms)).unwrap();
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(
        validate_placement(&plan.buffers, &plan.solution.placement, 1),
        Ok(())
    );
    (plan, ms)
}

fn table() {
    println!("| instance | buffers | LB | ours height | ours / LB | ours ms | optimal | greedy / LB | greedy ms |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, path) in instances() {
        let Some(bufs) = load(&path) else {
            println!("| {name} | (missing: {}) | | | | | | | |", path.display());
            continue;
        };
        let (plan, ours_ms) = ours(&csv_text(&bufs), 1000);
        let sol = &plan.solution;
        let (h, lb) = (sol.placement.height, sol.lower_bound);
        let t = Instant::now();
        let g = greedy_by_size(&bufs);
        let greedy_ms = t.elapsed().as_secs_f64() * 1000.0;
        let r = |x: usize| x as f64 / lb.max(1) as f64;
        println!(
            "| {name} | {} | {lb} | {h} | {:.4} | {ours_ms:.1} | {} | {:.4} | {greedy_ms:.1} |",
            bufs.len(),
            r(h),
            if sol.optimal { "yes" } else { "no" },
            r(g.height)
        );
    }
}

/// The scaling series: synthetic traces from 10 000 to 1 000 000 buffers.
fn series() -> Vec<(String, Vec<Buffer>)> {
    let mut out = Vec::new();
    if let Some(bert) = load(&shared_root().join("somas/bert_base.csv")) {
        let t = bert.iter().map(|b| b.upper).max().unwrap_or(0);
        out.push((
            "bert_base x2, perturbed".to_string(),
            synth::perturb(&synth::tile(&bert, 2, t), 1, 10, 2),
        ));
    }
    if let Some(s1) = load(&shared_root().join("iopddl/S_1.csv")) {
        let t = s1.iter().map(|b| b.upper).max().unwrap_or(0);
        let mut tiled = synth::perturb(&synth::tile(&s1, 3, t / 2), 2, 10, 0);
        tiled.truncate(62_185);
        out.push(("S_1 tiled at half its span, 62k".to_string(), tiled));
        out.push((
            "S_1 x35 one after the other".to_string(),
            synth::tile(&s1, 35, t),
        ));
    }
    out.push(("power law 10k".to_string(), synth::power_law(10_000, 5)));
    out.push(("power law 100k".to_string(), synth::power_law(100_000, 3)));
    out.push(("power law 600k".to_string(), synth::power_law(600_000, 4)));
    out.push((
        "serde: short-lived, 64 live, 600k".to_string(),
        synth::short_lived(600_000, 64, 2),
    ));
    out
}

/// Prints the series (whole command, default budget) and, when
/// `WARMARENA_SYNTH_DIR` is set, writes each as CSV there (to measure the
/// release binary's peak RSS with `/usr/bin/time -v`).
fn scaling() {
    let dir = std::env::var_os("WARMARENA_SYNTH_DIR").map(PathBuf::from);
    println!();
    println!("| series | buffers | ours / LB | ours ms | parse | bound | constructive | search | local | validate |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (k, (name, bufs)) in series().into_iter().enumerate() {
        let text = csv_text(&bufs);
        if let Some(dir) = &dir {
            std::fs::write(dir.join(format!("series{k}.csv")), &text).unwrap();
        }
        let (plan, ms) = ours(&text, 1000);
        let p = plan.phases;
        let f = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1000.0);
        println!(
            "| {name} | {} | {:.4} | {ms:.0} | {} | {} | {} | {} | {} | {} |",
            bufs.len(),
            plan.ratio(plan.solution.placement.height),
            f(p.parse),
            f(p.bound),
            f(p.constructive),
            f(p.search),
            f(p.local),
            f(p.validate),
        );
    }
}

fn timings(c: &mut Criterion) {
    let constructive = SolveOptions::default().max_nodes(0);
    let random = synth::power_law(10_000, 1);
    c.bench_function("constructive/power_law_10000", |b| {
        b.iter(|| solve(black_box(&random), &constructive, &Budget::nodes(0)).unwrap())
    });
    c.bench_function("greedy/power_law_10000", |b| {
        b.iter(|| greedy_by_size(black_box(&random)))
    });
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    if let Some(a) = load(&local.join("minimalloc/A.1048576.csv")) {
        let opts = SolveOptions::default();
        c.bench_function("ours/minimalloc_A", |b| {
            b.iter(|| solve(black_box(&a), &opts, &Budget::nodes(u64::MAX)).unwrap())
        });
    }
    if let Some(r) = load(&shared_root().join("somas/resnet50.csv")) {
        let opts = SolveOptions::default();
        c.bench_function("ours/somas_resnet50", |b| {
            b.iter(|| solve(black_box(&r), &opts, &Budget::nodes(u64::MAX)).unwrap())
        });
        c.bench_function("greedy/somas_resnet50", |b| {
            b.iter(|| greedy_by_size(black_box(&r)))
        });
    }
}

fn main() {
    table();
    scaling();
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    timings(&mut c);
    c.final_summary();
}
