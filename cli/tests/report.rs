//! The report's scenarios at small scale, with the counts warmarena
//! promises asserted (never times). Its own test binary, so that RSS is
//! not disturbed by other tests running beside it.

use warmarena::faults::FaultCounter;
use warmarena_cli::report::{
    cases, interleaved_times, parse, run_ours, runners, to_json, Workloads,
};
use warmarena_cli::scenario::{Drive, Row, Scenario};

fn options() -> warmarena_cli::report::ReportOptions {
    options_for("transformer")
}

fn options_for(model: &str) -> warmarena_cli::report::ReportOptions {
    let args: Vec<String> = [
        "--scale",
        "0.25",
        "--runs",
        "3",
        "--idle-ms",
        "30",
        "--model",
        model,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    parse(&args).unwrap()
}

/// The most the execution arena may hold after its warm runs, over the
/// live peak, in every scenario but held outputs. Learned placement
/// (`src/arena/heap/learn.rs`) plans the large model's run after the
/// first: 1.00-1.04 at full scale on both models (best fit alone held
/// 1.20 on the transformer and 1.28 on the CNN model; own classes up to
/// 2.9x on alternating shapes).
const HELD_BOUND: f64 = 1.10;

fn check_row(r: &Row, peak: usize) {
    let label = format!("scenario {} on {}", r.scenario as usize, r.workload);
    let ((e0, i0), (e1, i1)) = r.arena.expect("warmarena rows carry arena stats");
    let warm_faults: Vec<u64> = r.warm.iter().map(|c| c.minor_faults).collect();
    let warm_sys: Vec<u64> = r.warm.iter().map(|c| c.syscalls.unwrap()).collect();
    println!(
        "{label}: warm faults {warm_faults:?}, syscalls {warm_sys:?}, copies {}",
        r.warm_copies
    );
    assert_eq!(r.warm_copies, 0, "{label}: payload copies");
    match r.scenario {
        Scenario::HoldOutputs => {
            // Held outputs cost one fresh I/O buffer each; execution reuse is untouched.
            assert_eq!(
                e1.cold_allocations, e0.cold_allocations,
                "{label}: execution cold allocations"
            );
            let fresh = i1.cold_allocations - i0.cold_allocations;
            assert!(
                fresh <= (r.warm.len() * r.outputs_per_run) as u64,
                "{label}: {fresh} fresh I/O buffers"
            );
        }
        _ => {
            assert!(
                warm_faults.iter().all(|&f| f == 0),
                "{label}: warm faults {warm_faults:?}"
            );
            assert!(
                warm_sys.iter().all(|&s| s == 0),
                "{label}: warm syscalls {warm_sys:?}"
            );
            assert_eq!(
                e1.cold_allocations + i1.cold_allocations,
                e0.cold_allocations + i0.cold_allocations,
                "{label}"
            );
        }
    }
    // Every scenario but held outputs: the execution arena holds at most
    // `HELD_BOUND` times the live peak after its warm runs.
    if r.scenario != Scenario::HoldOutputs && r.workload == "large-model" {
        let held = e1.retained_bytes + e1.live_bytes;
        println!(
            "{label}: arena holds {held} B for a live peak of {peak} B ({:.3}x)",
            held as f64 / peak as f64
        );
        assert!(
            held as f64 <= HELD_BOUND * peak as f64,
            "{label}: arena holds {held} for a peak of {peak}"
        );
    }
    if let Some(t) = r.trim {
        let (ret, rel) = (t.retained_before.unwrap(), t.released.unwrap());
        println!(
            "{label}: trim released {rel} of {ret} B; RSS {} -> {}",
            t.rss_before, t.rss_after
        );
        assert!(
            rel as f64 >= 0.95 * ret as f64,
            "{label}: trim released {rel} of {ret}"
        );
        if rel > 8 << 20 {
            let drop = t.rss_before.saturating_sub(t.rss_after);
            assert!(
                drop as f64 >= 0.5 * rel as f64,
                "{label}: RSS fell by {drop} after releasing {rel}"
            );
        }
    }
}

#[test]
fn every_scenario_keeps_warmarenas_promise_at_small_scale() {
    every_scenario_keeps_the_promise("transformer");
}

/// The CNN-shaped model: a long-lived residual beside short workspaces,
/// where best fit held 1.28x its live peak.
#[test]
fn every_scenario_keeps_warmarenas_promise_on_the_cnn_model() {
    every_scenario_keeps_the_promise("cnn");
}

fn every_scenario_keeps_the_promise(model: &str) {
    let o = options_for(model);
    let w = Workloads::build(&o).unwrap();
    let d = Drive {
        runs: o.runs,
        idle: std::time::Duration::from_millis(o.idle_ms),
        turn: None,
    };
    let mut faults = FaultCounter::new();
    // Make the code of every path resident first: the first execution of a
    // code page counts as a page fault too.
    for &(sc, wk) in &cases(&Scenario::ALL) {
        run_ours(sc, wk, &w, d, &mut faults).unwrap();
    }
    let mut rows = Vec::new();
    for &(sc, wk) in &cases(&Scenario::ALL) {
        let r = run_ours(sc, wk, &w, d, &mut faults).unwrap();
        check_row(&r, w.large_peak());
        rows.push(r);
    }
    assert_eq!(rows.len(), 11);
    let json = to_json(&rows, &w, 1);
    for key in [
        "\"schema\": 1",
        "\"scenario\"",
        "\"backend\"",
        "\"warm_minor_faults\"",
        "\"warm_syscalls\"",
        "\"warm_ms_median\"",
        "\"cold_minor_faults\"",
        "\"rss_bytes_after\"",
    ] {
        assert_eq!(json.matches(key).count(), rows.len(), "key {key}");
    }
}

/// The interleaved timing pass runs every back end of a case (warmarena,
/// planned and pattern mode on the large model, the peers) on its own
/// thread and brings back one time per warm run for each.
#[test]
fn the_interleaved_pass_times_every_back_end_of_a_case() {
    let o = options();
    let w = Workloads::build(&o).unwrap();
    let d = Drive {
        runs: 3,
        idle: std::time::Duration::ZERO,
        turn: None,
    };
    for &(sc, wk) in &cases(&[Scenario::DropOutputs]) {
        let all = runners(wk);
        let times = interleaved_times(&all, sc, wk, &w, d).unwrap();
        assert_eq!(times.len(), all.len(), "{wk:?}");
        for t in &times {
            assert_eq!(t.len(), 3, "{wk:?}: {times:?}");
            assert!(t.iter().all(|c| c.nanos > 0), "{wk:?}: {times:?}");
        }
    }
}
