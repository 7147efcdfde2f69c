//! `libwarmarena.so` under `LD_PRELOAD`, and linked: C and C++ programs
//! (`tests/c/`) compiled with the system compiler, run section by section
//! with the library preloaded, and once without it (the same checks hold
//! for glibc, but for those marked "arena only"); the C test again, and a
//! small program that checks its mallocs reach the arena, linked with
//! `-lwarmarena` (an rpath to the library's directory, no `LD_PRELOAD`).
//! Without `cc` (or `c++`) a test says so and passes: the library itself
//! needs no C compiler.
//!
//! The library is the package's cdylib, which cargo builds before this
//! test (`target/<profile>/libwarmarena.so`, next to the test's `deps/`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The built library: `<target>/<profile>/libwarmarena.so`.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests run from <target>/<profile>/deps");
    let so = profile_dir.join("libwarmarena.so");
    assert!(
        so.exists(),
        "{} is missing: cargo builds the package's cdylib before its tests",
        so.display()
    );
    so
}

/// Where the compiled programs go: beside the test binary, so each
/// profile has its own.
fn work_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe.parent().expect("deps").join("preload-c");
    std::fs::create_dir_all(&dir).expect("a work directory");
    dir
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// Whether `compiler` runs; prints why a test is skipped if not.
fn have(compiler: &str) -> bool {
    let ok = Command::new(compiler)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: no `{compiler}` on PATH to build the test program");
    }
    ok
}

fn compile(compiler: &str, args: &[&str]) {
    let out = Command::new(compiler)
        .args(args)
        .output()
        .expect("the compiler runs");
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The flags that link a program with the built library: `-lwarmarena`
/// from its directory, found there at run time through an rpath.
/// (`--no-as-needed`: the library stays a dependency where the compiler
/// drops unused ones by default; the program's `malloc` is reason enough.)
fn link_flags() -> Vec<String> {
    let dir = library()
        .parent()
        .expect("the library's directory")
        .to_owned();
    let dir = dir.to_str().expect("a UTF-8 target path");
    vec![
        format!("-L{dir}"),
        format!("-Wl,-rpath,{dir}"),
        "-Wl,--no-as-needed".to_string(),
        "-lwarmarena".to_string(),
    ]
}

/// The programs, compiled once per test binary: the C test (preloaded, and
/// a second build linked with the library), the link test, the `dlopen`
/// library under 20 names, and (if `c++` exists) the C++ test.
struct Built {
    dir: PathBuf,
    dl_copies: Vec<PathBuf>,
    cxx: bool,
}

fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !have("cc") {
                return None;
            }
            let dir = work_dir();
            let src = sources();
            let prog = dir.join("preload_test");
            compile(
                "cc",
                &[
                    "-O1",
                    "-g",
                    "-pthread",
                    "-Wall",
                    "-Wno-alloc-size-larger-than",
                    "-Wno-use-after-free",
                    "-o",
                    prog.to_str().unwrap(),
                    src.join("preload_test.c").to_str().unwrap(),
                    "-ldl",
                ],
            );
            let linked = dir.join("preload_test_linked");
            let link = link_flags();
            let (c_test, link_c) = (src.join("preload_test.c"), src.join("link_test.c"));
            let mut args = vec![
                "-O1",
                "-g",
                "-pthread",
                "-Wall",
                "-Wno-alloc-size-larger-than",
                "-Wno-use-after-free",
                "-o",
                linked.to_str().unwrap(),
                c_test.to_str().unwrap(),
                "-ldl",
            ];
            args.extend(link.iter().map(String::as_str));
            compile("cc", &args);
            let link_test = dir.join("link_test");
            let mut args = vec![
                "-O1",
                "-g",
                "-Wall",
                "-o",
                link_test.to_str().unwrap(),
                link_c.to_str().unwrap(),
                "-ldl",
            ];
            args.extend(link.iter().map(String::as_str));
            compile("cc", &args);
            let lib = dir.join("libdltest.so");
            compile(
                "cc",
                &[
                    "-O1",
                    "-fPIC",
                    "-shared",
                    "-o",
                    lib.to_str().unwrap(),
                    src.join("dltest.c").to_str().unwrap(),
                ],
            );
            // Twenty distinct paths are twenty modules, each with TLS: more
            // than the slack of a thread's TLS vector, so it grows.
            let dl_copies = (0..20)
                .map(|i| {
                    let p = dir.join(format!("libdltest{i}.so"));
                    std::fs::copy(&lib, &p).expect("copy the dlopen library");
                    p
                })
                .collect();
            let cxx = if have("c++") {
                compile(
                    "c++",
                    &[
                        "-O1",
                        "-g",
                        "-pthread",
                        "-std=c++17",
                        "-o",
                        dir.join("cxx_test").to_str().unwrap(),
                        src.join("cxx_test.cpp").to_str().unwrap(),
                    ],
                );
                true
            } else {
                false
            };
            Some(Built {
                dir,
                dl_copies,
                cxx,
            })
        })
        .as_ref()
}

/// What a run printed and how it ended.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `program args` (with the library preloaded if `preload`), killed
/// after `limit`.
fn run(program: &Path, args: &[&str], preload: bool, env: &[(&str, &str)], limit: Duration) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("LD_PRELOAD")
        .env_remove("WARMARENA_STATS");
    if preload {
        cmd.env("LD_PRELOAD", library());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the test program starts");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{} {args:?} ran past {limit:?} (a deadlock?)\nstdout:\n{}\nstderr:\n{}",
                program.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs one section of the C test under the library, then without it.
fn section(name: &str, extra: &[&str]) {
    let Some(b) = built() else { return };
    let prog = b.dir.join("preload_test");
    let mut args = vec![name];
    args.extend_from_slice(extra);
    for preload in [true, false] {
        let r = run(&prog, &args, preload, &[], Duration::from_secs(120));
        let with = if preload { "with" } else { "without" };
        assert!(
            r.ok && r.stdout.contains(&format!("ok {name}")),
            "section {name} {with} the library failed\nstdout:\n{}\nstderr:\n{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn every_exported_function_with_good_input() {
    section("api", &[]);
}

#[test]
fn bad_input_gets_glibcs_answers() {
    section("bad", &[]);
}

#[test]
fn allocations_in_constructors_and_at_exit() {
    section("ctor", &[]);
}

#[test]
fn hundreds_of_short_lived_threads_with_tls_destructors() {
    section("threads", &["256"]);
}

#[test]
fn producer_consumer_frees_on_other_threads() {
    section("prodcons", &[]);
}

#[test]
fn forked_children_allocate_and_free_at_once() {
    section("fork", &[]);
}

#[test]
fn foreign_pointers_go_back_to_the_system_allocator() {
    section("foreign", &[]);
}

#[test]
fn dlopen_of_libraries_with_tls_and_allocating_constructors() {
    let Some(b) = built() else { return };
    let libs: Vec<&str> = b.dl_copies.iter().map(|p| p.to_str().unwrap()).collect();
    section("dlopen", &libs);
}

#[test]
fn repeated_large_temporaries_take_no_new_faults() {
    section("warm", &[]);
}

/// The C test linked with `-lwarmarena`, run without `LD_PRELOAD`: the
/// sections pass with the library as a dependency too, its "arena only"
/// checks included (the program finds its `malloc` is the library's).
#[test]
fn linked_with_lwarmarena_every_section_passes() {
    let Some(b) = built() else { return };
    let prog = b.dir.join("preload_test_linked");
    let libs: Vec<&str> = b.dl_copies.iter().map(|p| p.to_str().unwrap()).collect();
    let sections: [(&str, Vec<&str>); 9] = [
        ("api", vec![]),
        ("bad", vec![]),
        ("ctor", vec![]),
        ("threads", vec!["64"]),
        ("prodcons", vec![]),
        ("fork", vec![]),
        ("foreign", vec![]),
        ("dlopen", libs),
        ("warm", vec![]),
    ];
    for (name, extra) in sections {
        let mut args = vec![name];
        args.extend_from_slice(&extra);
        let r = run(&prog, &args, false, &[], Duration::from_secs(120));
        assert!(
            r.ok && r.stdout.contains(&format!("ok {name}")),
            "section {name} linked with the library failed\nstdout:\n{}\nstderr:\n{}",
            r.stdout,
            r.stderr
        );
    }
}

/// A program linked with `-lwarmarena` (no `LD_PRELOAD`): its `malloc` is
/// the library's, and its allocations, glibc's internal ones included, are
/// the arena's (`mallinfo2` counts each as a live arena buffer, and the
/// live bytes grow by exactly their usable sizes); `WARMARENA_STATS=1`
/// prints the summary at exit.
#[test]
fn linked_with_lwarmarena_mallocs_are_the_arenas() {
    let Some(b) = built() else { return };
    let prog = b.dir.join("link_test");
    let r = run(
        &prog,
        &[],
        false,
        &[("WARMARENA_STATS", "1")],
        Duration::from_secs(60),
    );
    assert!(
        r.ok && r.stdout.contains("ok link"),
        "link test failed\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains("warmarena: pid") && r.stderr.contains("peak live"),
        "no summary at exit from the linked library:\n{}",
        r.stderr
    );
}

#[test]
fn operator_new_and_delete_reach_the_library() {
    let Some(b) = built() else { return };
    if !b.cxx {
        return;
    }
    let r = run(
        &b.dir.join("cxx_test"),
        &[],
        true,
        &[],
        Duration::from_secs(120),
    );
    assert!(
        r.ok && r.stdout.contains("ok cxx"),
        "C++ test failed\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn stats_summary_at_exit_and_a_retention_cap() {
    let Some(b) = built() else { return };
    let prog = b.dir.join("preload_test");
    let r = run(
        &prog,
        &["warm"],
        true,
        &[("WARMARENA_STATS", "1")],
        Duration::from_secs(60),
    );
    assert!(r.ok, "stderr:\n{}", r.stderr);
    assert!(
        r.stderr.contains("warmarena: pid") && r.stderr.contains("peak live"),
        "no summary at exit:\n{}",
        r.stderr
    );
    // A cap of 0 keeps nothing: the warm section's temporaries fault again.
    let r = run(
        &prog,
        &["warm"],
        true,
        &[("WARMARENA_STATS", "1"), ("WARMARENA_RETAIN_CAP", "0")],
        Duration::from_secs(60),
    );
    let faults: u64 = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("warm faults over 8 steps: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no fault count:\n{}", r.stdout));
    assert!(
        faults >= 8 * 1000,
        "with nothing retained every step faults: {faults}"
    );
    assert!(r.stderr.contains("evicted"), "stderr:\n{}", r.stderr);
    // WARMARENA_DISABLE=1 hands everything to the system allocator.
    let r = run(
        &prog,
        &["bad"],
        true,
        &[("WARMARENA_DISABLE", "1")],
        Duration::from_secs(60),
    );
    assert!(r.ok && r.stdout.contains("ok bad"), "stderr:\n{}", r.stderr);
}

#[test]
fn a_program_that_does_nothing_starts_fast() {
    if !Path::new("/bin/true").exists() {
        eprintln!("skipped: no /bin/true");
        return;
    }
    let so = library();
    let time = |preload: bool| {
        let mut best = Duration::MAX;
        for _ in 0..20 {
            let mut cmd = Command::new("/bin/true");
            cmd.env_remove("LD_PRELOAD");
            if preload {
                cmd.env("LD_PRELOAD", &so);
            }
            let t = Instant::now();
            assert!(cmd.status().expect("true runs").success());
            best = best.min(t.elapsed());
        }
        best
    };
    let (with, without) = (time(true), time(false));
    eprintln!("`true`: {with:?} with the library, {without:?} without (best of 20)");
}
