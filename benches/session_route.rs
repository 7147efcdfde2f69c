//! Per-output allocation through the session router against a direct arena
//! allocation of the same size: what routing costs a kernel.
//!
//! `cargo bench --bench session_route`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use warmarena::session::{GraphSpec, RunContext, Session};
use warmarena::{ExecutionArena, IoArena};

fn route(c: &mut Criterion) {
    let g = GraphSpec::new()
        .input("x")
        .node("n", &["x"], &["out", "mid"])
        .node("m", &["mid"], &["y"])
        .output("out")
        .output("y");
    let exec = ExecutionArena::new();
    let io = IoArena::new();
    let s = Session::new(&g, exec.clone(), io.clone()).unwrap();
    let ctx = RunContext::new(&s);
    let mut grp = c.benchmark_group("output_alloc_64KiB");
    drop(exec.allocate(65536, 64).unwrap());
    drop(io.allocate(65536, 64).unwrap());
    grp.bench_function("direct_exec", |b| {
        b.iter(|| drop(exec.allocate(black_box(65536), 64).unwrap()))
    });
    grp.bench_function("routed_exec", |b| {
        b.iter(|| drop(ctx.output(black_box(0), 1, 65536, 64).unwrap()))
    });
    grp.bench_function("direct_io", |b| {
        b.iter(|| drop(io.allocate(black_box(65536), 64).unwrap()))
    });
    grp.bench_function("routed_io", |b| {
        b.iter(|| drop(ctx.output(black_box(0), 0, 65536, 64).unwrap()))
    });
    grp.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1))
        .sample_size(20);
    targets = route
}
criterion_main!(benches);
