//! Sample pictures for the docs (`docs/plan.png`, `docs/report.png`):
//! a MiniMalloc instance planned by the library, a large trace when
//! `../shared/data` is there, and a report from the README's figures.
//!
//! `cargo test --lib draw::samples -- --ignored` writes them to
//! `target/pictures/`; `scripts/pictures.sh` takes the screenshots.

use super::convert::plan_picture_of_solution;
use super::{plan_svg, report_html, BackendFigures, ReportPicture, ScenarioPicture};
use std::path::{Path, PathBuf};
use std::time::Instant;
use warmarena::planner::{parse_csv, solve, Budget, SolveOptions};

/// The first of `candidates` (relative to the crate, then to its parent) that exists.
fn find(candidates: &[&str]) -> Option<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    candidates
        .iter()
        .flat_map(|c| [here.join(c), here.join("..").join(c)])
        .find(|p| p.exists())
}

/// `target/pictures` of the workspace (the folder holding `Cargo.lock`),
/// wherever this crate sits in it.
fn out_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here
        .ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .unwrap_or(here);
    let dir = root.join("target/pictures");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn plan_file(path: &Path, title: &str, max_nodes: u64, out: &str) {
    let inst = parse_csv(&std::fs::read_to_string(path).unwrap()).unwrap();
    let t0 = Instant::now();
    let opts = SolveOptions::default().max_nodes(max_nodes);
    let sol = solve(&inst.buffers, &opts, &Budget::nodes(u64::MAX)).unwrap();
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    let p = plan_picture_of_solution(title, &inst.ids, &inst.buffers, &sol, ms);
    let svg = plan_svg(&p).unwrap();
    roxmltree::Document::parse(&svg).unwrap();
    let dest = out_dir().join(out);
    std::fs::write(&dest, svg).unwrap();
    println!("wrote {} ({} buffers)", dest.display(), p.buffers.len());
}

#[test]
#[ignore = "writes sample pictures to target/pictures (scripts/pictures.sh)"]
fn write_sample_plans() {
    let i = find(&["tests/data/minimalloc/I.1048576.csv"]).expect("tests/data");
    plan_file(
        &i,
        "minimalloc I.1048576.csv (tests/data)",
        500_000,
        "plan.svg",
    );
    // An instance whose plan stays above the lower bound: two lines.
    let d = find(&["tests/data/minimalloc/D.1048576.csv"]).expect("tests/data");
    plan_file(
        &d,
        "minimalloc D.1048576.csv (tests/data)",
        500_000,
        "plan_gap.svg",
    );
    // Ten buffers over a dozen steps: integer time ticks only.
    let t = find(&["tests/data/tvm/simple.csv"]).expect("tests/data");
    plan_file(&t, "tvm simple.csv (tests/data)", 500_000, "plan_small.svg");
    let data = std::env::var("WARMARENA_DATA").unwrap_or_else(|_| "../shared/data".into());
    match find(&[&format!("{data}/planner/iopddl/S_1.csv")]) {
        Some(s1) => plan_file(&s1, "iopddl S_1.csv", 0, "plan_large.svg"),
        None => println!("skipped plan_large.svg: no {data}/planner/iopddl/S_1.csv"),
    }
}

/// A row of the README's tables (large model live peak taken as 130 MiB).
fn fig(name: &str, cold: u64, warm: u64, ms: [f64; 3], rss_over_peak: f64) -> BackendFigures {
    let peak = 130usize << 20;
    BackendFigures {
        name: name.into(),
        cold_faults: cold,
        warm_faults: warm,
        syscalls: (name == "warmarena" || name == "planned").then_some(0),
        system_bytes: (name == "warmarena" || name == "planned").then_some(0),
        copies: 0,
        warm_ms_median: ms[0],
        warm_ms_min: ms[1],
        warm_ms_max: ms[2],
        rss_growth_bytes: (rss_over_peak * peak as f64) as usize,
        live_peak_bytes: peak,
    }
}

/// The report's figures as README.md shows them.
pub(crate) fn readme_report() -> ReportPicture {
    let sc = |title: &str, backends| ScenarioPicture {
        title: title.into(),
        backends,
        notes: vec![],
    };
    ReportPicture {
        title: "warmarena report".into(),
        machine: "figures of README.md (2-core build machine, other builds running)".into(),
        command: "warmarena report --html report.html".into(),
        notes: vec![
            "each scenario: 1 cold run + 5 warm runs per back end, one process, same kernels; RSS/peak = RSS growth over the scenario / live peak".into(),
        ],
        scenarios: vec![
            sc(
                "scenario 1 (drop-outputs) on large-model",
                vec![
                    fig("warmarena", 45, 0, [20.15, 19.57, 21.77], 1.20),
                    fig("planned", 38, 0, [18.12, 17.85, 18.96], 1.00),
                    fig("glibc", 88971, 87360, [237.03, 230.63, 248.81], 0.0),
                    fig("mimalloc", 941, 0, [22.50, 19.80, 23.25], 1.49),
                    fig("jemalloc", 104509, 98320, [253.69, 253.19, 255.30], 0.40),
                ],
            ),
            sc(
                "scenario 2 (hold-8-runs) on large-model",
                vec![
                    fig("warmarena", 45, 6, [19.21, 18.34, 19.98], 1.20),
                    fig("planned", 37, 6, [18.30, 17.16, 19.98], 1.00),
                    fig("glibc", 87398, 87366, [226.27, 225.09, 229.64], 0.0),
                    fig("mimalloc", 1736, 0, [21.42, 20.92, 22.44], 1.44),
                    fig("jemalloc", 104475, 98327, [250.20, 249.63, 252.93], 0.40),
                ],
            ),
            sc(
                "scenario 6 (idle-gaps) on large-model",
                vec![
                    fig("warmarena", 44, 0, [25.16, 24.82, 25.90], 1.20),
                    fig("planned", 38, 0, [25.99, 25.42, 28.60], 1.00),
                    fig("glibc", 87398, 87360, [226.52, 223.54, 247.74], 0.0),
                    fig("mimalloc", 1991, 0, [27.08, 22.97, 30.25], 1.28),
                    fig("jemalloc", 104475, 98320, [253.24, 247.44, 258.71], 0.40),
                ],
            ),
            sc(
                "scenario 1 (drop-outputs) on example-net",
                vec![
                    fig("warmarena", 6, 0, [2.18, 2.16, 2.22], 2.19),
                    fig("glibc", 1187, 0, [2.20, 2.11, 3.27], 1.45),
                    fig("mimalloc", 7, 0, [2.17, 2.16, 2.22], 2.91),
                    fig("jemalloc", 942, 0, [2.09, 2.07, 2.21], 1.33),
                ],
            ),
        ],
    }
}

#[test]
#[ignore = "writes sample pictures to target/pictures (scripts/pictures.sh)"]
fn write_sample_report() {
    let html = report_html(&readme_report()).unwrap();
    let dest = out_dir().join("report.html");
    std::fs::write(&dest, html).unwrap();
    println!("wrote {}", dest.display());
}

#[test]
fn a_planned_tvm_instance_draws_one_rectangle_per_buffer() {
    let path = find(&["tests/data/tvm/deep_speech.csv"]).expect("tests/data");
    let inst = parse_csv(&std::fs::read_to_string(path).unwrap()).unwrap();
    let sol = solve(
        &inst.buffers,
        &SolveOptions::default(),
        &Budget::nodes(u64::MAX),
    )
    .unwrap();
    let p = plan_picture_of_solution("deep_speech", &inst.ids, &inst.buffers, &sol, 1.0);
    let svg = plan_svg(&p).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("buf"))
        .filter_map(|n| n.first_element_child()?.text())
        .collect();
    assert_eq!(titles.len(), inst.buffers.len());
    assert_eq!(titles.len(), 184);
    let first = &inst.buffers[0];
    let expect = format!("{}: {} B (", inst.ids[0], first.size);
    assert!(titles[0].starts_with(&expect), "{}", titles[0]);
    assert!(titles[0].ends_with(&format!(
        "live [{}, {}), offset {}",
        first.lower, first.upper, sol.placement.offsets[0]
    )));
    // README: deep_speech packs at its lower bound, 100352 bytes.
    let header = doc
        .descendants()
        .filter_map(|n| n.text())
        .find(|t| t.trim().starts_with("height 1"))
        .unwrap();
    assert!(
        header
            .trim()
            .starts_with("height 100352 B (98 KiB) = 1.0000 × LB, optimal"),
        "{header}"
    );
}

#[test]
#[ignore = "runs two report scenarios (about a minute in release) and writes target/pictures/report_measured.html"]
fn write_measured_report() {
    use super::convert::{command_line, machine_line, report_picture};
    use crate::report::{collect, ReportOptions, Workloads};
    use crate::scenario::Scenario;
    let o = ReportOptions {
        runs: 3,
        scale: 0.25,
        idle_ms: 50,
        scenarios: vec![Scenario::DropOutputs, Scenario::OneOffThenTrim],
        ..ReportOptions::default()
    };
    let w = Workloads::build(&o).unwrap();
    let rows = collect(&o, &w, |_, _, _| {}).unwrap();
    let peak = w.large_peak();
    let pic = report_picture(
        &rows,
        |r| if r.workload == "large-model" { peak } else { 0 },
        machine_line(),
        command_line(),
        vec![format!("{}; 3 warm runs per back end", w.large_label)],
    );
    assert_eq!(pic.scenarios.len(), rows.len());
    let html = report_html(&pic).unwrap();
    assert_eq!(html.matches("<svg").count(), rows.len());
    let dest = out_dir().join("report_measured.html");
    std::fs::write(&dest, html).unwrap();
    println!("wrote {}", dest.display());
}
