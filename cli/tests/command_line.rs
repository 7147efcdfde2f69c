//! The `warmarena` binary as a user runs it: help and version, usage errors
//! (exit status 2) and run failures (exit status 1) with the reason on
//! standard error, `--json` on standard output with its `"schema"`, and the
//! pictures written by `plan --svg` and `report --html`.

use std::path::PathBuf;
use std::process::Command;

fn warmarena() -> Command {
    Command::new(env!("CARGO_BIN_EXE_warmarena"))
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

/// Runs `cmd`, checks that it succeeded (its standard error as the
/// message otherwise) and returns its standard output.
fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn scratch_file(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    dir.join(format!("{}-{name}", std::process::id()))
}

#[test]
fn help_and_version_answer_on_stdout_for_the_binary_and_each_subcommand() {
    for args in [&["--help"][..], &["report", "--help"], &["plan", "--help"]] {
        let out = warmarena().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Usage: warmarena"), "{args:?}: {text}");
    }
    let out = warmarena().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("warmarena "));
}

#[test]
fn usage_errors_exit_2_with_the_reason_on_stderr() {
    for args in [
        &["--no-such-option"][..],
        &["report", "--runs", "0"],
        &["report", "--scenarios", "7"],
        &["report", "--scale", "-1"],
        &["report", "--scale", "0"],
        &["report", "--batch", "0"],
        &["report", "--backends", "tcmalloc"],
        &["report", "--trace", "x.csv", "--model", "cnn"],
        &["--trace", "x.csv", "--model", "transformer"],
        &["report", "--scale", "2", "--batch", "2"],
        &["--json", "report"],
        &["plan"],
        &["plan", "--scale", "2", "x.csv"],
    ] {
        let out = warmarena().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(!out.stderr.is_empty(), "{args:?}: a reason on stderr");
    }
}

#[test]
fn run_failures_exit_1_with_the_reason_on_stderr() {
    let bad_trace = scratch_file("bad-trace.csv");
    std::fs::write(&bad_trace, "id,lower,upper,size\n0,3,1,64\n").unwrap();
    let bad = bad_trace.to_str().unwrap();
    for args in [
        &["plan", "/no/such/file.csv"][..],
        &["plan", "--json", "/no/such/file.csv"],
        &["plan", bad],
        &["report", "--trace", "/no/such/trace.csv", "--runs", "1"],
        &["--trace", "/no/such/trace.csv"],
        &["report", "--trace", bad, "--json"],
    ] {
        let out = warmarena().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.starts_with("warmarena: "), "{args:?}: {err}");
    }
    std::fs::remove_file(bad_trace).ok();
}

#[test]
fn the_old_batch_option_is_a_hidden_alias_of_scale() {
    use warmarena_cli::report::parse;
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let o = parse(&args(&["--trace", "t.csv", "--batch", "3"])).unwrap();
    assert_eq!((o.trace.as_deref(), o.scale), (Some("t.csv"), 3.0));
    assert_eq!(parse(&args(&["--scale", "0.5"])).unwrap().scale, 0.5);
    let help = warmarena().args(["report", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("--scale") && help.contains("--backends"));
    assert!(!help.contains("--batch"), "the alias stays out of --help");
}

#[test]
fn backends_choose_the_rows_in_report_order() {
    use warmarena_cli::report::{available_backends, parse};
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(parse(&[]).unwrap().backends, available_backends());
    let o = parse(&args(&["--backends", "glibc,warmarena"])).unwrap();
    assert_eq!(o.backends, ["warmarena", "glibc"]);
}

#[test]
fn report_json_is_the_only_thing_on_stdout_and_carries_its_schema() {
    let text = stdout_of(
        warmarena()
            .args(["report", "--scale", "0.02", "--runs", "1", "--idle-ms", "1"])
            .args(["--scenarios", "1", "--backends", "warmarena,glibc,pattern"])
            .args(["--no-interleave", "--json"]),
    );
    let rows: serde_json::Value = serde_json::from_str(&text).expect("stdout is JSON");
    let rows = rows.as_array().expect("an array of rows");
    // The example network on warmarena and glibc; the large model on those
    // and pattern mode.
    let seen: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["workload"].as_str().unwrap(),
                r["backend"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("example-net", "warmarena"),
            ("example-net", "glibc"),
            ("large-model", "warmarena"),
            ("large-model", "pattern"),
            ("large-model", "glibc"),
        ]
    );
    for r in rows {
        assert_eq!(r["schema"], 1, "{r}");
        assert_eq!(r["scenario"], 1);
        assert!(r["warm_minor_faults_per_run"].is_array());
        assert_eq!(r["warm_ms_interleaved"], false);
    }
    assert_eq!(
        text.matches("{\n    \"schema\": 1,").count(),
        rows.len(),
        "schema first in every row"
    );
    assert!(
        rows[0]["exec_live_bytes"].is_u64(),
        "warmarena rows carry arena figures"
    );
    assert!(rows[1].get("exec_live_bytes").is_none());
    assert!(
        rows[1]["warm_syscalls"].is_null(),
        "the peers' syscalls are unknown"
    );
}

#[test]
fn plan_json_carries_its_schema() {
    let text = stdout_of(
        warmarena()
            .args(["plan", "--json", "--budget-ms", "100"])
            .arg(data("tvm/simple.csv")),
    );
    let v: serde_json::Value = serde_json::from_str(&text).expect("stdout is JSON");
    assert_eq!(v["schema"], 1);
    assert!(v["buffers"].as_u64().unwrap() > 0);
}

#[test]
fn plan_svg_draws_one_titled_rectangle_per_buffer_and_json_stays_clean() {
    let file = data("tvm/simple.csv"); // shipped in the repository
    let svg_path = scratch_file("simple.svg");
    let json = stdout_of(
        warmarena()
            .args(["plan", "--json", "--budget-ms", "200", "--svg"])
            .arg(&svg_path)
            .arg(&file),
    );
    assert!(json.trim_start().starts_with('{') && json.trim_end().ends_with('}'));
    let buffers: usize = json
        .split("\"buffers\": ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let titled = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter(|n| n.children().any(|c| c.has_tag_name("title")))
        .count();
    assert_eq!(titled, buffers);
    std::fs::remove_file(svg_path).ok();
}

#[test]
fn report_html_has_one_chart_per_scenario_and_no_external_reference() {
    let html_path = scratch_file("report.html");
    stdout_of(
        warmarena()
            .args(["report", "--scale", "0.05", "--runs", "1", "--idle-ms", "1"])
            .args(["--scenarios", "1,4", "--html"])
            .arg(&html_path),
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    // Two scenarios on two workloads (the example network and the large model).
    assert_eq!(
        html.matches("<svg").count(),
        4,
        "one chart per scenario and workload"
    );
    for banned in ["http://", "https://", "<script", "<link", " src="] {
        assert!(!html.contains(banned), "{banned}");
    }
    std::fs::remove_file(html_path).ok();
}
