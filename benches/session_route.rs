//! Per-output allocation through the session router against a direct arena
//! allocation of the same size: what routing costs a kernel.
//!
//! `cargo bench --bench session_route` (add `-- --quick` for a shorter run).
//!
//! Then the same four as a printed table at three sizes: each one's
//! fastest of 200 interleaved rounds of 2 000 pairs (`common/rounds.rs`:
//! criterion times each variant in a block of its own, and on a shared
//! machine one block runs fast and the next slow, which can outweigh a
//! routing step of a fraction of a nanosecond).

use criterion::{criterion_group, criterion_main, Criterion};
use std::alloc::Layout;
use std::hint::black_box;
use std::time::{Duration, Instant};
use warmarena::session::{ArenaRun, Graph, Session};
use warmarena::{ExecutionArena, IoArena};

fn graph() -> Graph {
    Graph::new()
        .input("x")
        .node("n", &["x"], &["out", "mid"])
        .node("m", &["mid"], &["y"])
        .output("out")
        .output("y")
}

fn route(c: &mut Criterion) {
    let g = graph();
    let exec = ExecutionArena::new();
    let io = IoArena::new();
    let s = Session::new(&g, exec.clone(), io.clone()).unwrap();
    let ctx = ArenaRun::new(&s);
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

#[path = "common/rounds.rs"]
mod rounds;

/// `n` allocate+drop pairs, timed.
fn timed(n: u64, mut pair: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        pair();
    }
    t.elapsed()
}

/// The four as a fastest-of-rounds table (printed).
fn fastest_of_rounds(_: &mut Criterion) {
    let exec = ExecutionArena::new();
    let io = IoArena::new();
    let s = Session::new(&graph(), exec.clone(), io.clone()).unwrap();
    let ctx = ArenaRun::new(&s);
    let direct_exec = |l: Layout, n| {
        timed(n, || {
            drop(black_box(exec.allocate(black_box(l.size()), 64).unwrap()))
        })
    };
    let routed_exec = |l: Layout, n| {
        timed(n, || {
            drop(black_box(
                ctx.output(black_box(0), 1, l.size(), 64).unwrap(),
            ))
        })
    };
    let direct_io = |l: Layout, n| {
        timed(n, || {
            drop(black_box(io.allocate(black_box(l.size()), 64).unwrap()))
        })
    };
    let routed_io = |l: Layout, n| {
        timed(n, || {
            drop(black_box(
                ctx.output(black_box(0), 0, l.size(), 64).unwrap(),
            ))
        })
    };
    println!(
        "\nrouted against direct allocate+drop, ns, fastest of 200 interleaved rounds of 2000:"
    );
    println!("| size | direct exec | routed exec | routed / direct | direct io | routed io | routed / direct |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for size in [256usize, 65536, 1 << 20] {
        let l = Layout::from_size_align(size, 64).unwrap();
        drop(exec.allocate(size, 64).unwrap());
        drop(io.allocate(size, 64).unwrap());
        let v: [rounds::Variant<'_>; 4] = [&direct_exec, &routed_exec, &direct_io, &routed_io];
        let t = rounds::fastest_rounds(l, &v, 200, 2_000);
        println!(
            "| {size} | {:.2} | {:.2} | {:.2}x | {:.2} | {:.2} | {:.2}x |",
            t[0],
            t[1],
            t[1] / t[0],
            t[2],
            t[3],
            t[3] / t[2]
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1))
        .sample_size(20);
    targets = route, fastest_of_rounds
}
criterion_main!(benches);
