//! Pictures from the planner's and the report's own types.

use super::{BackendFigures, PlanBuffer, PlanPicture, ReportPicture, ScenarioPicture};
use crate::scenario::Row;
use warmarena::planner::{lower_bound, ActivationPlan, Buffer, Solution};

/// A plan picture from buffers and their offsets (a CSV instance and a
/// placement). The lower bound is computed from the buffers, the height from
/// the offsets; `time_ms` and `optimal` are left for the caller to set.
///
/// ```
/// use warmarena_cli::draw::convert::plan_picture;
/// use warmarena::planner::Buffer;
/// let bufs = [Buffer::new(0, 2, 64), Buffer::new(1, 3, 32)];
/// let p = plan_picture("two", &["a".into(), "b".into()], &bufs, &[0, 64]);
/// assert_eq!((p.lower_bound, p.height), (96, 96));
/// assert_eq!(p.buffers[1].id, "b");
/// ```
pub fn plan_picture(
    title: &str,
    ids: &[String],
    buffers: &[Buffer],
    offsets: &[usize],
) -> PlanPicture {
    let buffers: Vec<PlanBuffer> = buffers
        .iter()
        .zip(offsets)
        .enumerate()
        .map(|(k, (b, &offset))| PlanBuffer {
            id: ids.get(k).cloned().unwrap_or_else(|| k.to_string()),
            size: b.size,
            start: b.lower,
            end: b.upper,
            offset,
        })
        .collect();
    let height = buffers
        .iter()
        .filter(|b| b.size > 0 && b.start < b.end)
        .map(|b| b.offset.saturating_add(b.size))
        .max()
        .unwrap_or(0);
    let lb = lower_bound(
        &buffers
            .iter()
            .map(|b| Buffer::new(b.start, b.end, b.size))
            .collect::<Vec<_>>(),
    );
    PlanPicture {
        title: title.to_string(),
        buffers,
        lower_bound: lb,
        height,
        time_ms: 0.0,
        optimal: false,
    }
}

/// A plan picture from `warmarena::planner::solve`'s result.
///
/// ```
/// use warmarena_cli::draw::convert::plan_picture_of_solution;
/// use warmarena::planner::{plan_intervals, Buffer, PlanOptions};
/// let bufs = [Buffer::new(0, 2, 4096), Buffer::new(1, 3, 1024), Buffer::new(2, 4, 4096)];
/// let sol = plan_intervals(&bufs, &PlanOptions::default()).unwrap();
/// let p = plan_picture_of_solution("three", &[], &bufs, &sol, 0.5);
/// assert_eq!((p.height, p.lower_bound, p.optimal), (5120, 5120, true));
/// assert_eq!(p.buffers[2].id, "2");
/// ```
pub fn plan_picture_of_solution(
    title: &str,
    ids: &[String],
    buffers: &[Buffer],
    sol: &Solution,
    time_ms: f64,
) -> PlanPicture {
    let mut p = plan_picture(title, ids, buffers, &sol.placement.offsets);
    p.height = sol.placement.height;
    p.lower_bound = sol.lower_bound;
    p.time_ms = time_ms;
    p.optimal = sol.optimal;
    p
}

/// A plan picture from a graph's [`ActivationPlan`], one buffer per slot;
/// `slot_names[k]` names slot `k` (the values it backs), else its number.
///
/// ```
/// use warmarena_cli::draw::convert::plan_picture_of_plan;
/// use warmarena::planner::{plan, PlanGraph, Node, PlanOptions, PlanStatus, ValueId, ViewMap};
/// let g = PlanGraph {
///     num_values: 3,
///     inputs: vec![ValueId(0)],
///     outputs: vec![ValueId(2)],
///     nodes: vec![
///         Node { inputs: vec![ValueId(0)], outputs: vec![ValueId(1)] },
///         Node { inputs: vec![ValueId(1)], outputs: vec![ValueId(2)] },
///     ],
/// };
/// let PlanStatus::Ready(ap) =
///     plan(&g, &ViewMap::new(), &[], |_| Some(256), &PlanOptions::default()).unwrap()
/// else { unreachable!() };
/// let p = plan_picture_of_plan("chain", &ap, &[], 1.0);
/// assert_eq!(p.buffers.len(), ap.slots.len());
/// assert_eq!(p.height, ap.height);
/// ```
pub fn plan_picture_of_plan(
    title: &str,
    plan: &ActivationPlan,
    slot_names: &[String],
    time_ms: f64,
) -> PlanPicture {
    let buffers = plan
        .slots
        .iter()
        .enumerate()
        .map(|(k, s)| PlanBuffer {
            id: slot_names
                .get(k)
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or_else(|| format!("slot {k}")),
            size: s.size,
            start: s.live.start,
            end: s.live.end,
            offset: s.offset,
        })
        .collect();
    PlanPicture {
        title: title.to_string(),
        buffers,
        lower_bound: plan.lower_bound,
        height: plan.height,
        time_ms,
        optimal: plan.optimal,
    }
}

/// One back end's figures from a report row; `live_peak` is the workload's
/// live peak in bytes (0: unknown).
///
/// ```
/// use warmarena_cli::draw::convert::backend_figures;
/// use warmarena_cli::scenario::{Row, RunCost, Scenario};
/// let run = |faults, nanos| RunCost { minor_faults: faults, nanos, syscalls: None, system_bytes: None };
/// let row = Row {
///     scenario: Scenario::DropOutputs, workload: "large-model", backend: "glibc",
///     cold: run(900, 5_000_000), warm: vec![run(800, 3_000_000), run(850, 2_000_000), run(820, 4_000_000)],
///     rss_before: 0, rss_after: 50 << 20, warm_copies: 0, arena: None, trim: None, outputs_per_run: 1, timed: None,
/// };
/// let f = backend_figures(&row, 100 << 20);
/// assert_eq!((f.cold_faults, f.warm_faults, f.syscalls), (900, 820, None));
/// assert_eq!((f.warm_ms_median, f.warm_ms_min, f.warm_ms_max), (3.0, 2.0, 4.0));
/// assert_eq!(f.rss_over_peak(), Some(0.5));
/// ```
pub fn backend_figures(r: &Row, live_peak: usize) -> BackendFigures {
    let (lo, hi) = r.warm_nanos_range();
    BackendFigures {
        name: r.backend.to_string(),
        cold_faults: r.cold.minor_faults,
        warm_faults: r.warm_faults_median(),
        syscalls: r.warm_syscalls_median(),
        system_bytes: r.warm_system_bytes_median(),
        copies: r.warm_copies,
        warm_ms_median: r.warm_nanos_median() as f64 / 1e6,
        warm_ms_min: lo as f64 / 1e6,
        warm_ms_max: hi as f64 / 1e6,
        rss_growth_bytes: r.rss_after.saturating_sub(r.rss_before),
        live_peak_bytes: live_peak,
    }
}

/// One scenario's picture from its rows (one per back end, in report order):
/// titled after the first row, with a note per trimmed back end.
///
/// ```
/// use warmarena_cli::draw::convert::scenario_picture;
/// let s = scenario_picture(&[], 0);
/// assert!(s.title.is_empty() && s.backends.is_empty());
/// ```
pub fn scenario_picture(rows: &[Row], live_peak: usize) -> ScenarioPicture {
    let title = rows.first().map_or_else(String::new, |r| {
        format!(
            "scenario {} ({}) on {}",
            r.scenario as usize,
            r.scenario.name(),
            r.workload
        )
    });
    let mib = |b: usize| b as f64 / (1u64 << 20) as f64;
    let notes = rows
        .iter()
        .filter_map(|r| {
            let t = r.trim?;
            let what = match (t.released, t.retained_before) {
                (Some(rel), Some(ret)) => {
                    format!("released {:.1} of {:.1} MiB retained", mib(rel), mib(ret))
                }
                _ => "the allocator's own release".to_string(),
            };
            Some(format!(
                "{}: trim after the one-off run: {what}; RSS {:.1} → {:.1} MiB",
                r.backend,
                mib(t.rss_before),
                mib(t.rss_after)
            ))
        })
        .collect();
    ScenarioPicture {
        title,
        backends: rows.iter().map(|r| backend_figures(r, live_peak)).collect(),
        notes,
    }
}

/// The report's picture from every case's rows (as `report::collect`
/// returns them); `live_peak(row)` gives the row's workload live peak.
///
/// ```
/// use warmarena_cli::draw::convert::report_picture;
/// let r = report_picture(&[], |_| 0, "machine".into(), "warmarena report".into(), vec![]);
/// assert_eq!((r.machine.as_str(), r.scenarios.len()), ("machine", 0));
/// ```
pub fn report_picture(
    cases: &[Vec<Row>],
    live_peak: impl Fn(&Row) -> usize,
    machine: String,
    command: String,
    notes: Vec<String>,
) -> ReportPicture {
    ReportPicture {
        title: "warmarena report".to_string(),
        machine,
        command,
        notes,
        scenarios: cases
            .iter()
            .map(|rows| scenario_picture(rows, rows.first().map_or(0, &live_peak)))
            .collect(),
    }
}

/// This machine in one line: CPU model, logical CPUs, kernel.
///
/// ```
/// assert!(warmarena_cli::draw::convert::machine_line().contains("logical CPUs"));
/// ```
pub fn machine_line() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_string();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{model}, {cpus} logical CPUs, {} {}",
        std::env::consts::OS,
        kernel.trim()
    )
}

/// This process's command line, arguments joined by spaces.
///
/// ```
/// assert!(!warmarena_cli::draw::convert::command_line().is_empty());
/// ```
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{RunCost, Scenario, TrimFigures};

    fn row(backend: &'static str, faults: u64, nanos: &[u64]) -> Row {
        Row {
            scenario: Scenario::OneOffThenTrim,
            workload: "large-model",
            backend,
            cold: RunCost {
                minor_faults: faults + 40,
                nanos: 1,
                syscalls: None,
                system_bytes: None,
            },
            warm: nanos
                .iter()
                .map(|&n| RunCost {
                    minor_faults: faults,
                    nanos: n,
                    syscalls: Some(0),
                    system_bytes: Some(0),
                })
                .collect(),
            rss_before: 10 << 20,
            rss_after: 130 << 20,
            warm_copies: 0,
            arena: None,
            trim: Some(TrimFigures {
                retained_before: Some(100 << 20),
                released: Some(100 << 20),
                rss_before: 150 << 20,
                rss_after: 12 << 20,
            }),
            outputs_per_run: 1,
            timed: None,
        }
    }

    #[test]
    fn rows_become_the_report_figures() {
        let rows = vec![vec![
            row("warmarena", 0, &[3_000_000, 2_000_000, 4_000_000]),
            row("glibc", 900, &[9_000_000]),
        ]];
        let r = report_picture(&rows, |_| 100 << 20, "m".into(), "c".into(), vec![]);
        let sc = &r.scenarios[0];
        assert_eq!(sc.title, "scenario 5 (one-off-then-trim) on large-model");
        let w = &sc.backends[0];
        assert_eq!(
            (w.warm_ms_median, w.warm_ms_min, w.warm_ms_max),
            (3.0, 2.0, 4.0)
        );
        assert_eq!((w.cold_faults, w.warm_faults, w.syscalls), (40, 0, Some(0)));
        assert_eq!(w.rss_over_peak(), Some(1.2));
        assert_eq!(sc.backends[1].warm_faults, 900);
        assert_eq!(sc.notes.len(), 2);
        assert!(sc.notes[0].contains("released 100.0 of 100.0 MiB retained; RSS 150.0 → 12.0 MiB"));
    }

    #[test]
    fn a_csv_placement_keeps_ids_and_offsets() {
        let bufs = [
            Buffer::new(0, 4, 10),
            Buffer::new(2, 6, 20),
            Buffer::new(7, 7, 5),
        ];
        let p = plan_picture("t", &["x".into()], &bufs, &[20, 0, 0]);
        assert_eq!((p.height, p.lower_bound), (30, 30));
        let ids: Vec<&str> = p.buffers.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["x", "1", "2"]);
        assert_eq!(
            (p.buffers[1].start, p.buffers[1].end, p.buffers[0].offset),
            (2, 6, 20)
        );
    }
}
