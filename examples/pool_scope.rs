//! A rayon pool inside an arena's scope: each worker enters the arena's
//! scope for its whole life from rayon's `start_handler`, so the per-task
//! temporaries (64 KiB to 4 MiB) and rayon's own allocations come from warm
//! arena buffers. Prints, for 10 warm runs after one cold run, the page
//! faults of the whole process, the system allocator's calls on every
//! thread, and the time per run against the same pool unscoped.
//!
//! `cargo run --release --example pool_scope [WORKERS]` (default 2).

use rayon::prelude::*;
use std::time::Instant;
use warmarena::global::{self, CountingSystem, ScopedGlobal};
use warmarena::ExecutionArena;

#[global_allocator]
static GLOBAL: ScopedGlobal<CountingSystem> = ScopedGlobal::over(CountingSystem);

fn process_faults() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    unsafe {
        let mut u: libc::rusage = core::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt as u64
    }
}

fn step(pool: &rayon::ThreadPool, input: &[f32]) -> f64 {
    pool.install(|| {
        input
            .par_chunks(4096)
            .enumerate()
            .map(|(k, chunk)| {
                let mut sum = 0.0f64;
                for size in [16 << 10, 64 << 10, 256 << 10, 1 << 20] {
                    let mut tmp = vec![0f32; size];
                    for (i, t) in tmp.iter_mut().enumerate() {
                        *t = chunk[i % chunk.len()] * (k + 1) as f32;
                    }
                    sum += tmp.iter().step_by(997).map(|&x| x as f64).sum::<f64>();
                }
                sum
            })
            .sum()
    })
}

/// Faults, system allocations and median ms of 10 warm runs after a cold one.
fn measure(pool: &rayon::ThreadPool, input: &[f32]) -> (u64, u64, f64, f64) {
    let check = step(pool, input);
    warmarena::faults::pre_touch_stack();
    // Made before the counters are read: in the scope this buffer is a
    // request the cold run never made, so it would be a cold allocation
    // of the arena inside the window (with its pages and metadata).
    let mut ms = Vec::with_capacity(10);
    let (f0, c0) = (process_faults(), CountingSystem::calls_all_threads());
    for _ in 0..10 {
        let t = Instant::now();
        assert_eq!(step(pool, input), check);
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let faults = process_faults() - f0;
    let calls = CountingSystem::calls_all_threads() - c0;
    (faults, calls, ms[5], check)
}

fn main() {
    let workers: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(2);
    let input: Vec<f32> = (0..64 * 4096).map(|i| (i % 251) as f32 * 0.5).collect();
    let plain = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .unwrap();
    let (pf, pc, pms, psum) = measure(&plain, &input);
    drop(plain);

    let arena = ExecutionArena::new();
    let a = arena.clone();
    let scoped = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .start_handler(move |_| {
            global::enter_for_thread(&a);
            warmarena::faults::pre_touch_stack();
        })
        .build()
        .unwrap();
    let _main = global::enter(&arena);
    let (sf, sc, sms, ssum) = measure(&scoped, &input);
    drop(_main);

    assert_eq!(psum, ssum, "same results");
    println!(
        "10 warm runs of a {workers}-worker rayon pool (64 tasks, temporaries of 64 KiB to 4 MiB):"
    );
    println!(
        "  unscoped: {pf} process faults, {pc} system allocations, {pms:.2} ms per run (median)"
    );
    println!(
        "  scoped:   {sf} process faults, {sc} system allocations, {sms:.2} ms per run (median)"
    );
    println!("  scoped / unscoped time: {:.2}x", sms / pms);
    let s = arena.stats();
    println!(
        "  arena: {:.1} MiB held, {} cold allocations in all",
        (s.live_bytes + s.retained_bytes) as f64 / (1 << 20) as f64,
        s.cold_allocations
    );
}
