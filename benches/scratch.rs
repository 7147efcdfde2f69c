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

fn claim_overhead(c: &mut Criterion) {
    report_memory();
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
