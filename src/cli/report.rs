//! `warmarena report`: the same model workload, run repeatedly on warmarena
//! and on the allocators a runtime would otherwise use, with what each warm
//! run costs in page faults, system calls and time.

use super::backend::{ArenaBackend, Backend, Peer};
use super::replay::{run_once, RunCost, Schedule, Slots};
use super::trace::Trace;
use crate::faults::{FaultCounter, FaultSource};
use crate::{ArenaConfig, ExecutionArena};

/// Options of `warmarena report`.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Warm runs per back end (after one cold run).
    pub runs: usize,
    /// A MiniMalloc-format trace to replay instead of the built-in model.
    pub trace: Option<String>,
    /// Size multiplier for a replayed trace.
    pub batch: usize,
    /// Size multiplier for the built-in model.
    pub scale: f64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            runs: 8,
            trace: None,
            batch: 1,
            scale: 1.0,
        }
    }
}

fn parse(args: &[String]) -> Result<ReportOptions, String> {
    let mut o = ReportOptions::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--runs" => o.runs = val("--runs")?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--trace" => o.trace = Some(val("--trace")?),
            "--batch" => {
                o.batch = val("--batch")?
                    .parse()
                    .map_err(|e| format!("--batch: {e}"))?
            }
            "--scale" => {
                o.scale = val("--scale")?
                    .parse()
                    .map_err(|e| format!("--scale: {e}"))?
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if o.scale.is_nan() || o.scale <= 0.0 {
        return Err("--scale must be positive".into());
    }
    Ok(o)
}

/// Resident set size of this process in bytes.
pub fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map(|pages| pages * crate::os::page_size())
        .unwrap_or(0)
}

/// One back end's figures.
#[derive(Debug, Clone)]
pub struct BackendResult {
    /// Back end name.
    pub name: &'static str,
    /// The cold (first) run.
    pub cold: RunCost,
    /// Every warm run.
    pub warm: Vec<RunCost>,
    /// RSS growth from before the cold run to after the warm runs.
    pub rss_growth: usize,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

impl BackendResult {
    /// Median warm-run wall time in nanoseconds.
    pub fn warm_nanos_median(&self) -> u64 {
        median(self.warm.iter().map(|r| r.nanos).collect())
    }
    /// Median new minor faults per warm run.
    pub fn warm_faults_median(&self) -> u64 {
        median(self.warm.iter().map(|r| r.minor_faults).collect())
    }
}

fn measure<B: Backend>(
    b: &B,
    s: &Schedule,
    runs: usize,
    faults: &mut FaultCounter,
) -> Result<BackendResult, String> {
    let mut slots = Slots::<B>::for_schedule(s);
    let rss0 = rss_bytes();
    let refused = || format!("{} refused an allocation", b.name());
    let cold = run_once(b, s, &mut slots, faults, 1).ok_or_else(refused)?;
    let mut warm = Vec::with_capacity(runs);
    for r in 0..runs {
        warm.push(run_once(b, s, &mut slots, faults, (r + 2) as u8).ok_or_else(refused)?);
    }
    Ok(BackendResult {
        name: b.name(),
        cold,
        warm,
        rss_growth: rss_bytes().saturating_sub(rss0),
    })
}

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Runs `warmarena report` with the arguments after the subcommand name.
pub fn main(args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let (trace, label) = match &o.trace {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            (
                Trace::from_csv(&text)?,
                format!("{path} × batch {}", o.batch),
            )
        }
        None => (
            Trace::synthetic_cnn(o.scale),
            format!("built-in CNN trace, scale {}", o.scale),
        ),
    };
    let batch = if o.trace.is_some() { o.batch } else { 1 };
    let sched = Schedule::new(&trace, batch);
    let peak = trace.concurrent_peak() * batch;
    let mut faults = FaultCounter::new();
    println!(
        "warmarena report: {label}: {} buffers, {:.0} MiB written per run, concurrent live peak {:.0} MiB",
        sched.len(),
        mib(trace.total_bytes() * batch),
        mib(peak)
    );
    println!(
        "1 cold run + {} warm runs per back end, same process, same kernels; page faults via {}",
        o.runs,
        match faults.source() {
            FaultSource::PerfEvents => "perf events",
            FaultSource::Getrusage => "getrusage",
        }
    );

    let arena = ExecutionArena::with_config(ArenaConfig::default());
    let ours = ArenaBackend {
        arena: arena.clone(),
    };
    let mut results = Vec::new();
    eprintln!("running warmarena ...");
    results.push(measure(&ours, &sched, o.runs, &mut faults)?);
    let st = arena.stats();
    let per_run: Vec<String> = results[0]
        .warm
        .iter()
        .map(|r| r.minor_faults.to_string())
        .collect();
    drop(ours);
    arena.trim();
    for (name, r) in peers(&sched, o.runs, &mut faults)? {
        eprintln!("ran {name}");
        results.push(r);
    }

    let base = results[0].warm_nanos_median().max(1) as f64;
    println!();
    println!(
        "{:<10} {:>11} {:>16} {:>14} {:>13} {:>12} {:>15}",
        "backend",
        "cold faults",
        "warm faults/run",
        "warm ms (med)",
        "time vs ours",
        "syscalls/run",
        "RSS growth/peak"
    );
    for r in &results {
        let med = r.warm_nanos_median() as f64;
        let sys = r
            .warm
            .iter()
            .map(|w| w.syscalls)
            .collect::<Option<Vec<u64>>>();
        println!(
            "{:<10} {:>11} {:>16} {:>14.2} {:>12.2}x {:>12} {:>15.2}",
            r.name,
            r.cold.minor_faults,
            r.warm_faults_median(),
            med / 1e6,
            med / base,
            match sys {
                Some(v) => median(v).to_string(),
                None => "n/a".into(),
            },
            r.rss_growth as f64 / peak.max(1) as f64
        );
    }
    println!();
    println!(
        "warmarena per warm run, new minor faults: [{}]",
        per_run.join(", ")
    );
    println!(
        "warmarena arena after the runs: live {:.1} MiB, retained {:.1} MiB, peak live {:.1} MiB ({:.3}x the trace's peak), warm/cold allocations {}/{}, system calls {} (maps {}, unmaps {}, advice {})",
        mib(st.live_bytes),
        mib(st.retained_bytes),
        mib(st.peak_live_bytes),
        st.peak_live_bytes as f64 / peak.max(1) as f64,
        st.warm_allocations,
        st.cold_allocations,
        st.os.syscalls(),
        st.os.maps,
        st.os.unmaps,
        st.os.advice
    );
    println!(
        "(syscalls n/a: a peer's system calls are not visible to this process without tracing it)"
    );
    Ok(())
}

#[cfg(feature = "peers")]
fn peers(
    s: &Schedule,
    runs: usize,
    faults: &mut FaultCounter,
) -> Result<Vec<(&'static str, BackendResult)>, String> {
    let mut out = Vec::new();
    let sys = Peer {
        alloc: std::alloc::System,
        name: "glibc",
    };
    out.push(("glibc", measure(&sys, s, runs, faults)?));
    let mi = Peer {
        alloc: mimalloc::MiMalloc,
        name: "mimalloc",
    };
    out.push(("mimalloc", measure(&mi, s, runs, faults)?));
    let je = Peer {
        alloc: tikv_jemallocator::Jemalloc,
        name: "jemalloc",
    };
    out.push(("jemalloc", measure(&je, s, runs, faults)?));
    Ok(out)
}

#[cfg(not(feature = "peers"))]
fn peers(
    s: &Schedule,
    runs: usize,
    faults: &mut FaultCounter,
) -> Result<Vec<(&'static str, BackendResult)>, String> {
    let sys = Peer {
        alloc: std::alloc::System,
        name: "system",
    };
    eprintln!("built without the `peers` feature: mimalloc and jemalloc are left out");
    Ok(vec![("system", measure(&sys, s, runs, faults)?)])
}
