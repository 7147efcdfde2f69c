//! Trace replays through `allocator_api2`, warmarena against mimalloc in one
//! process: per replay, the median warm run time as a ratio to mimalloc's,
//! the warm faults, and RSS growth over the replay as a ratio to the live
//! peak and to mimalloc's, and the share of that growth backed by
//! transparent huge pages (`AnonHugePages`, "THP").
//!
//! `cargo bench --bench replay` (traces from `$WARMARENA_DATA/planner`,
//! default `../shared/data/planner`; `WARMARENA_REPLAY_MAX_PEAK` bytes
//! bounds the live peak of a replay, default 3 GiB; `WARMARENA_REPLAY_ONLY`
//! keeps the replays whose name contains it). Each backend does 1 cold run
//! then `RUNS` warm runs, every byte written, alignment 64; the arena is
//! dropped (and mimalloc collected) before the next backend starts. The
//! `own` columns replay through an I/O arena, whose buffers of 64 KiB and
//! more keep the own-class policy execution arenas had before the
//! execution heap: the before and after of one binary.
//!
//! The time ratios (`wa/mi`, `own/mi`) come from a second pass
//! ([`interleaved`]) in which the three back ends, fresh and alive together,
//! take turns run by run, each turn an untimed run and then the timed one:
//! the median of the per-round ratios. On a shared machine two blocks of
//! runs seconds apart can differ by more than the 3 % the target allows;
//! `blk wa/mi` is the ratio of the first pass's block medians, for
//! comparison.

#[path = "../tests/common/replay.rs"]
mod replay;

use replay::{
    anon_huge_bytes, load_traces, planner_data, rss_bytes, Api2, Backend, Global, Replay,
};
use std::time::Instant;
use warmarena::faults::FaultCounter;
use warmarena::{ExecutionArena, IoArena};

const RUNS: usize = 8;

struct Outcome {
    warm_ms: f64,
    warm_faults: u64,
    rss: usize,
    /// Growth of huge-page-backed memory over the replay.
    huge: usize,
}

fn drive<B: Backend>(b: &B, shapes: &[&Replay], align: usize) -> Outcome {
    let n = shapes.iter().map(|r| r.sizes.len()).max().unwrap_or(0);
    let mut slots = vec![core::ptr::null_mut(); n];
    let rss0 = rss_bytes();
    let huge0 = anon_huge_bytes();
    let mut counter = FaultCounter::new();
    for r in shapes {
        assert!(r.run(b, align, 0, &mut slots));
    }
    let mut times = Vec::new();
    let mut faults = 0;
    for run in 1..=RUNS {
        counter.reset();
        let t = Instant::now();
        for r in shapes {
            assert!(r.run(b, align, run as u8, &mut slots));
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
        faults = faults.max(counter.read().minor);
    }
    Outcome {
        warm_ms: median(times),
        warm_faults: faults,
        rss: rss_bytes().saturating_sub(rss0),
        huge: anon_huge_bytes().saturating_sub(huge0),
    }
}

/// Warm-run milliseconds of each back end in `backends`, taken in turns:
/// every back end does its cold run, then in each of `RUNS` rounds each
/// back end does one untimed run (what the others did meanwhile, a
/// purge after idle time, is not timed) and one timed run.
fn interleaved(backends: &[&dyn Backend], shapes: &[&Replay], align: usize) -> Vec<Vec<f64>> {
    let n = shapes.iter().map(|r| r.sizes.len()).max().unwrap_or(0);
    let mut slots: Vec<Vec<*mut u8>> = backends
        .iter()
        .map(|_| vec![core::ptr::null_mut(); n])
        .collect();
    for (b, s) in backends.iter().zip(&mut slots) {
        for r in shapes {
            assert!(r.run(*b, align, 0, s));
        }
    }
    let mut times = vec![Vec::with_capacity(RUNS); backends.len()];
    for run in 1..=RUNS {
        for ((b, s), t) in backends.iter().zip(&mut slots).zip(&mut times) {
            for r in shapes {
                assert!(r.run(*b, align, (2 * run) as u8, s));
            }
            let t0 = Instant::now();
            for r in shapes {
                assert!(r.run(*b, align, (2 * run + 1) as u8, s));
            }
            t.push(t0.elapsed().as_secs_f64() * 1e3);
        }
    }
    times
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The median over rounds of `a[r] / b[r]`.
fn paired_ratio(a: &[f64], b: &[f64]) -> f64 {
    median(a.iter().zip(b).map(|(x, y)| x / y).collect())
}

fn mi_collect() {
    // SAFETY: mi_collect only returns mimalloc's free memory to the OS.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

fn main() {
    let Some(dir) = planner_data() else { return };
    let max_peak: usize = std::env::var("WARMARENA_REPLAY_MAX_PEAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3 << 30);
    let only = std::env::var("WARMARENA_REPLAY_ONLY").unwrap_or_default();
    let mut sets: Vec<Vec<Replay>> = Vec::new();
    for (name, bufs) in load_traces(&dir, &["somas", "iopddl", "minimalloc", "tvm"]) {
        if name.contains("S_1") || name.contains("example") {
            continue;
        }
        sets.push(vec![Replay::new(&name, &bufs, 1, 0)]);
        // Held-out shapes: sizes ×8 (a larger batch), and two shapes
        // (×1 and ×5/2, perturbed) alternating run by run.
        let x8 = Replay::family(&name, &bufs, 8, 1, 0, 0);
        sets.push(vec![Replay::new(&format!("{name} x8"), &x8, 1, 0)]);
        let b = Replay::family(&name, &bufs, 5, 2, 5, 20);
        sets.push(vec![
            Replay::new(&name, &bufs, 1, 0),
            Replay::new(&format!("{name} alt x5/2"), &b, 1, 3),
        ]);
    }
    println!(
        "{:<44} {:>9} {:>9} {:>8} {:>7} {:>9} {:>9} {:>8} {:>7} {:>7} {:>9} {:>8} {:>8} {:>9}",
        "replay (align 64)",
        "peak MiB",
        "wa ms",
        "wa/mi",
        "wa flt",
        "wa RSS/pk",
        "mi RSS/pk",
        "RSS wa/mi",
        "wa THP",
        "mi THP",
        "own RSS/pk",
        "own flt",
        "own/mi",
        "blk wa/mi"
    );
    for set in &sets {
        let name = set
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(" + ");
        if !only.is_empty() && !name.contains(&only) {
            continue;
        }
        let peak = set.iter().map(|r| r.live_peak).max().unwrap_or(1).max(1);
        if peak > max_peak {
            println!("{name:<44} skipped: live peak {} MiB", peak >> 20);
            continue;
        }
        let refs: Vec<&Replay> = set.iter().collect();
        mi_collect();
        let mi = drive(&Global(mimalloc::MiMalloc), &refs, 64);
        mi_collect();
        let wa = {
            let arena = ExecutionArena::new();
            drive(&Api2(&arena), &refs, 64)
        };
        let own = {
            let arena = IoArena::new();
            drive(&Api2(&arena), &refs, 64)
        };
        mi_collect();
        let t = {
            let exec = ExecutionArena::new();
            let io = IoArena::new();
            let global = Global(mimalloc::MiMalloc);
            let (wa2, own2) = (Api2(&exec), Api2(&io));
            interleaved(&[&global, &wa2, &own2], &refs, 64)
        };
        mi_collect();
        let pk = peak as f64;
        println!(
            "{:<44} {:>9.1} {:>9.3} {:>8.3} {:>7} {:>9.2} {:>9.2} {:>8.2} {:>7.2} {:>7.2} {:>9.2} {:>8} {:>8.3} {:>9.3}",
            name,
            pk / (1 << 20) as f64,
            median(t[1].clone()),
            paired_ratio(&t[1], &t[0]),
            wa.warm_faults,
            wa.rss as f64 / pk,
            mi.rss as f64 / pk,
            wa.rss as f64 / mi.rss.max(1) as f64,
            wa.huge as f64 / wa.rss.max(1) as f64,
            mi.huge as f64 / mi.rss.max(1) as f64,
            own.rss as f64 / pk,
            own.warm_faults,
            paired_ratio(&t[2], &t[0]),
            wa.warm_ms / mi.warm_ms
        );
    }
}
