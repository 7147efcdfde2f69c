//! Planner benchmarks: our planner against greedy-by-size on the data sets.
//!
//! `cargo bench --bench planner` prints a markdown table (height / lower
//! bound and time per instance, ours with a 1000 ms budget and greedy),
//! then runs criterion timings of the constructive pass on 10 000 random
//! buffers and of both planners on a few instances. Data: the crate's
//! `tests/data` and `$WARMARENA_DATA/planner` (default `../shared/data`).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::Criterion;
use warmarena::planner::{
    greedy_by_size, parse_csv, solve, validate_placement, Budget, Buffer, SolveOptions,
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

fn ours(bufs: &[Buffer], budget_ms: u64) -> (usize, usize, bool) {
    let start = Instant::now();
    let limit = budget_ms as f64 / 1000.0;
    let stop = move || start.elapsed().as_secs_f64() >= limit;
    // About 1000 search nodes a millisecond here (the decision search's
    // nodes are the cheap ones): the node budget splits the time between
    // search and local search; the callback is the hard stop.
    let opts = SolveOptions {
        max_nodes: budget_ms * 1000,
        ..SolveOptions::default()
    };
    let sol = solve(
        bufs,
        &opts,
        &Budget {
            max_nodes: u64::MAX,
            stop: Some(&stop),
        },
    )
    .unwrap();
    assert_eq!(validate_placement(bufs, &sol.placement, 1), Ok(()));
    (sol.placement.height, sol.lower_bound, sol.optimal)
}

fn table() {
    println!("| instance | buffers | LB | ours height | ours / LB | ours ms | optimal | greedy / LB | greedy ms |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, path) in instances() {
        let Some(bufs) = load(&path) else {
            println!("| {name} | (missing: {}) | | | | | | | |", path.display());
            continue;
        };
        let t = Instant::now();
        let (h, lb, opt) = ours(&bufs, 1000);
        let ours_ms = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        let g = greedy_by_size(&bufs);
        let greedy_ms = t.elapsed().as_secs_f64() * 1000.0;
        let r = |x: usize| x as f64 / lb.max(1) as f64;
        println!(
            "| {name} | {} | {lb} | {h} | {:.4} | {ours_ms:.1} | {} | {:.4} | {greedy_ms:.1} |",
            bufs.len(),
            r(h),
            if opt { "yes" } else { "no" },
            r(g.height)
        );
    }
}

/// `n` random buffers: lifetimes of 1..64 steps over 4n steps, sizes 64 B..1 MiB.
fn random_buffers(n: usize) -> Vec<Buffer> {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|_| {
            let lo = (next() % (4 * n as u64)) as usize;
            let len = 1 + (next() % 64) as usize;
            let size = 64 << (next() % 15);
            Buffer::new(lo, lo + len, size)
        })
        .collect()
}

fn timings(c: &mut Criterion) {
    let constructive = SolveOptions {
        max_nodes: 0,
        ..SolveOptions::default()
    };
    let random = random_buffers(10_000);
    c.bench_function("constructive/random_10000", |b| {
        b.iter(|| solve(black_box(&random), &constructive, &Budget::nodes(0)).unwrap())
    });
    c.bench_function("greedy/random_10000", |b| {
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
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    timings(&mut c);
    c.final_summary();
}
