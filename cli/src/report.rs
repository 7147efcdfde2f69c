//! `warmarena report` (the binary's default): the six scenarios on the
//! example network and on a large-intermediate model, each with warmarena
//! and the allocators a runtime would otherwise use, in one process with the
//! same kernels; a table per scenario or, with `--json`, every figure as JSON.

use super::backend::{
    release_glibc, release_jemalloc, release_mimalloc, ArenaBackend, Backend, PatternBackend, Peer,
};
use super::planned::PlannedBackend;
use super::replay::Schedule;
use super::scenario::{drive, Drive, Row, RunCost, Scenario};
use super::trace::Trace;
use super::turns::{Turn, Turns};
use super::workload::{run_net_on, run_net_session, TraceRun};
use std::time::Duration;
use warmarena::faults::{FaultCounter, FaultSource};
use warmarena::session::{ArenaRun, Session};
use warmarena_net::{Net, NetConfig};

/// Where `--json` sends the report's JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTo {
    /// Standard output (`--json`).
    Stdout,
    /// A file (`--json FILE`, the older form).
    File(String),
}

/// Options of `warmarena report`.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Warm runs per scenario and back end (after the cold run).
    pub runs: usize,
    /// A MiniMalloc-format trace to use as the large model instead of the built-in one.
    pub trace: Option<String>,
    /// Size multiplier for the large model, built-in or replayed (at 1.0
    /// the built-in transformer-shaped model writes about 582 MiB per run).
    pub scale: f64,
    /// Idle time between runs in scenario 6.
    pub idle_ms: u64,
    /// Print every figure as JSON instead of the tables, and where.
    pub json: Option<JsonTo>,
    /// Where to write the HTML page of charts.
    pub html: Option<String>,
    /// Scenarios to run (default: all six).
    pub scenarios: Vec<Scenario>,
    /// The built-in large model: `transformer` (default) or `cnn`.
    pub model: String,
    /// The back ends to run, by name ([`BACKENDS`]; default: every one built in).
    pub backends: Vec<&'static str>,
    /// Time the warm runs again with the back ends interleaved (see
    /// [`interleaved_times`]); the time columns then come from that pass.
    pub interleave: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            runs: 5,
            trace: None,
            scale: 1.0,
            idle_ms: 400,
            json: None,
            html: None,
            scenarios: Scenario::ALL.to_vec(),
            model: "transformer".into(),
            backends: available_backends(),
            interleave: true,
        }
    }
}

/// Every back end the report knows, in report order. `planned` and
/// `pattern` (warmarena's planned and pattern modes) run on the large model
/// only; `mimalloc` and `jemalloc` need the crate's `peers` feature.
pub const BACKENDS: [&str; 6] = [
    "warmarena",
    "planned",
    "pattern",
    "glibc",
    "mimalloc",
    "jemalloc",
];

/// The back ends this build can run (every one of [`BACKENDS`] with the
/// `peers` feature; without it, all but mimalloc and jemalloc).
pub fn available_backends() -> Vec<&'static str> {
    BACKENDS
        .iter()
        .copied()
        .filter(|b| cfg!(feature = "peers") || !matches!(*b, "mimalloc" | "jemalloc"))
        .collect()
}

/// The built-in large model of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// 4 layers, batch 8, sequence 256, hidden 768.
    Transformer,
    /// A CNN-shaped model with large activations.
    Cnn,
}

/// A positive, finite size multiplier.
fn positive_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err("must be a positive number".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// `--json`'s older form took a file; a subcommand's name there is a
/// mistake (`warmarena --json report`), not a file name.
fn json_file(s: &str) -> Result<String, String> {
    if matches!(s, "report" | "plan") {
        return Err(format!(
            "`{s}` is a subcommand: put --json after it (`warmarena {s} --json`)"
        ));
    }
    Ok(s.to_string())
}

/// Options of `warmarena report`, as given on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Warm runs per scenario and back end (after the cold run); at least 1.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// A MiniMalloc-format trace (`id,lower,upper,size`) to replay as the
    /// large model instead of the built-in one.
    #[arg(long, value_name = "FILE.csv", conflicts_with = "model")]
    pub trace: Option<String>,
    /// Size multiplier for the large model, the built-in one or the
    /// `--trace` replayed (at 1 the built-in transformer-shaped model writes
    /// about 582 MiB per run, with a live peak of 60 MiB); positive.
    #[arg(long, default_value_t = 1.0, value_parser = positive_scale, alias = "batch")]
    pub scale: f64,
    /// Idle time before each run in scenario 6, in milliseconds.
    #[arg(long, default_value_t = 400)]
    pub idle_ms: u64,
    /// Print every figure as JSON on standard output instead of the tables
    /// (an array with one object per scenario, workload and back end). The
    /// older form `--json FILE` writes the same JSON to FILE instead.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 0..=1,
        require_equals = false,
        value_parser = json_file
    )]
    pub json: Option<Option<String>>,
    /// Scenarios to run, comma-separated (default: all): 1 outputs dropped,
    /// 2 the last 8 runs' outputs held, 3 large intermediates, 4 alternating
    /// shapes, 5 a one-off large run then `trim()`, 6 idle gaps.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=6))]
    pub scenarios: Vec<u8>,
    /// The back ends to run, comma-separated (default: every one built in).
    /// `planned` and `pattern` are warmarena's planned and pattern modes and
    /// run on the large model only.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = clap::builder::PossibleValuesParser::new(available_backends())
    )]
    pub backends: Vec<String>,
    /// The built-in large model (not with `--trace`).
    #[arg(long, value_enum, default_value_t = Model::Transformer)]
    pub model: Model,
    /// Also write a self-contained HTML page with a chart per scenario
    /// (warm ms, warm faults, RSS / live peak, cold faults per back end).
    #[arg(long, value_name = "report.html")]
    pub html: Option<String>,
    /// Skip the interleaved timing pass: warm times then come from each
    /// back end's own block of warm runs (about half the report's time, but
    /// on a shared machine the blocks' conditions differ).
    #[arg(long)]
    pub no_interleave: bool,
}

impl ReportArgs {
    /// Turns the parsed arguments into [`ReportOptions`]. clap has checked
    /// every value by then; an error here is a usage error all the same.
    pub fn options(&self) -> Result<ReportOptions, String> {
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return Err("--scale must be positive".into());
        }
        let scenarios = if self.scenarios.is_empty() {
            Scenario::ALL.to_vec()
        } else {
            self.scenarios
                .iter()
                .map(|&n| Scenario::ALL[usize::from(n) - 1])
                .collect()
        };
        let available = available_backends();
        let backends = if self.backends.is_empty() {
            available
        } else {
            // In report order, each once.
            let mut chosen = Vec::new();
            for name in &self.backends {
                if !available.contains(&name.as_str()) {
                    return Err(format!("--backends: no back end `{name}` in this build"));
                }
            }
            for b in available {
                if self.backends.iter().any(|n| n == b) {
                    chosen.push(b);
                }
            }
            chosen
        };
        Ok(ReportOptions {
            runs: self.runs as usize,
            trace: self.trace.clone(),
            scale: self.scale,
            idle_ms: self.idle_ms,
            json: self.json.as_ref().map(|f| match f {
                None => JsonTo::Stdout,
                Some(path) => JsonTo::File(path.clone()),
            }),
            html: self.html.clone(),
            scenarios,
            model: match self.model {
                Model::Transformer => "transformer".into(),
                Model::Cnn => "cnn".into(),
            },
            backends,
            interleave: !self.no_interleave,
        })
    }
}

/// Parses the arguments after `report` (as the binary does) into options.
pub fn parse(args: &[String]) -> Result<ReportOptions, String> {
    #[derive(clap::Parser)]
    struct Report {
        #[command(flatten)]
        args: ReportArgs,
    }
    let parsed = <Report as clap::Parser>::try_parse_from(
        std::iter::once("report").chain(args.iter().map(String::as_str)),
    )
    .map_err(|e| e.to_string())?;
    parsed.args.options()
}

/// Everything the workloads need, built before any measurement.
pub struct Workloads {
    nets: Vec<Net>,
    images: Vec<Vec<f32>>,
    traces: Vec<TraceRun>,
    /// Label of the large model.
    pub large_label: String,
}

impl Workloads {
    /// The example network at three shapes (normal, alternate, large) and
    /// the large model at three sizes (×1, ×0.75, ×2).
    pub fn build(o: &ReportOptions) -> Result<Workloads, String> {
        let shapes = [64usize, 48, 128];
        let nets: Vec<Net> = shapes
            .iter()
            .map(|&size| {
                Net::new(
                    NetConfig {
                        size,
                        ..NetConfig::standard()
                    },
                    42,
                )
            })
            .collect();
        let images = nets.iter().map(|n| n.example_input(1)).collect();
        let (trace, label) = match &o.trace {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
                (
                    Trace::from_csv(&text).map_err(|e| format!("{path}: {e}"))?,
                    format!("{path}, scale {}", o.scale),
                )
            }
            None if o.model == "cnn" => (
                Trace::synthetic_cnn(0.5),
                format!("built-in CNN-shaped model, scale {}", o.scale),
            ),
            None => (
                Trace::synthetic_transformer(1.0),
                format!("built-in transformer-shaped model, scale {}", o.scale),
            ),
        };
        let traces = [1.0, 0.75, 2.0]
            .iter()
            .map(|&f| TraceRun {
                schedule: Schedule::new(&trace, 1, o.scale * f),
            })
            .collect();
        Ok(Workloads {
            nets,
            images,
            traces,
            large_label: label,
        })
    }

    /// The large model's concurrent live peak at the normal shape.
    pub fn large_peak(&self) -> usize {
        self.traces[0].schedule.concurrent_peak()
    }
}

/// Which workload a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// The example network.
    Net,
    /// The large-intermediate model.
    Large,
}

impl WorkloadKind {
    fn name(self) -> &'static str {
        match self {
            WorkloadKind::Net => "example-net",
            WorkloadKind::Large => "large-model",
        }
    }
}

/// The (scenario, workload) cases in report order.
pub fn cases(scenarios: &[Scenario]) -> Vec<(Scenario, WorkloadKind)> {
    let mut v = Vec::new();
    for &s in scenarios {
        if s != Scenario::LargeIntermediates {
            v.push((s, WorkloadKind::Net));
        }
        v.push((s, WorkloadKind::Large));
    }
    v
}

fn run_peer<B: Backend>(
    b: &B,
    sc: Scenario,
    wk: WorkloadKind,
    w: &Workloads,
    d: Drive<'_>,
    faults: &mut FaultCounter,
) -> Result<Row, String> {
    b.trim();
    let row = match wk {
        WorkloadKind::Net => drive(b, sc, wk.name(), d, faults, |v| {
            run_net_on(b, &w.nets[v], &w.images[v])
        }),
        WorkloadKind::Large => {
            let mut slots = Vec::new();
            let mut fill = 0u8;
            drive(b, sc, wk.name(), d, faults, |v| {
                fill = fill.wrapping_add(1);
                w.traces[v].run(b, v, &mut slots, fill)
            })
        }
    };
    b.trim();
    row
}

/// Runs one case on warmarena, with fresh arenas (the network through the
/// session router).
pub fn run_ours(
    sc: Scenario,
    wk: WorkloadKind,
    w: &Workloads,
    d: Drive<'_>,
    faults: &mut FaultCounter,
) -> Result<Row, String> {
    let b = ArenaBackend::default();
    match wk {
        WorkloadKind::Net => {
            let session = Session::new(&Net::graph(), b.exec.clone(), b.io.clone())
                .map_err(|e| e.to_string())?;
            let mut ctx = ArenaRun::new(&session);
            drive(&b, sc, wk.name(), d, faults, |v| {
                run_net_session(&w.nets[v], &mut ctx, &w.images[v])
            })
        }
        WorkloadKind::Large => run_peer(&b, sc, wk, w, d, faults),
    }
}

fn mib(b: f64) -> f64 {
    b / (1 << 20) as f64
}

fn print_case(rows: &[Row], peak: usize) {
    let Some(first) = rows.first() else { return };
    println!();
    println!(
        "scenario {} ({}) on {}:",
        first.scenario as usize,
        first.scenario.name(),
        first.workload
    );
    println!(
        "  {:<10} {:>11} {:>10} {:>12} {:>13} {:>7} {:>22} {:>8} {:>10} {:>12}",
        "backend",
        "cold faults",
        "faults/run",
        "syscalls/run",
        "MiB from OS/run",
        "copies",
        "warm ms med [min-max]",
        if first.backend == "warmarena" {
            "vs ours"
        } else {
            "vs first"
        },
        "RSS/peak",
        "RSS vs mimalloc"
    );
    let base = first.warm_nanos_median().max(1) as f64;
    let growth = |r: &Row| r.rss_after.saturating_sub(r.rss_before);
    let mimalloc_growth = rows.iter().find(|r| r.backend == "mimalloc").map(growth);
    for r in rows {
        let (lo, hi) = r.warm_nanos_range();
        let med = r.warm_nanos_median() as f64;
        println!(
            "  {:<10} {:>11} {:>10} {:>12} {:>15} {:>7} {:>22} {:>7.2}x {:>10} {:>12}",
            r.backend,
            r.cold.minor_faults,
            r.warm_faults_median(),
            r.warm_syscalls_median()
                .map_or("n/a".to_string(), |v| v.to_string()),
            r.warm_system_bytes_median()
                .map_or("n/a".to_string(), |v| format!("{:.1}", mib(v as f64))),
            r.warm_copies,
            format!(
                "{:.2} [{:.2}-{:.2}]",
                med / 1e6,
                lo as f64 / 1e6,
                hi as f64 / 1e6
            ),
            med / base,
            if peak > 0 {
                format!("{:.2}", growth(r) as f64 / peak as f64)
            } else {
                "-".into()
            },
            match mimalloc_growth {
                Some(m) if m > 0 => format!("{:.2}x", growth(r) as f64 / m as f64),
                _ => "-".into(),
            }
        );
    }
    if let Some(((e0, i0), (e1, i1))) = first.arena {
        println!(
            "  {} arenas after: exec live {:.1} / retained {:.1} / peak {:.1} MiB; io live {:.1} / retained {:.1} MiB, {} leases; warm-run cold allocations: exec {}, io {}",
            first.backend,
            mib(e1.live_bytes as f64),
            mib(e1.retained_bytes as f64),
            mib(e1.peak_live_bytes as f64),
            mib(i1.live_bytes as f64),
            mib(i1.retained_bytes as f64),
            i1.leases,
            e1.cold_allocations - e0.cold_allocations,
            i1.cold_allocations - i0.cold_allocations
        );
    }
    for r in rows {
        if let Some(t) = &r.timed {
            let faults: Vec<u64> = t.iter().map(|c| c.minor_faults).collect();
            let own: Vec<u64> = r.warm.iter().map(|c| c.minor_faults).collect();
            let (a, b) = (faults.iter().sum::<u64>(), own.iter().sum::<u64>());
            // Beyond counting noise (a few pages of the peers' metadata).
            if a.abs_diff(b) > a.max(b) / 100 + 64 {
                println!(
                    "  {}: faults per warm run in the interleaved timing pass {:?} (on its own {:?}); its warm ms include them",
                    r.backend, faults, own
                );
            }
        }
    }
    for r in rows {
        if let Some(t) = r.trim {
            println!(
                "  {}: trim after the one-off run: {} ; RSS {:.1} -> {:.1} MiB",
                r.backend,
                match (t.released, t.retained_before) {
                    (Some(rel), Some(ret)) => format!(
                        "released {:.1} of {:.1} MiB retained",
                        mib(rel as f64),
                        mib(ret as f64)
                    ),
                    _ => "allocator's own release (malloc_trim / mi_collect / purge)".into(),
                },
                mib(t.rss_before as f64),
                mib(t.rss_after as f64)
            );
        }
    }
}

/// The version of the report's JSON (each row's `"schema"` field): raised
/// when a field changes meaning or goes away, not when one is added.
pub const JSON_SCHEMA: u32 = 1;

/// Milliseconds from nanoseconds, to 4 decimals (0.1 µs).
fn ms4(nanos: f64) -> f64 {
    (nanos / 1e2).round() / 1e4
}

/// One row of the report's JSON, field for field as consumers read it.
#[derive(serde::Serialize)]
struct JsonRow {
    schema: u32,
    scenario: usize,
    scenario_name: &'static str,
    workload: &'static str,
    backend: &'static str,
    warm_runs: usize,
    warm_minor_faults: u64,
    warm_minor_faults_per_run: Vec<u64>,
    warm_syscalls: Option<u64>,
    warm_system_bytes: Option<u64>,
    warm_copies: u64,
    warm_ms_median: f64,
    warm_ms_min: f64,
    warm_ms_max: f64,
    warm_ms_per_run: Vec<f64>,
    warm_ms_interleaved: bool,
    warm_ms_median_blocked: f64,
    interleaved_minor_faults_per_run: Vec<u64>,
    cold_minor_faults: u64,
    cold_ms: f64,
    rss_bytes_before: usize,
    rss_bytes_after: usize,
    live_peak_bytes: usize,
    #[serde(flatten)]
    arena: Option<JsonArena>,
    #[serde(flatten)]
    trim: Option<JsonTrim>,
}

/// warmarena's arena figures after the warm runs (its rows only).
#[derive(serde::Serialize)]
struct JsonArena {
    exec_live_bytes: usize,
    exec_retained_bytes: usize,
    exec_peak_bytes: usize,
    io_live_bytes: usize,
    io_retained_bytes: usize,
    io_peak_bytes: usize,
    io_leases: usize,
    warm_exec_cold_allocations: u64,
    warm_io_cold_allocations: u64,
    outputs_per_run: usize,
}

/// Scenario 5's trim (its rows only).
#[derive(serde::Serialize)]
struct JsonTrim {
    trim_retained_before: Option<usize>,
    trim_released: Option<usize>,
    trim_rss_before: usize,
    trim_rss_after: usize,
}

impl JsonRow {
    fn new(r: &Row, peak: usize) -> JsonRow {
        let (lo, hi) = r.warm_nanos_range();
        JsonRow {
            schema: JSON_SCHEMA,
            scenario: r.scenario as usize,
            scenario_name: r.scenario.name(),
            workload: r.workload,
            backend: r.backend,
            warm_runs: r.warm.len(),
            warm_minor_faults: r.warm_faults_median(),
            warm_minor_faults_per_run: r.warm.iter().map(|c| c.minor_faults).collect(),
            warm_syscalls: r.warm_syscalls_median(),
            warm_system_bytes: r.warm_system_bytes_median(),
            warm_copies: r.warm_copies,
            warm_ms_median: ms4(r.warm_nanos_median() as f64),
            warm_ms_min: ms4(lo as f64),
            warm_ms_max: ms4(hi as f64),
            warm_ms_per_run: r.warm_nanos().iter().map(|&n| ms4(n as f64)).collect(),
            warm_ms_interleaved: r.timed.is_some(),
            warm_ms_median_blocked: ms4(r.blocked_nanos_median() as f64),
            interleaved_minor_faults_per_run: r
                .timed
                .iter()
                .flatten()
                .map(|c| c.minor_faults)
                .collect(),
            cold_minor_faults: r.cold.minor_faults,
            cold_ms: ms4(r.cold.nanos as f64),
            rss_bytes_before: r.rss_before,
            rss_bytes_after: r.rss_after,
            live_peak_bytes: peak,
            arena: r.arena.map(|((e0, i0), (e1, i1))| JsonArena {
                exec_live_bytes: e1.live_bytes,
                exec_retained_bytes: e1.retained_bytes,
                exec_peak_bytes: e1.peak_live_bytes,
                io_live_bytes: i1.live_bytes,
                io_retained_bytes: i1.retained_bytes,
                io_peak_bytes: i1.peak_live_bytes,
                io_leases: i1.leases,
                warm_exec_cold_allocations: e1.cold_allocations - e0.cold_allocations,
                warm_io_cold_allocations: i1.cold_allocations - i0.cold_allocations,
                outputs_per_run: r.outputs_per_run,
            }),
            trim: r.trim.map(|t| JsonTrim {
                trim_retained_before: t.retained_before,
                trim_released: t.released,
                trim_rss_before: t.rss_before,
                trim_rss_after: t.rss_after,
            }),
        }
    }
}

/// Every row as a JSON array of objects, one per (scenario, workload, back
/// end), each with `"schema": 1` ([`JSON_SCHEMA`]) first; the fields are
/// listed in `docs/reference/cli.md`.
pub fn to_json(rows: &[Row], w: &Workloads, net_peak: usize) -> String {
    let rows: Vec<JsonRow> = rows
        .iter()
        .map(|r| {
            let peak = if r.workload == "large-model" {
                w.large_peak()
            } else {
                net_peak
            };
            JsonRow::new(r, peak)
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&rows).expect("the report's rows serialize");
    s.push('\n');
    s
}

/// Runs every case on every back end; returns the rows in report order.
///
/// Each back end first runs the case on its own (cold run, warm runs), which
/// gives every count, the RSS growth and the arena figures. With
/// [`ReportOptions::interleave`], the case then runs again on fresh back
/// ends with their warm runs interleaved ([`interleaved_times`]), and the
/// rows' warm times are those.
pub fn collect(
    o: &ReportOptions,
    w: &Workloads,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<Vec<Vec<Row>>, String> {
    let d = Drive {
        runs: o.runs,
        idle: Duration::from_millis(o.idle_ms),
        turn: None,
    };
    let mut faults = FaultCounter::new();
    let chosen = |wk| -> Vec<Runner> {
        runners(wk)
            .into_iter()
            .filter(|r| o.backends.contains(&r.name))
            .collect()
    };
    // A case none of the chosen back ends runs (the example network with
    // only `planned` or `pattern`) is left out.
    let all: Vec<_> = cases(&o.scenarios)
        .into_iter()
        .filter(|&(_, wk)| !chosen(wk).is_empty())
        .collect();
    let mut out = Vec::new();
    for (k, &(sc, wk)) in all.iter().enumerate() {
        let label = format!("scenario {} on {}", sc as usize, wk.name());
        progress(k, all.len(), &label);
        let runners = chosen(wk);
        let mut rows = Vec::with_capacity(runners.len());
        for r in &runners {
            rows.push((r.run)(sc, wk, w, d, &mut faults)?);
        }
        if o.interleave {
            for (row, times) in rows
                .iter_mut()
                .zip(interleaved_times(&runners, sc, wk, w, d)?)
            {
                row.timed = Some(times);
            }
        }
        out.push(rows);
    }
    Ok(out)
}

/// One back end of a case: its name and how it runs the case.
#[derive(Clone, Copy)]
pub struct Runner {
    /// The back end's name in tables.
    pub name: &'static str,
    /// Builds the back end and drives the case on it.
    pub run: PeerFn,
}

/// Every back end of a case, in report order: warmarena, then (on the
/// large model) planned and pattern mode, then the peers.
pub fn runners(wk: WorkloadKind) -> Vec<Runner> {
    let mut v = vec![Runner {
        name: "warmarena",
        run: run_ours,
    }];
    if wk == WorkloadKind::Large {
        v.push(Runner {
            name: "planned",
            run: |sc, wk, w, d, f| {
                let schedules: Vec<&Schedule> = w.traces.iter().map(|t| &t.schedule).collect();
                let planned = PlannedBackend::new(&schedules)?;
                run_peer(&planned, sc, wk, w, d, f)
            },
        });
        v.push(Runner {
            name: "pattern",
            run: |sc, wk, w, d, f| run_peer(&PatternBackend::default(), sc, wk, w, d, f),
        });
    }
    v.extend(peers());
    v
}

/// The warm-run times of case (`sc`, `wk`) on fresh back ends, taking
/// turns ([`Turns`]): warm run `r` of every back end runs right after warm
/// run `r` of the one before it, one at a time, so a change in the
/// machine's speed (other tenants, frequency) falls on all of them alike
/// instead of on whichever block of runs it hits. Set-up, cold and warm-up
/// runs and clean-up also run one back end at a time, never beside a timed
/// run. Returns each back end's timed warm runs, in `runners` order.
///
/// Each back end runs on a thread of its own, except glibc's, which runs
/// on the calling thread as in the row's own pass: glibc serves the main
/// thread from its main arena and other threads from arenas of their own,
/// which give memory back differently.
///
/// What the rotation changes for a back end is the time between its runs:
/// the others' runs come between, and an allocator that gives memory back
/// after a delay (mimalloc's purge) does so there where it did not in its
/// own block. So each turn starts with one untimed run, and the timed run
/// follows it back to back, as in the row's own pass (scenario 6 keeps its
/// idle gap before the timed run). The report prints the faults of this
/// pass where they differ from the row's own.
pub fn interleaved_times(
    runners: &[Runner],
    sc: Scenario,
    wk: WorkloadKind,
    w: &Workloads,
    d: Drive<'_>,
) -> Result<Vec<Vec<RunCost>>, String> {
    let turns = Turns::new(runners.len());
    let one = |k: usize, run: PeerFn| -> Result<Vec<RunCost>, String> {
        let t = Turn::take(&turns, k);
        let mut faults = FaultCounter::new();
        let d = Drive {
            turn: Some(&t),
            ..d
        };
        Ok(run(sc, wk, w, d, &mut faults)?.warm)
    };
    let here = runners.iter().position(|r| r.name == "glibc");
    std::thread::scope(|s| {
        let threads: Vec<_> = runners
            .iter()
            .enumerate()
            .filter(|&(k, _)| Some(k) != here)
            .map(|(k, r)| (k, s.spawn(move || one(k, r.run))))
            .collect();
        let mut out: Vec<Result<Vec<RunCost>, String>> =
            (0..runners.len()).map(|_| Ok(Vec::new())).collect();
        if let Some(k) = here {
            out[k] = one(k, runners[k].run);
        }
        for (k, h) in threads {
            out[k] = h
                .join()
                .unwrap_or_else(|_| Err("a thread of the interleaved timing pass panicked".into()));
        }
        out.into_iter().collect()
    })
}

static SYSTEM: std::alloc::System = std::alloc::System;
#[cfg(feature = "peers")]
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "peers")]
static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// One back end running one case: builds the back end, drives the case.
pub type PeerFn =
    fn(Scenario, WorkloadKind, &Workloads, Drive<'_>, &mut FaultCounter) -> Result<Row, String>;

fn peers() -> Vec<Runner> {
    let glibc: PeerFn = |sc, wk, w, d, f| {
        let p = Peer {
            alloc: &SYSTEM,
            name: "glibc",
            release: release_glibc,
        };
        run_peer(&p, sc, wk, w, d, f)
    };
    #[cfg(feature = "peers")]
    {
        let mi: PeerFn = |sc, wk, w, d, f| {
            let p = Peer {
                alloc: &MIMALLOC,
                name: "mimalloc",
                release: release_mimalloc,
            };
            run_peer(&p, sc, wk, w, d, f)
        };
        let je: PeerFn = |sc, wk, w, d, f| {
            let p = Peer {
                alloc: &JEMALLOC,
                name: "jemalloc",
                release: release_jemalloc,
            };
            run_peer(&p, sc, wk, w, d, f)
        };
        vec![
            Runner {
                name: "glibc",
                run: glibc,
            },
            Runner {
                name: "mimalloc",
                run: mi,
            },
            Runner {
                name: "jemalloc",
                run: je,
            },
        ]
    }
    #[cfg(not(feature = "peers"))]
    {
        let _ = (release_mimalloc, release_jemalloc);
        vec![Runner {
            name: "glibc",
            run: glibc,
        }]
    }
}

/// Runs `warmarena report` with checked options ([`ReportArgs::options`]).
///
/// With `--json` the JSON goes to standard output and nothing else does;
/// otherwise the header and a table per case. An error is a run failure
/// (a trace that cannot be read, a file that cannot be written).
pub fn run(o: &ReportOptions) -> Result<(), String> {
    let w = Workloads::build(o)?;
    let tables = o.json != Some(JsonTo::Stdout);
    let source = FaultCounter::new().source();
    let net_peak = {
        let b = ArenaBackend::default();
        let session =
            Session::new(&Net::graph(), b.exec.clone(), b.io.clone()).map_err(|e| e.to_string())?;
        let mut ctx = ArenaRun::new(&session);
        drop(run_net_session(&w.nets[0], &mut ctx, &w.images[0]));
        b.exec.stats().peak_live_bytes
    };
    let header = [
        format!(
            "warmarena report: example network (conv/relu/add/head/fc, 64x64x16, exec peak {:.1} MiB) and {} ({} buffers, {:.0} MiB written per run, live peak {:.0} MiB)",
            mib(net_peak as f64),
            w.large_label,
            w.traces[0].schedule.len(),
            mib(w.traces[0].schedule.total_bytes() as f64),
            mib(w.large_peak() as f64)
        ),
        format!(
            "each scenario: 1 cold run + {} warm runs per back end ({}), one process, same kernels; faults via {}; idle gap {} ms; RSS/peak = RSS growth over the scenario / live peak",
            o.runs,
            o.backends.join(", "),
            if source == FaultSource::PerfEvents { "perf events" } else { "getrusage" },
            o.idle_ms
        ),
        if o.interleave {
            "warm ms: a second pass on fresh back ends, their warm runs interleaved (run r of each back end in turn, one at a time); every other figure: each back end run on its own".to_string()
        } else {
            "warm ms: each back end's own block of warm runs (--no-interleave)".to_string()
        },
    ];
    if tables {
        for line in &header {
            println!("{line}");
        }
    }
    let bar = crate::progress::steps(0);
    let rows = collect(o, &w, |k, n, label| {
        bar.set_length(n as u64);
        bar.set_position(k as u64);
        bar.set_message(label.to_string());
    })?;
    bar.finish_and_clear();
    let peak_of = |r: &Row| {
        if r.workload == "large-model" {
            w.large_peak()
        } else {
            net_peak
        }
    };
    if tables {
        for case in &rows {
            print_case(case, case.first().map_or(0, peak_of));
        }
        println!();
        println!("syscalls and MiB from OS: n/a for peers (their system calls are not visible to this process without tracing it).");
    }
    if let Some(path) = &o.html {
        let pic = crate::draw::convert::report_picture(
            &rows,
            peak_of,
            crate::draw::convert::machine_line(),
            crate::draw::convert::command_line(),
            header.to_vec(),
        );
        let html = crate::draw::report_html(&pic).map_err(|e| format!("{path}: {e}"))?;
        std::fs::write(path, html).map_err(|e| format!("{path}: {e}"))?;
        if tables {
            println!("wrote the charts to {path}");
        }
    }
    if let Some(to) = &o.json {
        let flat: Vec<Row> = rows.into_iter().flatten().collect();
        let json = to_json(&flat, &w, net_peak);
        match to {
            JsonTo::Stdout => {
                use std::io::Write as _;
                std::io::stdout()
                    .write_all(json.as_bytes())
                    .map_err(|e| format!("standard output: {e}"))?;
            }
            JsonTo::File(path) => {
                std::fs::write(path, json).map_err(|e| format!("{path}: {e}"))?;
                println!("wrote every figure to {path}");
            }
        }
    }
    Ok(())
}
