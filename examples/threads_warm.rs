//! Repeated runs of threads sharing one arena: how many allocations of
//! each run after the first still go cold, and how many bytes the arena
//! holds after each run.
//!
//! Each of `THREADS` threads runs the same request list every run (a
//! sliding window of 64 live buffers through allocator-api2, writing each
//! buffer's first and last byte), but the threads' interleaving differs
//! from run to run, so the most buffers of one class live at once does
//! too. On one thread every run after the first is warm; with several, a
//! class that finds itself short in a later run takes new memory.
//!
//! `cargo run --release --example threads_warm [THREADS] [RUNS] [MIX]`
//! (with `WARMARENA_RUN_OWNERSHIP=1` or `0` to choose the small path),
//! MIX `mixed` (90 % from 64 B to 1 KiB, 9 % to 64 KiB, 1 % to 1 MiB, as
//! `benches/threads.rs`), `large` (64 KiB to 1 MiB only) or `moving`.
//!
//! `moving`: a pool whose tasks move between its workers. There are as
//! many tasks as threads, each streaming 3000 small buffers of its own
//! 96-byte band of sizes (allocated, each written, then freed in
//! order: a kernel's temporaries), and at each run every task moves on to
//! the next worker, so the buffers a task needs were last freed on
//! another thread. Each task ends with a run boundary (`begin_run`), as a
//! pool's runs do (`ArenaRun::clear`).

use allocator_api2::alloc::{Allocator, Layout};
use std::ptr::NonNull;
use std::sync::{Arc, Barrier};
use warmarena::{ArenaConfig, ExecutionArena};

/// Live buffers per thread.
const LIVE: usize = 64;
/// Requests per thread per run.
const REQUESTS: usize = 2000;

fn sizes(seed: u64, large_only: bool) -> Vec<usize> {
    let mut x = seed | 1;
    (0..REQUESTS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = (x >> 11) as usize;
            let pick = if large_only { 99 } else { r % 100 };
            match pick {
                0..=89 => 64 + r / 100 % 960,
                90..=98 => 1024 + r / 100 % (63 << 10),
                _ => (64 << 10) + r / 100 % (960 << 10),
            }
        })
        .collect()
}

/// Buffers a `moving` task streams per run.
const STREAK: usize = 3000;

/// The sizes task `task` streams in `moving` mode: its own band.
fn band(task: usize) -> Vec<usize> {
    let mut x = task as u64 * 7919 + 17;
    (0..STREAK)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            32 + task * 96 + (x >> 11) as usize % 96
        })
        .collect()
}

/// One run of a `moving` task on `a`: every buffer allocated and written,
/// then freed in order.
fn stream(a: &ExecutionArena, sizes: &[usize]) {
    let mut v = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let l = Layout::from_size_align(size, 16).unwrap();
        let p = Allocator::allocate(a, l).unwrap().cast::<u8>();
        // SAFETY: `p` holds `size` bytes.
        unsafe { p.as_ptr().write_volatile(1) };
        v.push((p, l));
    }
    for (p, l) in v {
        // SAFETY: allocated by `a` with layout `l`, freed once.
        unsafe { a.deallocate(p, l) };
    }
}

/// One run of one thread on `a`.
fn run(a: &ExecutionArena, sizes: &[usize], r: usize) {
    let mut slots: Vec<Option<(NonNull<u8>, Layout)>> = vec![None; LIVE];
    for (k, &size) in sizes.iter().enumerate() {
        if let Some((p, l)) = slots[k % LIVE].take() {
            // SAFETY: allocated by `a` with layout `l`, freed once.
            unsafe { a.deallocate(p, l) };
        }
        let l = Layout::from_size_align(size, 16).unwrap();
        let p = Allocator::allocate(a, l).unwrap().cast::<u8>();
        // SAFETY: `p` holds `size` bytes.
        unsafe {
            p.as_ptr().write_volatile(1);
            p.as_ptr().add(size - 1).write_volatile(2);
        }
        slots[k % LIVE] = Some((p, l));
        // Shift the interleaving from run to run.
        if (k + r) % 97 == 0 {
            std::thread::yield_now();
        }
    }
    for (p, l) in slots.into_iter().flatten() {
        // SAFETY: as above.
        unsafe { a.deallocate(p, l) };
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(12);
    let mix = args.next().unwrap_or_default();
    let (large_only, moving) = (mix == "large", mix == "moving");
    let bands: Arc<Vec<Vec<usize>>> = Arc::new((0..threads).map(band).collect());
    let config = match std::env::var("WARMARENA_RUN_OWNERSHIP").as_deref() {
        Ok("1") => ArenaConfig::default().run_ownership(true),
        Ok("0") => ArenaConfig::default().run_ownership(false),
        _ => ArenaConfig::default(),
    };
    let arena = ExecutionArena::with_config(config);
    let bar = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (a, bar, bands) = (arena.clone(), Arc::clone(&bar), Arc::clone(&bands));
            std::thread::spawn(move || {
                let s = sizes(t as u64 * 7919 + 1, large_only);
                for r in 0..runs {
                    bar.wait();
                    if moving {
                        stream(&a, &bands[(t + r) % threads]);
                        // The task's run ended on this worker (as a
                        // session's `ArenaRun::clear` says it): what it
                        // freed is the arena's for the next worker.
                        a.begin_run();
                    } else {
                        run(&a, &s, r);
                    }
                    bar.wait();
                }
            })
        })
        .collect();
    let each = if moving { STREAK } else { REQUESTS };
    println!("{threads} threads, {runs} runs of {each} requests each");
    println!("| run | cold allocations | maps | held after (MiB) | live peak (MiB) |");
    println!("|---:|---:|---:|---:|---:|");
    let (mut cold, mut maps, mut later) = (0, 0, 0);
    for r in 0..runs {
        bar.wait();
        bar.wait();
        let s = arena.stats();
        let held = (s.live_bytes + s.retained_bytes) as f64 / (1 << 20) as f64;
        let c = s.cold_allocations - cold;
        let peak = s.peak_live_bytes as f64 / (1 << 20) as f64;
        println!(
            "| {r} | {c} | {} | {held:.1} | {peak:.1} |",
            s.os.maps - maps
        );
        if r > 0 {
            later += c;
        }
        (cold, maps) = (s.cold_allocations, s.os.maps);
    }
    println!("cold allocations after the first run: {later}");
    for w in workers {
        w.join().unwrap();
    }
}
