//! Pattern mode: a planned-hit allocate+free pair against an ordinary warm
//! arena pair and mimalloc, in one process; and the time to plan a
//! 600 000-allocation run at its boundary.
//!
//! Then the three pairs again as a printed table, each variant's fastest
//! of 400 interleaved rounds (one planned run of 1 024 pairs, its boundary
//! included, per round), as `benches/global.rs` does: interference on a
//! shared machine only adds time, so the fastest round is the figure that
//! moves least between processes.
//!
//! `cargo bench -p warmarena --bench pattern` (add `-- --quick` for a shorter run).

use criterion::{criterion_group, criterion_main, Criterion};
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use warmarena::{ArenaConfig, ExecutionArena};

/// Pairs per run of the planned arena (a run of an inference-sized graph):
/// the run is `RUN` pairs of one size,
/// learned once, then replayed; each iteration is one pair.
const RUN: usize = 1024;

fn pairs(c: &mut Criterion) {
    let mut g = c.benchmark_group("pattern_pair");
    let size = 4096;
    let planned = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    planned.begin_run();
    for _ in 0..RUN {
        drop(planned.allocate(size, 64).unwrap());
    }
    planned.begin_run();
    let mut left = RUN;
    g.bench_function("planned_hit", |b| {
        b.iter(|| {
            if left == 0 {
                planned.begin_run();
                left = RUN;
            }
            left -= 1;
            drop(black_box(planned.allocate(size, 64).unwrap()));
        })
    });
    let s = planned.stats();
    println!(
        "planned arena: hits {} misses {} planned allocations {}",
        s.pattern_hits, s.pattern_misses, s.pattern_planned_allocations
    );
    let warm = ExecutionArena::new();
    drop(warm.allocate(size, 64).unwrap());
    g.bench_function("arena_warm", |b| {
        b.iter(|| drop(black_box(warm.allocate(size, 64).unwrap())))
    });
    let mi = mimalloc::MiMalloc;
    let layout = Layout::from_size_align(size, 64).unwrap();
    g.bench_function("mimalloc", |b| {
        b.iter(|| {
            // SAFETY: non-zero layout, freed with the same layout.
            unsafe {
                let p = mi.alloc(layout);
                mi.dealloc(black_box(p), layout);
            }
        })
    });
    g.finish();
}

/// Planning a learned 600 000-allocation run at its boundary (the
/// learning run itself is not timed).
fn plan_600k(c: &mut Criterion) {
    let mut g = c.benchmark_group("pattern_plan");
    g.sample_size(10);
    g.bench_function("boundary_after_600k", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                let arena = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
                arena.begin_run();
                let mut live = std::collections::VecDeque::new();
                for i in 0..600_000usize {
                    live.push_back(arena.allocate(64 + (i * 7919) % 4000, 16).unwrap());
                    if live.len() > 64 {
                        live.pop_front();
                    }
                }
                drop(live);
                let t = std::time::Instant::now();
                arena.begin_run();
                total += t.elapsed();
                let s = arena.stats();
                assert_eq!(s.pattern_learned, 1);
                black_box(s);
            }
            total
        })
    });
    g.finish();
}

/// One round: `RUN` pairs of `pair`; ns per pair.
fn round(mut pair: impl FnMut()) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..RUN {
        pair();
    }
    t.elapsed().as_nanos() as f64 / RUN as f64
}

fn fastest_of_rounds(_: &mut Criterion) {
    const ROUNDS: usize = 400;
    let size = 4096;
    let planned = ExecutionArena::with_config(ArenaConfig::default().pattern(true));
    planned.begin_run();
    for _ in 0..RUN {
        drop(planned.allocate(size, 64).unwrap());
    }
    let warm = ExecutionArena::new();
    drop(warm.allocate(size, 64).unwrap());
    let mi = mimalloc::MiMalloc;
    let layout = Layout::from_size_align(size, 64).unwrap();
    let mut best = [f64::MAX; 3];
    for r in 0..ROUNDS {
        for k in 0..3 {
            let v = (r + k) % 3;
            let t = match v {
                0 => {
                    // A run boundary per round, inside the timed part.
                    let t0 = std::time::Instant::now();
                    planned.begin_run();
                    let b = t0.elapsed().as_nanos() as f64 / RUN as f64;
                    b + round(|| drop(black_box(planned.allocate(black_box(size), 64).unwrap())))
                }
                1 => round(|| drop(black_box(warm.allocate(black_box(size), 64).unwrap()))),
                // SAFETY: non-zero layout, freed with the same layout.
                _ => round(|| unsafe {
                    let p = mi.alloc(black_box(layout));
                    mi.dealloc(black_box(p), layout);
                }),
            };
            best[v] = best[v].min(t);
        }
    }
    let s = planned.stats();
    assert_eq!(s.pattern_misses, 0, "every planned request was a hit");
    println!(
        "\n4 KiB allocate+free pair, ns, fastest of {ROUNDS} interleaved rounds of {RUN} pairs:"
    );
    println!("| planned hit | arena warm | mimalloc | planned / mimalloc |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {:.2} | {:.2} | {:.2} | {:.2}x |",
        best[0],
        best[1],
        best[2],
        best[0] / best[2]
    );
}

criterion_group!(benches, pairs, plan_600k, fastest_of_rounds);
criterion_main!(benches);
