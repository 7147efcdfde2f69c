//! The `warmarena` binary as a user runs it: help and version, errors with
//! exit code 2 on standard error, and the pictures written by `plan --svg`
//! and `report --html`.

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
fn bad_arguments_exit_2_with_the_reason_on_stderr() {
    for args in [
        &["--no-such-option"][..],
        &["report", "--runs", "0"],
        &["report", "--scenarios", "7"],
        &["report", "--scale", "-1"],
        &["plan"],
        &["plan", "/no/such/file.csv"],
    ] {
        let out = warmarena().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        assert!(!out.stderr.is_empty(), "{args:?}: a reason on stderr");
    }
}

#[test]
fn plan_svg_draws_one_titled_rectangle_per_buffer_and_json_stays_clean() {
    let file = data("tvm/simple.csv"); // shipped in the repository
    let svg_path = scratch_file("simple.svg");
    let out = warmarena()
        .args(["plan", "--json", "--budget-ms", "200", "--svg"])
        .arg(&svg_path)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = String::from_utf8(out.stdout).unwrap();
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
    let out = warmarena()
        .args(["report", "--scale", "0.05", "--runs", "1", "--idle-ms", "1"])
        .args(["--scenarios", "1,4", "--html"])
        .arg(&html_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
