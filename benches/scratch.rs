//! Claim overhead per execution, shared vs private, and the bytes sharing
//! reclaims for six engines of differing sizes.
//!
//! Run: `cargo bench --bench scratch`. Each iteration is one execution's
//! claim and release over six engines in turn (the work itself is left out,
//! so the figure is pure overhead); divide by 6 for one claim.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use warmarena::scratch::{DeviceId, EngineScratch, Lane, ScratchMode, ScratchPool};

/// Six engines' requirements in MiB, largest about a third of the sum.
const SIX_MIB: [usize; 6] = [7, 18, 3, 12, 25, 5];

fn six(pool: &ScratchPool, mode: ScratchMode) -> Vec<EngineScratch> {
    SIX_MIB
        .iter()
        .map(|m| pool.engine(DeviceId::HOST, m << 20, mode).unwrap())
        .collect()
}

fn report_memory() {
    let shared_pool = ScratchPool::new();
    let shared = six(&shared_pool, ScratchMode::Shared);
    for e in &shared {
        drop(e.claim(e.requirement()).unwrap());
    }
    let private_pool = ScratchPool::new();
    let _private = six(&private_pool, ScratchMode::Private);
    let s = shared_pool.stats(DeviceId::HOST).unwrap();
    let p = private_pool.stats(DeviceId::HOST).unwrap();
    println!(
        "scratch memory, 6 engines {SIX_MIB:?} MiB: private holds {} B, shared holds {} B, \
         reclaimed {} B (sum - max); shared peak during growth {} B, growths {}",
        p.held_bytes,
        s.held_bytes,
        s.reclaimed_bytes(),
        s.peak_held_bytes,
        s.growths
    );
}

/// Two threads, each running six engines (64 KiB units: 192 KiB to 1.6 MiB)
/// that fill their whole request and read it back: once both on the default lane, once a lane each.
fn report_lanes() {
    const EXECUTIONS: usize = 3_000;
    for (name, per_thread) in [("one lane", false), ("lane per thread", true)] {
        let pool = ScratchPool::new();
        let start = std::time::Instant::now();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let engines: Vec<_> = SIX_MIB
                        .iter()
                        .map(|k| {
                            pool.engine(DeviceId::HOST, k << 16, ScratchMode::Shared)
                                .unwrap()
                        })
                        .collect();
                    let lane = if per_thread {
                        Lane::current_thread()
                    } else {
                        Lane::DEFAULT
                    };
                    for i in 0..EXECUTIONS {
                        let e = &engines[i % engines.len()];
                        let mut g = e.claim_on(lane, e.requirement()).unwrap();
                        g.as_mut_slice().unwrap().fill(i as u8);
                        let sum: u64 = g.as_slice().unwrap().iter().map(|&b| b as u64).sum();
                        black_box(sum);
                    }
                });
            }
        });
        let wall = start.elapsed();
        let st = pool.stats(DeviceId::HOST).unwrap();
        println!(
            "scratch lanes, 2 threads x {EXECUTIONS} executions ({name}): wall {:.1} ms, \
             contended claims {} of {}, waited {:.1} ms in all, held {} B",
            wall.as_secs_f64() * 1e3,
            st.contended_claims,
            st.claims,
            st.wait_ns as f64 / 1e6,
            st.shared_bytes
        );
    }
}

fn claim_overhead(c: &mut Criterion) {
    report_memory();
    report_lanes();
    let mut g = c.benchmark_group("scratch_claim_6_engines");
    for (name, mode) in [
        ("private", ScratchMode::Private),
        ("shared", ScratchMode::Shared),
    ] {
        let pool = ScratchPool::new();
        let engines = six(&pool, mode);
        for e in &engines {
            drop(e.claim(e.requirement()).unwrap()); // warm: grown once
        }
        g.bench_function(name, |b| {
            b.iter(|| {
                for e in &engines {
                    let guard = e.claim(black_box(e.requirement())).unwrap();
                    black_box(guard.as_ptr());
                }
            })
        });
        g.bench_function(format!("{name}_thread_lane"), |b| {
            let lane = Lane::current_thread();
            b.iter(|| {
                for e in &engines {
                    let guard = e.claim_on(lane, black_box(e.requirement())).unwrap();
                    black_box(guard.as_ptr());
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, claim_overhead);
criterion_main!(benches);
