//! The scoped global allocator against the system allocator and mimalloc,
//! each called through `GlobalAlloc`, for allocate+free pairs of 16 B to 1 MiB;
//! and what the scope machinery adds to calls made *outside* a scope.
//!
//! `cargo bench --bench global` (add `-- --quick` for a shorter run).
//!
//! - `pair/scoped`: `ScopedGlobal` inside `global::enter(&arena)`: the
//!   thread-local scope load, the arena's warm path, the owner lookup on free.
//! - `pair/system`, `pair/mimalloc`: the peers, called directly.
//! - `unscoped/scoped_global` vs `unscoped/system`: the same system
//!   allocator, once through `ScopedGlobal` with no scope open (one
//!   thread-local load on alloc, an owner lookup of two loads on free), once
//!   directly. The difference, halved, is the cost per call.
//! - then both comparisons again as printed tables, each variant's fastest of
//!   400 interleaved short rounds (robust on a shared, loaded machine; this
//!   is what `docs/benchmarks.md` quotes).
//!
//! This binary installs `ScopedGlobal` as its global allocator, as a user would.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};
use warmarena::global::{self, ScopedGlobal};

#[global_allocator]
static GLOBAL: ScopedGlobal = ScopedGlobal::system();

const SIZES: &[usize] = &[16, 256, 4 << 10, 64 << 10, 1 << 20];

/// `iters` allocate+free pairs through `a`; returns the time taken.
fn pairs<A: GlobalAlloc>(a: &A, layout: Layout, iters: u64) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        // SAFETY: non-zero layout; the block is freed with the same layout.
        unsafe {
            let p = a.alloc(black_box(layout));
            if p.is_null() {
                std::process::abort();
            }
            p.write(1);
            a.dealloc(black_box(p), layout);
        }
    }
    t.elapsed()
}

fn pair(c: &mut Criterion) {
    let arena = arena::exec_arena();
    let mi = mimalloc::MiMalloc;
    let mut g = c.benchmark_group("pair");
    g.throughput(Throughput::Elements(1));
    for &size in SIZES {
        let layout = Layout::from_size_align(size, 8).unwrap();
        g.bench_with_input(BenchmarkId::new("scoped", size), &layout, |b, &l| {
            // The scope is opened around the timed loop only, so the
            // harness's own allocations stay outside it.
            b.iter_custom(|iters| {
                let _s = global::enter(&arena);
                pairs(&GLOBAL, l, iters)
            })
        });
        g.bench_with_input(BenchmarkId::new("system", size), &layout, |b, &l| {
            b.iter_custom(|iters| pairs(&System, l, iters))
        });
        g.bench_with_input(BenchmarkId::new("mimalloc", size), &layout, |b, &l| {
            b.iter_custom(|iters| pairs(&mi, l, iters))
        });
    }
    g.finish();
}

fn unscoped(c: &mut Criterion) {
    // Keep an arena's mappings registered near the heap, so owner lookups
    // for system pointers find a leaf (the slower of the lookup's two cases).
    let arena = arena::exec_arena();
    let held = global::scope(&arena, || vec![0u8; 1 << 20]);
    let mut g = c.benchmark_group("unscoped");
    g.throughput(Throughput::Elements(1));
    for &size in &[16usize, 4 << 10] {
        let layout = Layout::from_size_align(size, 8).unwrap();
        g.bench_with_input(BenchmarkId::new("scoped_global", size), &layout, |b, &l| {
            b.iter_custom(|iters| pairs(&GLOBAL, l, iters))
        });
        g.bench_with_input(BenchmarkId::new("system", size), &layout, |b, &l| {
            b.iter_custom(|iters| pairs(&System, l, iters))
        });
    }
    g.finish();
    drop(held);
}

#[path = "common/arena.rs"]
mod arena;
#[path = "common/rounds.rs"]
mod rounds;

/// [`rounds::fastest_rounds`] with this bench's 400 rounds of 20 000 pairs.
fn fastest_rounds(l: Layout, variants: &[rounds::Variant<'_>]) -> Vec<f64> {
    rounds::fastest_rounds(l, variants, 400, 20_000)
}

/// Both comparisons again as fastest-of-rounds tables (printed), which
/// resolve fractions of a nanosecond where criterion's means on a loaded
/// two-core machine do not.
fn fastest_of_rounds(_: &mut Criterion) {
    let arena = arena::exec_arena();
    let mi = mimalloc::MiMalloc;
    let scoped = |l, n| {
        let _s = global::enter(&arena);
        pairs(&GLOBAL, l, n)
    };
    let system = |l, n| pairs(&System, l, n);
    let mimalloc = |l, n| pairs(&mi, l, n);
    let unscoped = |l, n| pairs(&GLOBAL, l, n);
    println!("\nallocate+free pair, ns, fastest of 400 interleaved rounds of 20000 pairs:");
    println!("| size | scoped (arena) | system | mimalloc | scoped / system | scoped / mimalloc |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for &size in SIZES {
        let l = Layout::from_size_align(size, 8).unwrap();
        let t = fastest_rounds(l, &[&scoped, &system, &mimalloc]);
        println!(
            "| {size} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.2}x |",
            t[0],
            t[1],
            t[2],
            t[0] / t[1],
            t[0] / t[2]
        );
    }
    // An arena mapping near the heap, as in `unscoped`.
    let held = global::scope(&arena, || vec![0u8; 1 << 20]);
    println!("\nno scope open: ScopedGlobal vs System, ns per pair, fastest of 400 rounds:");
    println!("| size | through ScopedGlobal | System directly | added per call |");
    println!("|---:|---:|---:|---:|");
    for &size in &[16usize, 256, 4 << 10] {
        let l = Layout::from_size_align(size, 8).unwrap();
        let t = fastest_rounds(l, &[&unscoped, &system]);
        println!(
            "| {size} | {:.2} | {:.2} | {:.2} |",
            t[0],
            t[1],
            (t[0] - t[1]) / 2.0
        );
    }
    drop(held);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = pair, unscoped, fastest_of_rounds
}
criterion_main!(benches);
